/* The MLA twins (cuda/mla_cuda.h) against ref/mla: naive and absorbed decode step by step over float32,
 * bf16 and DeepSeek V3.2's 656-byte FP8 rows, with splits that do not divide the context, windows whose
 * rings wrap, a first token alone, odd head counts, the direct query (Dq' = 0) and B sequences at once. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cuda_test.h"
#include "oracle_attention.h"

#include "element.h"
#include "linalg.h"
#include "mla.h"
#include "mla_cuda.h"
#include "rng.h"
#include "rows.h"
#include "softmax.h"
#include "kv_ring_cuda.h"

/* Weights and inputs on a grid of 2^-6, so that the latent rows (one exact product, then RMSNorm and
 * RoPE computed as the ref computes them) come out bit for bit equal on both sides, and a bf16 or FP8
 * cache stores the same codes. The queries go through a second product and differ by float rounding. */
#define GRID 64.0f
/* Elementwise errors of 1e-4 on O(1) values leave the cosine above 1 − 1e-7. */
#define MIN_COS (1 - 1e-7)
/* With bf16 weights the output moves by at most 2^-8·max|v| (attention_bound), up to 2^-8·√N of the
 * norm of an average of N random rows; a relative error ε leaves the cosine above 1 − ε²/2. */
#define MIN_COS_BF16(N) (1 - 0x1p-17 * (double)(N))

typedef struct {
    mla_config c;
    mla_weights w, dw;
} layer;

static void on_grid(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = roundf(x[i] * GRID) / GRID;
}

static void layer_make(layer *L, size_t H, size_t Dq, size_t Dc, size_t Dn, size_t Dr, size_t Dv, size_t W,
                       uint64_t seed)
{
    L->c = (mla_config){.d = 32, .n_heads = H, .q_lora_rank = Dq, .kv_lora_rank = Dc, .qk_nope = Dn, .qk_rope = Dr,
                        .v_head = Dv, .window = W, .norm_eps = 1e-6};
    CUDA_OK(kvl_rope_init(&L->c.rope, Dr, 1e4));
    L->c.softmax_scale = 1.0 / sqrt((double)(Dn + Dr));
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    CUDA_OK(mla_weights_init_random(&L->w, &L->c, &rng));
    on_grid(L->w.block, L->w.n_floats);
    CUDA_OK(mla_weights_to_cuda(&L->dw, &L->w, &L->c));
}

static void layer_free(layer *L)
{
    mla_weights_free(&L->w);
    mla_weights_free_cuda(&L->dw);
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

/* Two float32 paths within oracle_f32_tol of the definition each; the path of the longer (naive) form:
 * d + Dq' (query), Dc (re-expansion or absorption), Dc + Dr (score), N keys, Dc (W_UV) + H·Dv (W_O). */
static double twin_tol(const mla_config *c, size_t N)
{
    return 2 * oracle_f32_tol(c->d + c->q_lora_rank + 2 * c->kv_lora_rank + c->kv_lora_rank + c->qk_rope + N +
                              c->n_heads * c->v_head);
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

typedef int (*ref_decode)(float *, const mla_config *, const mla_weights *, mla_cache *, const float *);
typedef int (*cuda_decode)(float *, const mla_config *, const mla_weights *, mla_cache_cuda *, const float *);

/* Decode T tokens of B sequences with both, comparing every output. */
static void check_decode(const char *form, ref_decode ref_fn, cuda_decode cuda_fn, layer *L, kv_store store,
                         size_t B, size_t split, size_t T, uint64_t seed)
{
    const size_t d = L->c.d;
    float *x = inputs(T * B * d, seed), *want = malloc(B * d * sizeof(float));
    float *dx = dev_upload(x, T * B * d * sizeof(float)), *dout = dev_upload(NULL, B * d * sizeof(float));
    mla_cache *ref = malloc(B * sizeof *ref);
    char what[160];
    FOR_EACH_ORDER(order) {
        mla_cache_cuda dev;
        for (size_t b = 0; b < B; b++) CUDA_OK(mla_cache_init(&ref[b], &L->c, T, store));
        CUDA_OK(mla_cache_init_cuda(&dev, &L->c, T, kv_cuda_store_of(store), B));
        dev.split = split;
        for (size_t t = 0; t < T; t++) {
            for (size_t b = 0; b < B; b++) CUDA_OK(ref_fn(want + b * d, &L->c, &L->w, &ref[b], x + (t * B + b) * d));
            CUDA_OK(cuda_fn(dout, &L->c, &L->dw, &dev, dx + t * B * d));
            snprintf(what, sizeof what, "%s H %zu Dq' %zu W %zu %s B %zu split %zu, token %zu (%s)", form, L->c.n_heads,
                     L->c.q_lora_rank, L->c.window, kv_store_name(store), B, split, t, order);
            expect_outputs(what, dout, want, B * d, twin_tol(&L->c, t + 1));
        }
        ck_assert_uint_eq(B * mla_cache_bytes_used(&ref[0]), mla_cache_bytes_used_cuda(&dev));
        for (size_t b = 0; b < B; b++) mla_cache_free(&ref[b]);
        mla_cache_free_cuda(&dev);
    }
    kvl_cuda_free(dx);
    kvl_cuda_free(dout);
    free(ref);
    free(x);
    free(want);
}

START_TEST(test_absorbed_decode_cuda_matches_mla_decode_absorbed_when_splits_are_ragged)
{
    layer L;
    layer_make(&L, 4, 16, 32, 16, 8, 16, 0, 61);
    check_decode("absorbed", mla_decode_absorbed, mla_decode_absorbed_cuda, &L, KV_STORE_F32, 1, 5, 13, 62);
    layer_free(&L);
}
END_TEST

START_TEST(test_naive_decode_cuda_matches_mla_decode_naive_when_the_window_wraps)
{
    /* three heads, the query straight from x (Dq' = 0), a window of 5 over 11 tokens, splits of 2 */
    layer L;
    layer_make(&L, 3, 0, 32, 16, 8, 16, 5, 63);
    check_decode("naive", mla_decode_naive, mla_decode_naive_cuda, &L, KV_STORE_F32, 1, 2, 11, 64);
    layer_free(&L);
}
END_TEST

START_TEST(test_both_forms_cuda_match_the_ref_when_the_cache_is_bf16)
{
    layer L;
    layer_make(&L, 3, 16, 32, 8, 8, 8, 6, 65);
    check_decode("absorbed", mla_decode_absorbed, mla_decode_absorbed_cuda, &L, KV_STORE_BF16, 1, 4, 9, 66);
    check_decode("naive", mla_decode_naive, mla_decode_naive_cuda, &L, KV_STORE_BF16, 1, 4, 9, 67);
    layer_free(&L);
}
END_TEST

START_TEST(test_batched_decode_cuda_matches_one_ref_decode_per_sequence)
{
    layer L;
    layer_make(&L, 2, 16, 32, 8, 8, 8, 0, 68);
    check_decode("absorbed", mla_decode_absorbed, mla_decode_absorbed_cuda, &L, KV_STORE_F32, 3, 3, 7, 69);
    check_decode("naive", mla_decode_naive, mla_decode_naive_cuda, &L, KV_STORE_F32, 2, 3, 5, 70);
    layer_free(&L);
}
END_TEST

/* ---- V3.2's 656-byte FP8 rows: the ref's steps over rows passed through formats' pack and unpack ---- */

typedef int (*scores_fn)(float *, const mla_config *, const mla_weights *, const float *, const float *,
                         const float *, size_t, size_t);
typedef int (*values_fn)(float *, const mla_config *, const mla_weights *, const float *, const float *, size_t,
                         size_t);

/* out[d] for x_t: the ref's decode, its row stored as the FP8 cache stores it (f32 ring `held`). */
static void ref_decode_fp8(float *out, const layer *L, mla_cache *held, const float *x_t, scores_fn scores,
                           values_fn values)
{
    const mla_config *c = &L->c;
    const size_t H = c->n_heads, Dw = c->kv_lora_rank + c->qk_rope, pos = held->ring.len;
    const size_t N = pos + 1 < held->ring.slots ? pos + 1 : held->ring.slots;
    float *q = malloc(H * (c->qk_nope + c->qk_rope) * sizeof(float)), *row = malloc(Dw * sizeof(float));
    float *s = malloc(H * N * sizeof(float)), *o = malloc(H * c->v_head * sizeof(float));
    uint8_t packed[sizeof(kvf_row_v32_main)];
    CUDA_OK(mla_query(q, c, &L->w, x_t, 1, pos));
    CUDA_OK(mla_latent(row, c, &L->w, x_t, 1, pos));
    CUDA_OK(kvf_row_pack(KVF_ROW_V32_MAIN, packed, row));
    CUDA_OK(kvf_row_unpack(KVF_ROW_V32_MAIN, row, packed));
    CUDA_OK(mla_cache_append(held, c, row, 1));
    CUDA_OK(scores(s, c, &L->w, q, held->ring.rows, NULL, 1, N)); /* a float32 ring: its N rows in slot order */
    for (size_t h = 0; h < H; h++) kvl_softmax_f32(s + h * N, N);
    CUDA_OK(values(o, c, &L->w, s, held->ring.rows, 1, N));
    CUDA_OK(kvl_matmul_abt_f32(out, o, L->w.w_o, 1, c->d, H * c->v_head));
    free(q), free(row), free(s), free(o);
}

static void check_fp8(const char *form, scores_fn scores, values_fn values, cuda_decode cuda_fn, size_t W, size_t B,
                      size_t split, size_t T, uint64_t seed)
{
    layer L;
    layer_make(&L, 3, 16, KVF_V32_NOPE, 8, KVF_V32_ROPE, 8, W, seed);
    const size_t d = L.c.d;
    float *x = inputs(T * B * d, seed + 1), *want = malloc(B * d * sizeof(float));
    float *dx = dev_upload(x, T * B * d * sizeof(float)), *dout = dev_upload(NULL, B * d * sizeof(float));
    mla_cache *held = malloc(B * sizeof *held);
    char what[160];
    FOR_EACH_ORDER(order) {
        mla_cache_cuda dev;
        for (size_t b = 0; b < B; b++) CUDA_OK(mla_cache_init(&held[b], &L.c, T, KV_STORE_F32));
        CUDA_OK(mla_cache_init_cuda(&dev, &L.c, T, KV_CUDA_V32_MAIN, B));
        dev.split = split;
        for (size_t t = 0; t < T; t++) {
            for (size_t b = 0; b < B; b++)
                ref_decode_fp8(want + b * d, &L, &held[b], x + (t * B + b) * d, scores, values);
            CUDA_OK(cuda_fn(dout, &L.c, &L.dw, &dev, dx + t * B * d));
            snprintf(what, sizeof what, "%s over 656-byte rows W %zu B %zu split %zu, token %zu (%s)", form, W, B,
                     split, t, order);
            expect_outputs(what, dout, want, B * d, twin_tol(&L.c, t + 1));
        }
        ck_assert_uint_eq(mla_cache_bytes_used_cuda(&dev), B * kv_ring_held_cuda(&dev.ring) * 656);
        for (size_t b = 0; b < B; b++) mla_cache_free(&held[b]);
        mla_cache_free_cuda(&dev);
    }
    kvl_cuda_free(dx);
    kvl_cuda_free(dout);
    free(held);
    free(x);
    free(want);
    layer_free(&L);
}

START_TEST(test_absorbed_decode_cuda_reads_fp8_rows_as_formats_unpacks_them)
{
    check_fp8("absorbed", mla_scores_absorbed, mla_values_absorbed, mla_decode_absorbed_cuda, 0, 2, 3, 7, 71);
}
END_TEST

START_TEST(test_naive_decode_cuda_reads_fp8_rows_as_formats_unpacks_them)
{
    check_fp8("naive", mla_scores_naive, mla_values_naive, mla_decode_naive_cuda, 4, 1, 2, 6, 72);
}
END_TEST

/* ---- the attention alone, both versions, against its definition in double ------------------------------ */

/* One error bound per head, from the data (γ_n = n·u, u = 2^-24, Higham): a score sums 576 products in
 * float, so it errs by at most γ_576·A·scale, A = max_j Σ_c |q̂_c r_jc|; a softmax whose scores move by
 * at most δ moves a weighted average by at most 2δ·max|v| (weights change by a factor within e^{±δ});
 * the value sums add γ_N·max|v|. The tensor-core version also rounds its weights to bf16 (relative
 * 2^-9), which moves a weighted average by at most 2^-9·(max v − min v) ≤ 2^-8·max|v|; its q̂ here is
 * bf16-exact, so its products are exact. */
static double attention_bound(const double *q, const double *rows, size_t N, double scale, int bf16_weights)
{
    const double u = 0x1p-24;
    double A = 0, vmax = 0;
    for (size_t j = 0; j < N; j++) {
        double a = 0;
        for (size_t c = 0; c < 576; c++) a += fabs(q[c] * rows[j * 576 + c]);
        A = fmax(A, a);
        for (size_t c = 0; c < 512; c++) vmax = fmax(vmax, fabs(rows[j * 576 + c]));
    }
    return (2 * 576 * u * A * scale + N * u + (bf16_weights ? 0x1p-8 : 0)) * vmax;
}

/* o[512] = softmax_j(q·r_j·scale) · r_j[:512] in double */
static void attention_definition(double *o, const double *q, const double *rows, size_t N, double scale)
{
    double *s = malloc(N * sizeof *s), m = -INFINITY, sum = 0;
    for (size_t j = 0; j < N; j++) {
        s[j] = 0;
        for (size_t c = 0; c < 576; c++) s[j] += q[c] * rows[j * 576 + c];
        s[j] *= scale;
        m = fmax(m, s[j]);
    }
    for (size_t j = 0; j < N; j++) sum += s[j] = exp(s[j] - m);
    for (size_t c = 0; c < 512; c++) {
        o[c] = 0;
        for (size_t j = 0; j < N; j++) o[c] += s[j] / sum * rows[j * 576 + c];
    }
    free(s);
}

typedef int (*attend_fn)(float *, const float *, const mla_config *, mla_cache_cuda *);

/* B sequences of N random rows in a cache of `store`, H heads of bf16-exact queries: the attention
 * against the definition over the values the cache holds. 45 rows in splits of 40 leave 5 in the last. */
static void check_attention(kv_cuda_store store, attend_fn fn, size_t H, int bf16_weights, const char *what)
{
    enum { B = 2, N = 45, SPLIT = 40, W = 576 };
    mla_config c = {.d = 32, .n_heads = H, .kv_lora_rank = 512, .qk_nope = 8, .qk_rope = 64, .v_head = 8,
                    .norm_eps = 1e-6, .softmax_scale = 1.0 / sqrt(72.0)};
    CUDA_OK(kvl_rope_init(&c.rope, 64, 1e4));
    float *rows = inputs(B * N * W, 81), *q = inputs(B * H * W, 82), *got = malloc(B * H * 512 * sizeof(float));
    double *held = malloc(B * N * W * sizeof(double)), *qd = malloc(W * sizeof(double));
    double *want = malloc(512 * sizeof(double));
    for (size_t i = 0; i < (size_t)B * H * W; i++) q[i] = kvf_bf16_decode(kvf_bf16_encode(q[i]));
    for (size_t r = 0; r < (size_t)B * N; r++) { /* what the cache holds of each row */
        float v[W];
        uint8_t packed[sizeof(kvf_row_v32_main)];
        memcpy(v, rows + r * W, sizeof v);
        if (store == KV_CUDA_V32_MAIN) {
            CUDA_OK(kvf_row_pack(KVF_ROW_V32_MAIN, packed, v));
            CUDA_OK(kvf_row_unpack(KVF_ROW_V32_MAIN, v, packed));
        }
        for (size_t k = 0; k < W; k++)
            held[r * W + k] = store == KV_CUDA_BF16 ? kvf_bf16_decode(kvf_bf16_encode(v[k])) : v[k];
    }
    float *drows = dev_upload(rows, B * N * W * sizeof(float)), *dq = dev_upload(q, B * H * W * sizeof(float));
    float *dout = dev_upload(NULL, B * H * 512 * sizeof(float));
    char name[160];
    FOR_EACH_ORDER(order) {
        mla_cache_cuda dev;
        CUDA_OK(mla_cache_init_cuda(&dev, &c, N, store, B));
        dev.split = SPLIT;
        CUDA_OK(mla_cache_append_cuda(&dev, &c, drows, N));
        CUDA_OK(fn(dout, dq, &c, &dev));
        dev_download(got, dout, B * H * 512 * sizeof(float));
        for (size_t b = 0; b < B; b++)
            for (size_t h = 0; h < H; h++) {
                for (size_t k = 0; k < W; k++) qd[k] = q[(b * H + h) * W + k];
                attention_definition(want, qd, held + b * N * W, N, c.softmax_scale);
                const double tol = attention_bound(qd, held + b * N * W, N, c.softmax_scale, bf16_weights);
                snprintf(name, sizeof name, "%s, sequence %zu head %zu (%s)", what, b, h, order);
                const double min_cos = bf16_weights ? MIN_COS_BF16(N) : MIN_COS;
                kvl_expect_close(name, got + (b * H + h) * 512, want, 512, tol, 0, min_cos);
            }
        mla_cache_free_cuda(&dev);
    }
    kvl_cuda_free(drows), kvl_cuda_free(dq), kvl_cuda_free(dout);
    free(rows), free(q), free(got), free(held), free(qd), free(want);
}

START_TEST(test_attention_cuda_matches_the_definition_over_bf16_and_fp8_rows)
{
    check_attention(KV_CUDA_BF16, mla_attend_absorbed_cuda, 5, 0, "float kernel, bf16 rows");
    check_attention(KV_CUDA_V32_MAIN, mla_attend_absorbed_cuda, 3, 0, "float kernel, fp8 rows");
}
END_TEST

START_TEST(test_tensor_core_attention_matches_the_definition_within_bf16_weights)
{
    /* 70 heads: one block of 64 and part of a second */
    check_attention(KV_CUDA_BF16, mla_attend_absorbed_mma_cuda, 70, 1, "tensor cores, bf16 rows");
    check_attention(KV_CUDA_V32_MAIN, mla_attend_absorbed_mma_cuda, 70, 1, "tensor cores, fp8 rows");
    check_attention(KV_CUDA_BF16, mla_attend_absorbed_mma_simple_cuda, 70, 1, "simple tensor cores, bf16 rows");
    check_attention(KV_CUDA_V32_MAIN, mla_attend_absorbed_mma_simple_cuda, 70, 1, "simple tensor cores, fp8 rows");
}
END_TEST

/* The pipelined tensor-core kernel (mla_attend_absorbed_mma_cuda) against the simple one over the same
 * cache: 128 heads (two blocks of 64), a window of 90 whose ring wraps inside a tile, splits of 40 (a
 * whole tile and a partial one; the last split 10 rows), B 2, in every thread order. Both round the same
 * tiles, scores and weights and sum the same products in the same order, so their partial sums, maxima
 * and outputs before the division agree exactly; only each split's softmax denominator is added in
 * another order, a sum of at most 40 positive terms, each within γ_40 ≈ 2.4e-6 of the exact one. The
 * merge divides by their weighted sum, so each output moves by at most 2γ_40 relative, plus the
 * division's own rounding: rtol 1e-5, atol 1e-6 on outputs of O(1). */
static void check_pipelined_against_simple(kv_cuda_store store, const char *what)
{
    enum { B = 2, N = 150, CHUNK = 30, W = 90, SPLIT = 40, D = 576, H = 128 };
    mla_config c = {.d = 32, .n_heads = H, .kv_lora_rank = 512, .qk_nope = 8, .qk_rope = 64, .v_head = 8,
                    .window = W, .norm_eps = 1e-6, .softmax_scale = 1.0 / sqrt(72.0)};
    CUDA_OK(kvl_rope_init(&c.rope, 64, 1e4));
    float *q = inputs(B * H * D, 92), *got = malloc(B * H * 512 * sizeof(float));
    float *simple = malloc(B * H * 512 * sizeof(float));
    double *want = malloc(B * H * 512 * sizeof(double));
    float *dq = dev_upload(q, B * H * D * sizeof(float)), *dout = dev_upload(NULL, B * H * 512 * sizeof(float));
    float *chunks[N / CHUNK];
    for (size_t k = 0; k < N / CHUNK; k++) {
        float *rows = inputs(B * CHUNK * D, 93 + k);
        chunks[k] = dev_upload(rows, B * CHUNK * D * sizeof(float));
        free(rows);
    }
    char name[160];
    FOR_EACH_ORDER(order) {
        mla_cache_cuda dev;
        CUDA_OK(mla_cache_init_cuda(&dev, &c, N, store, B));
        dev.split = SPLIT;
        for (size_t k = 0; k < N / CHUNK; k++) CUDA_OK(mla_cache_append_cuda(&dev, &c, chunks[k], CHUNK));
        CUDA_OK(mla_attend_absorbed_mma_simple_cuda(dout, dq, &c, &dev));
        dev_download(simple, dout, B * H * 512 * sizeof(float));
        CUDA_OK(mla_attend_absorbed_mma_cuda(dout, dq, &c, &dev));
        dev_download(got, dout, B * H * 512 * sizeof(float));
        for (size_t i = 0; i < (size_t)B * H * 512; i++) want[i] = simple[i];
        snprintf(name, sizeof name, "pipelined against simple, %s (%s)", what, order);
        kvl_expect_close(name, got, want, (size_t)B * H * 512, 1e-6, 1e-5, 0);
        mla_cache_free_cuda(&dev);
    }
    for (size_t k = 0; k < N / CHUNK; k++) kvl_cuda_free(chunks[k]);
    kvl_cuda_free(dq), kvl_cuda_free(dout);
    free(q), free(got), free(simple), free(want);
}

START_TEST(test_pipelined_tensor_core_kernel_matches_the_simple_one_at_128_heads)
{
    check_pipelined_against_simple(KV_CUDA_BF16, "bf16 rows");
    check_pipelined_against_simple(KV_CUDA_V32_MAIN, "fp8 rows");
}
END_TEST

/* The pipelined kernel's own splits: whole tiles covering the rows; one wave of blocks (splits × sequences
 * × head blocks within the SMs, or one split when the blocks alone exceed them); every split's row bytes
 * at least four times its partial sums (64 heads × 512 floats written and read again) when there are
 * several; and, given rows enough, as many splits as that wave holds. */
START_TEST(test_pipelined_splits_fill_one_wave_and_keep_partials_under_a_quarter)
{
    const size_t sms = (size_t)kvl_cuda_sm_count(), partial = 2 * 64 * 512 * sizeof(float);
    const size_t ns[] = {1, 31, 45, 1000, 4096, 65536, 1 << 20}, batches[] = {1, 2, 64, 300}, heads[] = {64, 128};
    const size_t row_bytes[] = {1152, 656};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++)
        for (size_t j = 0; j < sizeof batches / sizeof *batches; j++)
            for (size_t k = 0; k < 2; k++)
                for (size_t r = 0; r < 2; r++) {
                    const size_t n = ns[i], blocks = batches[j] * heads[k] / 64;
                    const size_t split = mla_mma_split_cuda(n, batches[j], heads[k], row_bytes[r]);
                    const size_t n_splits = (n + split - 1) / split;
                    ck_assert_msg(split % 32 == 0 && split > 0, "n %zu: split %zu", n, split);
                    ck_assert_msg(n_splits == 1 || n_splits * blocks <= sms, "n %zu, %zu blocks: %zu splits", n,
                                  blocks, n_splits);
                    ck_assert_msg(n_splits == 1 || split * row_bytes[r] >= 4 * partial,
                                  "n %zu: %zu rows of %zu bytes a split", n, split, row_bytes[r]);
                    if (n >= 4 * partial / row_bytes[r] * (sms + 1) && blocks < sms)
                        ck_assert_msg(n_splits == sms / blocks, "n %zu, %zu blocks: %zu splits, %zu fit", n, blocks,
                                      n_splits, sms / blocks);
                }
}
END_TEST

START_TEST(test_tensor_core_attention_rejects_other_widths_and_float_rows)
{
    layer L;
    layer_make(&L, 2, 0, 32, 8, 8, 8, 0, 83);
    float *d = dev_upload(NULL, 2 * 576 * sizeof(float));
    mla_cache_cuda dev;
    CUDA_OK(mla_cache_init_cuda(&dev, &L.c, 4, KV_CUDA_BF16, 1));
    CUDA_OK(mla_cache_append_cuda(&dev, &L.c, d, 1));
    ck_assert_int_eq(mla_attend_absorbed_mma_cuda(d, d, &L.c, &dev), KVL_EINVAL); /* Dc 32 */
    mla_cache_free_cuda(&dev);
    kvl_cuda_free(d);
    layer_free(&L);
}
END_TEST

START_TEST(test_cache_cuda_rejects_what_the_ref_rejects)
{
    layer L;
    layer_make(&L, 2, 0, 32, 8, 8, 8, 0, 73);
    mla_config other = L.c;
    other.kv_lora_rank = 16;
    float *dx = dev_upload(NULL, 64 * sizeof(float)), *dout = dev_upload(NULL, 64 * sizeof(float));
    mla_cache_cuda dev;
    ck_assert_int_eq(mla_cache_init_cuda(&dev, &L.c, 4, KV_CUDA_V32_MAIN, 1), KVL_EINVAL); /* 40 wide, not 576 */
    CUDA_OK(mla_cache_init_cuda(&dev, &L.c, 1, KV_CUDA_F32, 1));
    ck_assert_int_eq(mla_decode_absorbed_cuda(dout, &other, &L.dw, &dev, dx), KVL_EINVAL);
    ck_assert_int_eq(mla_attend_absorbed_cuda(dout, dx, &L.c, &dev), KVL_EINVAL); /* nothing held */
    CUDA_OK(mla_decode_naive_cuda(dout, &L.c, &L.dw, &dev, dx));
    ck_assert_int_eq(mla_decode_naive_cuda(dout, &L.c, &L.dw, &dev, dx), KVL_EINVAL); /* full */
    mla_cache_free_cuda(&dev);
    kvl_cuda_free(dx);
    kvl_cuda_free(dout);
    layer_free(&L);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = cuda_suite("cuda_mla");
    if (!cuda_present()) return s;
    TCase *tf = tcase_create("float");
    tcase_set_timeout(tf, KVL_TEST_TIMEOUT);
    tcase_add_test(tf, test_absorbed_decode_cuda_matches_mla_decode_absorbed_when_splits_are_ragged);
    tcase_add_test(tf, test_naive_decode_cuda_matches_mla_decode_naive_when_the_window_wraps);
    tcase_add_test(tf, test_both_forms_cuda_match_the_ref_when_the_cache_is_bf16);
    tcase_add_test(tf, test_batched_decode_cuda_matches_one_ref_decode_per_sequence);
    tcase_add_test(tf, test_cache_cuda_rejects_what_the_ref_rejects);
    suite_add_tcase(s, tf);
    TCase *ta = tcase_create("attention");
    tcase_set_timeout(ta, KVL_TEST_TIMEOUT);
    tcase_add_test(ta, test_attention_cuda_matches_the_definition_over_bf16_and_fp8_rows);
    tcase_add_test(ta, test_tensor_core_attention_matches_the_definition_within_bf16_weights);
    tcase_add_test(ta, test_pipelined_tensor_core_kernel_matches_the_simple_one_at_128_heads);
    tcase_add_test(ta, test_pipelined_splits_fill_one_wave_and_keep_partials_under_a_quarter);
    tcase_add_test(ta, test_tensor_core_attention_rejects_other_widths_and_float_rows);
    suite_add_tcase(s, ta);
    TCase *t8 = tcase_create("fp8");
    tcase_set_timeout(t8, KVL_TEST_TIMEOUT);
    tcase_add_test(t8, test_absorbed_decode_cuda_reads_fp8_rows_as_formats_unpacks_them);
    tcase_add_test(t8, test_naive_decode_cuda_reads_fp8_rows_as_formats_unpacks_them);
    suite_add_tcase(s, t8);
    return s;
}
