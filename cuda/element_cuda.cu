/* Element codecs on the GPU (element_cuda.h): one element (one E2M1 pair) per thread.
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c element_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test).
 * Kernels:
 *   kvl_encode8_kernel<C>    codes[i] = C(x[i]) for an 8-bit cast C
 *   kvl_encode16_kernel<C>   the same for bf16
 *   kvl_encode_e2m1_kernel<C> byte j = C(x[2j]) | C(x[2j+1]) << 4, C one of the two E2M1 encoders
 *   kvl_decode8_kernel<D>, kvl_decode16_kernel<D>, kvl_decode_e2m1_kernel: the inverses */
#include "element_cuda.cuh"

#include "element_cuda.h"

#define ELEMENT_THREADS 256

namespace {

struct cast_e4m3 {
    __device__ static uint32_t encode(float x) { return kvl_e4m3_encode(x); }
    __device__ static float decode(uint32_t c) { return kvl_e4m3_decode(c); }
};
struct cast_e4m3_sat {
    __device__ static uint32_t encode(float x) { return kvl_e4m3_encode_sat(x); }
};
struct cast_e5m2 {
    __device__ static uint32_t encode(float x) { return kvl_e5m2_encode(x); }
    __device__ static float decode(uint32_t c) { return kvl_e5m2_decode(c); }
};
struct cast_e5m2_sat {
    __device__ static uint32_t encode(float x) { return kvl_e5m2_encode_sat(x); }
};
struct cast_bf16 {
    __device__ static uint32_t encode(float x) { return kvl_bf16_encode(x); }
    __device__ static float decode(uint32_t c) { return kvl_bf16_decode(c); }
};
struct cast_bf16_sat {
    __device__ static uint32_t encode(float x) { return kvl_bf16_encode_sat(x); }
};
/* formats' E2M1 cast of one value through each encoder (NaN: the sign bit flipped over a zero) */
struct e2m1_compare {
    __device__ static uint32_t encode(float x)
    {
        return kvl_is_nan(x) ? (kvl_sign8(x) >> 4) ^ 0x8u : kvl_e2m1x2_compare(x, 0.0f) & 0xFu;
    }
};
struct e2m1_cvt {
    __device__ static uint32_t encode(float x)
    {
        return kvl_is_nan(x) ? (kvl_sign8(x) >> 4) ^ 0x8u : kvl_e2m1x2_cvt(x, 0.0f) & 0xFu;
    }
};
struct e2m1_native {
    __device__ static uint32_t encode(float x) { return kvl_e2m1_encode(x); }
};

__device__ __forceinline__ size_t thread_index(void)
{
    return blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
}

template <typename C> __global__ void kvl_encode8_kernel(uint8_t *codes, const float *x, size_t n)
{
    const size_t i = thread_index();
    if (i < n) codes[i] = static_cast<uint8_t>(C::encode(x[i]));
}

template <typename C> __global__ void kvl_encode16_kernel(uint16_t *codes, const float *x, size_t n)
{
    const size_t i = thread_index();
    if (i < n) codes[i] = static_cast<uint16_t>(C::encode(x[i]));
}

template <typename C> __global__ void kvl_encode_e2m1_kernel(uint8_t *packed, const float *x, size_t n)
{
    const size_t j = thread_index();
    if (2 * j >= n) return;
    const uint32_t hi = 2 * j + 1 < n ? C::encode(x[2 * j + 1]) : 0u;
    packed[j] = static_cast<uint8_t>(C::encode(x[2 * j]) | hi << 4);
}

template <typename C> __global__ void kvl_decode8_kernel(float *x, const uint8_t *codes, size_t n)
{
    const size_t i = thread_index();
    if (i < n) x[i] = C::decode(codes[i]);
}

template <typename C> __global__ void kvl_decode16_kernel(float *x, const uint16_t *codes, size_t n)
{
    const size_t i = thread_index();
    if (i < n) x[i] = C::decode(codes[i]);
}

__global__ void kvl_decode_e2m1_kernel(float *x, const uint8_t *packed, size_t n)
{
    const size_t i = thread_index();
    if (i < n) x[i] = kvl_e2m1_decode(packed[i / 2] >> (4 * (i % 2)));
}

dim3 grid_for(size_t threads) { return dim3(static_cast<unsigned>(kvl_div_up(threads, ELEMENT_THREADS))); }

/* one thread per element, or per pair for E2M1; the grid is at most 2^31 − 1 blocks */
int check_size(size_t threads)
{
    if (kvl_div_up(threads, ELEMENT_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "element casts: %zu elements are more than one launch takes", threads);
    return KVL_OK;
}

template <typename C> int encode8(uint8_t *codes, const float *x, size_t n)
{
    if (n == 0) return KVL_OK;
    int rc = check_size(n);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_encode8_kernel<C>, grid_for(n), ELEMENT_THREADS, 0, codes, x, n));
    return KVL_OK;
}

template <typename C> int encode16(uint16_t *codes, const float *x, size_t n)
{
    if (n == 0) return KVL_OK;
    int rc = check_size(n);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_encode16_kernel<C>, grid_for(n), ELEMENT_THREADS, 0, codes, x, n));
    return KVL_OK;
}

template <typename C> int encode_e2m1(uint8_t *packed, const float *x, size_t n)
{
    if (n == 0) return KVL_OK;
    int rc = check_size(n);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_encode_e2m1_kernel<C>, grid_for(kvl_div_up(n, 2)), ELEMENT_THREADS, 0, packed, x, n));
    return KVL_OK;
}

template <typename C> int decode8(float *x, const uint8_t *codes, size_t n)
{
    if (n == 0) return KVL_OK;
    int rc = check_size(n);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_decode8_kernel<C>, grid_for(n), ELEMENT_THREADS, 0, x, codes, n));
    return KVL_OK;
}

} /* namespace */

int kvf_e4m3_encode_n_cuda(uint8_t *codes, const float *x, size_t n) { return encode8<cast_e4m3>(codes, x, n); }
int kvf_e4m3_encode_sat_n_cuda(uint8_t *codes, const float *x, size_t n) { return encode8<cast_e4m3_sat>(codes, x, n); }
int kvf_e4m3_decode_n_cuda(float *x, const uint8_t *codes, size_t n) { return decode8<cast_e4m3>(x, codes, n); }

int kvf_e5m2_encode_n_cuda(uint8_t *codes, const float *x, size_t n) { return encode8<cast_e5m2>(codes, x, n); }
int kvf_e5m2_encode_sat_n_cuda(uint8_t *codes, const float *x, size_t n) { return encode8<cast_e5m2_sat>(codes, x, n); }
int kvf_e5m2_decode_n_cuda(float *x, const uint8_t *codes, size_t n) { return decode8<cast_e5m2>(x, codes, n); }

int kvf_e2m1_encode_n_cuda(uint8_t *packed, const float *x, size_t n) { return encode_e2m1<e2m1_native>(packed, x, n); }
int kvf_e2m1_encode_n_compare_cuda(uint8_t *packed, const float *x, size_t n)
{
    return encode_e2m1<e2m1_compare>(packed, x, n);
}
int kvf_e2m1_encode_n_cvt_cuda(uint8_t *packed, const float *x, size_t n)
{
    return encode_e2m1<e2m1_cvt>(packed, x, n);
}

int kvf_e2m1_decode_n_cuda(float *x, const uint8_t *packed, size_t n)
{
    if (n == 0) return KVL_OK;
    int rc = check_size(n);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_decode_e2m1_kernel, grid_for(n), ELEMENT_THREADS, 0, x, packed, n));
    return KVL_OK;
}

int kvf_bf16_encode_n_cuda(uint16_t *codes, const float *x, size_t n) { return encode16<cast_bf16>(codes, x, n); }
int kvf_bf16_encode_sat_n_cuda(uint16_t *codes, const float *x, size_t n)
{
    return encode16<cast_bf16_sat>(codes, x, n);
}

int kvf_bf16_decode_n_cuda(float *x, const uint16_t *codes, size_t n)
{
    if (n == 0) return KVL_OK;
    int rc = check_size(n);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_decode16_kernel<cast_bf16>, grid_for(n), ELEMENT_THREADS, 0, x, codes, n));
    return KVL_OK;
}
