#include "v4.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "linalg.h"
#include "norm.h"
#include "softmax.h"
#include "status.h"
#include "v4_rope.h"

/* ---- config --------------------------------------------------------------------------------------- */

static int same_rope(const kvl_rope *a, const kvl_rope *b)
{
    return a->Dr == b->Dr && memcmp(a->theta, b->theta, a->Dr / 2 * sizeof a->theta[0]) == 0;
}

static int check_widths(const v4_config *c)
{
    const struct { const char *name; size_t v; } widths[] = {
        {"d", c->d}, {"n_heads", c->n_heads}, {"head_dim", c->head_dim}, {"q_lora_rank", c->q_lora_rank},
        {"o_groups", c->o_groups}, {"o_lora_rank", c->o_lora_rank}, {"window", c->window},
    };
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (widths[i].v == 0) return kvl_fail(KVL_EINVAL, "v4: config field %s must be positive, got 0", widths[i].name);
    if (c->n_heads % c->o_groups)
        return kvl_fail(KVL_EINVAL, "v4: config field o_groups (%zu) does not divide the %zu heads", c->o_groups,
                        c->n_heads);
    if (c->rope.Dr < 2 || c->rope.Dr % 2 || c->rope.Dr > c->head_dim)
        return kvl_fail(KVL_EINVAL, "v4: rotary width %zu must be even and lie in 2..head_dim (%zu)", c->rope.Dr,
                        c->head_dim);
    if (!(c->norm_eps >= 0.0) || !isfinite(c->norm_eps))
        return kvl_fail(KVL_EINVAL, "v4: config field norm_eps must be finite and non-negative, got %g", c->norm_eps);
    const size_t big = c->d > c->q_lora_rank ? c->d : c->q_lora_rank;
    if (c->n_heads > SIZE_MAX / sizeof(float) / c->head_dim / big)
        return kvl_fail(KVL_EINVAL, "v4: %zu heads of %zu overflow", c->n_heads, c->head_dim);
    const size_t hd = c->n_heads * c->head_dim;
    if (c->o_groups > SIZE_MAX / sizeof(float) / c->o_lora_rank / (c->d > hd ? c->d : hd))
        return kvl_fail(KVL_EINVAL, "v4: %zu groups of %zu overflow", c->o_groups, c->o_lora_rank);
    return KVL_OK;
}

static int check_compressor(const v4_config *c)
{
    const v4_compressor_config *k = &c->compressor;
    int rc = v4_compressor_config_check(k);
    if (rc != KVL_OK) return kvl_fail(rc, "v4: %s", kvl_error());
    if (k->d != c->d || k->width != c->head_dim || !same_rope(&k->rope, &c->rope))
        return kvl_fail(KVL_EINVAL, "v4: the compressor must map d %zu to head_dim %zu with the layer's rope", c->d,
                        c->head_dim);
    if (k->overlap != (c->kind == KVL_LAYER_CSA))
        return kvl_fail(KVL_EINVAL, "v4: a %s layer's compressor has overlap %d, got %zu", kvl_layer_kind_name(c->kind),
                        c->kind == KVL_LAYER_CSA, k->overlap);
    return KVL_OK;
}

static int check_indexer(const v4_config *c)
{
    const v4_indexer_config *ix = &c->indexer;
    int rc = v4_indexer_config_check(ix);
    if (rc != KVL_OK) return kvl_fail(rc, "v4: %s", kvl_error());
    if (ix->d != c->d || ix->q_lora_rank != c->q_lora_rank || ix->compressor.ratio != c->compressor.ratio ||
        ix->compressor.overlap != 1 || !same_rope(&ix->compressor.rope, &c->rope))
        return kvl_fail(KVL_EINVAL, "v4: the indexer must read the layer's d, q_lora_rank and rope, with the CSA ratio "
                        "and overlap");
    return KVL_OK;
}

int v4_config_check(const v4_config *c)
{
    if (!c) return kvl_fail(KVL_EINVAL, "v4: config is NULL");
    if (c->kind != KVL_LAYER_WINDOW && c->kind != KVL_LAYER_CSA && c->kind != KVL_LAYER_HCA)
        return kvl_fail(KVL_EINVAL, "v4: layer kind %s is not a V4 kind (window, CSA, HCA)",
                        kvl_layer_kind_name(c->kind));
    KVL_TRY(check_widths(c));
    if (c->kind != KVL_LAYER_WINDOW) KVL_TRY(check_compressor(c));
    if (c->kind == KVL_LAYER_CSA) KVL_TRY(check_indexer(c));
    return KVL_OK;
}

int v4_config_from_model(v4_config *c, const kvl_model *m, size_t layer)
{
    memset(c, 0, sizeof *c);
    if (m->generation != KVL_GEN_V4)
        return kvl_fail(KVL_EINVAL, "%s: attention is %s, not V4 (no compress_ratios)", m->path,
                        kvl_generation_name(m->generation));
    if (layer >= m->n_layers) return kvl_fail(KVL_EINVAL, "%s: no layer %zu (%zu layers)", m->path, layer, m->n_layers);
    const kvl_layer *l = &m->layers[layer];
    *c = (v4_config){.kind = l->kind, .d = m->d, .n_heads = m->n_heads, .head_dim = m->head_dim,
                     .q_lora_rank = m->q_lora_rank, .o_groups = m->o_groups, .o_lora_rank = m->o_lora_rank,
                     .window = m->window, .norm_eps = m->norm_eps};
    int rc = v4_layer_rope(&c->rope, m, l->kind);
    if (rc == KVL_OK && l->kind != KVL_LAYER_WINDOW)
        c->compressor = (v4_compressor_config){.d = m->d, .width = m->head_dim, .ratio = l->compress_ratio,
                                               .overlap = l->kind == KVL_LAYER_CSA, .norm_eps = m->norm_eps,
                                               .rope = c->rope};
    if (rc == KVL_OK && l->kind == KVL_LAYER_CSA)
        c->indexer = (v4_indexer_config){
            .d = m->d, .q_lora_rank = m->q_lora_rank, .n_heads = m->index_n_heads, .head_dim = m->index_head_dim,
            .topk = m->index_topk,
            .compressor = {.d = m->d, .width = m->index_head_dim, .ratio = l->compress_ratio, .overlap = 1,
                           .norm_eps = m->norm_eps, .rope = c->rope}};
    if (rc == KVL_OK) rc = v4_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: layer %zu: %s", m->path, layer, kvl_error());
    return KVL_OK;
}

const char *v4_layer_name(char *buf, size_t cap, const v4_config *c)
{
    if (c->kind == KVL_LAYER_CSA)
        snprintf(buf, cap, "CSA(%zu, top-%zu)+window(%zu)", c->compressor.ratio, c->indexer.topk, c->window);
    else if (c->kind == KVL_LAYER_HCA)
        snprintf(buf, cap, "HCA(%zu)+window(%zu)", c->compressor.ratio, c->window);
    else
        snprintf(buf, cap, "window(%zu)", c->window);
    return buf;
}

static int check_call(const char *fn, const v4_config *c, const v4_weights *w)
{
    int rc = v4_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    if (!w || !w->block) return kvl_fail(KVL_EINVAL, "%s: NULL weights", fn);
    return KVL_OK;
}

/* ---- weights -------------------------------------------------------------------------------------- */

enum { N_OWN_WEIGHTS = 8, MAX_WEIGHTS = N_OWN_WEIGHTS + V4_COMPRESSOR_N_WEIGHTS + V4_INDEXER_N_WEIGHTS };

/* t[] = the layer's sizes table in cut and draw order; returns its length. */
static size_t weight_table(v4_weight *t, v4_weights *w, const v4_config *c)
{
    const size_t d = c->d, H = c->n_heads, Dh = c->head_dim, Dq = c->q_lora_rank, G = c->o_groups,
                 Do = c->o_lora_rank;
    t[0] = (v4_weight){&w->w_dq, Dq, d, V4_DRAW_MATRIX};
    t[1] = (v4_weight){&w->q_norm, 1, Dq, V4_DRAW_GAIN};
    t[2] = (v4_weight){&w->w_uq, H * Dh, Dq, V4_DRAW_MATRIX};
    t[3] = (v4_weight){&w->w_kv, Dh, d, V4_DRAW_MATRIX};
    t[4] = (v4_weight){&w->kv_norm, 1, Dh, V4_DRAW_GAIN};
    t[5] = (v4_weight){&w->sinks, 1, H, V4_DRAW_LOGIT};
    t[6] = (v4_weight){&w->w_oa, G * Do, H / G * Dh, V4_DRAW_MATRIX};
    t[7] = (v4_weight){&w->w_ob, d, G * Do, V4_DRAW_MATRIX};
    size_t n = N_OWN_WEIGHTS;
    if (c->kind != KVL_LAYER_WINDOW) {
        v4_compressor_weight_table(t + n, &w->compressor, &c->compressor);
        n += V4_COMPRESSOR_N_WEIGHTS;
    }
    if (c->kind == KVL_LAYER_CSA) {
        v4_indexer_weight_table(t + n, &w->indexer, &c->indexer);
        n += V4_INDEXER_N_WEIGHTS;
    }
    return n;
}

uint64_t v4_weights_count(const v4_config *c)
{
    v4_weights w;
    v4_weight t[MAX_WEIGHTS];
    const size_t n = weight_table(t, &w, c);
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += (uint64_t)t[i].rows * t[i].cols;
    return total;
}

int v4_weights_alloc(v4_weights *w, const v4_config *c)
{
    memset(w, 0, sizeof *w);
    int rc = v4_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "v4_weights_alloc: %s", kvl_error());
    v4_weight t[MAX_WEIGHTS];
    const size_t n = weight_table(t, w, c);
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (t[i].rows > (SIZE_MAX / sizeof(float) - total) / t[i].cols)
            return kvl_fail(KVL_EINVAL, "v4_weights_alloc: weight %zu of %zu x %zu overflows", i, t[i].rows, t[i].cols);
        total += t[i].rows * t[i].cols;
    }
    float *block = calloc(total, sizeof *block);
    if (!block) return kvl_fail(KVL_ENOMEM, "v4_weights_alloc: out of memory for %zu floats", total);
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        *t[i].field = block + off;
        off += t[i].rows * t[i].cols;
    }
    w->block = block;
    w->n_floats = total;
    return KVL_OK;
}

int v4_weights_init_random(v4_weights *w, const v4_config *c, kvl_rng *rng)
{
    KVL_TRY(v4_weights_alloc(w, c));
    v4_weight t[MAX_WEIGHTS];
    const size_t n = weight_table(t, w, c);
    for (size_t i = 0; i < n; i++) {
        const size_t len = t[i].rows * t[i].cols;
        if (t[i].draw == V4_DRAW_GAIN) kvl_rng_uniform_f32(rng, *t[i].field, len, 0.5, 1.5);
        else if (t[i].draw == V4_DRAW_LOGIT) kvl_rng_normal_f32(rng, *t[i].field, len, 1.0);
        else kvl_rng_normal_f32(rng, *t[i].field, len, 1.0 / sqrt((double)t[i].cols));
    }
    return KVL_OK;
}

void v4_weights_free(v4_weights *w)
{
    free(w->block);
    memset(w, 0, sizeof *w);
}

/* ---- the pieces ------------------------------------------------------------------------------------ */

int v4_query_latent(float *cq, const v4_config *c, const v4_weights *w, const float *x, size_t S)
{
    KVL_TRY(check_call(__func__, c, w));
    if (S == 0) return KVL_OK;
    if (!cq || !x) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    KVL_TRY(kvl_matmul_abt_f32(cq, x, w->w_dq, S, c->q_lora_rank, c->d));
    kvl_rmsnorm_f32(cq, cq, w->q_norm, S, c->q_lora_rank, c->norm_eps);
    return KVL_OK;
}

void v4_query_head_norm(float *q, size_t n, size_t Dh, double eps) { kvl_rmsnorm_f32(q, q, NULL, n, Dh, eps); }

int v4_query(float *q, const v4_config *c, const v4_weights *w, const float *cq, size_t S, int64_t pos0)
{
    KVL_TRY(check_call(__func__, c, w));
    if (S == 0) return KVL_OK;
    if (!q || !cq) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    const size_t H = c->n_heads, Dh = c->head_dim;
    KVL_TRY(kvl_matmul_abt_f32(q, cq, w->w_uq, S, H * Dh, c->q_lora_rank));
    v4_query_head_norm(q, S * H, Dh, c->norm_eps);
    v4_rotate_heads(q, S, H, Dh, &c->rope, pos0);
    return KVL_OK;
}

int v4_kv(float *rows, const v4_config *c, const v4_weights *w, const float *x, size_t S, int64_t pos0)
{
    KVL_TRY(check_call(__func__, c, w));
    if (S == 0) return KVL_OK;
    if (!rows || !x) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    const size_t Dh = c->head_dim;
    KVL_TRY(kvl_matmul_abt_f32(rows, x, w->w_kv, S, Dh, c->d));
    kvl_rmsnorm_f32(rows, rows, w->kv_norm, S, Dh, c->norm_eps);
    v4_rotate_heads(rows, S, 1, Dh, &c->rope, pos0);
    return KVL_OK;
}

/* a·b over n floats: eight running sums, one per lane of k mod 8, added in a fixed order, so the
 * result is the same wherever the rows live (what makes a replay reproduce rows bit for bit). */
static float dot(const float *a, const float *b, size_t n)
{
    float acc[8] = {0};
    size_t k = 0;
    for (; k + 8 <= n; k += 8)
        for (size_t l = 0; l < 8; l++) acc[l] += a[k + l] * b[k + l];
    for (size_t l = 0; k < n; k++, l++) acc[l] += a[k] * b[k];
    return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

void v4_attend_weights(float *p, const float *q, const float *const *keys, size_t N, const float *sinks, size_t H,
                       size_t Dh)
{
    const float scale = (float)(1.0 / sqrt((double)Dh));
    for (size_t h = 0; h < H; h++) {
        float *row = p + h * N;
        for (size_t i = 0; i < N; i++) row[i] = keys[i] ? dot(q + h * Dh, keys[i], Dh) * scale : -INFINITY;
        kvl_softmax_sink_f32(row, N, sinks[h]);
    }
}

/* y[n] += a·x[n], element by element in order (vectorises without changing a bit: no sum is regrouped). */
static void axpy(float *restrict y, float a, const float *restrict x, size_t n)
{
#pragma omp simd
    for (size_t k = 0; k < n; k++) y[k] += a * x[k];
}

void v4_attend_values(float *o, const float *p, const float *const *keys, size_t N, size_t H, size_t Dh)
{
    for (size_t h = 0; h < H; h++) {
        float *oh = o + h * Dh;
        memset(oh, 0, Dh * sizeof *oh);
        for (size_t i = 0; i < N; i++)
            if (keys[i] && p[h * N + i] != 0.0f) axpy(oh, p[h * N + i], keys[i], Dh);
    }
}

int v4_output(float *out, const v4_config *c, const v4_weights *w, const float *o, size_t S)
{
    KVL_TRY(check_call(__func__, c, w));
    if (S == 0) return KVL_OK;
    if (!out || !o) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    const size_t H = c->n_heads, Dh = c->head_dim, G = c->o_groups, Do = c->o_lora_rank, gw = H / G * Dh;
    if (S > SIZE_MAX / sizeof(float) / (gw + G * Do + Do))
        return kvl_fail(KVL_EINVAL, "%s: %zu tokens overflow", __func__, S);
    float *buf = malloc(S * (gw + Do + G * Do) * sizeof *buf);
    if (!buf) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu tokens", __func__, S);
    float *og = buf, *ur = og + S * gw, *u = ur + S * Do;
    int rc = KVL_OK;
    for (size_t r = 0; r < G && rc == KVL_OK; r++) {
        for (size_t i = 0; i < S; i++) memcpy(og + i * gw, o + i * H * Dh + r * gw, gw * sizeof *og);
        rc = kvl_matmul_abt_f32(ur, og, w->w_oa + r * Do * gw, S, Do, gw);   /* block r of W_OA: [Do][(H/G)·Dh] */
        for (size_t i = 0; i < S && rc == KVL_OK; i++) memcpy(u + i * G * Do + r * Do, ur + i * Do, Do * sizeof *u);
    }
    if (rc == KVL_OK) rc = kvl_matmul_abt_f32(out, u, w->w_ob, S, c->d, G * Do);
    free(buf);
    return rc;
}

static int check_attend(const v4_config *c, const kvl_row_tiles *entries, const int32_t *sel, size_t S,
                        size_t start, size_t win_first)
{
    if (win_first > start) return kvl_fail(KVL_EINVAL, "v4_attend: window rows start at %zu, after the chunk (%zu)",
                                           win_first, start);
    if (c->kind == KVL_LAYER_WINDOW) return KVL_OK;
    if (!entries || !entries->tile || entries->width != c->head_dim)
        return kvl_fail(KVL_EINVAL, "v4_attend: no entries of width %zu", c->head_dim);
    const size_t N = entries->N;
    if (c->kind == KVL_LAYER_HCA && (start + S) / c->compressor.ratio > N)
        return kvl_fail(KVL_EINVAL, "v4_attend: %zu entries given, the chunk sees %zu", N,
                        (start + S) / c->compressor.ratio);
    if (c->kind != KVL_LAYER_CSA) return KVL_OK;
    if (!sel) return kvl_fail(KVL_EINVAL, "v4_attend: a CSA layer needs its picks");
    for (size_t i = 0; i < S * c->indexer.topk; i++)
        if (sel[i] < -1 || (sel[i] >= 0 && (size_t)sel[i] >= N))
            return kvl_fail(KVL_EINVAL, "v4_attend: pick %d outside -1..%zu", sel[i], N - 1);
    return KVL_OK;
}

/* The rows one query reads, in order: its n_win window rows win[n_win][Dh] (float32, read in place), then
 * entries of the layer's view, 0, 1, … (at NULL: HCA) or the picks at[0 … ) (CSA), each read where it is
 * (decoded a tile or a pick at a time when packed) by the thread whose part of the attention reads it:
 * the picks are never gathered first on one thread for the other to read back. */
typedef struct {
    const float *win;
    size_t n_win;
    const kvl_row_tiles *entries;
    const int32_t *at;
} query_rows;

/* dst[n][Dh] ← entries e0 … e0 + n − 1 of the query's list. */
static int read_entries(float *dst, const query_rows *qr, size_t e0, size_t n)
{
    if (!qr->at) return kvl_row_tiles_read(dst, qr->entries, e0, n);
    for (size_t i = 0; i < n; i++)
        KVL_TRY(kvl_row_tiles_read(dst + i * qr->entries->width, qr->entries, (size_t)qr->at[e0 + i], 1));
    return KVL_OK;
}

static const float *query_tile(float *scratch, const kvl_row_tiles *v, size_t first, size_t n)
{
    const query_rows *qr = v->src;
    const size_t Dh = v->width;
    if (first + n <= qr->n_win) return qr->win + first * Dh;
    if (first >= qr->n_win && !qr->at) return qr->entries->tile(scratch, qr->entries, first - qr->n_win, n);
    const size_t w = first < qr->n_win ? qr->n_win - first : 0;
    if (w) memcpy(scratch, qr->win + first * Dh, w * Dh * sizeof *scratch);
    return read_entries(scratch + w * Dh, qr, first + w - qr->n_win, n - w) == KVL_OK ? scratch : NULL;
}

/* A query's rotary position: where its output is rotated back (v4_unrotate_heads). */
typedef struct {
    const kvl_rope *rope;
    int64_t pos;
} query_position;

/* o[heads][Dh] rotated back at the query's position, on the thread that finished those heads. */
static void unrotate_finished(float *o, size_t heads, size_t Dh, void *ctx)
{
    const query_position *at = ctx;
    v4_unrotate_heads(o, 1, heads, Dh, at->rope, at->pos);
}

/* The query's picks, compacted: at[*picked] ← the valid entries of sel[K], in order. */
static int valid_picks(int32_t *at, size_t *picked, const int32_t *sel, size_t K, size_t N)
{
    *picked = 0;
    for (size_t k = 0; k < K; k++) {
        if (sel[k] < -1 || (sel[k] >= 0 && (size_t)sel[k] >= N))
            return kvl_fail(KVL_EINVAL, "v4_attend_query: pick %d (entry %zu) outside -1 … %zu", sel[k], k,
                            N ? N - 1 : 0);
        if (sel[k] >= 0) at[(*picked)++] = sel[k];
    }
    return KVL_OK;
}

int v4_attend_query(float *o, const float *q, const float *win, size_t n_win, const kvl_row_tiles *entries,
                    const int32_t *sel, size_t K, const float *sinks, size_t H, size_t Dh, const kvl_rope *rope,
                    int64_t pos)
{
    if (K && (!entries || !entries->tile))
        return kvl_fail(KVL_EINVAL, "%s: %zu entries without a view", __func__, K);
    if (K && entries->width != Dh)
        return kvl_fail(KVL_EINVAL, "%s: entries of width %zu, the heads' is %zu", __func__, entries->width, Dh);
    if (!sel && K > (entries ? entries->N : 0))
        return kvl_fail(KVL_EINVAL, "%s: the first %zu entries of %zu", __func__, K, entries->N);
    int32_t *at = sel ? malloc((K ? K : 1) * sizeof *at) : NULL;
    if (sel && !at) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu picks", __func__, K);
    size_t n_entries = K;
    int rc = sel ? valid_picks(at, &n_entries, sel, K, entries->N) : KVL_OK;
    const query_rows qr = {win, n_win, entries, at};
    const kvl_row_tiles view = n_entries ? (kvl_row_tiles){.N = n_win + n_entries, .width = Dh, .tile = query_tile,
                                                           .src = &qr}
                                         : kvl_row_tiles_f32(win, n_win, Dh);
    const kvl_attend_rows r = {.N = view.N, .stride = Dh, .k_off = 0, .Dk = Dh, .v_off = 0, .Dv = Dh, .groups = 1};
    query_position back_at = {rope, pos};
    const kvl_attend_then back = {unrotate_finished, &back_at};
    if (rc == KVL_OK) rc = kvl_attend(o, q, H, &view, &r, (float)(1.0 / sqrt((double)Dh)), sinks, &back);
    free(at);
    return rc;
}

/* One query after another, each a few matrix products (ref/core/attend.h). */
int v4_attend(float *o, const v4_config *c, const v4_weights *w, const float *q, const float *win, size_t win_first,
              const kvl_row_tiles *entries, const int32_t *sel, size_t S, size_t start)
{
    KVL_TRY(check_call(__func__, c, w));
    if (S == 0) return KVL_OK;
    if (!o || !q || !win) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    KVL_TRY(check_attend(c, entries, sel, S, start, win_first));
    const size_t H = c->n_heads, Dh = c->head_dim, W = c->window, K = c->indexer.topk;
    int rc = KVL_OK;
    for (size_t i = 0; i < S && rc == KVL_OK; i++) {
        const size_t t = start + i, j0 = t + 1 > W && t + 1 - W > win_first ? t + 1 - W : win_first;
        const float *wi = win + (j0 - win_first) * Dh, *qi = q + i * H * Dh;
        float *oi = o + i * H * Dh;
        const int64_t pos = (int64_t)t + c->rope_offset;
        const int csa = c->kind == KVL_LAYER_CSA;
        const size_t n = csa ? K : c->kind == KVL_LAYER_HCA ? (t + 1) / c->compressor.ratio : 0;
        rc = v4_attend_query(oi, qi, wi, t + 1 - j0, entries, csa ? sel + i * K : NULL, n, w->sinks, H, Dh, &c->rope,
                             pos);
    }
    return rc;
}

/* ---- whole sequence -------------------------------------------------------------------------------- */

/* The scratch of one whole-sequence pass. */
typedef struct {
    float *cq, *q, *rows, *o;   /* [T][Dq'], [T][H][Dh], [T][Dh], [T][H][Dh] */
    float *entries, *keys;      /* [N][Dh], [N][DI] */
    float *q_idx, *w_idx, *I;   /* [T][HI][DI], [T][HI], [T][N] */
    int32_t *sel;               /* [T][K] */
} forward_buffers;

static void forward_free(forward_buffers *b)
{
    free(b->cq); free(b->q); free(b->rows); free(b->o);
    free(b->entries); free(b->keys);
    free(b->q_idx); free(b->w_idx); free(b->I);
    free(b->sel);
}

static int forward_alloc(forward_buffers *b, const v4_config *c, size_t T, size_t N)
{
    memset(b, 0, sizeof *b);
    const size_t H = c->n_heads, Dh = c->head_dim, csa = c->kind == KVL_LAYER_CSA;
    const size_t HI = c->indexer.n_heads, DI = c->indexer.head_dim, K = c->indexer.topk;
    const size_t big = (H * Dh > c->q_lora_rank ? H * Dh : c->q_lora_rank) + (csa ? HI * DI + N + K : 0);
    if (T > SIZE_MAX / sizeof(float) / big || N > SIZE_MAX / sizeof(float) / (Dh + DI + 1))
        return kvl_fail(KVL_EINVAL, "v4_forward: %zu tokens overflow", T);
    b->cq = malloc(T * c->q_lora_rank * sizeof *b->cq);
    b->q = malloc(T * H * Dh * sizeof *b->q);
    b->rows = malloc(T * Dh * sizeof *b->rows);
    b->o = malloc(T * H * Dh * sizeof *b->o);
    b->entries = malloc((N ? N : 1) * Dh * sizeof *b->entries);
    int ok = b->cq && b->q && b->rows && b->o && b->entries;
    if (csa) {
        b->keys = malloc((N ? N : 1) * DI * sizeof *b->keys);
        b->q_idx = malloc(T * HI * DI * sizeof *b->q_idx);
        b->w_idx = malloc(T * HI * sizeof *b->w_idx);
        b->I = malloc(T * (N ? N : 1) * sizeof *b->I);
        b->sel = malloc(T * K * sizeof *b->sel);
        ok = ok && b->keys && b->q_idx && b->w_idx && b->I && b->sel;
    }
    if (ok) return KVL_OK;
    forward_free(b);
    return kvl_fail(KVL_ENOMEM, "v4_forward: out of memory for %zu tokens", T);
}

/* b->sel[T][K] = the CSA picks of x[T][d] over the N entries of the float32 indexer */
static int forward_picks(forward_buffers *b, const v4_config *c, const v4_weights *w, const float *x, size_t T,
                         size_t N)
{
    const v4_indexer_config *ix = &c->indexer;
    KVL_TRY(v4_compressor_forward(b->keys, &ix->compressor, &w->indexer.compressor, x, T, c->rope_offset));
    KVL_TRY(v4_index_query(b->q_idx, b->w_idx, ix, &w->indexer, b->cq, x, T, c->rope_offset));
    KVL_TRY(v4_index_scores(b->I, ix, b->q_idx, b->w_idx, b->keys, T, N, 0));
    return v4_index_select(b->sel, ix, b->I, T, N);
}

static int forward_layer(float *out, forward_buffers *b, const v4_config *c, const v4_weights *w, const float *x,
                         size_t T, size_t N)
{
    KVL_TRY(v4_query_latent(b->cq, c, w, x, T));
    KVL_TRY(v4_query(b->q, c, w, b->cq, T, c->rope_offset));
    KVL_TRY(v4_kv(b->rows, c, w, x, T, c->rope_offset));
    if (c->kind != KVL_LAYER_WINDOW)
        KVL_TRY(v4_compressor_forward(b->entries, &c->compressor, &w->compressor, x, T, c->rope_offset));
    if (c->kind == KVL_LAYER_CSA) KVL_TRY(forward_picks(b, c, w, x, T, N));
    const kvl_row_tiles entries = kvl_row_tiles_f32(b->entries, N, c->head_dim);
    KVL_TRY(v4_attend(b->o, c, w, b->q, b->rows, 0, &entries, b->sel, T, 0));
    return v4_output(out, c, w, b->o, T);
}

int v4_forward(float *out, int32_t *sel, const v4_config *c, const v4_weights *w, const float *x, size_t T)
{
    KVL_TRY(check_call(__func__, c, w));
    if (T == 0) return kvl_fail(KVL_EINVAL, "%s: no tokens", __func__);
    if (!out || !x) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    const size_t N = c->kind == KVL_LAYER_WINDOW ? 0 : v4_compressor_entries(&c->compressor, T);
    forward_buffers b;
    KVL_TRY(forward_alloc(&b, c, T, N));
    int rc = forward_layer(out, &b, c, w, x, T, N);
    if (rc == KVL_OK && sel && c->kind == KVL_LAYER_CSA) memcpy(sel, b.sel, T * c->indexer.topk * sizeof *sel);
    forward_free(&b);
    return rc;
}
