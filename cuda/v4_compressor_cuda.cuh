/* The V4 compressor's own kernels on the device: the gate's position bias and the pooling of slots.
 *
 * Build: included by cuda/v4_compressor_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_gate_bias_kernel     one thread per gate value: z[i][ch] += B[(pos + i) mod M][ch]
 *   kvl_compress_pool_kernel (compress_pool_cuda.cuh) the pooling of the slots */
#ifndef KVL_V4_COMPRESSOR_CUDA_CUH
#define KVL_V4_COMPRESSOR_CUDA_CUH

#include <math.h>

#include "compress_pool_cuda.cuh"
#include "device.cuh"

static __global__ void kvl_gate_bias_kernel(float *z, const float *ape, size_t S, size_t wide, size_t pos, size_t M)
{
    const size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (e >= S * wide) return;
    z[e] += ape[((pos + e / wide) % M) * wide + e % wide];
}

#endif
