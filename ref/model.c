#include "model.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "linalg.h"
#include "norm.h"
#include "status.h"

/* ---- config ---------------------------------------------------------------------------------------- */

static int layer_from_model(model_layer_config *lc, const kvl_model *m, size_t i)
{
    const kvl_layer *l = &m->layers[i];
    if (l->kind == KVL_LAYER_DENSE && m->generation == KVL_GEN_MHA) {
        lc->attn = MODEL_ATTN_MHA;
        return mha_config_from_model(&lc->mha, m, i);
    }
    if (l->kind == KVL_LAYER_DENSE && m->generation == KVL_GEN_MLA) {
        lc->attn = MODEL_ATTN_MLA;
        return mla_config_from_model(&lc->mla, m);
    }
    if (m->generation == KVL_GEN_V4) {
        lc->attn = MODEL_ATTN_V4;
        return v4_config_from_model(&lc->v4, m, i);
    }
    return kvl_fail(KVL_EINVAL, "%s: layer %zu: attention kind %s of a %s model is not run by the layer stack "
                    "(it runs MHA/GQA/MQA, MLA and V4 layers)", m->path, i, kvl_layer_kind_name(l->kind),
                    kvl_generation_name(m->generation));
}

int model_config_from_model(model_config *c, const kvl_model *m, size_t d_ff, model_mlp mlp)
{
    memset(c, 0, sizeof *c);
    model_layer_config *layers = calloc(m->n_layers, sizeof *layers);
    if (!layers) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu layer configs", m->path, m->n_layers);
    for (size_t i = 0; i < m->n_layers; i++) {
        int rc = layer_from_model(&layers[i], m, i);
        if (rc != KVL_OK) { free(layers); return rc; }
    }
    *c = (model_config){.d = m->d, .n_layers = m->n_layers, .d_ff = d_ff, .mlp = mlp, .norm_eps = m->norm_eps,
                        .layers = layers};
    return KVL_OK;
}

void model_config_free(model_config *c)
{
    free(c->layers);
    memset(c, 0, sizeof *c);
}

const char *model_layer_name(char *buf, size_t cap, const model_layer_config *lc)
{
    if (lc->attn == MODEL_ATTN_V4) return v4_layer_name(buf, cap, &lc->v4);
    size_t W = lc->attn == MODEL_ATTN_MHA ? lc->mha.window : lc->mla.window;
    char kind[32];
    if (lc->attn == MODEL_ATTN_MLA) snprintf(kind, sizeof kind, "MLA");
    else if (lc->mha.n_kv_heads == lc->mha.n_heads) snprintf(kind, sizeof kind, "MHA");
    else if (lc->mha.n_kv_heads == 1) snprintf(kind, sizeof kind, "MQA");
    else snprintf(kind, sizeof kind, "GQA-%zu", lc->mha.n_kv_heads);
    if (W) snprintf(buf, cap, "%s+SWA(%zu)", kind, W);
    else snprintf(buf, cap, "%s", kind);
    return buf;
}

/* ---- weights --------------------------------------------------------------------------------------- */

enum { P_ATTN_NORM, P_MLP_NORM, P_GATE, P_UP, P_DOWN, N_PARTS };

/* Elements of each part of one layer's norms and MLP, in cut and draw order. */
static void part_sizes(size_t n[N_PARTS], const model_config *c)
{
    const size_t d = c->d, F = c->d_ff;
    n[P_ATTN_NORM] = d;
    n[P_MLP_NORM] = F ? d : 0;
    n[P_GATE] = c->mlp == MODEL_MLP_SWIGLU ? F * d : 0;
    n[P_UP] = F * d;
    n[P_DOWN] = d * F;
}

static float **part_field(model_layer_weights *lw, int part)
{
    switch (part) {
    case P_ATTN_NORM: return &lw->attn_norm;
    case P_MLP_NORM: return &lw->mlp_norm;
    case P_GATE: return &lw->w_gate;
    case P_UP: return &lw->w_up;
    default: return &lw->w_down;
    }
}

/* Point every layer's parts into block (NULL for a part of size 0). */
static void cut_parts(model_weights *w, const model_config *c)
{
    size_t n[N_PARTS], off = 0;
    part_sizes(n, c);
    for (size_t l = 0; l < c->n_layers; l++)
        for (int p = 0; p < N_PARTS; p++) {
            *part_field(&w->layers[l], p) = n[p] ? w->block + off : NULL;
            off += n[p];
        }
}

static int draw_attention(model_layer_weights *lw, const model_layer_config *lc, kvl_rng *rng)
{
    if (lc->attn == MODEL_ATTN_MLA) return mla_weights_init_random(&lw->mla, &lc->mla, rng);
    if (lc->attn == MODEL_ATTN_V4) return v4_weights_init_random(&lw->v4, &lc->v4, rng);
    return mha_weights_init_random(&lw->mha, &lc->mha, rng);
}

static void draw_layer(model_layer_weights *lw, const model_config *c, kvl_rng *rng, int from, int to)
{
    size_t n[N_PARTS];
    part_sizes(n, c);
    for (int p = from; p < to; p++) {
        float *v = *part_field(lw, p);
        if (!n[p]) continue;
        if (p == P_ATTN_NORM || p == P_MLP_NORM) kvl_rng_uniform_f32(rng, v, n[p], 0.5, 1.5);
        else kvl_rng_normal_f32(rng, v, n[p], 1.0 / sqrt((double)(p == P_DOWN ? c->d_ff : c->d)));
    }
}

int model_weights_init_random(model_weights *w, const model_config *c, kvl_rng *rng)
{
    memset(w, 0, sizeof *w);
    size_t n[N_PARTS], per_layer = 0;
    part_sizes(n, c);
    for (int p = 0; p < N_PARTS; p++) per_layer += n[p];
    if (c->d_ff && (c->d_ff > SIZE_MAX / 4 / c->d || per_layer > SIZE_MAX / sizeof(float) / c->n_layers))
        return kvl_fail(KVL_EINVAL, "model_weights_init_random: %zu layers with MLP width %zu overflow", c->n_layers,
                        c->d_ff);
    w->layers = calloc(c->n_layers, sizeof *w->layers);
    w->block = malloc(per_layer * c->n_layers * sizeof *w->block);
    if (!w->layers || !w->block) {
        model_weights_free(w);
        return kvl_fail(KVL_ENOMEM, "model_weights_init_random: out of memory for %zu layers", c->n_layers);
    }
    w->n_layers = c->n_layers;
    cut_parts(w, c);
    for (size_t l = 0; l < c->n_layers; l++) {
        model_layer_weights *lw = &w->layers[l];
        draw_layer(lw, c, rng, P_ATTN_NORM, P_MLP_NORM);
        int rc = draw_attention(lw, &c->layers[l], rng);
        if (rc != KVL_OK) {
            model_weights_free(w);
            return rc;
        }
        draw_layer(lw, c, rng, P_MLP_NORM, N_PARTS);
    }
    return KVL_OK;
}

void model_weights_free(model_weights *w)
{
    for (size_t l = 0; w->layers && l < w->n_layers; l++) {
        mha_weights_free(&w->layers[l].mha);
        mla_weights_free(&w->layers[l].mla);
        v4_weights_free(&w->layers[l].v4);
    }
    free(w->layers);
    free(w->block);
    memset(w, 0, sizeof *w);
}

/* ---- cache ----------------------------------------------------------------------------------------- */

/* Every layer's cache; V4 layers in `fmt`, the others in `store`. */
static int cache_init(model_cache *cache, const model_config *c, size_t max_tokens, kv_store store, v4_cache_format fmt)
{
    memset(cache, 0, sizeof *cache);
    cache->mha = calloc(c->n_layers, sizeof *cache->mha);
    cache->mla = calloc(c->n_layers, sizeof *cache->mla);
    cache->v4 = calloc(c->n_layers, sizeof *cache->v4);
    cache->n_layers = c->n_layers;
    int rc = cache->mha && cache->mla && cache->v4
                 ? KVL_OK
                 : kvl_fail(KVL_ENOMEM, "model_cache_init: out of memory for %zu layers", c->n_layers);
    for (size_t l = 0; l < c->n_layers && rc == KVL_OK; l++) {
        const model_layer_config *lc = &c->layers[l];
        if (lc->attn == MODEL_ATTN_V4) rc = v4_cache_init(&cache->v4[l], &lc->v4, max_tokens, fmt);
        else if (lc->attn == MODEL_ATTN_MLA) rc = mla_cache_init(&cache->mla[l], &lc->mla, max_tokens, store);
        else rc = mha_cache_init(&cache->mha[l], &lc->mha, max_tokens, store);
    }
    if (rc != KVL_OK) model_cache_free(cache);
    return rc;
}

int model_cache_init(model_cache *cache, const model_config *c, size_t max_tokens, kv_store store)
{
    for (size_t l = 0; l < c->n_layers; l++)
        if (c->layers[l].attn == MODEL_ATTN_V4 && store != KV_STORE_F32) {
            memset(cache, 0, sizeof *cache);
            return kvl_fail(KVL_EINVAL, "model_cache_init: layer %zu is V4, whose rows are f32 or native, not %s "
                            "(model_cache_init_v4)", l, kv_store_name(store));
        }
    return cache_init(cache, c, max_tokens, store, V4_CACHE_F32);
}

int model_cache_init_v4(model_cache *cache, const model_config *c, size_t max_tokens, v4_cache_format fmt)
{
    for (size_t l = 0; l < c->n_layers; l++)
        if (c->layers[l].attn != MODEL_ATTN_V4) {
            memset(cache, 0, sizeof *cache);
            return kvl_fail(KVL_EINVAL, "model_cache_init_v4: layer %zu is not a V4 layer", l);
        }
    return cache_init(cache, c, max_tokens, KV_STORE_F32, fmt);
}

/* The ring of layer l, for an MHA or MLA layer. */
static const kv_ring *layer_ring(const model_cache *cache, size_t l)
{
    return cache->mha[l].ring.rows ? &cache->mha[l].ring : &cache->mla[l].ring;
}

static int is_v4(const model_cache *cache, size_t l) { return cache->v4[l].window.bytes != NULL; }

/* Positions layer l has taken, and the most it accepts. */
static size_t layer_len(const model_cache *cache, size_t l)
{
    return is_v4(cache, l) ? cache->v4[l].len : layer_ring(cache, l)->len;
}

static size_t layer_max(const model_cache *cache, size_t l)
{
    return is_v4(cache, l) ? cache->v4[l].max_tokens : layer_ring(cache, l)->max_tokens;
}

size_t model_cache_bytes_used(const model_cache *cache)
{
    size_t total = 0;
    for (size_t l = 0; l < cache->n_layers; l++)
        total += is_v4(cache, l) ? v4_cache_bytes_used(&cache->v4[l]) : kv_ring_bytes_used(layer_ring(cache, l));
    return total;
}

size_t model_cache_len(const model_cache *cache) { return cache->n_layers ? layer_len(cache, 0) : 0; }

void model_cache_free(model_cache *cache)
{
    for (size_t l = 0; l < cache->n_layers; l++) {
        if (cache->mha) mha_cache_free(&cache->mha[l]);
        if (cache->mla) mla_cache_free(&cache->mla[l]);
        if (cache->v4) v4_cache_free(&cache->v4[l]);
    }
    free(cache->mha);
    free(cache->mla);
    free(cache->v4);
    memset(cache, 0, sizeof *cache);
}

/* Every layer's cache belongs to this stack and has room for S more positions, so a chunk is taken
 * whole or not at all. */
static int check_cache(const model_config *c, const model_cache *cache, size_t S)
{
    if (cache->n_layers != c->n_layers)
        return kvl_fail(KVL_EINVAL, "model: the cache has %zu layers, the config %zu", cache->n_layers, c->n_layers);
    for (size_t l = 0; l < c->n_layers; l++) {
        const size_t len = layer_len(cache, l), max = layer_max(cache, l);
        if (S > max - len)
            return kvl_fail(KVL_EINVAL, "model: layer %zu: %zu tokens at position %zu exceed the cache's %zu positions",
                            l, S, len, max);
    }
    return KVL_OK;
}

int model_cache_drop_windows(model_cache *cache, size_t s)
{
    for (size_t l = 0; l < cache->n_layers; l++)
        if (!is_v4(cache, l)) return kvl_fail(KVL_EINVAL, "model_cache_drop_windows: layer %zu is not a V4 layer", l);
    for (size_t l = 0; l < cache->n_layers; l++) KVL_TRY(v4_cache_drop_window(&cache->v4[l], s));
    return KVL_OK;
}

/* ---- the MLP --------------------------------------------------------------------------------------- */

/* y[S][d] = W_down (silu(W_gate n) ⊙ W_up n); g, u are scratch [S][F] */
static int mlp_swiglu(float *y, float *g, float *u, const model_config *c, const model_layer_weights *lw,
                      const float *n, size_t S)
{
    const size_t F = c->d_ff;
    KVL_TRY(kvl_matmul_abt_f32(g, n, lw->w_gate, S, F, c->d));
    KVL_TRY(kvl_matmul_abt_f32(u, n, lw->w_up, S, F, c->d));
    for (size_t i = 0; i < S * F; i++) g[i] = (float)((double)g[i] / (1.0 + exp(-(double)g[i])) * u[i]);
    return kvl_matmul_abt_f32(y, g, lw->w_down, S, c->d, F);
}

/* y[S][d] = W_down gelu(W_up n), gelu(u) = u·(1 + erf(u/√2))/2; u is scratch [S][F] */
static int mlp_gelu(float *y, float *u, const model_config *c, const model_layer_weights *lw, const float *n,
                    size_t S)
{
    const size_t F = c->d_ff;
    KVL_TRY(kvl_matmul_abt_f32(u, n, lw->w_up, S, F, c->d));
    for (size_t i = 0; i < S * F; i++) u[i] = (float)(0.5 * u[i] * (1.0 + erf(u[i] / sqrt(2.0))));
    return kvl_matmul_abt_f32(y, u, lw->w_down, S, c->d, F);
}

/* ---- the three paths ------------------------------------------------------------------------------- */

/* a[S][d] = the attention of layer l on n[S][d]: one function per path, same signature. */
typedef int (*attend_fn)(float *a, const model_config *c, const model_weights *w, model_cache *cache, size_t l,
                         const float *n, size_t S);

static int attend_forward(float *a, const model_config *c, const model_weights *w, model_cache *cache, size_t l,
                          const float *n, size_t S)
{
    (void)cache;
    const model_layer_config *lc = &c->layers[l];
    const model_layer_weights *lw = &w->layers[l];
    if (lc->attn == MODEL_ATTN_MLA) return mla_forward(a, &lc->mla, &lw->mla, n, S);
    if (lc->attn == MODEL_ATTN_V4) return v4_forward(a, NULL, &lc->v4, &lw->v4, n, S);
    return mha_forward(a, &lc->mha, &lw->mha, n, S);
}

static int attend_prefill(float *a, const model_config *c, const model_weights *w, model_cache *cache, size_t l,
                          const float *n, size_t S)
{
    const model_layer_config *lc = &c->layers[l];
    const model_layer_weights *lw = &w->layers[l];
    if (lc->attn == MODEL_ATTN_MLA) return mla_prefill(a, &lc->mla, &lw->mla, &cache->mla[l], n, S);
    if (lc->attn == MODEL_ATTN_V4) return v4_prefill(a, NULL, &lc->v4, &lw->v4, &cache->v4[l], n, S);
    return mha_prefill(a, &lc->mha, &lw->mha, &cache->mha[l], n, S);
}

static int attend_decode(float *a, const model_config *c, const model_weights *w, model_cache *cache, size_t l,
                         const float *n, size_t S)
{
    (void)S;   /* one token */
    const model_layer_config *lc = &c->layers[l];
    const model_layer_weights *lw = &w->layers[l];
    if (lc->attn == MODEL_ATTN_MLA) return mla_decode_absorbed(a, &lc->mla, &lw->mla, &cache->mla[l], n);
    if (lc->attn == MODEL_ATTN_V4) return v4_decode(a, NULL, &lc->v4, &lw->v4, &cache->v4[l], n);
    return mha_decode(a, &lc->mha, &lw->mha, &cache->mha[l], n);
}

static int attend_replay(float *a, const model_config *c, const model_weights *w, model_cache *cache, size_t l,
                         const float *n, size_t S)
{
    return v4_replay(a, NULL, &c->layers[l].v4, &w->layers[l].v4, &cache->v4[l], n, S);
}

/* h[S][d] += y[S][d] */
static void add_rows(float *h, const float *y, size_t n)
{
    for (size_t i = 0; i < n; i++) h[i] += y[i];
}

/* Scratch of one pass: n[S][d] the normed input, y[S][d] a block's output, f1, f2 [S][F] the MLP's. */
typedef struct { float *n, *y, *f1, *f2; } scratch;

/* h[S][d] ← layer l applied to h: pre-norm attention with residual, then the pre-norm MLP if F > 0. */
static int run_layer(float *h, const scratch *s, const model_config *c, const model_weights *w, model_cache *cache,
                     size_t l, size_t S, attend_fn attend)
{
    const model_layer_weights *lw = &w->layers[l];
    kvl_rmsnorm_f32(s->n, h, lw->attn_norm, S, c->d, c->norm_eps);
    KVL_TRY(attend(s->y, c, w, cache, l, s->n, S));
    add_rows(h, s->y, S * c->d);
    if (c->d_ff == 0) return KVL_OK;
    kvl_rmsnorm_f32(s->n, h, lw->mlp_norm, S, c->d, c->norm_eps);
    KVL_TRY(c->mlp == MODEL_MLP_GELU ? mlp_gelu(s->y, s->f1, c, lw, s->n, S) : mlp_swiglu(s->y, s->f1, s->f2, c, lw, s->n, S));
    add_rows(h, s->y, S * c->d);
    return KVL_OK;
}

/* out[S][d] = the stack on x[S][d], each layer's attention through `attend`; out is the residual stream. */
static int run_stack(float *out, const model_config *c, const model_weights *w, model_cache *cache, const float *x,
                     size_t S, attend_fn attend)
{
    const size_t d = c->d, F = c->d_ff;
    if (S == 0) return kvl_fail(KVL_EINVAL, "model: no tokens");
    if (w->n_layers != c->n_layers)
        return kvl_fail(KVL_EINVAL, "model: the weights have %zu layers, the config %zu", w->n_layers, c->n_layers);
    if (S > SIZE_MAX / sizeof(float) / 4 / (d > F ? d : F))
        return kvl_fail(KVL_EINVAL, "model: %zu tokens is too large", S);
    float *buf = malloc((2 * S * d + 2 * S * F) * sizeof *buf);
    if (!buf) return kvl_fail(KVL_ENOMEM, "model: out of memory for %zu tokens", S);
    scratch s = {.n = buf, .y = buf + S * d, .f1 = buf + 2 * S * d, .f2 = buf + 2 * S * d + S * F};
    memmove(out, x, S * d * sizeof *out);
    int rc = KVL_OK;
    for (size_t l = 0; l < c->n_layers && rc == KVL_OK; l++) rc = run_layer(out, &s, c, w, cache, l, S, attend);
    free(buf);
    return rc;
}

int model_forward(float *out, const model_config *c, const model_weights *w, const float *x, size_t T)
{
    return run_stack(out, c, w, NULL, x, T, attend_forward);
}

int model_prefill(float *out, const model_config *c, const model_weights *w, model_cache *cache, const float *x,
                  size_t S)
{
    KVL_TRY(check_cache(c, cache, S));
    return run_stack(out, c, w, cache, x, S, attend_prefill);
}

int model_decode(float *out, const model_config *c, const model_weights *w, model_cache *cache, const float *x_t)
{
    KVL_TRY(check_cache(c, cache, 1));
    return run_stack(out, c, w, cache, x_t, 1, attend_decode);
}

int model_replay(float *out, const model_config *c, const model_weights *w, model_cache *cache, const float *x,
                 size_t S)
{
    if (cache->n_layers != c->n_layers)
        return kvl_fail(KVL_EINVAL, "model: the cache has %zu layers, the config %zu", cache->n_layers, c->n_layers);
    for (size_t l = 0; l < c->n_layers; l++)
        if (c->layers[l].attn != MODEL_ATTN_V4 || !is_v4(cache, l))
            return kvl_fail(KVL_EINVAL, "model_replay: layer %zu is not a V4 layer", l);
    return run_stack(out, c, w, cache, x, S, attend_replay);
}
