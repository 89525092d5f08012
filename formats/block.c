/* Block schemes (block.h): one scale per block, elements a saturating RNE cast of fl32(x / scale).
 * The check, the quantisers and the dequantisers are compiled once per instruction set (isa.h). */
#include "block.h"

#include <float.h>
#include <math.h>

#include "element.h"
#include "element_inline.h"
#include "isa.h"
#include "scale.h"

/* DeepSeek act_quant's amax floor (V3.2 / V4 / V4.1 inference kernel.py). */
#define ACT_QUANT_AMAX_MIN 1e-4f
/* The FP4 indexer kernel floors amax at 6·2^-126, so its scale never goes below 2^-126. */
#define FP4_RCEIL_AMAX_MIN (6.0f * FLT_MIN)
/* The V4.1 FP4 kernel floors amax at 6·2^-9, so its E4M3 scale is at least 2^-9, E4M3's smallest. */
#define FP4_V41_AMAX_MIN (6.0f * 0x1p-9f)
/* NVFP4's block scale is clamped to [E4M3 min normal, E4M3 max] before its cast (torchao). */
#define NVFP4_SCALE_MIN 0x1p-6f

static int check_length(size_t n, size_t block)
{
    return block != 0 && n % block == 0 ? KVF_OK : KVF_ELENGTH;
}

/* |x| as float32 bits: at most 0x7FFFFFFF, so it fits an int32_t and compares as a signed integer,
 * which SSE2 vectors compare directly (an unsigned compare costs two more operations each). */
static inline int32_t abs_bits(float x)
{
    return (int32_t)(float_bits(x) & F32_ABS);
}

static inline int32_t max_i32(int32_t a, int32_t b)
{
    return a > b ? a : b;
}

static inline int32_t min_i32(int32_t a, int32_t b)
{
    return a < b ? a : b;
}

/* Running maxima that max_abs_bits keeps side by side: with a fixed count the compiler holds them in
 * vector registers, where one running maximum would leave the loop scalar. */
#define MAX_ABS_LANES 8

/* x[n] → the largest |x_i| as float32 bits, sign cleared. Read as integers, the bits of non-negative
 * floats sort as their values do, inf (F32_INF) above every finite value and every NaN above inf: one
 * max gives a block's amax and tells whether a vector holds an inf or a NaN. */
static inline uint32_t max_abs_bits(const float *x, size_t n)
{
    int32_t lane[MAX_ABS_LANES] = {0};
    size_t rows = n / MAX_ABS_LANES;
    for (size_t r = 0; r < rows; r++) {
        const float *row = x + r * MAX_ABS_LANES;
        for (size_t l = 0; l < MAX_ABS_LANES; l++) lane[l] = max_i32(lane[l], abs_bits(row[l]));
    }
    int32_t m = 0;
    for (size_t i = rows * MAX_ABS_LANES; i < n; i++) m = max_i32(m, abs_bits(x[i]));
    for (size_t l = 0; l < MAX_ABS_LANES; l++) m = max_i32(m, lane[l]);
    return (uint32_t)m;
}

int KVF_ISA_FN(kvf_check_finite)(const float *x, size_t n)
{
    uint32_t m = max_abs_bits(x, n);
    return m > F32_INF ? KVF_ENAN : m == F32_INF ? KVF_EINF : KVF_OK;
}

static int check_input(const float *x, size_t n, size_t block)
{
    int err = check_length(n, block);
    return err != KVF_OK ? err : KVF_ISA_FN(kvf_check_finite)(x, n);
}

/* x[k] → max |x_i| (+0 for an all-zero block); x is finite (checked first). */
static float block_amax(const float *x, size_t k)
{
    return bits_float(max_abs_bits(x, k));
}

/* max and min of two non-negative floats (+inf allowed, NaN not), compared as integers: their bits
 * sort as their values do (max_abs_bits). fmaxf is a library call at -O2 and a ?: on floats a branch. */
static inline float max_nonneg(float a, float b)
{
    return bits_float((uint32_t)max_i32(abs_bits(a), abs_bits(b)));
}

static inline float min_nonneg(float a, float b)
{
    return bits_float((uint32_t)min_i32(abs_bits(a), abs_bits(b)));
}

/* 1/s of a power-of-two scale s = 2^k, |k| ≤ 127. s and 2^-k are both float32 numbers (2^-127, E8M0
 * code 0x00, as a subnormal), so 1/s is exact and fl32(x · (1/s)) and fl32(x / s) round the same real
 * number: they agree bit for bit, overflow and underflow included. A scale that is not a power of two
 * has no exact reciprocal and is divided by (encode_e2m1_block_over). */
static float power_of_two_reciprocal(float s)
{
    return 1.0f / s;
}

/* 1/s of the scale with E8M0 code c */
static float e8m0_reciprocal(uint8_t c)
{
    return power_of_two_reciprocal(kvf_e8m0_decode(c));
}

/* x[k] → codes[k], E4M3 of fl32(x_i · r) = fl32(x_i / s), r = 1/s for a power-of-two s, saturating at
 * ±448 (the clamp DeepSeek applies first). */
static void encode_e4m3_block_times(uint8_t *codes, const float *x, size_t k, float r)
{
#pragma omp simd
    for (size_t i = 0; i < k; i++) codes[i] = e4m3_sat_code(x[i] * r);
}

/* The E2M1 recipes with an E8M0 scale share one block size. */
#define E8M0_SCALED_BLOCK KVF_MX_BLOCK
_Static_assert(KVF_MXFP4_RCEIL_BLOCK == E8M0_SCALED_BLOCK, "MXFP4 and its rceil form have different blocks");

/* x[32] → packed[16], E2M1 of fl32(x_i · r) = fl32(x_i / s), r = 1/s for a power-of-two s, saturating
 * at ±6; element 2j in the low nibble of byte j. The codes come from one loop over the 32 elements, and
 * only then are packed: a loop over the pairs reads every other value, which the compiler vectorised in
 * 128 bits (MXFP4 quantised 1.2 G values/s in L2 that way, 1.64 this way). */
static void encode_e2m1_block_times(uint8_t *packed, const float *x, float r)
{
    uint8_t code[E8M0_SCALED_BLOCK];
#pragma omp simd
    for (size_t i = 0; i < E8M0_SCALED_BLOCK; i++) code[i] = e2m1_code(x[i] * r);
    for (size_t j = 0; j < E8M0_SCALED_BLOCK / 2; j++) packed[j] = e2m1_nibbles(code[2 * j], code[2 * j + 1]);
}

/* Near float32's maximum a round-up scale leaves the block's largest codes with no finite decode: with
 * s = 2^120 (E4M3, amax ≥ 248·2^120) a quotient rounds to 256 and 256·2^120 = 2^128; with s = 2^126
 * (E2M1, amax ≥ 3.5·2^126) it rounds to 4 and 4·2^126 = 2^128. The scale itself always fits E8M0 and
 * float32 (ceil(log2(FLT_MAX / 448)) = 120, ceil(log2(FLT_MAX / 6)) = 126). Such codes saturate at the
 * largest magnitude whose decode is finite (240 and 3 at those scales), as quotients above the element's
 * maximum saturate at it: decode(encode(x)) stays finite for every finite x. NVFP4's divisor s_global ·
 * e4m3(scale) can exceed amax/6 by the scale's rounding (up to 1/16), so 6 times it passes FLT_MAX for
 * amax above about 0.94·FLT_MAX: its codes saturate the same way. Every other scale keeps 448·s and 6·s
 * finite and its codes as they are. */

/* the largest magnitude code at most `top` (the element's maximum) whose value times s is finite */
static uint8_t finite_magnitude(float (*value)(uint8_t), uint8_t top, float s)
{
    while (top > 0 && isinf(value(top) * s)) top--;
    return top;
}

/* codes[k] of a block with scale s, magnitudes lowered to the largest with a finite decode */
static void e4m3_block_satfinite(uint8_t *codes, size_t k, float s)
{
    if (!isinf(448.0f * s)) return;
    const uint8_t m = finite_magnitude(e4m3_to_float, 0x7E, s);   /* 448 */
    for (size_t i = 0; i < k; i++)
        if ((codes[i] & 0x7Fu) > m) codes[i] = (uint8_t)((codes[i] & 0x80u) | m);
}

/* packed[k/2] of a block with scale s, both nibbles of each byte as in e4m3_block_satfinite */
static void e2m1_block_satfinite(uint8_t *packed, size_t k, float s)
{
    if (!isinf(6.0f * s)) return;
    const uint8_t m = finite_magnitude(kvf_e2m1_decode, 7, s);      /* 6 */
    for (size_t j = 0; j < k / 2; j++) {
        uint8_t lo = packed[j] & 0x0Fu, hi = packed[j] >> 4;
        if ((lo & 7u) > m) lo = (uint8_t)((lo & 8u) | m);
        if ((hi & 7u) > m) hi = (uint8_t)((hi & 8u) | m);
        packed[j] = e2m1_nibbles(lo, hi);
    }
}

/* x[n] in blocks of k, scales[n/k] (E8M0) → codes[n]: every block's E4M3 codes, times the reciprocal of
 * its scale. The scales are all chosen before (a loop of their own), so a block's loop starts from a
 * stored scale instead of waiting on its maximum and its scale rule. */
static void encode_e4m3_blocks_e8m0(uint8_t *codes, const float *x, size_t n, size_t k,
                                    const uint8_t *scales)
{
    for (size_t b = 0; b < n / k; b++)
        encode_e4m3_block_times(codes + b * k, x + b * k, k, e8m0_reciprocal(scales[b]));
    for (size_t b = 0; b < n / k; b++) e4m3_block_satfinite(codes + b * k, k, kvf_e8m0_decode(scales[b]));
}

/* x[n] in blocks of 32, scales[n/32] (E8M0) → packed[n/2]: every block's E2M1 codes, as above. */
static void encode_e2m1_blocks_e8m0(uint8_t *packed, const float *x, size_t n, const uint8_t *scales)
{
    const size_t k = E8M0_SCALED_BLOCK;
    for (size_t b = 0; b < n / k; b++)
        encode_e2m1_block_times(packed + b * k / 2, x + b * k, e8m0_reciprocal(scales[b]));
    for (size_t b = 0; b < n / k; b++) e2m1_block_satfinite(packed + b * k / 2, k, kvf_e8m0_decode(scales[b]));
}

/* The FP4 recipes with an E4M3 scale share one block size. */
#define E4M3_SCALED_BLOCK KVF_NVFP4_BLOCK
_Static_assert(KVF_FP4_V41_BLOCK == E4M3_SCALED_BLOCK, "V4.1 FP4 and NVFP4 blocks differ");

/* x[16] → packed[8], E2M1 of fl32(x_i / s) saturating at ±6, for any scale s; nibbles as above.
 * 16 elements pack into 8 bytes, less than one vector of bytes, so a loop over the pairs would stay
 * scalar: the quotients and codes go through one loop over the 16 elements, and only the packing of
 * the nibbles is left scalar. */
static void encode_e2m1_block_over(uint8_t *packed, const float *x, float s)
{
    uint8_t code[E4M3_SCALED_BLOCK];
#pragma omp simd
    for (size_t i = 0; i < E4M3_SCALED_BLOCK; i++) code[i] = e2m1_code(x[i] / s);
    for (size_t j = 0; j < E4M3_SCALED_BLOCK / 2; j++) packed[j] = e2m1_nibbles(code[2 * j], code[2 * j + 1]);
}

/* codes[k] → x[k] = e4m3(code) × s. Under a NaN scale a NaN code keeps its own NaN, sign included, and
 * every other element takes the scale's: the product of two NaNs is the NaN of the operand the
 * instruction reads first, an order the compiler may choose differently in the two builds (isa.h). */
static void decode_e4m3_block(float *x, const uint8_t *codes, size_t k, float s)
{
    KVF_ISA_FN(kvf_e4m3_decode_n)(x, codes, k);
    if (isnan(s)) {
        for (size_t i = 0; i < k; i++) x[i] = isnan(x[i]) ? x[i] : s;
        return;
    }
#pragma omp simd
    for (size_t i = 0; i < k; i++) x[i] *= s;
}

/* packed[k/2] → x[k] = e2m1(nibble) × s; element 2j from the low nibble of byte j. Each byte's pair of
 * values is scaled as it is read: decoding the block into x first and scaling x in a second pass reads
 * a vector back from eight 8-byte stores just made, which no store forwards (NVFP4's 16-value blocks
 * ran at 0.6 of the copy that way, 1.0 this way). */
static void decode_e2m1_block(float *x, const uint8_t *packed, size_t k, float s)
{
    for (size_t j = 0; j < k / 2; j++) {
        const float *pair = kvf_e2m1_pairs[packed[j]];
        x[2 * j] = pair[0] * s;
        x[2 * j + 1] = pair[1] * s;
    }
}

/* E8M0 code of DeepSeek act_quant's scale for a block with maximum amax: 2^ceil(log2(amax' / 448)),
 * amax' = max(amax, 1e-4). */
static uint8_t act_quant_scale(float amax)
{
    return kvf_scale_rceil(max_nonneg(amax, ACT_QUANT_AMAX_MIN), KVF_E4M3);
}

int KVF_ISA_FN(kvf_quant_mxfp8_e4m3)(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    int err = check_input(x, n, KVF_MX_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_MX_BLOCK; b++)
        scales[b] = kvf_scale_ocp_floor(block_amax(x + b * KVF_MX_BLOCK, KVF_MX_BLOCK), KVF_E4M3);
    encode_e4m3_blocks_e8m0(codes, x, n, KVF_MX_BLOCK, scales);
    return KVF_OK;
}

int KVF_ISA_FN(kvf_dequant_fp8_e8m0)(float *x, const uint8_t *codes, const uint8_t *scales, size_t n,
                                     size_t block);

int KVF_ISA_FN(kvf_dequant_mxfp8_e4m3)(float *x, const uint8_t *codes, const uint8_t *scales, size_t n)
{
    return KVF_ISA_FN(kvf_dequant_fp8_e8m0)(x, codes, scales, n, KVF_MX_BLOCK);
}

int KVF_ISA_FN(kvf_quant_mxfp4)(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    int err = check_input(x, n, KVF_MX_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_MX_BLOCK; b++)
        scales[b] = kvf_scale_ocp_floor(block_amax(x + b * KVF_MX_BLOCK, KVF_MX_BLOCK), KVF_E2M1);
    encode_e2m1_blocks_e8m0(codes, x, n, scales);
    return KVF_OK;
}

int KVF_ISA_FN(kvf_dequant_mxfp4)(float *x, const uint8_t *codes, const uint8_t *scales, size_t n)
{
    int err = check_length(n, KVF_MX_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_MX_BLOCK; b++)
        decode_e2m1_block(x + b * KVF_MX_BLOCK, codes + b * KVF_MX_BLOCK / 2, KVF_MX_BLOCK,
                          kvf_e8m0_decode(scales[b]));
    return KVF_OK;
}

static int check_global_scale(float s_global)
{
    return isfinite(s_global) && s_global > 0.0f ? KVF_OK : KVF_ESCALE;
}

/* x[m][16], divisor[m] → packed[m][8], block b's elements as E2M1 codes of fl32(x_i / divisor[b]) */
static void encode_e2m1_blocks_over(uint8_t *packed, const float *x, const float *divisor, size_t m)
{
    for (size_t b = 0; b < m; b++)
        encode_e2m1_block_over(packed + b * E4M3_SCALED_BLOCK / 2, x + b * E4M3_SCALED_BLOCK, divisor[b]);
}

/* Blocks whose scales the E4M3-scaled recipes compute together: the maxima of a batch are gathered
 * first, the scale rule and the divisors then run as one vectorised loop over them, and each block's
 * division starts from a stored divisor instead of waiting on its own maximum, scale and decode. */
#define SCALE_BATCH 64

/* blocks left from b0 on, at most SCALE_BATCH */
static size_t batch_size(size_t n_blocks, size_t b0)
{
    return n_blocks - b0 < SCALE_BATCH ? n_blocks - b0 : SCALE_BATCH;
}

/* x[m][k] → amax[m], the maximum |x| of each block */
static void block_amaxes(float *amax, const float *x, size_t m, size_t k)
{
    for (size_t b = 0; b < m; b++) amax[b] = block_amax(x + b * k, k);
}

/* E4M3 code of NVFP4's block scale for a block with maximum amax under the global scale s_global. */
static uint8_t nvfp4_block_scale(float amax, float s_global)
{
    float s = amax / E2M1_MAX / s_global;
    return e4m3_sat_code(min_nonneg(max_nonneg(s, NVFP4_SCALE_MIN), E4M3_MAX));
}

int KVF_ISA_FN(kvf_quant_nvfp4)(uint8_t *codes, uint8_t *scales, const float *x, size_t n, float s_global)
{
    int err = check_global_scale(s_global);
    if (err == KVF_OK) err = check_input(x, n, KVF_NVFP4_BLOCK);
    if (err != KVF_OK) return err;
    size_t n_blocks = n / KVF_NVFP4_BLOCK;
    for (size_t b0 = 0; b0 < n_blocks; b0 += SCALE_BATCH) {
        size_t m = batch_size(n_blocks, b0);
        float amax[SCALE_BATCH], divisor[SCALE_BATCH];
        block_amaxes(amax, x + b0 * KVF_NVFP4_BLOCK, m, KVF_NVFP4_BLOCK);
#pragma omp simd
        for (size_t b = 0; b < m; b++) {
            uint8_t code = nvfp4_block_scale(amax[b], s_global);
            scales[b0 + b] = code;
            divisor[b] = s_global * e4m3_to_float(code);
        }
        encode_e2m1_blocks_over(codes + b0 * KVF_NVFP4_BLOCK / 2, x + b0 * KVF_NVFP4_BLOCK, divisor, m);
        for (size_t b = 0; b < m; b++)   /* s_global · 448 can round a block's divisor above amax/6 near FLT_MAX */
            e2m1_block_satfinite(codes + (b0 + b) * KVF_NVFP4_BLOCK / 2, KVF_NVFP4_BLOCK, divisor[b]);
    }
    return KVF_OK;
}

int KVF_ISA_FN(kvf_dequant_nvfp4)(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, float s_global)
{
    int err = check_global_scale(s_global);
    if (err == KVF_OK) err = check_length(n, KVF_NVFP4_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_NVFP4_BLOCK; b++)
        decode_e2m1_block(x + b * KVF_NVFP4_BLOCK, codes + b * KVF_NVFP4_BLOCK / 2, KVF_NVFP4_BLOCK,
                          s_global * e4m3_to_float(scales[b]));
    return KVF_OK;
}

/* E4M3 code of the V4.1 FP4 block scale for a block with maximum amax. */
static uint8_t fp4_v41_block_scale(float amax)
{
    return e4m3_sat_code(max_nonneg(amax, FP4_V41_AMAX_MIN) / E2M1_MAX);
}

int KVF_ISA_FN(kvf_quant_fp4_v41)(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    int err = check_input(x, n, KVF_FP4_V41_BLOCK);
    if (err != KVF_OK) return err;
    size_t n_blocks = n / KVF_FP4_V41_BLOCK;
    for (size_t b0 = 0; b0 < n_blocks; b0 += SCALE_BATCH) {
        size_t m = batch_size(n_blocks, b0);
        float amax[SCALE_BATCH], divisor[SCALE_BATCH];
        block_amaxes(amax, x + b0 * KVF_FP4_V41_BLOCK, m, KVF_FP4_V41_BLOCK);
#pragma omp simd
        for (size_t b = 0; b < m; b++) {
            uint8_t code = fp4_v41_block_scale(amax[b]);
            scales[b0 + b] = code;
            divisor[b] = e4m3_to_float(code);
        }
        encode_e2m1_blocks_over(codes + b0 * KVF_FP4_V41_BLOCK / 2, x + b0 * KVF_FP4_V41_BLOCK, divisor, m);
    }
    return KVF_OK;
}

int KVF_ISA_FN(kvf_dequant_fp4_v41)(float *x, const uint8_t *codes, const uint8_t *scales, size_t n)
{
    int err = check_length(n, KVF_FP4_V41_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_FP4_V41_BLOCK; b++)
        decode_e2m1_block(x + b * KVF_FP4_V41_BLOCK, codes + b * KVF_FP4_V41_BLOCK / 2, KVF_FP4_V41_BLOCK,
                          e4m3_to_float(scales[b]));
    return KVF_OK;
}

int KVF_ISA_FN(kvf_quant_fp8_ue8m0)(uint8_t *codes, float *scales, const float *x, size_t n)
{
    int err = check_input(x, n, KVF_FP8_UE8M0_BLOCK);
    if (err != KVF_OK) return err;
    const size_t k = KVF_FP8_UE8M0_BLOCK;
    for (size_t b = 0; b < n / k; b++) scales[b] = kvf_e8m0_decode(act_quant_scale(block_amax(x + b * k, k)));
    for (size_t b = 0; b < n / k; b++)
        encode_e4m3_block_times(codes + b * k, x + b * k, k, power_of_two_reciprocal(scales[b]));
    for (size_t b = 0; b < n / k; b++) e4m3_block_satfinite(codes + b * k, k, scales[b]);
    return KVF_OK;
}

int KVF_ISA_FN(kvf_dequant_fp8_ue8m0)(float *x, const uint8_t *codes, const float *scales, size_t n)
{
    int err = check_length(n, KVF_FP8_UE8M0_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_FP8_UE8M0_BLOCK; b++)
        decode_e4m3_block(x + b * KVF_FP8_UE8M0_BLOCK, codes + b * KVF_FP8_UE8M0_BLOCK,
                          KVF_FP8_UE8M0_BLOCK, scales[b]);
    return KVF_OK;
}

int KVF_ISA_FN(kvf_quant_fp8_e8m0_rceil)(uint8_t *codes, uint8_t *scales, const float *x, size_t n, size_t block)
{
    int err = check_input(x, n, block);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / block; b++) scales[b] = act_quant_scale(block_amax(x + b * block, block));
    encode_e4m3_blocks_e8m0(codes, x, n, block, scales);
    return KVF_OK;
}

int KVF_ISA_FN(kvf_dequant_fp8_e8m0)(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, size_t block)
{
    int err = check_length(n, block);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / block; b++)
        decode_e4m3_block(x + b * block, codes + b * block, block, kvf_e8m0_decode(scales[b]));
    return KVF_OK;
}

/* E8M0 code of the indexer's scale for a block with maximum amax: 2^ceil(log2(amax' / 6)),
 * amax' = max(amax, 6·2^-126). */
static uint8_t mxfp4_rceil_block_scale(float amax)
{
    return kvf_scale_rceil(max_nonneg(amax, FP4_RCEIL_AMAX_MIN), KVF_E2M1);
}

int KVF_ISA_FN(kvf_quant_mxfp4_rceil)(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    int err = check_input(x, n, KVF_MXFP4_RCEIL_BLOCK);
    if (err != KVF_OK) return err;
    const size_t k = KVF_MXFP4_RCEIL_BLOCK;
    for (size_t b = 0; b < n / k; b++) scales[b] = mxfp4_rceil_block_scale(block_amax(x + b * k, k));
    encode_e2m1_blocks_e8m0(codes, x, n, scales);
    return KVF_OK;
}

#if KVF_ISA_ONCE

const char *kvf_strerror(int err)
{
    switch (err) {
    case KVF_OK:      return "ok";
    case KVF_ELENGTH: return "length is not a multiple of the block size";
    case KVF_ENAN:    return "NaN in the input of a quantiser";
    case KVF_EINF:    return "infinity in the input of a quantiser";
    case KVF_ESCALE:  return "global scale is not a positive finite number";
    case KVF_ELAYOUT: return "unknown row layout";
    default:          return "unknown error code";
    }
}

float kvf_nvfp4_global_scale(float amax_tensor)
{
    if (!isfinite(amax_tensor)) return NAN;
    float s = amax_tensor / (float)(kvf_element_max(KVF_E4M3) * kvf_element_max(KVF_E2M1));
    return s < FLT_MIN ? FLT_MIN : s;
}

/* The public check, quantisers and dequantisers call the active variant. */
KVF_ISA_DISPATCH(int, kvf_check_finite, (const float *x, size_t n), (x, n))
KVF_ISA_DISPATCH(int, kvf_quant_mxfp8_e4m3, (uint8_t *codes, uint8_t *scales, const float *x, size_t n),
                 (codes, scales, x, n))
KVF_ISA_DISPATCH(int, kvf_dequant_mxfp8_e4m3, (float *x, const uint8_t *codes, const uint8_t *scales, size_t n),
                 (x, codes, scales, n))
KVF_ISA_DISPATCH(int, kvf_quant_mxfp4, (uint8_t *codes, uint8_t *scales, const float *x, size_t n),
                 (codes, scales, x, n))
KVF_ISA_DISPATCH(int, kvf_dequant_mxfp4, (float *x, const uint8_t *codes, const uint8_t *scales, size_t n),
                 (x, codes, scales, n))
KVF_ISA_DISPATCH(int, kvf_quant_nvfp4, (uint8_t *codes, uint8_t *scales, const float *x, size_t n, float s_global),
                 (codes, scales, x, n, s_global))
KVF_ISA_DISPATCH(int, kvf_dequant_nvfp4,
                 (float *x, const uint8_t *codes, const uint8_t *scales, size_t n, float s_global),
                 (x, codes, scales, n, s_global))
KVF_ISA_DISPATCH(int, kvf_quant_fp4_v41, (uint8_t *codes, uint8_t *scales, const float *x, size_t n),
                 (codes, scales, x, n))
KVF_ISA_DISPATCH(int, kvf_dequant_fp4_v41, (float *x, const uint8_t *codes, const uint8_t *scales, size_t n),
                 (x, codes, scales, n))
KVF_ISA_DISPATCH(int, kvf_quant_fp8_ue8m0, (uint8_t *codes, float *scales, const float *x, size_t n),
                 (codes, scales, x, n))
KVF_ISA_DISPATCH(int, kvf_dequant_fp8_ue8m0, (float *x, const uint8_t *codes, const float *scales, size_t n),
                 (x, codes, scales, n))
KVF_ISA_DISPATCH(int, kvf_quant_fp8_e8m0_rceil,
                 (uint8_t *codes, uint8_t *scales, const float *x, size_t n, size_t block),
                 (codes, scales, x, n, block))
KVF_ISA_DISPATCH(int, kvf_dequant_fp8_e8m0,
                 (float *x, const uint8_t *codes, const uint8_t *scales, size_t n, size_t block),
                 (x, codes, scales, n, block))
KVF_ISA_DISPATCH(int, kvf_quant_mxfp4_rceil, (uint8_t *codes, uint8_t *scales, const float *x, size_t n),
                 (codes, scales, x, n))

#endif /* KVF_ISA_ONCE */
