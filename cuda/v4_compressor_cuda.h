/* The V4 token compressor on the GPU: the twins of ref/v4_compressor.h's two forms, on device arrays
 * (kernels in v4_compressor_cuda.cuh). The same skeleton serves the CSA layer (M 4, overlap 1), the HCA
 * layer (M 128, no overlap) and the CSA indexer's keys (width DI).
 *
 *   v4_compressor_forward_cuda  the whole sequence: both projections as two products, the position bias
 *                               added, every entry pooled by one kernel (a thread per entry and channel:
 *                               the softmax over the entry's (1+ov)·M slots and its weighted sum in double,
 *                               rounded once), RMSNorm and the rotation at each block's first position
 *   v4_compressor_push_cuda     the incremental state of a decode: each token's projections land in the
 *                               state's row ov·M + t mod M; a completed block is pooled by the same kernel
 *                               over the state and, with overlap, its rows carried to the first half
 * Weights are v4_compressor_weights whose fields point to device copies. Results match the ref to float
 * rounding of the projections (tests/cuda/test_cuda_v4.c). Functions return KVL_OK, KVL_EINVAL
 * (kvl_error() names the problem), KVL_ENOMEM or KVL_ECUDA. */
#ifndef KVL_V4_COMPRESSOR_CUDA_H
#define KVL_V4_COMPRESSOR_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "device.h"
#include "v4_compressor.h"

/* entries[⌊T/M⌋][c] for x[T][d] at positions 0 … T − 1, entry i rotated at iM + rope_offset; work holds
 * the projections. */
int v4_compressor_forward_cuda(float *entries, const v4_compressor_config *c, const v4_compressor_weights *w,
                               const float *x, size_t T, int64_t rope_offset, kvl_workspace *work);

typedef struct {
    size_t pos;         /* tokens seen */
    size_t rows, cols;  /* (1+ov)·M, (1+ov)·c */
    float *kv, *gate;   /* device [(1+ov)·M][(1+ov)·c]; gate −∞ where no token has landed */
    kvl_workspace work; /* the pushes' projections */
} v4_compressor_state_cuda;

int v4_compressor_state_init_cuda(v4_compressor_state_cuda *s, const v4_compressor_config *c);
void v4_compressor_state_free_cuda(v4_compressor_state_cuda *s);

/* Feed x[S][d] at positions pos … pos + S − 1; entries[n][c] receives the *n_new = ⌊(pos+S)/M⌋ − ⌊pos/M⌋
 * entries the chunk completes, as v4_compressor_push. */
int v4_compressor_push_cuda(float *entries, size_t *n_new, const v4_compressor_config *c,
                            const v4_compressor_weights *w, v4_compressor_state_cuda *s, const float *x, size_t S,
                            int64_t rope_offset);

#ifdef __cplusplus
}
#endif

#endif
