/* Top-k selection on the GPU: the twin of ref/core/topk.h's kvl_topk, the same positions in the same
 * order (kernel in topk_cuda.cuh). The k largest scores of each row, larger first and the smaller
 * position on ties, stored ascending; −INFINITY and NaN are never legal, and a row with fewer than k
 * legal entries pads with −1. Every indexer's selection (V3.2's lightning indexer, V4's, V4.1's) goes
 * through it. Returns KVL_OK, KVL_EINVAL (kvl_error() names the problem) or KVL_ECUDA. */
#ifndef KVL_TOPK_CUDA_H
#define KVL_TOPK_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sel[S][K] (device) for the rows of I[S][N] (device). KVL_EINVAL if N does not fit int32, K = 0 or K
 * does not fit one launch's counters (2^31). The rounds of kvl_topk_slices_cuda with slices of
 * kvl_topk_slice_keys(K); the lists between rounds live in a device buffer this module keeps. */
int kvl_topk_cuda(int32_t *sel, const float *I, size_t S, size_t N, size_t K);

/* The same selection in rounds: each cuts every row into slices of L keys, one block per slice keeping
 * the slice's best K, until one slice holds what is left. KVL_EINVAL as kvl_topk_cuda, or if L < 2K. */
int kvl_topk_slices_cuda(int32_t *sel, const float *I, size_t S, size_t N, size_t K, size_t L);

/* The slice kvl_topk_cuda uses for top-K: 4K keys (a round keeps a quarter), at least 8192. */
size_t kvl_topk_slice_keys(size_t K);

/* The same selection by the readable twin: one block per row, the whole row in each pass. */
int kvl_topk_simple_cuda(int32_t *sel, const float *I, size_t S, size_t N, size_t K);

/* KVL_EINVAL, naming fn, unless every entry of sel[n] (device) lies in −1 … len − 1: what an attention
 * over a selection checks first. flag is one device word of scratch. */
int kvl_selection_check_cuda(const int32_t *sel, size_t n, size_t len, unsigned *flag, const char *fn);

#ifdef __cplusplus
}
#endif

#endif
