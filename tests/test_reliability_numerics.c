/* Numerical robustness of every module at the edges a sequence reaches: one token, a context shorter
 * than the window, a top-k with no legal position or larger than the context, all-zero inputs and
 * blocks, and extreme but finite activations. Every path (whole-sequence forward, chunked prefill,
 * decode) and every cache store (float32, bf16, the deployed V3.2 rows) is run; none may give a NaN.
 *
 * Oracles: the double definitions of tests/oracle_attention.h where the answer is not trivial (one
 * token, a short context), exact zeros where it is (an all-zero input makes every projection, every
 * RMSNorm and every value zero), and for the quantisers the bound every nearest-rounding scheme keeps:
 * |x̂ − x| ≤ |x|, with ±0 kept exactly.
 *
 * "Extreme" is the E4M3 bound: every element ±448, the largest value an FP8 cache code holds, so
 * each row's norm is 448·√d. The layer stack normalises before attending, so it is also run at ±2^126,
 * where only the residual stream is large (HUGE_RESIDUAL). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "common.h"
#include "config.h"
#include "dsa.h"
#include "element.h"
#include "mha.h"
#include "mla.h"
#include "model.h"
#include "oracle_attention.h"
#include "rng.h"
#include "status.h"
#include "topk.h"
#include "swa.h"

#define E4M3_MAX 448.0f
/* The stack's residual stream at ±2^126: its norm, 2^126·√64 = 2^129, is past float32 while every
 * element is finite, so RMSNorm must square in double. Each branch then sees unit-scale inputs and adds
 * a few units at most, far below half an ulp of 2^126 (2^102): the stream must come out bit for bit. */
#define HUGE_RESIDUAL 0x1p126f
#define T_SHORT 5                /* a context shorter than the window */
#define W_TOY 8
#define T_TOY 12

static void ok(int rc) { ck_assert_msg(rc == KVL_OK, "status %d: %s", rc, kvl_error()); }

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size);
    ck_assert(p != NULL);
    return p;
}

static void expect_finite(const char *what, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(isfinite(x[i]), "%s: element %zu is %g", what, i, (double)x[i]);
}

static void expect_zero(const char *what, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) ck_assert_msg(x[i] == 0.0f, "%s: element %zu is %g, not 0", what, i, (double)x[i]);
}

/* x[n] in one of the input families */
typedef enum { INPUT_NORMAL, INPUT_ZERO, INPUT_E4M3_BOUND, INPUT_HUGE } input_kind;

static float *inputs(input_kind kind, size_t n, uint64_t seed)
{
    float *x = xcalloc(n, sizeof *x);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    if (kind == INPUT_ZERO) return x;
    kvl_rng_normal_f32(&rng, x, n, 1.0);
    const float bound = kind == INPUT_E4M3_BOUND ? E4M3_MAX : HUGE_RESIDUAL;
    if (kind != INPUT_NORMAL)
        for (size_t i = 0; i < n; i++) x[i] = copysignf(bound, x[i]);
    return x;
}

/* ---- MHA (with its window ring) -------------------------------------------------------------------- */

typedef struct {
    mha_config c;
    mha_weights w;
    size_t kv_of[4];
} mha_toy;

static void mha_make(mha_toy *L, size_t W, uint64_t seed)
{
    ok(mha_config_init(&L->c, 64, 4, 2, 16, W, 1e4));
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ok(mha_weights_init_random(&L->w, &L->c, &rng));
    for (size_t h = 0; h < 4; h++) L->kv_of[h] = h / 2;
}

static double *mha_oracle(const mha_toy *L, size_t W, const float *x, size_t T)
{
    oracle_mha_layer o = {.d = 64, .H = 4, .Hkv = 2, .Dh = 16, .W = W, .theta = L->c.rope.theta, .kv_of = L->kv_of,
                          .w_q = L->w.w_q, .w_k = L->w.w_k, .w_v = L->w.w_v, .w_o = L->w.w_o};
    double *xd = oracle_widen(x, T * 64), *out = oracle_alloc(T * 64 * sizeof *out);
    oracle_mha(out, &o, xd, T);
    free(xd);
    return out;
}

/* out[T][d] from every path: [0] forward, [1] one prefill, [2..3] token-by-token decode on f32 and bf16. */
enum { N_MHA_PATHS = 4 };
static void mha_paths(float *out[N_MHA_PATHS], const mha_toy *L, const float *x, size_t T)
{
    const size_t d = L->c.d;
    for (int p = 0; p < N_MHA_PATHS; p++) out[p] = xcalloc(T * d, sizeof(float));
    ok(mha_forward(out[0], &L->c, &L->w, x, T));
    mha_cache cache;
    ok(mha_cache_init(&cache, &L->c, T, KV_STORE_F32));
    ok(mha_prefill(out[1], &L->c, &L->w, &cache, x, T));
    mha_cache_free(&cache);
    const kv_store stores[] = {KV_STORE_F32, KV_STORE_BF16};
    for (int s = 0; s < 2; s++) {
        ok(mha_cache_init(&cache, &L->c, T, stores[s]));
        for (size_t t = 0; t < T; t++) ok(mha_decode(out[2 + s] + t * d, &L->c, &L->w, &cache, x + t * d));
        mha_cache_free(&cache);
    }
}

static void paths_free(float **out, int n)
{
    for (int p = 0; p < n; p++) free(out[p]);
}

/* Tolerance against the double definition (tests/oracle_attention.h): the path d + Dh + T + H·Dh. */
static double mha_tol(size_t T) { return oracle_f32_tol(64 + 16 + T + 64); }

/* bf16 keeps 8 significant bits: the cached K and V move by 2^-8 of themselves, and a logit by the sum
 * of both over Dh terms; for inputs N(0,1) that stays far below 2^-4 of the output's scale. */
#define BF16_PATH_TOL 0x1p-4

START_TEST(test_one_token_and_a_short_context_match_the_definition_in_mha)
{
    static const size_t lengths[] = {1, T_SHORT};
    for (size_t k = 0; k < 2; k++) {
        const size_t T = lengths[k];
        mha_toy L;
        mha_make(&L, W_TOY, 100 + k);
        float *x = inputs(INPUT_NORMAL, T * 64, 200 + k), *out[N_MHA_PATHS];
        double *want = mha_oracle(&L, 0, x, T);   /* the window is wider than the context: no window */
        mha_paths(out, &L, x, T);
        static const char *const names[] = {"mha forward", "mha prefill", "mha decode f32", "mha decode bf16"};
        for (int p = 0; p < N_MHA_PATHS; p++) {
            const double tol = p == 3 ? BF16_PATH_TOL : mha_tol(T);
            kvl_expect_close(names[p], out[p], want, T * 64, tol, tol, 1 - tol);
        }
        paths_free(out, N_MHA_PATHS);
        free(want);
        free(x);
        mha_weights_free(&L.w);
    }
}
END_TEST

/* ---- MLA ---------------------------------------------------------------------------------------------- */

typedef struct {
    mla_config c;
    mla_weights w;
} mla_toy;

static void mla_make(mla_toy *L, size_t q_lora_rank, size_t W, uint64_t seed)
{
    L->c = (mla_config){.d = 64, .n_heads = 4, .q_lora_rank = q_lora_rank, .kv_lora_rank = 32, .qk_nope = 16,
                        .qk_rope = 8, .v_head = 16, .window = W, .norm_eps = 1e-6};
    ok(kvl_rope_init_yarn(&L->c.rope, 8, 1e4, 40, 4096, 32, 1));
    L->c.softmax_scale = kvl_yarn_softmax_scale(16 + 8, 40, 1);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ok(mla_weights_init_random(&L->w, &L->c, &rng));
}

static double *mla_oracle(const mla_toy *L, size_t W, const float *x, size_t T)
{
    const mla_config *c = &L->c;
    oracle_mla_layer o = {.d = c->d, .H = c->n_heads, .Dq = c->q_lora_rank, .Dc = c->kv_lora_rank,
                          .Dnope = c->qk_nope, .Dr = c->qk_rope, .Dv = c->v_head, .W = W, .eps = c->norm_eps,
                          .scale = c->softmax_scale, .theta = c->rope.theta, .w_dq = L->w.w_dq,
                          .q_norm = L->w.q_norm, .w_uq = L->w.w_uq, .w_q = L->w.w_q, .w_dkv = L->w.w_dkv,
                          .kv_norm = L->w.kv_norm, .w_ukv = L->w.w_ukv, .w_o = L->w.w_o};
    double *xd = oracle_widen(x, T * c->d), *out = oracle_alloc(T * c->d * sizeof *out);
    oracle_mla(out, &o, xd, T);
    free(xd);
    return out;
}

/* [0] forward, [1] prefill, [2..5] decode naive/absorbed on f32 and bf16 */
enum { N_MLA_PATHS = 6 };
static void mla_paths(float *out[N_MLA_PATHS], const mla_toy *L, const float *x, size_t T)
{
    const size_t d = L->c.d;
    for (int p = 0; p < N_MLA_PATHS; p++) out[p] = xcalloc(T * d, sizeof(float));
    ok(mla_forward(out[0], &L->c, &L->w, x, T));
    mla_cache cache;
    ok(mla_cache_init(&cache, &L->c, T, KV_STORE_F32));
    ok(mla_prefill(out[1], &L->c, &L->w, &cache, x, T));
    mla_cache_free(&cache);
    const kv_store stores[] = {KV_STORE_F32, KV_STORE_BF16};
    for (int s = 0; s < 2; s++)
        for (int form = 0; form < 2; form++) {
            ok(mla_cache_init(&cache, &L->c, T, stores[s]));
            float *o = out[2 + 2 * s + form];
            for (size_t t = 0; t < T; t++)
                ok(form ? mla_decode_absorbed(o + t * d, &L->c, &L->w, &cache, x + t * d)
                        : mla_decode_naive(o + t * d, &L->c, &L->w, &cache, x + t * d));
            mla_cache_free(&cache);
        }
}

/* path: W_DQ, RMSNorm and W_UQ (Dq' each), W_DKV (d), W_UK (Dc), the score (Dnope+Dr), T keys, W_UV (Dc),
 * W_O (H·Dv) */
static double mla_tol(size_t T) { return oracle_f32_tol(64 + 2 * 32 + 64 + 32 + 24 + T + 32 + 64); }

START_TEST(test_one_token_and_a_short_context_match_the_definition_in_mla)
{
    static const size_t lengths[] = {1, T_SHORT}, q_ranks[] = {32, 0};
    for (size_t k = 0; k < 2; k++)
        for (size_t r = 0; r < 2; r++) {
            const size_t T = lengths[k];
            mla_toy L;
            mla_make(&L, q_ranks[r], W_TOY, 300 + 2 * k + r);
            float *x = inputs(INPUT_NORMAL, T * 64, 400 + k), *out[N_MLA_PATHS];
            double *want = mla_oracle(&L, 0, x, T);
            mla_paths(out, &L, x, T);
            static const char *const names[] = {"mla forward", "mla prefill", "mla naive f32", "mla absorbed f32",
                                                "mla naive bf16", "mla absorbed bf16"};
            for (int p = 0; p < N_MLA_PATHS; p++) {
                const double tol = p >= 4 ? BF16_PATH_TOL : mla_tol(T);
                kvl_expect_close(names[p], out[p], want, T * 64, tol, tol, 1 - tol);
            }
            paths_free(out, N_MLA_PATHS);
            free(want);
            free(x);
            mla_weights_free(&L.w);
        }
}
END_TEST

/* ---- the window ring on its own ----------------------------------------------------------------------- */

START_TEST(test_a_ring_wider_than_the_context_holds_every_row_from_the_first)
{
    kv_ring r;
    ok(kv_ring_init(&r, W_TOY, 64, 3, KV_STORE_F32));
    float rows[T_SHORT * 3], back[T_SHORT * 3];
    for (size_t i = 0; i < T_SHORT * 3; i++) rows[i] = (float)i - 7.5f;
    ok(kv_ring_append(&r, rows, 1));
    ck_assert_uint_eq(kv_ring_oldest(&r), 0);
    ck_assert_uint_eq(kv_ring_held(&r), 1);
    ok(kv_ring_append(&r, rows + 3, T_SHORT - 1));
    ck_assert_uint_eq(kv_ring_held(&r), T_SHORT);
    ok(kv_ring_read(back, &r, 0, T_SHORT));
    ck_assert(memcmp(back, rows, sizeof rows) == 0);
    ck_assert_int_eq(kv_ring_read(back, &r, 0, T_SHORT + 1), KVL_EINVAL);   /* position 5 is not held */
    kv_ring_free(&r);
    float mask[T_SHORT * T_SHORT];
    swa_mask_rows(mask, 0, T_SHORT, 0, T_SHORT, W_TOY);
    for (size_t t = 0; t < T_SHORT; t++)
        for (size_t j = 0; j < T_SHORT; j++)
            ck_assert_msg(mask[t * T_SHORT + j] == (j <= t ? 0.0f : -INFINITY), "mask[%zu][%zu]", t, j);
}
END_TEST

/* ---- the layer stack --------------------------------------------------------------------------------- */

static const char GQA_SWA_STACK[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 16, \"sliding_window\": 8}";
static const char MLA_SWA_STACK[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"q_lora_rank\": 32,"
    " \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 16,"
    " \"sliding_window\": 8}";

typedef struct {
    model_config c;
    model_weights w;
} stack;

static void stack_make(stack *s, const char *json, model_mlp mlp, uint64_t seed)
{
    kvl_model m;
    ok(kvl_model_parse(&m, json, strlen(json), "toy.json"));
    ok(model_config_from_model(&s->c, &m, 32, mlp));
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ok(model_weights_init_random(&s->w, &s->c, &rng));
}

static void stack_free(stack *s)
{
    model_weights_free(&s->w);
    model_config_free(&s->c);
}

/* [0] forward, [1] prefill, [2..3] decode on f32 and bf16 */
enum { N_STACK_PATHS = 4 };
static void stack_paths(float *out[N_STACK_PATHS], const stack *s, const float *x, size_t T)
{
    const size_t d = s->c.d;
    for (int p = 0; p < N_STACK_PATHS; p++) out[p] = xcalloc(T * d, sizeof(float));
    ok(model_forward(out[0], &s->c, &s->w, x, T));
    model_cache cache;
    ok(model_cache_init(&cache, &s->c, T, KV_STORE_F32));
    ok(model_prefill(out[1], &s->c, &s->w, &cache, x, T));
    model_cache_free(&cache);
    const kv_store stores[] = {KV_STORE_F32, KV_STORE_BF16};
    for (int k = 0; k < 2; k++) {
        ok(model_cache_init(&cache, &s->c, T, stores[k]));
        for (size_t t = 0; t < T; t++) ok(model_decode(out[2 + k] + t * d, &s->c, &s->w, &cache, x + t * d));
        model_cache_free(&cache);
    }
}

/* ---- DSA ------------------------------------------------------------------------------------------------ */

static dsa_config dsa_toy(size_t K)
{
    dsa_config c = {.mla = {.d = 64, .n_heads = 4, .q_lora_rank = 32, .kv_lora_rank = 32, .qk_nope = 16,
                            .qk_rope = 8, .v_head = 16, .norm_eps = 1e-6},
                    .index_n_heads = 4, .index_head_dim = 16, .index_topk = K, .index_norm_eps = DSA_INDEX_NORM_EPS};
    ok(kvl_rope_init_yarn(&c.mla.rope, 8, 1e4, 40, 4096, 32, 1));
    c.mla.softmax_scale = kvl_yarn_softmax_scale(16 + 8, 40, 1);
    return c;
}

/* the widths of the deployed V3.2 rows (Dc 512, Dr 64, DI 128), everything else small */
static dsa_config dsa_native(size_t K)
{
    dsa_config c = {.mla = {.d = 64, .n_heads = 2, .q_lora_rank = 32, .kv_lora_rank = 512, .qk_nope = 16,
                            .qk_rope = 64, .v_head = 16, .norm_eps = 1e-6},
                    .index_n_heads = 2, .index_head_dim = 128, .index_topk = K, .index_norm_eps = DSA_INDEX_NORM_EPS};
    ok(kvl_rope_init_yarn(&c.mla.rope, 64, 1e4, 40, 4096, 32, 1));
    c.mla.softmax_scale = kvl_yarn_softmax_scale(16 + 64, 40, 1);
    return c;
}

/* [0] forward, [1] prefill, [2] decode masked, [3] decode gather, on the cache format fmt */
enum { N_DSA_PATHS = 4 };
static void dsa_paths(float *out[N_DSA_PATHS], const dsa_config *c, const dsa_weights *w, const float *x, size_t T,
                      dsa_cache_format fmt)
{
    const size_t d = c->mla.d;
    for (int p = 0; p < N_DSA_PATHS; p++) out[p] = xcalloc(T * d, sizeof(float));
    ok(dsa_forward(out[0], NULL, c, w, x, T));
    dsa_cache cache;
    ok(dsa_cache_init(&cache, c, T, fmt));
    ok(dsa_prefill(out[1], NULL, c, w, &cache, x, T));
    dsa_cache_free(&cache);
    for (int form = 0; form < 2; form++) {
        ok(dsa_cache_init(&cache, c, T, fmt));
        for (size_t t = 0; t < T; t++)
            ok(form ? dsa_decode_gather(out[2 + form] + t * d, NULL, c, w, &cache, x + t * d)
                    : dsa_decode_masked(out[2 + form] + t * d, NULL, c, w, &cache, x + t * d));
        dsa_cache_free(&cache);
    }
}

START_TEST(test_dsa_with_k_above_the_context_is_dense_mla_from_one_token_on)
{
    static const size_t lengths[] = {1, T_SHORT};
    for (size_t k = 0; k < 2; k++) {
        const size_t T = lengths[k];
        dsa_config c = dsa_toy(4 * T_SHORT);
        dsa_weights w;
        kvl_rng rng;
        kvl_rng_seed(&rng, 500 + k);
        ok(dsa_weights_init_random(&w, &c, &rng));
        float *x = inputs(INPUT_NORMAL, T * 64, 600 + k), *out[N_DSA_PATHS];
        int32_t *sel = xcalloc(T * c.index_topk, sizeof *sel);
        mla_toy as_mla = {.c = c.mla, .w = w.mla};
        double *want = mla_oracle(&as_mla, 0, x, T);
        dsa_paths(out, &c, &w, x, T, DSA_CACHE_F32);
        static const char *const names[] = {"dsa forward", "dsa prefill", "dsa decode masked", "dsa decode gather"};
        for (int p = 0; p < N_DSA_PATHS; p++)
            kvl_expect_close(names[p], out[p], want, T * 64, mla_tol(T), mla_tol(T), 0);
        /* each query t selects its t + 1 positions, then −1 up to K */
        float *o = xcalloc(T * 64, sizeof *o);
        ok(dsa_forward(o, sel, &c, &w, x, T));
        for (size_t t = 0; t < T; t++)
            for (size_t j = 0; j < c.index_topk; j++)
                ck_assert_int_eq(sel[t * c.index_topk + j], j <= t ? (int32_t)j : -1);
        free(o);
        paths_free(out, N_DSA_PATHS);
        free(want);
        free(sel);
        free(x);
        dsa_weights_free(&w);
    }
}
END_TEST

/* q[2][H][Dnope+Dr] and rows[N][Dc+Dr], standard normal: two queries of c over N key rows */
static void two_queries(float **q, float **rows, const dsa_config *c, size_t N, kvl_rng *rng)
{
    const size_t Dq = 2 * c->mla.n_heads * (c->mla.qk_nope + c->mla.qk_rope), Dw = c->mla.kv_lora_rank + c->mla.qk_rope;
    *q = xcalloc(Dq, sizeof **q);
    *rows = xcalloc(N * Dw, sizeof **rows);
    kvl_rng_normal_f32(rng, *q, Dq, 1.0);
    kvl_rng_normal_f32(rng, *rows, N * Dw, 1.0);
}

/* A query whose index scores are all −inf or NaN has no legal position: its selection is all −1 and its
 * attention output exactly 0 in both formulations, never the NaN of a softmax over nothing. */
START_TEST(test_dsa_with_no_legal_position_selects_nothing_and_attends_to_zero)
{
    enum { N = 6, K = 4 };
    dsa_config c = dsa_toy(K);
    dsa_weights w;
    kvl_rng rng;
    kvl_rng_seed(&rng, 700);
    ok(dsa_weights_init_random(&w, &c, &rng));
    float I[2 * N];
    for (size_t j = 0; j < N; j++) I[j] = -INFINITY, I[N + j] = NAN;
    int32_t sel[2 * K];
    ok(kvl_topk(sel, I, 2, N, K));
    for (size_t k = 0; k < 2 * K; k++) ck_assert_int_eq(sel[k], -1);
    const size_t H = c.mla.n_heads;
    float *q, *rows;
    two_queries(&q, &rows, &c, N, &rng);
    float *o = xcalloc(2 * H * c.mla.v_head, sizeof *o);
    ok(dsa_attend_gather(o, &c, &w, q, rows, sel, 2, N));
    expect_zero("gather with no legal position", o, 2 * H * c.mla.v_head);
    ok(dsa_attend_masked_absorbed(o, &c, &w, q, rows, sel, 2, N));
    expect_zero("masked absorbed with no legal position", o, 2 * H * c.mla.v_head);
    ok(dsa_attend_masked_naive(o, &c, &w, q, rows, sel, 2, N));
    expect_zero("masked naive with no legal position", o, 2 * H * c.mla.v_head);
    ck_assert_int_eq(kvl_topk(sel, I, 2, N, 0), KVL_EINVAL);
    free(q);
    free(rows);
    free(o);
    dsa_weights_free(&w);
}
END_TEST

/* K far above the context N: the gather form reads at most min(K, N) rows and gives the masked form's
 * output (test_ch04_dsa proves that one against the definition), whatever order the picks come in; a
 * position picked twice is refused, as the masked form would read it once. */
START_TEST(test_dsa_gather_with_k_above_the_context_reads_each_row_once)
{
    enum { N = 3, K = 4096 };
    dsa_config c = dsa_toy(K);
    dsa_weights w;
    kvl_rng rng;
    kvl_rng_seed(&rng, 710);
    ok(dsa_weights_init_random(&w, &c, &rng));
    const size_t n_out = 2 * c.mla.n_heads * c.mla.v_head;
    int32_t *sel = xcalloc(2 * K, sizeof *sel);
    for (size_t k = 0; k < 2 * K; k++) sel[k] = -1;
    sel[K - 1] = 2, sel[7] = 0, sel[1000] = 1;   /* query 0: all three rows, scattered */
    sel[K + 5] = 1;                              /* query 1: one row */
    float *q, *rows;
    two_queries(&q, &rows, &c, N, &rng);
    float *got = xcalloc(n_out, sizeof *got), *ref = xcalloc(n_out, sizeof *ref);
    double *want = xcalloc(n_out, sizeof *want);
    ok(dsa_attend_gather(got, &c, &w, q, rows, sel, 2, N));
    ok(dsa_attend_masked_naive(ref, &c, &w, q, rows, sel, 2, N));
    for (size_t i = 0; i < n_out; i++) want[i] = ref[i];
    kvl_expect_close("gather against masked, K above N", got, want, n_out, 1e-5, 1e-5, 0);
    sel[K + 9] = 1;
    kvl_clear_error();
    ck_assert_int_eq(dsa_attend_gather(got, &c, &w, q, rows, sel, 2, N), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "query 1 selects position 1 twice") != NULL, "%s", kvl_error());
    free(sel);
    free(q);
    free(rows);
    free(got);
    free(ref);
    free(want);
    dsa_weights_free(&w);
}
END_TEST

/* ---- zero and extreme inputs in every module ---------------------------------------------------------- */

/* Every module's every path on x[T][d] of the given kind: outputs finite, and exactly zero for a zero x. */
static void run_every_module(input_kind kind, size_t T, uint64_t seed)
{
    const int zero = kind == INPUT_ZERO;
    char what[96];
    {
        mha_toy L;
        mha_make(&L, W_TOY, seed);
        float *x = inputs(kind, T * 64, seed + 1), *out[N_MHA_PATHS];
        mha_paths(out, &L, x, T);
        for (int p = 0; p < N_MHA_PATHS; p++) {
            snprintf(what, sizeof what, "mha path %d, input kind %d, T %zu", p, (int)kind, T);
            (zero ? expect_zero : expect_finite)(what, out[p], T * 64);
        }
        paths_free(out, N_MHA_PATHS);
        free(x);
        mha_weights_free(&L.w);
    }
    for (size_t r = 0; r < 2; r++) {
        mla_toy L;
        mla_make(&L, r ? 0 : 32, W_TOY, seed + 2 + r);
        float *x = inputs(kind, T * 64, seed + 4), *out[N_MLA_PATHS];
        mla_paths(out, &L, x, T);
        for (int p = 0; p < N_MLA_PATHS; p++) {
            snprintf(what, sizeof what, "mla (q_lora_rank %s) path %d, input kind %d, T %zu", r ? "0" : "32", p,
                     (int)kind, T);
            (zero ? expect_zero : expect_finite)(what, out[p], T * 64);
        }
        paths_free(out, N_MLA_PATHS);
        free(x);
        mla_weights_free(&L.w);
    }
    const char *stacks[] = {GQA_SWA_STACK, MLA_SWA_STACK};
    for (size_t k = 0; k < 2; k++) {
        stack s;
        stack_make(&s, stacks[k], k ? MODEL_MLP_GELU : MODEL_MLP_SWIGLU, seed + 5 + k);
        float *x = inputs(kind, T * 64, seed + 7), *out[N_STACK_PATHS];
        stack_paths(out, &s, x, T);
        for (int p = 0; p < N_STACK_PATHS; p++) {
            snprintf(what, sizeof what, "stack %zu path %d, input kind %d, T %zu", k, p, (int)kind, T);
            (zero ? expect_zero : expect_finite)(what, out[p], T * 64);
        }
        paths_free(out, N_STACK_PATHS);
        free(x);
        stack_free(&s);
    }
    for (int native = 0; native < 2; native++) {
        dsa_config c = native ? dsa_native(6) : dsa_toy(6);
        dsa_weights w;
        kvl_rng rng;
        kvl_rng_seed(&rng, seed + 8 + (uint64_t)native);
        ok(dsa_weights_init_random(&w, &c, &rng));
        float *x = inputs(kind, T * 64, seed + 10), *out[N_DSA_PATHS];
        dsa_paths(out, &c, &w, x, T, native ? DSA_CACHE_V32 : DSA_CACHE_F32);
        for (int p = 0; p < N_DSA_PATHS; p++) {
            snprintf(what, sizeof what, "dsa %s path %d, input kind %d, T %zu", native ? "v32 rows" : "f32", p,
                     (int)kind, T);
            (zero ? expect_zero : expect_finite)(what, out[p], T * 64);
        }
        paths_free(out, N_DSA_PATHS);
        free(x);
        dsa_weights_free(&w);
    }
}

START_TEST(test_all_zero_inputs_give_exactly_zero_in_every_module_path_and_cache)
{
    run_every_module(INPUT_ZERO, 1, 800);
    run_every_module(INPUT_ZERO, T_TOY, 820);
}
END_TEST

START_TEST(test_activations_at_the_e4m3_bound_stay_finite_in_every_module_path_and_cache)
{
    run_every_module(INPUT_E4M3_BOUND, 1, 840);
    run_every_module(INPUT_E4M3_BOUND, T_TOY, 860);
}
END_TEST

START_TEST(test_a_huge_residual_stream_passes_the_prenorm_stack_unchanged)
{
    const char *stacks[] = {GQA_SWA_STACK, MLA_SWA_STACK};
    for (size_t k = 0; k < 2; k++) {
        stack s;
        stack_make(&s, stacks[k], MODEL_MLP_SWIGLU, 880 + k);
        float *x = inputs(INPUT_HUGE, T_TOY * 64, 890), *out[N_STACK_PATHS];
        stack_paths(out, &s, x, T_TOY);
        for (int p = 0; p < N_STACK_PATHS; p++) {
            char what[64];
            snprintf(what, sizeof what, "stack %zu path %d at 2^126", k, p);
            expect_finite(what, out[p], T_TOY * 64);
            ck_assert_msg(memcmp(out[p], x, T_TOY * 64 * sizeof *x) == 0, "%s: the residual stream changed", what);
        }
        paths_free(out, N_STACK_PATHS);
        free(x);
        stack_free(&s);
    }
}
END_TEST

/* ---- the formats quantisers on their edge blocks ------------------------------------------------------- */

enum { BLOCK_N = 128 };   /* a multiple of every block size: 16, 32, 64, 128 */

typedef struct {
    const char *name;
    int (*run)(float *xq, const float *x, size_t n);
} quantiser;

#define ROUND_TRIP(name, quant, dequant, scale_t)                                             \
    static int name(float *xq, const float *x, size_t n)                                      \
    {                                                                                         \
        uint8_t codes[BLOCK_N];                                                               \
        scale_t scales[BLOCK_N];                                                              \
        int err = quant;                                                                      \
        return err ? err : dequant;                                                           \
    }

ROUND_TRIP(rt_mxfp8, kvf_quant_mxfp8_e4m3(codes, scales, x, n), kvf_dequant_mxfp8_e4m3(xq, codes, scales, n), uint8_t)
ROUND_TRIP(rt_mxfp4, kvf_quant_mxfp4(codes, scales, x, n), kvf_dequant_mxfp4(xq, codes, scales, n), uint8_t)
ROUND_TRIP(rt_fp4_v41, kvf_quant_fp4_v41(codes, scales, x, n), kvf_dequant_fp4_v41(xq, codes, scales, n), uint8_t)
ROUND_TRIP(rt_fp8_ue8m0, kvf_quant_fp8_ue8m0(codes, scales, x, n), kvf_dequant_fp8_ue8m0(xq, codes, scales, n), float)
ROUND_TRIP(rt_fp8_rceil64, kvf_quant_fp8_e8m0_rceil(codes, scales, x, n, 64),
           kvf_dequant_fp8_e8m0(xq, codes, scales, n, 64), uint8_t)
ROUND_TRIP(rt_fp8_rceil32, kvf_quant_fp8_e8m0_rceil(codes, scales, x, n, 32),
           kvf_dequant_fp8_e8m0(xq, codes, scales, n, 32), uint8_t)
ROUND_TRIP(rt_mxfp4_rceil, kvf_quant_mxfp4_rceil(codes, scales, x, n), kvf_dequant_mxfp4(xq, codes, scales, n), uint8_t)

static int rt_nvfp4(float *xq, const float *x, size_t n)
{
    uint8_t codes[BLOCK_N], scales[BLOCK_N];
    float amax = 0;   /* over the finite elements: a NaN or inf must reach the quantiser's own check */
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) amax = fmaxf(amax, fabsf(x[i]));
    const float g = kvf_nvfp4_global_scale(amax);
    int err = kvf_quant_nvfp4(codes, scales, x, n, g);
    return err ? err : kvf_dequant_nvfp4(xq, codes, scales, n, g);
}

static const quantiser QUANTISERS[] = {
    {"mxfp8", rt_mxfp8},
    {"mxfp4", rt_mxfp4},
    {"nvfp4", rt_nvfp4},
    {"fp4_v41", rt_fp4_v41},
    {"fp8_ue8m0", rt_fp8_ue8m0},
    {"fp8_e8m0_rceil/64", rt_fp8_rceil64},
    {"fp8_e8m0_rceil/32", rt_fp8_rceil32},
    {"mxfp4_rceil", rt_mxfp4_rceil},
};

static void fill_block(float *x, int pattern)
{
    static const float mixed[] = {FLT_MAX, 0x1p-149f, -1.0f, -0.0f, 1e-30f, 65504.0f, -448.5f};
    for (size_t i = 0; i < BLOCK_N; i++) {
        switch (pattern) {
        case 0: x[i] = 0.0f; break;
        case 1: x[i] = -0.0f; break;
        case 2: x[i] = (i % 2 ? -1.0f : 1.0f) * ldexpf(1.0f + (float)(i % 7) / 8.0f, -126 - (int)(i % 24)); break;
        case 3: x[i] = i % 2 ? -FLT_MAX : FLT_MAX; break;
        default: x[i] = mixed[i % 7];
        }
    }
}

START_TEST(test_quantisers_keep_zero_subnormal_and_max_finite_blocks_within_zero_of_the_input)
{
    static const char *const patterns[] = {"+0", "-0", "subnormals", "±max finite", "max finite with tiny"};
    float x[BLOCK_N], xq[BLOCK_N];
    for (size_t q = 0; q < sizeof QUANTISERS / sizeof QUANTISERS[0]; q++)
        for (int p = 0; p < 5; p++) {
            fill_block(x, p);
            ck_assert_int_eq(QUANTISERS[q].run(xq, x, BLOCK_N), KVF_OK);
            for (size_t i = 0; i < BLOCK_N; i++) {
                const double v = x[i], vq = xq[i];
                const int fine = fabs(vq - v) <= fabs(v) && (v != 0 || signbit(vq) == signbit(v));
                ck_assert_msg(fine, "%s on %s: value %zu, %a, dequantised to %a", QUANTISERS[q].name, patterns[p], i,
                              v, vq);
            }
        }
}
END_TEST

/* The element value nearest x/s (ties to the even code) among those whose product with s is finite in
 * float32, times s in float32: how a block of divisor s decodes x. decode(code) lists the element's values by magnitude code 0 … top. */
static double oracle_nearest_finite(double x, double s, float (*decode)(uint8_t), uint8_t top)
{
    const double q = fabs(x) / s;
    double best = 0;
    int best_code = -1;
    for (int c = 0; c <= top; c++) {
        const double v = decode((uint8_t)c);
        if (isinf((float)(v * s))) continue;   /* the decode is fl32(v·s) */
        const double d = fabs(v - q), bd = fabs(best - q);
        if (best_code < 0 || d < bd || (d == bd && c % 2 == 0)) best = v, best_code = c;
    }
    return copysign((double)(float)(best * s), x);
}

/* A round-up block near float32's maximum: s = 2^ceil(log2(amax / max)). */
static double oracle_round_up(double x, double amax, double max, float (*decode)(uint8_t), uint8_t top)
{
    return oracle_nearest_finite(x, ldexp(1.0, (int)ceil(log2(amax / max))), decode, top);
}

static float e2m1_value(uint8_t c) { return kvf_e2m1_decode(c); }

/* Blocks whose maximum sits where the nearest element times the round-up scale passes FLT_MAX (E4M3 from
 * 248·2^120, E2M1 from 3.5·2^126) and just below: every element decodes finite, to the definition's
 * value, the scale as large as the rule says (2^120, 2^126: it fits E8M0 and float32). */
START_TEST(test_round_up_scales_near_float32_max_decode_finite_to_the_nearest_finite_element)
{
    static const double e4m3_amax[] = {240.0 * 0x1p120, 247.9 * 0x1p120, 248.0 * 0x1p120, FLT_MAX};
    static const double e2m1_amax[] = {3.0 * 0x1p126, 3.49 * 0x1p126, 3.5 * 0x1p126, FLT_MAX};
    static const double fractions[] = {1.0, -1.0, 0.97, -0.5, 0.3, 1e-3, 0.0, -0.999};
    for (size_t q = 0; q < sizeof QUANTISERS / sizeof QUANTISERS[0]; q++) {
        const int e2m1 = strcmp(QUANTISERS[q].name, "mxfp4_rceil") == 0;
        if (!e2m1 && strncmp(QUANTISERS[q].name, "fp8_", 4) != 0) continue;   /* the round-up rules only */
        for (size_t a = 0; a < 4; a++) {
            const double amax = e2m1 ? e2m1_amax[a] : e4m3_amax[a];
            float x[BLOCK_N], xq[BLOCK_N];
            for (size_t i = 0; i < BLOCK_N; i++) x[i] = (float)(amax * fractions[i % 8]);
            ck_assert_int_eq(QUANTISERS[q].run(xq, x, BLOCK_N), KVF_OK);
            for (size_t i = 0; i < BLOCK_N; i++) {
                const double want = e2m1 ? oracle_round_up(x[i], amax, 6.0, e2m1_value, 7)
                                         : oracle_round_up(x[i], amax, 448.0, kvf_e4m3_decode, 0x7E);
                ck_assert_msg(isfinite(xq[i]) && (double)xq[i] == want, "%s at amax %a: x[%zu] = %a decoded to %a, "
                              "want %a", QUANTISERS[q].name, amax, i, (double)x[i], (double)xq[i], want);
            }
        }
    }
}
END_TEST

/* NVFP4 near float32's maximum: a block whose amax/6/s_global lies just above an E4M3 midpoint (433, between
 * 416 and 448) gets the scale 448, 3.5% above what it needs, so 6 times the divisor passes FLT_MAX once amax
 * is above 0.966·FLT_MAX; with the usual global scale (amax / 2,688) it stays below. Every element decodes
 * finite, to the nearest finite value, either way. */
START_TEST(test_nvfp4_near_float32_max_decodes_finite_to_the_nearest_finite_element)
{
    static const double tops[] = {0.95 * FLT_MAX, 0.97 * FLT_MAX, 0.99 * FLT_MAX, FLT_MAX};
    static const double fractions[] = {1.0, -1.0, 0.97, -0.5, 0.3, 1e-3, 0.0, -0.999, 0.96, -0.98, 0.9, 0.8,
                                       -0.7, 0.6, 0.2, -0.1};
    enum { N = 16 };
    for (size_t a = 0; a < sizeof tops / sizeof tops[0]; a++)
        for (int tight = 0; tight < 2; tight++) {
            float x[N], xq[N];
            uint8_t codes[N / 2], scale;
            for (size_t i = 0; i < N; i++) x[i] = (float)(tops[a] * fractions[i]);
            const float sg = tight ? (float)(tops[a] / (6.0 * 433.0)) : kvf_nvfp4_global_scale((float)tops[a]);
            ck_assert_int_eq(kvf_quant_nvfp4(codes, &scale, x, N, sg), KVF_OK);
            ck_assert_int_eq(kvf_dequant_nvfp4(xq, codes, &scale, N, sg), KVF_OK);
            ck_assert_uint_eq(scale, kvf_encode_sat(KVF_E4M3, (float)tops[a] / 6.0f / sg));
            const float divisor = sg * kvf_e4m3_decode(scale);
            for (size_t i = 0; i < N; i++) {
                const double want = oracle_nearest_finite(x[i], divisor, e2m1_value, 7);
                ck_assert_msg(isfinite(xq[i]) && (double)xq[i] == want, "nvfp4 at amax %a, s_global %a: x[%zu] = %a "
                              "decoded to %a, want %a", tops[a], (double)sg, i, (double)x[i], (double)xq[i], want);
            }
        }
}
END_TEST

START_TEST(test_quantisers_refuse_nan_before_inf_and_leave_their_outputs_untouched)
{
    float x[BLOCK_N], xq[BLOCK_N];
    for (size_t q = 0; q < sizeof QUANTISERS / sizeof QUANTISERS[0]; q++) {
        fill_block(x, 4);
        x[BLOCK_N - 1] = INFINITY;
        for (size_t i = 0; i < BLOCK_N; i++) xq[i] = 7.0f;
        ck_assert_msg(QUANTISERS[q].run(xq, x, BLOCK_N) == KVF_EINF, "%s: inf not refused", QUANTISERS[q].name);
        x[3] = -NAN;
        ck_assert_msg(QUANTISERS[q].run(xq, x, BLOCK_N) == KVF_ENAN, "%s: NaN not refused", QUANTISERS[q].name);
        for (size_t i = 0; i < BLOCK_N; i++) ck_assert_msg(xq[i] == 7.0f, "%s wrote its output", QUANTISERS[q].name);
    }
}
END_TEST

/* Element casts keep the sign of zero, send float32's smallest subnormals to ±0, and keep ±max
 * finite under saturation (CUDA cuda_fp8.h's SATFINITE). */
START_TEST(test_element_casts_keep_signed_zero_and_saturate_max_finite)
{
    static const kvf_element formats[] = {KVF_E4M3, KVF_E5M2, KVF_E2M1, KVF_BF16};
    for (size_t f = 0; f < sizeof formats / sizeof formats[0]; f++) {
        const kvf_element e = formats[f];
        const double max = kvf_element_max(e);
        const float cases[] = {0.0f, -0.0f, 0x1p-149f, -0x1p-149f};
        for (size_t k = 0; k < 4; k++) {
            const float y = kvf_decode(e, kvf_encode(e, cases[k]));
            ck_assert_msg(y == 0.0f && signbit(y) == signbit(cases[k]), "%s: %a decodes to %a", kvf_element_name(e),
                          (double)cases[k], (double)y);
        }
        ck_assert_double_eq(kvf_decode(e, kvf_encode_sat(e, FLT_MAX)), max);
        ck_assert_double_eq(kvf_decode(e, kvf_encode_sat(e, -FLT_MAX)), -max);
    }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reliability_numerics");
    TCase *edges = tcase_create("sequence_edges");
    tcase_add_test(edges, test_one_token_and_a_short_context_match_the_definition_in_mha);
    tcase_add_test(edges, test_one_token_and_a_short_context_match_the_definition_in_mla);
    tcase_add_test(edges, test_a_ring_wider_than_the_context_holds_every_row_from_the_first);
    tcase_add_test(edges, test_dsa_with_k_above_the_context_is_dense_mla_from_one_token_on);
    tcase_add_test(edges, test_dsa_with_no_legal_position_selects_nothing_and_attends_to_zero);
    tcase_add_test(edges, test_dsa_gather_with_k_above_the_context_reads_each_row_once);
    suite_add_tcase(s, edges);
    TCase *values = tcase_create("extreme_values");
    tcase_add_test(values, test_all_zero_inputs_give_exactly_zero_in_every_module_path_and_cache);
    tcase_add_test(values, test_activations_at_the_e4m3_bound_stay_finite_in_every_module_path_and_cache);
    tcase_add_test(values, test_a_huge_residual_stream_passes_the_prenorm_stack_unchanged);
    suite_add_tcase(s, values);
    TCase *formats = tcase_create("formats");
    tcase_add_test(formats, test_quantisers_keep_zero_subnormal_and_max_finite_blocks_within_zero_of_the_input);
    tcase_add_test(formats, test_quantisers_refuse_nan_before_inf_and_leave_their_outputs_untouched);
    tcase_add_test(formats, test_round_up_scales_near_float32_max_decode_finite_to_the_nearest_finite_element);
    tcase_add_test(formats, test_nvfp4_near_float32_max_decodes_finite_to_the_nearest_finite_element);
    tcase_add_test(formats, test_element_casts_keep_signed_zero_and_saturate_max_finite);
    suite_add_tcase(s, formats);
    return s;
}
