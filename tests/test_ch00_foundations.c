/* Chapter 0's properties, each against its definition in double-precision loops: a RoPE score
 * depends only on the offset between query and key (the closed form Re Σ q_i k̄_i e^{iΔθ_i}); the
 * half-split pairing is the interleaved one after a permutation of the channels; YaRN's ramp starts
 * and ends where the corr(n) formula puts it, with θ_i kept below and θ_i/s above; the mscale and
 * the softmax scale are 0.1·mscale·ln s + 1 and m²/√d_qk; RMSNorm ignores the input's scale; the
 * online softmax over any number of rows, past one tile, and the combine of two partial states,
 * equal the one-pass softmax. Then `rope_check`: the numbers it prints are the definitions', it
 * refuses bad input by name, and the chapter text quotes what it and nb_00 print. */
#include "common.h"
#include "config.h"
#include "grouped.h"
#include "norm.h"
#include "rng.h"
#include "rope.h"
#include "softmax.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP 65536
#define DR 64

static char out[CAP], err[CAP];

/* V3's rotary settings, as chapters/00_foundations/README.md states them */
static const double BASE = 10000, FACTOR = 40, L_ORIG = 4096, BETA_FAST = 32, BETA_SLOW = 1;

static void v3_table(kvl_rope *r)
{
    ck_assert_int_eq(kvl_rope_init_yarn(r, DR, BASE, FACTOR, L_ORIG, BETA_FAST, BETA_SLOW), KVL_OK);
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* ---- RoPE -------------------------------------------------------------------------------------- */

/* Re Σ_i q_i conj(k_i) e^{iΔθ_i} with pair i = (x[2i], x[2i+1]) as x[2i] + i·x[2i+1] */
static double closed_form(const double *q, const double *k, const kvl_rope *r, double delta)
{
    double s = 0;
    for (size_t i = 0; i < r->Dr / 2; i++) {
        const double qr = q[2 * i], qi = q[2 * i + 1], kr = k[2 * i], ki = k[2 * i + 1];
        const double re = qr * kr + qi * ki, im = qi * kr - qr * ki; /* q · conj(k) */
        const double a = delta * (double)r->theta[i];
        s += re * cos(a) - im * sin(a);
    }
    return s;
}

START_TEST(test_score_depends_only_on_the_offset)
{
    kvl_rope tables[2];
    ck_assert_int_eq(kvl_rope_init(&tables[0], DR, BASE), KVL_OK);
    v3_table(&tables[1]);
    static const int64_t deltas[] = {0, 1, 5, 100, 4095, 163839};
    static const int64_t starts[] = {0, 1, 4096, 65536, 1000000};
    kvl_rng rng;
    kvl_rng_seed(&rng, 7);
    for (int t = 0; t < 2; t++)
        for (size_t d = 0; d < sizeof deltas / sizeof *deltas; d++) {
            double q[DR], k[DR], a[DR], b[DR];
            kvl_rng_normal_f64(&rng, q, DR, 1);
            kvl_rng_normal_f64(&rng, k, DR, 1);
            const double want = closed_form(q, k, &tables[t], (double)deltas[d]);
            const double size = sqrt(dot(q, q, DR) * dot(k, k, DR));
            for (size_t s = 0; s < sizeof starts / sizeof *starts; s++) {
                const int64_t p = starts[s] + deltas[d];
                memcpy(a, q, sizeof a);
                memcpy(b, k, sizeof b);
                kvl_rope_rotate_interleaved_f64(a, &tables[t], p);
                kvl_rope_rotate_interleaved_f64(b, &tables[t], p - deltas[d]);
                /* angles of up to 1.2·10^6 rad carry about 10^-10 rad of rounding each */
                ck_assert_msg(fabs(dot(a, b, DR) - want) <= 1e-9 * size,
                              "table %d, delta %lld, p %lld: score %.15g, closed form %.15g", t,
                              (long long)deltas[d], (long long)p, dot(a, b, DR), want);
            }
        }
}
END_TEST

/* y = P x: channel 2i to i, 2i+1 to i + D/2 */
static void permute(double *y, const double *x)
{
    for (size_t i = 0; i < DR / 2; i++) y[i] = x[2 * i], y[i + DR / 2] = x[2 * i + 1];
}

START_TEST(test_pairings_agree_up_to_the_permutation)
{
    kvl_rope r;
    v3_table(&r);
    kvl_rng rng;
    kvl_rng_seed(&rng, 8);
    static const int64_t positions[] = {0, 3, 4097, 163840, 1000003};
    for (size_t n = 0; n < sizeof positions / sizeof *positions; n++) {
        double x[DR], px[DR], ix[DR], pix[DR], hx[DR];
        float xf[DR], pxf[DR];
        kvl_rng_normal_f64(&rng, x, DR, 1);
        permute(px, x);
        memcpy(ix, x, sizeof x);
        memcpy(hx, x, sizeof x);
        kvl_rope_rotate_interleaved_f64(ix, &r, positions[n]);
        kvl_rope_rotate_half_split_f64(px, &r, positions[n]);
        kvl_rope_rotate_half_split_f64(hx, &r, positions[n]);
        permute(pix, ix);
        double apart = 0;
        for (size_t i = 0; i < DR; i++) {
            /* the same cos, sin and products on the same pairs: bit for bit */
            ck_assert_msg(px[i] == pix[i], "p %lld, channel %zu: %.17g against %.17g",
                          (long long)positions[n], i, px[i], pix[i]);
            apart = fmax(apart, fabs(hx[i] - ix[i]));
            xf[i] = (float)x[i];
        }
        /* without the permutation the two turn different channels together */
        if (positions[n] != 0) ck_assert_msg(apart > 1e-3, "pairings differ by only %g", apart);
        for (size_t i = 0; i < DR / 2; i++) pxf[i] = xf[2 * i], pxf[i + DR / 2] = xf[2 * i + 1];
        kvl_rope_rotate_interleaved(xf, &r, positions[n]);
        kvl_rope_rotate_half_split(pxf, &r, positions[n]);
        for (size_t i = 0; i < DR / 2; i++)
            ck_assert(pxf[i] == xf[2 * i] && pxf[i + DR / 2] == xf[2 * i + 1]);
    }
}
END_TEST

/* ---- YaRN -------------------------------------------------------------------------------------- */

typedef struct {
    size_t D;
    double base, s, L;
    int lo, hi;   /* the ramp's ends by hand: ⌊corr(32)⌋, ⌈corr(1)⌉ */
} yarn_case;

/* the turns of pair i over L */
static double turns(const yarn_case *c, size_t i)
{
    return c->L * pow(c->base, -2.0 * (double)i / (double)c->D) / (2 * M_PI);
}

START_TEST(test_yarn_ramp_ends_follow_the_definition)
{
    /* V3, and the chapter's exercises 2, 3 and 4 */
    static const yarn_case cases[] = {{64, 10000, 40, 4096, 10, 23},
                                      {64, 10000, 40, 8192, 12, 25},
                                      {32, 10000, 40, 4096, 5, 12},
                                      {64, 500000, 40, 4096, 7, 16}};
    for (size_t n = 0; n < sizeof cases / sizeof *cases; n++) {
        const yarn_case *c = &cases[n];
        double lo, hi;
        float theta[DR / 2];
        ck_assert_int_eq(kvl_yarn_range(&lo, &hi, c->D, c->base, c->L, BETA_FAST, BETA_SLOW), KVL_OK);
        ck_assert_msg(lo == c->lo && hi == c->hi, "case %zu: ramp %g..%g, expected %d..%d", n, lo, hi,
                      c->lo, c->hi);
        /* lo is the last pair turning at least β_fast times, hi the first turning at most β_slow */
        ck_assert(turns(c, (size_t)lo) >= BETA_FAST && turns(c, (size_t)lo + 1) < BETA_FAST);
        ck_assert(turns(c, (size_t)hi) <= BETA_SLOW && turns(c, (size_t)hi - 1) > BETA_SLOW);
        ck_assert_int_eq(kvl_yarn_freqs(theta, c->D, c->base, c->s, c->L, BETA_FAST, BETA_SLOW), KVL_OK);
        for (size_t i = 0; i < c->D / 2; i++) {
            const double plain = pow(c->base, -2.0 * (double)i / (double)c->D);
            const double g = fmin(fmax(((double)i - lo) / (hi - lo), 0), 1);
            const double want = (1 - g) * plain + g * plain / c->s;
            /* float32 table, blended in float32: a few roundings */
            ck_assert_msg(fabs(theta[i] - want) <= 1e-6 * want, "case %zu pair %zu: %.9g, want %.9g", n,
                          i, (double)theta[i], want);
            if ((int)i <= c->lo) ck_assert(fabs(theta[i] - plain) <= 1e-6 * plain);
            if ((int)i >= c->hi) ck_assert(fabs(theta[i] - plain / c->s) <= 1e-6 * plain / c->s);
            if ((int)i > c->lo && (int)i < c->hi) ck_assert(theta[i] < plain && theta[i] > plain / c->s);
        }
    }
}
END_TEST

START_TEST(test_mscale_and_softmax_scale_follow_the_definition)
{
    kvl_model m;
    ck_assert_int_eq(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v3.json")), KVL_OK);
    ck_assert(m.rope.theta == BASE && m.rope.factor == FACTOR && m.rope.original_len == L_ORIG);
    ck_assert(m.rope.beta_fast == BETA_FAST && m.rope.beta_slow == BETA_SLOW && m.rope.mscale == 1);
    ck_assert(m.rope.interleaved && m.qk_rope_head_dim == DR && m.kv_lora_rank == 512);
    const size_t d_qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    kvl_model_free(&m);
    const double want = 0.1 * log(FACTOR) + 1;
    ck_assert_double_eq_tol(kvl_yarn_mscale(FACTOR, 1), want, 1e-15);
    ck_assert_double_eq_tol(kvl_yarn_mscale(FACTOR, 0.707), 0.1 * 0.707 * log(FACTOR) + 1, 1e-15);
    ck_assert_double_eq(kvl_yarn_mscale(1, 1), 1);
    ck_assert_double_eq_tol(kvl_yarn_softmax_scale(d_qk, FACTOR, 1), want * want / sqrt(192.0), 1e-15);
}
END_TEST

/* ---- RMSNorm ----------------------------------------------------------------------------------- */

START_TEST(test_rmsnorm_is_the_definition_and_ignores_the_scale)
{
    enum { N = 512, T = 3 };
    double x[T][N], g[N], y[T][N], ones[N], u[N], big[N], yb[N];
    kvl_rng rng;
    kvl_rng_seed(&rng, 9);
    kvl_rng_normal_f64(&rng, &x[0][0], T * N, 2);
    kvl_rng_normal_f64(&rng, g, N, 1);
    kvl_rmsnorm_f64(&y[0][0], &x[0][0], g, T, N, 1e-6);
    for (size_t t = 0; t < T; t++) {
        const double r = 1 / sqrt(dot(x[t], x[t], N) / N + 1e-6);
        for (size_t i = 0; i < N; i++) ck_assert(fabs(y[t][i] - g[i] * x[t][i] * r) <= 1e-12);
    }
    for (size_t i = 0; i < N; i++) ones[i] = 1, big[i] = 1e4 * x[0][i];
    kvl_rmsnorm_f64(u, x[0], ones, 1, N, 0);
    kvl_rmsnorm_f64(yb, big, ones, 1, N, 0);
    ck_assert_double_eq_tol(dot(u, u, N), N, 1e-9);
    for (size_t i = 0; i < N; i++) {
        ck_assert(fabs(u[i]) <= sqrt((double)N));
        ck_assert_double_eq_tol(yb[i], u[i], 1e-12);
    }
}
END_TEST

/* ---- the online softmax ------------------------------------------------------------------------ */

/* o[Dv] = Σ_j softmax(s)_j v_j, the maximum subtracted first; −∞ scores weigh nothing */
static void one_pass(double *o, const float *s, const float *V, size_t n, size_t Dv)
{
    double mx = -INFINITY, l = 0;
    for (size_t j = 0; j < n; j++) mx = fmax(mx, s[j]);
    for (size_t j = 0; j < n; j++) l += exp(s[j] - mx);
    for (size_t i = 0; i < Dv; i++) {
        o[i] = 0;
        for (size_t j = 0; j < n; j++) o[i] += exp(s[j] - mx) / l * V[j * Dv + i];
    }
}

typedef struct {
    double m, l, a[16];
} state;

static void fold(state *st, double s, const float *v, size_t Dv)
{
    const double m = fmax(st->m, s);
    const double alpha = st->m == -INFINITY ? 0 : exp(st->m - m), p = s == -INFINITY ? 0 : exp(s - m);
    st->l = alpha * st->l + p;
    for (size_t i = 0; i < Dv; i++) st->a[i] = alpha * st->a[i] + p * v[i];
    st->m = m;
}

static void combine(state *x, const state *y, size_t Dv)
{
    const double m = fmax(x->m, y->m);
    const double ex = x->m == -INFINITY ? 0 : exp(x->m - m), ey = y->m == -INFINITY ? 0 : exp(y->m - m);
    x->l = x->l * ex + y->l * ey;
    for (size_t i = 0; i < Dv; i++) x->a[i] = x->a[i] * ex + y->a[i] * ey;
    x->m = m;
}

START_TEST(test_online_softmax_equals_one_pass_past_a_tile)
{
    enum { DV = 16, MAX_N = 4097 };
    static float s[MAX_N], V[MAX_N * DV];
    static const size_t sizes[] = {1, 63, 64, 65, 1000, 4097};
    kvl_rng rng;
    kvl_rng_seed(&rng, 10);
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        const size_t n = sizes[k];
        kvl_rng_uniform_f32(&rng, s, n, 0, 300); /* e^300 is far past float's range */
        kvl_rng_uniform_f32(&rng, V, n * DV, -1, 1);
        for (size_t j = 3; j < n; j += 7) s[j] = -INFINITY; /* masked rows */
        double want[DV];
        one_pass(want, s, V, n, DV);
        kvl_online st;
        float acc[DV], o[DV];
        kvl_online_start(&st, acc, DV, -INFINITY);
        for (size_t j = 0; j < n; j++) kvl_online_step(&st, acc, s[j], V + j * DV, DV);
        kvl_online_finish(o, &st, acc, DV);
        /* the accumulator is float32 over up to 4,097 rows */
        for (size_t i = 0; i < DV; i++)
            ck_assert_msg(fabs(o[i] - want[i]) <= 1e-5, "n %zu channel %zu: %g, want %g", n, i,
                          (double)o[i], want[i]);
        for (size_t cut = 0; cut <= n; cut += n / 3 + 1) { /* split anywhere, an empty side too */
            state a = {-INFINITY, 0, {0}}, b = {-INFINITY, 0, {0}};
            for (size_t j = 0; j < n; j++) fold(j < cut ? &a : &b, s[j], V + j * DV, DV);
            combine(&a, &b, DV);
            for (size_t i = 0; i < DV; i++) ck_assert(fabs(a.a[i] / a.l - want[i]) <= 1e-12);
        }
    }
}
END_TEST

/* ---- rope_check -------------------------------------------------------------------------------- */

START_TEST(test_rope_check_prints_the_definitions)
{
    char lines[6][96];
    const double m = 0.1 * log(FACTOR) + 1;
    snprintf(lines[0], sizeof lines[0], "ramp lo = %d, hi = %d", 10, 23);
    snprintf(lines[1], sizeof lines[1], "mscale m = %.6f", m);
    snprintf(lines[2], sizeof lines[2], "softmax scale = %.7f", m * m / sqrt(192.0));
    snprintf(lines[3], sizeof lines[3], "slowest wavelength = %s positions (pair 31)",
             KVL_GROUPED(2 * M_PI * pow(BASE, 62.0 / 64)));
    snprintf(lines[4], sizeof lines[4], "cache row = %s B per layer", KVL_GROUPED((512 + 64) * 2));
    snprintf(lines[5], sizeof lines[5], "the rotary key 128 B, a share of %.1f%%", 100.0 * 128 / 1152);
    const char *const want[] = {lines[0], lines[1], lines[2], lines[3], lines[4], lines[5],
                                "max |diff| = 0\n"};
    kvl_expect_prints("rope_check", want, sizeof want / sizeof *want, NULL);

    /* the six scores at offset 1,000 are one number */
    ck_assert_int_eq(kvl_run("rope_check --delta 1000", NULL, out, CAP, err, CAP), 0);
    const char *at = strstr(out, "q(p) . k(p - delta)\n");
    ck_assert(at != NULL);
    char first[64] = "";
    at = strchr(at, '\n') + 1;
    for (int r = 0; r < 6; r++, at = strchr(at, '\n') + 1) {
        char pos[32], digits[32], score[64];
        ck_assert_int_eq(sscanf(at, "%31s %63s", pos, score), 2);
        size_t n = 0;
        for (const char *c = pos; *c; c++)
            if (*c != ',') digits[n++] = *c;
        digits[n] = 0;
        ck_assert(atoll(digits) >= 1000);
        if (r == 0) snprintf(first, sizeof first, "%s", score);
        ck_assert_str_eq(score, first);
    }
}
END_TEST

START_TEST(test_rope_check_refuses_bad_input_by_name)
{
    kvl_expect_refused("rope_check --delta -1", "--delta must be an integer in [0, 1000000]: -1", NULL);
    kvl_expect_refused("rope_check --delta 1000001", "--delta must be an integer in [0, 1000000]: 1000001",
                       NULL);
    kvl_expect_refused("rope_check --delta 5x", "--delta", NULL);
    kvl_expect_refused("rope_check --frequencies", "--frequencies", NULL);
    kvl_expect_refused("rope_check --config /nonexistent/v3.json", "/nonexistent/v3.json", NULL);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rope_check --config %s", kvl_path("ref/configs/deepseek-v4-flash.json"));
    kvl_expect_refused(cmd, "generation V4", NULL);
    ck_assert_int_eq(kvl_run("rope_check --help", NULL, out, CAP, err, CAP), 0);
    ck_assert(strstr(out, "usage: rope_check") && !*err);
}
END_TEST

/* What chapters/00_foundations/README.md quotes, and the program line that prints it. */
static const struct {
    const char *quoted, *command, *printed;
} QUOTES[] = {
    {"128 of 1,152 bytes per layer, 11.1%", "rope_check", "the rotary key 128 B, a share of 11.1%"},
    {"once every 47,117 positions", "rope_check", "slowest wavelength = 47,117 positions"},
    {"V3: 1.368888, 0.1352338", "rope_check", "softmax scale = 0.1352338"},
    {"192^−½·1.368888² = 0.1352338, 1.874× the plain 1/√192", "nb_00",
     "scale = m^2 / sqrt(192) = 0.1352338 (kvl_yarn_softmax_scale 0.1352338); 1/sqrt(192) = "
     "0.0721688, so 1.874x"},
    {"lo = 10 and\n   hi = 23", "rope_check", "ramp lo = 10, hi = 23"},
    {"(⌊10.47⌋ = 10, ⌈22.51⌉ = 23)", "nb_00", "corr(beta_fast) = 10.472 -> lo = 10; corr(beta_slow) = 22.513 -> hi = 23"},
    {"pair 10 (36.7 turns) and pair 23 (0.87 turns)", "rope_check", "  10  5.623413e-02         111.7      36.66"},
    {"pair 10 (36.7 turns) and pair 23 (0.87 turns)", "rope_check", "  23  1.333521e-03       4,711.7       0.87"},
    {"× 61 layers = 70,272 B per token", "nb_00", "x 61 layers = 70,272 B per token"},
    {"5, 1,005, 4,101, 65,541, 131,077 and\n   1,000,005", "rope_check", "   1,000,005  +"},
    {"√512 = 22.627", "nb_00", "<= sqrt(n) = 22.627"},
};

/* s with every run of white space made one space, in place */
static char *squeeze(char *s)
{
    char *o = s;
    for (char *p = s; *p; p++)
        if (*p != ' ' && *p != '\n') *o++ = *p;
        else if (o == s || o[-1] != ' ') *o++ = ' ';
    *o = '\0';
    return s;
}

START_TEST(test_the_chapter_quotes_what_the_programs_print)
{
    char *text = kvl_read_text(kvl_path("chapters/00_foundations/README.md"));
    ck_assert(text != NULL);
    squeeze(text);
    for (size_t i = 0; i < sizeof QUOTES / sizeof *QUOTES; i++) {
        char quoted[256];
        snprintf(quoted, sizeof quoted, "%s", QUOTES[i].quoted);
        ck_assert_msg(strstr(text, squeeze(quoted)), "the chapter no longer says \"%s\"", QUOTES[i].quoted);
        ck_assert_int_eq(kvl_run(QUOTES[i].command, NULL, out, CAP, err, CAP), 0);
        ck_assert_msg(strstr(out, QUOTES[i].printed), "`%s` no longer prints \"%s\"", QUOTES[i].command,
                      QUOTES[i].printed);
    }
    free(text);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch00_foundations");
    TCase *def = tcase_create("definitions");
    tcase_add_test(def, test_score_depends_only_on_the_offset);
    tcase_add_test(def, test_pairings_agree_up_to_the_permutation);
    tcase_add_test(def, test_yarn_ramp_ends_follow_the_definition);
    tcase_add_test(def, test_mscale_and_softmax_scale_follow_the_definition);
    tcase_add_test(def, test_rmsnorm_is_the_definition_and_ignores_the_scale);
    tcase_add_test(def, test_online_softmax_equals_one_pass_past_a_tile);
    suite_add_tcase(s, def);
    TCase *prog = tcase_create("program");
    tcase_add_test(prog, test_rope_check_prints_the_definitions);
    tcase_add_test(prog, test_rope_check_refuses_bad_input_by_name);
    tcase_add_test(prog, test_the_chapter_quotes_what_the_programs_print);
    suite_add_tcase(s, prog);
    return s;
}
