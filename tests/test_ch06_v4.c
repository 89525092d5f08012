/* ref/v4 (chapter 6): the DeepSeek-V4 layer — window in every layer, HCA, CSA with its indexer, sinks,
 * the grouped output — against its double definition (tests/oracle_v4.h) on the chapter's toy (tests/v4_toy.h), the cache
 * paths against it across block and window edges, and the native rows at real widths
 * (formats/rows.h). */
#include "common.h"
#include "oracle_v4.h"
#include "v4_toy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "element.h"
#include "linalg.h"
#include "threads.h"
#include "v4.h"
#include "v4_rope.h"

typedef struct {
    v4_config c;
    v4_weights w;
} layer;

static const char *kind_name(const layer *l) { return kvl_layer_kind_name(l->c.kind); }

/* Index scores and their dot products are O(1) in the toy and err by about oracle_v4_tol (≈ 1e-4
 * relative) in float; a gap of 10× that cannot be ranked the other way. */
#define PICK_MARGIN 1e-3

/* want[T][d] for the layer on x[T][d]: dense over every visible entry (sel NULL), or the double indexer's
 * picks for a CSA layer whose K is below the entries (asserting the float path cannot rank them apart). */
static double *definition(const layer *l, const float *x, size_t T, int use_picks)
{
    double *xd = oracle_widen(x, T * l->c.d), *want = oracle_alloc(T * l->c.d * sizeof *want);
    int32_t *sel = NULL;
    if (use_picks) {
        double margin, kink;
        sel = oracle_alloc(T * l->c.indexer.topk * sizeof *sel);
        oracle_v4_picks(sel, &margin, &kink, &l->c, &l->w, xd, T);
        ck_assert_msg(margin > PICK_MARGIN && kink > PICK_MARGIN,
                      "the draw is too close to call: K-th and (K+1)-th scores %g apart, a ReLU argument %g from 0",
                      margin, kink);
    }
    oracle_v4_layer(want, &l->c, &l->w, xd, T, sel);
    free(xd);
    free(sel);
    return want;
}

static void expect_rows(const char *what, const layer *l, const float *got, const double *want, size_t T)
{
    const size_t M = l->c.kind == KVL_LAYER_WINDOW ? 0 : l->c.compressor.ratio;
    const double tol = oracle_v4_tol(&l->c, M ? T / M : 0);
    kvl_expect_close(what, got, want, T * l->c.d, tol * v4_max_abs(want, T * l->c.d), tol, 1.0 - tol);
}

static float *forward(const layer *l, int32_t *sel, const float *x, size_t T)
{
    float *out = oracle_alloc(T * l->c.d * sizeof *out);
    ck_assert_msg(v4_forward(out, sel, &l->c, &l->w, x, T) == KVL_OK, "%s", kvl_error());
    return out;
}

/* ---- the whole-sequence forward against the definition ------------------------------------------------ */

START_TEST(test_window_layer_matches_definition)
{
    layer l;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_WINDOW, 3, 700);
    float *x = v4_toy_inputs(V4_TOY_T, l.c.d, 701), *got = forward(&l, NULL, x, V4_TOY_T);
    double *want = definition(&l, x, V4_TOY_T, 0);
    expect_rows("window-only layer", &l, got, want, V4_TOY_T);
    free(x); free(got); free(want);
    v4_weights_free(&l.w);
}
END_TEST

START_TEST(test_hca_matches_dense_attention_over_visible_entries_plus_window)
{
    layer l;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_HCA, 3, 702);
    float *x = v4_toy_inputs(V4_TOY_T, l.c.d, 703), *got = forward(&l, NULL, x, V4_TOY_T);
    double *want = definition(&l, x, V4_TOY_T, 0);
    expect_rows("HCA layer", &l, got, want, V4_TOY_T);
    free(x); free(got); free(want);
    v4_weights_free(&l.w);
}
END_TEST

/* K = 11 = ⌊45/4⌋: every legal entry is picked, so CSA is the dense attention HCA runs, at M 4. */
START_TEST(test_csa_matches_dense_attention_when_topk_covers_every_entry)
{
    layer l;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_CSA, V4_TOY_T / 4, 704);
    const size_t T = V4_TOY_T, K = l.c.indexer.topk;
    int32_t *sel = oracle_alloc(T * K * sizeof *sel);
    float *x = v4_toy_inputs(T, l.c.d, 705), *got = forward(&l, sel, x, T);
    for (size_t t = 0; t < T; t++)
        for (size_t k = 0; k < K; k++)
            ck_assert_int_eq(sel[t * K + k], k < (t + 1) / 4 ? (int32_t)k : -1);
    double *want = definition(&l, x, T, 0);
    expect_rows("CSA layer, K >= entries", &l, got, want, T);
    free(x); free(got); free(want); free(sel);
    v4_weights_free(&l.w);
}
END_TEST

/* K = 3 below the 11 entries: the picks are the double indexer's, and the output reads exactly those. */
START_TEST(test_csa_matches_definition_with_topk_below_entries)
{
    layer l;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_CSA, 3, 3706);
    const size_t T = V4_TOY_T, K = l.c.indexer.topk;
    int32_t *sel = oracle_alloc(T * K * sizeof *sel), *want_sel = oracle_alloc(T * K * sizeof *want_sel);
    float *x = v4_toy_inputs(T, l.c.d, 707), *got = forward(&l, sel, x, T);
    double *xd = oracle_widen(x, T * l.c.d), margin, kink;
    oracle_v4_picks(want_sel, &margin, &kink, &l.c, &l.w, xd, T);
    ck_assert_mem_eq(sel, want_sel, T * K * sizeof *sel);
    double *want = definition(&l, x, T, 1);
    expect_rows("CSA layer, K 3", &l, got, want, T);
    free(x); free(got); free(want); free(sel); free(want_sel); free(xd);
    v4_weights_free(&l.w);
}
END_TEST

/* The index scores themselves (not only their order, which a positive factor cannot change) carry
 * HI^−½·DI^−½ (both, as DeepSeek-V4-Flash inference/model.py), and an entry scores −∞ until its block completes. */
START_TEST(test_index_scores_carry_both_scale_factors)
{
    layer l;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_CSA, 3, 708);
    const v4_indexer_config *ix = &l.c.indexer;
    const size_t T = V4_TOY_T, N = T / 4, HI = ix->n_heads, DI = ix->head_dim, Dq = l.c.q_lora_rank;
    float *x = v4_toy_inputs(T, l.c.d, 709), *cq = oracle_alloc(T * Dq * sizeof *cq);
    float *q_idx = oracle_alloc(T * HI * DI * sizeof *q_idx), *w_idx = oracle_alloc(T * HI * sizeof *w_idx);
    float *keys = oracle_alloc(N * DI * sizeof *keys), *I = oracle_alloc(T * N * sizeof *I);
    ck_assert_int_eq(v4_query_latent(cq, &l.c, &l.w, x, T), KVL_OK);
    ck_assert_int_eq(v4_index_query(q_idx, w_idx, ix, &l.w.indexer, cq, x, T, 0), KVL_OK);
    ck_assert_int_eq(v4_compressor_forward(keys, &ix->compressor, &l.w.indexer.compressor, x, T, 0), KVL_OK);
    ck_assert_int_eq(v4_index_scores(I, ix, q_idx, w_idx, keys, T, N, 0), KVL_OK);
    double *xd = oracle_widen(x, T * l.c.d), *cqd = oracle_alloc(T * Dq * sizeof *cqd);
    double *qd = oracle_alloc(T * l.c.n_heads * l.c.head_dim * sizeof *qd), *rows = oracle_alloc(T * l.c.head_dim * 8);
    double *want = oracle_alloc(T * N * sizeof *want), *kd = oracle_alloc(N * DI * sizeof *kd);
    oracle_v4_tokens(cqd, qd, rows, &l.c, &l.w, xd, T);
    oracle_v4_index_scores(want, kd, NULL, &l.c, &l.w, xd, cqd, T);
    const double tol = oracle_f32_tol(l.c.d + Dq + HI * DI + DI + 8);
    double big = 0;
    for (size_t i = 0; i < T * N; i++)
        if (isfinite(want[i])) big = fmax(big, fabs(want[i]));
    kvl_expect_close("index scores", I, want, T * N, tol * big, tol, 1.0 - tol);
    free(x); free(cq); free(q_idx); free(w_idx); free(keys); free(I);
    free(xd); free(cqd); free(qd); free(rows); free(want); free(kd);
    v4_weights_free(&l.w);
}
END_TEST

/* ---- visibility ---------------------------------------------------------------------------------------- */

/* Query t sees entry i iff (i+1)·M − 1 ≤ t: the attention core given one more entry than a chunk's queries
 * may see, with that entry changed, leaves every earlier query's output bit for bit the same and changes
 * the query at (i+1)·M − 1; the index scores of a CSA layer are −∞ exactly where the block is incomplete.
 * With M ≤ W the tail not yet compressed (⌊(t+1)/M⌋·M … t) lies inside the window. */
START_TEST(test_query_sees_entry_iff_its_block_is_complete)
{
    layer l;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_HCA, 3, 710);
    const size_t T = V4_TOY_T, M = l.c.compressor.ratio, N = T / M + 1, H = l.c.n_heads, Dh = l.c.head_dim;
    float *q = v4_toy_inputs(T * H, Dh, 711), *win = v4_toy_inputs(T, Dh, 712), *ent = v4_toy_inputs(N, Dh, 713);
    float *a = oracle_alloc(T * H * Dh * sizeof *a), *b = oracle_alloc(T * H * Dh * sizeof *b);
    const kvl_row_tiles entries = kvl_row_tiles_f32(ent, N, Dh);
    ck_assert_msg(v4_attend(a, &l.c, &l.w, q, win, 0, &entries, NULL, T, 0) == KVL_OK, "%s", kvl_error());
    for (size_t i = 0; i < N; i++) {
        float *changed = oracle_alloc(N * Dh * sizeof *changed);
        memcpy(changed, ent, N * Dh * sizeof *ent);
        for (size_t k = 0; k < Dh; k++) changed[i * Dh + k] += 3.0f;
        const kvl_row_tiles other = kvl_row_tiles_f32(changed, N, Dh);
        ck_assert_int_eq(v4_attend(b, &l.c, &l.w, q, win, 0, &other, NULL, T, 0), KVL_OK);
        for (size_t t = 0; t < T; t++) {
            const int sees = (i + 1) * M - 1 <= t;
            const int same = memcmp(a + t * H * Dh, b + t * H * Dh, H * Dh * sizeof *a) == 0;
            ck_assert_msg(same != sees, "query %zu %s entry %zu (M %zu)", t, same ? "ignored" : "read", i, M);
        }
        free(changed);
    }
    for (size_t t = 0; t < T; t++) ck_assert_uint_lt(t + 1 - (t + 1) / M * M, l.c.window + 1);
    free(q); free(win); free(ent); free(a); free(b);
    v4_weights_free(&l.w);

    layer s;
    v4_toy_layer(&s.c, &s.w, V4_TOY_LAYER_CSA, 3, 714);
    const v4_indexer_config *ix = &s.c.indexer;
    const size_t Nc = 12, HI = ix->n_heads, DI = ix->head_dim;
    float *qi = v4_toy_inputs(T * HI, DI, 715), *wi = v4_toy_inputs(T, HI, 716), *keys = v4_toy_inputs(Nc, DI, 717);
    float *I = oracle_alloc(T * Nc * sizeof *I);
    ck_assert_int_eq(v4_index_scores(I, ix, qi, wi, keys, T, Nc, 0), KVL_OK);
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < Nc; i++)
            ck_assert_msg(isfinite(I[t * Nc + i]) == ((i + 1) * 4 - 1 <= t), "query %zu, entry %zu: score %g", t, i,
                          I[t * Nc + i]);
    free(qi); free(wi); free(keys); free(I);
    v4_weights_free(&s.w);
}
END_TEST

/* ---- the cache paths ------------------------------------------------------------------------------------- */

/* out[T][d]: x[T] fed through a fresh cache in the chunks sizes[] (1 = v4_decode). */
static float *cached(const layer *l, const float *x, size_t T, const size_t *sizes, size_t n, v4_cache_format fmt)
{
    v4_cache cache;
    ck_assert_msg(v4_cache_init(&cache, &l->c, T, fmt) == KVL_OK, "%s", kvl_error());
    float *out = oracle_alloc(T * l->c.d * sizeof *out);
    size_t pos = 0;
    for (size_t j = 0; j < n; j++) {
        const float *xj = x + pos * l->c.d;
        float *oj = out + pos * l->c.d;
        const int rc = sizes[j] == 1 ? v4_decode(oj, NULL, &l->c, &l->w, &cache, xj)
                                     : v4_prefill(oj, NULL, &l->c, &l->w, &cache, xj, sizes[j]);
        ck_assert_msg(rc == KVL_OK, "%s", kvl_error());
        pos += sizes[j];
        ck_assert_uint_eq(cache.len, pos);
    }
    ck_assert_uint_eq(pos, T);
    v4_cache_free(&cache);
    return out;
}

/* Every kind (CSA with K 3 below its entries), three ways through the cache: one token at a time, a
 * prefill of 13 then decodes, and ragged chunks straddling block (4, 8) and window (8) edges. */
START_TEST(test_decode_matches_forward_across_block_and_window_edges)
{
    static const size_t kinds[] = {V4_TOY_LAYER_WINDOW, V4_TOY_LAYER_CSA, V4_TOY_LAYER_HCA};
    static const size_t ragged[] = {5, 7, 3, 11, 1, 9, 9};
    size_t ones[V4_TOY_T], prefix[V4_TOY_T - 12];
    for (size_t t = 0; t < V4_TOY_T; t++) ones[t] = 1;
    prefix[0] = 13;
    for (size_t t = 1; t < V4_TOY_T - 12; t++) prefix[t] = 1;
    for (size_t k = 0; k < 3; k++) {
        layer l;
        v4_toy_layer(&l.c, &l.w, kinds[k], 3, 720 + k);
        const size_t T = V4_TOY_T;
        float *x = v4_toy_inputs(T, l.c.d, 730 + k);
        double *want = definition(&l, x, T, l.c.kind == KVL_LAYER_CSA);
        const struct { const size_t *sizes; size_t n; const char *name; } ways[] = {
            {ones, T, "token by token"}, {prefix, T - 12, "prefill 13, then decode"}, {ragged, 7, "ragged chunks"}};
        for (size_t j = 0; j < 3; j++) {
            float *got = cached(&l, x, T, ways[j].sizes, ways[j].n, V4_CACHE_F32);
            char what[96];
            snprintf(what, sizeof what, "%s layer, %s", kind_name(&l), ways[j].name);
            expect_rows(what, &l, got, want, T);
            free(got);
        }
        free(x); free(want);
        v4_weights_free(&l.w);
    }
}
END_TEST

/* A prefix-cache hit: drop the window at s, replay s … T − 1 with the entries as they are. Rows past the
 * window's reach (t ≥ s + W − 1) are the full run's bit for bit, and the ring holds the same rows. */
START_TEST(test_replay_reproduces_rows_past_the_window_reach)
{
    layer l;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_CSA, 3, 740);
    const size_t T = V4_TOY_T, d = l.c.d, Dh = l.c.head_dim, W = l.c.window, s = 21;
    float *x = v4_toy_inputs(T, d, 741), *full = oracle_alloc(T * d * sizeof *full), *re = oracle_alloc(T * d * sizeof *re);
    float *r1 = oracle_alloc(W * Dh * sizeof *r1), *r2 = oracle_alloc(W * Dh * sizeof *r2);
    v4_cache cache;
    ck_assert_int_eq(v4_cache_init(&cache, &l.c, T, V4_CACHE_F32), KVL_OK);
    ck_assert_int_eq(v4_prefill(full, NULL, &l.c, &l.w, &cache, x, s), KVL_OK);
    ck_assert_int_eq(v4_prefill(full + s * d, NULL, &l.c, &l.w, &cache, x + s * d, T - s), KVL_OK);
    ck_assert_int_eq(v4_rows_read(r1, &cache.window, T - W, W), KVL_OK);
    ck_assert_int_eq(v4_cache_drop_window(&cache, s), KVL_OK);
    ck_assert_uint_eq(v4_cache_window_bytes(&cache), 0);
    ck_assert_int_eq(v4_prefill(re, NULL, &l.c, &l.w, &cache, x + s * d, 1), KVL_EINVAL);   /* replay first */
    ck_assert_int_eq(v4_replay(re + s * d, NULL, &l.c, &l.w, &cache, x + s * d, T - s), KVL_OK);
    ck_assert_int_eq(v4_rows_read(r2, &cache.window, T - W, W), KVL_OK);
    ck_assert_mem_eq(r1, r2, W * Dh * sizeof *r1);
    for (size_t t = s; t < T; t++) {
        const int same = memcmp(full + t * d, re + t * d, d * sizeof *re) == 0;
        ck_assert_msg(same == (t >= s + W - 1), "row %zu after a replay from %zu: %s", t, s, same ? "same" : "differs");
    }
    ck_assert_int_eq(v4_replay(re, NULL, &l.c, &l.w, &cache, x, 1), KVL_EINVAL);   /* nothing left to replay */
    v4_cache_free(&cache);
    free(x); free(full); free(re); free(r1); free(r2);
    v4_weights_free(&l.w);
}
END_TEST

/* ---- sinks ------------------------------------------------------------------------------------------------ */

enum { SINK_H = 3, SINK_N = 7, SINK_DH = 16 };

/* Three heads over seven keys, two of them invalid (NULL, a −1 pick). */
static void sink_inputs(float *q, float *k, const float **keys, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    kvl_rng_normal_f32(&rng, q, SINK_H * SINK_DH, 2.0);
    kvl_rng_normal_f32(&rng, k, SINK_N * SINK_DH, 1.0);
    for (size_t i = 0; i < SINK_N; i++) keys[i] = (i == 2 || i == 5) ? NULL : k + i * SINK_DH;
}

/* p_sink and the weights of head h in double: exp(s − μ)/(exp(σ − μ) + Σ exp(s − μ)) */
static double sink_oracle(double *p, const float *q, const float *const *keys, double sigma, size_t h)
{
    double s[SINK_N], mx = sigma, den;
    for (size_t i = 0; i < SINK_N; i++) {
        s[i] = -INFINITY;
        if (!keys[i]) continue;
        double acc = 0;
        for (size_t k = 0; k < SINK_DH; k++) acc += (double)q[h * SINK_DH + k] * keys[i][k];
        s[i] = acc / sqrt((double)SINK_DH);
        mx = fmax(mx, s[i]);
    }
    den = sigma == -INFINITY ? 0 : exp(sigma - mx);
    for (size_t i = 0; i < SINK_N; i++) den += keys[i] ? exp(s[i] - mx) : 0;
    for (size_t i = 0; i < SINK_N; i++) p[i] = keys[i] ? exp(s[i] - mx) / den : 0;
    return sigma == -INFINITY ? 0 : exp(sigma - mx) / den;
}

/* Softmax in float of Dh-term dot products: the score errs by Dh·u relative, each weight by a few ulps. */
static const double SINK_TOL = 8 * SINK_DH * FLT_EPSILON;

START_TEST(test_sink_at_minus_infinity_recovers_plain_softmax)
{
    float q[SINK_H * SINK_DH], k[SINK_N * SINK_DH], p[SINK_H * SINK_N];
    const float *keys[SINK_N];
    const float sinks[SINK_H] = {-INFINITY, -INFINITY, -INFINITY};
    sink_inputs(q, k, keys, 750);
    v4_attend_weights(p, q, keys, SINK_N, sinks, SINK_H, SINK_DH);
    for (size_t h = 0; h < SINK_H; h++) {
        double want[SINK_N], sum = 0;
        sink_oracle(want, q, keys, -INFINITY, h);
        kvl_expect_close("plain softmax", p + h * SINK_N, want, SINK_N, SINK_TOL, SINK_TOL, 0);
        for (size_t i = 0; i < SINK_N; i++) sum += p[h * SINK_N + i];
        ck_assert_double_eq_tol(sum, 1.0, SINK_TOL);
    }
}
END_TEST

START_TEST(test_weights_sum_to_one_minus_sink_probability)
{
    float q[SINK_H * SINK_DH], k[SINK_N * SINK_DH], p[SINK_H * SINK_N];
    const float *keys[SINK_N];
    const float sinks[SINK_H] = {-1.5f, 0.25f, 4.0f};
    sink_inputs(q, k, keys, 751);
    v4_attend_weights(p, q, keys, SINK_N, sinks, SINK_H, SINK_DH);
    for (size_t h = 0; h < SINK_H; h++) {
        double want[SINK_N], sum = 0;
        const double p_sink = sink_oracle(want, q, keys, sinks[h], h);
        kvl_expect_close("sink softmax", p + h * SINK_N, want, SINK_N, SINK_TOL, SINK_TOL, 0);
        for (size_t i = 0; i < SINK_N; i++) sum += p[h * SINK_N + i];
        ck_assert_msg(p_sink > 0.01, "head %zu: the sink takes only %g", h, p_sink);
        ck_assert_double_eq_tol(sum, 1.0 - p_sink, SINK_TOL);
    }
}
END_TEST

START_TEST(test_no_valid_entry_gives_zero_output)
{
    float q[SINK_H * SINK_DH], k[SINK_N * SINK_DH], p[SINK_H * SINK_N], o[SINK_H * SINK_DH];
    const float *keys[SINK_N] = {NULL};
    const float sinks[SINK_H] = {-INFINITY, 0.5f, -3.0f};
    sink_inputs(q, k, keys, 752);
    for (size_t i = 0; i < SINK_N; i++) keys[i] = NULL;
    v4_attend_weights(p, q, keys, SINK_N, sinks, SINK_H, SINK_DH);
    v4_attend_values(o, p, keys, SINK_N, SINK_H, SINK_DH);
    for (size_t i = 0; i < SINK_H * SINK_N; i++) ck_assert_msg(p[i] == 0.0f, "weight %zu is %g", i, p[i]);
    for (size_t i = 0; i < SINK_H * SINK_DH; i++) ck_assert_msg(o[i] == 0.0f, "output %zu is %g", i, o[i]);
}
END_TEST

/* ---- the grouped output ---------------------------------------------------------------------------------- */

/* W_OA block-diagonal then W_OB equals one dense [d][H·Dh] projection W_OB·blockdiag(W_OA), built here. */
START_TEST(test_grouped_output_matches_dense_projection)
{
    layer l;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_HCA, 3, 760);
    const size_t S = 9, d = l.c.d, H = l.c.n_heads, Dh = l.c.head_dim, G = l.c.o_groups, Do = l.c.o_lora_rank;
    const size_t gw = H / G * Dh;
    float *o = v4_toy_inputs(S * H, Dh, 761), *got = oracle_alloc(S * d * sizeof *got);
    ck_assert_int_eq(v4_output(got, &l.c, &l.w, o, S), KVL_OK);
    double *dense = oracle_alloc(d * H * Dh * sizeof *dense), *want = oracle_alloc(S * d * sizeof *want);
    for (size_t i = 0; i < d; i++)
        for (size_t r = 0; r < G; r++)
            for (size_t k = 0; k < gw; k++) {
                double acc = 0;
                for (size_t m = 0; m < Do; m++)
                    acc += (double)l.w.w_ob[i * G * Do + r * Do + m] * l.w.w_oa[(r * Do + m) * gw + k];
                dense[i * H * Dh + r * gw + k] = acc;
            }
    for (size_t t = 0; t < S; t++)
        for (size_t i = 0; i < d; i++) {
            double acc = 0;
            for (size_t k = 0; k < H * Dh; k++) acc += dense[i * H * Dh + k] * o[t * H * Dh + k];
            want[t * d + i] = acc;
        }
    const double tol = oracle_f32_tol(gw + G * Do);
    kvl_expect_close("grouped output", got, want, S * d, tol * v4_max_abs(want, S * d), tol, 1.0 - tol);
    free(o); free(got); free(dense); free(want);
    v4_weights_free(&l.w);
}
END_TEST

/* ---- rotary offset invariance ------------------------------------------------------------------------------ */

/* Shifting every rotary position (queries, window rows, entries, index keys) by Δ, blocks unchanged: the
 * output equals the definition at Δ = 0, for every kind and a Δ that is and one that is not a multiple of M. */
START_TEST(test_output_unchanged_when_every_rotary_position_shifts)
{
    static const size_t kinds[] = {V4_TOY_LAYER_WINDOW, V4_TOY_LAYER_CSA, V4_TOY_LAYER_HCA};
    static const int64_t shifts[] = {1000, 12347};
    for (size_t k = 0; k < 3; k++) {
        layer l;
        v4_toy_layer(&l.c, &l.w, kinds[k], 3, 770 + k);
        const size_t T = V4_TOY_T;
        float *x = v4_toy_inputs(T, l.c.d, 780 + k);
        double *want = definition(&l, x, T, l.c.kind == KVL_LAYER_CSA);
        for (size_t j = 0; j < 2; j++) {
            layer shifted = l;
            shifted.c.rope_offset = shifts[j];
            float *got = forward(&shifted, NULL, x, T);
            char what[64];
            snprintf(what, sizeof what, "%s layer shifted by %lld", kind_name(&l), (long long)shifts[j]);
            expect_rows(what, &l, got, want, T);
            free(got);
        }
        free(x); free(want);
        v4_weights_free(&l.w);
    }
}
END_TEST

/* ---- native rows at real widths ------------------------------------------------------------------------------ */

/* |x̂ − x| for E4M3 with a power-of-two scale s per 64 values chosen from the block's amax (rounded up vs
 * 448): half an ulp, 2^-4·|x| for normal codes and 2^-10·s below 2^-6·s; bf16: 2^-8·|x|. */
static double e4m3_bound(double x, double s) { return fmax(ldexp(fabs(x), -4), ldexp(s, -10)); }

/* got[n][512] decoded main rows against the definition's rows want[n][512] */
static void expect_main_rows(const char *what, const float *got, const double *want, size_t n, double tol)
{
    for (size_t r = 0; r < n; r++)
        for (size_t b = 0; b < 8; b++) {
            const double *wb = want + r * 512 + b * 64;
            const double s = ldexp(1.0, (int)ceil(log2(v4_max_abs(wb, 64) * (1 + 1e-4) / 448)));
            for (size_t k = 0; k < 64; k++) {
                const double x = wb[k], bound = (b < 7 ? e4m3_bound(x, s) : ldexp(fabs(x), -8)) + tol * (1 + fabs(x));
                const float g = got[r * 512 + b * 64 + k];
                ck_assert_msg(fabs(g - x) <= bound, "%s: row %zu channel %zu: %.9g, want %.9g ± %.3g", what, r,
                              b * 64 + k, g, x, bound);
            }
        }
}

/* MXFP4 with s = 2^ceil(log2(amax/6)) per 32: half the E2M1 spacing at |x|/s (0.5 below 2, 1 below 4, 2 up to 6). */
static double mxfp4_bound(double x, double s)
{
    const double m = fabs(x) / s * (1 + 1e-4);
    return s * (m < 2 ? 0.25 : m < 4 ? 0.5 : 1.0);
}

/* y[128] = H_128/√128 · v in double: entry (i, j) = (−1)^popcount(i & j) */
static void hadamard_128(double *y, const double *v)
{
    for (size_t i = 0; i < 128; i++) {
        double acc = 0;
        for (size_t j = 0; j < 128; j++) acc += (__builtin_popcountl(i & j) & 1 ? -v[j] : v[j]);
        y[i] = acc / sqrt(128.0);
    }
}

/* A native cache holds 584-byte rows for the window and the entries and 68-byte index keys; each row read
 * back lies within its format's rounding of the definition's row (E4M3 + bf16 RoPE; MXFP4 of the
 * Hadamard-rotated key). */
START_TEST(test_native_rows_dequantise_within_format_bounds)
{
    layer l;
    v4_wide_layer(&l.c, &l.w, 1, 790);
    const size_t T = 40, d = l.c.d, W = l.c.window, N = T / 4, DI = l.c.indexer.head_dim;
    float *x = v4_toy_inputs(T, d, 791), *out = oracle_alloc(T * d * sizeof *out);
    v4_cache cache;
    ck_assert_msg(v4_cache_init(&cache, &l.c, T, V4_CACHE_NATIVE) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v4_prefill(out, NULL, &l.c, &l.w, &cache, x, 17) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v4_prefill(out + 17 * d, NULL, &l.c, &l.w, &cache, x + 17 * d, T - 17) == KVL_OK, "%s", kvl_error());
    double *xd = oracle_widen(x, T * d), *cq = oracle_alloc(T * l.c.q_lora_rank * sizeof *cq);
    double *q = oracle_alloc(T * l.c.n_heads * 512 * sizeof *q), *rows = oracle_alloc(T * 512 * sizeof *rows);
    double *ent = oracle_alloc(N * 512 * sizeof *ent), *keys = oracle_alloc(N * DI * sizeof *keys);
    double *I = oracle_alloc(T * N * sizeof *I), *rot = oracle_alloc(N * DI * sizeof *rot);
    oracle_v4_tokens(cq, q, rows, &l.c, &l.w, xd, T);
    oracle_v4_compress(ent, &l.c.compressor, &l.w.compressor, xd, T, 0);
    oracle_v4_index_scores(I, keys, NULL, &l.c, &l.w, xd, cq, T);
    const double tol = oracle_f32_tol(d + 512 + 8);
    float *got = oracle_alloc(N * 512 * sizeof *got);
    ck_assert_int_eq(v4_rows_read(got, &cache.window, T - W, W), KVL_OK);
    expect_main_rows("window rows", got, rows + (T - W) * 512, W, tol);
    ck_assert_int_eq(v4_rows_read(got, &cache.entries, 0, N), KVL_OK);
    expect_main_rows("compressed entries", got, ent, N, tol);
    ck_assert_int_eq(v4_rows_read(got, &cache.index_keys, 0, N), KVL_OK);
    for (size_t i = 0; i < N; i++) hadamard_128(rot + i * DI, keys + i * DI);
    for (size_t i = 0; i < N; i++)
        for (size_t b = 0; b < DI / 32; b++) {
            const double s = ldexp(1.0, (int)ceil(log2(v4_max_abs(rot + i * DI + b * 32, 32) * (1 + 1e-4) / 6)));
            for (size_t k = b * 32; k < b * 32 + 32; k++) {
                const double want = rot[i * DI + k], bound = mxfp4_bound(want, s) + tol * (1 + fabs(want));
                ck_assert_msg(fabs(got[i * DI + k] - want) <= bound, "index key %zu channel %zu: %.9g, want %.9g ± %.3g",
                              i, k, got[i * DI + k], want, bound);
            }
        }
    v4_cache_free(&cache);
    free(x); free(out); free(xd); free(cq); free(q); free(rows); free(ent); free(keys); free(I); free(rot); free(got);
    v4_weights_free(&l.w);
}
END_TEST

/* The fp4 path's scores: rotating q^I and K^I alone changes nothing (the Hadamard matrix is orthonormal);
 * rounding both to MXFP4 moves each score by at most Σ_j |w_j|·(‖e_q‖‖k‖ + ‖q‖‖e_k‖ + ‖e_q‖‖e_k‖),
 * with ‖e‖ bounded block by block as in mxfp4_bound (ReLU is 1-Lipschitz; Cauchy–Schwarz). */
START_TEST(test_fp4_index_scores_within_mxfp4_bound_of_f32)
{
    layer l;
    v4_wide_layer(&l.c, &l.w, 1, 795);
    const v4_indexer_config *ix = &l.c.indexer;
    const size_t T = 64, N = T / 4, HI = ix->n_heads, DI = ix->head_dim, Dq = l.c.q_lora_rank;
    float *x = v4_toy_inputs(T, l.c.d, 796), *cq = oracle_alloc(T * Dq * sizeof *cq);
    float *q = oracle_alloc(T * HI * DI * sizeof *q), *wi = oracle_alloc(T * HI * sizeof *wi);
    float *k = oracle_alloc(N * DI * sizeof *k), *I = oracle_alloc(T * N * sizeof *I);
    float *Ir = oracle_alloc(T * N * sizeof *Ir), *I4 = oracle_alloc(T * N * sizeof *I4);
    ck_assert_int_eq(v4_query_latent(cq, &l.c, &l.w, x, T), KVL_OK);
    ck_assert_int_eq(v4_index_query(q, wi, ix, &l.w.indexer, cq, x, T, 0), KVL_OK);
    ck_assert_int_eq(v4_compressor_forward(k, &ix->compressor, &l.w.indexer.compressor, x, T, 0), KVL_OK);
    ck_assert_int_eq(v4_index_scores(I, ix, q, wi, k, T, N, 0), KVL_OK);
    ck_assert_int_eq(v4_index_rotate(q, ix, T * HI), KVL_OK);
    ck_assert_int_eq(v4_index_rotate(k, ix, N), KVL_OK);
    ck_assert_int_eq(v4_index_scores(Ir, ix, q, wi, k, T, N, 0), KVL_OK);
    double *Id = oracle_widen(I, T * N);
    const double tol = oracle_f32_tol(HI * DI + 2 * 7 * DI);   /* two fast transforms of log2(128) stages */
    kvl_expect_close("rotated scores", Ir, Id, T * N, tol * v4_max_abs(Id, T * N), tol, 1.0 - tol);
    /* error norms of the rounding, per head row and per key, from the block bound */
    double *eq = oracle_alloc(T * HI * sizeof *eq), *nq = oracle_alloc(T * HI * sizeof *nq);
    double *ek = oracle_alloc(N * sizeof *ek), *nk = oracle_alloc(N * sizeof *nk);
    for (size_t r = 0; r < T * HI + N; r++) {
        const float *v = r < T * HI ? q + r * DI : k + (r - T * HI) * DI;
        double e2 = 0, n2 = 0;
        for (size_t b = 0; b < DI / 32; b++) {
            double amax = 0;
            for (size_t j = 0; j < 32; j++) amax = fmax(amax, fabs(v[b * 32 + j]));
            const double s = ldexp(1.0, (int)ceil(log2(fmax(amax, 6 * 0x1p-126) * (1 + 1e-6) / 6)));
            for (size_t j = 0; j < 32; j++) {
                e2 += mxfp4_bound(v[b * 32 + j], s) * mxfp4_bound(v[b * 32 + j], s);
                n2 += (double)v[b * 32 + j] * v[b * 32 + j];
            }
        }
        if (r < T * HI) eq[r] = sqrt(e2), nq[r] = sqrt(n2);
        else ek[r - T * HI] = sqrt(e2), nk[r - T * HI] = sqrt(n2);
    }
    ck_assert_int_eq(v4_index_round_mxfp4(q, ix, T * HI), KVL_OK);
    ck_assert_int_eq(v4_index_round_mxfp4(k, ix, N), KVL_OK);
    ck_assert_int_eq(v4_index_scores(I4, ix, q, wi, k, T, N, 0), KVL_OK);
    double worst = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < N; i++) {
            ck_assert(isfinite(I4[t * N + i]) == isfinite(I[t * N + i]));
            if (!isfinite(I[t * N + i])) continue;
            double bound = 0;
            for (size_t j = 0; j < HI; j++) {
                const size_t r = t * HI + j;
                bound += fabs(wi[r]) * (eq[r] * nk[i] + nq[r] * ek[i] + eq[r] * ek[i]);
            }
            const double err = fabs((double)I4[t * N + i] - I[t * N + i]);
            ck_assert_msg(err <= bound * (1 + 1e-3) + tol, "query %zu entry %zu: fp4 %g, f32 %g, bound %g", t, i,
                          I4[t * N + i], I[t * N + i], bound);
            worst = fmax(worst, err / bound);
        }
    printf("fp4 index scores: worst error %.2f of the MXFP4 bound\n", worst);
    free(x); free(cq); free(q); free(wi); free(k); free(I); free(Ir); free(I4); free(Id);
    free(eq); free(nq); free(ek); free(nk);
    v4_weights_free(&l.w);
}
END_TEST

/* A native cache is read as stored: a chunk's own rows pass through the 584-byte row before its queries
 * read them, so one prefill, ragged chunks and token-by-token decode see the same quantised rows and
 * agree to float rounding (the quantisation error, ~2^-4 of a row, would show far above it). */
START_TEST(test_native_chunks_read_the_rows_the_cache_stores)
{
    static const size_t whole[] = {40}, ragged[] = {9, 1, 14, 16};
    size_t ones[40];
    for (size_t t = 0; t < 40; t++) ones[t] = 1;
    for (size_t k = 0; k < 3; k++) {
        layer l;
        v4_wide_layer(&l.c, &l.w, k, 830 + k);
        float *x = v4_toy_inputs(40, l.c.d, 840);
        float *a = cached(&l, x, 40, whole, 1, V4_CACHE_NATIVE), *b = cached(&l, x, 40, ragged, 4, V4_CACHE_NATIVE);
        float *c = cached(&l, x, 40, ones, 40, V4_CACHE_NATIVE);
        double *ad = oracle_widen(a, 40 * l.c.d);
        const double tol = 2 * oracle_v4_tol(&l.c, 10);
        char what[64];
        snprintf(what, sizeof what, "native %s layer, ragged chunks", kind_name(&l));
        kvl_expect_close(what, b, ad, 40 * l.c.d, tol * v4_max_abs(ad, 40 * l.c.d), tol, 1.0 - tol);
        snprintf(what, sizeof what, "native %s layer, token by token", kind_name(&l));
        kvl_expect_close(what, c, ad, 40 * l.c.d, tol * v4_max_abs(ad, 40 * l.c.d), tol, 1.0 - tol);
        free(x); free(a); free(b); free(c); free(ad);
        v4_weights_free(&l.w);
    }
}
END_TEST

/* A native cache scores entries on the fp4 path: the chunk's picks are the top-K of q^I rotated by
 * H_DI/√DI and rounded to MXFP4 against the stored 68-byte keys (rotated and rounded when written), not
 * the float32 picks, which differ for this draw. */
START_TEST(test_native_csa_picks_use_the_fp4_query_key_path)
{
    layer l;
    v4_wide_layer(&l.c, &l.w, 1, 850);
    const v4_indexer_config *ix = &l.c.indexer;
    const size_t T = 40, N = T / 4, K = ix->topk, HI = ix->n_heads, DI = ix->head_dim, d = l.c.d;
    float *x = v4_toy_inputs(T, d, 851), *out = oracle_alloc(T * d * sizeof *out);
    int32_t *sel = oracle_alloc(T * K * sizeof *sel), *want = oracle_alloc(T * K * sizeof *want);
    int32_t *f32 = oracle_alloc(T * K * sizeof *f32);
    v4_cache cache;
    ck_assert_int_eq(v4_cache_init(&cache, &l.c, T, V4_CACHE_NATIVE), KVL_OK);
    ck_assert_msg(v4_prefill(out, sel, &l.c, &l.w, &cache, x, T) == KVL_OK, "%s", kvl_error());
    float *cq = oracle_alloc(T * l.c.q_lora_rank * sizeof *cq), *q = oracle_alloc(T * HI * DI * sizeof *q);
    float *wi = oracle_alloc(T * HI * sizeof *wi), *keys = oracle_alloc(N * DI * sizeof *keys);
    float *I = oracle_alloc(T * N * sizeof *I);
    ck_assert_int_eq(v4_query_latent(cq, &l.c, &l.w, x, T), KVL_OK);
    ck_assert_int_eq(v4_index_query(q, wi, ix, &l.w.indexer, cq, x, T, 0), KVL_OK);
    ck_assert_int_eq(v4_index_rotate(q, ix, T * HI), KVL_OK);
    ck_assert_int_eq(v4_index_round_mxfp4(q, ix, T * HI), KVL_OK);
    ck_assert_int_eq(v4_rows_read(keys, &cache.index_keys, 0, N), KVL_OK);
    ck_assert_int_eq(v4_index_scores(I, ix, q, wi, keys, T, N, 0), KVL_OK);
    ck_assert_int_eq(v4_index_select(want, ix, I, T, N), KVL_OK);
    ck_assert_mem_eq(sel, want, T * K * sizeof *sel);
    free(forward(&l, f32, x, T));
    size_t differ = 0;
    for (size_t t = 0; t < T; t++) differ += memcmp(sel + t * K, f32 + t * K, K * sizeof *sel) != 0;
    ck_assert_msg(differ > 0, "the fp4 and float32 picks agree on every row: the draw does not tell the paths apart");
    v4_cache_free(&cache);
    free(x); free(out); free(sel); free(want); free(f32); free(cq); free(q); free(wi); free(keys); free(I);
    v4_weights_free(&l.w);
}
END_TEST

/* The picks of every decode step are the whole-sequence forward's picks of that row (K 3 below the 11
 * entries; the draw of test_csa_matches_definition_with_topk_below_entries, whose margins it checks). */
START_TEST(test_decode_picks_match_forward_picks)
{
    layer l;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_CSA, 3, 3706);
    const size_t T = V4_TOY_T, K = l.c.indexer.topk, d = l.c.d;
    int32_t *want = oracle_alloc(T * K * sizeof *want), *got = oracle_alloc(T * K * sizeof *got);
    float *x = v4_toy_inputs(T, d, 707), *out = oracle_alloc(d * sizeof *out);
    free(forward(&l, want, x, T));
    v4_cache cache;
    ck_assert_int_eq(v4_cache_init(&cache, &l.c, T, V4_CACHE_F32), KVL_OK);
    for (size_t t = 0; t < T; t++)
        ck_assert_msg(v4_decode(out, got + t * K, &l.c, &l.w, &cache, x + t * d) == KVL_OK, "%s", kvl_error());
    ck_assert_mem_eq(got, want, T * K * sizeof *got);
    v4_cache_free(&cache);
    free(want); free(got); free(x); free(out);
    v4_weights_free(&l.w);
}
END_TEST

/* Live bytes per token per layer at real widths: CSA (584 + 68)/4 = 163, HCA 584/128 = 4.5625, window-only
 * 0; the window (W·584) and the compressor states are bounded and reported apart. */
START_TEST(test_live_bytes_per_token_per_layer)
{
    static const double want[3] = {0.0, 163.0, 4.5625};
    const size_t T = 256;
    for (size_t k = 0; k < 3; k++) {
        layer l;
        v4_wide_layer(&l.c, &l.w, k, 800 + k);
        float *x = v4_toy_inputs(T, l.c.d, 810), *out = oracle_alloc(T * l.c.d * sizeof *out);
        v4_cache cache;
        ck_assert_msg(v4_cache_init(&cache, &l.c, T, V4_CACHE_NATIVE) == KVL_OK, "%s", kvl_error());
        ck_assert_msg(v4_prefill(out, NULL, &l.c, &l.w, &cache, x, T - 3) == KVL_OK, "%s", kvl_error());
        for (size_t t = T - 3; t < T; t++)
            ck_assert_int_eq(v4_decode(out, NULL, &l.c, &l.w, &cache, x + t * l.c.d), KVL_OK);
        ck_assert_double_eq((double)v4_cache_bytes_used(&cache) / (double)T, want[k]);
        ck_assert_uint_eq(v4_cache_window_bytes(&cache), l.c.window * 584);
        size_t state = 0;
        if (l.c.kind != KVL_LAYER_WINDOW) {
            const size_t f = 1 + l.c.compressor.overlap;
            state += 2 * f * l.c.compressor.ratio * f * 512 * sizeof(float);
        }
        if (l.c.kind == KVL_LAYER_CSA) state += 2 * 8 * 256 * sizeof(float);
        ck_assert_uint_eq(v4_cache_state_bytes(&cache), state);
        v4_cache_free(&cache);
        free(x); free(out);
        v4_weights_free(&l.w);
    }
}
END_TEST

/* A NaN in the input, a native cache at toy widths, a cache of another layer, and a prefill past
 * max_tokens are refused with a message, the cache unchanged. */
START_TEST(test_bad_input_is_refused)
{
    layer l, h;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_CSA, 3, 820);
    v4_toy_layer(&h.c, &h.w, V4_TOY_LAYER_HCA, 3, 821);
    v4_cache cache;
    ck_assert_int_eq(v4_cache_init(&cache, &l.c, 16, V4_CACHE_NATIVE), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "584"));
    ck_assert_int_eq(v4_cache_init(&cache, &l.c, 16, V4_CACHE_F32), KVL_OK);
    float *x = v4_toy_inputs(17, l.c.d, 822), out[17 * 64];
    x[3 * l.c.d + 5] = NAN;
    ck_assert_int_eq(v4_prefill(out, NULL, &l.c, &l.w, &cache, x, 4), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "NaN"));
    ck_assert_uint_eq(cache.len, 0);
    ck_assert_uint_eq(cache.window.len, 0);
    ck_assert_int_eq(v4_prefill(out, NULL, &h.c, &h.w, &cache, x, 2), KVL_EINVAL);
    x[3 * l.c.d + 5] = 0;
    ck_assert_int_eq(v4_prefill(out, NULL, &l.c, &l.w, &cache, x, 17), KVL_EINVAL);
    ck_assert_uint_eq(cache.len, 0);
    ck_assert_int_eq(v4_prefill(out, NULL, &l.c, &l.w, &cache, x, 16), KVL_OK);
    ck_assert_int_eq(v4_decode(out, NULL, &l.c, &l.w, &cache, x), KVL_EINVAL);
    v4_cache_free(&cache);
    free(x);
    v4_weights_free(&l.w);
    v4_weights_free(&h.w);
}
END_TEST

/* The row store keeps the newest S positions of a run at slot p mod S, reads back what it stored, and a
 * restart (a replay's window) starts an empty run at any position; packed rows hold exactly their width. */
START_TEST(test_rows_hold_the_newest_slots_of_a_run)
{
    v4_rows r;
    ck_assert_int_eq(v4_rows_init(&r, V4_ROWS_MAIN, 256, 4), KVL_EINVAL);
    ck_assert_int_eq(v4_rows_init(&r, V4_ROWS_INDEX, 128, 0), KVL_EINVAL);
    ck_assert_int_eq(v4_rows_init(&r, V4_ROWS_F32, 3, 4), KVL_OK);
    float x[6 * 3], got[6 * 3];
    for (size_t i = 0; i < 18; i++) x[i] = (float)i;
    ck_assert_int_eq(v4_rows_append(&r, x, 6), KVL_OK);
    ck_assert_uint_eq(v4_rows_held(&r), 4);
    ck_assert_uint_eq(v4_rows_oldest(&r), 2);
    ck_assert_uint_eq(v4_rows_bytes_used(&r), 4 * 3 * sizeof(float));
    ck_assert_int_eq(v4_rows_read(got, &r, 1, 2), KVL_EINVAL);
    ck_assert_int_eq(v4_rows_read(got, &r, 2, 4), KVL_OK);
    ck_assert_mem_eq(got, x + 2 * 3, 4 * 3 * sizeof *got);
    v4_rows_restart(&r, 40);
    ck_assert_uint_eq(v4_rows_held(&r), 0);
    ck_assert_int_eq(v4_rows_append(&r, x, 2), KVL_OK);
    ck_assert_uint_eq(v4_rows_oldest(&r), 40);
    ck_assert_int_eq(v4_rows_read(got, &r, 40, 2), KVL_OK);
    ck_assert_mem_eq(got, x, 2 * 3 * sizeof *got);
    ck_assert_int_eq(v4_rows_read(got, &r, 39, 1), KVL_EINVAL);
    v4_rows_free(&r);
}
END_TEST

/* An HCA query over more rows than one attention tile (8 window rows and 600 entries: tiles that hold both,
 * and tiles of entries alone) reads its entries where they are: bf16 entries decoded a tile at a time give
 * the bits of the same values read in place, and both the plain-loop definition (v4_attend_weights and
 * v4_attend_values) to float rounding. */
START_TEST(test_hca_attention_reads_packed_entries_tile_by_tile)
{
    layer l;
    v4_toy_layer(&l.c, &l.w, V4_TOY_LAYER_HCA, 3, 740);
    const size_t M = l.c.compressor.ratio, W = l.c.window, H = l.c.n_heads, Dh = l.c.head_dim;
    const size_t N = 600, S = 2, start = N * M, win_first = start + 1 - W, n_win = start + S - win_first;
    float *q = v4_toy_inputs(S * H, Dh, 741), *win = v4_toy_inputs(n_win, Dh, 742), *ent = v4_toy_inputs(N + 1, Dh, 743);
    uint16_t *codes = malloc((N + 1) * Dh * sizeof *codes);
    for (size_t i = 0; i < (N + 1) * Dh; i++) {
        codes[i] = kvf_bf16_encode(ent[i]);
        ent[i] = kvf_bf16_decode(codes[i]);
    }
    const kvl_row_tiles packed = kvl_row_tiles_bf16(codes, N + 1, Dh), plain = kvl_row_tiles_f32(ent, N + 1, Dh);
    float *a = oracle_alloc(S * H * Dh * sizeof *a), *b = oracle_alloc(S * H * Dh * sizeof *b);
    ck_assert_msg(v4_attend(a, &l.c, &l.w, q, win, win_first, &packed, NULL, S, start) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(v4_attend(b, &l.c, &l.w, q, win, win_first, &plain, NULL, S, start), KVL_OK);
    ck_assert_mem_eq(a, b, S * H * Dh * sizeof *a);

    const size_t most = W + (start + S) / M;
    const float **keys = malloc(most * sizeof *keys);
    float *p = oracle_alloc(H * most * sizeof *p), *o = oracle_alloc(H * Dh * sizeof *o);
    double *want = oracle_alloc(S * H * Dh * sizeof *want);
    for (size_t i = 0; i < S; i++) {
        const size_t t = start + i;
        size_t n = 0;
        for (size_t j = t + 1 - W; j <= t; j++) keys[n++] = win + (j - win_first) * Dh;
        for (size_t e = 0; e < (t + 1) / M; e++) keys[n++] = ent + e * Dh;
        v4_attend_weights(p, q + i * H * Dh, keys, n, l.w.sinks, H, Dh);
        v4_attend_values(o, p, keys, n, H, Dh);
        v4_unrotate_heads(o, 1, H, Dh, &l.c.rope, (int64_t)t + l.c.rope_offset);
        for (size_t k = 0; k < H * Dh; k++) want[i * H * Dh + k] = o[k];
    }
    const double tol = oracle_f32_tol(Dh + most);
    kvl_expect_close("HCA over 608 rows", a, want, S * H * Dh, tol, tol, 1 - 1e-6);
    free(q); free(win); free(ent); free(codes); free(a); free(b); free(keys); free(p); free(o); free(want);
    v4_weights_free(&l.w);
}
END_TEST

/* A CSA query's picks, read where they are by the part of the attention that reads them: 8 window rows
 * and 1,100 picks (unsorted, repeated, −1 among them) of 2,000 bf16 entries, 64 heads of 128, past the
 * split threshold so two threads share the rows, tiles holding window rows and picks and tiles of picks
 * alone. Packed entries give the bits of the same values read in place, on 1 and 2 threads alike to float
 * rounding, and both match the definition in double (softmax with the sink over the valid rows, each head's
 * trailing 64 channels rotated back at the query's position, 5,000). A pick past the entries is refused by
 * name. */
START_TEST(test_csa_query_reads_its_picks_in_place_on_every_thread)
{
    const size_t H = 64, Dh = 128, N = 2000, n_win = 8, K = 1100;
    float *q = v4_toy_inputs(H, Dh, 761), *win = v4_toy_inputs(n_win, Dh, 762), *ent = v4_toy_inputs(N, Dh, 763);
    float *sinks = v4_toy_inputs(1, H, 764);
    uint16_t *codes = malloc(N * Dh * sizeof *codes);
    int32_t *sel = malloc(K * sizeof *sel);
    for (size_t i = 0; i < N * Dh; i++) {
        codes[i] = kvf_bf16_encode(ent[i]);
        ent[i] = kvf_bf16_decode(codes[i]);
    }
    kvl_rng rng;
    kvl_rng_seed(&rng, 765);
    for (size_t k = 0; k < K; k++) sel[k] = k % 11 == 4 ? -1 : (int32_t)(kvl_rng_next_u64(&rng) % N);
    const kvl_row_tiles packed = kvl_row_tiles_bf16(codes, N, Dh), plain = kvl_row_tiles_f32(ent, N, Dh);
    float *a = oracle_alloc(H * Dh * sizeof *a), *b = oracle_alloc(H * Dh * sizeof *b);
    float *two = oracle_alloc(H * Dh * sizeof *two);
    double *want = oracle_alloc(H * Dh * sizeof *want), *p = oracle_alloc((n_win + K) * sizeof *p);
    const float **rows = malloc((n_win + K) * sizeof *rows);
    kvl_rope rope;
    const size_t Dr = 64;
    const int64_t pos = 5000;
    ck_assert_int_eq(kvl_rope_init(&rope, Dr, 1e4), KVL_OK);
    const int threads = kvl_threads();
    kvl_set_threads(1);
    ck_assert_msg(v4_attend_query(a, q, win, n_win, &packed, sel, K, sinks, H, Dh, &rope, pos) == KVL_OK, "%s",
                  kvl_error());
    ck_assert_int_eq(v4_attend_query(b, q, win, n_win, &plain, sel, K, sinks, H, Dh, &rope, pos), KVL_OK);
    ck_assert_mem_eq(a, b, H * Dh * sizeof *a);
    kvl_set_threads(2);
    ck_assert_int_eq(v4_attend_query(two, q, win, n_win, &packed, sel, K, sinks, H, Dh, &rope, pos), KVL_OK);
    kvl_set_threads(threads);

    size_t n = 0;
    for (size_t j = 0; j < n_win; j++) rows[n++] = win + j * Dh;
    for (size_t k = 0; k < K; k++)
        if (sel[k] >= 0) rows[n++] = ent + (size_t)sel[k] * Dh;
    for (size_t h = 0; h < H; h++) {
        double m = sinks[h], l = 0.0;
        for (size_t j = 0; j < n; j++) {
            double dot = 0.0;
            for (size_t i = 0; i < Dh; i++) dot += (double)q[h * Dh + i] * rows[j][i];
            p[j] = dot / sqrt((double)Dh);
            if (p[j] > m) m = p[j];
        }
        l = exp(sinks[h] - m);
        for (size_t j = 0; j < n; j++) l += p[j] = exp(p[j] - m);
        for (size_t i = 0; i < Dh; i++) {
            double acc = 0.0;
            for (size_t j = 0; j < n; j++) acc += p[j] / l * rows[j][i];
            want[h * Dh + i] = acc;
        }
        kvl_rope_unrotate_interleaved_f64(want + h * Dh + Dh - Dr, &rope, pos);
    }
    const double tol = oracle_f32_tol(Dh + n);
    kvl_expect_close("CSA query over 8 window rows and its picks, 1 thread", a, want, H * Dh, tol, tol, 1 - 1e-6);
    kvl_expect_close("the same on 2 threads", two, want, H * Dh, tol, tol, 1 - 1e-6);

    sel[K - 1] = (int32_t)N;
    ck_assert_int_eq(v4_attend_query(a, q, win, n_win, &packed, sel, K, sinks, H, Dh, &rope, pos), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "2000") && strstr(kvl_error(), "1099"), "names the pick: %s", kvl_error());
    free(q); free(win); free(ent); free(sinks); free(codes); free(sel); free(a); free(b); free(two); free(want);
    free(p); free(rows);
}
END_TEST

/* A long read of packed rows splits over threads (and a tile view reads the same rows): every row decodes
 * as it does read alone. 4,096 main rows are 2M values, past the split threshold. */
START_TEST(test_rows_read_in_parts_decode_each_row_as_read_alone)
{
    const size_t n = 4096, Dh = 512;
    v4_rows r;
    ck_assert_int_eq(v4_rows_init(&r, V4_ROWS_MAIN, Dh, n), KVL_OK);
    float *x = malloc(n * Dh * sizeof *x), *all = malloc(n * Dh * sizeof *all), *one = malloc(Dh * sizeof *one);
    kvl_rng rng;
    kvl_rng_seed(&rng, 61);
    kvl_rng_uniform_f32(&rng, x, n * Dh, -3.0, 3.0);
    ck_assert_int_eq(v4_rows_append(&r, x, n), KVL_OK);
    const int threads = kvl_threads();
    kvl_set_threads(2);
    ck_assert_int_eq(v4_rows_read(all, &r, 0, n), KVL_OK);
    kvl_set_threads(threads);
    const kvl_row_tiles view = v4_rows_tiles(&r);
    ck_assert_uint_eq(view.N, n);
    for (size_t i = 0; i < n; i++) {
        ck_assert_int_eq(v4_rows_read(one, &r, i, 1), KVL_OK);
        ck_assert_mem_eq(all + i * Dh, one, Dh * sizeof *one);
        ck_assert_int_eq(kvl_row_tiles_read(one, &view, i, 1), KVL_OK);
        ck_assert_mem_eq(all + i * Dh, one, Dh * sizeof *one);
    }
    ck_assert_int_eq(kvl_row_tiles_read(one, &view, n, 1), KVL_EINVAL);
    v4_rows_free(&r);
    free(x); free(all); free(one);
}
END_TEST

/* The loader's layer map: V4-Flash layers 0–1 window-only, even 2–42 CSA (M 4, top-512), odd 3–41 HCA
 * (M 128); ratio-0 layers rotate with θ 1e4 and the others with the compress rope (θ 1.6e5, YaRN). */
START_TEST(test_flash_layer_map_and_rotary_choice)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4-flash.json")) == KVL_OK, "%s", kvl_error());
    size_t n[3] = {0};
    kvl_rope plain, yarn;
    ck_assert_int_eq(kvl_rope_init(&plain, 64, 1e4), KVL_OK);
    ck_assert_int_eq(kvl_rope_init_yarn(&yarn, 64, 1.6e5, 16, 65536, 32, 1), KVL_OK);
    for (size_t i = 0; i < m.n_layers; i++) {
        v4_config c;
        ck_assert_msg(v4_config_from_model(&c, &m, i) == KVL_OK, "%s", kvl_error());
        const kvl_rope *want = i < 2 ? &plain : &yarn;
        ck_assert_mem_eq(c.rope.theta, want->theta, 32 * sizeof(float));
        if (c.kind == KVL_LAYER_WINDOW) {
            n[0]++;
            ck_assert_uint_lt(i, 2);
        }
        if (c.kind == KVL_LAYER_CSA) {
            n[1]++;
            ck_assert(i >= 2 && i % 2 == 0);
            ck_assert_uint_eq(c.compressor.ratio, 4);
            ck_assert_uint_eq(c.indexer.topk, 512);
        }
        if (c.kind == KVL_LAYER_HCA) {
            n[2]++;
            ck_assert(i % 2 == 1);
            ck_assert_uint_eq(c.compressor.ratio, 128);
        }
    }
    ck_assert_uint_eq(n[0], 2);
    ck_assert_uint_eq(n[1], 21);
    ck_assert_uint_eq(n[2], 20);
    kvl_model_free(&m);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch06_v4");
    TCase *tc = tcase_create("layer");
    tcase_add_test(tc, test_window_layer_matches_definition);
    tcase_add_test(tc, test_hca_matches_dense_attention_over_visible_entries_plus_window);
    tcase_add_test(tc, test_csa_matches_dense_attention_when_topk_covers_every_entry);
    tcase_add_test(tc, test_csa_matches_definition_with_topk_below_entries);
    tcase_add_test(tc, test_index_scores_carry_both_scale_factors);
    tcase_add_test(tc, test_query_sees_entry_iff_its_block_is_complete);
    tcase_add_test(tc, test_grouped_output_matches_dense_projection);
    tcase_add_test(tc, test_output_unchanged_when_every_rotary_position_shifts);
    tcase_add_test(tc, test_flash_layer_map_and_rotary_choice);
    tcase_add_test(tc, test_rows_hold_the_newest_slots_of_a_run);
    tcase_add_test(tc, test_csa_query_reads_its_picks_in_place_on_every_thread);
    tcase_add_test(tc, test_rows_read_in_parts_decode_each_row_as_read_alone);
    tcase_add_test(tc, test_hca_attention_reads_packed_entries_tile_by_tile);
    suite_add_tcase(s, tc);
    TCase *tk = tcase_create("cache");
    tcase_add_test(tk, test_decode_matches_forward_across_block_and_window_edges);
    tcase_add_test(tk, test_replay_reproduces_rows_past_the_window_reach);
    tcase_add_test(tk, test_native_rows_dequantise_within_format_bounds);
    tcase_add_test(tk, test_fp4_index_scores_within_mxfp4_bound_of_f32);
    tcase_add_test(tk, test_native_chunks_read_the_rows_the_cache_stores);
    tcase_add_test(tk, test_native_csa_picks_use_the_fp4_query_key_path);
    tcase_add_test(tk, test_decode_picks_match_forward_picks);
    tcase_add_test(tk, test_live_bytes_per_token_per_layer);
    tcase_add_test(tk, test_bad_input_is_refused);
    suite_add_tcase(s, tk);
    TCase *ts = tcase_create("sinks");
    tcase_add_test(ts, test_sink_at_minus_infinity_recovers_plain_softmax);
    tcase_add_test(ts, test_weights_sum_to_one_minus_sink_probability);
    tcase_add_test(ts, test_no_valid_entry_gives_zero_output);
    suite_add_tcase(s, ts);
    return s;
}
