/* ref/core/norm and ref/core/softmax against their definitions (ref/core/norm.h, ref/core/softmax.h), written below as plain double loops, plus the properties the attention
 * modules rely on: unit RMS, rows summing to 1 or to 1 − p_sink, σ → −∞ giving plain softmax,
 * masked entries contributing nothing, and empty rows giving zeros rather than NaN. */
#include "common.h"
#include "norm.h"
#include "rng.h"
#include "softmax.h"
#include "softmax_cpu.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The module reduces in double and rounds each output once to float; the oracle reduces in double
 * too. Besides that one float rounding (FLT_EPSILON/2 relative), each side carries an n-term double
 * sum plus a few double roundings (sqrt, divide, products): (n + 8)·DBL_EPSILON covers both. */
static double double_path_rel(size_t n) { return (double)(n + 8) * DBL_EPSILON; }
#define ONE_FLOAT_ROUNDING (FLT_EPSILON / 2)

/* Softmax _f32 rounds twice: the stored exp(s_i − μ), then the quotient. */
#define TWO_FLOAT_ROUNDINGS FLT_EPSILON

/* Shapes [T][n]: one element, short odd rows, and a batch above norm.c's parallel threshold
 * (300·257 = 77,100 elements ≥ 2^16), so the OpenMP path is the one tested there. */
typedef struct { size_t T, n; } shape;
static const shape SHAPES[] = {{1, 1}, {3, 7}, {5, 37}, {300, 257}};
#define N_SHAPES (sizeof SHAPES / sizeof SHAPES[0])
#define BIG_T 300
#define BIG_N 257

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert(p != NULL);
    return p;
}

/* x[n] ~ offset + scale·N(0,1), as float */
static float *normal_f32(kvl_rng *rng, size_t n, double offset, double scale)
{
    float *x = xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(offset + scale * kvl_rng_normal(rng));
    return x;
}

static float *uniform_f32(kvl_rng *rng, size_t n, double lo, double hi)
{
    float *x = xmalloc(n * sizeof *x);
    kvl_rng_uniform_f32(rng, x, n, lo, hi);
    return x;
}

static double *widen(const float *x, size_t n)
{
    double *y = xmalloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

/* ---- norm oracles: want[T][n] ------------------------------------------------------------------- */

static void rmsnorm_oracle(double *want, const double *x, const double *g, size_t T, size_t n, double eps)
{
    for (size_t t = 0; t < T; t++) {
        const double *v = x + t * n;
        double ms = 0.0;
        for (size_t i = 0; i < n; i++) ms += v[i] * v[i];
        ms /= (double)n;
        for (size_t i = 0; i < n; i++) want[t * n + i] = (g ? g[i] : 1.0) * v[i] / sqrt(ms + eps);
    }
}

/* also returns max |g·z| + |b| over the batch, the scale of LayerNorm's absolute error */
static double layernorm_oracle(double *want, const double *x, const double *g, const double *b, size_t T,
                               size_t n, double eps)
{
    double scale = 0.0;
    for (size_t t = 0; t < T; t++) {
        const double *v = x + t * n;
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < n; i++) mean += v[i];
        mean /= (double)n;
        for (size_t i = 0; i < n; i++) var += (v[i] - mean) * (v[i] - mean);
        var /= (double)n;
        for (size_t i = 0; i < n; i++) {
            const double gz = g[i] * (v[i] - mean) / sqrt(var + eps);
            want[t * n + i] = gz + b[i];
            scale = fmax(scale, fabs(gz) + fabs(b[i]));
        }
    }
    return scale;
}

/* ---- norm tests ---------------------------------------------------------------------------------- */

START_TEST(test_rmsnorm_f32_matches_double_oracle)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 11);
    for (size_t c = 0; c < N_SHAPES; c++) {
        const size_t T = SHAPES[c].T, n = SHAPES[c].n;
        float *x = normal_f32(&rng, T * n, 0.0, 3.0), *g = uniform_f32(&rng, n, 0.5, 1.5);
        float *y = xmalloc(T * n * sizeof *y);
        double *xd = widen(x, T * n), *gd = widen(g, n), *want = xmalloc(T * n * sizeof *want);
        const double rtol = ONE_FLOAT_ROUNDING + double_path_rel(n);
        char what[64];

        kvl_rmsnorm_f32(y, x, g, T, n, 1e-6);
        rmsnorm_oracle(want, xd, gd, T, n, 1e-6);
        snprintf(what, sizeof what, "rmsnorm_f32 weighted T=%zu n=%zu", T, n);
        kvl_expect_close(what, y, want, T * n, 0, rtol, 0);

        kvl_rmsnorm_f32(y, x, NULL, T, n, 1e-6);
        rmsnorm_oracle(want, xd, NULL, T, n, 1e-6);
        snprintf(what, sizeof what, "rmsnorm_f32 unweighted T=%zu n=%zu", T, n);
        kvl_expect_close(what, y, want, T * n, 0, rtol, 0);
        free(x); free(g); free(y); free(xd); free(gd); free(want);
    }
}
END_TEST

START_TEST(test_rmsnorm_f64_matches_double_oracle)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 12);
    for (size_t c = 0; c < N_SHAPES; c++) {
        const size_t T = SHAPES[c].T, n = SHAPES[c].n;
        double *x = xmalloc(T * n * sizeof *x), *g = xmalloc(n * sizeof *g);
        double *y = xmalloc(T * n * sizeof *y), *want = xmalloc(T * n * sizeof *want);
        kvl_rng_normal_f64(&rng, x, T * n, 3.0);
        for (size_t i = 0; i < n; i++) g[i] = 0.5 + kvl_rng_random(&rng);
        kvl_rmsnorm_f64(y, x, g, T, n, 1e-20);
        rmsnorm_oracle(want, x, g, T, n, 1e-20);
        kvl_expect_close_f64("rmsnorm_f64", y, want, T * n, 0, double_path_rel(n), 0);
        free(x); free(g); free(y); free(want);
    }
}
END_TEST

/* With eps = 0, mean(y²) = mean(x²)/mean(x²) = 1 for any row scale; each float output carries one
 * rounding, so the RMS is 1 to within ONE_FLOAT_ROUNDING (plus the double paths). */
START_TEST(test_unweighted_rmsnorm_output_has_rms_one)
{
    enum { T = 4, n = 1000 };
    const double scales[T] = {1e-3, 1.0, 7.5, 1e3};
    kvl_rng rng;
    kvl_rng_seed(&rng, 13);
    float *x = xmalloc(T * n * sizeof *x), *y = xmalloc(T * n * sizeof *y);
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < n; i++) x[t * n + i] = (float)(scales[t] * kvl_rng_normal(&rng));
    kvl_rmsnorm_f32(y, x, NULL, T, n, 0.0);
    for (size_t t = 0; t < T; t++) {
        double ss = 0.0;
        for (size_t i = 0; i < n; i++) ss += (double)y[t * n + i] * y[t * n + i];
        const double rms = sqrt(ss / n);
        ck_assert_msg(fabs(rms - 1.0) <= ONE_FLOAT_ROUNDING + double_path_rel(n),
                      "row %zu (scale %g): RMS %.12f", t, scales[t], rms);
    }
    free(x); free(y);
}
END_TEST

START_TEST(test_rmsnorm_without_weight_equals_unit_weight)
{
    enum { T = 3, n = 33 };
    kvl_rng rng;
    kvl_rng_seed(&rng, 14);
    float *x = normal_f32(&rng, T * n, 0.0, 2.0), ones[n], y1[T * n], y2[T * n];
    for (size_t i = 0; i < n; i++) ones[i] = 1.0f;
    kvl_rmsnorm_f32(y1, x, NULL, T, n, 1e-6);
    kvl_rmsnorm_f32(y2, x, ones, T, n, 1e-6);
    ck_assert(memcmp(y1, y2, sizeof y1) == 0);
    free(x);
}
END_TEST

START_TEST(test_layernorm_f32_matches_double_oracle)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 15);
    for (size_t c = 0; c < N_SHAPES; c++) {
        const size_t T = SHAPES[c].T, n = SHAPES[c].n;
        /* an offset of 5 with spread 2 makes the mean matter and the variance cancel */
        float *x = normal_f32(&rng, T * n, 5.0, 2.0), *g = uniform_f32(&rng, n, 0.5, 1.5);
        float *b = uniform_f32(&rng, n, -1.0, 1.0), *y = xmalloc(T * n * sizeof *y);
        double *xd = widen(x, T * n), *gd = widen(g, n), *bd = widen(b, n), *want = xmalloc(T * n * sizeof *want);
        kvl_layernorm_f32(y, x, g, b, T, n, 1e-6);
        const double scale = layernorm_oracle(want, xd, gd, bd, T, n, 1e-6);
        char what[64];
        snprintf(what, sizeof what, "layernorm_f32 T=%zu n=%zu", T, n);
        kvl_expect_close(what, y, want, T * n, double_path_rel(n) * scale, ONE_FLOAT_ROUNDING, 0);
        free(x); free(g); free(b); free(y); free(xd); free(gd); free(bd); free(want);
    }
}
END_TEST

START_TEST(test_layernorm_f64_matches_double_oracle)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 16);
    for (size_t c = 0; c < N_SHAPES; c++) {
        const size_t T = SHAPES[c].T, n = SHAPES[c].n;
        double *x = xmalloc(T * n * sizeof *x), *g = xmalloc(n * sizeof *g), *b = xmalloc(n * sizeof *b);
        double *y = xmalloc(T * n * sizeof *y), *want = xmalloc(T * n * sizeof *want);
        kvl_rng_normal_f64(&rng, x, T * n, 2.0);
        for (size_t i = 0; i < T * n; i++) x[i] += 5.0;
        for (size_t i = 0; i < n; i++) { g[i] = 0.5 + kvl_rng_random(&rng); b[i] = kvl_rng_random(&rng) - 0.5; }
        kvl_layernorm_f64(y, x, g, b, T, n, 1e-6);
        const double scale = layernorm_oracle(want, x, g, b, T, n, 1e-6);
        kvl_expect_close_f64("layernorm_f64", y, want, T * n, double_path_rel(n) * scale, 0, 0);
        free(x); free(g); free(b); free(y); free(want);
    }
}
END_TEST

/* Unit weight, zero bias, eps = 0: every row comes out with mean 0 and (biased) variance 1, up to one
 * float rounding per element. Rows sit at OFFSET with spread SPREAD: the double mean then carries an
 * error relative to |OFFSET|, which normalising by the spread magnifies by |OFFSET|/SPREAD. */
#define OFFSET (-40.0)
#define SPREAD 0.25
START_TEST(test_layernorm_output_has_zero_mean_and_unit_variance)
{
    enum { T = 3, n = 501 };
    const double mean_path = double_path_rel(n) * (fabs(OFFSET) / SPREAD + 1.0);
    kvl_rng rng;
    kvl_rng_seed(&rng, 17);
    float *x = normal_f32(&rng, T * n, OFFSET, SPREAD), ones[n], zeros[n], *y = xmalloc(T * n * sizeof *y);
    for (size_t i = 0; i < n; i++) { ones[i] = 1.0f; zeros[i] = 0.0f; }
    kvl_layernorm_f32(y, x, ones, zeros, T, n, 0.0);
    for (size_t t = 0; t < T; t++) {
        double mean = 0.0, mean_abs = 0.0, var = 0.0;
        for (size_t i = 0; i < n; i++) { mean += y[t * n + i]; mean_abs += fabs(y[t * n + i]); }
        mean /= n;
        mean_abs /= n;
        for (size_t i = 0; i < n; i++) var += (y[t * n + i] - mean) * (y[t * n + i] - mean);
        var /= n;
        ck_assert_msg(fabs(mean) <= ONE_FLOAT_ROUNDING * mean_abs + mean_path, "row %zu mean %.3g", t, mean);
        ck_assert_msg(fabs(var - 1.0) <= 2 * ONE_FLOAT_ROUNDING + double_path_rel(n), "row %zu variance %.12f", t, var);
    }
    free(x); free(y);
}
END_TEST

/* Rows are independent: a batch (on the parallel path) equals the rows normalised one call at a time,
 * bit for bit, and y = x in place equals a separate output. */
START_TEST(test_norm_batch_equals_row_by_row_and_in_place)
{
    const size_t T = BIG_T, n = BIG_N;
    kvl_rng rng;
    kvl_rng_seed(&rng, 18);
    float *x = normal_f32(&rng, T * n, 1.0, 2.0), *g = uniform_f32(&rng, n, 0.5, 1.5);
    float *b = uniform_f32(&rng, n, -1.0, 1.0);
    float *batch = xmalloc(T * n * sizeof *batch), *rows = xmalloc(T * n * sizeof *rows);
    float *inplace = xmalloc(T * n * sizeof *inplace);

    kvl_rmsnorm_f32(batch, x, g, T, n, 1e-6);
    for (size_t t = 0; t < T; t++) kvl_rmsnorm_f32(rows + t * n, x + t * n, g, 1, n, 1e-6);
    memcpy(inplace, x, T * n * sizeof *x);
    kvl_rmsnorm_f32(inplace, inplace, g, T, n, 1e-6);
    ck_assert_msg(memcmp(batch, rows, T * n * sizeof *batch) == 0, "rmsnorm batch differs from row by row");
    ck_assert_msg(memcmp(batch, inplace, T * n * sizeof *batch) == 0, "rmsnorm in place differs");

    kvl_layernorm_f32(batch, x, g, b, T, n, 1e-6);
    for (size_t t = 0; t < T; t++) kvl_layernorm_f32(rows + t * n, x + t * n, g, b, 1, n, 1e-6);
    memcpy(inplace, x, T * n * sizeof *x);
    kvl_layernorm_f32(inplace, inplace, g, b, T, n, 1e-6);
    ck_assert_msg(memcmp(batch, rows, T * n * sizeof *batch) == 0, "layernorm batch differs from row by row");
    ck_assert_msg(memcmp(batch, inplace, T * n * sizeof *batch) == 0, "layernorm in place differs");
    free(x); free(g); free(b); free(batch); free(rows); free(inplace);
}
END_TEST

START_TEST(test_norm_of_empty_rows_writes_nothing)
{
    const float x[1] = {2.0f}, g[1] = {1.0f}, b[1] = {0.0f};
    float y[1] = {-7.0f};
    kvl_rmsnorm_f32(y, x, g, 4, 0, 1e-6);
    kvl_layernorm_f32(y, x, g, b, 4, 0, 1e-6);
    kvl_rmsnorm_f32(y, x, g, 0, 1, 1e-6);
    ck_assert(y[0] == -7.0f);
}
END_TEST

/* ---- softmax oracle ------------------------------------------------------------------------------ */

/* want[n] = exp(s_i − μ)/(exp(σ − μ) + Σ_j exp(s_j − μ)), μ = max(σ, max s), −∞ entries skipped;
 * σ = −∞ is plain softmax; no valid entry and no sink gives zeros. Returns p_sink. */
static double softmax_oracle(double *want, const double *s, size_t n, double sigma)
{
    double mu = sigma;
    for (size_t i = 0; i < n; i++) mu = fmax(mu, s[i]);
    if (mu == -INFINITY) {
        for (size_t i = 0; i < n; i++) want[i] = 0.0;
        return 0.0;
    }
    double den = sigma == -INFINITY ? 0.0 : exp(sigma - mu);
    for (size_t i = 0; i < n; i++)
        if (s[i] != -INFINITY) den += exp(s[i] - mu);
    for (size_t i = 0; i < n; i++) want[i] = s[i] == -INFINITY ? 0.0 : exp(s[i] - mu) / den;
    return sigma == -INFINITY ? 0.0 : exp(sigma - mu) / den;
}

/* scores ≈ offset + 8·N(0,1); at offset 1000 exp without the max shift overflows. Every fifth
 * entry (i ≡ 2 mod 5) is masked. */
static float *scores_f32(kvl_rng *rng, size_t n, float offset)
{
    float *s = normal_f32(rng, n, offset, 8.0);
    for (size_t i = 2; i < n; i += 5) s[i] = -INFINITY;
    return s;
}

typedef struct { size_t n; float offset; } row_case;
static const row_case ROWS[] = {{1, 0}, {2, 1000}, {7, 0}, {7, 1000}, {64, 0}, {64, 1000}, {1000, 0}, {1000, 1000}};
#define N_ROWS (sizeof ROWS / sizeof ROWS[0])

/* sink logits relative to the row's offset: far below, inside and above the score range */
static const float SIGMA_REL[] = {-40.0f, -3.0f, 0.5f, 50.0f};
#define N_SIGMAS (sizeof SIGMA_REL / sizeof SIGMA_REL[0])

static double row_sum(const float *p, size_t n)
{
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += p[i];
    return sum;
}

/* ---- softmax tests ------------------------------------------------------------------------------- */

START_TEST(test_softmax_f32_matches_double_oracle)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 21);
    for (size_t r = 0; r < N_ROWS; r++) {
        const size_t n = ROWS[r].n;
        const float off = ROWS[r].offset;
        float *s = scores_f32(&rng, n, off);
        double *sd = widen(s, n), *want = xmalloc(n * sizeof *want);
        softmax_oracle(want, sd, n, -INFINITY);
        kvl_softmax_f32(s, n);
        char what[48];
        snprintf(what, sizeof what, "softmax_f32 n=%zu", n);
        kvl_expect_close(what, s, want, n, 0, TWO_FLOAT_ROUNDINGS + double_path_rel(n), 0);
        free(s); free(sd); free(want);
    }
}
END_TEST

START_TEST(test_softmax_sink_f32_matches_double_oracle)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 22);
    for (size_t r = 0; r < N_ROWS; r++)
        for (size_t k = 0; k < N_SIGMAS; k++) {
            const size_t n = ROWS[r].n;
            const float off = ROWS[r].offset, sigma = off + SIGMA_REL[k];
            float *s = scores_f32(&rng, n, off);
            double *sd = widen(s, n), *want = xmalloc(n * sizeof *want);
            softmax_oracle(want, sd, n, sigma);
            kvl_softmax_sink_f32(s, n, sigma);
            char what[64];
            snprintf(what, sizeof what, "softmax_sink_f32 n=%zu sigma=%g", n, sigma);
            kvl_expect_close(what, s, want, n, 0, TWO_FLOAT_ROUNDINGS + double_path_rel(n), 0);
            free(s); free(sd); free(want);
        }
}
END_TEST

START_TEST(test_softmax_f64_matches_double_oracle)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 23);
    for (size_t r = 0; r < N_ROWS; r++)
        for (size_t k = 0; k <= N_SIGMAS; k++) {
            const size_t n = ROWS[r].n;
            const float off = ROWS[r].offset;
            const double sigma = k < N_SIGMAS ? off + SIGMA_REL[k] : -INFINITY;
            double *s = xmalloc(n * sizeof *s), *want = xmalloc(n * sizeof *want);
            kvl_rng_normal_f64(&rng, s, n, 8.0);
            for (size_t i = 0; i < n; i++) s[i] = i % 5 == 2 ? -INFINITY : s[i] + off;
            softmax_oracle(want, s, n, sigma);
            if (k < N_SIGMAS) kvl_softmax_sink_f64(s, n, sigma);
            else kvl_softmax_f64(s, n);
            kvl_expect_close_f64("softmax_f64 / softmax_sink_f64", s, want, n, 0, double_path_rel(n), 0);
            free(s); free(want);
        }
}
END_TEST

START_TEST(test_softmax_row_sums_to_one)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 24);
    for (size_t r = 0; r < N_ROWS; r++) {
        const size_t n = ROWS[r].n;
        const float off = ROWS[r].offset;
        float *s = scores_f32(&rng, n, off);
        kvl_softmax_f32(s, n);
        const double sum = row_sum(s, n);
        ck_assert_msg(fabs(sum - 1.0) <= TWO_FLOAT_ROUNDINGS + double_path_rel(n), "n=%zu: sum %.12f", n, sum);
        free(s);
    }
}
END_TEST

/* The sink takes p_sink = exp(σ − μ)/denominator and gives back no value: the row sums to 1 − p_sink. */
START_TEST(test_sink_weights_sum_to_one_minus_p_sink)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 25);
    for (size_t r = 0; r < N_ROWS; r++)
        for (size_t k = 0; k < N_SIGMAS; k++) {
            const size_t n = ROWS[r].n;
            const float off = ROWS[r].offset, sigma = off + SIGMA_REL[k];
            float *s = scores_f32(&rng, n, off);
            double *sd = widen(s, n), *want = xmalloc(n * sizeof *want);
            const double p_sink = softmax_oracle(want, sd, n, sigma);
            kvl_softmax_sink_f32(s, n, sigma);
            const double sum = row_sum(s, n);
            ck_assert_msg(fabs(sum - (1.0 - p_sink)) <= TWO_FLOAT_ROUNDINGS + double_path_rel(n),
                          "n=%zu sigma=%g: sum %.12f, 1 - p_sink %.12f", n, sigma, sum, 1.0 - p_sink);
            free(s); free(sd); free(want);
        }
}
END_TEST

/* σ = −∞ (and a σ so low that exp(σ − μ) is 0 in double) leaves the plain softmax, bit for bit. */
START_TEST(test_sink_at_minus_infinity_recovers_plain_softmax_exactly)
{
    const float sigmas[] = {-INFINITY, -1e30f};
    kvl_rng rng;
    kvl_rng_seed(&rng, 26);
    for (size_t r = 0; r < N_ROWS; r++)
        for (size_t k = 0; k < 2; k++) {
            const size_t n = ROWS[r].n;
            const float off = ROWS[r].offset;
            float *plain = scores_f32(&rng, n, off), *sink = xmalloc(n * sizeof *sink);
            memcpy(sink, plain, n * sizeof *sink);
            kvl_softmax_f32(plain, n);
            kvl_softmax_sink_f32(sink, n, sigmas[k]);
            ck_assert_msg(memcmp(plain, sink, n * sizeof *sink) == 0, "n=%zu sigma=%g", n, sigmas[k]);

            double *plain_d = xmalloc(n * sizeof *plain_d), *sink_d = xmalloc(n * sizeof *sink_d);
            kvl_rng_normal_f64(&rng, plain_d, n, 5.0);
            memcpy(sink_d, plain_d, n * sizeof *sink_d);
            kvl_softmax_f64(plain_d, n);
            kvl_softmax_sink_f64(sink_d, n, sigmas[k]);
            ck_assert_msg(memcmp(plain_d, sink_d, n * sizeof *sink_d) == 0, "f64 n=%zu sigma=%g", n, sigmas[k]);
            free(plain); free(sink); free(plain_d); free(sink_d);
        }
}
END_TEST

/* A masked (−∞) entry gets exactly 0 and the rest equal the softmax of the valid entries alone. */
START_TEST(test_masked_row_equals_softmax_of_its_valid_entries)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 27);
    for (size_t r = 0; r < N_ROWS; r++)
        for (size_t k = 0; k <= N_SIGMAS; k++) {
            const size_t n = ROWS[r].n;
            const float off = ROWS[r].offset, sigma = off + SIGMA_REL[k % N_SIGMAS];
            float *s = scores_f32(&rng, n, off), *valid = xmalloc(n * sizeof *valid);
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                if (s[i] != -INFINITY) valid[m++] = s[i];
            if (k < N_SIGMAS) {
                kvl_softmax_sink_f32(s, n, sigma);
                kvl_softmax_sink_f32(valid, m, sigma);
            } else {
                kvl_softmax_f32(s, n);
                kvl_softmax_f32(valid, m);
            }
            for (size_t i = 0, j = 0; i < n; i++) {
                if (i % 5 == 2) {
                    ck_assert_msg(s[i] == 0.0f && !signbit(s[i]), "n=%zu [%zu] masked: %g", n, i, s[i]);
                    continue;
                }
                ck_assert_msg(s[i] == valid[j], "n=%zu [%zu]: %.9g vs %.9g", n, i, s[i], valid[j]);
                j++;
            }
            free(s); free(valid);
        }
}
END_TEST

/* No valid entry: zeros, never NaN, with no sink, a finite sink and σ = −∞ (ref/core/softmax.h). */
START_TEST(test_row_without_valid_entry_is_zero_with_and_without_sink)
{
    enum { n = 6 };
    const float sigmas[] = {0.3f, -50.0f, 1e4f, -INFINITY};
    float s[n];
    double d[n];
    const double zeros[n] = {0};
    for (size_t i = 0; i < n; i++) s[i] = -INFINITY;
    kvl_softmax_f32(s, n);
    kvl_expect_close("plain, all masked", s, zeros, n, 0, 0, 0);
    for (size_t k = 0; k < 4; k++) {
        for (size_t i = 0; i < n; i++) { s[i] = -INFINITY; d[i] = -INFINITY; }
        kvl_softmax_sink_f32(s, n, sigmas[k]);
        kvl_softmax_sink_f64(d, n, sigmas[k]);
        kvl_expect_close("sink, all masked", s, zeros, n, 0, 0, 0);
        kvl_expect_close_f64("sink f64, all masked", d, zeros, n, 0, 0, 0);
    }
    for (size_t i = 0; i < n; i++) d[i] = -INFINITY;
    kvl_softmax_f64(d, n);
    kvl_expect_close_f64("plain f64, all masked", d, zeros, n, 0, 0, 0);
    kvl_softmax_f32(s, 0);
    kvl_softmax_sink_f32(s, 0, 1.0f);
}
END_TEST

/* A NaN score is not a masked entry: it turns the whole row NaN, even among −∞ entries. */
START_TEST(test_nan_score_makes_the_row_nan)
{
    float a[4] = {1.0f, NAN, 2.0f, -INFINITY}, b[3] = {-INFINITY, NAN, -INFINITY}, c[3] = {-INFINITY, NAN, 0.0f};
    kvl_softmax_f32(a, 4);
    kvl_softmax_f32(b, 3);
    kvl_softmax_sink_f32(c, 3, 0.5f);
    for (size_t i = 0; i < 4; i++) ck_assert_msg(isnan(a[i]), "a[%zu] = %g", i, a[i]);
    for (size_t i = 0; i < 3; i++) ck_assert_msg(isnan(b[i]) && isnan(c[i]), "b/c[%zu] = %g %g", i, b[i], c[i]);
}
END_TEST

/* ---- the tiled softmax's exponentials --------------------------------------------------------------- */

/* |got − e^x| in units in the last place of e^x as a float, for x ≥ −87.3, where e^x is a normal float;
 * +∞ for any other x, so that a caller's bound fails on it. No Check assertion inside: Check records the
 * place of every assertion with a write to a file, and the sweep below calls this 16 million times. */
static double exp_ulps(float x, float got)
{
    if (!(x >= -87.3f)) return INFINITY;
    const double want = exp((double)x);
    return fabs((double)got - want) / ldexp(1.0, ilogb(want) - 23);
}

/* Every 97th float from −0 down to −87.3, which samples every binade of small and large |x| alike, and
 * 2^22 evenly spaced points of [−87.3, 88]: each within KVL_EXP_F32_ULP of e^x. */
START_TEST(test_exp_f32_is_within_its_ulp_bound_over_its_range)
{
    double worst = 0.0;
    float worst_x = 0.0f;
    const float lowest = -87.3f;
    uint32_t lowest_bits;
    memcpy(&lowest_bits, &lowest, sizeof lowest_bits);
    for (uint32_t b = 0x80000000u; b <= lowest_bits; b += 97) {
        float x;
        memcpy(&x, &b, sizeof x);
        const double u = exp_ulps(x, kvl_exp_f32(x));
        if (u > worst) worst = u, worst_x = x;
    }
    const size_t n = (size_t)1 << 22;
    for (size_t i = 0; i <= n; i++) {
        const float x = (float)(-87.3 + (88.0 + 87.3) * (double)i / (double)n);
        const double u = exp_ulps(x, kvl_exp_f32(x));
        if (u > worst) worst = u, worst_x = x;
    }
    ck_assert_msg(worst <= KVL_EXP_F32_ULP, "e^%.9g is %.3f ulp off", (double)worst_x, worst);
}
END_TEST

START_TEST(test_exp_f32_special_values)
{
    ck_assert_float_eq(kvl_exp_f32(0.0f), 1.0f);
    ck_assert_float_eq(kvl_exp_f32(-0.0f), 1.0f);
    ck_assert_float_eq(kvl_exp_f32(-INFINITY), 0.0f);
    ck_assert_float_eq(kvl_exp_f32(-87.31f), 0.0f);
    ck_assert_float_eq(kvl_exp_f32(-1000.0f), 0.0f);
    ck_assert_msg(kvl_exp_f32(-87.3f) >= FLT_MIN, "e^-87.3 = %g", (double)kvl_exp_f32(-87.3f));
    ck_assert_msg(isnan(kvl_exp_f32(NAN)), "e^NaN = %g", (double)kvl_exp_f32(NAN));
}
END_TEST

/* A row of 1,003 scores (three past a multiple of any vector width; every fifth masked) against its
 * running max: each weight e^{s − m} within the exp's bound of the double value, a masked score's 0, and
 * the returned sum within γ_n of the double sum of the weights returned. A NaN score makes its weight
 * and the sum NaN. */
START_TEST(test_softmax_exp_f32_gives_each_weight_and_their_sum)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 29);
    const size_t n = 1003;
    float *s = scores_f32(&rng, n, 0.0f), *x = xmalloc(n * sizeof *x);
    float m = -INFINITY;
    for (size_t j = 0; j < n; j++) m = s[j] > m ? s[j] : m;
    memcpy(x, s, n * sizeof *x);
    const float sum = kvl_softmax_exp_f32(s, n, m);
    double want_sum = 0.0;
    for (size_t j = 0; j < n; j++) {
        want_sum += s[j];
        if (x[j] == -INFINITY) ck_assert_float_eq(s[j], 0.0f);
        else ck_assert_msg(exp_ulps(x[j] - m, s[j]) <= KVL_EXP_F32_ULP, "weight %zu: e^(%g) = %g", j,
                           (double)(x[j] - m), (double)s[j]);
    }
    ck_assert_msg(fabs((double)sum - want_sum) <= (double)n * ONE_FLOAT_ROUNDING * want_sum, "sum %g, want %g",
                  (double)sum, want_sum);
    memcpy(s, x, n * sizeof *s);
    s[500] = NAN;
    ck_assert_msg(isnan(kvl_softmax_exp_f32(s, n, m)) && isnan(s[500]), "a NaN score gave a sum %g", (double)s[500]);
    free(s);
    free(x);
}
END_TEST

/* The rows form, 8 rows of 67 scores (one with a NaN) in one call: each row the single-row form's weights
 * and sum bit for bit, and a row shifted by +∞ (a head with nothing visible yet) all zeros, its sum 0. */
START_TEST(test_softmax_exp_rows_f32_is_the_row_form_row_by_row)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 31);
    const size_t R = 8, n = 67;
    float *s = scores_f32(&rng, R * n, 0.0f), *want = xmalloc(R * n * sizeof *want);
    s[2 * n + 9] = NAN;
    float m[8], sum[8], want_sum[8];
    for (size_t r = 0; r < R; r++) {
        m[r] = -INFINITY;
        for (size_t j = 0; j < n; j++) m[r] = s[r * n + j] > m[r] ? s[r * n + j] : m[r];
    }
    m[5] = INFINITY;
    memcpy(want, s, R * n * sizeof *want);
    for (size_t r = 0; r < R; r++)
        if (r != 5) want_sum[r] = kvl_softmax_exp_f32(want + r * n, n, m[r]);
    kvl_softmax_exp_rows_f32(s, R, n, m, sum);
    for (size_t r = 0; r < R; r++) {
        if (r == 5) {
            ck_assert_float_eq(sum[r], 0.0f);
            for (size_t j = 0; j < n; j++) ck_assert_float_eq(s[r * n + j], 0.0f);
            continue;
        }
        ck_assert_msg(memcmp(s + r * n, want + r * n, n * sizeof *s) == 0, "row %zu differs from the row form", r);
        ck_assert_msg(r == 2 ? isnan(sum[r]) : sum[r] == want_sum[r], "row %zu: sum %g, want %g", r, (double)sum[r],
                      (double)want_sum[r]);
    }
    free(s);
    free(want);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_norm_softmax");
    TCase *norm = tcase_create("norm");
    tcase_add_test(norm, test_rmsnorm_f32_matches_double_oracle);
    tcase_add_test(norm, test_rmsnorm_f64_matches_double_oracle);
    tcase_add_test(norm, test_unweighted_rmsnorm_output_has_rms_one);
    tcase_add_test(norm, test_rmsnorm_without_weight_equals_unit_weight);
    tcase_add_test(norm, test_layernorm_f32_matches_double_oracle);
    tcase_add_test(norm, test_layernorm_f64_matches_double_oracle);
    tcase_add_test(norm, test_layernorm_output_has_zero_mean_and_unit_variance);
    tcase_add_test(norm, test_norm_batch_equals_row_by_row_and_in_place);
    tcase_add_test(norm, test_norm_of_empty_rows_writes_nothing);
    suite_add_tcase(s, norm);
    TCase *softmax = tcase_create("softmax");
    tcase_add_test(softmax, test_softmax_f32_matches_double_oracle);
    tcase_add_test(softmax, test_softmax_sink_f32_matches_double_oracle);
    tcase_add_test(softmax, test_softmax_f64_matches_double_oracle);
    tcase_add_test(softmax, test_softmax_row_sums_to_one);
    tcase_add_test(softmax, test_sink_weights_sum_to_one_minus_p_sink);
    tcase_add_test(softmax, test_sink_at_minus_infinity_recovers_plain_softmax_exactly);
    tcase_add_test(softmax, test_masked_row_equals_softmax_of_its_valid_entries);
    tcase_add_test(softmax, test_row_without_valid_entry_is_zero_with_and_without_sink);
    tcase_add_test(softmax, test_nan_score_makes_the_row_nan);
    tcase_add_test(softmax, test_exp_f32_is_within_its_ulp_bound_over_its_range);
    tcase_add_test(softmax, test_exp_f32_special_values);
    tcase_add_test(softmax, test_softmax_exp_f32_gives_each_weight_and_their_sum);
    tcase_add_test(softmax, test_softmax_exp_rows_f32_is_the_row_form_row_by_row);
    suite_add_tcase(s, softmax);
    return s;
}
