#include "v41.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "linalg.h"
#include "scratch.h"
#include "status.h"
#include "v4_rope.h"

/* ---- config --------------------------------------------------------------------------------------- */

const char *v41_mode_name(kvl_layer_kind kind)
{
    switch (kind) {
    case KVL_LAYER_FULL: return "Full";
    case KVL_LAYER_REINDEX: return "Reindex";
    case KVL_LAYER_REUSE: return "Reuse";
    default: return "window";
    }
}

int v41_config_from_model(v41_config *c, const kvl_model *m, size_t layer)
{
    memset(c, 0, sizeof *c);
    if (m->generation != KVL_GEN_V41)
        return kvl_fail(KVL_EINVAL, "%s: attention is %s, not V4.1 (no kv_source_layers)", m->path,
                        kvl_generation_name(m->generation));
    if (layer >= m->n_layers) return kvl_fail(KVL_EINVAL, "%s: no layer %zu (%zu layers)", m->path, layer, m->n_layers);
    const kvl_layer *l = &m->layers[layer];
    c->kind = l->kind;
    c->ratio = l->kind == KVL_LAYER_WINDOW ? 0 : l->compress_ratio;
    c->kv_source = l->kv_source;
    c->index_source = l->index_source;
    c->core = (v4_config){.kind = KVL_LAYER_WINDOW, .d = m->d, .n_heads = m->n_heads, .head_dim = m->head_dim,
                          .q_lora_rank = m->q_lora_rank, .o_groups = m->o_groups, .o_lora_rank = m->o_lora_rank,
                          .window = m->window, .norm_eps = m->norm_eps};
    int rc = v4_layer_rope(&c->core.rope, m, c->kind);
    c->compressor = (v41_compressor_config){.d = m->d, .width = m->head_dim, .ratio = c->ratio ? c->ratio : 1,
                                             .norm_eps = m->norm_eps};
    c->indexer = (v41_indexer_config){.d = m->d, .q_lora_rank = m->q_lora_rank, .width = m->head_dim,
                                       .n_heads = m->index_n_heads, .head_dim = m->index_head_dim,
                                       .topk = m->index_topk, .ratio = c->ratio ? c->ratio : 1,
                                       .norm_eps = m->norm_eps, .rope = c->core.rope};
    if (rc == KVL_OK) rc = v41_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: layer %zu: %s", m->path, layer, kvl_error());
    return KVL_OK;
}

int v41_config_check(const v41_config *c)
{
    if (!c) return kvl_fail(KVL_EINVAL, "v41: config is NULL");
    if (c->kind != KVL_LAYER_WINDOW && c->kind != KVL_LAYER_FULL && c->kind != KVL_LAYER_REINDEX &&
        c->kind != KVL_LAYER_REUSE)
        return kvl_fail(KVL_EINVAL, "v41: layer kind %s is not a V4.1 mode", kvl_layer_kind_name(c->kind));
    KVL_TRY(v4_config_check(&c->core));
    if (c->kind == KVL_LAYER_WINDOW) return KVL_OK;
    if (c->ratio == 0) return kvl_fail(KVL_EINVAL, "v41: a %s layer needs a compress ratio", v41_mode_name(c->kind));
    if (c->kind == KVL_LAYER_FULL) KVL_TRY(v41_compressor_config_check(&c->compressor));
    if (c->kind == KVL_LAYER_FULL || c->kind == KVL_LAYER_REINDEX) KVL_TRY(v41_indexer_config_check(&c->indexer));
    if (c->compressor.width != c->core.head_dim || c->indexer.width != c->core.head_dim ||
        c->compressor.ratio != c->ratio || c->indexer.ratio != c->ratio)
        return kvl_fail(KVL_EINVAL, "v41: compressor and indexer must read width head_dim and the layer's ratio");
    return KVL_OK;
}

/* ---- weights -------------------------------------------------------------------------------------- */

enum { V41_N_WEIGHTS = 7 };

static size_t weight_table(v4_weight *t, v41_weights *w, const v41_config *c)
{
    const size_t d = c->core.d, Dh = c->core.head_dim, DI = c->indexer.head_dim, HI = c->indexer.n_heads;
    size_t n = 0;
    if (c->kind == KVL_LAYER_FULL) {
        t[n++] = (v4_weight){&w->compressor.w_c, Dh, d, V4_DRAW_MATRIX};
        if (c->ratio > 1) t[n++] = (v4_weight){&w->compressor.w_z, Dh, d, V4_DRAW_MATRIX};
        t[n++] = (v4_weight){&w->compressor.norm, 1, Dh, V4_DRAW_GAIN};
        t[n++] = (v4_weight){&w->w_ik, DI, Dh, V4_DRAW_MATRIX};
        t[n++] = (v4_weight){&w->ik_norm, 1, DI, V4_DRAW_GAIN};
    }
    if (c->kind == KVL_LAYER_FULL || c->kind == KVL_LAYER_REINDEX) {
        t[n++] = (v4_weight){&w->w_iq, HI * DI, c->core.q_lora_rank, V4_DRAW_MATRIX};
        t[n++] = (v4_weight){&w->w_iw, HI, d, V4_DRAW_MATRIX};
    }
    return n;
}

v41_params v41_layer_params(const v41_config *c)
{
    v41_weights w;
    v4_weight t[V41_N_WEIGHTS];
    const size_t n = weight_table(t, &w, c);
    v41_params p = {.core = v4_weights_count(&c->core)};
    for (size_t i = 0; i < n; i++) {
        const uint64_t len = (uint64_t)t[i].rows * t[i].cols;
        if (t[i].field == &w.w_ik || t[i].field == &w.ik_norm) p.index_keys += len;
        else if (t[i].field == &w.w_iq || t[i].field == &w.w_iw) p.index_query += len;
        else p.compressor += len;
    }
    return p;
}

int v41_weights_init_random(v41_weights *w, const v41_config *c, kvl_rng *rng)
{
    memset(w, 0, sizeof *w);
    KVL_TRY(v41_config_check(c));
    KVL_TRY(v4_weights_init_random(&w->core, &c->core, rng));
    v4_weight t[V41_N_WEIGHTS];
    const size_t n = weight_table(t, w, c);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) total += t[i].rows * t[i].cols;
    w->block = calloc(total ? total : 1, sizeof *w->block);
    if (!w->block) {
        v41_weights_free(w);
        return kvl_fail(KVL_ENOMEM, "v41_weights_init_random: out of memory for %zu floats", total);
    }
    w->n_floats = total;
    for (size_t i = 0, off = 0; i < n; off += t[i].rows * t[i].cols, i++) {
        float *f = *t[i].field = w->block + off;
        const size_t len = t[i].rows * t[i].cols;
        if (t[i].draw == V4_DRAW_GAIN) kvl_rng_uniform_f32(rng, f, len, 0.5, 1.5);
        else kvl_rng_normal_f32(rng, f, len, 1.0 / sqrt((double)t[i].cols));
    }
    return KVL_OK;
}

void v41_weights_free(v41_weights *w)
{
    v4_weights_free(&w->core);
    free(w->block);
    memset(w, 0, sizeof *w);
}

/* ---- pieces ----------------------------------------------------------------------------------------- */

int v41_query(float *q, const v41_config *c, const v41_weights *w, const float *cq, size_t S, int64_t pos0)
{
    KVL_TRY(v41_config_check(c));
    const size_t H = c->core.n_heads, Dh = c->core.head_dim;
    if (S == 0) return KVL_OK;
    KVL_TRY(kvl_matmul_abt_f32(q, cq, w->core.w_uq, S, H * Dh, c->core.q_lora_rank));
    v4_rotate_heads(q, S, H, Dh, &c->core.rope, pos0);
    return KVL_OK;
}

void v41_main_entry(float *Z, const v41_config *c, const float *L, size_t n, size_t first)
{
    const size_t Dh = c->core.head_dim, Dr = c->core.rope.Dr;
    memcpy(Z, L, n * Dh * sizeof *Z);
    for (size_t i = 0; i < n; i++)
        kvl_rope_rotate_interleaved(Z + i * Dh + Dh - Dr, &c->core.rope,
                                    (int64_t)((first + i) * c->ratio) + c->core.rope_offset);
}

/* ---- the attention core: window rows, then picked entries ------------------------------------------- */

/* o[S][H][Dh] un-rotated, for the queries q[S][H][Dh] of ch; sel[S][K] picks into the entries (NULL: none). */
static int attend(float *o, const v41_config *c, const v41_weights *w, const float *q, const v41_chunk *ch,
                  const kvl_row_tiles *entries, const int32_t *sel, size_t K)
{
    const size_t H = c->core.n_heads, Dh = c->core.head_dim, W = c->core.window;
    int rc = KVL_OK;
    for (size_t i = 0; i < ch->S && rc == KVL_OK; i++) {
        const size_t t = ch->start + i, j0 = t + 1 > W && t + 1 - W > ch->win_first ? t + 1 - W : ch->win_first;
        float *oi = o + i * H * Dh;
        rc = v4_attend_query(oi, q + i * H * Dh, ch->win + (j0 - ch->win_first) * Dh, t + 1 - j0, entries,
                             sel ? sel + i * K : NULL, sel ? K : 0, w->core.sinks, H, Dh, &c->core.rope,
                             (int64_t)t + c->core.rope_offset);
    }
    return rc;
}

v41_source v41_source_f32(const v41_config *c, const float *entries, const float *keys, size_t N)
{
    return (v41_source){.entries = kvl_row_tiles_f32(entries, N, c->core.head_dim),
                         .keys = kvl_row_tiles_f32(keys, N, c->indexer.head_dim)};
}

typedef struct {
    float *cq, *q, *o;           /* [S][Dq'], [S][H][Dh], [S][H][Dh] */
    float *q_idx, *w_idx;        /* [S][HI][DI], [S][HI] */
} layer_buffers;

static void buffers_free(layer_buffers *b)
{
    free(b->cq); free(b->q); free(b->o); free(b->q_idx); free(b->w_idx);
}

static int buffers_alloc(layer_buffers *b, const v41_config *c, size_t S)
{
    memset(b, 0, sizeof *b);
    const size_t HD = c->core.n_heads * c->core.head_dim, HI = c->indexer.n_heads, DI = c->indexer.head_dim;
    b->cq = malloc(S * c->core.q_lora_rank * sizeof *b->cq);
    b->q = malloc(S * HD * sizeof *b->q);
    b->o = malloc(S * HD * sizeof *b->o);
    b->q_idx = malloc(S * HI * DI * sizeof *b->q_idx + 1);
    b->w_idx = malloc(S * HI * sizeof *b->w_idx + 1);
    if (b->cq && b->q && b->o && b->q_idx && b->w_idx) return KVL_OK;
    buffers_free(b);
    return kvl_fail(KVL_ENOMEM, "v41: out of memory for a chunk of %zu tokens", S);
}

/* b->cq, b->q: the chunk's query latent and heads. */
static int queries(layer_buffers *b, const v41_config *c, const v41_weights *w, const v41_chunk *ch)
{
    KVL_TRY(v4_query_latent(b->cq, &c->core, &w->core, ch->x, ch->S));
    return v41_query(b->q, c, w, b->cq, ch->S, (int64_t)ch->start + c->core.rope_offset);
}

/* b->q_idx, b->w_idx: the chunk's index queries, rounded like the keys they meet. */
static int index_queries(layer_buffers *b, const v41_config *c, const v41_weights *w, const v41_source *src,
                         const v41_chunk *ch)
{
    const v41_indexer_config *ix = &c->indexer;
    KVL_TRY(v41_index_query(b->q_idx, b->w_idx, ix, w->w_iq, w->w_iw, b->cq, ch->x, ch->S,
                             (int64_t)ch->start + c->core.rope_offset));
    return src->keys_mxfp4 ? v41_index_round_mxfp4(b->q_idx, ch->S * ix->n_heads, ix->head_dim) : KVL_OK;
}

static int check_layer(const char *fn, const v41_config *c, kvl_layer_kind kind, const v41_weights *w,
                       const v41_chunk *ch)
{
    int rc = v41_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    if (c->kind != kind) return kvl_fail(KVL_EINVAL, "%s: layer is %s", fn, v41_mode_name(c->kind));
    if (!w || !w->core.block || !ch || !ch->x || !ch->win || ch->S == 0 || ch->win_first > ch->start)
        return kvl_fail(KVL_EINVAL, "%s: missing weights or an empty chunk", fn);
    return KVL_OK;
}

static int check_source(const char *fn, const v41_config *c, const v41_source *src)
{
    if (!src || !src->entries.tile || !src->keys.tile) return kvl_fail(KVL_EINVAL, "%s: no KV source", fn);
    const size_t Dh = c->core.head_dim, DI = c->indexer.head_dim;
    if (src->entries.N != src->keys.N || src->entries.width != Dh || src->keys.width != DI)
        return kvl_fail(KVL_EINVAL, "%s: a source of %zu entries of %zu and %zu keys of %zu; the layer reads %zu and %zu",
                        fn, src->entries.N, src->entries.width, src->keys.N, src->keys.width, Dh, DI);
    return KVL_OK;
}

/* ---- the four modes ------------------------------------------------------------------------------------ */

int v41_window_layer(float *out, const v41_config *c, const v41_weights *w, const v41_chunk *ch)
{
    KVL_TRY(check_layer(__func__, c, KVL_LAYER_WINDOW, w, ch));
    layer_buffers b;
    KVL_TRY(buffers_alloc(&b, c, ch->S));
    int rc = queries(&b, c, w, ch);
    if (rc == KVL_OK) rc = attend(b.o, c, w, b.q, ch, NULL, NULL, 0);
    if (rc == KVL_OK) rc = v4_output(out, &c->core, &w->core, b.o, ch->S);
    buffers_free(&b);
    return rc;
}

int v41_full_layer(float *out, int32_t *sel, float *I, uint64_t *scored, const v41_config *c,
                    const v41_weights *w, const v41_source *src, const v41_chunk *ch)
{
    KVL_TRY(check_layer(__func__, c, KVL_LAYER_FULL, w, ch));
    KVL_TRY(check_source(__func__, c, src));
    const v41_indexer_config *ix = &c->indexer;
    layer_buffers b;
    KVL_TRY(buffers_alloc(&b, c, ch->S));
    int rc = queries(&b, c, w, ch);
    if (rc == KVL_OK) rc = index_queries(&b, c, w, src, ch);
    if (rc == KVL_OK) rc = v41_index_scores_all(I, scored, ix, b.q_idx, b.w_idx, &src->keys, ch->S, ch->start);
    if (rc == KVL_OK) rc = v41_index_select(sel, ix, I, ch->S, src->keys.N);
    if (rc == KVL_OK) rc = attend(b.o, c, w, b.q, ch, &src->entries, sel, ix->topk);
    if (rc == KVL_OK) rc = v4_output(out, &c->core, &w->core, b.o, ch->S);
    buffers_free(&b);
    return rc;
}

int v41_reindex_layer(float *out, int32_t *sel, uint64_t *scored, const v41_config *c, const v41_weights *w,
                       const v41_source *src, const uint8_t *pool, const v41_chunk *ch)
{
    KVL_TRY(check_layer(__func__, c, KVL_LAYER_REINDEX, w, ch));
    KVL_TRY(check_source(__func__, c, src));
    const v41_indexer_config *ix = &c->indexer;
    float *I = malloc(ch->S * (src->keys.N ? src->keys.N : 1) * sizeof *I);
    if (!I) return kvl_fail(KVL_ENOMEM, "%s: out of memory", __func__);
    layer_buffers b;
    int rc = buffers_alloc(&b, c, ch->S);
    if (rc != KVL_OK) {
        free(I);
        return rc;
    }
    rc = queries(&b, c, w, ch);
    if (rc == KVL_OK) rc = index_queries(&b, c, w, src, ch);
    if (rc == KVL_OK && pool) rc = v41_index_scores_pool(I, scored, ix, b.q_idx, b.w_idx, &src->keys, pool, ch->S);
    if (rc == KVL_OK && !pool)
        rc = v41_index_scores_all(I, scored, ix, b.q_idx, b.w_idx, &src->keys, ch->S, ch->start);
    if (rc == KVL_OK) rc = v41_index_select(sel, ix, I, ch->S, src->keys.N);
    if (rc == KVL_OK) rc = attend(b.o, c, w, b.q, ch, &src->entries, sel, ix->topk);
    if (rc == KVL_OK) rc = v4_output(out, &c->core, &w->core, b.o, ch->S);
    buffers_free(&b);
    free(I);
    return rc;
}

int v41_reuse_layer(float *out, const v41_config *c, const v41_weights *w, const v41_source *src,
                     const int32_t *sel, const v41_chunk *ch)
{
    KVL_TRY(check_layer(__func__, c, KVL_LAYER_REUSE, w, ch));
    KVL_TRY(check_source(__func__, c, src));
    layer_buffers b;
    KVL_TRY(buffers_alloc(&b, c, ch->S));
    int rc = queries(&b, c, w, ch);
    if (rc == KVL_OK) rc = attend(b.o, c, w, b.q, ch, &src->entries, sel, c->indexer.topk);
    if (rc == KVL_OK) rc = v4_output(out, &c->core, &w->core, b.o, ch->S);
    buffers_free(&b);
    return rc;
}
