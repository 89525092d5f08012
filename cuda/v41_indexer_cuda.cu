/* The V4.1 indexer and its candidate pool on the GPU (v41_indexer_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c v41_indexer_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: v41_indexer_cuda.cuh (which includes dsa_cuda.cuh), topk_cuda.cuh
 *        (through kvl_topk_cuda). */
#include "v41_indexer_cuda.cuh"

#include "block_cuda.h"
#include "v41_indexer_cuda.h"
#include "linalg_cuda.h"
#include "norm_cuda.h"
#include "rope_cuda.h"
#include "topk_cuda.h"

extern "C" {
#include "block.h"
#include "status.h"
}

#define POOL_THREADS 256

namespace {

int scores(float *I, const v41_indexer_config *c, const float *q_idx, const float *w_idx, const float *keys, size_t S,
           size_t N, size_t start, size_t M, const char *fn)
{
    const int rc = v41_indexer_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    const kvl_index_shape sh{1, S, N, c->n_heads, c->head_dim, start, M};
    const kvl_index_keys k{reinterpret_cast<const uint8_t *>(keys), c->head_dim * sizeof(float)};
    return kvl_index_scores_cuda<kvl_rows_f32>(I, q_idx, w_idx, sh, k, fn);
}

dim3 grid_of(size_t threads) { return dim3(static_cast<unsigned>(kvl_div_up(threads, POOL_THREADS))); }

} /* namespace */

int v41_index_keys_cuda(float *keys, const v41_indexer_config *c, const float *w_ik, const float *ik_norm,
                         const float *L, size_t n, size_t first)
{
    const int rc = v41_indexer_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", __func__, kvl_error());
    if (n == 0) return KVL_OK;
    if (!keys || !w_ik || !ik_norm || !L) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    const size_t DI = c->head_dim;
    KVL_TRY(kvl_matmul_abt_f32_cuda(keys, L, w_ik, n, DI, c->width));
    KVL_TRY(kvl_rmsnorm_f32_cuda(keys, keys, ik_norm, n, DI, DI, c->norm_eps));
    return kvl_rope_rotate_heads_interleaved_cuda(keys, n, DI, DI - c->rope.Dr, 1, 0, &c->rope,
                                                  static_cast<int64_t>(first * c->ratio) + c->rope_offset, c->ratio);
}

int v41_index_round_mxfp4_cuda(float *v, size_t n, size_t DI, kvl_workspace *work)
{
    if (DI % 32) return kvl_fail(KVL_EINVAL, "%s: index_head_dim %zu is not a multiple of 32", __func__, DI);
    if (n == 0) return KVL_OK;
    if (!v || !work) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    if (n > SIZE_MAX / DI) return kvl_fail(KVL_EINVAL, "%s: %zu rows of %zu overflow", __func__, n, DI);
    const size_t len = n * DI;
    KVL_TRY(kvl_workspace_reserve(work, len / 2 + len / 32));
    uint8_t *codes = static_cast<uint8_t *>(work->p), *scales = codes + len / 2;
    int err = kvf_quant_mxfp4_rceil_cuda(codes, scales, v, len);
    if (err == KVF_OK) err = kvf_dequant_mxfp4_cuda(v, codes, scales, len);
    if (err < 0) return err;
    if (err != KVF_OK) return kvl_fail(KVL_EINVAL, "%s: %s", __func__, kvf_strerror(err));
    return KVL_OK;
}

int v41_index_scores_all_cuda(float *I, const v41_indexer_config *c, const float *q_idx, const float *w_idx,
                               const float *keys, size_t S, size_t N, size_t start)
{
    return scores(I, c, q_idx, w_idx, keys, S, N, start, c ? c->ratio : 1, __func__);
}

int v41_index_scores_pool_cuda(float *I, const v41_indexer_config *c, const float *q_idx, const float *w_idx,
                                const float *keys, const uint8_t *pool, size_t S, size_t N, kvl_workspace *work)
{
    const int rc = v41_indexer_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", __func__, kvl_error());
    if (S == 0 || N == 0) return KVL_OK;
    if (!I || !q_idx || !w_idx || !keys || !pool || !work) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    const kvl_pool_list_shape p{S, N, kvl_div_up(N, KVL_POOL_CHUNK)};
    const kvl_pool_scores_shape sh{S, N, c->n_heads, c->head_dim};
    const size_t smem = kvl_index_smem_floats(sh.HI, sh.DI) * sizeof(float);
    if (N > INT32_MAX || S > 65535 || smem > KVL_SMEM_OPTIN)
        return kvl_fail(KVL_EINVAL, "%s: %zu index heads of %zu channels, %zu entries, %zu queries are more than the "
                        "kernels take", __func__, sh.HI, sh.DI, N, S);
    KVL_TRY(kvl_workspace_reserve(work, S * (N + p.C + 1) * sizeof(int32_t)));
    int32_t *list = static_cast<int32_t *>(work->p);
    unsigned *n_in = reinterpret_cast<unsigned *>(list + S * N), *n_pool = n_in + S * p.C;
    const dim3 chunks(static_cast<unsigned>(p.C), static_cast<unsigned>(S));
    CUDA_CHECK(KVL_LAUNCH(kvl_pool_count_kernel, chunks, POOL_THREADS, 0, n_in, pool, p));
    CUDA_CHECK(KVL_LAUNCH(kvl_pool_list_kernel, chunks, POOL_THREADS, 0, list, n_pool, I, pool, n_in, p));
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kvl_pool_scores_kernel<kvl_rows_f32>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    const kvl_index_keys k{reinterpret_cast<const uint8_t *>(keys), sh.DI * sizeof(float)};
    const dim3 splits(static_cast<unsigned>(kvl_div_up(N, KVL_IDX_SPLIT)), static_cast<unsigned>(S));
    CUDA_CHECK(KVL_LAUNCH(kvl_pool_scores_kernel<kvl_rows_f32>, splits, KVL_IDX_THREADS, smem, I, q_idx, w_idx, list,
                          n_pool, sh, k));
    return KVL_OK;
}

int v41_candidate_pool_cuda(uint8_t *pool, const float *I, size_t S, size_t N, size_t start, size_t M, size_t block,
                             size_t n_blocks, kvl_workspace *work)
{
    if (M == 0 || block == 0 || n_blocks == 0)
        return kvl_fail(KVL_EINVAL, "%s: ratio, block size and block count must be positive", __func__);
    if (S == 0 || N == 0) return KVL_OK;
    if (!pool || !I || !work) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    const kvl_pool_shape_v41 p{S, N, start, M, block, N / block + 1, n_blocks};
    if (kvl_div_up(S * (p.NB > N ? p.NB : N), POOL_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "%s: %zu queries over %zu entries are more than one launch takes", __func__, S, N);
    KVL_TRY(kvl_workspace_reserve(work, S * (p.NB * sizeof(float) + n_blocks * sizeof(int32_t))));
    float *bs = static_cast<float *>(work->p);
    int32_t *pick = reinterpret_cast<int32_t *>(bs + S * p.NB);
    CUDA_CHECK(KVL_LAUNCH(kvl_block_scores_kernel, grid_of(S * p.NB), POOL_THREADS, 0, bs, I, p));
    KVL_TRY(kvl_topk_cuda(pick, bs, S, p.NB, n_blocks));
    CUDA_CHECK(KVL_LAUNCH(kvl_pool_mark_kernel, grid_of(S * N), POOL_THREADS, 0, pool, pick, p));
    return KVL_OK;
}
