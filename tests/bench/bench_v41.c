/* V4.1: one decode token of V4.1-Flash's Full, Reindex and Reuse layers (ref/configs, ref/v41.h,
 * ref/v41_indexer.h) at 32K and 128K cached tokens with the float32 cache and the native one
 * (ref/v41_stack.h: 288-byte FP4 entries, 68-byte MXFP4 index keys, 528-byte FP8 window rows), and at
 * 1M with the native one.
 *
 * The layers are those of the config that share the candidate source: the source itself (Full, M 1,
 * layer 20 of V4.1-Flash), the first Reuse layer that reads its entries and top-k, and the first
 * Reindex layer that re-scores its entries over its candidate pool. With M 1 the source holds one
 * entry per token: N = T + 1 once the token's own entry is pushed. Rows:
 *   Full scan     v41_index_scores_all over the N keys: HI·(2·DI + 3) flop a score (dots, ReLU, weight,
 *                 sum), linear in context; native keys decoded a tile at a time inside the scan
 *   top-k, pool   v41_index_select and v41_candidate_pool over the N scores: selections, read against
 *                 the scan with no target
 *   Reindex pool  v41_index_scores_pool over the candidate pool: at most P·B scores, constant once the
 *                 pool is full (the scored count is printed per context)
 *   attention     v4_attend_query over the W window rows and the K picks, its output rotated back (the
 *                 core v41's three modes share): 4·H·Dh·(W + K) flop
 *   layer         v41_full_layer, v41_reindex_layer, v41_reuse_layer for the token (S 1): projections
 *                 (query latent and heads, index queries, grouped output), indexer and attention:
 *                 three phases in turn (bench.h), the weights streamed (2 flop a weight over its bytes),
 *                 the scan or pool scan above and the attention above; the Reuse layer has no scan
 * The scans are read against the sgemm ceiling at the indexer's shape (32 index heads), attention
 * against MLA's.
 * The native rows read the source where the stack leaves it, in its stores (v41_source over v4_rows
 * views: keys decoded per tile, entries per pick), with the index queries rounded to MXFP4; their
 * compute-bound verdicts use the dequantised-cache target.
 *
 * One set of random weights, drawn for the Full layer, serves all three: a Reindex layer reads its index
 * query fields and a Reuse layer only the core, both subsets of a Full layer's. Random rows: FILL_ROWS
 * distinct rows repeated. Peak memory about 0.4 GiB (the float32 source at 128K; the native one at 1M is
 * 356 MiB of stored rows). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "config.h"
#include "v41_stack.h"
#include "rng.h"
#include "status.h"

#define FILL_ROWS 1024
/* One Full scan of 1M entries takes about a second. So the Full scan runs 3 timed runs at 128K and one at
 * 1M (KVB_COLD: the keys are already in memory), 1M runs only the native cache (the deployed one), and
 * the whole Full layer, which is the scan plus the constant part the Reindex and Reuse rows show, is timed
 * up to 128K. */
#define LONG_REPEATS 3
#define LONG_T ((size_t)1 << 20)
#define FULL_LAYER_MAX_T 131072

static const size_t CONTEXTS[] = {32768, 131072, (size_t)1 << 20};
enum { N_CONTEXTS = sizeof CONTEXTS / sizeof CONTEXTS[0] };
static const v41_cache_format FORMATS[] = {V41_CACHE_F32, V41_CACHE_NATIVE};

typedef struct {
    const v41_stack_config *s;
    const v41_config *full, *reindex, *reuse;
    const v41_weights *w;
    v41_cache_format fmt;
    size_t T, N;                  /* cached tokens, entries (the token's own included) */
    v4_rows held_entries, held_keys; /* native: [N][288], [N][68] */
    float *entries, *keys;        /* f32: [N][Dh], [N][DI] */
    v41_source src;              /* what the layers read: the float32 rows or the native stores */
    float *win, *x, *q, *o, *out; /* [W][Dh], [d], [H][Dh], [H][Dh], [d] */
    float *q_idx, *w_idx, *I;     /* [HI][DI], [HI], [N] */
    int32_t *sel, *sel2;          /* [K] Full's picks, Reindex's */
    uint8_t *pool;                /* [N] */
    uint64_t scored, full_scored; /* scores evaluated: running count, one Full scan's */
    int failed;                   /* a ref call returned an error (kvl_error() says which) */
} v41_step;

/* ---- the runs ---------------------------------------------------------------------------------------- */

static void run_full_scan(void *ctx)
{
    v41_step *p = ctx;
    p->failed |= v41_index_scores_all(p->I, &p->scored, &p->full->indexer, p->q_idx, p->w_idx, &p->src.keys, 1,
                                       p->T) != KVL_OK;
}

static void run_topk(void *ctx)
{
    v41_step *p = ctx;
    p->failed |= v41_index_select(p->sel, &p->full->indexer, p->I, 1, p->N) != KVL_OK;
}

static void run_pool(void *ctx)
{
    v41_step *p = ctx;
    p->failed |= v41_candidate_pool(p->pool, p->I, 1, p->N, p->T, p->full->ratio, p->s->pool_block,
                                     p->s->pool_blocks) != KVL_OK;
}

static void run_pool_scan(void *ctx)
{
    v41_step *p = ctx;
    p->failed |= v41_index_scores_pool(p->I, &p->scored, &p->reindex->indexer, p->q_idx, p->w_idx, &p->src.keys,
                                        p->pool, 1) != KVL_OK;
}

static void run_attention(void *ctx)
{
    v41_step *p = ctx;
    const v41_config *c = p->full;
    const size_t W = c->core.window, K = c->indexer.topk, Dh = c->core.head_dim;
    p->failed |= v4_attend_query(p->o, p->q, p->win, W, &p->src.entries, p->sel, K, p->w->core.sinks,
                                 c->core.n_heads, Dh, &c->core.rope, (int64_t)p->T + c->core.rope_offset) != KVL_OK;
}

static v41_chunk chunk(const v41_step *p)
{
    const size_t W = p->full->core.window;
    return (v41_chunk){.x = p->x, .S = 1, .start = p->T, .win = p->win, .win_first = p->T + 1 - W};
}

static void run_full_layer(void *ctx)
{
    v41_step *p = ctx;
    const v41_chunk ch = chunk(p);
    p->failed |= v41_full_layer(p->out, p->sel, p->I, &p->scored, p->full, p->w, &p->src, &ch) != KVL_OK;
}

static void run_reindex_layer(void *ctx)
{
    v41_step *p = ctx;
    const v41_chunk ch = chunk(p);
    p->failed |= v41_reindex_layer(p->out, p->sel2, &p->scored, p->reindex, p->w, &p->src, p->pool, &ch) != KVL_OK;
}

static void run_reuse_layer(void *ctx)
{
    v41_step *p = ctx;
    const v41_chunk ch = chunk(p);
    p->failed |= v41_reuse_layer(p->out, p->reuse, p->w, &p->src, p->sel, &ch) != KVL_OK;
}

/* ---- the work each run does ------------------------------------------------------------------------- */

/* flop of `n` indexer scores, and of the index queries of one token */
static double score_flop(const v41_config *c, double n)
{
    return n * (double)c->indexer.n_heads * (2.0 * (double)c->indexer.head_dim + 3.0);
}

static double index_query_flop(const v41_config *c)
{
    const double HI = (double)c->indexer.n_heads, DI = (double)c->indexer.head_dim;
    return 2.0 * HI * DI * (double)c->core.q_lora_rank + 2.0 * HI * (double)c->core.d;
}

static double attention_flop(const v41_config *c)
{
    return 4.0 * (double)(c->core.n_heads * c->core.head_dim) * (double)(c->core.window + c->indexer.topk);
}

static double attention_bytes(const v41_config *c)
{
    return (double)(c->core.window + c->indexer.topk) * (double)c->core.head_dim * sizeof(float);
}

/* Weights of the products every mode runs for one token (query latent, query heads, grouped output): one
 * multiply-add each. */
static double core_weights(const v41_config *c)
{
    const v4_config *v = &c->core;
    const double Dq = (double)v->q_lora_rank, HD = (double)(v->n_heads * v->head_dim);
    const double GDo = (double)(v->o_groups * v->o_lora_rank);
    return Dq * (double)v->d + HD * Dq + GDo * HD / (double)v->o_groups + (double)v->d * GDo;
}

static double index_query_bytes(const v41_config *c)
{
    return index_query_flop(c) / 2.0 * sizeof(float);
}

/* ---- one context and store --------------------------------------------------------------------------- */

static void step_free(v41_step *p)
{
    v4_rows_free(&p->held_entries);
    v4_rows_free(&p->held_keys);
    free(p->entries); free(p->keys); free(p->win); free(p->x); free(p->q); free(p->o); free(p->out);
    free(p->q_idx); free(p->w_idx); free(p->I); free(p->sel); free(p->sel2);
    free(p->pool);
}

/* n rows of `width`: FILL_ROWS random rows repeated, into dst[n][width] (f32) or the native store held. */
static int fill_rows(float *dst, v4_rows *held, size_t n, size_t width, kvl_rng *rng)
{
    float *block = kvb_random_floats(FILL_ROWS * width, rng);
    int rc = block == NULL;
    for (size_t i = 0; i < n && rc == 0; i += FILL_ROWS) {
        const size_t m = n - i < FILL_ROWS ? n - i : FILL_ROWS;
        if (dst) memcpy(dst + i * width, block, m * width * sizeof *dst);
        else rc = v4_rows_append(held, block, m) != KVL_OK;
    }
    free(block);
    return rc;
}

static int step_init(v41_step *p, size_t T, v41_cache_format fmt, kvl_rng *rng)
{
    const v41_config *c = p->full;
    const size_t d = c->core.d, H = c->core.n_heads, Dh = c->core.head_dim, W = c->core.window;
    const size_t HI = c->indexer.n_heads, DI = c->indexer.head_dim, K = c->indexer.topk;
    const int native = fmt == V41_CACHE_NATIVE;
    p->fmt = fmt;
    p->T = T;
    p->N = (T + 1) / c->ratio;
    if (native && (v4_rows_init(&p->held_entries, V4_ROWS_V41_MAIN, Dh, p->N) != KVL_OK ||
                   v4_rows_init(&p->held_keys, V4_ROWS_INDEX, DI, p->N) != KVL_OK))
        return 1;
    if (!native && (!(p->entries = malloc(p->N * Dh * sizeof *p->entries)) ||
                    !(p->keys = malloc(p->N * DI * sizeof *p->keys))))
        return 1;
    p->win = kvb_random_floats(W * Dh, rng);
    p->x = kvb_random_floats(d, rng);
    p->q = kvb_random_floats(H * Dh, rng);
    p->o = malloc(H * Dh * sizeof *p->o);
    p->out = malloc(d * sizeof *p->out);
    p->q_idx = kvb_random_floats(HI * DI, rng);
    p->w_idx = kvb_random_floats(HI, rng);
    p->I = malloc(p->N * sizeof *p->I);
    p->sel = malloc(K * sizeof *p->sel);
    p->sel2 = malloc(K * sizeof *p->sel2);
    p->pool = malloc(p->N);
    if (!p->win || !p->x || !p->q || !p->o || !p->out || !p->q_idx || !p->w_idx || !p->I ||
        !p->sel || !p->sel2 || !p->pool)
        return 1;
    if (fill_rows(p->entries, &p->held_entries, p->N, Dh, rng) || fill_rows(p->keys, &p->held_keys, p->N, DI, rng))
        return 1;
    p->src = native ? (v41_source){.entries = v4_rows_tiles(&p->held_entries), .keys = v4_rows_tiles(&p->held_keys),
                                    .keys_mxfp4 = 1}
                    : v41_source_f32(c, p->entries, p->keys, p->N);
    if (native) {
        v4_rows win_store;
        int rc = v4_rows_init(&win_store, V4_ROWS_V41_WINDOW, Dh, W);
        if (rc == KVL_OK) rc = v4_rows_round(p->win, &win_store, W);
        v4_rows_free(&win_store);
        if (rc != KVL_OK) return 1;
    }
    p->scored = 0;
    run_full_scan(p);
    p->full_scored = p->scored;
    run_topk(p);
    run_pool(p);
    return p->failed;
}

static void time_stream(const char *name, v41_step *p, void (*run)(void *), double bytes, double target, int repeats)
{
    char what[96];
    snprintf(what, sizeof what, "%s %zuK", name, p->T / 1024);
    kvb_progress("v41: %s", what);
    kvb_stream_row("v41", what, run, p, bytes, KVB_BOUND_SCAN, 1, repeats, target); /* a selection or a scan */
}

/* A step of the phases phase[KVB_PHASES] (bench.h). */
static void time_compute(const char *name, v41_step *p, void (*run)(void *), const kvb_phase *phase, int repeats)
{
    char step[96];
    const int native = p->fmt == V41_CACHE_NATIVE;
    snprintf(step, sizeof step, "V4.1 %s %s", name, native ? "native" : "f32");
    kvb_step s = {.group = "v41", .step = step, .T = p->T, .run = run, .ctx = p,
                  .compute_target = native ? KVB_NATIVE_TARGET : KVB_COMPUTE_TARGET, .memory_target = KVB_MEMORY_TARGET,
                  .repeats = repeats};
    for (size_t i = 0; i < KVB_PHASES; i++) s.phase[i] = phase[i];
    kvb_time_step(&s);
}

/* Every row of one context and store. */
static void bench_step(v41_step *p)
{
    const v41_config *c = p->full;
    const int long_run = p->T >= LONG_T, scan_repeats = long_run ? KVB_COLD : p->T > CONTEXTS[0] ? LONG_REPEATS : 0;
    const double N = (double)p->N, DI = (double)c->indexer.head_dim;
    const double key_row = p->fmt == V41_CACHE_NATIVE ? (double)p->held_keys.row_bytes : DI * sizeof(float);
    const double key_bytes = N * key_row;
    const double full_scored = (double)p->full_scored;
    const kvb_sgemm_shape index_shape = kvb_index_shape(c->indexer.n_heads);
    const kvb_phase full_scan = {score_flop(c, full_scored), key_bytes, index_shape};
    time_compute("Full scan", p, run_full_scan, (kvb_phase[KVB_PHASES]){full_scan}, scan_repeats);
    time_stream(p->fmt == V41_CACHE_NATIVE ? "V4.1 Full top-k native" : "V4.1 Full top-k f32", p, run_topk,
                N * sizeof(float), 0, KVB_REPEATS);
    time_stream(p->fmt == V41_CACHE_NATIVE ? "V4.1 pool native" : "V4.1 pool f32", p, run_pool, N * sizeof(float), 0,
                KVB_REPEATS);
    p->scored = 0;
    run_pool_scan(p);
    const double pool_scored = (double)p->scored;
    printf("v41: at %zuK the Full layer scores %.0f entries, the Reindex layer %.0f (its pool, at most %zu·%zu)\n",
           p->T / 1024, full_scored, pool_scored, p->s->pool_blocks, p->s->pool_block);
    /* the keys scored, the pool's N flags */
    const kvb_phase pool_scan = {score_flop(p->reindex, pool_scored), pool_scored * key_row + N, index_shape};
    time_compute("Reindex pool", p, run_pool_scan, (kvb_phase[KVB_PHASES]){pool_scan}, 0);
    run_topk(p);
    const kvb_phase attention = {attention_flop(c), attention_bytes(c), KVB_SGEMM_V4};
    time_compute("attention", p, run_attention, (kvb_phase[KVB_PHASES]){attention}, 0);
    /* the products every mode runs (query latent and heads, grouped output), and the index queries */
    const kvb_phase weights = {2.0 * core_weights(c), core_weights(c) * sizeof(float), KVB_SGEMM_MLA};
    const kvb_phase index_weights = {weights.flop + index_query_flop(c), weights.bytes + index_query_bytes(c),
                                     KVB_SGEMM_MLA};
    if (p->T <= FULL_LAYER_MAX_T)
        time_compute("Full layer", p, run_full_layer, (kvb_phase[KVB_PHASES]){index_weights, full_scan, attention}, 0);
    time_compute("Reindex layer", p, run_reindex_layer, (kvb_phase[KVB_PHASES]){index_weights, pool_scan, attention},
                 0);
    time_compute("Reuse layer", p, run_reuse_layer, (kvb_phase[KVB_PHASES]){weights, attention}, 0);
}

/* ---- the group ---------------------------------------------------------------------------------------- */

/* The candidate source, the first Reuse layer reading it and the first Reindex layer over its pool. */
static int pick_layers(v41_step *p, const v41_stack_config *s)
{
    const size_t src = s->candidate_source;
    p->s = s;
    p->full = &s->layers[src];
    for (size_t l = src + 1; l < s->n_layers; l++) {
        const v41_config *c = &s->layers[l];
        if (c->kv_source != (int)src) continue;
        if (c->kind == KVL_LAYER_REUSE && !p->reuse) p->reuse = c;
        if (c->kind == KVL_LAYER_REINDEX && !p->reindex) p->reindex = c;
    }
    return p->full->kind != KVL_LAYER_FULL || !p->reuse || !p->reindex;
}

int kvb_group_v41(void)
{
    if (!kvb_ceilings()) return 1;
    kvl_model m = {0};
    v41_stack_config s = {0};
    v41_weights w = {0};
    v41_step proto = {0};
    kvl_rng rng;
    kvl_rng_seed(&rng, 41);
    int rc = kvb_load_config(&m, "deepseek-v4.1-flash.json");
    if (rc == 0 && v41_stack_config_from_model(&s, &m) != KVL_OK) {
        fprintf(stderr, "kvbench: %s\n", kvl_error());
        rc = 1;
    }
    if (rc == 0 && pick_layers(&proto, &s)) {
        fprintf(stderr, "kvbench: %s: no Full candidate source with Reuse and Reindex readers\n", m.path);
        rc = 1;
    }
    if (rc == 0) {
        kvb_progress("v41: random weights of one layer at V4.1-Flash's widths");
        rc = v41_weights_init_random(&w, proto.full, &rng) != KVL_OK;
        proto.w = &w;
    }
    for (size_t k = 0; k < N_CONTEXTS && rc == 0; k++)
        for (size_t f = CONTEXTS[k] >= LONG_T; f < 2 && rc == 0; f++) {
            v41_step p = proto;
            kvb_progress("v41: %zuK cached tokens, %s cache", CONTEXTS[k] / 1024, f ? "native" : "f32");
            rc = step_init(&p, CONTEXTS[k], FORMATS[f], &rng);
            if (rc == 0) bench_step(&p);
            if (rc == 0 && p.failed) {
                fprintf(stderr, "kvbench: v41: %s\n", kvl_error());
                rc = 1;
            }
            step_free(&p);
        }
    v41_weights_free(&w);
    v41_stack_config_free(&s);
    kvl_model_free(&m);
    return rc;
}
