/* cost: what a KV cache costs per token with multi-head attention and its grouped variants
 * (chapter 1; chapters/01_mha/README.md, "What it stores per token").
 *
 *   bytes/token = layers × entries per token per layer × elements per entry × bytes per element
 *               =   L    ×            1                 ×      2·Hkv·Dh      ×        b
 *
 * the four levers every later generation pulls. For DeepSeek LLM 67B (ref/configs) and
 * Llama-3-70B (chapters/01_mha) it prints each lever as shipped (GQA-8) and as MHA (Hkv = H)
 * and MQA (Hkv = 1), with the per-layer bytes read back from a live ref/mha cache at the real
 * geometry; then it runs a toy layer stack through ref/model and checks the bytes its caches
 * hold against the formula.
 *
 *   cost [--tokens N] [--config FILE.json]
 *
 * Configs are found under $KVL_ROOT, else the source tree. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "grouped.h"
#include "element.h"
#include "mha.h"
#include "model.h"
#include "program.h"
#include "rng.h"
#include "status.h"
#include "swa.h"

#define MAX_TOKENS 4096
#define DEFAULT_TOKENS 40

/* The toy stack of the live check: the toy layer of tests/test_ch01_mha.c (d 64, H 4, Dh 16), four
 * layers deep. */
#define TOY_LAYERS 4
static const char TOY_STACK[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": %d, \"num_attention_heads\": 4, \"num_key_value_heads\": %zu,"
    " \"head_dim\": 16}";

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: cost [--tokens N] [--config FILE.json|FILE.gguf]\n"
        "The KV cache per token of MHA, GQA and MQA, lever by lever, at DeepSeek LLM 67B and\n"
        "Llama-3-70B (or FILE.json, an MHA/GQA/MQA config), then a live check: a toy stack's cache\n"
        "bytes after N tokens (1..%d, default %d) against the formula. FILE.gguf, a llama-architecture\n"
        "GGUF file (llama.cpp's format), is read from its metadata; llama.cpp's f16 cache has bf16's\n"
        "two bytes a value.\n",
        MAX_TOKENS, DEFAULT_TOKENS);
    kvl_usage_model_types(f);
    kvl_usage_backend(f);
}

/* ---- the four levers at a real size ---------------------------------------------------------- */

typedef struct {
    const char *label;
    size_t layers, entries, elements, bytes;   /* the four levers */
    size_t layer_bytes_live; /* one layer's cache growth per token, read from ref/mha */
} levers;

/* One layer's bytes per token, measured: a cache of this geometry, two rows appended, bytes held
 * / 2. No weights are needed: the bytes are a property of the storage. */
static int live_layer_bytes(size_t *out, const mha_config *c, kv_store store)
{
    mha_cache cache;
    int rc = mha_cache_init(&cache, c, 2, store);
    float *rows = rc == KVL_OK ? calloc(2 * cache.ring.width, sizeof *rows) : NULL;
    if (rc == KVL_OK && !rows) rc = kvl_fail(KVL_ENOMEM, "cost: out of memory");
    if (rc == KVL_OK) rc = kv_ring_append(&cache.ring, rows, 2);
    if (rc == KVL_OK) *out = mha_cache_bytes_used(&cache) / 2;
    free(rows);
    mha_cache_free(&cache);
    return rc;
}

/* The levers of m's attention with Hkv KV heads (its own, H for MHA, 1 for MQA). */
static int levers_of(levers *v, const kvl_model *m, size_t n_kv_heads, const char *label)
{
    mha_config c;
    int rc = mha_config_from_model(&c, m, 0);
    if (rc == KVL_OK)
        rc = mha_config_init(&c, m->d, m->n_heads, n_kv_heads, m->head_dim, m->window,
                             m->rope.theta);
    if (rc != KVL_OK) return rc;
    *v = (levers){.label = label,
                  .layers = m->n_layers,
                  .entries = 1,
                  .elements = 2 * n_kv_heads * m->head_dim,
                  .bytes = kvf_element_bits(KVF_BF16) / 8};
    return live_layer_bytes(&v->layer_bytes_live, &c, KV_STORE_BF16);
}

/* A model this chapter prices: its config, checked, and its three variants' levers. */
typedef struct {
    kvl_model m;
    const char *shown;       /* the path as the reader would type it */
    char as_shipped[32];     /* the label of v[0] */
    levers v[3];             /* as shipped, MHA, MQA */
} priced;

/* Load and check `path` and measure its levers; nothing is printed, so a bad config leaves no
 * partial table. On failure p->m is freed. */
static int price_model(priced *p, const char *path, const char *shown)
{
    kvl_model *m = &p->m;
    int rc = kvl_model_load(m, path);
    if (rc != KVL_OK) return rc;
    if (m->generation != KVL_GEN_MHA)
        rc = kvl_fail(KVL_EINVAL, "%s: generation %s; this chapter prices MHA/GQA/MQA", path,
                      kvl_generation_name(m->generation));
    if (rc == KVL_OK && m->kv_cache != KVL_CACHE_BF16)
        rc = kvl_fail(KVL_EINVAL, "%s: kv_cache %s; this chapter prices bf16 K and V", path,
                      kvl_cache_layout_name(m->kv_cache));
    for (size_t l = 0; rc == KVL_OK && l < m->n_layers; l++)
        if (!kvl_layer_writes_cache(m, l))
            rc = kvl_fail(KVL_EINVAL, "%s: layer %zu keeps no cache", path, l);
    p->shown = shown;
    snprintf(p->as_shipped, sizeof p->as_shipped,
             m->n_kv_heads == m->n_heads ? "MHA (shipped)"
             : m->n_kv_heads == 1        ? "MQA (shipped)"
                                         : "GQA-%zu (shipped)",
             m->n_kv_heads);
    if (rc == KVL_OK) rc = levers_of(&p->v[0], m, m->n_kv_heads, p->as_shipped);
    if (rc == KVL_OK) rc = levers_of(&p->v[1], m, m->n_heads, "MHA");
    if (rc == KVL_OK) rc = levers_of(&p->v[2], m, 1, "MQA");
    if (rc != KVL_OK) kvl_model_free(m);
    return rc;
}

/* The levers table of a priced model; KVL_EINVAL if a live cache disagrees with the formula. */
static int print_model(const priced *p)
{
    const kvl_model *m = &p->m;
    const levers *v = p->v;
    int rc = KVL_OK;
    printf("\n%s (%s): %zu layers, %zu query heads, %zu KV heads, head dim %zu, bf16\n", m->name,
           p->shown, m->n_layers, m->n_heads, m->n_kv_heads, m->head_dim);
    printf("  %-16s %7s %13s %16s %9s %12s %11s %14s %12s\n", "variant", "layers", "entries/tok",
           "elements/entry", "B/elem", "B/layer", "live B/lyr", "B/token", "KiB/token");
    for (int i = 0; i < 3; i++) {
        size_t per_layer = v[i].entries * v[i].elements * v[i].bytes,
               per_token = v[i].layers * per_layer;
        char a[32], b[32], c[32], d[32];
        printf("  %-16s %7zu %13zu %16s %9zu %12s %11s %14s %12s%s\n", v[i].label, v[i].layers,
               v[i].entries, kvl_grouped(a, sizeof a, v[i].elements, 0), v[i].bytes,
               kvl_grouped(b, sizeof b, per_layer, 0),
               kvl_grouped(d, sizeof d, v[i].layer_bytes_live, 0),
               kvl_grouped(c, sizeof c, per_token, 0), KVL_FIXED(per_token / 1024.0, 2),
               v[i].layer_bytes_live == per_layer ? "" : "  LIVE MISMATCH");
        if (v[i].layer_bytes_live != per_layer)
            rc = kvl_fail(KVL_EINVAL, "%s: live cache disagrees", m->path);
    }
    size_t shipped = v[0].layers * v[0].elements * v[0].bytes;
    printf(
        "  With %zu query heads sharing each KV head the cache is 1/%zu of MHA's; MQA's is 1/%zu.\n",
        m->n_heads / m->n_kv_heads, m->n_heads / m->n_kv_heads, m->n_heads);
    char total[32];
    printf(
        "  2 (K and V) x %zu KV heads x %zu dims x %zu B x %zu layers = %s B per token = %s KiB\n",
        m->n_kv_heads, m->head_dim, v[0].bytes, m->n_layers,
        kvl_grouped(total, sizeof total, shipped, 0), KVL_GROUPED_AT(shipped / 1024.0, 4));
    return rc;
}

/* ---- live check on a toy stack --------------------------------------------------------------- */

/* Prefill the first half of T tokens, decode the rest, and compare the bytes the stack's caches
 * hold with L·T·2·Hkv·Dh·b. */
static int live_toy(size_t T, size_t n_kv_heads, kv_store store, int *ok)
{
    char json[512];
    snprintf(json, sizeof json, TOY_STACK, TOY_LAYERS, n_kv_heads);
    kvl_model m;
    model_config c;
    model_weights w;
    model_cache cache;
    kvl_rng rng;
    kvl_rng_seed(&rng, 1);
    int rc = kvl_model_parse(&m, json, strlen(json), "toy stack");
    if (rc != KVL_OK) return rc;
    rc = model_config_from_model(&c, &m, 32, MODEL_MLP_SWIGLU);
    kvl_model_free(&m);
    if (rc != KVL_OK) return rc;
    rc = model_weights_init_random(&w, &c, &rng);
    if (rc == KVL_OK) rc = model_cache_init(&cache, &c, T, store);
    float *x = malloc(T * c.d * sizeof *x), *out = malloc(T * c.d * sizeof *out);
    if (rc == KVL_OK && (!x || !out)) rc = kvl_fail(KVL_ENOMEM, "cost: out of memory");
    if (rc == KVL_OK) {
        kvl_rng_normal_f32(&rng, x, T * c.d, 1.0);
        size_t half = T / 2;
        if (half) rc = model_prefill(out, &c, &w, &cache, x, half);
        for (size_t t = half; t < T && rc == KVL_OK; t++)
            rc = model_decode(out + t * c.d, &c, &w, &cache, x + t * c.d);
    }
    if (rc == KVL_OK) {
        const mha_config *a = &c.layers[0].mha;
        size_t want = c.n_layers * T * 2 * a->n_kv_heads * a->head_dim * kv_store_bytes(store);
        size_t got = model_cache_bytes_used(&cache);
        char name[32], g[32], f[32];
        printf(
            "  %-6s %-5s %zu layers x %s tokens x 2 x %zu x %zu x %zu B = %8s B   live %8s B   %s\n",
            model_layer_name(name, sizeof name, &c.layers[0]), kv_store_name(store), c.n_layers,
            KVL_GROUPED(T),
            a->n_kv_heads, a->head_dim, kv_store_bytes(store), kvl_grouped(f, sizeof f, want, 0),
            kvl_grouped(g, sizeof g, got, 0), got == want ? "match" : "MISMATCH");
        *ok &= got == want;
    }
    free(x);
    free(out);
    model_cache_free(&cache);
    model_weights_free(&w);
    model_config_free(&c);
    return rc;
}

/* ---- main ------------------------------------------------------------------------------------ */

enum { F_TOKENS, F_CONFIG };
static const kvl_flag FLAGS[] = {{"--tokens", 1}, {"--config", 1}};

int main(int argc, char **argv)
{
    size_t T = DEFAULT_TOKENS;
    const char *extra = NULL;
    kvl_args a = kvl_args_start("cost", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *v;
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) { usage(stdout); return kvl_exit_status("cost", 0); }
        if (k == KVL_ARGS_BAD) return 2;
        if (k == F_TOKENS && kvl_parse_size(&T, v, 1, MAX_TOKENS))
            return kvl_bad_usage("cost", "--tokens must be an integer in [1, 4096]", v);
        if (k == F_CONFIG) extra = v;
    }

    /* Every config is read and checked before anything is printed: a bad one exits 2, alone on
     * stderr. */
    priced models[2];
    size_t n_models = 0;
    char path[4096];
    const char *const builtin[] = {"ref/configs/deepseek-llm-67b.json",
                                   "chapters/01_mha/llama-3-70b.json"};
    for (size_t i = 0; i < (extra ? 1 : 2); i++) {
        snprintf(path, sizeof path, "%s%s%s", extra ? "" : kvl_root_dir(), extra ? "" : "/",
                 extra ? extra : builtin[i]);
        if (price_model(&models[n_models], path, extra ? extra : builtin[i]) != KVL_OK) {
            fprintf(stderr, "cost: %s\n", kvl_error());
            while (n_models) kvl_model_free(&models[--n_models].m);
            return 2;
        }
        n_models++;
    }

    printf("KV cache per token = layers x entries/token/layer x elements/entry x bytes/element\n"
           "                   =   L    x          1          x    2*Hkv*Dh     x      b\n");
    int ok = 1;
    for (size_t i = 0; i < n_models; i++) {
        if (print_model(&models[i]) != KVL_OK) ok = 0;
        kvl_model_free(&models[i].m);
    }
    if (!ok) { fprintf(stderr, "cost: %s\n", kvl_error()); return kvl_exit_status("cost", 1); }

    printf("\nLive check: a toy stack (ref/model, d 64, H 4, Dh 16, SwiGLU MLP) after %s tokens,\n"
           "half prefilled, half decoded; bytes its caches hold against the formula:\n", KVL_GROUPED(T));
    const size_t kv[] = {4, 2, 1};
    const kv_store stores[] = {KV_STORE_F32, KV_STORE_BF16};
    for (int i = 0; i < 3; i++)
        for (int s = 0; s < 2; s++)
            if (live_toy(T, kv[i], stores[s], &ok) != KVL_OK) {
                fprintf(stderr, "cost: %s\n", kvl_error());
                return 1;
            }
    return kvl_exit_status("cost", ok ? 0 : 1);
}
