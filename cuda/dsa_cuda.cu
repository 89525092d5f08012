/* DeepSeek sparse attention on the GPU (dsa_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c dsa_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: dsa_cuda.cuh, attend_cuda.cuh. */
#include "dsa_cuda.cuh"

#include "dsa_cuda.h"
#include "topk_cuda.h"
#include "status.h"


namespace {

int check_config(const dsa_config *c, const char *fn)
{
    const int rc = dsa_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    return KVL_OK;
}

size_t row_width(const dsa_config *c) { return c->mla.kv_lora_rank + c->mla.qk_rope; }

template <typename R>
int index_scores(float *I, const dsa_config *c, const float *q_idx, const float *w_idx, kvl_index_keys keys, size_t B,
                 size_t S, size_t N, size_t start, const char *fn)
{
    KVL_TRY(check_config(c, fn));
    const kvl_index_shape sh{B, S, N, c->index_n_heads, c->index_head_dim, start, 1};
    return kvl_index_scores_cuda<R>(I, q_idx, w_idx, sh, keys, fn);
}

} /* namespace */

int dsa_index_scores_cuda(float *I, const dsa_config *c, const float *q_idx, const float *w_idx, const float *k_idx,
                          size_t B, size_t S, size_t N, size_t start)
{
    const kvl_index_keys keys{reinterpret_cast<const uint8_t *>(k_idx), c ? c->index_head_dim * sizeof(float) : 0};
    return index_scores<kvl_rows_f32>(I, c, q_idx, w_idx, keys, B, S, N, start, __func__);
}

namespace {

/* The fp8 indexer's scores, on tensor cores up to 64 heads unless `floats` asks for the float kernel */
int index_scores_fp8(float *I, const dsa_config *c, const float *q_idx, const float *w_idx, const uint8_t *k_rows,
                     size_t B, size_t S, size_t N, size_t start, bool floats, const char *fn)
{
    if (c && c->index_head_dim != KVF_INDEX_DIM)
        return kvl_fail(KVL_EINVAL, "%s: the 132-byte index row holds DI %d, the config has %zu", fn, KVF_INDEX_DIM,
                        c->index_head_dim);
    const kvl_index_keys keys{k_rows, kvf_row_bytes(KVF_ROW_V32_INDEX)};
    if (floats || !c || c->index_n_heads > KVL_IDXM_HEADS)
        return index_scores<kvl_rows_v32_index>(I, c, q_idx, w_idx, keys, B, S, N, start, fn);
    KVL_TRY(check_config(c, fn));
    const kvl_index_shape sh{B, S, N, c->index_n_heads, c->index_head_dim, start, 1};
    return kvl_index_mma_cuda(I, q_idx, w_idx, sh, keys, fn);
}

} /* namespace */

int dsa_index_scores_fp8_cuda(float *I, const dsa_config *c, const float *q_idx, const float *w_idx,
                              const uint8_t *k_rows, size_t B, size_t S, size_t N, size_t start)
{
    return index_scores_fp8(I, c, q_idx, w_idx, k_rows, B, S, N, start, false, __func__);
}

int dsa_index_scores_fp8_float_cuda(float *I, const dsa_config *c, const float *q_idx, const float *w_idx,
                                    const uint8_t *k_rows, size_t B, size_t S, size_t N, size_t start)
{
    return index_scores_fp8(I, c, q_idx, w_idx, k_rows, B, S, N, start, true, __func__);
}

namespace {

int check_cache(const dsa_config *c, const mla_cache_cuda *cache, const char *fn)
{
    KVL_TRY(check_config(c, fn));
    const kv_ring_cuda *r = &cache->ring;
    if (!r->rows || r->width != row_width(c))
        return kvl_fail(KVL_EINVAL, "%s: cache rows hold %zu values, the config's Dc+Dr is %zu", fn, r->width,
                        row_width(c));
    if (r->slots < r->len) return kvl_fail(KVL_EINVAL, "%s: the cache's ring has wrapped; DSA keeps every row", fn);
    return KVL_OK;
}

/* Whether the tensor-core kernel takes the cache's rows: DeepSeek's widths (Dc 512, Dr 64; every FP8 row has
 * them), stored as bf16 or as the 656-byte FP8 row */
bool on_tensor_cores(const dsa_config *c, const kv_ring_cuda *r)
{
    return r->store != KV_CUDA_F32 && c->mla.kv_lora_rank == KVL_SPARSE_DV && row_width(c) == KVL_SPARSE_DK;
}

/* The absorbed attention's shape over the K entries of each sequence's selection, split for the tensor-core
 * kernel (64 heads a block) or the float one (a head a block) */
kvl_attend_shape sparse_shape(const dsa_config *c, const kv_ring_cuda *r, size_t split, bool mma)
{
    const size_t K = c->index_topk, B = r->batch, H = c->mla.n_heads;
    split = mma ? kvl_sparse_split(split, K, B * kvl_div_up(H, KVL_SPARSE_HEADS)) : kvl_decode_split(split, K, B * H);
    return kvl_attend_shape{B, H, H, row_width(c), c->mla.kv_lora_rank, 1, 0, 0, K, split, kvl_div_up(K, split), 0,
                            static_cast<float>(c->mla.softmax_scale)};
}

/* Floats of workspace: the partials, then the check's flag */
size_t sparse_work_floats(const kvl_attend_shape &sh) { return kvl_attend_work_floats(sh) + 1; }

/* ô over the selected rows, read as the ring stores them, on tensor cores if `mma`, the selection checked
 * first unless `checked`; work holds sparse_work_floats */
int attend_selected(float *o_hat, const float *q_hat, const int32_t *sel, const kvl_attend_shape &sh,
                    const kv_ring_cuda *r, float *work, const char *fn, bool mma, bool checked)
{
    if (!checked)
        KVL_TRY(kvl_selection_check_cuda(sel, sh.B * sh.n_keys, r->len,
                                         reinterpret_cast<unsigned *>(work + kvl_attend_work_floats(sh)), fn));
    const kvl_attend_kv kv{static_cast<const uint8_t *>(r->rows), r->slots, r->row_bytes, r->len, NULL, 0, 0, 0, 0, 0,
                           0};
    const kvl_dsa_picks picks{kv, sel, sh.n_keys};
    switch (r->store) {
    case KV_CUDA_F32: return kvl_gather_attend_cuda<kvl_rows_f32>(o_hat, q_hat, sh, picks, NULL, work);
    case KV_CUDA_BF16:
        return mma ? kvl_sparse_mma_cuda<kvl_chunks_bf16>(o_hat, q_hat, sh, picks, work)
                   : kvl_gather_attend_cuda<kvl_rows_bf16>(o_hat, q_hat, sh, picks, NULL, work);
    case KV_CUDA_V32_MAIN:
        return mma ? kvl_sparse_mma_cuda<kvl_chunks_v32>(o_hat, q_hat, sh, picks, work)
                   : kvl_gather_attend_cuda<kvl_rows_v32>(o_hat, q_hat, sh, picks, NULL, work);
    }
    return kvl_fail(KVL_EINVAL, "%s: unknown cache store %d", fn, static_cast<int>(r->store));
}

/* The absorbed attention of the public entry points, in the cache's workspace: on tensor cores where they
 * take the rows, unless `floats` asks for the float kernel */
int absorbed(float *o_hat, const dsa_config *c, const float *q_hat, const int32_t *sel, mla_cache_cuda *cache,
             const char *fn, bool floats, bool checked)
{
    KVL_TRY(check_cache(c, cache, fn));
    const bool mma = !floats && on_tensor_cores(c, &cache->ring);
    const kvl_attend_shape sh = sparse_shape(c, &cache->ring, cache->split, mma);
    KVL_TRY(kvl_workspace_reserve(&cache->work, sparse_work_floats(sh) * sizeof(float)));
    return attend_selected(o_hat, q_hat, sel, sh, &cache->ring, static_cast<float *>(cache->work.p), fn, mma, checked);
}

} /* namespace */

int dsa_attend_gather_absorbed_cuda(float *o_hat, const dsa_config *c, const float *q_hat, const int32_t *sel,
                                    mla_cache_cuda *cache)
{
    return absorbed(o_hat, c, q_hat, sel, cache, __func__, false, false);
}

int dsa_attend_gather_absorbed_checked_cuda(float *o_hat, const dsa_config *c, const float *q_hat,
                                            const int32_t *sel, mla_cache_cuda *cache)
{
    return absorbed(o_hat, c, q_hat, sel, cache, __func__, false, true);
}

int dsa_attend_gather_absorbed_float_cuda(float *o_hat, const dsa_config *c, const float *q_hat, const int32_t *sel,
                                          mla_cache_cuda *cache)
{
    return absorbed(o_hat, c, q_hat, sel, cache, __func__, true, false);
}

int dsa_attend_gather_cuda(float *o, const dsa_config *c, const mla_weights *w, const float *q, const int32_t *sel,
                           mla_cache_cuda *cache)
{
    KVL_TRY(check_cache(c, cache, __func__));
    const kv_ring_cuda *r = &cache->ring;
    const bool mma = on_tensor_cores(c, r);
    const kvl_attend_shape sh = sparse_shape(c, r, cache->split, mma);
    const size_t B = r->batch, H = c->mla.n_heads;
    const size_t work_floats = B * H * (row_width(c) + c->mla.kv_lora_rank) + sparse_work_floats(sh);
    KVL_TRY(kvl_workspace_reserve(&cache->work, work_floats * sizeof(float)));
    float *q_hat = static_cast<float *>(cache->work.p), *o_hat = q_hat + B * H * row_width(c);
    float *part = o_hat + B * H * c->mla.kv_lora_rank;
    KVL_TRY(mla_absorb_query_cuda(q_hat, q, &c->mla, w, B));
    KVL_TRY(attend_selected(o_hat, q_hat, sel, sh, r, part, __func__, mma, false));
    return mla_unabsorb_output_cuda(o, o_hat, &c->mla, w, B);
}
