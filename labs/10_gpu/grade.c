/* Chapter 10's grader: make lab-10 (your files) or make lab-10 SOLUTION=1 (the worked solutions).
 * split_combine is checked element by element against ref/core/softmax.h's online softmax over all
 * the rows at once; fragment_map against the registers each lane of one warp receives from ldmatrix
 * and mma.sync in the CUDA emulator (cuda/decode_steps_cuda.h, step 3's loads). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "decode_steps_cuda.h"
#include "device.h"
#include "element.h"
#include "grade.h"
#include "lab.h"
#include "rng.h"
#include "softmax.h"

/* float32 sums over a few hundred rows round at about 1e-6 of the output; a missing rescale or a
 * wrong maximum moves it by 1e-2 or more. */
#define ATOL 1e-5
#define RTOL 1e-5

/* ---- split_combine
 * -------------------------------------------------------------------------------- */

typedef struct {
    size_t n, D;
    size_t bounds[6]; /* split p holds rows bounds[p] … bounds[p + 1] − 1 */
    size_t S;
    double s_scale; /* scores drawn in ±s_scale: 300 puts them past e^s's float range */
    int no_rows;    /* every score −∞: no split sees a row */
    const char *what;
} combine_case;

static const combine_case combine_cases[] = {
    {40, 16, {0, 40}, 1, 3, 0, "one split"},
    {150, 32, {0, 64, 128, 150}, 3, 3, 0, "three ragged splits"},
    {90, 8, {0, 30, 30, 61, 90}, 4, 3, 0, "an empty split among four"},
    {70, 16, {0, 10, 50, 70}, 3, 300, 0, "scores in the hundreds"},
    {12, 4, {0, 5, 12}, 2, 3, 1, "no split sees a row"},
};

/* The partials (m, l, acc) of each split of rows with scores s[n] and values v[n][D], each by
 * kvl_online_step over its own rows; want[D] the online softmax over all n rows. */
static void combine_expected(double *want, float *m, float *l, float *acc, const float *s,
                             const float *v, const combine_case *c)
{
    kvl_online st;
    float *all = grade_alloc(c->D * sizeof *all);
    for (size_t p = 0; p < c->S; p++) {
        kvl_online_start(&st, acc + p * c->D, c->D, -INFINITY);
        for (size_t j = c->bounds[p]; j < c->bounds[p + 1]; j++)
            kvl_online_step(&st, acc + p * c->D, s[j], v + j * c->D, c->D);
        m[p] = (float)st.m, l[p] = (float)st.l;
    }
    kvl_online_start(&st, all, c->D, -INFINITY);
    for (size_t j = 0; j < c->n; j++) kvl_online_step(&st, all, s[j], v + j * c->D, c->D);
    kvl_online_finish(all, &st, all, c->D);
    for (size_t d = 0; d < c->D; d++) want[d] = all[d];
    free(all);
}

static int grade_split_combine(void)
{
    lab_grade g;
    grade_begin(&g, "split_combine",
                "m = max_p m_p, o = Σ_p e^(m_p − m)·acc_p / Σ_p e^(m_p − m)·l_p, o = 0 when every "
                "m_p = −∞ (chapter 10, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 1001);
    for (size_t k = 0; k < sizeof combine_cases / sizeof *combine_cases && !g.wrong; k++) {
        const combine_case *c = &combine_cases[k];
        float *s = grade_alloc(c->n * sizeof *s), *v = grade_alloc(c->n * c->D * sizeof *v);
        float *m = grade_alloc(c->S * sizeof *m), *l = grade_alloc(c->S * sizeof *l);
        float *acc = grade_alloc(c->S * c->D * sizeof *acc), *o = grade_alloc(c->D * sizeof *o);
        double *want = grade_alloc(c->D * sizeof *want);
        kvl_rng_uniform_f32(&rng, s, c->n, -c->s_scale, c->s_scale);
        kvl_rng_uniform_f32(&rng, v, c->n * c->D, -1, 1);
        for (size_t j = 0; j < c->n && c->no_rows; j++) s[j] = -INFINITY;
        combine_expected(want, m, l, acc, s, v, c);
        grade_case(&g, "%s: %zu rows, D = %zu, %zu splits", c->what, c->n, c->D, c->S);
        split_combine(o, m, l, acc, c->S, c->D);
        grade_f32(&g, &(grade_shape){"o", {c->D}, 1}, o, want, ATOL, RTOL);
        free(s), free(v), free(m), free(l), free(acc), free(o), free(want);
    }
    return grade_end(&g);
}

/* ---- fragment_map
 * ----------------------------------------------------------------------------------- */

/* One warp's registers from kvl_step3_fragments_cuda for A[16][16] and Bt[8][16] (B = Btᵀ). */
static void emulated_fragments(uint32_t *a, uint32_t *b, float *d, const uint16_t *A,
                               const uint16_t *Bt)
{
    void *da, *db, *dd, *dA, *dBt;
    grade_require(kvl_cuda_alloc(&da, 32 * 4 * sizeof *a));
    grade_require(kvl_cuda_alloc(&db, 32 * 2 * sizeof *b));
    grade_require(kvl_cuda_alloc(&dd, 32 * 4 * sizeof *d));
    grade_require(kvl_cuda_alloc(&dA, 16 * 16 * sizeof *A));
    grade_require(kvl_cuda_alloc(&dBt, 8 * 16 * sizeof *Bt));
    grade_require(kvl_cuda_upload(dA, A, 16 * 16 * sizeof *A));
    grade_require(kvl_cuda_upload(dBt, Bt, 8 * 16 * sizeof *Bt));
    grade_require(kvl_step3_fragments_cuda(da, db, dd, dA, dBt));
    grade_require(kvl_cuda_download(a, da, 32 * 4 * sizeof *a));
    grade_require(kvl_cuda_download(b, db, 32 * 2 * sizeof *b));
    grade_require(kvl_cuda_download(d, dd, 32 * 4 * sizeof *d));
    kvl_cuda_free(da), kvl_cuda_free(db), kvl_cuda_free(dd), kvl_cuda_free(dA), kvl_cuda_free(dBt);
}

/* A value 16r + c the emulator handed a lane, as (row, col) */
static void place(int64_t *rc, double value)
{
    rc[0] = (int64_t)value / 16;
    rc[1] = (int64_t)value % 16;
}

/* want[32][regs][2]: A[r][c] = 16r + c and B = the identity's first 8 columns, so that a's lower
 * halves and the product d name their elements; then B[k][n] = Bt[n][k] = 16n + k names b's. */
static void fragment_expected(int64_t *wa, int64_t *wb, int64_t *wc)
{
    uint16_t A[16 * 16], Bt[8 * 16];
    uint32_t a[32 * 4], b[32 * 2];
    float d[32 * 4];
    for (int i = 0; i < 16 * 16; i++) A[i] = kvf_bf16_encode((float)i);
    for (int i = 0; i < 8 * 16; i++) Bt[i] = kvf_bf16_encode(i / 16 == i % 16 ? 1.0f : 0.0f);
    emulated_fragments(a, b, d, A, Bt);
    for (int i = 0; i < 32 * 4; i++) place(wa + 2 * i, kvf_bf16_decode((uint16_t)a[i]));
    for (int i = 0; i < 32 * 4; i++) place(wc + 2 * i, d[i]);
    for (int i = 0; i < 8 * 16; i++) Bt[i] = kvf_bf16_encode((float)i);
    emulated_fragments(a, b, d, A, Bt);
    for (int i = 0; i < 32 * 2; i++) {
        int64_t nk[2];
        place(nk, kvf_bf16_decode((uint16_t)b[i]));
        wb[2 * i] = nk[1], wb[2 * i + 1] = nk[0];
    }
}

/* got[32][regs][2] from the student's map of `matrix` */
static void fragment_answers(int64_t *got, char matrix, unsigned regs)
{
    for (unsigned lane = 0; lane < 32; lane++)
        for (unsigned i = 0; i < regs; i++) {
            unsigned row = 99, col = 99;
            fragment_map(matrix, lane, i, &row, &col);
            got[2 * (lane * regs + i)] = row, got[2 * (lane * regs + i) + 1] = col;
        }
}

static int grade_fragment_map(void)
{
    lab_grade g;
    grade_begin(&g, "fragment_map",
                "g = lane / 4, t = lane % 4: A's register i holds A[g + 8(i mod 2)][2t + 8⌊i/2⌋], "
                "B's B[2t + 8i][g], C's C[g + 8⌊i/2⌋][2t + i mod 2] (chapter 10, \"What it "
                "computes\"; the notebook's step 3)");
    kvl_cuda_quiet_faults(1);
    static int64_t wa[32 * 4 * 2], wb[32 * 2 * 2], wc[32 * 4 * 2], got[32 * 4 * 2];
    fragment_expected(wa, wb, wc);
    static const struct {
        char matrix;
        unsigned regs;
        const int64_t *want;
    } parts[] = {{'A', 4, wa}, {'B', 2, wb}, {'C', 4, wc}};
    for (size_t k = 0; k < 3 && !g.wrong; k++) {
        grade_case(&g, "matrix '%c': [lane][register][row, col]", parts[k].matrix);
        fragment_answers(got, parts[k].matrix, parts[k].regs);
        const char name[2] = {parts[k].matrix, 0};
        grade_i64(&g, &(grade_shape){name, {32, parts[k].regs, 2}, 3}, got, parts[k].want);
    }
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_split_combine, grade_fragment_map};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
