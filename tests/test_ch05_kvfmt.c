/* Chapter 5: the kvfmt calculator, run as a program. Its casts, tables, block schemes and packed rows
 * agree with the formats' definitions (formats/element.h, block.h, rows.h), written here in plain loops in
 * double with float32 rounding exactly where the definition rounds; its fp4-demo prints the numbers
 * of the numpy FP4 check (chapters/05_formats/README.md); bad input exits 2 with one line naming what was wrong. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "rng.h"

#define OUT_CAP (1u << 20)
/* The summaries print six significant digits: half a unit in the sixth digit is at most 5e-6 of
 * the value; 1e-5 leaves room for the last bit of the double sums. */
#define PRINTED_G6_RTOL 1e-5

static char out[OUT_CAP], err[OUT_CAP];

static int kvfmt(const char *args, const char *input)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "kvfmt %s", args);
    return kvl_run(cmd, input, out, sizeof out, err, sizeof err);
}

static void expect_ok(const char *args, const char *input)
{
    int rc = kvfmt(args, input);
    ck_assert_msg(rc == 0, "kvfmt %s: exit %d, stderr: %s", args, rc, err);
    ck_assert_msg(err[0] == '\0', "kvfmt %s wrote to stderr: %s", args, err);
}

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* The text after `key` on the first line that contains it, or NULL. */
/* A number as kvfmt prints it, its integer digits grouped by commas (57,344), without the commas
 * (57344), for strtod and strtof. The text lives until the next call. */
static const char *ungrouped(const char *text)
{
    static char digits[64];
    size_t n = 0;
    for (const char *c = text; *c && n + 1 < sizeof digits; c++)
        if (*c != ',') digits[n++] = *c;
    digits[n] = '\0';
    return digits;
}

static const char *after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? p + strlen(key) : NULL;
}

/* ---- element formats by definition (formats/element.h) ---------------------------------------------- */

typedef struct {
    const char *name;
    unsigned mbits;
    int bias;
    unsigned max_mag;        /* magnitude code of the largest finite value */
    unsigned sign;           /* the sign bit */
    unsigned overflow;       /* magnitude code of the plain cast past the largest finite: NaN, inf, or max */
} elem_def;

static const elem_def E4M3 = {"e4m3", 3, 7, 0x7E, 0x80, 0x7F};
static const elem_def E5M2 = {"e5m2", 2, 15, 0x7B, 0x80, 0x7C};
static const elem_def E2M1 = {"e2m1", 1, 1, 0x7, 0x8, 0x7};

/* Magnitude code c → 2^(E − bias)(1 + M/2^m), or 2^(1 − bias) M/2^m for E = 0. Code max_mag + 1 is
 * the value one step past the largest finite, where overflow starts (480, 65536, 8). */
static double def_magnitude(const elem_def *d, unsigned c)
{
    unsigned e = c >> d->mbits, m = c & ((1u << d->mbits) - 1);
    double frac = (double)m / (double)(1u << d->mbits);
    return e ? ldexp(1 + frac, (int)e - d->bias) : ldexp(frac, 1 - d->bias);
}

/* Magnitude code nearest |x|, a tie going to the even code; max_mag + 1 means overflow. */
static unsigned def_nearest(const elem_def *d, double ax)
{
    if (ax >= def_magnitude(d, d->max_mag + 1)) return d->max_mag + 1;
    unsigned best = 0;
    for (unsigned c = 1; c <= d->max_mag + 1; c++) {
        double dc = fabs(ax - def_magnitude(d, c)), db = fabs(ax - def_magnitude(d, best));
        if (dc < db || (dc == db && c % 2 == 0)) best = c;
    }
    return best;
}

/* The plain cast of a non-NaN x: nearest even, overflow to d->overflow; sign kept (−0 included). */
static unsigned def_encode(const elem_def *d, double x)
{
    unsigned mag = def_nearest(d, fabs(x));
    return (signbit(x) ? d->sign : 0) | (mag > d->max_mag ? d->overflow : mag);
}

/* The saturating cast of a non-NaN x: overflow and ±inf clamp to the largest finite. */
static unsigned def_encode_sat(const elem_def *d, double x)
{
    unsigned mag = def_nearest(d, fabs(x));
    return (signbit(x) ? d->sign : 0) | (mag > d->max_mag ? d->max_mag : mag);
}

static double def_decode(const elem_def *d, unsigned code)
{
    double v = def_magnitude(d, code & (d->sign - 1));
    return code & d->sign ? -v : v;
}

/* ---- encode, decode, table ------------------------------------------------------------------------ */

START_TEST(test_encode_e4m3_464_ties_to_448_and_480_overflows_unless_saturating)
{
    expect_ok("encode --format e4m3 464 480", NULL);
    ck_assert_msg(strncmp(out, "0x7e  448  input 464  error -16", 31) == 0, "464: %s", out);
    const char *second = strchr(out, '\n') + 1;
    ck_assert_msg(strncmp(second, "0x7f  nan  input 480", 20) == 0, "480 plain: %s", second);
    expect_ok("encode --format float8_e4m3fn --saturate 480 -480 inf", NULL);
    ck_assert_msg(strstr(out, "0x7e  448  input 480") && strstr(out, "0xfe  -448  input -480") &&
                      strstr(out, "0x7e  448  input inf"), "saturating: %s", out);
}
END_TEST

/* Inputs for a format: every code value, every midpoint between neighbours (and the overflow
 * midpoint), and log-uniform random float32 values of both signs from a quarter of the smallest
 * subnormal to twice the largest finite, each written as a hex float (exact). */
static char *encode_inputs(const elem_def *d, float **xs, size_t *n)
{
    enum { N_RANDOM = 400 };
    size_t cap = 2 * (d->max_mag + 2) + N_RANDOM;
    float *x = malloc(cap * sizeof *x);
    char *text = malloc(cap * 32);
    ck_assert(x && text);
    size_t k = 0;
    for (unsigned c = 0; c <= d->max_mag; c++) {
        x[k++] = (float)def_magnitude(d, c);
        x[k++] = (float)(-(def_magnitude(d, c) + def_magnitude(d, c + 1)) / 2);
    }
    kvl_rng rng;
    kvl_rng_seed(&rng, 5);
    double lo = log2(def_magnitude(d, 1) / 4), hi = log2(2 * def_magnitude(d, d->max_mag));
    for (int i = 0; i < N_RANDOM; i++) {
        float v = (float)exp2(lo + (hi - lo) * kvl_rng_random(&rng));
        x[k++] = kvl_rng_random(&rng) < 0.5 ? -v : v;
    }
    size_t len = 0;
    for (size_t i = 0; i < k; i++) len += (size_t)sprintf(text + len, "%a\n", (double)x[i]);
    *xs = x;
    *n = k;
    return text;
}

/* Every output line's code against the definition's. */
static void expect_codes(const char *what, const float *x, size_t n, unsigned (*def)(const elem_def *, double),
                         const elem_def *d)
{
    ck_assert_msg(count_lines(out) == n, "%s: %zu lines for %zu values", what, count_lines(out), n);
    const char *line = out;
    for (size_t i = 0; i < n; i++, line = strchr(line, '\n') + 1) {
        unsigned code;
        ck_assert_msg(sscanf(line, "%x", &code) == 1, "%s: no code on line %zu: %.60s", what, i + 1, line);
        ck_assert_msg(code == def(d, x[i]), "%s: %a gives 0x%02x, the definition 0x%02x", what, (double)x[i], code,
                      def(d, x[i]));
    }
}

START_TEST(test_encode_matches_nearest_even_definition_plain_and_saturating)
{
    const elem_def *defs[] = {&E4M3, &E5M2, &E2M1};
    for (size_t f = 0; f < 3; f++) {
        float *x;
        size_t n;
        char *text = encode_inputs(defs[f], &x, &n);
        char args[64];
        snprintf(args, sizeof args, "encode --format %s", defs[f]->name);
        expect_ok(args, text);
        expect_codes(args, x, n, def_encode, defs[f]);
        snprintf(args, sizeof args, "encode --format %s --saturate", defs[f]->name);
        expect_ok(args, text);
        expect_codes(args, x, n, def_encode_sat, defs[f]);
        free(x);
        free(text);
    }
}
END_TEST

START_TEST(test_encode_reads_hex_floats_and_special_words)
{
    expect_ok("encode --format e4m3 0x1.8p+3 -0x1p-10 -0 inf nan", NULL);
    unsigned c[5];
    ck_assert_int_eq(sscanf(out, "%x %*[^\n] %x %*[^\n] %x %*[^\n] %x %*[^\n] %x", &c[0], &c[1], &c[2], &c[3], &c[4]), 5);
    ck_assert_uint_eq(c[0], def_encode(&E4M3, 12.0));   /* 0x1.8p+3 = 12 */
    ck_assert_uint_eq(c[1], 0x80);                      /* half the smallest subnormal ties to −0 */
    ck_assert_uint_eq(c[2], 0x80);
    ck_assert_uint_eq(c[3], 0x7f);                      /* E4M3 has no inf: the plain cast gives NaN */
    ck_assert_uint_eq(c[4], 0x7f);
    expect_ok("encode --format e5m2 -inf 0x1.ep+15", NULL);
    ck_assert_msg(strncmp(out, "0xfc  -inf", 10) == 0, "e5m2 -inf: %s", out);
    ck_assert_msg(strstr(out, "\n0x7c  inf  input 61,440"), "61440 ties up to 65536, past 57344: %s", out);
}
END_TEST

START_TEST(test_encode_reads_one_value_per_stdin_line)
{
    expect_ok("encode --format e2m1", "0.25\n0.75\n 1.25\n1.75\n2.5\n3.5\n5\n-7\n");
    const double x[] = {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5, -7};
    float xf[8];
    for (int i = 0; i < 8; i++) xf[i] = (float)x[i];
    expect_codes("e2m1 ties from stdin", xf, 8, def_encode, &E2M1);
}
END_TEST

START_TEST(test_encode_e8m0_says_which_rounding_its_cast_uses)
{
    expect_ok("encode --format e8m0 1.4 1.5", NULL);
    ck_assert_msg(strncmp(out, "0x7f  1  input 1.4", 18) == 0 && strstr(out, "\n0x80  2  input 1.5"),
                  "nearest, tie 1.5 up: %s", out);
    ck_assert_msg(count_lines(out) == 2 && strstr(out, "nearest") && strstr(out, "tie"), "rounding named: %s", out);
    expect_ok("encode --format e8m0 --saturate 1.4", NULL);
    ck_assert_msg(strncmp(out, "0x80  2  input 1.4", 18) == 0 && strstr(out, "+inf"), "round up: %s", out);
}
END_TEST

START_TEST(test_decode_accepts_hex_and_decimal_codes)
{
    expect_ok("decode --format e4m3 0x7e 126 0x01 0XFF 8", NULL);
    ck_assert_str_eq(out, "0x7e  448  normal\n0x7e  448  normal\n0x01  0.001953125  subnormal\n"
                          "0xff  nan  nan\n0x08  0.015625  normal\n");
    expect_ok("decode --format bf16 0x3f80 0xff80", NULL);
    ck_assert_str_eq(out, "0x3f80  1  normal\n0xff80  -inf  inf\n");
}
END_TEST

/* The class of a code by its fields: exponent 0 is zero or subnormal; E4M3's S.1111.111 and E5M2's
 * exponent 31 are the specials. */
static const char *def_class(const elem_def *d, unsigned code)
{
    unsigned mag = code & (d->sign - 1), e = mag >> d->mbits;
    if (d == &E4M3 && mag == 0x7F) return "nan";
    if (d == &E5M2 && e == 31) return mag == 0x7C ? "inf" : "nan";
    if (mag == 0) return "zero";
    return e == 0 ? "subnormal" : "normal";
}

START_TEST(test_table_lists_every_code_with_its_definition_value_and_class)
{
    const elem_def *defs[] = {&E4M3, &E5M2, &E2M1};
    for (size_t f = 0; f < 3; f++) {
        const elem_def *d = defs[f];
        char args[64];
        snprintf(args, sizeof args, "table --format %s", d->name);
        expect_ok(args, NULL);
        unsigned n_codes = 2 * d->sign;
        ck_assert_uint_eq(count_lines(out), n_codes + 1);   /* one header line */
        const char *line = strchr(out, '\n') + 1;
        for (unsigned c = 0; c < n_codes; c++, line = strchr(line, '\n') + 1) {
            unsigned code;
            char value[64], cls[16];
            ck_assert_int_eq(sscanf(line, "%x %63s %15s", &code, value, cls), 3);
            ck_assert_uint_eq(code, c);
            ck_assert_msg(strcmp(cls, def_class(d, c)) == 0, "%s 0x%02x: class %s, want %s", d->name, c, cls,
                          def_class(d, c));
            if (strcmp(cls, "nan") == 0) ck_assert_str_eq(value, "nan");
            else if (strcmp(cls, "inf") == 0) ck_assert_str_eq(value, c & d->sign ? "-inf" : "inf");
            else ck_assert_msg(strtod(ungrouped(value), NULL) == def_decode(d, c) && signbit(strtod(ungrouped(value), NULL)) == !!(c & d->sign),
                               "%s 0x%02x: %s, want %.17g", d->name, c, value, def_decode(d, c));
        }
    }
}
END_TEST

START_TEST(test_table_e8m0_is_every_power_of_two_from_2_pow_minus_127)
{
    expect_ok("table --format float8_e8m0fnu", NULL);
    ck_assert_uint_eq(count_lines(out), 257);
    const char *line = strchr(out, '\n') + 1;
    for (unsigned c = 0; c < 256; c++, line = strchr(line, '\n') + 1) {
        unsigned code;
        char value[64], cls[16];
        ck_assert_int_eq(sscanf(line, "%x %63s %15s", &code, value, cls), 3);
        if (c == 0xFF) {
            ck_assert_str_eq(value, "nan");
            continue;
        }
        ck_assert_msg(strtod(ungrouped(value), NULL) == ldexp(1, (int)c - 127) && strcmp(cls, "normal") == 0,
                      "e8m0 0x%02x: %s %s", c, value, cls);
    }
}
END_TEST

/* ---- block schemes by definition (formats/block.h) ---------------------------------------------------- */

/* 2^floor(log2 t) and 2^ceil(log2 t) of a positive t, exactly. */
static double pow2_floor(double t)
{
    int e;
    frexp(t, &e);
    return ldexp(1, e - 1);
}

static double pow2_ceil(double t)
{
    int e;
    double m = frexp(t, &e);
    return m == 0.5 ? t : ldexp(1, e);
}

static float block_amax(const float *x, size_t k)
{
    float a = 0;
    for (size_t i = 0; i < k; i++) a = fmaxf(a, fabsf(x[i]));
    return a;
}

/* A scheme as a definition: the scale of a block (given the tensor), then codes of fl32(x / scale). */
typedef struct {
    const char *name;
    const elem_def *elem;
    size_t block;
    double (*scale)(const float *xb, size_t k, float amax_tensor);
} scheme_def;

/* OCP MX: 2^(floor(log2 amax) − emax), amax 0 read as 2^-126, clamped at 2^-127. */
static double mx_scale(float amax, int emax)
{
    double k = log2(pow2_floor(amax > 0 ? amax : 0x1p-126)) - emax;
    return ldexp(1, (int)fmax(k, -127));
}

static double scale_mxfp4(const float *xb, size_t k, float amax_tensor)
{
    (void)amax_tensor;
    return mx_scale(block_amax(xb, k), 2);
}

static double scale_mxfp8(const float *xb, size_t k, float amax_tensor)
{
    (void)amax_tensor;
    return mx_scale(block_amax(xb, k), 8);
}

/* NVFP4's tensor scale fl32(amax / (448·6)), at least FLT_MIN. */
static float nvfp4_global(float amax_tensor)
{
    return fmaxf(amax_tensor / (448.0f * 6.0f), FLT_MIN);
}

/* NVFP4: e4m3(clamp(fl32(fl32(amax/6) / s_global), 2^-6, 448)) × s_global, the product in float32. */
static double scale_nvfp4(const float *xb, size_t k, float amax_tensor)
{
    float g = nvfp4_global(amax_tensor);
    float s = fminf(fmaxf(block_amax(xb, k) / 6.0f / g, 0x1p-6f), 448.0f);
    return (double)(g * (float)def_decode(&E4M3, def_encode_sat(&E4M3, s)));
}

/* DeepSeek V4.1 FP4: e4m3(fl32(max(amax, 6·2^-9) / 6)). */
static double scale_fp4_v41(const float *xb, size_t k, float amax_tensor)
{
    (void)amax_tensor;
    float s = fmaxf(block_amax(xb, k), 6.0f * 0x1p-9f) / 6.0f;
    return def_decode(&E4M3, def_encode_sat(&E4M3, s));
}

/* DeepSeek act_quant: 2^ceil(log2(max(amax, 1e-4) / 448)). */
static double scale_act_quant(const float *xb, size_t k, float amax_tensor)
{
    (void)amax_tensor;
    return pow2_ceil(fmaxf(block_amax(xb, k), 1e-4f) / 448.0);
}

/* DeepSeek FP4 indexer: 2^ceil(log2(max(amax, 6·2^-126) / 6)). */
static double scale_mxfp4_rceil(const float *xb, size_t k, float amax_tensor)
{
    (void)amax_tensor;
    return pow2_ceil(fmaxf(block_amax(xb, k), 6.0f * FLT_MIN) / 6.0);
}

static const scheme_def SCHEME_DEFS[] = {
    {"mxfp4", &E2M1, 32, scale_mxfp4},
    {"mxfp8", &E4M3, 32, scale_mxfp8},
    {"nvfp4", &E2M1, 16, scale_nvfp4},
    {"nvfp4-noglobal", &E2M1, 16, scale_fp4_v41},
    {"fp8-128", &E4M3, 128, scale_act_quant},
};

/* x[n] → codes[n] (one per element, unpacked), scales[n/block], xq[n] = fl32(decode × scale). */
static void def_quantise(unsigned *codes, double *scales, float *xq, const scheme_def *s, const float *x, size_t n)
{
    float amax_tensor = block_amax(x, n);
    for (size_t b = 0; b < n / s->block; b++) {
        const float *xb = x + b * s->block;
        double scale = s->scale(xb, s->block, amax_tensor);
        scales[b] = scale;
        for (size_t i = 0; i < s->block; i++) {
            size_t j = b * s->block + i;
            codes[j] = def_encode_sat(s->elem, (double)(float)(xb[i] / (float)scale));
            xq[j] = (float)(def_decode(s->elem, codes[j]) * scale);
        }
    }
}

/* x[n]: standard normals times a power of two that changes from block of 16 to block of 16, so the
 * scales differ, with values 64..95 all zero (every scheme's amax floor). Written as hex floats. */
static char *scheme_input(float *x, size_t n)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 11);
    kvl_rng_normal_f32(&rng, x, n, 1.0);
    for (size_t i = 0; i < n; i++) x[i] = i >= 64 && i < 96 ? 0.0f : ldexpf(x[i], (int)(i / 16 % 7) - 3);
    char *text = malloc(n * 32);
    ck_assert(text != NULL);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += (size_t)sprintf(text + len, "%a%c", (double)x[i], i % 8 == 7 ? '\n' : ' ');
    return text;
}

/* ||xq − x|| / ||x|| and max |xq − x| in double. */
static void def_errors(double *rel_l2, double *max_abs, const float *xq, const float *x, size_t n)
{
    double e2 = 0, x2 = 0;
    *max_abs = 0;
    for (size_t i = 0; i < n; i++) {
        double e = (double)xq[i] - (double)x[i];
        e2 += e * e;
        x2 += (double)x[i] * x[i];
        *max_abs = fmax(*max_abs, fabs(e));
    }
    *rel_l2 = sqrt(e2) / sqrt(x2);
}

static void expect_summary(const char *what, const char *text, double rel_l2, double max_abs)
{
    const char *p = after(text, "rel L2 error ");
    double got_rel, got_max;
    ck_assert_msg(p && sscanf(p, "%lf max abs error %lf", &got_rel, &got_max) == 2, "%s: no summary", what);
    ck_assert_msg(fabs(got_rel - rel_l2) <= PRINTED_G6_RTOL * rel_l2, "%s: rel L2 %.9g, want %.9g", what, got_rel,
                  rel_l2);
    ck_assert_msg(fabs(got_max - max_abs) <= PRINTED_G6_RTOL * max_abs, "%s: max abs %.9g, want %.9g", what, got_max,
                  max_abs);
}

START_TEST(test_quant_matches_block_definition_for_every_scheme)
{
    enum { N = 256 };
    float x[N], xq[N];
    unsigned codes[N];
    double scales[N];
    char *text = scheme_input(x, N);
    for (size_t s = 0; s < sizeof SCHEME_DEFS / sizeof SCHEME_DEFS[0]; s++) {
        const scheme_def *sd = &SCHEME_DEFS[s];
        char args[64];
        snprintf(args, sizeof args, "quant --scheme %s", sd->name);
        expect_ok(args, text);
        def_quantise(codes, scales, xq, sd, x, N);
        size_t seen = 0;
        for (const char *line = out; *line; line = strchr(line, '\n') + 1) {
            size_t i;
            char code[16], deq[64];
            if (sscanf(line, "%zu %*s %15s %63s", &i, code, deq) != 3) continue;
            ck_assert_msg(i == seen && i < N, "%s: element %zu out of order", sd->name, i);
            ck_assert_msg(strtoul(code, NULL, 16) == codes[i], "%s [%zu] %a: code %s, want 0x%x", sd->name, i,
                          (double)x[i], code, codes[i]);
            ck_assert_msg(strtof(ungrouped(deq), NULL) == xq[i], "%s [%zu] %a: dequantised %s, want %.9g", sd->name, i,
                          (double)x[i], deq, (double)xq[i]);
            seen++;
        }
        ck_assert_msg(seen == N, "%s: %zu element lines", sd->name, seen);
        double rel_l2, max_abs;
        def_errors(&rel_l2, &max_abs, xq, x, N);
        expect_summary(sd->name, out, rel_l2, max_abs);
    }
    free(text);
}
END_TEST

START_TEST(test_quant_prints_each_block_scale)
{
    enum { N = 256 };
    float x[N], xq[N];
    unsigned codes[N];
    double scales[N];
    char *text = scheme_input(x, N);
    expect_ok("quant --scheme mxfp4", text);
    def_quantise(codes, scales, xq, &SCHEME_DEFS[0], x, N);
    const char *p = out;
    for (size_t b = 0; b < N / 32; b++) {
        char key[32];
        snprintf(key, sizeof key, "block %zu  scale 0x", b);
        p = after(p, key);
        ck_assert_msg(p != NULL, "no line '%s'", key);
        unsigned code;
        ck_assert_int_eq(sscanf(p, "%x", &code), 1);
        ck_assert_msg(ldexp(1, (int)code - 127) == scales[b], "block %zu: E8M0 0x%02x, want 2^%g", b, code,
                      log2(scales[b]));
    }
    free(text);
}
END_TEST

/* ---- rows by definition (formats/rows.h) --------------------------------------------------------------- */

typedef enum { SCALE_FP32_LE, SCALE_E8M0, SCALE_E4M3 } scale_store;

/* A row: `quant` values as `elem` codes from byte 0 (E2M1 two per byte, element 2j low), their
 * scales from scale_at, then `raw` bf16 values from raw_at; `bytes` in all. */
typedef struct {
    const char *name;
    size_t values, bytes;
    const elem_def *elem;
    size_t quant, block;
    double (*scale)(const float *xb, size_t k, float amax_tensor);
    scale_store store;
    size_t scale_at, raw_at;
} row_def;

static const row_def ROW_DEFS[] = {
    {"v32-main", 576, 656, &E4M3, 512, 128, scale_act_quant, SCALE_FP32_LE, 512, 528},
    {"v32-index", 128, 132, &E4M3, 128, 128, scale_act_quant, SCALE_FP32_LE, 128, 0},
    {"v4-main", 512, 584, &E4M3, 448, 64, scale_act_quant, SCALE_E8M0, 576, 448},
    {"v4-index", 128, 68, &E2M1, 128, 32, scale_mxfp4_rceil, SCALE_E8M0, 64, 0},
    {"v41-main", 512, 288, &E2M1, 512, 16, scale_fp4_v41, SCALE_E4M3, 256, 0},
    {"v41-window", 512, 528, &E4M3, 512, 32, scale_act_quant, SCALE_E8M0, 512, 0},
};
enum { N_ROWS = sizeof ROW_DEFS / sizeof ROW_DEFS[0], ROW_MAX_VALUES = 576, ROW_MAX_BYTES = 656 };

/* bf16 of a finite float: nearest even with 8 significant bits (spacing 2^-133 at the bottom). */
static unsigned def_bf16(float x)
{
    int e;
    frexp(x, &e);
    double ulp = ldexp(1, e - 8 > -133 ? e - 8 : -133);
    float r = (float)(rint(x / ulp) * ulp);
    uint32_t b;
    memcpy(&b, &r, sizeof b);
    return b >> 16;
}

static void store_scale(uint8_t *at, double scale, scale_store store)
{
    if (store == SCALE_E4M3) {
        *at = (uint8_t)def_encode_sat(&E4M3, scale);
    } else if (store == SCALE_E8M0) {
        *at = (uint8_t)(log2(scale) + 127);
    } else {
        float f = (float)scale;
        uint32_t b;
        memcpy(&b, &f, sizeof b);
        for (int k = 0; k < 4; k++) at[k] = (uint8_t)(b >> (8 * k));
    }
}

/* values[r->values] → row[r->bytes] and the values the row holds, xq[r->values]. */
static void def_pack(uint8_t *row, float *xq, const row_def *r, const float *values)
{
    scheme_def s = {r->name, r->elem, r->block, r->scale};
    unsigned codes[ROW_MAX_VALUES];
    double scales[ROW_MAX_VALUES];
    memset(row, 0, r->bytes);
    def_quantise(codes, scales, xq, &s, values, r->quant);
    for (size_t i = 0; i < r->quant; i++) {
        if (r->elem == &E2M1) row[i / 2] |= (uint8_t)(codes[i] << (i % 2 ? 4 : 0));
        else row[i] = (uint8_t)codes[i];
    }
    size_t scale_bytes = r->store == SCALE_FP32_LE ? 4 : 1;
    for (size_t b = 0; b < r->quant / r->block; b++) store_scale(row + r->scale_at + b * scale_bytes, scales[b], r->store);
    for (size_t i = r->quant; i < r->values; i++) {
        unsigned h = def_bf16(values[i]);
        row[r->raw_at + 2 * (i - r->quant)] = (uint8_t)h;
        row[r->raw_at + 2 * (i - r->quant) + 1] = (uint8_t)(h >> 8);
        uint32_t b = (uint32_t)h << 16;
        memcpy(&xq[i], &b, sizeof b);
    }
}

/* values[n]: standard normals with two blocks scaled up and one scaled down, as hex floats. */
static char *row_input(float *values, size_t n, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    kvl_rng_normal_f32(&rng, values, n, 1.0);
    for (size_t i = 0; i < n; i++) values[i] = ldexpf(values[i], i / 64 == 1 ? 4 : i / 64 == 3 ? -5 : 0);
    char *text = malloc(n * 32);
    ck_assert(text != NULL);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += (size_t)sprintf(text + len, "%a\n", (double)values[i]);
    return text;
}

START_TEST(test_row_maps_give_the_spec_offsets_and_sizes)
{
    /* formats/rows.h's byte maps, field by field: name, offset, size */
    static const struct { const char *layout, *header, *fields; } maps[] = {
        {"v32-main", "v32-main: 656 bytes, 576 values", "nope 0 512|scale 512 16|rope 528 128|"},
        {"v32-index", "v32-index: 132 bytes, 128 values", "codes 0 128|scale 128 4|"},
        {"v4-main", "v4-main: 584 bytes, 512 values", "nope 0 448|rope 448 128|scale 576 7|pad 583 1|"},
        {"v4-index", "v4-index: 68 bytes, 128 values", "codes 0 64|scale 64 4|"},
        {"v41-main", "v41-main: 288 bytes, 512 values", "codes 0 256|scale 256 32|"},
        {"v41-window", "v41-window: 528 bytes, 512 values", "codes 0 512|scale 512 16|"},
    };
    for (size_t m = 0; m < sizeof maps / sizeof maps[0]; m++) {
        char args[64], got[256] = "";
        snprintf(args, sizeof args, "row --layout %s", maps[m].layout);
        expect_ok(args, NULL);
        ck_assert_msg(strncmp(out, maps[m].header, strlen(maps[m].header)) == 0, "%s: %s", args, out);
        const char *line = strchr(strchr(out, '\n') + 1, '\n') + 1;   /* past the header and column names */
        for (; *line; line = strchr(line, '\n') + 1) {
            char name[16];
            size_t off, size;
            ck_assert_int_eq(sscanf(line, "%15s %zu %zu", name, &off, &size), 3);
            snprintf(got + strlen(got), sizeof got - strlen(got), "%s %zu %zu|", name, off, size);
        }
        ck_assert_str_eq(got, maps[m].fields);
    }
}
END_TEST

/* The hex line of out → bytes[want]. */
static void read_hex(uint8_t *bytes, size_t want)
{
    ck_assert_msg(strlen(out) == 2 * want + 1 && out[2 * want] == '\n', "hex line of %zu chars for %zu bytes",
                  strlen(out), want);
    for (size_t i = 0; i < want; i++) {
        unsigned b;
        ck_assert_int_eq(sscanf(out + 2 * i, "%2x", &b), 1);
        bytes[i] = (uint8_t)b;
    }
}

START_TEST(test_row_pack_matches_byte_definition_for_every_layout)
{
    for (size_t r = 0; r < N_ROWS; r++) {
        const row_def *rd = &ROW_DEFS[r];
        float values[ROW_MAX_VALUES], xq[ROW_MAX_VALUES];
        uint8_t want[ROW_MAX_BYTES], got[ROW_MAX_BYTES];
        char *text = row_input(values, rd->values, 100 + r);
        char args[64];
        snprintf(args, sizeof args, "row --layout %s --pack", rd->name);
        expect_ok(args, text);
        read_hex(got, rd->bytes);
        def_pack(want, xq, rd, values);
        for (size_t i = 0; i < rd->bytes; i++)
            ck_assert_msg(got[i] == want[i], "%s byte %zu: 0x%02x, want 0x%02x", rd->name, i, got[i], want[i]);
        free(text);
    }
}
END_TEST

/* Unpack output lines "i value [original error]" → values[n]. */
static void read_unpacked(float *values, size_t n, const char *what)
{
    size_t seen = 0;
    for (const char *line = out; *line; line = strchr(line, '\n') + 1) {
        size_t i;
        char v[64];
        if (sscanf(line, "%zu %63s", &i, v) != 2) continue;
        ck_assert_msg(i == seen && i < n, "%s: value %zu out of order", what, i);
        values[seen++] = strtof(ungrouped(v), NULL);
    }
    ck_assert_msg(seen == n, "%s: %zu values, want %zu", what, seen, n);
}

START_TEST(test_row_unpack_of_packed_hex_gives_the_definition_values_and_errors)
{
    for (size_t r = 0; r < N_ROWS; r++) {
        const row_def *rd = &ROW_DEFS[r];
        float values[ROW_MAX_VALUES], xq[ROW_MAX_VALUES], got[ROW_MAX_VALUES];
        uint8_t want[ROW_MAX_BYTES];
        char *text = row_input(values, rd->values, 200 + r);
        char args[64];
        snprintf(args, sizeof args, "row --layout %s --pack", rd->name);
        expect_ok(args, text);
        def_pack(want, xq, rd, values);
        size_t hex_len = strlen(out), text_len = strlen(text);
        char *both = malloc(hex_len + text_len + 1);
        ck_assert(both != NULL);
        memcpy(both, out, hex_len);
        memcpy(both + hex_len, text, text_len + 1);
        snprintf(args, sizeof args, "row --layout %s --unpack", rd->name);
        expect_ok(args, both);
        read_unpacked(got, rd->values, rd->name);
        for (size_t i = 0; i < rd->values; i++)
            ck_assert_msg(got[i] == xq[i], "%s [%zu] %a: unpacked %.9g, want %.9g", rd->name, i, (double)values[i],
                          (double)got[i], (double)xq[i]);
        double rel_l2, max_abs;
        def_errors(&rel_l2, &max_abs, xq, values, rd->values);
        expect_summary(rd->name, out, rel_l2, max_abs);
        free(both);
        free(text);
    }
}
END_TEST

START_TEST(test_row_unpack_reads_blank_separated_hex_without_originals)
{
    const row_def *rd = &ROW_DEFS[3];   /* v4-index: nibbles and E8M0 scales */
    float values[ROW_MAX_VALUES], xq[ROW_MAX_VALUES], got[ROW_MAX_VALUES];
    uint8_t want[ROW_MAX_BYTES];
    char *text = row_input(values, rd->values, 7);
    def_pack(want, xq, rd, values);
    char hex[3 * ROW_MAX_BYTES + 2] = "\n";
    for (size_t i = 0; i < rd->bytes; i++) sprintf(hex + strlen(hex), "%02X ", want[i]);
    strcat(hex, "\n");
    expect_ok("row --layout v4-index --unpack", hex);
    ck_assert_msg(!strstr(out, "rel L2"), "no errors without originals: %s", out);
    read_unpacked(got, rd->values, "v4-index");
    for (size_t i = 0; i < rd->values; i++) ck_assert_msg(got[i] == xq[i], "[%zu] %.9g, want %.9g", i, (double)got[i], (double)xq[i]);
    free(text);
}
END_TEST

/* ---- fp4-demo ------------------------------------------------------------------------------------------ */

/* hex of n copies of the byte text b, appended to buf */
static void hex_repeat(char *buf, size_t cap, const char *b, size_t n)
{
    for (size_t i = 0; i < n; i++) strncat(buf, b, cap - strlen(buf) - 1);
}

/* A row whose scale, element code or bf16 value is NaN unpacks to NaN: refused, naming the layout, the
 * value and the field that holds the NaN, with nothing printed. */
START_TEST(test_row_unpack_refuses_a_row_that_decodes_to_nan_naming_the_field)
{
    static const struct {
        const char *layout;
        const char *parts[6][2];   /* {bytes as hex, times}, in row order */
        const char *field, *value;
    } cases[] = {
        {"v41-window", {{"00", "512"}, {"ff", "1"}, {"7f", "15"}}, "'scale'", "value 0 "},
        {"v41-main", {{"22", "256"}, {"38", "31"}, {"7f", "1"}}, "'scale'", "value 496 "},
        {"v32-main", {{"38", "512"}, {"0000c07f", "1"}, {"0000803f", "3"}, {"0000", "64"}}, "'scale'", "value 0 "},
        {"v4-main", {{"38", "3"}, {"7f", "1"}, {"38", "444"}, {"0000", "64"}, {"7f", "7"}, {"00", "1"}}, "'nope'",
         "value 3 "},
        {"v32-index", {{"ff", "1"}, {"00", "127"}, {"0000803f", "1"}}, "'codes'", "value 0 "},
        {"v32-main", {{"38", "512"}, {"0000803f", "4"}, {"0000", "3"}, {"c07f", "1"}, {"0000", "60"}}, "'rope'",
         "value 515 "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        static char hex[2048];
        hex[0] = '\0';
        for (size_t k = 0; k < 6 && cases[i].parts[k][0]; k++)
            hex_repeat(hex, sizeof hex, cases[i].parts[k][0], (size_t)atoi(cases[i].parts[k][1]));
        strncat(hex, "\n", sizeof hex - strlen(hex) - 1);
        char args[64];
        snprintf(args, sizeof args, "row --layout %s --unpack", cases[i].layout);
        const int rc = kvfmt(args, hex);
        ck_assert_msg(rc == 2 && out[0] == '\0', "%s: exit %d, stdout %.80s", args, rc, out);
        ck_assert_msg(count_lines(err) == 1 && strstr(err, cases[i].layout) && strstr(err, cases[i].field) &&
                          strstr(err, cases[i].value) && strstr(err, "NaN"),
                      "%s: stderr %s", args, err);
    }
}
END_TEST

START_TEST(test_fp4_demo_seed_0_prints_the_write_up_numbers)
{
    expect_ok("fp4-demo --seed 0", NULL);
    const char *peak = after(out, "max |latent|"), *rel = after(out, "relative L2 error");
    ck_assert_msg(peak && rel, "labels: %s", out);
    char a[16], b[16];
    ck_assert_int_eq(sscanf(peak, "%15s", a), 1);
    ck_assert_int_eq(sscanf(rel, "%15s", b), 1);
    ck_assert_str_eq(a, "3.861");
    ck_assert_str_eq(b, "0.0912");
    ck_assert_msg(strstr(out, "fp16 1,024  fp8 512  fp4+E4M3/16 288"), "bytes: %s", out);
    expect_ok("fp4-demo", NULL);
    ck_assert_msg(strstr(out, "3.861") && strstr(out, "0.0912"), "seed 0 is the default: %s", out);
}
END_TEST

START_TEST(test_fp4_demo_matches_numpy_for_seeds_0_to_19)
{
    FILE *f = fopen(kvl_path("tests/data/kvfmt_fp4_demo.txt"), "r");
    ck_assert_msg(f != NULL, "tests/data/kvfmt_fp4_demo.txt (python3 tests/gen_kvfmt_fp4_demo.py)");
    unsigned seed;
    char peak[16], rel[16];
    int n = 0;
    while (fscanf(f, "%u %15s %15s", &seed, peak, rel) == 3) {
        char args[64], a[16], b[16];
        snprintf(args, sizeof args, "fp4-demo --seed %u", seed);
        expect_ok(args, NULL);
        ck_assert_int_eq(sscanf(after(out, "max |latent|"), "%15s", a), 1);
        ck_assert_int_eq(sscanf(after(out, "relative L2 error"), "%15s", b), 1);
        ck_assert_msg(strcmp(a, peak) == 0 && strcmp(b, rel) == 0, "seed %u: %s %s, numpy %s %s", seed, a, b, peak,
                      rel);
        n++;
    }
    fclose(f);
    ck_assert_int_eq(n, 20);
}
END_TEST

/* ---- help and bad input -------------------------------------------------------------------------------- */

START_TEST(test_help_describes_every_command_and_exits_0)
{
    const char *cmds[] = {"--help", "encode --help", "decode --help", "table --help", "quant --help", "row --help",
                          "fp4-demo --help"};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        expect_ok(cmds[i], NULL);
        ck_assert_msg(strncmp(out, "usage: kvfmt", 12) == 0, "kvfmt %s: %s", cmds[i], out);
    }
}
END_TEST

/* n − 1 ones and then `last`, one per line. */
static char *ones_then(size_t n, const char *last)
{
    char *s = malloc(2 * n + strlen(last) + 2);
    ck_assert(s != NULL);
    for (size_t i = 0; i + 1 < n; i++) memcpy(s + 2 * (i), "1\n", 2);
    sprintf(s + 2 * (n - 1), "%s\n", last);
    return s;
}

START_TEST(test_bad_input_exits_2_with_one_line_naming_it)
{
    char *ones31 = ones_then(31, "1"), *ones511 = ones_then(511, "1"), *bad32 = ones_then(32, "n");
    char *nan16 = ones_then(16, "nan"), *big32 = ones_then(32, "1e39");
    char hex67[2 * 67 + 2] = "", hex_bad[2 * 68 + 2] = "";
    memset(hex67, '0', 2 * 67);
    strcat(hex67, "\n");
    memset(hex_bad, '0', 2 * 68);
    hex_bad[10] = 'g';
    strcat(hex_bad, "\n");
    const struct { const char *args, *input, *names; } cases[] = {
        {"", NULL, "no command"},
        {"frob", NULL, "unknown command 'frob'"},
        {"encode --format e3m4 1", NULL, "unknown format 'e3m4'"},
        {"encode 1", NULL, "--format is required"},
        {"encode --format", NULL, "--format needs a value"},
        {"encode --format e4m3 --frob 1", NULL, "unknown option '--frob' (argument 4)"},
        {"table --format e4m3 --saturate", NULL, "--saturate does not apply"},
        {"encode --format e4m3 1 1x", NULL, "'1x' (argument 5) is not a number"},
        {"encode --format e4m3", "1\n2\n0x1.8q3\n", "stdin line 3: '0x1.8q3' is not a number"},
        {"encode --format e4m3", "\n", "no values given"},
        {"decode --format e4m3 0x100", NULL, "code 0x100 (argument 4) is out of range for float8_e4m3fn"},
        {"decode --format e2m1 16", NULL, "code 16 (argument 4) is out of range for float4_e2m1fn"},
        {"decode --format e4m3 7e", NULL, "'7e' (argument 4) is not a code"},
        {"quant --scheme mxfp5", "1\n", "unknown scheme 'mxfp5'"},
        {"quant --scheme mxfp4", ones31, "31 values, not a multiple of the mxfp4 block (32)"},
        {"quant --scheme nvfp4", bad32, "stdin line 32: 'n' is not a number"},
        {"quant --scheme nvfp4-noglobal", nan16, "stdin line 16: value 15 (from 0) is NaN"},
        {"quant --scheme mxfp8", big32, "stdin line 32: value 31 (from 0), 1e+39, is infinite in float32"},
        {"quant --scheme fp8-128", "", "no values on stdin"},
        {"row --layout v5-main", NULL, "unknown layout 'v5-main'"},
        {"row --layout v41-main --pack", ones511, "511 values; a v41-main row takes 512"},
        {"row --layout v4-index --unpack", hex67, "67 bytes of hex; a v4-index row is 68 bytes"},
        {"row --layout v4-index --unpack", "000\n", "3 hex digits, an odd count"},
        {"row --layout v4-index --unpack", hex_bad, "stdin line 1, column 11: 'g' is not a hex digit"},
        {"row --layout v4-index --unpack", "\n \n", "no hex line"},
        {"row --layout v4-index --pack --unpack", NULL, "--pack or --unpack, not both"},
        {"fp4-demo --seed -3", NULL, "seed '-3' (argument 3)"},
        {"fp4-demo 3", NULL, "unexpected argument '3'"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int rc = kvfmt(cases[c].args, cases[c].input);
        ck_assert_msg(rc == 2, "kvfmt %s: exit %d, want 2 (stderr: %s)", cases[c].args, rc, err);
        ck_assert_msg(out[0] == '\0', "kvfmt %s: printed to stdout: %.80s", cases[c].args, out);
        ck_assert_msg(strstr(err, cases[c].names), "kvfmt %s: stderr '%s' does not name '%s'", cases[c].args, err,
                      cases[c].names);
        ck_assert_msg(count_lines(err) == 1 && err[strlen(err) - 1] == '\n', "kvfmt %s: stderr is not one line: %s",
                      cases[c].args, err);
    }
    free(ones31);
    free(ones511);
    free(bad32);
    free(nan16);
    free(big32);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch05_kvfmt");
    TCase *tc = tcase_create("kvfmt");
    tcase_add_test(tc, test_encode_e4m3_464_ties_to_448_and_480_overflows_unless_saturating);
    tcase_add_test(tc, test_encode_matches_nearest_even_definition_plain_and_saturating);
    tcase_add_test(tc, test_encode_reads_hex_floats_and_special_words);
    tcase_add_test(tc, test_encode_reads_one_value_per_stdin_line);
    tcase_add_test(tc, test_encode_e8m0_says_which_rounding_its_cast_uses);
    tcase_add_test(tc, test_decode_accepts_hex_and_decimal_codes);
    tcase_add_test(tc, test_table_lists_every_code_with_its_definition_value_and_class);
    tcase_add_test(tc, test_table_e8m0_is_every_power_of_two_from_2_pow_minus_127);
    tcase_add_test(tc, test_quant_matches_block_definition_for_every_scheme);
    tcase_add_test(tc, test_quant_prints_each_block_scale);
    tcase_add_test(tc, test_row_maps_give_the_spec_offsets_and_sizes);
    tcase_add_test(tc, test_row_pack_matches_byte_definition_for_every_layout);
    tcase_add_test(tc, test_row_unpack_of_packed_hex_gives_the_definition_values_and_errors);
    tcase_add_test(tc, test_row_unpack_reads_blank_separated_hex_without_originals);
    tcase_add_test(tc, test_row_unpack_refuses_a_row_that_decodes_to_nan_naming_the_field);
    tcase_add_test(tc, test_fp4_demo_seed_0_prints_the_write_up_numbers);
    tcase_add_test(tc, test_fp4_demo_matches_numpy_for_seeds_0_to_19);
    tcase_add_test(tc, test_help_describes_every_command_and_exits_0);
    tcase_add_test(tc, test_bad_input_exits_2_with_one_line_naming_it);
    suite_add_tcase(s, tc);
    return s;
}
