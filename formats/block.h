/* Block schemes: a vector cut into blocks that share one scale, each element stored as a small code.
 *
 * Every quantiser takes x[n] and writes the element codes and one scale per block. A dequantiser is
 * named for the stored format, not for the rule that chose the scales, and writes
 * x̂_i = decode(code_i) × scale (× s_global for NVFP4). n must be a multiple of the block (KVF_ELENGTH
 * otherwise; n = 0 is an empty vector). The input is checked before anything is written: a NaN gives
 * KVF_ENAN, ±inf gives KVF_EINF, and the outputs are left untouched.
 *
 *   recipe          block  element  scale stored as       scale rule                   source
 *   mxfp8_e4m3      32     E4M3     E8M0                  2^(floor(log2 amax) − 8)     OCP MX v1.0, section 6.3
 *   mxfp4           32     E2M1     E8M0                  2^(floor(log2 amax) − 2)     OCP MX v1.0, section 6.3
 *   nvfp4           16     E2M1     E4M3, + FP32 global   e4m3(amax / 6 / s_global)    NVFP4, torchao
 *   fp4_v41         16     E2M1     E4M3                  e4m3(amax / 6), no global    V4.1 report, section 2.4.4
 *   fp8_ue8m0       128    E4M3     FP32, power of two    2^ceil(log2(amax / 448))     V3.2 act_quant
 *   fp8_e8m0_rceil  any    E4M3     E8M0                  2^ceil(log2(amax / 448))     V4 / V4.1 act_quant
 *   mxfp4_rceil     32     E2M1     E8M0                  2^ceil(log2(amax / 6))       V4 / V4.1 indexer
 *
 * Elements are a saturating round-to-nearest-even cast of the float32 quotient fl32(x / scale); with a
 * power-of-two scale the quotient and the decode are exact. The ceil rules compute ceil(log2) from the
 * bits of fl32(amax · fl32(1/max)) as DeepSeek's kernels do (scale.h).
 *
 * Amax floors (what an all-zero block gets; its elements are then zero codes, the sign kept):
 *   OCP floor: amax 0 is taken as 2^-126 (scale.h), so the scale clamps to 2^-127 (E8M0 code 0x00);
 *   fp8_ue8m0, fp8_e8m0_rceil: amax ≥ 1e-4 (DeepSeek act_quant), scale 2^-22;
 *   mxfp4_rceil: amax ≥ 6·2^-126, scale 2^-126 (E8M0 code 0x01);
 *   fp4_v41: amax ≥ 6·2^-9, scale 2^-9 (E4M3 code 0x01, its smallest subnormal);
 *   nvfp4: the block scale clamps to [2^-6, 448] before its cast, so 2^-6 (E4M3 code 0x08).
 *
 * Near float32's maximum (amax ≥ 248·2^120 for the E4M3 round-up rules, ≥ 3.5·2^126 for mxfp4_rceil) the
 * scale still fits (2^120, 2^126), but a quotient would round to an element whose decode is 2^128 = inf:
 * such elements saturate at the largest magnitude with a finite decode (240 and 3 at those scales), so
 * every finite input decodes finite. NVFP4 likewise above about 0.94·FLT_MAX, where s_global times the
 * block scale, rounded up by as much as 1/16, makes 6 times the divisor overflow. DeepSeek's kernels
 * would decode inf there; no recipe reaches it.
 *
 * Packing: E4M3 codes one per byte, in element order. E2M1 codes two per byte: element 2j in the LOW
 * nibble of byte j, element 2j+1 in the HIGH nibble (DeepGEMM, PyTorch float4_e2m1fn_x2). Scales are
 * one per block in block order.
 *
 * The check, the quantisers and the dequantisers run the variant isa.h chooses for the CPU (AVX-512,
 * AVX2+FMA or baseline x86-64); every variant writes the same bytes.
 *
 * Shapes use n for the vector length; [n/32] etc. count blocks. */
#ifndef KVF_BLOCK_H
#define KVF_BLOCK_H

#include <stddef.h>
#include <stdint.h>

enum {
    KVF_OK = 0,
    KVF_ELENGTH = 1,   /* the block does not divide n, or a block of 0 */
    KVF_ENAN = 2,      /* a NaN handed to a quantiser */
    KVF_EINF = 3,      /* an infinity handed to a quantiser */
    KVF_ESCALE = 4,    /* a global scale that is not a positive finite number */
    KVF_ELAYOUT = 5,   /* an unknown row layout (rows.h) */
};

/* A fixed message for each code above ("unknown error code" otherwise). */
const char *kvf_strerror(int err);

/* x[n] → KVF_ENAN if any element is NaN (it outranks inf), else KVF_EINF if any is ±inf, else KVF_OK.
 * The check every quantiser runs before it writes anything. */
int kvf_check_finite(const float *x, size_t n);

#define KVF_MX_BLOCK          32    /* OCP MX v1.0: k = 32 */
#define KVF_NVFP4_BLOCK       16
#define KVF_FP4_V41_BLOCK     16
#define KVF_FP8_UE8M0_BLOCK   128   /* V3.2 act_quant block_size */
#define KVF_MXFP4_RCEIL_BLOCK 32

/* OCP MXFP8 with E4M3 elements. x[n] → codes[n] (E4M3), scales[n/32] (E8M0).
 * Scale: OCP floor rule, 2^(floor(log2 amax) − 8); an element whose quotient exceeds 448 saturates. */
int kvf_quant_mxfp8_e4m3(uint8_t *codes, uint8_t *scales, const float *x, size_t n);
/* codes[n], scales[n/32] → x[n]; an E8M0 NaN scale (0xFF) decodes its whole block to NaN.
 * The same as kvf_dequant_fp8_e8m0 with a block of 32. */
int kvf_dequant_mxfp8_e4m3(float *x, const uint8_t *codes, const uint8_t *scales, size_t n);

/* OCP MXFP4. x[n] → codes[n/2] (packed E2M1, element 2j low nibble), scales[n/32] (E8M0).
 * Scale: OCP floor rule, 2^(floor(log2 amax) − 2); quotients above 6 saturate to ±6. */
int kvf_quant_mxfp4(uint8_t *codes, uint8_t *scales, const float *x, size_t n);
/* codes[n/2], scales[n/32] → x[n]; also decodes kvf_quant_mxfp4_rceil's output (the same bytes). */
int kvf_dequant_mxfp4(float *x, const uint8_t *codes, const uint8_t *scales, size_t n);

/* The FP32 per-tensor scale of NVFP4: fl32(amax_tensor / (448·6)), raised to FLT_MIN (2^-126) when
 * smaller so that an all-zero tensor has a defined, normal scale. NaN or inf in, NaN out. */
float kvf_nvfp4_global_scale(float amax_tensor);

/* NVFP4, two levels. x[n] → codes[n/2] (packed E2M1, element 2j low nibble), scales[n/16] (E4M3).
 * s_block = e4m3_rne(clamp(fl32(fl32(amax_block / 6) / s_global), 2^-6, 448));
 * q_i = e2m1_rne(clamp(fl32(x_i / fl32(s_global × s_block)), −6, 6)). s_global must be positive and
 * finite (KVF_ESCALE otherwise); kvf_nvfp4_global_scale gives the usual one. */
int kvf_quant_nvfp4(uint8_t *codes, uint8_t *scales, const float *x, size_t n, float s_global);
/* codes[n/2], scales[n/16] → x[n], x̂_i = q_i × fl32(s_global × s_block). */
int kvf_dequant_nvfp4(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, float s_global);

/* DeepSeek V4.1 FP4 (NVFP4 without the global scale; DeepSeek-V4.1 report, section 2.4.4, and its
 * inference code's fp4_quant_kernel).
 * x[n] → codes[n/2] (packed E2M1, element 2j low nibble), scales[n/16] (E4M3).
 * amax = max(amax, 6·2^-9); s = e4m3_satfinite_rne(fl32(amax / 6)), so 2^-9 ≤ s ≤ 448 and s is not
 * in general a power of two; q_i = e2m1_rne(clamp(fl32(x_i / s), −6, 6)). */
int kvf_quant_fp4_v41(uint8_t *codes, uint8_t *scales, const float *x, size_t n);
/* codes[n/2], scales[n/16] → x[n], x̂_i = q_i × s (exact: 2 + 4 significant bits). */
int kvf_dequant_fp4_v41(float *x, const uint8_t *codes, const uint8_t *scales, size_t n);

/* DeepSeek V3.2 act_quant with scale_fmt "ue8m0". x[n] → codes[n] (E4M3), scales[n/128] (FP32).
 * amax = max(amax, 1e-4); s = 2^ceil(log2(amax / 448)) (rounded up, so no element overflows);
 * q_i = e4m3_rne(clamp(x_i / s, −448, 448)). */
int kvf_quant_fp8_ue8m0(uint8_t *codes, float *scales, const float *x, size_t n);
/* codes[n], scales[n/128] → x[n]. */
int kvf_dequant_fp8_ue8m0(float *x, const uint8_t *codes, const float *scales, size_t n);

/* DeepSeek V4 / V4.1 act_quant with E8M0 scales, one per `block` elements (64 for the V4 main row,
 * 32 for the V4.1 window row). x[n] → codes[n] (E4M3), scales[n/block] (E8M0).
 * Same rule as kvf_quant_fp8_ue8m0: amax ≥ 1e-4, scale 2^ceil(log2(amax / 448)). */
int kvf_quant_fp8_e8m0_rceil(uint8_t *codes, uint8_t *scales, const float *x, size_t n, size_t block);
/* E4M3 codes with one E8M0 scale per `block`, whatever rule chose the scales.
 * codes[n], scales[n/block] → x[n]; an E8M0 NaN scale (0xFF) decodes its whole block to NaN. */
int kvf_dequant_fp8_e8m0(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, size_t block);

/* DeepSeek V4 / V4.1 indexer keys: MXFP4 with the round-up scale.
 * x[n] → codes[n/2] (packed E2M1, element 2j low nibble), scales[n/32] (E8M0).
 * amax = max(amax, 6·2^-126); s = 2^ceil(log2(amax / 6)); q_i = e2m1_rne(clamp(x_i / s, −6, 6)). */
int kvf_quant_mxfp4_rceil(uint8_t *codes, uint8_t *scales, const float *x, size_t n);
/* Decode with kvf_dequant_mxfp4: the bytes are MXFP4's, only the scale rule differs. */

#endif
