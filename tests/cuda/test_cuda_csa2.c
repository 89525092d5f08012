/* The V4.1 indexer twins (cuda/csa2_indexer_cuda.h) against ref/csa2_indexer: a Full layer's scores over
 * every visible entry and its picks, the hierarchical candidate pool (block maxima with the newest,
 * partial block forced in, the top blocks, their entries) byte for byte, and a Reindex layer's scores
 * restricted to the pool; exactly, on inputs whose sums are exact, with blocks that straddle the
 * positions the queries see. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"

#include "csa2_indexer.h"
#include "csa2_indexer_cuda.h"
#include "topk_cuda.h"

/* Inputs on a grid of 2^-4 in [−1, 1]: every dot product and head sum below is exact in float32. */
#define GRID 16.0f

/* S 6 queries at 40 … 45 over N 24 entries of ratio M 2 (each sees 20 … 23), HI 5, DI 32, K 6 */
enum { S = 6, N = 24, START = 40, HI = 5, DI = 32, K = 6 };

static csa2_indexer_config config(void)
{
    csa2_indexer_config c = {.d = 32, .q_lora_rank = 16, .width = 64, .n_heads = HI, .head_dim = DI, .topk = K,
                             .ratio = 2, .norm_eps = 1e-6};
    CUDA_OK(kvl_rope_init(&c.rope, 8, 1e4));
    CUDA_OK(csa2_indexer_config_check(&c));
    return c;
}

typedef struct {
    float *q, *w, *k;    /* host: q_idx[S][HI][DI], w_idx[S][HI], keys[N][DI] on the grid */
    float *dq, *dw, *dk; /* their device copies */
} inputs;

static void inputs_make(inputs *in, uint64_t seed)
{
    in->q = test_floats(S * HI * DI), in->w = test_floats(S * HI), in->k = test_floats(N * DI);
    test_rng r = {seed};
    for (size_t i = 0; i < S * HI * DI; i++) in->q[i] = test_grid_uniform(&r, GRID);
    for (size_t i = 0; i < S * HI; i++) in->w[i] = test_grid_uniform(&r, GRID);
    for (size_t i = 0; i < N * DI; i++) in->k[i] = test_grid_uniform(&r, GRID);
    for (size_t e = 1; e < N; e += 3) memcpy(in->k + e * DI, in->k + (e - 1) * DI, DI * sizeof *in->k); /* ties */
    in->dq = dev_upload(in->q, S * HI * DI * sizeof(float));
    in->dw = dev_upload(in->w, S * HI * sizeof(float));
    in->dk = dev_upload(in->k, N * DI * sizeof(float));
}

static void inputs_free(inputs *in)
{
    free(in->q), free(in->w), free(in->k);
    kvl_cuda_free(in->dq), kvl_cuda_free(in->dw), kvl_cuda_free(in->dk);
}

static void expect_equal_scores(const float *got, const float *want, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s: score of query %zu at entry %zu is %.9g, the ref's %.9g", what, i / N,
                      i % N, got[i], want[i]);
}

START_TEST(test_full_scores_cuda_equal_csa2_index_scores_all_and_pick_the_same_entries)
{
    const csa2_indexer_config c = config();
    inputs in;
    inputs_make(&in, 201);
    float *want = test_floats(S * N), *got = test_floats(S * N);
    int32_t *want_sel = test_ints(S * K), *got_sel = test_ints(S * K);
    uint64_t scored = 0;
    CUDA_OK(csa2_index_scores_all(want, &scored, &c, in.q, in.w, in.k, S, N, START));
    CUDA_OK(csa2_index_select(want_sel, &c, want, S, N));
    float *dI = dev_filled(0x7F, S * N * sizeof(float));
    int32_t *dsel = dev_upload(NULL, S * K * sizeof(int32_t));
    FOR_EACH_ORDER(order) {
        CUDA_OK(csa2_index_scores_all_cuda(dI, &c, in.dq, in.dw, in.dk, S, N, START));
        CUDA_OK(kvl_topk_cuda(dsel, dI, S, N, K));
        dev_download(got, dI, S * N * sizeof *got);
        dev_download(got_sel, dsel, S * K * sizeof *got_sel);
        expect_equal_scores(got, want, S * N, order);
        ck_assert_msg(memcmp(got_sel, want_sel, S * K * sizeof *got_sel) == 0, "picks differ (%s)", order);
    }
    kvl_cuda_free(dI), kvl_cuda_free(dsel);
    free(want), free(got), free(want_sel), free(got_sel);
    inputs_free(&in);
}
END_TEST

/* pool[S][N] from random source scores (−∞ sprinkled, one query's all −∞ but the newest block) with blocks
 * of B and P picks: the twin against csa2_candidate_pool, byte for byte */
static void check_pool(size_t B, size_t P, uint64_t seed)
{
    float *I = test_floats(S * N);
    uint8_t *want = malloc(S * N), *got = malloc(S * N);
    ck_assert(want && got);
    test_rng r = {seed};
    for (size_t i = 0; i < S * N; i++) {
        const float v = test_uniform(&r);
        I[i] = i / N == 2 || test_next(&r) % 7 == 0 ? -INFINITY : v;
    }
    CUDA_OK(csa2_candidate_pool(want, I, S, N, START, 2, B, P));
    float *dI = dev_upload(I, S * N * sizeof *I);
    uint8_t *dpool = dev_filled(0x5A, S * N);
    kvl_workspace work = {0};
    FOR_EACH_ORDER(order) {
        CUDA_OK(csa2_candidate_pool_cuda(dpool, dI, S, N, START, 2, B, P, &work));
        dev_download(got, dpool, S * N);
        for (size_t i = 0; i < S * N; i++)
            ck_assert_msg(got[i] == want[i], "B %zu P %zu (%s): query %zu entry %zu is %u in the pool, the ref says %u",
                          B, P, order, i / N, i % N, got[i], want[i]);
    }
    kvl_workspace_free(&work);
    kvl_cuda_free(dI), kvl_cuda_free(dpool);
    free(I), free(want), free(got);
}

START_TEST(test_candidate_pool_cuda_equals_csa2_candidate_pool)
{
    check_pool(3, 2, 211); /* queries see 20 … 23 entries: the newest block of 3 is partial for most */
    check_pool(4, 3, 212);
    check_pool(5, 20, 213); /* more picks than blocks */
}
END_TEST

START_TEST(test_pool_scores_cuda_equal_csa2_index_scores_pool)
{
    const csa2_indexer_config c = config();
    inputs in;
    inputs_make(&in, 221);
    float *src = test_floats(S * N), *want = test_floats(S * N), *got = test_floats(S * N);
    uint8_t *pool = malloc(S * N);
    ck_assert(pool != NULL);
    uint64_t scored = 0;
    CUDA_OK(csa2_index_scores_all(src, &scored, &c, in.q, in.w, in.k, S, N, START));
    CUDA_OK(csa2_candidate_pool(pool, src, S, N, START, 2, 3, 2));
    CUDA_OK(csa2_index_scores_pool(want, &scored, &c, in.q, in.w, in.k, pool, S, N));
    uint8_t *dpool = dev_upload(pool, S * N);
    float *dI = dev_filled(0x7F, S * N * sizeof(float));
    FOR_EACH_ORDER(order) {
        CUDA_OK(csa2_index_scores_pool_cuda(dI, &c, in.dq, in.dw, in.dk, dpool, S, N));
        dev_download(got, dI, S * N * sizeof *got);
        expect_equal_scores(got, want, S * N, order);
    }
    kvl_cuda_free(dpool), kvl_cuda_free(dI);
    free(src), free(want), free(got), free(pool);
    inputs_free(&in);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = cuda_suite("cuda_csa2");
    if (!cuda_present()) return s;
    TCase *ti = tcase_create("indexer");
    tcase_set_timeout(ti, KVL_TEST_TIMEOUT);
    tcase_add_test(ti, test_full_scores_cuda_equal_csa2_index_scores_all_and_pick_the_same_entries);
    tcase_add_test(ti, test_candidate_pool_cuda_equals_csa2_candidate_pool);
    tcase_add_test(ti, test_pool_scores_cuda_equal_csa2_index_scores_pool);
    suite_add_tcase(s, ti);
    return s;
}
