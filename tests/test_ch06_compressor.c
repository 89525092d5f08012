/* ref/v4_compressor (chapter 6): the token compressor of HCA (M 8 in the toy, no overlap), CSA (M 4,
 * overlapping 2M slots) and the CSA indexer (width DI) against its double definition, and the incremental
 * form a server runs (running kv/gate buffers with the CSA carry-over) against the batched one, token by
 * token and in ragged chunks, entries emitted at the same steps. */
#include "common.h"
#include "oracle_v4.h"
#include "v4_toy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v4_compressor.h"

/* The three compressors of the toy, by the layer that owns them. */
typedef enum { COMP_HCA, COMP_CSA, COMP_INDEX, N_COMP } which;
static const char *const NAMES[N_COMP] = {"HCA (M 8)", "CSA (M 4, overlap)", "CSA indexer (DI 16)"};

typedef struct {
    v4_config layer;
    v4_weights w;
    const v4_compressor_config *c;
    const v4_compressor_weights *cw;
} compressor;

static void compressor_make(compressor *k, which i, uint64_t seed)
{
    v4_toy_layer(&k->layer, &k->w, i == COMP_HCA ? V4_TOY_LAYER_HCA : V4_TOY_LAYER_CSA, 3, seed);
    k->c = i == COMP_INDEX ? &k->layer.indexer.compressor : &k->layer.compressor;
    k->cw = i == COMP_INDEX ? &k->w.indexer.compressor : &k->w.compressor;
}

/* Entries of a float path against the double definition: the sums of one entry are d (projections),
 * (1+ov)·M slots and c (RMSNorm), each passing on errors with gain at most 1 (oracle_attention.h). */
static double entry_tol(const v4_compressor_config *c)
{
    return oracle_f32_tol(c->d + (1 + c->overlap) * c->ratio + c->width);
}

static float *batched(const compressor *k, const float *x, size_t T)
{
    float *e = oracle_alloc((T / k->c->ratio + 1) * k->c->width * sizeof *e);
    ck_assert_msg(v4_compressor_forward(e, k->c, k->cw, x, T, 0) == KVL_OK, "%s", kvl_error());
    return e;
}

/* Every compressor of the toy, T = 45 (a ragged tail: 5 tokens for M 8, 1 for M 4): slots, channel
 * halves (previous block through the first c channels), one softmax per channel, RMSNorm, and the
 * rotation at the block's first position iM. */
START_TEST(test_batched_compressor_matches_definition)
{
    for (which i = 0; i < N_COMP; i++) {
        compressor k;
        compressor_make(&k, i, 600 + i);
        const size_t T = V4_TOY_T, N = T / k.c->ratio, c = k.c->width;
        float *x = v4_toy_inputs(T, k.c->d, 610 + i);
        double *xd = oracle_widen(x, T * k.c->d), *want = oracle_alloc(N * c * sizeof *want);
        float *got = batched(&k, x, T);
        oracle_v4_compress(want, k.c, k.cw, xd, T, 0);
        const double tol = entry_tol(k.c);
        kvl_expect_close(NAMES[i], got, want, N * c, tol, tol, 1.0 - tol);
        free(x); free(xd); free(want); free(got);
        v4_weights_free(&k.w);
    }
}
END_TEST

/* Feed x[T] in the chunks sizes[] (summing to T): entries in order into got[N][c]; emitted[t] = entries
 * returned by the chunk that ends at token t (0 elsewhere). */
static void incremental(float *got, size_t *emitted, const compressor *k, const float *x, const size_t *sizes,
                        size_t n_chunks)
{
    v4_compressor_state s;
    ck_assert_msg(v4_compressor_state_init(&s, k->c) == KVL_OK, "%s", kvl_error());
    size_t pos = 0, n = 0;
    for (size_t j = 0; j < n_chunks; j++) {
        size_t n_new = 99;
        ck_assert_msg(v4_compressor_push(got + n * k->c->width, &n_new, k->c, k->cw, &s, x + pos * k->c->d, sizes[j], 0)
                          == KVL_OK, "%s", kvl_error());
        pos += sizes[j];
        ck_assert_uint_eq(s.pos, pos);
        if (sizes[j] == 0) ck_assert_uint_eq(n_new, 0);
        else emitted[pos - 1] = n_new;
        n += n_new;
    }
    v4_compressor_state_free(&s);
}

static void expect_incremental_matches_batched(const size_t *sizes, size_t n_chunks)
{
    for (which i = 0; i < N_COMP; i++) {
        compressor k;
        compressor_make(&k, i, 620 + i);
        const size_t T = V4_TOY_T, M = k.c->ratio, N = T / M, c = k.c->width;
        float *x = v4_toy_inputs(T, k.c->d, 630 + i);
        float *want = batched(&k, x, T), *got = oracle_alloc((N + 1) * c * sizeof *got);
        size_t emitted[V4_TOY_T] = {0}, pos = 0;
        incremental(got, emitted, &k, x, sizes, n_chunks);
        for (size_t j = 0; j < n_chunks; j++) {
            pos += sizes[j];
            if (sizes[j]) ck_assert_msg(emitted[pos - 1] == pos / M - (pos - sizes[j]) / M,
                          "%s: the chunk ending at token %zu emitted %zu entries, expected %zu", NAMES[i], pos - 1,
                          emitted[pos - 1], pos / M - (pos - sizes[j]) / M);
        }
        double *wd = oracle_widen(want, N * c);
        const double tol = 2 * entry_tol(k.c);   /* each path within entry_tol of the definition */
        kvl_expect_close(NAMES[i], got, wd, N * c, tol, tol, 1.0 - tol);
        free(x); free(want); free(got); free(wd);
        v4_weights_free(&k.w);
    }
}

/* One token per push: an entry comes out exactly at the tokens t with (t+1) mod M = 0. */
START_TEST(test_incremental_compressor_matches_batched_token_by_token)
{
    size_t ones[V4_TOY_T];
    for (size_t t = 0; t < V4_TOY_T; t++) ones[t] = 1;
    expect_incremental_matches_batched(ones, V4_TOY_T);
}
END_TEST

/* Chunks that start and end off the block edges, one spanning two whole HCA blocks, one empty. */
START_TEST(test_incremental_compressor_matches_batched_in_ragged_chunks)
{
    static const size_t sizes[] = {3, 1, 7, 0, 4, 17, 2, 6, 5};
    size_t total = 0;
    for (size_t j = 0; j < sizeof sizes / sizeof sizes[0]; j++) total += sizes[j];
    ck_assert_uint_eq(total, V4_TOY_T);
    expect_incremental_matches_batched(sizes, sizeof sizes / sizeof sizes[0]);
}
END_TEST

/* Entry i is a function of its blocks only: tokens after block i (and, for CSA, before block i − 1)
 * leave it unchanged bit for bit, and a token of block i (or, for CSA, of block i − 1) changes it. */
START_TEST(test_entry_reads_only_its_blocks)
{
    for (which i = 0; i < N_COMP; i++) {
        compressor k;
        compressor_make(&k, i, 640 + i);
        const size_t T = V4_TOY_T, M = k.c->ratio, N = T / M, c = k.c->width, d = k.c->d, ov = k.c->overlap;
        float *x = v4_toy_inputs(T, d, 650 + i), *base = batched(&k, x, T);
        for (size_t tok = 0; tok < T; tok++) {
            float *y = oracle_alloc(T * d * sizeof *y);
            memcpy(y, x, T * d * sizeof *y);
            for (size_t j = 0; j < d; j++) y[tok * d + j] += 1.0f;
            float *got = batched(&k, y, T);
            for (size_t e = 0; e < N; e++) {
                const int reads = tok / M == e || (ov && tok / M + 1 == e);
                const int same = memcmp(got + e * c, base + e * c, c * sizeof *got) == 0;
                ck_assert_msg(same != reads, "%s: entry %zu %s when token %zu changes", NAMES[i], e,
                              same ? "did not change" : "changed", tok);
            }
            free(y);
            free(got);
        }
        free(x); free(base);
        v4_weights_free(&k.w);
    }
}
END_TEST

/* No entry before its block completes: ⌊T/M⌋ entries after T tokens, for every T across two blocks. */
START_TEST(test_no_entry_before_its_block_completes)
{
    compressor k;
    compressor_make(&k, COMP_HCA, 660);
    const size_t M = k.c->ratio;
    for (size_t T = 0; T <= 3 * M; T++) ck_assert_uint_eq(v4_compressor_entries(k.c, T), T / M);
    v4_compressor_state s;
    ck_assert_msg(v4_compressor_state_init(&s, k.c) == KVL_OK, "%s", kvl_error());
    float *x = v4_toy_inputs(M, k.c->d, 661), *e = oracle_alloc(k.c->width * sizeof *e);
    size_t n = 99;
    ck_assert_int_eq(v4_compressor_push(e, &n, k.c, k.cw, &s, x, M - 1, 0), KVL_OK);
    ck_assert_uint_eq(n, 0);
    ck_assert_int_eq(v4_compressor_push(e, &n, k.c, k.cw, &s, x + (M - 1) * k.c->d, 1, 0), KVL_OK);
    ck_assert_uint_eq(n, 1);
    v4_compressor_state_free(&s);
    free(x); free(e);
    v4_weights_free(&k.w);
}
END_TEST

/* The state is (1+ov)·M rows of (1+ov)·c channels, kv and gate in float32, whatever the context. */
START_TEST(test_state_bytes_are_bounded)
{
    for (which i = 0; i < N_COMP; i++) {
        compressor k;
        compressor_make(&k, i, 670 + i);
        v4_compressor_state s;
        ck_assert_msg(v4_compressor_state_init(&s, k.c) == KVL_OK, "%s", kvl_error());
        const size_t f = 1 + k.c->overlap, want = 2 * f * k.c->ratio * f * k.c->width * sizeof(float);
        ck_assert_uint_eq(v4_compressor_state_bytes(&s), want);
        float *x = v4_toy_inputs(V4_TOY_T, k.c->d, 680), *e = oracle_alloc(V4_TOY_T * k.c->width * sizeof *e);
        size_t n;
        ck_assert_int_eq(v4_compressor_push(e, &n, k.c, k.cw, &s, x, V4_TOY_T, 0), KVL_OK);
        ck_assert_uint_eq(v4_compressor_state_bytes(&s), want);
        v4_compressor_state_free(&s);
        free(x); free(e);
        v4_weights_free(&k.w);
    }
}
END_TEST

/* A state of another compressor, an overlap of 2 and a zero ratio are refused with a message. */
START_TEST(test_bad_arguments_are_refused)
{
    compressor h, c;
    compressor_make(&h, COMP_HCA, 690);
    compressor_make(&c, COMP_CSA, 691);
    v4_compressor_state s;
    ck_assert_int_eq(v4_compressor_state_init(&s, h.c), KVL_OK);
    float *x = v4_toy_inputs(4, h.c->d, 692), e[64];
    size_t n;
    ck_assert_int_eq(v4_compressor_push(e, &n, c.c, c.cw, &s, x, 1, 0), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "state"));
    v4_compressor_config bad = *h.c;
    bad.overlap = 2;
    ck_assert_int_eq(v4_compressor_config_check(&bad), KVL_EINVAL);
    bad = *h.c;
    bad.ratio = 0;
    ck_assert_int_eq(v4_compressor_config_check(&bad), KVL_EINVAL);
    v4_compressor_state_free(&s);
    free(x);
    v4_weights_free(&h.w);
    v4_weights_free(&c.w);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch06_compressor");
    TCase *tc = tcase_create("compressor");
    tcase_add_test(tc, test_batched_compressor_matches_definition);
    tcase_add_test(tc, test_incremental_compressor_matches_batched_token_by_token);
    tcase_add_test(tc, test_incremental_compressor_matches_batched_in_ragged_chunks);
    tcase_add_test(tc, test_entry_reads_only_its_blocks);
    tcase_add_test(tc, test_no_entry_before_its_block_completes);
    tcase_add_test(tc, test_state_bytes_are_bounded);
    tcase_add_test(tc, test_bad_arguments_are_refused);
    suite_add_tcase(s, tc);
    return s;
}
