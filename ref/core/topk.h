/* Top-k selection, shared by every indexer (V3.2's lightning indexer, V4's and V4.1's).
 *
 * The k largest scores of a row, larger first and the smaller position on ties (so CPU and CUDA agree exactly;
 * the order does not change the math), stored ascending as DeepSeek-V4.1-Flash inference/model.py stores them;
 * a row with fewer than k legal entries (a legal entry is neither −INFINITY nor NaN) pads with −1. */
#ifndef KVL_TOPK_H
#define KVL_TOPK_H

#include <stddef.h>
#include <stdint.h>

/* sel[S][K] = for each row of I[S][N] the positions of its min(K, #legal) largest entries, ascending,
 * then −1 up to K. KVL_EINVAL if N does not fit int32 or K = 0; KVL_ENOMEM. */
int kvl_topk(int32_t *sel, const float *I, size_t S, size_t N, size_t K);

#endif
