#include "v41_stack.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "norm.h"
#include "rows.h"
#include "status.h"

/* ---- config and weights ------------------------------------------------------------------------------ */

int v41_stack_config_from_model(v41_stack_config *s, const kvl_model *m)
{
    memset(s, 0, sizeof *s);
    if (m->generation != KVL_GEN_V41)
        return kvl_fail(KVL_EINVAL, "%s: attention is %s, not V4.1", m->path, kvl_generation_name(m->generation));
    s->layers = calloc(m->n_layers, sizeof *s->layers);
    if (!s->layers) return kvl_fail(KVL_ENOMEM, "v41_stack_config_from_model: out of memory");
    s->d = m->d;
    s->n_layers = m->n_layers;
    s->norm_eps = m->norm_eps;
    s->candidate_source = m->candidate_source_layer;
    s->pool_block = m->candidate_block_size;
    s->pool_blocks = m->candidate_topk_blocks;
    s->n_encoder = m->n_layers / 2;
    for (size_t l = 0; l < m->n_layers; l++) {
        int rc = v41_config_from_model(&s->layers[l], m, l);
        if (rc != KVL_OK) {
            v41_stack_config_free(s);
            return rc;
        }
    }
    return KVL_OK;
}

void v41_stack_config_free(v41_stack_config *s)
{
    free(s->layers);
    memset(s, 0, sizeof *s);
}

int v41_stack_weights_init_random(v41_stack_weights *w, const v41_stack_config *s, kvl_rng *rng)
{
    memset(w, 0, sizeof *w);
    w->attn_norm = malloc(s->n_layers * s->d * sizeof *w->attn_norm);
    w->layers = calloc(s->n_layers, sizeof *w->layers);
    w->n_layers = s->n_layers;
    int rc = w->attn_norm && w->layers ? KVL_OK : kvl_fail(KVL_ENOMEM, "v41_stack_weights_init_random: out of memory");
    for (size_t l = 0; l < s->n_layers && rc == KVL_OK; l++) {
        kvl_rng_uniform_f32(rng, w->attn_norm + l * s->d, s->d, 0.5, 1.5);
        rc = v41_weights_init_random(&w->layers[l], &s->layers[l], rng);
    }
    if (rc != KVL_OK) v41_stack_weights_free(w);
    return rc;
}

void v41_stack_weights_free(v41_stack_weights *w)
{
    for (size_t l = 0; w->layers && l < w->n_layers; l++) v41_weights_free(&w->layers[l]);
    free(w->layers);
    free(w->attn_norm);
    memset(w, 0, sizeof *w);
}

/* ---- one pass over the layers (shared by forward and prefill) ------------------------------------------ */

typedef struct {
    size_t L, S;
    v41_source *src;          /* [L] each KV source as its layers read it */
    float **entries, **keys;   /* [L] a whole-sequence pass's own rows of each source: [N][Dh], [N][DI] */
    int32_t **sel;             /* [L] [S][K] picks of each index source */
    uint8_t *pool;             /* [S][N] of the candidate source */
    int keys_mxfp4;
} pass;

static void pass_free(pass *p)
{
    for (size_t l = 0; l < p->L; l++) {
        if (p->entries) free(p->entries[l]);
        if (p->keys) free(p->keys[l]);
        if (p->sel) free(p->sel[l]);
    }
    free(p->src); free(p->entries); free(p->keys); free(p->sel); free(p->pool);
    memset(p, 0, sizeof *p);
}

static int pass_init(pass *p, size_t L, size_t S, int keys_mxfp4)
{
    memset(p, 0, sizeof *p);
    p->L = L;
    p->S = S;
    p->keys_mxfp4 = keys_mxfp4;
    p->entries = calloc(L, sizeof *p->entries);
    p->keys = calloc(L, sizeof *p->keys);
    p->src = calloc(L, sizeof *p->src);
    p->sel = calloc(L, sizeof *p->sel);
    if (p->entries && p->keys && p->src && p->sel) return KVL_OK;
    pass_free(p);
    return kvl_fail(KVL_ENOMEM, "v41 stack: out of memory");
}

/* p->entries[l], p->keys[l] ← room for N rows of source l, which p->src[l] reads. */
static int source_alloc(pass *p, const v41_config *c, size_t l, size_t N)
{
    p->entries[l] = malloc((N ? N : 1) * c->core.head_dim * sizeof(float));
    p->keys[l] = malloc((N ? N : 1) * c->indexer.head_dim * sizeof(float));
    if (!p->entries[l] || !p->keys[l]) return kvl_fail(KVL_ENOMEM, "v41 stack: out of memory for %zu entries", N);
    p->src[l] = v41_source_f32(c, p->entries[l], p->keys[l], N);
    return KVL_OK;
}

static int full_step(float *a, pass *p, const v41_stack_config *s, const v41_weights *w, size_t l,
                     const v41_chunk *ch, uint64_t *scored)
{
    const v41_config *c = &s->layers[l];
    const size_t N = p->src[l].keys.N, S = ch->S;
    float *I = malloc(S * (N ? N : 1) * sizeof *I);
    p->sel[l] = malloc(S * c->indexer.topk * sizeof *p->sel[l]);
    int rc = I && p->sel[l] ? KVL_OK : kvl_fail(KVL_ENOMEM, "v41 stack: out of memory");
    if (rc == KVL_OK) rc = v41_full_layer(a, p->sel[l], I, scored, c, w, &p->src[l], ch);
    if (rc == KVL_OK && l == s->candidate_source) {
        p->pool = malloc(S * (N ? N : 1));
        rc = p->pool ? v41_candidate_pool(p->pool, I, S, N, ch->start, c->ratio, s->pool_block, s->pool_blocks)
                     : kvl_fail(KVL_ENOMEM, "v41 stack: out of memory");
    }
    free(I);
    return rc;
}

static int reindex_step(float *a, pass *p, const v41_stack_config *s, const v41_weights *w, size_t l,
                        const v41_chunk *ch, uint64_t *scored)
{
    const v41_config *c = &s->layers[l];
    const size_t src_l = (size_t)c->kv_source;
    p->sel[l] = malloc(ch->S * c->indexer.topk * sizeof *p->sel[l]);
    if (!p->sel[l]) return kvl_fail(KVL_ENOMEM, "v41 stack: out of memory");
    const uint8_t *pool = src_l == s->candidate_source ? p->pool : NULL;
    if (src_l == s->candidate_source && !pool)
        return kvl_fail(KVL_EINVAL, "v41 stack: layer %zu needs the candidate pool of layer %zu, outside this run", l,
                        src_l);
    return v41_reindex_layer(a, p->sel[l], scored, c, w, &p->src[src_l], pool, ch);
}

/* a[S][d] = layer l's attention on the chunk, its sources in p already filled. */
static int attend_layer(float *a, pass *p, const v41_stack_config *s, const v41_stack_weights *w, size_t l,
                        const v41_chunk *ch, uint64_t *scored)
{
    const v41_config *c = &s->layers[l];
    const v41_weights *lw = &w->layers[l];
    switch (c->kind) {
    case KVL_LAYER_FULL: return full_step(a, p, s, lw, l, ch, scored);
    case KVL_LAYER_REINDEX: return reindex_step(a, p, s, lw, l, ch, scored);
    case KVL_LAYER_REUSE: {
        if (!p->sel[c->index_source]) return kvl_fail(KVL_EINVAL, "v41 stack: layer %zu reads no top-k", l);
        return v41_reuse_layer(a, c, lw, &p->src[c->kv_source], p->sel[c->index_source], ch);
    }
    default: return v41_window_layer(a, c, lw, ch);
    }
}

static void copy_sel(int32_t *sel, const pass *p, const v41_stack_config *s, size_t l)
{
    const size_t K = s->layers[l].indexer.topk;
    if (sel && p->sel[l] && (size_t)s->layers[l].index_source == l)
        memcpy(sel + l * p->S * K, p->sel[l], p->S * K * sizeof *sel);
}

/* ---- whole sequence ------------------------------------------------------------------------------------ */

/* p's source l from the batched compressor over n[T][d]. */
static int forward_source(pass *p, const v41_config *c, const v41_weights *w, size_t l, const float *n, size_t T)
{
    const size_t N = T / c->ratio;
    KVL_TRY(source_alloc(p, c, l, N));
    float *L = malloc((N ? N : 1) * c->core.head_dim * sizeof *L);
    if (!L) return kvl_fail(KVL_ENOMEM, "v41 stack: out of memory");
    int rc = v41_compressor_forward(L, &c->compressor, &w->compressor, n, T);
    if (rc == KVL_OK) rc = v41_index_keys(p->keys[l], &c->indexer, w->w_ik, w->ik_norm, L, N, 0);
    if (rc == KVL_OK) v41_main_entry(p->entries[l], c, L, N, 0);
    free(L);
    return rc;
}

int v41_stack_forward(float *out, int32_t *sel, uint64_t *scored, const v41_stack_config *s,
                       const v41_stack_weights *w, const float *x, size_t T)
{
    if (!s || !w || !out || !x || T == 0) return kvl_fail(KVL_EINVAL, "v41_stack_forward: NULL argument or no tokens");
    const size_t d = s->d;
    pass p;
    KVL_TRY(pass_init(&p, s->n_layers, T, 0));
    float *n = malloc(T * d * sizeof *n), *a = malloc(T * d * sizeof *a);
    float *win = malloc(T * s->layers[0].core.head_dim * sizeof *win);
    int rc = n && a && win ? KVL_OK : kvl_fail(KVL_ENOMEM, "v41_stack_forward: out of memory");
    if (rc == KVL_OK) memcpy(out, x, T * d * sizeof *out);
    for (size_t l = 0; l < s->n_layers && rc == KVL_OK; l++) {
        const v41_config *c = &s->layers[l];
        kvl_rmsnorm_f32(n, out, w->attn_norm + l * d, T, d, s->norm_eps);
        rc = v4_kv(win, &c->core, &w->layers[l].core, n, T, c->core.rope_offset);
        if (rc == KVL_OK && c->kind == KVL_LAYER_FULL) rc = forward_source(&p, c, &w->layers[l], l, n, T);
        const v41_chunk ch = {.x = n, .S = T, .start = 0, .win = win, .win_first = 0};
        uint64_t dummy = 0;
        if (rc == KVL_OK) rc = attend_layer(a, &p, s, w, l, &ch, scored ? scored + l : &dummy);
        for (size_t i = 0; i < T * d && rc == KVL_OK; i++) out[i] += a[i];
        copy_sel(sel, &p, s, l);
    }
    free(n); free(a); free(win);
    pass_free(&p);
    return rc;
}

/* ---- the cache ------------------------------------------------------------------------------------------- */

int v41_cache_init(v41_cache *c, const v41_stack_config *s, size_t max_tokens, v41_cache_format fmt)
{
    memset(c, 0, sizeof *c);
    if (!s || max_tokens == 0) return kvl_fail(KVL_EINVAL, "v41_cache_init: no config or zero max_tokens");
    const int native = fmt == V41_CACHE_NATIVE;
    const size_t L = s->n_layers;
    c->fmt = fmt;
    c->max_tokens = max_tokens;
    c->n_layers = L;
    c->window = calloc(L, sizeof *c->window);
    c->entries = calloc(L, sizeof *c->entries);
    c->keys = calloc(L, sizeof *c->keys);
    c->state = calloc(L, sizeof *c->state);
    c->scored = calloc(L, sizeof *c->scored);
    int rc = c->window && c->entries && c->keys && c->state && c->scored ? KVL_OK
                                                                          : kvl_fail(KVL_ENOMEM, "v41_cache_init: out of memory");
    for (size_t l = 0; l < L && rc == KVL_OK; l++) {
        const v41_config *lc = &s->layers[l];
        const size_t W = lc->core.window < max_tokens ? lc->core.window : max_tokens;
        rc = v4_rows_init(&c->window[l], native ? V4_ROWS_V41_WINDOW : V4_ROWS_F32, lc->core.head_dim, W);
        if (rc != KVL_OK || lc->kind != KVL_LAYER_FULL) continue;
        const size_t n = max_tokens / lc->ratio ? max_tokens / lc->ratio : 1;
        rc = v4_rows_init(&c->entries[l], native ? V4_ROWS_V41_MAIN : V4_ROWS_F32, lc->core.head_dim, n);
        if (rc == KVL_OK) rc = v4_rows_init(&c->keys[l], native ? V4_ROWS_INDEX : V4_ROWS_F32, lc->indexer.head_dim, n);
        if (rc == KVL_OK) rc = v41_compressor_state_init(&c->state[l], &lc->compressor);
    }
    if (rc != KVL_OK) {
        v41_cache_free(c);
        return kvl_fail(rc, "v41_cache_init: %s", kvl_error());
    }
    return KVL_OK;
}

void v41_cache_free(v41_cache *c)
{
    for (size_t l = 0; l < c->n_layers; l++) {
        if (c->window) v4_rows_free(&c->window[l]);
        if (c->entries) v4_rows_free(&c->entries[l]);
        if (c->keys) v4_rows_free(&c->keys[l]);
        if (c->state) v41_compressor_state_free(&c->state[l]);
    }
    free(c->window); free(c->entries); free(c->keys); free(c->state); free(c->scored);
    memset(c, 0, sizeof *c);
}

size_t v41_cache_bytes_used(const v41_cache *c)
{
    size_t b = 0;
    for (size_t l = 0; l < c->n_layers; l++) b += v4_rows_bytes_used(&c->entries[l]) + v4_rows_bytes_used(&c->keys[l]);
    return b;
}

size_t v41_cache_window_bytes(const v41_cache *c)
{
    size_t b = 0;
    for (size_t l = 0; l < c->n_layers; l++) b += v4_rows_bytes_used(&c->window[l]);
    return b;
}

size_t v41_cache_state_bytes(const v41_cache *c)
{
    size_t b = 0;
    for (size_t l = 0; l < c->n_layers; l++) b += v41_compressor_state_bytes(&c->state[l]);
    return b;
}

/* Push the chunk n[S][d] (layer l's normed input) through source l's compressor and store what it completes:
 * the index keys from the latent before the entry is rotated, then the entries. */
static int source_push(v41_cache *cache, const v41_config *c, const v41_weights *w, size_t l, const float *n,
                       size_t S)
{
    const size_t Dh = c->core.head_dim, DI = c->indexer.head_dim, first = cache->entries[l].len;
    const size_t n_max = (cache->state[l].pos + S) / c->ratio - cache->state[l].pos / c->ratio + 1;
    float *L = malloc(n_max * (2 * Dh + DI) * sizeof *L);
    if (!L) return kvl_fail(KVL_ENOMEM, "v41 stack: out of memory");
    float *Z = L + n_max * Dh, *K = Z + n_max * Dh;
    size_t n_new = 0;
    int rc = v41_compressor_push(L, &n_new, &c->compressor, &w->compressor, &cache->state[l], n, S);
    if (rc == KVL_OK) rc = v41_index_keys(K, &c->indexer, w->w_ik, w->ik_norm, L, n_new, first);
    if (rc == KVL_OK) v41_main_entry(Z, c, L, n_new, first);
    if (rc == KVL_OK) rc = v4_rows_append(&cache->entries[l], Z, n_new);
    if (rc == KVL_OK) rc = v4_rows_append(&cache->keys[l], K, n_new);
    free(L);
    return rc;
}

/* p's source l ← the entries and index keys the cache holds for layer l, read where they are. */
static int source_read(pass *p, const v41_cache *cache, size_t l)
{
    p->src[l] = (v41_source){.entries = v4_rows_tiles(&cache->entries[l]), .keys = v4_rows_tiles(&cache->keys[l]),
                              .keys_mxfp4 = p->keys_mxfp4};
    return KVL_OK;
}

/* How a Full layer's source is made ready for its chunk: fed the chunk (prefill) or taken as it is (replay). */
typedef int (*source_fill)(pass *p, v41_cache *cache, const v41_config *c, const v41_weights *w, size_t l,
                           const float *n, size_t S);

static int fill_by_push(pass *p, v41_cache *cache, const v41_config *c, const v41_weights *w, size_t l,
                        const float *n, size_t S)
{
    KVL_TRY(source_push(cache, c, w, l, n, S));
    return source_read(p, cache, l);
}

static int fill_as_held(pass *p, v41_cache *cache, const v41_config *c, const v41_weights *w, size_t l,
                        const float *n, size_t S)
{
    (void)c; (void)w; (void)n; (void)S;
    return source_read(p, cache, l);
}

/* win[start + S − win_first][Dh]: held rows win_first … start − 1, then the chunk's rows kv[S][Dh] as stored. */
static int cache_window(float *win, const v4_rows *ring, const float *kv, size_t S, size_t start, size_t win_first,
                        size_t Dh)
{
    const size_t n_old = start - win_first;
    if (n_old) KVL_TRY(v4_rows_read(win, ring, win_first, n_old));
    memcpy(win + n_old * Dh, kv, S * Dh * sizeof *win);
    return v4_rows_round(win + n_old * Dh, ring, S);
}

/* h[S][d] ← the residual stream after layers l0 … l1 − 1 for h[S][d] entering layer l0 at positions
 * start … start + S − 1. Layer l's window rows run from the ring's first position (0, or where a replay
 * restarted it), so query t sees [max(first, t − W + 1), t]; the chunk's rows are appended after it attends. */
static int run_layers(float *h, int32_t *sel, const v41_stack_config *s, const v41_stack_weights *w,
                      v41_cache *c, size_t l0, size_t l1, size_t start, size_t S, source_fill fill)
{
    const size_t d = s->d, Dh = s->layers[0].core.head_dim, W = s->layers[0].core.window;
    for (size_t l = l0; l < l1; l++)
        if (c->window[l].len != start)
            return kvl_fail(KVL_EINVAL, "v41 stack: layer %zu's window ends at position %zu, the chunk starts at %zu",
                            l, c->window[l].len, start);
    pass p;
    KVL_TRY(pass_init(&p, s->n_layers, S, c->fmt == V41_CACHE_NATIVE));
    float *n = malloc(S * d * sizeof *n), *a = malloc(S * d * sizeof *a), *kv = malloc(S * Dh * sizeof *kv);
    float *win = malloc((W + S) * Dh * sizeof *win);
    int rc = n && a && kv && win ? KVL_OK : kvl_fail(KVL_ENOMEM, "v41 stack: out of memory for a chunk of %zu", S);
    for (size_t l = 0; l < l0 && rc == KVL_OK; l++)  /* sources below the run, read by the layers in it */
        if (s->layers[l].kind == KVL_LAYER_FULL) rc = source_read(&p, c, l);
    for (size_t l = l0; l < l1 && rc == KVL_OK; l++) {
        const v41_config *lc = &s->layers[l];
        const size_t reach = start + 1 > W ? start + 1 - W : 0;
        const size_t win_first = reach > c->window[l].first ? reach : c->window[l].first;
        kvl_rmsnorm_f32(n, h, w->attn_norm + l * d, S, d, s->norm_eps);
        rc = v4_kv(kv, &lc->core, &w->layers[l].core, n, S, (int64_t)start + lc->core.rope_offset);
        if (rc == KVL_OK) rc = cache_window(win, &c->window[l], kv, S, start, win_first, Dh);
        if (rc == KVL_OK && lc->kind == KVL_LAYER_FULL) rc = fill(&p, c, lc, &w->layers[l], l, n, S);
        const v41_chunk ch = {.x = n, .S = S, .start = start, .win = win, .win_first = win_first};
        if (rc == KVL_OK) rc = attend_layer(a, &p, s, w, l, &ch, &c->scored[l]);
        if (rc == KVL_OK) rc = v4_rows_append(&c->window[l], kv, S);
        for (size_t i = 0; i < S * d && rc == KVL_OK; i++) h[i] += a[i];
        copy_sel(sel, &p, s, l);
    }
    free(n); free(a); free(kv); free(win);
    pass_free(&p);
    return rc;
}

static int check_chunk(const char *fn, const v41_stack_config *s, const v41_stack_weights *w, const v41_cache *c,
                       const void *out, const float *x, size_t S)
{
    if (!s || !w || !c || !out || !x || S == 0) return kvl_fail(KVL_EINVAL, "%s: NULL argument or no tokens", fn);
    if (c->n_layers != s->n_layers || S > c->max_tokens - c->len)
        return kvl_fail(KVL_EINVAL, "%s: cache of another stack, or %zu tokens after %zu exceed %zu", fn, S, c->len,
                        c->max_tokens);
    return KVL_OK;
}

int v41_stack_prefill(float *out, int32_t *sel, const v41_stack_config *s, const v41_stack_weights *w,
                       v41_cache *c, const float *x, size_t S)
{
    KVL_TRY(check_chunk("v41_stack_prefill", s, w, c, out, x, S));
    memcpy(out, x, S * s->d * sizeof *out);
    KVL_TRY(run_layers(out, sel, s, w, c, 0, s->n_layers, c->len, S, fill_by_push));
    c->len += S;
    return KVL_OK;
}

int v41_stack_prefill_layers(float *h, const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c,
                              size_t l0, size_t l1, size_t S)
{
    KVL_TRY(check_chunk("v41_stack_prefill_layers", s, w, c, h, h, S));
    if (l0 > l1 || l1 > s->n_layers)
        return kvl_fail(KVL_EINVAL, "v41_stack_prefill_layers: layers %zu … %zu of %zu", l0, l1, s->n_layers);
    return run_layers(h, NULL, s, w, c, l0, l1, c->len, S, fill_by_push);
}

int v41_stack_push_source(const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c, size_t l,
                           const float *h, size_t S)
{
    KVL_TRY(check_chunk("v41_stack_push_source", s, w, c, h, h, S));
    if (l >= s->n_layers || s->layers[l].kind != KVL_LAYER_FULL)
        return kvl_fail(KVL_EINVAL, "v41_stack_push_source: layer %zu is not a KV source", l);
    float *n = malloc(S * s->d * sizeof *n);
    if (!n) return kvl_fail(KVL_ENOMEM, "v41_stack_push_source: out of memory");
    kvl_rmsnorm_f32(n, h, w->attn_norm + l * s->d, S, s->d, s->norm_eps);
    const int rc = source_push(c, &s->layers[l], &w->layers[l], l, n, S);
    free(n);
    return rc;
}

int v41_stack_replay_layers(float *h, int32_t *sel, const v41_stack_config *s, const v41_stack_weights *w,
                             v41_cache *c, size_t l0, size_t l1, size_t from)
{
    if (!s || !w || !c || !h || c->n_layers != s->n_layers || l0 > l1 || l1 > s->n_layers)
        return kvl_fail(KVL_EINVAL, "v41_stack_replay_layers: NULL argument, cache of another stack or layers %zu … %zu",
                        l0, l1);
    if (from >= c->len)
        return kvl_fail(KVL_EINVAL, "v41_stack_replay_layers: replay from %zu, but the cache holds %zu tokens", from,
                        c->len);
    for (size_t l = l0; l < l1; l++) v4_rows_restart(&c->window[l], from);
    return run_layers(h, sel, s, w, c, l0, l1, from, c->len - from, fill_as_held);
}

int v41_stack_decode(float *out, const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c,
                      const float *x_t)
{
    return v41_stack_prefill(out, NULL, s, w, c, x_t, 1);
}
