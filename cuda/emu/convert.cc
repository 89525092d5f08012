/* The conversion intrinsics of cuda_fp8.h, cuda_fp4.h and cuda_bf16.h on the host, through formats/.
 *
 * formats/ and the GPU round the same way (nearest, ties to even, subnormals kept; saturating casts
 * clamp overflow and infinities to the largest finite value). They differ only on NaN, where these
 * functions give what the GPU's cvt instructions give:
 *   E4M3, E5M2  any NaN → 0x7F (cvt.rn.satfinite.{e4m3,e5m2}x2.f32; formats keeps the sign, and E5M2's
 *               NaN there is 0x7E)
 *   E2M1        any NaN → +6, 0x7 (cvt.rn.satfinite.e2m1x2.f32; formats gives 0x8 or 0x0)
 *   bf16        any NaN → 0x7FFF (cvt.rn.bf16.f32; formats gives 0x7FC0 with the sign)
 * The kernels in cuda/element_cuda.cuh that must match formats/ bit for bit handle NaN themselves. */
#include <cmath>

#include "emu.h"

extern "C" {
#include "element.h"
}

__nv_fp8_storage_t __nv_cvt_float_to_fp8(float x, __nv_saturation_t sat, __nv_fp8_interpretation_t fmt)
{
    if (std::isnan(x)) return 0x7F;
    if (fmt == __NV_E4M3) return sat == __NV_SATFINITE ? kvf_e4m3_encode_sat(x) : kvf_e4m3_encode(x);
    return sat == __NV_SATFINITE ? kvf_e5m2_encode_sat(x) : kvf_e5m2_encode(x);
}

/* x.x in the low byte, x.y in the high byte */
__nv_fp8x2_storage_t __nv_cvt_float2_to_fp8x2(float2 x, __nv_saturation_t sat, __nv_fp8_interpretation_t fmt)
{
    return static_cast<__nv_fp8x2_storage_t>(__nv_cvt_float_to_fp8(x.x, sat, fmt) |
                                              __nv_cvt_float_to_fp8(x.y, sat, fmt) << 8);
}

/* x.x in the low nibble, x.y in the high nibble; only round-to-nearest is modelled */
__nv_fp4x2_storage_t __nv_cvt_float2_to_fp4x2(float2 x, __nv_fp4_interpretation_t fmt, cudaRoundMode mode)
{
    (void)fmt, (void)mode;
    const unsigned lo = std::isnan(x.x) ? 0x7u : kvf_e2m1_encode_sat(x.x);
    const unsigned hi = std::isnan(x.y) ? 0x7u : kvf_e2m1_encode_sat(x.y);
    return static_cast<__nv_fp4x2_storage_t>(lo | hi << 4);
}

__nv_bfloat16 __float2bfloat16_rn(float x)
{
    return __nv_bfloat16{std::isnan(x) ? static_cast<unsigned short>(0x7FFF) : kvf_bf16_encode(x)};
}
