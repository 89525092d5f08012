/* The V4 twins (cuda/v4_cuda.h) against ref/v4: the attention core of window-only, CSA and HCA layers
 * with the per-head sink and the output rotated back, over float32 rows and 584-byte main rows decoded
 * in the kernel, with windows that wrap, a window truncated as a replay truncates it, HCA entries whose
 * blocks straddle the window, CSA picks padded with −1 and a query with none; the grouped output
 * projection as one batched product; the compressor, batched and pushed in ragged chunks, with and without
 * the CSA overlap; the indexer over compressed entries, f32 (exactly, on inputs whose
 * sums are exact, with the same picks) and MXFP4 over 68-byte keys (within the float32 bound, picks
 * differing only at near-ties). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"
#include "oracle_attention.h"
#include "oracle_dsa.h"
#include "v4_toy.h"

#include "rows.h"
#include "topk.h"
#include "topk_cuda.h"
#include "v4.h"
#include "v4_compressor.h"
#include "v4_compressor_cuda.h"
#include "v4_cuda.h"
#include "v4_indexer.h"

/* Inputs on a grid of 2^-4 in [−1, 1]: every dot product and head sum below is exact in float32. */
#define GRID 16.0f
/* Elementwise errors of 1e-4 on O(1) values leave the cosine above 1 − 1e-7. */
#define MIN_COS (1 - 1e-7)

/* Two float32 paths within oracle_f32_tol of the definition each: a score (Dh), the softmax over the
 * keys, the weighted sum (nk keys), the rotation back (two products). */
static double attend_tol(const v4_config *c, size_t nk) { return 2 * oracle_f32_tol(c->head_dim + 2 * nk + 2); }

/* sel[S][K]: the top-K of random scores over the entries each query sees (e < ⌊(t+1)/M⌋); query 1 of the
 * chunk sees none (all −1) */
static void picks(int32_t *sel, const v4_config *c, size_t S, size_t N, size_t start, uint64_t seed)
{
    float *I = test_floats(S * N);
    test_rng r = {seed};
    for (size_t i = 0; i < S; i++)
        for (size_t e = 0; e < N; e++) {
            const float v = test_uniform(&r);
            I[i * N + e] = i == 1 || e >= (start + i + 1) / c->compressor.ratio ? -INFINITY : v;
        }
    CUDA_OK(kvl_topk(sel, I, S, N, c->indexer.topk));
    free(I);
}

/* rows[n][Dh] as the store gives them back, and their bytes in the store */
static void *stored_rows(float *rows, size_t n, size_t Dh, v4_cuda_store store)
{
    const size_t rb = v4_cuda_row_bytes(store, Dh);
    uint8_t *bytes = malloc(n * rb + 1);
    ck_assert(bytes != NULL);
    for (size_t i = 0; i < n; i++) {
        if (store == V4_CUDA_MAIN) {
            CUDA_OK(kvf_row_pack(KVF_ROW_V4_MAIN, bytes + i * rb, rows + i * Dh));
            CUDA_OK(kvf_row_unpack(KVF_ROW_V4_MAIN, rows + i * Dh, bytes + i * rb));
        } else {
            memcpy(bytes + i * rb, rows + i * Dh, rb);
        }
    }
    return bytes;
}

/* S queries at positions start … over window rows from win_first: the twin against v4_attend. */
static void check_attend(const v4_config *c, const v4_weights *w, v4_cuda_store store, size_t S, size_t start,
                         size_t win_first, uint64_t seed, const char *what)
{
    const size_t H = c->n_heads, Dh = c->head_dim, nw = start + S - win_first;
    const size_t M = c->kind == KVL_LAYER_WINDOW ? 1 : c->compressor.ratio;
    const size_t N = c->kind == KVL_LAYER_WINDOW ? 0 : (start + S) / M, K = c->indexer.topk;
    const size_t nk = c->window + (c->kind == KVL_LAYER_CSA ? K : N);
    float *q = test_floats(S * H * Dh), *win = test_floats(nw * Dh), *ent = test_floats(N * Dh);
    float *want = test_floats(S * H * Dh), *got = test_floats(S * H * Dh);
    int32_t *sel = test_ints(S * (K ? K : 1));
    test_rng r = {seed};
    for (size_t i = 0; i < S * H * Dh; i++) q[i] = 2 * test_uniform(&r);
    for (size_t i = 0; i < nw * Dh; i++) win[i] = 2 * test_uniform(&r);
    for (size_t i = 0; i < N * Dh; i++) ent[i] = 2 * test_uniform(&r);
    if (store == V4_CUDA_MAIN) {
        test_vary_blocks(win, nw, Dh, KVF_V4_NOPE, KVF_V4_BLOCK);
        test_vary_blocks(ent, N, Dh, KVF_V4_NOPE, KVF_V4_BLOCK);
    }
    void *win_bytes = stored_rows(win, nw, Dh, store), *ent_bytes = stored_rows(ent, N, Dh, store);
    const int csa = c->kind == KVL_LAYER_CSA;
    if (csa) picks(sel, c, S, N, start, seed + 1);
    const kvl_row_tiles entries = kvl_row_tiles_f32(ent, N, Dh);
    CUDA_OK(v4_attend(want, c, w, q, win, win_first, &entries, csa ? sel : NULL, S, start));
    double *wd = malloc(S * H * Dh * sizeof *wd);
    for (size_t i = 0; i < S * H * Dh; i++) wd[i] = want[i];
    const size_t rb = v4_cuda_row_bytes(store, Dh);
    float *dq = dev_upload(q, S * H * Dh * sizeof *q), *dsinks = dev_upload(w->sinks, H * sizeof(float));
    void *dwin = dev_upload(win_bytes, nw * rb), *dent = dev_upload(N ? ent_bytes : NULL, (N ? N : 1) * rb);
    int32_t *dsel = dev_upload(sel, S * (K ? K : 1) * sizeof *sel);
    float *dout = dev_filled(0x7F, S * H * Dh * sizeof *dout);
    kvl_workspace work = {0};
    char name[160];
    FOR_EACH_ORDER(order) {
        CUDA_OK(v4_attend_cuda(dout, c, dsinks, dq, dwin, win_first, dent, N, csa ? dsel : NULL, S, start, store,
                               &work));
        dev_download(got, dout, S * H * Dh * sizeof *got);
        snprintf(name, sizeof name, "%s, %s rows, S %zu at %zu, window from %zu (%s)", what,
                 store == V4_CUDA_MAIN ? "584-byte" : "float32", S, start, win_first, order);
        kvl_expect_close(name, got, wd, S * H * Dh, attend_tol(c, nk), attend_tol(c, nk), MIN_COS);
    }
    kvl_workspace_free(&work);
    kvl_cuda_free(dq), kvl_cuda_free(dsinks), kvl_cuda_free(dwin), kvl_cuda_free(dent), kvl_cuda_free(dsel);
    kvl_cuda_free(dout);
    free(q), free(win), free(ent), free(want), free(got), free(sel), free(wd), free(win_bytes), free(ent_bytes);
}

START_TEST(test_attend_cuda_matches_v4_attend_in_every_kind_of_toy_layer)
{
    /* W 8 over positions up to 25: the window wraps; HCA M 8 entries straddle it; CSA K 3 picks of M 4 */
    const size_t layers[] = {V4_TOY_LAYER_WINDOW, V4_TOY_LAYER_CSA, V4_TOY_LAYER_HCA};
    const char *names[] = {"window-only", "CSA", "HCA"};
    for (size_t k = 0; k < 3; k++) {
        v4_config c;
        v4_weights w;
        v4_toy_layer(&c, &w, layers[k], 3, 111 + k);
        check_attend(&c, &w, V4_CUDA_F32, 6, 20, 0, 121 + k, names[k]);
        v4_weights_free(&w);
    }
}
END_TEST

START_TEST(test_attend_cuda_matches_v4_attend_when_a_replay_truncates_the_window)
{
    /* window rows from 18 only: queries 20 … 24 see [max(18, t − 7), t] */
    v4_config c;
    v4_weights w;
    v4_toy_layer(&c, &w, V4_TOY_LAYER_CSA, 3, 131);
    check_attend(&c, &w, V4_CUDA_F32, 5, 20, 18, 132, "CSA replay");
    v4_weights_free(&w);
}
END_TEST

START_TEST(test_attend_cuda_reads_584_byte_rows_as_formats_unpacks_them)
{
    /* Dh 512, Dr 64: CSA (M 4, K 4) and HCA (M 128, two entries visible at positions 256 …) */
    v4_config c;
    v4_weights w;
    v4_wide_layer(&c, &w, 1, 141);
    check_attend(&c, &w, V4_CUDA_MAIN, 3, 13, 0, 142, "wide CSA");
    v4_weights_free(&w);
    v4_wide_layer(&c, &w, 2, 143);
    check_attend(&c, &w, V4_CUDA_MAIN, 2, 300, 290, 144, "wide HCA");
    v4_weights_free(&w);
}
END_TEST

START_TEST(test_attend_cuda_rejects_what_v4_attend_rejects)
{
    v4_config c;
    v4_weights w;
    v4_toy_layer(&c, &w, V4_TOY_LAYER_CSA, 3, 151);
    const size_t Dh = c.head_dim, H = c.n_heads;
    float *d = dev_upload(NULL, 32 * H * Dh * sizeof(float));
    const int32_t bad[3] = {0, 2, 5}; /* 5 of 5 entries */
    int32_t *dsel = dev_upload(bad, sizeof bad);
    kvl_workspace work = {0};
    ck_assert_int_eq(v4_attend_cuda(d, &c, d, d, d, 0, d, 5, dsel, 1, 20, V4_CUDA_F32, &work), KVL_EINVAL);
    ck_assert_int_eq(v4_attend_cuda(d, &c, d, d, d, 0, d, 5, NULL, 1, 20, V4_CUDA_F32, &work), KVL_EINVAL);
    ck_assert_int_eq(v4_attend_cuda(d, &c, d, d, d, 21, d, 5, dsel, 1, 20, V4_CUDA_F32, &work), KVL_EINVAL);
    ck_assert_int_eq(v4_attend_cuda(d, &c, d, d, d, 0, d, 5, dsel, 1, 20, V4_CUDA_MAIN, &work), KVL_EINVAL); /* Dh 32 */
    kvl_workspace_free(&work);
    kvl_cuda_free(d), kvl_cuda_free(dsel);
    v4_weights_free(&w);
}
END_TEST

START_TEST(test_output_cuda_matches_v4_output_through_one_batched_product)
{
    /* the toy: H 4 heads of Dh 32 in G 2 groups, Do 16, d 64; S 7 tokens */
    enum { S = 7 };
    v4_config c;
    v4_weights w;
    v4_toy_layer(&c, &w, V4_TOY_LAYER_CSA, 3, 181);
    const size_t H = c.n_heads, Dh = c.head_dim, G = c.o_groups, Do = c.o_lora_rank, d = c.d, gw = H / G * Dh;
    float *o = test_floats(S * H * Dh), *want = test_floats(S * d), *got = test_floats(S * d);
    double *wd = malloc(S * d * sizeof *wd);
    ck_assert(wd != NULL);
    test_rng r = {182};
    for (size_t i = 0; i < S * H * Dh; i++) o[i] = test_uniform(&r);
    CUDA_OK(v4_output(want, &c, &w, o, S));
    for (size_t i = 0; i < S * d; i++) wd[i] = want[i];
    float *doa = dev_upload(w.w_oa, G * Do * gw * sizeof(float)), *dob = dev_upload(w.w_ob, d * G * Do * sizeof(float));
    float *dot = dev_upload(o, S * H * Dh * sizeof *o), *dout = dev_filled(0x7F, S * d * sizeof *dout);
    kvl_workspace work = {0};
    /* two float32 paths, each the group product (gw) and W_OB (G·Do) from the definition */
    const double tol = 2 * oracle_f32_tol(gw + G * Do);
    FOR_EACH_ORDER(order) {
        CUDA_OK(v4_output_cuda(dout, &c, doa, dob, dot, S, &work));
        dev_download(got, dout, S * d * sizeof *got);
        kvl_expect_close(order, got, wd, S * d, tol, tol, MIN_COS);
    }
    kvl_workspace_free(&work);
    kvl_cuda_free(doa), kvl_cuda_free(dob), kvl_cuda_free(dot), kvl_cuda_free(dout);
    free(o), free(want), free(got), free(wd);
    v4_weights_free(&w);
}
END_TEST

/* ---- the compressor ----------------------------------------------------------------------------------- */

/* A rotary offset Δ other than 0, so that a position the twin forgets to shift shows. */
#define ROPE_OFFSET 3

/* the compressor's weights on the device, field by field */
static v4_compressor_weights compressor_to_device(const v4_compressor_weights *h, const v4_compressor_config *c)
{
    const size_t wide = (1 + c->overlap) * c->width;
    return (v4_compressor_weights){.w_kv = dev_upload(h->w_kv, wide * c->d * sizeof(float)),
                                   .w_gate = dev_upload(h->w_gate, wide * c->d * sizeof(float)),
                                   .ape = dev_upload(h->ape, c->ratio * wide * sizeof(float)),
                                   .norm = dev_upload(h->norm, c->width * sizeof(float))};
}

static void compressor_free_device(v4_compressor_weights *d)
{
    kvl_cuda_free(d->w_kv), kvl_cuda_free(d->w_gate), kvl_cuda_free(d->ape), kvl_cuda_free(d->norm);
}

/* Two float32 paths within oracle_f32_tol of the definition each: the projections (d), the pooling
 * (rounded once from double), RMSNorm (c) and the rotation (two products). */
static double compressor_tol(const v4_compressor_config *c) { return 2 * oracle_f32_tol(c->d + c->width + 4); }

/* T tokens of the toy through both forms of compressor (cc, wc): the batched twin against
 * v4_compressor_forward, then the incremental twin in ragged chunks against v4_compressor_push. */
static void check_compressor(const v4_compressor_config *cc, const v4_compressor_weights *wc, uint64_t seed,
                             const char *what)
{
    static const size_t chunks[] = {1, 3, 2, 7, 1, 11, 4, 16}; /* 45 = V4_TOY_T tokens */
    const size_t T = V4_TOY_T, cw = cc->width, N = T / cc->ratio;
    float *x = v4_toy_inputs(T, cc->d, seed), *want = test_floats(N * cw), *got = test_floats(N * cw);
    double *wd = malloc(N * cw * sizeof *wd);
    ck_assert(wd != NULL);
    v4_compressor_weights dw = compressor_to_device(wc, cc);
    float *dx = dev_upload(x, T * cc->d * sizeof *x), *dout = dev_filled(0x7F, N * cw * sizeof(float));
    kvl_workspace work = {0};
    char name[128];
    CUDA_OK(v4_compressor_forward(want, cc, wc, x, T, ROPE_OFFSET));
    for (size_t i = 0; i < N * cw; i++) wd[i] = want[i];
    FOR_EACH_ORDER(order) {
        CUDA_OK(v4_compressor_forward_cuda(dout, cc, &dw, dx, T, ROPE_OFFSET, &work));
        dev_download(got, dout, N * cw * sizeof *got);
        snprintf(name, sizeof name, "%s batched, M %zu ov %zu (%s)", what, cc->ratio, cc->overlap, order);
        kvl_expect_close(name, got, wd, N * cw, compressor_tol(cc), compressor_tol(cc), MIN_COS);
    }
    v4_compressor_state ref;
    v4_compressor_state_cuda dev;
    CUDA_OK(v4_compressor_state_init(&ref, cc));
    CUDA_OK(v4_compressor_state_init_cuda(&dev, cc));
    for (size_t k = 0, pos = 0; k < sizeof chunks / sizeof chunks[0]; pos += chunks[k++]) {
        size_t n_ref = 0, n_dev = 0;
        CUDA_OK(v4_compressor_push(want, &n_ref, cc, wc, &ref, x + pos * cc->d, chunks[k], ROPE_OFFSET));
        CUDA_OK(v4_compressor_push_cuda(dout, &n_dev, cc, &dw, &dev, dx + pos * cc->d, chunks[k], ROPE_OFFSET));
        ck_assert_uint_eq(n_dev, n_ref);
        dev_download(got, dout, n_ref * cw * sizeof *got);
        for (size_t i = 0; i < n_ref * cw; i++) wd[i] = want[i];
        snprintf(name, sizeof name, "%s pushed, chunk of %zu at %zu", what, chunks[k], pos);
        kvl_expect_close(name, got, wd, n_ref * cw, compressor_tol(cc), compressor_tol(cc), MIN_COS);
    }
    ck_assert_uint_eq(dev.pos, T);
    v4_compressor_state_free(&ref);
    v4_compressor_state_free_cuda(&dev);
    kvl_workspace_free(&work);
    compressor_free_device(&dw);
    kvl_cuda_free(dx), kvl_cuda_free(dout);
    free(x), free(want), free(got), free(wd);
}

START_TEST(test_compressor_cuda_matches_both_forms_of_v4_compressor_with_the_csa_overlap)
{
    /* the toy's CSA layer: its own compressor (M 4, overlap 1, c 32) and its indexer's (c = DI 16) */
    v4_config c;
    v4_weights w;
    v4_toy_layer(&c, &w, V4_TOY_LAYER_CSA, 3, 191);
    check_compressor(&c.compressor, &w.compressor, 192, "CSA");
    check_compressor(&c.indexer.compressor, &w.indexer.compressor, 193, "CSA indexer");
    v4_weights_free(&w);
}
END_TEST

START_TEST(test_compressor_cuda_matches_both_forms_of_v4_compressor_without_overlap)
{
    /* the toy's HCA layer: M 8, no overlap; 45 tokens leave a tail of 5 that produces nothing yet */
    v4_config c;
    v4_weights w;
    v4_toy_layer(&c, &w, V4_TOY_LAYER_HCA, 3, 194);
    check_compressor(&c.compressor, &w.compressor, 195, "HCA");
    v4_weights_free(&w);
}
END_TEST

/* ---- the indexer over compressed entries ------------------------------------------------------------- */

START_TEST(test_index_scores_cuda_equal_v4_index_scores_and_pick_the_same_entries)
{
    /* the toy's CSA indexer (HI 4, DI 16, M 4, K 3): S 5 queries at 60 … 64 over N 17 entries (16 or 17
     * visible); entries 2e + 1 copy 2e, so scores tie and the smaller entry must win */
    enum { S = 5, N = 17, START = 60 };
    v4_config vc;
    v4_weights vw;
    v4_toy_layer(&vc, &vw, V4_TOY_LAYER_CSA, 3, 161);
    const v4_indexer_config *c = &vc.indexer;
    const size_t HI = c->n_heads, DI = c->head_dim, K = c->topk;
    float *q = test_floats(S * HI * DI), *w = test_floats(S * HI), *k = test_floats(N * DI);
    float *want = test_floats(S * N), *got = test_floats(S * N);
    int32_t *want_sel = test_ints(S * K), *got_sel = test_ints(S * K);
    test_rng r = {162};
    for (size_t i = 0; i < S * HI * DI; i++) q[i] = test_grid_uniform(&r, GRID);
    for (size_t i = 0; i < S * HI; i++) w[i] = test_grid_uniform(&r, GRID);
    for (size_t i = 0; i < N * DI; i++) k[i] = test_grid_uniform(&r, GRID);
    for (size_t e = 1; e < N; e += 2) memcpy(k + e * DI, k + (e - 1) * DI, DI * sizeof *k);
    CUDA_OK(v4_index_scores(want, c, q, w, k, S, N, START));
    CUDA_OK(v4_index_select(want_sel, c, want, S, N));
    float *dq = dev_upload(q, S * HI * DI * sizeof *q), *dw = dev_upload(w, S * HI * sizeof *w);
    float *dk = dev_upload(k, N * DI * sizeof *k), *dI = dev_filled(0x7F, S * N * sizeof *dI);
    int32_t *dsel = dev_upload(NULL, S * K * sizeof *dsel);
    FOR_EACH_ORDER(order) {
        CUDA_OK(v4_index_scores_cuda(dI, c, dq, dw, dk, S, N, START));
        CUDA_OK(kvl_topk_cuda(dsel, dI, S, N, K));
        dev_download(got, dI, S * N * sizeof *got);
        dev_download(got_sel, dsel, S * K * sizeof *got_sel);
        for (size_t i = 0; i < S * N; i++)
            ck_assert_msg(got[i] == want[i], "score of query %zu at entry %zu is %.9g, the ref's %.9g (%s)", i / N,
                          i % N, got[i], want[i], order);
        ck_assert_msg(memcmp(got_sel, want_sel, S * K * sizeof *got_sel) == 0, "picks differ (%s)", order);
    }
    kvl_cuda_free(dq), kvl_cuda_free(dw), kvl_cuda_free(dk), kvl_cuda_free(dI), kvl_cuda_free(dsel);
    free(q), free(w), free(k), free(want), free(got), free(want_sel), free(got_sel);
    v4_weights_free(&vw);
}
END_TEST

START_TEST(test_fp4_index_scores_cuda_match_the_ref_over_68_byte_keys)
{
    /* the wide CSA indexer (HI 2, DI 128, M 4, K 4): T 40 queries at positions 0 … 39 over 40 keys, of which
     * query t sees ⌊(t+1)/4⌋ ≤ t, so oracle_dsa_index_bound's causal rule covers every visible entry */
    enum { T = 40 };
    v4_config vc;
    v4_weights vw;
    v4_wide_layer(&vc, &vw, 1, 171);
    const v4_indexer_config *c = &vc.indexer;
    const size_t HI = c->n_heads, DI = c->head_dim, K = c->topk, rb = kvf_row_bytes(KVF_ROW_V4_INDEX);
    float *q = test_floats(T * HI * DI), *w = test_floats(T * HI), *k = test_floats(T * DI);
    float *want = test_floats(T * T), *got = test_floats(T * T);
    int32_t *want_sel = test_ints(T * K), *got_sel = test_ints(T * K);
    uint8_t *rows = malloc(T * rb);
    double *qd = malloc(T * HI * DI * sizeof *qd), *wd = malloc(T * HI * sizeof *wd), *kd = malloc(T * DI * sizeof *kd);
    double *bound = malloc(T * T * sizeof *bound);
    ck_assert(rows && qd && wd && kd && bound);
    test_rng r = {172};
    for (size_t i = 0; i < T * HI * DI; i++) q[i] = test_uniform(&r);
    for (size_t i = 0; i < T * HI; i++) w[i] = test_uniform(&r) / (float)sqrt((double)(HI * DI));
    for (size_t i = 0; i < T * DI; i++) k[i] = test_uniform(&r);
    CUDA_OK(v4_index_rotate(q, c, T * HI));
    CUDA_OK(v4_index_round_mxfp4(q, c, T * HI));
    CUDA_OK(v4_index_rotate(k, c, T));
    test_vary_blocks(k, T, DI, DI, KVF_V4_INDEX_BLOCK);
    for (size_t e = 0; e < T; e++) {
        CUDA_OK(kvf_row_pack(KVF_ROW_V4_INDEX, rows + e * rb, k + e * DI));
        CUDA_OK(kvf_row_unpack(KVF_ROW_V4_INDEX, k + e * DI, rows + e * rb));
    }
    CUDA_OK(v4_index_scores(want, c, q, w, k, T, T, 0));
    CUDA_OK(v4_index_select(want_sel, c, want, T, T));
    for (size_t i = 0; i < T * HI * DI; i++) qd[i] = q[i];
    for (size_t i = 0; i < T * HI; i++) wd[i] = w[i];
    for (size_t i = 0; i < T * DI; i++) kd[i] = k[i];
    /* two float32 paths (ref and twin), each DI products and HI heads from the definition */
    oracle_dsa_index_bound(bound, qd, wd, kd, HI, DI, T, 2 * (DI + HI));
    float *dq = dev_upload(q, T * HI * DI * sizeof *q), *dw = dev_upload(w, T * HI * sizeof *w);
    uint8_t *dk = dev_upload(rows, T * rb);
    float *dI = dev_upload(NULL, T * T * sizeof *dI);
    int32_t *dsel = dev_upload(NULL, T * K * sizeof *dsel);
    char what[96];
    FOR_EACH_ORDER(order) {
        CUDA_OK(v4_index_scores_fp4_cuda(dI, c, dq, dw, dk, T, T, 0));
        CUDA_OK(kvl_topk_cuda(dsel, dI, T, T, K));
        dev_download(got, dI, T * T * sizeof *got);
        dev_download(got_sel, dsel, T * K * sizeof *got_sel);
        for (size_t t = 0; t < T; t++) {
            double want_row[T];
            for (size_t e = 0; e < T; e++) want_row[e] = want[t * T + e];
            snprintf(what, sizeof what, "fp4 scores, query %zu (%s)", t, order);
            for (size_t e = 0; e < (t + 1) / 4; e++)
                ck_assert_msg(fabs(got[t * T + e] - want_row[e]) <= bound[t * T + e], "%s: entry %zu is %.9g, the "
                              "ref's %.9g, beyond %.3g", what, e, got[t * T + e], want_row[e], bound[t * T + e]);
            kvl_expect_close(what, got + t * T, want_row, T, INFINITY, 0, 0); /* −∞ where the ref's */
            expect_same_picks_up_to_near_ties(got_sel + t * K, want_sel + t * K, want + t * T, bound + t * T, K, what);
        }
    }
    kvl_cuda_free(dq), kvl_cuda_free(dw), kvl_cuda_free(dk), kvl_cuda_free(dI), kvl_cuda_free(dsel);
    free(q), free(w), free(k), free(want), free(got), free(want_sel), free(got_sel), free(rows);
    free(qd), free(wd), free(kd), free(bound);
    v4_weights_free(&vw);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = cuda_suite("cuda_v4");
    if (!cuda_present()) return s;
    TCase *ta = tcase_create("attend");
    tcase_set_timeout(ta, KVL_TEST_TIMEOUT);
    tcase_add_test(ta, test_attend_cuda_matches_v4_attend_in_every_kind_of_toy_layer);
    tcase_add_test(ta, test_attend_cuda_matches_v4_attend_when_a_replay_truncates_the_window);
    tcase_add_test(ta, test_attend_cuda_reads_584_byte_rows_as_formats_unpacks_them);
    tcase_add_test(ta, test_attend_cuda_rejects_what_v4_attend_rejects);
    tcase_add_test(ta, test_output_cuda_matches_v4_output_through_one_batched_product);
    suite_add_tcase(s, ta);
    TCase *tc = tcase_create("compressor");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_compressor_cuda_matches_both_forms_of_v4_compressor_with_the_csa_overlap);
    tcase_add_test(tc, test_compressor_cuda_matches_both_forms_of_v4_compressor_without_overlap);
    suite_add_tcase(s, tc);
    TCase *ti = tcase_create("indexer");
    tcase_set_timeout(ti, KVL_TEST_TIMEOUT);
    tcase_add_test(ti, test_index_scores_cuda_equal_v4_index_scores_and_pick_the_same_entries);
    tcase_add_test(ti, test_fp4_index_scores_cuda_match_the_ref_over_68_byte_keys);
    suite_add_tcase(s, ti);
    return s;
}
