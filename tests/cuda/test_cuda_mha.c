/* The MHA/GQA/MQA and sliding-window twins (cuda/mha_cuda.h, cuda/kv_ring_cuda.h) against ref/mha and
 * ref/swa: decode step by step (flash-decoding over splits that do not divide the context, a first
 * token alone, windows whose rings wrap), prefill in ragged chunks, B sequences at once, float32 and
 * bf16 caches; and the ring itself, row for row. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"
#include "oracle_attention.h"

#include "mha.h"
#include "mha_cuda.h"
#include "rng.h"
#include "swa.h"
#include "kv_ring_cuda.h"

#define ROPE_BASE 10000.0
/* Weights and inputs on a grid of 2^-6: every projection is then exact in float32 (products on a grid
 * of 2^-12, sums of at most 64 of them below 2^7: 19 bits), so both sides hold the same keys, and a
 * bf16 cache rounds them to the same codes. What remains to differ is the attention's own rounding. */
#define GRID 64.0f
/* Elementwise errors of 1e-4 on O(1) values leave the cosine above 1 − 1e-7; lower means a systematic
 * difference (a wrong head, split or slot) spread too thin to trip an element. */
#define MIN_COS (1 - 1e-7)

typedef struct {
    mha_config c;
    mha_weights w, dw; /* host and device */
} layer;

static void on_grid(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = roundf(x[i] * GRID) / GRID;
}

static void layer_make(layer *L, size_t d, size_t H, size_t Hkv, size_t Dh, size_t W, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    CUDA_OK(mha_config_init(&L->c, d, H, Hkv, Dh, W, ROPE_BASE));
    CUDA_OK(mha_weights_init_random(&L->w, &L->c, &rng));
    on_grid(L->w.w_q, 2 * H * Dh * d + 2 * Hkv * Dh * d); /* the one block: w_q, w_k, w_v, w_o */
    CUDA_OK(mha_weights_to_cuda(&L->dw, &L->w, &L->c));
}

static void layer_free(layer *L)
{
    mha_weights_free(&L->w);
    mha_weights_free_cuda(&L->dw);
}

static float *inputs(size_t n, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    float *x = malloc(n * sizeof *x);
    ck_assert(x != NULL);
    kvl_rng_normal_f32(&rng, x, n, 1.0);
    on_grid(x, n);
    return x;
}

/* Two float32 paths, each within oracle_f32_tol of the definition, are within twice that of each other;
 * the path: d (projection) + Dh (score) + N keys + H·Dh (output). */
static double twin_tol(const mha_config *c, size_t N)
{
    return 2 * oracle_f32_tol(c->d + c->head_dim + N + c->n_heads * c->head_dim);
}

static void expect_outputs(const char *what, const float *got_dev, const float *want, size_t n, double tol)
{
    float *got = malloc(n * sizeof *got);
    double *w = malloc(n * sizeof *w);
    dev_download(got, got_dev, n * sizeof *got);
    for (size_t i = 0; i < n; i++) w[i] = want[i];
    kvl_expect_close(what, got, w, n, tol, tol, MIN_COS);
    free(got);
    free(w);
}

/* The ring's rows (positions oldest … len − 1 of sequence 0) equal the ref ring's, bit for bit. */
static void expect_same_rings(const kv_ring *ref, const kv_ring_cuda *dev)
{
    ck_assert_uint_eq(ref->len, dev->len);
    const size_t held = kv_ring_held(ref), first = kv_ring_oldest(ref), n = held * ref->width;
    ck_assert_uint_eq(held, kv_ring_held_cuda(dev));
    float *want = malloc(n * sizeof(float) + 4), *got = malloc(n * sizeof(float) + 4);
    float *d = dev_upload(NULL, (n + 1) * sizeof(float));
    CUDA_OK(kv_ring_read(want, ref, first, held));
    CUDA_OK(kv_ring_read_cuda(d, dev, first, held));
    dev_download(got, d, n * sizeof(float));
    ck_assert_msg(memcmp(got, want, n * sizeof(float)) == 0, "the rings differ");
    kvl_cuda_free(d);
    free(want);
    free(got);
}

/* Decode T tokens one by one with both, comparing every output, then the rings. */
static void check_decode(size_t d, size_t H, size_t Hkv, size_t Dh, size_t W, kv_store store, size_t split, size_t T,
                         uint64_t seed)
{
    layer L;
    layer_make(&L, d, H, Hkv, Dh, W, seed);
    float *x = inputs(T * d, seed + 1), *want = malloc(d * sizeof(float));
    float *dx = dev_upload(x, T * d * sizeof(float)), *dout = dev_upload(NULL, d * sizeof(float));
    char what[160];
    FOR_EACH_ORDER(order) {
        mha_cache ref;
        mha_cache_cuda dev;
        CUDA_OK(mha_cache_init(&ref, &L.c, T, store));
        CUDA_OK(mha_cache_init_cuda(&dev, &L.c, T, store, 1));
        dev.split = split;
        for (size_t t = 0; t < T; t++) {
            CUDA_OK(mha_decode(want, &L.c, &L.w, &ref, x + t * d));
            CUDA_OK(mha_decode_cuda(dout, &L.c, &L.dw, &dev, dx + t * d));
            snprintf(what, sizeof what, "decode H %zu Hkv %zu Dh %zu W %zu %s split %zu, token %zu (%s)", H, Hkv, Dh, W,
                     kv_store_name(store), split, t, order);
            expect_outputs(what, dout, want, d, twin_tol(&L.c, t + 1));
        }
        ck_assert_uint_eq(mha_cache_bytes_used(&ref), mha_cache_bytes_used_cuda(&dev));
        expect_same_rings(&ref.ring, &dev.ring);
        mha_cache_free(&ref);
        mha_cache_free_cuda(&dev);
    }
    kvl_cuda_free(dx);
    kvl_cuda_free(dout);
    free(x);
    free(want);
    layer_free(&L);
}

START_TEST(test_gqa_decode_cuda_matches_mha_decode_when_splits_are_ragged)
{
    /* 4 heads on 2 KV heads; 23 tokens in splits of 7: the last split holds 2 keys */
    check_decode(32, 4, 2, 8, 0, KV_STORE_F32, 7, 23, 11);
}
END_TEST

START_TEST(test_mqa_decode_cuda_matches_mha_decode_when_heads_are_odd)
{
    /* 3 query heads on one KV head; splits of 32 hold the whole context: one split, no merge to do */
    check_decode(24, 3, 1, 16, 0, KV_STORE_F32, 32, 9, 12);
}
END_TEST

START_TEST(test_swa_decode_cuda_matches_mha_decode_when_the_ring_wraps)
{
    /* a window of 5 over 17 tokens: the ring wraps three times; splits of 2 leave one key in the last */
    check_decode(32, 2, 2, 8, 5, KV_STORE_F32, 2, 17, 13);
}
END_TEST

START_TEST(test_decode_cuda_matches_mha_decode_when_the_cache_is_bf16)
{
    check_decode(32, 4, 1, 8, 6, KV_STORE_BF16, 4, 15, 14);
    check_decode(32, 4, 4, 8, 0, KV_STORE_BF16, 5, 12, 15);
}
END_TEST

/* Prefill in ragged chunks (a single token among them), then decode; outputs and rings compared. */
static void check_prefill(size_t W, kv_store store, uint64_t seed)
{
    enum { D = 32, H = 4, HKV = 2, DH = 8 };
    static const size_t chunks[] = {5, 1, 7, 3, 9};
    const size_t n_chunks = sizeof chunks / sizeof chunks[0], T = 5 + 1 + 7 + 3 + 9 + 4;
    layer L;
    layer_make(&L, D, H, HKV, DH, W, seed);
    float *x = inputs(T * D, seed + 1), *want = malloc(T * D * sizeof(float));
    float *dx = dev_upload(x, T * D * sizeof(float)), *dout = dev_upload(NULL, T * D * sizeof(float));
    char what[160];
    FOR_EACH_ORDER(order) {
        mha_cache ref;
        mha_cache_cuda dev;
        CUDA_OK(mha_cache_init(&ref, &L.c, T, store));
        CUDA_OK(mha_cache_init_cuda(&dev, &L.c, T, store, 1));
        dev.split = 3;
        size_t t = 0;
        for (size_t k = 0; k < n_chunks; t += chunks[k], k++) {
            CUDA_OK(mha_prefill(want, &L.c, &L.w, &ref, x + t * D, chunks[k]));
            CUDA_OK(mha_prefill_cuda(dout, &L.c, &L.dw, &dev, dx + t * D, chunks[k]));
            snprintf(what, sizeof what, "prefill W %zu %s, chunk of %zu at %zu (%s)", W, kv_store_name(store),
                     chunks[k], t, order);
            expect_outputs(what, dout, want, chunks[k] * D, twin_tol(&L.c, t + chunks[k]));
        }
        for (; t < T; t++) {
            CUDA_OK(mha_decode(want, &L.c, &L.w, &ref, x + t * D));
            CUDA_OK(mha_decode_cuda(dout, &L.c, &L.dw, &dev, dx + t * D));
            expect_outputs("decode after prefill", dout, want, D, twin_tol(&L.c, t + 1));
        }
        expect_same_rings(&ref.ring, &dev.ring);
        mha_cache_free(&ref);
        mha_cache_free_cuda(&dev);
    }
    kvl_cuda_free(dx);
    kvl_cuda_free(dout);
    free(x);
    free(want);
    layer_free(&L);
}

START_TEST(test_prefill_cuda_matches_mha_prefill_in_ragged_chunks)
{
    check_prefill(0, KV_STORE_F32, 21);
}
END_TEST

START_TEST(test_prefill_cuda_matches_mha_prefill_when_chunks_straddle_the_window)
{
    check_prefill(6, KV_STORE_BF16, 22);
}
END_TEST

/* B sequences in one call equal B ref caches decoded one by one. */
START_TEST(test_batched_decode_cuda_matches_one_mha_decode_per_sequence)
{
    enum { B = 3, D = 32, T = 10 };
    layer L;
    layer_make(&L, D, 4, 2, 8, 4, 31);
    float *x = inputs(T * B * D, 32), *want = malloc(B * D * sizeof(float));
    float *dx = dev_upload(x, T * B * D * sizeof(float)), *dout = dev_upload(NULL, B * D * sizeof(float));
    FOR_EACH_ORDER(order) {
        mha_cache ref[B];
        mha_cache_cuda dev;
        for (int b = 0; b < B; b++) CUDA_OK(mha_cache_init(&ref[b], &L.c, T, KV_STORE_F32));
        CUDA_OK(mha_cache_init_cuda(&dev, &L.c, T, KV_STORE_F32, B));
        dev.split = 3;
        for (size_t t = 0; t < T; t++) {
            for (int b = 0; b < B; b++) CUDA_OK(mha_decode(want + b * D, &L.c, &L.w, &ref[b], x + (t * B + b) * D));
            CUDA_OK(mha_decode_cuda(dout, &L.c, &L.dw, &dev, dx + t * B * D));
            expect_outputs("batched decode", dout, want, B * D, twin_tol(&L.c, t + 1));
        }
        ck_assert_uint_eq(B * mha_cache_bytes_used(&ref[0]), mha_cache_bytes_used_cuda(&dev));
        for (int b = 0; b < B; b++) mha_cache_free(&ref[b]);
        mha_cache_free_cuda(&dev);
    }
    kvl_cuda_free(dx);
    kvl_cuda_free(dout);
    free(x);
    free(want);
    layer_free(&L);
}
END_TEST

START_TEST(test_cache_cuda_rejects_what_the_ref_rejects)
{
    layer L;
    layer_make(&L, 16, 2, 1, 8, 0, 41);
    mha_config other = L.c;
    other.window = 3;
    float *dx = dev_upload(NULL, 16 * sizeof(float)), *dout = dev_upload(NULL, 16 * sizeof(float));
    mha_cache_cuda dev;
    CUDA_OK(mha_cache_init_cuda(&dev, &L.c, 1, KV_STORE_F32, 1));
    ck_assert_int_eq(mha_decode_cuda(dout, &other, &L.dw, &dev, dx), KVL_EINVAL);
    CUDA_OK(mha_decode_cuda(dout, &L.c, &L.dw, &dev, dx));
    ck_assert_int_eq(mha_decode_cuda(dout, &L.c, &L.dw, &dev, dx), KVL_EINVAL); /* full */
    ck_assert_int_eq(mha_prefill_cuda(dout, &L.c, &L.dw, &dev, dx, 0), KVL_EINVAL);
    mha_cache_free_cuda(&dev);
    CUDA_OK(mha_cache_init_cuda(&dev, &L.c, 4, KV_STORE_F32, 2));
    ck_assert_int_eq(mha_prefill_cuda(dout, &L.c, &L.dw, &dev, dx, 1), KVL_EINVAL); /* two sequences */
    mha_cache_free_cuda(&dev);
    kvl_cuda_free(dx);
    kvl_cuda_free(dout);
    layer_free(&L);
}
END_TEST

/* ---- the ring alone ------------------------------------------------------------------------------- */

/* Appends of 1 to 11 rows into rings of every kind, each compared with kv_ring row for row. */
START_TEST(test_ring_cuda_holds_what_kv_ring_holds_after_wrapping_appends)
{
    enum { WIDTH = 12, MAX = 60 };
    static const size_t appends[] = {3, 1, 11, 4, 1, 9, 7};
    float *rows = inputs(11 * WIDTH, 51);
    float *drows = dev_upload(rows, 11 * WIDTH * sizeof(float)), *dread = dev_upload(NULL, WIDTH * sizeof(float));
    const size_t windows[] = {0, 5, 8};
    const kv_store stores[] = {KV_STORE_F32, KV_STORE_BF16};
    FOR_EACH_ORDER(order) for (size_t w = 0; w < 3; w++) for (size_t s = 0; s < 2; s++) {
        kv_ring ref;
        kv_ring_cuda dev;
        CUDA_OK(kv_ring_init(&ref, windows[w], MAX, WIDTH, stores[s]));
        CUDA_OK(kv_ring_init_cuda(&dev, windows[w], MAX, WIDTH, kv_cuda_store_of(stores[s]), 1));
        for (size_t k = 0; k < sizeof appends / sizeof appends[0]; k++) {
            CUDA_OK(kv_ring_append(&ref, rows, appends[k]));
            CUDA_OK(kv_ring_append_cuda(&dev, drows, appends[k]));
            expect_same_rings(&ref, &dev);
            ck_assert_uint_eq(kv_ring_bytes_used(&ref), kv_ring_bytes_used_cuda(&dev));
        }
        ck_assert_int_eq(kv_ring_read_cuda(dread, &dev, 0, 1), windows[w] ? KVL_EINVAL : KVL_OK);
        ck_assert_int_eq(kv_ring_append_cuda(&dev, drows, MAX), KVL_EINVAL);
        kv_ring_free(&ref);
        kv_ring_free_cuda(&dev);
    }
    kvl_cuda_free(drows);
    kvl_cuda_free(dread);
    free(rows);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = cuda_suite("cuda_mha");
    if (!cuda_present()) return s;
    TCase *td = tcase_create("decode");
    tcase_set_timeout(td, KVL_TEST_TIMEOUT);
    tcase_add_test(td, test_gqa_decode_cuda_matches_mha_decode_when_splits_are_ragged);
    tcase_add_test(td, test_mqa_decode_cuda_matches_mha_decode_when_heads_are_odd);
    tcase_add_test(td, test_swa_decode_cuda_matches_mha_decode_when_the_ring_wraps);
    tcase_add_test(td, test_decode_cuda_matches_mha_decode_when_the_cache_is_bf16);
    tcase_add_test(td, test_batched_decode_cuda_matches_one_mha_decode_per_sequence);
    tcase_add_test(td, test_cache_cuda_rejects_what_the_ref_rejects);
    suite_add_tcase(s, td);
    TCase *tp = tcase_create("prefill");
    tcase_set_timeout(tp, KVL_TEST_TIMEOUT);
    tcase_add_test(tp, test_prefill_cuda_matches_mha_prefill_in_ragged_chunks);
    tcase_add_test(tp, test_prefill_cuda_matches_mha_prefill_when_chunks_straddle_the_window);
    suite_add_tcase(s, tp);
    TCase *tr = tcase_create("ring");
    tcase_add_test(tr, test_ring_cuda_holds_what_kv_ring_holds_after_wrapping_appends);
    suite_add_tcase(s, tr);
    return s;
}
