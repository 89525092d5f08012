/* Prefill: one 4K-token chunk through a generation's ref prefill entry point at the real widths, one
 * layer.
 *
 *   V3 MLA        mla_prefill of the chunk into an empty cache (so its last query reads 4K positions): every
 *                 projection, each head's keys and values expanded from the chunk's latents, the naive
 *                 form's causal attention a block of queries at a time (mla_attend_naive)
 *   V4-Flash HCA  v4_prefill of an HCA layer (M 128) after a native cache (584-byte rows) already holding
 *                 28K tokens, so that the chunk's last query reads 32K positions: its compressor fed, every
 *                 projection, each query's window and visible entries attended
 *   V4-Flash CSA  v4_prefill of a CSA layer (M 4, top-512) after the same 28K (584-byte rows, 68-byte MXFP4
 *                 index keys): both compressors fed, every projection, the indexer's scores of every
 *                 visible entry for every query (ref/core/index_scan.h), top-k, each query's window and
 *                 picks attended
 *
 * flop: 2 per weight per token (every projection and compressor weight meets each token once; MLA's
 * W_UKV expands every head's keys and values from each of the chunk's latents), plus MLA's two products
 * over each query block's rows, or V4's indexer, HI·(2·DI + 3) a visible entry (CSA), and the
 * attention's two products over each query's keys, summed query by query; read against the sgemm
 * ceiling (one phase: the chunk's projections are products of 4,096 rows, not a weight stream). V4's
 * chunks run once on each thread count, with no warm-up (KVB_COLD: a run takes tens of seconds). V3's,
 * whose share of the FMA peak carries a target, runs once untimed and then MLA_PREFILL_RUNS times on
 * each thread count, so that its verdict is a median and not one run that a slow spell decides. Each V4
 * run rewinds the cache to its 28K tokens first (the window rows put back, the entries and compressor
 * position reset), and each V3 run empties its cache, so every run does the same work.
 *
 * The other entry points are not run at this size; the group prints, computed from the configs, what
 * each would cost (`make bench` has to stay within minutes on two cores):
 *   mla_prefill (V3) after 28K  the naive form's attention of the chunk over 32K positions;
 *   dsa_prefill (V3.2)  V3's attention under the selection mask (the masked reference form computes every
 *                 visible score) plus its indexer, so the V3 row bounds it from below;
 *   v41_stack_prefill (V4.1)  a whole stack, its candidate source's indexer alone scoring every visible
 *                 entry for every query of every layer that scores them all. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "bench.h"
#include "config.h"
#include "mla.h"
#include "rng.h"
#include "status.h"
#include "v4.h"

#define CHUNK 4096
#define HELD 28672
#define FILL_ROWS 1024
#define MLA_PREFILL_RUNS 3

/* ---- V4-Flash HCA and CSA ---------------------------------------------------------------------------- */

typedef struct {
    const v4_config *c;
    const v4_weights *w;
    v4_cache cache;
    uint8_t *window;       /* [W][row bytes] the held window rows as stored */
    float *x, *out;        /* [S][d] */
    size_t held_entries;
    int failed;            /* a ref call returned an error (kvl_error() says which) */
} layer_prefill;

/* The cache back at HELD tokens, then the chunk. */
static void run_layer(void *ctx)
{
    layer_prefill *p = ctx;
    const size_t W = p->c->window;
    p->failed |= v4_rows_import(&p->cache.window, p->window, HELD - W, W) != KVL_OK;
    p->cache.entries.len = p->cache.index_keys.len = p->held_entries;
    p->cache.kv_state.pos = p->cache.index_state.pos = HELD;
    p->cache.len = HELD;
    p->failed |= v4_prefill(p->out, NULL, p->c, p->w, &p->cache, p->x, CHUNK) != KVL_OK;
}

/* Keys of query t: its window rows and its visible entries (HCA) or at most K of them (CSA); flop 4·H·Dh
 * a key. */
static double attention_flop(const v4_config *c)
{
    double keys = 0;
    for (size_t t = HELD; t < HELD + CHUNK; t++) {
        const size_t visible = (t + 1) / c->compressor.ratio;
        const size_t read = c->kind == KVL_LAYER_CSA && visible > c->indexer.topk ? c->indexer.topk : visible;
        keys += (double)(t + 1 < c->window ? t + 1 : c->window) + (double)read;
    }
    return 4.0 * (double)(c->n_heads * c->head_dim) * keys;
}

/* The CSA indexer's scores: every visible entry for every query. */
static double index_flop(const v4_config *c)
{
    if (c->kind != KVL_LAYER_CSA) return 0;
    double scored = 0;
    for (size_t t = HELD; t < HELD + CHUNK; t++) scored += (double)((t + 1) / c->compressor.ratio);
    return scored * (double)c->indexer.n_heads * (2.0 * (double)c->indexer.head_dim + 3.0);
}

static int layer_init(layer_prefill *p, kvl_rng *rng)
{
    const v4_config *c = p->c;
    const size_t W = c->window, N = HELD / c->compressor.ratio;
    if (v4_cache_init(&p->cache, c, HELD + CHUNK, V4_CACHE_NATIVE) != KVL_OK) return 1;
    float *rows = kvb_random_floats(FILL_ROWS * c->head_dim, rng);
    p->x = kvb_random_floats(CHUNK * c->d, rng);
    p->out = malloc(CHUNK * c->d * sizeof *p->out);
    p->window = malloc(W * p->cache.window.row_bytes);
    int rc = !rows || !p->x || !p->out || !p->window;
    v4_rows_restart(&p->cache.window, HELD - W);
    if (rc == 0) rc = v4_rows_append(&p->cache.window, rows, W) != KVL_OK;
    for (size_t i = 0; i < N && rc == 0; i += FILL_ROWS) {
        const size_t n = N - i < FILL_ROWS ? N - i : FILL_ROWS;
        rc = v4_rows_append(&p->cache.entries, rows, n) != KVL_OK;
        if (rc == 0 && c->kind == KVL_LAYER_CSA) rc = v4_rows_append(&p->cache.index_keys, rows, n) != KVL_OK;
    }
    if (rc == 0) v4_rows_export(p->window, &p->cache.window);
    p->held_entries = N;
    free(rows);
    return rc;
}

static int bench_layer(const kvl_model *m, kvl_layer_kind kind, const char *step, kvl_rng *rng)
{
    v4_config c;
    if (kvb_v4_layer(&c, m, kind)) {
        fprintf(stderr, "kvbench: %s: no %s layer\n", m->path, step);
        return 1;
    }
    v4_weights w;
    kvb_progress("prefill: random weights of one %s layer", step);
    if (v4_weights_init_random(&w, &c, rng) != KVL_OK) return 1;
    layer_prefill p = {.c = &c, .w = &w};
    int rc = layer_init(&p, rng);
    if (rc == 0) {
        char what[96];
        snprintf(what, sizeof what, "%s 4K chunk native", step);
        const double flop = 2.0 * (double)w.n_floats * CHUNK + index_flop(&c) + attention_flop(&c);
        const double keys = kind == KVL_LAYER_CSA ? (double)p.held_entries * (double)p.cache.index_keys.row_bytes : 0;
        const double bytes = (double)w.n_floats * sizeof(float) + 2.0 * CHUNK * (double)c.d * sizeof(float) +
                             (double)(p.held_entries + c.window) * (double)p.cache.entries.row_bytes + keys;
        kvb_time_step(&(kvb_step){.group = "prefill", .step = what, .T = HELD + CHUNK, .run = run_layer, .ctx = &p,
                                  .phase = {{flop, bytes, KVB_SGEMM_MLA}}, .compute_target = KVB_NATIVE_TARGET,
                                  .memory_target = KVB_MEMORY_TARGET, .repeats = KVB_COLD});
        if (p.failed) fprintf(stderr, "kvbench: prefill: %s\n", kvl_error());
        rc = p.failed;
    }
    v4_cache_free(&p.cache);
    free(p.window);
    free(p.x);
    free(p.out);
    v4_weights_free(&w);
    return rc;
}

/* ---- V3 MLA ----------------------------------------------------------------------------------------- */

typedef struct {
    const mla_config *c;
    const mla_weights *w;
    mla_cache cache;
    float *x, *out; /* [S][d] */
    int failed;
} mla_run;

static void run_mla(void *ctx)
{
    mla_run *p = ctx;
    p->cache.ring.len = 0;
    p->failed |= mla_prefill(p->out, p->c, p->w, &p->cache, p->x, CHUNK) != KVL_OK;
}

/* mla_prefill's work from an empty cache: 2 flop per weight per token (W_UKV's too: it expands every head's
 * key and value from each of the chunk's CHUNK rows) and each head's two products over the rows each
 * block of KVL_QUERY_BLOCK queries sees (its last query's position + 1). */
static double mla_flop(const mla_config *c, const mla_weights *w)
{
    const double H = (double)c->n_heads, Dqk = (double)(c->qk_nope + c->qk_rope), Dv = (double)c->v_head;
    double pairs = 0;
    for (size_t first = 0; first < CHUNK; first += KVL_QUERY_BLOCK)
        pairs += (double)KVL_QUERY_BLOCK * (double)(first + KVL_QUERY_BLOCK);
    return 2.0 * (double)w->n_floats * CHUNK + 2.0 * H * (Dqk + Dv) * pairs;
}

static int bench_mla(const kvl_model *m, kvl_rng *rng)
{
    mla_config c;
    mla_weights w;
    if (mla_config_from_model(&c, m) != KVL_OK) {
        fprintf(stderr, "kvbench: %s\n", kvl_error());
        return 1;
    }
    kvb_progress("prefill: random weights of one V3 MLA layer");
    if (mla_weights_init_random(&w, &c, rng) != KVL_OK) return 1;
    mla_run p = {.c = &c, .w = &w, .x = kvb_random_floats(CHUNK * c.d, rng),
                 .out = malloc(CHUNK * c.d * sizeof(float))};
    int rc = !p.x || !p.out || mla_cache_init(&p.cache, &c, CHUNK, KV_STORE_F32) != KVL_OK;
    if (rc == 0) {
        const double bytes = (double)w.n_floats * sizeof(float) + 2.0 * CHUNK * (double)c.d * sizeof(float) +
                             CHUNK * (double)(c.kv_lora_rank + c.qk_rope) * sizeof(float);
        kvb_time_step(&(kvb_step){.group = "prefill", .step = "V3 MLA 4K chunk f32", .T = CHUNK, .run = run_mla,
                                  .ctx = &p, .phase = {{mla_flop(&c, &w), bytes, KVB_SGEMM_MLA}},
                                  .compute_target = KVB_COMPUTE_TARGET, .memory_target = KVB_MEMORY_TARGET,
                                  .fma_target = KVB_PREFILL_FMA_TARGET, .repeats = MLA_PREFILL_RUNS});
        if (p.failed) fprintf(stderr, "kvbench: prefill: %s\n", kvl_error());
        rc = p.failed;
    }
    mla_cache_free(&p.cache);
    free(p.x);
    free(p.out);
    mla_weights_free(&w);
    return rc;
}

/* ---- what is not run ------------------------------------------------------------------------------------ */

/* GFLOP of the chunk's indexer scores over `entries` keys each, at m's index heads and width. */
static double scan_gflop(const kvl_model *m, double entries)
{
    return CHUNK * entries * (double)m->index_n_heads * (2.0 * (double)m->index_head_dim + 3) * 1e-9;
}

/* GFLOP of the naive form's attention of the chunk over HELD + CHUNK positions, causal: each head's two
 * products, 2·(Dqk + Dv) a query, head and visible row. */
static double naive_attention_gflop(const kvl_model *m)
{
    const double width = (double)(m->qk_nope_head_dim + m->qk_rope_head_dim + m->v_head_dim);
    const double per_pair = 2.0 * (double)m->n_heads * width;
    return per_pair * CHUNK * (HELD + (CHUNK + 1) / 2.0) * 1e-9;
}

static void print_not_run(const kvl_model *v3, const kvl_model *v32, const kvl_model *v41)
{
    const double m41 = (double)v41->layers[v41->candidate_source_layer].compress_ratio;
    printf("prefill: not run at a %d-token chunk after %d:\n", CHUNK, HELD);
    printf("  V3 mla_prefill: the naive form's attention alone %.0f GFLOP\n", naive_attention_gflop(v3));
    printf("  V3.2 dsa_prefill: the same masked (%.0f GFLOP) and its indexer's scores %.0f GFLOP\n",
           naive_attention_gflop(v32), scan_gflop(v32, HELD + (CHUNK + 1) / 2.0));
    printf("  V4.1 v41_stack_prefill: a whole stack; its candidate source's scores alone %.0f GFLOP\n",
           scan_gflop(v41, (HELD + CHUNK) / m41));
}

int kvb_group_prefill(void)
{
    if (!kvb_ceilings()) return 1;
    kvl_model v3 = {0}, v32 = {0}, v4f = {0}, v41 = {0};
    kvl_rng rng;
    kvl_rng_seed(&rng, 19);
    int rc = kvb_load_config(&v3, "deepseek-v3.json") || kvb_load_config(&v32, "deepseek-v3.2-exp.json") ||
             kvb_load_config(&v4f, "deepseek-v4-flash.json") || kvb_load_config(&v41, "deepseek-v4.1-flash.json");
    if (rc == 0) rc = bench_mla(&v3, &rng);
    if (rc == 0) rc = bench_layer(&v4f, KVL_LAYER_HCA, "V4-Flash HCA", &rng);
    if (rc == 0) rc = bench_layer(&v4f, KVL_LAYER_CSA, "V4-Flash CSA", &rng);
    if (rc == 0) print_not_run(&v3, &v32, &v41);
    kvl_model_free(&v3);
    kvl_model_free(&v32);
    kvl_model_free(&v4f);
    kvl_model_free(&v41);
    return rc;
}
