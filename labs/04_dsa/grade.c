/* Chapter 4's grader: make lab-04 (your files) or make lab-04 SOLUTION=1 (the worked solutions).
 * index_scores is checked element by element against kvl_index_scores_ref (ref/core/index_scan.h),
 * topk entry by entry against kvl_topk (ref/core/topk.h): the definitions ref/dsa scores and
 * selects with. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "grade.h"
#include "index_scan.h"
#include "lab.h"
#include "rng.h"
#include "row_tiles.h"
#include "topk.h"

/* float32 sums of HI·DI products of values in ±1 round at about 1e-5 of scores of a few units; a
 * missing ReLU, head weight or mask entry moves a score by 1e-1 or more. */
#define ATOL 1e-4
#define RTOL 1e-5

typedef struct {
    size_t S, N, HI, DI, start;
    const char *what;
} index_case;

static const index_case index_cases[] = {
    {1, 37, 4, 16, 36, "one decode query over 37 keys"},
    {12, 12, 3, 32, 0, "a chunk of 12 from an empty cache: a causal triangle"},
    {5, 1100, 8, 64, 1095, "a chunk of 5 over 1,100 keys, past one 1,024-key tile"},
    {2, 130, 64, 128, 128, "V3.2's 64 heads of 128"},
    {4, 50, 2, 8, 10, "keys held past the chunk's last position (14 … 49 unseen by all)"},
};
#define N_INDEX_CASES (sizeof index_cases / sizeof index_cases[0])

/* want[S][N] = kvl_index_scores_ref of the case, token-level causality (M = 1) */
static void index_expected(double *want, const float *q, const float *w, const float *k,
                           const index_case *c)
{
    float *I = grade_alloc(c->S * c->N * sizeof *I);
    const kvl_row_tiles keys = kvl_row_tiles_f32(k, c->N, c->DI);
    if (kvl_index_scores_ref(I, q, w, &keys, c->S, c->HI, c->start, 1) != 0) abort();
    for (size_t i = 0; i < c->S * c->N; i++) want[i] = I[i];
    free(I);
}

static int grade_index_scores(void)
{
    lab_grade g;
    grade_begin(&g, "index_scores",
                "I[i][s] = Σ_j w[i][j]·ReLU(q[i][j]·k[s]) for s ≤ start + i, −∞ for s > start + i "
                "(chapter 4, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 401);
    for (size_t n = 0; n < N_INDEX_CASES && !g.wrong; n++) {
        const index_case *c = &index_cases[n];
        const size_t nq = c->S * c->HI * c->DI, nI = c->S * c->N;
        float *q = grade_alloc(nq * sizeof *q), *w = grade_alloc(c->S * c->HI * sizeof *w);
        float *k = grade_alloc(c->N * c->DI * sizeof *k), *I = grade_alloc(nI * sizeof *I);
        double *want = grade_alloc(nI * sizeof *want);
        kvl_rng_uniform_f32(&rng, q, nq, -1, 1);
        kvl_rng_uniform_f32(&rng, w, c->S * c->HI, -1, 1);
        kvl_rng_uniform_f32(&rng, k, c->N * c->DI, -1, 1);
        index_expected(want, q, w, k, c);
        grade_case(&g, "%s: S = %zu, N = %zu, HI = %zu, DI = %zu, start = %zu", c->what, c->S, c->N,
                   c->HI, c->DI, c->start);
        index_scores(I, q, w, k, c->S, c->N, c->HI, c->DI, c->start);
        grade_f32(&g, &(grade_shape){"I", {c->S, c->N}, 2}, I, want, ATOL, RTOL);
        free(q), free(w), free(k), free(I), free(want);
    }
    return grade_end(&g);
}

/* ---- top-k ----------------------------------------------------------------------------------- */

#define MAX_N 1100

typedef void (*fill_fn)(kvl_rng *rng, float *I, size_t N, size_t row);

/* distinct (almost surely) scores in ±10 */
static void fill_random(kvl_rng *rng, float *I, size_t N, size_t row)
{
    (void)row;
    kvl_rng_uniform_f32(rng, I, N, -10, 10);
}

/* scores from {0, 1, 2, 3}: ties everywhere, and the K-th largest inside a tie */
static void fill_ties(kvl_rng *rng, float *I, size_t N, size_t row)
{
    (void)row;
    for (size_t s = 0; s < N; s++) I[s] = (float)(kvl_rng_next_u64(rng) % 4);
}

/* a causal row: query `row` sees positions 0 … row, −∞ after */
static void fill_causal(kvl_rng *rng, float *I, size_t N, size_t row)
{
    fill_random(rng, I, N, row);
    for (size_t s = row + 1; s < N; s++) I[s] = -INFINITY;
}

/* every fifth entry NaN, the row's last value −∞ */
static void fill_nan(kvl_rng *rng, float *I, size_t N, size_t row)
{
    fill_ties(rng, I, N, row);
    for (size_t s = row % 5; s < N; s += 5) I[s] = NAN;
    I[N - 1] = -INFINITY;
}

/* no legal entry: −∞ and NaN only */
static void fill_none(kvl_rng *rng, float *I, size_t N, size_t row)
{
    (void)rng;
    for (size_t s = 0; s < N; s++) I[s] = (s + row) % 3 ? -INFINITY : NAN;
}

/* negative scores, +∞ (legal) and zeros of both signs (equal: a tie) */
static void fill_signs(kvl_rng *rng, float *I, size_t N, size_t row)
{
    kvl_rng_uniform_f32(rng, I, N, -10, -1);
    for (size_t s = row % 7; s < N; s += 7) I[s] = (s / 7) % 2 ? -0.0f : 0.0f;
    I[(row * 13) % N] = INFINITY;
}

typedef struct {
    size_t rows, N, K;
    fill_fn fill;
    const char *what;
} topk_case;

static const topk_case topk_cases[] = {
    {4, 300, 16, fill_random, "distinct scores"},
    {3, 50, 1, fill_random, "K = 1"},
    {6, 200, 37, fill_ties, "scores in {0, 1, 2, 3}: the cut inside a tie"},
    {8, 24, 16, fill_causal, "row t sees 0 … t, −∞ after: K past the legal count for t < 15"},
    {5, 40, 12, fill_nan, "NaN entries and a −∞, many ties"},
    {3, 10, 16, fill_random, "K larger than N"},
    {3, 9, 4, fill_none, "no legal entry: −∞ and NaN only"},
    {7, 60, 5, fill_signs, "negative scores, one +∞, and −0 and +0 tied for the 4 places left"},
    {2, MAX_N, 64, fill_ties, "1,100 tied scores"},
};
#define N_TOPK_CASES (sizeof topk_cases / sizeof topk_cases[0])

static int grade_topk(void)
{
    lab_grade g;
    grade_begin(&g, "topk",
                "the min(K, #legal) largest legal scores (not −∞, not NaN), a tie to the smaller "
                "position, stored ascending, then −1 (chapter 4, \"What it computes\"; "
                "ref/core/topk.h)");
    kvl_rng rng;
    kvl_rng_seed(&rng, 402);
    for (size_t n = 0; n < N_TOPK_CASES && !g.wrong; n++) {
        const topk_case *c = &topk_cases[n];
        float *I = grade_alloc(c->rows * c->N * sizeof *I);
        int32_t *sel = grade_alloc(c->rows * c->K * sizeof *sel),
                *ref = grade_alloc(c->rows * c->K * sizeof *ref);
        int64_t *got = grade_alloc(c->rows * c->K * sizeof *got),
                *want = grade_alloc(c->rows * c->K * sizeof *want);
        for (size_t r = 0; r < c->rows; r++) c->fill(&rng, I + r * c->N, c->N, r);
        if (kvl_topk(ref, I, c->rows, c->N, c->K) != 0) abort();
        grade_case(&g, "%s: %zu rows, N = %zu, K = %zu", c->what, c->rows, c->N, c->K);
        for (size_t r = 0; r < c->rows; r++) topk(sel + r * c->K, I + r * c->N, c->N, c->K);
        for (size_t i = 0; i < c->rows * c->K; i++) got[i] = sel[i], want[i] = ref[i];
        grade_i64(&g, &(grade_shape){"sel", {c->rows, c->K}, 2}, got, want);
        free(I), free(sel), free(ref), free(got), free(want);
    }
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_index_scores, grade_topk};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
