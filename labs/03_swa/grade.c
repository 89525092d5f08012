/* Chapter 3's grader: make lab-03 (your files) or make lab-03 SOLUTION=1 (the worked solutions).
 * ring_window is checked against ref/kv_ring.h's ring, window_attend against kvl_attend_ref
 * (ref/core/attend.h) over the rows ref/swa.h's window rule makes visible. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "attend.h"
#include "grade.h"
#include "kv_ring.h"
#include "lab.h"
#include "rng.h"
#include "swa.h"

/* float32 sums of Dh products and at most W weights round at about 1e-6 of the output; a key too
 * many or too few, or a wrong group or scale, moves an output by 1e-2 or more. */
#define ATOL 1e-5
#define RTOL 1e-5

#define MAX_CHUNKS 6

typedef struct {
    size_t W, D;
    size_t chunks[MAX_CHUNKS]; /* appended in turn; 0 ends the list */
} ring_case;

static const ring_case ring_cases[] = {
    {1, 3, {1, 2, 5}},       /* one slot: only the newest row */
    {4, 8, {1, 2, 5, 4, 3}}, /* below W, then laps with chunks longer than W */
    {7, 5, {3, 10, 1, 6}},   /* T = 20, not a multiple of W */
    {16, 4, {5, 6, 2}},      /* never full */
};

/* The ring's check after T appends: n against kv_ring_held, out against the held rows in order. */
static void check_ring(lab_grade *g, const kv_ring *r, size_t W, size_t D)
{
    const size_t held = kv_ring_held(r);
    float *out = grade_alloc(W * D * sizeof *out), *ref = grade_alloc(W * D * sizeof *ref);
    double *want = grade_alloc(W * D * sizeof *want);
    for (size_t i = 0; i < W * D; i++) out[i] = NAN;
    if (held && kv_ring_read(ref, r, kv_ring_oldest(r), held) != 0) abort();
    for (size_t i = 0; i < held * D; i++) want[i] = ref[i];
    grade_case(g, "W = %zu slots of D = %zu, after T = %zu appends", W, D, r->len);
    const size_t n = ring_window(out, r->rows, W, D, r->len);
    if (grade_value(g, "n (positions held)", (int64_t)n, (int64_t)held) == 0)
        grade_f32(g, &(grade_shape){"out", {held, D}, 2}, out, want, 0, 0);
    free(out), free(ref), free(want);
}

static int grade_ring_window(void)
{
    lab_grade g;
    grade_begin(&g, "ring_window",
                "position p sits in slot p mod W; after T appends the ring holds positions"
                " T − min(T, W) … T − 1 (chapter 3, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 301);
    for (size_t k = 0; k < sizeof ring_cases / sizeof ring_cases[0] && !g.wrong; k++) {
        const ring_case *c = &ring_cases[k];
        kv_ring r;
        if (kv_ring_init(&r, c->W, 1000, c->D, KV_STORE_F32) != 0 || r.slots != c->W) abort();
        check_ring(&g, &r, c->W, c->D);
        for (size_t m = 0; m < MAX_CHUNKS && c->chunks[m] && !g.wrong; m++) {
            const size_t n = c->chunks[m];
            float *rows = grade_alloc(n * c->D * sizeof *rows);
            kvl_rng_uniform_f32(&rng, rows, n * c->D, -1, 1);
            if (kv_ring_append(&r, rows, n) != 0) abort();
            check_ring(&g, &r, c->W, c->D);
            free(rows);
        }
        kv_ring_free(&r);
    }
    return grade_end(&g);
}

typedef struct {
    size_t start, S, W, H, Hkv, Dh;
    double q_scale; /* queries drawn in ±q_scale: 400 puts scores in the hundreds */
} window_case;

static const window_case window_cases[] = {
    {0, 3, 8, 4, 2, 16, 1},      /* inside the first W tokens: the window is every earlier key */
    {0, 11, 4, 8, 2, 16, 1},     /* across the first W tokens, GQA-4 */
    {29, 12, 7, 6, 1, 32, 1},    /* far past them, MQA, start + S = 41 not a multiple of W */
    {5, 9, 1, 4, 4, 8, 1},       /* W = 1: each token sees itself alone */
    {11, 6, 0, 4, 2, 16, 1},     /* W = 0: no window, every j ≤ t */
    {37, 10, 16, 4, 2, 16, 400}, /* scores in the hundreds */
};

/* want[H][Dh] = kvl_attend_ref of q[H][Dh] over key positions first … t of K and V ([.][Hkv][Dh]
 * each), packed as the cache rows [K | V] it reads */
static void expected(double *want, const float *q, size_t H, const float *K, const float *V,
                     size_t first, size_t t, size_t Hkv, size_t Dh)
{
    const size_t N = t - first + 1, width = 2 * Hkv * Dh;
    float *rows = grade_alloc(N * width * sizeof *rows), *o = grade_alloc(H * Dh * sizeof *o);
    for (size_t k = 0; k < N; k++)
        for (size_t c = 0; c < Hkv * Dh; c++) {
            rows[k * width + c] = K[(first + k) * Hkv * Dh + c];
            rows[k * width + Hkv * Dh + c] = V[(first + k) * Hkv * Dh + c];
        }
    const kvl_row_tiles view = kvl_row_tiles_f32(rows, N, width);
    const kvl_attend_rows r = {
        .N = N, .stride = width, .k_off = 0, .Dk = Dh, .v_off = Hkv * Dh, .Dv = Dh, .groups = Hkv};
    if (kvl_attend_ref(o, q, H, &view, &r, 1.0f / sqrtf((float)Dh), NULL, NULL) != 0) abort();
    for (size_t i = 0; i < H * Dh; i++) want[i] = o[i];
    free(rows), free(o);
}

static int grade_window_attend(void)
{
    lab_grade g;
    grade_begin(&g, "window_attend",
                "token i at t = start + i: o_{i,h} = Σ_{t−W < j ≤ t} softmax_j(q_{i,h}·K[j][g] / "
                "√Dh)·V[j][g],"
                " g = ⌊h/(H/Hkv)⌋, W = 0 no window (chapter 3, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 302);
    for (size_t k = 0; k < sizeof window_cases / sizeof window_cases[0] && !g.wrong; k++) {
        const window_case *c = &window_cases[k];
        const size_t N = c->start + c->S, row = c->H * c->Dh, kv = N * c->Hkv * c->Dh;
        float *q = grade_alloc(c->S * row * sizeof *q), *K = grade_alloc(kv * sizeof *K);
        float *V = grade_alloc(kv * sizeof *V), *o = grade_alloc(c->S * row * sizeof *o);
        double *want = grade_alloc(c->S * row * sizeof *want);
        kvl_rng_uniform_f32(&rng, q, c->S * row, -c->q_scale, c->q_scale);
        kvl_rng_uniform_f32(&rng, K, kv, -1, 1);
        kvl_rng_uniform_f32(&rng, V, kv, -1, 1);
        for (size_t i = 0; i < c->S; i++) {
            const size_t t = c->start + i;
            expected(want + i * row, q + i * row, c->H, K, V, swa_first_visible(t, c->W), t, c->Hkv,
                     c->Dh);
        }
        grade_case(&g,
                   "start = %zu, S = %zu, W = %zu, H = %zu, Hkv = %zu, Dh = %zu, queries in ±%g",
                   c->start, c->S, c->W, c->H, c->Hkv, c->Dh, c->q_scale);
        window_attend(o, q, K, V, c->start, c->S, c->W, c->H, c->Hkv, c->Dh);
        grade_f32(&g, &(grade_shape){"o", {c->S, c->H, c->Dh}, 3}, o, want, ATOL, RTOL);
        free(q), free(K), free(V), free(o), free(want);
    }
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_ring_window, grade_window_attend};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
