/* The V4.1 twins (cuda/v41_compressor_cuda.h, v41_indexer_cuda.h, v41_cuda.h) against ref/v41*: the CSA2
 * compressor at M 2 and M 1, batched and pushed in ragged chunks; the index keys and main entries projected
 * from its latents, one call each and as a KV source publishes them chunk by chunk; the MXFP4 round trip of
 * the deployed indexer byte for byte; a Full layer's scores over every visible entry and its picks, the
 * hierarchical candidate pool (block maxima with the newest, partial block forced in, the top blocks, their
 * entries) byte for byte, and a Reindex layer's scores restricted to the pool, exactly on inputs whose sums
 * are exact; the attention core and the four layer modes (window, Full, Reindex over the pool and without,
 * Reuse) over float32 rows and over native 528-byte window rows and 288-byte entries decoded in the kernel,
 * with K below every query's candidates, blocks that straddle the window, a partial newest block and a
 * window truncated as a replay truncates it. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "ch07_toy.h"
#include "cuda_test.h"
#include "oracle_attention.h"

#include "v41.h"
#include "v41_compressor_cuda.h"
#include "v41_cuda.h"
#include "v41_indexer.h"
#include "v41_indexer_cuda.h"
#include "rng.h"
#include "rows.h"
#include "topk.h"
#include "topk_cuda.h"

/* Inputs on a grid of 2^-4 in [−1, 1]: every dot product and head sum below is exact in float32. */
#define GRID 16.0f
/* Elementwise errors of 1e-4 on O(1) values leave the cosine above 1 − 1e-7. */
#define MIN_COS (1 - 1e-7)

/* S 6 queries at 40 … 45 over N 24 entries of ratio M 2 (each sees 20 … 23), HI 5, DI 32, K 6 */
enum { S = 6, N = 24, START = 40, HI = 5, DI = 32, K = 6 };

static v41_indexer_config config(void)
{
    v41_indexer_config c = {.d = 32, .q_lora_rank = 16, .width = 64, .n_heads = HI, .head_dim = DI, .topk = K,
                             .ratio = 2, .norm_eps = 1e-6};
    CUDA_OK(kvl_rope_init(&c.rope, 8, 1e4));
    CUDA_OK(v41_indexer_config_check(&c));
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

START_TEST(test_full_scores_cuda_equal_v41_index_scores_all_and_pick_the_same_entries)
{
    const v41_indexer_config c = config();
    inputs in;
    inputs_make(&in, 201);
    float *want = test_floats(S * N), *got = test_floats(S * N);
    int32_t *want_sel = test_ints(S * K), *got_sel = test_ints(S * K);
    uint64_t scored = 0;
    const kvl_row_tiles keys = kvl_row_tiles_f32(in.k, N, c.head_dim);
    CUDA_OK(v41_index_scores_all(want, &scored, &c, in.q, in.w, &keys, S, START));
    CUDA_OK(v41_index_select(want_sel, &c, want, S, N));
    float *dI = dev_filled(0x7F, S * N * sizeof(float));
    int32_t *dsel = dev_upload(NULL, S * K * sizeof(int32_t));
    FOR_EACH_ORDER(order) {
        CUDA_OK(v41_index_scores_all_cuda(dI, &c, in.dq, in.dw, in.dk, S, N, START));
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
 * of B and P picks: the twin against v41_candidate_pool, byte for byte */
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
    CUDA_OK(v41_candidate_pool(want, I, S, N, START, 2, B, P));
    float *dI = dev_upload(I, S * N * sizeof *I);
    uint8_t *dpool = dev_filled(0x5A, S * N);
    kvl_workspace work = {0};
    FOR_EACH_ORDER(order) {
        CUDA_OK(v41_candidate_pool_cuda(dpool, dI, S, N, START, 2, B, P, &work));
        dev_download(got, dpool, S * N);
        for (size_t i = 0; i < S * N; i++)
            ck_assert_msg(got[i] == want[i], "B %zu P %zu (%s): query %zu entry %zu is %u in the pool, the ref says %u",
                          B, P, order, i / N, i % N, got[i], want[i]);
    }
    kvl_workspace_free(&work);
    kvl_cuda_free(dI), kvl_cuda_free(dpool);
    free(I), free(want), free(got);
}

START_TEST(test_candidate_pool_cuda_equals_v41_candidate_pool)
{
    check_pool(3, 2, 211); /* queries see 20 … 23 entries: the newest block of 3 is partial for most */
    check_pool(4, 3, 212);
    check_pool(5, 20, 213); /* more picks than blocks */
}
END_TEST

START_TEST(test_pool_scores_cuda_equal_v41_index_scores_pool)
{
    const v41_indexer_config c = config();
    inputs in;
    inputs_make(&in, 221);
    float *src = test_floats(S * N), *want = test_floats(S * N), *got = test_floats(S * N);
    uint8_t *pool = malloc(S * N);
    ck_assert(pool != NULL);
    uint64_t scored = 0;
    const kvl_row_tiles keys = kvl_row_tiles_f32(in.k, N, c.head_dim);
    CUDA_OK(v41_index_scores_all(src, &scored, &c, in.q, in.w, &keys, S, START));
    CUDA_OK(v41_candidate_pool(pool, src, S, N, START, 2, 3, 2));
    CUDA_OK(v41_index_scores_pool(want, &scored, &c, in.q, in.w, &keys, pool, S));
    uint8_t *dpool = dev_upload(pool, S * N);
    float *dI = dev_filled(0x7F, S * N * sizeof(float));
    kvl_workspace work = {0};
    FOR_EACH_ORDER(order) {
        CUDA_OK(v41_index_scores_pool_cuda(dI, &c, in.dq, in.dw, in.dk, dpool, S, N, &work));
        dev_download(got, dI, S * N * sizeof *got);
        expect_equal_scores(got, want, S * N, order);
    }
    kvl_workspace_free(&work);
    kvl_cuda_free(dpool), kvl_cuda_free(dI);
    free(src), free(want), free(got), free(pool);
    inputs_free(&in);
}
END_TEST

/* ---- the compressor, index keys and main entries ------------------------------------------------------ */

/* A rotary offset Δ other than 0, so that a position the twin forgets to shift shows. */
#define ROPE_OFFSET 3
/* Tokens through the compressor: odd, so that M 2 leaves a tail that produces nothing yet. */
enum { T_TOY = 45 };

/* Two float32 paths within oracle_f32_tol of the definition each: the projections (d), the pooling
 * (rounded once from double), RMSNorm (c) and the rotation (two products). */
static double compressor_tol(const v41_compressor_config *c) { return 2 * oracle_f32_tol(c->d + c->width + 4); }

/* Layer `layer` of the chapter 7 toy (a Full layer, a KV source) with random weights, Δ = ROPE_OFFSET. */
static void toy_layer(v41_config *c, v41_weights *w, size_t layer, uint64_t seed)
{
    kvl_model m;
    CUDA_OK(ch07_toy_model(&m));
    CUDA_OK(v41_config_from_model(c, &m, layer));
    kvl_model_free(&m);
    c->core.rope_offset = c->indexer.rope_offset = ROPE_OFFSET;
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    CUDA_OK(v41_weights_init_random(w, c, &rng));
}

static float *toy_inputs(size_t T, size_t d, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    float *x = test_floats(T * d);
    kvl_rng_normal_f32(&rng, x, T * d, 1.0);
    return x;
}

static void expect_close_f32(const char *what, const float *got, const float *want, size_t n, double tol)
{
    double *wd = malloc((n ? n : 1) * sizeof *wd);
    ck_assert(wd != NULL);
    for (size_t i = 0; i < n; i++) wd[i] = want[i];
    kvl_expect_close(what, got, wd, n, tol, tol, n ? MIN_COS : 0);
    free(wd);
}

/* T_TOY tokens through both forms of the compressor of toy layer `layer`: the batched twin against
 * v41_compressor_forward, then the incremental twin in ragged chunks against v41_compressor_push. */
static void check_compressor(size_t layer, uint64_t seed)
{
    static const size_t chunks[] = {1, 3, 2, 7, 1, 11, 4, 16}; /* 45 tokens */
    v41_config c;
    v41_weights w;
    toy_layer(&c, &w, layer, seed);
    const v41_compressor_config *cc = &c.compressor;
    const size_t cw = cc->width, n_ent = T_TOY / cc->ratio;
    float *x = toy_inputs(T_TOY, cc->d, seed + 1), *want = test_floats(n_ent * cw), *got = test_floats(n_ent * cw);
    v41_weights dl;
    CUDA_OK(v41_weights_to_cuda(&dl, &w));
    const v41_compressor_weights dw = dl.compressor;
    float *dx = dev_upload(x, T_TOY * cc->d * sizeof *x), *dout = dev_filled(0x7F, n_ent * cw * sizeof(float));
    kvl_workspace work = {0};
    char name[128];
    CUDA_OK(v41_compressor_forward(want, cc, &w.compressor, x, T_TOY));
    FOR_EACH_ORDER(order) {
        CUDA_OK(v41_compressor_forward_cuda(dout, cc, &dw, dx, T_TOY, &work));
        dev_download(got, dout, n_ent * cw * sizeof *got);
        snprintf(name, sizeof name, "batched, M %zu (%s)", cc->ratio, order);
        expect_close_f32(name, got, want, n_ent * cw, compressor_tol(cc));
    }
    v41_compressor_state ref;
    v41_compressor_state_cuda dev;
    CUDA_OK(v41_compressor_state_init(&ref, cc));
    CUDA_OK(v41_compressor_state_init_cuda(&dev, cc));
    for (size_t k = 0, pos = 0; k < sizeof chunks / sizeof chunks[0]; pos += chunks[k++]) {
        size_t n_ref = 0, n_dev = 0;
        CUDA_OK(v41_compressor_push(want, &n_ref, cc, &w.compressor, &ref, x + pos * cc->d, chunks[k]));
        CUDA_OK(v41_compressor_push_cuda(dout, &n_dev, cc, &dw, &dev, dx + pos * cc->d, chunks[k]));
        ck_assert_uint_eq(n_dev, n_ref);
        dev_download(got, dout, n_ref * cw * sizeof *got);
        snprintf(name, sizeof name, "pushed, M %zu, chunk of %zu at %zu", cc->ratio, chunks[k], pos);
        expect_close_f32(name, got, want, n_ref * cw, compressor_tol(cc));
    }
    ck_assert_uint_eq(dev.pos, T_TOY);
    v41_compressor_state_free(&ref);
    v41_compressor_state_free_cuda(&dev);
    kvl_workspace_free(&work);
    v41_weights_free_cuda(&dl);
    kvl_cuda_free(dx), kvl_cuda_free(dout);
    free(x), free(want), free(got);
    v41_weights_free(&w);
}

START_TEST(test_compressor_cuda_matches_both_forms_of_v41_compressor_at_ratios_2_and_1)
{
    check_compressor(2, 301); /* the toy's first KV source: M 2 */
    check_compressor(5, 302); /* its second: M 1, no gate */
}
END_TEST

/* Index keys and main entries of n latents numbered from `first` (not 0: the rotation's position is the
 * entry's global index times M plus Δ), against v41_index_keys and v41_main_entry. */
static void check_keys_and_entries(size_t layer, size_t first, uint64_t seed)
{
    enum { n = 9 };
    v41_config c;
    v41_weights w;
    toy_layer(&c, &w, layer, seed);
    const v41_indexer_config *ix = &c.indexer;
    const size_t Dh = c.core.head_dim, Di = ix->head_dim;
    float *L = toy_inputs(n, Dh, seed + 1), *want = test_floats(n * Dh), *got = test_floats(n * Dh);
    float *dL = dev_upload(L, n * Dh * sizeof *L), *dout = dev_filled(0x7F, n * Dh * sizeof(float));
    float *dw_ik = dev_upload(w.w_ik, Di * Dh * sizeof(float)), *dik_norm = dev_upload(w.ik_norm, Di * sizeof(float));
    char name[128];
    CUDA_OK(v41_index_keys(want, ix, w.w_ik, w.ik_norm, L, n, first));
    FOR_EACH_ORDER(order) {
        CUDA_OK(v41_index_keys_cuda(dout, ix, dw_ik, dik_norm, dL, n, first));
        dev_download(got, dout, n * Di * sizeof *got);
        snprintf(name, sizeof name, "index keys, M %zu, from entry %zu (%s)", c.ratio, first, order);
        /* the product (Dh), RMSNorm (DI) and the rotation (two products) */
        expect_close_f32(name, got, want, n * Di, 2 * oracle_f32_tol(Dh + Di + 2));
    }
    v41_main_entry(want, &c, L, n, first);
    FOR_EACH_ORDER(order) {
        CUDA_OK(v41_main_entry_cuda(dout, &c, dL, n, first));
        dev_download(got, dout, n * Dh * sizeof *got);
        snprintf(name, sizeof name, "main entries, M %zu, from entry %zu (%s)", c.ratio, first, order);
        expect_close_f32(name, got, want, n * Dh, 2 * oracle_f32_tol(2));
    }
    kvl_cuda_free(dL), kvl_cuda_free(dout), kvl_cuda_free(dw_ik), kvl_cuda_free(dik_norm);
    free(L), free(want), free(got);
    v41_weights_free(&w);
}

START_TEST(test_index_keys_and_main_entries_cuda_match_the_ref_at_their_global_positions)
{
    check_keys_and_entries(2, 5, 311);
    check_keys_and_entries(5, 17, 312);
}
END_TEST

/* T_TOY tokens of toy layer `layer` through v41_source_push_cuda in ragged chunks, against the ref's
 * pieces a KV source runs (ref/v41_stack.c): v41_compressor_push, v41_index_keys, v41_main_entry. */
static void check_source_push(size_t layer, uint64_t seed)
{
    static const size_t chunks[] = {2, 1, 5, 3, 1, 13, 4, 16}; /* 45 tokens */
    v41_config c;
    v41_weights w;
    toy_layer(&c, &w, layer, seed);
    const size_t d = c.core.d, Dh = c.core.head_dim, Di = c.indexer.head_dim, n_max = T_TOY;
    float *x = toy_inputs(T_TOY, d, seed + 1), *L = test_floats(n_max * Dh);
    float *want_z = test_floats(n_max * Dh), *want_k = test_floats(n_max * Di);
    float *got_z = test_floats(n_max * Dh), *got_k = test_floats(n_max * Di);
    v41_weights dw;
    CUDA_OK(v41_weights_to_cuda(&dw, &w));
    float *dx = dev_upload(x, T_TOY * d * sizeof *x), *dz = dev_filled(0x7F, n_max * Dh * sizeof(float));
    float *dk = dev_filled(0x7F, n_max * Di * sizeof(float));
    v41_compressor_state ref;
    v41_compressor_state_cuda dev;
    kvl_workspace work = {0};
    CUDA_OK(v41_compressor_state_init(&ref, &c.compressor));
    CUDA_OK(v41_compressor_state_init_cuda(&dev, &c.compressor));
    char name[128];
    for (size_t k = 0, pos = 0, first = 0; k < sizeof chunks / sizeof chunks[0]; pos += chunks[k++]) {
        size_t n_ref = 0, n_dev = 0;
        CUDA_OK(v41_compressor_push(L, &n_ref, &c.compressor, &w.compressor, &ref, x + pos * d, chunks[k]));
        CUDA_OK(v41_index_keys(want_k, &c.indexer, w.w_ik, w.ik_norm, L, n_ref, first));
        v41_main_entry(want_z, &c, L, n_ref, first);
        CUDA_OK(v41_source_push_cuda(dz, dk, &n_dev, &c, &dw, &dev, dx + pos * d, chunks[k], &work));
        ck_assert_uint_eq(n_dev, n_ref);
        dev_download(got_z, dz, n_ref * Dh * sizeof *got_z);
        dev_download(got_k, dk, n_ref * Di * sizeof *got_k);
        snprintf(name, sizeof name, "M %zu, chunk of %zu at %zu: main entries", c.ratio, chunks[k], pos);
        /* the compressor's path, then the rotation (two products) */
        expect_close_f32(name, got_z, want_z, n_ref * Dh, 2 * oracle_f32_tol(d + Dh + 6));
        snprintf(name, sizeof name, "M %zu, chunk of %zu at %zu: index keys", c.ratio, chunks[k], pos);
        /* the compressor's path, then W_IK (Dh), RMSNorm (DI) and the rotation */
        expect_close_f32(name, got_k, want_k, n_ref * Di, 2 * oracle_f32_tol(d + 2 * Dh + Di + 6));
        first += n_ref;
    }
    v41_compressor_state_free(&ref);
    v41_compressor_state_free_cuda(&dev);
    kvl_workspace_free(&work);
    v41_weights_free_cuda(&dw);
    kvl_cuda_free(dx), kvl_cuda_free(dz), kvl_cuda_free(dk);
    free(x), free(L), free(want_z), free(want_k), free(got_z), free(got_k);
    v41_weights_free(&w);
}

START_TEST(test_source_push_cuda_publishes_the_refs_entries_and_keys_in_ragged_chunks)
{
    check_source_push(2, 331);
    check_source_push(5, 332);
}
END_TEST

START_TEST(test_index_round_mxfp4_cuda_equals_v41_index_round_mxfp4_and_rejects_nan)
{
    enum { n = 7, DX = 64 };
    float *v = toy_inputs(n, DX, 321), *want = test_floats(n * DX), *got = test_floats(n * DX);
    test_vary_blocks(v, n, DX, DX, 32);
    for (size_t i = 0; i < DX; i++) v[3 * DX + i] *= 0x1p-20f; /* a row of tiny values: small scales */
    memcpy(want, v, n * DX * sizeof *v);
    CUDA_OK(v41_index_round_mxfp4(want, n, DX));
    float *dv = dev_upload(v, n * DX * sizeof *v);
    kvl_workspace work = {0};
    FOR_EACH_ORDER(order) {
        CUDA_OK(kvl_cuda_upload(dv, v, n * DX * sizeof *v));
        CUDA_OK(v41_index_round_mxfp4_cuda(dv, n, DX, &work));
        dev_download(got, dv, n * DX * sizeof *got);
        ck_assert_msg(memcmp(got, want, n * DX * sizeof *got) == 0, "MXFP4 round trips differ (%s)", order);
    }
    v[2 * DX + 5] = NAN;
    CUDA_OK(kvl_cuda_upload(dv, v, n * DX * sizeof *v));
    ck_assert_int_eq(v41_index_round_mxfp4_cuda(dv, n, DX, &work), KVL_EINVAL);
    dev_download(got, dv, n * DX * sizeof *got);
    ck_assert_msg(memcmp(got, v, n * DX * sizeof *got) == 0, "a rejected round trip changed the values");
    ck_assert_int_eq(v41_index_round_mxfp4_cuda(dv, n, 48, &work), KVL_EINVAL);
    kvl_workspace_free(&work);
    kvl_cuda_free(dv);
    free(v), free(want), free(got);
}
END_TEST

/* ---- the attention core and the layer modes ----------------------------------------------------------- */

/* A layer of mode `kind` reading entries of ratio 2: d 48, H 4 (2 over native rows), Dh 32 or, native, 512,
 * Dr 8, Dq' 24, G 2, Do 16, W 8, HI 3, DI 16 or, native (MXFP4 keys), 32, K 3; Δ = ROPE_OFFSET. */
static v41_config mode_config(kvl_layer_kind kind, int native)
{
    v41_config c = {.kind = kind, .ratio = kind == KVL_LAYER_WINDOW ? 0 : 2};
    c.core = (v4_config){.kind = KVL_LAYER_WINDOW, .d = 48, .n_heads = native ? 2 : 4, .head_dim = native ? 512 : 32,
                         .q_lora_rank = 24, .o_groups = 2, .o_lora_rank = 16, .window = 8, .norm_eps = 1e-6,
                         .rope_offset = ROPE_OFFSET};
    CUDA_OK(kvl_rope_init(&c.core.rope, 8, 1e4));
    c.compressor = (v41_compressor_config){.d = 48, .width = c.core.head_dim, .ratio = 2, .norm_eps = 1e-6};
    c.indexer = (v41_indexer_config){.d = 48, .q_lora_rank = 24, .width = c.core.head_dim, .n_heads = 3,
                                      .head_dim = native ? 32 : 16, .topk = 3, .ratio = 2, .norm_eps = 1e-6,
                                      .rope = c.core.rope, .rope_offset = ROPE_OFFSET};
    if (kind == KVL_LAYER_WINDOW) c.compressor.ratio = c.indexer.ratio = 0;
    CUDA_OK(v41_config_check(&c));
    return c;
}

/* S 6 queries at 13 … 18 over N 9 entries (they see 7 … 9): K 3 below every query's candidates */
enum { LS = 6, LSTART = 13, LN = 9 };

/* One layer call's inputs, on the host as the ref reads them and on the device as the twin does. */
typedef struct {
    v41_config c;
    v41_weights w, dw;          /* host weights; device copies of the fields the twins read */
    float *x, *win, *ent, *keys; /* [S][d], [nw][Dh], [N][Dh], [N][DI]: the values the cache gives back */
    size_t nw, win_first;
    v41_source src;
    v41_chunk ch;
    v41_source_cuda dsrc;
    v41_chunk_cuda dch;
    v41_work_cuda work;
} layer_case;

/* rows[n][Dh] → their bytes in the store (native: packed as `layout`, rows replaced by what unpacking gives) */
static void *store_rows(float *rows, size_t n, size_t Dh, int native, kvf_row layout)
{
    const size_t rb = native ? kvf_row_bytes(layout) : Dh * sizeof(float);
    uint8_t *bytes = malloc(n * rb + 1);
    ck_assert(bytes != NULL);
    for (size_t i = 0; i < n; i++) {
        if (native) {
            CUDA_OK(kvf_row_pack(layout, bytes + i * rb, rows + i * Dh));
            CUDA_OK(kvf_row_unpack(layout, rows + i * Dh, bytes + i * rb));
        } else {
            memcpy(bytes + i * rb, rows + i * Dh, rb);
        }
    }
    void *d = dev_upload(bytes, n * rb + 1);
    free(bytes);
    return d;
}

/* win_back: window rows start that many positions before the chunk (W − 1: every query's full window;
 * fewer: a window truncated as a replay truncates it) */
static void case_make(layer_case *lc, kvl_layer_kind kind, int native, size_t win_back, uint64_t seed)
{
    memset(lc, 0, sizeof *lc);
    lc->c = mode_config(kind, native);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    CUDA_OK(v41_weights_init_random(&lc->w, &lc->c, &rng));
    CUDA_OK(v41_weights_to_cuda(&lc->dw, &lc->w));
    const size_t d = lc->c.core.d, Dh = lc->c.core.head_dim, Di = lc->c.indexer.head_dim;
    lc->win_first = LSTART - win_back;
    lc->nw = LSTART + LS - lc->win_first;
    lc->x = toy_inputs(LS, d, seed + 1);
    lc->win = toy_inputs(lc->nw, Dh, seed + 2);
    lc->ent = toy_inputs(LN, Dh, seed + 3);
    lc->keys = toy_inputs(LN, Di, seed + 4);
    if (native) {
        test_vary_blocks(lc->win, lc->nw, Dh, Dh, KVF_V41_WIN_BLOCK);
        test_vary_blocks(lc->ent, LN, Dh, Dh, KVF_V41_MAIN_BLOCK);
        CUDA_OK(v41_index_round_mxfp4(lc->keys, LN, Di));
    }
    lc->src = v41_source_f32(&lc->c, lc->ent, lc->keys, LN);
    lc->src.keys_mxfp4 = native;
    lc->ch = (v41_chunk){.x = lc->x, .S = LS, .start = LSTART, .win = lc->win, .win_first = lc->win_first};
    const v41_cuda_store store = native ? V41_CUDA_NATIVE : V41_CUDA_F32;
    lc->dsrc = (v41_source_cuda){.entries = store_rows(lc->ent, LN, Dh, native, KVF_ROW_V41_MAIN),
                                  .keys = dev_upload(lc->keys, LN * Di * sizeof(float)), .N = LN,
                                  .keys_mxfp4 = native};
    lc->dch = (v41_chunk_cuda){.x = dev_upload(lc->x, LS * d * sizeof(float)), .S = LS, .start = LSTART,
                                .win = store_rows(lc->win, lc->nw, Dh, native, KVF_ROW_V41_WINDOW),
                                .win_first = lc->win_first, .store = store};
}

static void case_free(layer_case *lc)
{
    kvl_cuda_free((void *)lc->dsrc.entries), kvl_cuda_free((void *)lc->dsrc.keys);
    kvl_cuda_free((void *)lc->dch.x), kvl_cuda_free((void *)lc->dch.win);
    v41_work_free_cuda(&lc->work);
    v41_weights_free_cuda(&lc->dw);
    v41_weights_free(&lc->w);
    free(lc->x), free(lc->win), free(lc->ent), free(lc->keys);
}

/* Two float32 paths within oracle_f32_tol of the definition each: the query latent (d) and heads (Dq'), a
 * score (Dh), the softmax and weighted sum over the W + K keys, the rotation back (two products) and the
 * grouped output ((H/G)·Dh, then G·Do). */
static double layer_tol(const v41_config *c)
{
    const v4_config *k = &c->core;
    return 2 * oracle_f32_tol(k->d + k->q_lora_rank + 2 * k->head_dim + 2 * (k->window + c->indexer.topk) + 2 +
                              k->n_heads / k->o_groups * k->head_dim + k->o_groups * k->o_lora_rank);
}

/* The index path: w_idx (d), q_idx (d + Dq' through c^Q), a dot (DI) and the head sum (HI). */
static double index_tol(const v41_config *c)
{
    return 2 * oracle_f32_tol(2 * c->core.d + 2 * c->core.q_lora_rank + c->indexer.head_dim + c->indexer.n_heads);
}

static const char *case_name(char *buf, size_t cap, const layer_case *lc, const char *what, const char *order)
{
    snprintf(buf, cap, "%s layer, %s rows, window from %zu (%s): %s", v41_mode_name(lc->c.kind),
             lc->dch.store == V41_CUDA_NATIVE ? "528/288-byte" : "float32", lc->win_first, order, what);
    return buf;
}

static void check_full(int native, size_t win_back, uint64_t seed)
{
    layer_case lc;
    case_make(&lc, KVL_LAYER_FULL, native, win_back, seed);
    const size_t d = lc.c.core.d, Kp = lc.c.indexer.topk;
    float *want = test_floats(LS * d), *got = test_floats(LS * d);
    float *I = test_floats(LS * LN), *gI = test_floats(LS * LN);
    int32_t *sel = test_ints(LS * Kp), *gsel = test_ints(LS * Kp);
    uint64_t scored = 0;
    CUDA_OK(v41_full_layer(want, sel, I, &scored, &lc.c, &lc.w, &lc.src, &lc.ch));
    float *dout = dev_filled(0x7F, LS * d * sizeof(float)), *dI = dev_filled(0x7F, LS * LN * sizeof(float));
    int32_t *dsel = dev_filled(0x5A, LS * Kp * sizeof(int32_t));
    char name[160];
    FOR_EACH_ORDER(order) {
        CUDA_OK(v41_full_layer_cuda(dout, dsel, dI, &lc.c, &lc.dw, &lc.dsrc, &lc.dch, &lc.work));
        dev_download(got, dout, LS * d * sizeof *got);
        dev_download(gI, dI, LS * LN * sizeof *gI);
        dev_download(gsel, dsel, LS * Kp * sizeof *gsel);
        expect_close_f32(case_name(name, sizeof name, &lc, "scores", order), gI, I, LS * LN, index_tol(&lc.c));
        ck_assert_msg(memcmp(gsel, sel, LS * Kp * sizeof *sel) == 0, "%s",
                      case_name(name, sizeof name, &lc, "picks differ", order));
        expect_close_f32(case_name(name, sizeof name, &lc, "output", order), got, want, LS * d, layer_tol(&lc.c));
    }
    kvl_cuda_free(dout), kvl_cuda_free(dI), kvl_cuda_free(dsel);
    free(want), free(got), free(I), free(gI), free(sel), free(gsel);
    case_free(&lc);
}

START_TEST(test_full_layer_cuda_matches_v41_full_layer_over_float32_and_native_rows)
{
    check_full(0, 7, 401);
    check_full(1, 7, 402);
    check_full(0, 2, 403); /* a window truncated at 11 */
}
END_TEST

/* pool[S][N] of the candidate source: random source scores through v41_candidate_pool, blocks of 2, the
 * top 2 (each query sees 7 … 9 entries: its newest block is partial for an odd count) */
static uint8_t *candidate_pool(uint64_t seed)
{
    float *I = test_floats(LS * LN);
    uint8_t *pool = malloc(LS * LN);
    ck_assert(pool != NULL);
    test_rng r = {seed};
    for (size_t i = 0; i < LS * LN; i++) I[i] = test_uniform(&r);
    CUDA_OK(v41_candidate_pool(pool, I, LS, LN, LSTART, 2, 2, 2));
    free(I);
    return pool;
}

static void check_reindex(int native, int with_pool, uint64_t seed)
{
    layer_case lc;
    case_make(&lc, KVL_LAYER_REINDEX, native, 7, seed);
    const size_t d = lc.c.core.d, Kp = lc.c.indexer.topk;
    float *want = test_floats(LS * d), *got = test_floats(LS * d);
    int32_t *sel = test_ints(LS * Kp), *gsel = test_ints(LS * Kp);
    uint8_t *pool = with_pool ? candidate_pool(seed + 9) : NULL;
    uint8_t *dpool = with_pool ? dev_upload(pool, LS * LN) : NULL;
    uint64_t scored = 0;
    CUDA_OK(v41_reindex_layer(want, sel, &scored, &lc.c, &lc.w, &lc.src, pool, &lc.ch));
    float *dout = dev_filled(0x7F, LS * d * sizeof(float));
    int32_t *dsel = dev_filled(0x5A, LS * Kp * sizeof(int32_t));
    char name[160];
    FOR_EACH_ORDER(order) {
        CUDA_OK(v41_reindex_layer_cuda(dout, dsel, &lc.c, &lc.dw, &lc.dsrc, dpool, &lc.dch, &lc.work));
        dev_download(got, dout, LS * d * sizeof *got);
        dev_download(gsel, dsel, LS * Kp * sizeof *gsel);
        const char *what = with_pool ? "picks over the pool differ" : "picks differ";
        ck_assert_msg(memcmp(gsel, sel, LS * Kp * sizeof *sel) == 0, "%s",
                      case_name(name, sizeof name, &lc, what, order));
        expect_close_f32(case_name(name, sizeof name, &lc, "output", order), got, want, LS * d, layer_tol(&lc.c));
    }
    kvl_cuda_free(dout), kvl_cuda_free(dsel), kvl_cuda_free(dpool);
    free(want), free(got), free(sel), free(gsel), free(pool);
    case_free(&lc);
}

START_TEST(test_reindex_layer_cuda_matches_v41_reindex_layer_over_the_pool_and_without)
{
    check_reindex(0, 1, 411);
    check_reindex(1, 1, 412);
    check_reindex(0, 0, 413);
}
END_TEST

/* Reuse at picks of another layer (random scores' top-K, query 1 with none: all −1), and a window-only layer */
static void check_reuse_and_window(int native, uint64_t seed)
{
    for (int mode = 0; mode < 2; mode++) {
        layer_case lc;
        case_make(&lc, mode ? KVL_LAYER_WINDOW : KVL_LAYER_REUSE, native, 7, seed + (uint64_t)mode);
        const size_t d = lc.c.core.d, Kp = lc.c.indexer.topk;
        float *want = test_floats(LS * d), *got = test_floats(LS * d), *I = test_floats(LS * LN);
        int32_t *sel = test_ints(LS * Kp);
        test_rng r = {seed + 7};
        for (size_t i = 0; i < LS * LN; i++)
            I[i] = i / LN == 1 || i % LN >= (LSTART + i / LN + 1) / 2 ? -INFINITY : test_uniform(&r);
        CUDA_OK(kvl_topk(sel, I, LS, LN, Kp));
        int32_t *dsel = dev_upload(sel, LS * Kp * sizeof *sel);
        if (mode) CUDA_OK(v41_window_layer(want, &lc.c, &lc.w, &lc.ch));
        else CUDA_OK(v41_reuse_layer(want, &lc.c, &lc.w, &lc.src, sel, &lc.ch));
        float *dout = dev_filled(0x7F, LS * d * sizeof(float));
        char name[160];
        FOR_EACH_ORDER(order) {
            if (mode) CUDA_OK(v41_window_layer_cuda(dout, &lc.c, &lc.dw, &lc.dch, &lc.work));
            else CUDA_OK(v41_reuse_layer_cuda(dout, &lc.c, &lc.dw, &lc.dsrc, dsel, &lc.dch, &lc.work));
            dev_download(got, dout, LS * d * sizeof *got);
            expect_close_f32(case_name(name, sizeof name, &lc, "output", order), got, want, LS * d, layer_tol(&lc.c));
        }
        kvl_cuda_free(dout), kvl_cuda_free(dsel);
        free(want), free(got), free(I), free(sel);
        case_free(&lc);
    }
}

START_TEST(test_reuse_and_window_layers_cuda_match_the_ref_over_float32_and_native_rows)
{
    check_reuse_and_window(0, 421);
    check_reuse_and_window(1, 423);
}
END_TEST

START_TEST(test_attend_cuda_rejects_picks_outside_the_entries_and_a_late_window)
{
    layer_case lc;
    case_make(&lc, KVL_LAYER_REUSE, 0, 7, 431);
    const size_t H = lc.c.core.n_heads, Dh = lc.c.core.head_dim, Kp = lc.c.indexer.topk;
    int32_t *sel = test_ints(LS * Kp);
    for (size_t i = 0; i < LS * Kp; i++) sel[i] = (int32_t)(i % LN);
    sel[4] = LN;
    int32_t *dsel = dev_upload(sel, LS * Kp * sizeof *sel);
    float *dq = dev_upload(NULL, LS * H * Dh * sizeof(float)), *dout = dev_upload(NULL, LS * H * Dh * sizeof(float));
    kvl_workspace work = {0};
    ck_assert_int_eq(v41_attend_cuda(dout, &lc.c, lc.dw.core.sinks, dq, lc.dch.win, lc.win_first, lc.dsrc.entries, LN,
                                      dsel, LS, LSTART, V41_CUDA_F32, &work), KVL_EINVAL);
    ck_assert_int_eq(v41_attend_cuda(dout, &lc.c, lc.dw.core.sinks, dq, lc.dch.win, LSTART + 1, lc.dsrc.entries, LN,
                                      dsel, LS, LSTART, V41_CUDA_F32, &work), KVL_EINVAL);
    ck_assert_int_eq(v41_attend_cuda(dout, &lc.c, lc.dw.core.sinks, dq, lc.dch.win, lc.win_first, lc.dsrc.entries, LN,
                                      dsel, LS, LSTART, V41_CUDA_NATIVE, &work), KVL_EINVAL); /* Dh 32 */
    kvl_workspace_free(&work);
    kvl_cuda_free(dsel), kvl_cuda_free(dq), kvl_cuda_free(dout);
    free(sel);
    case_free(&lc);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = cuda_suite("cuda_v41");
    if (!cuda_present()) return s;
    TCase *tc = tcase_create("compressor");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_compressor_cuda_matches_both_forms_of_v41_compressor_at_ratios_2_and_1);
    tcase_add_test(tc, test_index_keys_and_main_entries_cuda_match_the_ref_at_their_global_positions);
    tcase_add_test(tc, test_index_round_mxfp4_cuda_equals_v41_index_round_mxfp4_and_rejects_nan);
    tcase_add_test(tc, test_source_push_cuda_publishes_the_refs_entries_and_keys_in_ragged_chunks);
    suite_add_tcase(s, tc);
    TCase *ti = tcase_create("indexer");
    tcase_set_timeout(ti, KVL_TEST_TIMEOUT);
    tcase_add_test(ti, test_full_scores_cuda_equal_v41_index_scores_all_and_pick_the_same_entries);
    tcase_add_test(ti, test_candidate_pool_cuda_equals_v41_candidate_pool);
    tcase_add_test(ti, test_pool_scores_cuda_equal_v41_index_scores_pool);
    suite_add_tcase(s, ti);
    TCase *tl = tcase_create("layers");
    tcase_set_timeout(tl, KVL_TEST_TIMEOUT);
    tcase_add_test(tl, test_full_layer_cuda_matches_v41_full_layer_over_float32_and_native_rows);
    tcase_add_test(tl, test_reindex_layer_cuda_matches_v41_reindex_layer_over_the_pool_and_without);
    tcase_add_test(tl, test_reuse_and_window_layers_cuda_match_the_ref_over_float32_and_native_rows);
    tcase_add_test(tl, test_attend_cuda_rejects_picks_outside_the_entries_and_a_late_window);
    suite_add_tcase(s, tl);
    return s;
}
