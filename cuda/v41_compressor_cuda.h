/* The V4.1 CSA2 compressor on the GPU: the twins of ref/v41_compressor.h's two forms, on device arrays.
 * It has no kernel of its own: the projections are kvl_matmul_abt_f32_cuda's, the pooling V4's
 * kvl_compress_pool_kernel (compress_pool_cuda.cuh) with no overlap and no position bias, the norm
 * kvl_rmsnorm_f32_cuda's.
 *
 *   v41_compressor_forward_cuda  the whole sequence: W_C x (and W_Z x for M > 1) as products, every block
 *                                 pooled at once (the per-channel softmax over its M gate logits and the
 *                                 weighted sum in double, rounded once), then RMSNorm; for M = 1 the
 *                                 product is the entry before its norm
 *   v41_compressor_push_cuda     the incremental state of a decode: token t's projections land in the
 *                                 state's row t mod M; a completed block is pooled by the same kernel
 * L stays pre-rotary: the index keys are projected from it (v41_index_keys_cuda, v41_indexer_cuda.h),
 * then the main entry rotates it (v41_main_entry_cuda, v41_cuda.h). Weights are v41_compressor_weights
 * whose fields point to device copies. Results match the ref to float rounding of the projections
 * (tests/cuda/test_cuda_v41.c). Functions return KVL_OK, KVL_EINVAL (kvl_error() names the problem),
 * KVL_ENOMEM or KVL_ECUDA.
 *
 * Letters: T tokens, S chunk, d input width, c entry width (Dh), M ratio. */
#ifndef KVL_CSA2_COMPRESSOR_CUDA_H
#define KVL_CSA2_COMPRESSOR_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "v41_compressor.h"
#include "device.h"

/* L[⌊T/M⌋][c] for x[T][d] at positions 0 … T − 1; work holds the projections. */
int v41_compressor_forward_cuda(float *L, const v41_compressor_config *c, const v41_compressor_weights *w,
                                 const float *x, size_t T, kvl_workspace *work);

typedef struct {
    size_t pos;         /* tokens seen */
    size_t M, c;
    float *a, *z;       /* device [M][c]: W_C x and W_Z x of the unfinished block (z unused for M = 1) */
    kvl_workspace work; /* the pushes' projections */
} v41_compressor_state_cuda;

int v41_compressor_state_init_cuda(v41_compressor_state_cuda *s, const v41_compressor_config *c);
void v41_compressor_state_free_cuda(v41_compressor_state_cuda *s);

/* Feed x[S][d] at positions pos … pos + S − 1; L[n][c] receives the *n_new = ⌊(pos+S)/M⌋ − ⌊pos/M⌋ entries
 * the chunk completes, as v41_compressor_push. */
int v41_compressor_push_cuda(float *L, size_t *n_new, const v41_compressor_config *c,
                              const v41_compressor_weights *w, v41_compressor_state_cuda *s, const float *x,
                              size_t S);

#ifdef __cplusplus
}
#endif

#endif
