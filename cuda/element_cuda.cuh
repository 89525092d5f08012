/* Element codecs on the device: the twins of formats/element.c (and scale.c's two scale rules the
 * block kernels need), bit for bit.
 *
 * Build: included by cuda/element_cuda.cu and the block and row kernels; nvcc -std=c++17 -O2
 *        -gencode sm_80, sm_90 and compute_90 (make cuda), or g++ -x c++ against cuda/emu (make test).
 *
 * Encoders round with the GPU's own conversions where it has them, then fix what those do not share
 * with formats/ (the emulator's versions, cuda/emu/convert.cc, behave as the hardware):
 *   E4M3, E5M2   cvt.rn.satfinite.{e4m3,e5m2}x2.f32 (sm_89+; nvcc emulates it in software below);
 *                the plain cast turns |x| past the rounding edge (464, 61440) into NaN or ±inf, and
 *                NaN keeps its sign (the instruction gives 0x7F for every NaN)
 *   E2M1         two versions of one function: kvl_e2m1x2_cvt, the cvt.rn.satfinite.e2m1x2.f32
 *                instruction of sm_100+, and kvl_e2m1x2_compare, seven comparisons against the
 *                midpoints between codes (older GPUs, where nvcc's software cvt goes through
 *                64-bit integers); NaN becomes 0x8 for +NaN and 0x0 for −NaN, as formats/ gives
 *   bf16         cvt.rn.bf16.f32; NaN becomes 0x7FC0 with its sign, the saturating cast clamps ±inf
 * Decoders assemble float32 bits as formats/ does: a few integer operations, no tables. */
#ifndef KVL_ELEMENT_CUDA_CUH
#define KVL_ELEMENT_CUDA_CUH

#include "device.cuh"

#define KVL_F32_QNAN 0x7FC00000u
#define KVL_F32_INF 0x7F800000u

__device__ __forceinline__ uint32_t kvl_sign8(float x) { return (__float_as_uint(x) >> 24) & 0x80u; }
__device__ __forceinline__ uint32_t kvl_abs_bits(float x) { return __float_as_uint(x) & 0x7FFFFFFFu; }
__device__ __forceinline__ bool kvl_is_nan(float x) { return kvl_abs_bits(x) > KVL_F32_INF; }

/* ---- encoders ---------------------------------------------------------------------------------------- */

/* E4M3 codes of lo (bits 0–7) and hi (bits 8–15), saturating; finite inputs only (a NaN gives 0x7F). */
__device__ __forceinline__ uint32_t kvl_e4m3x2_satfinite(float lo, float hi)
{
    return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
}

__device__ __forceinline__ uint32_t kvl_e5m2x2_satfinite(float lo, float hi)
{
    return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E5M2);
}

/* formats' kvf_e4m3_encode_sat */
__device__ __forceinline__ uint32_t kvl_e4m3_encode_sat(float x)
{
    const uint32_t code = kvl_e4m3x2_satfinite(x, 0.0f) & 0xFFu;
    return kvl_is_nan(x) ? 0x7Fu | kvl_sign8(x) : code;
}

/* formats' kvf_e4m3_encode: past 464 (halfway from 448 to 480, which rounds to even 448) and ±inf
 * give NaN */
__device__ __forceinline__ uint32_t kvl_e4m3_encode(float x)
{
    const uint32_t code = kvl_e4m3x2_satfinite(x, 0.0f) & 0xFFu;
    return kvl_abs_bits(x) > __float_as_uint(464.0f) ? 0x7Fu | kvl_sign8(x) : code;
}

/* formats' kvf_e5m2_encode_sat: NaN is 0x7E with the sign */
__device__ __forceinline__ uint32_t kvl_e5m2_encode_sat(float x)
{
    const uint32_t code = kvl_e5m2x2_satfinite(x, 0.0f) & 0xFFu;
    return kvl_is_nan(x) ? 0x7Eu | kvl_sign8(x) : code;
}

/* formats' kvf_e5m2_encode: from 61440 (halfway from 57344 to 65536, which rounds to even 65536) up
 * to ±inf gives ±inf */
__device__ __forceinline__ uint32_t kvl_e5m2_encode(float x)
{
    const uint32_t a = kvl_abs_bits(x);
    const uint32_t code = kvl_e5m2x2_satfinite(x, 0.0f) & 0xFFu;
    if (a > KVL_F32_INF) return 0x7Eu | kvl_sign8(x);
    return a >= __float_as_uint(61440.0f) ? 0x7Cu | kvl_sign8(x) : code;
}

/* E2M1 magnitude code of one value: the count of midpoints between neighbouring codes it passes,
 * ties to the even code (0.25→0, 0.75→1, 1.25→1, 1.75→2, 2.5→2, 3.5→4, 5→4, as ml_dtypes); the
 * sign bit as it is. NaN passes no midpoint: 0x0 or 0x8. */
__device__ __forceinline__ uint32_t kvl_e2m1_compare(float x)
{
    const float a = fabsf(x);
    const uint32_t m = (a > 0.25f) + (a >= 0.75f) + (a > 1.25f) + (a >= 1.75f) + (a > 2.5f) + (a >= 3.5f) + (a > 5.0f);
    return m | (kvl_sign8(x) >> 4);
}

/* E2M1 codes of lo (bits 0–3) and hi (bits 4–7), saturating at ±6. */
__device__ __forceinline__ uint32_t kvl_e2m1x2_compare(float lo, float hi)
{
    return kvl_e2m1_compare(lo) | kvl_e2m1_compare(hi) << 4;
}

/* The same through the conversion intrinsic (one instruction on sm_100+); NaN gives 0x7. */
__device__ __forceinline__ uint32_t kvl_e2m1x2_cvt(float lo, float hi)
{
    return __nv_cvt_float2_to_fp4x2(make_float2(lo, hi), __NV_E2M1, cudaRoundNearest);
}

__device__ __forceinline__ uint32_t kvl_e2m1x2(float lo, float hi)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
    return kvl_e2m1x2_cvt(lo, hi);
#else
    return kvl_e2m1x2_compare(lo, hi);
#endif
}

/* formats' kvf_e2m1_encode(_sat) of one value: NaN flips the sign bit over a zero */
__device__ __forceinline__ uint32_t kvl_e2m1_encode(float x)
{
    return kvl_is_nan(x) ? (kvl_sign8(x) >> 4) ^ 0x8u : kvl_e2m1x2(x, 0.0f) & 0xFu;
}

/* formats' kvf_bf16_encode: round to nearest even, overflow to ±inf, NaN the quiet NaN with its sign */
__device__ __forceinline__ uint32_t kvl_bf16_encode(float x)
{
    const uint32_t code = __bfloat16_as_ushort(__float2bfloat16_rn(x));
    return kvl_is_nan(x) ? 0x7FC0u | (kvl_sign8(x) << 8) : code;
}

/* formats' kvf_bf16_encode_sat: overflow and ±inf clamp to ±0x7F7F */
__device__ __forceinline__ uint32_t kvl_bf16_encode_sat(float x)
{
    const uint32_t code = kvl_bf16_encode(x);
    return (code & 0x7FFFu) == 0x7F80u ? (code & 0x8000u) | 0x7F7Fu : code;
}

/* ---- decoders ----------------------------------------------------------------------------------------- */

/* Normal codes: the fields moved into float32 place plus the bias difference; subnormal codes: M times
 * the spacing, an exact product. */
__device__ __forceinline__ float kvl_e4m3_decode(uint32_t code)
{
    const uint32_t mag = code & 0x7Fu;
    uint32_t bits = mag < 0x08u ? __float_as_uint(static_cast<float>(mag) * 0x1p-9f) : (mag << 20) + (120u << 23);
    bits = mag == 0x7Fu ? KVL_F32_QNAN : bits;
    return __uint_as_float(((code & 0x80u) << 24) | bits);
}

__device__ __forceinline__ float kvl_e5m2_decode(uint32_t code)
{
    const uint32_t mag = code & 0x7Fu;
    uint32_t bits = mag < 0x04u ? __float_as_uint(static_cast<float>(mag) * 0x1p-16f) : (mag << 21) + (112u << 23);
    bits = mag == 0x7Cu ? KVL_F32_INF : mag > 0x7Cu ? KVL_F32_QNAN : bits;
    return __uint_as_float(((code & 0x80u) << 24) | bits);
}

/* the low nibble: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives */
__device__ __forceinline__ float kvl_e2m1_decode(uint32_t code)
{
    const uint32_t m = code & 0x7u;
    const uint32_t bits = m < 2u ? m * 0x3F000000u : ((m >> 1) + 126u) << 23 | (m & 1u) << 22;
    return __uint_as_float((code & 0x8u) << 28 | bits);
}

__device__ __forceinline__ float kvl_bf16_decode(uint32_t code) { return __uint_as_float(code << 16); }

/* 2^(code − 127); 0x00 is the float32 subnormal 2^-127, 0xFF NaN */
__device__ __forceinline__ float kvl_e8m0_decode(uint32_t code)
{
    return __uint_as_float(code == 0xFFu ? KVL_F32_QNAN : code == 0u ? 0x00400000u : code << 23);
}

/* ---- E8M0 scale rules for a finite, non-negative block maximum (formats/scale.c) ---------------------- */

__device__ __forceinline__ uint32_t kvl_e8m0_of_k(int k)
{
    k = k < -127 ? -127 : k;
    return k > 127 ? 0xFFu : static_cast<uint32_t>(k + 127);
}

/* OCP floor: 2^(floor(log2 amax) − emax) */
__device__ __forceinline__ uint32_t kvl_scale_ocp_floor(float amax, int emax)
{
    const uint32_t b = __float_as_uint(amax);
    return b < 0x00800000u ? 0u : kvl_e8m0_of_k(static_cast<int>(b >> 23) - 127 - emax);
}

/* RCEIL: 2^ceil(log2(amax / max)) from the bits of t = fl32(amax · fl32(1 / max)); a subnormal t is
 * decided against max·2^-127 as formats/scale.c does. */
__device__ __forceinline__ uint32_t kvl_scale_rceil(float amax, float max)
{
    if (__float_as_uint(amax) < 0x00800000u) return 0u;
    const uint32_t t = __float_as_uint(amax * (1.0f / max));
    if (t < 0x00800000u) return kvl_e8m0_of_k(amax > max * 0x1p-127f ? -126 : -127);
    return kvl_e8m0_of_k(static_cast<int>(t >> 23) - 127 + ((t & 0x007FFFFFu) != 0u));
}

#endif
