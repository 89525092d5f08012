/* Chapter 6's grader: make lab-06 (your files) or make lab-06 SOLUTION=1 (the worked solutions).
 * Each lab is checked element by element against the project's definition: the compressor of
 * ref/v4_compressor.h (v4_compressor_forward), the sink softmax of ref/core/softmax.h
 * (kvl_softmax_sink_f32) and attention over cached rows with sinks (kvl_attend_ref,
 * ref/core/attend.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "grade.h"
#include "lab.h"
#include "rng.h"
#include "softmax.h"
#include "status.h"
#include "v4_compressor.h"

/* ---- csa_compress
 * --------------------------------------------------------------------------------- */

/* Projections summed in another order and then exponentiated (gates of ±100 included) move a slot's
 * weight by about 1e-5 of itself; a wrong slot, half, block or position bias moves an entry by 1e-2
 * or more. */
#define COMPRESS_ATOL 2e-4
#define COMPRESS_RTOL 2e-4

typedef struct {
    size_t T, d, c, M, Dr;
    double ape_scale; /* the position bias's spread: 100 puts the gates at ±100, past e^z's float
                         range */
} compress_case;

static const compress_case compress_cases[] = {
    {4, 24, 16, 4, 8, 1},     /* T = M: entry 0 alone, with no block before it */
    {37, 48, 64, 4, 16, 1},   /* 9 entries and a tail of 1 */
    {20, 32, 32, 3, 8, 1},    /* M = 3: 6 entries and a tail of 2 */
    {16, 32, 16, 4, 16, 100}, /* gates of ±100; Dr = c: every channel rotated */
};

/* w's four arrays drawn for case k (the fields point into one block, freed by the caller) */
static float *compress_weights(v4_compressor_weights *w, kvl_rng *rng, const compress_case *k)
{
    const size_t wide = 2 * k->c;
    float *block = grade_alloc((2 * wide * k->d + k->M * wide + k->c) * sizeof *block);
    *w = (v4_compressor_weights){
        .w_kv = block, .w_gate = block + wide * k->d, .ape = block + 2 * wide * k->d};
    w->norm = w->ape + k->M * wide;
    kvl_rng_normal_f32(rng, w->w_kv, 2 * wide * k->d, 1.0 / sqrt((double)k->d));
    kvl_rng_normal_f32(rng, w->ape, k->M * wide, k->ape_scale);
    kvl_rng_uniform_f32(rng, w->norm, k->c, 0.5, 1.5);
    return block;
}

static int grade_csa_compress(void)
{
    lab_grade g;
    grade_begin(
        &g, "csa_compress",
        "entry i, channel ch: softmax over the 2M slots (block i−1 through channel ch, block i "
        "through "
        "channel c + ch; none before block 0) of z = W_Z x + B[t mod M], weighting a = W_C x; then "
        "RMSNorm with gain, RoPE of the last Dr at iM (chapter 6, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 601);
    for (size_t n = 0; n < sizeof compress_cases / sizeof compress_cases[0] && !g.wrong; n++) {
        const compress_case *k = &compress_cases[n];
        v4_compressor_config cfg = {
            .d = k->d, .width = k->c, .ratio = k->M, .overlap = 1, .norm_eps = 1e-6};
        if (kvl_rope_init(&cfg.rope, k->Dr, 10000.0) != KVL_OK) abort();
        v4_compressor_weights w;
        float *block = compress_weights(&w, &rng, k), *x = grade_alloc(k->T * k->d * sizeof *x);
        kvl_rng_normal_f32(&rng, x, k->T * k->d, 1.0);
        const size_t N = k->T / k->M;
        float *ref = grade_alloc(N * k->c * sizeof *ref),
              *got = grade_alloc(N * k->c * sizeof *got);
        double *want = grade_alloc(N * k->c * sizeof *want);
        grade_require(v4_compressor_forward(ref, &cfg, &w, x, k->T, 0));
        for (size_t i = 0; i < N * k->c; i++) want[i] = ref[i];
        grade_case(&g, "T = %zu, d = %zu, c = %zu, M = %zu, Dr = %zu, position bias ~ N(0, %g²)",
                   k->T, k->d, k->c, k->M, k->Dr, k->ape_scale);
        csa_compress(got, x, k->T, k->d, k->c, k->M, w.w_kv, w.w_gate, w.ape, w.norm, cfg.norm_eps,
                     &cfg.rope);
        grade_f32(&g, &(grade_shape){"entries", {N, k->c}, 2}, got, want, COMPRESS_ATOL,
                  COMPRESS_RTOL);
        free(block), free(x), free(ref), free(got), free(want);
    }
    return grade_end(&g);
}

/* ---- sink_softmax
 * --------------------------------------------------------------------------------- */

/* Float exponentials and a float sum of up to 300 terms hold p to about 1e-6 of itself; relative
 * only, so that a dominated p of 1e-13 must not come back as 0. */
#define SOFTMAX_ATOL 1e-30
#define SOFTMAX_RTOL 1e-5

typedef struct {
    const char *what;
    size_t n;
    double spread; /* scores uniform in ±spread */
    float sigma;
    size_t n_invalid; /* scores set to −∞: every third from the first, or all of them */
    int nan_at_end;   /* the last score NaN */
} softmax_case;

static const softmax_case softmax_cases[] = {
    {"an ordinary sink", 7, 2, 0.5f, 0, 0},
    {"a sink that dominates", 40, 1, 30.0f, 0, 0},
    {"no sink (σ = −∞)", 33, 3, -INFINITY, 0, 0},
    {"scores and sink in the hundreds", 300, 400, 250.0f, 0, 0},
    {"−∞ scores among finite ones", 20, 2, -1.0f, 5, 0},
    {"every score −∞, a sink", 9, 1, 0.25f, 9, 0},
    {"every score −∞, no sink", 9, 1, -INFINITY, 9, 0},
    {"one score", 1, 1, 2.0f, 0, 0},
    {"a NaN score", 12, 1, 0.0f, 0, 1},
};

static int grade_sink_softmax(void)
{
    lab_grade g;
    grade_begin(&g, "sink_softmax",
                "p_i = e^{s_i − μ} / (e^{σ − μ} + Σ_j e^{s_j − μ}), μ = max(σ, max s); −∞ scores "
                "get 0, a row "
                "with nothing valid and no sink is zeros (chapter 6, \"What it computes\"; "
                "ref/core/softmax.h)");
    kvl_rng rng;
    kvl_rng_seed(&rng, 602);
    for (size_t n = 0; n < sizeof softmax_cases / sizeof softmax_cases[0] && !g.wrong; n++) {
        const softmax_case *k = &softmax_cases[n];
        float *s = grade_alloc(k->n * sizeof *s), *ref = grade_alloc(k->n * sizeof *ref);
        float *got = grade_alloc(k->n * sizeof *got);
        double *want = grade_alloc(k->n * sizeof *want);
        kvl_rng_uniform_f32(&rng, s, k->n, -k->spread, k->spread);
        for (size_t i = 0; i < k->n_invalid; i++) s[k->n_invalid >= k->n ? i : 3 * i] = -INFINITY;
        if (k->nan_at_end) s[k->n - 1] = NAN;
        memcpy(ref, s, k->n * sizeof *s);
        kvl_softmax_sink_f32(ref, k->n, k->sigma);
        for (size_t i = 0; i < k->n; i++) want[i] = ref[i];
        grade_case(&g, "%s: n = %zu, σ = %g", k->what, k->n, (double)k->sigma);
        sink_softmax(got, s, k->n, k->sigma);
        grade_f32(&g, &(grade_shape){"p", {k->n}, 1}, got, want, SOFTMAX_ATOL, SOFTMAX_RTOL);
        free(s), free(ref), free(got), free(want);
    }
    return grade_end(&g);
}

/* ---- sink_attend
 * ---------------------------------------------------------------------------------- */

/* float32 sums of D products and K weights round at about 1e-6 of the output; a dropped sink, a
 * read empty pick or a wrong scale moves an output by 1e-3 or more. */
#define ATTEND_ATOL 1e-5
#define ATTEND_RTOL 1e-5

typedef struct {
    size_t N, K, H, D;
    size_t empty;   /* picks set to −1: every other one from the first (at most K/2), or all K */
    double q_scale; /* queries uniform in ±q_scale: 40 puts the scores in the hundreds */
    double sink_bias; /* added to every head's N(0, 1) sink: 30 makes the sink dominate */
} attend_case;

static const attend_case attend_cases[] = {
    {12, 5, 4, 16, 0, 1, 0},     /* five picks, no empty one */
    {200, 150, 6, 32, 20, 1, 0}, /* past one tile, 20 empty picks */
    {64, 9, 4, 16, 3, 1, 30},    /* a sink that dominates every head */
    {50, 17, 2, 8, 4, 40, 0},    /* scores in the hundreds */
    {8, 6, 3, 16, 6, 1, 0},      /* no valid pick: the sink alone, o = 0 */
};

/* sel[K]: distinct rows of N drawn by a partial shuffle, then k->empty of them set to −1 */
static void draw_picks(int32_t *sel, kvl_rng *rng, const attend_case *k)
{
    int32_t *all = grade_alloc(k->N * sizeof *all);
    for (size_t i = 0; i < k->N; i++) all[i] = (int32_t)i;
    for (size_t i = 0; i < k->K; i++) {
        const size_t j = i + (size_t)(kvl_rng_next_u64(rng) % (k->N - i));
        const int32_t t = all[i];
        all[i] = all[j], all[j] = t;
        sel[i] = all[i];
    }
    for (size_t e = 0; e < k->empty; e++) sel[k->empty >= k->K ? e : 2 * e] = -1;
    free(all);
}

/* want[H][D] = kvl_attend_ref of q over the rows sel picks (the −1 ones left out), each row key and
 * value */
static void attend_expected(double *want, const float *q, const float *Y, const int32_t *sel,
                            const float *sigma, float scale, const attend_case *k)
{
    float *rows = grade_alloc((k->K * k->D + 1) * sizeof *rows),
          *o = grade_alloc(k->H * k->D * sizeof *o);
    size_t n = 0;
    for (size_t i = 0; i < k->K; i++)
        if (sel[i] >= 0) memcpy(rows + n++ * k->D, Y + (size_t)sel[i] * k->D, k->D * sizeof *rows);
    const kvl_row_tiles view = kvl_row_tiles_f32(rows, n, k->D);
    const kvl_attend_rows r = {
        .N = n, .stride = k->D, .k_off = 0, .Dk = k->D, .v_off = 0, .Dv = k->D, .groups = 1};
    if (kvl_attend_ref(o, q, k->H, &view, &r, scale, sigma, NULL) != KVL_OK) abort();
    for (size_t i = 0; i < k->H * k->D; i++) want[i] = o[i];
    free(rows);
    free(o);
}

static int grade_sink_attend(void)
{
    lab_grade g;
    grade_begin(
        &g, "sink_attend",
        "o_h = Σ_k p_k·Y[sel[k]], p = sink softmax of scale·q_h·Y[sel[k]] with σ_h, an empty pick "
        "(−1) weight 0 and never read (chapter 6, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 603);
    for (size_t n = 0; n < sizeof attend_cases / sizeof attend_cases[0] && !g.wrong; n++) {
        const attend_case *k = &attend_cases[n];
        float *q = grade_alloc(k->H * k->D * sizeof *q), *Y = grade_alloc(k->N * k->D * sizeof *Y);
        float *sigma = grade_alloc(k->H * sizeof *sigma), *o = grade_alloc(k->H * k->D * sizeof *o);
        int32_t *sel = grade_alloc(k->K * sizeof *sel);
        double *want = grade_alloc(k->H * k->D * sizeof *want);
        kvl_rng_uniform_f32(&rng, q, k->H * k->D, -k->q_scale, k->q_scale);
        kvl_rng_uniform_f32(&rng, Y, k->N * k->D, -1, 1);
        kvl_rng_normal_f32(&rng, sigma, k->H, 1.0);
        for (size_t h = 0; h < k->H; h++) sigma[h] += (float)k->sink_bias;
        if (k->H > 2 && k->sink_bias == 0) sigma[1] = -INFINITY; /* one head without a sink */
        draw_picks(sel, &rng, k);
        const float scale = 1.0f / sqrtf((float)k->D);
        attend_expected(want, q, Y, sel, sigma, scale, k);
        grade_case(
            &g,
            "N = %zu rows, K = %zu picks (%zu empty), H = %zu, D = %zu, queries in ±%g, sinks + %g",
            k->N, k->K, k->empty, k->H, k->D, k->q_scale, k->sink_bias);
        sink_attend(o, q, k->H, k->D, Y, sel, k->K, sigma, scale);
        grade_f32(&g, &(grade_shape){"o", {k->H, k->D}, 2}, o, want, ATTEND_ATOL, ATTEND_RTOL);
        free(q), free(Y), free(sigma), free(o), free(sel), free(want);
    }
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_csa_compress, grade_sink_softmax, grade_sink_attend};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
