/* The V4.1 layer stack on the GPU (v41_stack_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c v41_stack_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernel: v41_stack_cuda.cuh; the rest through the twins' headers. */
#include "v41_stack_cuda.cuh"

#include <stdlib.h>
#include <string.h>

extern "C" {
#include "block.h"
}
#include "v41_indexer_cuda.h"
#include "v41_stack_cuda.h"
#include "linalg_cuda.h"
#include "norm_cuda.h"
#include "rope_cuda.h"
#include "rows_cuda.h"
#include "status.h"

#define ADD_THREADS 256

/* ---- weights ------------------------------------------------------------------------------------------ */

int v41_stack_weights_to_cuda(v41_stack_weights *dev, const v41_stack_weights *host, const v41_stack_config *s)
{
    memset(dev, 0, sizeof *dev);
    if (!host || !s || !host->attn_norm || !host->layers || host->n_layers != s->n_layers || s->n_layers == 0)
        return kvl_fail(KVL_EINVAL, "%s: no host weights, or weights of another stack", __func__);
    const size_t L = s->n_layers;
    dev->layers = static_cast<v41_weights *>(calloc(L, sizeof *dev->layers));
    if (!dev->layers) return kvl_fail(KVL_ENOMEM, "%s: out of memory", __func__);
    dev->n_layers = L;
    int rc = kvl_cuda_alloc(reinterpret_cast<void **>(&dev->attn_norm), L * s->d * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(dev->attn_norm, host->attn_norm, L * s->d * sizeof(float));
    for (size_t l = 0; l < L && rc == KVL_OK; l++) rc = v41_weights_to_cuda(&dev->layers[l], &host->layers[l]);
    if (rc != KVL_OK) v41_stack_weights_free_cuda(dev);
    return rc;
}

void v41_stack_weights_free_cuda(v41_stack_weights *dev)
{
    for (size_t l = 0; dev->layers && l < dev->n_layers; l++) v41_weights_free_cuda(&dev->layers[l]);
    free(dev->layers);
    kvl_cuda_free(dev->attn_norm);
    memset(dev, 0, sizeof *dev);
}

/* ---- rows in the store -------------------------------------------------------------------------------- */

namespace {

/* a kvf_row status (positive) as KVL_EINVAL naming fn; KVL_* statuses pass through */
int row_status(int rc, const char *fn)
{
    return rc > 0 ? kvl_fail(KVL_EINVAL, "%s: %s", fn, kvf_strerror(rc)) : rc;
}

int rows_init(v41_rows_cuda *r, kvf_row layout, size_t width, size_t slots)
{
    memset(r, 0, sizeof *r);
    r->layout = layout;
    r->width = width;
    r->slots = slots;
    r->row_bytes = layout == KVF_N_ROW ? width * sizeof(float) : kvf_row_bytes(layout);
    if (layout != KVF_N_ROW && width != kvf_row_values(layout))
        return kvl_fail(KVL_EINVAL, "v41_cache_init_cuda: the %zu-byte row holds %zu values, not %zu", r->row_bytes,
                        kvf_row_values(layout), width);
    if (slots > SIZE_MAX / r->row_bytes) return kvl_fail(KVL_EINVAL, "v41_cache_init_cuda: %zu rows overflow", slots);
    return kvl_cuda_alloc(reinterpret_cast<void **>(&r->bytes), slots * r->row_bytes);
}

void rows_free(v41_rows_cuda *r)
{
    kvl_cuda_free(r->bytes);
    memset(r, 0, sizeof *r);
}

/* dst[n][row_bytes] = the stored rows of positions first … first + n − 1, all held (at most two runs of slots) */
int rows_gather(uint8_t *dst, const v41_rows_cuda *r, size_t first, size_t n)
{
    for (size_t done = 0; done < n;) {
        const size_t slot = (first + done) % r->slots, run = r->slots - slot < n - done ? r->slots - slot : n - done;
        KVL_TRY(kvl_cuda_copy(dst + done * r->row_bytes, r->bytes + slot * r->row_bytes, run * r->row_bytes));
        done += run;
    }
    return KVL_OK;
}

/* Append src[n][row_bytes], rows already in the store, at positions len …; only the last min(n, slots) kept. */
int rows_append_stored(v41_rows_cuda *r, const uint8_t *src, size_t n)
{
    const size_t skip = n > r->slots ? n - r->slots : 0;
    for (size_t done = skip; done < n;) {
        const size_t slot = (r->len + done) % r->slots, run = r->slots - slot < n - done ? r->slots - slot : n - done;
        KVL_TRY(kvl_cuda_copy(r->bytes + slot * r->row_bytes, src + done * r->row_bytes, run * r->row_bytes));
        done += run;
    }
    r->len += n;
    return KVL_OK;
}

/* dst[n][row_bytes] = x[n][width] in the store (packed, or copied for float32) */
int rows_pack(uint8_t *dst, const v41_rows_cuda *r, const float *x, size_t n)
{
    if (n == 0) return KVL_OK;
    if (r->layout == KVF_N_ROW) return kvl_cuda_copy(dst, x, n * r->row_bytes);
    return row_status(kvf_row_pack_cuda(r->layout, dst, x, n), "v41 stack");
}

/* Append x[n][width] to rows that never wrap (entries, index keys): packed straight into their slots. */
int rows_append_values(v41_rows_cuda *r, const float *x, size_t n)
{
    if (r->len + n > r->slots)
        return kvl_fail(KVL_EINVAL, "v41 stack: %zu rows after %zu exceed the %zu slots", n, r->len, r->slots);
    KVL_TRY(rows_pack(r->bytes + r->len * r->row_bytes, r, x, n));
    r->len += n;
    return KVL_OK;
}

} /* namespace */

void v41_rows_restart_cuda(v41_rows_cuda *r, size_t pos) { r->first = r->len = pos; }

size_t v41_rows_oldest_cuda(const v41_rows_cuda *r)
{
    const size_t reach = r->len > r->slots ? r->len - r->slots : 0;
    return reach > r->first ? reach : r->first;
}

size_t v41_rows_held_cuda(const v41_rows_cuda *r) { return r->len - v41_rows_oldest_cuda(r); }

int v41_rows_read_cuda(float *out, const v41_rows_cuda *r, size_t first, size_t n)
{
    if (n == 0) return KVL_OK;
    if (!out || !r || first < v41_rows_oldest_cuda(r) || first + n > r->len)
        return kvl_fail(KVL_EINVAL, "%s: positions %zu … %zu are not all held", __func__, first, first + n - 1);
    if (r->layout == KVF_N_ROW) return rows_gather(reinterpret_cast<uint8_t *>(out), r, first, n);
    for (size_t done = 0; done < n;) {
        const size_t slot = (first + done) % r->slots, run = r->slots - slot < n - done ? r->slots - slot : n - done;
        KVL_TRY(row_status(kvf_row_unpack_cuda(r->layout, out + done * r->width, r->bytes + slot * r->row_bytes, run),
                           __func__));
        done += run;
    }
    return KVL_OK;
}

/* ---- the cache ---------------------------------------------------------------------------------------- */

int v41_cache_init_cuda(v41_cache_cuda *c, const v41_stack_config *s, size_t max_tokens, v41_cuda_store store)
{
    memset(c, 0, sizeof *c);
    if (!s || !s->layers || s->n_layers == 0 || max_tokens == 0)
        return kvl_fail(KVL_EINVAL, "%s: no stack or zero max_tokens", __func__);
    if (store != V41_CUDA_F32 && store != V41_CUDA_NATIVE)
        return kvl_fail(KVL_EINVAL, "%s: unknown store %d", __func__, static_cast<int>(store));
    const int native = store == V41_CUDA_NATIVE;
    const size_t L = s->n_layers;
    c->store = store;
    c->max_tokens = max_tokens;
    c->n_layers = L;
    c->window = static_cast<v41_rows_cuda *>(calloc(L, sizeof *c->window));
    c->entries = static_cast<v41_rows_cuda *>(calloc(L, sizeof *c->entries));
    c->keys = static_cast<v41_rows_cuda *>(calloc(L, sizeof *c->keys));
    c->state = static_cast<v41_compressor_state_cuda *>(calloc(L, sizeof *c->state));
    c->work.keys = static_cast<kvl_workspace *>(calloc(L, sizeof *c->work.keys));
    c->work.sel = static_cast<kvl_workspace *>(calloc(L, sizeof *c->work.sel));
    int rc = c->window && c->entries && c->keys && c->state && c->work.keys && c->work.sel
                 ? KVL_OK
                 : kvl_fail(KVL_ENOMEM, "%s: out of memory", __func__);
    for (size_t l = 0; l < L && rc == KVL_OK; l++) {
        const v41_config *lc = &s->layers[l];
        const size_t W = lc->core.window < max_tokens ? lc->core.window : max_tokens;
        rc = rows_init(&c->window[l], native ? KVF_ROW_V41_WINDOW : KVF_N_ROW, lc->core.head_dim, W);
        if (rc != KVL_OK || lc->kind != KVL_LAYER_FULL) continue;
        const size_t n = max_tokens / lc->ratio ? max_tokens / lc->ratio : 1;
        rc = rows_init(&c->entries[l], native ? KVF_ROW_V41_MAIN : KVF_N_ROW, lc->core.head_dim, n);
        if (rc == KVL_OK) rc = rows_init(&c->keys[l], native ? KVF_ROW_V4_INDEX : KVF_N_ROW, lc->indexer.head_dim, n);
        if (rc == KVL_OK) rc = v41_compressor_state_init_cuda(&c->state[l], &lc->compressor);
    }
    if (rc != KVL_OK) v41_cache_free_cuda(c);
    return rc;
}

void v41_cache_free_cuda(v41_cache_cuda *c)
{
    v41_stack_work_cuda *k = &c->work;
    for (size_t l = 0; l < c->n_layers; l++) {
        if (c->window) rows_free(&c->window[l]);
        if (c->entries) rows_free(&c->entries[l]);
        if (c->keys) rows_free(&c->keys[l]);
        if (c->state) v41_compressor_state_free_cuda(&c->state[l]);
        if (k->keys) kvl_workspace_free(&k->keys[l]);
        if (k->sel) kvl_workspace_free(&k->sel[l]);
    }
    kvl_workspace *own[] = {&k->chunk, &k->win, &k->latents, &k->fresh, &k->scores, &k->pool};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; i++) kvl_workspace_free(own[i]);
    v41_work_free_cuda(&k->layer);
    free(c->window); free(c->entries); free(c->keys); free(c->state); free(k->keys); free(k->sel);
    memset(c, 0, sizeof *c);
}

void v41_cache_reset_cuda(v41_cache_cuda *c)
{
    for (size_t l = 0; l < c->n_layers; l++) {
        v41_rows_restart_cuda(&c->window[l], 0);
        v41_rows_restart_cuda(&c->entries[l], 0);
        v41_rows_restart_cuda(&c->keys[l], 0);
        c->state[l].pos = 0;
    }
    c->len = 0;
}

/* ---- one pass over a range of layers ------------------------------------------------------------------ */

namespace {

/* floats rounded up to 16 bytes, so that every buffer cut after them is aligned for the row packers */
size_t aligned(size_t floats) { return (floats + 3) / 4 * 4; }

/* What the layers of a pass read from each other: each KV source's entries and keys, each index source's
 * picks, the candidate source's pool. */
struct pass {
    v41_source_cuda *src; /* [L] */
    const int32_t **sel;   /* [L] NULL until the layer has picked in this pass */
    const uint8_t *pool;   /* NULL until the candidate source has run in this pass */
};

int pass_init(pass *p, size_t L)
{
    p->src = static_cast<v41_source_cuda *>(calloc(L, sizeof *p->src));
    p->sel = static_cast<const int32_t **>(calloc(L, sizeof *p->sel));
    p->pool = NULL;
    return p->src && p->sel ? KVL_OK : kvl_fail(KVL_ENOMEM, "v41 stack: out of memory");
}

void pass_free(pass *p)
{
    free(p->src);
    free(p->sel);
}

/* p's source l ← every entry and index key the cache holds for layer l: the entries in the store as they
 * lie, the keys decoded into the pass's buffer. */
int source_read(pass *p, v41_cache_cuda *c, const v41_config *lc, size_t l)
{
    const size_t N = c->entries[l].len, DI = lc->indexer.head_dim;
    KVL_TRY(kvl_workspace_reserve(&c->work.keys[l], (N ? N : 1) * DI * sizeof(float)));
    float *keys = static_cast<float *>(c->work.keys[l].p);
    KVL_TRY(v41_rows_read_cuda(keys, &c->keys[l], 0, N));
    p->src[l] = v41_source_cuda{c->entries[l].bytes, keys, N, c->store == V41_CUDA_NATIVE};
    return KVL_OK;
}

/* Push the chunk n[S][d] (layer l's normed input) through source l's compressor and store the entries and
 * index keys it completes. */
int source_push(v41_cache_cuda *c, const v41_config *lc, const v41_weights *w, size_t l, const float *n, size_t S)
{
    v41_compressor_state_cuda *st = &c->state[l];
    const size_t M = lc->ratio, Dh = lc->core.head_dim, DI = lc->indexer.head_dim;
    const size_t n_max = (st->pos + S) / M - st->pos / M;
    KVL_TRY(kvl_workspace_reserve(&c->work.fresh, (aligned(n_max * Dh) + n_max * DI + 1) * sizeof(float)));
    float *Z = static_cast<float *>(c->work.fresh.p), *K = Z + aligned(n_max * Dh);
    size_t n_new = 0;
    KVL_TRY(v41_source_push_cuda(Z, K, &n_new, lc, w, st, n, S, &c->work.latents));
    KVL_TRY(rows_append_values(&c->entries[l], Z, n_new));
    return rows_append_values(&c->keys[l], K, n_new);
}

/* How a Full layer's source is made ready for its chunk: fed the chunk (prefill) or taken as held (replay). */
typedef int (*source_fill)(pass *p, v41_cache_cuda *c, const v41_config *lc, const v41_weights *w, size_t l,
                           const float *n, size_t S);

int fill_by_push(pass *p, v41_cache_cuda *c, const v41_config *lc, const v41_weights *w, size_t l, const float *n,
                 size_t S)
{
    KVL_TRY(source_push(c, lc, w, l, n, S));
    return source_read(p, c, lc, l);
}

int fill_as_held(pass *p, v41_cache_cuda *c, const v41_config *lc, const v41_weights *w, size_t l, const float *n,
                 size_t S)
{
    (void)w, (void)n, (void)S;
    return source_read(p, c, lc, l);
}

/* kv[S][Dh] = the window rows of n[S][d] at rotary positions pos0 …: W_KV n, RMSNorm, the trailing Dr rotated
 * (ref/v4.h's v4_kv, from the twins of its pieces) */
int window_rows(float *kv, const v4_config *k, const v4_weights *w, const float *n, size_t S, int64_t pos0)
{
    const size_t Dh = k->head_dim;
    KVL_TRY(kvl_matmul_abt_f32_cuda(kv, n, w->w_kv, S, Dh, k->d));
    KVL_TRY(kvl_rmsnorm_f32_cuda(kv, kv, w->kv_norm, S, Dh, Dh, k->norm_eps));
    return kvl_rope_rotate_heads_interleaved_cuda(kv, S, Dh, Dh - k->rope.Dr, 1, 0, &k->rope, pos0, 1);
}

/* c->work.win = the stored rows of positions win_first … start − 1 from layer l's ring, then kv[S][Dh] packed */
int gather_window(v41_cache_cuda *c, size_t l, const float *kv, size_t S, size_t start, size_t win_first)
{
    const v41_rows_cuda *ring = &c->window[l];
    const size_t n_old = start - win_first;
    KVL_TRY(kvl_workspace_reserve(&c->work.win, (n_old + S) * ring->row_bytes));
    uint8_t *win = static_cast<uint8_t *>(c->work.win.p);
    KVL_TRY(rows_gather(win, ring, win_first, n_old));
    return rows_pack(win + n_old * ring->row_bytes, ring, kv, S);
}

/* h[n] += a[n] */
int residual_add(float *h, const float *a, size_t n)
{
    const size_t blocks = kvl_div_up(n, ADD_THREADS);
    if (blocks > 0x7FFFFFFFu) return kvl_fail(KVL_EINVAL, "v41 stack: %zu values are more than one launch takes", n);
    CUDA_CHECK(KVL_LAUNCH(kvl_residual_add_kernel, dim3(static_cast<unsigned>(blocks)), ADD_THREADS, 0, h, a, n));
    return KVL_OK;
}

int full_step(float *a, pass *p, v41_cache_cuda *c, const v41_stack_config *s, const v41_weights *w, size_t l,
              const v41_chunk_cuda *ch)
{
    const v41_config *lc = &s->layers[l];
    const size_t S = ch->S, N = p->src[l].N;
    v41_stack_work_cuda *k = &c->work;
    KVL_TRY(kvl_workspace_reserve(&k->sel[l], S * lc->indexer.topk * sizeof(int32_t)));
    KVL_TRY(kvl_workspace_reserve(&k->scores, S * (N ? N : 1) * sizeof(float)));
    int32_t *sel = static_cast<int32_t *>(k->sel[l].p);
    float *I = static_cast<float *>(k->scores.p);
    KVL_TRY(v41_full_layer_cuda(a, sel, I, lc, w, &p->src[l], ch, &k->layer));
    p->sel[l] = sel;
    if (l != s->candidate_source) return KVL_OK;
    KVL_TRY(kvl_workspace_reserve(&k->pool, S * (N ? N : 1)));
    uint8_t *pool = static_cast<uint8_t *>(k->pool.p);
    if (N) KVL_TRY(v41_candidate_pool_cuda(pool, I, S, N, ch->start, lc->ratio, s->pool_block, s->pool_blocks,
                                            &k->layer.scratch));
    p->pool = pool;
    return KVL_OK;
}

int reindex_step(float *a, pass *p, v41_cache_cuda *c, const v41_stack_config *s, const v41_weights *w, size_t l,
                 const v41_chunk_cuda *ch)
{
    const v41_config *lc = &s->layers[l];
    const size_t src_l = static_cast<size_t>(lc->kv_source);
    const uint8_t *pool = src_l == s->candidate_source ? p->pool : NULL;
    if (src_l == s->candidate_source && !pool)
        return kvl_fail(KVL_EINVAL, "v41 stack: layer %zu needs the candidate pool of layer %zu, outside this run", l,
                        src_l);
    KVL_TRY(kvl_workspace_reserve(&c->work.sel[l], ch->S * lc->indexer.topk * sizeof(int32_t)));
    int32_t *sel = static_cast<int32_t *>(c->work.sel[l].p);
    KVL_TRY(v41_reindex_layer_cuda(a, sel, lc, w, &p->src[src_l], pool, ch, &c->work.layer));
    p->sel[l] = sel;
    return KVL_OK;
}

/* a[S][d] = layer l's attention on the chunk, its sources in p already filled */
int attend_layer(float *a, pass *p, v41_cache_cuda *c, const v41_stack_config *s, const v41_stack_weights *w,
                 size_t l, const v41_chunk_cuda *ch)
{
    const v41_config *lc = &s->layers[l];
    const v41_weights *lw = &w->layers[l];
    switch (lc->kind) {
    case KVL_LAYER_FULL: return full_step(a, p, c, s, lw, l, ch);
    case KVL_LAYER_REINDEX: return reindex_step(a, p, c, s, lw, l, ch);
    case KVL_LAYER_REUSE: {
        const int32_t *sel = p->sel[lc->index_source];
        if (!sel) return kvl_fail(KVL_EINVAL, "v41 stack: layer %zu reads no top-k", l);
        return v41_reuse_layer_cuda(a, lc, lw, &p->src[lc->kv_source], sel, ch, &c->work.layer);
    }
    default: return v41_window_layer_cuda(a, lc, lw, ch, &c->work.layer);
    }
}

/* sel[L][S][K] ← layer l's picks when it is an index source (sel NULL: not wanted) */
int copy_sel(int32_t *sel, const pass *p, const v41_stack_config *s, size_t l, size_t S)
{
    const size_t K = s->layers[l].indexer.topk;
    if (!sel || !p->sel[l] || static_cast<size_t>(s->layers[l].index_source) != l) return KVL_OK;
    return kvl_cuda_copy(sel + l * S * K, p->sel[l], S * K * sizeof *sel);
}

/* One layer of a pass: pre-norm, window rows, source, attention, ring, residual. */
int run_layer(float *h, pass *p, const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
              size_t l, size_t start, size_t S, source_fill fill)
{
    const v41_config *lc = &s->layers[l];
    const size_t d = s->d, W = lc->core.window;
    float *n = static_cast<float *>(c->work.chunk.p), *a = n + aligned(S * d), *kv = a + aligned(S * d);
    const size_t reach = start + 1 > W ? start + 1 - W : 0;
    const size_t win_first = reach > c->window[l].first ? reach : c->window[l].first;
    KVL_TRY(kvl_rmsnorm_f32_cuda(n, h, w->attn_norm + l * d, S, d, d, s->norm_eps));
    KVL_TRY(window_rows(kv, &lc->core, &w->layers[l].core, n, S, static_cast<int64_t>(start) + lc->core.rope_offset));
    KVL_TRY(gather_window(c, l, kv, S, start, win_first));
    if (lc->kind == KVL_LAYER_FULL) KVL_TRY(fill(p, c, lc, &w->layers[l], l, n, S));
    const v41_chunk_cuda ch{n, S, start, c->work.win.p, win_first, c->store};
    KVL_TRY(attend_layer(a, p, c, s, w, l, &ch));
    const uint8_t *win = static_cast<const uint8_t *>(c->work.win.p);
    KVL_TRY(rows_append_stored(&c->window[l], win + (start - win_first) * c->window[l].row_bytes, S));
    return residual_add(h, a, S * d);
}

/* h[S][d] ← the residual stream after layers l0 … l1 − 1 for h[S][d] entering layer l0 at positions
 * start … start + S − 1 (ref/v41_stack.c's run_layers). */
int run_layers(float *h, int32_t *sel, const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
               size_t l0, size_t l1, size_t start, size_t S, source_fill fill)
{
    for (size_t l = l0; l < l1; l++)
        if (c->window[l].len != start)
            return kvl_fail(KVL_EINVAL, "v41 stack: layer %zu's window ends at position %zu, the chunk starts at %zu",
                            l, c->window[l].len, start);
    size_t Dh = 0;
    for (size_t l = l0; l < l1; l++) Dh = s->layers[l].core.head_dim > Dh ? s->layers[l].core.head_dim : Dh;
    KVL_TRY(kvl_workspace_reserve(&c->work.chunk, (2 * aligned(S * s->d) + S * Dh) * sizeof(float)));
    pass p;
    int rc = pass_init(&p, s->n_layers);
    for (size_t l = 0; l < l0 && rc == KVL_OK; l++) /* sources below the run, read by the layers in it */
        if (s->layers[l].kind == KVL_LAYER_FULL) rc = source_read(&p, c, &s->layers[l], l);
    for (size_t l = l0; l < l1 && rc == KVL_OK; l++) {
        rc = run_layer(h, &p, s, w, c, l, start, S, fill);
        if (rc == KVL_OK) rc = copy_sel(sel, &p, s, l, S);
    }
    pass_free(&p);
    return rc;
}

int check_chunk(const char *fn, const v41_stack_config *s, const v41_stack_weights *w, const v41_cache_cuda *c,
                const void *out, const float *x, size_t S)
{
    if (!s || !w || !c || !out || !x || S == 0) return kvl_fail(KVL_EINVAL, "%s: NULL argument or no tokens", fn);
    if (c->n_layers != s->n_layers || w->n_layers != s->n_layers || S > c->max_tokens - c->len)
        return kvl_fail(KVL_EINVAL, "%s: cache or weights of another stack, or %zu tokens after %zu exceed %zu", fn, S,
                        c->len, c->max_tokens);
    return KVL_OK;
}

} /* namespace */

int v41_stack_prefill_cuda(float *out, int32_t *sel, const v41_stack_config *s, const v41_stack_weights *w,
                            v41_cache_cuda *c, const float *x, size_t S)
{
    KVL_TRY(check_chunk(__func__, s, w, c, out, x, S));
    if (out != x) KVL_TRY(kvl_cuda_copy(out, x, S * s->d * sizeof *out));
    KVL_TRY(run_layers(out, sel, s, w, c, 0, s->n_layers, c->len, S, fill_by_push));
    c->len += S;
    return KVL_OK;
}

int v41_stack_decode_cuda(float *out, const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
                           const float *x_t)
{
    return v41_stack_prefill_cuda(out, NULL, s, w, c, x_t, 1);
}

int v41_stack_prefill_layers_cuda(float *h, const v41_stack_config *s, const v41_stack_weights *w,
                                   v41_cache_cuda *c, size_t l0, size_t l1, size_t S)
{
    KVL_TRY(check_chunk(__func__, s, w, c, h, h, S));
    if (l0 > l1 || l1 > s->n_layers)
        return kvl_fail(KVL_EINVAL, "%s: layers %zu … %zu of %zu", __func__, l0, l1, s->n_layers);
    return run_layers(h, NULL, s, w, c, l0, l1, c->len, S, fill_by_push);
}

int v41_stack_push_source_cuda(const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
                                size_t l, const float *h, size_t S)
{
    KVL_TRY(check_chunk(__func__, s, w, c, h, h, S));
    if (l >= s->n_layers || s->layers[l].kind != KVL_LAYER_FULL)
        return kvl_fail(KVL_EINVAL, "%s: layer %zu is not a KV source", __func__, l);
    KVL_TRY(kvl_workspace_reserve(&c->work.chunk, S * s->d * sizeof(float)));
    float *n = static_cast<float *>(c->work.chunk.p);
    KVL_TRY(kvl_rmsnorm_f32_cuda(n, h, w->attn_norm + l * s->d, S, s->d, s->d, s->norm_eps));
    return source_push(c, &s->layers[l], &w->layers[l], l, n, S);
}

int v41_stack_replay_layers_cuda(float *h, int32_t *sel, const v41_stack_config *s, const v41_stack_weights *w,
                                  v41_cache_cuda *c, size_t l0, size_t l1, size_t from)
{
    if (!s || !w || !c || !h || c->n_layers != s->n_layers || w->n_layers != s->n_layers || l0 > l1 ||
        l1 > s->n_layers)
        return kvl_fail(KVL_EINVAL, "%s: NULL argument, cache of another stack or layers %zu … %zu", __func__, l0, l1);
    if (from >= c->len)
        return kvl_fail(KVL_EINVAL, "%s: replay from %zu, but the cache holds %zu tokens", __func__, from, c->len);
    for (size_t l = l0; l < l1; l++) v41_rows_restart_cuda(&c->window[l], from);
    return run_layers(h, sel, s, w, c, l0, l1, from, c->len - from, fill_as_held);
}
