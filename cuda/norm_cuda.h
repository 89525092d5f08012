/* RMSNorm on the GPU: the twin of ref/core/norm.h's kvl_rmsnorm_f32 on rows that may be slices of wider
 * ones (kernel in norm_cuda.cuh). Returns KVL_OK, KVL_EINVAL (a grid too large) or KVL_ECUDA. */
#ifndef KVL_NORM_CUDA_H
#define KVL_NORM_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* y[T][n] = RMSNorm(x[T][n]) with weight g[n] (NULL: unweighted); rows `stride` floats apart in both
 * (stride = n is the ref's dense form); y may be x. Accumulates and forms each output in double, as
 * the ref does. */
int kvl_rmsnorm_f32_cuda(float *y, const float *x, const float *g, size_t T, size_t n, size_t stride, double eps);

#ifdef __cplusplus
}
#endif

#endif
