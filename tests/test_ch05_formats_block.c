/* Block schemes (formats/block.h) against their definitions, written here in double:
 * scale rules, element rounding, packing, decoding, lengths, NaN and all-zero blocks. */
#include "common.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "block.h"

/* Exact comparisons: with power-of-two scales quantising and decoding are exact, and every other
 * recipe is compared with an oracle that does the same float32 roundings the recipe names. */
#define EXACT 0.0
/* One float32 rounding, relative: the quotient fl32(x / s) and the product q × s when s is not a
 * power of two each move a value by at most 2^-24 of itself. */
#define FL32_HALF_ULP 0x1p-24

/* ---- the element formats from their definitions (OCP MX v1.0, section 5) ------------------------- */

static double e4m3_value(unsigned code)
{
    unsigned e = (code >> 3) & 0xF, m = code & 7;
    if (e == 15 && m == 7) return NAN;
    double mag = e == 0 ? ldexp(m, -9) : ldexp(1.0 + m / 8.0, (int)e - 7);
    return code & 0x80 ? -mag : mag;
}

static double e2m1_value(unsigned code)
{
    unsigned e = (code >> 1) & 3, m = code & 1;
    double mag = e == 0 ? 0.5 * m : ldexp(1.0 + m / 2.0, (int)e - 1);
    return code & 0x8 ? -mag : mag;
}

static double e8m0_value(unsigned code)
{
    return code == 0xFF ? NAN : ldexp(1.0, (int)code - 127);
}

/* Nearest magnitude among value(0..top), a tie to the even code (consecutive codes alternate the
 * mantissa's last bit), anything past value(top) to top; the sign bit follows y, −0 included. */
static unsigned rne_code(double y, double (*value)(unsigned), unsigned top, unsigned sign_bit)
{
    double a = fabs(y);
    unsigned best = 0;
    for (unsigned c = 1; c <= top; c++) {
        double d = fabs(value(c) - a), d_best = fabs(value(best) - a);
        if (d < d_best || (d == d_best && c % 2 == 0)) best = c;
    }
    return signbit(y) ? best | sign_bit : best;
}

static unsigned e4m3_code(double y) { return rne_code(y, e4m3_value, 0x7E, 0x80); }
static unsigned e2m1_code(double y) { return rne_code(y, e2m1_value, 0x7, 0x8); }

/* Half the distance between neighbouring codes at |y|'s binade (subnormal binade below the first). */
static double e4m3_half_step(double y)
{
    int e;
    frexp(y, &e);
    return ldexp(1.0, (y == 0 || e - 1 < -6 ? -6 : e - 1) - 4);
}

static double e2m1_half_step(double y)
{
    int e;
    frexp(y, &e);
    return ldexp(1.0, (y == 0 || e - 1 < 0 ? 0 : e - 1) - 2);
}

/* ---- scale rules (formats/scale.h, formats/block.h) -------------------------------------------- */

static int floor_log2(double a)
{
    int e;
    frexp(a, &e);
    return e - 1;
}

static int ceil_log2(double a)
{
    int e;
    double m = frexp(a, &e);
    return m == 0.5 ? e - 1 : e;
}

static unsigned e8m0_code_of_k(int k)
{
    return (unsigned)((k < -127 ? -127 : k) + 127);
}

/* OCP MX v1.0, section 6.3: k = floor(log2 amax) − emax, amax 0 read as 2^-126. */
static unsigned ocp_floor_code(double amax, int emax)
{
    return e8m0_code_of_k(floor_log2(amax > 0 ? amax : 0x1p-126) - emax);
}

/* DeepSeek's round-up scale: k = ceil(log2(max(amax, floor) / max_elem)). */
static unsigned rceil_code(double amax, double amax_floor, double max_elem)
{
    return e8m0_code_of_k(ceil_log2(fmax(amax, amax_floor) / max_elem));
}

static double block_amax(const float *x, size_t k)
{
    double a = 0;
    for (size_t i = 0; i < k; i++) a = fmax(a, fabs(x[i]));
    return a;
}

/* ---- test vectors -------------------------------------------------------------------------------- */

typedef struct { uint64_t s; } rng;

static uint64_t rng_next(rng *r)   /* splitmix64 */
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double rng_uniform(rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1p-53;
}

/* x[n] in blocks of `block`: block b spans 12 binades below 2^E_b, E_b uniform in [e_lo, e_hi],
 * random signs; element 1 of every block is +0 and element 2 is −0. */
static void fill_blocks(float *x, size_t n, size_t block, int e_lo, int e_hi, rng *r)
{
    for (size_t b = 0; b < n / block; b++) {
        int e = e_lo + (int)(rng_next(r) % (uint64_t)(e_hi - e_lo + 1));
        for (size_t i = 0; i < block; i++) {
            double mag = ldexp(1.0, e) * exp2(-12.0 * rng_uniform(r));
            x[b * block + i] = (float)(rng_next(r) & 1 ? -mag : mag);
        }
        x[b * block + 1] = 0.0f;
        x[b * block + 2] = -0.0f;
    }
}

/* Overwrite elements 3..5 of every block (unless one holds the block's amax) with ±(g_c + g_{c+1})/2 · s_b,
 * an exact tie of the element rounding, kept below the amax so that the scale does not move. */
static void plant_ties(float *x, size_t n, size_t block, const double *scale,
                       double (*value)(unsigned), unsigned top, rng *r)
{
    for (size_t b = 0; b < n / block; b++) {
        double amax = block_amax(x + b * block, block);
        for (size_t i = 3; i < 6; i++) {
            unsigned c = (unsigned)(rng_next(r) % top);
            double t = 0.5 * (value(c) + value(c + 1)) * scale[b];
            int holds_amax = fabs(x[b * block + i]) == amax;
            if (!holds_amax && t < amax && (double)(float)t == t)
                x[b * block + i] = (float)(rng_next(r) & 1 ? -t : t);
        }
    }
}

/* ---- comparisons --------------------------------------------------------------------------------- */

/* codes[n] == e4m3_rne(fl32(x_i / s_b)) with s_b = scale[i / block]. */
static void expect_e4m3_codes(const char *what, const uint8_t *codes, const float *x, size_t n, size_t block,
                              const double *scale)
{
    for (size_t i = 0; i < n; i++) {
        unsigned want = e4m3_code(x[i] / (float)scale[i / block]);
        ck_assert_msg(codes[i] == want, "%s: element %zu (x = %.9g) code 0x%02X, definition 0x%02X", what, i,
                      (double)x[i], codes[i], want);
    }
}

/* packed[n/2] == e2m1_rne(fl32(x_i / s_b)), element 2j in the low nibble of byte j. */
static void expect_e2m1_codes(const char *what, const uint8_t *packed, const float *x, size_t n, size_t block,
                              const double *scale)
{
    for (size_t i = 0; i < n; i++) {
        unsigned got = (packed[i / 2] >> (4 * (i % 2))) & 0xF;
        unsigned want = e2m1_code(x[i] / (float)scale[i / block]);
        ck_assert_msg(got == want, "%s: element %zu (x = %.9g) code 0x%X, definition 0x%X", what, i, (double)x[i],
                      got, want);
    }
}

static void expect_scale_codes(const char *what, const uint8_t *got, const unsigned *want, size_t n_blocks)
{
    for (size_t b = 0; b < n_blocks; b++)
        ck_assert_msg(got[b] == want[b], "%s: block %zu scale 0x%02X, definition 0x%02X", what, b, got[b],
                      want[b]);
}

/* xhat[n] == fl32(value(code_i) × s_b): decode is element times scale. */
static void expect_decoded(const char *what, const float *xhat, const float *x, size_t n, size_t block,
                           const double *scale, unsigned (*code)(double), double (*value)(unsigned))
{
    double want[1024];
    ck_assert(n <= 1024);
    for (size_t i = 0; i < n; i++) {
        double s = (float)scale[i / block];
        want[i] = (float)(value(code(x[i] / (float)s)) * s);
    }
    kvl_expect_close(what, xhat, want, n, EXACT, EXACT, 0);
}

/* |x_i − x̂_i| ≤ s_b · half_step(|x_i| / s_b), or s_b · (|x_i| / s_b − max) past the largest code, plus
 * `slack` · (|x_i| + |x̂_i|) for the float32 roundings of a scale that is not a power of two. */
static void expect_within_half_step(const char *what, const float *xhat, const float *x, size_t n, size_t block,
                                    const double *scale, double (*half_step)(double), double max, double slack)
{
    for (size_t i = 0; i < n; i++) {
        double s = scale[i / block], y = fabs(x[i]) / s;
        double bound = (y > max ? y - max : half_step(y)) * s + slack * (fabs(x[i]) + fabs(xhat[i]));
        double err = fabs((double)x[i] - xhat[i]);
        ck_assert_msg(err <= bound, "%s: element %zu x = %.9g x̂ = %.9g error %.3g above bound %.3g", what, i,
                      (double)x[i], (double)xhat[i], err, bound);
    }
}

/* ---- the recipes' scales, from their definitions ------------------------------------------------- */

#define N_MX 256        /* 8 blocks of 32 */
#define N_128 1024      /* 8 blocks of 128 */
#define N_16 256        /* 16 blocks of 16 */
#define N_SEEDS 4

static void ocp_scales(unsigned *codes, double *scale, const float *x, size_t n, int emax)
{
    for (size_t b = 0; b < n / KVF_MX_BLOCK; b++) {
        codes[b] = ocp_floor_code(block_amax(x + b * KVF_MX_BLOCK, KVF_MX_BLOCK), emax);
        scale[b] = e8m0_value(codes[b]);
    }
}

/* act_quant: amax ≥ 1e-4 (a float32 constant in the kernel), round up against 448. */
static void act_quant_scales(unsigned *codes, double *scale, const float *x, size_t n, size_t block)
{
    for (size_t b = 0; b < n / block; b++) {
        codes[b] = rceil_code(block_amax(x + b * block, block), 1e-4f, 448.0);
        scale[b] = e8m0_value(codes[b]);
    }
}

/* V4 indexer: amax ≥ 6·2^-126, round up against 6. */
static void mxfp4_rceil_scales(unsigned *codes, double *scale, const float *x, size_t n)
{
    for (size_t b = 0; b < n / 32; b++) {
        codes[b] = rceil_code(block_amax(x + b * 32, 32), 6 * 0x1p-126, 6.0);
        scale[b] = e8m0_value(codes[b]);
    }
}

/* V4.1 FP4: s = e4m3_rne(fl32(max(amax, 6·2^-9) / 6)); fl32 is a float32 operation. */
static void fp4_v41_scales(unsigned *codes, double *scale, const float *x, size_t n)
{
    for (size_t b = 0; b < n / 16; b++) {
        float amax = (float)fmax(block_amax(x + b * 16, 16), 6 * 0x1p-9);
        codes[b] = e4m3_code(amax / 6.0f);
        scale[b] = e4m3_value(codes[b]);
    }
}

/* NVFP4 (torchao's float32 steps): s_block = e4m3_rne(clamp(fl32(fl32(amax / 6) / s_global), 2^-6, 448)),
 * total scale fl32(s_global × s_block). */
static void nvfp4_scales(unsigned *codes, double *total, const float *x, size_t n, float s_global)
{
    for (size_t b = 0; b < n / 16; b++) {
        float amax = (float)block_amax(x + b * 16, 16);
        float sb = amax / 6.0f / s_global;
        codes[b] = e4m3_code(fmin(fmax(sb, 0x1p-6), 448.0));
        total[b] = (float)(s_global * (float)e4m3_value(codes[b]));
    }
}

/* ---- tests: each recipe matches its definition --------------------------------------------------- */

START_TEST(test_mxfp8_e4m3_matches_ocp_floor_definition)
{
    for (uint64_t seed = 0; seed < N_SEEDS; seed++) {
        rng r = {seed};
        float x[N_MX], xhat[N_MX];
        uint8_t codes[N_MX], scales[N_MX / 32];
        unsigned want_scales[N_MX / 32];
        double scale[N_MX / 32];
        fill_blocks(x, N_MX, 32, -20, 20, &r);
        ocp_scales(want_scales, scale, x, N_MX, 8);
        plant_ties(x, N_MX, 32, scale, e4m3_value, 0x7E, &r);
        ck_assert_int_eq(kvf_quant_mxfp8_e4m3(codes, scales, x, N_MX), KVF_OK);
        ck_assert_int_eq(kvf_dequant_mxfp8_e4m3(xhat, codes, scales, N_MX), KVF_OK);
        expect_scale_codes("mxfp8 scales", scales, want_scales, N_MX / 32);
        expect_e4m3_codes("mxfp8 codes", codes, x, N_MX, 32, scale);
        expect_decoded("mxfp8 decoded", xhat, x, N_MX, 32, scale, e4m3_code, e4m3_value);
    }
}
END_TEST

START_TEST(test_mxfp4_matches_ocp_floor_definition)
{
    for (uint64_t seed = 0; seed < N_SEEDS; seed++) {
        rng r = {seed};
        float x[N_MX], xhat[N_MX];
        uint8_t codes[N_MX / 2], scales[N_MX / 32];
        unsigned want_scales[N_MX / 32];
        double scale[N_MX / 32];
        fill_blocks(x, N_MX, 32, -20, 20, &r);
        ocp_scales(want_scales, scale, x, N_MX, 2);
        plant_ties(x, N_MX, 32, scale, e2m1_value, 7, &r);
        ck_assert_int_eq(kvf_quant_mxfp4(codes, scales, x, N_MX), KVF_OK);
        ck_assert_int_eq(kvf_dequant_mxfp4(xhat, codes, scales, N_MX), KVF_OK);
        expect_scale_codes("mxfp4 scales", scales, want_scales, N_MX / 32);
        expect_e2m1_codes("mxfp4 codes", codes, x, N_MX, 32, scale);
        expect_decoded("mxfp4 decoded", xhat, x, N_MX, 32, scale, e2m1_code, e2m1_value);
    }
}
END_TEST

START_TEST(test_nvfp4_matches_two_level_definition)
{
    for (uint64_t seed = 0; seed < N_SEEDS; seed++) {
        rng r = {seed};
        float x[N_16], xhat[N_16];
        uint8_t codes[N_16 / 2], scales[N_16 / 16];
        unsigned want_scales[N_16 / 16];
        double total[N_16 / 16];
        /* tensor amax 42 = 2688 · 2^-6 makes s_global a power of two, so ties can be planted exactly */
        fill_blocks(x, N_16, 16, -6, 5, &r);
        x[0] = 42.0f;
        float s_global = kvf_nvfp4_global_scale((float)block_amax(x, N_16));
        ck_assert_msg(s_global == 0x1p-6f, "s_global %.9g, want 42 / 2688", (double)s_global);
        nvfp4_scales(want_scales, total, x, N_16, s_global);
        plant_ties(x, N_16, 16, total, e2m1_value, 7, &r);
        ck_assert_int_eq(kvf_quant_nvfp4(codes, scales, x, N_16, s_global), KVF_OK);
        ck_assert_int_eq(kvf_dequant_nvfp4(xhat, codes, scales, N_16, s_global), KVF_OK);
        expect_scale_codes("nvfp4 scales", scales, want_scales, N_16 / 16);
        expect_e2m1_codes("nvfp4 codes", codes, x, N_16, 16, total);
        expect_decoded("nvfp4 decoded", xhat, x, N_16, 16, total, e2m1_code, e2m1_value);
    }
}
END_TEST

START_TEST(test_nvfp4_global_scale_is_amax_over_2688_with_a_normal_floor)
{
    ck_assert(kvf_nvfp4_global_scale(2688.0f) == 1.0f);
    ck_assert(kvf_nvfp4_global_scale(21.0f) == 21.0f / 2688.0f);
    ck_assert(kvf_nvfp4_global_scale(0.0f) == FLT_MIN);
    ck_assert(kvf_nvfp4_global_scale(1e-40f) == FLT_MIN);
    ck_assert(isnan(kvf_nvfp4_global_scale(NAN)));
    ck_assert(isnan(kvf_nvfp4_global_scale(INFINITY)));
}
END_TEST

START_TEST(test_fp4_v41_matches_deepseek_recipe)
{
    for (uint64_t seed = 0; seed < N_SEEDS; seed++) {
        rng r = {seed};
        float x[N_16], xhat[N_16];
        uint8_t codes[N_16 / 2], scales[N_16 / 16];
        unsigned want_scales[N_16 / 16];
        double scale[N_16 / 16];
        /* 2^-12 .. 2^13: blocks under the amax floor, in E4M3's subnormal scales, and past 448 · 6 */
        fill_blocks(x, N_16, 16, -12, 13, &r);
        fp4_v41_scales(want_scales, scale, x, N_16);
        plant_ties(x, N_16, 16, scale, e2m1_value, 7, &r);
        ck_assert_int_eq(kvf_quant_fp4_v41(codes, scales, x, N_16), KVF_OK);
        ck_assert_int_eq(kvf_dequant_fp4_v41(xhat, codes, scales, N_16), KVF_OK);
        expect_scale_codes("fp4_v41 scales", scales, want_scales, N_16 / 16);
        expect_e2m1_codes("fp4_v41 codes", codes, x, N_16, 16, scale);
        expect_decoded("fp4_v41 decoded", xhat, x, N_16, 16, scale, e2m1_code, e2m1_value);
    }
}
END_TEST

START_TEST(test_fp8_ue8m0_matches_act_quant_definition)
{
    for (uint64_t seed = 0; seed < N_SEEDS; seed++) {
        rng r = {seed};
        float x[N_128], xhat[N_128], scales[N_128 / 128];
        uint8_t codes[N_128];
        unsigned want_scales[N_128 / 128];
        double scale[N_128 / 128];
        fill_blocks(x, N_128, 128, -20, 20, &r);
        act_quant_scales(want_scales, scale, x, N_128, 128);
        plant_ties(x, N_128, 128, scale, e4m3_value, 0x7E, &r);
        ck_assert_int_eq(kvf_quant_fp8_ue8m0(codes, scales, x, N_128), KVF_OK);
        ck_assert_int_eq(kvf_dequant_fp8_ue8m0(xhat, codes, scales, N_128), KVF_OK);
        for (size_t b = 0; b < N_128 / 128; b++)
            ck_assert_msg(scales[b] == scale[b], "block %zu scale %.9g, definition %.9g", b, (double)scales[b],
                          scale[b]);
        expect_e4m3_codes("fp8_ue8m0 codes", codes, x, N_128, 128, scale);
        expect_decoded("fp8_ue8m0 decoded", xhat, x, N_128, 128, scale, e4m3_code, e4m3_value);
    }
}
END_TEST

START_TEST(test_fp8_e8m0_rceil_matches_act_quant_definition_per_64_and_per_32)
{
    const size_t blocks[] = {64, 32};
    for (size_t k = 0; k < 2; k++) {
        size_t block = blocks[k], n = 512;
        for (uint64_t seed = 0; seed < N_SEEDS; seed++) {
            rng r = {seed};
            float x[512], xhat[512];
            uint8_t codes[512], scales[512 / 32];
            unsigned want_scales[512 / 32];
            double scale[512 / 32];
            fill_blocks(x, n, block, -20, 20, &r);
            act_quant_scales(want_scales, scale, x, n, block);
            plant_ties(x, n, block, scale, e4m3_value, 0x7E, &r);
            ck_assert_int_eq(kvf_quant_fp8_e8m0_rceil(codes, scales, x, n, block), KVF_OK);
            ck_assert_int_eq(kvf_dequant_fp8_e8m0(xhat, codes, scales, n, block), KVF_OK);
            expect_scale_codes("fp8_e8m0_rceil scales", scales, want_scales, n / block);
            expect_e4m3_codes("fp8_e8m0_rceil codes", codes, x, n, block, scale);
            expect_decoded("fp8_e8m0_rceil decoded", xhat, x, n, block, scale, e4m3_code, e4m3_value);
        }
    }
}
END_TEST

START_TEST(test_mxfp4_rceil_matches_v4_indexer_definition)
{
    for (uint64_t seed = 0; seed < N_SEEDS; seed++) {
        rng r = {seed};
        float x[N_MX], xhat[N_MX];
        uint8_t codes[N_MX / 2], scales[N_MX / 32];
        unsigned want_scales[N_MX / 32];
        double scale[N_MX / 32];
        fill_blocks(x, N_MX, 32, -20, 20, &r);
        mxfp4_rceil_scales(want_scales, scale, x, N_MX);
        plant_ties(x, N_MX, 32, scale, e2m1_value, 7, &r);
        ck_assert_int_eq(kvf_quant_mxfp4_rceil(codes, scales, x, N_MX), KVF_OK);
        ck_assert_int_eq(kvf_dequant_mxfp4(xhat, codes, scales, N_MX), KVF_OK);
        expect_scale_codes("mxfp4_rceil scales", scales, want_scales, N_MX / 32);
        expect_e2m1_codes("mxfp4_rceil codes", codes, x, N_MX, 32, scale);
        expect_decoded("mxfp4_rceil decoded", xhat, x, N_MX, 32, scale, e2m1_code, e2m1_value);
    }
}
END_TEST

/* Enough blocks of 16 for several of the scale batches the FP4 recipes with an E4M3 scale work in
 * (64 blocks each): two full batches and a ragged one. */
#define N_BATCHES (16 * (2 * 64 + 5))

START_TEST(test_fp4_e4m3_scaled_recipes_match_definition_when_n_spans_several_scale_batches)
{
    static float x[N_BATCHES];
    static uint8_t codes[N_BATCHES / 2], scales[N_BATCHES / 16];
    static unsigned want_scales[N_BATCHES / 16];
    static double scale[N_BATCHES / 16];
    rng r = {11};
    fill_blocks(x, N_BATCHES, 16, -12, 13, &r);
    fp4_v41_scales(want_scales, scale, x, N_BATCHES);
    plant_ties(x, N_BATCHES, 16, scale, e2m1_value, 7, &r);
    ck_assert_int_eq(kvf_quant_fp4_v41(codes, scales, x, N_BATCHES), KVF_OK);
    expect_scale_codes("fp4_v41 scales", scales, want_scales, N_BATCHES / 16);
    expect_e2m1_codes("fp4_v41 codes", codes, x, N_BATCHES, 16, scale);

    const float s_global = 0x1p-6f;   /* a power of two, so ties plant exactly in the total scale */
    fill_blocks(x, N_BATCHES, 16, -6, 5, &r);
    nvfp4_scales(want_scales, scale, x, N_BATCHES, s_global);
    plant_ties(x, N_BATCHES, 16, scale, e2m1_value, 7, &r);
    ck_assert_int_eq(kvf_quant_nvfp4(codes, scales, x, N_BATCHES, s_global), KVF_OK);
    expect_scale_codes("nvfp4 scales", scales, want_scales, N_BATCHES / 16);
    expect_e2m1_codes("nvfp4 codes", codes, x, N_BATCHES, 16, scale);
}
END_TEST

/* x[n] in blocks of 32 with E_b in [−126, emax − 126] (fill_blocks: elements down into float32's
 * subnormals), and their OCP floor scales for an element with exponent emax; asserts that more than
 * half of the blocks get the scale 2^-127 (E8M0 code 0x00), a float32 subnormal. */
static void fill_subnormal_scale_blocks(float *x, unsigned *want_scales, double *scale, size_t n, int emax, rng *r)
{
    fill_blocks(x, n, 32, -126, emax - 126, r);
    ocp_scales(want_scales, scale, x, n, emax);
    size_t subnormal = 0;
    for (size_t b = 0; b < n / 32; b++) subnormal += want_scales[b] == 0x00;
    ck_assert_msg(subnormal * 2 > n / 32, "only %zu of %zu blocks have the subnormal scale", subnormal, n / 32);
}

/* The OCP floor recipes with the scale 2^-127: amax from 2^-126 up to 2^(emax − 126), elements down
 * into float32's subnormals. Dividing by the subnormal scale and multiplying by its exact reciprocal
 * 2^127 must give the same codes. */
START_TEST(test_ocp_floor_recipes_match_definition_when_the_scale_is_a_float32_subnormal)
{
    rng r = {21};
    float x[N_MX], xhat[N_MX];
    uint8_t codes[N_MX], scales[N_MX / 32];
    unsigned want_scales[N_MX / 32];
    double scale[N_MX / 32];

    fill_subnormal_scale_blocks(x, want_scales, scale, N_MX, 8, &r);
    ck_assert_int_eq(kvf_quant_mxfp8_e4m3(codes, scales, x, N_MX), KVF_OK);
    ck_assert_int_eq(kvf_dequant_mxfp8_e4m3(xhat, codes, scales, N_MX), KVF_OK);
    expect_scale_codes("mxfp8 scales", scales, want_scales, N_MX / 32);
    expect_e4m3_codes("mxfp8 codes", codes, x, N_MX, 32, scale);
    expect_decoded("mxfp8 decoded", xhat, x, N_MX, 32, scale, e4m3_code, e4m3_value);

    fill_subnormal_scale_blocks(x, want_scales, scale, N_MX, 2, &r);
    ck_assert_int_eq(kvf_quant_mxfp4(codes, scales, x, N_MX), KVF_OK);
    ck_assert_int_eq(kvf_dequant_mxfp4(xhat, codes, scales, N_MX), KVF_OK);
    expect_scale_codes("mxfp4 scales", scales, want_scales, N_MX / 32);
    expect_e2m1_codes("mxfp4 codes", codes, x, N_MX, 32, scale);
    expect_decoded("mxfp4 decoded", xhat, x, N_MX, 32, scale, e2m1_code, e2m1_value);
}
END_TEST

/* ---- tests: error bounds ------------------------------------------------------------------------- */

START_TEST(test_dequantised_error_is_within_half_a_step_times_the_scale_or_the_saturation)
{
    rng r = {42};
    float x[N_128], xhat[N_128], f32_scales[N_128 / 128];
    uint8_t codes[N_128], scales[N_128 / 16];
    unsigned want[N_128 / 16];
    double scale[N_128 / 16];

    fill_blocks(x, N_MX, 32, -20, 20, &r);
    ocp_scales(want, scale, x, N_MX, 8);
    ck_assert_int_eq(kvf_quant_mxfp8_e4m3(codes, scales, x, N_MX), KVF_OK);
    ck_assert_int_eq(kvf_dequant_mxfp8_e4m3(xhat, codes, scales, N_MX), KVF_OK);
    expect_within_half_step("mxfp8", xhat, x, N_MX, 32, scale, e4m3_half_step, 448, 0);

    ocp_scales(want, scale, x, N_MX, 2);
    ck_assert_int_eq(kvf_quant_mxfp4(codes, scales, x, N_MX), KVF_OK);
    ck_assert_int_eq(kvf_dequant_mxfp4(xhat, codes, scales, N_MX), KVF_OK);
    expect_within_half_step("mxfp4", xhat, x, N_MX, 32, scale, e2m1_half_step, 6, 0);

    mxfp4_rceil_scales(want, scale, x, N_MX);
    ck_assert_int_eq(kvf_quant_mxfp4_rceil(codes, scales, x, N_MX), KVF_OK);
    ck_assert_int_eq(kvf_dequant_mxfp4(xhat, codes, scales, N_MX), KVF_OK);
    expect_within_half_step("mxfp4_rceil", xhat, x, N_MX, 32, scale, e2m1_half_step, 6, 0);

    fill_blocks(x, N_128, 128, -20, 20, &r);
    act_quant_scales(want, scale, x, N_128, 128);
    ck_assert_int_eq(kvf_quant_fp8_ue8m0(codes, f32_scales, x, N_128), KVF_OK);
    ck_assert_int_eq(kvf_dequant_fp8_ue8m0(xhat, codes, f32_scales, N_128), KVF_OK);
    expect_within_half_step("fp8_ue8m0", xhat, x, N_128, 128, scale, e4m3_half_step, 448, 0);

    act_quant_scales(want, scale, x, N_128, 64);
    ck_assert_int_eq(kvf_quant_fp8_e8m0_rceil(codes, scales, x, N_128, 64), KVF_OK);
    ck_assert_int_eq(kvf_dequant_fp8_e8m0(xhat, codes, scales, N_128, 64), KVF_OK);
    expect_within_half_step("fp8_e8m0_rceil", xhat, x, N_128, 64, scale, e4m3_half_step, 448, 0);

    fill_blocks(x, N_16, 16, -12, 13, &r);
    fp4_v41_scales(want, scale, x, N_16);
    ck_assert_int_eq(kvf_quant_fp4_v41(codes, scales, x, N_16), KVF_OK);
    ck_assert_int_eq(kvf_dequant_fp4_v41(xhat, codes, scales, N_16), KVF_OK);
    expect_within_half_step("fp4_v41", xhat, x, N_16, 16, scale, e2m1_half_step, 6, FL32_HALF_ULP);

    fill_blocks(x, N_16, 16, -6, 6, &r);
    float s_global = kvf_nvfp4_global_scale((float)block_amax(x, N_16));
    nvfp4_scales(want, scale, x, N_16, s_global);
    ck_assert_int_eq(kvf_quant_nvfp4(codes, scales, x, N_16, s_global), KVF_OK);
    ck_assert_int_eq(kvf_dequant_nvfp4(xhat, codes, scales, N_16, s_global), KVF_OK);
    expect_within_half_step("nvfp4", xhat, x, N_16, 16, scale, e2m1_half_step, 6, FL32_HALF_ULP);
}
END_TEST

/* ---- tests: decoding ----------------------------------------------------------------------------- */

/* E8M0 scale codes for the decode tests: both extremes (2^-127 is a float32 subnormal, 2^127 overflows
 * most products to inf), 1, the NaN scale 0xFF, and codes between. */
static const uint8_t E8M0_SCALES[16] = {0x00, 0x01, 0x60, 0x7F, 0x90, 0xFE, 0xFF, 0x75,
                                        0x02, 0x7E, 0x80, 0x40, 0xC0, 0x7D, 0xFD, 0x10};

START_TEST(test_dequant_is_element_times_scale_for_every_code)
{
    uint8_t codes[256], packed[256], e4m3_scales[256];
    float xhat[512];
    double want[512];
    for (unsigned c = 0; c < 256; c++) codes[c] = packed[c] = e4m3_scales[c] = (uint8_t)c;

    /* E4M3 elements, E8M0 scales: all 256 codes in 8 blocks of 32, one scale each */
    ck_assert_int_eq(kvf_dequant_mxfp8_e4m3(xhat, codes, E8M0_SCALES, 256), KVF_OK);
    for (unsigned i = 0; i < 256; i++) want[i] = (float)(e4m3_value(i) * e8m0_value(E8M0_SCALES[i / 32]));
    kvl_expect_close("mxfp8 decode", xhat, want, 256, EXACT, EXACT, 0);
    ck_assert_int_eq(kvf_dequant_fp8_e8m0(xhat, codes, E8M0_SCALES, 256, 32), KVF_OK);
    kvl_expect_close("fp8_e8m0 decode", xhat, want, 256, EXACT, EXACT, 0);

    /* E2M1 pairs: the 256 bytes hold every (low, high) pair, 16 blocks of 32 */
    ck_assert_int_eq(kvf_dequant_mxfp4(xhat, packed, E8M0_SCALES, 512), KVF_OK);
    for (unsigned i = 0; i < 512; i++)
        want[i] = (float)(e2m1_value((packed[i / 2] >> (4 * (i % 2))) & 0xF) * e8m0_value(E8M0_SCALES[i / 32]));
    kvl_expect_close("mxfp4 decode", xhat, want, 512, EXACT, EXACT, 0);

    /* E2M1 with every E4M3 code as a block scale, 32 scale codes per call */
    for (unsigned s0 = 0; s0 < 256; s0 += 32) {
        ck_assert_int_eq(kvf_dequant_fp4_v41(xhat, packed, e4m3_scales + s0, 512), KVF_OK);
        for (unsigned i = 0; i < 512; i++) {
            unsigned code = (packed[i / 2] >> (4 * (i % 2))) & 0xF;
            want[i] = (float)(e2m1_value(code) * e4m3_value(e4m3_scales[s0 + i / 16]));
        }
        kvl_expect_close("fp4_v41 decode", xhat, want, 512, EXACT, EXACT, 0);
    }

    /* NVFP4: q × fl32(s_global × s_block) */
    const float s_global = 0.3f;
    ck_assert_int_eq(kvf_dequant_nvfp4(xhat, packed, e4m3_scales + 40, 512, s_global), KVF_OK);
    for (unsigned i = 0; i < 512; i++) {
        unsigned code = (packed[i / 2] >> (4 * (i % 2))) & 0xF;
        double total = (float)(s_global * (float)e4m3_value(e4m3_scales[40 + i / 16]));
        want[i] = (float)(e2m1_value(code) * total);
    }
    kvl_expect_close("nvfp4 decode", xhat, want, 512, EXACT, EXACT, 0);

    /* E4M3 with FP32 scales (V3.2): any float32 scale multiplies */
    const float f32_scales[2] = {0x1p-22f, 0.75f};
    ck_assert_int_eq(kvf_dequant_fp8_ue8m0(xhat, codes, f32_scales, 256), KVF_OK);
    for (unsigned i = 0; i < 256; i++) want[i] = (float)(e4m3_value(i) * f32_scales[i / 128]);
    kvl_expect_close("fp8_ue8m0 decode", xhat, want, 256, EXACT, EXACT, 0);
}
END_TEST

START_TEST(test_e2m1_element_2j_is_in_the_low_nibble)
{
    /* amax 6 puts every recipe's scale at 1 (OCP floor: 2^(2 − 2); rceil: 2^ceil(log2 1); V4.1:
     * e4m3(6 / 6)); x0 = 1 is code 0x2, x1 = −3 is code 0xD, so byte 0 is 0xD2 */
    float x[32] = {1.0f, -3.0f, 6.0f, 0.5f};
    uint8_t codes[16], scales[2];
    float xhat[32];

    ck_assert_int_eq(kvf_quant_mxfp4(codes, scales, x, 32), KVF_OK);
    ck_assert_uint_eq(codes[0], 0xD2);
    ck_assert_uint_eq(codes[1], 0x17);
    ck_assert_int_eq(kvf_quant_mxfp4_rceil(codes, scales, x, 32), KVF_OK);
    ck_assert_uint_eq(codes[0], 0xD2);
    ck_assert_uint_eq(codes[1], 0x17);
    ck_assert_int_eq(kvf_quant_fp4_v41(codes, scales, x, 16), KVF_OK);
    ck_assert_uint_eq(codes[0], 0xD2);
    ck_assert_uint_eq(codes[1], 0x17);

    /* and the dequantisers read it back the same way */
    uint8_t one_block[16] = {0xD2, 0x17};
    uint8_t unit_scale = 0x7F;
    ck_assert_int_eq(kvf_dequant_mxfp4(xhat, one_block, &unit_scale, 32), KVF_OK);
    ck_assert(xhat[0] == 1.0f && xhat[1] == -3.0f && xhat[2] == 6.0f && xhat[3] == 0.5f);
}
END_TEST

/* ---- tests: the NVFP4 argument and a V4.1 block by hand ------------------------------------------ */

START_TEST(test_e4m3_scale_reaches_the_4_and_6_rungs_where_a_power_of_two_scale_stops_at_3)
{
    /* Block max 3 + δ: the ideal scale (3 + δ)/6 is just over 1/2. A power-of-two scale that keeps every
     * element in range rounds it up to 1, so the block lands on the ladder at ≤ 3.1 and the rungs 4 and 6
     * go unused; an E4M3 scale (0.5 here) lands the max near 6 (NVFP4 paper, section 2). */
    float x[32];
    for (size_t i = 0; i < 32; i++) x[i] = 3.1f * (float)(16 - i % 16) / 16.0f;
    uint8_t codes[16], scales[2];
    unsigned used_pow2 = 0, used_v41 = 0, used_nv = 0;   /* bit c set: magnitude code c appears */

    ck_assert_int_eq(kvf_quant_mxfp4_rceil(codes, scales, x, 32), KVF_OK);
    ck_assert_uint_eq(scales[0], 127);
    for (size_t i = 0; i < 16; i++) used_pow2 |= 1u << ((codes[i / 2] >> (4 * (i % 2))) & 7);
    ck_assert_int_eq(kvf_quant_fp4_v41(codes, scales, x, 16), KVF_OK);
    ck_assert_msg(e4m3_value(scales[0]) == 0.5, "V4.1 scale %.9g", e4m3_value(scales[0]));
    for (size_t i = 0; i < 16; i++) used_v41 |= 1u << ((codes[i / 2] >> (4 * (i % 2))) & 7);
    ck_assert_int_eq(kvf_quant_nvfp4(codes, scales, x, 16, kvf_nvfp4_global_scale(3.1f)), KVF_OK);
    for (size_t i = 0; i < 16; i++) used_nv |= 1u << ((codes[i / 2] >> (4 * (i % 2))) & 7);

    const unsigned rung4 = 1u << 6, rung6 = 1u << 7, rung3 = 1u << 5;
    ck_assert_msg(!(used_pow2 & (rung4 | rung6)) && (used_pow2 & rung3), "power of two used 0x%02X", used_pow2);
    ck_assert_msg((used_v41 & rung4) && (used_v41 & rung6), "V4.1 E4M3 scale used 0x%02X", used_v41);
    ck_assert_msg((used_nv & rung4) && (used_nv & rung6), "NVFP4 used 0x%02X", used_nv);
}
END_TEST

START_TEST(test_fp4_v41_matches_hand_computation)
{
    /* Block 0: amax 2.5, amax / 6 = 0.41667 lies between the E4M3 neighbours 0.40625 = 13/32 and
     * 0.4375; nearer 13/32, code 0x2D (exponent 5, mantissa 5). Entries 2–9 are exact ties of the E2M1
     * ladder times s (2.5, 0.75, 3.5, 5, 0.25, 1.25, 1.75 and 6 times 13/32).
     * Block 1: amax 0.003 is under the floor 6·2^-9, so s = 2^-9 (code 0x01, E4M3's smallest); torchao's
     * floor of 2^-6 would send both values to 0.
     * Block 2: amax 3000, amax / 6 = 500 saturates the scale at 448 (0x7E) and 3000/448 = 6.7 clamps to 6. */
    const float x[48] = {
        2.5f, -1.0f, 1.015625f, 0.3046875f, 1.421875f, 2.03125f, -0.1015625f, 0.5078125f,
        0.7109375f, 2.4375f, 0.0f, -2.5f, 0.1f, 1.6f, -0.6f, 1.3f,
        0.001f, -0.003f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        3000.0f, -100.0f, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    };
    /* quotients x/s of block 0 and their codes:
     *   6.15→6 0x7 | −2.46→−2 0xC | 2.5→2 0x4 | 0.75→1 0x2 | 3.5→4 0x6 | 5→4 0x6 | −0.25→−0 0x8
     *   1.25→1 0x2 | 1.75→2 0x4 | 6→6 0x7 | 0→0 0x0 | −6.15→−6 0xF | 0.246→0 0x0 | 3.94→4 0x6
     *   −1.48→−1.5 0xB | 3.2→3 0x5
     * block 1: 0.512→0.5 0x1 | −1.536→−1.5 0xB; block 2: 6.7→6 0x7 | −0.22→−0 0x8
     * bytes: code 2j in the low nibble, 2j+1 in the high one */
    const uint8_t want_codes[24] = {0xC7, 0x24, 0x66, 0x28, 0x74, 0xF0, 0x60, 0x5B,
                                    0xB1, 0, 0, 0, 0, 0, 0, 0,
                                    0x87, 0, 0, 0, 0, 0, 0, 0};
    const uint8_t want_scales[3] = {0x2D, 0x01, 0x7E};
    uint8_t codes[24], scales[3];
    float xhat[48];
    ck_assert_int_eq(kvf_quant_fp4_v41(codes, scales, x, 48), KVF_OK);
    for (size_t j = 0; j < 24; j++)
        ck_assert_msg(codes[j] == want_codes[j], "byte %zu: 0x%02X, by hand 0x%02X", j, codes[j], want_codes[j]);
    for (size_t b = 0; b < 3; b++)
        ck_assert_msg(scales[b] == want_scales[b], "scale %zu: 0x%02X, by hand 0x%02X", b, scales[b],
                      want_scales[b]);
    ck_assert_int_eq(kvf_dequant_fp4_v41(xhat, codes, scales, 48), KVF_OK);
    ck_assert(xhat[0] == 2.4375f && xhat[1] == -0.8125f && xhat[6] == 0.0f && signbit(xhat[6]));
    ck_assert(xhat[16] == 0x1p-10f && xhat[17] == -1.5f * 0x1p-9f && xhat[32] == 2688.0f);
}
END_TEST

START_TEST(test_fp4_scales_round_in_the_recipes_float32_order)
{
    /* E4M3 ties catch the order of the float32 operations (cases found by scanning float32 amax).
     * V4.1: amax = 0x1.c7fffep+0. fl32(amax / 6) = 0x1.2ffffep-2 lies just under the E4M3 tie 0.296875
     * and rounds down to 0.28125 (code 0x29); amax × fl32(1/6) would land on the tie itself, which goes
     * to the even 0.3125 (0x2A). */
    float x[16] = {0x1.c7fffep+0f};
    uint8_t codes[8], scales[1];
    ck_assert(e4m3_code(x[0] / 6.0f) == 0x29 && e4m3_code(x[0] * (1.0f / 6.0f)) == 0x2A);   /* the case holds */
    ck_assert_int_eq(kvf_quant_fp4_v41(codes, scales, x, 16), KVF_OK);
    ck_assert_uint_eq(scales[0], 0x29);
    /* NVFP4: s_global = 0x1.24924ap-10 (fl32(3 / 2688)), amax = 0x1.8db6dep-7. fl32(fl32(amax / 6) / s_global)
     * = 1.8125001 rounds up to 1.875 (0x3F); fl32(amax / fl32(6 · s_global)) = 1.8125 is the tie between
     * 1.75 and 1.875 and would go to the even 1.75 (0x3E). */
    x[0] = 0x1.8db6dep-7f;
    const float s_global = 0x1.24924ap-10f;
    ck_assert(e4m3_code(x[0] / 6.0f / s_global) == 0x3F && e4m3_code(x[0] / (6.0f * s_global)) == 0x3E);
    ck_assert_int_eq(kvf_quant_nvfp4(codes, scales, x, 16, s_global), KVF_OK);
    ck_assert_uint_eq(scales[0], 0x3F);
}
END_TEST

/* ---- tests: bad input, empty blocks -------------------------------------------------------------- */

#define CANARY 0xA5

/* Every quantiser on x[n]: they must all return the same status, which is returned; *untouched says
 * whether every output still holds CANARY afterwards. */
static int quantise_all(const float *x, size_t n, int *untouched)
{
    uint8_t codes[512], scales[64];
    float f32_scales[8];
    int statuses[7];
    memset(codes, CANARY, sizeof codes);
    memset(scales, CANARY, sizeof scales);
    memset(f32_scales, CANARY, sizeof f32_scales);
    statuses[0] = kvf_quant_mxfp8_e4m3(codes, scales, x, n);
    statuses[1] = kvf_quant_mxfp4(codes, scales, x, n);
    statuses[2] = kvf_quant_nvfp4(codes, scales, x, n, 1.0f);
    statuses[3] = kvf_quant_fp4_v41(codes, scales, x, n);
    statuses[4] = kvf_quant_fp8_ue8m0(codes, f32_scales, x, n);
    statuses[5] = kvf_quant_fp8_e8m0_rceil(codes, scales, x, n, 64);
    statuses[6] = kvf_quant_mxfp4_rceil(codes, scales, x, n);
    int first = statuses[0];
    for (int i = 1; i < 7; i++) ck_assert_msg(statuses[i] == first, "quantiser %d gave %d, quantiser 0 gave %d",
                                               i, statuses[i], first);
    *untouched = 1;
    for (size_t i = 0; i < sizeof codes; i++) *untouched &= codes[i] == CANARY;
    for (size_t i = 0; i < sizeof scales; i++) *untouched &= scales[i] == CANARY;
    uint8_t f32_bytes[sizeof f32_scales];
    memcpy(f32_bytes, f32_scales, sizeof f32_bytes);
    for (size_t i = 0; i < sizeof f32_bytes; i++) *untouched &= f32_bytes[i] == CANARY;
    return first;
}

START_TEST(test_lengths_the_block_does_not_divide_are_rejected)
{
    float x[512] = {0};
    uint8_t codes[512], scales[64];
    float f32_scales[8], xhat[512];
    int untouched;
    const size_t bad_n[] = {1, 17, 100, 129, 511};
    for (size_t k = 0; k < sizeof bad_n / sizeof bad_n[0]; k++) {
        ck_assert_int_eq(quantise_all(x, bad_n[k], &untouched), KVF_ELENGTH);
        ck_assert(untouched);
    }
    ck_assert_int_eq(kvf_quant_mxfp8_e4m3(codes, scales, x, 16), KVF_ELENGTH);
    ck_assert_int_eq(kvf_quant_mxfp4(codes, scales, x, 48), KVF_ELENGTH);
    ck_assert_int_eq(kvf_quant_fp8_ue8m0(codes, f32_scales, x, 64), KVF_ELENGTH);
    ck_assert_int_eq(kvf_quant_fp8_e8m0_rceil(codes, scales, x, 512, 0), KVF_ELENGTH);
    ck_assert_int_eq(kvf_quant_fp8_e8m0_rceil(codes, scales, x, 96, 64), KVF_ELENGTH);
    ck_assert_int_eq(kvf_dequant_mxfp8_e4m3(xhat, codes, scales, 48), KVF_ELENGTH);
    ck_assert_int_eq(kvf_dequant_mxfp4(xhat, codes, scales, 16), KVF_ELENGTH);
    ck_assert_int_eq(kvf_dequant_nvfp4(xhat, codes, scales, 24, 1.0f), KVF_ELENGTH);
    ck_assert_int_eq(kvf_dequant_fp4_v41(xhat, codes, scales, 8), KVF_ELENGTH);
    ck_assert_int_eq(kvf_dequant_fp8_ue8m0(xhat, codes, f32_scales, 192), KVF_ELENGTH);
    ck_assert_int_eq(kvf_dequant_fp8_e8m0(xhat, codes, scales, 64, 0), KVF_ELENGTH);
    ck_assert_int_eq(kvf_dequant_fp8_e8m0(xhat, codes, scales, 100, 32), KVF_ELENGTH);
    /* n = 0 is an empty vector, every block divides it */
    ck_assert_int_eq(quantise_all(x, 0, &untouched), KVF_OK);
    ck_assert(untouched);
}
END_TEST

START_TEST(test_nan_or_inf_in_a_block_is_rejected_and_nothing_is_written)
{
    float x[512];
    int untouched;
    rng r = {7};
    fill_blocks(x, 512, 128, -4, 4, &r);
    x[300] = NAN;
    ck_assert_int_eq(quantise_all(x, 512, &untouched), KVF_ENAN);
    ck_assert(untouched);
    x[300] = -INFINITY;
    ck_assert_int_eq(quantise_all(x, 512, &untouched), KVF_EINF);
    ck_assert(untouched);
    x[511] = -NAN;   /* NaN outranks an inf before it */
    ck_assert_int_eq(quantise_all(x, 512, &untouched), KVF_ENAN);
    ck_assert(untouched);
    x[511] = INFINITY;
    x[3] = NAN;      /* and one after it */
    ck_assert_int_eq(quantise_all(x, 512, &untouched), KVF_ENAN);
    ck_assert(untouched);
    ck_assert_int_eq(kvf_check_finite(x + 4, 296), KVF_OK);
}
END_TEST

/* kvf_check_finite at every position of vectors of every length up to 40 (whole rows of lanes and
 * ragged tails): NaN of either sign gives KVF_ENAN, also beside an inf; ±inf alone gives KVF_EINF;
 * the largest finite values, subnormals and −0 give KVF_OK. */
START_TEST(test_check_finite_finds_nan_and_inf_at_every_position)
{
    float x[40];
    for (size_t n = 1; n <= 40; n++) {
        for (size_t i = 0; i < n; i++) x[i] = i % 3 == 0 ? -FLT_MAX : i % 3 == 1 ? 0x1p-149f : -0.0f;
        ck_assert_int_eq(kvf_check_finite(x, n), KVF_OK);
        for (size_t i = 0; i < n; i++) {
            float keep = x[i], keep_mirror = x[n - 1 - i];
            x[i] = NAN;
            ck_assert_msg(kvf_check_finite(x, n) == KVF_ENAN, "NaN at %zu of %zu", i, n);
            x[i] = -NAN;
            ck_assert_msg(kvf_check_finite(x, n) == KVF_ENAN, "-NaN at %zu of %zu", i, n);
            x[i] = i % 2 ? INFINITY : -INFINITY;
            ck_assert_msg(kvf_check_finite(x, n) == KVF_EINF, "inf at %zu of %zu", i, n);
            x[n - 1 - i] = NAN;
            ck_assert_msg(kvf_check_finite(x, n) == KVF_ENAN, "NaN at %zu beside inf at %zu of %zu", n - 1 - i, i,
                          n);
            x[i] = keep;
            x[n - 1 - i] = keep_mirror;
        }
    }
}
END_TEST

START_TEST(test_nvfp4_rejects_a_global_scale_that_is_not_positive_and_finite)
{
    float x[16] = {1.0f}, xhat[16];
    uint8_t codes[8], scales[1];
    const float bad[] = {0.0f, -1.0f, NAN, INFINITY};
    for (size_t k = 0; k < 4; k++) {
        ck_assert_int_eq(kvf_quant_nvfp4(codes, scales, x, 16, bad[k]), KVF_ESCALE);
        ck_assert_int_eq(kvf_dequant_nvfp4(xhat, codes, scales, 16, bad[k]), KVF_ESCALE);
    }
}
END_TEST

START_TEST(test_all_zero_blocks_get_the_stated_scale_and_zero_codes)
{
    float x[512] = {0}, xhat[512];
    uint8_t codes[512], scales[64];
    float f32_scales[4];
    x[1] = -0.0f;

    /* OCP floor: amax 0 read as 2^-126, k = −126 − emax clamps to −127, code 0x00 */
    ck_assert_int_eq(kvf_quant_mxfp8_e4m3(codes, scales, x, 32), KVF_OK);
    ck_assert_uint_eq(scales[0], 0x00);
    ck_assert_uint_eq(codes[0], 0x00);
    ck_assert_uint_eq(codes[1], 0x80);
    ck_assert_int_eq(kvf_quant_mxfp4(codes, scales, x, 32), KVF_OK);
    ck_assert_uint_eq(scales[0], 0x00);
    ck_assert_uint_eq(codes[0], 0x80);
    /* act_quant: amax 1e-4, k = ceil(log2(1e-4 / 448)) = −22 */
    ck_assert_int_eq(kvf_quant_fp8_ue8m0(codes, f32_scales, x, 128), KVF_OK);
    ck_assert(f32_scales[0] == 0x1p-22f);
    ck_assert_int_eq(ceil_log2((double)1e-4f / 448.0), -22);
    ck_assert_int_eq(kvf_quant_fp8_e8m0_rceil(codes, scales, x, 64, 64), KVF_OK);
    ck_assert_uint_eq(scales[0], 127 - 22);
    /* V4 indexer: amax 6·2^-126, scale 2^-126, code 0x01 */
    ck_assert_int_eq(kvf_quant_mxfp4_rceil(codes, scales, x, 32), KVF_OK);
    ck_assert_uint_eq(scales[0], 0x01);
    /* V4.1 FP4: amax 6·2^-9, scale 2^-9, E4M3 code 0x01 */
    ck_assert_int_eq(kvf_quant_fp4_v41(codes, scales, x, 16), KVF_OK);
    ck_assert_uint_eq(scales[0], 0x01);
    /* NVFP4: the block scale clamps up to 2^-6, E4M3 code 0x08 */
    ck_assert_int_eq(kvf_quant_nvfp4(codes, scales, x, 16, kvf_nvfp4_global_scale(0.0f)), KVF_OK);
    ck_assert_uint_eq(scales[0], 0x08);

    /* and zero blocks decode to zeros, −0 kept */
    ck_assert_int_eq(kvf_quant_fp8_e8m0_rceil(codes, scales, x, 512, 32), KVF_OK);
    ck_assert_int_eq(kvf_dequant_fp8_e8m0(xhat, codes, scales, 512, 32), KVF_OK);
    for (size_t i = 0; i < 512; i++) ck_assert(xhat[i] == 0.0f && !!signbit(xhat[i]) == (i == 1));
    ck_assert_int_eq(kvf_quant_mxfp4_rceil(codes, scales, x, 512), KVF_OK);
    ck_assert_int_eq(kvf_dequant_mxfp4(xhat, codes, scales, 512), KVF_OK);
    for (size_t i = 0; i < 512; i++) ck_assert(xhat[i] == 0.0f && !!signbit(xhat[i]) == (i == 1));
}
END_TEST

START_TEST(test_blocks_under_the_amax_floor_get_the_floor_scale)
{
    float x[128] = {0};
    uint8_t codes[128], scales[4];
    float f32_scales[1];
    x[5] = 3e-5f;   /* under act_quant's 1e-4 */
    ck_assert_int_eq(kvf_quant_fp8_ue8m0(codes, f32_scales, x, 128), KVF_OK);
    ck_assert(f32_scales[0] == 0x1p-22f);
    ck_assert_uint_eq(codes[5], e4m3_code(3e-5f / 0x1p-22f));
    x[5] = 0x1p-140f;   /* under 6·2^-126 */
    ck_assert_int_eq(kvf_quant_mxfp4_rceil(codes, scales, x, 32), KVF_OK);
    ck_assert_uint_eq(scales[0], 0x01);
    x[5] = 0.01f;   /* under 6·2^-9 = 0.01171875 */
    ck_assert_int_eq(kvf_quant_fp4_v41(codes, scales, x, 16), KVF_OK);
    ck_assert_uint_eq(scales[0], 0x01);
}
END_TEST

START_TEST(test_strerror_names_every_code)
{
    const int codes[] = {KVF_OK, KVF_ELENGTH, KVF_ENAN, KVF_EINF, KVF_ESCALE, KVF_ELAYOUT};
    for (size_t i = 0; i < 6; i++)
        for (size_t j = i + 1; j < 6; j++) ck_assert_str_ne(kvf_strerror(codes[i]), kvf_strerror(codes[j]));
    ck_assert_str_eq(kvf_strerror(-12345), "unknown error code");
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch05_formats_block");
    TCase *tc = tcase_create("block");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_mxfp8_e4m3_matches_ocp_floor_definition);
    tcase_add_test(tc, test_mxfp4_matches_ocp_floor_definition);
    tcase_add_test(tc, test_nvfp4_matches_two_level_definition);
    tcase_add_test(tc, test_nvfp4_global_scale_is_amax_over_2688_with_a_normal_floor);
    tcase_add_test(tc, test_fp4_v41_matches_deepseek_recipe);
    tcase_add_test(tc, test_fp8_ue8m0_matches_act_quant_definition);
    tcase_add_test(tc, test_fp8_e8m0_rceil_matches_act_quant_definition_per_64_and_per_32);
    tcase_add_test(tc, test_mxfp4_rceil_matches_v4_indexer_definition);
    tcase_add_test(tc, test_dequantised_error_is_within_half_a_step_times_the_scale_or_the_saturation);
    tcase_add_test(tc, test_dequant_is_element_times_scale_for_every_code);
    tcase_add_test(tc, test_e2m1_element_2j_is_in_the_low_nibble);
    tcase_add_test(tc, test_e4m3_scale_reaches_the_4_and_6_rungs_where_a_power_of_two_scale_stops_at_3);
    tcase_add_test(tc, test_fp4_v41_matches_hand_computation);
    tcase_add_test(tc, test_fp4_scales_round_in_the_recipes_float32_order);
    tcase_add_test(tc, test_lengths_the_block_does_not_divide_are_rejected);
    tcase_add_test(tc, test_nan_or_inf_in_a_block_is_rejected_and_nothing_is_written);
    tcase_add_test(tc, test_nvfp4_rejects_a_global_scale_that_is_not_positive_and_finite);
    tcase_add_test(tc, test_all_zero_blocks_get_the_stated_scale_and_zero_codes);
    tcase_add_test(tc, test_blocks_under_the_amax_floor_get_the_floor_scale);
    tcase_add_test(tc, test_strerror_names_every_code);
    tcase_add_test(tc, test_fp4_e4m3_scaled_recipes_match_definition_when_n_spans_several_scale_batches);
    tcase_add_test(tc, test_ocp_floor_recipes_match_definition_when_the_scale_is_a_float32_subnormal);
    tcase_add_test(tc, test_check_finite_finds_nan_and_inf_at_every_position);
    suite_add_tcase(s, tc);
    return s;
}
