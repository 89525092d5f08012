/* Native: decode over the deployed FP8/FP4 cache rows at T ≥ 32K, through the ref's native paths.
 *
 *   V3.2      DeepSeek-V3.2-Exp, 656-byte main rows and 132-byte index keys (DSA_CACHE_V32):
 *             dsa_decode_gather, the whole step (projections, the fp8 indexer over every key, top-k,
 *             the K picks read and decoded, absorbed attention); and its sparse attention alone
 *             (dsa_attend_picks: the K picks read where the cache holds them, each decoded by the
 *             thread whose part of the attention reads it)
 *   V4-Flash  584-byte main rows, 68-byte MXFP4 index keys (V4_CACHE_NATIVE): v4_decode of a CSA layer
 *             (M 4, top-512) at 32K and 128K and of an HCA layer (M 128) at 32K, 128K and 1M; and its
 *             attention alone: the window rows read decoded, then v4_attend over the entries where the
 *             cache holds them (HCA's decoded a tile at a time inside the attention, CSA's K picks one
 *             row each)
 * Each whole step is three phases in turn (bench.h), each counting its flop and the bytes it reads as
 * stored: the projections, 2 flop per weight over the weights (every projection weight meets the token
 * once; the absorbed W_UK, W_UV included), memory-bound; the indexer's scores over the index keys, at
 * the indexer's own sgemm shape; the attention's two products over the rows it reads. Every path
 * decodes its packed rows a tile (or a pick) at a time into buffers that stay in cache
 * (ref/core/row_tiles.h), the indexers inside their scan, attention inside its tile loop.
 * Compute-bound phases are read against the dequantised-cache target 0.6, memory-bound ones against
 * 0.75. The cache is filled with FILL_ROWS distinct random rows, repeated; each timed run decodes one
 * more token onto it. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "config.h"
#include "dsa.h"
#include "rng.h"
#include "rows.h"
#include "status.h"
#include "v4.h"

#define FILL_ROWS 1024
#define SPARE_TOKENS (2 * 2 * KVB_MOST_REPEATS) /* room for the warm-up and timed decodes on 1 and 2 threads */

static const size_t CONTEXTS[] = {32768, 131072};
enum { N_CONTEXTS = sizeof CONTEXTS / sizeof CONTEXTS[0] };
#define HCA_LONG ((size_t)1 << 20)

/* A step of the phases phase[KVB_PHASES] (bench.h), compute-bound ones read against the dequantised-cache
 * target. */
static void time_compute(const char *step, size_t T, void (*run)(void *), void *ctx, const kvb_phase *phase)
{
    kvb_step s = {.group = "native", .step = step, .T = T, .run = run, .ctx = ctx, .compute_target = KVB_NATIVE_TARGET,
                  .memory_target = KVB_MEMORY_TARGET};
    for (size_t i = 0; i < KVB_PHASES; i++) s.phase[i] = phase[i];
    kvb_time_step(&s);
}

/* 1, with the ref's message, when a timed call failed (its row timed an error path). */
static int report_failure(int failed)
{
    if (failed) fprintf(stderr, "kvbench: native: %s\n", kvl_error());
    return failed;
}

/* rows[n][bytes]: FILL_ROWS rows packed from random values, repeated. */
static int fill_packed(uint8_t *rows, kvf_row layout, size_t n, kvl_rng *rng)
{
    const size_t width = kvf_row_values(layout), bytes = kvf_row_bytes(layout);
    float *v = kvb_random_floats(width, rng);
    int rc = v ? 0 : 1;
    for (size_t i = 0; i < FILL_ROWS && i < n && rc == 0; i++) {
        kvl_rng_uniform_f32(rng, v, width, -1.0, 1.0);
        rc = kvf_row_pack(layout, rows + i * bytes, v) != KVF_OK;
    }
    for (size_t i = FILL_ROWS; i < n && rc == 0; i += FILL_ROWS)
        memcpy(rows + i * bytes, rows, (n - i < FILL_ROWS ? n - i : FILL_ROWS) * bytes);
    free(v);
    return rc;
}

/* ---- V3.2 ------------------------------------------------------------------------------------------ */

typedef struct {
    const dsa_config *c;
    const dsa_weights *w;
    dsa_cache cache;
    float *x, *out;          /* [d], [d] */
    int32_t *sel;            /* [K] random picks for the sparse attention alone */
    float *q_hat, *o_hat;    /* [H][Dc+Dr], [H][Dc] */
    size_t T;
    int failed;              /* a ref call returned an error (kvl_error() says which) */
} v32_step;

static void run_v32_decode(void *ctx)
{
    v32_step *s = ctx;
    s->failed |= dsa_decode_gather(s->out, NULL, s->c, s->w, &s->cache, s->x) != KVL_OK;
}

static void run_v32_sparse(void *ctx)
{
    v32_step *s = ctx;
    s->failed |= dsa_attend_picks(s->o_hat, s->c, s->q_hat, &s->cache, s->sel) != KVL_OK;
}

static void v32_free(v32_step *s)
{
    dsa_cache_free(&s->cache);
    free(s->x); free(s->out); free(s->sel); free(s->q_hat); free(s->o_hat);
}

static int v32_init(v32_step *s, size_t T, kvl_rng *rng)
{
    const dsa_config *c = s->c;
    const size_t d = c->mla.d, H = c->mla.n_heads, Dc = c->mla.kv_lora_rank, Dw = Dc + c->mla.qk_rope;
    const size_t K = c->index_topk;
    s->T = T;
    if (dsa_cache_init(&s->cache, c, T + SPARE_TOKENS, DSA_CACHE_V32) != KVL_OK) return 1;
    s->x = kvb_random_floats(d, rng);
    s->out = malloc(d * sizeof *s->out);
    s->sel = malloc(K * sizeof *s->sel);
    s->q_hat = kvb_random_floats(H * Dw, rng);
    s->o_hat = malloc(H * Dc * sizeof *s->o_hat);
    if (!s->x || !s->out || !s->sel || !s->q_hat || !s->o_hat) return 1;
    if (fill_packed(s->cache.main_rows, KVF_ROW_V32_MAIN, T, rng) ||
        fill_packed(s->cache.index_rows, KVF_ROW_V32_INDEX, T, rng))
        return 1;
    s->cache.len = T;
    for (size_t k = 0; k < K; k++) s->sel[k] = (int32_t)(kvl_rng_next_u64(rng) % T);
    return 0;
}

static int bench_v32(const dsa_config *c, kvl_rng *rng)
{
    dsa_weights w;
    kvb_progress("native: random weights of one V3.2 layer");
    if (dsa_weights_init_random(&w, c, rng) != KVL_OK) return 1;
    const size_t H = c->mla.n_heads, Dc = c->mla.kv_lora_rank, Dw = Dc + c->mla.qk_rope;
    const double K = (double)c->index_topk, HI = (double)c->index_n_heads, DI = (double)c->index_head_dim;
    const double main_b = (double)kvf_row_bytes(KVF_ROW_V32_MAIN), key_b = (double)kvf_row_bytes(KVF_ROW_V32_INDEX);
    const double attend_flop = 2.0 * (double)H * K * (double)(Dw + Dc);
    int rc = 0;
    for (size_t k = 0; k < N_CONTEXTS && rc == 0; k++) {
        v32_step s = {.c = c, .w = &w};
        rc = v32_init(&s, CONTEXTS[k], rng);
        if (rc == 0) {
            const double N = (double)CONTEXTS[k];
            const double keys_bytes = N * key_b; /* as stored: decoded a tile at a time inside the scan */
            time_compute("V3.2 DSA sparse attend v32", CONTEXTS[k], run_v32_sparse, &s,
                         (kvb_phase[KVB_PHASES]){
                             {attend_flop, K * main_b, KVB_SGEMM_MLA}});
            time_compute("V3.2 dsa_decode_gather v32", CONTEXTS[k], run_v32_decode, &s,
                         (kvb_phase[KVB_PHASES]){
                             {2.0 * (double)w.n_floats, (double)w.n_floats * sizeof(float), KVB_SGEMM_MLA},
                             {N * HI * (2.0 * DI + 3.0), keys_bytes, kvb_index_shape(c->index_n_heads)},
                             {attend_flop, K * main_b, KVB_SGEMM_MLA}});
            rc = report_failure(s.failed);
        }
        v32_free(&s);
    }
    dsa_weights_free(&w);
    return rc;
}

/* ---- V4-Flash --------------------------------------------------------------------------------------- */

typedef struct {
    const v4_config *c;
    const v4_weights *w;
    v4_cache cache;
    float *x, *out;            /* [d], [d] */
    float *q, *win, *o;        /* [H][Dh], [W][Dh], [H][Dh] */
    int32_t *sel;              /* [K] random CSA picks */
    size_t T, N;
    int failed;                /* a ref call returned an error (kvl_error() says which) */
} v4_step;

static void run_v4_decode(void *ctx)
{
    v4_step *s = ctx;
    s->failed |= v4_decode(s->out, NULL, s->c, s->w, &s->cache, s->x) != KVL_OK;
}

/* The attention of the step alone, as v4_decode's native path runs it (chunk_window, v4_attend in
 * ref/v4_cache.c): the window rows read decoded, then the entries read where the cache holds them. */
static void run_v4_attend(void *ctx)
{
    v4_step *s = ctx;
    const v4_config *c = s->c;
    const size_t first = s->T - c->window;
    s->failed |= v4_rows_read(s->win, &s->cache.window, first, c->window) != KVL_OK;
    kvl_row_tiles entries = v4_rows_tiles(&s->cache.entries);
    entries.N = s->N;
    s->failed |= v4_attend(s->o, c, s->w, s->q, s->win, first, &entries, s->sel, 1, s->T - 1) != KVL_OK;
}

static void v4_step_free(v4_step *s)
{
    v4_cache_free(&s->cache);
    free(s->x); free(s->out); free(s->q); free(s->win); free(s->o); free(s->sel);
}

/* rows: n random rows appended (FILL_ROWS distinct, repeated). */
static int append_rows(v4_rows *rows, size_t n, kvl_rng *rng)
{
    float *v = kvb_random_floats(FILL_ROWS * rows->width, rng);
    int rc = v ? 0 : 1;
    for (size_t i = 0; i < n && rc == 0; i += FILL_ROWS)
        rc = v4_rows_append(rows, v, n - i < FILL_ROWS ? n - i : FILL_ROWS) != KVL_OK;
    free(v);
    return rc;
}

/* A native cache that has seen T tokens: W window rows, ⌊T/M⌋ entries (and index keys), the compressors
 * at position T (T a multiple of M: no block part-way). */
static int v4_step_init(v4_step *s, size_t T, kvl_rng *rng)
{
    const v4_config *c = s->c;
    const size_t W = c->window, Dh = c->head_dim;
    s->T = T;
    s->N = T / c->compressor.ratio;
    if (v4_cache_init(&s->cache, c, T + SPARE_TOKENS, V4_CACHE_NATIVE) != KVL_OK) return 1;
    s->x = kvb_random_floats(c->d, rng);
    s->out = malloc(c->d * sizeof *s->out);
    s->q = kvb_random_floats(c->n_heads * Dh, rng);
    s->win = malloc(W * Dh * sizeof *s->win);
    s->o = malloc(c->n_heads * Dh * sizeof *s->o);
    s->sel = malloc((c->indexer.topk ? c->indexer.topk : 1) * sizeof *s->sel);
    if (!s->x || !s->out || !s->q || !s->win || !s->o || !s->sel) return 1;
    for (size_t k = 0; k < c->indexer.topk; k++) s->sel[k] = (int32_t)(kvl_rng_next_u64(rng) % s->N);
    v4_rows_restart(&s->cache.window, T - W);
    if (append_rows(&s->cache.window, W, rng) || append_rows(&s->cache.entries, s->N, rng)) return 1;
    if (c->kind == KVL_LAYER_CSA && append_rows(&s->cache.index_keys, s->N, rng)) return 1;
    s->cache.kv_state.pos = T;
    s->cache.index_state.pos = T;
    s->cache.len = T;
    return 0;
}

static int bench_v4_layer(const v4_config *c, const char *name, size_t T, kvl_rng *rng)
{
    v4_weights w;
    if (v4_weights_init_random(&w, c, rng) != KVL_OK) return 1;
    v4_step s = {.c = c, .w = &w};
    int rc = v4_step_init(&s, T, rng);
    if (rc == 0) {
        const int csa = c->kind == KVL_LAYER_CSA;
        const double N = (double)s.N, Dh = (double)c->head_dim, H = (double)c->n_heads;
        const double row_b = (double)s.cache.entries.row_bytes, key_b = csa ? (double)s.cache.index_keys.row_bytes : 0;
        const double DI = (double)c->indexer.head_dim, HI = (double)c->indexer.n_heads;
        const double keys = (double)c->window + (csa ? (double)c->indexer.topk : N);
        const double attend_flop = 4.0 * H * Dh * keys;
        char what[96];
        snprintf(what, sizeof what, "%s attend native", name);
        time_compute(what, T, run_v4_attend, &s, (kvb_phase[KVB_PHASES]){{attend_flop, keys * row_b, KVB_SGEMM_V4}});
        /* read: weights, CSA's keys, the window and CSA's picks or HCA's entries, as stored */
        snprintf(what, sizeof what, "%s v4_decode native", name);
        time_compute(what, T, run_v4_decode, &s,
                     (kvb_phase[KVB_PHASES]){
                         {2.0 * (double)w.n_floats, (double)w.n_floats * sizeof(float), KVB_SGEMM_MLA},
                         {csa ? N * HI * (2.0 * DI + 3.0) : 0, csa ? N * key_b : 0,
                          kvb_index_shape(c->indexer.n_heads)},
                         {attend_flop, keys * row_b, KVB_SGEMM_V4}});
        rc = report_failure(s.failed);
    }
    v4_step_free(&s);
    v4_weights_free(&w);
    return rc;
}

static int bench_v4(const kvl_model *m, kvl_rng *rng)
{
    v4_config csa, hca;
    if (kvb_v4_layer(&csa, m, KVL_LAYER_CSA) || kvb_v4_layer(&hca, m, KVL_LAYER_HCA)) {
        fprintf(stderr, "kvbench: %s: no CSA or HCA layer: %s\n", m->path, kvl_error());
        return 1;
    }
    int rc = 0;
    kvb_progress("native: V4-Flash CSA and HCA layers (random weights per context)");
    for (size_t k = 0; k < N_CONTEXTS && rc == 0; k++) {
        rc = bench_v4_layer(&csa, "V4-Flash CSA", CONTEXTS[k], rng);
        if (rc == 0) rc = bench_v4_layer(&hca, "V4-Flash HCA", CONTEXTS[k], rng);
    }
    if (rc == 0) rc = bench_v4_layer(&hca, "V4-Flash HCA", HCA_LONG, rng);
    return rc;
}

/* ---- the group ----------------------------------------------------------------------------------------- */

int kvb_group_native(void)
{
    if (!kvb_ceilings()) return 1;
    kvl_model v32 = {0}, v4f = {0};
    dsa_config dsa;
    kvl_rng rng;
    kvl_rng_seed(&rng, 17);
    int rc = kvb_load_config(&v32, "deepseek-v3.2-exp.json") || kvb_load_config(&v4f, "deepseek-v4-flash.json");
    if (rc == 0 && dsa_config_from_model(&dsa, &v32) != KVL_OK) {
        fprintf(stderr, "kvbench: %s\n", kvl_error());
        rc = 1;
    }
    if (rc == 0) rc = bench_v32(&dsa, &rng);
    if (rc == 0) rc = bench_v4(&v4f, &rng);
    kvl_model_free(&v32);
    kvl_model_free(&v4f);
    return rc;
}
