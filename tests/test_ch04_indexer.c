/* Chapter 4: the V3.2 lightning indexer and its top-k (ref/dsa.h; the half-split RoPE and
 * both scale factors of DeepSeek-V3.2 inference/model.py; ref/core/topk.h's ties), and the Walsh-Hadamard rotation of its quantised form.
 *
 * The oracles (tests/oracle_dsa.h, and the Sylvester matrix written out below) are the definitions in
 * double. The index scores are held to them by VALUE, with both scale factors, because a top-k cannot
 * see a positive factor on the head weights (shown below). Top-k is held to a full sort on rows full of
 * ties. The fp8 form is held to a bound derived from the E4M3 format.
 *
 * Toy: the MLA toy (d 64, H 4, Dq' 32, Dc 32, Dnope 16, Dr 8, Dv 16, V3's YaRN fields at
 * Dr 8) + HI 4, DI 16, K 6, T 40. The fp8 form needs DI a multiple of 128: it is tested at DI 128. */
#include "common.h"
#include "dsa.h"
#include "hadamard.h"
#include "linalg.h"
#include "threads.h"
#include "oracle_dsa.h"
#include "rng.h"
#include "status.h"
#include "topk.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOY_T 40
#define TOY_K 6
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* E4M3 keeps 4 significant bits: round to nearest moves a normal value by at most 2^-4 of itself; below
 * the normal range (|x/s| < 2^-6) the step is 2^-9·s, so the move is at most 2^-10·s. */
#define E4M3_UNIT_ROUNDOFF 0x1p-4
#define E4M3_SUBNORMAL_HALF_STEP 0x1p-10
#define E4M3_MAX 448.0

/* One RoPE rotation moves a pair's length by at most (√2 + 2)·u·‖pair‖ (ref/core/rope.h), u =
 * FLT_EPSILON/2; at position 0 the rotation is exact. */
#define ROPE_PAIR_TOL ((1.4142135623730951 + 2) * FLT_EPSILON / 2)

/* ---- helpers -------------------------------------------------------------------------------------- */

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert(p != NULL);
    return p;
}

static void ok(int rc) { ck_assert_msg(rc == KVL_OK, "status %d: %s", rc, kvl_error()); }

static dsa_config toy_config(size_t DI, size_t K)
{
    dsa_config c = {.mla = {.d = 64, .n_heads = 4, .q_lora_rank = 32, .kv_lora_rank = 32, .qk_nope = 16,
                            .qk_rope = 8, .v_head = 16, .norm_eps = 1e-6},
                    .index_n_heads = 4, .index_head_dim = DI, .index_topk = K, .index_norm_eps = DSA_INDEX_NORM_EPS};
    ok(kvl_rope_init_yarn(&c.mla.rope, 8, 1e4, 40, 4096, 32, 1));
    c.mla.softmax_scale = kvl_yarn_softmax_scale(16 + 8, 40, 1);
    return c;
}

static float *normal_f32(kvl_rng *rng, size_t n)
{
    float *x = xmalloc(n * sizeof *x);
    kvl_rng_normal_f32(rng, x, n, 1.0);
    return x;
}

static double max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) m = fmax(m, fabs(x[i]));
    return m;
}

/* The same path through H_DI/√DI on both sides: each rotated element errs by (log2 DI + 2)·u·‖v‖₁/√DI ≤
 * (log2 DI + 2)·u·‖v‖₂ (ref/hadamard.h), so the rotated vector by √DI times that, relative to ‖v‖₂; q
 * and k together add (log2 DI + 2)·√DI·FLT_EPSILON to the relative error of q·k. */
static size_t rotated_path(const dsa_config *c)
{
    const double DI = (double)c->index_head_dim;
    return oracle_dsa_index_path(c) + (size_t)ceil((log2(DI) + 2) * sqrt(DI));
}

/* Every float32 score lies within the derived bound of the oracle's (−∞ positions must match). */
static void expect_scores(const char *what, const float *got, const double *want, const double *bound, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(want[i])) {
            ck_assert_msg(got[i] == want[i], "%s [%zu]: got %g, oracle %g", what, i, (double)got[i], want[i]);
            continue;
        }
        const double err = fabs((double)got[i] - want[i]);
        ck_assert_msg(err <= bound[i], "%s [%zu]: got %.9g, oracle %.9g, error %.3g above the bound %.3g", what, i,
                      (double)got[i], want[i], err, bound[i]);
        if (bound[i] > 0) worst = fmax(worst, err / bound[i]);
    }
    printf("%s: worst error %.1f%% of its bound\n", what, 100 * worst);
}

typedef struct {
    dsa_config c;
    dsa_weights w;
    size_t T;
    float *x;                     /* [T][d] */
    oracle_dsa_layer L;
    double *xd, *q, *wt, *k;      /* the oracle's x, q_idx, w_idx, k_idx */
    double *I, *bound;            /* [T][T] */
} toy;

static void toy_setup(toy *z, size_t DI, size_t K, size_t T, uint64_t seed)
{
    *z = (toy){.c = toy_config(DI, K), .T = T};
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ok(dsa_weights_init_random(&z->w, &z->c, &rng));
    z->x = normal_f32(&rng, T * z->c.mla.d);
    z->L = oracle_dsa_of(&z->c, &z->w);
    const size_t HI = z->c.index_n_heads;
    z->xd = oracle_widen(z->x, T * z->c.mla.d);
    z->q = oracle_alloc(T * HI * DI * sizeof(double));
    z->wt = oracle_alloc(T * HI * sizeof(double));
    z->k = oracle_alloc(T * DI * sizeof(double));
    z->I = oracle_alloc(T * T * sizeof(double));
    z->bound = oracle_alloc(T * T * sizeof(double));
    oracle_dsa_index_inputs(z->q, z->wt, z->k, &z->L, z->xd, T);
    oracle_dsa_index_scores(z->I, z->q, z->wt, z->k, HI, DI, T, T);
    oracle_dsa_index_bound(z->bound, z->q, z->wt, z->k, HI, DI, T, oracle_dsa_index_path(&z->c));
}

static void toy_free(toy *z)
{
    dsa_weights_free(&z->w);
    free(z->x); free(z->xd); free(z->q); free(z->wt); free(z->k); free(z->I); free(z->bound);
}

/* ---- the Walsh-Hadamard rotation ------------------------------------------------------------------ */

/* (−1)^popcount(i & j) / √n: Sylvester's H_n, normalised */
static double sylvester(size_t i, size_t j, size_t n)
{
    return (__builtin_popcountll((unsigned long long)(i & j)) % 2 ? -1.0 : 1.0) / sqrt((double)n);
}

START_TEST(test_hadamard_matches_sylvester_matrix)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 40);
    for (size_t n = 1; n <= 256; n *= 2) {
        const size_t rows = 3;
        float *x = normal_f32(&rng, rows * n), *y = xmalloc(rows * n * sizeof *y);
        double *want = xmalloc(rows * n * sizeof *want);
        memcpy(y, x, rows * n * sizeof *y);
        ok(kvl_hadamard_rotate_rows_f32(y, rows, n));
        double atol = 0;
        for (size_t r = 0; r < rows; r++) {
            double l1 = 0;
            for (size_t i = 0; i < n; i++) {
                want[r * n + i] = 0;
                for (size_t j = 0; j < n; j++) want[r * n + i] += sylvester(i, j, n) * (double)x[r * n + j];
                l1 += fabs((double)x[r * n + i]);
            }
            /* ref/hadamard.h: (log2 n + 2)·u·‖x‖₁/√n, u = FLT_EPSILON/2 */
            atol = fmax(atol, (log2((double)n) + 2) * (FLT_EPSILON / 2) * l1 / sqrt((double)n));
        }
        char what[64];
        snprintf(what, sizeof what, "H_%zu x / sqrt(%zu)", n, n);
        kvl_expect_close(what, y, want, rows * n, atol, 0, 0);
        free(x); free(y); free(want);
    }
}
END_TEST

/* H/√n is orthonormal and symmetric: twice is the identity, and dot products survive one rotation. */
START_TEST(test_hadamard_is_its_own_inverse_and_keeps_dot_products)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 41);
    const size_t n = 128;
    float *x = normal_f32(&rng, 2 * n), *y = xmalloc(2 * n * sizeof *y);
    memcpy(y, x, 2 * n * sizeof *y);
    ok(kvl_hadamard_rotate_rows_f32(y, 2, n));
    double dot_x = 0, dot_y = 0, l1 = 0, l2a = 0, l2b = 0;
    for (size_t i = 0; i < n; i++) {
        dot_x += (double)x[i] * x[n + i];
        dot_y += (double)y[i] * y[n + i];
        l1 += fabs((double)x[i]) + fabs((double)x[n + i]);
        l2a += (double)x[i] * x[i];
        l2b += (double)x[n + i] * x[n + i];
    }
    /* each rotated element errs by (log2 n + 2)·u·‖x‖₁/√n; the dot product sums n such errors times |y| */
    const double elem = (log2((double)n) + 2) * (FLT_EPSILON / 2) * l1 / sqrt((double)n);
    ck_assert_msg(fabs(dot_y - dot_x) <= 2 * elem * sqrt((double)n) * (sqrt(l2a) + sqrt(l2b)),
                  "dot product %.9g became %.9g", dot_x, dot_y);
    ok(kvl_hadamard_rotate_rows_f32(y, 2, n));
    double *want = oracle_widen(x, 2 * n);
    kvl_expect_close("H(H x) against x", y, want, 2 * n, 2 * elem * sqrt((double)n), 0, 0);
    free(x); free(y); free(want);
}
END_TEST

START_TEST(test_hadamard_rejects_lengths_that_are_not_powers_of_two)
{
    float x[96] = {0};
    static const size_t bad[] = {0, 3, 12, 96};
    for (size_t i = 0; i < N_OF(bad); i++) {
        ck_assert_int_eq(kvl_hadamard_rotate_rows_f32(x, 1, bad[i]), KVL_EINVAL);
        ck_assert_msg(strstr(kvl_error(), "power of two") != NULL, "message: %s", kvl_error());
    }
    ok(kvl_hadamard_rotate_rows_f32(x, 0, 64));
}
END_TEST

/* ---- index scores ------------------------------------------------------------------------------------ */

START_TEST(test_index_scores_match_definition_in_value)
{
    toy z;
    toy_setup(&z, 16, TOY_K, TOY_T, 1);
    const size_t T = TOY_T, HI = 4, DI = 16, start = 7, S = T - start;
    float *I = xmalloc(T * T * sizeof *I);
    ok(dsa_indexer_f32(I, &z.c, &z.w, z.x, T));
    expect_scores("whole-sequence index scores", I, z.I, z.bound, T * T);

    /* the pieces on a chunk at positions 7 … 39 against every key */
    float *q = xmalloc(S * HI * DI * sizeof *q), *wt = xmalloc(S * HI * sizeof *wt), *k = xmalloc(T * DI * sizeof *k);
    float *Ic = xmalloc(S * T * sizeof *Ic);
    ok(dsa_index_query(q, wt, &z.c, &z.w, z.x + start * z.c.mla.d, S, start));
    ok(dsa_index_key(k, &z.c, &z.w, z.x, T, 0));
    ok(dsa_index_scores(Ic, &z.c, q, wt, k, S, T, start));
    expect_scores("chunk 7..39 index scores", Ic, z.I + start * T, z.bound + start * T, S * T);

    /* what a dropped factor would do: HI^-1/2 = 1/2 doubles every score, far outside the bound */
    printf("index scores: bound at most %.2g of max |I|; a dropped HI^-1/2 moves the largest by %.3g\n",
           max_abs(z.bound, T * T) / max_abs(z.I, T * T), max_abs(z.I, T * T));
    free(I); free(q); free(wt); free(k); free(Ic);
    toy_free(&z);
}
END_TEST

/* The scan over a long context: keys in several tiles (the last ragged), queries in several blocks, the
 * keys split into 1, 2 and 3 parts (the scan is past KVL_SPLIT_MIN_MACS), causality cutting a tile, against the definition in double over the
 * same float inputs: each score within (DI + HI + 1)·FLT_EPSILON·Σ_j |w_j|·‖q_j‖·‖k_s‖. */
START_TEST(test_index_scan_matches_definition_across_key_tiles_and_threads)
{
    const dsa_config c = toy_config(16, TOY_K);
    const size_t HI = c.index_n_heads, DI = c.index_head_dim, N = 2 * 1024 + 77, S = 130, start = N - S - 300;
    kvl_rng rng;
    kvl_rng_seed(&rng, 11);
    float *q = xmalloc(S * HI * DI * sizeof *q), *wt = xmalloc(S * HI * sizeof *wt), *k = xmalloc(N * DI * sizeof *k);
    float *I = xmalloc(S * N * sizeof *I);
    double *want = xmalloc(S * N * sizeof *want), *bound = xmalloc(S * N * sizeof *bound);
    kvl_rng_uniform_f32(&rng, q, S * HI * DI, -1.0, 1.0);
    kvl_rng_uniform_f32(&rng, wt, S * HI, -1.0, 1.0);
    kvl_rng_uniform_f32(&rng, k, N * DI, -1.0, 1.0);
    for (size_t i = 0; i < S; i++)
        for (size_t t = 0; t < N; t++) {
            double acc = 0, mag = 0, kk = 0;
            for (size_t e = 0; e < DI; e++) kk += (double)k[t * DI + e] * k[t * DI + e];
            for (size_t j = 0; j < HI; j++) {
                double dot = 0, qq = 0;
                for (size_t e = 0; e < DI; e++) {
                    dot += (double)q[(i * HI + j) * DI + e] * k[t * DI + e];
                    qq += (double)q[(i * HI + j) * DI + e] * q[(i * HI + j) * DI + e];
                }
                acc += wt[i * HI + j] * (dot > 0 ? dot : 0);
                mag += fabs(wt[i * HI + j]) * sqrt(qq) * sqrt(kk);
            }
            want[i * N + t] = t > start + i ? -INFINITY : acc;
            bound[i * N + t] = t > start + i ? 0 : (double)(DI + HI + 1) * FLT_EPSILON * mag;
        }
    const int threads = kvl_threads();
    for (int th = 1; th <= 3; th++) {
        kvl_set_threads(th);
        ck_assert_uint_eq(kvl_parts(N, 512, (double)(S * N * HI * DI)), (size_t)th);
        ok(dsa_index_scores(I, &c, q, wt, k, S, N, start));
        char what[64];
        snprintf(what, sizeof what, "index scan over %zu keys, %d part(s)", N, th);
        expect_scores(what, I, want, bound, S * N);
    }
    kvl_set_threads(threads);
    free(q); free(wt); free(k); free(I); free(want); free(bound);
}
END_TEST

/* RoPE turns only the leading Dr channels, in half-split pairs (i, i + Dr/2): the trailing DI − Dr
 * channels of a key do not depend on its position, and each half-split pair keeps its length while
 * interleaved pairs (2i, 2i + 1) do not. */
START_TEST(test_index_rope_turns_leading_half_split_pairs_only)
{
    toy z;
    toy_setup(&z, 16, TOY_K, 1, 2);
    const size_t DI = 16, Dr = 8, HI = 4;
    float k0[16], k9[16], q0[4 * 16], q9[4 * 16], wt[4];
    ok(dsa_index_key(k0, &z.c, &z.w, z.x, 1, 0));
    ok(dsa_index_key(k9, &z.c, &z.w, z.x, 1, 9));
    ok(dsa_index_query(q0, wt, &z.c, &z.w, z.x, 1, 0));
    ok(dsa_index_query(q9, wt, &z.c, &z.w, z.x, 1, 9));
    for (size_t h = 0; h <= HI; h++) {
        const float *a = h < HI ? q0 + h * DI : k0, *b = h < HI ? q9 + h * DI : k9;
        for (size_t i = Dr; i < DI; i++)
            ck_assert_msg(a[i] == b[i], "vector %zu channel %zu moved with the position", h, i);
        int some_turned = 0, interleaved_kept = 1;
        for (size_t i = 0; i < Dr / 2; i++) {
            const double len0 = hypot(a[i], a[i + Dr / 2]), len9 = hypot(b[i], b[i + Dr / 2]);
            ck_assert_msg(fabs(len0 - len9) <= ROPE_PAIR_TOL * len0, "pair (%zu, %zu) changed length", i, i + Dr / 2);
            some_turned |= a[i] != b[i];
            interleaved_kept &= fabs(hypot(a[2 * i], a[2 * i + 1]) - hypot(b[2 * i], b[2 * i + 1])) <=
                                ROPE_PAIR_TOL * hypot(a[2 * i], a[2 * i + 1]);
        }
        ck_assert_msg(some_turned, "vector %zu: the leading channels did not rotate", h);
        ck_assert_msg(!interleaved_kept, "vector %zu: interleaved pairs kept their lengths too", h);
    }
    toy_free(&z);
}
END_TEST

/* H_DI/√DI on every query head and on every key leaves each score unchanged in float. */
START_TEST(test_hadamard_on_queries_and_keys_leaves_index_scores_unchanged)
{
    toy z;
    toy_setup(&z, 16, TOY_K, TOY_T, 3);
    const size_t T = TOY_T, HI = 4, DI = 16;
    float *q = xmalloc(T * HI * DI * sizeof *q), *wt = xmalloc(T * HI * sizeof *wt), *k = xmalloc(T * DI * sizeof *k);
    float *I = xmalloc(T * T * sizeof *I), *Ir = xmalloc(T * T * sizeof *Ir);
    ok(dsa_index_query(q, wt, &z.c, &z.w, z.x, T, 0));
    ok(dsa_index_key(k, &z.c, &z.w, z.x, T, 0));
    ok(dsa_index_scores(I, &z.c, q, wt, k, T, T, 0));
    ok(kvl_hadamard_rotate_rows_f32(q, T * HI, DI));
    ok(kvl_hadamard_rotate_rows_f32(k, T, DI));
    ok(dsa_index_scores(Ir, &z.c, q, wt, k, T, T, 0));
    double *bound = xmalloc(T * T * sizeof *bound);
    oracle_dsa_index_bound(bound, z.q, z.wt, z.k, HI, DI, T, rotated_path(&z.c));
    expect_scores("rotated index scores", Ir, z.I, bound, T * T);
    /* against the unrotated float scores, both paths' errors add */
    oracle_dsa_index_bound(bound, z.q, z.wt, z.k, HI, DI, T, rotated_path(&z.c) + oracle_dsa_index_path(&z.c));
    double *Id = oracle_widen(I, T * T);
    expect_scores("rotated against unrotated index scores", Ir, Id, bound, T * T);
    free(q); free(wt); free(k); free(I); free(Ir); free(bound); free(Id);
    toy_free(&z);
}
END_TEST

/* ---- top-k ------------------------------------------------------------------------------------------- */

/* Rows of small integers (many ties), some −∞ (masked) and NaN entries, for every K from 1 past N. */
START_TEST(test_topk_matches_full_sort_when_scores_tie)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 4);
    const size_t S = 25, N = 37;
    float *I = xmalloc(S * N * sizeof *I);
    double *Id = xmalloc(N * sizeof *Id);
    for (size_t i = 0; i < S * N; i++) {
        const double u = kvl_rng_random(&rng);
        I[i] = u < 0.15 ? -INFINITY : u < 0.18 ? NAN : (float)floor(8 * kvl_rng_random(&rng)) - 3.0f;
    }
    for (size_t i = 0; i < N; i++) I[i] = 1.0f;       /* a row of one tie */
    for (size_t i = 0; i < N; i++) I[N + i] = -INFINITY; /* a row with nothing legal */
    I[2 * N + 5] = INFINITY;
    size_t ties_crossed = 0;
    for (size_t K = 1; K <= N + 5; K++) {
        int32_t *got = xmalloc(S * K * sizeof *got), *want = xmalloc(K * sizeof *want);
        ok(kvl_topk(got, I, S, N, K));
        for (size_t r = 0; r < S; r++) {
            for (size_t s = 0; s < N; s++) Id[s] = I[r * N + s];
            const size_t legal = oracle_topk_row(want, Id, N, K);
            for (size_t k = 0; k < K; k++)
                ck_assert_msg(got[r * K + k] == want[k], "K %zu row %zu slot %zu: got %d, full sort %d", K, r, k,
                              (int)got[r * K + k], (int)want[k]);
            /* count the rows where the K-th and (K+1)-th best tie: the tie rule decides them */
            if (legal > K) {
                oracle_pick *p = xmalloc(legal * sizeof *p);
                size_t n = 0;
                for (size_t s = 0; s < N; s++)
                    if (!isnan(Id[s]) && Id[s] != -INFINITY) p[n++] = (oracle_pick){Id[s], (int32_t)s};
                qsort(p, n, sizeof *p, oracle_pick_order);
                ties_crossed += p[K - 1].score == p[K].score;
                free(p);
            }
        }
        free(got); free(want);
    }
    ck_assert_msg(ties_crossed > 100, "only %zu rows cut through a tie", ties_crossed);
    free(I); free(Id);
}
END_TEST

/* Query t has t + 1 legal positions: while t + 1 ≤ K it selects all of them, ascending, then −1;
 * row 0 selects itself alone (its key is written before it is scored). */
START_TEST(test_topk_pads_with_minus_one_when_fewer_legal_positions_than_k)
{
    toy z;
    toy_setup(&z, 16, TOY_K, TOY_T, 5);
    const size_t T = TOY_T, K = TOY_K;
    float *I = xmalloc(T * T * sizeof *I);
    int32_t *sel = xmalloc(T * K * sizeof *sel);
    ok(dsa_indexer_f32(I, &z.c, &z.w, z.x, T));
    ok(kvl_topk(sel, I, T, T, K));
    for (size_t t = 0; t < K; t++)
        for (size_t k = 0; k < K; k++)
            ck_assert_msg(sel[t * K + k] == (k <= t ? (int32_t)k : -1), "row %zu slot %zu: %d", t, k, (int)sel[t * K + k]);
    free(I); free(sel);
    toy_free(&z);

    /* T = 1 with K far above it */
    toy_setup(&z, 16, 50, 1, 6);
    float I1;
    int32_t sel1[50];
    ok(dsa_indexer_f32(&I1, &z.c, &z.w, z.x, 1));
    ck_assert(isfinite(I1));
    ok(kvl_topk(sel1, &I1, 1, 1, 50));
    ck_assert_int_eq(sel1[0], 0);
    for (size_t k = 1; k < 50; k++) ck_assert_int_eq(sel1[k], -1);
    toy_free(&z);
}
END_TEST

START_TEST(test_no_query_selects_a_future_position)
{
    toy z;
    toy_setup(&z, 16, TOY_K, TOY_T, 7);
    const size_t T = TOY_T, K = TOY_K;
    float *I = xmalloc(T * T * sizeof *I);
    int32_t *sel = xmalloc(T * K * sizeof *sel), *want = xmalloc(K * sizeof *want);
    ok(dsa_indexer_f32(I, &z.c, &z.w, z.x, T));
    ok(kvl_topk(sel, I, T, T, K));
    size_t row = 0;
    ck_assert_msg(oracle_dsa_cut_is_safe(&row, z.I, z.q, z.wt, z.k, 4, 16, T, K, oracle_dsa_index_path(&z.c), 0),
                  "seed gives a near-tie at the cut of row %zu", row);
    size_t self = 0;
    for (size_t t = 0; t < T; t++) {
        size_t n = 0;
        for (size_t k = 0; k < K; k++) {
            const int32_t p = sel[t * K + k];
            if (p < 0) continue;
            ck_assert_msg((size_t)p <= t, "query %zu selects future position %d", t, (int)p);
            ck_assert_msg(k == 0 || p > sel[t * K + k - 1], "row %zu is not strictly ascending", t);
            n++;
            self += (size_t)p == t;
        }
        ck_assert_uint_eq(n, t + 1 < K ? t + 1 : K);
        oracle_topk_row(want, z.I + t * T, T, K);
        for (size_t k = 0; k < K; k++)
            ck_assert_msg(sel[t * K + k] == want[k], "row %zu slot %zu: %d, oracle %d", t, k, (int)sel[t * K + k],
                          (int)want[k]);
    }
    printf("top-%zu over %zu queries: %zu select their own position\n", K, T, self);
    free(I); free(sel); free(want);
    toy_free(&z);
}
END_TEST

/* Ranking is blind to a positive factor on the head weights: the scores scale, the
 * selection does not move. This is why the scale factors are tested by value above. */
START_TEST(test_topk_unchanged_by_positive_rescaling_of_head_weights)
{
    toy z;
    toy_setup(&z, 16, TOY_K, TOY_T, 8);
    const size_t T = TOY_T, HI = 4, DI = 16, K = TOY_K;
    float *q = xmalloc(T * HI * DI * sizeof *q), *wt = xmalloc(T * HI * sizeof *wt), *k = xmalloc(T * DI * sizeof *k);
    float *I = xmalloc(T * T * sizeof *I), *I8 = xmalloc(T * T * sizeof *I8);
    int32_t *sel = xmalloc(T * K * sizeof *sel), *sel8 = xmalloc(T * K * sizeof *sel8);
    ok(dsa_index_query(q, wt, &z.c, &z.w, z.x, T, 0));
    ok(dsa_index_key(k, &z.c, &z.w, z.x, T, 0));
    ok(dsa_index_scores(I, &z.c, q, wt, k, T, T, 0));
    for (size_t i = 0; i < T * HI; i++) wt[i] *= 8.0f; /* sqrt(HI·DI) = 8: both factors dropped */
    ok(dsa_index_scores(I8, &z.c, q, wt, k, T, T, 0));
    ok(kvl_topk(sel, I, T, T, K));
    ok(kvl_topk(sel8, I8, T, T, K));
    for (size_t i = 0; i < T * T; i++) ck_assert(I8[i] == 8.0f * I[i]);
    ck_assert(memcmp(sel, sel8, T * K * sizeof *sel) == 0);
    free(q); free(wt); free(k); free(I); free(I8); free(sel); free(sel8);
    toy_free(&z);
}
END_TEST

/* ---- the fp8 form ------------------------------------------------------------------------------------- */

/* x̂ − x for the E4M3 rounding of x[n] (n a multiple of 128) under the ue8m0 scale s ≤ 2·amax/448 of its
 * block: at most 2^-4·|x_i| + 2^-10·s. */
static void e4m3_bound(double *e, const double *x, size_t n)
{
    for (size_t b = 0; b < n; b += 128) {
        const double amax = fmax(max_abs(x + b, 128), 1e-4);
        for (size_t i = b; i < b + 128; i++)
            e[i] = E4M3_UNIT_ROUNDOFF * fabs(x[i]) + E4M3_SUBNORMAL_HALF_STEP * 2 * amax / E4M3_MAX;
    }
}

/* y[n][DI] = x rotated by H_DI/√DI, in double */
static void rotate_rows(double *y, const double *x, size_t n, size_t DI)
{
    for (size_t r = 0; r < n; r++)
        for (size_t i = 0; i < DI; i++) {
            y[r * DI + i] = 0;
            for (size_t j = 0; j < DI; j++) y[r * DI + i] += sylvester(i, j, DI) * x[r * DI + j];
        }
}

/* The fp8 index scores stay within the E4M3 bound of the definition: with q̂ = Hq + e_q, k̂ = Hk + e_k,
 * |q̂·k̂ − q·k| ≤ Σ_i |Hq|_i e_k,i + |Hk|_i e_q,i + e_q,i e_k,i, weighed by |w_j| over the heads, plus the
 * float path's own bound. The error is measured and printed. */
START_TEST(test_fp8_index_scores_within_e4m3_bound_of_definition)
{
    toy z;
    toy_setup(&z, 128, TOY_K, 24, 9);
    const size_t T = 24, HI = 4, DI = 128;
    double *qr = xmalloc(T * HI * DI * sizeof *qr), *kr = xmalloc(T * DI * sizeof *kr);
    double *eq = xmalloc(T * HI * DI * sizeof *eq), *ek = xmalloc(T * DI * sizeof *ek);
    rotate_rows(qr, z.q, T * HI, DI);
    rotate_rows(kr, z.k, T, DI);
    e4m3_bound(eq, qr, T * HI * DI);
    e4m3_bound(ek, kr, T * DI);
    double *bound = xmalloc(T * T * sizeof *bound);
    oracle_dsa_index_bound(bound, z.q, z.wt, z.k, HI, DI, T, rotated_path(&z.c));
    for (size_t t = 0; t < T; t++)
        for (size_t s = 0; s <= t; s++)
            for (size_t j = 0; j < HI; j++) {
                double e = 0;
                for (size_t i = 0; i < DI; i++) {
                    const size_t a = (t * HI + j) * DI + i, b = s * DI + i;
                    e += fabs(qr[a]) * ek[b] + fabs(kr[b]) * eq[a] + eq[a] * ek[b];
                }
                bound[t * T + s] += fabs(z.wt[t * HI + j]) * e;
            }
    float *I8 = xmalloc(T * T * sizeof *I8), *I32 = xmalloc(T * T * sizeof *I32);
    ok(dsa_indexer_fp8(I8, &z.c, &z.w, z.x, T));
    ok(dsa_indexer_f32(I32, &z.c, &z.w, z.x, T));
    expect_scores("fp8 index scores against the definition", I8, z.I, bound, T * T);
    double diff = 0, scale = max_abs(z.I, T * T);
    for (size_t i = 0; i < T * T; i++)
        if (isfinite(z.I[i])) diff = fmax(diff, fabs((double)I8[i] - (double)I32[i]));
    printf("fp8 indexer at DI 128: max |I_fp8 - I_f32| = %.3g (%.3g of max |I|)\n", diff, diff / scale);
    ck_assert_msg(diff > 0, "the fp8 scores equal the float32 ones: nothing was quantised");
    free(qr); free(kr); free(eq); free(ek); free(bound); free(I8); free(I32);
    toy_free(&z);
}
END_TEST

/* dsa_index_quantise: each vector comes back within the E4M3 bound of its rotation, on the E4M3 grid
 * of a power-of-two scale. */
START_TEST(test_index_quantise_is_rotation_then_e4m3)
{
    toy z;
    toy_setup(&z, 128, TOY_K, 1, 10);
    kvl_rng rng;
    kvl_rng_seed(&rng, 11);
    const size_t n = 6, DI = 128;
    float *v = normal_f32(&rng, n * DI);
    v[3] = 300.0f;  /* an outlier channel: the rotation spreads it */
    double *vd = oracle_widen(v, n * DI), *r = xmalloc(n * DI * sizeof *r), *e = xmalloc(n * DI * sizeof *e);
    rotate_rows(r, vd, n, DI);
    e4m3_bound(e, r, n * DI);
    /* the float rotation moves each element by δ ≤ (log2 DI + 2)·u·‖v‖₁/√DI before it is rounded, and a
     * rounding of x + δ lands within e(x) + (1 + 2^-4)·δ of x */
    double *delta = xmalloc(n * sizeof *delta);
    for (size_t row = 0; row < n; row++) {
        double l1 = 0;
        for (size_t i = 0; i < DI; i++) l1 += fabs(vd[row * DI + i]);
        delta[row] = (log2((double)DI) + 2) * (FLT_EPSILON / 2) * l1 / sqrt((double)DI);
    }
    ok(dsa_index_quantise(v, &z.c, n));
    for (size_t i = 0; i < n * DI; i++) {
        const double allowed = e[i] + (1 + E4M3_UNIT_ROUNDOFF) * delta[i / DI];
        ck_assert_msg(fabs((double)v[i] - r[i]) <= allowed, "[%zu]: %.9g, rotation %.9g, bound %.3g", i, (double)v[i],
                      r[i], allowed);
    }
    free(delta);
    /* the values are on a power-of-two E4M3 grid: at most 4 significant bits */
    for (size_t i = 0; i < n * DI; i++) {
        int ex;
        const double m = frexp(fabs((double)v[i]), &ex) * 16;
        ck_assert_msg(m == floor(m), "[%zu] = %.9g has more than 4 significant bits", i, (double)v[i]);
    }
    float bad[128] = {0};
    bad[7] = NAN;
    ck_assert_int_eq(dsa_index_quantise(bad, &z.c, 1), KVL_EINVAL);
    ck_assert(isnan(bad[7]) && bad[0] == 0.0f);
    free(v); free(vd); free(r); free(e);
    toy_free(&z);
    dsa_config small = toy_config(16, TOY_K);
    float w16[16] = {0};
    ck_assert_int_eq(dsa_index_quantise(w16, &small, 1), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "index_head_dim 16") != NULL, "message: %s", kvl_error());
}
END_TEST

/* Recall of the fp8 picks against the float32 picks: the intersection counted here from both
 * selections; exactly 1 when K covers the context. */
START_TEST(test_fp8_recall_counts_shared_picks_and_is_one_when_topk_covers_context)
{
    const size_t T = 32, topk[] = {4, 40};
    for (size_t ki = 0; ki < N_OF(topk); ki++) {
        const size_t K = topk[ki];
        toy z;
        toy_setup(&z, 128, K, T, 12);
        double recall = -1;
        ok(dsa_index_recall(&recall, &z.c, &z.w, z.x, T));
        float *I = xmalloc(T * T * sizeof *I);
        int32_t *a = xmalloc(T * K * sizeof *a), *b = xmalloc(T * K * sizeof *b);
        ok(dsa_indexer_f32(I, &z.c, &z.w, z.x, T));
        ok(kvl_topk(a, I, T, T, K));
        ok(dsa_indexer_fp8(I, &z.c, &z.w, z.x, T));
        ok(kvl_topk(b, I, T, T, K));
        size_t hit = 0, all = 0;
        for (size_t t = 0; t < T; t++)
            for (size_t i = 0; i < K; i++) {
                if (a[t * K + i] < 0) continue;
                all++;
                for (size_t j = 0; j < K; j++) hit += b[t * K + j] == a[t * K + i];
            }
        printf("fp8 top-%zu recall against float32 over %zu queries at DI 128: %.4f\n", K, T, recall);
        ck_assert_msg(recall == (double)hit / (double)all, "recall %.17g, counted %zu/%zu", recall, hit, all);
        if (K >= T) ck_assert(recall == 1.0);
        free(I); free(a); free(b);
        toy_free(&z);
    }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch04_indexer");
    TCase *h = tcase_create("hadamard");
    tcase_add_test(h, test_hadamard_matches_sylvester_matrix);
    tcase_add_test(h, test_hadamard_is_its_own_inverse_and_keeps_dot_products);
    tcase_add_test(h, test_hadamard_rejects_lengths_that_are_not_powers_of_two);
    suite_add_tcase(s, h);

    TCase *scores = tcase_create("scores");
    tcase_add_test(scores, test_index_scores_match_definition_in_value);
    tcase_add_test(scores, test_index_scan_matches_definition_across_key_tiles_and_threads);
    tcase_add_test(scores, test_index_rope_turns_leading_half_split_pairs_only);
    tcase_add_test(scores, test_hadamard_on_queries_and_keys_leaves_index_scores_unchanged);
    suite_add_tcase(s, scores);

    TCase *topk = tcase_create("topk");
    tcase_add_test(topk, test_topk_matches_full_sort_when_scores_tie);
    tcase_add_test(topk, test_topk_pads_with_minus_one_when_fewer_legal_positions_than_k);
    tcase_add_test(topk, test_no_query_selects_a_future_position);
    tcase_add_test(topk, test_topk_unchanged_by_positive_rescaling_of_head_weights);
    suite_add_tcase(s, topk);

    TCase *fp8 = tcase_create("fp8");
    tcase_add_test(fp8, test_fp8_index_scores_within_e4m3_bound_of_definition);
    tcase_add_test(fp8, test_index_quantise_is_rotation_then_e4m3);
    tcase_add_test(fp8, test_fp8_recall_counts_shared_picks_and_is_one_when_topk_covers_context);
    suite_add_tcase(s, fp8);
    return s;
}
