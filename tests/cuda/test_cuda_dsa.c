/* The DSA twins (cuda/dsa_cuda.h, cuda/topk_cuda.h) against ref/dsa and ref/core/topk: the top-k over
 * long rows full of ties, −∞, NaN and signed zeros; the lightning indexer's scores in the f32 form
 * (exactly, on inputs whose sums are exact) and the fp8 form over 132-byte keys (within the float32
 * bound, picks differing only at near-ties); sparse MLA decode over float32, bf16 and 656-byte FP8 rows
 * with top-k below the number of candidates, −1 padding, a query that selects nothing, splits that do
 * not divide K and B sequences at once. The tensor-core kernels (the fp8 indexer at 64 heads, the sparse
 * decode at 128) against their float twins and the definition, within the bounds of their bf16 roundings. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"
#include "oracle_attention.h"
#include "oracle_dsa.h"

#include "dsa.h"
#include "dsa_cuda.h"
#include "element.h"
#include "hadamard.h"
#include "mla_cuda.h"
#include "rng.h"
#include "rows.h"
#include "kv_ring_cuda.h"
#include "topk.h"
#include "topk_cuda.h"

/* Inputs on a grid of 2^-4 in [−1, 1]: products are multiples of 2^-8, and every sum below stays under
 * 2^12 in magnitude, so float32 forms it exactly in any order (20 significant bits at most). */
#define GRID 16.0f
/* Elementwise errors of 1e-4 on O(1) values leave the cosine above 1 − 1e-7. */
#define MIN_COS (1 - 1e-7)

/* H heads over Dc + Dr latent rows (Dnope = Dv = 8, Dq' 16, d 32), HI index heads of DI, top-K */
static dsa_config config_make(size_t H, size_t Dc, size_t Dr, size_t HI, size_t DI, size_t K)
{
    dsa_config c = {.mla = {.d = 32, .n_heads = H, .q_lora_rank = 16, .kv_lora_rank = Dc, .qk_nope = 8, .qk_rope = Dr,
                            .v_head = 8, .norm_eps = 1e-6, .softmax_scale = 1.0 / sqrt(8.0 + (double)Dr)},
                    .index_n_heads = HI, .index_head_dim = DI, .index_topk = K, .index_norm_eps = 1e-6};
    CUDA_OK(kvl_rope_init(&c.mla.rope, Dr, 1e4));
    CUDA_OK(dsa_config_check(&c));
    return c;
}

/* ---- top-k ------------------------------------------------------------------------------------------ */

/* got[S][K], from `who`, equals want[S][K], from `by`, entry for entry */
static void expect_selection(const int32_t *got, const int32_t *want, size_t S, size_t K, const char *what,
                             const char *who, const char *by, const char *order)
{
    for (size_t i = 0; i < S * K; i++)
        ck_assert_msg(got[i] == want[i], "%s (%s): %s's row %zu entry %zu is %d, %s says %d", what, order, who, i / K,
                      i % K, (int)got[i], by, (int)want[i]);
}

/* The GPU's selections of I[S][N] equal kvl_topk's, entry for entry, in every thread order: the one-block
 * twin's, kvl_topk_cuda's and, for L > 0, those of the rounds over slices of L keys, against the twin. */
static void check_topk_slices(const float *I, size_t S, size_t N, size_t K, size_t L, const char *what)
{
    int32_t *want = test_ints(S * K), *twin = test_ints(S * K), *got = test_ints(S * K);
    CUDA_OK(kvl_topk(want, I, S, N, K));
    float *dI = dev_upload(I, S * N * sizeof *I);
    int32_t *dsel = dev_filled(0x5A, S * K * sizeof *dsel);
    FOR_EACH_ORDER(order) {
        CUDA_OK(kvl_topk_simple_cuda(dsel, dI, S, N, K));
        dev_download(twin, dsel, S * K * sizeof *twin);
        expect_selection(twin, want, S, K, what, "the one-block twin", "kvl_topk", order);
        CUDA_OK(kvl_cuda_fill(dsel, 0x5A, S * K * sizeof *dsel));
        CUDA_OK(kvl_topk_cuda(dsel, dI, S, N, K));
        dev_download(got, dsel, S * K * sizeof *got);
        expect_selection(got, twin, S, K, what, "kvl_topk_cuda", "the one-block twin", order);
        if (L == 0) continue;
        CUDA_OK(kvl_cuda_fill(dsel, 0x5A, S * K * sizeof *dsel));
        CUDA_OK(kvl_topk_slices_cuda(dsel, dI, S, N, K, L));
        dev_download(got, dsel, S * K * sizeof *got);
        expect_selection(got, twin, S, K, what, "the rounds over slices", "the one-block twin", order);
    }
    kvl_cuda_free(dI);
    kvl_cuda_free(dsel);
    free(want);
    free(twin);
    free(got);
}

static void check_topk(const float *I, size_t S, size_t N, size_t K, const char *what)
{
    check_topk_slices(I, S, N, K, 0, what);
}

/* scores from nine values, so most of a row ties; −∞, NaN, −0 and +∞ sprinkled in; row 3 has only a few
 * legal entries (one in 97), row 4 none */
static float *tied_scores(size_t S, size_t N, uint64_t seed)
{
    float *I = test_floats(S * N);
    test_rng r = {seed};
    for (size_t i = 0; i < S * N; i++) {
        const uint64_t u = test_next(&r) % 16;
        I[i] = u < 9 ? 0.5f * (float)((int)u - 4) : u == 9 ? -INFINITY : u == 10 ? NAN : u == 11 ? -0.0f
               : u == 12 ? INFINITY : test_uniform(&r);
        if (i / N == 3 && i % 97 != 0) I[i] = -INFINITY;
        if (i / N == 4) I[i] = NAN;
    }
    return I;
}

START_TEST(test_topk_cuda_matches_kvl_topk_when_ties_and_illegal_scores_abound)
{
    enum { S = 6, N = 1000, K = 37 };
    float *I = tied_scores(S, N, 91);
    check_topk(I, S, N, K, "ties");
    check_topk(I, S, 20, K, "K above N"); /* the first 20 columns of each row, read as rows of 20 */
    check_topk(I, S, N, 1, "K = 1");
    free(I);
}
END_TEST

START_TEST(test_topk_cuda_matches_kvl_topk_over_long_rows_of_distinct_scores)
{
    /* 5000 candidates (twenty tiles of 256, the last partial), K = 100 */
    enum { S = 2, N = 5000, K = 100 };
    float *I = test_floats(S * N);
    test_rng r = {92};
    for (size_t i = 0; i < (size_t)S * N; i++) I[i] = test_uniform(&r) * 1e3f;
    check_topk(I, S, N, K, "distinct");
    free(I);
}
END_TEST

START_TEST(test_topk_rounds_over_slices_keep_the_ties_of_kvl_topk)
{
    /* 600 tied scores per row, K = 37: slices of 2K = 74 take five rounds (over 600, 333, 185, 111, 74
     * entries), of 100 four (600, 222, 111, 74), of 300 two (600, 74) */
    enum { S = 6, N = 600, K = 37 };
    float *I = tied_scores(S, N, 93);
    check_topk_slices(I, S, N, K, 2 * K, "ties, slices of 2K");
    check_topk_slices(I, S, N, K, 100, "ties, slices of 100");
    check_topk_slices(I, S, N, K, 300, "ties, slices of 300");
    free(I);
}
END_TEST

START_TEST(test_topk_rounds_over_slices_keep_the_ties_of_kvl_topk_at_k_1)
{
    /* K = 1 over 200 tied scores per row in slices of 16: two rounds (200, 13) */
    enum { S = 6, N = 200 };
    float *I = tied_scores(S, N, 95);
    check_topk_slices(I, S, N, 1, 16, "ties, K = 1, slices of 16");
    check_topk_slices(I, S, 20, 37, 74, "K above N, slices of 2K");
    free(I);
}
END_TEST

START_TEST(test_topk_cuda_rounds_over_long_rows_match_the_one_block_twin)
{
    /* 40,000 distinct scores per row: kvl_topk_cuda's slices of 8192 take two rounds (five slices, then 500
     * candidates); K = 2048 (slices of 4K) three, over 40,000, 10,240 and 4,096 */
    enum { S = 2, N = 40000 };
    float *I = test_floats(S * N);
    test_rng r = {94};
    for (size_t i = 0; i < (size_t)S * N; i++) I[i] = test_uniform(&r) * 1e3f;
    check_topk_slices(I, S, N, 100, kvl_topk_slice_keys(100), "distinct, K = 100");
    check_topk_slices(I, S, N, 2048, kvl_topk_slice_keys(2048), "distinct, K = 2048");
    free(I);
}
END_TEST

START_TEST(test_topk_cuda_rejects_what_kvl_topk_rejects)
{
    float *dI = dev_upload(NULL, 16 * sizeof(float));
    int32_t *dsel = dev_upload(NULL, 16 * sizeof(int32_t));
    ck_assert_int_eq(kvl_topk_cuda(dsel, dI, 1, 16, 0), KVL_EINVAL);
    ck_assert_int_eq(kvl_topk_cuda(dsel, dI, 1, (size_t)INT32_MAX + 1, 4), KVL_EINVAL);
    ck_assert_int_eq(kvl_topk_cuda(NULL, dI, 1, 16, 4), KVL_EINVAL);
    ck_assert_int_eq(kvl_topk_slices_cuda(dsel, dI, 1, 16, 4, 7), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "slices of 7 keys") != NULL, "%s", kvl_error());
    ck_assert_int_eq(kvl_topk_simple_cuda(dsel, dI, 1, 16, 0), KVL_EINVAL);
    kvl_cuda_free(dI);
    kvl_cuda_free(dsel);
}
END_TEST

/* ---- the indexer's scores --------------------------------------------------------------------------------- */

START_TEST(test_index_scores_cuda_equal_dsa_index_scores_and_select_the_same_keys)
{
    /* B 2 sequences, S 3 queries at the last three of N 300 positions (two key splits, the second partial),
     * HI 5 heads (not a multiple of the four threads per key), DI 32, K 20; keys 2s + 1 copy keys 2s so
     * that scores tie and the smaller position must win */
    enum { B = 2, S = 3, N = 300, HI = 5, DI = 32, K = 20 };
    const size_t start = N - S;
    const dsa_config c = config_make(2, 32, 8, HI, DI, K);
    float *q = test_floats(B * S * HI * DI), *w = test_floats(B * S * HI), *k = test_floats(B * N * DI);
    float *want = test_floats(B * S * N), *got = test_floats(B * S * N);
    int32_t *want_sel = test_ints(B * S * K), *got_sel = test_ints(B * S * K);
    test_rng r = {93};
    for (size_t i = 0; i < (size_t)B * S * HI * DI; i++) q[i] = test_grid_uniform(&r, GRID);
    for (size_t i = 0; i < (size_t)B * S * HI; i++) w[i] = test_grid_uniform(&r, GRID);
    for (size_t i = 0; i < (size_t)B * N * DI; i++) k[i] = test_grid_uniform(&r, GRID);
    for (size_t s = 1; s < (size_t)B * N; s += 2) memcpy(k + s * DI, k + (s - 1) * DI, DI * sizeof *k);
    for (size_t b = 0; b < B; b++)
        CUDA_OK(dsa_index_scores(want + b * S * N, &c, q + b * S * HI * DI, w + b * S * HI, k + b * N * DI, S, N,
                                 start));
    CUDA_OK(kvl_topk(want_sel, want, B * S, N, K));
    float *dq = dev_upload(q, B * S * HI * DI * sizeof *q), *dw = dev_upload(w, B * S * HI * sizeof *w);
    float *dk = dev_upload(k, B * N * DI * sizeof *k), *dI = dev_filled(0x7F, B * S * N * sizeof *dI);
    int32_t *dsel = dev_upload(NULL, B * S * K * sizeof *dsel);
    FOR_EACH_ORDER(order) {
        CUDA_OK(dsa_index_scores_cuda(dI, &c, dq, dw, dk, B, S, N, start));
        CUDA_OK(kvl_topk_cuda(dsel, dI, B * S, N, K));
        dev_download(got, dI, B * S * N * sizeof *got);
        dev_download(got_sel, dsel, B * S * K * sizeof *got_sel);
        for (size_t i = 0; i < (size_t)B * S * N; i++)
            ck_assert_msg(got[i] == want[i], "score of query %zu at key %zu is %.9g, the ref's %.9g (%s)", i / N,
                          i % N, got[i], want[i], order);
        ck_assert_msg(memcmp(got_sel, want_sel, B * S * K * sizeof *got_sel) == 0, "selections differ (%s)", order);
    }
    kvl_cuda_free(dq), kvl_cuda_free(dw), kvl_cuda_free(dk), kvl_cuda_free(dI), kvl_cuda_free(dsel);
    free(q), free(w), free(k), free(want), free(got), free(want_sel), free(got_sel);
}
END_TEST

START_TEST(test_fp8_index_scores_cuda_match_the_ref_over_132_byte_keys)
{
    /* every position of T 24 queries its prefix (as dsa_indexer_fp8), B 2 sequences, HI 5, DI 128, K 8:
     * the keys rotated and packed into 132-byte rows, the queries in the fp8 indexer's view; the ref
     * scores the decoded rows */
    enum { B = 2, T = 24, HI = 5, DI = KVF_INDEX_DIM, K = 8 };
    const dsa_config c = config_make(2, 32, 8, HI, DI, K);
    const size_t row_bytes = kvf_row_bytes(KVF_ROW_V32_INDEX);
    float *q = test_floats(B * T * HI * DI), *w = test_floats(B * T * HI), *k = test_floats(B * T * DI);
    float *want = test_floats(B * T * T), *got = test_floats(B * T * T);
    int32_t *want_sel = test_ints(B * T * K), *got_sel = test_ints(B * T * K);
    uint8_t *rows = malloc(B * T * row_bytes);
    double *qd = malloc(T * HI * DI * sizeof *qd), *wd = malloc(T * HI * sizeof *wd), *kd = malloc(T * DI * sizeof *kd);
    double *bound = malloc(T * T * sizeof *bound);
    ck_assert(rows && qd && wd && kd && bound);
    test_rng r = {94};
    for (size_t i = 0; i < (size_t)B * T * HI * DI; i++) q[i] = test_uniform(&r);
    for (size_t i = 0; i < (size_t)B * T * HI; i++) w[i] = test_uniform(&r) / (float)sqrt(HI * DI);
    for (size_t i = 0; i < (size_t)B * T * DI; i++) k[i] = test_uniform(&r);
    CUDA_OK(dsa_index_quantise(q, &c, B * T * HI));
    CUDA_OK(kvl_hadamard_rotate_rows_f32(k, B * T, DI));
    for (size_t s = 0; s < (size_t)B * T; s++) {
        CUDA_OK(kvf_row_pack(KVF_ROW_V32_INDEX, rows + s * row_bytes, k + s * DI));
        CUDA_OK(kvf_row_unpack(KVF_ROW_V32_INDEX, k + s * DI, rows + s * row_bytes));
    }
    for (size_t b = 0; b < B; b++)
        CUDA_OK(dsa_index_scores(want + b * T * T, &c, q + b * T * HI * DI, w + b * T * HI, k + b * T * DI, T, T, 0));
    CUDA_OK(kvl_topk(want_sel, want, B * T, T, K));
    float *dq = dev_upload(q, B * T * HI * DI * sizeof *q), *dw = dev_upload(w, B * T * HI * sizeof *w);
    uint8_t *dk = dev_upload(rows, B * T * row_bytes);
    float *dI = dev_upload(NULL, B * T * T * sizeof *dI);
    int32_t *dsel = dev_upload(NULL, B * T * K * sizeof *dsel);
    char what[96];
    FOR_EACH_ORDER(order) {
        CUDA_OK(dsa_index_scores_fp8_cuda(dI, &c, dq, dw, dk, B, T, T, 0));
        CUDA_OK(kvl_topk_cuda(dsel, dI, B * T, T, K));
        dev_download(got, dI, B * T * T * sizeof *got);
        dev_download(got_sel, dsel, B * T * K * sizeof *got_sel);
        for (size_t b = 0; b < B; b++) {
            for (size_t i = 0; i < (size_t)T * HI * DI; i++) qd[i] = q[b * T * HI * DI + i];
            for (size_t i = 0; i < (size_t)T * HI; i++) wd[i] = w[b * T * HI + i];
            for (size_t i = 0; i < (size_t)T * DI; i++) kd[i] = k[b * T * DI + i];
            /* two float32 paths (ref and twin), each DI products and HI heads from the definition */
            oracle_dsa_index_bound(bound, qd, wd, kd, HI, DI, T, 2 * (DI + HI));
            for (size_t t = 0; t < T; t++) {
                double want_row[T];
                for (size_t s = 0; s < T; s++) want_row[s] = want[(b * T + t) * T + s];
                snprintf(what, sizeof what, "fp8 scores, sequence %zu query %zu (%s)", b, t, order);
                for (size_t s = 0; s < T; s++)
                    if (s <= t)
                        ck_assert_msg(fabs(got[(b * T + t) * T + s] - want_row[s]) <= bound[t * T + s],
                                      "%s: key %zu is %.9g, the ref's %.9g, beyond %.3g", what, s,
                                      got[(b * T + t) * T + s], want_row[s], bound[t * T + s]);
                kvl_expect_close(what, got + (b * T + t) * T, want_row, T, INFINITY, 0, 0); /* −∞ where the ref's */
                expect_same_picks_up_to_near_ties(got_sel + (b * T + t) * K, want_sel + (b * T + t) * K,
                                                  want + (b * T + t) * T, bound + t * T, K, what);
            }
        }
    }
    kvl_cuda_free(dq), kvl_cuda_free(dw), kvl_cuda_free(dk), kvl_cuda_free(dI), kvl_cuda_free(dsel);
    free(q), free(w), free(k), free(want), free(got), free(want_sel), free(got_sel), free(rows);
    free(qd), free(wd), free(kd), free(bound);
}
END_TEST

START_TEST(test_tensor_core_index_scores_match_the_float_twin_and_the_ref_at_64_heads)
{
    /* V3.2's 64 index heads, B 2, the last S 3 of T 280 positions querying their prefixes: keys in blocks of
     * 256 (the second one of 21 to 24 visible keys: a warp's 16 and a partial 5 to 8), K 32; the fp8
     * indexer's inputs as in the test above. Both kernels within the float32 bound of the ref, so within
     * twice it of each other (the float twin is run once: its sums do not depend on the thread order). */
    enum { B = 2, T = 280, S = 3, HI = 64, DI = KVF_INDEX_DIM, K = 32 };
    const size_t start = T - S, row_bytes = kvf_row_bytes(KVF_ROW_V32_INDEX), n_path = 2 * (DI + HI);
    const dsa_config c = config_make(2, 32, 8, HI, DI, K);
    float *q = test_floats(B * T * HI * DI), *w = test_floats(B * T * HI), *k = test_floats(B * T * DI);
    float *want = test_floats(B * S * T), *got = test_floats(B * S * T), *twin = test_floats(B * S * T);
    int32_t *want_sel = test_ints(B * S * K), *got_sel = test_ints(B * S * K);
    uint8_t *rows = malloc(B * T * row_bytes);
    double *qd = malloc(T * HI * DI * sizeof *qd), *wd = malloc(T * HI * sizeof *wd), *kd = malloc(T * DI * sizeof *kd);
    double *bound = malloc((size_t)B * T * T * sizeof *bound);
    ck_assert(rows && qd && wd && kd && bound);
    test_rng r = {95};
    for (size_t i = 0; i < (size_t)B * T * HI * DI; i++) q[i] = test_uniform(&r);
    for (size_t i = 0; i < (size_t)B * T * HI; i++) w[i] = test_uniform(&r) / (float)sqrt(HI * DI);
    for (size_t i = 0; i < (size_t)B * T * DI; i++) k[i] = test_uniform(&r);
    test_vary_blocks(k, 1, B * T * DI, B * T * DI, DI); /* key s times 2^(s mod 3 − 1): neighbours differ in scale */
    CUDA_OK(dsa_index_quantise(q, &c, B * T * HI));
    CUDA_OK(kvl_hadamard_rotate_rows_f32(k, B * T, DI));
    for (size_t s = 0; s < (size_t)B * T; s++) {
        CUDA_OK(kvf_row_pack(KVF_ROW_V32_INDEX, rows + s * row_bytes, k + s * DI));
        CUDA_OK(kvf_row_unpack(KVF_ROW_V32_INDEX, k + s * DI, rows + s * row_bytes));
    }
    for (size_t b = 0; b < B; b++) {
        const float *qb = q + (b * T + start) * HI * DI, *wb = w + (b * T + start) * HI;
        CUDA_OK(dsa_index_scores(want + b * S * T, &c, qb, wb, k + b * T * DI, S, T, start));
        for (size_t i = 0; i < (size_t)T * HI * DI; i++) qd[i] = q[b * T * HI * DI + i];
        for (size_t i = 0; i < (size_t)T * HI; i++) wd[i] = w[b * T * HI + i];
        for (size_t i = 0; i < (size_t)T * DI; i++) kd[i] = k[b * T * DI + i];
        oracle_dsa_index_bound(bound + b * T * T, qd, wd, kd, HI, DI, T, n_path);
    }
    CUDA_OK(kvl_topk(want_sel, want, B * S, T, K));
    float *dq = dev_upload(q, B * T * HI * DI * sizeof *q), *dw = dev_upload(w, B * T * HI * sizeof *w);
    uint8_t *dk = dev_upload(rows, B * T * row_bytes);
    float *dI = dev_filled(0x7F, B * S * T * sizeof *dI), *dtwin = dev_filled(0x7F, B * S * T * sizeof *dtwin);
    int32_t *dsel = dev_upload(NULL, B * S * K * sizeof *dsel);
    /* q and w hold every position's query ([B][T]): each sequence runs alone over its last S */
    char what[112];
    for (size_t b = 0; b < B; b++)
        CUDA_OK(dsa_index_scores_fp8_float_cuda(dtwin + b * S * T, &c, dq + (b * T + start) * HI * DI,
                                                dw + (b * T + start) * HI, dk + b * T * row_bytes, 1, S, T, start));
    dev_download(twin, dtwin, B * S * T * sizeof *twin);
    FOR_EACH_ORDER(order) {
        for (size_t b = 0; b < B; b++)
            CUDA_OK(dsa_index_scores_fp8_cuda(dI + b * S * T, &c, dq + (b * T + start) * HI * DI,
                                              dw + (b * T + start) * HI, dk + b * T * row_bytes, 1, S, T, start));
        CUDA_OK(kvl_topk_cuda(dsel, dI, B * S, T, K));
        dev_download(got, dI, B * S * T * sizeof *got);
        dev_download(got_sel, dsel, B * S * K * sizeof *got_sel);
        for (size_t row = 0; row < (size_t)B * S; row++) {
            const size_t b = row / S, t = start + row % S;
            const double *bd = bound + (b * T + t) * T;
            double want_row[T];
            for (size_t s = 0; s < T; s++) want_row[s] = want[row * T + s];
            snprintf(what, sizeof what, "tensor-core fp8 scores, sequence %zu query %zu (%s)", b, t, order);
            for (size_t s = 0; s <= t; s++) {
                const double g = got[row * T + s], tw = twin[row * T + s];
                ck_assert_msg(fabs(g - want_row[s]) <= bd[s], "%s: key %zu is %.9g, the ref's %.9g, beyond %.3g", what,
                              s, g, want_row[s], bd[s]);
                ck_assert_msg(fabs(tw - want_row[s]) <= bd[s], "%s: the float twin's key %zu is %.9g, the ref's %.9g",
                              what, s, tw, want_row[s]);
                ck_assert_msg(fabs(g - tw) <= 2 * bd[s], "%s: key %zu is %.9g, the float twin's %.9g", what, s, g, tw);
            }
            kvl_expect_close(what, got + row * T, want_row, T, INFINITY, 0, 0); /* −∞ where the ref's */
            expect_same_picks_up_to_near_ties(got_sel + row * K, want_sel + row * K, want + row * T, bd, K, what);
        }
    }
    kvl_cuda_free(dq), kvl_cuda_free(dw), kvl_cuda_free(dk), kvl_cuda_free(dI), kvl_cuda_free(dtwin);
    kvl_cuda_free(dsel);
    free(q), free(w), free(k), free(want), free(got), free(twin), free(want_sel), free(got_sel), free(rows);
    free(qd), free(wd), free(kd), free(bound);
}
END_TEST

/* ---- sparse MLA decode: the gather formulation -------------------------------------------------------- */

typedef struct {
    dsa_config c;
    dsa_weights w;
    mla_weights dw; /* the MLA part on the device */
} layer;

static void layer_make(layer *L, size_t H, size_t Dc, size_t Dr, size_t K, uint64_t seed)
{
    L->c = config_make(H, Dc, Dr, 2, Dr < 16 ? 16 : Dr, K);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    CUDA_OK(dsa_weights_init_random(&L->w, &L->c, &rng));
    CUDA_OK(mla_weights_to_cuda(&L->dw, &L->w.mla, &L->c.mla));
}

static void layer_free(layer *L)
{
    dsa_weights_free(&L->w);
    mla_weights_free_cuda(&L->dw);
}

/* Two float32 paths within oracle_f32_tol of the definition each: Dnope (absorption), Dc + Dr (score), K
 * rows, Dc (W_UV). */
static double twin_tol(const dsa_config *c)
{
    return 2 * oracle_f32_tol(c->mla.qk_nope + 2 * c->mla.kv_lora_rank + c->mla.qk_rope + c->index_topk);
}

/* sel[B][K]: top-K of random scores over N positions per sequence; sequence 1 has only K/2 legal
 * positions (−1 padding) and sequence 2, when B > 2, none (its output is 0) */
static void selections(int32_t *sel, size_t B, size_t N, size_t K, uint64_t seed)
{
    float *I = test_floats(B * N);
    test_rng r = {seed};
    for (size_t b = 0; b < B; b++)
        for (size_t s = 0; s < N; s++) {
            const float v = test_uniform(&r);
            I[b * N + s] = (b == 1 && s % (2 * N / K) != 0) || b == 2 ? -INFINITY : v;
        }
    CUDA_OK(kvl_topk(sel, I, B, N, K));
    free(I);
}

/* The attention over a selection checked once (dsa_attend_gather_absorbed_checked_cuda) is the checked
 * call's, bit for bit. */
static void expect_checked_gather_equal(const dsa_config *c, const mla_weights *dw, const float *dq, const int32_t *dsel,
                                        mla_cache_cuda *dev)
{
    const size_t B = dev->ring.batch, H = c->mla.n_heads, Dc = c->mla.kv_lora_rank;
    const size_t Dw = Dc + c->mla.qk_rope, n = B * H * Dc;
    float *q_hat = dev_filled(0, B * H * Dw * sizeof(float)), *o1 = dev_filled(0x7F, n * sizeof(float));
    float *o2 = dev_filled(0x7F, n * sizeof(float)), *h1 = test_floats(n), *h2 = test_floats(n);
    CUDA_OK(mla_absorb_query_cuda(q_hat, dq, &c->mla, dw, B));
    CUDA_OK(dsa_attend_gather_absorbed_cuda(o1, c, q_hat, dsel, dev));
    CUDA_OK(dsa_attend_gather_absorbed_checked_cuda(o2, c, q_hat, dsel, dev));
    dev_download(h1, o1, n * sizeof *h1);
    dev_download(h2, o2, n * sizeof *h2);
    ck_assert_msg(memcmp(h1, h2, n * sizeof *h1) == 0, "the checked selection's attention differs");
    kvl_cuda_free(q_hat), kvl_cuda_free(o1), kvl_cuda_free(o2);
    free(h1), free(h2);
}

/* ---- the sparse attention's error bounds, from the data (γ_n = n·u, u = 2^-24, Higham) -------------------
 * A score sums Dc + Dr products in float: it errs by at most γ_(Dc+Dr)·A·scale, A = max_j Σ_c |q̂_c r_jc| over
 * the picks j; a softmax whose scores move by at most δ moves a weighted average by at most 2δ·max|v|; the
 * value sums add γ_K·max|v|. On tensor cores q̂ is rounded to bf16 (bf16_q, unless it is bf16-exact: each
 * score moves by at most 2^-9·A·scale more) and so are the weights (bf16_w, relative 2^-9: the average moves by
 * at most 2^-8·max|v|). */
static double sparse_bound(const double *q_hat, const float *rows, const int32_t *sel, size_t K, size_t Dc,
                           size_t Dw, double scale, int bf16_q, int bf16_w)
{
    const double u = 0x1p-24;
    double A = 0, vmax = 0;
    for (size_t k = 0; k < K; k++) {
        if (sel[k] < 0) continue;
        const float *r = rows + (size_t)sel[k] * Dw;
        double a = 0;
        for (size_t c = 0; c < Dw; c++) a += fabs(q_hat[c] * r[c]);
        A = fmax(A, a);
        for (size_t c = 0; c < Dc; c++) vmax = fmax(vmax, fabs(r[c]));
    }
    const double score = (2 * (double)Dw * u + (bf16_q ? 0x1p-9 : 0)) * A * scale;
    return (2 * score + (double)K * u + (bf16_w ? 0x1p-8 : 0)) * vmax;
}

/* tol[H][Dv]: how far the attention's own errors (sparse_bound, on q̂ = [W_UK^hᵀ q^C | q^R] in double) may move
 * the o of one query q[H][Dnope + Dr] over rows[N][Dc + Dr], through W_UV^h: its row i moves o_i by at most
 * Σ_c |W_UV^h(i, c)| times the bound */
static void gather_tol(double *tol, const dsa_config *c, const dsa_weights *w, const float *q, const float *rows,
                       const int32_t *sel, int mma)
{
    const size_t H = c->mla.n_heads, Dc = c->mla.kv_lora_rank, Dr = c->mla.qk_rope, Dn = c->mla.qk_nope;
    const size_t Dv = c->mla.v_head, Dw = Dc + Dr, Dqk = Dn + Dr, K = c->index_topk;
    double *q_hat = malloc(Dw * sizeof *q_hat);
    ck_assert(q_hat != NULL);
    for (size_t h = 0; h < H; h++) {
        const float *W = w->mla.w_ukv + h * (Dn + Dv) * Dc; /* W_UK^h [Dn][Dc], then W_UV^h [Dv][Dc] */
        for (size_t j = 0; j < Dc; j++) {
            q_hat[j] = 0;
            for (size_t k = 0; k < Dn; k++) q_hat[j] += (double)W[k * Dc + j] * q[h * Dqk + k];
        }
        for (size_t j = 0; j < Dr; j++) q_hat[Dc + j] = q[h * Dqk + Dn + j];
        const double e = sparse_bound(q_hat, rows, sel, K, Dc, Dw, c->mla.softmax_scale, mma, mma);
        for (size_t i = 0; i < Dv; i++) {
            double norm = 0;
            for (size_t j = 0; j < Dc; j++) norm += fabs(W[(Dn + i) * Dc + j]);
            tol[h * Dv + i] = norm * e;
        }
    }
    free(q_hat);
}

/* B sequences of N rows in a cache of `store`, one query each selecting K of them: the twin against
 * dsa_attend_gather over the rows as the cache holds them. */
static void check_gather(kv_cuda_store store, size_t H, size_t Dc, size_t Dr, size_t B, size_t N, size_t K,
                         size_t split, uint64_t seed)
{
    layer L;
    layer_make(&L, H, Dc, Dr, K, seed);
    const dsa_config *c = &L.c;
    const size_t Dw = Dc + Dr, Dqk = c->mla.qk_nope + Dr, Dv = c->mla.v_head;
    float *rows = test_floats(B * N * Dw), *held = test_floats(N * Dw), *q = test_floats(B * H * Dqk);
    float *held_all = test_floats(B * N * Dw);
    float *want = test_floats(B * H * Dv), *got = test_floats(B * H * Dv);
    int32_t *sel = test_ints(B * K);
    test_rng r = {seed + 1};
    for (size_t i = 0; i < B * N * Dw; i++) rows[i] = test_grid_uniform(&r, GRID);
    if (store == KV_CUDA_V32_MAIN) test_vary_blocks(rows, B * N, Dw, KVF_V32_NOPE, KVF_V32_BLOCK);
    for (size_t i = 0; i < B * H * Dqk; i++) q[i] = test_grid_uniform(&r, GRID);
    selections(sel, B, N, K, seed + 2);
    for (size_t b = 0; b < B; b++) { /* the ref over the values the cache holds */
        for (size_t s = 0; s < N; s++) {
            float *v = held + s * Dw;
            memcpy(v, rows + (b * N + s) * Dw, Dw * sizeof *v);
            if (store == KV_CUDA_BF16)
                for (size_t j = 0; j < Dw; j++) v[j] = kvf_bf16_decode(kvf_bf16_encode(v[j]));
            if (store == KV_CUDA_V32_MAIN) {
                uint8_t packed[sizeof(kvf_row_v32_main)];
                CUDA_OK(kvf_row_pack(KVF_ROW_V32_MAIN, packed, v));
                CUDA_OK(kvf_row_unpack(KVF_ROW_V32_MAIN, v, packed));
            }
        }
        CUDA_OK(dsa_attend_gather(want + b * H * Dv, c, &L.w, q + b * H * Dqk, held, sel + b * K, 1, N));
        memcpy(held_all + b * N * Dw, held, N * Dw * sizeof *held);
    }
    double *wd = malloc(B * H * Dv * sizeof *wd), *tol = malloc(B * H * Dv * sizeof *tol);
    ck_assert(wd && tol);
    for (size_t i = 0; i < B * H * Dv; i++) wd[i] = want[i];
    const int mma = store != KV_CUDA_F32 && Dc == KVF_V32_NOPE && Dr == KVF_V32_ROPE;
    for (size_t b = 0; b < B; b++)
        gather_tol(tol + b * H * Dv, c, &L.w, q + b * H * Dqk, held_all + b * N * Dw, sel + b * K, mma);
    float *drows = dev_upload(rows, B * N * Dw * sizeof *rows), *dq = dev_upload(q, B * H * Dqk * sizeof *q);
    float *dout = dev_filled(0x7F, B * H * Dv * sizeof *dout);
    int32_t *dsel = dev_upload(sel, B * K * sizeof *sel);
    char what[128];
    FOR_EACH_ORDER(order) {
        mla_cache_cuda dev;
        CUDA_OK(mla_cache_init_cuda(&dev, &c->mla, N, store, B));
        dev.split = split;
        CUDA_OK(mla_cache_append_cuda(&dev, &c->mla, drows, N));
        CUDA_OK(dsa_attend_gather_cuda(dout, c, &L.dw, dq, dsel, &dev));
        dev_download(got, dout, B * H * Dv * sizeof *got);
        snprintf(what, sizeof what, "gather over %s rows, H %zu B %zu N %zu K %zu split %zu (%s)",
                 store == KV_CUDA_F32 ? "float32" : store == KV_CUDA_BF16 ? "bf16" : "fp8", H, B, N, K, split, order);
        for (size_t i = 0; i < B * H * Dv; i++) { /* and the two float paths' own rounding (twin_tol) */
            const double bound = tol[i] + twin_tol(c) * (1 + fabs(wd[i]));
            ck_assert_msg(fabs(got[i] - wd[i]) <= bound, "%s: output %zu is %.9g, the ref's %.9g, beyond %.3g", what,
                          i, got[i], wd[i], bound);
        }
        expect_checked_gather_equal(c, &L.dw, dq, dsel, &dev);
        mla_cache_free_cuda(&dev);
    }
    if (B > 2)
        for (size_t i = 2 * H * Dv; i < 3 * H * Dv; i++) ck_assert_msg(got[i] == 0.0f, "a query with no pick gets 0");
    kvl_cuda_free(drows), kvl_cuda_free(dq), kvl_cuda_free(dout), kvl_cuda_free(dsel);
    free(rows), free(held), free(held_all), free(q), free(want), free(got), free(sel), free(wd), free(tol);
    layer_free(&L);
}

START_TEST(test_gather_cuda_matches_dsa_attend_gather_over_float_rows)
{
    /* K 13 of N 40 in splits of 5 (the last holds 3); sequence 1 pads with −1, sequence 2 picks nothing */
    check_gather(KV_CUDA_F32, 3, 32, 8, 3, 40, 13, 5, 101);
}
END_TEST

START_TEST(test_gather_cuda_matches_dsa_attend_gather_over_bf16_rows)
{
    check_gather(KV_CUDA_BF16, 2, 32, 8, 3, 40, 13, 4, 102);
}
END_TEST

START_TEST(test_gather_cuda_reads_fp8_rows_as_formats_unpacks_them)
{
    /* DeepSeek's row widths, Dc 512 and Dr 64; K 20 of N 50 in splits of 8 */
    check_gather(KV_CUDA_V32_MAIN, 2, KVF_V32_NOPE, KVF_V32_ROPE, 2, 50, 20, 8, 103);
}
END_TEST

/* o[Dc] = softmax over the picks sel[K] (−1 skipped) of q̂·r·scale, times r[:Dc], in double; 0 for no pick */
static void sparse_definition(double *o, const double *q_hat, const float *rows, const int32_t *sel, size_t K,
                              size_t Dc, size_t Dw, double scale)
{
    double m = -INFINITY, sum = 0, *s = malloc(K * sizeof *s);
    ck_assert(s != NULL);
    for (size_t k = 0; k < K; k++) {
        s[k] = -INFINITY;
        if (sel[k] < 0) continue;
        double dot = 0;
        for (size_t c = 0; c < Dw; c++) dot += q_hat[c] * rows[(size_t)sel[k] * Dw + c];
        m = fmax(m, s[k] = dot * scale);
    }
    for (size_t k = 0; k < K; k++) sum += s[k] = sel[k] < 0 ? 0 : exp(s[k] - m);
    for (size_t c = 0; c < Dc; c++) {
        o[c] = 0;
        for (size_t k = 0; k < K; k++)
            if (sel[k] >= 0) o[c] += s[k] / sum * rows[(size_t)sel[k] * Dw + c];
    }
    free(s);
}

/* B sequences of N rows (DeepSeek's widths) in a cache of `store`, H heads of bf16-exact absorbed queries each
 * picking K rows: the tensor-core attention (dsa_attend_gather_absorbed_cuda) and its float twin
 * (dsa_attend_gather_absorbed_float_cuda) each within its bound of the definition over the rows the cache
 * holds, and so within the sum of the two of each other, in every thread order. */
static void check_tensor_cores(kv_cuda_store store, size_t H, size_t B, size_t N, size_t K, size_t split,
                               uint64_t seed)
{
    enum { Dc = KVF_V32_NOPE, Dw = KVF_V32_NOPE + KVF_V32_ROPE };
    const dsa_config c = config_make(H, Dc, KVF_V32_ROPE, 2, 64, K);
    const size_t n_out = B * H * Dc;
    float *rows = test_floats(B * N * Dw), *held = test_floats(B * N * Dw), *q = test_floats(B * H * Dw);
    float *got = test_floats(n_out), *twin = test_floats(n_out);
    double *want = malloc(n_out * sizeof *want), *tol = malloc(B * H * 2 * sizeof *tol), *qd = malloc(Dw * sizeof *qd);
    int32_t *sel = test_ints(B * K);
    ck_assert(want && tol && qd);
    test_rng r = {seed};
    for (size_t i = 0; i < (size_t)B * N * Dw; i++) rows[i] = test_grid_uniform(&r, GRID);
    if (store == KV_CUDA_V32_MAIN) test_vary_blocks(rows, B * N, Dw, KVF_V32_NOPE, KVF_V32_BLOCK);
    for (size_t i = 0; i < (size_t)B * H * Dw; i++) q[i] = test_grid_uniform(&r, GRID); /* bf16-exact */
    selections(sel, B, N, K, seed + 1);
    memcpy(held, rows, B * N * Dw * sizeof *rows); /* bf16 holds the grid exactly */
    for (size_t s = 0; store == KV_CUDA_V32_MAIN && s < (size_t)B * N; s++) {
        uint8_t packed[sizeof(kvf_row_v32_main)];
        CUDA_OK(kvf_row_pack(KVF_ROW_V32_MAIN, packed, held + s * Dw));
        CUDA_OK(kvf_row_unpack(KVF_ROW_V32_MAIN, held + s * Dw, packed));
    }
    for (size_t b = 0; b < B; b++)
        for (size_t h = 0; h < H; h++) {
            for (size_t k = 0; k < Dw; k++) qd[k] = q[(b * H + h) * Dw + k];
            const float *seq = held + b * N * Dw;
            sparse_definition(want + (b * H + h) * Dc, qd, seq, sel + b * K, K, Dc, Dw, c.mla.softmax_scale);
            for (int mma = 0; mma < 2; mma++)
                tol[(b * H + h) * 2 + mma] = sparse_bound(qd, seq, sel + b * K, K, Dc, Dw, c.mla.softmax_scale, 0, mma);
        }
    float *drows = dev_upload(rows, B * N * Dw * sizeof *rows), *dq = dev_upload(q, B * H * Dw * sizeof *q);
    float *dout = dev_filled(0x7F, n_out * sizeof *dout), *dtwin = dev_filled(0x7F, n_out * sizeof *dtwin);
    int32_t *dsel = dev_upload(sel, B * K * sizeof *sel);
    char what[160];
    FOR_EACH_ORDER(order) {
        mla_cache_cuda dev;
        CUDA_OK(mla_cache_init_cuda(&dev, &c.mla, N, store, B));
        dev.split = split;
        CUDA_OK(mla_cache_append_cuda(&dev, &c.mla, drows, N));
        CUDA_OK(dsa_attend_gather_absorbed_cuda(dout, &c, dq, dsel, &dev));
        if (order_k == 0) /* each of its threads sums in one order, so one thread order gives its every answer */
            CUDA_OK(dsa_attend_gather_absorbed_float_cuda(dtwin, &c, dq, dsel, &dev));
        dev_download(got, dout, n_out * sizeof *got);
        dev_download(twin, dtwin, n_out * sizeof *twin);
        for (size_t bh = 0; bh < B * H; bh++) {
            snprintf(what, sizeof what, "tensor cores over %s rows, H %zu B %zu K %zu split %zu: sequence %zu "
                     "head %zu (%s)", store == KV_CUDA_BF16 ? "bf16" : "fp8", H, B, K, split, bh / H, bh % H, order);
            const double t_mma = tol[2 * bh + 1], t_float = tol[2 * bh];
            kvl_expect_close(what, got + bh * Dc, want + bh * Dc, Dc, t_mma, 0, 0);
            kvl_expect_close(what, twin + bh * Dc, want + bh * Dc, Dc, t_float, 0, 0);
            for (size_t i = 0; i < Dc; i++)
                ck_assert_msg(fabs(got[bh * Dc + i] - twin[bh * Dc + i]) <= t_mma + t_float,
                              "%s: channel %zu is %.9g, the float twin's %.9g", what, i, got[bh * Dc + i],
                              twin[bh * Dc + i]);
        }
        mla_cache_free_cuda(&dev);
    }
    if (B > 2)
        for (size_t i = 2 * H * Dc; i < 3 * H * Dc; i++) ck_assert_msg(got[i] == 0.0f, "a query with no pick gets 0");
    kvl_cuda_free(drows), kvl_cuda_free(dq), kvl_cuda_free(dout), kvl_cuda_free(dtwin), kvl_cuda_free(dsel);
    free(rows), free(held), free(q), free(got), free(twin), free(want), free(tol), free(qd), free(sel);
}

START_TEST(test_tensor_core_gather_matches_its_float_twin_and_the_definition_at_128_heads)
{
    /* 128 heads (two blocks of 64), K 72 of N 120 in splits of 40 (tiles of 32 and 8, then 32) or the automatic
     * ones (64 and 8); sequence 1 pads with −1, sequence 2 picks nothing */
    check_tensor_cores(KV_CUDA_V32_MAIN, 128, 3, 120, 72, 40, 105);
    check_tensor_cores(KV_CUDA_BF16, 128, 3, 120, 72, 0, 107);
}
END_TEST

START_TEST(test_tensor_core_gather_takes_a_head_count_that_is_not_a_multiple_of_64)
{
    check_tensor_cores(KV_CUDA_V32_MAIN, 70, 2, 90, 37, 0, 108); /* a block of 64 heads and one of 6 */
}
END_TEST

START_TEST(test_gather_cuda_rejects_a_selection_outside_the_cache)
{
    layer L;
    layer_make(&L, 2, 32, 8, 4, 104);
    const size_t Dw = 40, N = 6;
    float *drows = dev_upload(NULL, N * Dw * sizeof(float)), *dq = dev_upload(NULL, 2 * 16 * sizeof(float));
    float *dout = dev_upload(NULL, 2 * 8 * sizeof(float));
    const int32_t past[4] = {0, 1, 5, 6}, below[4] = {-2, -1, -1, -1}, fine[4] = {5, -1, 0, -1};
    int32_t *dsel = dev_upload(past, sizeof past);
    mla_cache_cuda dev;
    CUDA_OK(mla_cache_init_cuda(&dev, &L.c.mla, 8, KV_CUDA_F32, 1));
    CUDA_OK(mla_cache_append_cuda(&dev, &L.c.mla, drows, N));
    ck_assert_int_eq(dsa_attend_gather_cuda(dout, &L.c, &L.dw, dq, dsel, &dev), KVL_EINVAL); /* 6 not held */
    CUDA_OK(kvl_cuda_upload(dsel, below, sizeof below));
    ck_assert_int_eq(dsa_attend_gather_cuda(dout, &L.c, &L.dw, dq, dsel, &dev), KVL_EINVAL);
    CUDA_OK(kvl_cuda_upload(dsel, fine, sizeof fine));
    CUDA_OK(dsa_attend_gather_cuda(dout, &L.c, &L.dw, dq, dsel, &dev));
    mla_cache_free_cuda(&dev);
    kvl_cuda_free(drows), kvl_cuda_free(dq), kvl_cuda_free(dout), kvl_cuda_free(dsel);
    layer_free(&L);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = cuda_suite("cuda_dsa");
    if (!cuda_present()) return s;
    TCase *tk = tcase_create("topk");
    tcase_set_timeout(tk, KVL_TEST_TIMEOUT);
    tcase_add_test(tk, test_topk_cuda_matches_kvl_topk_when_ties_and_illegal_scores_abound);
    tcase_add_test(tk, test_topk_cuda_matches_kvl_topk_over_long_rows_of_distinct_scores);
    tcase_add_test(tk, test_topk_rounds_over_slices_keep_the_ties_of_kvl_topk);
    tcase_add_test(tk, test_topk_rounds_over_slices_keep_the_ties_of_kvl_topk_at_k_1);
    tcase_add_test(tk, test_topk_cuda_rounds_over_long_rows_match_the_one_block_twin);
    tcase_add_test(tk, test_topk_cuda_rejects_what_kvl_topk_rejects);
    suite_add_tcase(s, tk);
    TCase *ti = tcase_create("indexer");
    tcase_set_timeout(ti, KVL_TEST_TIMEOUT);
    tcase_add_test(ti, test_index_scores_cuda_equal_dsa_index_scores_and_select_the_same_keys);
    tcase_add_test(ti, test_fp8_index_scores_cuda_match_the_ref_over_132_byte_keys);
    tcase_add_test(ti, test_tensor_core_index_scores_match_the_float_twin_and_the_ref_at_64_heads);
    suite_add_tcase(s, ti);
    TCase *tg = tcase_create("gather");
    tcase_set_timeout(tg, KVL_TEST_TIMEOUT);
    tcase_add_test(tg, test_gather_cuda_matches_dsa_attend_gather_over_float_rows);
    tcase_add_test(tg, test_gather_cuda_matches_dsa_attend_gather_over_bf16_rows);
    tcase_add_test(tg, test_gather_cuda_reads_fp8_rows_as_formats_unpacks_them);
    tcase_add_test(tg, test_gather_cuda_rejects_a_selection_outside_the_cache);
    tcase_add_test(tg, test_tensor_core_gather_matches_its_float_twin_and_the_definition_at_128_heads);
    tcase_add_test(tg, test_tensor_core_gather_takes_a_head_count_that_is_not_a_multiple_of_64);
    suite_add_tcase(s, tg);
    return s;
}
