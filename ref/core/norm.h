/* RMSNorm and LayerNorm over the last axis, batched over rows, computed in float32 as the DeepSeek inference
 * code does.
 *
 *   RMSNorm(v)   = g ⊙ v / sqrt(mean(v²) + eps)                   g = NULL: unweighted (no g)
 *   LayerNorm(v) = g ⊙ (v − mean v) / sqrt(var v + eps) + b       var is the biased (1/n) variance
 *
 * The _f32 versions read and write float but accumulate the mean, the mean square and the variance
 * in double and form each output in double before one rounding to float. The references compute
 * these in float32; in double the reduction's own error (about n·2^−53 relative) is far below one
 * float rounding for any row a model has, so the final store is the only error that matters.
 *
 * eps is the config's norm_eps (1e-6; 1e-20 for V4.1, which float32 still represents).
 * y may be the same array as x (in place); otherwise they must not overlap. n = 0 writes nothing.
 * Rows run in parallel under OpenMP once T·n is large enough to pay for the threads. */
#ifndef KVL_NORM_H
#define KVL_NORM_H

#include <stddef.h>

/* y[T][n] = RMSNorm(x[T][n]) with weight g[n], or unweighted when g is NULL */
void kvl_rmsnorm_f32(float *y, const float *x, const float *g, size_t T, size_t n, double eps);
void kvl_rmsnorm_f64(double *y, const double *x, const double *g, size_t T, size_t n, double eps);

/* y[T][n] = LayerNorm(x[T][n]) with weight g[n] and bias b[n] */
void kvl_layernorm_f32(float *y, const float *x, const float *g, const float *b, size_t T, size_t n,
                       double eps);
void kvl_layernorm_f64(double *y, const double *x, const double *g, const double *b, size_t T, size_t n,
                       double eps);

#endif
