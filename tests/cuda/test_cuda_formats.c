/* The formats twins (cuda/element_cuda.h, block_cuda.h, rows_cuda.h) against formats/: every code
 * decoded, every rounding edge and specials encoded, each block quantiser and dequantiser and every
 * DeepSeek row, compared byte for byte; errors (lengths, NaN, inf, a bad global scale) give the same
 * codes with the outputs untouched. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"

#include "block.h"
#include "block_cuda.h"
#include "element.h"
#include "element_cuda.h"
#include "rows.h"
#include "rows_cuda.h"

/* A sentinel byte no twin writes on a rejected call. */
#define SENTINEL 0x5A

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Floats at equal bits (NaN payloads and signs included). */
static void expect_same_floats(const char *what, const float *got, const float *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(bits_of(got[i]) == bits_of(want[i]), "%s [%zu]: 0x%08x, formats 0x%08x", what, i,
                      bits_of(got[i]), bits_of(want[i]));
}

static void expect_same_bytes(const char *what, const uint8_t *got, const uint8_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s byte %zu: 0x%02x, formats 0x%02x", what, i, got[i], want[i]);
}

/* ---- the inputs: every rounding edge of a format, specials, and random bit patterns ---------------- */

typedef struct {
    float *x;
    size_t n, cap;
} float_list;

static void push(float_list *l, float v)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->x = realloc(l->x, l->cap * sizeof *l->x);
        ck_assert(l->x != NULL);
    }
    l->x[l->n++] = v;
}

/* v, −v and their float32 neighbours */
static void push_around(float_list *l, float v)
{
    const float s[2] = {v, -v};
    for (int k = 0; k < 2; k++) {
        push(l, s[k]);
        push(l, nextafterf(s[k], INFINITY));
        push(l, nextafterf(s[k], -INFINITY));
    }
}

/* Every code's value of a format with `top` the largest finite magnitude code, the midpoints between
 * neighbours (exact in float32: one bit more than the format has) and the midpoint past the top;
 * then specials and 4096 random bit patterns (NaNs, infinities and subnormals among them). */
static float_list edge_inputs(float (*decode)(uint8_t), unsigned top)
{
    float_list l = {0};
    for (unsigned c = 0; c <= top; c++) {
        const float v = decode((uint8_t)c);
        const float next = c < top ? decode((uint8_t)(c + 1)) : 2.0f * v - decode((uint8_t)(c - 1));
        push_around(&l, v);
        push_around(&l, v + (next - v) / 2);
    }
    const float specials[] = {0.0f, INFINITY, NAN, 1e-45f, 1e-40f, 0x1p-126f, 1e30f, 0x1.FFFFFEp127f};
    for (size_t i = 0; i < sizeof specials / sizeof specials[0]; i++) push_around(&l, specials[i]);
    test_rng r = {0x9E3779B97F4A7C15ull};
    for (int i = 0; i < 4096; i++) push(&l, float_of((uint32_t)test_next(&r)));
    return l;
}

static float e2m1_decode_byte(uint8_t c) { return kvf_e2m1_decode(c); }
static float bf16_decode_byte(uint8_t c) { return kvf_bf16_decode((uint16_t)(0x3F00u + c)); }

/* ---- element codecs ---------------------------------------------------------------------------------- */

typedef int (*encode8_cuda)(uint8_t *, const float *, size_t);
typedef uint8_t (*encode8_ref)(float);

static void check_encode8(const char *what, encode8_cuda twin, encode8_ref ref, const float_list *in)
{
    uint8_t *got = malloc(in->n), *want = malloc(in->n);
    float *dx = dev_upload(in->x, in->n * sizeof(float));
    uint8_t *dc = dev_upload(NULL, in->n);
    for (size_t i = 0; i < in->n; i++) want[i] = ref(in->x[i]);
    FOR_EACH_ORDER(order) {
        CUDA_OK(twin(dc, dx, in->n));
        dev_download(got, dc, in->n);
        for (size_t i = 0; i < in->n; i++)
            ck_assert_msg(got[i] == want[i], "%s (%s) of %a (0x%08x): 0x%02x, formats 0x%02x", what, order, in->x[i],
                          bits_of(in->x[i]), got[i], want[i]);
    }
    kvl_cuda_free(dx);
    kvl_cuda_free(dc);
    free(got);
    free(want);
}

START_TEST(test_e4m3_encoders_match_formats_at_every_edge)
{
    float_list in = edge_inputs(kvf_e4m3_decode, 0x7E);
    check_encode8("e4m3 encode", kvf_e4m3_encode_n_cuda, kvf_e4m3_encode, &in);
    check_encode8("e4m3 encode_sat", kvf_e4m3_encode_sat_n_cuda, kvf_e4m3_encode_sat, &in);
    free(in.x);
}
END_TEST

START_TEST(test_e5m2_encoders_match_formats_at_every_edge)
{
    float_list in = edge_inputs(kvf_e5m2_decode, 0x7B);
    check_encode8("e5m2 encode", kvf_e5m2_encode_n_cuda, kvf_e5m2_encode, &in);
    check_encode8("e5m2 encode_sat", kvf_e5m2_encode_sat_n_cuda, kvf_e5m2_encode_sat, &in);
    free(in.x);
}
END_TEST

/* Both E2M1 encoders (compare ladder and cvt intrinsic) and the one this GPU uses; packed pairs with an
 * odd count, so the last byte's high nibble is the 0 formats writes. */
START_TEST(test_e2m1_encoders_match_formats_at_every_edge)
{
    float_list in = edge_inputs(e2m1_decode_byte, 0x7);
    const size_t n = in.n - (in.n % 2 == 0), bytes = (n + 1) / 2;
    uint8_t *want = malloc(bytes), *got = malloc(bytes);
    kvf_e2m1_encode_n(want, in.x, n);
    float *dx = dev_upload(in.x, n * sizeof(float));
    uint8_t *dp = dev_upload(NULL, bytes);
    int (*const twins[3])(uint8_t *, const float *, size_t) = {kvf_e2m1_encode_n_cuda, kvf_e2m1_encode_n_compare_cuda,
                                                               kvf_e2m1_encode_n_cvt_cuda};
    const char *names[3] = {"e2m1 encode", "e2m1 compare", "e2m1 cvt"};
    for (int k = 0; k < 3; k++) FOR_EACH_ORDER(order) {
            CUDA_OK(twins[k](dp, dx, n));
            dev_download(got, dp, bytes);
            expect_same_bytes(names[k], got, want, bytes);
        }
    kvl_cuda_free(dx);
    kvl_cuda_free(dp);
    free(want);
    free(got);
    free(in.x);
}
END_TEST

START_TEST(test_bf16_encoders_match_formats_at_every_edge)
{
    float_list in = edge_inputs(bf16_decode_byte, 0xFF);
    uint16_t *want = malloc(in.n * 2), *want_sat = malloc(in.n * 2), *got = malloc(in.n * 2);
    kvf_bf16_encode_n(want, in.x, in.n);
    kvf_bf16_encode_sat_n(want_sat, in.x, in.n);
    float *dx = dev_upload(in.x, in.n * sizeof(float));
    uint16_t *dc = dev_upload(NULL, in.n * 2);
    FOR_EACH_ORDER(order) {
        CUDA_OK(kvf_bf16_encode_n_cuda(dc, dx, in.n));
        dev_download(got, dc, in.n * 2);
        for (size_t i = 0; i < in.n; i++)
            ck_assert_msg(got[i] == want[i], "bf16 of %a: 0x%04x, formats 0x%04x", in.x[i], got[i], want[i]);
        CUDA_OK(kvf_bf16_encode_sat_n_cuda(dc, dx, in.n));
        dev_download(got, dc, in.n * 2);
        for (size_t i = 0; i < in.n; i++)
            ck_assert_msg(got[i] == want_sat[i], "bf16 sat of %a: 0x%04x, formats 0x%04x", in.x[i], got[i],
                          want_sat[i]);
    }
    kvl_cuda_free(dx);
    kvl_cuda_free(dc);
    free(want);
    free(want_sat);
    free(got);
    free(in.x);
}
END_TEST

START_TEST(test_decoders_match_formats_on_every_code)
{
    uint8_t codes[256];
    uint16_t wide[65536];
    float *want = malloc(65536 * sizeof(float)), *got = malloc(65536 * sizeof(float));
    for (unsigned c = 0; c < 256; c++) codes[c] = (uint8_t)c;
    for (unsigned c = 0; c < 65536; c++) wide[c] = (uint16_t)c;
    uint8_t *dcodes = dev_upload(codes, sizeof codes);
    uint16_t *dwide = dev_upload(wide, sizeof wide);
    float *dx = dev_upload(NULL, 65536 * sizeof(float));
    FOR_EACH_ORDER(order) {
        kvf_e4m3_decode_n(want, codes, 256);
        CUDA_OK(kvf_e4m3_decode_n_cuda(dx, dcodes, 256));
        dev_download(got, dx, 256 * sizeof(float));
        expect_same_floats("e4m3 decode", got, want, 256);
        kvf_e5m2_decode_n(want, codes, 256);
        CUDA_OK(kvf_e5m2_decode_n_cuda(dx, dcodes, 256));
        dev_download(got, dx, 256 * sizeof(float));
        expect_same_floats("e5m2 decode", got, want, 256);
        kvf_e2m1_decode_n(want, codes, 512); /* every nibble, in both halves of a byte */
        CUDA_OK(kvf_e2m1_decode_n_cuda(dx, dcodes, 512));
        dev_download(got, dx, 512 * sizeof(float));
        expect_same_floats("e2m1 decode", got, want, 512);
        kvf_bf16_decode_n(want, wide, 65536);
        CUDA_OK(kvf_bf16_decode_n_cuda(dx, dwide, 65536));
        dev_download(got, dx, 65536 * sizeof(float));
        expect_same_floats("bf16 decode", got, want, 65536);
    }
    kvl_cuda_free(dcodes);
    kvl_cuda_free(dwide);
    kvl_cuda_free(dx);
    free(want);
    free(got);
}
END_TEST

/* ---- block quantisers ------------------------------------------------------------------------------- */

/* x[n] in blocks of `block` whose magnitudes span the ranges the scale rules treat differently: an
 * all-zero block, subnormal and tiny blocks, a block just under an E4M3 or E2M1 rounding edge, large
 * ones; the rest random with a per-block scale. */
static void fill_blocks(float *x, size_t n, size_t block, uint64_t seed)
{
    static const float scale_of[] = {0.0f, 1e-42f, 1e-20f, 3e-5f, 0.0371f, 1.0f, 5.99f, 447.9f, 3e4f, 1e30f};
    const size_t n_scales = sizeof scale_of / sizeof scale_of[0];
    test_rng r = {seed};
    for (size_t b = 0; b * block < n; b++) {
        const float s = scale_of[b % n_scales] * (b >= n_scales ? 1.0f + (float)(test_next(&r) % 7) : 1.0f);
        for (size_t i = b * block; i < (b + 1) * block && i < n; i++) x[i] = s * test_uniform(&r);
    }
}

typedef enum { SCALE_BYTES_1 = 1, SCALE_BYTES_4 = 4 } scale_width;

typedef enum { MXFP8, MXFP4, NVFP4, FP4_V41, FP8_UE8M0, FP8_RCEIL_64, FP8_RCEIL_32, MXFP4_RCEIL } recipe_id;

/* One recipe: its block, its code bytes per value (num/den) and scale bytes per block. */
typedef struct {
    const char *name;
    recipe_id id;
    size_t block, code_bytes_num, code_bytes_den;
    scale_width scale_bytes;
} recipe;

static const recipe RECIPES[] = {
    {"mxfp8_e4m3", MXFP8, 32, 1, 1, SCALE_BYTES_1},
    {"mxfp4", MXFP4, 32, 1, 2, SCALE_BYTES_1},
    {"nvfp4", NVFP4, 16, 1, 2, SCALE_BYTES_1},
    {"fp4_v41", FP4_V41, 16, 1, 2, SCALE_BYTES_1},
    {"fp8_ue8m0", FP8_UE8M0, 128, 1, 1, SCALE_BYTES_4},
    {"fp8_e8m0_rceil/64", FP8_RCEIL_64, 64, 1, 1, SCALE_BYTES_1},
    {"fp8_e8m0_rceil/32", FP8_RCEIL_32, 32, 1, 1, SCALE_BYTES_1},
    {"mxfp4_rceil", MXFP4_RCEIL, 32, 1, 2, SCALE_BYTES_1},
};
#define N_RECIPES (sizeof RECIPES / sizeof RECIPES[0])

/* The formats quantiser of a recipe, scales as bytes; p is NVFP4's global scale. */
static int quant_ref(recipe_id r, uint8_t *c, uint8_t *s, const float *x, size_t n, float p)
{
    switch (r) {
    case MXFP8: return kvf_quant_mxfp8_e4m3(c, s, x, n);
    case MXFP4: return kvf_quant_mxfp4(c, s, x, n);
    case NVFP4: return kvf_quant_nvfp4(c, s, x, n, p);
    case FP4_V41: return kvf_quant_fp4_v41(c, s, x, n);
    case FP8_UE8M0: return kvf_quant_fp8_ue8m0(c, (float *)(void *)s, x, n);
    case FP8_RCEIL_64: return kvf_quant_fp8_e8m0_rceil(c, s, x, n, 64);
    case FP8_RCEIL_32: return kvf_quant_fp8_e8m0_rceil(c, s, x, n, 32);
    case MXFP4_RCEIL: return kvf_quant_mxfp4_rceil(c, s, x, n);
    }
    return -1;
}

static int quant_twin(recipe_id r, uint8_t *c, uint8_t *s, const float *x, size_t n, float p)
{
    switch (r) {
    case MXFP8: return kvf_quant_mxfp8_e4m3_cuda(c, s, x, n);
    case MXFP4: return kvf_quant_mxfp4_cuda(c, s, x, n);
    case NVFP4: return kvf_quant_nvfp4_cuda(c, s, x, n, p);
    case FP4_V41: return kvf_quant_fp4_v41_cuda(c, s, x, n);
    case FP8_UE8M0: return kvf_quant_fp8_ue8m0_cuda(c, (float *)(void *)s, x, n);
    case FP8_RCEIL_64: return kvf_quant_fp8_e8m0_rceil_cuda(c, s, x, n, 64);
    case FP8_RCEIL_32: return kvf_quant_fp8_e8m0_rceil_cuda(c, s, x, n, 32);
    case MXFP4_RCEIL: return kvf_quant_mxfp4_rceil_cuda(c, s, x, n);
    }
    return -1;
}

/* The formats dequantiser of the bytes a recipe writes (MXFP4's reads mxfp4_rceil's too). */
static int dequant_ref(recipe_id r, float *x, const uint8_t *c, const uint8_t *s, size_t n, float p)
{
    switch (r) {
    case MXFP8: return kvf_dequant_mxfp8_e4m3(x, c, s, n);
    case MXFP4:
    case MXFP4_RCEIL: return kvf_dequant_mxfp4(x, c, s, n);
    case NVFP4: return kvf_dequant_nvfp4(x, c, s, n, p);
    case FP4_V41: return kvf_dequant_fp4_v41(x, c, s, n);
    case FP8_UE8M0: return kvf_dequant_fp8_ue8m0(x, c, (const float *)(const void *)s, n);
    case FP8_RCEIL_64: return kvf_dequant_fp8_e8m0(x, c, s, n, 64);
    case FP8_RCEIL_32: return kvf_dequant_fp8_e8m0(x, c, s, n, 32);
    }
    return -1;
}

static int dequant_twin(recipe_id r, float *x, const uint8_t *c, const uint8_t *s, size_t n, float p)
{
    switch (r) {
    case MXFP8: return kvf_dequant_mxfp8_e4m3_cuda(x, c, s, n);
    case MXFP4:
    case MXFP4_RCEIL: return kvf_dequant_mxfp4_cuda(x, c, s, n);
    case NVFP4: return kvf_dequant_nvfp4_cuda(x, c, s, n, p);
    case FP4_V41: return kvf_dequant_fp4_v41_cuda(x, c, s, n);
    case FP8_UE8M0: return kvf_dequant_fp8_ue8m0_cuda(x, c, (const float *)(const void *)s, n);
    case FP8_RCEIL_64: return kvf_dequant_fp8_e8m0_cuda(x, c, s, n, 64);
    case FP8_RCEIL_32: return kvf_dequant_fp8_e8m0_cuda(x, c, s, n, 32);
    }
    return -1;
}

/* NVFP4's global scales: the usual one, and a tiny one that sends every block scale to the top of its
 * clamp (448) and the large blocks' quotients past 6. (Smaller still, s_global·s_block underflows to
 * zero and an all-zero block divides 0 by 0, whose NaN has the sign of the machine's default NaN:
 * negative on x86, positive on a GPU, so no twin can match formats there.) */
static float param_for(const recipe *R, const float *x, size_t n, int which)
{
    if (R->id != NVFP4) return 0.0f;
    float amax = 0.0f;
    for (size_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    return which == 0 ? kvf_nvfp4_global_scale(amax) : 0x1p-100f;
}

/* Quantise and dequantise x[n] with both and compare codes, scales and values byte for byte. */
static void check_recipe(const recipe *R, const float *x, size_t n, float param)
{
    const size_t cb = n * R->code_bytes_num / R->code_bytes_den, sb = n / R->block * R->scale_bytes;
    uint8_t *c_ref = malloc(cb + 1), *s_ref = malloc(sb + 1), *c_got = malloc(cb + 1), *s_got = malloc(sb + 1);
    float *y_ref = malloc(n * sizeof(float) + 1), *y_got = malloc(n * sizeof(float) + 1);
    ck_assert_int_eq(quant_ref(R->id, c_ref, s_ref, x, n, param), KVF_OK);
    ck_assert_int_eq(dequant_ref(R->id, y_ref, c_ref, s_ref, n, param), KVF_OK);
    float *dx = dev_upload(x, n * sizeof(float)), *dy = dev_upload(NULL, n * sizeof(float));
    uint8_t *dc = dev_upload(NULL, cb + 1), *ds = dev_upload(NULL, sb + 1);
    FOR_EACH_ORDER(order) {
        CUDA_OK(quant_twin(R->id, dc, ds, dx, n, param));
        dev_download(c_got, dc, cb);
        dev_download(s_got, ds, sb);
        expect_same_bytes(R->name, c_got, c_ref, cb);
        expect_same_bytes(R->name, s_got, s_ref, sb);
        CUDA_OK(dequant_twin(R->id, dy, dc, ds, n, param));
        dev_download(y_got, dy, n * sizeof(float));
        expect_same_floats(R->name, y_got, y_ref, n);
    }
    kvl_cuda_free(dx);
    kvl_cuda_free(dy);
    kvl_cuda_free(dc);
    kvl_cuda_free(ds);
    free(c_ref), free(s_ref), free(c_got), free(s_got), free(y_ref), free(y_got);
}

START_TEST(test_block_quantisers_match_formats_byte_for_byte)
{
    const size_t blocks[] = {1, 3, 10, 37}; /* 37 blocks: not a multiple of a thread block's groups */
    for (size_t r = 0; r < N_RECIPES; r++)
        for (size_t k = 0; k < sizeof blocks / sizeof blocks[0]; k++) {
            const size_t n = blocks[k] * RECIPES[r].block;
            float *x = malloc(n * sizeof(float));
            fill_blocks(x, n, RECIPES[r].block, 17 + r * 7 + k);
            for (int which = 0; which < 2; which++) {
                check_recipe(&RECIPES[r], x, n, param_for(&RECIPES[r], x, n, which));
                if (RECIPES[r].id != NVFP4) break;
            }
            free(x);
        }
}
END_TEST

/* The recipes as kvf_quant_finite_cuda names them, in RECIPES' order. */
static const kvf_recipe_cuda CUDA_RECIPE[] = {KVF_RECIPE_MXFP8_E4M3,        KVF_RECIPE_MXFP4,
                                              KVF_RECIPE_NVFP4,             KVF_RECIPE_FP4_V41,
                                              KVF_RECIPE_FP8_UE8M0,         KVF_RECIPE_FP8_E8M0_RCEIL_64,
                                              KVF_RECIPE_FP8_E8M0_RCEIL_32, KVF_RECIPE_MXFP4_RCEIL};

/* kvf_quant_finite_cuda's codes and scales of x[n] (device) into c[cb], s[sb] (host), by the wide kernel or
 * the readable twin */
static void quant_device(const recipe *R, int simple, uint8_t *c, uint8_t *s, uint8_t *dc, uint8_t *ds,
                         const float *dx, size_t n, float param, size_t cb, size_t sb)
{
    const kvf_recipe_cuda id = CUDA_RECIPE[R->id];
    CUDA_OK(kvl_cuda_fill(dc, SENTINEL, cb));
    CUDA_OK(kvl_cuda_fill(ds, SENTINEL, sb));
    CUDA_OK(simple ? kvf_quant_simple_cuda(id, dc, ds, dx, n, param) : kvf_quant_finite_cuda(id, dc, ds, dx, n, param));
    dev_download(c, dc, cb);
    dev_download(s, ds, sb);
}

/* The wide kernel, four vectors of four per thread and exact reciprocals of the power-of-two scales, against
 * the one-thread-per-vector twin (IEEE divisions) and formats, byte for byte, in every thread order: 421
 * blocks of each recipe span several thread blocks of 4096 values, the last partial, its last warp with
 * idle lanes. */
START_TEST(test_wide_quantisers_match_the_simple_twin_and_formats)
{
    for (size_t r = 0; r < N_RECIPES; r++) {
        const recipe *R = &RECIPES[r];
        const size_t n = 421 * R->block, cb = n * R->code_bytes_num / R->code_bytes_den;
        const size_t sb = n / R->block * R->scale_bytes;
        float *x = malloc(n * sizeof(float));
        fill_blocks(x, n, R->block, 61 + r);
        const float param = param_for(R, x, n, 0);
        uint8_t *c_ref = malloc(cb), *s_ref = malloc(sb), *c_twin = malloc(cb), *s_twin = malloc(sb);
        uint8_t *c_got = malloc(cb), *s_got = malloc(sb);
        ck_assert_int_eq(quant_ref(R->id, c_ref, s_ref, x, n, param), KVF_OK);
        float *dx = dev_upload(x, n * sizeof(float));
        uint8_t *dc = dev_upload(NULL, cb), *ds = dev_upload(NULL, sb);
        FOR_EACH_ORDER(order) {
            char twin[80], wide[80];
            snprintf(twin, sizeof twin, "%s, the simple twin's codes/scales (%s)", R->name, order);
            snprintf(wide, sizeof wide, "%s, the wide kernel's codes/scales, against the twin (%s)", R->name, order);
            quant_device(R, 1, c_twin, s_twin, dc, ds, dx, n, param, cb, sb);
            expect_same_bytes(twin, c_twin, c_ref, cb);
            expect_same_bytes(twin, s_twin, s_ref, sb);
            quant_device(R, 0, c_got, s_got, dc, ds, dx, n, param, cb, sb);
            expect_same_bytes(wide, c_got, c_twin, cb);
            expect_same_bytes(wide, s_got, s_twin, sb);
        }
        kvl_cuda_free(dx), kvl_cuda_free(dc), kvl_cuda_free(ds);
        free(x), free(c_ref), free(s_ref), free(c_twin), free(s_twin), free(c_got), free(s_got);
    }
}
END_TEST

/* Blocks whose maximum sits near float32's top, where a round-up scale's largest elements saturate so
 * that their decode stays finite (formats/block.h): the same bytes and values as formats, every recipe. */
START_TEST(test_block_quantisers_match_formats_near_float32_max)
{
    static const float tops[] = {240.0f * 0x1p120f, 248.0f * 0x1p120f, 3.4f * 0x1p126f, 3.5f * 0x1p126f, FLT_MAX};
    static const float fractions[] = {1.0f, -1.0f, 0.97f, -0.5f, 0.3f, 1e-3f, 0.0f, -0.999f};
    enum { N_TOPS = sizeof tops / sizeof tops[0] };
    for (size_t r = 0; r < N_RECIPES; r++) {
        const size_t block = RECIPES[r].block, n = N_TOPS * block;
        float *x = malloc(n * sizeof(float));
        for (size_t i = 0; i < n; i++) x[i] = tops[i / block] * fractions[i % 8];
        check_recipe(&RECIPES[r], x, n, param_for(&RECIPES[r], x, n, 0));
        free(x);
    }
    /* NVFP4 with a global scale that puts amax/6/s_global at 433, rounded up to the scale 448: 6 times
     * the divisor passes FLT_MAX, and the codes saturate (formats/block.h). */
    for (size_t r = 0; r < N_RECIPES; r++) {
        if (RECIPES[r].id != NVFP4) continue;
        float x[16];
        for (size_t i = 0; i < 16; i++) x[i] = 0.99f * FLT_MAX * fractions[i % 8];
        check_recipe(&RECIPES[r], x, 16, 0.99f * FLT_MAX / (6.0f * 433.0f));
    }
}
END_TEST

/* A rejected call returns formats' code and writes nothing: the sentinel stays in codes and scales. */
static void expect_rejected(const recipe *R, const float *x, size_t n, size_t alloc_n, float param, int want)
{
    ck_assert_int_eq(quant_ref(R->id, NULL, NULL, x, n, param), want);
    float *dx = dev_upload(x, alloc_n * sizeof(float));
    uint8_t *dc = dev_filled(SENTINEL, alloc_n + 4), *ds = dev_filled(SENTINEL, alloc_n + 4);
    uint8_t *c = malloc(alloc_n + 4), *s = malloc(alloc_n + 4);
    FOR_EACH_ORDER(order) {
        ck_assert_int_eq(quant_twin(R->id, dc, ds, dx, n, param), want);
        dev_download(c, dc, alloc_n + 4);
        dev_download(s, ds, alloc_n + 4);
        for (size_t i = 0; i < alloc_n + 4; i++) ck_assert(c[i] == SENTINEL && s[i] == SENTINEL);
    }
    kvl_cuda_free(dx);
    kvl_cuda_free(dc);
    kvl_cuda_free(ds);
    free(c);
    free(s);
}

START_TEST(test_block_quantisers_reject_what_formats_rejects)
{
    for (size_t r = 0; r < N_RECIPES; r++) {
        const recipe *R = &RECIPES[r];
        const size_t n = 4 * R->block;
        float *x = calloc(n, sizeof(float));
        fill_blocks(x, n, R->block, 5);
        const float param = param_for(R, x, n, 0);
        expect_rejected(R, x, n - 4, n, param, KVF_ELENGTH);
        x[n - 1] = INFINITY;
        expect_rejected(R, x, n, n, param, KVF_EINF);
        x[3] = -NAN; /* NaN outranks inf */
        expect_rejected(R, x, n, n, param, KVF_ENAN);
        if (R->id == NVFP4) {
            x[3] = x[n - 1] = 1.0f;
            expect_rejected(R, x, n, n, 0.0f, KVF_ESCALE);
            expect_rejected(R, x, n, n, INFINITY, KVF_ESCALE);
        }
        free(x);
    }
}
END_TEST

START_TEST(test_fp8_rceil_takes_power_of_two_blocks_only)
{
    float x[96] = {0};
    float *dx = dev_upload(x, sizeof x);
    uint8_t *dc = dev_upload(NULL, 96), *ds = dev_upload(NULL, 8);
    ck_assert_int_eq(kvf_quant_fp8_e8m0_rceil_cuda(dc, ds, dx, 96, 48), KVL_EINVAL);
    ck_assert_int_eq(kvf_quant_fp8_e8m0_rceil_cuda(dc, ds, dx, 96, 0), KVF_ELENGTH);
    ck_assert_int_eq(kvf_quant_fp8_e8m0_rceil_cuda(dc, ds, dx, 96, 64), KVF_ELENGTH);
    CUDA_OK(kvf_quant_fp8_e8m0_rceil_cuda(dc, ds, dx, 96, 32));
    kvl_cuda_free(dx);
    kvl_cuda_free(dc);
    kvl_cuda_free(ds);
}
END_TEST

/* ---- DeepSeek rows ---------------------------------------------------------------------------------- */

START_TEST(test_rows_pack_and_unpack_like_formats)
{
    enum { ROWS = 7 };
    for (int L = 0; L < KVF_N_ROW; L++) {
        const kvf_row layout = (kvf_row)L;
        const size_t V = kvf_row_values(layout), B = kvf_row_bytes(layout);
        float *v = malloc(ROWS * V * sizeof(float)), *back_ref = malloc(ROWS * V * sizeof(float));
        float *back = malloc(ROWS * V * sizeof(float));
        uint8_t *want = malloc(ROWS * B), *got = malloc(ROWS * B);
        fill_blocks(v, ROWS * V, 16, 100 + (uint64_t)L);
        for (size_t r = 0; r < ROWS; r++) {
            ck_assert_int_eq(kvf_row_pack(layout, want + r * B, v + r * V), KVF_OK);
            ck_assert_int_eq(kvf_row_unpack(layout, back_ref + r * V, want + r * B), KVF_OK);
        }
        float *dv = dev_upload(v, ROWS * V * sizeof(float)), *dback = dev_upload(NULL, ROWS * V * sizeof(float));
        uint8_t *drows = dev_filled(SENTINEL, ROWS * B);
        FOR_EACH_ORDER(order) {
            CUDA_OK(kvf_row_pack_cuda(layout, drows, dv, ROWS));
            dev_download(got, drows, ROWS * B);
            expect_same_bytes(kvf_row_name(layout), got, want, ROWS * B);
            CUDA_OK(kvf_row_unpack_cuda(layout, dback, drows, ROWS));
            dev_download(back, dback, ROWS * V * sizeof(float));
            expect_same_floats(kvf_row_name(layout), back, back_ref, ROWS * V);
        }
        kvl_cuda_free(dv);
        kvl_cuda_free(dback);
        kvl_cuda_free(drows);
        free(v), free(back_ref), free(back), free(want), free(got);
    }
}
END_TEST

/* A NaN in the kept bf16 part of the last row (outside every quantised block) rejects all rows. */
START_TEST(test_rows_reject_a_nan_anywhere_and_write_nothing)
{
    enum { ROWS = 3 };
    const kvf_row layout = KVF_ROW_V32_MAIN;
    const size_t V = kvf_row_values(layout), B = kvf_row_bytes(layout);
    float *v = calloc(ROWS * V, sizeof(float));
    uint8_t *got = malloc(ROWS * B);
    v[ROWS * V - 1] = NAN;
    ck_assert_int_eq(kvf_row_pack(layout, got, v + (ROWS - 1) * V), KVF_ENAN);
    float *dv = dev_upload(v, ROWS * V * sizeof(float));
    uint8_t *drows = dev_filled(SENTINEL, ROWS * B);
    FOR_EACH_ORDER(order) {
        ck_assert_int_eq(kvf_row_pack_cuda(layout, drows, dv, ROWS), KVF_ENAN);
        dev_download(got, drows, ROWS * B);
        for (size_t i = 0; i < ROWS * B; i++) ck_assert_uint_eq(got[i], SENTINEL);
    }
    ck_assert_int_eq(kvf_row_pack_cuda(KVF_N_ROW, drows, dv, ROWS), KVF_ELAYOUT);
    kvl_cuda_free(dv);
    kvl_cuda_free(drows);
    free(v);
    free(got);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = cuda_suite("cuda_formats");
    if (!cuda_present()) return s;
    TCase *te = tcase_create("elements");
    tcase_add_test(te, test_e4m3_encoders_match_formats_at_every_edge);
    tcase_add_test(te, test_e5m2_encoders_match_formats_at_every_edge);
    tcase_add_test(te, test_e2m1_encoders_match_formats_at_every_edge);
    tcase_add_test(te, test_bf16_encoders_match_formats_at_every_edge);
    tcase_add_test(te, test_decoders_match_formats_on_every_code);
    suite_add_tcase(s, te);
    TCase *tb = tcase_create("blocks");
    tcase_add_test(tb, test_block_quantisers_match_formats_byte_for_byte);
    tcase_add_test(tb, test_wide_quantisers_match_the_simple_twin_and_formats);
    tcase_add_test(tb, test_block_quantisers_match_formats_near_float32_max);
    tcase_add_test(tb, test_block_quantisers_reject_what_formats_rejects);
    tcase_add_test(tb, test_fp8_rceil_takes_power_of_two_blocks_only);
    suite_add_tcase(s, tb);
    TCase *tr = tcase_create("rows");
    tcase_add_test(tr, test_rows_pack_and_unpack_like_formats);
    tcase_add_test(tr, test_rows_reject_a_nan_anywhere_and_write_nothing);
    suite_add_tcase(s, tr);
    return s;
}
