/* The V4.1 indexer and its hierarchical candidate pool on the GPU: the twins of ref/v41_indexer.h's
 * scores (every visible entry, or only the pool's) and of its candidate pool, on device arrays (kernels
 * in v41_indexer_cuda.cuh and dsa_cuda.cuh; the picks are kvl_topk_cuda's, cuda/topk_cuda.h).
 *
 *   v41_index_keys_cuda         a KV source's index keys: W_IK L as a product, RMSNorm with gain, the
 *                                trailing Dr channels of entry i rotated at iM + Δ
 *   v41_index_round_mxfp4_cuda  the deployed path's MXFP4 round trip of keys or queries (E8M0 per 32,
 *                                rounded up), by the block quantiser twins (block_cuda.h)
 *   v41_index_scores_all_cuda   a Full layer: every entry i < ⌊(t+1)/M⌋ scored (the lightning indexer's
 *                                kernel with M the source's ratio)
 *   v41_candidate_pool_cuda     block maxima over blocks of B entries (the newest block, maybe partial,
 *                                +∞), the top P blocks by kvl_topk_cuda, their entries marked
 *   v41_index_scores_pool_cuda  a Reindex layer after the candidate source: the pool compacted into a list
 *                                of its entries per query (ascending), then only the listed keys gathered and
 *                                scored, so the keys read and the products done grow with the pool (at most
 *                                P·B entries), not with N; the rest of I is −∞ (per entry, the pool's byte
 *                                read twice and one score written)
 * The scored-count the ref keeps (its per-query work) is not kept here. Scores match the ref to float
 * rounding (both sum heads in float32, in different orders), exactly on inputs whose sums are exact; the
 * pool is the ref's byte for byte (tests/cuda/test_cuda_v41.c; the pool's scores at thousands of entries in
 * tests/cuda/test_cuda_v41_pool.c). Functions return KVL_OK, KVL_EINVAL (kvl_error() names the
 * problem), KVL_ENOMEM or KVL_ECUDA. */
#ifndef KVL_CSA2_INDEXER_CUDA_H
#define KVL_CSA2_INDEXER_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "v41_indexer.h"
#include "device.h"

/* keys[n][DI] = RMSNorm(W_IK L[n][Dh]) with gain ik_norm, entry i (global index first + i) rotated at
 * (first + i)·M + Δ; w_ik [DI][Dh], ik_norm [DI] on the device. */
int v41_index_keys_cuda(float *keys, const v41_indexer_config *c, const float *w_ik, const float *ik_norm,
                         const float *L, size_t n, size_t first);

/* v[n][DI] ← MXFP4 round trip; work holds the codes and scales. KVL_EINVAL unless DI is a multiple of 32 and
 * v 16-byte aligned, or for a non-finite value (v unchanged). */
int v41_index_round_mxfp4_cuda(float *v, size_t n, size_t DI, kvl_workspace *work);

/* I[S][N] for queries q_idx[S][HI][DI], w_idx[S][HI] at positions start … over keys[N][DI]. */
int v41_index_scores_all_cuda(float *I, const v41_indexer_config *c, const float *q_idx, const float *w_idx,
                               const float *keys, size_t S, size_t N, size_t start);

/* I[S][N]: only entries with pool[s][i] ≠ 0 scored, the rest −∞; work holds the list (S·N entries at most)
 * and its counts. KVL_EINVAL for N past int32 or more than 65535 queries. */
int v41_index_scores_pool_cuda(float *I, const v41_indexer_config *c, const float *q_idx, const float *w_idx,
                                const float *keys, const uint8_t *pool, size_t S, size_t N, kvl_workspace *work);

/* pool[S][N] ∈ {0, 1} from the candidate source's scores I[S][N] for queries at start …, ratio M, blocks of
 * `block` entries, the top n_blocks of them; work holds the block scores and picks. */
int v41_candidate_pool_cuda(uint8_t *pool, const float *I, size_t S, size_t N, size_t start, size_t M, size_t block,
                             size_t n_blocks, kvl_workspace *work);

#ifdef __cplusplus
}
#endif

#endif
