/* Chapter 2's grader: make lab-02 (your files) or make lab-02 SOLUTION=1 (the worked solutions).
 * absorbed_decode is checked against ref/mla's absorbed step (mla_absorb_query, kvl_attend_ref over
 * the latent rows, mla_expand_output), rope_key against ref/core/rope.h's interleaved rotation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "grade.h"
#include "lab.h"
#include "mla.h"
#include "rng.h"
#include "rope.h"

/* float32 sums over Dc, Dnope and N round at about 1e-6 of an output, and the up-projection sums Dc
 * of them; a wrong slice of W_UKV, a dropped k_rope term or a wrong scale moves an output by 1e-2
 * or more. */
#define DECODE_ATOL 1e-5
#define DECODE_RTOL 1e-4
/* cos and sin rounded to float and one rotation differ from the reference's fused one by a few
 * 1e-8; a float angle at the long positions, the other pairing or a swapped sine by 1e-3 or
 * more. */
#define ROPE_ATOL 1e-6
#define ROPE_RTOL 1e-6

/* DeepSeek-V3's YaRN settings (its config.json): base, factor, original length, beta_fast,
 * beta_slow */
#define V3_BASE 10000.0
#define V3_FACTOR 40.0
#define V3_L_ORIG 4096.0
#define V3_BETA_FAST 32.0
#define V3_BETA_SLOW 1.0

typedef struct {
    size_t N, H, Dc, Dnope, Dr, Dv;
    int yarn;       /* 1: V3's mscale² in the scale, else (Dnope+Dr)^−½ */
    double q_scale; /* queries drawn in ±q_scale; 300 puts scores in the hundreds */
} decode_case;

static const decode_case decode_cases[] = {
    {1, 2, 16, 8, 8, 8, 0, 1},    /* one cached token: every weight is 1 */
    {37, 4, 32, 16, 8, 24, 1, 1}, /* Dv ≠ Dnope: W_UV starts Dnope rows into each head's block */
    {130, 8, 64, 32, 16, 16, 1, 1}, /* eight heads, more rows than one tile */
    {53, 3, 32, 16, 8, 12, 0, 300}, /* scores in the hundreds */
};

/* c = an MLA config of the case's widths (the query projected directly, no window) */
static void decode_config(mla_config *c, const decode_case *k)
{
    *c = (mla_config){.d = 8,
                      .n_heads = k->H,
                      .kv_lora_rank = k->Dc,
                      .qk_nope = k->Dnope,
                      .qk_rope = k->Dr,
                      .v_head = k->Dv,
                      .norm_eps = MLA_LATENT_NORM_EPS};
    c->softmax_scale = k->yarn ? kvl_yarn_softmax_scale(k->Dnope + k->Dr, V3_FACTOR, 1.0)
                               : 1.0 / sqrt((double)(k->Dnope + k->Dr));
    if (kvl_rope_init(&c->rope, k->Dr, V3_BASE) != 0) abort();
}

/* want[H][Dv] = ref/mla's absorbed step of q over rows[N][Dc+Dr] */
static void decode_expected(double *want, const mla_config *c, const mla_weights *w, const float *q,
                            const float *rows, size_t N)
{
    const size_t H = c->n_heads, Dc = c->kv_lora_rank, Dw = Dc + c->qk_rope, Dv = c->v_head;
    float *q_hat = grade_alloc(H * Dw * sizeof *q_hat),
          *o_hat = grade_alloc(H * Dc * sizeof *o_hat);
    float *o = grade_alloc(H * Dv * sizeof *o);
    const kvl_row_tiles view = kvl_row_tiles_f32(rows, N, Dw);
    const kvl_attend_rows shared = {
        .N = N, .stride = Dw, .k_off = 0, .Dk = Dw, .v_off = 0, .Dv = Dc, .groups = 1};
    if (mla_absorb_query(q_hat, c, w, q, 1) != 0 ||
        kvl_attend_ref(o_hat, q_hat, H, &view, &shared, (float)c->softmax_scale, NULL, NULL) != 0 ||
        mla_expand_output(o, c, w, o_hat, 1) != 0)
        abort();
    for (size_t i = 0; i < H * Dv; i++) want[i] = o[i];
    free(q_hat), free(o_hat), free(o);
}

static int grade_absorbed_decode(void)
{
    lab_grade g;
    grade_begin(
        &g, "absorbed_decode",
        "q̂_h = W_UK^hᵀ q^C_h, s_h,j = (q̂_h·c_j + q^R_h·k_rope_j)·scale,"
        " o_h = W_UV^h Σ_j softmax_j(s_h,j)·c_j, W_UK^h the first Dnope rows of head h's W_UKV"
        " block, W_UV^h the next Dv"
        " (chapter 2, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 201);
    for (size_t k = 0; k < sizeof decode_cases / sizeof decode_cases[0] && !g.wrong; k++) {
        const decode_case *d = &decode_cases[k];
        mla_config c;
        mla_weights w;
        decode_config(&c, d);
        if (mla_weights_init_random(&w, &c, &rng) != 0) abort();
        const size_t nq = d->H * (d->Dnope + d->Dr), nrows = d->N * (d->Dc + d->Dr),
                     no = d->H * d->Dv;
        float *q = grade_alloc(nq * sizeof *q), *rows = grade_alloc(nrows * sizeof *rows);
        float *o = grade_alloc(no * sizeof *o);
        double *want = grade_alloc(no * sizeof *want);
        kvl_rng_uniform_f32(&rng, q, nq, -d->q_scale, d->q_scale);
        kvl_rng_uniform_f32(&rng, rows, nrows, -1, 1);
        decode_expected(want, &c, &w, q, rows, d->N);
        grade_case(&g,
                   "N = %zu, H = %zu, Dc = %zu, Dnope = %zu, Dr = %zu, Dv = %zu, scale %.6g, "
                   "queries in ±%g",
                   d->N, d->H, d->Dc, d->Dnope, d->Dr, d->Dv, c.softmax_scale, d->q_scale);
        absorbed_decode(o, q, w.w_ukv, rows, d->N, d->H, d->Dc, d->Dnope, d->Dr, d->Dv,
                        (float)c.softmax_scale);
        grade_f32(&g, &(grade_shape){"o", {d->H, d->Dv}, 2}, o, want, DECODE_ATOL, DECODE_RTOL);
        free(q), free(rows), free(o), free(want);
        mla_weights_free(&w);
    }
    return grade_end(&g);
}

typedef struct {
    size_t T, Dc, Dr;
    int64_t start;
    int yarn; /* 1: V3's YaRN table, else the plain one */
} rope_case;

static const rope_case rope_cases[] = {
    {5, 16, 8, 0, 0},        /* position 0 turns nothing; 1 … 4 do */
    {9, 32, 16, 4093, 1},    /* across V3's original length, 4,096 */
    {4, 512, 64, 131069, 1}, /* V3's widths at the end of a 128K context */
    {3, 8, 64, 1048573, 0},  /* past 10⁶: a float angle is off by 3e-2 rad */
    {6, 24, 32, 100003, 1},
};

static int grade_rope_key(void)
{
    lab_grade g;
    grade_begin(&g, "rope_key",
                "row t at p = start + t: pair i = channels (Dc + 2i, Dc + 2i + 1)"
                " → (a cos φ − b sin φ, a sin φ + b cos φ), φ = p·θ_i in double,"
                " the Dc latent channels untouched (chapter 2, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 202);
    for (size_t k = 0; k < sizeof rope_cases / sizeof rope_cases[0] && !g.wrong; k++) {
        const rope_case *d = &rope_cases[k];
        kvl_rope r;
        if ((d->yarn ? kvl_rope_init_yarn(&r, d->Dr, V3_BASE, V3_FACTOR, V3_L_ORIG, V3_BETA_FAST,
                                          V3_BETA_SLOW)
                     : kvl_rope_init(&r, d->Dr, V3_BASE)) != 0)
            abort();
        const size_t width = d->Dc + d->Dr, n = d->T * width;
        float *rows = grade_alloc(n * sizeof *rows), *ref = grade_alloc(n * sizeof *ref);
        double *want = grade_alloc(n * sizeof *want);
        kvl_rng_uniform_f32(&rng, rows, n, -1, 1);
        memcpy(ref, rows, n * sizeof *ref);
        kvl_rope_rotate_rows_interleaved(ref, d->T, width, d->Dc, &r, d->start);
        for (size_t i = 0; i < n; i++) want[i] = ref[i];
        grade_case(&g, "T = %zu rows from position %lld, Dc = %zu, Dr = %zu, %s table", d->T,
                   (long long)d->start, d->Dc, d->Dr, d->yarn ? "YaRN (V3)" : "plain");
        rope_key(rows, r.theta, d->T, d->Dc, d->Dr, d->start);
        grade_f32(&g, &(grade_shape){"rows", {d->T, width}, 2}, rows, want, ROPE_ATOL, ROPE_RTOL);
        free(rows), free(ref), free(want);
    }
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_absorbed_decode, grade_rope_key};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
