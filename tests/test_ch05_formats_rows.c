/* DeepSeek KV rows (formats/rows.h) against their byte maps (FlashMLA; the DeepSeek-V4.1 report): sizes, byte maps, the bytes of
 * hand-built rows, and pack/unpack round trips within each field's format bound. */
#include "common.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "rows.h"

/* The E4M3 scale of a v41-main block is not a power of two, so fl32(x / s) and q × s each round once:
 * at most 2^-24 of the value each. */
#define FL32_HALF_ULP 0x1p-24

/* ---- the byte maps, typed in: the oracle for every layout ----------------------------------------- */

typedef struct { const char *name; size_t offset, size; } field_spec;

typedef enum { CODES_E4M3, CODES_E2M1 } codes_format;
typedef enum { SCALE_FP32, SCALE_E8M0, SCALE_E4M3 } scale_format;

typedef struct {
    kvf_row layout;
    const char *name;
    size_t bytes, values;
    size_t quant, block;          /* values 0..quant−1 are quantised in blocks */
    codes_format codes;
    scale_format scale;
    size_t codes_at, scale_at, rope_at;   /* byte offsets; the RoPE part is values quant..values−1 */
    field_spec fields[4];
    size_t n_fields;
} row_spec;

static const row_spec SPECS[] = {
    {KVF_ROW_V32_MAIN, "v32-main", 656, 576, 512, 128, CODES_E4M3, SCALE_FP32, 0, 512, 528,
     {{"nope", 0, 512}, {"scale", 512, 16}, {"rope", 528, 128}}, 3},
    {KVF_ROW_V32_INDEX, "v32-index", 132, 128, 128, 128, CODES_E4M3, SCALE_FP32, 0, 128, 0,
     {{"codes", 0, 128}, {"scale", 128, 4}}, 2},
    {KVF_ROW_V4_MAIN, "v4-main", 584, 512, 448, 64, CODES_E4M3, SCALE_E8M0, 0, 576, 448,
     {{"nope", 0, 448}, {"rope", 448, 128}, {"scale", 576, 7}, {"pad", 583, 1}}, 4},
    {KVF_ROW_V4_INDEX, "v4-index", 68, 128, 128, 32, CODES_E2M1, SCALE_E8M0, 0, 64, 0,
     {{"codes", 0, 64}, {"scale", 64, 4}}, 2},
    {KVF_ROW_V41_MAIN, "v41-main", 288, 512, 512, 16, CODES_E2M1, SCALE_E4M3, 0, 256, 0,
     {{"codes", 0, 256}, {"scale", 256, 32}}, 2},
    {KVF_ROW_V41_WINDOW, "v41-window", 528, 512, 512, 32, CODES_E4M3, SCALE_E8M0, 0, 512, 0,
     {{"codes", 0, 512}, {"scale", 512, 16}}, 2},
};
#define N_SPECS (sizeof SPECS / sizeof SPECS[0])

/* ---- formats from their definitions, in double ----------------------------------------------------- */

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

/* Nearest E4M3 magnitude to a ≥ 0, ties to the even code, saturating at 448. */
static unsigned e4m3_code_of_magnitude(double a)
{
    unsigned best = 0;
    for (unsigned c = 1; c <= 0x7E; c++) {
        double d = fabs(e4m3_value(c) - a), d_best = fabs(e4m3_value(best) - a);
        if (d < d_best || (d == d_best && c % 2 == 0)) best = c;
    }
    return best;
}

/* bf16 round to nearest even: 8 significant bits, bf16's subnormal quantum 2^-133 below 2^-126. */
static double bf16_rne(double x)
{
    if (x == 0) return x;
    int e;
    frexp(x, &e);
    double quantum = ldexp(1.0, (e < -125 ? -125 : e) - 8);
    return nearbyint(x / quantum) * quantum;
}

static int ceil_log2(double a)
{
    int e;
    double m = frexp(a, &e);
    return m == 0.5 ? e - 1 : e;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static double f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t bits_of_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

/* ---- the scale recipes of formats/rows.h, and the stored scale read back -------------------------- */

static double block_amax(const float *x, size_t k)
{
    double a = 0;
    for (size_t i = 0; i < k; i++) a = fmax(a, fabs(x[i]));
    return a;
}

/* The scale the layout's recipe picks for a block with maximum amax. */
static double recipe_scale(const row_spec *r, double amax)
{
    switch (r->layout) {
    case KVF_ROW_V4_INDEX:                 /* MXFP4, amax ≥ 6·2^-126, round up against 6 */
        return ldexp(1.0, ceil_log2(fmax(amax, 6 * 0x1p-126) / 6.0));
    case KVF_ROW_V41_MAIN: {               /* e4m3_rne(fl32(max(amax, 6·2^-9) / 6)) */
        float t = (float)fmax(amax, 6 * 0x1p-9) / 6.0f;
        return e4m3_value(e4m3_code_of_magnitude(t));
    }
    default:                               /* act_quant: amax ≥ 1e-4 (float32), round up against 448 */
        return ldexp(1.0, ceil_log2(fmax(amax, 1e-4f) / 448.0));
    }
}

/* The scale of block b as stored in the row's bytes. */
static double stored_scale(const row_spec *r, const uint8_t *row, size_t b)
{
    switch (r->scale) {
    case SCALE_FP32: return f32_of_bits(le32(row + r->scale_at + 4 * b));
    case SCALE_E8M0: return ldexp(1.0, (int)row[r->scale_at + b] - 127);
    case SCALE_E4M3: return e4m3_value(row[r->scale_at + b]);
    }
    return NAN;
}

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

/* values[n] in runs of 16 (the smallest block) whose magnitudes span 10 binades below 2^E, E uniform in
 * [−14, 6]: KV-cache sized numbers with blocks under every amax floor; run 3 is all zeros. */
static void fill_values(float *v, size_t n, rng *r)
{
    for (size_t run = 0; run < n / 16; run++) {
        int e = -14 + (int)(rng_next(r) % 21);
        for (size_t i = 0; i < 16; i++) {
            double mag = run == 3 ? 0.0 : ldexp(1.0, e) * exp2(-10.0 * rng_uniform(r));
            v[run * 16 + i] = (float)(rng_next(r) & 1 ? -mag : mag);
        }
    }
}

/* ---- tests: sizes and byte maps ------------------------------------------------------------------ */

START_TEST(test_row_bytes_are_656_132_584_68_288_528)
{
    for (size_t k = 0; k < N_SPECS; k++)
        ck_assert_msg(kvf_row_bytes(SPECS[k].layout) == SPECS[k].bytes, "%s: %zu bytes, want %zu", SPECS[k].name,
                      kvf_row_bytes(SPECS[k].layout), SPECS[k].bytes);
    /* the per-token arithmetic the sizes exist for: V3.2 61 × (656 + 132), V4.1-Flash 2.5 × (288 + 68) */
    ck_assert_uint_eq(61 * (kvf_row_bytes(KVF_ROW_V32_MAIN) + kvf_row_bytes(KVF_ROW_V32_INDEX)), 48068);
    ck_assert_uint_eq(5 * (kvf_row_bytes(KVF_ROW_V41_MAIN) + kvf_row_bytes(KVF_ROW_V4_INDEX)) / 2, 890);
    ck_assert_uint_eq(kvf_row_bytes(KVF_N_ROW), 0);
}
END_TEST

START_TEST(test_row_bytes_equal_sizeof_the_packed_structs)
{
    ck_assert_uint_eq(kvf_row_bytes(KVF_ROW_V32_MAIN), sizeof(kvf_row_v32_main));
    ck_assert_uint_eq(kvf_row_bytes(KVF_ROW_V32_INDEX), sizeof(kvf_row_v32_index));
    ck_assert_uint_eq(kvf_row_bytes(KVF_ROW_V4_MAIN), sizeof(kvf_row_v4_main));
    ck_assert_uint_eq(kvf_row_bytes(KVF_ROW_V4_INDEX), sizeof(kvf_row_v4_index));
    ck_assert_uint_eq(kvf_row_bytes(KVF_ROW_V41_MAIN), sizeof(kvf_row_v41_main));
    ck_assert_uint_eq(kvf_row_bytes(KVF_ROW_V41_WINDOW), sizeof(kvf_row_v41_window));
}
END_TEST

START_TEST(test_row_values_are_576_for_v32_main_128_for_index_keys_512_otherwise)
{
    for (size_t k = 0; k < N_SPECS; k++)
        ck_assert_msg(kvf_row_values(SPECS[k].layout) == SPECS[k].values, "%s: %zu values, want %zu",
                      SPECS[k].name, kvf_row_values(SPECS[k].layout), SPECS[k].values);
    ck_assert_uint_eq(kvf_row_values(KVF_N_ROW), 0);
}
END_TEST

START_TEST(test_row_names_round_trip_and_unknown_names_are_rejected)
{
    for (size_t k = 0; k < N_SPECS; k++) {
        kvf_row got = KVF_N_ROW;
        ck_assert_int_eq(kvf_row_from_name(SPECS[k].name, &got), KVF_OK);
        ck_assert_int_eq(got, SPECS[k].layout);
        ck_assert_str_eq(kvf_row_name(SPECS[k].layout), SPECS[k].name);
    }
    kvf_row got = KVF_ROW_V4_MAIN;
    ck_assert_int_eq(kvf_row_from_name("v5-main", &got), KVF_ELAYOUT);
    ck_assert_int_eq(kvf_row_from_name("V32-MAIN", &got), KVF_ELAYOUT);
    ck_assert_int_eq(kvf_row_from_name(NULL, &got), KVF_ELAYOUT);
    ck_assert_int_eq(got, KVF_ROW_V4_MAIN);
    ck_assert_ptr_null(kvf_row_name(KVF_N_ROW));
}
END_TEST

START_TEST(test_field_offsets_match_spec_byte_tables)
{
    for (size_t k = 0; k < N_SPECS; k++) {
        const row_spec *r = &SPECS[k];
        size_t n = 0, end = 0;
        const kvf_row_field *f = kvf_row_fields(r->layout, &n);
        ck_assert_msg(f && n == r->n_fields, "%s: %zu fields, want %zu", r->name, n, r->n_fields);
        for (size_t i = 0; i < n; i++) {
            ck_assert_msg(strcmp(f[i].name, r->fields[i].name) == 0 && f[i].offset == r->fields[i].offset &&
                              f[i].size == r->fields[i].size,
                          "%s field %zu: %s at %zu size %zu, want %s at %zu size %zu", r->name, i, f[i].name,
                          f[i].offset, f[i].size, r->fields[i].name, r->fields[i].offset, r->fields[i].size);
            ck_assert_msg(f[i].offset == end, "%s: field %s leaves a gap or overlaps", r->name, f[i].name);
            ck_assert(f[i].format && *f[i].format);
            end += f[i].size;
        }
        ck_assert_msg(end == kvf_row_bytes(r->layout), "%s: fields end at %zu", r->name, end);
    }
    size_t n = 7;
    ck_assert_ptr_null(kvf_row_fields(KVF_N_ROW, &n));
    ck_assert_uint_eq(n, 0);
}
END_TEST

/* ---- tests: pack and unpack ---------------------------------------------------------------------- */

/* The element code of quantised value i, read from the row: E4M3 one per byte, E2M1 2j low nibble. */
static double stored_element(const row_spec *r, const uint8_t *row, size_t i)
{
    if (r->codes == CODES_E4M3) return e4m3_value(row[r->codes_at + i]);
    return e2m1_value((row[r->codes_at + i / 2] >> (4 * (i % 2))) & 0xF);
}

/* Every quantised value of values[] → out[] is within the element format's half step times the stored
 * scale (or the saturation past 6 when an E4M3 scale rounded down), that scale is the recipe's, and the
 * value unpacked is the stored element times the stored scale. */
static void expect_quantised_part(const row_spec *r, const uint8_t *row, const float *values, const float *out)
{
    double slack = r->scale == SCALE_E4M3 ? FL32_HALF_ULP : 0.0;
    double max = r->codes == CODES_E4M3 ? 448.0 : 6.0;
    for (size_t b = 0; b < r->quant / r->block; b++) {
        double s = stored_scale(r, row, b), want = recipe_scale(r, block_amax(values + b * r->block, r->block));
        ck_assert_msg(s == want, "%s block %zu: scale %.9g, recipe %.9g", r->name, b, s, want);
        for (size_t i = b * r->block; i < (b + 1) * r->block; i++) {
            double y = fabs(values[i]) / s;
            double half = r->codes == CODES_E4M3 ? e4m3_half_step(y) : e2m1_half_step(y);
            double bound = (y > max ? y - max : half) * s + slack * (fabs(values[i]) + fabs(out[i]));
            double err = fabs((double)values[i] - out[i]);
            ck_assert_msg(err <= bound, "%s value %zu: %.9g came back %.9g, error %.3g above %.3g", r->name, i,
                          (double)values[i], (double)out[i], err, bound);
            ck_assert_msg(out[i] == stored_element(r, row, i) * s, "%s value %zu: %.9g is not element × scale",
                          r->name, i, (double)out[i]);
        }
    }
}

/* The RoPE part: bytes are bf16 RNE little-endian, values come back as that bf16, within half an ulp. */
static void expect_rope_part(const row_spec *r, const uint8_t *row, const float *values, const float *out)
{
    for (size_t i = r->quant; i < r->values; i++) {
        double want = bf16_rne(values[i]);
        const uint8_t *p = row + r->rope_at + 2 * (i - r->quant);
        uint32_t want_bits = bits_of_f32((float)want) >> 16;
        ck_assert_msg((uint32_t)(p[0] | p[1] << 8) == want_bits, "%s RoPE value %zu: bytes %02X %02X, bf16 %04X",
                      r->name, i, p[0], p[1], want_bits);
        ck_assert_msg(out[i] == want, "%s RoPE value %zu came back %.9g, bf16 %.9g", r->name, i, (double)out[i],
                      want);
        int e;
        frexp(values[i], &e);
        ck_assert(fabs((double)values[i] - out[i]) <= ldexp(1.0, e - 9));
    }
}

START_TEST(test_pack_unpack_round_trip_is_within_each_fields_format_bound)
{
    for (uint64_t seed = 0; seed < 8; seed++) {
        for (size_t k = 0; k < N_SPECS; k++) {
            const row_spec *r = &SPECS[k];
            rng g = {seed * 31 + k};
            float values[576], out[576];
            uint8_t row[656];
            fill_values(values, r->values, &g);
            ck_assert_int_eq(kvf_row_pack(r->layout, row, values), KVF_OK);
            ck_assert_int_eq(kvf_row_unpack(r->layout, out, row), KVF_OK);
            expect_quantised_part(r, row, values, out);
            expect_rope_part(r, row, values, out);
        }
    }
}
END_TEST

START_TEST(test_v4_pad_byte_is_zero)
{
    float values[512];
    uint8_t row[584];
    rng g = {3};
    fill_values(values, 512, &g);
    memset(row, 0xFF, sizeof row);
    ck_assert_int_eq(kvf_row_pack(KVF_ROW_V4_MAIN, row, values), KVF_OK);
    ck_assert_uint_eq(row[583], 0x00);
}
END_TEST

START_TEST(test_fp32_scales_are_little_endian)
{
    /* one block of amax 3000: scale 2^ceil(log2(3000/448)) = 8 = 0x41000000, stored 00 00 00 41 */
    float values[128] = {3000.0f};
    uint8_t row[132];
    ck_assert_int_eq(kvf_row_pack(KVF_ROW_V32_INDEX, row, values), KVF_OK);
    ck_assert(row[128] == 0x00 && row[129] == 0x00 && row[130] == 0x00 && row[131] == 0x41);
}
END_TEST

/* ---- tests: hand-built rows ---------------------------------------------------------------------- */

static void expect_bytes(const char *what, const uint8_t *row, size_t at, const uint8_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(row[at + i] == want[i], "%s: byte %zu is 0x%02X, by hand 0x%02X", what, at + i, row[at + i],
                      want[i]);
}

START_TEST(test_hand_built_v32_main_row_has_the_bytes_worked_out_by_hand)
{
    float v[576] = {0}, out[576];
    uint8_t row[656];
    v[0] = 448.0f;   /* block 0: amax 448, scale 2^ceil(log2 1) = 1 */
    v[1] = -1.0f;
    v[2] = 0.5f;
    v[128] = 1.0f;   /* block 1: amax 1, scale 2^ceil(log2(1/448)) = 2^-8; 1 / 2^-8 = 256 */
                     /* block 2: all zero, amax floor 1e-4, scale 2^-22 */
    v[384] = -3000.0f;  /* block 3: scale 8; −375 rounds to −384 (step 32 in [256, 512)) */
    v[512] = 1.0f;
    v[513] = -2.5f;
    v[574] = 1.0f + 3 * 0x1p-8f;   /* halfway between bf16 0x3F81 and 0x3F82: to the even 0x3F82 */
    v[575] = 1.0f + 0x1p-8f;       /* halfway between 0x3F80 and 0x3F81: to 0x3F80 */
    ck_assert_int_eq(kvf_row_pack(KVF_ROW_V32_MAIN, row, v), KVF_OK);

    /* E4M3: 448 = 0x7E, −1 = 0xB8, 0.5 = 0x30, 256 = 0x78, −384 = 0xFC */
    expect_bytes("latent codes", row, 0, (const uint8_t[]){0x7E, 0xB8, 0x30, 0x00}, 4);
    expect_bytes("latent code 128", row, 128, (const uint8_t[]){0x78}, 1);
    expect_bytes("latent code 384", row, 384, (const uint8_t[]){0xFC}, 1);
    /* FP32 LE: 1.0 = 3F800000, 2^-8 = 3B800000, 2^-22 = 34800000, 8 = 41000000 */
    expect_bytes("scales", row, 512,
                 (const uint8_t[]){0, 0, 0x80, 0x3F, 0, 0, 0x80, 0x3B, 0, 0, 0x80, 0x34, 0, 0, 0, 0x41}, 16);
    /* bf16 LE: 1.0 = 3F80, −2.5 = C020 */
    expect_bytes("rope", row, 528, (const uint8_t[]){0x80, 0x3F, 0x20, 0xC0}, 4);
    expect_bytes("rope ties", row, 652, (const uint8_t[]){0x82, 0x3F, 0x80, 0x3F}, 4);

    ck_assert_int_eq(kvf_row_unpack(KVF_ROW_V32_MAIN, out, row), KVF_OK);
    ck_assert(out[0] == 448.0f && out[1] == -1.0f && out[2] == 0.5f && out[128] == 1.0f);
    ck_assert(out[384] == -3072.0f && out[513] == -2.5f && out[574] == 1.0f + 0x1p-6f && out[575] == 1.0f);
}
END_TEST

START_TEST(test_hand_built_v32_index_row_has_the_bytes_worked_out_by_hand)
{
    float v[128] = {1.0f, -0.5f};   /* amax 1, scale 2^-8: 256 = 0x78, −128 = 0xF0 */
    uint8_t row[132];
    ck_assert_int_eq(kvf_row_pack(KVF_ROW_V32_INDEX, row, v), KVF_OK);
    expect_bytes("codes", row, 0, (const uint8_t[]){0x78, 0xF0, 0x00}, 3);
    expect_bytes("scale", row, 128, (const uint8_t[]){0, 0, 0x80, 0x3B}, 4);
}
END_TEST

START_TEST(test_hand_built_v4_main_row_has_the_bytes_worked_out_by_hand)
{
    float v[512] = {0}, out[512];
    uint8_t row[584];
    v[0] = 448.0f;   /* block 0: scale 2^0, E8M0 0x7F */
    v[64] = 1.0f;    /* block 1: scale 2^-8, E8M0 0x77; 256 = 0x78 */
                     /* blocks 2–6: zero, scale 2^-22, E8M0 0x69 */
    v[448] = 1.0f;   /* RoPE, bf16 3F80 */
    v[511] = -2.5f;  /* bf16 C020 */
    memset(row, 0xFF, sizeof row);
    ck_assert_int_eq(kvf_row_pack(KVF_ROW_V4_MAIN, row, v), KVF_OK);
    expect_bytes("nope codes", row, 0, (const uint8_t[]){0x7E, 0x00}, 2);
    expect_bytes("nope code 64", row, 64, (const uint8_t[]){0x78}, 1);
    expect_bytes("rope", row, 448, (const uint8_t[]){0x80, 0x3F}, 2);
    expect_bytes("rope last", row, 574, (const uint8_t[]){0x20, 0xC0}, 2);
    expect_bytes("scales and pad", row, 576, (const uint8_t[]){0x7F, 0x77, 0x69, 0x69, 0x69, 0x69, 0x69, 0x00}, 8);
    ck_assert_int_eq(kvf_row_unpack(KVF_ROW_V4_MAIN, out, row), KVF_OK);
    ck_assert(out[0] == 448.0f && out[64] == 1.0f && out[448] == 1.0f && out[511] == -2.5f && out[100] == 0.0f);
}
END_TEST

START_TEST(test_hand_built_v4_index_row_has_the_bytes_worked_out_by_hand)
{
    float v[128] = {0}, out[128];
    uint8_t row[68];
    v[0] = 1.0f;     /* block 0: amax 6, scale 2^ceil(log2 1) = 1 (0x7F); 1 → 0x2, −3 → 0xD, 6 → 0x7 */
    v[1] = -3.0f;
    v[2] = 6.0f;
    v[32] = 0.75f;   /* block 1: scale 2^ceil(log2 0.125) = 2^-3 (0x7C); 0.75 / 0.125 = 6 → 0x7 */
                     /* block 2: zero, amax floor 6·2^-126, scale 2^-126 (0x01) */
    v[96] = 7.0f;    /* block 3: scale 2^ceil(log2(7/6)) = 2 (0x80); 3.5 is a tie → 4, 0x6 */
    v[97] = -1.0f;   /* −0.5 → 0x9 */
    ck_assert_int_eq(kvf_row_pack(KVF_ROW_V4_INDEX, row, v), KVF_OK);
    expect_bytes("codes 0-3", row, 0, (const uint8_t[]){0xD2, 0x07}, 2);
    expect_bytes("code 32", row, 16, (const uint8_t[]){0x07}, 1);
    expect_bytes("codes 96-97", row, 48, (const uint8_t[]){0x96}, 1);
    expect_bytes("scales", row, 64, (const uint8_t[]){0x7F, 0x7C, 0x01, 0x80}, 4);
    ck_assert_int_eq(kvf_row_unpack(KVF_ROW_V4_INDEX, out, row), KVF_OK);
    ck_assert(out[0] == 1.0f && out[1] == -3.0f && out[2] == 6.0f && out[32] == 0.75f && out[96] == 8.0f &&
              out[97] == -1.0f);
}
END_TEST

START_TEST(test_hand_built_v41_main_row_has_the_bytes_worked_out_by_hand)
{
    /* block 0 is the block worked out in test_ch05_formats_block: amax 2.5, scale 13/32 (0x2D) */
    float v[512] = {2.5f, -1.0f, 1.015625f, 0.3046875f, 1.421875f, 2.03125f, -0.1015625f, 0.5078125f,
                    0.7109375f, 2.4375f, 0.0f, -2.5f, 0.1f, 1.6f, -0.6f, 1.3f};
    float out[512];
    uint8_t row[288];
    v[500] = 3000.0f;   /* block 31: amax / 6 = 500 saturates the scale at 448 (0x7E); 6.7 → 6, 0x7 */
    ck_assert_int_eq(kvf_row_pack(KVF_ROW_V41_MAIN, row, v), KVF_OK);
    expect_bytes("codes", row, 0, (const uint8_t[]){0xC7, 0x24, 0x66, 0x28, 0x74, 0xF0, 0x60, 0x5B, 0x00}, 9);
    expect_bytes("code 500", row, 250, (const uint8_t[]){0x07}, 1);
    /* blocks 1–30 are zero: amax floor 6·2^-9, scale 2^-9 (0x01) */
    expect_bytes("scales", row, 256, (const uint8_t[]){0x2D, 0x01, 0x01}, 3);
    expect_bytes("last scale", row, 287, (const uint8_t[]){0x7E}, 1);
    ck_assert_int_eq(kvf_row_unpack(KVF_ROW_V41_MAIN, out, row), KVF_OK);
    ck_assert(out[0] == 2.4375f && out[1] == -0.8125f && out[500] == 2688.0f);
}
END_TEST

START_TEST(test_hand_built_v41_window_row_has_the_bytes_worked_out_by_hand)
{
    float v[512] = {448.0f}, out[512];   /* block 0: scale 1 (0x7F); 448 = 0x7E */
    uint8_t row[528];
    v[32] = 1.0f;                        /* block 1: scale 2^-8 (0x77); 256 = 0x78 */
    v[511] = -0.25f;                     /* block 15: scale 2^ceil(log2(0.25/448)) = 2^-10 (0x75); −256 = 0xF8 */
    ck_assert_int_eq(kvf_row_pack(KVF_ROW_V41_WINDOW, row, v), KVF_OK);
    expect_bytes("code 0", row, 0, (const uint8_t[]){0x7E}, 1);
    expect_bytes("code 32", row, 32, (const uint8_t[]){0x78}, 1);
    expect_bytes("code 511", row, 511, (const uint8_t[]){0xF8}, 1);
    expect_bytes("scales", row, 512, (const uint8_t[]){0x7F, 0x77, 0x69}, 3);
    expect_bytes("last scale", row, 527, (const uint8_t[]){0x75}, 1);
    ck_assert_int_eq(kvf_row_unpack(KVF_ROW_V41_WINDOW, out, row), KVF_OK);
    ck_assert(out[0] == 448.0f && out[32] == 1.0f && out[511] == -0.25f);
}
END_TEST

/* ---- tests: bad input ---------------------------------------------------------------------------- */

START_TEST(test_pack_rejects_nan_and_inf_anywhere_in_the_row_and_leaves_it_untouched)
{
    for (size_t k = 0; k < N_SPECS; k++) {
        const row_spec *r = &SPECS[k];
        float v[576] = {0};
        uint8_t row[656];
        memset(row, 0xA5, sizeof row);
        v[r->values - 1] = NAN;   /* the RoPE part where there is one */
        ck_assert_int_eq(kvf_row_pack(r->layout, row, v), KVF_ENAN);
        v[r->values - 1] = 0.0f;
        v[0] = -INFINITY;
        ck_assert_int_eq(kvf_row_pack(r->layout, row, v), KVF_EINF);
        for (size_t i = 0; i < r->bytes; i++) ck_assert_msg(row[i] == 0xA5, "%s: byte %zu written", r->name, i);
    }
}
END_TEST

START_TEST(test_unknown_layout_is_rejected)
{
    float v[576] = {0};
    uint8_t row[656] = {0};
    ck_assert_int_eq(kvf_row_pack(KVF_N_ROW, row, v), KVF_ELAYOUT);
    ck_assert_int_eq(kvf_row_unpack(KVF_N_ROW, v, row), KVF_ELAYOUT);
    ck_assert_int_eq(kvf_row_pack((kvf_row)-1, row, v), KVF_ELAYOUT);
    ck_assert_int_eq(kvf_row_unpack((kvf_row)99, v, row), KVF_ELAYOUT);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch05_formats_rows");
    TCase *tc = tcase_create("rows");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_row_bytes_are_656_132_584_68_288_528);
    tcase_add_test(tc, test_row_bytes_equal_sizeof_the_packed_structs);
    tcase_add_test(tc, test_row_values_are_576_for_v32_main_128_for_index_keys_512_otherwise);
    tcase_add_test(tc, test_row_names_round_trip_and_unknown_names_are_rejected);
    tcase_add_test(tc, test_field_offsets_match_spec_byte_tables);
    tcase_add_test(tc, test_pack_unpack_round_trip_is_within_each_fields_format_bound);
    tcase_add_test(tc, test_v4_pad_byte_is_zero);
    tcase_add_test(tc, test_fp32_scales_are_little_endian);
    tcase_add_test(tc, test_hand_built_v32_main_row_has_the_bytes_worked_out_by_hand);
    tcase_add_test(tc, test_hand_built_v32_index_row_has_the_bytes_worked_out_by_hand);
    tcase_add_test(tc, test_hand_built_v4_main_row_has_the_bytes_worked_out_by_hand);
    tcase_add_test(tc, test_hand_built_v4_index_row_has_the_bytes_worked_out_by_hand);
    tcase_add_test(tc, test_hand_built_v41_main_row_has_the_bytes_worked_out_by_hand);
    tcase_add_test(tc, test_hand_built_v41_window_row_has_the_bytes_worked_out_by_hand);
    tcase_add_test(tc, test_pack_rejects_nan_and_inf_anywhere_in_the_row_and_leaves_it_untouched);
    tcase_add_test(tc, test_unknown_layout_is_rejected);
    suite_add_tcase(s, tc);
    return s;
}
