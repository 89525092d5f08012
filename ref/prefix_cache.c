#include "prefix_cache.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prefix_file.h"
#include "status.h"

/* ---- building a file: a list of sections that owns its bytes ---------------------------------------- */

typedef struct {
    prefix_section *s;
    size_t n, cap;
} section_list;

static void list_free(section_list *L)
{
    for (size_t i = 0; i < L->n; i++) free((void *)L->s[i].bytes);
    free(L->s);
    memset(L, 0, sizeof *L);
}

/* Append a section whose bytes[rows][row_bytes] the list takes over. */
static int list_push(section_list *L, const char *tag, size_t layer, uint32_t store, size_t row_bytes, size_t rows,
                     uint64_t first, uint8_t *bytes)
{
    if (L->n == L->cap) {
        const size_t cap = L->cap ? 2 * L->cap : 16;
        prefix_section *grown = realloc(L->s, cap * sizeof *grown);
        if (!grown) {
            free(bytes);
            return kvl_fail(KVL_ENOMEM, "prefix cache: out of memory");
        }
        L->s = grown;
        L->cap = cap;
    }
    prefix_section *s = &L->s[L->n++];
    *s = (prefix_section){.layer = (uint32_t)layer, .store = store, .row_bytes = row_bytes, .rows = rows,
                          .first = first, .bytes = bytes};
    snprintf(s->tag, sizeof s->tag, "%s", tag);
    return KVL_OK;
}

/* The rows r holds, as stored, from its oldest position. */
static int add_rows(section_list *L, const char *tag, size_t layer, const v4_rows *r)
{
    const size_t held = v4_rows_held(r);
    uint8_t *b = malloc(held * r->row_bytes + 1);
    if (!b) return kvl_fail(KVL_ENOMEM, "prefix cache: out of memory for %zu rows", held);
    v4_rows_export(b, r);
    return list_push(L, tag, layer, r->store, r->row_bytes, held, v4_rows_oldest(r), b);
}

/* x[rows][cols] float32, `first` the tokens the state has seen. */
static int add_floats(section_list *L, const char *tag, size_t layer, const float *x, size_t rows, size_t cols,
                      uint64_t first)
{
    uint8_t *b = malloc(rows * cols * sizeof(float) + 1);
    if (!b) return kvl_fail(KVL_ENOMEM, "prefix cache: out of memory");
    memcpy(b, x, rows * cols * sizeof(float));
    return list_push(L, tag, layer, V4_ROWS_F32, cols * sizeof(float), rows, first, b);
}

/* ---- reading one back ---------------------------------------------------------------------------------- */

static int find_section(const prefix_section **out, const prefix_file *f, const char *tag, size_t layer,
                        const char *path)
{
    *out = prefix_file_find(f, tag, (uint32_t)layer);
    if (!*out) return kvl_fail(KVL_EPARSE, "%s: no section \"%s\" for layer %zu", path, tag, layer);
    return KVL_OK;
}

static int check_shape(const prefix_section *s, uint32_t store, size_t row_bytes, size_t rows, uint64_t first,
                       const char *path)
{
    if (s->store != store || s->row_bytes != row_bytes)
        return kvl_fail(KVL_EPARSE, "%s: section \"%s\" of layer %u holds %s rows of %llu bytes; the cache stores %s rows "
                        "of %zu", path, s->tag, s->layer, v4_rows_store_name((v4_rows_store)s->store),
                        (unsigned long long)s->row_bytes, v4_rows_store_name((v4_rows_store)store), row_bytes);
    if (s->rows != rows || s->first != first)
        return kvl_fail(KVL_EPARSE, "%s: section \"%s\" of layer %u has %llu rows from %llu; %zu from %llu expected", path,
                        s->tag, s->layer, (unsigned long long)s->rows, (unsigned long long)s->first, rows,
                        (unsigned long long)first);
    return KVL_OK;
}

/* r ← n rows of section (tag, layer), starting at position first. */
static int import_rows(v4_rows *r, const prefix_file *f, const char *tag, size_t layer, size_t first, size_t n,
                       const char *path)
{
    const prefix_section *s;
    KVL_TRY(find_section(&s, f, tag, layer, path));
    KVL_TRY(check_shape(s, r->store, r->row_bytes, n, first, path));
    const int rc = v4_rows_import(r, s->bytes, first, n);
    if (rc != KVL_OK) return kvl_fail(KVL_EPARSE, "%s: section \"%s\" of layer %zu: %s", path, tag, layer, kvl_error());
    return KVL_OK;
}

/* x[rows][cols] ← section (tag, layer) of float32 state that has seen `first` tokens; no NaN accepted (an
 * empty V4 gate slot is −∞). */
static int import_floats(float *x, size_t rows, size_t cols, uint64_t first, const prefix_file *f, const char *tag,
                         size_t layer, const char *path)
{
    const prefix_section *s;
    KVL_TRY(find_section(&s, f, tag, layer, path));
    KVL_TRY(check_shape(s, V4_ROWS_F32, cols * sizeof(float), rows, first, path));
    memcpy(x, s->bytes, rows * cols * sizeof *x);
    for (size_t i = 0; i < rows * cols; i++)
        if (isnan(x[i])) return kvl_fail(KVL_EPARSE, "%s: section \"%s\" of layer %zu holds a NaN", path, tag, layer);
    return KVL_OK;
}

static int check_file(const prefix_file *f, uint64_t fingerprint, size_t max_tokens, const char *path)
{
    if (f->fingerprint != fingerprint)
        return kvl_fail(KVL_EPARSE, "%s: written for another model or cache format (fingerprint %016llx, this one %016llx)",
                        path, (unsigned long long)f->fingerprint, (unsigned long long)fingerprint);
    if (f->tokens == 0 || f->tokens > max_tokens)
        return kvl_fail(KVL_EPARSE, "%s: a prefix of %llu tokens; the cache takes 1 … %zu", path,
                        (unsigned long long)f->tokens, max_tokens);
    return KVL_OK;
}

static uint64_t hash_sizes(uint64_t h, const uint64_t *v, size_t n) { return prefix_fnv1a(h, v, n * sizeof *v); }

/* ---- V4.1 ------------------------------------------------------------------------------------------------ */

uint64_t v41_prefix_fingerprint(const v41_stack_config *s, v41_cache_format fmt)
{
    const uint64_t head[] = {41, (uint64_t)fmt, s->n_layers, s->d, s->n_encoder};
    uint64_t h = hash_sizes(PREFIX_FNV_BASIS, head, sizeof head / sizeof *head);
    for (size_t l = 0; l < s->n_layers; l++) {
        const v41_config *c = &s->layers[l];
        const uint64_t v[] = {(uint64_t)c->kind, c->ratio, c->core.head_dim, c->indexer.head_dim, c->core.window};
        h = hash_sizes(h, v, sizeof v / sizeof *v);
    }
    return h;
}

int v41_prefix_save(const char *path, const v41_stack_config *s, const v41_cache *c)
{
    if (!path || !s || !c || c->n_layers != s->n_layers)
        return kvl_fail(KVL_EINVAL, "v41_prefix_save: NULL argument or a cache of another stack");
    section_list L = {0};
    int rc = KVL_OK;
    for (size_t l = 0; l < s->n_layers && rc == KVL_OK; l++) {
        if (s->layers[l].kind != KVL_LAYER_FULL) continue;
        const v41_compressor_state *t = &c->state[l];
        rc = add_rows(&L, "entries", l, &c->entries[l]);
        if (rc == KVL_OK) rc = add_rows(&L, "keys", l, &c->keys[l]);
        if (rc == KVL_OK) rc = add_floats(&L, "tail", l, t->a, 2 * t->M, t->c, t->pos);
    }
    if (rc == KVL_OK) rc = prefix_file_write(path, c->len, v41_prefix_fingerprint(s, c->fmt), L.s, L.n);
    list_free(&L);
    return rc;
}

/* tmp (fresh, for s) ← the checked file f. */
static int v41_fill(v41_cache *tmp, const v41_stack_config *s, const prefix_file *f, const char *path)
{
    const size_t P = f->tokens;
    size_t expected = 0;
    for (size_t l = 0; l < s->n_layers; l++) {
        const v41_config *lc = &s->layers[l];
        v4_rows_restart(&tmp->window[l], P);
        if (lc->kind != KVL_LAYER_FULL) continue;
        const size_t N = P / lc->ratio;
        v41_compressor_state *t = &tmp->state[l];
        KVL_TRY(import_rows(&tmp->entries[l], f, "entries", l, 0, N, path));
        KVL_TRY(import_rows(&tmp->keys[l], f, "keys", l, 0, N, path));
        KVL_TRY(import_floats(t->a, 2 * t->M, t->c, P, f, "tail", l, path));
        t->pos = P;
        expected += 3;
    }
    if (f->n != expected)
        return kvl_fail(KVL_EPARSE, "%s: %zu sections, this stack persists %zu", path, f->n, expected);
    tmp->len = P;
    return KVL_OK;
}

int v41_prefix_restore(v41_cache *c, const v41_stack_config *s, const prefix_file *f, const char *name)
{
    if (!c || !s || !f || !name || c->n_layers != s->n_layers)
        return kvl_fail(KVL_EINVAL, "v41_prefix_restore: NULL argument or a cache of another stack");
    v41_cache tmp = {0};
    int rc = check_file(f, v41_prefix_fingerprint(s, c->fmt), c->max_tokens, name);
    if (rc == KVL_OK) rc = v41_cache_init(&tmp, s, c->max_tokens, c->fmt);
    if (rc == KVL_OK) rc = v41_fill(&tmp, s, f, name);
    if (rc == KVL_OK) {
        v41_cache_free(c);
        *c = tmp;
    } else {
        v41_cache_free(&tmp);
    }
    return rc;
}

int v41_prefix_load(v41_cache *c, const v41_stack_config *s, const char *path)
{
    if (!c || !s || !path) return kvl_fail(KVL_EINVAL, "v41_prefix_load: NULL argument");
    prefix_file f;
    KVL_TRY(prefix_file_read(&f, path));
    const int rc = v41_prefix_restore(c, s, &f, path);
    prefix_file_free(&f);
    return rc;
}

/* ---- V4 ---------------------------------------------------------------------------------------------------- */

uint64_t v4_prefix_fingerprint(const model_config *mc, v4_cache_format fmt)
{
    const uint64_t head[] = {4, (uint64_t)fmt, mc->n_layers, mc->d};
    uint64_t h = hash_sizes(PREFIX_FNV_BASIS, head, sizeof head / sizeof *head);
    for (size_t l = 0; l < mc->n_layers; l++) {
        const v4_config *c = &mc->layers[l].v4;
        const uint64_t v[] = {(uint64_t)mc->layers[l].attn, (uint64_t)c->kind, c->compressor.ratio,
                              c->compressor.overlap, c->head_dim, c->indexer.head_dim, c->window};
        h = hash_sizes(h, v, sizeof v / sizeof *v);
    }
    return h;
}

static int check_v4(const char *fn, const model_config *mc, const model_cache *cache)
{
    if (!mc || !cache || cache->n_layers != mc->n_layers || !cache->v4)
        return kvl_fail(KVL_EINVAL, "%s: NULL argument or a cache of another stack", fn);
    for (size_t l = 0; l < mc->n_layers; l++)
        if (mc->layers[l].attn != MODEL_ATTN_V4 || !cache->v4[l].window.bytes)
            return kvl_fail(KVL_EINVAL, "%s: layer %zu is not a V4 layer with a V4 cache", fn, l);
    return KVL_OK;
}

static int add_v4_global(section_list *L, const model_config *mc, const model_cache *cache)
{
    for (size_t l = 0; l < mc->n_layers; l++) {
        const v4_cache *v = &cache->v4[l];
        const kvl_layer_kind kind = mc->layers[l].v4.kind;
        if (kind == KVL_LAYER_WINDOW) continue;
        KVL_TRY(add_rows(L, "entries", l, &v->entries));
        KVL_TRY(add_floats(L, "kvtail", l, v->kv_state.kv, 2 * v->kv_state.rows, v->kv_state.cols, v->kv_state.pos));
        if (kind != KVL_LAYER_CSA) continue;
        KVL_TRY(add_rows(L, "keys", l, &v->index_keys));
        KVL_TRY(add_floats(L, "ixtail", l, v->index_state.kv, 2 * v->index_state.rows, v->index_state.cols,
                           v->index_state.pos));
    }
    return KVL_OK;
}

static int add_v4_window(section_list *L, const model_config *mc, const model_cache *cache)
{
    for (size_t l = 0; l < mc->n_layers; l++) KVL_TRY(add_rows(L, "window", l, &cache->v4[l].window));
    return KVL_OK;
}

static int write_v4(const char *path, const model_config *mc, const model_cache *cache, const section_list *L)
{
    return prefix_file_write(path, model_cache_len(cache), v4_prefix_fingerprint(mc, cache->v4[0].fmt), L->s, L->n);
}

int v4_prefix_save(const char *path, const model_config *mc, const model_cache *cache)
{
    KVL_TRY(check_v4("v4_prefix_save", mc, cache));
    section_list L = {0};
    int rc = add_v4_global(&L, mc, cache);
    if (rc == KVL_OK) rc = write_v4(path, mc, cache, &L);
    list_free(&L);
    return rc;
}

int v4_prefix_save_with_window(const char *path, const model_config *mc, const model_cache *cache)
{
    KVL_TRY(check_v4("v4_prefix_save_with_window", mc, cache));
    section_list L = {0};
    int rc = add_v4_global(&L, mc, cache);
    if (rc == KVL_OK) rc = add_v4_window(&L, mc, cache);
    if (rc == KVL_OK) rc = write_v4(path, mc, cache, &L);
    list_free(&L);
    return rc;
}

/* One V4 layer's global part of the checked file; *n_sections += the sections it read. */
static int v4_fill_global(v4_cache *v, const v4_config *c, size_t l, const prefix_file *f, const char *path,
                          size_t *n_sections)
{
    const size_t P = f->tokens;
    v->len = P;
    if (c->kind == KVL_LAYER_WINDOW) return KVL_OK;
    const size_t N = P / c->compressor.ratio;
    KVL_TRY(import_rows(&v->entries, f, "entries", l, 0, N, path));
    KVL_TRY(import_floats(v->kv_state.kv, 2 * v->kv_state.rows, v->kv_state.cols, P, f, "kvtail", l, path));
    v->kv_state.pos = P;
    *n_sections += 2;
    if (c->kind != KVL_LAYER_CSA) return KVL_OK;
    KVL_TRY(import_rows(&v->index_keys, f, "keys", l, 0, N, path));
    KVL_TRY(import_floats(v->index_state.kv, 2 * v->index_state.rows, v->index_state.cols, P, f, "ixtail", l, path));
    v->index_state.pos = P;
    *n_sections += 2;
    return KVL_OK;
}

/* One V4 layer's window: the saved rows (ending at P) when the file has them, else empty from P. */
static int v4_fill_window(v4_cache *v, size_t l, const prefix_file *f, const char *path, size_t *n_sections)
{
    const prefix_section *s = prefix_file_find(f, "window", (uint32_t)l);
    if (!s) {
        v4_rows_restart(&v->window, f->tokens);
        return KVL_OK;
    }
    if (s->rows > f->tokens || s->first != f->tokens - s->rows)
        return kvl_fail(KVL_EPARSE, "%s: window of layer %zu holds %llu rows from %llu, not ending at %llu", path, l,
                        (unsigned long long)s->rows, (unsigned long long)s->first, (unsigned long long)f->tokens);
    *n_sections += 1;
    return import_rows(&v->window, f, "window", l, s->first, s->rows, path);
}

int v4_prefix_load(model_cache *cache, const model_config *mc, const char *path)
{
    KVL_TRY(check_v4("v4_prefix_load", mc, cache));
    prefix_file f;
    KVL_TRY(prefix_file_read(&f, path));
    const v4_cache_format fmt = cache->v4[0].fmt;
    const size_t max_tokens = cache->v4[0].max_tokens;
    model_cache tmp = {0};
    size_t n_sections = 0;
    int rc = check_file(&f, v4_prefix_fingerprint(mc, fmt), max_tokens, path);
    if (rc == KVL_OK) rc = model_cache_init_v4(&tmp, mc, max_tokens, fmt);
    for (size_t l = 0; l < mc->n_layers && rc == KVL_OK; l++) {
        rc = v4_fill_global(&tmp.v4[l], &mc->layers[l].v4, l, &f, path, &n_sections);
        if (rc == KVL_OK) rc = v4_fill_window(&tmp.v4[l], l, &f, path, &n_sections);
    }
    if (rc == KVL_OK && n_sections != f.n)
        rc = kvl_fail(KVL_EPARSE, "%s: %zu sections, this stack reads %zu", path, f.n, n_sections);
    if (rc == KVL_OK) {
        model_cache_free(cache);
        *cache = tmp;
    } else {
        model_cache_free(&tmp);
    }
    prefix_file_free(&f);
    return rc;
}
