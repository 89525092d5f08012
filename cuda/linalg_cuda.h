/* Matrix products on the GPU: the twin of ref/core/linalg.h's kvl_matmul_abt_f32, on device buffers
 * (kernel in linalg_cuda.cuh). Returns KVL_OK, or KVL_EINVAL (a grid too large), KVL_ECUDA. */
#ifndef KVL_LINALG_CUDA_H
#define KVL_LINALG_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* C[M][N] = A[M][K] · B[N][K]^T, all dense; K = 0 writes zeros */
int kvl_matmul_abt_f32_cuda(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);

/* The same with rows ldc, lda, ldb floats apart: products of slices of wider arrays (a head's columns,
 * the latent part of cache rows) */
int kvl_matmul_abt_strided_cuda(float *C, size_t ldc, const float *A, size_t lda, const float *B, size_t ldb,
                                size_t M, size_t N, size_t K);

#ifdef __cplusplus
}
#endif

#endif
