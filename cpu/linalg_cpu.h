/* The CPU backend's products: ref/core/linalg.h's float products, split across the OpenMP threads. A
 * product big enough to share (KVL_SPLIT_MIN_MACS) splits C into blocks of rows (or of columns, when it
 * has few rows), one single-threaded BLAS call per thread (kvl_run_parts); a product with one row is
 * the matrix-vector product, split by blocks of W's rows. A split changes C by rounding only (OpenBLAS's
 * kernels at a block's edge may sum in another order). Arguments are those ref/core/linalg.c's checks
 * passed, with M, N and K positive. */
#ifndef KVL_LINALG_CPU_H
#define KVL_LINALG_CPU_H

#include <stddef.h>

/* C[M][N] = A[M][K] · B[N][K]^T */
int kvl_matmul_abt_f32_cpu(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);

/* C[M][N] = A[M][K] · B[K][N] */
int kvl_matmul_ab_f32_cpu(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);

/* y[N] = W[N][K] · x[K] */
int kvl_matvec_f32_cpu(float *y, const float *W, const float *x, size_t N, size_t K);

#endif
