/* Chapter 1's grader: make lab-01 (your files) or make lab-01 SOLUTION=1 (the worked solutions).
 * Each lab is checked element by element against kvl_attend_ref (ref/core/attend.h), the project's
 * definition of attention over cached rows. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attend.h"
#include "grade.h"
#include "lab.h"
#include "rng.h"

/* float32 sums of Dh products and T weights round at about 1e-6 of the output; a wrong group,
 * scale, mask or softmax moves an output by 1e-2 or more. */
#define ATOL 1e-5
#define RTOL 1e-5

typedef struct {
    size_t T, H, Hkv, Dh;
    double q_scale; /* scores grow with it: 400 puts them in the hundreds, past e^s's float range */
} attention_case;

/* want[Hq][Dh] = kvl_attend_ref of q[Hq][Dh] over the first N rows of K and V ([.][Hkv][Dh] each),
 * packed as the cache row [K | V] it reads */
static void expected(double *want, const float *q, size_t Hq, const float *K, const float *V,
                     size_t N, size_t Hkv, size_t Dh)
{
    const size_t width = 2 * Hkv * Dh;
    float *rows = grade_alloc(N * width * sizeof *rows), *o = grade_alloc(Hq * Dh * sizeof *o);
    for (size_t t = 0; t < N; t++)
        for (size_t c = 0; c < Hkv * Dh; c++) {
            rows[t * width + c] = K[t * Hkv * Dh + c];
            rows[t * width + Hkv * Dh + c] = V[t * Hkv * Dh + c];
        }
    const kvl_row_tiles view = kvl_row_tiles_f32(rows, N, width);
    const kvl_attend_rows r = {
        .N = N, .stride = width, .k_off = 0, .Dk = Dh, .v_off = Hkv * Dh, .Dv = Dh, .groups = Hkv};
    if (kvl_attend_ref(o, q, Hq, &view, &r, 1.0f / sqrtf((float)Dh), NULL, NULL) != 0) abort();
    for (size_t i = 0; i < Hq * Dh; i++) want[i] = o[i];
    free(rows);
    free(o);
}

/* q[n], K and V[T·Hkv·Dh] drawn for case c */
static void draw(kvl_rng *rng, float *q, size_t n, float *K, float *V, const attention_case *c)
{
    kvl_rng_uniform_f32(rng, q, n, -c->q_scale, c->q_scale);
    kvl_rng_uniform_f32(rng, K, c->T * c->Hkv * c->Dh, -1, 1);
    kvl_rng_uniform_f32(rng, V, c->T * c->Hkv * c->Dh, -1, 1);
}

static const attention_case cases[] = {
    {1, 4, 4, 16, 1},    /* MHA, one cached token: every weight is 1 */
    {37, 8, 2, 64, 1},   /* GQA-2: four query heads per KV head */
    {130, 6, 1, 32, 1},  /* MQA */
    {53, 4, 2, 16, 400}, /* scores in the hundreds */
};
#define N_CASES (sizeof cases / sizeof cases[0])

static int grade_gqa_decode(void)
{
    lab_grade g;
    grade_begin(
        &g, "gqa_decode",
        "o_h = Σ_t softmax_t(q_h·K[t][g] / √Dh)·V[t][g] with g = ⌊h/(H/Hkv)⌋, the largest score "
        "subtracted before e^s (chapter 1, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 101);
    for (size_t k = 0; k < N_CASES && !g.wrong; k++) {
        const attention_case *c = &cases[k];
        const size_t kv = c->T * c->Hkv * c->Dh, n = c->H * c->Dh;
        float *q = grade_alloc(n * sizeof *q), *K = grade_alloc(kv * sizeof *K),
              *V = grade_alloc(kv * sizeof *V);
        float *o = grade_alloc(n * sizeof *o);
        double *want = grade_alloc(n * sizeof *want);
        draw(&rng, q, n, K, V, c);
        expected(want, q, c->H, K, V, c->T, c->Hkv, c->Dh);
        grade_case(&g, "T = %zu, H = %zu, Hkv = %zu, Dh = %zu, queries in ±%g", c->T, c->H, c->Hkv,
                   c->Dh, c->q_scale);
        gqa_decode(o, q, K, V, c->T, c->H, c->Hkv, c->Dh);
        grade_f32(&g, &(grade_shape){"o", {c->H, c->Dh}, 2}, o, want, ATOL, RTOL);
        free(q), free(K), free(V), free(o), free(want);
    }
    return grade_end(&g);
}

/* A chunk of S tokens after len cached ones: each token's expected row is kvl_attend_ref over the
 * len + i + 1 rows it sees. */
static int grade_causal_prefill(void)
{
    static const struct {
        size_t len, S, H, Hkv, Dh;
    } chunks[] = {{0, 9, 4, 2, 16}, {29, 12, 8, 2, 32}, {5, 17, 3, 1, 8}};
    lab_grade g;
    grade_begin(&g, "causal_prefill",
                "token i at position t = len + i: o_{i,h} = Σ_{j ≤ t} softmax_j(q_{i,h}·K[j][g] / "
                "√Dh)·V[j][g]"
                " (chapter 1, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 102);
    for (size_t k = 0; k < sizeof chunks / sizeof chunks[0] && !g.wrong; k++) {
        const size_t len = chunks[k].len, S = chunks[k].S, H = chunks[k].H, Hkv = chunks[k].Hkv,
                     Dh = chunks[k].Dh, N = len + S, row = H * Dh;
        const attention_case c = {N, H, Hkv, Dh, 1};
        float *q = grade_alloc(S * row * sizeof *q), *K = grade_alloc(N * Hkv * Dh * sizeof *K);
        float *V = grade_alloc(N * Hkv * Dh * sizeof *V), *o = grade_alloc(S * row * sizeof *o);
        double *want = grade_alloc(S * row * sizeof *want);
        draw(&rng, q, S * row, K, V, &c);
        for (size_t i = 0; i < S; i++)
            expected(want + i * row, q + i * row, H, K, V, len + i + 1, Hkv, Dh);
        grade_case(&g, "len = %zu cached, S = %zu new, H = %zu, Hkv = %zu, Dh = %zu", len, S, H,
                   Hkv, Dh);
        causal_prefill(o, q, K, V, len, S, H, Hkv, Dh);
        grade_f32(&g, &(grade_shape){"o", {S, H, Dh}, 3}, o, want, ATOL, RTOL);
        free(q), free(K), free(V), free(o), free(want);
    }
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_gqa_decode, grade_causal_prefill};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
