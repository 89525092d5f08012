/* Matrix products on the GPU (linalg_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c linalg_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernel: linalg_cuda.cuh. */
#include "linalg_cuda.cuh"

#include "linalg_cuda.h"

int kvl_matmul_abt_strided_cuda(float *C, size_t ldc, const float *A, size_t lda, const float *B, size_t ldb,
                                size_t M, size_t N, size_t K)
{
    if (M == 0 || N == 0) return KVL_OK;
    const size_t gx = kvl_div_up(N, KVL_MM_TILE), gy = kvl_div_up(M, KVL_MM_TILE);
    if (gx > 0x7FFFFFFFu || gy > 65535)
        return kvl_fail(KVL_EINVAL, "kvl_matmul_abt_cuda: %zu x %zu is more than one launch takes", M, N);
    const dim3 grid(static_cast<unsigned>(gx), static_cast<unsigned>(gy)), block(KVL_MM_TILE, KVL_MM_ROWS);
    CUDA_CHECK(KVL_LAUNCH(kvl_matmul_abt_kernel, grid, block, 0, C, ldc, A, lda, B, ldb, M, N, K));
    return KVL_OK;
}

int kvl_matmul_abt_f32_cuda(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    return kvl_matmul_abt_strided_cuda(C, N, A, K, B, K, M, N, K);
}
