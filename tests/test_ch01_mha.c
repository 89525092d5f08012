/* ref/mha (chapter 1): MHA, GQA and MQA as one module, against the double definition
 * (tests/oracle_attention.h), and three properties: the GQA family, cache paths = whole-sequence forward,
 * and (live cache bytes = the formula 2·Hkv·Dh·b per token). */
#include "common.h"
#include "oracle_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attend_cpu.h"
#include "backend_cpu.h"
#include "config.h"
#include "linalg.h"
#include "threads.h"
#include "mha.h"
#include "rng.h"
#include "status.h"

/* Toy size: d 64, H 4, Hkv ∈ {4, 2, 1}, Dh 16, T 40. */
#define TOY_D 64
#define TOY_H 4
#define TOY_DH 16
#define T_TOY 40
#define ROPE_BASE 10000.0

static size_t toy_path(size_t T) { return TOY_D + TOY_DH + T + TOY_H * TOY_DH; }
/* Two float32 paths each within oracle_f32_tol of the definition are within twice that of each other. */
static double twin_tol(size_t T) { return 2 * oracle_f32_tol(toy_path(T)); }
/* Elementwise errors below 1e-3 of O(1) values leave the cosine above 1 − 1e-6; a lower one means a
 * systematic difference (a wrong head, a wrong position) spread too thin to trip one element. */
#define MIN_COS (1 - 1e-6)

/* bf16 stores 8 significant bits: rounding to nearest moves a value by at most 2^-8 of itself. */
#define BF16_U 0x1p-8

typedef struct {
    mha_config c;
    mha_weights w;
} layer;

static void layer_make(layer *L, size_t Hkv, size_t W, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ck_assert_msg(mha_config_init(&L->c, TOY_D, TOY_H, Hkv, TOY_DH, W, ROPE_BASE) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(mha_weights_init_random(&L->w, &L->c, &rng) == KVL_OK, "%s", kvl_error());
}

static void layer_free(layer *L) { mha_weights_free(&L->w); }

static float *inputs(size_t T, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    float *x = oracle_alloc(T * TOY_D * sizeof *x);
    kvl_rng_normal_f32(&rng, x, T * TOY_D, 1.0);
    return x;
}

/* The oracle's view of a layer, head h reading kv_of[h]. */
static oracle_mha_layer oracle_of(const layer *L, const size_t *kv_of)
{
    return (oracle_mha_layer){.d = TOY_D, .H = TOY_H, .Hkv = L->c.n_kv_heads, .Dh = TOY_DH, .W = L->c.window,
                              .theta = L->c.rope.theta, .kv_of = kv_of, .w_q = L->w.w_q, .w_k = L->w.w_k,
                              .w_v = L->w.w_v, .w_o = L->w.w_o};
}

/* kv_of[h] = ⌊h / (TOY_H/Hkv)⌋: consecutive query heads share a KV head. */
static void grouped(size_t kv_of[TOY_H], size_t Hkv)
{
    for (size_t h = 0; h < TOY_H; h++) kv_of[h] = h / (TOY_H / Hkv);
}

static double *oracle_out(const layer *L, const size_t *kv_of, const float *x, size_t T)
{
    oracle_mha_layer o = oracle_of(L, kv_of);
    double *xd = oracle_widen(x, T * TOY_D), *want = oracle_alloc(T * TOY_D * sizeof *want);
    oracle_mha(want, &o, xd, T);
    free(xd);
    return want;
}

static float *forward(const layer *L, const float *x, size_t T)
{
    float *out = oracle_alloc(T * TOY_D * sizeof *out);
    ck_assert_msg(mha_forward(out, &L->c, &L->w, x, T) == KVL_OK, "%s", kvl_error());
    return out;
}

static void expect_forward_is_definition(size_t Hkv, size_t W, size_t T, uint64_t seed)
{
    layer L;
    layer_make(&L, Hkv, W, seed);
    size_t kv_of[TOY_H];
    grouped(kv_of, Hkv);
    float *x = inputs(T, seed + 1000), *got = forward(&L, x, T);
    double *want = oracle_out(&L, kv_of, x, T);
    char what[96];
    snprintf(what, sizeof what, "mha_forward Hkv %zu W %zu T %zu", Hkv, W, T);
    kvl_expect_close(what, got, want, T * TOY_D, oracle_f32_tol(toy_path(T)), 0, MIN_COS);
    free(x); free(got); free(want);
    layer_free(&L);
}

/* Run x[T] through a cache: prefill chunks of the given lengths (summing to ≤ T), then decode one
 * token at a time to T. */
static float *cached(const layer *L, const float *x, size_t T, const size_t *chunks, size_t n_chunks, kv_store store)
{
    mha_cache cache;
    ck_assert_msg(mha_cache_init(&cache, &L->c, T, store) == KVL_OK, "%s", kvl_error());
    float *out = oracle_alloc(T * TOY_D * sizeof *out);
    size_t t = 0;
    for (size_t i = 0; i < n_chunks; i++) {
        ck_assert_msg(mha_prefill(out + t * TOY_D, &L->c, &L->w, &cache, x + t * TOY_D, chunks[i]) == KVL_OK, "%s",
                      kvl_error());
        t += chunks[i];
    }
    for (; t < T; t++)
        ck_assert_msg(mha_decode(out + t * TOY_D, &L->c, &L->w, &cache, x + t * TOY_D) == KVL_OK, "%s", kvl_error());
    mha_cache_free(&cache);
    return out;
}

static void expect_cached_is_forward(size_t Hkv, size_t W, size_t T, const size_t *chunks, size_t n_chunks,
                                     uint64_t seed)
{
    layer L;
    layer_make(&L, Hkv, W, seed);
    float *x = inputs(T, seed + 1000), *want_f = forward(&L, x, T);
    float *got = cached(&L, x, T, chunks, n_chunks, KV_STORE_F32);
    double *want = oracle_widen(want_f, T * TOY_D);
    char what[128];
    int at = snprintf(what, sizeof what, "Hkv %zu W %zu T %zu chunks", Hkv, W, T);
    for (size_t i = 0; i < n_chunks && at < (int)sizeof what - 8; i++)
        at += snprintf(what + at, sizeof what - (size_t)at, " %zu", chunks[i]);
    snprintf(what + at, sizeof what - (size_t)at, " then decode");
    kvl_expect_close(what, got, want, T * TOY_D, twin_tol(T), 0, MIN_COS);
    free(x); free(want_f); free(got); free(want);
    layer_free(&L);
}

/* ---- the definition -------------------------------------------------------------------------------- */

START_TEST(test_forward_matches_definition_for_mha_gqa_mqa)
{
    const size_t hkv[] = {4, 2, 1};
    for (size_t i = 0; i < 3; i++) expect_forward_is_definition(hkv[i], 0, T_TOY, 10 + i);
}
END_TEST

START_TEST(test_forward_matches_definition_when_windowed)
{
    const size_t hkv[] = {4, 2, 1};
    for (size_t i = 0; i < 3; i++) expect_forward_is_definition(hkv[i], 8, T_TOY, 20 + i);
}
END_TEST

START_TEST(test_forward_matches_definition_when_t_is_1)
{
    expect_forward_is_definition(2, 0, 1, 30);
    expect_forward_is_definition(1, 8, 1, 31);
}
END_TEST

/* ---- the GQA family ------------------------------------------------------------------------------- */

/* Hkv = TOY_H: every head reads its own K and V, which is MHA. */
START_TEST(test_gqa_matches_mha_when_n_kv_equals_n_heads)
{
    layer L;
    layer_make(&L, TOY_H, 0, 40);
    size_t own[TOY_H];
    for (size_t h = 0; h < TOY_H; h++) own[h] = h;
    float *x = inputs(T_TOY, 41), *got = forward(&L, x, T_TOY);
    double *want = oracle_out(&L, own, x, T_TOY);
    kvl_expect_close("GQA-TOY_H against MHA", got, want, T_TOY * TOY_D, oracle_f32_tol(toy_path(T_TOY)), 0, MIN_COS);
    free(x); free(got); free(want);
    layer_free(&L);
}
END_TEST

/* Hkv = 1: every head reads the one shared K and V, which is MQA. */
START_TEST(test_gqa_matches_mqa_when_n_kv_is_1)
{
    layer L;
    layer_make(&L, 1, 0, 50);
    size_t shared[TOY_H] = {0};
    float *x = inputs(T_TOY, 51), *got = forward(&L, x, T_TOY);
    double *want = oracle_out(&L, shared, x, T_TOY);
    kvl_expect_close("GQA-1 against MQA", got, want, T_TOY * TOY_D, oracle_f32_tol(toy_path(T_TOY)), 0, MIN_COS);
    free(x); free(got); free(want);
    layer_free(&L);
}
END_TEST

/* The heads are grouped consecutively (h / (TOY_H/Hkv)), not round-robin (h mod Hkv): the oracle with the
 * other assignment must disagree, so the grouping is really tested. */
START_TEST(test_gqa_groups_consecutive_heads)
{
    layer L;
    layer_make(&L, 2, 0, 60);
    size_t round_robin[TOY_H];
    for (size_t h = 0; h < TOY_H; h++) round_robin[h] = h % 2;
    float *x = inputs(T_TOY, 61), *got = forward(&L, x, T_TOY);
    double *wrong = oracle_out(&L, round_robin, x, T_TOY), worst = 0;
    for (size_t i = 0; i < T_TOY * TOY_D; i++) worst = fmax(worst, fabs(got[i] - wrong[i]));
    ck_assert_msg(worst > 100 * oracle_f32_tol(toy_path(T_TOY)), "round-robin grouping agrees too well: %g", worst);
    free(x); free(got); free(wrong);
    layer_free(&L);
}
END_TEST

/* GQA-G equals the MHA whose K and V heads are copies of the group's head: same W_Q and W_O, and
 * MHA's K/V head h = GQA's head ⌊h/(TOY_H/G)⌋. Its cache is TOY_H/G times larger for the same outputs. */
START_TEST(test_gqa_matches_mha_when_kv_heads_are_copies)
{
    const size_t G = 2, group = TOY_H / G, T = T_TOY;
    layer gqa, mha;
    layer_make(&gqa, G, 0, 70);
    layer_make(&mha, TOY_H, 0, 71);
    memcpy(mha.w.w_q, gqa.w.w_q, TOY_H * TOY_DH * TOY_D * sizeof(float));
    memcpy(mha.w.w_o, gqa.w.w_o, TOY_D * TOY_H * TOY_DH * sizeof(float));
    for (size_t h = 0; h < TOY_H; h++) {
        memcpy(mha.w.w_k + h * TOY_DH * TOY_D, gqa.w.w_k + (h / group) * TOY_DH * TOY_D, TOY_DH * TOY_D * sizeof(float));
        memcpy(mha.w.w_v + h * TOY_DH * TOY_D, gqa.w.w_v + (h / group) * TOY_DH * TOY_D, TOY_DH * TOY_D * sizeof(float));
    }
    float *x = inputs(T, 72), *got = forward(&gqa, x, T), *mha_f = forward(&mha, x, T);
    double *want = oracle_widen(mha_f, T * TOY_D);
    kvl_expect_close("GQA-2 against MHA with copied K/V heads", got, want, T * TOY_D, twin_tol(T), 0, MIN_COS);

    mha_cache cg, cm;
    ck_assert(mha_cache_init(&cg, &gqa.c, T, KV_STORE_F32) == KVL_OK);
    ck_assert(mha_cache_init(&cm, &mha.c, T, KV_STORE_F32) == KVL_OK);
    float *og = oracle_alloc(T * TOY_D * sizeof *og), *om = oracle_alloc(T * TOY_D * sizeof *om);
    ck_assert(mha_prefill(og, &gqa.c, &gqa.w, &cg, x, T) == KVL_OK);
    ck_assert(mha_prefill(om, &mha.c, &mha.w, &cm, x, T) == KVL_OK);
    ck_assert_uint_eq(mha_cache_bytes_used(&cm), group * mha_cache_bytes_used(&cg));
    mha_cache_free(&cg); mha_cache_free(&cm);
    free(x); free(got); free(mha_f); free(want); free(og); free(om);
    layer_free(&gqa); layer_free(&mha);
}
END_TEST

/* ---- cache paths = whole sequence ----------------------------------------------------------------- */

START_TEST(test_decode_matches_forward_when_token_by_token)
{
    const size_t hkv[] = {4, 2, 1};
    for (size_t i = 0; i < 3; i++) expect_cached_is_forward(hkv[i], 0, T_TOY, NULL, 0, 80 + i);
}
END_TEST

/* Prefill of any prefix length (1, 4, …, 40: most not multiples of 8), then one-token decodes. */
START_TEST(test_decode_matches_forward_after_prefill_of_any_prefix)
{
    for (size_t p = 1; p <= T_TOY; p += 3) {
        const size_t chunk[] = {p};
        expect_cached_is_forward(2, 0, T_TOY, chunk, 1, 90 + p);
        expect_cached_is_forward(1, 8, T_TOY, chunk, 1, 90 + p);   /* windowed: T = 5W */
    }
}
END_TEST

/* Caches longer than one tile of the CPU backend's attention (cpu/attend_cpu.h), under each backend:
 * decode steps at N = KVL_ATTEND_TILE − 1 … KVL_ATTEND_TILE + 45 cross the tile boundary; a window of
 * KVL_ATTEND_TILE + 10 wraps its ring while holding more than a tile. */
START_TEST(test_decode_matches_forward_when_cache_spans_tiles)
{
    const size_t prefix[] = {KVL_ATTEND_TILE - 2};
    for (size_t b = 0; kvl_test_backend(b); b++) {
        kvl_backend_use(kvl_test_backend(b));
        expect_cached_is_forward(2, 0, KVL_ATTEND_TILE + 45, prefix, 1, 130);
        expect_cached_is_forward(4, KVL_ATTEND_TILE + 10, KVL_ATTEND_TILE + 70, prefix, 1, 131);
    }
    kvl_backend_use(NULL);
}
END_TEST

START_TEST(test_prefill_matches_forward_when_chunked)
{
    static const size_t a[] = {5, 11, 3, 13, 8}, b[] = {1, 1, 17, 2, 19}, c[] = {40}, d[] = {7, 26};
    const size_t hkv[] = {4, 2, 1};
    for (size_t i = 0; i < 3; i++) {
        expect_cached_is_forward(hkv[i], 0, T_TOY, a, 5, 100 + i);
        expect_cached_is_forward(hkv[i], 0, T_TOY, b, 5, 110 + i);
        expect_cached_is_forward(hkv[i], 0, T_TOY, c, 1, 120 + i);
        expect_cached_is_forward(hkv[i], 0, T_TOY, d, 2, 130 + i);   /* 33 tokens, then 7 decodes */
    }
}
END_TEST

/* Chunks longer than a query block of the prefill's attention (kvl_attend_chunk_head): 6·KVL_QUERY_BLOCK + 31
 * tokens through the forward, as chunks of 10 and the rest (blocks straddling the first chunk's end, the
 * last partial) and as one chunk, causal and behind a window of 8, on one thread and on two (the heads
 * split between them: the chunk's work is past KVL_SPLIT_MIN_MACS), each against the definition; the
 * products on the CPU backend, which splits them too. */
START_TEST(test_prefill_matches_definition_when_chunk_spans_query_blocks)
{
    const size_t T = 6 * KVL_QUERY_BLOCK + 31, split[] = {10, T - 10}, whole[] = {T};
    const int threads = kvl_threads();
    kvl_backend_use(&kvl_backend_cpu);
    for (size_t W = 0; W <= 8; W += 8) {
        layer L;
        layer_make(&L, 2, W, 160 + W);
        size_t kv_of[TOY_H];
        grouped(kv_of, 2);
        float *x = inputs(T, 170 + W);
        double *want = oracle_out(&L, kv_of, x, T);
        for (int th = 1; th <= 2; th++) {
            kvl_set_threads(th);
            float *paths[] = {forward(&L, x, T), cached(&L, x, T, split, 2, KV_STORE_F32),
                              cached(&L, x, T, whole, 1, KV_STORE_F32)};
            const char *names[] = {"forward", "chunks 10 + rest", "one chunk"};
            for (size_t i = 0; i < 3; i++) {
                char what[96];
                snprintf(what, sizeof what, "%s of %zu, W %zu, %d thread(s)", names[i], T, W, th);
                kvl_expect_close(what, paths[i], want, T * TOY_D, oracle_f32_tol(toy_path(T)), 0, MIN_COS);
                free(paths[i]);
            }
        }
        kvl_set_threads(threads);
        free(x); free(want);
        layer_free(&L);
    }
}
END_TEST

/* A prefill chunk of one token is a decode step: the two paths agree on every row. */
START_TEST(test_prefill_matches_decode_when_chunk_is_1)
{
    size_t ones[T_TOY];
    for (size_t i = 0; i < T_TOY; i++) ones[i] = 1;
    expect_cached_is_forward(2, 0, T_TOY, ones, T_TOY, 140);
    expect_cached_is_forward(1, 8, T_TOY, ones, T_TOY, 141);
}
END_TEST

START_TEST(test_decode_matches_forward_when_t_is_1)
{
    expect_cached_is_forward(2, 0, 1, NULL, 0, 150);
    const size_t one[] = {1};
    expect_cached_is_forward(4, 8, 1, one, 1, 151);
}
END_TEST

/* ---- bytes ---------------------------------------------------------------------------------------- */

/* After t tokens a full cache holds t·2·Hkv·Dh·b bytes (b = 4 for float32, 2 for bf16). */
START_TEST(test_cache_bytes_match_formula_per_token)
{
    const size_t hkv[] = {4, 2, 1};
    const kv_store stores[] = {KV_STORE_F32, KV_STORE_BF16};
    const size_t b[] = {4, 2};
    for (size_t i = 0; i < 3; i++)
        for (size_t s = 0; s < 2; s++) {
            layer L;
            layer_make(&L, hkv[i], 0, 160 + i);
            mha_cache cache;
            ck_assert(mha_cache_init(&cache, &L.c, T_TOY, stores[s]) == KVL_OK);
            float *x = inputs(T_TOY, 170), out[TOY_D];
            ck_assert_uint_eq(mha_cache_bytes_used(&cache), 0);
            for (size_t t = 0; t < T_TOY; t++) {
                ck_assert(mha_decode(out, &L.c, &L.w, &cache, x + t * TOY_D) == KVL_OK);
                ck_assert_uint_eq(mha_cache_bytes_used(&cache), (t + 1) * 2 * hkv[i] * TOY_DH * b[s]);
            }
            mha_cache_free(&cache);
            free(x);
            layer_free(&L);
        }
}
END_TEST

/* DeepSeek LLM 67B (95 layers, Hkv 8, Dh 128, bf16): a layer's cache grows by 4,096 B per token, and
 * 95 of them by 389,120 B. The rows are appended directly: the formula is about storage, not weights. */
START_TEST(test_cache_bytes_match_formula_at_deepseek_llm_67b)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-llm-67b.json")) == KVL_OK, "%s", kvl_error());
    mha_config c;
    ck_assert_msg(mha_config_from_model(&c, &m, 0) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(c.n_kv_heads, 8);
    ck_assert_uint_eq(c.head_dim, 128);
    mha_cache cache;
    ck_assert(mha_cache_init(&cache, &c, 3, KV_STORE_BF16) == KVL_OK);
    float *rows = oracle_alloc(3 * 2 * 8 * 128 * sizeof *rows);
    ck_assert(kv_ring_append(&cache.ring, rows, 3) == KVL_OK);
    ck_assert_uint_eq(mha_cache_bytes_used(&cache), 3 * 4096);
    ck_assert_uint_eq(m.n_layers * mha_cache_bytes_used(&cache) / 3, 389120);
    free(rows);
    mha_cache_free(&cache);
    kvl_model_free(&m);
}
END_TEST

/* ---- bf16 cache ------------------------------------------------------------------------------------ */

/* Bound on |out_bf16 − out_f32| for every output r of token t. bf16 moves each key and value element
 * by at most u of itself (u = BF16_U), so key j by u·|k_j| (Euclidean) and the score of head h by at
 * most δ_h = u·|q_h|·max_j|k_j|/√Dh. Scores that move by ≤ δ change each softmax weight by a factor
 * within e^{±2δ}, so |Δp_j| ≤ (e^{2δ} − 1)·p_j, and
 *   |Δo_{h,i}| ≤ Σ_j |p̃_j − p_j|·|v_{j,i}| + Σ_j p̃_j·u·|v_{j,i}| ≤ (e^{2δ}(1 + u) − 1)·Σ_j p_j|v_{j,i}|,
 *   |Δout_r|   ≤ Σ_c |W_O[r][c]|·|Δo_c|,
 * with p, q, k, v from the double definition; the float32 arithmetic of the two runs adds twin_tol. */
static void bf16_bound(double *bound /*[d]*/, const layer *L, const size_t *kv_of, const double *q, const double *k,
                       const double *v, size_t t)
{
    const size_t Hkv = L->c.n_kv_heads, qw = TOY_H * TOY_DH, kw = Hkv * TOY_DH;
    double dob[TOY_H * TOY_DH], p[T_TOY];
    for (size_t h = 0; h < TOY_H; h++) {
        const double *qh = q + t * qw + h * TOY_DH;
        const size_t g = kv_of[h];
        double qn = 0, kmax = 0, mx = -INFINITY, sum = 0;
        for (size_t i = 0; i < TOY_DH; i++) qn += qh[i] * qh[i];
        for (size_t j = 0; j <= t; j++) {
            double kn = 0, s = 0;
            for (size_t i = 0; i < TOY_DH; i++) {
                kn += k[j * kw + g * TOY_DH + i] * k[j * kw + g * TOY_DH + i];
                s += qh[i] * k[j * kw + g * TOY_DH + i];
            }
            kmax = fmax(kmax, sqrt(kn));
            p[j] = s / sqrt((double)TOY_DH);
            mx = fmax(mx, p[j]);
        }
        for (size_t j = 0; j <= t; j++) sum += (p[j] = exp(p[j] - mx));
        double delta = BF16_U * sqrt(qn) * kmax / sqrt((double)TOY_DH), factor = exp(2 * delta) * (1 + BF16_U) - 1;
        for (size_t i = 0; i < TOY_DH; i++) {
            double acc = 0;
            for (size_t j = 0; j <= t; j++) acc += p[j] / sum * fabs(v[j * kw + g * TOY_DH + i]);
            dob[h * TOY_DH + i] = factor * acc;
        }
    }
    for (size_t r = 0; r < TOY_D; r++) {
        double acc = 0;
        for (size_t c = 0; c < qw; c++) acc += fabs(L->w.w_o[r * qw + c]) * dob[c];
        bound[r] = acc + twin_tol(t + 1);
    }
}

START_TEST(test_bf16_cache_within_derived_bound_of_f32_cache)
{
    const size_t hkv[] = {4, 2, 1};
    for (size_t i = 0; i < 3; i++) {
        layer L;
        layer_make(&L, hkv[i], 0, 180 + i);
        float *x = inputs(T_TOY, 190);
        float *f32 = cached(&L, x, T_TOY, NULL, 0, KV_STORE_F32), *bf16 = cached(&L, x, T_TOY, NULL, 0, KV_STORE_BF16);
        size_t kv_of[TOY_H];
        grouped(kv_of, hkv[i]);
        oracle_mha_layer o = oracle_of(&L, kv_of);
        double *xd = oracle_widen(x, T_TOY * TOY_D), *q = oracle_alloc(T_TOY * TOY_H * TOY_DH * sizeof *q);
        double *k = oracle_alloc(T_TOY * hkv[i] * TOY_DH * sizeof *k), *v = oracle_alloc(T_TOY * hkv[i] * TOY_DH * sizeof *v);
        oracle_mha_qkv(q, k, v, &o, xd, T_TOY);
        double worst = 0, worst_ratio = 0, bound[TOY_D];
        for (size_t t = 0; t < T_TOY; t++) {
            bf16_bound(bound, &L, kv_of, q, k, v, t);
            for (size_t r = 0; r < TOY_D; r++) {
                double err = fabs((double)bf16[t * TOY_D + r] - f32[t * TOY_D + r]);
                ck_assert_msg(err <= bound[r], "Hkv %zu token %zu output %zu: the bf16 cache moved it by %g, bound %g",
                              hkv[i], t, r, err, bound[r]);
                worst = fmax(worst, err);
                worst_ratio = fmax(worst_ratio, err / bound[r]);
            }
        }
        ck_assert_msg(worst > 0, "the bf16 cache changed nothing: is it really rounding?");
        printf("bf16 cache, Hkv %zu: max |out_bf16 - out_f32| = %.3g (at most %.0f%% of the derived bound)\n", hkv[i],
               worst, 100 * worst_ratio);
        free(x); free(f32); free(bf16); free(xd); free(q); free(k); free(v);
        layer_free(&L);
    }
}
END_TEST

/* A chunk attends to its own keys as the cache will hold them: with a bf16 cache, prefill in chunks and
 * token-by-token decode read the same rounded rows and agree to float32 arithmetic. */
START_TEST(test_prefill_matches_decode_when_cache_is_bf16)
{
    static const size_t chunks[] = {5, 11, 3, 13};
    layer L;
    layer_make(&L, 2, 0, 195);
    float *x = inputs(T_TOY, 196);
    float *dec = cached(&L, x, T_TOY, NULL, 0, KV_STORE_BF16), *pre = cached(&L, x, T_TOY, chunks, 4, KV_STORE_BF16);
    double *want = oracle_widen(dec, T_TOY * TOY_D);
    kvl_expect_close("bf16 cache: chunked prefill against decode", pre, want, T_TOY * TOY_D, twin_tol(T_TOY), 0,
                     MIN_COS);
    free(x); free(dec); free(pre); free(want);
    layer_free(&L);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------------- */

START_TEST(test_config_rejects_kv_heads_not_dividing_heads)
{
    mha_config c;
    ck_assert_int_eq(mha_config_init(&c, TOY_D, TOY_H, 3, TOY_DH, 0, ROPE_BASE), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "n_kv_heads (3)"));
    ck_assert_int_eq(mha_config_init(&c, TOY_D, TOY_H, 2, 15, 0, ROPE_BASE), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "head_dim"));
}
END_TEST

START_TEST(test_config_from_model_rejects_other_generations)
{
    kvl_model m;
    ck_assert(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v3.json")) == KVL_OK);
    mha_config c;
    ck_assert_int_eq(mha_config_from_model(&c, &m, 0), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "MLA"));
    kvl_model_free(&m);
}
END_TEST

/* A config the module cannot run is refused with the file and the reason in one message. */
START_TEST(test_config_from_model_names_file_and_reason)
{
    static const char json[] = "{\"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                               " \"head_dim\": 300}";
    kvl_model m;
    ck_assert_msg(kvl_model_parse(&m, json, strlen(json), "wide.json") == KVL_OK, "%s", kvl_error());
    mha_config c;
    ck_assert_int_eq(mha_config_from_model(&c, &m, 0), KVL_EINVAL);
    ck_assert_msg(strncmp(kvl_error(), "wide.json: mha_config: head_dim", 31) == 0, "%s", kvl_error());
    ck_assert_ptr_nonnull(strstr(kvl_error(), "got 300"));
    kvl_model_free(&m);
}
END_TEST

/* A full cache refuses the position past its capacity and stays as it was. */
START_TEST(test_decode_refuses_past_max_tokens)
{
    layer L;
    layer_make(&L, 2, 0, 200);
    mha_cache cache;
    ck_assert(mha_cache_init(&cache, &L.c, 3, KV_STORE_F32) == KVL_OK);
    float *x = inputs(4, 201), out[4 * TOY_D];
    ck_assert(mha_prefill(out, &L.c, &L.w, &cache, x, 3) == KVL_OK);
    size_t bytes = mha_cache_bytes_used(&cache);
    ck_assert_int_eq(mha_decode(out, &L.c, &L.w, &cache, x + 3 * TOY_D), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "exceed"));
    ck_assert_int_eq(mha_prefill(out, &L.c, &L.w, &cache, x, 1), KVL_EINVAL);
    ck_assert_uint_eq(mha_cache_bytes_used(&cache), bytes);
    ck_assert_uint_eq(cache.ring.len, 3);
    mha_cache_free(&cache);
    free(x);
    layer_free(&L);
}
END_TEST

/* A cache made for another config (other KV heads, other window) is refused, not misread. */
START_TEST(test_decode_refuses_cache_of_other_config)
{
    layer a, b;
    layer_make(&a, 2, 0, 210);
    layer_make(&b, 1, 0, 211);
    mha_cache cache;
    ck_assert(mha_cache_init(&cache, &a.c, 8, KV_STORE_F32) == KVL_OK);
    float *x = inputs(1, 212), out[TOY_D];
    ck_assert_int_eq(mha_decode(out, &b.c, &b.w, &cache, x), KVL_EINVAL);
    mha_config windowed = a.c;
    windowed.window = 4;
    ck_assert_int_eq(mha_decode(out, &windowed, &a.w, &cache, x), KVL_EINVAL);
    ck_assert_uint_eq(cache.ring.len, 0);
    mha_cache_free(&cache);
    free(x);
    layer_free(&a); layer_free(&b);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch01_mha");
    TCase *def = tcase_create("definition");
    tcase_add_test(def, test_forward_matches_definition_for_mha_gqa_mqa);
    tcase_add_test(def, test_forward_matches_definition_when_windowed);
    tcase_add_test(def, test_forward_matches_definition_when_t_is_1);
    suite_add_tcase(s, def);
    TCase *fam = tcase_create("gqa_family");
    tcase_add_test(fam, test_gqa_matches_mha_when_n_kv_equals_n_heads);
    tcase_add_test(fam, test_gqa_matches_mqa_when_n_kv_is_1);
    tcase_add_test(fam, test_gqa_groups_consecutive_heads);
    tcase_add_test(fam, test_gqa_matches_mha_when_kv_heads_are_copies);
    suite_add_tcase(s, fam);
    TCase *cache = tcase_create("cache_paths");
    tcase_add_test(cache, test_decode_matches_forward_when_token_by_token);
    tcase_add_test(cache, test_decode_matches_forward_after_prefill_of_any_prefix);
    tcase_add_test(cache, test_decode_matches_forward_when_cache_spans_tiles);
    tcase_add_test(cache, test_prefill_matches_forward_when_chunked);
    tcase_add_test(cache, test_prefill_matches_decode_when_chunk_is_1);
    tcase_add_test(cache, test_prefill_matches_definition_when_chunk_spans_query_blocks);
    tcase_add_test(cache, test_decode_matches_forward_when_t_is_1);
    suite_add_tcase(s, cache);
    TCase *bytes = tcase_create("bytes");
    tcase_add_test(bytes, test_cache_bytes_match_formula_per_token);
    tcase_add_test(bytes, test_cache_bytes_match_formula_at_deepseek_llm_67b);
    tcase_add_test(bytes, test_bf16_cache_within_derived_bound_of_f32_cache);
    tcase_add_test(bytes, test_prefill_matches_decode_when_cache_is_bf16);
    suite_add_tcase(s, bytes);
    TCase *bad = tcase_create("bad_input");
    tcase_add_test(bad, test_config_rejects_kv_heads_not_dividing_heads);
    tcase_add_test(bad, test_config_from_model_rejects_other_generations);
    tcase_add_test(bad, test_config_from_model_names_file_and_reason);
    tcase_add_test(bad, test_decode_refuses_past_max_tokens);
    tcase_add_test(bad, test_decode_refuses_cache_of_other_config);
    suite_add_tcase(s, bad);
    return s;
}
