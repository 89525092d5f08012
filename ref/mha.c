#include "mha.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "linalg.h"
#include "status.h"

/* ---- config ---------------------------------------------------------------------------------------- */

int mha_config_init(mha_config *c, size_t d, size_t n_heads, size_t n_kv_heads, size_t head_dim, size_t window,
                    double rope_base)
{
    memset(c, 0, sizeof *c);
    if (d == 0 || n_heads == 0 || n_kv_heads == 0)
        return kvl_fail(KVL_EINVAL, "mha_config: d (%zu), n_heads (%zu) and n_kv_heads (%zu) must be positive", d,
                        n_heads, n_kv_heads);
    if (n_heads % n_kv_heads)
        return kvl_fail(KVL_EINVAL, "mha_config: n_kv_heads (%zu) does not divide n_heads (%zu)", n_kv_heads, n_heads);
    if (head_dim < 2 || head_dim % 2 || head_dim > KVL_ROPE_MAX_DR)
        return kvl_fail(KVL_EINVAL, "mha_config: head_dim must be even and in [2, %d] (RoPE covers the head), got %zu",
                        KVL_ROPE_MAX_DR, head_dim);
    *c = (mha_config){.d = d, .n_heads = n_heads, .n_kv_heads = n_kv_heads, .head_dim = head_dim, .window = window};
    return kvl_rope_init(&c->rope, head_dim, rope_base);
}

int mha_config_from_model(mha_config *c, const kvl_model *m, size_t layer)
{
    memset(c, 0, sizeof *c);
    if (m->generation != KVL_GEN_MHA)
        return kvl_fail(KVL_EINVAL, "%s: mha reads an MHA/GQA/MQA config, this one is %s", m->path,
                        kvl_generation_name(m->generation));
    if (layer >= m->n_layers)
        return kvl_fail(KVL_EINVAL, "%s: layer %zu out of range (%zu layers)", m->path, layer, m->n_layers);
    if (m->rope.factor != 1)
        return kvl_fail(KVL_EINVAL, "%s: rope scaling factor %g: mha rotates with plain frequencies only", m->path,
                        m->rope.factor);
    int rc = mha_config_init(c, m->d, m->n_heads, m->n_kv_heads, m->head_dim, m->window, m->rope.theta);
    if (rc == KVL_OK) return KVL_OK;
    return kvl_fail(rc, "%s: %s", m->path, kvl_error());
}

/* Elements of one cache row: K and V of every KV head. */
static size_t row_width(const mha_config *c) { return 2 * c->n_kv_heads * c->head_dim; }

/* ---- weights --------------------------------------------------------------------------------------- */

enum { W_Q, W_K, W_V, W_O, N_WEIGHTS };

/* a·b, or 0 when it would overflow a count of floats */
static size_t mul_or_zero(size_t a, size_t b)
{
    return a != 0 && b > SIZE_MAX / sizeof(float) / a ? 0 : a * b;
}

/* Elements and fan-in of each matrix, in allocation (and drawing) order; 0 elements on overflow. */
static void weight_sizes(size_t n[N_WEIGHTS], size_t fan_in[N_WEIGHTS], const mha_config *c)
{
    size_t q = mul_or_zero(c->n_heads, c->head_dim), kv = mul_or_zero(c->n_kv_heads, c->head_dim);
    n[W_Q] = mul_or_zero(q, c->d);  fan_in[W_Q] = c->d;
    n[W_K] = mul_or_zero(kv, c->d); fan_in[W_K] = c->d;
    n[W_V] = mul_or_zero(kv, c->d); fan_in[W_V] = c->d;
    n[W_O] = mul_or_zero(c->d, q);  fan_in[W_O] = q;
}

uint64_t mha_weights_size(const mha_config *c)
{
    size_t n[N_WEIGHTS], fan_in[N_WEIGHTS];
    weight_sizes(n, fan_in, c);
    uint64_t total = 0;
    for (int i = 0; i < N_WEIGHTS; i++) total += n[i];
    return total;
}

int mha_weights_init_random(mha_weights *w, const mha_config *c, kvl_rng *rng)
{
    memset(w, 0, sizeof *w);
    size_t n[N_WEIGHTS], fan_in[N_WEIGHTS], offset[N_WEIGHTS], total = 0;
    weight_sizes(n, fan_in, c);
    for (int i = 0; i < N_WEIGHTS; i++) {
        if (n[i] == 0 || n[i] > SIZE_MAX / sizeof(float) - total)
            return kvl_fail(KVL_EINVAL, "mha_weights_init_random: d %zu, %zu heads of %zu: weights too large", c->d,
                            c->n_heads, c->head_dim);
        offset[i] = total;
        total += n[i];
    }
    float *block = malloc(total * sizeof *block);
    if (!block) return kvl_fail(KVL_ENOMEM, "mha_weights_init_random: out of memory for %zu floats", total);
    for (int i = 0; i < N_WEIGHTS; i++)
        kvl_rng_normal_f32(rng, block + offset[i], n[i], 1.0 / sqrt((double)fan_in[i]));
    *w = (mha_weights){.w_q = block + offset[W_Q], .w_k = block + offset[W_K], .w_v = block + offset[W_V],
                       .w_o = block + offset[W_O]};
    return KVL_OK;
}

void mha_weights_free(mha_weights *w)
{
    free(w->w_q);   /* the start of the one block */
    memset(w, 0, sizeof *w);
}

/* ---- cache ----------------------------------------------------------------------------------------- */

int mha_cache_init(mha_cache *cache, const mha_config *c, size_t max_tokens, kv_store store)
{
    memset(cache, 0, sizeof *cache);
    KVL_TRY(kv_ring_init(&cache->ring, c->window, max_tokens, row_width(c), store));
    cache->window = c->window;
    return KVL_OK;
}

size_t mha_cache_bytes_used(const mha_cache *cache) { return kv_ring_bytes_used(&cache->ring); }

void mha_cache_free(mha_cache *cache)
{
    kv_ring_free(&cache->ring);
    cache->window = 0;
}

/* The cache was made for this config and has room for n more positions. */
static int check_cache(const mha_config *c, const mha_cache *cache, size_t n)
{
    const kv_ring *r = &cache->ring;
    if (!r->rows || r->width != row_width(c) || cache->window != c->window)
        return kvl_fail(KVL_EINVAL, "mha: the cache (rows of %zu, window %zu) was not made for this config (rows of %zu, "
                        "window %zu)", r->width, cache->window, row_width(c), c->window);
    if (n > r->max_tokens - r->len)
        return kvl_fail(KVL_EINVAL, "mha: %zu tokens at position %zu exceed the cache's %zu positions", n, r->len,
                        r->max_tokens);
    return KVL_OK;
}

/* ---- the shared steps ------------------------------------------------------------------------------ */

/* q[S][H·Dh] and cache rows kv[S][2·Hkv·Dh] of x[S][d] at positions start …, q and k rotated. */
static int project_qkv(float *q, float *kv, const mha_config *c, const mha_weights *w, const float *x, size_t S,
                       size_t start)
{
    const size_t H = c->n_heads, Hkv = c->n_kv_heads, Dh = c->head_dim;
    KVL_TRY(kvl_matmul_abt_f32(q, x, w->w_q, S, H * Dh, c->d));
    KVL_TRY(kvl_matmul_abt_f32(kv, x, w->w_k, S, 2 * Hkv * Dh, c->d));   /* w_k then w_v: rows [K | V] */
    kvl_rope_rotate_heads_half_split(q, S, H * Dh, 0, H, Dh, &c->rope, (int64_t)start);
    kvl_rope_rotate_heads_half_split(kv, S, 2 * Hkv * Dh, 0, Hkv, Dh, &c->rope, (int64_t)start);
    return KVL_OK;
}

/* *total += a·b floats; 0 when the sum would overflow a byte count. */
static int grow(size_t *total, size_t a, size_t b)
{
    size_t ab = mul_or_zero(a, b);
    if ((ab == 0 && a != 0 && b != 0) || ab > SIZE_MAX / sizeof(float) - *total) return 0;
    *total += ab;
    return 1;
}

/* One allocation of n floats for a call's scratch. */
static float *scratch(size_t n) { return malloc((n ? n : 1) * sizeof(float)); }

/* o[S][H·Dh] = attention of q[S][H·Dh] (query positions start + i) over the cache rows kv[n][2·Hkv·Dh]
 * (key positions key_start + j) under the window rule, head by head: each group's K and V columns
 * gathered from the [K | V] rows once, then each of its heads' queries against them
 * (kvl_attend_chunk_head: P = softmax(Q_h·K_gᵀ/√Dh + mask), O_h = P·V_g). */
static int attend_masked(float *o, const mha_config *c, const float *q, size_t S, size_t start, const float *kv,
                         size_t n, size_t key_start)
{
    const size_t H = c->n_heads, Hkv = c->n_kv_heads, Dh = c->head_dim, G = H / Hkv;
    const swa_span span = {.start = start, .key_start = key_start, .window = c->window};
    const kvl_chunk_head chunk = {.S = S, .N = n, .Dk = Dh, .Dv = Dh, .ldq = H * Dh, .ldo = H * Dh,
                                  .scale = (float)(1.0 / sqrt((double)Dh)), .mask = swa_chunk_mask(&span)};
    size_t need = 0;
    if (!grow(&need, 2 * n, Dh)) return kvl_fail(KVL_EINVAL, "mha: %zu keys of %zu is too large", n, Dh);
    float *k = scratch(need), *v = k + n * Dh;
    if (!k) return kvl_fail(KVL_ENOMEM, "mha: out of memory for %zu keys", n);
    int rc = KVL_OK;
    for (size_t h = 0; h < H && rc == KVL_OK; h++) {
        if (h % G == 0) {
            kvl_copy_block(k, Dh, kv + h / G * Dh, 2 * Hkv * Dh, n, Dh);
            kvl_copy_block(v, Dh, kv + (Hkv + h / G) * Dh, 2 * Hkv * Dh, n, Dh);
        }
        rc = kvl_attend_chunk_head(o + h * Dh, q + h * Dh, k, v, &chunk);
    }
    free(k);
    return rc;
}

/* ---- the three paths ------------------------------------------------------------------------------- */

int mha_forward(float *out, const mha_config *c, const mha_weights *w, const float *x, size_t T)
{
    if (T == 0) return kvl_fail(KVL_EINVAL, "mha_forward: T must be positive");
    const size_t qw = c->n_heads * c->head_dim, rw = row_width(c);
    size_t need = 0;
    if (!(grow(&need, 2 * T, qw) && grow(&need, T, rw)))
        return kvl_fail(KVL_EINVAL, "mha_forward: %zu tokens is too large", T);
    float *buf = scratch(need);
    if (!buf) return kvl_fail(KVL_ENOMEM, "mha_forward: out of memory for %zu tokens", T);
    float *q = buf, *o = q + T * qw, *kv = o + T * qw;
    int rc = project_qkv(q, kv, c, w, x, T, 0);
    if (rc == KVL_OK) rc = attend_masked(o, c, q, T, 0, kv, T, 0);
    if (rc == KVL_OK) rc = kvl_matmul_abt_f32(out, o, w->w_o, T, c->d, qw);
    free(buf);
    return rc;
}

int mha_prefill(float *out, const mha_config *c, const mha_weights *w, mha_cache *cache, const float *x, size_t S)
{
    if (S == 0) return kvl_fail(KVL_EINVAL, "mha_prefill: S must be positive");
    KVL_TRY(check_cache(c, cache, S));
    const size_t start = cache->ring.len, first = swa_first_visible(start, c->window), n_old = start - first;
    const size_t qw = c->n_heads * c->head_dim, rw = row_width(c);
    size_t need = 0;
    if (!(grow(&need, 2 * S, qw) && grow(&need, n_old + S, rw)))
        return kvl_fail(KVL_EINVAL, "mha_prefill: %zu tokens after %zu is too large", S, n_old);
    float *buf = scratch(need);
    if (!buf) return kvl_fail(KVL_ENOMEM, "mha_prefill: out of memory for %zu tokens after %zu", S, n_old);
    /* keys: the n_old cached rows the chunk's first query sees, then the chunk's own S rows */
    float *q = buf, *o = q + S * qw, *keys = o + S * qw, *own = keys + n_old * rw;
    int rc = kv_ring_read(keys, &cache->ring, first, n_old);
    if (rc == KVL_OK) rc = project_qkv(q, own, c, w, x, S, start);
    if (rc == KVL_OK) kv_store_round(own, S * rw, cache->ring.store);
    if (rc == KVL_OK) rc = attend_masked(o, c, q, S, start, keys, n_old + S, first);
    if (rc == KVL_OK) rc = kvl_matmul_abt_f32(out, o, w->w_o, S, c->d, qw);
    if (rc == KVL_OK) rc = kv_ring_append(&cache->ring, own, S);
    free(buf);
    return rc;
}

int mha_decode(float *out, const mha_config *c, const mha_weights *w, mha_cache *cache, const float *x_t)
{
    KVL_TRY(check_cache(c, cache, 1));
    const size_t t = cache->ring.len, qw = c->n_heads * c->head_dim, rw = row_width(c);
    size_t need = 0;
    if (!(grow(&need, 2, qw) && grow(&need, 1, rw)))
        return kvl_fail(KVL_EINVAL, "mha_decode: a query of %zu and a row of %zu values is too large", qw, rw);
    float *buf = scratch(need);
    if (!buf) return kvl_fail(KVL_ENOMEM, "mha_decode: out of memory for a row of %zu values", rw);
    float *q = buf, *o = q + qw, *row = o + qw;
    int rc = kvl_matvec_f32(q, w->w_q, x_t, qw, c->d);
    if (rc == KVL_OK) rc = kvl_matvec_f32(row, w->w_k, x_t, rw, c->d);   /* w_k then w_v: [K | V] */
    if (rc == KVL_OK) {
        for (size_t h = 0; h < c->n_heads; h++) kvl_rope_rotate_half_split(q + h * c->head_dim, &c->rope, (int64_t)t);
        for (size_t g = 0; g < c->n_kv_heads; g++)
            kvl_rope_rotate_half_split(row + g * c->head_dim, &c->rope, (int64_t)t);
        rc = kv_ring_append(&cache->ring, row, 1);
    }
    if (rc == KVL_OK) /* each KV group's G query heads against the group's K and V columns of [K | V] */
        rc = kv_ring_attend(o, q, c->n_heads, &cache->ring, c->n_kv_heads, 0, c->head_dim,
                             c->n_kv_heads * c->head_dim, c->head_dim, (float)(1.0 / sqrt((double)c->head_dim)));
    if (rc == KVL_OK) rc = kvl_matvec_f32(out, w->w_o, o, c->d, qw);
    free(buf);
    return rc;
}
