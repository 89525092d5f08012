/* Block schemes (block.h): one scale per block, elements a saturating RNE cast of fl32(x / scale). */
#include "block.h"

#include <float.h>
#include <math.h>

#include "element.h"
#include "scale.h"

/* DeepSeek act_quant's amax floor (V3.2 / V4 / V4.1 inference kernel.py). */
#define ACT_QUANT_AMAX_MIN 1e-4f
/* The FP4 indexer kernel floors amax at 6·2^-126, so its scale never goes below 2^-126. */
#define FP4_RCEIL_AMAX_MIN (6.0f * FLT_MIN)
/* The V4.1 FP4 kernel floors amax at 6·2^-9, so its E4M3 scale is at least 2^-9, E4M3's smallest. */
#define FP4_V41_AMAX_MIN (6.0f * 0x1p-9f)
/* NVFP4's block scale is clamped to [E4M3 min normal, E4M3 max] before its cast (torchao). */
#define NVFP4_SCALE_MIN 0x1p-6f

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

static int check_length(size_t n, size_t block)
{
    return block != 0 && n % block == 0 ? KVF_OK : KVF_ELENGTH;
}

int kvf_check_finite(const float *x, size_t n)
{
    int err = KVF_OK;
    for (size_t i = 0; i < n; i++) {
        if (isnan(x[i])) return KVF_ENAN;
        if (isinf(x[i])) err = KVF_EINF;
    }
    return err;
}

static int check_input(const float *x, size_t n, size_t block)
{
    int err = check_length(n, block);
    return err != KVF_OK ? err : kvf_check_finite(x, n);
}

/* x[k] → max |x_i| (0 for an all-zero block). */
static float block_amax(const float *x, size_t k)
{
    float amax = 0.0f;
    for (size_t i = 0; i < k; i++) amax = fmaxf(amax, fabsf(x[i]));
    return amax;
}

static float e2m1_max(void)
{
    return (float)kvf_element_max(KVF_E2M1);
}

/* x[k] → codes[k], E4M3 of fl32(x_i / s), saturating at ±448 (the clamp DeepSeek applies first). */
static void encode_e4m3_block(uint8_t *codes, const float *x, size_t k, float s)
{
    for (size_t i = 0; i < k; i++) codes[i] = kvf_e4m3_encode_sat(x[i] / s);
}

/* x[k] → packed[k/2], E2M1 of fl32(x_i / s) saturating at ±6; element 2j in the low nibble of byte j. */
static void encode_e2m1_block(uint8_t *packed, const float *x, size_t k, float s)
{
    for (size_t j = 0; j < k / 2; j++) {
        uint8_t lo = kvf_e2m1_encode_sat(x[2 * j] / s);
        uint8_t hi = kvf_e2m1_encode_sat(x[2 * j + 1] / s);
        packed[j] = (uint8_t)((lo & 0x0F) | (hi << 4));
    }
}

/* codes[k] → x[k] = e4m3(code) × s. */
static void decode_e4m3_block(float *x, const uint8_t *codes, size_t k, float s)
{
    kvf_e4m3_decode_n(x, codes, k);
    for (size_t i = 0; i < k; i++) x[i] *= s;
}

/* packed[k/2] → x[k] = e2m1(nibble) × s; element 2j from the low nibble of byte j. */
static void decode_e2m1_block(float *x, const uint8_t *packed, size_t k, float s)
{
    kvf_e2m1_decode_n(x, packed, k);
    for (size_t i = 0; i < k; i++) x[i] *= s;
}

/* E8M0 code of DeepSeek act_quant's scale for a block with maximum amax: 2^ceil(log2(amax' / 448)),
 * amax' = max(amax, 1e-4). */
static uint8_t act_quant_scale(float amax)
{
    return kvf_scale_rceil(fmaxf(amax, ACT_QUANT_AMAX_MIN), KVF_E4M3);
}

int kvf_quant_mxfp8_e4m3(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    int err = check_input(x, n, KVF_MX_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_MX_BLOCK; b++) {
        const float *xb = x + b * KVF_MX_BLOCK;
        scales[b] = kvf_scale_ocp_floor(block_amax(xb, KVF_MX_BLOCK), KVF_E4M3);
        encode_e4m3_block(codes + b * KVF_MX_BLOCK, xb, KVF_MX_BLOCK, kvf_e8m0_decode(scales[b]));
    }
    return KVF_OK;
}

int kvf_dequant_mxfp8_e4m3(float *x, const uint8_t *codes, const uint8_t *scales, size_t n)
{
    return kvf_dequant_fp8_e8m0(x, codes, scales, n, KVF_MX_BLOCK);
}

int kvf_quant_mxfp4(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    int err = check_input(x, n, KVF_MX_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_MX_BLOCK; b++) {
        const float *xb = x + b * KVF_MX_BLOCK;
        scales[b] = kvf_scale_ocp_floor(block_amax(xb, KVF_MX_BLOCK), KVF_E2M1);
        encode_e2m1_block(codes + b * KVF_MX_BLOCK / 2, xb, KVF_MX_BLOCK, kvf_e8m0_decode(scales[b]));
    }
    return KVF_OK;
}

int kvf_dequant_mxfp4(float *x, const uint8_t *codes, const uint8_t *scales, size_t n)
{
    int err = check_length(n, KVF_MX_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_MX_BLOCK; b++)
        decode_e2m1_block(x + b * KVF_MX_BLOCK, codes + b * KVF_MX_BLOCK / 2, KVF_MX_BLOCK,
                          kvf_e8m0_decode(scales[b]));
    return KVF_OK;
}

float kvf_nvfp4_global_scale(float amax_tensor)
{
    if (!isfinite(amax_tensor)) return NAN;
    float s = amax_tensor / (float)(kvf_element_max(KVF_E4M3) * kvf_element_max(KVF_E2M1));
    return s < FLT_MIN ? FLT_MIN : s;
}

static int check_global_scale(float s_global)
{
    return isfinite(s_global) && s_global > 0.0f ? KVF_OK : KVF_ESCALE;
}

/* E4M3 code of NVFP4's block scale for a block with maximum amax under the global scale s_global. */
static uint8_t nvfp4_block_scale(float amax, float s_global)
{
    float s = amax / e2m1_max() / s_global;
    s = fminf(fmaxf(s, NVFP4_SCALE_MIN), (float)kvf_element_max(KVF_E4M3));
    return kvf_e4m3_encode_sat(s);
}

int kvf_quant_nvfp4(uint8_t *codes, uint8_t *scales, const float *x, size_t n, float s_global)
{
    int err = check_global_scale(s_global);
    if (err == KVF_OK) err = check_input(x, n, KVF_NVFP4_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_NVFP4_BLOCK; b++) {
        const float *xb = x + b * KVF_NVFP4_BLOCK;
        scales[b] = nvfp4_block_scale(block_amax(xb, KVF_NVFP4_BLOCK), s_global);
        encode_e2m1_block(codes + b * KVF_NVFP4_BLOCK / 2, xb, KVF_NVFP4_BLOCK,
                          s_global * kvf_e4m3_decode(scales[b]));
    }
    return KVF_OK;
}

int kvf_dequant_nvfp4(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, float s_global)
{
    int err = check_global_scale(s_global);
    if (err == KVF_OK) err = check_length(n, KVF_NVFP4_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_NVFP4_BLOCK; b++)
        decode_e2m1_block(x + b * KVF_NVFP4_BLOCK, codes + b * KVF_NVFP4_BLOCK / 2, KVF_NVFP4_BLOCK,
                          s_global * kvf_e4m3_decode(scales[b]));
    return KVF_OK;
}

int kvf_quant_fp4_v41(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    int err = check_input(x, n, KVF_FP4_V41_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_FP4_V41_BLOCK; b++) {
        const float *xb = x + b * KVF_FP4_V41_BLOCK;
        float amax = fmaxf(block_amax(xb, KVF_FP4_V41_BLOCK), FP4_V41_AMAX_MIN);
        scales[b] = kvf_e4m3_encode_sat(amax / e2m1_max());
        encode_e2m1_block(codes + b * KVF_FP4_V41_BLOCK / 2, xb, KVF_FP4_V41_BLOCK,
                          kvf_e4m3_decode(scales[b]));
    }
    return KVF_OK;
}

int kvf_dequant_fp4_v41(float *x, const uint8_t *codes, const uint8_t *scales, size_t n)
{
    int err = check_length(n, KVF_FP4_V41_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_FP4_V41_BLOCK; b++)
        decode_e2m1_block(x + b * KVF_FP4_V41_BLOCK, codes + b * KVF_FP4_V41_BLOCK / 2,
                          KVF_FP4_V41_BLOCK, kvf_e4m3_decode(scales[b]));
    return KVF_OK;
}

int kvf_quant_fp8_ue8m0(uint8_t *codes, float *scales, const float *x, size_t n)
{
    int err = check_input(x, n, KVF_FP8_UE8M0_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_FP8_UE8M0_BLOCK; b++) {
        const float *xb = x + b * KVF_FP8_UE8M0_BLOCK;
        scales[b] = kvf_e8m0_decode(act_quant_scale(block_amax(xb, KVF_FP8_UE8M0_BLOCK)));
        encode_e4m3_block(codes + b * KVF_FP8_UE8M0_BLOCK, xb, KVF_FP8_UE8M0_BLOCK, scales[b]);
    }
    return KVF_OK;
}

int kvf_dequant_fp8_ue8m0(float *x, const uint8_t *codes, const float *scales, size_t n)
{
    int err = check_length(n, KVF_FP8_UE8M0_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_FP8_UE8M0_BLOCK; b++)
        decode_e4m3_block(x + b * KVF_FP8_UE8M0_BLOCK, codes + b * KVF_FP8_UE8M0_BLOCK,
                          KVF_FP8_UE8M0_BLOCK, scales[b]);
    return KVF_OK;
}

int kvf_quant_fp8_e8m0_rceil(uint8_t *codes, uint8_t *scales, const float *x, size_t n, size_t block)
{
    int err = check_input(x, n, block);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / block; b++) {
        const float *xb = x + b * block;
        scales[b] = act_quant_scale(block_amax(xb, block));
        encode_e4m3_block(codes + b * block, xb, block, kvf_e8m0_decode(scales[b]));
    }
    return KVF_OK;
}

int kvf_dequant_fp8_e8m0(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, size_t block)
{
    int err = check_length(n, block);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / block; b++)
        decode_e4m3_block(x + b * block, codes + b * block, block, kvf_e8m0_decode(scales[b]));
    return KVF_OK;
}

int kvf_quant_mxfp4_rceil(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    int err = check_input(x, n, KVF_MXFP4_RCEIL_BLOCK);
    if (err != KVF_OK) return err;
    for (size_t b = 0; b < n / KVF_MXFP4_RCEIL_BLOCK; b++) {
        const float *xb = x + b * KVF_MXFP4_RCEIL_BLOCK;
        float amax = fmaxf(block_amax(xb, KVF_MXFP4_RCEIL_BLOCK), FP4_RCEIL_AMAX_MIN);
        scales[b] = kvf_scale_rceil(amax, KVF_E2M1);
        encode_e2m1_block(codes + b * KVF_MXFP4_RCEIL_BLOCK / 2, xb, KVF_MXFP4_RCEIL_BLOCK,
                          kvf_e8m0_decode(scales[b]));
    }
    return KVF_OK;
}
