/* Chapter 4: DeepSeek-V3.2 sparse attention over MLA's latents (ref/dsa.h): cache paths = whole-sequence
 * forward, K ≥ t + 1 = dense MLA, the masked naive prefill = the absorbed gathered decode; its cache in float32 and in the deployed 656 + 132-byte rows.
 *
 * The oracle (tests/oracle_dsa.h) is the definition in double: the indexer, a full-sort top-k, and MLA
 * in its naive per-head form reading only the selected rows. The module's paths (whole-sequence
 * forward, chunked prefill, masked and gather decode, the three attention pieces) are each held to it
 * row by row, selections included; with K at or above the context the sparse layer is held to dense MLA.
 *
 * Toy: the MLA toy (d 64, H 4, Dq' 32, Dc 32, Dnope 16, Dr 8, Dv 16, V3's YaRN fields at
 * Dr 8) + HI 4, DI 16, K ∈ {6, ≥ T}, T 40. The deployed rows need Dc 512, Dr 64 and DI 128: they are
 * tested at those widths with d 64, H 2, HI 2. */
#include "common.h"
#include "attend.h"
#include "block.h"
#include "config.h"
#include "dsa.h"
#include "element.h"
#include "grouped.h"
#include "hadamard.h"
#include "linalg.h"
#include "threads.h"
#include "mla.h"
#include "oracle_attention.h"
#include "oracle_dsa.h"
#include "rng.h"
#include "rows.h"
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

/* The deployed bytes per token per layer (FlashMLA README; chapter 4): 656 (main row) + 132 (index key). */
#define V32_BYTES_PER_TOKEN 788

/* bf16 keeps 8 significant bits: round to nearest moves a value by at most 2^-8 of itself. */
#define BF16_UNIT_ROUNDOFF 0x1p-8
/* E4M3 keeps 4 significant bits: at most 2^-4 of a normal value; below the normal range (|x/s| < 2^-6)
 * the step is 2^-9·s, so at most 2^-10·s. */
#define E4M3_UNIT_ROUNDOFF 0x1p-4
#define E4M3_SUBNORMAL_HALF_STEP 0x1p-10
#define E4M3_MAX 448.0

/* The chapter program prints its toy losses (about 25 nats summed over 40 queries) to 4 decimals: 5e-5
 * of printing, plus float32 paths of a few hundred reductions that leave each probability within
 * 1e-4 relative, which moves one query's KL by at most 2e-4 and the sum of 40 by 8e-3. */
#define PRINTED_LOSS_TOL 1e-2

/* ---- helpers -------------------------------------------------------------------------------------- */

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert(p != NULL);
    return p;
}

static void ok(int rc) { ck_assert_msg(rc == KVL_OK, "status %d: %s", rc, kvl_error()); }

static dsa_config toy_config(size_t K)
{
    dsa_config c = {.mla = {.d = 64, .n_heads = 4, .q_lora_rank = 32, .kv_lora_rank = 32, .qk_nope = 16,
                            .qk_rope = 8, .v_head = 16, .norm_eps = 1e-6},
                    .index_n_heads = 4, .index_head_dim = 16, .index_topk = K, .index_norm_eps = DSA_INDEX_NORM_EPS};
    ok(kvl_rope_init_yarn(&c.mla.rope, 8, 1e4, 40, 4096, 32, 1));
    c.mla.softmax_scale = kvl_yarn_softmax_scale(16 + 8, 40, 1);
    return c;
}

/* the widths of the deployed rows, everything else small */
static dsa_config native_config(size_t K)
{
    dsa_config c = {.mla = {.d = 64, .n_heads = 2, .q_lora_rank = 32, .kv_lora_rank = 512, .qk_nope = 16,
                            .qk_rope = 64, .v_head = 16, .norm_eps = 1e-6},
                    .index_n_heads = 2, .index_head_dim = 128, .index_topk = K, .index_norm_eps = DSA_INDEX_NORM_EPS};
    ok(kvl_rope_init_yarn(&c.mla.rope, 64, 1e4, 40, 4096, 32, 1));
    c.mla.softmax_scale = kvl_yarn_softmax_scale(16 + 64, 40, 1);
    return c;
}

static double max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) m = fmax(m, fabs(x[i]));
    return m;
}

/* ---- tolerances ------------------------------------------------------------------------------------ */

/* As for MLA (tests/test_ch02_mla.c): a float32 stage of reduction length n errs by at most n·u of the
 * sum of |terms| (u = FLT_EPSILON/2), the stages' relative errors add along the path, and the softmax
 * turns a logit error δ into a relative weight error of at most 2δ, so paths through it are widened by
 * (1 + 2·max|logit|). The tolerance is relative to the largest |oracle| element compared. */
static double path_tol(size_t reduction_length, double max_logit)
{
    return (double)reduction_length * FLT_EPSILON * (1.0 + 2.0 * max_logit);
}

/* stages of one output row: W_DQ (d), RMSNorm and W_UQ (Dq' each), W_UK (Dc, or Dnope absorbed), the
 * score (Dc+Dr), the weighted sum (N keys at most), W_UV (Dc), W_O (H·Dv), and the RMSNorm of c_kv (Dc) */
static size_t out_path(const dsa_config *c, size_t N)
{
    const mla_config *m = &c->mla;
    return m->d + 2 * m->q_lora_rank + m->kv_lora_rank + m->qk_nope + m->kv_lora_rank + m->qk_rope + N +
           m->kv_lora_rank + m->n_heads * m->v_head + m->kv_lora_rank;
}

static void expect_rows(const char *what, const float *got, const double *want, size_t n, double tol)
{
    kvl_expect_close(what, got, want, n, tol * max_abs(want, n), 0, 1.0 - tol);
}

static void expect_same_selection(const char *what, const int32_t *got, const int32_t *want, size_t rows, size_t K)
{
    for (size_t i = 0; i < rows * K; i++)
        ck_assert_msg(got[i] == want[i], "%s: row %zu slot %zu selects %d, expected %d", what, i / K, i % K,
                      (int)got[i], (int)want[i]);
}

/* ---- fixtures ------------------------------------------------------------------------------------- */

typedef struct {
    dsa_config c;
    dsa_weights w;
    size_t T;
    float *x;               /* [T][d] */
    oracle_dsa_layer L;
    double *xd, *rows;      /* x and the oracle's rows [T][Dc+Dr] */
    double *I;              /* the oracle's index scores [T][T] */
    int32_t *sel;           /* the oracle's selection [T][K] */
    double *out;            /* the oracle's output [T][d] */
    double out_tol;
} toy;

/* The oracle end to end: its index scores, full-sort selections and output. */
static void toy_setup_config(toy *z, dsa_config c, size_t T, uint64_t seed)
{
    *z = (toy){.c = c, .T = T};
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ok(dsa_weights_init_random(&z->w, &z->c, &rng));
    z->x = xmalloc(T * z->c.mla.d * sizeof *z->x);
    kvl_rng_normal_f32(&rng, z->x, T * z->c.mla.d, 1.0);
    z->L = oracle_dsa_of(&z->c, &z->w);
    const size_t K = z->c.index_topk;
    z->xd = oracle_widen(z->x, T * z->c.mla.d);
    z->rows = oracle_alloc(T * (z->c.mla.kv_lora_rank + z->c.mla.qk_rope) * sizeof(double));
    z->I = oracle_alloc(T * T * sizeof(double));
    z->sel = oracle_alloc(T * K * sizeof(int32_t));
    z->out = oracle_alloc(T * z->c.mla.d * sizeof(double));
    oracle_dsa_indexer(z->I, &z->L, z->xd, T);
    for (size_t t = 0; t < T; t++) oracle_topk_row(z->sel + t * K, z->I + t * T, T, K);
    oracle_dsa_rows(z->rows, &z->L, z->xd, T);
    double max_logit = 0;
    oracle_dsa_attend(z->out, &max_logit, &z->L, z->xd, z->rows, z->sel, T);
    z->out_tol = path_tol(out_path(&z->c, T < K ? T : K), max_logit);
}

/* The toy, with a check that float32 rounding cannot change any row's top-K: the worst-case bound is
 * far above the errors seen, so some seeds put two scores within it at a cut; such a seed is refused
 * here rather than left to fail on another machine's BLAS. */
static void toy_setup(toy *z, size_t K, size_t T, uint64_t seed)
{
    toy_setup_config(z, toy_config(K), T, seed);
    const size_t HI = z->c.index_n_heads, DI = z->c.index_head_dim;
    double *q = oracle_alloc(T * HI * DI * sizeof *q), *wt = oracle_alloc(T * HI * sizeof *wt);
    double *k = oracle_alloc(T * DI * sizeof *k);
    oracle_dsa_index_inputs(q, wt, k, &z->L, z->xd, T);
    size_t row = 0;
    ck_assert_msg(oracle_dsa_cut_is_safe(&row, z->I, q, wt, k, HI, DI, T, K, oracle_dsa_index_path(&z->c), 0),
                  "seed %llu gives a near-tie at the top-%zu cut of row %zu", (unsigned long long)seed, K, row);
    free(q); free(wt); free(k);
}

static void toy_free(toy *z)
{
    dsa_weights_free(&z->w);
    free(z->x); free(z->xd); free(z->rows); free(z->I); free(z->sel); free(z->out);
}

typedef int (*decode_fn)(float *, int32_t *, const dsa_config *, const dsa_weights *, dsa_cache *, const float *);

/* out[T][d] and sel[T][K]: the first P tokens prefilled in one chunk, the rest decoded one by one */
static void run_prefix_then_decode(float *out, int32_t *sel, const toy *z, size_t P, decode_fn decode,
                                   dsa_cache_format fmt)
{
    const size_t d = z->c.mla.d, K = z->c.index_topk;
    dsa_cache cache;
    ok(dsa_cache_init(&cache, &z->c, z->T, fmt));
    ok(dsa_prefill(out, sel, &z->c, &z->w, &cache, z->x, P));
    for (size_t t = P; t < z->T; t++) ok(decode(out + t * d, sel + t * K, &z->c, &z->w, &cache, z->x + t * d));
    ck_assert_uint_eq(cache.len, z->T);
    dsa_cache_free(&cache);
}

/* out[T][d] and sel[T][K] from prefill chunks of the given lengths (summing to T) */
static void run_chunks(float *out, int32_t *sel, const toy *z, const size_t *lengths, size_t n, dsa_cache_format fmt)
{
    const size_t d = z->c.mla.d, K = z->c.index_topk;
    dsa_cache cache;
    ok(dsa_cache_init(&cache, &z->c, z->T, fmt));
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        ok(dsa_prefill(out + at * d, sel + at * K, &z->c, &z->w, &cache, z->x + at * d, lengths[i]));
        at += lengths[i];
    }
    ck_assert_uint_eq(at, z->T);
    dsa_cache_free(&cache);
}

/* ---- whole sequence ---------------------------------------------------------------------------------- */

START_TEST(test_forward_matches_definition_when_topk_below_context)
{
    toy z;
    toy_setup(&z, TOY_K, TOY_T, 13);
    const size_t T = TOY_T, d = z.c.mla.d, K = TOY_K;
    float *out = xmalloc(T * d * sizeof *out);
    int32_t *sel = xmalloc(T * K * sizeof *sel);
    ok(dsa_forward(out, sel, &z.c, &z.w, z.x, T));
    expect_same_selection("forward selections against the full sort", sel, z.sel, T, K);
    expect_rows("forward against the definition, K 6", out, z.out, T * d, z.out_tol);

    /* not trivially true: the sparse output differs from dense MLA's once t + 1 > K */
    double *dense = xmalloc(T * d * sizeof *dense);
    oracle_mla(dense, &z.L.mla, z.xd, T);
    double moved = 0;
    for (size_t i = K * d; i < T * d; i++) moved = fmax(moved, fabs(dense[i] - z.out[i]));
    ck_assert_msg(moved > 100 * z.out_tol * max_abs(z.out, T * d), "sparse and dense outputs agree (%.3g)", moved);
    free(out); free(sel); free(dense);
    toy_free(&z);
}
END_TEST

/* K ≥ t + 1 for every row: every legal position is selected, and the layer is dense MLA (P7). */
START_TEST(test_forward_matches_dense_mla_when_topk_covers_context)
{
    static const size_t topk[] = {TOY_T, 64};
    for (size_t ki = 0; ki < N_OF(topk); ki++) {
        const size_t K = topk[ki], T = TOY_T;
        toy z;
        toy_setup(&z, K, T, 2);
        const size_t d = z.c.mla.d;
        float *out = xmalloc(T * d * sizeof *out), *mla = xmalloc(T * d * sizeof *mla);
        int32_t *sel = xmalloc(T * K * sizeof *sel);
        double *dense = xmalloc(T * d * sizeof *dense);
        ok(dsa_forward(out, sel, &z.c, &z.w, z.x, T));
        for (size_t t = 0; t < T; t++)
            for (size_t k = 0; k < K; k++)
                ck_assert_int_eq(sel[t * K + k], k <= t ? (int32_t)k : -1);
        oracle_mla(dense, &z.L.mla, z.xd, T);
        expect_rows("forward with K >= T against dense MLA's definition", out, dense, T * d, z.out_tol);
        ok(mla_forward(mla, &z.c.mla, &z.w.mla, z.x, T));
        double *mla_d = oracle_widen(mla, T * d);
        expect_rows("forward with K >= T against mla_forward", out, mla_d, T * d, 2 * z.out_tol);
        free(out); free(mla); free(sel); free(dense); free(mla_d);
        toy_free(&z);
    }
}
END_TEST

/* ---- masked = gather, piece by piece ---------------------------------------------------------------- */

/* o[S][H][Dv] of each formulation, projected by W_O in double, against the oracle over the same rows */
static void check_formulations(const toy *z, const int32_t *sel, const double *want, double tol, const char *which)
{
    const size_t T = z->T, H = z->c.mla.n_heads, Dv = z->c.mla.v_head, d = z->c.mla.d;
    const size_t Dw = z->c.mla.kv_lora_rank + z->c.mla.qk_rope, Dqk = z->c.mla.qk_nope + z->c.mla.qk_rope;
    float *q = xmalloc(T * H * Dqk * sizeof *q), *rows = xmalloc(T * Dw * sizeof *rows);
    float *o = xmalloc(T * H * Dv * sizeof *o);
    double *od = xmalloc(H * Dv * sizeof *od), *out = xmalloc(T * d * sizeof *out);
    ok(mla_query(q, &z->c.mla, &z->w.mla, z->x, T, 0));
    ok(mla_latent(rows, &z->c.mla, &z->w.mla, z->x, T, 0));
    typedef int (*attend)(float *, const dsa_config *, const dsa_weights *, const float *, const float *,
                          const int32_t *, size_t, size_t);
    static const struct { const char *name; attend fn; } forms[] = {
        {"masked naive", dsa_attend_masked_naive},
        {"masked absorbed", dsa_attend_masked_absorbed},
        {"gather", dsa_attend_gather},
    };
    for (size_t f = 0; f < N_OF(forms); f++) {
        ok(forms[f].fn(o, &z->c, &z->w, q, rows, sel, T, T));
        for (size_t t = 0; t < T; t++) {
            for (size_t i = 0; i < H * Dv; i++) od[i] = o[t * H * Dv + i];
            oracle_matvec(out + t * d, z->L.mla.w_o, od, d, H * Dv);
        }
        char what[128];
        snprintf(what, sizeof what, "%s attention, %s, against the definition", forms[f].name, which);
        kvl_expect_close_f64(what, out, want, T * d, tol * max_abs(want, T * d), 0, 1.0 - tol);
    }
    free(q); free(rows); free(o); free(od); free(out);
}

START_TEST(test_gather_matches_mask_for_indexer_selection)
{
    toy z;
    toy_setup(&z, TOY_K, TOY_T, 3);
    check_formulations(&z, z.sel, z.out, z.out_tol, "the indexer's picks");
    toy_free(&z);
}
END_TEST

/* Any selection, not only the indexer's: random subsets with gaps, −1 anywhere in a row, empty rows
 * (output 0 in every formulation), over 2·KVL_QUERY_BLOCK + 31 queries, so that the masked naive form
 * runs blocks of queries that each read up to their furthest pick (ref/mla.h). */
START_TEST(test_gather_matches_mask_for_any_selection)
{
    toy z;
    const size_t T = 2 * KVL_QUERY_BLOCK + 31, K = TOY_K;
    toy_setup_config(&z, toy_config(K), T, 14);
    int32_t *sel = xmalloc(T * K * sizeof *sel);
    kvl_rng rng;
    kvl_rng_seed(&rng, 44);
    for (size_t t = 0; t < T; t++)
        for (size_t k = 0; k < K; k++) {
            const double u = kvl_rng_random(&rng);
            sel[t * K + k] = t % 9 == 4 || u < 0.3 ? -1 : (int32_t)(kvl_rng_random(&rng) * (double)(t + 1));
            for (size_t j = 0; j < k; j++)
                if (sel[t * K + j] == sel[t * K + k]) sel[t * K + k] = -1; /* a position once */
        }
    double max_logit = 0;
    oracle_dsa_attend(z.out, &max_logit, &z.L, z.xd, z.rows, sel, T);
    check_formulations(&z, sel, z.out, path_tol(out_path(&z.c, K), max_logit), "random picks");
    for (size_t i = 4 * z.c.mla.d; i < 5 * z.c.mla.d; i++) ck_assert(z.out[i] == 0.0);

    int32_t bad[TOY_K] = {0, 1, 2, 3, 4, TOY_T};
    float o[4 * 16], q[4 * 24] = {0}, rows[TOY_T * 40] = {0};
    ck_assert_int_eq(dsa_attend_gather(o, &z.c, &z.w, q, rows, bad, 1, TOY_T), KVL_EINVAL);
    ck_assert_int_eq(dsa_attend_masked_naive(o, &z.c, &z.w, q, rows, bad, 1, TOY_T), KVL_EINVAL);
    bad[5] = -2;
    ck_assert_int_eq(dsa_attend_masked_absorbed(o, &z.c, &z.w, q, rows, bad, 1, TOY_T), KVL_EINVAL);
    free(sel);
    toy_free(&z);
}
END_TEST

/* ---- incremental ---------------------------------------------------------------------------------- */

START_TEST(test_decode_gather_and_decode_masked_match_definition)
{
    toy z;
    toy_setup(&z, TOY_K, TOY_T, 5);
    const size_t T = TOY_T, d = z.c.mla.d, K = TOY_K;
    float *out = xmalloc(T * d * sizeof *out);
    int32_t *sel = xmalloc(T * K * sizeof *sel);
    static const struct { const char *name; decode_fn fn; } forms[] = {
        {"decode_gather", dsa_decode_gather},
        {"decode_masked", dsa_decode_masked},
    };
    for (size_t f = 0; f < N_OF(forms); f++) {
        run_prefix_then_decode(out, sel, &z, 0, forms[f].fn, DSA_CACHE_F32);
        expect_same_selection(forms[f].name, sel, z.sel, T, K);
        expect_rows(forms[f].name, out, z.out, T * d, z.out_tol);
    }
    free(out); free(sel);
    toy_free(&z);
}
END_TEST

/* P7: the selection a decode step makes for position t is the selection row t of a prefill makes. */
START_TEST(test_decode_step_selections_equal_prefill_row_selections)
{
    toy z;
    toy_setup(&z, TOY_K, TOY_T, 16);
    const size_t T = TOY_T, d = z.c.mla.d, K = TOY_K;
    float *out = xmalloc(T * d * sizeof *out);
    int32_t *prefilled = xmalloc(T * K * sizeof *prefilled), *decoded = xmalloc(T * K * sizeof *decoded);
    dsa_cache cache;
    ok(dsa_cache_init(&cache, &z.c, T, DSA_CACHE_F32));
    ok(dsa_prefill(out, prefilled, &z.c, &z.w, &cache, z.x, T));
    dsa_cache_free(&cache);
    run_prefix_then_decode(out, decoded, &z, 1, dsa_decode_gather, DSA_CACHE_F32);
    expect_same_selection("decode steps against one prefill of the whole sequence", decoded, prefilled, T, K);
    free(out); free(prefilled); free(decoded);
    toy_free(&z);
}
END_TEST

START_TEST(test_prefill_then_decode_matches_forward_when_any_prefix)
{
    toy z;
    toy_setup(&z, TOY_K, TOY_T, 7);
    const size_t T = TOY_T, d = z.c.mla.d, K = TOY_K;
    float *out = xmalloc(T * d * sizeof *out);
    int32_t *sel = xmalloc(T * K * sizeof *sel);
    static const size_t prefixes[] = {1, 5, 6, 7, 23, 39, 40};
    for (size_t i = 0; i < N_OF(prefixes); i++) {
        run_prefix_then_decode(out, sel, &z, prefixes[i], dsa_decode_gather, DSA_CACHE_F32);
        char what[64];
        snprintf(what, sizeof what, "prefill %zu then decode", prefixes[i]);
        expect_same_selection(what, sel, z.sel, T, K);
        expect_rows(what, out, z.out, T * d, z.out_tol);
    }
    free(out); free(sel);
    toy_free(&z);
}
END_TEST

START_TEST(test_chunked_prefill_matches_forward_when_any_split)
{
    toy z;
    toy_setup(&z, TOY_K, TOY_T, 18);
    const size_t T = TOY_T, d = z.c.mla.d, K = TOY_K;
    float *out = xmalloc(T * d * sizeof *out);
    int32_t *sel = xmalloc(T * K * sizeof *sel);
    static const size_t split_a[] = {13, 1, 9, 17}, split_b[] = {5, 2, 33}, split_c[] = {40};
    static const struct { const size_t *lengths; size_t n; const char *name; } splits[] = {
        {split_a, N_OF(split_a), "chunks 13+1+9+17"},
        {split_b, N_OF(split_b), "chunks 5+2+33"},
        {split_c, N_OF(split_c), "one chunk of 40"},
    };
    for (size_t i = 0; i < N_OF(splits); i++) {
        run_chunks(out, sel, &z, splits[i].lengths, splits[i].n, DSA_CACHE_F32);
        expect_same_selection(splits[i].name, sel, z.sel, T, K);
        expect_rows(splits[i].name, out, z.out, T * d, z.out_tol);
    }
    free(out); free(sel);
    toy_free(&z);
}
END_TEST

/* T = 1: the only legal position is the token itself (its key is written before it is scored). */
START_TEST(test_single_token_matches_definition_when_T_is_1)
{
    toy z;
    toy_setup(&z, TOY_K, 1, 9);
    const size_t d = z.c.mla.d, K = TOY_K;
    float out[64];
    int32_t sel[TOY_K];
    ok(dsa_forward(out, sel, &z.c, &z.w, z.x, 1));
    ck_assert_int_eq(sel[0], 0);
    for (size_t k = 1; k < K; k++) ck_assert_int_eq(sel[k], -1);
    expect_rows("forward at T = 1", out, z.out, d, z.out_tol);
    static const decode_fn decoders[] = {dsa_decode_gather, dsa_decode_masked};
    for (size_t f = 0; f < N_OF(decoders); f++) {
        dsa_cache cache;
        memset(sel, 0x7f, sizeof sel);
        ok(dsa_cache_init(&cache, &z.c, 1, DSA_CACHE_F32));
        ok(decoders[f](out, sel, &z.c, &z.w, &cache, z.x));
        ck_assert_int_eq(sel[0], 0);
        ck_assert_int_eq(sel[K - 1], -1);
        expect_rows("first decode step into an empty cache", out, z.out, d, z.out_tol);
        dsa_cache_free(&cache);
    }
    toy_free(&z);
}
END_TEST

/* ---- the cache ---------------------------------------------------------------------------------------- */

START_TEST(test_live_bytes_equal_788_per_token_per_layer)
{
    toy z;
    toy_setup_config(&z, native_config(TOY_K), 12, 10);
    dsa_cache cache;
    float out[5 * 64];
    ok(dsa_cache_init(&cache, &z.c, 12, DSA_CACHE_V32));
    ck_assert_uint_eq(dsa_cache_bytes_used(&cache), 0);
    ok(dsa_prefill(out, NULL, &z.c, &z.w, &cache, z.x, 5));
    ck_assert_uint_eq(dsa_cache_bytes_used(&cache), 5 * V32_BYTES_PER_TOKEN);
    for (size_t t = 5; t < 12; t++) {
        ok(dsa_decode_gather(out, NULL, &z.c, &z.w, &cache, z.x + t * 64));
        ck_assert_uint_eq(dsa_cache_bytes_used(&cache), (t + 1) * V32_BYTES_PER_TOKEN);
    }
    dsa_cache_free(&cache);

    /* float32: (Dc + Dr + DI)·4 bytes per token */
    ok(dsa_cache_init(&cache, &z.c, 12, DSA_CACHE_F32));
    ok(dsa_prefill(out, NULL, &z.c, &z.w, &cache, z.x, 3));
    ck_assert_uint_eq(dsa_cache_bytes_used(&cache), 3 * (512 + 64 + 128) * sizeof(float));
    dsa_cache_free(&cache);
    toy_free(&z);

    /* the V3.2 config has the rows' widths, and its 61 layers hold 48,068 bytes per token */
    kvl_model m;
    dsa_config c;
    ok(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v3.2-exp.json")));
    ok(dsa_config_from_model(&c, &m));
    ck_assert_uint_eq(c.index_n_heads, 64);
    ck_assert_uint_eq(c.index_head_dim, 128);
    ck_assert_uint_eq(c.index_topk, 2048);
    ok(dsa_cache_init(&cache, &c, 4, DSA_CACHE_V32));
    ck_assert_uint_eq(m.n_layers * V32_BYTES_PER_TOKEN, 48068);
    dsa_cache_free(&cache);
    kvl_model_free(&m);
}
END_TEST

/* E4M3 bound of x[n] under the power-of-two scales of its 128-blocks (s ≤ 2·amax/448) */
static double e4m3_error_bound(const float *x, size_t i, size_t block_start)
{
    double amax = 1e-4;
    for (size_t j = block_start; j < block_start + 128; j++) amax = fmax(amax, fabs((double)x[j]));
    return E4M3_UNIT_ROUNDOFF * fabs((double)x[i]) + E4M3_SUBNORMAL_HALF_STEP * 2 * amax / E4M3_MAX;
}

static int is_power_of_two(float s)
{
    int e;
    return s > 0 && frexpf(s, &e) == 0.5f;
}

/* Each field of the deployed rows decodes within its format's bound of the float32 value it stores:
 * the latent within E4M3's (2^-4 relative, 2^-10 of the scale below the normal range), the RoPE key
 * within bf16's (2^-8), the index key, rotated by H_DI/√DI first, within E4M3's; every scale is a
 * power of two; and the key decodes to exactly the fp8 indexer's view of it (dsa_index_quantise). */
START_TEST(test_native_rows_dequantise_within_format_bounds)
{
    toy z;
    const size_t T = 12, Dc = 512, Dr = 64, DI = 128, Dw = Dc + Dr;
    toy_setup_config(&z, native_config(TOY_K), T, 11);
    dsa_cache cache;
    float *out = xmalloc(T * 64 * sizeof *out);
    ok(dsa_cache_init(&cache, &z.c, T, DSA_CACHE_V32));
    ok(dsa_prefill(out, NULL, &z.c, &z.w, &cache, z.x, T));
    float *rows = xmalloc(T * Dw * sizeof *rows), *keys = xmalloc(T * DI * sizeof *keys);
    float *view = xmalloc(T * DI * sizeof *view), *got = xmalloc(Dw * sizeof *got);
    ok(mla_latent(rows, &z.c.mla, &z.w.mla, z.x, T, 0));
    ok(dsa_index_key(keys, &z.c, &z.w, z.x, T, 0));
    memcpy(view, keys, T * DI * sizeof *view);
    ok(dsa_index_quantise(view, &z.c, T));
    double worst[3] = {0};
    for (size_t t = 0; t < T; t++) {
        const uint8_t *main_row = cache.main_rows + t * kvf_row_bytes(KVF_ROW_V32_MAIN);
        const uint8_t *key_row = cache.index_rows + t * kvf_row_bytes(KVF_ROW_V32_INDEX);
        ck_assert_int_eq(kvf_row_unpack(KVF_ROW_V32_MAIN, got, main_row), KVF_OK);
        const float *c_kv = rows + t * Dw;
        for (size_t i = 0; i < Dc; i++) {
            const double e = fabs((double)got[i] - c_kv[i]), b = e4m3_error_bound(c_kv, i, i / 128 * 128);
            ck_assert_msg(e <= b, "token %zu latent %zu: %.9g stored as %.9g (bound %.3g)", t, i, (double)c_kv[i],
                          (double)got[i], b);
            worst[0] = fmax(worst[0], e / b);
        }
        for (size_t i = Dc; i < Dw; i++) {
            const double e = fabs((double)got[i] - c_kv[i]), b = BF16_UNIT_ROUNDOFF * fabs((double)c_kv[i]);
            ck_assert_msg(e <= b, "token %zu rope %zu: %.9g stored as %.9g", t, i - Dc, (double)c_kv[i], (double)got[i]);
            if (b > 0) worst[1] = fmax(worst[1], e / b);
        }
        for (size_t j = 0; j < Dc / 128; j++) {
            float s;
            memcpy(&s, main_row + Dc + 4 * j, sizeof s);
            ck_assert_msg(is_power_of_two(s), "token %zu latent scale %zu = %g", t, j, (double)s);
        }
        /* the key: rotation, then E4M3 */
        float rotated[128], key[128], s;
        memcpy(rotated, keys + t * DI, sizeof rotated);
        ok(kvl_hadamard_rotate_rows_f32(rotated, 1, DI));
        ck_assert_int_eq(kvf_row_unpack(KVF_ROW_V32_INDEX, key, key_row), KVF_OK);
        for (size_t i = 0; i < DI; i++) {
            const double e = fabs((double)key[i] - rotated[i]), b = e4m3_error_bound(rotated, i, 0);
            ck_assert_msg(e <= b, "token %zu index key %zu: %.9g stored as %.9g", t, i, (double)rotated[i], (double)key[i]);
            worst[2] = fmax(worst[2], e / b);
            ck_assert_msg(key[i] == view[t * DI + i], "token %zu index key %zu: %.9g, the fp8 view %.9g", t, i,
                          (double)key[i], (double)view[t * DI + i]);
        }
        memcpy(&s, key_row + DI, sizeof s);
        ck_assert_msg(is_power_of_two(s), "token %zu index scale = %g", t, (double)s);
    }
    printf("v32 rows: worst error / bound: latent %.2f, rope %.2f, index key %.2f\n", worst[0], worst[1], worst[2]);
    dsa_cache_free(&cache);
    free(out); free(rows); free(keys); free(view); free(got);
    toy_free(&z);
}
END_TEST

/* A V32 cache runs the fp8 indexer: one prefill of the whole sequence selects what dsa_indexer_fp8's
 * top-k selects (the same projections on the same shapes, then the bytes). */
START_TEST(test_native_prefill_selects_as_the_fp8_indexer)
{
    toy z;
    const size_t T = 24, K = TOY_K, d = 64;
    toy_setup_config(&z, native_config(K), T, 12);
    float *out = xmalloc(T * d * sizeof *out), *I = xmalloc(T * T * sizeof *I);
    int32_t *sel = xmalloc(T * K * sizeof *sel), *want = xmalloc(T * K * sizeof *want);
    dsa_cache cache;
    ok(dsa_cache_init(&cache, &z.c, T, DSA_CACHE_V32));
    ok(dsa_prefill(out, sel, &z.c, &z.w, &cache, z.x, T));
    dsa_cache_free(&cache);
    ok(dsa_indexer_fp8(I, &z.c, &z.w, z.x, T));
    ok(kvl_topk(want, I, T, T, K));
    expect_same_selection("v32 prefill against dsa_indexer_fp8", sel, want, T, K);
    double recall;
    ok(dsa_index_recall(&recall, &z.c, &z.w, z.x, T));
    printf("v32 cache at Dc 512, DI 128: fp8 top-%zu recall against float32 %.4f\n", K, recall);
    free(out); free(I); free(sel); free(want);
    toy_free(&z);
}
END_TEST

/* Decoding from the deployed rows is attention over what the rows decode to: the oracle re-run on the
 * decoded rows, with the decode step's own (legal) selections, matches both decode forms. */
START_TEST(test_native_decode_matches_definition_over_decoded_rows)
{
    toy z;
    const size_t T = 20, K = TOY_K, d = 64, Dw = 576;
    toy_setup_config(&z, native_config(K), T, 13);
    float *out = xmalloc(T * d * sizeof *out), *out2 = xmalloc(T * d * sizeof *out2), *row = xmalloc(Dw * sizeof *row);
    int32_t *sel = xmalloc(T * K * sizeof *sel), *sel2 = xmalloc(T * K * sizeof *sel2);
    dsa_cache cache;
    ok(dsa_cache_init(&cache, &z.c, T, DSA_CACHE_V32));
    ok(dsa_prefill(out, sel, &z.c, &z.w, &cache, z.x, 4));
    for (size_t t = 4; t < T; t++) ok(dsa_decode_gather(out + t * d, sel + t * K, &z.c, &z.w, &cache, z.x + t * d));
    for (size_t t = 0; t < T; t++) {
        ck_assert_int_eq(kvf_row_unpack(KVF_ROW_V32_MAIN, row, cache.main_rows + t * kvf_row_bytes(KVF_ROW_V32_MAIN)),
                         KVF_OK);
        for (size_t i = 0; i < Dw; i++) z.rows[t * Dw + i] = row[i];
        size_t n = 0;
        for (size_t k = 0; k < K; k++)
            if (sel[t * K + k] >= 0) {
                ck_assert_msg((size_t)sel[t * K + k] <= t, "query %zu selects %d", t, (int)sel[t * K + k]);
                n++;
            }
        ck_assert_uint_eq(n, t + 1 < K ? t + 1 : K);
    }
    dsa_cache_free(&cache);
    double max_logit = 0;
    oracle_dsa_attend(z.out, &max_logit, &z.L, z.xd, z.rows, sel, T);
    const double tol = path_tol(out_path(&z.c, K), max_logit);
    expect_rows("v32 prefill 4 + decode_gather against the definition over decoded rows", out, z.out, T * d, tol);
    run_prefix_then_decode(out2, sel2, &z, 4, dsa_decode_masked, DSA_CACHE_V32);
    expect_same_selection("v32 decode_masked against decode_gather", sel2, sel, T, K);
    expect_rows("v32 decode_masked against the definition over decoded rows", out2, z.out, T * d, tol);
    free(out); free(out2); free(row); free(sel); free(sel2);
    toy_free(&z);
}
END_TEST

/* dsa_attend_picks over deployed rows: 1,100 picks of 2,000 held positions, unsorted and some repeated,
 * then −1s, read where the cache holds them by each thread's part (16 heads: the step splits on two),
 * against the definition in double over the rows the format library decodes; a bad pick is refused. */
START_TEST(test_attend_picks_reads_held_rows_where_they_are_on_every_thread)
{
    enum { T = 2000, K = 1100, H = 16, Dc = 512, Dw = 576 };
    dsa_config c = native_config(K);
    c.mla.n_heads = H;
    dsa_cache cache;
    ok(dsa_cache_init(&cache, &c, T, DSA_CACHE_V32));
    kvl_rng rng;
    kvl_rng_seed(&rng, 77);
    float *x = xmalloc(T * Dw * sizeof *x), *q = xmalloc(H * Dw * sizeof *q);
    float *one = xmalloc(H * Dc * sizeof *one), *two = xmalloc(H * Dc * sizeof *two);
    kvl_rng_normal_f32(&rng, x, T * Dw, 1.0);
    kvl_rng_normal_f32(&rng, q, H * Dw, 0.05);
    const size_t b = kvf_row_bytes(KVF_ROW_V32_MAIN);
    for (size_t t = 0; t < T; t++) {
        ck_assert_int_eq(kvf_row_pack(KVF_ROW_V32_MAIN, cache.main_rows + t * b, x + t * Dw), KVF_OK);
        ck_assert_int_eq(kvf_row_unpack(KVF_ROW_V32_MAIN, x + t * Dw, cache.main_rows + t * b), KVF_OK);
    }
    cache.len = T;
    int32_t *sel = xmalloc(K * sizeof *sel);
    for (size_t k = 0; k < K; k++) sel[k] = k + 5 >= K ? -1 : (int32_t)(kvl_rng_next_u64(&rng) % (k % 7 ? T : 40));
    const int threads = kvl_threads();
    kvl_set_threads(1);
    ok(dsa_attend_picks(one, &c, q, &cache, sel));
    kvl_set_threads(2);
    ok(dsa_attend_picks(two, &c, q, &cache, sel));
    kvl_set_threads(threads);

    const size_t n = K - 5;
    double *want = xmalloc(H * Dc * sizeof *want), *p = xmalloc(n * sizeof *p);
    for (size_t h = 0; h < H; h++) {
        double m = -INFINITY, l = 0.0;
        for (size_t j = 0; j < n; j++) {
            const float *row = x + (size_t)sel[j] * Dw;
            double dot = 0.0;
            for (size_t i = 0; i < Dw; i++) dot += (double)q[h * Dw + i] * row[i];
            p[j] = dot * c.mla.softmax_scale;
            m = fmax(m, p[j]);
        }
        for (size_t j = 0; j < n; j++) l += p[j] = exp(p[j] - m);
        for (size_t i = 0; i < Dc; i++) {
            double acc = 0.0;
            for (size_t j = 0; j < n; j++) acc += p[j] / l * x[(size_t)sel[j] * Dw + i];
            want[h * Dc + i] = acc;
        }
    }
    const double tol = oracle_f32_tol(Dw + n);
    kvl_expect_close("1,095 picks of V32 rows, 1 thread", one, want, H * Dc, tol, tol, 1 - 1e-6);
    kvl_expect_close("the same on 2 threads", two, want, H * Dc, tol, tol, 1 - 1e-6);

    sel[3] = T;
    ck_assert_int_eq(dsa_attend_picks(one, &c, q, &cache, sel), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "pick 3") && strstr(kvl_error(), "2000"), "names the pick: %s", kvl_error());
    dsa_cache_free(&cache);
    free(x); free(q); free(one); free(two); free(sel); free(want); free(p);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------------- */

START_TEST(test_bad_config_and_full_cache_are_errors)
{
    toy z;
    toy_setup(&z, TOY_K, 4, 14);
    float out[4 * 64];
    static const char *const fields[] = {"window", "q_lora_rank", "index_head_dim", "index_topk", "index_n_heads"};
    dsa_config bad[N_OF(fields)];
    for (size_t i = 0; i < N_OF(fields); i++) bad[i] = z.c;
    bad[0].mla.window = 8;
    bad[1].mla.q_lora_rank = 0;
    bad[2].index_head_dim = 4; /* narrower than Dr 8 */
    bad[3].index_topk = 0;
    bad[4].index_n_heads = 0;
    for (size_t i = 0; i < N_OF(fields); i++) {
        ck_assert_int_eq(dsa_forward(out, NULL, &bad[i], &z.w, z.x, 4), KVL_EINVAL);
        ck_assert_msg(strstr(kvl_error(), fields[i]) != NULL, "case %s, message: %s", fields[i], kvl_error());
    }

    dsa_cache cache;
    ck_assert_int_eq(dsa_cache_init(&cache, &z.c, 8, DSA_CACHE_V32), KVL_EINVAL); /* toy widths */
    ck_assert_msg(strstr(kvl_error(), "v32") != NULL, "message: %s", kvl_error());
    ck_assert_int_eq(dsa_cache_init(&cache, &z.c, 0, DSA_CACHE_F32), KVL_EINVAL);
    ok(dsa_cache_init(&cache, &z.c, 3, DSA_CACHE_F32));
    ck_assert_int_eq(dsa_prefill(out, NULL, &z.c, &z.w, &cache, z.x, 4), KVL_EINVAL);
    ck_assert_uint_eq(cache.len, 0);
    ok(dsa_prefill(out, NULL, &z.c, &z.w, &cache, z.x, 0)); /* an empty chunk is a no-op */
    ok(dsa_prefill(out, NULL, &z.c, &z.w, &cache, z.x, 3));
    ck_assert_int_eq(dsa_decode_gather(out, NULL, &z.c, &z.w, &cache, z.x + 3 * 64), KVL_EINVAL);
    ck_assert_int_eq(dsa_decode_masked(out, NULL, &z.c, &z.w, &cache, z.x + 3 * 64), KVL_EINVAL);
    ck_assert_uint_eq(cache.len, 3);
    ck_assert_uint_eq(dsa_cache_bytes_used(&cache), 3 * (32 + 8 + 16) * sizeof(float));
    dsa_cache_free(&cache);

    /* a NaN cannot be stored in the deployed rows: an error, and the cache is unchanged */
    toy_free(&z);
    toy_setup_config(&z, native_config(TOY_K), 2, 15);
    ok(dsa_cache_init(&cache, &z.c, 2, DSA_CACHE_V32));
    ok(dsa_prefill(out, NULL, &z.c, &z.w, &cache, z.x, 1));
    z.x[64 + 3] = NAN;
    ck_assert_int_eq(dsa_decode_gather(out, NULL, &z.c, &z.w, &cache, z.x + 64), KVL_EINVAL);
    ck_assert_uint_eq(cache.len, 1);
    dsa_cache_free(&cache);
    toy_free(&z);

    kvl_model m;
    dsa_config c;
    ok(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v3.json")));
    ck_assert_int_eq(dsa_config_from_model(&c, &m), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "deepseek-v3.json") != NULL, "message: %s", kvl_error());
    kvl_model_free(&m);
}
END_TEST

/* ---- the chapter program --------------------------------------------------------------------------- */

/* the number printed after `label` in out */
static double number_after(const char *out, const char *label)
{
    const char *at = strstr(out, label);
    ck_assert_msg(at != NULL, "dsa_cost output lacks \"%s\":\n%s", label, out);
    return strtod(at + strlen(label), NULL);
}

START_TEST(test_dsa_cost_program_derives_the_chapter_figures)
{
    static char out[65536], err[4096];
    int rc = kvl_run("dsa_cost --contexts 2K,128K --repeats 1", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "dsa_cost exited %d: %s", rc, err);
    static const char *const figures[] = {
        "656 B", "132 B", "788 B/token, x 61 layers = 48,068 B/token", "22.2% of the values", "20.1% of the bytes",
        "2,048 of 131,072 latent rows, 64x fewer (62.5x at 128,000)", "= 2,178 tokens in flop", "= 2,564 in bytes read",
        "32.3x fewer, while the indexer",
    };
    for (size_t i = 0; i < N_OF(figures); i++)
        ck_assert_msg(strstr(out, figures[i]) != NULL, "dsa_cost output lacks \"%s\"", figures[i]);

    /* the toy's losses, recomputed here from the definition: same config, seed and draws as the program */
    toy z;
    toy_setup_config(&z, toy_config(TOY_K), TOY_T, 4); /* no selection is compared */
    const size_t T = TOY_T;
    double *target = xmalloc(T * T * sizeof *target), *q = xmalloc(T * sizeof *q);
    oracle_dsa_attention_target(target, &z.L, z.xd, z.rows, T);
    double dense = 0, uniform = 0;
    for (size_t t = 0; t < T; t++) {
        double mx = -INFINITY, sum = 0;
        for (size_t s = 0; s <= t; s++) mx = fmax(mx, z.I[t * T + s]);
        for (size_t s = 0; s <= t; s++) sum += q[s] = exp(z.I[t * T + s] - mx);
        for (size_t s = 0; s <= t; s++) {
            const double p = target[t * T + s];
            dense += p * log(p / (q[s] / sum));
            uniform += p * log(p * (double)(t + 1));
        }
    }
    const double got_dense = number_after(out, "dense-stage loss L_I"), got_uniform = number_after(out, "uniform indexer");
    ck_assert_msg(fabs(got_dense - dense) < PRINTED_LOSS_TOL, "L_I printed %.4f, definition %.6f", got_dense, dense);
    ck_assert_msg(fabs(got_uniform - uniform) < PRINTED_LOSS_TOL, "uniform L_I printed %.4f, definition %.6f",
                  got_uniform, uniform);
    printf("dsa_cost toy: L_I printed %.4f, definition %.6f\n", got_dense, dense);

    /* the warm-up's table: it starts from the untrained loss, never rises, and ends below the uniform
     * indexer's, the definition's values above */
    const char *row = strstr(out, "target mass in top-K\n");
    ck_assert_msg(row != NULL, "dsa_cost prints no warm-up table");
    row = strchr(row, '\n') + 1;
    double first = NAN, last = NAN;
    size_t rows = 0, step;
    for (double loss, mass; sscanf(row, " %zu %lf %lf%%", &step, &loss, &mass) == 3; rows++) {
        if (rows == 0) first = loss;
        else ck_assert_msg(loss <= last, "the warm-up's loss rises to %.3f at step %zu", loss, step);
        last = loss;
        row = strchr(row, '\n') + 1;
    }
    ck_assert_msg(rows >= 3, "the warm-up table has %zu rows", rows);
    ck_assert_msg(fabs(first - dense) < 1e-3, "the warm-up starts at %.3f, not the untrained L_I %.6f", first, dense);
    ck_assert_msg(last < uniform, "the warm-up ends at %.3f, not below the uniform indexer's %.6f", last, uniform);
    free(target); free(q);
    toy_free(&z);
}
END_TEST

/* dsa_cost's dense MLA row costs every head the absorbed form's work by the definition, as mla_cost's does. */
START_TEST(test_dsa_cost_counts_a_latent_row_by_the_definition)
{
    kvl_model m;
    ck_assert_int_eq(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v3.2-exp.json")), KVL_OK);
    char want[160];
    snprintf(want, sizeof want, "against dense MLA's %s flop and 656 B",
             KVL_GROUPED((double)m.n_heads * oracle_mla_absorbed_flop_per_token(m.kv_lora_rank, m.qk_rope_head_dim)));
    kvl_model_free(&m);
    const char *const lines[] = {want};
    kvl_expect_prints("dsa_cost --contexts 2K --no-timing", lines, 1, "against dense MLA's");
}
END_TEST

/* nb_04's bound on selecting per head: one selected set of K rows per query serves every head; were
 * each of the H heads to pick its own K, a query would read up to H·K distinct latent rows, H times
 * the shared set's K (H from the config). */
START_TEST(test_nb04_bounds_per_head_selection_by_the_head_count)
{
    kvl_model m;
    ck_assert_int_eq(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v3.2-exp.json")), KVL_OK);
    const double shared = (double)m.index_topk, per_head = (double)m.n_heads * (double)m.index_topk;
    char want[200];
    snprintf(want, sizeof want,
             "one selected set per query serves all %zu heads; per-head selection would read up to %.0fx the rows",
             m.n_heads, per_head / shared);
    kvl_model_free(&m);
    const char *const lines[] = {want};
    kvl_expect_prints("nb_04", lines, 1, "one selected set");
}
END_TEST

/* The summary under the table is about the longest context the reader asked for, whichever it is. */
START_TEST(test_dsa_cost_summary_follows_the_contexts_given)
{
    static char out[65536], err[4096];
    static const size_t longest[] = {4096, 3072, 1024};
    static const char *const args[] = {"2K,4K", "3K,1K", "1K"};
    const size_t K = 2048;   /* index_topk of deepseek-v3.2-exp.json, the default config */
    for (size_t i = 0; i < N_OF(args); i++) {
        char cmd[96], want[160], fewer[48];
        snprintf(cmd, sizeof cmd, "dsa_cost --no-timing --contexts %s", args[i]);
        const double T = (double)longest[i];
        if (longest[i] > K)
            snprintf(want, sizeof want, "At %s tokens, the longest context asked for:\n  the attention reads %s of %s "
                     "latent rows, %sx fewer.", KVL_GROUPED(T), KVL_GROUPED(K), KVL_GROUPED(T),
                     kvl_grouped(fewer, sizeof fewer, T / (double)K, 1));
        else
            snprintf(want, sizeof want, "At %s tokens, the longest context asked for, the top-k keeps all %s rows",
                     KVL_GROUPED(T), KVL_GROUPED(T));
        const char *const lines[] = {want};
        kvl_expect_prints(cmd, lines, 1, "the longest context");
        ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 0);
        ck_assert_msg(!strstr(out, "131,072 tokens"), "%s speaks of 131,072 tokens", cmd);
    }
}
END_TEST

START_TEST(test_dsa_cost_program_rejects_bad_arguments)
{
    static char out[16384], err[4096];
    ck_assert_int_eq(kvl_run("dsa_cost --help", NULL, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "usage") != NULL, "--help: %s", out);
    char v3[1200];
    snprintf(v3, sizeof v3, "dsa_cost --no-timing --config %s", kvl_path("ref/configs/deepseek-v3.json"));
    const char *const bad[] = {"dsa_cost --bogus", "dsa_cost --contexts 0", "dsa_cost --contexts 4K,x",
                               "dsa_cost --repeats 0", "dsa_cost --contexts", "dsa_cost --contexts 2K,",
                               "dsa_cost --config /nonexistent.json", v3};
    for (size_t i = 0; i < N_OF(bad); i++) {
        ck_assert_msg(kvl_run(bad[i], NULL, out, sizeof out, err, sizeof err) == 2, "%s did not exit 2", bad[i]);
        const char *nl = strchr(err, '\n');
        ck_assert_msg(nl && nl[1] == '\0', "%s: stderr should be one line, got \"%s\"", bad[i], err);
    }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch04_dsa");
    TCase *whole = tcase_create("forward");
    tcase_add_test(whole, test_forward_matches_definition_when_topk_below_context);
    tcase_add_test(whole, test_forward_matches_dense_mla_when_topk_covers_context);
    suite_add_tcase(s, whole);

    TCase *forms = tcase_create("formulations");
    tcase_add_test(forms, test_gather_matches_mask_for_indexer_selection);
    tcase_add_test(forms, test_gather_matches_mask_for_any_selection);
    suite_add_tcase(s, forms);

    TCase *paths = tcase_create("paths");
    tcase_add_test(paths, test_decode_gather_and_decode_masked_match_definition);
    tcase_add_test(paths, test_decode_step_selections_equal_prefill_row_selections);
    tcase_add_test(paths, test_prefill_then_decode_matches_forward_when_any_prefix);
    tcase_add_test(paths, test_chunked_prefill_matches_forward_when_any_split);
    tcase_add_test(paths, test_single_token_matches_definition_when_T_is_1);
    suite_add_tcase(s, paths);

    TCase *cache = tcase_create("cache");
    tcase_add_test(cache, test_live_bytes_equal_788_per_token_per_layer);
    tcase_add_test(cache, test_native_rows_dequantise_within_format_bounds);
    tcase_add_test(cache, test_native_prefill_selects_as_the_fp8_indexer);
    tcase_add_test(cache, test_native_decode_matches_definition_over_decoded_rows);
    tcase_add_test(cache, test_attend_picks_reads_held_rows_where_they_are_on_every_thread);
    suite_add_tcase(s, cache);

    TCase *errors = tcase_create("errors");
    tcase_add_test(errors, test_bad_config_and_full_cache_are_errors);
    suite_add_tcase(s, errors);

    TCase *program = tcase_create("program");
    tcase_add_test(program, test_dsa_cost_program_derives_the_chapter_figures);
    tcase_add_test(program, test_dsa_cost_counts_a_latent_row_by_the_definition);
    tcase_add_test(program, test_dsa_cost_summary_follows_the_contexts_given);
    tcase_add_test(program, test_nb04_bounds_per_head_selection_by_the_head_count);
    tcase_add_test(program, test_dsa_cost_program_rejects_bad_arguments);
    suite_add_tcase(s, program);
    return s;
}
