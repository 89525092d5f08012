/* The ring's row copies on the device: rows in, converted to the store; rows out, widened to float.
 *
 * Build: included by cuda/kv_ring_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_ring_put_kernel<S>  one thread per value of the appended rows: slot (len + i) mod S of each
 *                           sequence, S float (copy) or uint16_t (bf16, RNE as formats/)
 *   kvl_ring_get_kernel<S>  one thread per value read back
 * The packed FP8 row goes through rows_cuda's strided pack and unpack instead. */
#ifndef KVL_SWA_CUDA_CUH
#define KVL_SWA_CUDA_CUH

#include "element_cuda.cuh"

__device__ __forceinline__ void kvl_store_value(float *p, float v) { *p = v; }
__device__ __forceinline__ void kvl_store_value(uint16_t *p, float v)
{
    *p = static_cast<uint16_t>(kvl_bf16_encode(v));
}
__device__ __forceinline__ float kvl_load_value(const float *p) { return *p; }
__device__ __forceinline__ float kvl_load_value(const uint16_t *p) { return kvl_bf16_decode(*p); }

/* ring[B][slots][width] ← rows[B][n][width], rows skip … n − 1 at slots (len + i) mod slots */
template <typename S>
__global__ void kvl_ring_put_kernel(S *ring, const float *rows, size_t B, size_t n, size_t skip, size_t width,
                                    size_t slots, size_t len)
{
    const size_t per_seq = (n - skip) * width, t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (t >= B * per_seq) return;
    const size_t b = t / per_seq, i = skip + t % per_seq / width, col = t % width;
    kvl_store_value(ring + (b * slots + (len + i) % slots) * width + col, rows[(b * n + i) * width + col]);
}

/* out[B][n][width] ← positions first … first + n − 1 */
template <typename S>
__global__ void kvl_ring_get_kernel(float *out, const S *ring, size_t B, size_t n, size_t first, size_t width,
                                    size_t slots)
{
    const size_t per_seq = n * width, t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (t >= B * per_seq) return;
    const size_t b = t / per_seq, i = t % per_seq / width, col = t % width;
    out[t] = kvl_load_value(ring + (b * slots + (first + i) % slots) * width + col);
}

#endif
