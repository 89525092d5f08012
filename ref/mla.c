#include "mla.h"

#include <math.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "element.h"
#include "linalg.h"
#include "norm.h"
#include "softmax.h"
#include "status.h"

/* ---- config --------------------------------------------------------------------------------------- */

int mla_config_check(const mla_config *c)
{
    if (!c) return kvl_fail(KVL_EINVAL, "mla: config is NULL");
    const struct { const char *name; size_t v; } widths[] = {
        {"d", c->d}, {"n_heads", c->n_heads}, {"kv_lora_rank", c->kv_lora_rank},
        {"qk_nope", c->qk_nope}, {"qk_rope", c->qk_rope}, {"v_head", c->v_head},
    };
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (widths[i].v == 0) return kvl_fail(KVL_EINVAL, "mla: config field %s must be positive, got 0", widths[i].name);
    if (c->rope.Dr != c->qk_rope)
        return kvl_fail(KVL_EINVAL, "mla: config field rope.Dr (%zu) must equal qk_rope (%zu)", c->rope.Dr, c->qk_rope);
    if (!(c->softmax_scale > 0.0) || !isfinite(c->softmax_scale))
        return kvl_fail(KVL_EINVAL, "mla: config field softmax_scale must be finite and positive, got %g",
                        c->softmax_scale);
    if (!(c->norm_eps >= 0.0) || !isfinite(c->norm_eps))
        return kvl_fail(KVL_EINVAL, "mla: config field norm_eps must be finite and non-negative, got %g", c->norm_eps);
    return KVL_OK;
}

int mla_config_from_model(mla_config *c, const kvl_model *m)
{
    if (m->generation != KVL_GEN_MLA && m->generation != KVL_GEN_DSA)
        return kvl_fail(KVL_EINVAL, "%s: attention is %s, not MLA (no kv_lora_rank)", m->path,
                        kvl_generation_name(m->generation));
    *c = (mla_config){.d = m->d, .n_heads = m->n_heads, .q_lora_rank = m->q_lora_rank,
                      .kv_lora_rank = m->kv_lora_rank, .qk_nope = m->qk_nope_head_dim,
                      .qk_rope = m->qk_rope_head_dim, .v_head = m->v_head_dim, .window = m->window,
                      .norm_eps = MLA_LATENT_NORM_EPS};
    const kvl_rope_config *r = &m->rope;
    int rc = r->factor > 1.0 ? kvl_rope_init_yarn(&c->rope, c->qk_rope, r->theta, r->factor, r->original_len,
                                                  r->beta_fast, r->beta_slow)
                             : kvl_rope_init(&c->rope, c->qk_rope, r->theta);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: rotary fields: %s", m->path, kvl_error());
    c->softmax_scale = kvl_yarn_softmax_scale(c->qk_nope + c->qk_rope, r->factor, r->mscale);
    rc = mla_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", m->path, kvl_error());
    return KVL_OK;
}

double mla_naive_flop_per_token(const mla_config *c)
{
    const double Dc = (double)c->kv_lora_rank, Dn = (double)c->qk_nope, Dr = (double)c->qk_rope, Dv = (double)c->v_head;
    return 2 * Dc * (Dn + Dv) + 2 * (Dn + Dr) + 2 * Dv;
}

double mla_absorbed_flop_per_token(const mla_config *c)
{
    const double Dc = (double)c->kv_lora_rank, Dr = (double)c->qk_rope;
    return 2 * (Dc + Dr) + 2 * Dc;
}

/* ---- small helpers -------------------------------------------------------------------------------- */

static size_t qk_width(const mla_config *c) { return c->qk_nope + c->qk_rope; }
static size_t row_width(const mla_config *c) { return c->kv_lora_rank + c->qk_rope; }

/* W_UK^h [Dnope][Dc] and W_UV^h [Dv][Dc]: consecutive row blocks of W_UKV [H][Dnope+Dv][Dc]. */
static const float *w_uk(const mla_config *c, const mla_weights *w, size_t h)
{
    return w->w_ukv + h * (c->qk_nope + c->v_head) * c->kv_lora_rank;
}

static const float *w_uv(const mla_config *c, const mla_weights *w, size_t h)
{
    return w_uk(c, w, h) + c->qk_nope * c->kv_lora_rank;
}

/* *p = malloc of a·b floats (at least one), with the product checked. */
static int alloc_floats(float **p, size_t a, size_t b, const char *fn)
{
    *p = NULL;
    if (b && a > SIZE_MAX / sizeof(float) / b)
        return kvl_fail(KVL_EINVAL, "%s: buffer of %zu x %zu floats overflows", fn, a, b);
    const size_t n = a * b;
    *p = malloc((n ? n : 1) * sizeof(float));
    if (!*p) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu x %zu floats", fn, a, b);
    return KVL_OK;
}

static int check_call(const char *fn, const mla_config *c, const mla_weights *w, const void *a, const void *b)
{
    int rc = mla_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    if (!w || !w->block || !a || !b) return kvl_fail(KVL_EINVAL, "%s: NULL weights or array", fn);
    return KVL_OK;
}

/* s[rows][n] ← softmax of each row */
static void softmax_rows(float *s, size_t rows, size_t n)
{
    for (size_t r = 0; r < rows; r++) kvl_softmax_f32(s + r * n, n);
}

/* ---- weights ------------------------------------------------------------------------------------ */

enum { N_WEIGHTS = 8 };

typedef struct {
    float **field;
    size_t rows, cols; /* a gain is one row of cols values */
    int gain;          /* drawn uniform on [0.5, 1.5) rather than N(0, 1/cols) */
} weight_entry;

/* The sizes table, in the order the block is cut and drawn. */
static void weight_table(weight_entry t[N_WEIGHTS], mla_weights *w, const mla_config *c)
{
    const size_t H = c->n_heads, Dq = c->q_lora_rank, Dc = c->kv_lora_rank, d = c->d;
    const size_t q_direct = Dq ? 0 : H * qk_width(c);
    t[0] = (weight_entry){&w->w_dq, Dq, d, 0};
    t[1] = (weight_entry){&w->q_norm, Dq ? 1 : 0, Dq, 1};
    t[2] = (weight_entry){&w->w_uq, Dq ? H * qk_width(c) : 0, Dq, 0};
    t[3] = (weight_entry){&w->w_q, q_direct, d, 0};
    t[4] = (weight_entry){&w->w_dkv, row_width(c), d, 0};
    t[5] = (weight_entry){&w->kv_norm, 1, Dc, 1};
    t[6] = (weight_entry){&w->w_ukv, H * (c->qk_nope + c->v_head), Dc, 0};
    t[7] = (weight_entry){&w->w_o, d, H * c->v_head, 0};
}

int mla_weights_size(size_t *n_floats, const mla_config *c)
{
    *n_floats = 0;
    int rc = mla_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "mla_weights_size: %s", kvl_error());
    weight_entry t[N_WEIGHTS];
    mla_weights scratch;
    weight_table(t, &scratch, c);
    size_t total = 0;
    for (size_t i = 0; i < N_WEIGHTS; i++) {
        if (t[i].cols && t[i].rows > (SIZE_MAX / sizeof(float) - total) / t[i].cols)
            return kvl_fail(KVL_EINVAL, "mla_weights_size: weight %zu of %zu x %zu overflows", i, t[i].rows, t[i].cols);
        total += t[i].rows * t[i].cols;
    }
    *n_floats = total;
    return KVL_OK;
}

void mla_weights_cut(mla_weights *w, const mla_config *c, float *block)
{
    memset(w, 0, sizeof *w);
    weight_entry t[N_WEIGHTS];
    weight_table(t, w, c);
    size_t off = 0;
    for (size_t i = 0; i < N_WEIGHTS; i++) {
        const size_t n = t[i].rows * t[i].cols;
        *t[i].field = n ? block + off : NULL;
        off += n;
    }
    w->block = block;
    w->n_floats = off;
}

void mla_weights_draw(mla_weights *w, const mla_config *c, kvl_rng *rng)
{
    weight_entry t[N_WEIGHTS];
    weight_table(t, w, c);
    for (size_t i = 0; i < N_WEIGHTS; i++) {
        const size_t n = t[i].rows * t[i].cols;
        if (n == 0) continue;
        if (t[i].gain) kvl_rng_uniform_f32(rng, *t[i].field, n, 0.5, 1.5);
        else kvl_rng_normal_f32(rng, *t[i].field, n, 1.0 / sqrt((double)t[i].cols));
    }
}

int mla_weights_alloc(mla_weights *w, const mla_config *c)
{
    memset(w, 0, sizeof *w);
    size_t total;
    KVL_TRY(mla_weights_size(&total, c));
    float *block = calloc(total, sizeof *block);
    if (!block) return kvl_fail(KVL_ENOMEM, "mla_weights_alloc: out of memory for %zu floats", total);
    mla_weights_cut(w, c, block);
    return KVL_OK;
}

int mla_weights_init_random(mla_weights *w, const mla_config *c, kvl_rng *rng)
{
    KVL_TRY(mla_weights_alloc(w, c));
    mla_weights_draw(w, c, rng);
    return KVL_OK;
}

void mla_weights_free(mla_weights *w)
{
    free(w->block);
    memset(w, 0, sizeof *w);
}

/* ---- cache ---------------------------------------------------------------------------------------- */

int mla_cache_init(mla_cache *cache, const mla_config *c, size_t max_tokens, kv_store store)
{
    memset(cache, 0, sizeof *cache);
    int rc = mla_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "mla_cache_init: %s", kvl_error());
    return kv_ring_init(&cache->ring, c->window, max_tokens, row_width(c), store);
}

int mla_cache_append(mla_cache *cache, const mla_config *c, const float *rows, size_t n)
{
    KVL_TRY(mla_config_check(c));
    if (cache->ring.width != row_width(c))
        return kvl_fail(KVL_EINVAL, "mla_cache_append: cache rows hold %zu values, the config's Dc+Dr is %zu",
                        cache->ring.width, row_width(c));
    return kv_ring_append(&cache->ring, rows, n);
}

size_t mla_cache_bytes_used(const mla_cache *cache) { return kv_ring_bytes_used(&cache->ring); }

void mla_cache_free(mla_cache *cache) { kv_ring_free(&cache->ring); }

/* ---- projections ---------------------------------------------------------------------------------- */

int mla_query_latent(float *cq, const mla_config *c, const mla_weights *w, const float *x, size_t S)
{
    KVL_TRY(check_call(__func__, c, w, cq, x));
    if (c->q_lora_rank == 0) return kvl_fail(KVL_EINVAL, "%s: q_lora_rank is 0, there is no query latent", __func__);
    KVL_TRY(kvl_matmul_abt_f32(cq, x, w->w_dq, S, c->q_lora_rank, c->d));
    kvl_rmsnorm_f32(cq, cq, w->q_norm, S, c->q_lora_rank, c->norm_eps);
    return KVL_OK;
}

/* q[S][H·(Dnope+Dr)] = W_UQ RMSNorm(W_DQ x) */
static int query_through_latent(float *q, const mla_config *c, const mla_weights *w, const float *x, size_t S)
{
    float *cq;
    KVL_TRY(alloc_floats(&cq, S, c->q_lora_rank, "mla_query"));
    int rc = mla_query_latent(cq, c, w, x, S);
    if (rc == KVL_OK) rc = kvl_matmul_abt_f32(q, cq, w->w_uq, S, c->n_heads * qk_width(c), c->q_lora_rank);
    free(cq);
    return rc;
}

/* q[S][H·(Dnope+Dr)] = W_Q x (q_lora_rank 0, V2-Lite) */
static int query_direct(float *q, const mla_config *c, const mla_weights *w, const float *x, size_t S)
{
    return kvl_matmul_abt_f32(q, x, w->w_q, S, c->n_heads * qk_width(c), c->d);
}

int mla_query(float *q, const mla_config *c, const mla_weights *w, const float *x, size_t S, size_t start)
{
    KVL_TRY(check_call(__func__, c, w, q, x));
    const size_t H = c->n_heads, Dqk = qk_width(c);
    KVL_TRY(c->q_lora_rank ? query_through_latent(q, c, w, x, S) : query_direct(q, c, w, x, S));
    kvl_rope_rotate_heads_interleaved(q, S, H * Dqk, c->qk_nope, H, Dqk, &c->rope, (int64_t)start);
    return KVL_OK;
}

int mla_latent(float *rows, const mla_config *c, const mla_weights *w, const float *x, size_t S, size_t start)
{
    KVL_TRY(check_call(__func__, c, w, rows, x));
    const size_t Dc = c->kv_lora_rank, Dw = row_width(c);
    KVL_TRY(kvl_matmul_abt_f32(rows, x, w->w_dkv, S, Dw, c->d));
    for (size_t i = 0; i < S; i++) kvl_rmsnorm_f32(rows + i * Dw, rows + i * Dw, w->kv_norm, 1, Dc, c->norm_eps);
    kvl_rope_rotate_rows_interleaved(rows, S, Dw, Dc, &c->rope, (int64_t)start);
    return KVL_OK;
}

/* scores[S][H][N] ← scores·scale + mask[S][N] (the same mask row for every head of a query) */
static void scale_and_mask(float *scores, const float *mask, size_t S, size_t H, size_t N, double scale)
{
    const float sc = (float)scale;
    for (size_t r = 0; r < S * H; r++)
        for (size_t j = 0; j < N; j++) scores[r * N + j] = scores[r * N + j] * sc + (mask ? mask[(r / H) * N + j] : 0.0f);
}

/* out[S][d] = W_O o[S][H·Dv] */
static int project_out(float *out, const mla_config *c, const mla_weights *w, const float *o, size_t S)
{
    return kvl_matmul_abt_f32(out, o, w->w_o, S, c->d, c->n_heads * c->v_head);
}

/* ---- naive form ----------------------------------------------------------------------------------- */

/* The naive form's keys of head h, k[N][Dnope+Dr] = [latent_j W_UK^hᵀ | k_rope_j], for latent[N][Dc] (the
 * rows' c_kv, packed) and rows[N][Dc+Dr]. keys_rope fills the k_rope columns, the same in every head,
 * once; head_keys the rest for one head, through k_nope[N][Dnope]. */
static void keys_rope(float *k, const mla_config *c, const float *rows, size_t N)
{
    kvl_copy_block(k + c->qk_nope, qk_width(c), rows + c->kv_lora_rank, row_width(c), N, c->qk_rope);
}

static int head_keys(float *k, float *k_nope, const mla_config *c, const mla_weights *w, const float *latent,
                     size_t N, size_t h)
{
    KVL_TRY(kvl_matmul_abt_f32(k_nope, latent, w_uk(c, w, h), N, c->qk_nope, c->kv_lora_rank));
    kvl_copy_block(k, qk_width(c), k_nope, c->qk_nope, N, c->qk_nope);
    return KVL_OK;
}

/* Per head: K_h[N][Dnope+Dr] = [c_j W_UK^hᵀ | k_rope_j], then scores = Q_h K_hᵀ. */
int mla_scores_naive(float *scores, const mla_config *c, const mla_weights *w, const float *q,
                     const float *rows, const float *mask, size_t S, size_t N)
{
    KVL_TRY(check_call(__func__, c, w, q, rows));
    if (!scores) return kvl_fail(KVL_EINVAL, "%s: NULL scores", __func__);
    const size_t H = c->n_heads, Dc = c->kv_lora_rank, Dn = c->qk_nope;
    const size_t Dqk = qk_width(c), Dw = row_width(c);
    float *latent = NULL, *k_nope = NULL, *k = NULL, *q_h = NULL, *s_h = NULL;
    int rc = alloc_floats(&latent, N, Dc, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&k_nope, N, Dn, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&k, N, Dqk, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&q_h, S, Dqk, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&s_h, S, N, __func__);
    if (rc == KVL_OK) {
        kvl_copy_block(latent, Dc, rows, Dw, N, Dc);
        keys_rope(k, c, rows, N);
    }
    for (size_t h = 0; h < H && rc == KVL_OK; h++) {
        rc = head_keys(k, k_nope, c, w, latent, N, h);
        if (rc != KVL_OK) break;
        kvl_copy_block(q_h, Dqk, q + h * Dqk, H * Dqk, S, Dqk);
        rc = kvl_matmul_abt_f32(s_h, q_h, k, S, N, Dqk);
        if (rc == KVL_OK) kvl_copy_block(scores + h * N, H * N, s_h, N, S, N);
    }
    if (rc == KVL_OK) scale_and_mask(scores, mask, S, H, N, c->softmax_scale);
    free(latent);
    free(k_nope);
    free(k);
    free(q_h);
    free(s_h);
    return rc;
}

/* Per head: V_h[N][Dv] = c_j W_UV^hᵀ, then o_h = P_h V_h. */
int mla_values_naive(float *o, const mla_config *c, const mla_weights *w, const float *p, const float *rows,
                     size_t S, size_t N)
{
    KVL_TRY(check_call(__func__, c, w, p, rows));
    if (!o) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    const size_t H = c->n_heads, Dc = c->kv_lora_rank, Dv = c->v_head, Dw = row_width(c);
    float *latent = NULL, *v = NULL, *p_h = NULL, *o_h = NULL;
    int rc = alloc_floats(&latent, N, Dc, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&v, N, Dv, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&p_h, S, N, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&o_h, S, Dv, __func__);
    if (rc == KVL_OK) kvl_copy_block(latent, Dc, rows, Dw, N, Dc);
    for (size_t h = 0; h < H && rc == KVL_OK; h++) {
        rc = kvl_matmul_abt_f32(v, latent, w_uv(c, w, h), N, Dv, Dc);
        if (rc != KVL_OK) break;
        kvl_copy_block(p_h, N, p + h * N, H * N, S, N);
        rc = kvl_matmul_ab_f32(o_h, p_h, v, S, Dv, N);
        if (rc == KVL_OK) kvl_copy_block(o + h * Dv, H * Dv, o_h, Dv, S, Dv);
    }
    free(latent);
    free(v);
    free(p_h);
    free(o_h);
    return rc;
}

/* Head by head: what mla_scores_naive, the softmax and mla_values_naive compute. Head h's keys
 * k_h[N][Dnope+Dr] = [c_kv W_UK^hᵀ | k_rope] and values v_h[N][Dv] = c_kv W_UV^hᵀ are expanded from the
 * rows once, then its queries attend to them a block at a time (kvl_attend_chunk_head), so only one
 * head's keys are held at a time. */
int mla_attend_naive(float *o, const mla_config *c, const mla_weights *w, const float *q, const float *rows,
                     size_t S, size_t N, kvl_chunk_mask mask)
{
    KVL_TRY(check_call(__func__, c, w, q, rows));
    if (!o || !mask.rows) return kvl_fail(KVL_EINVAL, "%s: NULL output or mask", __func__);
    if (S == 0) return KVL_OK;
    const size_t H = c->n_heads, Dc = c->kv_lora_rank, Dv = c->v_head;
    const kvl_chunk_head chunk = {.S = S, .N = N, .Dk = qk_width(c), .Dv = Dv, .ldq = H * qk_width(c),
                                  .ldo = H * Dv, .scale = (float)c->softmax_scale, .mask = mask};
    float *latent = NULL, *k_nope = NULL, *k = NULL, *v = NULL;
    int rc = alloc_floats(&latent, N, Dc, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&k_nope, N, c->qk_nope, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&k, N, qk_width(c), __func__);
    if (rc == KVL_OK) rc = alloc_floats(&v, N, Dv, __func__);
    if (rc == KVL_OK) {
        kvl_copy_block(latent, Dc, rows, row_width(c), N, Dc);
        keys_rope(k, c, rows, N);
    }
    for (size_t h = 0; h < H && rc == KVL_OK; h++) {
        rc = head_keys(k, k_nope, c, w, latent, N, h);
        if (rc == KVL_OK) rc = kvl_matmul_abt_f32(v, latent, w_uv(c, w, h), N, Dv, Dc);
        if (rc == KVL_OK) rc = kvl_attend_chunk_head(o + h * Dv, q + h * qk_width(c), k, v, &chunk);
    }
    free(latent);
    free(k_nope);
    free(k);
    free(v);
    return rc;
}

/* ---- absorbed form -------------------------------------------------------------------------------- */

/* q_hat[S·H][Dc+Dr] = [q^C_h W_UK^h | q^R_h] per head: W_UK^h folded into the query. */
static int absorb_queries(float *q_hat, const mla_config *c, const mla_weights *w, const float *q, size_t S)
{
    const size_t H = c->n_heads, Dc = c->kv_lora_rank, Dn = c->qk_nope, Dr = c->qk_rope;
    const size_t Dqk = qk_width(c), Dw = row_width(c);
    float *qc_h = NULL, *qhat_h = NULL;
    int rc = alloc_floats(&qc_h, S, Dn, "mla_absorb");
    if (rc == KVL_OK) rc = alloc_floats(&qhat_h, S, Dc, "mla_absorb");
    if (rc == KVL_OK) kvl_copy_block(q_hat + Dc, Dw, q + Dn, Dqk, S * H, Dr);
    for (size_t h = 0; h < H && rc == KVL_OK; h++) {
        kvl_copy_block(qc_h, Dn, q + h * Dqk, H * Dqk, S, Dn);
        rc = kvl_matmul_ab_f32(qhat_h, qc_h, w_uk(c, w, h), S, Dc, Dn);
        if (rc == KVL_OK) kvl_copy_block(q_hat + h * Dw, H * Dw, qhat_h, Dc, S, Dc);
    }
    free(qc_h);
    free(qhat_h);
    return rc;
}

/* o[S][H][Dv]: o_h = W_UV^h ô_h for o_hat[S·H][…], head rows ld apart, ô_h its first Dc values. */
static int expand_values(float *o, const mla_config *c, const mla_weights *w, const float *o_hat, size_t ld,
                         size_t S)
{
    const size_t H = c->n_heads, Dc = c->kv_lora_rank, Dv = c->v_head;
    float *ohat_h = NULL, *o_h = NULL;
    int rc = alloc_floats(&ohat_h, S, Dc, "mla_expand");
    if (rc == KVL_OK) rc = alloc_floats(&o_h, S, Dv, "mla_expand");
    for (size_t h = 0; h < H && rc == KVL_OK; h++) {
        kvl_copy_block(ohat_h, Dc, o_hat + h * ld, H * ld, S, Dc);
        rc = kvl_matmul_abt_f32(o_h, ohat_h, w_uv(c, w, h), S, Dv, Dc);
        if (rc == KVL_OK) kvl_copy_block(o + h * Dv, H * Dv, o_h, Dv, S, Dv);
    }
    free(ohat_h);
    free(o_h);
    return rc;
}

/* Q̂ = absorbed queries, then scores = Q̂ · rowsᵀ for every head at once. */
int mla_scores_absorbed(float *scores, const mla_config *c, const mla_weights *w, const float *q,
                        const float *rows, const float *mask, size_t S, size_t N)
{
    KVL_TRY(check_call(__func__, c, w, q, rows));
    if (!scores) return kvl_fail(KVL_EINVAL, "%s: NULL scores", __func__);
    const size_t H = c->n_heads;
    float *q_hat = NULL;
    int rc = alloc_floats(&q_hat, S * H, row_width(c), __func__);
    if (rc == KVL_OK) rc = absorb_queries(q_hat, c, w, q, S);
    if (rc == KVL_OK) rc = kvl_matmul_abt_f32(scores, q_hat, rows, S * H, N, row_width(c));
    if (rc == KVL_OK) scale_and_mask(scores, mask, S, H, N, c->softmax_scale);
    free(q_hat);
    return rc;
}

/* Ô[S·H][Dc+Dr] = P · rows for every head at once (the value is the row's c_kv: the product runs over
 * the whole row because the rows are dense, and the k_rope columns of Ô are not used), then
 * o_h = W_UV^h ô_h. */
int mla_values_absorbed(float *o, const mla_config *c, const mla_weights *w, const float *p,
                        const float *rows, size_t S, size_t N)
{
    KVL_TRY(check_call(__func__, c, w, p, rows));
    if (!o) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    const size_t Dw = row_width(c);
    float *o_hat = NULL;
    int rc = alloc_floats(&o_hat, S * c->n_heads, Dw, __func__);
    if (rc == KVL_OK) rc = kvl_matmul_ab_f32(o_hat, p, rows, S * c->n_heads, Dw, N);
    if (rc == KVL_OK) rc = expand_values(o, c, w, o_hat, Dw, S);
    free(o_hat);
    return rc;
}

int mla_absorb_query(float *q_hat, const mla_config *c, const mla_weights *w, const float *q, size_t S)
{
    KVL_TRY(check_call(__func__, c, w, q_hat, q));
    return absorb_queries(q_hat, c, w, q, S);
}

int mla_expand_output(float *o, const mla_config *c, const mla_weights *w, const float *o_hat, size_t S)
{
    KVL_TRY(check_call(__func__, c, w, o, o_hat));
    return expand_values(o, c, w, o_hat, c->kv_lora_rank, S);
}

/* ---- whole sequence --------------------------------------------------------------------------------- */

int mla_forward(float *out, const mla_config *c, const mla_weights *w, const float *x, size_t T)
{
    KVL_TRY(check_call(__func__, c, w, out, x));
    float *q = NULL, *rows = NULL, *o = NULL;
    int rc = alloc_floats(&q, T * c->n_heads, qk_width(c), __func__);
    if (rc == KVL_OK) rc = alloc_floats(&rows, T, row_width(c), __func__);
    if (rc == KVL_OK) rc = alloc_floats(&o, T * c->n_heads, c->v_head, __func__);
    if (rc == KVL_OK) rc = mla_query(q, c, w, x, T, 0);
    if (rc == KVL_OK) rc = mla_latent(rows, c, w, x, T, 0);
    const swa_span span = {.start = 0, .key_start = 0, .window = c->window};
    if (rc == KVL_OK) rc = mla_attend_naive(o, c, w, q, rows, T, T, swa_chunk_mask(&span));
    if (rc == KVL_OK) rc = project_out(out, c, w, o, T);
    free(q);
    free(rows);
    free(o);
    return rc;
}

/* ---- incremental ---------------------------------------------------------------------------------- */

static int check_cache(const char *fn, const mla_config *c, const mla_cache *cache, size_t S)
{
    if (!cache || !cache->ring.rows) return kvl_fail(KVL_EINVAL, "%s: cache is NULL or not initialised", fn);
    if (cache->ring.width != row_width(c))
        return kvl_fail(KVL_EINVAL, "%s: cache rows hold %zu values, the config's Dc+Dr is %zu", fn,
                        cache->ring.width, row_width(c));
    if (S > cache->ring.max_tokens - cache->ring.len)
        return kvl_fail(KVL_EINVAL, "%s: %zu tokens after %zu exceed the cache's %zu positions", fn, S,
                        cache->ring.len, cache->ring.max_tokens);
    return KVL_OK;
}

/* Keys of a chunk at start … start + S − 1: the cached rows from the first position its first query
 * sees, then the chunk's own rows, keys[N][Dc+Dr] in position order from key_start. */
typedef struct {
    float *keys, *q, *o;
    size_t key_start, N;
} chunk;

static void chunk_free(chunk *k)
{
    free(k->keys);
    free(k->q);
    free(k->o);
}

static int chunk_build(chunk *k, const mla_config *c, const mla_weights *w, const mla_cache *cache, const float *x,
                       size_t S)
{
    const size_t start = cache->ring.len, Dw = row_width(c), H = c->n_heads;
    k->key_start = swa_first_visible(start, c->window);
    const size_t n_old = start - k->key_start;
    k->N = n_old + S;
    KVL_TRY(alloc_floats(&k->keys, k->N, Dw, "mla_prefill"));
    KVL_TRY(alloc_floats(&k->q, S * H, qk_width(c), "mla_prefill"));
    KVL_TRY(alloc_floats(&k->o, S * H, c->v_head, "mla_prefill"));
    KVL_TRY(kv_ring_read(k->keys, &cache->ring, k->key_start, n_old));
    float *fresh = k->keys + n_old * Dw;
    KVL_TRY(mla_latent(fresh, c, w, x, S, start));
    kv_store_round(fresh, S * Dw, cache->ring.store);
    return mla_query(k->q, c, w, x, S, start);
}

int mla_prefill(float *out, const mla_config *c, const mla_weights *w, mla_cache *cache, const float *x, size_t S)
{
    KVL_TRY(check_call(__func__, c, w, out, x));
    KVL_TRY(check_cache(__func__, c, cache, S));
    chunk k = {0};
    int rc = chunk_build(&k, c, w, cache, x, S);
    const swa_span span = {.start = cache->ring.len, .key_start = k.key_start, .window = c->window};
    if (rc == KVL_OK) rc = mla_attend_naive(k.o, c, w, k.q, k.keys, S, k.N, swa_chunk_mask(&span));
    if (rc == KVL_OK) rc = project_out(out, c, w, k.o, S);
    if (rc == KVL_OK) rc = kv_ring_append(&cache->ring, k.keys + (k.N - S) * row_width(c), S);
    chunk_free(&k);
    return rc;
}

/* One decode step's start: the token's query q[H][Dnope+Dr] and row, the row appended; N = the rows
 * held after the append, which are exactly the new query's keys (the ring keeps the last
 * min(len, slots) positions) and fill slots 0 … N − 1. */
typedef struct {
    float *q, *row, *o;
    size_t N;
} step;

static void step_free(step *s)
{
    free(s->q);
    free(s->row);
    free(s->o);
}

static int step_begin(step *s, const mla_config *c, const mla_weights *w, mla_cache *cache, const float *x_t,
                      const char *fn)
{
    memset(s, 0, sizeof *s);
    KVL_TRY(check_call(fn, c, w, x_t, cache));
    KVL_TRY(check_cache(fn, c, cache, 1));
    kv_ring *r = &cache->ring;
    const size_t pos = r->len;
    s->N = pos + 1 < r->slots ? pos + 1 : r->slots;
    KVL_TRY(alloc_floats(&s->q, c->n_heads, qk_width(c), fn));
    KVL_TRY(alloc_floats(&s->row, 1, row_width(c), fn));
    KVL_TRY(alloc_floats(&s->o, c->n_heads, c->v_head, fn));
    KVL_TRY(mla_query(s->q, c, w, x_t, 1, pos));
    KVL_TRY(mla_latent(s->row, c, w, x_t, 1, pos));
    return kv_ring_append(r, s->row, 1);
}

/* The naive form re-expands every head's keys and values from rows[N][Dc+Dr] in float32: a float32
 * ring is read in place, a bf16 ring widened whole into held. */
static int decode_naive(float *o, const mla_config *c, const mla_weights *w, const kv_ring *r, const float *q,
                        size_t N)
{
    const size_t Dw = row_width(c);
    float *held = NULL, *scores = NULL;
    int rc = alloc_floats(&scores, c->n_heads, N, "mla_decode_naive");
    if (rc == KVL_OK && r->store == KV_STORE_BF16) rc = alloc_floats(&held, N, Dw, "mla_decode_naive");
    if (held) kvf_bf16_decode_n(held, r->rows, N * Dw);
    const float *rows = held ? held : r->rows;
    if (rc == KVL_OK) rc = mla_scores_naive(scores, c, w, q, rows, NULL, 1, N);
    if (rc == KVL_OK) {
        softmax_rows(scores, c->n_heads, N);
        rc = mla_values_naive(o, c, w, scores, rows, 1, N);
    }
    free(held);
    free(scores);
    return rc;
}

int mla_decode_naive(float *out, const mla_config *c, const mla_weights *w, mla_cache *cache, const float *x_t)
{
    if (!out) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    step s;
    int rc = step_begin(&s, c, w, cache, x_t, __func__);
    if (rc == KVL_OK) rc = decode_naive(s.o, c, w, &cache->ring, s.q, s.N);
    if (rc == KVL_OK) rc = project_out(out, c, w, s.o, 1);
    step_free(&s);
    return rc;
}

/* The absorbed form is MQA over the rows as the ring holds them: q̂_h = [W_UK^hᵀ q^C_h | q^R_h] attends
 * against whole rows (keys) and their c_kv (values), ô[H][Dc] (ref/core/attend.h), then
 * o_h = W_UV^h ô_h and the output projection. */
int mla_decode_absorbed(float *out, const mla_config *c, const mla_weights *w, mla_cache *cache,
                        const float *x_t)
{
    if (!out) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    const size_t H = c ? c->n_heads : 0, Dc = c ? c->kv_lora_rank : 0, Dw = c ? row_width(c) : 0;
    step s;
    float *q_hat = NULL, *o_hat = NULL;
    int rc = step_begin(&s, c, w, cache, x_t, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&q_hat, H, Dw, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&o_hat, H, Dc, __func__);
    if (rc == KVL_OK) rc = absorb_queries(q_hat, c, w, s.q, 1);
    if (rc == KVL_OK) {
        const kvl_row_tiles rows = kv_ring_view(&cache->ring);
        const kvl_attend_rows mqa = {.N = s.N, .stride = Dw, .k_off = 0, .Dk = Dw, .v_off = 0, .Dv = Dc, .groups = 1};
        rc = kvl_attend(o_hat, q_hat, H, &rows, &mqa, (float)c->softmax_scale, NULL, NULL);
    }
    if (rc == KVL_OK) rc = expand_values(s.o, c, w, o_hat, Dc, 1);
    if (rc == KVL_OK) rc = project_out(out, c, w, s.o, 1);
    free(q_hat);
    free(o_hat);
    step_free(&s);
    return rc;
}
