/* The V4.1 layer stack and the causal encoder–decoder on the GPU (cuda/v41_stack_cuda.h, cuda/v41_ced_cuda.h)
 * against ref/v41_stack and ref/v41_ced, through the chapter 7 toy narrowed for the emulator (tests/ch07_toy.h:
 * L 6, E 3, W 3): a prefill's outputs and its picks at every index source (a Full layer in the encoder, the
 * decoder's Full source with the candidate pool, a Reindex layer over the pool); exact replay from
 * v41_ced_exact_replay_start at an odd start (the ratio-2 source's block and every window straddle it, the source's
 * newest block partial) and the next token decoded after it; bounded replay from v41_ced_bounded_replay_start
 * against the ref's bounded replay; the early exit's h_enc, entries, index keys and windows, decoder replay
 * after it and the decode that follows. Float32 rows, and the deployed rows (528-byte window rows, 288-byte
 * entries, 68-byte keys) on the toy widened to Dh 512, DI 128. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "v41_ced.h"
#include "v41_ced_cuda.h"
#include "ch07_stack_toy.h"
#include "v41_stack_cuda.h"
#include "cuda_test.h"
#include "oracle_attention.h"

/* The deployed rows' widths. */
static const char *const NATIVE_WIDTHS[][2] = {
    {"\"head_dim\": 32", "\"head_dim\": 512"},
    {"\"index_head_dim\": 16", "\"index_head_dim\": 128"},
};

/* P prompt tokens: odd, past the exact reach 12, so that the exact start 3 is odd and the ratio-2 source's
 * newest block partial. */
enum { P = 15, MAX_T = P + 2 };

/* Float32 paths through the stack: one layer's path is the pre-norm (d), the window row's product and norm
 * (d + Dh), the layer's attention and output (d + Dq' + 2·Dh + 2·(W + K) + (H/G)·Dh + G·Do, as
 * tests/cuda/test_cuda_v41.c's layer_tol) and the residual add (1). Each sum passes its inputs' errors on with
 * gain at most 1 (tests/oracle_attention.h), so n layers' paths add; two float32 paths (ref, device) each
 * within oracle_f32_tol of the definition. The deployed rows add nothing: both sides quantise values that
 * differ by float rounding, and one that rounding moved across a code boundary would show as a step of its
 * format (2^-3 relative for E4M3, more for E2M1), far above this bound. */
static double stack_tol(const v41_stack_config *s, size_t n_layers)
{
    const v41_config *c = &s->layers[0];
    const v4_config *k = &c->core;
    const size_t layer = 2 * s->d + k->head_dim + k->q_lora_rank + 2 * k->head_dim + 2 * (k->window + c->indexer.topk) +
                         k->n_heads / k->o_groups * k->head_dim + k->o_groups * k->o_lora_rank + 1;
    return 2 * oracle_f32_tol(n_layers * layer);
}

/* Elementwise errors of 1e-4 on O(1) values leave the cosine above 1 − 1e-7. */
#define MIN_COS (1 - 1e-7)

static void expect_close_f32(const char *what, const float *got, const float *want, size_t n, double tol)
{
    double *wd = malloc((n ? n : 1) * sizeof *wd);
    ck_assert(wd != NULL);
    for (size_t i = 0; i < n; i++) wd[i] = want[i];
    kvl_expect_close(what, got, wd, n, tol, tol, n ? MIN_COS : 0);
    free(wd);
}

/* ---- the twins side by side --------------------------------------------------------------------------- */

/* The ref's stack and cache and the device's, on the same toy. */
typedef struct {
    ch07_stack_toy t;
    v41_stack_weights dw;
    float *dx; /* [T][d] the toy's inputs on the device */
    v41_cache ref;
    v41_cache_cuda dev;
} twins;

static void twins_open(twins *z, v41_cache_format fmt)
{
    CUDA_OK(v41_stack_weights_to_cuda(&z->dw, &z->t.w, &z->t.s));
    z->dx = dev_upload(z->t.x, z->t.T * z->t.d * sizeof(float));
    CUDA_OK(v41_cache_init(&z->ref, &z->t.s, z->t.T, fmt));
    CUDA_OK(v41_cache_init_cuda(&z->dev, &z->t.s, z->t.T, fmt == V41_CACHE_NATIVE ? V41_CUDA_NATIVE : V41_CUDA_F32));
}

/* The narrowed toy (tests/ch07_toy.h) over float32 rows, or widened to the deployed rows' widths over them, for
 * T tokens. */
static void twins_make(twins *z, uint64_t seed, size_t T, int native)
{
    if (native) {
        char json[sizeof CH07_TOY_NARROW_JSON + 16], rest[sizeof json];
        snprintf(json, sizeof json, "%s", CH07_TOY_NARROW_JSON);
        for (size_t i = 0; i < sizeof NATIVE_WIDTHS / sizeof NATIVE_WIDTHS[0]; i++) {
            char *at = strstr(json, NATIVE_WIDTHS[i][0]);
            ck_assert_ptr_nonnull(at);
            snprintf(rest, sizeof rest, "%s", at + strlen(NATIVE_WIDTHS[i][0]));
            snprintf(at, sizeof json - (size_t)(at - json), "%s%s", NATIVE_WIDTHS[i][1], rest);
        }
        CUDA_OK(kvl_model_parse(&z->t.m, json, strlen(json), "ch07-toy-narrow-native"));
    } else {
        CUDA_OK(ch07_toy_narrow_model(&z->t.m));
    }
    ch07_stack_toy_make_from_model(&z->t, seed, T);
    twins_open(z, native ? V41_CACHE_NATIVE : V41_CACHE_F32);
}

static void twins_free(twins *z)
{
    v41_cache_free(&z->ref);
    v41_cache_free_cuda(&z->dev);
    v41_stack_weights_free_cuda(&z->dw);
    kvl_cuda_free(z->dx);
    ch07_stack_toy_free(&z->t);
}

/* Both caches ← tokens first … first + n − 1 through the whole stack; out_ref, out_dev [n][d] (host) the
 * outputs, sel_ref, sel_dev [L][n][K] (host) the picks, each NULL when not wanted. */
static void both_prefill(twins *z, size_t first, size_t n, float *out_ref, float *out_dev, int32_t *sel_ref,
                         int32_t *sel_dev)
{
    const size_t d = z->t.d, K = z->t.s.layers[0].indexer.topk, L = z->t.L;
    float *o = out_ref ? out_ref : test_floats(n * d), *dout = dev_upload(NULL, n * d * sizeof(float));
    int32_t *dsel = sel_dev ? dev_filled(0xFF, L * n * K * sizeof(int32_t)) : NULL;
    CUDA_OK(v41_stack_prefill(o, sel_ref, &z->t.s, &z->t.w, &z->ref, z->t.x + first * d, n));
    CUDA_OK(v41_stack_prefill_cuda(dout, dsel, &z->t.s, &z->dw, &z->dev, z->dx + first * d, n));
    if (out_dev) dev_download(out_dev, dout, n * d * sizeof(float));
    if (sel_dev) dev_download(sel_dev, dsel, L * n * K * sizeof(int32_t));
    if (!out_ref) free(o);
    kvl_cuda_free(dout), kvl_cuda_free(dsel);
}

/* The early exit on both for tokens first … first + n − 1: h_ref, h_dev [n][d] (host) their h_enc. */
static void both_v41_ced_prefill(twins *z, size_t first, size_t n, float *h_ref, float *h_dev)
{
    const size_t d = z->t.d;
    float *dh = dev_upload(NULL, n * d * sizeof(float));
    CUDA_OK(v41_ced_prefill(h_ref, &z->t.s, &z->t.w, &z->ref, z->t.x + first * d, n));
    CUDA_OK(v41_ced_prefill_cuda(dh, &z->t.s, &z->dw, &z->dev, z->dx + first * d, n));
    dev_download(h_dev, dh, n * d * sizeof(float));
    kvl_cuda_free(dh);
}

/* Layers l0 … l1 − 1 replayed from `from` on both: h_ref and h_dev [len − from][d] (host) enter as each side's
 * input and leave as its output; sel_ref, sel_dev [L][len − from][K] (host) the picks. */
static void both_replay(twins *z, size_t l0, size_t l1, size_t from, float *h_ref, float *h_dev, int32_t *sel_ref,
                        int32_t *sel_dev)
{
    const size_t n = z->ref.len - from, bytes = n * z->t.d * sizeof(float);
    const size_t sel_bytes = z->t.L * n * z->t.s.layers[0].indexer.topk * sizeof(int32_t);
    float *dh = dev_upload(h_dev, bytes);
    int32_t *dsel = dev_filled(0xFF, sel_bytes);
    CUDA_OK(v41_stack_replay_layers(h_ref, sel_ref, &z->t.s, &z->t.w, &z->ref, l0, l1, from));
    CUDA_OK(v41_stack_replay_layers_cuda(dh, dsel, &z->t.s, &z->dw, &z->dev, l0, l1, from));
    dev_download(h_dev, dh, bytes);
    dev_download(sel_dev, dsel, sel_bytes);
    kvl_cuda_free(dh), kvl_cuda_free(dsel);
}

/* The next n tokens decoded one by one on both: got_ref, got_dev [n][d] (host). */
static void both_decode(twins *z, size_t n, float *got_ref, float *got_dev)
{
    const size_t d = z->t.d;
    float *dout = dev_upload(NULL, d * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        const size_t pos = z->ref.len;
        CUDA_OK(v41_stack_decode(got_ref + i * d, &z->t.s, &z->t.w, &z->ref, z->t.x + pos * d));
        CUDA_OK(v41_stack_decode_cuda(dout, &z->t.s, &z->dw, &z->dev, z->dx + pos * d));
        dev_download(got_dev + i * d, dout, d * sizeof(float));
    }
    kvl_cuda_free(dout);
}

/* The picks of every index source among layers l0 … l1 − 1 for n queries, sel_dev[L][n][K] against sel_ref's:
 * identical. Returns the number of index sources compared. */
static size_t expect_same_picks(const twins *z, const int32_t *sel_dev, const int32_t *sel_ref, size_t n, size_t l0,
                                size_t l1, const char *what)
{
    const size_t K = z->t.s.layers[0].indexer.topk;
    size_t sources = 0;
    for (size_t l = l0; l < l1; l++) {
        if ((size_t)z->t.s.layers[l].index_source != l) continue;
        sources++;
        for (size_t i = 0; i < n * K; i++)
            ck_assert_msg(sel_dev[l * n * K + i] == sel_ref[l * n * K + i], "%s: layer %zu, query %zu: pick %d, the ref's %d",
                          what, l, i / K, sel_dev[l * n * K + i], sel_ref[l * n * K + i]);
    }
    return sources;
}

/* The held rows of r_dev against r_ref's: the same positions, values within tol. */
static void expect_rows_close(const v41_rows_cuda *r_dev, const v4_rows *r_ref, double tol, const char *what, size_t l)
{
    char name[96];
    snprintf(name, sizeof name, "layer %zu: %s", l, what);
    ck_assert_msg(r_dev->len == r_ref->len && r_dev->first == r_ref->first,
                  "%s: positions from %zu to %zu, the ref's from %zu to %zu", name, r_dev->first, r_dev->len,
                  r_ref->first, r_ref->len);
    const size_t n = v4_rows_held(r_ref), first = v4_rows_oldest(r_ref), width = r_ref->width;
    ck_assert_uint_eq(v41_rows_held_cuda(r_dev), n);
    if (n == 0) return;
    float *want = test_floats(n * width), *got = test_floats(n * width);
    float *dgot = dev_upload(NULL, n * width * sizeof(float));
    CUDA_OK(v4_rows_read(want, r_ref, first, n));
    CUDA_OK(v41_rows_read_cuda(dgot, r_dev, first, n));
    dev_download(got, dgot, n * width * sizeof(float));
    expect_close_f32(name, got, want, n * width, tol);
    kvl_cuda_free(dgot);
    free(want), free(got);
}

/* Every layer's window rows and every KV source's entries, index keys and compressor position, within tol. */
static void expect_caches_close(const twins *z, double tol)
{
    ck_assert_uint_eq(z->dev.len, z->ref.len);
    for (size_t l = 0; l < z->t.L; l++) {
        expect_rows_close(&z->dev.window[l], &z->ref.window[l], tol, "window rows", l);
        if (z->t.s.layers[l].kind != KVL_LAYER_FULL) continue;
        expect_rows_close(&z->dev.entries[l], &z->ref.entries[l], tol, "entries", l);
        expect_rows_close(&z->dev.keys[l], &z->ref.keys[l], tol, "index keys", l);
        ck_assert_uint_eq(z->dev.state[l].pos, z->ref.state[l].pos);
    }
}

/* ---- float32 rows -------------------------------------------------------------------------------------- */

/* Every layer replayed from s on both, the prompt's x in: picks, outputs and caches compared; then the next
 * token decoded on both. */
static void check_replay_then_decode(twins *z, size_t s, int32_t *sel_ref, int32_t *sel_dev, double tol)
{
    const size_t d = z->t.d, L = z->t.L, n = z->ref.len - s;
    float *h_ref = test_floats(n * d), *h_dev = test_floats(n * d);
    char name[80];
    memcpy(h_ref, z->t.x + s * d, n * d * sizeof *h_ref);
    memcpy(h_dev, h_ref, n * d * sizeof *h_dev);
    both_replay(z, 0, L, s, h_ref, h_dev, sel_ref, sel_dev);
    snprintf(name, sizeof name, "replay from %zu: picks", s);
    expect_same_picks(z, sel_dev, sel_ref, n, 0, L, name);
    snprintf(name, sizeof name, "replay from %zu: output", s);
    expect_close_f32(name, h_dev, h_ref, n * d, tol);
    expect_caches_close(z, tol);
    ck_assert_uint_eq(v41_rows_oldest_cuda(&z->dev.window[0]), s > z->ref.len - z->t.W ? s : z->ref.len - z->t.W);
    both_decode(z, 1, h_ref, h_dev);
    snprintf(name, sizeof name, "replay from %zu: the next token", s);
    expect_close_f32(name, h_dev, h_ref, d, tol);
    free(h_ref), free(h_dev);
}

START_TEST(test_prefill_exact_and_bounded_replay_cuda_pick_and_decode_as_the_ref)
{
    twins z;
    twins_make(&z, 9101, MAX_T, 0);
    const size_t d = z.t.d, L = z.t.L, W = z.t.W, K = z.t.s.layers[0].indexer.topk;
    const size_t s = v41_ced_exact_replay_start(P, L, W);
    ck_assert_uint_eq(s, 3); /* odd: the ratio-2 source's block [2, 3] straddles it, as every window does */
    const double tol = stack_tol(&z.t.s, L);
    float *o_ref = test_floats(P * d), *o_dev = test_floats(P * d);
    int32_t *sel_ref = test_ints(L * P * K), *sel_dev = test_ints(L * P * K);
    both_prefill(&z, 0, s, o_ref, o_dev, sel_ref, sel_dev);
    /* Full 1 and 3, Reindex 5 over the pool */
    ck_assert_uint_eq(expect_same_picks(&z, sel_dev, sel_ref, s, 0, L, "prefill of [0, s)"), 3);
    both_prefill(&z, s, P - s, o_ref + s * d, o_dev + s * d, sel_ref, sel_dev);
    expect_same_picks(&z, sel_dev, sel_ref, P - s, 0, L, "prefill of [s, P)");
    expect_close_f32("prefill output", o_dev, o_ref, P * d, tol);
    check_replay_then_decode(&z, s, sel_ref, sel_dev, tol);
    /* then over P + 1 tokens, the last W replayed: the deeper windows see truncated rows */
    const size_t b = v41_ced_bounded_replay_start(P + 1, W);
    ck_assert_uint_gt(b, v41_ced_exact_replay_start(P + 1, L, W));
    check_replay_then_decode(&z, b, sel_ref, sel_dev, tol);
    free(o_ref), free(o_dev), free(sel_ref), free(sel_dev);
    twins_free(&z);
}
END_TEST

START_TEST(test_early_exit_and_decoder_replay_cuda_match_the_ref)
{
    twins z;
    twins_make(&z, 9103, MAX_T, 0);
    const size_t d = z.t.d, L = z.t.L, K = z.t.s.layers[0].indexer.topk;
    const size_t s = v41_ced_exact_replay_start(P, L - z.t.E, z.t.W);
    float *h_ref = test_floats(P * d), *h_dev = test_floats(P * d);
    int32_t *sel_ref = test_ints(L * P * K), *sel_dev = test_ints(L * P * K);
    both_v41_ced_prefill(&z, 0, s, h_ref, h_dev);
    both_v41_ced_prefill(&z, s, P - s, h_ref + s * d, h_dev + s * d);
    expect_close_f32("h_enc", h_dev, h_ref, P * d, stack_tol(&z.t.s, z.t.E));
    expect_caches_close(&z, stack_tol(&z.t.s, z.t.E));
    for (size_t l = z.t.E; l < L; l++) ck_assert_uint_eq(v41_rows_held_cuda(&z.dev.window[l]), 0);
    ck_assert_uint_eq(z.dev.entries[z.t.E].len, P); /* the decoder's source (M 1) was fed h_enc */
    both_replay(&z, z.t.E, L, s, h_ref + s * d, h_dev + s * d, sel_ref, sel_dev);
    ck_assert_uint_eq(expect_same_picks(&z, sel_dev, sel_ref, P - s, z.t.E, L, "decoder replay"), 2);
    const double tol = stack_tol(&z.t.s, L);
    expect_close_f32("decoder replay output", h_dev + s * d, h_ref + s * d, (P - s) * d, tol);
    expect_caches_close(&z, tol);
    both_decode(&z, 1, h_ref, h_dev);
    expect_close_f32("decode after the early exit and decoder replay", h_dev, h_ref, d, tol);
    free(h_ref), free(h_dev), free(sel_ref), free(sel_dev);
    twins_free(&z);
}
END_TEST

START_TEST(test_stack_cuda_refuses_a_replay_past_the_prefix_and_native_rows_at_toy_widths)
{
    twins z;
    twins_make(&z, 9104, MAX_T, 0);
    both_prefill(&z, 0, 2, NULL, NULL, NULL, NULL);
    float *dh = dev_upload(NULL, 2 * z.t.d * sizeof(float));
    ck_assert_int_eq(v41_stack_replay_layers_cuda(dh, NULL, &z.t.s, &z.dw, &z.dev, 0, z.t.L, 2), KVL_EINVAL);
    ck_assert_int_eq(v41_stack_replay_layers_cuda(dh, NULL, &z.t.s, &z.dw, &z.dev, 3, 2, 0), KVL_EINVAL);
    v41_cache_cuda native;
    ck_assert_int_eq(v41_cache_init_cuda(&native, &z.t.s, 8, V41_CUDA_NATIVE), KVL_EINVAL);
    kvl_cuda_free(dh);
    twins_free(&z);
}
END_TEST

/* ---- the deployed rows ---------------------------------------------------------------------------------- */

START_TEST(test_early_exit_and_decoder_replay_cuda_match_the_ref_over_native_rows)
{
    enum { T = 9, SPLIT = 4 };
    twins z;
    twins_make(&z, 9105, T + 1, 1);
    const size_t d = z.t.d, L = z.t.L, K = z.t.s.layers[0].indexer.topk, s = v41_ced_bounded_replay_start(T, z.t.W);
    const double tol = stack_tol(&z.t.s, L);
    float *h_ref = test_floats(T * d), *h_dev = test_floats(T * d);
    int32_t *sel_ref = test_ints(L * T * K), *sel_dev = test_ints(L * T * K);
    both_v41_ced_prefill(&z, 0, SPLIT, h_ref, h_dev);
    both_v41_ced_prefill(&z, SPLIT, T - SPLIT, h_ref + SPLIT * d, h_dev + SPLIT * d);
    expect_close_f32("h_enc over native rows", h_dev, h_ref, T * d, tol);
    expect_caches_close(&z, tol);
    both_replay(&z, z.t.E, L, s, h_ref + s * d, h_dev + s * d, sel_ref, sel_dev);
    ck_assert_uint_eq(expect_same_picks(&z, sel_dev, sel_ref, T - s, z.t.E, L, "decoder replay over native rows"), 2);
    expect_close_f32("decoder replay over native rows", h_dev + s * d, h_ref + s * d, (T - s) * d, tol);
    expect_caches_close(&z, tol);
    both_decode(&z, 1, h_ref, h_dev);
    expect_close_f32("decode over native rows", h_dev, h_ref, d, tol);
    free(h_ref), free(h_dev), free(sel_ref), free(sel_dev);
    twins_free(&z);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = cuda_suite("cuda_v41_ced");
    if (!cuda_present()) return s;
    TCase *tc = tcase_create("v41_ced");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_prefill_exact_and_bounded_replay_cuda_pick_and_decode_as_the_ref);
    tcase_add_test(tc, test_early_exit_and_decoder_replay_cuda_match_the_ref);
    tcase_add_test(tc, test_stack_cuda_refuses_a_replay_past_the_prefix_and_native_rows_at_toy_widths);
    tcase_add_test(tc, test_early_exit_and_decoder_replay_cuda_match_the_ref_over_native_rows);
    suite_add_tcase(s, tc);
    return s;
}
