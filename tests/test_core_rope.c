/* ref/core/rope: frequency tables against the formulas of DeepSeek-V3 inference/model.py written here in
 * double, the YaRN ranges and mscale values worked out by hand, and the properties of the rotation: inverse
 * after rotation is the identity, norms are kept, the two pairings agree after a channel permutation, and q·k
 * depends only on the difference of the two positions. */
#include "common.h"
#include "rng.h"
#include "rope.h"
#include "status.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#define U_F32 (FLT_EPSILON / 2)
#define U_F64 (DBL_EPSILON / 2)

/* A float32 frequency passes through these roundings, each at most u·θ_i: pow, reciprocal, the
 * division by the factor, the two products and the sum of the blend, and the ramp, whose error
 * (≤ 2u absolute) reaches θ' scaled by θ_i·(1 − 1/factor) ≤ θ_i: 8 in all. */
#define YARN_FREQ_ULPS 8

/* Plain frequencies: pow and reciprocal (2), plus the exponent 2i/Dr rounded to float when Dr is not
 * a power of two, which moves θ_i = base^(−e) by ln(base)·|δe| ≤ ln(base)·u relative. */
static double plain_freq_ulps(double base) { return 2.0 + log(base); }

/* One rotation of a pair (a, b) of norm ρ, per output: cos and sin rounded (u each, scaled by |a|,
 * |b|: √2·u·ρ), the product b·sin rounded (u·ρ), the fused multiply-add rounded (u·ρ):
 * (√2 + 2)·u·ρ < 4u·ρ, in float for _f32 and in double for _f64. */
#define ROTATION_ULPS 4

/* ---- configurations ------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    size_t Dr;
    double base, factor, L_orig, beta_fast, beta_slow;
    double spec_lo, spec_hi;  /* the values worked out by hand */
} yarn_case;

static const yarn_case YARN_CASES[] = {
    {"V3", 64, 1e4, 40, 4096, 32, 1, 10, 23},
    {"V4 compress rope", 64, 1.6e5, 16, 65536, 32, 1, 15, 25},
    {"toy", 8, 1e4, 40, 4096, 32, 1, 1, 3},
    /* L_orig < 2π puts both corrections below 0: lo = hi = 0, so hi is bumped to 0.001 */
    {"empty range", 8, 1e4, 40, 4, 32, 1, 0, 0.001},
};
#define N_YARN (sizeof YARN_CASES / sizeof YARN_CASES[0])

/* ---- oracles: the formulas in double --------------------------------------------------------- */

static double plain_theta(size_t i, size_t Dr, double base) { return pow(base, -2.0 * (double)i / (double)Dr); }

static double correction(double n_rot, size_t Dr, double base, double L_orig)
{
    return (double)Dr * log(L_orig / (2 * M_PI * n_rot)) / (2 * log(base));
}

/* theta[Dr/2] by the YaRN formula; *lo, *hi as find_correction_range defines them */
static void yarn_oracle(double *theta, double *lo, double *hi, const yarn_case *c)
{
    *lo = fmax(floor(correction(c->beta_fast, c->Dr, c->base, c->L_orig)), 0.0);
    *hi = fmin(ceil(correction(c->beta_slow, c->Dr, c->base, c->L_orig)), (double)c->Dr - 1);
    if (*lo == *hi) *hi += 0.001;
    for (size_t i = 0; i < c->Dr / 2; i++) {
        const double ramp = fmin(fmax(((double)i - *lo) / (*hi - *lo), 0.0), 1.0);
        const double t = plain_theta(i, c->Dr, c->base);
        theta[i] = t * (1.0 - ramp) + t / c->factor * ramp;
    }
}

/* y = x rotated at pos, interleaved pairs (2i, 2i+1) */
static void oracle_interleaved(double *y, const double *x, const kvl_rope *r, double pos)
{
    for (size_t i = 0; i < r->Dr / 2; i++) {
        const double a = pos * (double)r->theta[i];
        y[2 * i] = x[2 * i] * cos(a) - x[2 * i + 1] * sin(a);
        y[2 * i + 1] = x[2 * i] * sin(a) + x[2 * i + 1] * cos(a);
    }
}

/* y = x rotated at pos, half-split pairs (i, i + Dr/2) */
static void oracle_half_split(double *y, const double *x, const kvl_rope *r, double pos)
{
    const size_t h = r->Dr / 2;
    for (size_t i = 0; i < h; i++) {
        const double a = pos * (double)r->theta[i];
        y[i] = x[i] * cos(a) - x[i + h] * sin(a);
        y[i + h] = x[i] * sin(a) + x[i + h] * cos(a);
    }
}

/* largest pair norm, the scale of a rotation's rounding error */
static double max_pair_norm(const float *x, size_t Dr, size_t step, size_t mate)
{
    double m = 0.0;
    for (size_t i = 0; i < Dr / 2; i++) m = fmax(m, hypot(x[i * step], x[i * step + mate]));
    return m;
}

static const int64_t POSITIONS[] = {0, 1, -1, 7, 4095, 4096, -33, 65537, 1000003, -2000000, 163840};
#define N_POS (sizeof POSITIONS / sizeof POSITIONS[0])

#define MAX_DR KVL_ROPE_MAX_DR

static void rope_v3(kvl_rope *r)
{
    ck_assert_int_eq(kvl_rope_init_yarn(r, 64, 1e4, 40, 4096, 32, 1), KVL_OK);
}

/* ---- frequency tables ----------------------------------------------------------------------------- */

START_TEST(test_yarn_range_matches_spec_for_v3_v4_and_toy)
{
    for (size_t c = 0; c < N_YARN; c++) {
        const yarn_case *y = &YARN_CASES[c];
        double lo, hi, want_lo, want_hi, theta[MAX_DR / 2];
        ck_assert_int_eq(kvl_yarn_range(&lo, &hi, y->Dr, y->base, y->L_orig, y->beta_fast, y->beta_slow), KVL_OK);
        yarn_oracle(theta, &want_lo, &want_hi, y);
        ck_assert_msg(lo == y->spec_lo && hi == y->spec_hi, "%s: lo %g hi %g, want %g %g", y->name, lo, hi,
                      y->spec_lo, y->spec_hi);
        ck_assert_msg(lo == want_lo && hi == want_hi, "%s: lo %g hi %g, formula %g %g", y->name, lo, hi, want_lo,
                      want_hi);
    }
}
END_TEST

START_TEST(test_yarn_freqs_match_double_formula_for_v3_v4_and_toy)
{
    for (size_t c = 0; c < N_YARN; c++) {
        const yarn_case *y = &YARN_CASES[c];
        float got[MAX_DR / 2];
        double want[MAX_DR / 2], lo, hi;
        ck_assert_int_eq(kvl_yarn_freqs(got, y->Dr, y->base, y->factor, y->L_orig, y->beta_fast, y->beta_slow),
                         KVL_OK);
        yarn_oracle(want, &lo, &hi, y);
        for (size_t i = 0; i < y->Dr / 2; i++) {
            char what[64];
            snprintf(what, sizeof what, "%s theta'[%zu]", y->name, i);
            kvl_expect_close(what, &got[i], &want[i], 1, YARN_FREQ_ULPS * U_F32 * plain_theta(i, y->Dr, y->base), 0, 0);
        }
        kvl_rope r;
        ck_assert_int_eq(kvl_rope_init_yarn(&r, y->Dr, y->base, y->factor, y->L_orig, y->beta_fast, y->beta_slow),
                         KVL_OK);
        ck_assert(r.Dr == y->Dr && memcmp(r.theta, got, y->Dr / 2 * sizeof *got) == 0);
    }
}
END_TEST

/* The toy table's ramp, read back from θ' = θ·(1 − ramp·(1 − 1/factor)), is (0, 0, 0.5, 1). */
START_TEST(test_toy_yarn_ramp_is_0_0_half_1)
{
    const double want[4] = {0, 0, 0.5, 1}, factor = 40;
    float theta[4], plain[4];
    double ramp[4];
    ck_assert_int_eq(kvl_yarn_freqs(theta, 8, 1e4, factor, 4096, 32, 1), KVL_OK);
    ck_assert_int_eq(kvl_rope_freqs(plain, 8, 1e4), KVL_OK);
    for (size_t i = 0; i < 4; i++) ramp[i] = (1.0 - (double)theta[i] / plain[i]) / (1.0 - 1.0 / factor);
    /* θ' carries YARN_FREQ_ULPS·u·θ, and θ 2u more; dividing by θ·(1 − 1/factor) scales by < 1.03 */
    kvl_expect_close_f64("toy ramp", ramp, want, 4, 2 * (YARN_FREQ_ULPS + 2) * U_F32, 0, 0);
}
END_TEST

START_TEST(test_plain_freqs_match_double_formula)
{
    const size_t widths[] = {2, 6, 8, 64, 96, 128};
    const double bases[] = {1e4, 1.6e5, 5e5};
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++)
        for (size_t b = 0; b < 3; b++) {
            const size_t Dr = widths[w];
            float got[MAX_DR / 2];
            double want[MAX_DR / 2];
            ck_assert_int_eq(kvl_rope_freqs(got, Dr, bases[b]), KVL_OK);
            for (size_t i = 0; i < Dr / 2; i++) want[i] = plain_theta(i, Dr, bases[b]);
            char what[64];
            snprintf(what, sizeof what, "theta Dr=%zu base=%g", Dr, bases[b]);
            kvl_expect_close(what, got, want, Dr / 2, 0, plain_freq_ulps(bases[b]) * U_F32, 0);
            ck_assert(got[0] == 1.0f);
        }
}
END_TEST

/* factor 1 leaves every frequency where plain RoPE has it, up to one float32 rounding of the blend. */
START_TEST(test_yarn_with_factor_one_gives_plain_rope)
{
    for (size_t c = 0; c < N_YARN; c++) {
        const yarn_case *y = &YARN_CASES[c];
        float yarn[MAX_DR / 2], plain[MAX_DR / 2];
        double plain_d[MAX_DR / 2];
        ck_assert_int_eq(kvl_yarn_freqs(yarn, y->Dr, y->base, 1.0, y->L_orig, y->beta_fast, y->beta_slow), KVL_OK);
        ck_assert_int_eq(kvl_rope_freqs(plain, y->Dr, y->base), KVL_OK);
        for (size_t i = 0; i < y->Dr / 2; i++) plain_d[i] = plain[i];
        kvl_expect_close(y->name, yarn, plain_d, y->Dr / 2, 0, FLT_EPSILON, 0);
    }
}
END_TEST

/* V3 (mscale 1, factor 40) m = 1.368888, scale (128+64)^−½·m² = 0.1352338; V2-Lite (mscale
 * 0.707) m = 1.260804; factor ≤ 1 gives m = 1. The digits are rounded to the last one shown. */
START_TEST(test_mscale_and_softmax_scale_match_v3)
{
    ck_assert_msg(fabs(kvl_yarn_mscale(40, 1) - 1.368888) <= 5e-7, "V3 m = %.9f", kvl_yarn_mscale(40, 1));
    ck_assert_msg(fabs(kvl_yarn_softmax_scale(192, 40, 1) - 0.1352338) <= 5e-8, "V3 scale = %.10f",
                  kvl_yarn_softmax_scale(192, 40, 1));
    ck_assert_msg(fabs(kvl_yarn_mscale(40, 0.707) - 1.260804) <= 5e-7, "V2-Lite m = %.9f", kvl_yarn_mscale(40, 0.707));
    const double m = 0.1 * log(40.0) + 1.0;
    ck_assert(fabs(kvl_yarn_mscale(40, 1) - m) <= 2 * DBL_EPSILON);
    ck_assert(fabs(kvl_yarn_softmax_scale(192, 40, 1) - m * m / sqrt(192.0)) <= 4 * DBL_EPSILON);
    ck_assert(kvl_yarn_mscale(1, 1) == 1.0 && kvl_yarn_mscale(0.5, 1) == 1.0);
    ck_assert(fabs(kvl_yarn_softmax_scale(512, 1, 1) - 1.0 / sqrt(512.0)) <= DBL_EPSILON);
}
END_TEST

START_TEST(test_bad_widths_bases_and_yarn_parameters_are_rejected)
{
    kvl_rope r;
    float theta[4];
    double lo, hi;
    ck_assert_int_eq(kvl_rope_init(&r, 7, 1e4), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "Dr = 7") != NULL, "%s", kvl_error());
    ck_assert_int_eq(kvl_rope_init(&r, 0, 1e4), KVL_EINVAL);
    ck_assert_int_eq(kvl_rope_init(&r, KVL_ROPE_MAX_DR + 2, 1e4), KVL_EINVAL);
    ck_assert_int_eq(kvl_rope_init(&r, 8, 1.0), KVL_EINVAL);
    ck_assert_int_eq(kvl_rope_init(&r, 8, NAN), KVL_EINVAL);
    ck_assert_int_eq(kvl_rope_freqs(theta, 8, INFINITY), KVL_EINVAL);
    ck_assert_int_eq(kvl_rope_init_yarn(&r, 8, 1e4, 0.5, 4096, 32, 1), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "factor") != NULL, "%s", kvl_error());
    ck_assert_int_eq(kvl_rope_init_yarn(&r, 8, 1e4, NAN, 4096, 32, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_rope_init_yarn(&r, 8, 1e4, 40, 0, 32, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_rope_init_yarn(&r, 8, 1e4, 40, 4096, 1, 32), KVL_EINVAL);
    ck_assert_int_eq(kvl_rope_init_yarn(&r, 8, 1e4, 40, 4096, 32, 0), KVL_EINVAL);
    ck_assert_int_eq(kvl_rope_init_yarn(&r, 9, 1e4, 40, 4096, 32, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_yarn_range(&lo, &hi, 8, 0.5, 4096, 32, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_yarn_freqs(theta, 8, 1e4, 40, -1, 32, 1), KVL_EINVAL);
}
END_TEST

/* ---- rotation ------------------------------------------------------------------------------------- */

/* The f32 rotation is within ROTATION_ULPS float roundings of the definition evaluated in double
 * on the same float inputs; the f64 rotation within ROTATION_ULPS double roundings. */
START_TEST(test_rotation_matches_double_oracle_for_both_pairings)
{
    kvl_rope r;
    rope_v3(&r);
    kvl_rng rng;
    kvl_rng_seed(&rng, 31);
    for (size_t p = 0; p < N_POS; p++) {
        float x[64], y[64];
        double xd[64], yd[64], want[64];
        kvl_rng_normal_f32(&rng, x, 64, 1.0);
        for (size_t i = 0; i < 64; i++) xd[i] = x[i];

        memcpy(y, x, sizeof x);
        kvl_rope_rotate_interleaved(y, &r, POSITIONS[p]);
        oracle_interleaved(want, xd, &r, (double)POSITIONS[p]);
        kvl_expect_close("interleaved f32", y, want, 64, ROTATION_ULPS * U_F32 * max_pair_norm(x, 64, 2, 1), 0, 0);
        memcpy(yd, xd, sizeof xd);
        kvl_rope_rotate_interleaved_f64(yd, &r, POSITIONS[p]);
        kvl_expect_close_f64("interleaved f64", yd, want, 64, ROTATION_ULPS * U_F64 * max_pair_norm(x, 64, 2, 1), 0, 0);

        memcpy(y, x, sizeof x);
        kvl_rope_rotate_half_split(y, &r, POSITIONS[p]);
        oracle_half_split(want, xd, &r, (double)POSITIONS[p]);
        kvl_expect_close("half-split f32", y, want, 64, ROTATION_ULPS * U_F32 * max_pair_norm(x, 64, 1, 32), 0, 0);
        memcpy(yd, xd, sizeof xd);
        kvl_rope_rotate_half_split_f64(yd, &r, POSITIONS[p]);
        kvl_expect_close_f64("half-split f64", yd, want, 64, ROTATION_ULPS * U_F64 * max_pair_norm(x, 64, 1, 32), 0,
                             0);
    }
}
END_TEST

START_TEST(test_position_zero_is_the_identity)
{
    kvl_rope r;
    rope_v3(&r);
    kvl_rng rng;
    kvl_rng_seed(&rng, 32);
    float x[64], y[64];
    double xd[64], yd[64];
    kvl_rng_normal_f32(&rng, x, 64, 1.0);
    kvl_rng_normal_f64(&rng, xd, 64, 1.0);
    memcpy(y, x, sizeof x);
    kvl_rope_rotate_interleaved(y, &r, 0);
    kvl_rope_rotate_half_split(y, &r, 0);
    ck_assert(memcmp(x, y, sizeof x) == 0);
    memcpy(yd, xd, sizeof xd);
    kvl_rope_rotate_interleaved_f64(yd, &r, 0);
    kvl_rope_rotate_half_split_f64(yd, &r, 0);
    ck_assert(memcmp(xd, yd, sizeof xd) == 0);
}
END_TEST

/* unrotate(rotate(x, p), p) = x, within one rotation's error each way. */
START_TEST(test_unrotate_after_rotate_is_identity_for_both_pairings)
{
    kvl_rope plain, yarn;
    ck_assert_int_eq(kvl_rope_init(&plain, 64, 1e4), KVL_OK);
    ck_assert_int_eq(kvl_rope_init_yarn(&yarn, 64, 1.6e5, 16, 65536, 32, 1), KVL_OK);
    const kvl_rope *ropes[2] = {&plain, &yarn};
    kvl_rng rng;
    kvl_rng_seed(&rng, 33);
    for (size_t k = 0; k < 2; k++)
        for (size_t p = 0; p < N_POS; p++) {
            float x[64], y[64];
            double xd[64], yd[64];
            kvl_rng_normal_f32(&rng, x, 64, 1.0);
            for (size_t i = 0; i < 64; i++) xd[i] = x[i];
            const int64_t pos = POSITIONS[p];

            memcpy(y, x, sizeof x);
            kvl_rope_rotate_interleaved(y, ropes[k], pos);
            kvl_rope_unrotate_interleaved(y, ropes[k], pos);
            kvl_expect_close("interleaved round trip", y, xd, 64,
                             2 * ROTATION_ULPS * U_F32 * max_pair_norm(x, 64, 2, 1), 0, 0);
            memcpy(y, x, sizeof x);
            kvl_rope_rotate_half_split(y, ropes[k], pos);
            kvl_rope_unrotate_half_split(y, ropes[k], pos);
            kvl_expect_close("half-split round trip", y, xd, 64,
                             2 * ROTATION_ULPS * U_F32 * max_pair_norm(x, 64, 1, 32), 0, 0);

            memcpy(yd, xd, sizeof xd);
            kvl_rope_rotate_interleaved_f64(yd, ropes[k], pos);
            kvl_rope_unrotate_interleaved_f64(yd, ropes[k], pos);
            kvl_expect_close_f64("interleaved f64 round trip", yd, xd, 64,
                                 2 * ROTATION_ULPS * U_F64 * max_pair_norm(x, 64, 2, 1), 0, 0);
            memcpy(yd, xd, sizeof xd);
            kvl_rope_rotate_half_split_f64(yd, ropes[k], pos);
            kvl_rope_unrotate_half_split_f64(yd, ropes[k], pos);
            kvl_expect_close_f64("half-split f64 round trip", yd, xd, 64,
                                 2 * ROTATION_ULPS * U_F64 * max_pair_norm(x, 64, 1, 32), 0, 0);
        }
}
END_TEST

/* The angle at −p is exactly −(angle at p), cos is even and sin odd: unrotating at p is rotating at
 * −p, bit for bit. */
START_TEST(test_unrotate_equals_rotate_at_negative_position)
{
    kvl_rope r;
    rope_v3(&r);
    kvl_rng rng;
    kvl_rng_seed(&rng, 34);
    for (size_t p = 0; p < N_POS; p++) {
        float x[64], a[64], b[64];
        double xd[64], ad[64], bd[64];
        kvl_rng_normal_f32(&rng, x, 64, 1.0);
        kvl_rng_normal_f64(&rng, xd, 64, 1.0);
        const int64_t pos = POSITIONS[p];
        memcpy(a, x, sizeof x); memcpy(b, x, sizeof x);
        kvl_rope_unrotate_interleaved(a, &r, pos);
        kvl_rope_rotate_interleaved(b, &r, -pos);
        ck_assert_msg(memcmp(a, b, sizeof a) == 0, "interleaved pos %lld", (long long)pos);
        memcpy(a, x, sizeof x); memcpy(b, x, sizeof x);
        kvl_rope_unrotate_half_split(a, &r, pos);
        kvl_rope_rotate_half_split(b, &r, -pos);
        ck_assert_msg(memcmp(a, b, sizeof a) == 0, "half-split pos %lld", (long long)pos);
        memcpy(ad, xd, sizeof xd); memcpy(bd, xd, sizeof xd);
        kvl_rope_unrotate_interleaved_f64(ad, &r, pos);
        kvl_rope_rotate_interleaved_f64(bd, &r, -pos);
        ck_assert_msg(memcmp(ad, bd, sizeof ad) == 0, "interleaved f64 pos %lld", (long long)pos);
        memcpy(ad, xd, sizeof xd); memcpy(bd, xd, sizeof xd);
        kvl_rope_unrotate_half_split_f64(ad, &r, pos);
        kvl_rope_rotate_half_split_f64(bd, &r, -pos);
        ck_assert_msg(memcmp(ad, bd, sizeof ad) == 0, "half-split f64 pos %lld", (long long)pos);
    }
}
END_TEST

/* Every pair keeps its length: |‖R·pair‖ − ‖pair‖| ≤ ROTATION_ULPS·u·‖pair‖. */
START_TEST(test_rotation_keeps_norms)
{
    kvl_rope r;
    rope_v3(&r);
    kvl_rng rng;
    kvl_rng_seed(&rng, 35);
    for (size_t p = 0; p < N_POS; p++) {
        float x[64], y[64], z[64];
        kvl_rng_normal_f32(&rng, x, 64, 3.0);
        memcpy(y, x, sizeof x);
        memcpy(z, x, sizeof x);
        kvl_rope_rotate_interleaved(y, &r, POSITIONS[p]);
        kvl_rope_unrotate_half_split(z, &r, POSITIONS[p]);
        for (size_t i = 0; i < 32; i++) {
            const double before_i = hypot(x[2 * i], x[2 * i + 1]), after_i = hypot(y[2 * i], y[2 * i + 1]);
            const double before_h = hypot(x[i], x[i + 32]), after_h = hypot(z[i], z[i + 32]);
            ck_assert_msg(fabs(after_i - before_i) <= ROTATION_ULPS * U_F32 * before_i,
                          "interleaved pos %lld pair %zu: %.9g -> %.9g", (long long)POSITIONS[p], i, before_i, after_i);
            ck_assert_msg(fabs(after_h - before_h) <= ROTATION_ULPS * U_F32 * before_h,
                          "half-split pos %lld pair %zu: %.9g -> %.9g", (long long)POSITIONS[p], i, before_h, after_h);
        }
    }
}
END_TEST

/* Interleaved on x equals half-split on the permuted x (x_h[i] = x[2i], x_h[i + Dr/2] = x[2i + 1]),
 * exactly: the same pairs meet the same cos and sin. */
START_TEST(test_interleaved_matches_half_split_when_channels_are_permuted)
{
    kvl_rope r;
    rope_v3(&r);
    kvl_rng rng;
    kvl_rng_seed(&rng, 36);
    for (size_t p = 0; p < N_POS; p++) {
        float x[64], xh[64];
        double xd[64], xhd[64];
        kvl_rng_normal_f32(&rng, x, 64, 1.0);
        kvl_rng_normal_f64(&rng, xd, 64, 1.0);
        for (size_t i = 0; i < 32; i++) {
            xh[i] = x[2 * i]; xh[i + 32] = x[2 * i + 1];
            xhd[i] = xd[2 * i]; xhd[i + 32] = xd[2 * i + 1];
        }
        kvl_rope_rotate_interleaved(x, &r, POSITIONS[p]);
        kvl_rope_rotate_half_split(xh, &r, POSITIONS[p]);
        kvl_rope_unrotate_interleaved_f64(xd, &r, POSITIONS[p]);
        kvl_rope_unrotate_half_split_f64(xhd, &r, POSITIONS[p]);
        for (size_t i = 0; i < 32; i++) {
            ck_assert_msg(x[2 * i] == xh[i] && x[2 * i + 1] == xh[i + 32], "f32 pos %lld pair %zu",
                          (long long)POSITIONS[p], i);
            ck_assert_msg(xd[2 * i] == xhd[i] && xd[2 * i + 1] == xhd[i + 32], "f64 pos %lld pair %zu",
                          (long long)POSITIONS[p], i);
        }
    }
}
END_TEST

/* The bound on |q_t·k_s − q_{t+Δ}·k_{s+Δ}|: four rotated vectors, each pair off by ulps·u plus the
 * double rounding of its angle (u_64·|pos|·θ_i radians), weighted by the pair norms. */
static double qk_bound(const float *q, const float *k, const kvl_rope *r, double ulps, double u, double max_pos)
{
    double bound = 0.0;
    for (size_t i = 0; i < r->Dr / 2; i++)
        bound += hypot(q[2 * i], q[2 * i + 1]) * hypot(k[2 * i], k[2 * i + 1]) *
                 4 * (ulps * u + U_F64 * max_pos * (double)r->theta[i]);
    return bound;
}

static double dot_f32(const float *a, const float *b, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* q_t·k_s depends on t − s only (R_t^T R_s = R_{s−t}), so shifting both by Δ keeps it. */
START_TEST(test_qk_dot_unchanged_when_both_positions_shift)
{
    const int64_t pairs[][2] = {{5, 3}, {3, 5}, {1000, 17}, {100000, 99000}, {0, 0}, {4097, -4}};
    const int64_t shifts[] = {1, -5, 37, 12345, 1000000};
    kvl_rope plain, yarn;
    ck_assert_int_eq(kvl_rope_init(&plain, 64, 1e4), KVL_OK);
    rope_v3(&yarn);
    const kvl_rope *ropes[2] = {&plain, &yarn};
    kvl_rng rng;
    kvl_rng_seed(&rng, 37);
    for (size_t rk = 0; rk < 2; rk++)
        for (size_t c = 0; c < sizeof pairs / sizeof pairs[0]; c++)
            for (size_t d = 0; d < sizeof shifts / sizeof shifts[0]; d++) {
                const kvl_rope *r = ropes[rk];
                const int64_t t = pairs[c][0], s = pairs[c][1], t2 = t + shifts[d], s2 = s + shifts[d];
                float q[64], k[64], q1[64], k1[64], q2[64], k2[64];
                kvl_rng_normal_f32(&rng, q, 64, 1.0);
                kvl_rng_normal_f32(&rng, k, 64, 1.0);
                memcpy(q1, q, sizeof q); memcpy(q2, q, sizeof q);
                memcpy(k1, k, sizeof k); memcpy(k2, k, sizeof k);
                kvl_rope_rotate_interleaved(q1, r, t);
                kvl_rope_rotate_interleaved(k1, r, s);
                kvl_rope_rotate_interleaved(q2, r, t2);
                kvl_rope_rotate_interleaved(k2, r, s2);
                const double max_pos = fmax(fabs((double)t2), fabs((double)s2));
                /* each of the two double dot products adds γ_64·Σ|q_i k_i| ≤ 64·u_64·‖q‖‖k‖ */
                const double dot_rounding = 2 * 64 * U_F64 * sqrt(dot_f32(q, q, 64) * dot_f32(k, k, 64));
                const double before = dot_f32(q1, k1, 64), after = dot_f32(q2, k2, 64);
                const double bound = qk_bound(q, k, r, ROTATION_ULPS, U_F32, max_pos) + dot_rounding;
                ck_assert_msg(fabs(before - after) <= bound, "t %lld s %lld shift %lld: %.9g vs %.9g (bound %.3g)",
                              (long long)t, (long long)s, (long long)shifts[d], before, after, bound);

                double qd[64], kd[64];
                for (size_t i = 0; i < 64; i++) { qd[i] = q[i]; kd[i] = k[i]; }
                double q1d[64], k1d[64];
                memcpy(q1d, qd, sizeof qd); memcpy(k1d, kd, sizeof kd);
                kvl_rope_rotate_half_split_f64(q1d, r, t);
                kvl_rope_rotate_half_split_f64(k1d, r, s);
                kvl_rope_rotate_half_split_f64(qd, r, t2);
                kvl_rope_rotate_half_split_f64(kd, r, s2);
                double b64 = 0.0, a64 = 0.0;
                for (size_t i = 0; i < 64; i++) { b64 += q1d[i] * k1d[i]; a64 += qd[i] * kd[i]; }
                /* half-split pairs (i, i+32): permute q, k so qk_bound's interleaved pairing sees them */
                float qp[64], kp[64];
                for (size_t i = 0; i < 32; i++) {
                    qp[2 * i] = q[i]; qp[2 * i + 1] = q[i + 32];
                    kp[2 * i] = k[i]; kp[2 * i + 1] = k[i + 32];
                }
                const double bound64 = qk_bound(qp, kp, r, ROTATION_ULPS, U_F64, max_pos) + dot_rounding;
                ck_assert_msg(fabs(b64 - a64) <= bound64, "f64 t %lld s %lld shift %lld: %.17g vs %.17g (bound %.3g)",
                              (long long)t, (long long)s, (long long)shifts[d], b64, a64, bound64);
            }
}
END_TEST

/* Rows [T][H·Dh] with each head's rotary part at h·Dh + 32: the row functions (parallel for T ≥ 64)
 * equal the vector functions called row by row at start + t, and leave the other channels alone. */
START_TEST(test_rows_rotation_matches_vector_rotation_row_by_row)
{
    enum { T = 100, H = 3, Dh = 96, NOPE = 32, STRIDE = H * Dh };
    static float x[T * STRIDE], rows[T * STRIDE], one[T * STRIDE];
    const int64_t starts[] = {0, -7, 4090};
    kvl_rope r;
    rope_v3(&r);
    kvl_rng rng;
    kvl_rng_seed(&rng, 38);
    kvl_rng_normal_f32(&rng, x, T * STRIDE, 1.0);
    for (size_t si = 0; si < 3; si++)
        for (int kind = 0; kind < 4; kind++) {
            const int64_t start = starts[si];
            memcpy(rows, x, sizeof x);
            memcpy(one, x, sizeof x);
            for (size_t h = 0; h < H; h++) {
                const size_t off = h * Dh + NOPE;
                switch (kind) {
                case 0: kvl_rope_rotate_rows_interleaved(rows, T, STRIDE, off, &r, start); break;
                case 1: kvl_rope_unrotate_rows_interleaved(rows, T, STRIDE, off, &r, start); break;
                case 2: kvl_rope_rotate_rows_half_split(rows, T, STRIDE, off, &r, start); break;
                default: kvl_rope_unrotate_rows_half_split(rows, T, STRIDE, off, &r, start); break;
                }
                for (size_t t = 0; t < T; t++) {
                    float *v = one + t * STRIDE + off;
                    const int64_t pos = start + (int64_t)t;
                    switch (kind) {
                    case 0: kvl_rope_rotate_interleaved(v, &r, pos); break;
                    case 1: kvl_rope_unrotate_interleaved(v, &r, pos); break;
                    case 2: kvl_rope_rotate_half_split(v, &r, pos); break;
                    default: kvl_rope_unrotate_half_split(v, &r, pos); break;
                    }
                }
            }
            ck_assert_msg(memcmp(rows, one, sizeof rows) == 0, "kind %d start %lld", kind, (long long)start);
            for (size_t t = 0; t < T; t++)
                for (size_t h = 0; h < H; h++)
                    ck_assert(memcmp(rows + t * STRIDE + h * Dh, x + t * STRIDE + h * Dh, NOPE * sizeof *x) == 0);
            ck_assert(memcmp(rows, x, sizeof x) != 0);
        }
}
END_TEST


/* A [T][H][Dh] tensor's heads rotated token by token (V4's 64 heads of 512, rotary the trailing 64;
 * 70 tokens, past the parallel threshold): the same bits as each head rotated alone, every other
 * channel untouched, in both pairings and directions. */
START_TEST(test_heads_rotation_matches_vector_rotation_head_by_head)
{
    enum { T = 70, H = 64, Dh = 512, Dr = 64, STRIDE = H * Dh };
    static float x[T * STRIDE], heads[T * STRIDE], one[T * STRIDE];
    kvl_rope r;
    ck_assert_int_eq(kvl_rope_init(&r, Dr, 10000.0), KVL_OK);
    kvl_rng rng;
    kvl_rng_seed(&rng, 39);
    kvl_rng_normal_f32(&rng, x, T * STRIDE, 1.0);
    const int64_t starts[] = {0, -7, 163840};
    for (size_t si = 0; si < 3; si++)
        for (int kind = 0; kind < 3; kind++) {
            const int64_t start = starts[si];
            memcpy(heads, x, sizeof x);
            memcpy(one, x, sizeof x);
            switch (kind) {
            case 0: kvl_rope_rotate_heads_interleaved(heads, T, STRIDE, Dh - Dr, H, Dh, &r, start); break;
            case 1: kvl_rope_unrotate_heads_interleaved(heads, T, STRIDE, Dh - Dr, H, Dh, &r, start); break;
            default: kvl_rope_rotate_heads_half_split(heads, T, STRIDE, Dh - Dr, H, Dh, &r, start); break;
            }
            for (size_t t = 0; t < T; t++)
                for (size_t h = 0; h < H; h++) {
                    float *v = one + t * STRIDE + h * Dh + Dh - Dr;
                    const int64_t pos = start + (int64_t)t;
                    switch (kind) {
                    case 0: kvl_rope_rotate_interleaved(v, &r, pos); break;
                    case 1: kvl_rope_unrotate_interleaved(v, &r, pos); break;
                    default: kvl_rope_rotate_half_split(v, &r, pos); break;
                    }
                    const size_t at = t * STRIDE + h * Dh;
                    ck_assert(memcmp(heads + at, x + at, (Dh - Dr) * sizeof *x) == 0);
                }
            ck_assert_msg(memcmp(heads, one, sizeof heads) == 0, "kind %d start %lld", kind, (long long)start);
            ck_assert(memcmp(heads, x, sizeof x) != 0);
        }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_rope");
    TCase *freqs = tcase_create("frequencies");
    tcase_add_test(freqs, test_yarn_range_matches_spec_for_v3_v4_and_toy);
    tcase_add_test(freqs, test_yarn_freqs_match_double_formula_for_v3_v4_and_toy);
    tcase_add_test(freqs, test_toy_yarn_ramp_is_0_0_half_1);
    tcase_add_test(freqs, test_plain_freqs_match_double_formula);
    tcase_add_test(freqs, test_yarn_with_factor_one_gives_plain_rope);
    tcase_add_test(freqs, test_mscale_and_softmax_scale_match_v3);
    tcase_add_test(freqs, test_bad_widths_bases_and_yarn_parameters_are_rejected);
    suite_add_tcase(s, freqs);
    TCase *rot = tcase_create("rotation");
    tcase_add_test(rot, test_rotation_matches_double_oracle_for_both_pairings);
    tcase_add_test(rot, test_position_zero_is_the_identity);
    tcase_add_test(rot, test_unrotate_after_rotate_is_identity_for_both_pairings);
    tcase_add_test(rot, test_unrotate_equals_rotate_at_negative_position);
    tcase_add_test(rot, test_rotation_keeps_norms);
    tcase_add_test(rot, test_interleaved_matches_half_split_when_channels_are_permuted);
    tcase_add_test(rot, test_qk_dot_unchanged_when_both_positions_shift);
    tcase_add_test(rot, test_rows_rotation_matches_vector_rotation_row_by_row);
    tcase_add_test(rot, test_heads_rotation_matches_vector_rotation_head_by_head);
    suite_add_tcase(s, rot);
    return s;
}
