/* RMSNorm on the device, as ref/core/norm.c computes it.
 *
 * Build: included by cuda/norm_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_rmsnorm_kernel  one warp per row: each lane sums its strided squares in double, a warp sum
 *                       (kvl_warp_sum<double>) gives the row's, every output formed in double */
#ifndef KVL_NORM_CUDA_CUH
#define KVL_NORM_CUDA_CUH

#include <math.h>

#include "primitives.cuh"

static __global__ void kvl_rmsnorm_kernel(float *y, const float *x, const float *g, size_t T, size_t n,
                                          size_t stride, double eps)
{
    const size_t row = blockIdx.x * static_cast<size_t>(blockDim.x / KVL_WARP) + threadIdx.x / KVL_WARP;
    const unsigned lane = threadIdx.x % KVL_WARP;
    double ss = 0.0;
    if (row < T)
        for (size_t i = lane; i < n; i += KVL_WARP) {
            const double v = x[row * stride + i];
            ss += v * v;
        }
    ss = kvl_warp_sum<double>(ss);
    if (row >= T) return;
    const double r = 1.0 / sqrt(ss / static_cast<double>(n) + eps);
    for (size_t i = lane; i < n; i += KVL_WARP) {
        const double v = static_cast<double>(x[row * stride + i]) * r;
        y[row * stride + i] = static_cast<float>(g ? static_cast<double>(g[i]) * v : v);
    }
}

#endif
