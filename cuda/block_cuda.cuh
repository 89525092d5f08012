/* Block quantisers on the device: the twins of formats/block.c, bit for bit.
 *
 * Build: included by cuda/block_cuda.cu and cuda/rows_cuda.cu (make cuda for nvcc, make test for the
 *        emulator).
 *
 * Kernels (one line per version):
 *   kvl_finite_kernel<T>   one element per thread; NaN and inf flags voted per warp (__ballot_sync),
 *                          one atomicOr per warp that saw one
 *   kvl_quant_kernel<R>    four elements per thread (one 16-byte load); a quantiser block of B values
 *                          is B/4 consecutive lanes, whose maximum is a butterfly over those lanes
 *                          (kvl_group_max); each lane encodes its four values, the first lane of the
 *                          group stores the scale. The readable twin: four IEEE divisions and a 64-bit
 *                          division and remainder per vector.
 *   kvl_quant_wide_kernel<R>  four vectors of four per thread (lane l of a warp takes vectors l, l + 32,
 *                          l + 64, l + 96 of the warp's 128, so each step's blocks are lanes as above), all
 *                          four loads issued first; a power-of-two scale's exact reciprocal (kvl_e8m0_inverse)
 *                          for a multiply instead of the divisions, NVFP4's and V4.1's E4M3 scales still
 *                          divide; the row and column by a 32-bit division, none in a flat vector.
 *                          Bound by DRAM bandwidth (tests/bench/README.md, "Design measurements").
 *   kvl_dequant_kernel<R>  four elements per thread, the block's scale read by each
 * A recipe R names the block, the element, and how the scale is chosen and stored. Rows of a DeepSeek
 * cache (rows_cuda.cuh) are the same kernels with strides between rows (kvl_qlayout).
 * Requirements: x 16-byte aligned, codes 4-byte (E4M3) or 2-byte (E2M1) aligned, n a multiple of the
 * block; the host functions check them. */
#ifndef KVL_BLOCK_CUDA_CUH
#define KVL_BLOCK_CUDA_CUH

#include "element_cuda.cuh"
#include "primitives.cuh"

/* Where the values of row r sit: x + r·x_stride (floats), codes + r·code_stride and
 * scales + r·scale_stride (bytes); each row holds n_row quantised values. A flat vector is one row. */
struct kvl_qlayout {
    size_t n_row, x_stride, code_stride, scale_stride;
};

enum { KVL_ELEM_E4M3, KVL_ELEM_E2M1 };

#define KVL_QUANT_THREADS 256
#define KVL_QUANT_VECTORS 4 /* of four values per thread in kvl_quant_wide_kernel */

/* Near float32's maximum (formats/block.h): the largest element magnitude code whose value times the
 * power-of-two scale s is finite, the element's maximum (E4M3 0x7E, E2M1 7) unless that times s is inf. */
template <int ELEM> __device__ __forceinline__ uint32_t kvl_finite_magnitude(float s)
{
    if constexpr (ELEM == KVL_ELEM_E4M3) {
        uint32_t m = 0x7Eu;
        while (m > 0u && isinf(kvl_e4m3_decode(m) * s)) m--;
        return m;
    } else {
        uint32_t m = 7u;
        while (m > 0u && isinf(kvl_e2m1_decode(m) * s)) m--;
        return m;
    }
}

/* 1 / 2^(c − 127) = 2^(127 − c), itself an E8M0 value (code 254 − c) for every finite code c, 2^±127
 * included: multiplying by it rounds the same real number as dividing by the scale, so the codes are
 * the same bits (formats/block.c multiplies by the same reciprocal). */
__device__ __forceinline__ float kvl_e8m0_inverse(uint32_t c) { return kvl_e8m0_decode(254u - c); }

/* ---- recipes: choose(amax) stores the scale's bytes and returns the divisor; stored(bytes) is the
 * factor a dequantiser multiplies by; top(s) is the largest magnitude code a block of divisor s keeps
 * (kvl_finite_magnitude for the power-of-two scales and NVFP4's s_global · E4M3, as formats/block.c;
 * every code for V4.1's bare E4M3 scales, whose products stay finite). `param` is NVFP4's global scale
 * (unused by the others). pow2: the scale is a power of two, and inverse(bytes) its exact reciprocal. ---- */

/* OCP MX: E8M0 2^(floor(log2 amax) − emax) */
template <int ELEM, int EMAX> struct kvl_recipe_mx {
    static constexpr int block = 32, elem = ELEM, scale_bytes = 1;
    static constexpr bool pow2 = true;
    __device__ static float inverse(const uint8_t *bytes) { return kvl_e8m0_inverse(bytes[0]); }
    __device__ static float choose(float amax, float, uint8_t *bytes)
    {
        bytes[0] = static_cast<uint8_t>(kvl_scale_ocp_floor(amax, EMAX));
        return kvl_e8m0_decode(bytes[0]);
    }
    __device__ static float stored(const uint8_t *bytes, float) { return kvl_e8m0_decode(bytes[0]); }
    __device__ static uint32_t top(float s) { return kvl_finite_magnitude<ELEM>(s); }
};
typedef kvl_recipe_mx<KVL_ELEM_E4M3, 8> kvl_recipe_mxfp8;
typedef kvl_recipe_mx<KVL_ELEM_E2M1, 2> kvl_recipe_mxfp4;

/* NVFP4: E4M3 block scale e4m3(clamp(amax / 6 / s_global, 2^-6, 448)), divisor s_global·s_block */
struct kvl_recipe_nvfp4 {
    static constexpr int block = 16, elem = KVL_ELEM_E2M1, scale_bytes = 1;
    static constexpr bool pow2 = false;
    __device__ static float choose(float amax, float s_global, uint8_t *bytes)
    {
        const float s = fminf(fmaxf(amax / 6.0f / s_global, 0x1p-6f), 448.0f);
        bytes[0] = static_cast<uint8_t>(kvl_e4m3x2_satfinite(s, 0.0f) & 0xFFu);
        return s_global * kvl_e4m3_decode(bytes[0]);
    }
    __device__ static float stored(const uint8_t *bytes, float s_global)
    {
        return s_global * kvl_e4m3_decode(bytes[0]);
    }
    __device__ static uint32_t top(float s) { return kvl_finite_magnitude<KVL_ELEM_E2M1>(s); }
};

/* DeepSeek V4.1 FP4: E4M3 scale e4m3(max(amax, 6·2^-9) / 6) */
struct kvl_recipe_fp4_v41 {
    static constexpr int block = 16, elem = KVL_ELEM_E2M1, scale_bytes = 1;
    static constexpr bool pow2 = false;
    __device__ static float choose(float amax, float, uint8_t *bytes)
    {
        bytes[0] = static_cast<uint8_t>(kvl_e4m3x2_satfinite(fmaxf(amax, 6.0f * 0x1p-9f) / 6.0f, 0.0f) & 0xFFu);
        return kvl_e4m3_decode(bytes[0]);
    }
    __device__ static float stored(const uint8_t *bytes, float) { return kvl_e4m3_decode(bytes[0]); }
    __device__ static uint32_t top(float) { return 7u; }
};

/* DeepSeek act_quant: 2^ceil(log2(max(amax, 1e-4) / 448)), stored as E8M0 (any power-of-two block) or
 * as a little-endian float32 (V3.2, blocks of 128) */
template <int BLOCK> struct kvl_recipe_rceil_e8m0 {
    static constexpr int block = BLOCK, elem = KVL_ELEM_E4M3, scale_bytes = 1;
    static constexpr bool pow2 = true;
    __device__ static float inverse(const uint8_t *bytes) { return kvl_e8m0_inverse(bytes[0]); }
    __device__ static float choose(float amax, float, uint8_t *bytes)
    {
        bytes[0] = static_cast<uint8_t>(kvl_scale_rceil(fmaxf(amax, 1e-4f), 448.0f));
        return kvl_e8m0_decode(bytes[0]);
    }
    __device__ static float stored(const uint8_t *bytes, float) { return kvl_e8m0_decode(bytes[0]); }
    __device__ static uint32_t top(float s) { return kvl_finite_magnitude<KVL_ELEM_E4M3>(s); }
};

struct kvl_recipe_ue8m0_f32 {
    static constexpr int block = 128, elem = KVL_ELEM_E4M3, scale_bytes = 4;
    static constexpr bool pow2 = true;
    /* the float's exponent field is the E8M0 code it was decoded from (2^-127, code 0, is 0x00400000) */
    __device__ static float inverse(const uint8_t *bytes) { return kvl_e8m0_inverse(bytes[3] << 1 | bytes[2] >> 7); }
    __device__ static float choose(float amax, float, uint8_t *bytes)
    {
        const float s = kvl_e8m0_decode(kvl_scale_rceil(fmaxf(amax, 1e-4f), 448.0f));
        const uint32_t u = __float_as_uint(s);
        for (int b = 0; b < 4; b++) bytes[b] = static_cast<uint8_t>(u >> (8 * b));
        return s;
    }
    __device__ static float stored(const uint8_t *bytes, float)
    {
        return __uint_as_float(bytes[0] | bytes[1] << 8 | bytes[2] << 16 | static_cast<uint32_t>(bytes[3]) << 24);
    }
    __device__ static uint32_t top(float s) { return kvl_finite_magnitude<KVL_ELEM_E4M3>(s); }
};

/* V4 indexer keys: MXFP4 with 2^ceil(log2(max(amax, 6·2^-126) / 6)) */
struct kvl_recipe_mxfp4_rceil {
    static constexpr int block = 32, elem = KVL_ELEM_E2M1, scale_bytes = 1;
    static constexpr bool pow2 = true;
    __device__ static float inverse(const uint8_t *bytes) { return kvl_e8m0_inverse(bytes[0]); }
    __device__ static float choose(float amax, float, uint8_t *bytes)
    {
        bytes[0] = static_cast<uint8_t>(kvl_scale_rceil(fmaxf(amax, 6.0f * 0x1p-126f), 6.0f));
        return kvl_e8m0_decode(bytes[0]);
    }
    __device__ static float stored(const uint8_t *bytes, float) { return kvl_e8m0_decode(bytes[0]); }
    __device__ static uint32_t top(float s) { return kvl_finite_magnitude<KVL_ELEM_E2M1>(s); }
};

/* ---- kernels ------------------------------------------------------------------------------------------- */

/* flags |= 1 if any of x[n] is NaN, 2 if any is ±inf (T = float: a template so that every file that
 * includes this header shares one definition) */
template <typename T> __global__ void kvl_finite_kernel(unsigned *flags, const T *x, size_t n)
{
    const size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    const uint32_t a = i < n ? kvl_abs_bits(x[i]) : 0u;
    const unsigned nan = __ballot_sync(KVL_FULL_MASK, a > KVL_F32_INF);
    const unsigned inf = __ballot_sync(KVL_FULL_MASK, a == KVL_F32_INF);
    if (threadIdx.x % KVL_WARP == 0 && (nan | inf)) atomicOr(flags, (nan ? 1u : 0u) | (inf ? 2u : 0u));
}

/* formats' E2M1 cast of a quotient, NaN included (NVFP4's divisor can underflow to zero) */
__device__ __forceinline__ uint32_t kvl_e2m1x2_encode(float lo, float hi)
{
    return kvl_e2m1_encode(lo) | kvl_e2m1_encode(hi) << 4;
}

/* c's `lanes` fields of `width` bits (sign in the top bit), magnitudes above m lowered to m */
__device__ __forceinline__ uint32_t kvl_cap_magnitudes(uint32_t c, uint32_t m, int width, int lanes)
{
    const uint32_t mag_mask = (1u << (width - 1)) - 1u;
    for (int i = 0; i < lanes; i++) {
        const uint32_t f = c >> (i * width), mag = f & mag_mask;
        if (mag > m) c ^= (mag ^ m) << (i * width);
    }
    return c;
}

/* The scale bytes of a block (from its first lane) and the codes of q, values 4k … 4k+3 of row r over
 * their block's divisor s. */
template <typename R>
__device__ __forceinline__ void kvl_quant_store(uint8_t *codes, uint8_t *scales, const kvl_qlayout &L, size_t r,
                                                size_t k, float4 q, float s, const uint8_t *sbytes)
{
    if ((4 * k) % R::block == 0) {
        uint8_t *dst = scales + r * L.scale_stride + (4 * k / R::block) * R::scale_bytes;
        for (int b = 0; b < R::scale_bytes; b++) dst[b] = sbytes[b];
    }
    if constexpr (R::elem == KVL_ELEM_E4M3) {
        const uint32_t c = kvl_e4m3x2_satfinite(q.x, q.y) | kvl_e4m3x2_satfinite(q.z, q.w) << 16;
        *KVL_GLOBAL_AS(uint32_t, codes + r * L.code_stride + 4 * k) = kvl_cap_magnitudes(c, R::top(s), 8, 4);
    } else {
        const uint32_t c = kvl_e2m1x2_encode(q.x, q.y) | kvl_e2m1x2_encode(q.z, q.w) << 8;
        *KVL_GLOBAL_AS(uint16_t, codes + r * L.code_stride + 2 * k) =
            static_cast<uint16_t>(kvl_cap_magnitudes(c, R::top(s), 4, 4));
    }
}

__device__ __forceinline__ float kvl_abs_max4(float4 v)
{
    return fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
}

/* Thread t quantises values 4k … 4k+3 of row r (t = r·n_row/4 + k): rows·n_row/4 = n_threads. The
 * readable twin of kvl_quant_wide_kernel. */
template <typename R>
__global__ void kvl_quant_kernel(uint8_t *codes, uint8_t *scales, const float *x, kvl_qlayout L, size_t n_threads,
                                 float param)
{
    static_assert(R::block % 4 == 0 && R::block / 4 <= KVL_WARP, "a block is 1 to 32 groups of four lanes");
    const size_t t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    const size_t per_row = L.n_row / 4, r = t / per_row, k = t % per_row;
    float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (t < n_threads) v = *KVL_GLOBAL_AS(const float4, x + r * L.x_stride + 4 * k);
    const float amax = kvl_group_max<R::block / 4>(kvl_abs_max4(v));
    if (t >= n_threads) return;
    uint8_t sbytes[4];
    const float s = R::choose(amax, param, sbytes);
    kvl_quant_store<R>(codes, scales, L, r, k, float4{v.x / s, v.y / s, v.z / s, v.w / s}, s, sbytes);
}

/* (r, k) = (t / per_row, t % per_row), in 32 bits where both fit (a 64-bit division is a call of some
 * 70 instructions), and no division at all in the first row (a flat vector is one row) */
__device__ __forceinline__ void kvl_row_split(size_t t, size_t per_row, size_t *r, size_t *k)
{
    if (t < per_row) {
        *r = 0;
        *k = t;
    } else if ((t | per_row) >> 32 == 0) {
        const uint32_t q = static_cast<uint32_t>(t) / static_cast<uint32_t>(per_row);
        *r = q;
        *k = t - static_cast<size_t>(q) * per_row;
    } else {
        *r = t / per_row;
        *k = t % per_row;
    }
}

/* Warp w quantises the KVL_QUANT_VECTORS·32 vectors of four from 32·KVL_QUANT_VECTORS·w: lane l takes
 * vectors l, l + 32, …, so that each step's quantiser blocks are B/4 consecutive lanes, as in
 * kvl_quant_kernel; all its loads are issued before the first block is encoded. n_vecs = rows·n_row/4. */
template <typename R>
__global__ void __launch_bounds__(KVL_QUANT_THREADS)
    kvl_quant_wide_kernel(uint8_t *codes, uint8_t *scales, const float *x, kvl_qlayout L, size_t n_vecs, float param)
{
    static_assert(R::block % 4 == 0 && R::block / 4 <= KVL_WARP, "a block is 1 to 32 groups of four lanes");
    const size_t g = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    const size_t first = g / KVL_WARP * (KVL_WARP * KVL_QUANT_VECTORS) + g % KVL_WARP, per_row = L.n_row / 4;
    float4 v[KVL_QUANT_VECTORS];
    size_t r[KVL_QUANT_VECTORS], k[KVL_QUANT_VECTORS];
    KVL_UNROLL
    for (int j = 0; j < KVL_QUANT_VECTORS; j++) {
        const size_t t = first + j * KVL_WARP;
        v[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        r[j] = k[j] = 0;
        if (t >= n_vecs) continue;
        kvl_row_split(t, per_row, &r[j], &k[j]);
        v[j] = *KVL_GLOBAL_AS(const float4, x + r[j] * L.x_stride + 4 * k[j]);
    }
    KVL_UNROLL
    for (int j = 0; j < KVL_QUANT_VECTORS; j++) {
        const float amax = kvl_group_max<R::block / 4>(kvl_abs_max4(v[j]));
        if (first + j * KVL_WARP >= n_vecs) continue;
        uint8_t sbytes[4];
        const float s = R::choose(amax, param, sbytes);
        float4 q;
        if constexpr (R::pow2) {
            const float inv = R::inverse(sbytes);
            q = float4{v[j].x * inv, v[j].y * inv, v[j].z * inv, v[j].w * inv};
        } else {
            q = float4{v[j].x / s, v[j].y / s, v[j].z / s, v[j].w / s};
        }
        kvl_quant_store<R>(codes, scales, L, r[j], k[j], q, s, sbytes);
    }
}

template <typename R>
__global__ void kvl_dequant_kernel(float *x, const uint8_t *codes, const uint8_t *scales, kvl_qlayout L,
                                   size_t n_threads, float param)
{
    const size_t t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (t >= n_threads) return;
    const size_t per_row = L.n_row / 4, r = t / per_row, k = t % per_row;
    const float s = R::stored(scales + r * L.scale_stride + (4 * k / R::block) * R::scale_bytes, param);
    float4 v;
    if constexpr (R::elem == KVL_ELEM_E4M3) {
        const uint32_t c = *KVL_GLOBAL_AS(const uint32_t, codes + r * L.code_stride + 4 * k);
        v = float4{kvl_e4m3_decode(c) * s, kvl_e4m3_decode(c >> 8) * s, kvl_e4m3_decode(c >> 16) * s,
                   kvl_e4m3_decode(c >> 24) * s};
    } else {
        const uint32_t c = *KVL_GLOBAL_AS(const uint16_t, codes + r * L.code_stride + 2 * k);
        v = float4{kvl_e2m1_decode(c) * s, kvl_e2m1_decode(c >> 4) * s, kvl_e2m1_decode(c >> 8) * s,
                   kvl_e2m1_decode(c >> 12) * s};
    }
    *KVL_GLOBAL_AS(float4, x + r * L.x_stride + 4 * k) = v;
}

/* ---- launches (host) -------------------------------------------------------------------------------------
 * rows rows laid out as L; the caller has checked lengths, alignment and finiteness. */


inline int kvl_quant_grid(dim3 *grid, size_t threads)
{
    const size_t blocks = kvl_div_up(threads, KVL_QUANT_THREADS);
    if (blocks > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "block quantisers: %zu threads are more than one launch takes", threads);
    *grid = dim3(static_cast<unsigned>(blocks));
    return KVL_OK;
}

/* the readable twin: one thread per vector of four */
template <typename R>
int kvl_quant_rows_simple_cuda(uint8_t *codes, uint8_t *scales, const float *x, kvl_qlayout L, size_t rows,
                               float param)
{
    const size_t threads = rows * (L.n_row / 4);
    dim3 grid;
    int rc = kvl_quant_grid(&grid, threads);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_quant_kernel<R>, grid, KVL_QUANT_THREADS, 0, codes, scales, x, L, threads, param));
    return KVL_OK;
}

template <typename R>
int kvl_quant_rows_cuda(uint8_t *codes, uint8_t *scales, const float *x, kvl_qlayout L, size_t rows, float param)
{
    const size_t vecs = rows * (L.n_row / 4);
    dim3 grid;
    int rc = kvl_quant_grid(&grid, kvl_div_up(vecs, KVL_WARP * KVL_QUANT_VECTORS) * KVL_WARP);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_quant_wide_kernel<R>, grid, KVL_QUANT_THREADS, 0, codes, scales, x, L, vecs, param));
    return KVL_OK;
}

template <typename R>
int kvl_dequant_rows_cuda(float *x, const uint8_t *codes, const uint8_t *scales, kvl_qlayout L, size_t rows,
                          float param)
{
    const size_t threads = rows * (L.n_row / 4);
    dim3 grid;
    int rc = kvl_quant_grid(&grid, threads);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_dequant_kernel<R>, grid, KVL_QUANT_THREADS, 0, x, codes, scales, L, threads, param));
    return KVL_OK;
}

#endif
