/* DeepSeek sparse attention (V3.2) on the GPU: the twins of ref/dsa.h's lightning-indexer scores, in
 * both of its forms, and of its gather formulation of the sparse attention, on device arrays for B
 * sequences at once (kernels in dsa_cuda.cuh; the selection between them is kvl_topk_cuda,
 * cuda/topk_cuda.h, the twin of kvl_topk).
 *
 *   dsa_index_scores_cuda      the f32 indexer: keys k_idx[B][N][DI] as float32
 *   dsa_index_scores_fp8_cuda  the deployed fp8 indexer: keys as V3.2's 132-byte index rows (the
 *                              rotated k^I in E4M3 with one power-of-two scale, formats/rows.h), decoded
 *                              inside the kernel; queries already in the fp8 indexer's view
 *                              (dsa_index_quantise)
 *   dsa_attend_gather_cuda     sparse MLA decode: each sequence's query attends, absorbed, to the latent
 *                              rows its selection names, read straight from the cache by index (float32,
 *                              bf16 or the 656-byte FP8 row, decoded inside the kernel). At DeepSeek's
 *                              widths (Dc 512, Dr 64) over bf16 or FP8 rows it runs on tensor cores
 *                              (kvl_sparse_mma_kernel: 64 heads share each gathered row, q̂ and the
 *                              softmax weights rounded to bf16, float sums); otherwise, and in
 *                              dsa_attend_gather_absorbed_float_cuda, on float cores
 * Scores match the ref to float rounding, and exactly on inputs whose sums are exact; selections are the
 * ref's whenever the scores are; the tensor-core attention is within the bf16 weights' bound of the
 * definition (tests/cuda/test_cuda_dsa.c).
 * Functions return KVL_OK, KVL_EINVAL (kvl_error() names the problem), KVL_ENOMEM or KVL_ECUDA. */
#ifndef KVL_DSA_CUDA_H
#define KVL_DSA_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "dsa.h"
#include "mla_cuda.h"

/* I[B][S][N] = Σ_j w_idx[b][i][j]·ReLU(q_idx[b][i][j]·k_s) for key positions s ≤ start + i, −INFINITY
 * past it: queries q_idx[B][S][HI][DI], w_idx[B][S][HI] at positions start … start + S − 1 of each
 * sequence, keys at 0 … N − 1 (dsa_index_scores for each sequence). */
int dsa_index_scores_cuda(float *I, const dsa_config *c, const float *q_idx, const float *w_idx, const float *k_idx,
                          size_t B, size_t S, size_t N, size_t start);
/* The same over keys k_rows[B][N][132] (KVF_ROW_V32_INDEX); DI must be 128. Up to 64 index heads (V3.2 has
 * 64) it runs on tensor cores (kvl_index_mma_kernel), the queries rounded to bf16: exact for the fp8
 * indexer's view, which this form takes. */
int dsa_index_scores_fp8_cuda(float *I, const dsa_config *c, const float *q_idx, const float *w_idx,
                              const uint8_t *k_rows, size_t B, size_t S, size_t N, size_t start);
/* The same on float cores for any head count: the readable twin the tensor-core kernel is tested against. */
int dsa_index_scores_fp8_float_cuda(float *I, const dsa_config *c, const float *q_idx, const float *w_idx,
                                    const uint8_t *k_rows, size_t B, size_t S, size_t N, size_t start);

/* o[B][H][Dv] for one query q[B][H][Dnope+Dr] (mla_query) per sequence over the rows sel[B][K] of that
 * sequence in the cache (−1 entries skipped; a query with none gets o = 0): dsa_attend_gather with S = 1
 * for each sequence. w holds the MLA weights on the device (mla_weights_to_cuda of dsa_weights.mla).
 * KVL_EINVAL for an entry outside −1 … len − 1 of the cache. */
int dsa_attend_gather_cuda(float *o, const dsa_config *c, const mla_weights *w, const float *q, const int32_t *sel,
                           mla_cache_cuda *cache);

/* Its attention alone: o_hat[B][H][Dc] from absorbed queries q_hat[B][H][Dc+Dr], on tensor cores where
 * dsa_attend_gather_cuda's is. */
int dsa_attend_gather_absorbed_cuda(float *o_hat, const dsa_config *c, const float *q_hat, const int32_t *sel,
                                    mla_cache_cuda *cache);
/* The same over a selection already checked (by a call of the above on it): no check, so no copy back to
 * the host and no wait for the device, as a decode step or a benchmark that checked once runs it. */
int dsa_attend_gather_absorbed_checked_cuda(float *o_hat, const dsa_config *c, const float *q_hat,
                                            const int32_t *sel, mla_cache_cuda *cache);
/* The same on float cores for every width and store: the readable twin the tensor-core kernel is tested
 * against. */
int dsa_attend_gather_absorbed_float_cuda(float *o_hat, const dsa_config *c, const float *q_hat, const int32_t *sel,
                                          mla_cache_cuda *cache);

#ifdef __cplusplus
}
#endif

#endif
