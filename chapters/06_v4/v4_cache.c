/* v4_cache: DeepSeek-V4-Flash's KV cache, read off live caches (chapter 6;
 * chapters/06_v4/README.md, "What it stores per token"; the layers in ref/v4.h, the formula in
 * ref/kvtable.h).
 *
 * 1. The layer map, from ref/configs/deepseek-v4-flash.json's compress_ratios: window-only, CSA,
 *    HCA.
 * 2. Bytes per token rebuilt from what the caches hold: a ref/model stack of that map at the
 *    real entry widths (head dim 512 with 64 rotary channels, index head dim 128, window 128,
 *    top-512) and a small model width (d 64, one head: the widths of the rows, not of the model,
 *    fix the bytes) runs T tokens into native caches (584-byte rows, 68-byte index keys); every
 *    layer's cache reports its bytes, and the sum over T is set against the formula from the
 *    config and the row sizes (ref/kvtable.h).
 * 3. What stays bounded per sequence (window rows, compressor states, read from the same live
 *    caches) and the window's share of the cache at 8K, 128K and 1M tokens of context.
 * 4. The exact cost of rebuilding window rows after a prefix-cache hit (the global part
 *    restored, the window rows not kept): replay from s reproduces every layer's W window rows
 *    bit for bit iff s ≤ P − L·(W−1), i.e. L·(W−1)+1 tokens; the report's n_win·L is enough but
 *    not the minimum. Shown by replaying on the V4-Flash map at toy widths and a small window
 *    (the same formula; the real W = 128 needs 5,462-token replays through 43 layers, which
 *    --replay-window 128 runs, slowly), with a replay one token shorter that no longer
 *    reproduces them.
 *
 *   v4_cache [--tokens T] [--chunk C] [--replay-window W] [--seed S]
 *
 * Configs are found under $KVL_ROOT, else the source tree. Out of scope: MoE, hyper-connections,
 * MTP (they change what enters a layer, not what its cache holds). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "config.h"
#include "grouped.h"
#include "kvtable.h"
#include "model.h"
#include "program.h"
#include "progress.h"
#include "rng.h"
#include "rows.h"
#include "status.h"
#include "v4.h"

static const char FLASH[] = "ref/configs/deepseek-v4-flash.json";

#define MAX_TOKENS 65536
#define LIVE_D 64       /* the live stack's model width */
#define LIVE_RANK 32    /* its q_lora_rank and o_lora_rank */
/* The first layers of the map a small replay stack keeps: both window-only layers, two CSA, two
 * HCA. */
#define REPLAY_PREFIX_LAYERS 6
#define MAX_RATIO 4096  /* the largest compress ratio run: 32 x V4-Flash's HCA ratio of 128 */
#define MAX_LAYERS 128
#define MAX_WINDOW 4096
#define MAX_TOPK 65536
/* Values of compressed entries the live stack's queries may read (kvl_v4_entry_values): about 30 s
 * of one core, 5,811 tokens in chunks of 512. */
#define MAX_LIVE_VALUES 4e10

typedef struct {
    size_t tokens, chunk, replay_window;
    uint64_t seed;
} options;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: v4_cache [--tokens T] [--chunk C] [--replay-window W] [--seed S]\n"
        "DeepSeek-V4-Flash's KV cache from live caches (%s): the layer map, the bytes per\n"
        "token a stack at the real entry widths holds after T tokens (default 2048; a multiple of 128\n"
        "gives whole HCA blocks), prefilled in chunks of C (default 512), the bounded per-sequence part\n"
        "and the window's share at 8K, 128K and 1M tokens; then the replay that rebuilds every window row\n"
        "after a prefix-cache hit, on the same layer map at toy widths with a window of W (2..128,\n"
        "default 8; 128 is the real window and takes minutes).\n"
        "Refused before anything is printed: a config whose rows do not fit V4's cache layout, or with\n"
        "a compress ratio above %d, layers outside %d..%d, a window outside 2..%d or an index_topk above\n"
        "%d; and T and C whose queries would read more than %s values of\n"
        "compressed entries (each CSA query scores its chunk's index keys and reads its top-k entries,\n"
        "each HCA query every entry: quadratic in T; the refusal names the most tokens C allows, 5,811\n"
        "at C 512).\n",
        FLASH, MAX_RATIO, REPLAY_PREFIX_LAYERS, MAX_LAYERS, MAX_WINDOW, MAX_TOPK,
        KVL_GROUPED(MAX_LIVE_VALUES));
    kvl_usage_backend(f);
}

static int load_flash(kvl_model *m)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", kvl_root_dir(), FLASH);
    int rc = kvl_model_load(m, path);
    if (rc != KVL_OK || m->generation == KVL_GEN_V4) return rc;
    kvl_model_free(m);
    return kvl_fail(KVL_EINVAL, "%s: not a V4 config", path);
}

/* ---- 1. the layer map ------------------------------------------------------------------------ */

/* "2, 4, ..., 42": the layers of `kind`, by the first two and the last */
static void layer_list(char *buf, size_t cap, const kvl_model *m, kvl_layer_kind kind)
{
    size_t n = 0, first = 0, second = 0, last = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        if (m->layers[i].kind != kind) continue;
        if (n == 0) first = i;
        if (n == 1) second = i;
        last = i;
        n++;
    }
    if (n == 0) snprintf(buf, cap, "-");
    else if (n == 1) snprintf(buf, cap, "%zu", first);
    else if (n == 2) snprintf(buf, cap, "%zu, %zu", first, last);
    else snprintf(buf, cap, "%zu, %zu, ..., %zu", first, second, last);
}

static size_t count_kind(const kvl_model *m, kvl_layer_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_layers; i++) n += m->layers[i].kind == kind;
    return n;
}

/* The ratio of the layers of `kind` (0 if none). */
static size_t ratio_of(const kvl_model *m, kvl_layer_kind kind)
{
    for (size_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].kind == kind) return m->layers[i].compress_ratio;
    return 0;
}

static void print_map(const kvl_model *m)
{
    char a[64], b[64], c[64];
    layer_list(a, sizeof a, m, KVL_LAYER_WINDOW);
    layer_list(b, sizeof b, m, KVL_LAYER_CSA);
    layer_list(c, sizeof c, m, KVL_LAYER_HCA);
    const size_t m_csa = ratio_of(m, KVL_LAYER_CSA), m_hca = ratio_of(m, KVL_LAYER_HCA);
    printf("%s (%s): %zu layers, compress_ratios from the config\n", m->name, FLASH, m->n_layers);
    printf("  %-34s %2zu layers: %s\n", "window-only (ratio 0)", count_kind(m, KVL_LAYER_WINDOW),
           a);
    snprintf(a, sizeof a, "CSA (ratio %zu, top-%zu)", m_csa, m->index_topk);
    printf("  %-34s %2zu layers: %s\n", a, count_kind(m, KVL_LAYER_CSA), b);
    snprintf(a, sizeof a, "HCA (ratio %zu)", m_hca);
    printf("  %-34s %2zu layers: %s\n", a, count_kind(m, KVL_LAYER_HCA), c);
    printf("  every layer also keeps a window of W = %zu rows\n", m->window);
}

/* ---- 2. the live stack ----------------------------------------------------------------------- */

typedef struct {
    model_config c;
    model_weights w;
    model_cache cache;
} stack;

static void stack_free(stack *s)
{
    model_cache_free(&s->cache);
    model_weights_free(&s->w);
    model_config_free(&s->c);
}

/* The stack of m (dims already set) with weights from `seed` and an empty cache for T tokens in
 * `fmt`. */
static int stack_make(stack *s, const kvl_model *m, size_t T, v4_cache_format fmt, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    int rc = model_config_from_model(&s->c, m, 0, MODEL_MLP_SWIGLU);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    if (rc == KVL_OK) rc = model_weights_init_random(&s->w, &s->c, &rng);
    if (rc == KVL_OK) rc = model_cache_init_v4(&s->cache, &s->c, T, fmt);
    if (rc != KVL_OK) stack_free(s);
    return rc;
}

static float *draw_inputs(size_t T, size_t d, uint64_t seed)
{
    float *x = malloc(T * d * sizeof *x);
    if (!x) return NULL;
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    kvl_rng_normal_f32(&rng, x, T * d, 1.0);
    return x;
}

/* Prefill x[T][d] in chunks of C through the stack; out is scratch [C][d]. */
static int run_tokens(stack *s, const float *x, size_t T, size_t C)
{
    const size_t d = s->c.d;
    float *out = malloc(C * d * sizeof *out);
    if (!out) return kvl_fail(KVL_ENOMEM, "v4_cache: out of memory");
    int rc = KVL_OK;
    for (size_t t = 0; t < T && rc == KVL_OK; t += C)
        rc = model_prefill(out, &s->c, &s->w, &s->cache, x + t * d, T - t < C ? T - t : C);
    free(out);
    return rc;
}

typedef struct {
    size_t layers, entries, bytes;   /* per kind: layers, entries and bytes held in one layer */
} kind_bytes;

/* What the caches hold after T tokens, by kind (0 window-only, 1 CSA, 2 HCA), plus the bounded
 * part. */
static void tally(kind_bytes k[3], size_t *window, size_t *state, const stack *s)
{
    memset(k, 0, 3 * sizeof *k);
    *window = *state = 0;
    for (size_t l = 0; l < s->c.n_layers; l++) {
        const v4_cache *v = &s->cache.v4[l];
        const kvl_layer_kind kind = s->c.layers[l].v4.kind;
        const size_t i = kind == KVL_LAYER_CSA ? 1 : kind == KVL_LAYER_HCA ? 2 : 0;
        k[i].layers++;
        k[i].entries = v4_rows_held(&v->entries);
        k[i].bytes = v4_cache_bytes_used(v);
        *window += v4_cache_window_bytes(v);
        *state += v4_cache_state_bytes(v);
    }
}

/* The live stack's model: the same map and entry widths, a small model around them. */
static kvl_model live_model(const kvl_model *flash)
{
    kvl_model m = *flash;
    m.d = LIVE_D;
    m.n_heads = 1;
    m.o_groups = 1;
    m.q_lora_rank = LIVE_RANK;
    m.o_lora_rank = LIVE_RANK;
    m.index_n_heads = 1;
    return m;
}

static int live_bytes(const kvl_model *flash, const options *o, double *per_token, size_t *window,
                      size_t *state)
{
    const kvl_model m = live_model(flash);
    stack s;
    int rc = stack_make(&s, &m, o->tokens, V4_CACHE_NATIVE, o->seed);
    if (rc != KVL_OK) return rc;
    float *x = draw_inputs(o->tokens, m.d, o->seed + 1);
    rc = x ? run_tokens(&s, x, o->tokens, o->chunk)
           : kvl_fail(KVL_ENOMEM, "v4_cache: out of memory");
    free(x);
    if (rc != KVL_OK) {
        stack_free(&s);
        return rc;
    }
    kind_bytes k[3];
    tally(k, window, state, &s);
    char a[32], b[32];
    const size_t T = o->tokens;
    printf(
        "\nLive caches: the map above at head dim %zu (%zu rotary), index head dim %zu, window %zu, top-%zu;\n"
        "model width %zu, 1 head, native rows (%zu-byte main rows, %zu-byte index keys); %s tokens\n"
        "prefilled in chunks of %zu.\n",
        flash->head_dim, flash->qk_rope_head_dim, flash->index_head_dim, flash->window,
        flash->index_topk, m.d, kvf_row_bytes(KVF_ROW_V4_MAIN), kvf_row_bytes(KVF_ROW_V4_INDEX),
        kvl_grouped(a, sizeof a, T, 0), o->chunk);
    printf("  %-12s %6s %16s %18s %22s\n", "kind", "layers", "entries/layer", "bytes/layer",
           "bytes/token/layer");
    static const char *const names[3] = {"window-only", "CSA", "HCA"};
    size_t total = 0;
    for (size_t i = 0; i < 3; i++) {
        printf("  %-12s %6zu %16s %18s %22s\n", names[i], k[i].layers,
               kvl_grouped(a, sizeof a, k[i].entries, 0), kvl_grouped(b, sizeof b, k[i].bytes, 0),
               KVL_FIXED((double)k[i].bytes / (double)T, 4));
        total += k[i].layers * k[i].bytes;
    }
    *per_token = (double)total / (double)T;
    printf("  all layers: %s bytes held for %s tokens = %s bytes per token\n",
           kvl_grouped(a, sizeof a, total, 0), kvl_grouped(b, sizeof b, T, 0),
           KVL_FIXED(*per_token, 2));
    stack_free(&s);
    return KVL_OK;
}

/* The formula from the config and the formats library's row sizes, against the live figure. */
static int formula(const kvl_model *flash, double live)
{
    kvl_kv_footprint f;
    int rc = kvl_kv_footprint_of(&f, flash);
    if (rc != KVL_OK) return rc;
    const size_t m_csa = ratio_of(flash, KVL_LAYER_CSA), m_hca = ratio_of(flash, KVL_LAYER_HCA);
    printf(
        "  formula:    %zu*(%zu+%zu)/%zu + %zu*%zu/%zu = %s bytes per token (ref/kvtable, from the config)\n",
        count_kind(flash, KVL_LAYER_CSA), f.main_row_bytes, f.index_key_bytes, m_csa,
        count_kind(flash, KVL_LAYER_HCA), f.main_row_bytes, m_hca, KVL_FIXED(f.bytes_per_token, 2));
    if (live == f.bytes_per_token) {
        printf("  the live caches hold exactly the formula's bytes\n");
        return KVL_OK;
    }
    printf(
        "  the live caches differ from the formula: an HCA tail of fewer than %zu tokens holds no entry yet\n",
        m_hca);
    return KVL_OK;
}

/* ---- 3. the bounded part and the window's share ---------------------------------------------- */

static void shares(const kvl_model *flash, double per_token, size_t window, size_t state)
{
    char a[32], b[32];
    const size_t mc = ratio_of(flash, KVL_LAYER_CSA), mh = ratio_of(flash, KVL_LAYER_HCA),
                 Dh = flash->head_dim;
    printf(
        "\nBounded per sequence, read from the same caches: window rows %s B (%zu layers x %zu rows x %zu B),\n"
        "compressor states %s B (float32 kv and gate buffers: %zu CSA layers x (%zux%s + %zux%s) x 2 x 4 B,\n"
        "%zu HCA layers x %zux%s x 2 x 4 B).\n",
        kvl_grouped(a, sizeof a, window, 0), flash->n_layers, flash->window,
        kvf_row_bytes(KVF_ROW_V4_MAIN), kvl_grouped(b, sizeof b, state, 0),
        count_kind(flash, KVL_LAYER_CSA), 2 * mc, KVL_GROUPED(2 * Dh), 2 * mc,
        KVL_GROUPED(2 * flash->index_head_dim), count_kind(flash, KVL_LAYER_HCA), mh,
        KVL_GROUPED(Dh));
    static const struct {
        const char *name;
        size_t tokens;
    } ctx[] = {{"8K", 8192}, {"128K", 131072}, {"1M", 1048576}};
    printf("  %-6s %12s %16s %14s %14s %22s %20s\n", "context", "tokens", "per-token part",
           "window rows", "comp. states", "window / (part+window)", "window / everything");
    for (size_t i = 0; i < 3; i++) {
        const double part = per_token * (double)ctx[i].tokens;
        printf("  %-6s %12s %13s MB %11s MB %11s MB %21.2f%% %19.2f%%\n", ctx[i].name,
               kvl_grouped(a, sizeof a, ctx[i].tokens, 0), KVL_FIXED(part / 1e6, 2),
               KVL_FIXED((double)window / 1e6, 2), KVL_FIXED((double)state / 1e6, 2),
               100.0 * (double)window / (part + (double)window),
               100.0 * (double)window / (part + (double)window + (double)state));
    }
    printf("  (MB = 10^6 bytes; the per-token part is the live %s B/token times the context)\n",
           KVL_FIXED(per_token, 2));
}

/* ---- 4. replay after a prefix-cache hit ------------------------------------------------------ */

typedef struct {
    size_t layers_same;   /* layers whose W window rows are the full run's, bit for bit */
    size_t rows_differ;   /* window rows (all layers) that differ in any bit */
    double max_diff;      /* the largest |difference| of any element of those rows */
    int last_same;        /* the last prompt token's output is the full run's, bit for bit */
} replay_result;

/* r->… for the L layers' rows[L][W][Dh] kept from the full run against the cache's rows now */
static int compare_windows(replay_result *r, const stack *st, const float *rows, size_t P, size_t W,
                           size_t Dh)
{
    float *again = malloc(W * Dh * sizeof *again);
    if (!again) return kvl_fail(KVL_ENOMEM, "v4_cache: out of memory");
    int rc = KVL_OK;
    for (size_t l = 0; l < st->c.n_layers && rc == KVL_OK; l++) {
        rc = v4_rows_read(again, &st->cache.v4[l].window, P - W, W);
        size_t differ = 0;
        for (size_t j = 0; j < W && rc == KVL_OK; j++) {
            const float *a = again + j * Dh, *b = rows + (l * W + j) * Dh;
            differ += memcmp(a, b, Dh * sizeof *a) != 0;
            for (size_t k = 0; k < Dh; k++)
                r->max_diff = fmax(r->max_diff, fabs((double)a[k] - b[k]));
        }
        r->layers_same += differ == 0;
        r->rows_differ += differ;
    }
    free(again);
    return rc;
}

/* P prompt tokens x[P][d] through a fresh stack (prefill of s, then of P − s: the replayed chunk
 * then has the original's shape, so the float32 products see the same operands in the same
 * order), the window rows kept aside; drop every window at s, replay s … P − 1, compare. */
static int replay_once(replay_result *r, const kvl_model *m, const float *x, size_t P, size_t s,
                       uint64_t seed)
{
    stack st;
    int rc = stack_make(&st, m, P, V4_CACHE_F32, seed);
    if (rc != KVL_OK) return rc;
    const size_t d = st.c.d, L = st.c.n_layers, W = m->window, Dh = m->head_dim;
    float *full = malloc(P * d * sizeof *full), *re = malloc(P * d * sizeof *re);
    float *rows = malloc(L * W * Dh * sizeof *rows);
    if (!full || !re || !rows) rc = kvl_fail(KVL_ENOMEM, "v4_cache: out of memory");
    if (rc == KVL_OK) rc = model_prefill(full, &st.c, &st.w, &st.cache, x, s);
    if (rc == KVL_OK) rc = model_prefill(full + s * d, &st.c, &st.w, &st.cache, x + s * d, P - s);
    for (size_t l = 0; l < L && rc == KVL_OK; l++)
        rc = v4_rows_read(rows + l * W * Dh, &st.cache.v4[l].window, P - W, W);
    if (rc == KVL_OK) rc = model_cache_drop_windows(&st.cache, s);
    if (rc == KVL_OK) rc = model_replay(re + s * d, &st.c, &st.w, &st.cache, x + s * d, P - s);
    *r = (replay_result){0};
    if (rc == KVL_OK) rc = compare_windows(r, &st, rows, P, W, Dh);
    if (rc == KVL_OK)
        r->last_same = memcmp(full + (P - 1) * d, re + (P - 1) * d, d * sizeof *re) == 0;
    free(full); free(re); free(rows);
    stack_free(&st);
    return rc;
}

/* The three replays of one stack (n_win·L, L·(W−1)+1 and one token fewer), a table row each;
 * *exact is cleared unless the first two bring back every row and the last output bit for bit. */
static int replay_stack(int *exact, const kvl_model *m, uint64_t seed)
{
    char a[32], b[32];
    const size_t L = m->n_layers, W = m->window, P = L * W + 4 * W, minimum = L * (W - 1) + 1;
    float *x = draw_inputs(P, m->d, seed);
    if (!x) return kvl_fail(KVL_ENOMEM, "v4_cache: out of memory");
    const struct { const char *name; size_t n; } runs[] = {
        {"n_win*L", W * L}, {"L*(W-1)+1", minimum}, {"L*(W-1)", minimum - 1}};
    int rc = KVL_OK;
    for (size_t i = 0; i < 3 && rc == KVL_OK; i++) {
        replay_result r;
        rc = replay_once(&r, m, x, P, P - runs[i].n, seed + 1);
        if (rc != KVL_OK) break;
        snprintf(b, sizeof b, "%zu of %zu", r.layers_same, L);
        printf("  %6zu %6s %-10s %7s %18s %17s %11.2g %15s\n", L, kvl_grouped(a, sizeof a, P, 0),
               runs[i].name, kvl_grouped(a + 16, sizeof a - 16, runs[i].n, 0), b,
               KVL_GROUPED(r.rows_differ), r.max_diff, r.last_same ? "bit-identical" : "differs");
        if (i < 2 && !(r.layers_same == L && r.last_same)) *exact = 0;
    }
    free(x);
    return rc;
}

/* The replay stacks' model: the first `layers` of the map at toy widths (tests/v4_toy.h's),
 * window W. */
static kvl_model toy_model(const kvl_model *flash, size_t W, size_t layers)
{
    kvl_model m = *flash;
    m.d = 64;
    m.n_heads = 4;
    m.head_dim = 32;
    m.qk_rope_head_dim = 8;
    m.q_lora_rank = 32;
    m.o_groups = 2;
    m.o_lora_rank = 16; m.index_n_heads = 4; m.index_head_dim = 16; m.index_topk = 3; m.window = W;
    m.n_layers = layers;
    return m;
}

static int replay(const kvl_model *flash, const options *o)
{
    char a[32], b[32];
    const size_t Lf = flash->n_layers, Wf = flash->window, W = o->replay_window;
    printf(
        "\nRebuilding the window after a prefix-cache hit. The global part (entries, index keys, compressor\n"
        "states) is restored; window rows are not kept, so the last tokens are replayed with windows\n"
        "truncated at s. A layer's row at p is exact once its input is, which takes W-1 positions per layer\n"
        "below it: all W rows of all L layers (positions P-W..P-1) come back exactly iff s <= P-1 - L*(W-1).\n");
    printf(
        "  %s: L = %zu, W = n_win = %zu: the report's n_win*L = %s tokens; the exact minimum L*(W-1)+1 = %s\n",
        flash->name, Lf, Wf, kvl_grouped(a, sizeof a, Wf * Lf, 0),
        kvl_grouped(b, sizeof b, Lf * (Wf - 1) + 1, 0));
    const kvl_model m = toy_model(flash, W, Lf), prefix = toy_model(flash, W, REPLAY_PREFIX_LAYERS);
    printf(
        "  Shown by the same formula at toy widths (d 64, H 4, head dim 32, index 16x4, top-3, float32 rows),\n"
        "  window W = %zu%s, on the map's first %d layers and on all %zu.\n"
        "  The full run prefills s tokens, then the P-s it replays: OpenBLAS rounds a product differently\n"
        "  for another batch shape, so a bit-for-bit comparison replays the same chunk.\n",
        W, W == Wf ? " (the real one)" : " (the real 128 replays 5K+ tokens per run)",
        REPLAY_PREFIX_LAYERS, Lf);
    printf("  %6s %6s %-10s %7s %18s %17s %11s %15s\n", "layers", "P", "replay", "tokens",
           "layers reproduced", "rows that differ", "max |diff|", "last output");
    int exact = 1;
    int rc = replay_stack(&exact, &prefix, o->seed + 2);
    if (rc == KVL_OK) rc = replay_stack(&exact, &m, o->seed + 2);
    if (rc == KVL_OK && !exact)
        rc =
            kvl_fail(KVL_EINVAL, "v4_cache: a replay of L*(W-1)+1 tokens did not rebuild the rows");
    if (rc == KVL_OK)
        printf(
            "  One token fewer than L*(W-1)+1 leaves the last layer's oldest row computed from a window that was\n"
            "  truncated L-1 layers below. The change reaches it only through the oldest key of each window on\n"
            "  the way up, shrinking at every hop: a clear difference through %d layers, float32 rounding through\n"
            "  %zu (with a wider window, often nothing): L*(W-1)+1 is what exactness needs, the effective reach is\n"
            "  far shorter (chapter 3). n_win*L overshoots the minimum by L-1 tokens (%zu for V4-Flash).\n",
            REPLAY_PREFIX_LAYERS, Lf, Wf * Lf - (Lf * (Wf - 1) + 1));
    return rc;
}

/* ---- main ------------------------------------------------------------------------------------ */

/* The config against the bounds --help states, and every stack the run builds made once at one
 * token: a config the program cannot run is refused before the first line. */
static int check_config(const kvl_model *flash, const options *o)
{
    kvl_kv_footprint f;
    KVL_TRY(kvl_kv_footprint_of(&f, flash));
    KVL_TRY(kvl_bound_ratios(flash, MAX_RATIO));
    KVL_TRY(kvl_bound_field(flash, "num_hidden_layers (n_layers)", flash->n_layers,
                            REPLAY_PREFIX_LAYERS, MAX_LAYERS));
    KVL_TRY(kvl_bound_field(flash, "sliding_window (window_size)", flash->window, 2, MAX_WINDOW));
    KVL_TRY(kvl_bound_field(flash, "index_topk", flash->index_topk, 1, MAX_TOPK));
    const kvl_model runs[] = {live_model(flash),
                              toy_model(flash, o->replay_window, flash->n_layers)};
    for (size_t i = 0; i < 2; i++) {
        stack s;
        const int rc = stack_make(&s, &runs[i], 1, i ? V4_CACHE_F32 : V4_CACHE_NATIVE, o->seed);
        if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", flash->path, kvl_error());
        stack_free(&s);
    }
    return KVL_OK;
}

static int run(const kvl_model *flash, const options *o)
{
    print_map(flash);
    double per_token = 0;
    size_t window = 0, state = 0;
    kvl_progress("the live cache of %zu tokens", o->tokens);
    int rc = live_bytes(flash, o, &per_token, &window, &state);
    if (rc == KVL_OK) rc = formula(flash, per_token);
    if (rc == KVL_OK) shares(flash, per_token, window, state);
    if (rc == KVL_OK) kvl_progress("replay from the window rows");
    if (rc == KVL_OK) rc = replay(flash, o);
    return rc;
}

enum { F_TOKENS, F_CHUNK, F_REPLAY_WINDOW, F_SEED };
static const kvl_flag FLAGS[] = {
    {"--tokens", 1}, {"--chunk", 1}, {"--replay-window", 1}, {"--seed", 1}};

int main(int argc, char **argv)
{
    options o = {.tokens = 2048, .chunk = 512, .replay_window = 8, .seed = 6};
    kvl_args a = kvl_args_start("v4_cache", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *v;
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) {
            usage(stdout);
            return kvl_exit_status("v4_cache", 0);
        }
        if (k == KVL_ARGS_BAD) return 2;
        if (k == F_TOKENS && kvl_parse_size(&o.tokens, v, 1, MAX_TOKENS))
            return kvl_bad_usage("v4_cache", "--tokens must be an integer in [1, 65536]", v);
        if (k == F_CHUNK && kvl_parse_size(&o.chunk, v, 1, MAX_TOKENS))
            return kvl_bad_usage("v4_cache", "--chunk must be an integer in [1, 65536]", v);
        if (k == F_REPLAY_WINDOW && kvl_parse_size(&o.replay_window, v, 2, 128))
            return kvl_bad_usage("v4_cache", "--replay-window must be an integer in [2, 128]", v);
        if (k == F_SEED && kvl_parse_seed(&o.seed, "v4_cache", v)) return 2;
    }
    kvl_progress_start("v4_cache");
    kvl_progress("checking the config");
    kvl_model flash;
    if (load_flash(&flash) !=
        KVL_OK) { /* a config that cannot be read or run is bad input: 2, before any output */
        kvl_progress_stop();
        fprintf(stderr, "v4_cache: %s\n", kvl_error());
        return 2;
    }
    const kvl_model live = live_model(&flash);
    if (check_config(&flash, &o) != KVL_OK ||
        kvl_bound_v4_tokens(&live, "--tokens", o.tokens, o.chunk, MAX_LIVE_VALUES) != KVL_OK) {
        kvl_progress_stop();
        fprintf(stderr, "v4_cache: %s\n", kvl_error());
        kvl_model_free(&flash);
        return 2;
    }
    const int rc = run(&flash, &o);
    kvl_progress_stop();
    kvl_model_free(&flash);
    if (rc != KVL_OK) {
        fprintf(stderr, "v4_cache: %s\n", kvl_error());
        return 1;
    }
    return kvl_exit_status("v4_cache", 0);
}
