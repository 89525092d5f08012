/* The V4 cache and the paths that use it: v4_prefill, v4_decode, v4_replay (declared in v4.h). */
#include "v4.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "index_scan.h"
#include "rows.h"
#include "status.h"

const char *v4_cache_format_name(v4_cache_format f) { return f == V4_CACHE_NATIVE ? "native" : "f32"; }

/* ---- init, bytes, free ------------------------------------------------------------------------------ */

static int check_native(const v4_config *c)
{
    if (c->head_dim != KVF_V4_NOPE + KVF_V4_ROPE || c->rope.Dr != KVF_V4_ROPE)
        return kvl_fail(KVL_EINVAL, "v4_cache_init: the native 584-byte row holds head_dim %d with %d rotary channels, "
                        "not %zu with %zu", KVF_V4_NOPE + KVF_V4_ROPE, KVF_V4_ROPE, c->head_dim, c->rope.Dr);
    if (c->kind == KVL_LAYER_CSA && c->indexer.head_dim != KVF_INDEX_DIM)
        return kvl_fail(KVL_EINVAL, "v4_cache_init: the native 68-byte index key holds %d channels, not %zu",
                        KVF_INDEX_DIM, c->indexer.head_dim);
    return KVL_OK;
}

static int cache_parts(v4_cache *cache, const v4_config *c, size_t max_tokens, v4_cache_format fmt)
{
    const int native = fmt == V4_CACHE_NATIVE;
    KVL_TRY(v4_rows_init(&cache->window, native ? V4_ROWS_MAIN : V4_ROWS_F32, c->head_dim,
                         c->window < max_tokens ? c->window : max_tokens));
    if (c->kind == KVL_LAYER_WINDOW) return KVL_OK;
    const size_t n = max_tokens / c->compressor.ratio ? max_tokens / c->compressor.ratio : 1;
    KVL_TRY(v4_rows_init(&cache->entries, native ? V4_ROWS_MAIN : V4_ROWS_F32, c->head_dim, n));
    KVL_TRY(v4_compressor_state_init(&cache->kv_state, &c->compressor));
    if (c->kind != KVL_LAYER_CSA) return KVL_OK;
    KVL_TRY(v4_rows_init(&cache->index_keys, native ? V4_ROWS_INDEX : V4_ROWS_F32, c->indexer.head_dim, n));
    return v4_compressor_state_init(&cache->index_state, &c->indexer.compressor);
}

int v4_cache_init(v4_cache *cache, const v4_config *c, size_t max_tokens, v4_cache_format fmt)
{
    memset(cache, 0, sizeof *cache);
    int rc = v4_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "v4_cache_init: %s", kvl_error());
    if (max_tokens == 0) return kvl_fail(KVL_EINVAL, "v4_cache_init: max_tokens must be positive");
    if (fmt != V4_CACHE_F32 && fmt != V4_CACHE_NATIVE)
        return kvl_fail(KVL_EINVAL, "v4_cache_init: unknown format %d", fmt);
    if (fmt == V4_CACHE_NATIVE) KVL_TRY(check_native(c));
    cache->fmt = fmt;
    cache->max_tokens = max_tokens;
    rc = cache_parts(cache, c, max_tokens, fmt);
    if (rc != KVL_OK) v4_cache_free(cache);
    return rc;
}

void v4_cache_free(v4_cache *cache)
{
    v4_rows_free(&cache->window);
    v4_rows_free(&cache->entries);
    v4_rows_free(&cache->index_keys);
    v4_compressor_state_free(&cache->kv_state);
    v4_compressor_state_free(&cache->index_state);
    memset(cache, 0, sizeof *cache);
}

size_t v4_cache_bytes_used(const v4_cache *cache)
{
    return v4_rows_bytes_used(&cache->entries) + v4_rows_bytes_used(&cache->index_keys);
}

size_t v4_cache_window_bytes(const v4_cache *cache) { return v4_rows_bytes_used(&cache->window); }

size_t v4_cache_state_bytes(const v4_cache *cache)
{
    return v4_compressor_state_bytes(&cache->kv_state) + v4_compressor_state_bytes(&cache->index_state);
}

int v4_cache_drop_window(v4_cache *cache, size_t s)
{
    if (!cache || !cache->window.bytes) return kvl_fail(KVL_EINVAL, "v4_cache_drop_window: no cache");
    if (s > cache->len)
        return kvl_fail(KVL_EINVAL, "v4_cache_drop_window: position %zu lies past the %zu the cache covers", s,
                        cache->len);
    v4_rows_restart(&cache->window, s);
    return KVL_OK;
}

/* ---- checks ----------------------------------------------------------------------------------------- */

/* The cache was made for c, and x[S][d] is a non-empty finite chunk. */
static int check_chunk(const char *fn, const v4_config *c, const v4_weights *w, const v4_cache *cache,
                       const float *out, const float *x, size_t S)
{
    int rc = v4_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    if (!w || !w->block || !cache || !out || !x) return kvl_fail(KVL_EINVAL, "%s: NULL weights, cache or array", fn);
    const size_t slots = c->window < cache->max_tokens ? c->window : cache->max_tokens;
    const size_t f = 1 + c->compressor.overlap;
    int fits = cache->window.bytes && cache->window.width == c->head_dim && cache->window.slots == slots;
    if (c->kind != KVL_LAYER_WINDOW)
        fits = fits && cache->entries.bytes && cache->kv_state.cols == f * c->head_dim &&
               cache->kv_state.rows == f * c->compressor.ratio;
    if (c->kind == KVL_LAYER_CSA)
        fits = fits && cache->index_keys.bytes && cache->index_keys.width == c->indexer.head_dim;
    if (!fits)
        return kvl_fail(KVL_EINVAL, "%s: the cache was not made for this %s layer", fn, kvl_layer_kind_name(c->kind));
    if (S == 0) return kvl_fail(KVL_EINVAL, "%s: no tokens", fn);
    if (S > SIZE_MAX / sizeof(float) / c->d) return kvl_fail(KVL_EINVAL, "%s: %zu tokens overflow", fn, S);
    int err = kvf_check_finite(x, S * c->d);
    if (err != KVF_OK) return kvl_fail(KVL_EINVAL, "%s: input: %s", fn, kvf_strerror(err));
    return KVL_OK;
}

/* ---- feeding the compressors ------------------------------------------------------------------------ */

/* Push x[S][d] through one compressor and append the entries it completes to `rows` (index keys first
 * rotated by H_DI/√DI when the store is packed: the fp4 path's keys). */
static int feed(v4_rows *rows, v4_compressor_state *state, const v4_compressor_config *k,
                const v4_compressor_weights *kw, const v4_indexer_config *ix, const float *x, size_t S,
                int64_t rope_offset)
{
    const size_t n_max = (state->pos + S) / k->ratio - state->pos / k->ratio;
    float *e = malloc((n_max ? n_max : 1) * k->width * sizeof *e);
    if (!e) return kvl_fail(KVL_ENOMEM, "v4: out of memory for %zu entries", n_max);
    size_t n = 0;
    int rc = v4_compressor_push(e, &n, k, kw, state, x, S, rope_offset);
    if (rc == KVL_OK && ix && rows->store == V4_ROWS_INDEX) rc = v4_index_rotate(e, ix, n);
    if (rc == KVL_OK) rc = v4_rows_append(rows, e, n);
    free(e);
    return rc;
}

static int feed_compressors(const v4_config *c, const v4_weights *w, v4_cache *cache, const float *x, size_t S)
{
    if (c->kind != KVL_LAYER_WINDOW)
        KVL_TRY(feed(&cache->entries, &cache->kv_state, &c->compressor, &w->compressor, NULL, x, S, c->rope_offset));
    if (c->kind == KVL_LAYER_CSA)
        KVL_TRY(feed(&cache->index_keys, &cache->index_state, &c->indexer.compressor, &w->indexer.compressor,
                     &c->indexer, x, S, c->rope_offset));
    cache->len += S;
    return KVL_OK;
}

/* ---- attending a chunk -------------------------------------------------------------------------------- */

typedef struct {
    float *cq, *q, *kv, *win, *o;  /* [S][Dq'], [S][H][Dh], [S][Dh], [n_win][Dh], [S][H][Dh] */
    float *q_idx, *w_idx, *I;      /* [S][HI][DI], [S][HI], [S][N] */
    int32_t *sel;                  /* [S][K] */
} chunk_buffers;

static void chunk_free(chunk_buffers *b)
{
    free(b->cq); free(b->q); free(b->kv); free(b->win); free(b->o);
    free(b->q_idx); free(b->w_idx); free(b->I); free(b->sel);
}

static int chunk_alloc(chunk_buffers *b, const v4_config *c, size_t S, size_t n_win, size_t N)
{
    memset(b, 0, sizeof *b);
    const size_t H = c->n_heads, Dh = c->head_dim, csa = c->kind == KVL_LAYER_CSA;
    const size_t HI = c->indexer.n_heads, DI = c->indexer.head_dim, K = c->indexer.topk;
    const size_t big = (H * Dh > c->q_lora_rank ? H * Dh : c->q_lora_rank) + (csa ? HI * DI + N + K : 0);
    if (S > SIZE_MAX / sizeof(float) / big || n_win > SIZE_MAX / sizeof(float) / Dh)
        return kvl_fail(KVL_EINVAL, "v4: %zu tokens overflow", S);
    const size_t n1 = N ? N : 1;
    b->cq = malloc(S * c->q_lora_rank * sizeof *b->cq);
    b->q = malloc(S * H * Dh * sizeof *b->q);
    b->kv = malloc(S * Dh * sizeof *b->kv);
    b->win = malloc(n_win * Dh * sizeof *b->win);
    b->o = malloc(S * H * Dh * sizeof *b->o);
    int ok = b->cq && b->q && b->kv && b->win && b->o;
    if (csa) {
        b->q_idx = malloc(S * HI * DI * sizeof *b->q_idx);
        b->w_idx = malloc(S * HI * sizeof *b->w_idx);
        b->I = malloc(S * n1 * sizeof *b->I);
        b->sel = malloc(S * K * sizeof *b->sel);
        ok = ok && b->q_idx && b->w_idx && b->I && b->sel;
    }
    if (ok) return KVL_OK;
    chunk_free(b);
    return kvl_fail(KVL_ENOMEM, "v4: out of memory for a chunk of %zu tokens", S);
}

/* q_idx[n][DI] ← the query heads as the stored keys are scored: rotated by H_DI/√DI and rounded to MXFP4
 * when the keys are stored so (68-byte rows: the fp4 path), left in float32 against float32 keys. */
static int queries_like_keys(float *q_idx, const v4_indexer_config *ix, const v4_rows *keys, size_t n)
{
    if (keys->store != V4_ROWS_INDEX) return KVL_OK;
    KVL_TRY(v4_index_rotate(q_idx, ix, n));
    return v4_index_round_mxfp4(q_idx, ix, n);
}

/* b->sel[S][K]: the chunk's CSA picks over the N entries visible to its last query. */
static int chunk_picks(chunk_buffers *b, const v4_config *c, const v4_weights *w, const v4_cache *cache,
                       const float *x, size_t S, size_t start, size_t N)
{
    const v4_indexer_config *ix = &c->indexer;
    KVL_TRY(v4_index_query(b->q_idx, b->w_idx, ix, &w->indexer, b->cq, x, S, (int64_t)start + c->rope_offset));
    KVL_TRY(queries_like_keys(b->q_idx, ix, &cache->index_keys, S * ix->n_heads));
    kvl_row_tiles keys = v4_rows_tiles(&cache->index_keys);
    keys.N = N;
    KVL_TRY(kvl_index_scores(b->I, b->q_idx, b->w_idx, &keys, S, ix->n_heads, start, ix->compressor.ratio));
    return v4_index_select(b->sel, ix, b->I, S, N);
}

/* b->win[n_win][Dh] = the window rows the chunk's queries read: the held rows of positions win_first …
 * start − 1, then the chunk's own rows b->kv passed through the window's storage. */
static int chunk_window(chunk_buffers *b, const v4_config *c, const v4_cache *cache, size_t S, size_t start,
                        size_t win_first)
{
    const size_t Dh = c->head_dim, n_old = start - win_first;
    KVL_TRY(v4_rows_read(b->win, &cache->window, win_first, n_old));
    memcpy(b->win + n_old * Dh, b->kv, S * Dh * sizeof *b->win);
    return v4_rows_round(b->win + n_old * Dh, &cache->window, S);
}

/* out[S][d] for x[S][d] at start = window.len: the chunk attends over its window and whatever global
 * entries are visible at each position, then its window rows are appended. */
static int attend_chunk(float *out, int32_t *sel, const v4_config *c, const v4_weights *w, v4_cache *cache,
                        const float *x, size_t S)
{
    const size_t start = cache->window.len, W = c->window;
    const size_t reach = start + 1 > W ? start + 1 - W : 0;   /* the first query's oldest window position */
    const size_t win_first = reach > cache->window.first ? reach : cache->window.first;
    const size_t N = c->kind == KVL_LAYER_WINDOW ? 0 : v4_compressor_entries(&c->compressor, start + S);
    const int64_t pos0 = (int64_t)start + c->rope_offset;
    chunk_buffers b;
    KVL_TRY(chunk_alloc(&b, c, S, start - win_first + S, N));
    int rc = v4_query_latent(b.cq, c, w, x, S);
    if (rc == KVL_OK) rc = v4_query(b.q, c, w, b.cq, S, pos0);
    if (rc == KVL_OK) rc = v4_kv(b.kv, c, w, x, S, pos0);
    if (rc == KVL_OK) rc = chunk_window(&b, c, cache, S, start, win_first);
    if (rc == KVL_OK && c->kind == KVL_LAYER_CSA) rc = chunk_picks(&b, c, w, cache, x, S, start, N);
    kvl_row_tiles entries = v4_rows_tiles(&cache->entries);   /* read where they are: picks, or tile by tile */
    entries.N = N;
    if (rc == KVL_OK) rc = v4_attend(b.o, c, w, b.q, b.win, win_first, &entries, b.sel, S, start);
    if (rc == KVL_OK) rc = v4_output(out, c, w, b.o, S);
    if (rc == KVL_OK) rc = v4_rows_append(&cache->window, b.kv, S);
    if (rc == KVL_OK && sel && c->kind == KVL_LAYER_CSA) memcpy(sel, b.sel, S * c->indexer.topk * sizeof *sel);
    chunk_free(&b);
    return rc;
}

/* ---- the three entry points ------------------------------------------------------------------------------ */

int v4_prefill(float *out, int32_t *sel, const v4_config *c, const v4_weights *w, v4_cache *cache, const float *x,
               size_t S)
{
    KVL_TRY(check_chunk(__func__, c, w, cache, out, x, S));
    if (cache->window.len != cache->len)
        return kvl_fail(KVL_EINVAL, "%s: the window holds positions up to %zu, the cache %zu: replay first", __func__,
                        cache->window.len, cache->len);
    if (S > cache->max_tokens - cache->len)
        return kvl_fail(KVL_EINVAL, "%s: %zu tokens after %zu exceed the cache's %zu positions", __func__, S, cache->len,
                        cache->max_tokens);
    KVL_TRY(feed_compressors(c, w, cache, x, S));
    return attend_chunk(out, sel, c, w, cache, x, S);
}

int v4_decode(float *out, int32_t *sel, const v4_config *c, const v4_weights *w, v4_cache *cache, const float *x_t)
{
    return v4_prefill(out, sel, c, w, cache, x_t, 1);
}

int v4_replay(float *out, int32_t *sel, const v4_config *c, const v4_weights *w, v4_cache *cache, const float *x,
              size_t S)
{
    KVL_TRY(check_chunk(__func__, c, w, cache, out, x, S));
    if (S > cache->len - cache->window.len)
        return kvl_fail(KVL_EINVAL, "%s: %zu tokens from position %zu pass the %zu the cache's global part covers",
                        __func__, S, cache->window.len, cache->len);
    return attend_chunk(out, sel, c, w, cache, x, S);
}
