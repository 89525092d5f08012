/* kvl_rng reproduces numpy's np.random.default_rng(seed) bit for bit.
 *
 * The oracle is numpy itself: tests/data/rng_reference.txt, written by tests/gen_rng_reference.py
 * (its docstring gives the block format), and a few numbers quoted below with the numpy command
 * that printed them. The ziggurat tables are also checked against their mathematical definition,
 * independently of numpy. */
#include "common.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rng.h"
#include "rng_ziggurat_tables.h"

/* Bit for bit: every comparison against numpy's draws allows no difference at all. */
#define EXACT 0.0

/* ---- reference data ----------------------------------------------------------------------------- */

enum { REF_MAX = 1000, REF_PATTERN = 512 };

typedef struct {
    size_t n;
    double f[REF_MAX];   /* values read as doubles */
    uint64_t u[REF_MAX]; /* values read as 64-bit words (hex lines) */
    char pattern[REF_PATTERN];
} ref_block;

static ref_block ref;

static void expect_header(const char *line, const char *name, uint64_t seed, size_t *n, char *pattern)
{
    char kind[32];
    unsigned long long s;
    size_t count;
    pattern[0] = '\0';
    int got = sscanf(line, "%31s %llu %zu %511s", kind, &s, &count, pattern);
    if (got >= 3 && strcmp(kind, name) == 0 && s == seed) *n = count;
}

/* ref ← the block `name seed`; the test fails if the file or the block is missing. */
static void load(const char *name, uint64_t seed)
{
    const char *path = kvl_path("tests/data/rng_reference.txt");
    FILE *f = fopen(path, "r");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    char line[1024];
    size_t n = 0;
    ref.n = 0;
    while (fgets(line, sizeof line, f)) {
        if (n == 0) {
            expect_header(line, name, seed, &n, ref.pattern);
            ck_assert_msg(n <= REF_MAX, "block %s %llu holds %zu values, more than %d", name,
                          (unsigned long long)seed, n, REF_MAX);
            continue;
        }
        ref.f[ref.n] = strtod(line, NULL);
        ref.u[ref.n] = strtoull(line, NULL, 16);
        if (++ref.n == n) break;
    }
    fclose(f);
    ck_assert_msg(n > 0 && ref.n == n, "block %s %llu missing or short in %s", name, (unsigned long long)seed, path);
}

static const uint64_t STATE_SEEDS[] = {0, 1, 42, 12345, 4294967295u, 4294967296u, UINT64_C(1) << 63,
                                       UINT64_C(0xDEADBEEFCAFEF00D), UINT64_MAX};
static const uint64_t DRAW_SEEDS[] = {0, 42, UINT64_MAX, 1, 4294967295u, 4294967296u,
                                      UINT64_C(0xDEADBEEFCAFEF00D)};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* ---- numbers quoted elsewhere ------------------------------------------------------------------- */

START_TEST(test_seed0_and_seed42_normals_match_the_quoted_values)
{
    /* python3 -c "import numpy as np; print(np.random.default_rng(0).standard_normal(4).tolist())" */
    const double seed0[4] = {0.1257302210933933, -0.1321048632913019, 0.6404226504432821, 0.10490011715303971};
    const double seed42[2] = {0.30471707975443135, -1.0399841062404955};
    kvl_rng rng;
    kvl_rng_seed(&rng, 0);
    for (size_t i = 0; i < 4; i++)
        ck_assert_msg(kvl_rng_normal(&rng) == seed0[i], "seed 0 draw %zu", i);
    kvl_rng_seed(&rng, 42);
    for (size_t i = 0; i < 2; i++)
        ck_assert_msg(kvl_rng_normal(&rng) == seed42[i], "seed 42 draw %zu", i);
}
END_TEST

/* ---- seeding and raw bits ----------------------------------------------------------------------- */

START_TEST(test_seeded_state_matches_numpy_pcg64_state)
{
    uint64_t seed = STATE_SEEDS[_i];
    load("state", seed);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    const uint64_t got[4] = {rng.state_hi, rng.state_lo, rng.inc_hi, rng.inc_lo};
    const char *what[4] = {"state high", "state low", "inc high", "inc low"};
    for (size_t i = 0; i < 4; i++)
        ck_assert_msg(got[i] == ref.u[i], "seed %llu %s: 0x%016llx, numpy 0x%016llx", (unsigned long long)seed,
                      what[i], (unsigned long long)got[i], (unsigned long long)ref.u[i]);
}
END_TEST

START_TEST(test_raw_words_match_numpy_random_raw)
{
    uint64_t seed = STATE_SEEDS[_i];
    load("raw", seed);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    for (size_t i = 0; i < ref.n; i++) {
        uint64_t got = kvl_rng_next_u64(&rng);
        ck_assert_msg(got == ref.u[i], "seed %llu word %zu: 0x%016llx, numpy 0x%016llx", (unsigned long long)seed,
                      i, (unsigned long long)got, (unsigned long long)ref.u[i]);
    }
}
END_TEST

/* ---- draws -------------------------------------------------------------------------------------- */

START_TEST(test_random_matches_numpy_draw_for_draw)
{
    uint64_t seed = DRAW_SEEDS[_i];
    load("random", seed);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    double got[REF_MAX];
    for (size_t i = 0; i < ref.n; i++) got[i] = kvl_rng_random(&rng);
    char what[64];
    snprintf(what, sizeof what, "random, seed %llu", (unsigned long long)seed);
    kvl_expect_close_f64(what, got, ref.f, ref.n, EXACT, EXACT, 0);
}
END_TEST

START_TEST(test_normal_matches_numpy_draw_for_draw)
{
    uint64_t seed = DRAW_SEEDS[_i];
    load("normal", seed);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    double got[REF_MAX];
    for (size_t i = 0; i < ref.n; i++) got[i] = kvl_rng_normal(&rng);
    char what[64];
    snprintf(what, sizeof what, "standard_normal, seed %llu", (unsigned long long)seed);
    kvl_expect_close_f64(what, got, ref.f, ref.n, EXACT, EXACT, 0);
}
END_TEST

START_TEST(test_interleaved_random_and_normal_match_numpy_interleaving)
{
    load("interleave", 7);
    ck_assert_uint_eq(strlen(ref.pattern), ref.n);
    kvl_rng rng;
    kvl_rng_seed(&rng, 7);
    double got[REF_MAX];
    for (size_t i = 0; i < ref.n; i++)
        got[i] = ref.pattern[i] == 'r' ? kvl_rng_random(&rng) : kvl_rng_normal(&rng);
    kvl_expect_close_f64("interleaved random/standard_normal, seed 7", got, ref.f, ref.n, EXACT, EXACT, 0);
}
END_TEST

/* A million draws pass through the tail (|z| > r) a few hundred times and the
 * wedges thousands of times; one wrong decision there would desynchronise every later draw. */
START_TEST(test_million_normals_match_numpy_sum_max_and_last_draw)
{
    /* python3 -c "import numpy as np; z=np.random.default_rng(0).standard_normal(10**6);
     *             print(repr(z.sum()), repr(z.max()), int(z.argmax()), repr(z[-1]))" */
    const size_t n = 1000000;
    const double numpy_sum = 998.5706494386213, numpy_max = 4.731957688635529, numpy_last = 0.22864219959011586;
    const size_t numpy_argmax = 36758;
    kvl_rng rng;
    kvl_rng_seed(&rng, 0);
    long double sum = 0, sum_abs = 0;
    double max = -INFINITY, z = 0;
    size_t argmax = 0;
    for (size_t i = 0; i < n; i++) {
        z = kvl_rng_normal(&rng);
        sum += z;
        sum_abs += fabs(z);
        if (z > max) { max = z; argmax = i; }
    }
    /* numpy sums pairwise: its error is at most log2(n) roundings of 2^-53 over Σ|z|; the long
     * double sum here adds nothing at that scale. */
    const double sum_tol = 20.0 * 0x1p-53 * (double)sum_abs;
    ck_assert_msg(fabsl(sum - numpy_sum) <= sum_tol, "sum %.17Lg, numpy %.17g (tolerance %.3g)", sum, numpy_sum, sum_tol);
    ck_assert_msg(max == numpy_max && argmax == numpy_argmax, "max %.17g at %zu, numpy %.17g at %zu", max, argmax,
                  numpy_max, numpy_argmax);
    ck_assert_msg(max > zig_r, "the maximum should come from the tail");
    ck_assert_msg(z == numpy_last, "last draw %.17g, numpy %.17g", z, numpy_last);
}
END_TEST

/* ---- array fills -------------------------------------------------------------------------------- */

START_TEST(test_normal_f64_scales_draws_in_numpy_order)
{
    const double scale = 0.125 / 3.0;
    load("normal", 42);
    double want[REF_MAX], got[REF_MAX];
    for (size_t i = 0; i < ref.n; i++) want[i] = scale * ref.f[i];
    kvl_rng rng;
    kvl_rng_seed(&rng, 42);
    kvl_rng_normal_f64(&rng, got, ref.n, scale);
    kvl_expect_close_f64("scale * standard_normal(1000), seed 42", got, want, ref.n, EXACT, EXACT, 0);
}
END_TEST

START_TEST(test_normal_f32_rounds_the_scaled_double_once)
{
    const double scale = 1.0 / sqrt(512.0);
    load("normal", 0);
    float got[REF_MAX];
    kvl_rng rng;
    kvl_rng_seed(&rng, 0);
    kvl_rng_normal_f32(&rng, got, ref.n, scale);
    for (size_t i = 0; i < ref.n; i++)
        ck_assert_msg(got[i] == (float)(scale * ref.f[i]), "element %zu: %.9g, want %.9g", i, (double)got[i],
                      (double)(float)(scale * ref.f[i]));
}
END_TEST

START_TEST(test_uniform_f32_maps_random_onto_lo_hi)
{
    const double lo = -0.75, hi = 2.5;
    load("random", UINT64_MAX);
    float got[REF_MAX];
    kvl_rng rng;
    kvl_rng_seed(&rng, UINT64_MAX);
    kvl_rng_uniform_f32(&rng, got, ref.n, lo, hi);
    for (size_t i = 0; i < ref.n; i++) {
        const float want = (float)(lo + (hi - lo) * ref.f[i]);
        ck_assert_msg(got[i] == want, "element %zu: %.9g, want %.9g", i, (double)got[i], (double)want);
        ck_assert(got[i] >= lo && got[i] <= hi);
    }
}
END_TEST

START_TEST(test_generators_share_no_state)
{
    kvl_rng a, b, fresh;
    kvl_rng_seed(&a, 3);
    kvl_rng_seed(&b, 3);
    double from_a[64];
    for (size_t i = 0; i < 64; i++) {
        from_a[i] = kvl_rng_normal(&a);
        kvl_rng_seed(&fresh, 99); /* seeding or drawing elsewhere must not disturb a or b */
        (void)kvl_rng_random(&fresh);
    }
    for (size_t i = 0; i < 64; i++) ck_assert_msg(kvl_rng_normal(&b) == from_a[i], "draw %zu", i);
}
END_TEST

/* ---- the ziggurat tables against their definition ----------------------------------------------- */

/* Numpy's layer area and the layer edges x_i = 2^52 · zig_w[i] (i ≥ 1), x_0 = 0. */
static const long double ZIG_V = 0.0049286732339746519L;

static long double zig_x(size_t i) { return i == 0 ? 0.0L : 0x1p52L * zig_w[i]; }

static long double gauss(long double x) { return expl(-0.5L * x * x); }

/* Layer i (1 ≤ i ≤ 255) is the rectangle x_i·(f(x_(i−1)) − f(x_i)) of area v. Each edge x_(i−1)
 * came from x_i by one float64 step, x = √(−2 log s) with s = f(x_i) + v/x_i, so each area carries
 * only that step's roundings: about 4 of 2^-53 in s, which move the area by x_i·f(x_(i−1))/v ≤ 125
 * times as much, and 2 in log and sqrt, moved by x_i·x_(i−1)²·f(x_(i−1))/v ≤ 240 times:
 * (4·125 + 2·240)·2^-53 < 1000·2^-53. */
#define ZIG_AREA_RTOL (1000.0 * 0x1p-53)

START_TEST(test_ziggurat_layers_have_equal_area)
{
    for (size_t i = 1; i < ZIG_LAYERS; i++) {
        const long double area = zig_x(i) * (gauss(zig_x(i - 1)) - gauss(zig_x(i)));
        ck_assert_msg(fabsl(area / ZIG_V - 1) <= ZIG_AREA_RTOL, "layer %zu area %.17Lg, v %.17Lg", i, area, ZIG_V);
    }
}
END_TEST

/* The base strip, the rectangle r·f(r) plus the tail ∫_r^∞ f = √(π/2)·erfc(r/√2), has area v too.
 * r is a double (relative error ≤ 2^-53), which moves the strip by r³f(r)/v ≈ 12.5 times as much
 * relatively, and v is quoted to 17 digits (≤ 2·2^-53): 16·2^-53 covers both. */
#define ZIG_STRIP_RTOL (16.0 * 0x1p-53)

START_TEST(test_ziggurat_base_strip_has_area_v)
{
    const long double r = zig_x(ZIG_LAYERS - 1);
    const long double strip = r * gauss(r) + sqrtl(acosl(-1.0L) / 2) * erfcl(r / sqrtl(2.0L));
    ck_assert_msg(fabsl(strip / ZIG_V - 1) <= ZIG_STRIP_RTOL, "base strip %.17Lg, v %.17Lg", strip, ZIG_V);
    ck_assert(zig_r == (double)r && zig_inv_r == 1.0 / zig_r);
}
END_TEST

/* zig_f[i] = f(x_i): exp's argument −x²/2 rounds once (absolute x²/2·2^-53, which f inherits as a
 * relative error), exp rounds once, and the libm that made the table may be one ulp off (layer 38
 * is): (x²/2 + 3)·2^-53. */
START_TEST(test_ziggurat_heights_are_the_gaussian_at_the_edges)
{
    for (size_t i = 0; i < ZIG_LAYERS; i++) {
        const long double x = zig_x(i), f = gauss(x);
        const long double tol = (0.5L * x * x + 3.0L) * 0x1p-53L;
        ck_assert_msg(fabsl(zig_f[i] / f - 1) <= tol, "layer %zu f %.17g, exp(-x^2/2) %.17Lg", i, zig_f[i], f);
    }
}
END_TEST

/* zig_k[i] = round(2^52 · x_(i−1)/x_i): the float64 ratio is within half an ulp (≤ 0.5 after
 * scaling by 2^52), then rounded to an integer (another 0.5). */
START_TEST(test_ziggurat_bounds_are_ratios_of_adjacent_edges)
{
    for (size_t i = 1; i < ZIG_LAYERS; i++) {
        const long double want = 0x1p52L * zig_x(i - 1) / zig_x(i);
        ck_assert_msg(fabsl((long double)zig_k[i] - want) <= 1.0L, "layer %zu k %llu, ratio %.3Lf", i,
                      (unsigned long long)zig_k[i], want);
    }
}
END_TEST

/* The base strip: zig_k[0] = round(2^52 · r·f(r)/v), the rectangle's share of the strip, and
 * zig_w[0] = (v/f(r))/2^52, the strip's width as a rectangle of height f(r). In float64, −r²/2
 * rounds with an absolute error up to r²/2·2^-53, which f(r) inherits as a relative error, and exp,
 * the product and the quotient add one rounding each. */
#define ZIG_BASE_RTOL ((0.5 * zig_r * zig_r + 3.0) * 0x1p-53)

START_TEST(test_ziggurat_base_strip_matches_its_definition)
{
    const long double r = zig_x(ZIG_LAYERS - 1);
    const long double k0 = 0x1p52L * r * gauss(r) / ZIG_V, w0 = ZIG_V / gauss(r) / 0x1p52L;
    ck_assert_msg(fabsl((long double)zig_k[0] - k0) <= ZIG_BASE_RTOL * k0 + 0.5L, "k[0] %llu, definition %.3Lf",
                  (unsigned long long)zig_k[0], k0);
    ck_assert_msg(fabsl(zig_w[0] / w0 - 1) <= ZIG_BASE_RTOL, "w[0] %.17g, definition %.17Lg", zig_w[0], w0);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_rng");
    TCase *known = tcase_create("known values");
    tcase_add_test(known, test_seed0_and_seed42_normals_match_the_quoted_values);
    suite_add_tcase(s, known);

    TCase *bits = tcase_create("seeding and raw bits");
    tcase_add_loop_test(bits, test_seeded_state_matches_numpy_pcg64_state, 0, (int)COUNT(STATE_SEEDS));
    tcase_add_loop_test(bits, test_raw_words_match_numpy_random_raw, 0, (int)COUNT(STATE_SEEDS));
    suite_add_tcase(s, bits);

    TCase *draws = tcase_create("draws");
    tcase_add_loop_test(draws, test_random_matches_numpy_draw_for_draw, 0, (int)COUNT(DRAW_SEEDS));
    tcase_add_loop_test(draws, test_normal_matches_numpy_draw_for_draw, 0, (int)COUNT(DRAW_SEEDS));
    tcase_add_test(draws, test_interleaved_random_and_normal_match_numpy_interleaving);
    tcase_add_test(draws, test_million_normals_match_numpy_sum_max_and_last_draw);
    suite_add_tcase(s, draws);

    TCase *fills = tcase_create("array fills");
    tcase_add_test(fills, test_normal_f64_scales_draws_in_numpy_order);
    tcase_add_test(fills, test_normal_f32_rounds_the_scaled_double_once);
    tcase_add_test(fills, test_uniform_f32_maps_random_onto_lo_hi);
    tcase_add_test(fills, test_generators_share_no_state);
    suite_add_tcase(s, fills);

    TCase *tables = tcase_create("ziggurat tables");
    tcase_add_test(tables, test_ziggurat_layers_have_equal_area);
    tcase_add_test(tables, test_ziggurat_base_strip_has_area_v);
    tcase_add_test(tables, test_ziggurat_heights_are_the_gaussian_at_the_edges);
    tcase_add_test(tables, test_ziggurat_bounds_are_ratios_of_adjacent_edges);
    tcase_add_test(tables, test_ziggurat_base_strip_matches_its_definition);
    suite_add_tcase(s, tables);
    return s;
}
