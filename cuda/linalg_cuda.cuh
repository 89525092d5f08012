/* Matrix products on the device: C = A·Bᵀ, the product every projection of ref/ is.
 *
 * Build: included by cuda/linalg_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_matmul_abt_kernel  a 32×32 tile of C per block of 32×8 threads, four outputs per thread;
 *                          A and B staged through shared memory 32 columns of K at a time (rows padded
 *                          to 33 floats so the column reads of B hit 32 banks); each output is one float
 *                          sum in k order. A reference kernel for the projections around attention,
 *                          not a tuned GEMM (the benchmark's ceiling uses cuBLAS). */
#ifndef KVL_LINALG_CUDA_CUH
#define KVL_LINALG_CUDA_CUH

#include "device.cuh"

#define KVL_MM_TILE 32
#define KVL_MM_ROWS 8 /* thread rows: each thread owns TILE / ROWS outputs of one column */

static __global__ void kvl_matmul_abt_kernel(float *C, size_t ldc, const float *A, size_t lda, const float *B,
                                             size_t ldb, size_t M, size_t N, size_t K)
{
    KVL_SHARED(float, As, KVL_MM_TILE * (KVL_MM_TILE + 1));
    KVL_SHARED(float, Bs, KVL_MM_TILE * (KVL_MM_TILE + 1));
    const unsigned tx = threadIdx.x, ty = threadIdx.y;
    const size_t row0 = blockIdx.y * static_cast<size_t>(KVL_MM_TILE);
    const size_t col0 = blockIdx.x * static_cast<size_t>(KVL_MM_TILE);
    float acc[KVL_MM_TILE / KVL_MM_ROWS] = {};
    for (size_t k0 = 0; k0 < K; k0 += KVL_MM_TILE) {
        for (unsigned r = ty; r < KVL_MM_TILE; r += KVL_MM_ROWS) {
            const bool k_in = k0 + tx < K;
            As[r * (KVL_MM_TILE + 1) + tx] = row0 + r < M && k_in ? A[(row0 + r) * lda + k0 + tx] : 0.0f;
            Bs[r * (KVL_MM_TILE + 1) + tx] = col0 + r < N && k_in ? B[(col0 + r) * ldb + k0 + tx] : 0.0f;
        }
        __syncthreads();
        for (unsigned kk = 0; kk < KVL_MM_TILE; kk++) {
            const float b = Bs[tx * (KVL_MM_TILE + 1) + kk];
            KVL_UNROLL
            for (unsigned i = 0; i < KVL_MM_TILE / KVL_MM_ROWS; i++)
                acc[i] += As[(ty + i * KVL_MM_ROWS) * (KVL_MM_TILE + 1) + kk] * b;
        }
        __syncthreads();
    }
    KVL_UNROLL
    for (unsigned i = 0; i < KVL_MM_TILE / KVL_MM_ROWS; i++) {
        const size_t r = row0 + ty + i * KVL_MM_ROWS, c = col0 + tx;
        if (r < M && c < N) C[r * ldc + c] = acc[i];
    }
}

#endif
