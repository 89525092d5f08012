/* The V4.1 indexer and its candidate pool on the GPU (csa2_indexer_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c csa2_indexer_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: csa2_indexer_cuda.cuh, dsa_cuda.cuh, topk_cuda.cuh (through
 *        kvl_topk_cuda). */
#include "csa2_indexer_cuda.cuh"
#include "dsa_cuda.cuh"

#include "csa2_indexer_cuda.h"
#include "topk_cuda.h"

#define TRY(...)                           \
    do {                                   \
        int rc_ = (__VA_ARGS__);           \
        if (rc_ != KVL_OK) return rc_;     \
    } while (0)

#define POOL_THREADS 256

namespace {

int scores(float *I, const csa2_indexer_config *c, const float *q_idx, const float *w_idx, const float *keys,
           const uint8_t *pool, size_t S, size_t N, size_t start, size_t M, const char *fn)
{
    const int rc = csa2_indexer_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    const kvl_index_shape sh{1, S, N, c->n_heads, c->head_dim, start, M};
    const kvl_index_keys k{reinterpret_cast<const uint8_t *>(keys), c->head_dim * sizeof(float), pool};
    return kvl_index_scores_cuda<kvl_rows_f32>(I, q_idx, w_idx, sh, k, fn);
}

dim3 grid_of(size_t threads) { return dim3(static_cast<unsigned>(kvl_div_up(threads, POOL_THREADS))); }

} /* namespace */

int csa2_index_scores_all_cuda(float *I, const csa2_indexer_config *c, const float *q_idx, const float *w_idx,
                               const float *keys, size_t S, size_t N, size_t start)
{
    return scores(I, c, q_idx, w_idx, keys, NULL, S, N, start, c ? c->ratio : 1, __func__);
}

int csa2_index_scores_pool_cuda(float *I, const csa2_indexer_config *c, const float *q_idx, const float *w_idx,
                                const float *keys, const uint8_t *pool, size_t S, size_t N)
{
    if (S && N && !pool) return kvl_fail(KVL_EINVAL, "%s: NULL pool", __func__);
    /* the pool holds visible entries only: every key counts as visible (position N − 1 + i, ratio 1) */
    return scores(I, c, q_idx, w_idx, keys, pool, S, N, N, 1, __func__);
}

int csa2_candidate_pool_cuda(uint8_t *pool, const float *I, size_t S, size_t N, size_t start, size_t M, size_t block,
                             size_t n_blocks, kvl_workspace *work)
{
    if (M == 0 || block == 0 || n_blocks == 0)
        return kvl_fail(KVL_EINVAL, "%s: ratio, block size and block count must be positive", __func__);
    if (S == 0 || N == 0) return KVL_OK;
    if (!pool || !I || !work) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    const kvl_pool_shape_v41 p{S, N, start, M, block, N / block + 1, n_blocks};
    if (kvl_div_up(S * (p.NB > N ? p.NB : N), POOL_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "%s: %zu queries over %zu entries are more than one launch takes", __func__, S, N);
    TRY(kvl_workspace_reserve(work, S * (p.NB * sizeof(float) + n_blocks * sizeof(int32_t))));
    float *bs = static_cast<float *>(work->p);
    int32_t *pick = reinterpret_cast<int32_t *>(bs + S * p.NB);
    CUDA_CHECK(KVL_LAUNCH(kvl_block_scores_kernel, grid_of(S * p.NB), POOL_THREADS, 0, bs, I, p));
    TRY(kvl_topk_cuda(pick, bs, S, p.NB, n_blocks));
    CUDA_CHECK(KVL_LAUNCH(kvl_pool_mark_kernel, grid_of(S * N), POOL_THREADS, 0, pool, pick, p));
    return KVL_OK;
}
