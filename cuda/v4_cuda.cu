/* DeepSeek-V4 attention on the GPU (v4_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c v4_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: v4_cuda.cuh, dsa_cuda.cuh, attend_cuda.cuh. */
#include "v4_cuda.cuh"

#include "linalg_cuda.h"
#include "mha_cuda.h"
#include "rope_cuda.h"
#include "topk_cuda.h"
#include "v4_cuda.h"
#include "status.h"

size_t v4_cuda_row_bytes(v4_cuda_store s, size_t Dh)
{
    return s == V4_CUDA_MAIN ? kvf_row_bytes(KVF_ROW_V4_MAIN) : Dh * sizeof(float);
}

namespace {

int check_attend(const v4_config *c, const void *entries, size_t N, const int32_t *sel, size_t S, size_t start,
                 size_t win_first, v4_cuda_store store)
{
    int rc = v4_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "v4_attend_cuda: %s", kvl_error());
    if (store == V4_CUDA_MAIN && (c->head_dim != KVF_V4_NOPE + KVF_V4_ROPE || c->rope.Dr != KVF_V4_ROPE))
        return kvl_fail(KVL_EINVAL, "v4_attend_cuda: the 584-byte row holds Dh %d with Dr %d; the config has %zu, %zu",
                        KVF_V4_NOPE + KVF_V4_ROPE, KVF_V4_ROPE, c->head_dim, c->rope.Dr);
    if (store != V4_CUDA_F32 && store != V4_CUDA_MAIN)
        return kvl_fail(KVL_EINVAL, "v4_attend_cuda: unknown store %d", static_cast<int>(store));
    if (win_first > start)
        return kvl_fail(KVL_EINVAL, "v4_attend_cuda: window rows start at %zu, after the chunk (%zu)", win_first,
                        start);
    if (c->kind == KVL_LAYER_HCA && (start + S) / c->compressor.ratio > N)
        return kvl_fail(KVL_EINVAL, "v4_attend_cuda: %zu entries given, the chunk sees %zu", N,
                        (start + S) / c->compressor.ratio);
    if (c->kind != KVL_LAYER_WINDOW && N && !entries) return kvl_fail(KVL_EINVAL, "v4_attend_cuda: NULL entries");
    if (c->kind == KVL_LAYER_CSA && !sel) return kvl_fail(KVL_EINVAL, "v4_attend_cuda: a CSA layer needs its picks");
    return KVL_OK;
}

/* The most keys any query of the chunk reads: its window and, by kind, every entry it sees or its picks */
size_t max_keys(const v4_config *c, size_t S, size_t start)
{
    if (c->kind == KVL_LAYER_CSA) return c->window + c->indexer.topk;
    if (c->kind == KVL_LAYER_HCA) return c->window + (start + S) / c->compressor.ratio;
    return c->window;
}

} /* namespace */

int v4_attend_cuda(float *o, const v4_config *c, const float *sinks, const float *q, const void *win, size_t win_first,
                   const void *entries, size_t N, const int32_t *sel, size_t S, size_t start, v4_cuda_store store,
                   kvl_workspace *work)
{
    KVL_TRY(check_attend(c, entries, N, sel, S, start, win_first, store));
    if (S == 0) return KVL_OK;
    if (!o || !q || !win || !sinks || !work) return kvl_fail(KVL_EINVAL, "v4_attend_cuda: NULL array");
    const size_t H = c->n_heads, Dh = c->head_dim, K = c->kind == KVL_LAYER_CSA ? c->indexer.topk : 0;
    const size_t nk = max_keys(c, S, start), split = kvl_decode_split(0, nk, S * H);
    const kvl_attend_shape sh{S, H, H, Dh, Dh, 1, 0, 0, nk, split, kvl_div_up(nk, split), 0,
                              static_cast<float>(1.0 / sqrt(static_cast<double>(Dh)))};
    KVL_TRY(kvl_workspace_reserve(work, (kvl_attend_work_floats(sh) + 1) * sizeof(float)));
    float *part = static_cast<float *>(work->p);
    if (K)
        KVL_TRY(kvl_selection_check_cuda(sel, S * K, N,
                                         reinterpret_cast<unsigned *>(part + kvl_attend_work_floats(sh)), "v4_attend_cuda"));
    const kvl_v4_keys keys{static_cast<const uint8_t *>(win), static_cast<const uint8_t *>(entries),
                           v4_cuda_row_bytes(store, Dh), win_first, start, c->window,
                           c->kind == KVL_LAYER_WINDOW ? 1 : c->compressor.ratio, sel, K, c->kind};
    KVL_TRY(store == V4_CUDA_MAIN ? kvl_gather_attend_cuda<kvl_rows_v4_main>(o, q, sh, keys, sinks, part)
                                  : kvl_gather_attend_cuda<kvl_rows_f32>(o, q, sh, keys, sinks, part));
    /* ō: the trailing Dr channels of every head rotated back at the query's rotary position */
    for (size_t i = 0; i < S; i++)
        KVL_TRY(kvl_rope_rotate_heads_interleaved_cuda(o + i * H * Dh, 1, H * Dh, Dh - c->rope.Dr, H, Dh, &c->rope,
                                                       -(static_cast<int64_t>(start + i) + c->rope_offset), 0));
    return KVL_OK;
}

int v4_output_cuda(float *out, const v4_config *c, const float *w_oa, const float *w_ob, const float *o, size_t S,
                   kvl_workspace *work)
{
    int rc = v4_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "v4_output_cuda: %s", kvl_error());
    if (S == 0) return KVL_OK;
    if (!out || !w_oa || !w_ob || !o || !work) return kvl_fail(KVL_EINVAL, "v4_output_cuda: NULL array");
    const size_t H = c->n_heads, Dh = c->head_dim, G = c->o_groups, Do = c->o_lora_rank, gw = H / G * Dh;
    if (S > INT32_MAX || H * Dh > INT32_MAX || G * Do > INT32_MAX || Do * gw > INT32_MAX)
        return kvl_fail(KVL_EINVAL, "v4_output_cuda: %zu tokens of %zu heads are more than one cuBLAS call takes", S,
                        H);
    KVL_TRY(kvl_workspace_reserve(work, S * G * Do * sizeof(float)));
    float *u = static_cast<float *>(work->p);
    /* column-major: u_r^T [Do][S] (ld G·Do, r·Do apart) = (W_OA^r as [gw][Do])^T · (o's group r as [gw][S],
     * ld H·Dh) */
    const float one = 1.0f, zero = 0.0f;
    cublasHandle_t h;
    KVL_TRY(kvl_cublas_handle(&h));
    CUBLAS_CHECK(cublasSgemmStridedBatched(
        h, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(Do), static_cast<int>(S), static_cast<int>(gw), &one, w_oa,
        static_cast<int>(gw), static_cast<long long>(Do * gw), o, static_cast<int>(H * Dh), static_cast<long long>(gw),
        &zero, u, static_cast<int>(G * Do), static_cast<long long>(Do), static_cast<int>(G)));
    return kvl_matmul_abt_f32_cuda(out, u, w_ob, S, c->d, G * Do);
}

namespace {

template <typename R>
int index_scores(float *I, const v4_indexer_config *c, const float *q_idx, const float *w_idx, kvl_index_keys keys,
                 size_t S, size_t N, size_t start, const char *fn)
{
    int rc = v4_indexer_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    const kvl_index_shape sh{1, S, N, c->n_heads, c->head_dim, start, c->compressor.ratio};
    return kvl_index_scores_cuda<R>(I, q_idx, w_idx, sh, keys, fn);
}

} /* namespace */

int v4_index_scores_cuda(float *I, const v4_indexer_config *c, const float *q_idx, const float *w_idx,
                         const float *keys, size_t S, size_t N, size_t start)
{
    const kvl_index_keys k{reinterpret_cast<const uint8_t *>(keys), c ? c->head_dim * sizeof(float) : 0};
    return index_scores<kvl_rows_f32>(I, c, q_idx, w_idx, k, S, N, start, __func__);
}

int v4_index_scores_fp4_cuda(float *I, const v4_indexer_config *c, const float *q_idx, const float *w_idx,
                             const uint8_t *key_rows, size_t S, size_t N, size_t start)
{
    if (c && c->head_dim != KVF_INDEX_DIM)
        return kvl_fail(KVL_EINVAL, "%s: the 68-byte index row holds DI %d, the config has %zu", __func__,
                        KVF_INDEX_DIM, c->head_dim);
    const kvl_index_keys k{key_rows, kvf_row_bytes(KVF_ROW_V4_INDEX)};
    return index_scores<kvl_rows_v4_index>(I, c, q_idx, w_idx, k, S, N, start, __func__);
}
