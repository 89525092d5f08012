/* The pooling of a compressor's slots on the device, shared by V4's compressor (v4_compressor_cuda.cu) and
 * V4.1's (v41_compressor_cuda.cu).
 *
 * Build: included by the two .cu files above (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_compress_pool_kernel one thread per (entry, channel): entry k pools the `slots` rows
 *                            first + k·step + r (a row below 0 is an absent block), slot r reading the
 *                            channel half r / M; a softmax of the gate over the slots (−∞ weighs 0) and the
 *                            weighted sum of a, both in double, rounded once (ref/v4_compressor.c,
 *                            ref/v41_compressor.c). V4: slots (1+ov)·M; V4.1: slots M, one half. */
#ifndef KVL_COMPRESS_POOL_CUDA_CUH
#define KVL_COMPRESS_POOL_CUDA_CUH

#include <math.h>

#include "device.cuh"

/* Where the slots of entry k sit: rows first + k·step + r of a and z ([rows][cols]) */
struct kvl_pool_shape {
    size_t n, c, M, slots, cols; /* entries, width, ratio, (1+ov)·M, (1+ov)·c */
    int64_t first;
    size_t step;
};

/* out[n][c] from a, z */
static __global__ void kvl_compress_pool_kernel(float *out, const float *a, const float *z, kvl_pool_shape p)
{
    const size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (e >= p.n * p.c) return;
    const size_t k = e / p.c, ch = e % p.c;
    const int64_t base = p.first + static_cast<int64_t>(k * p.step);
    double mu = -INFINITY, den = 0.0, num = 0.0;
    for (size_t r = 0; r < p.slots; r++) {
        const int64_t row = base + static_cast<int64_t>(r);
        if (row >= 0) mu = fmax(mu, static_cast<double>(z[static_cast<size_t>(row) * p.cols + r / p.M * p.c + ch]));
    }
    for (size_t r = 0; r < p.slots; r++) {
        const int64_t row = base + static_cast<int64_t>(r);
        if (row < 0) continue;
        const size_t at = static_cast<size_t>(row) * p.cols + r / p.M * p.c + ch;
        if (z[at] == -INFINITY) continue;
        const double w = exp(static_cast<double>(z[at]) - mu);
        den += w;
        num += w * static_cast<double>(a[at]);
    }
    out[e] = static_cast<float>(num / den);
}

#endif
