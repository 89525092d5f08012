/* Chapter 0's grader: make lab-00 (your files) or make lab-00 SOLUTION=1 (the worked solutions).
 * Each lab is checked element by element against ref/core: the rotation and the YaRN table of
 * ref/core/rope.h, and the online softmax of ref/core/softmax.h, the definitions every later
 * chapter's modules call. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"
#include "lab.h"
#include "rng.h"
#include "rope.h"
#include "softmax.h"

/* ref rounds cos and sin to float and fuses one multiply-add: a few 1e-8 of the pair; the wrong
 * pairing, a float angle or a swapped sine move an element by 1e-3 or more */
#define ROPE_ATOL 1e-6
#define ROPE_RTOL 1e-6
/* ref's table is float32 (6e-8 relative) blended in float; a ramp end off by one pair moves a
 * θ'_i by 5% or more */
#define YARN_RTOL 1e-6
/* ref accumulates the output in float32 over up to 4,097 rows */
#define SOFTMAX_ATOL 1e-5
#define SOFTMAX_RTOL 1e-5

/* ---- rope_rotate ----------------------------------------------------------------------------- */

static int grade_rope_rotate(void)
{
    static const size_t widths[] = {8, 64, 128};
    static const int64_t positions[] = {0, 1, 4093, 100003, 1000003};
    lab_grade g;
    grade_begin(&g, "rope_rotate",
                "pair i at position p: (a, b) -> (a cos φ - b sin φ, a sin φ + b cos φ), φ = p·θ_i in "
                "double; pairs (2i, 2i+1) interleaved, (i, i + Dr/2) half-split (chapter 0, \"What it "
                "computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 1001);
    for (size_t w = 0; w < 3 && !g.wrong; w++)
        for (int yarn = 0; yarn < 2 && !g.wrong; yarn++)
            for (size_t n = 0; n < 5 && !g.wrong; n++)
                for (int inter = 1; inter >= 0 && !g.wrong; inter--) {
                    const size_t Dr = widths[w];
                    kvl_rope r;
                    grade_require(yarn ? kvl_rope_init_yarn(&r, Dr, 10000, 40, 4096, 32, 1)
                                       : kvl_rope_init(&r, Dr, 10000));
                    float x[KVL_ROPE_MAX_DR], want_f[KVL_ROPE_MAX_DR];
                    double want[KVL_ROPE_MAX_DR];
                    kvl_rng_uniform_f32(&rng, x, Dr, -2, 2);
                    memcpy(want_f, x, Dr * sizeof *x);
                    if (inter) kvl_rope_rotate_interleaved(want_f, &r, positions[n]);
                    else kvl_rope_rotate_half_split(want_f, &r, positions[n]);
                    for (size_t i = 0; i < Dr; i++) want[i] = want_f[i];
                    grade_case(&g, "Dr = %zu, %s table, position %lld, %s", Dr,
                               yarn ? "V3's YaRN" : "plain", (long long)positions[n],
                               inter ? "interleaved" : "half-split");
                    rope_rotate(x, r.theta, Dr, positions[n], inter);
                    grade_f32(&g, &(grade_shape){"x", {Dr}, 1}, x, want, ROPE_ATOL, ROPE_RTOL);
                }
    return grade_end(&g);
}

/* ---- yarn_freqs ------------------------------------------------------------------------------ */

static int grade_yarn_freqs(void)
{
    static const struct {
        size_t Dr;
        double base, s, L, beta_fast, beta_slow;
        const char *what;
    } cases[] = {
        {64, 10000, 40, 4096, 32, 1, "V3"},
        {64, 10000, 40, 8192, 32, 1, "V3 trained on 8,192"},
        {32, 10000, 40, 4096, 32, 1, "Dr 32"},
        {64, 500000, 40, 4096, 32, 1, "base 500,000"},
        {64, 10000, 1, 4096, 32, 1, "s = 1: the plain table"},
        {64, 10000, 8, 64, 32, 1, "L = 64: lo clamps at 0"},
        {64, 10000, 16, 1e7, 32, 1, "L = 10^7: hi = 50, past the last pair"},
        {128, 10000, 4, 1e12, 32, 1, "L = 10^12: hi clamps at Dr - 1"},
    };
    lab_grade g;
    grade_begin(&g, "yarn_freqs",
                "θ'_i = θ_i (1 - γ_i) + (θ_i/s) γ_i, γ_i = clamp((i - lo)/(hi - lo), 0, 1), lo = "
                "max(⌊corr(β_fast)⌋, 0), hi = min(⌈corr(β_slow)⌉, Dr - 1), corr(n) = Dr ln(L/(2π n)) "
                "/ (2 ln base) (chapter 0, \"What it computes\")");
    for (size_t k = 0; k < sizeof cases / sizeof *cases && !g.wrong; k++) {
        const size_t Dr = cases[k].Dr;
        float ref_theta[KVL_ROPE_MAX_DR / 2];
        double want[KVL_ROPE_MAX_DR / 2], got[KVL_ROPE_MAX_DR / 2];
        float got_f[KVL_ROPE_MAX_DR / 2];
        grade_require(kvl_yarn_freqs(ref_theta, Dr, cases[k].base, cases[k].s, cases[k].L,
                                     cases[k].beta_fast, cases[k].beta_slow));
        for (size_t i = 0; i < Dr / 2; i++) want[i] = ref_theta[i], got[i] = NAN;
        grade_case(&g, "%s: Dr %zu, base %g, s %g, L %g, beta %g and %g", cases[k].what, Dr,
                   cases[k].base, cases[k].s, cases[k].L, cases[k].beta_fast, cases[k].beta_slow);
        yarn_freqs(got, Dr, cases[k].base, cases[k].s, cases[k].L, cases[k].beta_fast,
                   cases[k].beta_slow);
        /* relative only: θ'_i spans ten decades; the float of got adds at most 6e-8 */
        for (size_t i = 0; i < Dr / 2; i++) got_f[i] = (float)got[i];
        grade_f32(&g, &(grade_shape){"theta", {Dr / 2}, 1}, got_f, want, 0, YARN_RTOL);
    }
    return grade_end(&g);
}

/* ---- online_softmax -------------------------------------------------------------------------- */

/* want[Dv] = kvl_online_* over the N rows */
static void expected(double *want, const float *s, const float *V, size_t N, size_t Dv)
{
    kvl_online st;
    float *acc = grade_alloc(Dv * sizeof *acc);
    kvl_online_start(&st, acc, Dv, -INFINITY);
    for (size_t j = 0; j < N; j++) kvl_online_step(&st, acc, s[j], V + j * Dv, Dv);
    kvl_online_finish(acc, &st, acc, Dv);
    for (size_t i = 0; i < Dv; i++) want[i] = acc[i];
    free(acc);
}

typedef enum { SCORES_WIDE, SCORES_RISING, SCORES_LOW, SCORES_MASKED } score_kind;

static const char *const KIND_NAMES[] = {"scores in [0, 300), every 7th masked",
                                         "scores rising: the maximum on the last row",
                                         "scores in [-700, -600)", "every row masked"};

/* s[N] of the kind asked for */
static void draw_scores(kvl_rng *rng, float *s, size_t N, score_kind kind)
{
    kvl_rng_uniform_f32(rng, s, N, kind == SCORES_LOW ? -700 : 0, kind == SCORES_LOW ? -600 : 300);
    for (size_t j = 0; j < N; j++) {
        if (kind == SCORES_WIDE && j % 7 == 3) s[j] = -INFINITY;
        if (kind == SCORES_RISING) s[j] = (float)(0.25 * (double)j);
        if (kind == SCORES_MASKED) s[j] = -INFINITY;
    }
}

static int grade_online_softmax(void)
{
    static const struct {
        size_t N, Dv;
        score_kind kind;
    } cases[] = {{1, 16, SCORES_WIDE},    {64, 16, SCORES_WIDE},   {65, 128, SCORES_WIDE},
                 {1000, 16, SCORES_WIDE}, {4097, 32, SCORES_WIDE}, {300, 16, SCORES_RISING},
                 {500, 16, SCORES_LOW},   {40, 16, SCORES_MASKED}};
    lab_grade g;
    grade_begin(&g, "online_softmax",
                "m' = max(m, s), α = e^(m - m'), ℓ ← α ℓ + e^(s - m'), a ← α a + e^(s - m') v; "
                "o = a/ℓ, and 0 when no row is valid (chapter 0, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 1003);
    for (size_t k = 0; k < sizeof cases / sizeof *cases && !g.wrong; k++) {
        const size_t N = cases[k].N, Dv = cases[k].Dv;
        float *s = grade_alloc(N * sizeof *s), *V = grade_alloc(N * Dv * sizeof *V);
        float *o = grade_alloc(Dv * sizeof *o);
        double *want = grade_alloc(Dv * sizeof *want);
        draw_scores(&rng, s, N, cases[k].kind);
        kvl_rng_uniform_f32(&rng, V, N * Dv, -1, 1);
        expected(want, s, V, N, Dv);
        grade_case(&g, "N = %zu rows, Dv = %zu, %s", N, Dv, KIND_NAMES[cases[k].kind]);
        online_softmax(o, s, V, N, Dv);
        grade_f32(&g, &(grade_shape){"o", {Dv}, 1}, o, want, SOFTMAX_ATOL, SOFTMAX_RTOL);
        free(s), free(V), free(o), free(want);
    }
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_rope_rotate, grade_yarn_freqs, grade_online_softmax};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
