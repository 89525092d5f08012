/* ref/swa (chapter 3): the query-inclusive window rule, the ring buffer that keeps the last W rows at
 * slot p mod W, and, through ref/mha: decoding over the ring equals the whole-sequence
 * forward under the banded mask, for T < W, T = W and T = 5W, with chunk edges off the multiples of
 * W; and for windows: the cache stops growing at W rows. */
#include "common.h"
#include "oracle_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "element.h"
#include "mha.h"
#include "rng.h"
#include "status.h"
#include "swa.h"

#define W_TOY 8
#define TOY_D 64
#define TOY_H 4
#define TOY_DH 16

/* ---- the window rule ------------------------------------------------------------------------------- */

/* Query t sees W keys once t ≥ W − 1, the first of them t − W + 1 and the last t itself. */
START_TEST(test_window_includes_the_query)
{
    for (size_t t = 0; t < 5 * W_TOY; t++) {
        size_t seen = 0, first = SIZE_MAX, last = 0;
        for (size_t j = 0; j < 6 * W_TOY; j++) {
            ck_assert_int_eq(swa_visible(t, j, W_TOY), oracle_visible(t, j, W_TOY));
            if (swa_visible(t, j, W_TOY)) { seen++; if (first == SIZE_MAX) first = j; last = j; }
        }
        ck_assert_uint_eq(seen, t + 1 < W_TOY ? t + 1 : W_TOY);
        ck_assert_uint_eq(first, t + 1 < W_TOY ? 0 : t + 1 - W_TOY);
        ck_assert_uint_eq(swa_first_visible(t, W_TOY), first);
        ck_assert_uint_eq(last, t);
    }
}
END_TEST

/* W = 0 is plain causal attention: every j ≤ t. */
START_TEST(test_window_0_is_causal)
{
    for (size_t t = 0; t < 30; t++) {
        ck_assert_uint_eq(swa_first_visible(t, 0), 0);
        for (size_t j = 0; j < 40; j++) ck_assert_int_eq(swa_visible(t, j, 0), j <= t);
    }
}
END_TEST

/* The additive mask of a chunk (queries start … start+S−1 against keys key_start …) is 0 exactly where
 * the rule says visible and −inf elsewhere. */
START_TEST(test_mask_rows_match_the_rule)
{
    const size_t start = 11, S = 7, key_start = 4, n = 14;
    float mask[7 * 14];
    swa_mask_rows(mask, start, S, key_start, n, W_TOY);
    for (size_t i = 0; i < S; i++)
        for (size_t j = 0; j < n; j++) {
            float m = mask[i * n + j];
            if (oracle_visible(start + i, key_start + j, W_TOY)) ck_assert(m == 0.0f);
            else ck_assert(isinf(m) && m < 0);
        }
}
END_TEST

/* A chunk's blocks under a span, as rows (swa_block_mask) and as runs (swa_block_band): both give n, the
 * keys up to the block's last query, and each query sees exactly the keys the window rule lets it see,
 * causal and windowed, from position 0 and after cached keys, blocks of 1 to 9 queries. */
START_TEST(test_block_runs_and_rows_give_the_rule)
{
    const swa_span spans[] = {{0, 0, 0}, {0, 0, W_TOY}, {23, 5, 0}, {23, 5, W_TOY}, {40, 31, 3}};
    enum { MOST = 64 };
    for (size_t k = 0; k < sizeof spans / sizeof *spans; k++) {
        const swa_span *w = &spans[k];
        for (size_t first = 0; first < 12; first += 5)
            for (size_t b = 1; b <= 9; b += 4) {
                float mask[9 * MOST];
                size_t lo[9], hi[9];
                const size_t n = swa_block_mask(mask, first, b, MOST, w);
                ck_assert_uint_eq(swa_block_band(lo, hi, first, b, MOST, w), n);
                ck_assert_uint_eq(n, w->start + first + b - w->key_start);
                for (size_t r = 0; r < b; r++)
                    for (size_t j = 0; j < n; j++) {
                        const int seen = oracle_visible(w->start + first + r, w->key_start + j, w->window);
                        ck_assert_int_eq(j >= lo[r] && j < hi[r], seen);
                        ck_assert(seen ? mask[r * n + j] == 0.0f : isinf(mask[r * n + j]) && mask[r * n + j] < 0);
                    }
            }
    }
}
END_TEST

/* A block that sees more keys than the chunk holds is refused the same way by both: n returned, nothing
 * written. */
START_TEST(test_block_runs_and_rows_refuse_a_block_past_the_keys)
{
    const swa_span w = {10, 0, 0};
    float mask[4 * 16];
    size_t lo[4] = {7, 7, 7, 7}, hi[4] = {7, 7, 7, 7};
    for (size_t i = 0; i < 4 * 16; i++) mask[i] = 7.0f;
    ck_assert_uint_eq(swa_block_mask(mask, 4, 4, 16, &w), 18);
    ck_assert_uint_eq(swa_block_band(lo, hi, 4, 4, 16, &w), 18);
    for (size_t i = 0; i < 4 * 16; i++) ck_assert(mask[i] == 7.0f);
    for (size_t r = 0; r < 4; r++) ck_assert(lo[r] == 7 && hi[r] == 7);
}
END_TEST

/* ---- the ring ------------------------------------------------------------------------------------ */

#define RING_WIDTH 3

/* Row of position p: (p, p + 0.25, −p), so a read names the position it came from. */
static void tagged_rows(float *rows, size_t first, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        float p = (float)(first + i);
        rows[i * RING_WIDTH] = p;
        rows[i * RING_WIDTH + 1] = p + 0.25f;
        rows[i * RING_WIDTH + 2] = -p;
    }
}

/* The ring after the append at t holds exactly the keys query t sees under the banded mask, each with
 * its own row. */
static void expect_ring_is_window(const kv_ring *r, size_t t, size_t W)
{
    size_t first = kv_ring_oldest(r), n = kv_ring_held(r);
    ck_assert_uint_eq(first + n, t + 1);
    for (size_t j = 0; j <= t; j++) ck_assert_int_eq(j >= first, oracle_visible(t, j, W));
    float got[(5 * W_TOY + 1) * RING_WIDTH], want[(5 * W_TOY + 1) * RING_WIDTH];
    ck_assert_int_eq(kv_ring_read(got, r, first, n), KVL_OK);
    tagged_rows(want, first, n);
    ck_assert_mem_eq(got, want, n * RING_WIDTH * sizeof *got);
}

static void ring_one_by_one(size_t T, size_t W)
{
    kv_ring r;
    ck_assert_int_eq(kv_ring_init(&r, W, T, RING_WIDTH, KV_STORE_F32), KVL_OK);
    for (size_t t = 0; t < T; t++) {
        float row[RING_WIDTH];
        tagged_rows(row, t, 1);
        ck_assert_int_eq(kv_ring_append(&r, row, 1), KVL_OK);
        expect_ring_is_window(&r, t, W);
    }
    kv_ring_free(&r);
}

START_TEST(test_ring_holds_the_banded_window_when_t_below_w) { ring_one_by_one(W_TOY - 3, W_TOY); }
END_TEST
START_TEST(test_ring_holds_the_banded_window_when_t_equals_w) { ring_one_by_one(W_TOY, W_TOY); }
END_TEST
START_TEST(test_ring_holds_the_banded_window_when_t_is_5w) { ring_one_by_one(5 * W_TOY, W_TOY); }
END_TEST

/* Position p sits in slot p mod W (Mistral's rule, and DeepSeek-V4.1-Flash inference/model.py's). */
START_TEST(test_ring_slot_is_position_mod_w)
{
    kv_ring r;
    ck_assert_int_eq(kv_ring_init(&r, W_TOY, 100, RING_WIDTH, KV_STORE_F32), KVL_OK);
    float rows[29 * RING_WIDTH];
    tagged_rows(rows, 0, 29);
    ck_assert_int_eq(kv_ring_append(&r, rows, 29), KVL_OK);
    const float *slots = r.rows;
    for (size_t p = 29 - W_TOY; p < 29; p++) {
        ck_assert_uint_eq(kv_ring_slot(&r, p), p % W_TOY);
        ck_assert(slots[(p % W_TOY) * RING_WIDTH] == (float)p);
    }
    kv_ring_free(&r);
}
END_TEST

/* Appending in ragged chunks, some longer than W, leaves the same rows as one at a time; a chunk writes
 * only its last W rows. */
START_TEST(test_ring_append_in_chunks_matches_one_by_one)
{
    static const size_t chunks[] = {3, 11, 1, 9, 17, 2};
    kv_ring r;
    ck_assert_int_eq(kv_ring_init(&r, W_TOY, 43, RING_WIDTH, KV_STORE_F32), KVL_OK);
    size_t t = 0;
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; i++) {
        float rows[17 * RING_WIDTH];
        tagged_rows(rows, t, chunks[i]);
        ck_assert_int_eq(kv_ring_append(&r, rows, chunks[i]), KVL_OK);
        t += chunks[i];
        expect_ring_is_window(&r, t - 1, W_TOY);
    }
    kv_ring_free(&r);
}
END_TEST

/* A full cache is the same ring with as many slots as positions: it never overwrites. */
START_TEST(test_ring_without_window_holds_every_position)
{
    ring_one_by_one(5 * W_TOY, 0);
}
END_TEST

/* A window wider than the context needs no more slots than the context. */
START_TEST(test_ring_slots_capped_by_max_tokens)
{
    kv_ring r;
    ck_assert_int_eq(kv_ring_init(&r, 4096, 10, RING_WIDTH, KV_STORE_F32), KVL_OK);
    ck_assert_uint_eq(r.slots, 10);
    ck_assert_uint_eq(kv_ring_bytes_allocated(&r), 10 * RING_WIDTH * sizeof(float));
    kv_ring_free(&r);
}
END_TEST

/* bf16 rows come back as the round-to-nearest-even bf16 of what went in, at half the bytes. */
START_TEST(test_ring_bf16_returns_rounded_rows)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 7);
    float rows[12 * RING_WIDTH], got[12 * RING_WIDTH];
    kvl_rng_normal_f32(&rng, rows, 12 * RING_WIDTH, 3.0);
    kv_ring r16, r32;
    ck_assert_int_eq(kv_ring_init(&r16, W_TOY, 12, RING_WIDTH, KV_STORE_BF16), KVL_OK);
    ck_assert_int_eq(kv_ring_init(&r32, W_TOY, 12, RING_WIDTH, KV_STORE_F32), KVL_OK);
    ck_assert_int_eq(kv_ring_append(&r16, rows, 12), KVL_OK);
    ck_assert_int_eq(kv_ring_append(&r32, rows, 12), KVL_OK);
    ck_assert_int_eq(kv_ring_read(got, &r16, 4, W_TOY), KVL_OK);
    for (size_t i = 0; i < W_TOY * RING_WIDTH; i++) {
        float want = kvf_bf16_decode(kvf_bf16_encode(rows[4 * RING_WIDTH + i]));
        ck_assert_msg(got[i] == want, "element %zu: %.9g, bf16 of the input is %.9g", i, got[i], want);
    }
    float round_trip[RING_WIDTH] = {rows[0], rows[1], rows[2]};
    kv_store_round(round_trip, RING_WIDTH, KV_STORE_BF16);
    for (size_t i = 0; i < RING_WIDTH; i++) ck_assert(round_trip[i] == kvf_bf16_decode(kvf_bf16_encode(rows[i])));
    ck_assert_uint_eq(2 * kv_ring_bytes_used(&r16), kv_ring_bytes_used(&r32));
    kv_ring_free(&r16);
    kv_ring_free(&r32);
}
END_TEST

/* Evicted or future positions are refused; so is an append past max_tokens, which writes nothing. */
START_TEST(test_ring_refuses_positions_it_does_not_hold)
{
    kv_ring r;
    ck_assert_int_eq(kv_ring_init(&r, W_TOY, 20, RING_WIDTH, KV_STORE_F32), KVL_OK);
    float rows[20 * RING_WIDTH], got[W_TOY * RING_WIDTH];
    tagged_rows(rows, 0, 20);
    ck_assert_int_eq(kv_ring_append(&r, rows, 15), KVL_OK);
    ck_assert_int_eq(kv_ring_read(got, &r, 6, 2), KVL_EINVAL);     /* evicted: oldest is 7 */
    ck_assert_ptr_nonnull(strstr(kvl_error(), "holds [7, 15)"));
    ck_assert_int_eq(kv_ring_read(got, &r, 14, 2), KVL_EINVAL);    /* 15 not written yet */
    ck_assert_int_eq(kv_ring_read(got, &r, 7, W_TOY), KVL_OK);
    ck_assert_int_eq(kv_ring_append(&r, rows, 6), KVL_EINVAL);     /* 15 + 6 > 20 */
    ck_assert_uint_eq(r.len, 15);
    kv_ring_free(&r);
    ck_assert_int_eq(kv_ring_init(&r, W_TOY, 0, RING_WIDTH, KV_STORE_F32), KVL_EINVAL);
    ck_assert_ptr_null(r.rows);
}
END_TEST

/* ---- windowed attention: ring = banded mask ------------------------------------------------------ */

typedef struct {
    mha_config c;
    mha_weights w;
} layer;

static void layer_make(layer *L, size_t Hkv, size_t W, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ck_assert_msg(mha_config_init(&L->c, TOY_D, TOY_H, Hkv, TOY_DH, W, 10000.0) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(mha_weights_init_random(&L->w, &L->c, &rng) == KVL_OK, "%s", kvl_error());
}

static float *inputs(size_t T, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    float *x = oracle_alloc(T * TOY_D * sizeof *x);
    kvl_rng_normal_f32(&rng, x, T * TOY_D, 1.0);
    return x;
}

static size_t toy_path(size_t T) { return TOY_D + TOY_DH + T + TOY_H * TOY_DH; }
#define MIN_COS (1 - 1e-6)   /* as in test_ch01_mha: a guard against a systematic difference */

/* Forward (banded mask) against the double definition, then the ring paths (token by token, and the
 * given chunks followed by decodes) against the forward: two float paths, so twice the tolerance. */
static void expect_ring_equals_mask(size_t Hkv, size_t T, const size_t *chunks, size_t n_chunks, uint64_t seed)
{
    layer L;
    layer_make(&L, Hkv, W_TOY, seed);
    float *x = inputs(T, seed + 1), *fwd = oracle_alloc(T * TOY_D * sizeof *fwd);
    ck_assert_msg(mha_forward(fwd, &L.c, &L.w, x, T) == KVL_OK, "%s", kvl_error());
    size_t kv_of[TOY_H];
    for (size_t h = 0; h < TOY_H; h++) kv_of[h] = h / (TOY_H / Hkv);
    oracle_mha_layer o = {.d = TOY_D, .H = TOY_H, .Hkv = Hkv, .Dh = TOY_DH, .W = W_TOY, .theta = L.c.rope.theta,
                          .kv_of = kv_of, .w_q = L.w.w_q, .w_k = L.w.w_k, .w_v = L.w.w_v, .w_o = L.w.w_o};
    double *xd = oracle_widen(x, T * TOY_D), *want = oracle_alloc(T * TOY_D * sizeof *want);
    oracle_mha(want, &o, xd, T);
    kvl_expect_close("banded forward against the definition", fwd, want, T * TOY_D, oracle_f32_tol(toy_path(T)), 0,
                     MIN_COS);

    double *fwd_d = oracle_widen(fwd, T * TOY_D);
    for (int pass = 0; pass < 2; pass++) {
        mha_cache cache;
        ck_assert(mha_cache_init(&cache, &L.c, T, KV_STORE_F32) == KVL_OK);
        ck_assert_uint_eq(cache.ring.slots, T < W_TOY ? T : W_TOY);
        float *got = oracle_alloc(T * TOY_D * sizeof *got);
        size_t t = 0;
        for (size_t i = 0; pass == 1 && i < n_chunks; i++) {
            ck_assert_msg(mha_prefill(got + t * TOY_D, &L.c, &L.w, &cache, x + t * TOY_D, chunks[i]) == KVL_OK, "%s",
                          kvl_error());
            t += chunks[i];
        }
        for (; t < T; t++)
            ck_assert_msg(mha_decode(got + t * TOY_D, &L.c, &L.w, &cache, x + t * TOY_D) == KVL_OK, "%s", kvl_error());
        char what[96];
        snprintf(what, sizeof what, "ring (%s) against banded mask, T %zu, Hkv %zu", pass ? "chunks" : "decode", T, Hkv);
        kvl_expect_close(what, got, fwd_d, T * TOY_D, 2 * oracle_f32_tol(toy_path(T)), 0, MIN_COS);
        free(got);
        mha_cache_free(&cache);
    }
    free(x); free(fwd); free(xd); free(want); free(fwd_d);
    mha_weights_free(&L.w);
}

START_TEST(test_ring_decode_matches_banded_forward_when_t_below_w)
{
    static const size_t chunks[] = {2, 3};
    for (size_t Hkv = 1; Hkv <= TOY_H; Hkv *= 2) expect_ring_equals_mask(Hkv, 5, chunks, 2, 300 + Hkv);
}
END_TEST

START_TEST(test_ring_decode_matches_banded_forward_when_t_equals_w)
{
    static const size_t chunks[] = {3, 4};
    for (size_t Hkv = 1; Hkv <= TOY_H; Hkv *= 2) expect_ring_equals_mask(Hkv, W_TOY, chunks, 2, 310 + Hkv);
}
END_TEST

/* T = 5W with chunks 3, 7, 13, 5 (edges at 3, 10, 23, 28: none a multiple of 8; 13 > W wraps the ring
 * within one chunk), then 12 decodes. */
START_TEST(test_ring_decode_matches_banded_forward_when_t_is_5w)
{
    static const size_t chunks[] = {3, 7, 13, 5};
    for (size_t Hkv = 1; Hkv <= TOY_H; Hkv *= 2) expect_ring_equals_mask(Hkv, 5 * W_TOY, chunks, 4, 320 + Hkv);
}
END_TEST

/* One chunk of 21 > W tokens, then decodes: the ring keeps positions 13 … 20 at p mod W and the
 * decodes still match. */
START_TEST(test_ring_decode_matches_banded_forward_after_one_long_prefill)
{
    static const size_t chunk[] = {21};
    expect_ring_equals_mask(2, 5 * W_TOY, chunk, 1, 330);
}
END_TEST

START_TEST(test_ring_decode_matches_banded_forward_when_t_is_1)
{
    static const size_t chunk[] = {1};
    expect_ring_equals_mask(1, 1, chunk, 1, 340);
}
END_TEST

/* ---- bytes, window part ------------------------------------------------------------------------------ */

/* min(t, W) rows of 2·Hkv·Dh elements: the cache grows for W tokens, then stays at W entries. */
START_TEST(test_window_cache_bytes_constant_after_w_tokens)
{
    const kv_store stores[] = {KV_STORE_F32, KV_STORE_BF16};
    const size_t b[] = {4, 2};
    for (size_t Hkv = 1; Hkv <= TOY_H; Hkv *= 2)
        for (size_t s = 0; s < 2; s++) {
            layer L;
            layer_make(&L, Hkv, W_TOY, 350 + Hkv);
            mha_cache cache;
            ck_assert(mha_cache_init(&cache, &L.c, 5 * W_TOY, stores[s]) == KVL_OK);
            float *x = inputs(5 * W_TOY, 360), out[TOY_D];
            for (size_t t = 1; t <= 5 * W_TOY; t++) {
                ck_assert(mha_decode(out, &L.c, &L.w, &cache, x + (t - 1) * TOY_D) == KVL_OK);
                size_t entries = t < W_TOY ? t : W_TOY;
                ck_assert_uint_eq(mha_cache_bytes_used(&cache), entries * 2 * Hkv * TOY_DH * b[s]);
            }
            ck_assert_uint_eq(mha_cache_bytes_used(&cache), W_TOY * 2 * Hkv * TOY_DH * b[s]);
            free(x);
            mha_cache_free(&cache);
            mha_weights_free(&L.w);
        }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch03_swa");
    TCase *rule = tcase_create("window_rule");
    tcase_add_test(rule, test_window_includes_the_query);
    tcase_add_test(rule, test_window_0_is_causal);
    tcase_add_test(rule, test_mask_rows_match_the_rule);
    tcase_add_test(rule, test_block_runs_and_rows_give_the_rule);
    tcase_add_test(rule, test_block_runs_and_rows_refuse_a_block_past_the_keys);
    suite_add_tcase(s, rule);
    TCase *ring = tcase_create("ring");
    tcase_add_test(ring, test_ring_holds_the_banded_window_when_t_below_w);
    tcase_add_test(ring, test_ring_holds_the_banded_window_when_t_equals_w);
    tcase_add_test(ring, test_ring_holds_the_banded_window_when_t_is_5w);
    tcase_add_test(ring, test_ring_slot_is_position_mod_w);
    tcase_add_test(ring, test_ring_append_in_chunks_matches_one_by_one);
    tcase_add_test(ring, test_ring_without_window_holds_every_position);
    tcase_add_test(ring, test_ring_slots_capped_by_max_tokens);
    tcase_add_test(ring, test_ring_bf16_returns_rounded_rows);
    tcase_add_test(ring, test_ring_refuses_positions_it_does_not_hold);
    suite_add_tcase(s, ring);
    TCase *attn = tcase_create("windowed_attention");
    tcase_add_test(attn, test_ring_decode_matches_banded_forward_when_t_below_w);
    tcase_add_test(attn, test_ring_decode_matches_banded_forward_when_t_equals_w);
    tcase_add_test(attn, test_ring_decode_matches_banded_forward_when_t_is_5w);
    tcase_add_test(attn, test_ring_decode_matches_banded_forward_after_one_long_prefill);
    tcase_add_test(attn, test_ring_decode_matches_banded_forward_when_t_is_1);
    tcase_add_test(attn, test_window_cache_bytes_constant_after_w_tokens);
    suite_add_tcase(s, attn);
    return s;
}
