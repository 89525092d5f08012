/* v41_cache: DeepSeek-V4.1-Flash's attention and 4-bit KV cache, read off live caches (chapter
 * 7; chapters/07_v41/README.md, "What it computes" and "What it stores per token"; the stack in
 * ref/v41_stack.h, the rows in formats/rows.h).
 *
 * 1. The layer-mode map from ref/configs/deepseek-v4.1-flash.json (kv_source_layers,
 *    index_source_layers): window-only, Full, Reindex, Reuse, with the source each layer reads.
 * 2. Indexer work per query against context length. Arithmetic at the real config: Full layers
 *    scan every visible entry (⌊T/2⌋ at 2, 8, 14; T at 20), Reindex layers only the candidate
 *    pool (2,048 blocks of 8 = 16,384 positions), so per query 3·T/2 + T + 4·min(T, 16,384)
 *    scores: linear in T for the scans, constant for the deeper indexers (at 1M not "one full
 *    scan plus four bounded ones": the encoder's Full layers scan too). Then the same counted on
 *    a live stack (the real map at small model width, a pool of P blocks of 8 so that the turn
 *    from linear to constant shows at short contexts).
 * 3. The error of the 4-bit cache: the same stack with float32 caches and with the deployed rows
 *    (288-byte FP4 entries, 68-byte MXFP4 index keys, 528-byte FP8 window rows), attention
 *    output compared.
 * 4. Bytes per token from what the live caches hold after T tokens: 890, with the window rows
 *    (40·128·528 = 2,703,360 B) and the compressor tails per sequence apart.
 *
 *   v41_cache [--tokens T] [--pool-blocks P] [--max-context N] [--seed S]
 *
 * Configs are found under $KVL_ROOT, else the source tree. Out of scope: MoE, hyper-connections,
 * Engram, DSpark, vision (they change what enters a layer, not what its cache holds). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "config.h"
#include "v41_stack.h"
#include "grouped.h"
#include "kvtable.h"
#include "program.h"
#include "progress.h"
#include "rng.h"
#include "rows.h"
#include "status.h"

static const char FLASH[] = "ref/configs/deepseek-v4.1-flash.json";

/* Sections 3 and 4 prefill T tokens through two 40-layer stacks at the real entry widths, each
 * query reading up to index_topk entries of 512 values in 38 layers and scoring every visible index
 * key in eight: about 25 s of one core at 2,048 tokens, 3.5 times that at 4,096. */
#define MAX_TOKENS 2048
#define LIVE_D 64       /* the live stack's model width */
#define LIVE_TOPK 16    /* its index_topk in the work count (the count does not depend on K) */
#define MAX_LIVE_CONTEXT 512   /* the live work count's longest context */
#define PROBE_TOKENS 2         /* tokens each stack is run over before anything is printed */
#define MIN_LAYERS 25          /* section 2's table reads layers 2, 20 and 24 */
#define MAX_LAYERS 128
#define MAX_RATIO 4096
#define MAX_WINDOW 4096
#define MAX_TOPK 65536
#define MAX_BLOCK 4096

typedef struct {
    size_t tokens, pool_blocks, max_context;
    uint64_t seed;
} options;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: v41_cache [--tokens T] [--pool-blocks P] [--max-context N] [--seed S]\n"
        "DeepSeek-V4.1-Flash's attention and cache (%s): the layer-mode map; indexer\n"
        "work per query against context (arithmetic at the real pool, then counted on a live stack whose\n"
        "pool is P blocks of 8, default 8, at contexts 16, 32, ... up to N, 16..%d, default %d); the error\n"
        "of the FP4/FP8 cache against float32 and the bytes per token its live caches hold after T tokens\n"
        "(default 256, even, 2..%d).\n"
        "Refused before anything is printed: a config whose rows do not fit V4.1's cache layout, or with\n"
        "layers outside %d..%d, a compress ratio above %d, a window outside 2..%d, an index_topk above %d\n"
        "or a candidate_block_size above %d.\n",
        FLASH, MAX_LIVE_CONTEXT, MAX_LIVE_CONTEXT, MAX_TOKENS, MIN_LAYERS, MAX_LAYERS, MAX_RATIO,
        MAX_WINDOW, MAX_TOPK, MAX_BLOCK);
    kvl_usage_backend(f);
}

static int load_flash(kvl_model *m)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", kvl_root_dir(), FLASH);
    int rc = kvl_model_load(m, path);
    if (rc != KVL_OK || m->generation == KVL_GEN_V41) return rc;
    kvl_model_free(m);
    return kvl_fail(KVL_EINVAL, "%s: not a V4.1 config", path);
}

/* m's widths shrunk to a small model, the entry widths kept: the rows, not the model, fix the
 * bytes. */
static void shrink(kvl_model *m)
{
    m->d = LIVE_D;
    m->n_heads = 2;
    m->q_lora_rank = 32;
    m->o_groups = 1;
    m->o_lora_rank = 16;
    m->index_n_heads = 2;
}

/* ---- 1. the map ------------------------------------------------------------------------------ */

static void print_map(const kvl_model *m)
{
    const kvl_layer_kind kinds[] = {KVL_LAYER_WINDOW, KVL_LAYER_FULL, KVL_LAYER_REINDEX,
                                    KVL_LAYER_REUSE};
    printf("1. Layer modes of %s (%zu layers)\n", m->name, m->n_layers);
    for (size_t k = 0; k < 4; k++) {
        size_t n = 0;
        char list[512] = "";
        for (size_t l = 0; l < m->n_layers; l++) {
            if (m->layers[l].kind != kinds[k]) continue;
            const size_t o = strlen(list);
            snprintf(list + o, sizeof list - o, "%s%zu", n ? ", " : "", l);
            n++;
        }
        printf("   %-8s %2zu  %s\n", v41_mode_name(kinds[k]), n, list);
    }
    printf("   reads: layer:(KV source, top-k source)");
    for (size_t l = 0, n = 0; l < m->n_layers; l++) {
        if (m->layers[l].kind == KVL_LAYER_WINDOW) continue;
        printf("%s %zu:(%d,%d)", n++ % 10 ? "" : "\n  ", l, m->layers[l].kv_source,
               m->layers[l].index_source);
    }
    printf("\n   candidate pool: layer %zu publishes the top %s blocks of %zu = %s positions\n\n",
           m->candidate_source_layer, KVL_GROUPED(m->candidate_topk_blocks),
           m->candidate_block_size,
           KVL_GROUPED(m->candidate_topk_blocks * m->candidate_block_size));
}

/* ---- 2. indexer work ------------------------------------------------------------------------- */

/* scores one query at position T − 1 evaluates, per the config: Full scans and pool-bounded
 * Reindex */
static void work_formula(const kvl_model *m, size_t T, uint64_t *scan, uint64_t *pooled)
{
    const size_t pool = m->candidate_topk_blocks * m->candidate_block_size;
    *scan = *pooled = 0;
    for (size_t l = 0; l < m->n_layers; l++) {
        const kvl_layer *y = &m->layers[l];
        const uint64_t n_t = y->compress_ratio ? T / y->compress_ratio : 0;
        if (y->kind == KVL_LAYER_FULL) *scan += n_t;
        if (y->kind == KVL_LAYER_REINDEX)
            *pooled += (size_t)y->kv_source == m->candidate_source_layer && n_t > pool ? pool : n_t;
    }
}

static void print_work_formula(const kvl_model *m)
{
    printf("2. Indexer scores per query at context T (real config)\n");
    printf("   %9s %14s %14s %14s %16s\n", "T", "Full scans", "Reindex", "total", "without pool");
    const size_t Ts[] = {4096, 65536, 131072, 1048576};
    char a[32], b[32], c[32], e[32];
    for (size_t i = 0; i < 4; i++) {
        uint64_t scan, pooled;
        work_formula(m, Ts[i], &scan, &pooled);
        const uint64_t nopool = scan + 4 * (uint64_t)Ts[i];
        printf("   %9s %14s %14s %14s %16s\n", KVL_GROUPED(Ts[i]),
               kvl_grouped(a, sizeof a, scan, 0), kvl_grouped(b, sizeof b, pooled, 0),
               kvl_grouped(c, sizeof c, scan + pooled, 0), kvl_grouped(e, sizeof e, nopool, 0));
    }
    printf(
        "   = 3*T/2 + T scanned by Full layers 2, 8, 14, 20, plus 4*min(T, pool) by Reindex 24, 28, 32, 36\n");
}

/* scored[L] ← each layer's indexer work for one decoded query at each checkpoint context */
static int print_work_live(const kvl_model *flash, const options *o)
{
    kvl_model m = *flash;   /* the layer map shared, the widths shrunk */
    shrink(&m);
    m.index_topk = LIVE_TOPK;
    m.candidate_topk_blocks = o->pool_blocks;
    v41_stack_config s;
    v41_stack_weights w;
    v41_cache c;
    memset(&c, 0, sizeof c);
    memset(&w, 0, sizeof w);
    int rc = v41_stack_config_from_model(&s, &m);
    kvl_rng rng;
    kvl_rng_seed(&rng, o->seed);
    const size_t checks[] = {16, 32, 64, 128, 256, 512}, T = o->max_context;
    if (rc == KVL_OK) rc = v41_stack_weights_init_random(&w, &s, &rng);
    if (rc == KVL_OK) rc = v41_cache_init(&c, &s, T, V41_CACHE_F32);
    float *x = malloc(T * LIVE_D * sizeof *x), *out = malloc(T * LIVE_D * sizeof *out);
    uint64_t *before = calloc(m.n_layers, sizeof *before);
    if (rc == KVL_OK && !(x && out && before))
        rc = kvl_fail(KVL_ENOMEM, "v41_cache: out of memory");
    if (rc == KVL_OK) kvl_rng_normal_f32(&rng, x, T * LIVE_D, 1.0);
    printf(
        "   counted on a live stack (pool %zu blocks of 8 = %zu positions), one decoded query at context T:\n",
        o->pool_blocks, o->pool_blocks * 8);
    printf("   %9s %10s %10s %10s %10s\n", "T", "layer 2", "layer 20", "layer 24", "all Reindex");
    for (size_t k = 0, pos = 0; k < 6 && checks[k] <= T && rc == KVL_OK; k++) {
        if (checks[k] - 1 > pos)
            rc = v41_stack_prefill(out, NULL, &s, &w, &c, x + pos * LIVE_D, checks[k] - 1 - pos);
        pos = checks[k] - 1;
        if (rc != KVL_OK) break;
        memcpy(before, c.scored, m.n_layers * sizeof *before);
        rc = v41_stack_decode(out, &s, &w, &c, x + pos * LIVE_D);
        pos++;
        uint64_t re = 0;
        for (size_t l = 0; l < m.n_layers; l++)
            if (m.layers[l].kind == KVL_LAYER_REINDEX) re += c.scored[l] - before[l];
        if (rc == KVL_OK)
            printf("   %9s %10s %10s %10s %10s\n", KVL_GROUPED(checks[k]),
                   KVL_GROUPED(c.scored[2] - before[2]), KVL_GROUPED(c.scored[20] - before[20]),
                   KVL_GROUPED(c.scored[24] - before[24]), KVL_GROUPED(re));
    }
    if (rc == KVL_OK)
        printf("   Full layers grow with T; Reindex layers stop at the pool size.\n\n");
    free(x); free(out); free(before);
    v41_cache_free(&c);
    v41_stack_weights_free(&w);
    v41_stack_config_free(&s);
    return rc;
}

/* ---- 3, 4. the 4-bit cache ------------------------------------------------------------------- */

static int print_cache(const kvl_model *flash, const options *o)
{
    kvl_model m = *flash;
    shrink(&m);
    const size_t T = o->tokens, d = LIVE_D;
    v41_stack_config s;
    v41_stack_weights w;
    v41_cache cn, cf;
    memset(&w, 0, sizeof w);
    memset(&cn, 0, sizeof cn);
    memset(&cf, 0, sizeof cf);
    int rc = v41_stack_config_from_model(&s, &m);
    kvl_rng rng;
    kvl_rng_seed(&rng, o->seed + 1);
    if (rc == KVL_OK) rc = v41_stack_weights_init_random(&w, &s, &rng);
    if (rc == KVL_OK) rc = v41_cache_init(&cn, &s, T, V41_CACHE_NATIVE);
    if (rc == KVL_OK) rc = v41_cache_init(&cf, &s, T, V41_CACHE_F32);
    float *x = malloc(T * d * sizeof *x), *yn = malloc(T * d * sizeof *yn),
          *yf = malloc(T * d * sizeof *yf);
    if (rc == KVL_OK && !(x && yn && yf)) rc = kvl_fail(KVL_ENOMEM, "v41_cache: out of memory");
    if (rc == KVL_OK) kvl_rng_normal_f32(&rng, x, T * d, 1.0);
    if (rc == KVL_OK) rc = v41_stack_prefill(yn, NULL, &s, &w, &cn, x, T);
    if (rc == KVL_OK) rc = v41_stack_prefill(yf, NULL, &s, &w, &cf, x, T);
    if (rc == KVL_OK) {
        double num = 0, den = 0, worst = 0;
        for (size_t i = 0; i < T * d; i++) {
            const double e = (double)yn[i] - yf[i], a = (double)yf[i] - x[i];
            num += e * e;
            den += a * a;
            worst = fmax(worst, fabs(e));
        }
        printf("3. The 4-bit cache against float32 (%s tokens, 40 layers, d %zu, Dh 512)\n",
               KVL_GROUPED(T), d);
        printf(
            "   rows: entries %zu B (E2M1 + E4M3 per 16), index keys %zu B (MXFP4), window %zu B (E4M3 + E8M0 per 32)\n",
            kvf_row_bytes(KVF_ROW_V41_MAIN), kvf_row_bytes(KVF_ROW_V4_INDEX),
            kvf_row_bytes(KVF_ROW_V41_WINDOW));
        printf(
            "   attention output (residual minus input): relative RMS error %.4f, max abs error %.4f\n\n",
            sqrt(num / den), worst);
        char a[32], b[32], c2[32];
        const size_t used = v41_cache_bytes_used(&cn);
        printf("4. Bytes the live caches hold after %s tokens\n", KVL_GROUPED(T));
        printf(
            "   per-token part (entries + index keys of layers 2, 8, 14, 20): %s B = %s B/token\n",
            kvl_grouped(a, sizeof a, used, 0), KVL_FIXED((double)used / (double)T, 2));
        printf("   window rows, per sequence: %s B (40 x %zu x 528)\n",
               kvl_grouped(b, sizeof b, v41_cache_window_bytes(&cn), 0),
               T < 128 ? T : (size_t)128);
        printf("   compressor tails, per sequence: %s B\n",
               kvl_grouped(c2, sizeof c2, v41_cache_state_bytes(&cn), 0));
    }
    free(x); free(yn); free(yf);
    v41_cache_free(&cn);
    v41_cache_free(&cf);
    v41_stack_weights_free(&w);
    v41_stack_config_free(&s);
    return rc;
}

/* The stack of m made and run over PROBE_TOKENS tokens into a cache in fmt, then freed. */
static int probe(const kvl_model *m, v41_cache_format fmt, uint64_t seed)
{
    v41_stack_config s;
    v41_stack_weights w;
    v41_cache c;
    memset(&w, 0, sizeof w);
    memset(&c, 0, sizeof c);
    float x[PROBE_TOKENS * LIVE_D] = {0}, y[PROBE_TOKENS * LIVE_D];
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    int rc = v41_stack_config_from_model(&s, m);
    if (rc != KVL_OK) return rc;
    rc = v41_stack_weights_init_random(&w, &s, &rng);
    if (rc == KVL_OK) rc = v41_cache_init(&c, &s, PROBE_TOKENS, fmt);
    if (rc == KVL_OK) rc = v41_stack_prefill(y, NULL, &s, &w, &c, x, PROBE_TOKENS);
    v41_cache_free(&c);
    v41_stack_weights_free(&w);
    v41_stack_config_free(&s);
    return rc;
}

/* The config against the bounds --help states, and the stacks of sections 2 to 4 made and run
 * over a few tokens: a config the program cannot run is refused before the first line. */
static int check_config(const kvl_model *flash, const options *o)
{
    kvl_kv_footprint f;
    KVL_TRY(kvl_kv_footprint_of(&f, flash));
    KVL_TRY(kvl_bound_ratios(flash, MAX_RATIO));
    KVL_TRY(kvl_bound_field(flash, "n_layers (num_hidden_layers)", flash->n_layers, MIN_LAYERS,
                            MAX_LAYERS));
    KVL_TRY(kvl_bound_field(flash, "window_size (sliding_window)", flash->window, 2, MAX_WINDOW));
    KVL_TRY(kvl_bound_field(flash, "index_topk", flash->index_topk, 1, MAX_TOPK));
    KVL_TRY(
        kvl_bound_field(flash, "candidate_block_size", flash->candidate_block_size, 1, MAX_BLOCK));
    kvl_model live = *flash, cache = *flash;
    shrink(&live);
    shrink(&cache);
    live.index_topk = LIVE_TOPK;
    live.candidate_topk_blocks = o->pool_blocks;
    int rc = probe(&live, V41_CACHE_F32, o->seed);
    if (rc == KVL_OK) rc = probe(&cache, V41_CACHE_NATIVE, o->seed);
    return rc == KVL_OK ? rc : kvl_fail(rc, "%s: %s", flash->path, kvl_error());
}

static int run(const kvl_model *flash, const options *o)
{
    print_map(flash);
    print_work_formula(flash);
    kvl_progress("the work of a live stack");
    int rc = print_work_live(flash, o);
    if (rc == KVL_OK) kvl_progress("the cache of %zu tokens", o->tokens);
    if (rc == KVL_OK) rc = print_cache(flash, o);
    return rc;
}

enum { F_TOKENS, F_POOL_BLOCKS, F_MAX_CONTEXT, F_SEED };
static const kvl_flag FLAGS[] = {
    {"--tokens", 1}, {"--pool-blocks", 1}, {"--max-context", 1}, {"--seed", 1}};

int main(int argc, char **argv)
{
    options o = {.tokens = 256, .pool_blocks = 8, .max_context = MAX_LIVE_CONTEXT, .seed = 7};
    kvl_args a = kvl_args_start("v41_cache", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *v;
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) {
            usage(stdout);
            return kvl_exit_status("v41_cache", 0);
        }
        if (k == KVL_ARGS_BAD) return 2;
        if (k == F_TOKENS && (kvl_parse_size(&o.tokens, v, 2, MAX_TOKENS) || o.tokens % 2))
            return kvl_bad_usage("v41_cache", "--tokens must be an even integer in [2, 2048]", v);
        if (k == F_POOL_BLOCKS && kvl_parse_size(&o.pool_blocks, v, 1, 64))
            return kvl_bad_usage("v41_cache", "--pool-blocks must be an integer in [1, 64]", v);
        if (k == F_MAX_CONTEXT && kvl_parse_size(&o.max_context, v, 16, MAX_LIVE_CONTEXT))
            return kvl_bad_usage("v41_cache", "--max-context must be an integer in [16, 512]", v);
        if (k == F_SEED && kvl_parse_seed(&o.seed, "v41_cache", v)) return 2;
    }
    kvl_progress_start("v41_cache");
    kvl_progress("checking the config");
    kvl_model flash;
    if (load_flash(&flash) !=
        KVL_OK) { /* a config that cannot be read or run is bad input: 2, before any output */
        kvl_progress_stop();
        fprintf(stderr, "v41_cache: %s\n", kvl_error());
        return 2;
    }
    if (check_config(&flash, &o) != KVL_OK) {
        kvl_progress_stop();
        fprintf(stderr, "v41_cache: %s\n", kvl_error());
        kvl_model_free(&flash);
        return 2;
    }
    const int rc = run(&flash, &o);
    kvl_progress_stop();
    kvl_model_free(&flash);
    if (rc != KVL_OK) {
        fprintf(stderr, "v41_cache: %s\n", kvl_error());
        return 1;
    }
    return kvl_exit_status("v41_cache", 0);
}
