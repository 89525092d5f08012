/* draw_cost: see draw_cost.h. */
#include "draw_cost.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "draw_compare.h"
#include "model.h"
#include "nb.h"
#include "rng.h"
#include "status.h"

#define COST_K "#1f4e8c"
#define COST_V "#a9c1e0"
#define COST_Q "#999"

void cost_widen(double *dst, const float *src, size_t n)
{
    for (size_t i = 0; i < n; i++) dst[i] = src[i];
}

int cost_check(const char *what, const double *built, const double *ref, size_t n, double tolerance)
{
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs(built[i] - ref[i]));
        scale = fmax(scale, fabs(ref[i]));
    }
    return nbc_report(what, diff, scale, tolerance);
}

int cost_live_bytes_per_token(size_t *out, const mha_config *c, size_t n)
{
    mha_cache cache;
    int rc = mha_cache_init(&cache, c, n, KV_STORE_BF16);
    float *rows = rc == KVL_OK ? calloc(n * cache.ring.width, sizeof *rows) : NULL;
    if (rc == KVL_OK && !rows) rc = kvl_fail(KVL_ENOMEM, "out of memory");
    if (rc == KVL_OK) rc = kv_ring_append(&cache.ring, rows, n);
    if (rc == KVL_OK) *out = mha_cache_bytes_used(&cache) / n;
    free(rows);
    mha_cache_free(&cache);
    return rc;
}

/* T tokens through the stack: T/2 prefilled, the rest decoded */
static int run_toy_stack(const model_config *c, const model_weights *w, model_cache *cache,
                         kvl_rng *rng, size_t T)
{
    float *x = malloc(T * c->d * sizeof *x), *out = malloc(T * c->d * sizeof *out);
    int rc = x && out ? KVL_OK : kvl_fail(KVL_ENOMEM, "out of memory");
    if (rc == KVL_OK) {
        kvl_rng_normal_f32(rng, x, T * c->d, 1.0);
        rc = model_prefill(out, c, w, cache, x, T / 2);
    }
    for (size_t t = T / 2; t < T && rc == KVL_OK; t++)
        rc = model_decode(out + t * c->d, c, w, cache, x + t * c->d);
    free(x);
    free(out);
    return rc;
}

int cost_toy_stack_bytes(size_t *live, size_t n_kv_heads, size_t T)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"hidden_size\": 64, \"num_hidden_layers\": %d, \"num_attention_heads\": 4,"
             " \"num_key_value_heads\": %zu, \"head_dim\": %d}",
             COST_TOY_LAYERS, n_kv_heads, COST_TOY_HEAD_DIM);
    kvl_model m;
    model_config c;
    model_weights w = {0};
    model_cache cache = {0};
    kvl_rng rng;
    kvl_rng_seed(&rng, 1);
    int rc = kvl_model_parse(&m, json, strlen(json), "toy stack");
    if (rc != KVL_OK) return rc;
    rc = model_config_from_model(&c, &m, 32, MODEL_MLP_SWIGLU);
    kvl_model_free(&m);
    if (rc != KVL_OK) return rc;
    rc = model_weights_init_random(&w, &c, &rng);
    if (rc == KVL_OK) rc = model_cache_init(&cache, &c, T, KV_STORE_BF16);
    if (rc == KVL_OK) rc = run_toy_stack(&c, &w, &cache, &rng, T);
    if (rc == KVL_OK) *live = model_cache_bytes_used(&cache);
    model_cache_free(&cache);
    model_weights_free(&w);
    model_config_free(&c);
    return rc;
}

int cost_gqa_run_ref(cost_gqa_run *r, size_t d, size_t H, size_t Hkv, size_t Dh, size_t n,
                     unsigned seed)
{
    *r = (cost_gqa_run){0};
    mha_cache cache = {0};
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    const size_t width = 2 * Hkv * Dh;
    int rc = mha_config_init(&r->c, d, H, Hkv, Dh, 0, 1e4);
    if (rc == KVL_OK) rc = mha_weights_init_random(&r->w, &r->c, &rng);
    if (rc == KVL_OK) rc = mha_cache_init(&cache, &r->c, n + 1, KV_STORE_F32);
    r->x = malloc((n + 1) * d * sizeof *r->x);
    r->rows = malloc((n + 1) * width * sizeof *r->rows);
    r->out = malloc((n + 1) * d * sizeof *r->out);
    if (rc == KVL_OK && (!r->x || !r->rows || !r->out)) rc = kvl_fail(KVL_ENOMEM, "out of memory");
    if (rc == KVL_OK) {
        kvl_rng_normal_f32(&rng, r->x, (n + 1) * d, 1.0);
        rc = mha_prefill(r->out, &r->c, &r->w, &cache, r->x, n);
    }
    if (rc == KVL_OK) rc = mha_decode(r->out, &r->c, &r->w, &cache, r->x + n * d);
    if (rc == KVL_OK) rc = kv_ring_read(r->rows, &cache.ring, 0, n + 1);
    mha_cache_free(&cache);
    if (rc != KVL_OK) cost_gqa_run_free(r);
    return rc;
}

void cost_gqa_run_free(cost_gqa_run *r)
{
    mha_weights_free(&r->w);
    free(r->x);
    free(r->rows);
    free(r->out);
    *r = (cost_gqa_run){0};
}

/* One variant's row below baseline y: its name, the H query heads, a line from each to the KV
 * head it reads, the K | V boxes of every KV head, and their bytes. */
static void token_row(svg_doc *s, double y, double px_per_byte, const char *name, size_t kv,
                      size_t H, size_t head_bytes)
{
    const double x0 = 40, w = (double)head_bytes * px_per_byte, q = 2 * w, box = 22;
    const double qy = y + 8, ky = y + 52;
    svg_title(s, x0, y, 13, "%s: %zu KV head%s, each read by %zu query head%s", name, kv,
              kv == 1 ? "" : "s", H / kv, H / kv == 1 ? "" : "s");
    for (size_t h = 0; h < H; h++) {
        const double g = (double)(h / (H / kv));
        svg_rect(s, x0 + (double)h * q + 1, qy, q - 2, 8, COST_Q);
        svg_line(s, x0 + ((double)h + 0.5) * q, qy + 8, x0 + (2 * g + 1) * w, ky, COST_Q, 0.6);
    }
    for (size_t g = 0; g < kv; g++) {
        svg_rect(s, x0 + 2 * (double)g * w, ky, w, box, COST_K);
        svg_rect(s, x0 + (2 * (double)g + 1) * w, ky, w, box, COST_V);
        if (g)
            svg_line(s, x0 + 2 * (double)g * w, ky, x0 + 2 * (double)g * w, ky + box, "white", 0.6);
    }
    const char *each = nb_num((double)head_bytes, 0);
    svg_text(s, x0 + 2 * (double)kv * w + 8, ky + 16, 12, "start", "%s B = %zu × (K %s B + V %s B)",
             nb_num((double)(2 * kv * head_bytes), 0), kv, each, each);
}

void cost_draw_token_cache(svg_doc *s, const char *model, const char *const *names,
                           const size_t *kv_heads, size_t n, size_t H, size_t head_bytes)
{
    const double bar = 576, px_per_byte = bar / (2.0 * (double)H * (double)head_bytes),
                 legend = 92 + 100 * (double)n;
    svg_begin(s, 860, legend + 24);
    svg_title(s, 20, 28, 16, "What one token caches in one layer: %s", model);
    svg_text(s, 20, 48, 12, "start",
             "boxes drawn to one scale of bytes; a line joins each of the H = %zu query heads "
             "to the KV head it reads",
             H);
    for (size_t i = 0; i < n; i++)
        token_row(s, 80 + 100 * (double)i, px_per_byte, names[i], kv_heads[i], H, head_bytes);
    const char *fills[] = {COST_Q, COST_K, COST_V};
    const char *what[] = {"query head q_h (not cached)", "K = RoPE(W_K^g x_t), Dh values",
                          "V = W_V^g x_t, Dh values"};
    for (int i = 0; i < 3; i++) {
        svg_rect(s, 40 + 250 * i, legend - 10, 12, 12, fills[i]);
        svg_text(s, 58 + 250 * i, legend, 12, "start", "%s", what[i]);
    }
    svg_end(s);
}
