/* V4.1's Reindex scores over the candidate pool (cuda/v41_indexer_cuda.h, v41_index_scores_pool_cuda)
 * against ref/v41_indexer.h at a size where the pool is a small part of the entries: thousands of entries,
 * so that the list of pool entries is assembled from several chunks of the pool's rows and scored in more
 * than one split; the pool of each query (top P blocks of B, the newest block partial) leaves most blocks
 * out. Scores on the pool equal the ref's exactly on inputs whose sums are exact, every other entry is −∞,
 * and the picks over them are the ref's; a query whose pool is empty and one whose pool is shorter than K
 * are explicit rows. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"

#include "v41_indexer.h"
#include "v41_indexer_cuda.h"
#include "topk_cuda.h"

/* Inputs on a grid of 2^-4 in [−1, 1]: every dot product and head sum below is exact in float32. */
#define GRID 16.0f

/* S 4 queries at 8970 … 8973 over N 4500 entries of ratio M 2: they see 4485 … 4487 entries, 280 whole
 * blocks of B 16 and a newest block of 5 … 7; P 20 picks keep at most 320 entries (7% of N). HI 4, DI 32,
 * K 40. */
enum { S = 4, N = 4500, START = 8970, M = 2, B = 16, P = 20, HI = 4, DI = 32, K = 40 };
/* more pool entries than one split of the scoring kernel takes */
enum { LISTED = 256 };
/* rows with a hand-made pool: none, and only the newest block's entries (fewer than K) */
enum { ROW_EMPTY = 0, ROW_SHORT = 1 };

static v41_indexer_config config(void)
{
    v41_indexer_config c = {.d = 32, .q_lora_rank = 16, .width = 64, .n_heads = HI, .head_dim = DI, .topk = K,
                             .ratio = M, .norm_eps = 1e-6};
    CUDA_OK(kvl_rope_init(&c.rope, 8, 1e4));
    CUDA_OK(v41_indexer_config_check(&c));
    return c;
}

static float *grid_floats(size_t n, test_rng *r)
{
    float *v = test_floats(n);
    for (size_t i = 0; i < n; i++) v[i] = test_grid_uniform(r, GRID);
    return v;
}

/* pool[S][N]: the candidate pool of random source scores, then the two hand-made rows */
static uint8_t *make_pool(test_rng *r)
{
    float *src = test_floats(S * N);
    for (size_t i = 0; i < S * N; i++) src[i] = test_uniform(r);
    uint8_t *pool = malloc(S * N);
    ck_assert(pool != NULL);
    CUDA_OK(v41_candidate_pool(pool, src, S, N, START, M, B, P));
    free(src);
    memset(pool + ROW_EMPTY * N, 0, N);
    const size_t seen = (START + ROW_SHORT + 1) / M;
    memset(pool + ROW_SHORT * N, 0, N);
    memset(pool + ROW_SHORT * N + seen / B * B, 1, seen % B);
    return pool;
}

static size_t pool_size(const uint8_t *row)
{
    size_t n = 0;
    for (size_t i = 0; i < N; i++) n += row[i] != 0;
    return n;
}

START_TEST(test_pool_scores_cuda_equal_the_refs_over_a_pool_much_smaller_than_the_entries)
{
    const v41_indexer_config c = config();
    test_rng r = {231};
    float *q = grid_floats(S * HI * DI, &r), *w = grid_floats(S * HI, &r), *k = grid_floats(N * DI, &r);
    uint8_t *pool = make_pool(&r);
    for (size_t s = 0; s < S; s++) {
        const size_t n = pool_size(pool + s * N);
        ck_assert_msg(s == ROW_EMPTY ? n == 0 : s == ROW_SHORT ? n > 0 && n < K : n > LISTED && n <= P * B,
                      "query %zu's pool holds %zu entries", s, n);
    }
    float *want = test_floats(S * N), *got = test_floats(S * N);
    int32_t *want_sel = test_ints(S * K), *got_sel = test_ints(S * K);
    uint64_t scored = 0;
    const kvl_row_tiles keys = kvl_row_tiles_f32(k, N, DI);
    CUDA_OK(v41_index_scores_pool(want, &scored, &c, q, w, &keys, pool, S));
    CUDA_OK(v41_index_select(want_sel, &c, want, S, N));
    float *dq = dev_upload(q, S * HI * DI * sizeof *q), *dw = dev_upload(w, S * HI * sizeof *w);
    float *dk = dev_upload(k, N * DI * sizeof *k), *dI = dev_filled(0x7F, S * N * sizeof(float));
    uint8_t *dpool = dev_upload(pool, S * N);
    int32_t *dsel = dev_upload(NULL, S * K * sizeof(int32_t));
    kvl_workspace work = {0};
    FOR_EACH_ORDER(order) {
        CUDA_OK(v41_index_scores_pool_cuda(dI, &c, dq, dw, dk, dpool, S, N, &work));
        CUDA_OK(kvl_topk_cuda(dsel, dI, S, N, K));
        dev_download(got, dI, S * N * sizeof *got);
        dev_download(got_sel, dsel, S * K * sizeof *got_sel);
        for (size_t i = 0; i < S * N; i++)
            ck_assert_msg(got[i] == want[i] && (pool[i] || got[i] == -INFINITY),
                          "%s: query %zu entry %zu (%s the pool) scores %.9g, the ref %.9g", order, i / N, i % N,
                          pool[i] ? "in" : "outside", got[i], want[i]);
        for (size_t i = 0; i < S * K; i++)
            ck_assert_msg(got_sel[i] == want_sel[i], "%s: query %zu pick %zu is %d, the ref's %d", order, i / K, i % K,
                          got_sel[i], want_sel[i]);
    }
    ck_assert_msg(want_sel[ROW_EMPTY * K] == -1 && want_sel[ROW_SHORT * K + K - 1] == -1,
                  "the empty and the short pool pad their picks with -1");
    kvl_workspace_free(&work);
    kvl_cuda_free(dq), kvl_cuda_free(dw), kvl_cuda_free(dk), kvl_cuda_free(dI), kvl_cuda_free(dpool);
    kvl_cuda_free(dsel);
    free(q), free(w), free(k), free(pool), free(want), free(got), free(want_sel), free(got_sel);
}
END_TEST

START_TEST(test_pool_scores_cuda_reject_a_null_pool_and_leave_the_scores)
{
    const v41_indexer_config c = config();
    float *dq = dev_upload(NULL, S * HI * DI * sizeof(float)), *dw = dev_upload(NULL, S * HI * sizeof(float));
    float *dk = dev_upload(NULL, N * DI * sizeof(float)), *dI = dev_filled(0x7F, S * N * sizeof(float));
    kvl_workspace work = {0};
    ck_assert_int_eq(v41_index_scores_pool_cuda(dI, &c, dq, dw, dk, NULL, S, N, &work), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "v41_index_scores_pool_cuda") != NULL, "message names the function: %s",
                  kvl_error());
    float *got = test_floats(S * N);
    dev_download(got, dI, S * N * sizeof *got);
    uint32_t sentinel;
    memset(&sentinel, 0x7F, sizeof sentinel);
    for (size_t i = 0; i < S * N; i++)
        ck_assert_msg(memcmp(got + i, &sentinel, sizeof sentinel) == 0, "entry %zu written", i);
    kvl_workspace_free(&work);
    kvl_cuda_free(dq), kvl_cuda_free(dw), kvl_cuda_free(dk), kvl_cuda_free(dI);
    free(got);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = cuda_suite("cuda_v41_pool");
    if (!cuda_present()) return s;
    TCase *tc = tcase_create("pool scores");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_pool_scores_cuda_equal_the_refs_over_a_pool_much_smaller_than_the_entries);
    tcase_add_test(tc, test_pool_scores_cuda_reject_a_null_pool_and_leave_the_scores);
    suite_add_tcase(s, tc);
    return s;
}
