/* RoPE on the device: the rotation of ref/core/rope.c, pair for pair.
 *
 * Build: included by cuda/rope_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_rope_kernel<STEP>  one thread per (row, head, pair); STEP 1 pairs (i, i + Dr/2), STEP 2 pairs
 *                          (2i, 2i+1). The frequency table travels in the kernel's parameters. */
#ifndef KVL_ROPE_CUDA_CUH
#define KVL_ROPE_CUDA_CUH

#include <math.h>

#include "device.cuh"

extern "C" {
#include "rope.h"
}

template <int STEP>
__global__ void kvl_rope_kernel(float *x, size_t T, size_t stride, size_t offset, size_t n_heads, size_t head_stride,
                                kvl_rope r, int64_t start, size_t pos_step)
{
    const size_t pairs = r.Dr / 2, t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (t >= T * n_heads * pairs) return;
    const size_t i = t % pairs, h = t / pairs % n_heads, row = t / pairs / n_heads;
    const double pos = static_cast<double>(start + static_cast<int64_t>(row * pos_step));
    const double angle = pos * static_cast<double>(r.theta[i]);
    const float c = static_cast<float>(cos(angle)), s = static_cast<float>(sin(angle));
    float *a = x + row * stride + offset + h * head_stride + i * STEP, *b = a + (STEP == 1 ? pairs : 1);
    const float u = *a, v = *b;
    *a = fmaf(u, c, -(v * s));
    *b = fmaf(u, s, v * c);
}

#endif
