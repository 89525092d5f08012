/* The V4.1 layer stack's one kernel of its own: the residual add (v41_stack_cuda.h).
 *
 * Build: included by cuda/v41_stack_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_residual_add_kernel  one thread per value: h[i] ← h[i] + a[i] in float32, as the ref's loop */
#ifndef KVL_CSA2_STACK_CUDA_CUH
#define KVL_CSA2_STACK_CUDA_CUH

#include "device.cuh"

static __global__ void kvl_residual_add_kernel(float *h, const float *a, size_t n)
{
    const size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (e < n) h[e] += a[e];
}

#endif
