/* ref/model (chapter 3): the pre-norm layer stack over MHA/GQA/MQA and MLA layers taken from a
 * config's layer map, against its double definition; the cache paths against the whole-sequence
 * forward with windows (T ≥ 3W, chunk edges off the multiples of W); live bytes
 * against the formula; and the exact receptive field of L windowed layers: token 0
 * reaches positions up to L·(W−1) and not one further. */
#include "common.h"
#include "oracle_attention.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "model.h"
#include "rng.h"
#include "status.h"

#define W_TOY 8
#define T_TOY 40   /* 5W */

/* Toy configs (the chapter 1 and 2 toy sizes), parsed by the project's loader. */
static const char GQA_SWA_STACK[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": 3, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 16, \"sliding_window\": 8}";
static const char MQA_STACK[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 1,"
    " \"head_dim\": 16}";
static const char MHA_STACK[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"head_dim\": 16}";
static const char MLA_STACK[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"q_lora_rank\": 32,"
    " \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 16}";
static const char MLA_STACK_NO_QLORA[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"q_lora_rank\": null,"
    " \"kv_lora_rank\": 32, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 16}";

typedef struct {
    model_config c;
    model_weights w;
} stack;

/* The stack of `json` with an MLP of width F (0: none); window > 0 overrides the config's window, as
 * m->window does for every layer; n_layers > 0 overrides the layer count. */
static void stack_make(stack *s, const char *json, size_t F, model_mlp mlp, size_t window, size_t n_layers,
                       uint64_t seed)
{
    kvl_model m;
    ck_assert_msg(kvl_model_parse(&m, json, strlen(json), "toy.json") == KVL_OK, "%s", kvl_error());
    if (window) m.window = window;
    if (n_layers && n_layers < m.n_layers) m.n_layers = n_layers;
    ck_assert_msg(model_config_from_model(&s->c, &m, F, mlp) == KVL_OK, "%s", kvl_error());
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ck_assert_msg(model_weights_init_random(&s->w, &s->c, &rng) == KVL_OK, "%s", kvl_error());
}

static void stack_free(stack *s)
{
    model_weights_free(&s->w);
    model_config_free(&s->c);
}

static float *inputs(size_t T, size_t d, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    float *x = oracle_alloc(T * d * sizeof *x);
    kvl_rng_normal_f32(&rng, x, T * d, 1.0);
    return x;
}

/* ---- the definition, in double --------------------------------------------------------------------- */

static void oracle_attention(double *a, const model_layer_config *lc, const model_layer_weights *lw,
                             const double *n, size_t T)
{
    if (lc->attn == MODEL_ATTN_MLA) {
        const mla_config *c = &lc->mla;
        const mla_weights *w = &lw->mla;
        oracle_mla_layer L = {.d = c->d, .H = c->n_heads, .Dq = c->q_lora_rank, .Dc = c->kv_lora_rank,
                              .Dnope = c->qk_nope, .Dr = c->qk_rope, .Dv = c->v_head, .W = c->window,
                              .eps = c->norm_eps, .scale = c->softmax_scale, .theta = c->rope.theta,
                              .w_dq = w->w_dq, .q_norm = w->q_norm, .w_uq = w->w_uq, .w_q = w->w_q,
                              .w_dkv = w->w_dkv, .kv_norm = w->kv_norm, .w_ukv = w->w_ukv, .w_o = w->w_o};
        oracle_mla(a, &L, n, T);
        return;
    }
    const mha_config *c = &lc->mha;
    size_t kv_of[64];
    ck_assert(c->n_heads <= 64);
    for (size_t h = 0; h < c->n_heads; h++) kv_of[h] = h / (c->n_heads / c->n_kv_heads);
    oracle_mha_layer L = {.d = c->d, .H = c->n_heads, .Hkv = c->n_kv_heads, .Dh = c->head_dim, .W = c->window,
                          .theta = c->rope.theta, .kv_of = kv_of, .w_q = lw->mha.w_q, .w_k = lw->mha.w_k,
                          .w_v = lw->mha.w_v, .w_o = lw->mha.w_o};
    oracle_mha(a, &L, n, T);
}

/* y[d] = W_down act(…) of n[d]: SwiGLU silu(W_gate n)⊙(W_up n), or GELU u·(1 + erf(u/√2))/2 of u = W_up n */
static void oracle_mlp(double *y, const model_config *c, const model_layer_weights *lw, const double *n)
{
    const size_t F = c->d_ff;
    double *g = oracle_alloc(F * sizeof *g), *u = oracle_alloc(F * sizeof *u);
    oracle_matvec(u, lw->w_up, n, F, c->d);
    if (c->mlp == MODEL_MLP_SWIGLU) {
        oracle_matvec(g, lw->w_gate, n, F, c->d);
        for (size_t i = 0; i < F; i++) u[i] *= g[i] / (1 + exp(-g[i]));
    } else {
        for (size_t i = 0; i < F; i++) u[i] = 0.5 * u[i] * (1 + erf(u[i] / sqrt(2.0)));
    }
    oracle_matvec(y, lw->w_down, u, c->d, F);
    free(g);
    free(u);
}

/* out[T][d]: h = x; per layer h += Attn(RMSNorm(h)), then h += MLP(RMSNorm(h)) when F > 0. */
static double *oracle_stack(const stack *s, const float *x, size_t T)
{
    const size_t d = s->c.d;
    double *h = oracle_widen(x, T * d), *n = oracle_alloc(T * d * sizeof *n), *a = oracle_alloc(T * d * sizeof *a);
    for (size_t l = 0; l < s->c.n_layers; l++) {
        const model_layer_weights *lw = &s->w.layers[l];
        for (size_t t = 0; t < T; t++) oracle_rmsnorm(n + t * d, h + t * d, lw->attn_norm, d, s->c.norm_eps);
        oracle_attention(a, &s->c.layers[l], lw, n, T);
        for (size_t i = 0; i < T * d; i++) h[i] += a[i];
        if (s->c.d_ff == 0) continue;
        for (size_t t = 0; t < T; t++) {
            oracle_rmsnorm(n + t * d, h + t * d, lw->mlp_norm, d, s->c.norm_eps);
            oracle_mlp(a + t * d, &s->c, lw, n + t * d);
        }
        for (size_t i = 0; i < T * d; i++) h[i] += a[i];
    }
    free(n);
    free(a);
    return h;
}

/* ---- tolerances ------------------------------------------------------------------------------------ */

/* One layer's float path: its attention's sums (oracle_f32_tol: d, the head dim, T keys, the output
 * projection; MLA adds the latent Dc and the query rank) plus the MLP's d and F. An error entering a
 * layer leaves it grown at most 3× (the residual passes it with gain 1; the pre-norm, gains ≤ 1.5 over
 * an RMS near 1, and the unit-gain sublayers add at most 2 more), so layer l's error reaches the
 * output scaled by 3^(L−1−l): the stack's bound is Σ_l 3^(L−1−l)·layer. */
static double stack_tol(const stack *s, size_t T)
{
    double tol = 0;
    for (size_t l = 0; l < s->c.n_layers; l++) {
        const model_layer_config *lc = &s->c.layers[l];
        size_t n = lc->attn == MODEL_ATTN_MLA
                       ? s->c.d + lc->mla.q_lora_rank + lc->mla.kv_lora_rank + lc->mla.qk_nope + lc->mla.qk_rope + T +
                             lc->mla.n_heads * lc->mla.v_head
                       : s->c.d + lc->mha.head_dim + T + lc->mha.n_heads * lc->mha.head_dim;
        tol = 3 * tol + oracle_f32_tol(n + s->c.d + s->c.d_ff);
    }
    return tol;
}

#define MIN_COS (1 - 1e-6)   /* as in test_ch01_mha: a guard against a systematic difference */

static float *forward(const stack *s, const float *x, size_t T)
{
    float *out = oracle_alloc(T * s->c.d * sizeof *out);
    ck_assert_msg(model_forward(out, &s->c, &s->w, x, T) == KVL_OK, "%s", kvl_error());
    return out;
}

static void expect_forward_is_definition(const char *json, size_t F, model_mlp mlp, size_t W, size_t T, uint64_t seed)
{
    stack s;
    stack_make(&s, json, F, mlp, W, 0, seed);
    float *x = inputs(T, s.c.d, seed + 1), *got = forward(&s, x, T);
    double *want = oracle_stack(&s, x, T);
    char what[128], name[32];
    snprintf(what, sizeof what, "model_forward: %zu layers of %s, F %zu %s, T %zu", s.c.n_layers,
             model_layer_name(name, sizeof name, &s.c.layers[0]), F, mlp == MODEL_MLP_GELU ? "GELU" : "SwiGLU", T);
    kvl_expect_close(what, got, want, T * s.c.d, stack_tol(&s, T), 0, MIN_COS);
    free(x); free(got); free(want);
    stack_free(&s);
}

/* Prefill the chunks (summing to ≤ T), decode the rest one token at a time, compare with the forward. */
static void expect_cached_is_forward(const char *json, size_t W, size_t T, const size_t *chunks, size_t n_chunks,
                                     uint64_t seed)
{
    stack s;
    stack_make(&s, json, 32, MODEL_MLP_SWIGLU, W, 0, seed);
    const size_t d = s.c.d;
    float *x = inputs(T, d, seed + 1), *fwd = forward(&s, x, T), *got = oracle_alloc(T * d * sizeof *got);
    model_cache cache;
    ck_assert_msg(model_cache_init(&cache, &s.c, T, KV_STORE_F32) == KVL_OK, "%s", kvl_error());
    size_t t = 0;
    for (size_t i = 0; i < n_chunks; i++) {
        ck_assert_msg(model_prefill(got + t * d, &s.c, &s.w, &cache, x + t * d, chunks[i]) == KVL_OK, "%s",
                      kvl_error());
        t += chunks[i];
    }
    for (; t < T; t++)
        ck_assert_msg(model_decode(got + t * d, &s.c, &s.w, &cache, x + t * d) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(model_cache_len(&cache), T);
    double *want = oracle_widen(fwd, T * d);
    char what[128], name[32];
    int at = snprintf(what, sizeof what, "%s stack, T %zu, chunks", model_layer_name(name, sizeof name, &s.c.layers[0]), T);
    for (size_t i = 0; i < n_chunks && at < (int)sizeof what - 8; i++)
        at += snprintf(what + at, sizeof what - (size_t)at, " %zu", chunks[i]);
    kvl_expect_close(what, got, want, T * d, 2 * stack_tol(&s, T), 0, MIN_COS);
    model_cache_free(&cache);
    free(x); free(fwd); free(got); free(want);
    stack_free(&s);
}

/* ---- the definition -------------------------------------------------------------------------------- */

START_TEST(test_forward_matches_definition_with_swiglu)
{
    expect_forward_is_definition(GQA_SWA_STACK, 32, MODEL_MLP_SWIGLU, 0, T_TOY, 400);
}
END_TEST

START_TEST(test_forward_matches_definition_with_gelu)
{
    expect_forward_is_definition(MQA_STACK, 48, MODEL_MLP_GELU, 0, T_TOY, 410);
}
END_TEST

START_TEST(test_forward_matches_definition_without_mlp)
{
    expect_forward_is_definition(MHA_STACK, 0, MODEL_MLP_SWIGLU, 0, T_TOY, 420);
    expect_forward_is_definition(MQA_STACK, 0, MODEL_MLP_GELU, W_TOY, T_TOY, 421);
}
END_TEST

START_TEST(test_forward_matches_definition_with_mla_layers)
{
    expect_forward_is_definition(MLA_STACK, 32, MODEL_MLP_SWIGLU, 0, T_TOY, 430);
    expect_forward_is_definition(MLA_STACK_NO_QLORA, 32, MODEL_MLP_GELU, W_TOY, T_TOY, 431);
}
END_TEST

START_TEST(test_forward_matches_definition_when_t_is_1)
{
    expect_forward_is_definition(GQA_SWA_STACK, 32, MODEL_MLP_SWIGLU, 0, 1, 440);
    expect_forward_is_definition(MLA_STACK, 32, MODEL_MLP_GELU, W_TOY, 1, 441);
}
END_TEST

/* ---- cache paths = whole sequence -------------------------------------------------------------------- */

START_TEST(test_decode_matches_forward_after_prefill_of_any_prefix)
{
    for (size_t p = 0; p <= T_TOY; p += 5) {
        const size_t chunk[] = {p ? p - 1 : 0};
        expect_cached_is_forward(GQA_SWA_STACK, 0, T_TOY, chunk, p ? 1 : 0, 450 + p);
    }
}
END_TEST

/* Windowed stack, T = 5W: chunks 3, 10, 1, 13, 6 put the edges at 3, 13, 14, 27, 33 (none a multiple
 * of 8), then 7 decodes. */
START_TEST(test_prefill_matches_forward_when_chunked)
{
    static const size_t chunks[] = {3, 10, 1, 13, 6};
    expect_cached_is_forward(GQA_SWA_STACK, 0, T_TOY, chunks, 5, 460);
    expect_cached_is_forward(MQA_STACK, W_TOY, T_TOY, chunks, 5, 461);
    expect_cached_is_forward(MHA_STACK, 0, T_TOY, chunks, 5, 462);
}
END_TEST

START_TEST(test_mla_stack_decode_matches_forward)
{
    static const size_t chunks[] = {3, 10, 1, 13, 6};
    expect_cached_is_forward(MLA_STACK, 0, T_TOY, chunks, 5, 470);
    expect_cached_is_forward(MLA_STACK, W_TOY, T_TOY, chunks, 5, 471);
    expect_cached_is_forward(MLA_STACK_NO_QLORA, W_TOY, T_TOY, NULL, 0, 472);
}
END_TEST

START_TEST(test_prefill_matches_forward_when_chunks_are_1)
{
    size_t ones[T_TOY];
    for (size_t i = 0; i < T_TOY; i++) ones[i] = 1;
    expect_cached_is_forward(GQA_SWA_STACK, 0, T_TOY, ones, T_TOY, 480);
}
END_TEST

START_TEST(test_decode_matches_forward_when_t_is_1)
{
    expect_cached_is_forward(GQA_SWA_STACK, 0, 1, NULL, 0, 490);
    const size_t one[] = {1};
    expect_cached_is_forward(MLA_STACK, W_TOY, 1, one, 1, 491);
}
END_TEST

/* ---- bytes ------------------------------------------------------------------------------------------ */

/* Live bytes after t tokens: L·min(t, S)·(row elements)·b, with S = W for a windowed stack and the
 * context otherwise; a row is 2·Hkv·Dh (MHA family) or Dc + Dr (MLA). */
static void expect_bytes_follow_formula(const char *json, size_t window, size_t row, kv_store store, size_t b)
{
    stack s;
    stack_make(&s, json, 0, MODEL_MLP_SWIGLU, window, 0, 500);
    const model_layer_config *lc = &s.c.layers[0];
    const size_t W = lc->attn == MODEL_ATTN_MLA ? lc->mla.window : lc->mha.window;
    model_cache cache;
    ck_assert(model_cache_init(&cache, &s.c, T_TOY, store) == KVL_OK);
    float *x = inputs(T_TOY, s.c.d, 501), *out = oracle_alloc(s.c.d * sizeof *out);
    ck_assert_uint_eq(model_cache_bytes_used(&cache), 0);
    for (size_t t = 1; t <= T_TOY; t++) {
        ck_assert(model_decode(out, &s.c, &s.w, &cache, x + (t - 1) * s.c.d) == KVL_OK);
        size_t entries = W && t > W ? W : t;
        ck_assert_uint_eq(model_cache_bytes_used(&cache), s.c.n_layers * entries * row * b);
    }
    model_cache_free(&cache);
    free(x); free(out);
    stack_free(&s);
}

START_TEST(test_cache_bytes_match_formula)
{
    expect_bytes_follow_formula(MHA_STACK, 0, 2 * 4 * 16, KV_STORE_F32, 4);
    expect_bytes_follow_formula(MHA_STACK, 0, 2 * 4 * 16, KV_STORE_BF16, 2);
    expect_bytes_follow_formula(MQA_STACK, 0, 2 * 1 * 16, KV_STORE_BF16, 2);
    expect_bytes_follow_formula(MLA_STACK, 0, 32 + 8, KV_STORE_BF16, 2);
}
END_TEST

START_TEST(test_window_cache_bytes_constant_after_w_tokens)
{
    expect_bytes_follow_formula(GQA_SWA_STACK, 0, 2 * 2 * 16, KV_STORE_F32, 4);   /* its config's window, 8 */
    expect_bytes_follow_formula(MHA_STACK, W_TOY, 2 * 4 * 16, KV_STORE_BF16, 2);
    expect_bytes_follow_formula(MLA_STACK, W_TOY, 32 + 8, KV_STORE_F32, 4);
}
END_TEST

/* ---- receptive field -------------------------------------------------------------------------------- */

/* Change token 0 and rerun: layer ℓ's outputs at positions up to ℓ·(W−1) can move and no others, so
 * after L windowed layers every output at positions ≥ L·(W−1) + 1 is bit-identical (masked keys get
 * probability exactly 0, and rows of a product depend only on their own row), while the output at
 * L·(W−1), the last position a path of L hops of W−1 reaches, changes. */
static void expect_reach(const char *json, size_t L, size_t W, size_t F, uint64_t seed)
{
    stack s;
    stack_make(&s, json, F, MODEL_MLP_SWIGLU, W, L, seed);
    ck_assert_uint_eq(s.c.n_layers, L);
    const size_t d = s.c.d, reach = L * (W - 1), T = reach + 2 * W;
    float *x = inputs(T, d, seed + 1), *a = forward(&s, x, T);
    for (size_t i = 0; i < d; i++) x[i] += 0.5f;
    float *b = forward(&s, x, T);
    for (size_t t = 0; t < T; t++) {
        int same = memcmp(a + t * d, b + t * d, d * sizeof *a) == 0;
        if (t > reach) ck_assert_msg(same, "L %zu W %zu: output %zu moved, beyond the reach %zu", L, W, t, reach);
        else ck_assert_msg(!same, "L %zu W %zu: output %zu did not move, within the reach %zu", L, W, t, reach);
    }
    free(x); free(a); free(b);
    stack_free(&s);
}

START_TEST(test_receptive_field_is_l_times_w_minus_1)
{
    for (size_t L = 1; L <= 3; L++) expect_reach(GQA_SWA_STACK, L, W_TOY, 32, 510 + L);
    expect_reach(GQA_SWA_STACK, 3, 5, 0, 514);
    expect_reach(MLA_STACK, 2, W_TOY, 32, 515);
}
END_TEST

/* ---- configs ----------------------------------------------------------------------------------------- */

/* DeepSeek LLM 67B: 95 dense layers, each GQA-8 over head dim 128. */
START_TEST(test_config_reads_layer_map_of_deepseek_llm_67b)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-llm-67b.json")) == KVL_OK, "%s", kvl_error());
    model_config c;
    ck_assert_msg(model_config_from_model(&c, &m, 0, MODEL_MLP_SWIGLU) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(c.n_layers, 95);
    char name[32];
    for (size_t l = 0; l < c.n_layers; l++) {
        ck_assert_int_eq(c.layers[l].attn, MODEL_ATTN_MHA);
        ck_assert_str_eq(model_layer_name(name, sizeof name, &c.layers[l]), "GQA-8");
        ck_assert_uint_eq(c.layers[l].mha.head_dim, 128);
    }
    model_config_free(&c);
    m.window = 4096;
    ck_assert(model_config_from_model(&c, &m, 0, MODEL_MLP_SWIGLU) == KVL_OK);
    ck_assert_str_eq(model_layer_name(name, sizeof name, &c.layers[94]), "GQA-8+SWA(4096)");
    model_config_free(&c);
    kvl_model_free(&m);
}
END_TEST

/* V3 is an MLA config: every layer becomes an MLA layer. */
START_TEST(test_config_reads_mla_layers_of_deepseek_v3)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v3.json")) == KVL_OK, "%s", kvl_error());
    model_config c;
    ck_assert_msg(model_config_from_model(&c, &m, 0, MODEL_MLP_SWIGLU) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(c.n_layers, 61);
    ck_assert_int_eq(c.layers[60].attn, MODEL_ATTN_MLA);
    ck_assert_uint_eq(c.layers[60].mla.kv_lora_rank, 512);
    model_config_free(&c);
    kvl_model_free(&m);
}
END_TEST

/* DSA and V4.1 layers are not run by this stack: a clear error naming the file and the layer. */
START_TEST(test_config_rejects_layers_it_does_not_run)
{
    static const char *const files[] = {"ref/configs/deepseek-v3.2-exp.json", "ref/configs/deepseek-v4.1-flash.json"};
    for (size_t i = 0; i < 2; i++) {
        kvl_model m;
        ck_assert_msg(kvl_model_load(&m, kvl_path(files[i])) == KVL_OK, "%s", kvl_error());
        model_config c;
        ck_assert_int_eq(model_config_from_model(&c, &m, 0, MODEL_MLP_SWIGLU), KVL_EINVAL);
        ck_assert_ptr_nonnull(strstr(kvl_error(), "layer 0"));
        ck_assert_ptr_nonnull(strstr(kvl_error(), strrchr(files[i], '/') + 1));
        ck_assert_ptr_null(c.layers);
        kvl_model_free(&m);
    }
}
END_TEST

/* A chunk that does not fit is refused before any layer appends. */
START_TEST(test_prefill_refuses_chunk_past_max_tokens)
{
    stack s;
    stack_make(&s, GQA_SWA_STACK, 16, MODEL_MLP_GELU, 0, 0, 520);
    model_cache cache;
    ck_assert(model_cache_init(&cache, &s.c, 10, KV_STORE_F32) == KVL_OK);
    float *x = inputs(11, s.c.d, 521), *out = oracle_alloc(11 * s.c.d * sizeof *out);
    ck_assert(model_prefill(out, &s.c, &s.w, &cache, x, 7) == KVL_OK);
    size_t bytes = model_cache_bytes_used(&cache);
    ck_assert_int_eq(model_prefill(out, &s.c, &s.w, &cache, x, 4), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "exceed"));
    ck_assert_uint_eq(model_cache_bytes_used(&cache), bytes);
    ck_assert_uint_eq(model_cache_len(&cache), 7);
    ck_assert(model_prefill(out, &s.c, &s.w, &cache, x, 3) == KVL_OK);
    ck_assert_int_eq(model_decode(out, &s.c, &s.w, &cache, x), KVL_EINVAL);
    model_cache_free(&cache);
    free(x); free(out);
    stack_free(&s);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch03_model");
    TCase *def = tcase_create("definition");
    tcase_add_test(def, test_forward_matches_definition_with_swiglu);
    tcase_add_test(def, test_forward_matches_definition_with_gelu);
    tcase_add_test(def, test_forward_matches_definition_without_mlp);
    tcase_add_test(def, test_forward_matches_definition_with_mla_layers);
    tcase_add_test(def, test_forward_matches_definition_when_t_is_1);
    suite_add_tcase(s, def);
    TCase *cache = tcase_create("cache_paths");
    tcase_add_test(cache, test_decode_matches_forward_after_prefill_of_any_prefix);
    tcase_add_test(cache, test_prefill_matches_forward_when_chunked);
    tcase_add_test(cache, test_mla_stack_decode_matches_forward);
    tcase_add_test(cache, test_prefill_matches_forward_when_chunks_are_1);
    tcase_add_test(cache, test_decode_matches_forward_when_t_is_1);
    suite_add_tcase(s, cache);
    TCase *bytes = tcase_create("bytes");
    tcase_add_test(bytes, test_cache_bytes_match_formula);
    tcase_add_test(bytes, test_window_cache_bytes_constant_after_w_tokens);
    suite_add_tcase(s, bytes);
    TCase *reach = tcase_create("receptive_field");
    tcase_add_test(reach, test_receptive_field_is_l_times_w_minus_1);
    suite_add_tcase(s, reach);
    TCase *cfg = tcase_create("configs");
    tcase_add_test(cfg, test_config_reads_layer_map_of_deepseek_llm_67b);
    tcase_add_test(cfg, test_config_reads_mla_layers_of_deepseek_v3);
    tcase_add_test(cfg, test_config_rejects_layers_it_does_not_run);
    tcase_add_test(cfg, test_prefill_refuses_chunk_past_max_tokens);
    suite_add_tcase(s, cfg);
    return s;
}
