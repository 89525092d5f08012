/* The lightning indexer's scan (ref/core/index_scan.h) against its definition written here in
 * double, under each backend: the definitions (TCase "ref") and the CPU backend's tiled products
 * (cpu/index_scan_cpu.h, TCase "cpu"), the same cases in both, I_{i,s} = Σ_j w_ij·ReLU(q_ij·k_s) for s < ⌊(start + i + 1)/M⌋ and −∞ beyond; at sizes where
 * the key tiles straddle (several tiles, a ragged last one), where the queries of a prefill chunk reach
 * different tiles, with the keys split across threads, and over keys that are read a tile at a time
 * from a packed store (bf16 here). The listed scan (a candidate pool) against the same definition. */
#include "common.h"
#include "element.h"
#include "backend_cpu.h"
#include "index_scan_cpu.h"
#include "linalg.h"
#include "threads.h"
#include "rng.h"
#include "status.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define U_F32 (FLT_EPSILON / 2)

static float *uniform(size_t n, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    float *x = malloc(n * sizeof *x);
    ck_assert_ptr_nonnull(x);
    kvl_rng_uniform_f32(&rng, x, n, -1.0, 1.0);
    return x;
}

/* The score of query q[HI][DI], w[HI] against key k[DI] in double, and the bound on float32's error:
 * each dot product is off by at most γ_DI·Σ|q·k|, the head sum adds γ_HI of Σ|w·ReLU(dot)|. */
static double definition(double *bound, const float *q, const float *w, const float *k, size_t HI, size_t DI)
{
    double s = 0, b = 0;
    for (size_t j = 0; j < HI; j++) {
        double dot = 0, mag = 0;
        for (size_t c = 0; c < DI; c++) {
            dot += (double)q[j * DI + c] * (double)k[c];
            mag += fabs((double)q[j * DI + c] * (double)k[c]);
        }
        s += (double)w[j] * (dot > 0 ? dot : 0);
        b += fabs((double)w[j]) * mag;
    }
    *bound = (double)(DI + HI + 4) * U_F32 * b;
    return s;
}

/* got[S][N] against the definition: −∞ exactly past each query's reach, within the bound before it. */
static void expect_scores(const char *what, const float *got, const float *q, const float *w, const float *k,
                          size_t S, size_t N, size_t HI, size_t DI, size_t start, size_t M)
{
    size_t finite = 0;
    for (size_t i = 0; i < S; i++) {
        const size_t reach = (start + i + 1) / M < N ? (start + i + 1) / M : N;
        for (size_t s = 0; s < N; s++) {
            const float g = got[i * N + s];
            if (s >= reach) {
                ck_assert_msg(g == -INFINITY, "%s: query %zu key %zu past its reach %zu: %g", what, i, s, reach, g);
                continue;
            }
            double bound;
            const double want = definition(&bound, q + i * HI * DI, w + i * HI, k + s * DI, HI, DI);
            ck_assert_msg(fabs(g - want) <= bound, "%s: query %zu key %zu: %.9g, definition %.9g (bound %.3g)", what, i,
                          s, g, want, bound);
            finite++;
        }
    }
    ck_assert_uint_gt(finite, 0);
}

START_TEST(test_scores_equal_the_definition_when_tiles_straddle_and_queries_reach_different_tiles)
{
    /* A prefill chunk of 9 queries whose reaches end in different tiles (M 1: 2050 … 2058 of N 2600,
     * tile 3 ragged) and a compressed source (M 4: reaches 512 … 514, the rest of the keys unread). */
    const size_t S = 9, N = 2600, HI = 16, DI = 64;
    float *q = uniform(S * HI * DI, 1), *w = uniform(S * HI, 2), *k = uniform(N * DI, 3);
    float *I = malloc(S * N * sizeof *I);
    const kvl_row_tiles keys = kvl_row_tiles_f32(k, N, DI);
    const size_t starts[] = {2049, 2049, 0}, ratios[] = {1, 4, 1};
    for (size_t c = 0; c < 3; c++) {
        ck_assert_int_eq(kvl_index_scores(I, q, w, &keys, S, HI, starts[c], ratios[c]), KVL_OK);
        expect_scores("index scores", I, q, w, k, S, N, HI, DI, starts[c], ratios[c]);
    }
    free(q); free(w); free(k); free(I);
}
END_TEST

START_TEST(test_keys_split_across_threads_each_equal_the_definition)
{
    /* S·N·HI·DI = 2^25 multiply-adds: past KVL_SPLIT_MIN_MACS, so two threads split the keys in two. */
    const size_t S = 8, N = 4099, HI = 16, DI = 64, start = N - S;
    float *q = uniform(S * HI * DI, 4), *w = uniform(S * HI, 5), *k = uniform(N * DI, 6);
    float *one = malloc(S * N * sizeof *one), *two = malloc(S * N * sizeof *two);
    const kvl_row_tiles keys = kvl_row_tiles_f32(k, N, DI);
    const int threads = kvl_threads();
    kvl_set_threads(1);
    ck_assert_int_eq(kvl_index_scores(one, q, w, &keys, S, HI, start, 1), KVL_OK);
    kvl_set_threads(2);
    ck_assert_int_eq(kvl_index_scores(two, q, w, &keys, S, HI, start, 1), KVL_OK);
    kvl_set_threads(threads);
    expect_scores("one thread", one, q, w, k, S, N, HI, DI, start, 1);
    expect_scores("two threads", two, q, w, k, S, N, HI, DI, start, 1);
    free(q); free(w); free(k); free(one); free(two);
}
END_TEST

/* A packed store: keys as bf16 codes, decoded into the scan's scratch a tile at a time. A request for
 * more than one tile, or one touching the key `poison` (if set), fails. */
typedef struct {
    const uint16_t *codes;
    size_t poison;
} bf16_keys;

static const float *bf16_tile(float *scratch, const kvl_row_tiles *r, size_t first, size_t n)
{
    const bf16_keys *b = r->src;
    if (n > KVL_INDEX_KEY_TILE) {
        kvl_fail(KVL_EINVAL, "bf16 keys: %zu rows asked at once", n);
        return NULL;
    }
    if (b->poison >= first && b->poison < first + n) {
        kvl_fail(KVL_EINVAL, "bf16 keys: key %zu cannot be read", b->poison);
        return NULL;
    }
    for (size_t i = 0; i < n * r->width; i++) scratch[i] = kvf_bf16_decode(b->codes[first * r->width + i]);
    return scratch;
}

START_TEST(test_packed_keys_decoded_a_tile_at_a_time_score_as_their_values)
{
    const size_t S = 3, N = 3001, HI = 8, DI = 32, start = N - S;
    float *q = uniform(S * HI * DI, 7), *w = uniform(S * HI, 8), *k = uniform(N * DI, 9);
    uint16_t *codes = malloc(N * DI * sizeof *codes);
    for (size_t i = 0; i < N * DI; i++) {
        codes[i] = kvf_bf16_encode(k[i]);
        k[i] = kvf_bf16_decode(codes[i]);
    }
    float *packed = malloc(S * N * sizeof *packed), *plain = malloc(S * N * sizeof *plain);
    bf16_keys b = {codes, SIZE_MAX};
    const kvl_row_tiles view = {.N = N, .width = DI, .tile = bf16_tile, .src = &b};
    const kvl_row_tiles keys = kvl_row_tiles_f32(k, N, DI);
    ck_assert_msg(kvl_index_scores(packed, q, w, &view, S, HI, start, 1) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(kvl_index_scores(plain, q, w, &keys, S, HI, start, 1), KVL_OK);
    expect_scores("bf16 keys", packed, q, w, k, S, N, HI, DI, start, 1);
    ck_assert_msg(memcmp(packed, plain, S * N * sizeof *plain) == 0, "decoded tiles score as the decoded keys");

    b.poison = 2500;
    ck_assert_int_eq(kvl_index_scores(packed, q, w, &view, S, HI, start, 1), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "key 2500") != NULL, "the reader's message survives: %s", kvl_error());
    free(q); free(w); free(k); free(codes); free(packed); free(plain);
}
END_TEST

START_TEST(test_listed_scores_equal_the_definition_in_any_order_and_the_rest_are_minus_infinity)
{
    /* A pool of runs (blocks of 64) and single keys, listed out of order, 1,300 in all: two tiles. */
    const size_t N = 5000, HI = 16, DI = 64;
    float *q = uniform(HI * DI, 10), *w = uniform(HI, 11), *k = uniform(N * DI, 12);
    int32_t at[1300];
    size_t n = 0;
    for (int32_t b = 70; b >= 52; b--)
        for (int32_t j = 0; j < 64; j++) at[n++] = b * 64 + j;
    for (int32_t j = 0; n < 1300; j += 7) at[n++] = j;
    float *I = malloc(N * sizeof *I);
    const kvl_row_tiles keys = kvl_row_tiles_f32(k, N, DI);
    for (size_t s = 0; s < N; s++) I[s] = 1.0f;
    ck_assert_int_eq(kvl_index_scores_listed(I, q, w, &keys, HI, at, n), KVL_OK);
    for (size_t j = 0; j < n; j++) {
        double bound;
        const double want = definition(&bound, q, w, k + (size_t)at[j] * DI, HI, DI);
        const float got = I[at[j]];
        ck_assert_msg(fabs(got - want) <= bound, "listed %zu (key %d): %.9g, definition %.9g", j, at[j], got, want);
        I[at[j]] = -INFINITY;
    }
    for (size_t s = 0; s < N; s++) ck_assert_msg(I[s] == -INFINITY, "key %zu, not listed, is %g", s, I[s]);
    /* A row of 300,000 entries, past the size the CPU backend fills in parts: three listed. */
    const size_t BIG = 300000, SMALL_DI = 8;
    float *kb = uniform(BIG * SMALL_DI, 13), *Ib = malloc(BIG * sizeof *Ib);
    const kvl_row_tiles big = kvl_row_tiles_f32(kb, BIG, SMALL_DI);
    const int32_t few[3] = {299999, 5, 150000};
    for (size_t s = 0; s < BIG; s++) Ib[s] = 1.0f;
    ck_assert_int_eq(kvl_index_scores_listed(Ib, q, w, &big, 2, few, 3), KVL_OK);
    for (size_t s = 0; s < BIG; s++) {
        const int listed = s == 299999 || s == 5 || s == 150000;
        double bound;
        if (listed) ck_assert(fabs(Ib[s] - definition(&bound, q, w, kb + s * SMALL_DI, 2, SMALL_DI)) <= bound);
        else ck_assert_msg(Ib[s] == -INFINITY, "key %zu of %zu, not listed, is %g", s, BIG, Ib[s]);
    }
    free(kb);
    free(Ib);
    at[n - 1] = (int32_t)N;
    ck_assert_int_eq(kvl_index_scores_listed(I, q, w, &keys, HI, at, n), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "5000") != NULL, "message names the key: %s", kvl_error());
    free(q); free(w); free(k); free(I);
}
END_TEST

START_TEST(test_bad_arguments_are_errors_and_empty_scans_write_nothing)
{
    float q[8] = {0}, w[2] = {0}, k[8] = {0}, I[4] = {1, 1, 1, 1};
    const int32_t at[1] = {0};
    const kvl_row_tiles keys = kvl_row_tiles_f32(k, 2, 4);
    ck_assert_int_eq(kvl_index_scores(NULL, q, w, &keys, 1, 2, 0, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_index_scores(I, q, NULL, &keys, 1, 2, 0, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_index_scores(I, q, w, NULL, 1, 2, 0, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_index_scores(I, q, w, &keys, 1, 0, 0, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_index_scores(I, q, w, &keys, 1, 2, 0, 0), KVL_EINVAL);
    ck_assert_int_eq(kvl_index_scores_listed(I, q, w, &keys, 2, NULL, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_index_scores(I, q, w, &keys, 0, 2, 0, 1), KVL_OK);
    for (size_t i = 0; i < 4; i++) ck_assert_float_eq(I[i], 1.0f);
    ck_assert_int_eq(kvl_index_scores_listed(I, q, w, &keys, 2, at, 0), KVL_OK); /* nothing listed: all −∞ */
    for (size_t i = 0; i < 2; i++) ck_assert_float_eq(I[i], -INFINITY);
    ck_assert_float_eq(I[2], 1.0f);
}
END_TEST

static void use_ref(void) { kvl_backend_use(&kvl_backend_ref); }
static void use_cpu(void) { kvl_backend_use(&kvl_backend_cpu); }

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_index_scan");
    void (*const use[])(void) = {use_ref, use_cpu};
    const char *const names[] = {"ref", "cpu"};
    for (size_t b = 0; b < 2; b++) {
        TCase *tc = tcase_create(names[b]);
        tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
        tcase_add_checked_fixture(tc, use[b], NULL);
        tcase_add_test(tc, test_scores_equal_the_definition_when_tiles_straddle_and_queries_reach_different_tiles);
        tcase_add_test(tc, test_keys_split_across_threads_each_equal_the_definition);
        tcase_add_test(tc, test_packed_keys_decoded_a_tile_at_a_time_score_as_their_values);
        tcase_add_test(tc, test_listed_scores_equal_the_definition_in_any_order_and_the_rest_are_minus_infinity);
        tcase_add_test(tc, test_bad_arguments_are_errors_and_empty_scans_write_nothing);
        suite_add_tcase(s, tc);
    }
    return s;
}
