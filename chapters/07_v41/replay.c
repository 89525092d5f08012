/* replay: V4.1's causal encoder–decoder, bounded replay and prefix caching without window rows,
 * measured (chapter 7; chapters/07_v41/README.md, "The causal encoder–decoder, replay and prefix
 * caching"; ref/v41_ced.h, ref/prefix_cache.h).
 *
 * 1. The early exit's work per prompt token, counted from the config's widths (ref/v41_ced.h
 *    v41_ced_prefill_work): every layer against the encoder plus layer 20's compressor and index
 *    keys; then timed on a narrow stack.
 * 2. Replay on a narrow stack with the real layer map and window (40 layers, W 128): for each
 *    prompt length, the tokens an exact rebuild recomputes (L·(W − 1) of them, 5,080) against
 *    bounded replay's W, and the error bounded replay leaves in the next token's output and in
 *    each layer's window rows. The prompt's global KV goes through a prefix-cache file first, so
 *    every replay starts from a real hit. The weights are random: they have no trained fading of
 *    influence, so the error shows what the approximation does to an untrained stack, not what
 *    it does to V4.1.
 * 3. Prefix-cache files at the deployed row widths: V4.1's global KV only, V4-Flash's global KV
 *    only, and V4-Flash's with its window rows, their sizes read from the files written.
 *
 *   replay [--prompts LIST] [--persist-tokens T] [--seed S]
 *
 * Out of scope, as everywhere: MoE, hyper-connections, Engram, DSpark, vision. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bounds.h"
#include "v41_ced.h"
#include "config.h"
#include "contexts.h"
#include "grouped.h"
#include "kvtable.h"
#include "model.h"
#include "prefix_cache.h"
#include "prefix_file.h"
#include "program.h"
#include "progress.h"
#include "rng.h"
#include "status.h"
#include "timing.h"

static const char V41[] = "ref/configs/deepseek-v4.1-flash.json";
static const char V4[] = "ref/configs/deepseek-v4-flash.json";

#define MAX_PROMPTS 8
#define MAX_PROMPT 65536
#define MAX_PERSIST 16384
#define PROBE_TOKENS 2        /* tokens each stack is run over before anything is printed */
#define PROBE_D 64            /* the widest of those stacks (narrow, v41_small, v4_small) */
#define MIN_LAYERS 40         /* section 2 shows the window rows of layers down to 39 */
#define MAX_LAYERS 128
#define MAX_RATIO 4096
#define MAX_WINDOW 4096
#define MAX_TOPK 65536
/* Values of compressed entries the queries of one run may read (chapters/common/bounds.h), each
 * about 30 s of one core: the prompts' full prefills on the narrow stack (the early exit and the
 * replays redo at most as much), and the V4-Flash file's prefill of --persist-tokens, the larger
 * of the two files' (V4.1's reads alike, fewer). */
#define MAX_PROMPT_VALUES 2e10
#define MAX_PERSIST_VALUES 2.5e10
/* window layers whose error is shown */
static const size_t DEPTHS[] = {0, 1, 2, 4, 8, 16, 24, 32, 39};
#define N_DEPTHS (sizeof DEPTHS / sizeof *DEPTHS)

typedef struct {
    size_t prompts[MAX_PROMPTS], n_prompts, persist_tokens;
    uint64_t seed;
    char dir[256];   /* where the prefix files are written, removed at the end */
} options;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: replay [--prompts LIST] [--persist-tokens T] [--seed S]\n"
        "V4.1's causal encoder-decoder and bounded replay (%s):\n"
        "the early exit's work per prompt token; bounded against exact replay on a narrow stack with the\n"
        "real layer map and window, for prompts LIST (default 1K,4K; each 256..64K); and the sizes of\n"
        "prefix-cache files of T tokens (default 2048, 256..16384) for V4.1 and V4-Flash (%s).\n"
        "Refused before anything is printed: a config whose rows do not fit its cache layout, or with\n"
        "layers outside %d..%d, a compress ratio above %d, a window outside 2..%d or an index_topk above\n"
        "%d; prompts whose prefills' queries would read more than %s values of compressed\n"
        "entries in all (every query scores the index keys it sees and reads its top-k: quadratic in\n"
        "the prompt; one prompt of up to 7,368 tokens), and a T whose V4-Flash prefill would read more\n"
        "than %s (T up to 3,751).\n",
        V41, V4, MIN_LAYERS, MAX_LAYERS, MAX_RATIO, MAX_WINDOW, MAX_TOPK,
        KVL_GROUPED(MAX_PROMPT_VALUES), KVL_GROUPED(MAX_PERSIST_VALUES));
    kvl_usage_backend(f);
}

static int load(kvl_model *m, const char *rel)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", kvl_root_dir(), rel);
    return kvl_model_load(m, path);
}

static float *normals(size_t n, kvl_rng *rng)
{
    float *x = malloc(n * sizeof *x);
    if (x) kvl_rng_normal_f32(rng, x, n, 1.0);
    return x;
}

/* max |a − b| / max |b| over n values */
static double rel_err(const float *a, const float *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? e / m : e;
}

/* ---- 1. the early exit's work ---------------------------------------------------------------- */

static void print_work(const v41_stack_config *s)
{
    v41_ced_work full, early;
    v41_ced_prefill_work(&full, &early, s);
    printf(
        "1. Prefill work per prompt token (counted from the config's widths; pre-norm and attention weights)\n");
    printf("   full prefill     %2zu layers   %s parameters\n", full.layers,
           KVL_GROUPED(full.params));
    printf(
        "   early exit       %2zu layers   %s parameters: the encoder, then layer %zu's compressor and index keys\n",
        early.layers, KVL_GROUPED(early.params), s->n_encoder);
    printf("   early / full     %.3f of the layers, %.3f of the parameters\n",
           (double)early.layers / full.layers, (double)early.params / full.params);
}

/* ---- the narrow stack ------------------------------------------------------------------------ */

/* The real layer map, window, top-k and pool, at a width that runs a 4K-token prompt in seconds. */
static void narrow(kvl_model *m)
{
    m->d = 64;
    m->n_heads = 2;
    m->head_dim = 64;
    m->qk_rope_head_dim = 16;
    m->q_lora_rank = 32;
    m->o_groups = 1;
    m->o_lora_rank = 16;
    m->index_n_heads = 2;
    m->index_head_dim = 32;
}

typedef struct {
    v41_stack_config s;
    v41_stack_weights w;
    size_t d, L, E, W;
} stack;

static int stack_make(stack *st, const kvl_model *m, uint64_t seed)
{
    memset(st, 0, sizeof *st);
    KVL_TRY(v41_stack_config_from_model(&st->s, m));
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    KVL_TRY(v41_stack_weights_init_random(&st->w, &st->s, &rng));
    st->d = st->s.d;
    st->L = st->s.n_layers;
    st->E = st->s.n_encoder;
    st->W = st->s.layers[0].core.window;
    return v41_ced_check(&st->s);
}

static void stack_free(stack *st)
{
    v41_stack_weights_free(&st->w);
    v41_stack_config_free(&st->s);
}

/* ---- 2. replay ------------------------------------------------------------------------------- */

typedef struct {
    double next;              /* next-token output, relative error */
    double rows[N_DEPTHS];    /* window rows the next token reads, per depth */
} replay_error;

/* rows[L][W − 1][Dh]: every layer's window rows of positions P − W + 1 … P − 1. */
static int read_windows(float *rows, const v41_cache *c, const stack *st, size_t P)
{
    const size_t n = st->W - 1, Dh = st->s.layers[0].core.head_dim;
    for (size_t l = 0; l < st->L; l++)
        KVL_TRY(v4_rows_read(rows + l * n * Dh, &c->window[l], P - n, n));
    return KVL_OK;
}

/* The error a replayed cache c leaves against the truth's rows and next-token output. */
static int measure(replay_error *e, v41_cache *c, const stack *st, const float *truth_rows,
                   const float *truth_next, const float *x, size_t P)
{
    const size_t n = st->W - 1, Dh = st->s.layers[0].core.head_dim;
    float *rows = malloc(st->L * n * Dh * sizeof *rows), *next = malloc(st->d * sizeof *next);
    int rc =
        rows && next ? read_windows(rows, c, st, P) : kvl_fail(KVL_ENOMEM, "replay: out of memory");
    for (size_t i = 0; i < N_DEPTHS && rc == KVL_OK; i++)
        e->rows[i] = rel_err(rows + DEPTHS[i] * n * Dh, truth_rows + DEPTHS[i] * n * Dh, n * Dh);
    if (rc == KVL_OK) rc = v41_stack_decode(next, &st->s, &st->w, c, x + P * st->d);
    if (rc == KVL_OK) e->next = rel_err(next, truth_next, st->d);
    free(rows);
    free(next);
    return rc;
}

/* A prefix hit on `file`, then encoder and decoder replay of x[from … P − 1]. */
static int hit_and_replay(v41_cache *c, const stack *st, const char *file, const float *x,
                          size_t P, size_t from)
{
    KVL_TRY(v41_cache_init(c, &st->s, P + 1, V41_CACHE_F32));
    float *h = malloc((P - from) * st->d * sizeof *h);
    if (!h) return kvl_fail(KVL_ENOMEM, "replay: out of memory");
    memcpy(h, x + from * st->d, (P - from) * st->d * sizeof *h);
    int rc = v41_prefix_load(c, &st->s, file);
    if (rc == KVL_OK) rc = v41_ced_encoder_replay(h, &st->s, &st->w, c, from);
    if (rc == KVL_OK) rc = v41_ced_decoder_replay(h, &st->s, &st->w, c, from);
    free(h);
    return rc;
}

typedef struct {
    size_t exact_tokens, bounded_tokens;
    double full_s, early_s;   /* seconds: the full prefill and the early exit */
    replay_error exact, bounded, early_bounded;
} prompt_result;

/* The truth: the prompt prefilled (split at the exact start, so that exact replay repeats its
 * products), its global KV saved to `file`, its window rows and next-token output kept; *secs
 * its prefill time. */
static int truth(float *rows, float *next, double *secs, const stack *st, const float *x, size_t P,
                 size_t split, const char *file)
{
    v41_cache c;
    KVL_TRY(v41_cache_init(&c, &st->s, P + 1, V41_CACHE_F32));
    float *h = malloc(P * st->d * sizeof *h);
    int rc = h ? KVL_OK : kvl_fail(KVL_ENOMEM, "replay: out of memory");
    const double t0 = kvl_seconds();
    if (rc == KVL_OK && split) rc = v41_stack_prefill(h, NULL, &st->s, &st->w, &c, x, split);
    if (rc == KVL_OK)
        rc = v41_stack_prefill(h, NULL, &st->s, &st->w, &c, x + split * st->d, P - split);
    *secs = kvl_seconds() - t0;
    if (rc == KVL_OK) rc = v41_prefix_save(file, &st->s, &c);
    if (rc == KVL_OK) rc = read_windows(rows, &c, st, P);
    if (rc == KVL_OK) rc = v41_stack_decode(next, &st->s, &st->w, &c, x + P * st->d);
    free(h);
    v41_cache_free(&c);
    return rc;
}

/* A fresh prompt served the V4.1 way: early exit (timed into *secs), then decoder replay from
 * `from`. */
static int early_exit_and_replay(v41_cache *c, double *secs, const stack *st, const float *x,
                                 size_t P, size_t from)
{
    KVL_TRY(v41_cache_init(c, &st->s, P + 1, V41_CACHE_F32));
    float *h = malloc(P * st->d * sizeof *h);
    if (!h) return kvl_fail(KVL_ENOMEM, "replay: out of memory");
    const double t0 = kvl_seconds();
    int rc = v41_ced_prefill(h, &st->s, &st->w, c, x, P);
    *secs = kvl_seconds() - t0;
    if (rc == KVL_OK) rc = v41_ced_decoder_replay(h + from * st->d, &st->s, &st->w, c, from);
    free(h);
    return rc;
}

static int run_prompt(prompt_result *r, const stack *st, const float *x, size_t P, const char *file)
{
    const size_t Dh = st->s.layers[0].core.head_dim;
    float *rows = malloc(st->L * (st->W - 1) * Dh * sizeof *rows),
          *next = malloc(st->d * sizeof *next);
    if (!rows || !next) {
        free(rows);
        free(next);
        return kvl_fail(KVL_ENOMEM, "replay: out of memory");
    }
    const size_t s_exact = v41_ced_exact_replay_start(P, st->L, st->W),
                 s_bounded = v41_ced_bounded_replay_start(P, st->W);
    *r = (prompt_result){.exact_tokens = P - s_exact, .bounded_tokens = P - s_bounded};
    kvl_progress("the %zu-token prompt: full prefill", P);
    int rc = truth(rows, next, &r->full_s, st, x, P, s_exact, file);
    const size_t from[] = {s_exact, s_bounded};
    replay_error *err[] = {&r->exact, &r->bounded};
    static const char *const path[] = {"exact", "bounded"};
    for (size_t i = 0; i < 2 && rc == KVL_OK; i++) {
        kvl_progress("the %zu-token prompt: hit and %s replay", P, path[i]);
        v41_cache c;
        rc = hit_and_replay(&c, st, file, x, P, from[i]);
        if (rc == KVL_OK) rc = measure(err[i], &c, st, rows, next, x, P);
        v41_cache_free(&c);
    }
    if (rc == KVL_OK) {
        kvl_progress("the %zu-token prompt: early exit", P);
        v41_cache c;
        rc = early_exit_and_replay(&c, &r->early_s, st, x, P, s_bounded);
        if (rc == KVL_OK) rc = measure(&r->early_bounded, &c, st, rows, next, x, P);
        v41_cache_free(&c);
    }
    free(rows);
    free(next);
    return rc;
}

static void print_error_row(const char *what, size_t P, size_t tokens, const replay_error *e)
{
    printf("   %7s  %-24s %6s  %9.2g  ", KVL_GROUPED(P), what, KVL_GROUPED(tokens), e->next);
    for (size_t i = 0; i < N_DEPTHS; i++) printf(" %7.2g", e->rows[i]);
    printf("\n");
}

static int print_replay(const stack *st, const float *x, const options *o)
{
    char file[288];
    snprintf(file, sizeof file, "%s/v41-narrow.kvp", o->dir);
    printf(
        "\n2. Replay on a narrow stack: the real layer map, L %zu (encoder %zu), W %zu, K %zu; d %zu, Dh %zu\n",
        st->L, st->E, st->W, st->s.layers[st->E].indexer.topk, st->d,
        st->s.layers[0].core.head_dim);
    printf(
        "   An exact rebuild of every window replays L·(W − 1) = %s tokens (the report's n_win·L = %s is enough\n"
        "   too); bounded replay replays W = %zu, and its windows are truncated at the replay start. Relative\n"
        "   error against the full run, of the next token's output and of the window rows it reads, by layer:\n",
        KVL_GROUPED(st->L * (st->W - 1)), KVL_GROUPED(st->L * st->W), st->W);
    printf("   %7s  %-24s %6s  %9s  ", "prompt", "path", "tokens", "next");
    for (size_t i = 0; i < N_DEPTHS; i++) printf(" layer%-2zu", DEPTHS[i]);
    printf("\n");
    double times[MAX_PROMPTS][2];
    for (size_t i = 0; i < o->n_prompts; i++) {
        const size_t P = o->prompts[i];
        prompt_result r;
        KVL_TRY(run_prompt(&r, st, x, P, file));
        print_error_row("hit, exact replay", P, r.exact_tokens, &r.exact);
        print_error_row("hit, bounded replay", P, r.bounded_tokens, &r.bounded);
        print_error_row("early exit, bounded dec.", P, r.bounded_tokens, &r.early_bounded);
        times[i][0] = r.full_s;
        times[i][1] = r.early_s;
        fflush(stdout);
    }
    remove(file);
    printf(
        "   hit: a prefix-cache load, then encoder and decoder replay; early exit: the encoder and layer %zu's\n"
        "   compressor, then decoder replay (exact from %s tokens: test_ch07_replay proves it bit for bit).\n"
        "   Exact replay repeats the prefill's own products, so its rows match bit for bit. The weights are\n"
        "   random: deeper layers see the truncated window through more hops and nothing trained makes far\n"
        "   tokens' influence fade, so these errors say nothing about the trained model's.\n",
        st->E, KVL_GROUPED((st->L - st->E) * (st->W - 1)));
    for (size_t i = 0; i < o->n_prompts; i++)
        printf(
            "   prefill of %s tokens on this stack and machine: full %.2f s, early exit %.2f s (%.2f)\n",
            KVL_GROUPED(o->prompts[i]), times[i][0], times[i][1], times[i][1] / times[i][0]);
    printf(
        "   (each timed once, so the time ratio moves with the machine's load from run to run; the work\n"
        "   ratio counted in section 1 does not)\n");
    return KVL_OK;
}

/* ---- 3. prefix-cache files at the deployed widths -------------------------------------------- */

/* A file's bytes by what they hold, read back from it. */
typedef struct {
    size_t rows, tails, window, framing, total;
} file_bytes;

static int measure_file(file_bytes *b, const char *path)
{
    prefix_file f;
    KVL_TRY(prefix_file_read(&f, path));
    *b = (file_bytes){.total = f.size};
    for (size_t i = 0; i < f.n; i++) {
        const prefix_section *s = &f.sections[i];
        const size_t n = s->rows * s->row_bytes;
        if (!strcmp(s->tag, "entries") || !strcmp(s->tag, "keys")) b->rows += n;
        else if (!strcmp(s->tag, "window")) b->window += n;
        else b->tails += n;
    }
    b->framing = b->total - b->rows - b->tails - b->window;
    prefix_file_free(&f);
    return KVL_OK;
}

/* V4.1-Flash's map and rows (Dh 512, DI 128, FP4 entries) at a small model width. */
static kvl_model v41_small(const kvl_model *v41)
{
    kvl_model m = *v41;
    m.d = 64, m.n_heads = 2, m.q_lora_rank = 32, m.o_groups = 1, m.o_lora_rank = 16,
    m.index_n_heads = 2;
    return m;
}

/* Its global KV file. */
static int v41_file(file_bytes *bytes, const kvl_model *v41, const options *o, const char *path)
{
    const kvl_model m = v41_small(v41);
    stack st;
    int rc = stack_make(&st, &m, o->seed + 1);
    v41_cache c = {0};
    const size_t T = o->persist_tokens;
    kvl_rng rng;
    kvl_rng_seed(&rng, o->seed + 2);
    float *x = rc == KVL_OK ? normals(T * st.d, &rng) : NULL,
          *h = x ? malloc(T * st.d * sizeof *h) : NULL;
    if (rc == KVL_OK && !h) rc = kvl_fail(KVL_ENOMEM, "replay: out of memory");
    if (rc == KVL_OK) rc = v41_cache_init(&c, &st.s, T, V41_CACHE_NATIVE);
    if (rc == KVL_OK) rc = v41_ced_prefill(h, &st.s, &st.w, &c, x, T);
    if (rc == KVL_OK) rc = v41_prefix_save(path, &st.s, &c);
    if (rc == KVL_OK) rc = measure_file(bytes, path);
    v41_cache_free(&c);
    free(x);
    free(h);
    stack_free(&st);
    return rc;
}

/* V4-Flash's map and rows (Dh 512, DI 128, 584-byte rows) at a small model width. */
static kvl_model v4_small(const kvl_model *v4)
{
    kvl_model m = *v4;
    m.d = 32, m.n_heads = 1, m.o_groups = 1, m.q_lora_rank = 16, m.o_lora_rank = 16,
    m.index_n_heads = 1;
    return m;
}

/* Both of its files. */
static int v4_files(file_bytes *global, file_bytes *with_window, const kvl_model *v4,
                    const options *o, const char *path_g, const char *path_w)
{
    const kvl_model m = v4_small(v4);
    model_config mc;
    model_weights w = {0};
    model_cache c = {0};
    int rc = model_config_from_model(&mc, &m, 0, MODEL_MLP_SWIGLU);
    if (rc != KVL_OK) return rc;
    const size_t T = o->persist_tokens;
    kvl_rng rng;
    kvl_rng_seed(&rng, o->seed + 3);
    rc = model_weights_init_random(&w, &mc, &rng);
    float *x = rc == KVL_OK ? normals(T * mc.d, &rng) : NULL,
          *h = x ? malloc(T * mc.d * sizeof *h) : NULL;
    if (rc == KVL_OK && !h) rc = kvl_fail(KVL_ENOMEM, "replay: out of memory");
    if (rc == KVL_OK) rc = model_cache_init_v4(&c, &mc, T, V4_CACHE_NATIVE);
    if (rc == KVL_OK) rc = model_prefill(h, &mc, &w, &c, x, T);
    if (rc == KVL_OK) rc = v4_prefix_save(path_g, &mc, &c);
    if (rc == KVL_OK) rc = v4_prefix_save_with_window(path_w, &mc, &c);
    if (rc == KVL_OK) rc = measure_file(global, path_g);
    if (rc == KVL_OK) rc = measure_file(with_window, path_w);
    model_cache_free(&c);
    model_weights_free(&w);
    model_config_free(&mc);
    free(x);
    free(h);
    return rc;
}

static void print_file(const char *what, const file_bytes *b, size_t T)
{
    printf("   %-36s %12s %10s %10s %8s %11s %10s\n", what, KVL_GROUPED(b->rows),
           KVL_GROUPED(b->tails), KVL_GROUPED(b->window), KVL_GROUPED(b->framing),
           KVL_GROUPED(b->total), kvl_grouped((char[48]){0}, 48, (double)b->rows / T, 2));
}

static int print_files(const kvl_model *v41, const kvl_model *v4, const options *o)
{
    char p41[288], p4g[288], p4w[288];
    snprintf(p41, sizeof p41, "%s/v41.kvp", o->dir);
    snprintf(p4g, sizeof p4g, "%s/v4-global.kvp", o->dir);
    snprintf(p4w, sizeof p4w, "%s/v4-window.kvp", o->dir);
    file_bytes b41 = {0}, b4g = {0}, b4w = {0};
    const size_t T = o->persist_tokens;
    kvl_progress("V4.1's prefix-cache file");
    int rc = v41_file(&b41, v41, o, p41);
    if (rc == KVL_OK) kvl_progress("V4's prefix-cache files");
    if (rc == KVL_OK) rc = v4_files(&b4g, &b4w, v4, o, p4g, p4w);
    remove(p41);
    remove(p4g);
    remove(p4w);
    if (rc != KVL_OK) return rc;
    printf(
        "\n3. Prefix-cache files of a %s-token prompt in the deployed rows, bytes read back from the files\n",
        KVL_GROUPED(T));
    printf("   %-36s %12s %10s %10s %8s %11s %10s\n", "file", "entries+keys", "tails", "window",
           "framing", "total", "rows/token");
    print_file("V4.1-Flash: global KV only", &b41, T);
    print_file("V4-Flash: global KV only (Zero SWA)", &b4g, T);
    print_file("V4-Flash: global KV and window rows", &b4w, T);
    const double v4_per_token = (double)b4g.rows / T;
    printf(
        "   Rows per token, V4.1 / V4: %.3f (the report's quarter). KV bytes, V4.1's global rows against V4's\n"
        "   global and window rows: %.3f here. The report's \"roughly 1/8\" is a quarter times a half: it takes\n"
        "   the window rows as half of what V4 persists. They are a fixed %s bytes per sequence, as many\n"
        "   as V4's rows of a %s-token prompt, so 1/8 holds near that length only (run --persist-tokens\n"
        "   with other lengths). The tails, the compressors' unfinished blocks (V4's HCA buffers 128 tokens\n"
        "   a layer), are fixed per sequence too and kept out of these ratios.\n",
        (double)b41.rows / b4g.rows, (double)b41.rows / (b4w.rows + b4w.window),
        KVL_GROUPED(b4w.window), KVL_GROUPED(b4w.window / v4_per_token));
    return KVL_OK;
}

/* ---- main ------------------------------------------------------------------------------------ */

/* A V4.1 stack of m made and run over PROBE_TOKENS tokens, then freed. */
static int probe_v41(const kvl_model *m, v41_cache_format fmt, uint64_t seed)
{
    stack st;
    v41_cache c = {0};
    float x[PROBE_TOKENS * PROBE_D] = {0}, y[PROBE_TOKENS * PROBE_D];
    int rc = stack_make(&st, m, seed);
    if (rc == KVL_OK) rc = v41_cache_init(&c, &st.s, PROBE_TOKENS, fmt);
    if (rc == KVL_OK) rc = v41_ced_prefill(y, &st.s, &st.w, &c, x, PROBE_TOKENS);
    v41_cache_free(&c);
    stack_free(&st);
    return rc;
}

/* V4-Flash's small stack made and run over PROBE_TOKENS tokens, then freed. */
static int probe_v4(const kvl_model *v4, uint64_t seed)
{
    const kvl_model m = v4_small(v4);
    model_config mc;
    model_weights w = {0};
    model_cache c = {0};
    float x[PROBE_TOKENS * PROBE_D] = {0}, y[PROBE_TOKENS * PROBE_D];
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    KVL_TRY(model_config_from_model(&mc, &m, 0, MODEL_MLP_SWIGLU));
    int rc = model_weights_init_random(&w, &mc, &rng);
    if (rc == KVL_OK) rc = model_cache_init_v4(&c, &mc, PROBE_TOKENS, V4_CACHE_NATIVE);
    if (rc == KVL_OK) rc = model_prefill(y, &mc, &w, &c, x, PROBE_TOKENS);
    model_cache_free(&c);
    model_weights_free(&w);
    model_config_free(&mc);
    return rc;
}

/* One config against the bounds --help states. */
static int check_bounds(const kvl_model *m, const char *layers, const char *window)
{
    kvl_kv_footprint f;
    KVL_TRY(kvl_kv_footprint_of(&f, m));
    KVL_TRY(kvl_bound_ratios(m, MAX_RATIO));
    KVL_TRY(kvl_bound_field(m, layers, m->n_layers, MIN_LAYERS, MAX_LAYERS));
    KVL_TRY(kvl_bound_field(m, window, m->window, 2, MAX_WINDOW));
    return kvl_bound_field(m, "index_topk", m->index_topk, 1, MAX_TOPK);
}

/* The work of sections 2 and 3 against MAX_PROMPT_VALUES and MAX_PERSIST_VALUES, naming the
 * flag. */
static int bound_work(const kvl_model *v41, const kvl_model *v4, const options *o)
{
    kvl_model m = *v41;
    narrow(&m);
    double v = 0;
    size_t longest = 0;
    char list[MAX_PROMPTS * 12] = "";
    for (size_t i = 0; i < o->n_prompts; i++) {
        v += kvl_v41_entry_values(&m, o->prompts[i]);
        longest = o->prompts[i] > longest ? o->prompts[i] : longest;
        const size_t at = strlen(list);
        snprintf(list + at, sizeof list - at, "%s%zu", i ? "," : "", o->prompts[i]);
    }
    if (v > MAX_PROMPT_VALUES) {
        size_t lo = 0, hi = longest;   /* one prompt of lo tokens fits, of hi does not */
        while (hi - lo > 1) {
            const size_t mid = lo + (hi - lo) / 2;
            *(kvl_v41_entry_values(&m, mid) <= MAX_PROMPT_VALUES ? &lo : &hi) = mid;
        }
        return kvl_fail(KVL_EINVAL,
                        "--prompts %s: their prefills' queries would read %s values of compressed "
                        "entries, more than %s (one prompt of at most %zu tokens)",
                        list, KVL_GROUPED(v), KVL_GROUPED(MAX_PROMPT_VALUES), lo);
    }
    const kvl_model small = v4_small(v4);
    return kvl_bound_v4_tokens(&small, "--persist-tokens", o->persist_tokens, o->persist_tokens,
                               MAX_PERSIST_VALUES);
}

/* Both configs against the bounds, and every stack the run builds made and run over a few tokens: a
 * config the program cannot run is refused before the first line. */
static int check_configs(const kvl_model *v41, const kvl_model *v4, const options *o)
{
    KVL_TRY(check_bounds(v41, "n_layers (num_hidden_layers)", "window_size (sliding_window)"));
    KVL_TRY(check_bounds(v4, "num_hidden_layers (n_layers)", "sliding_window (window_size)"));
    kvl_model m = *v41;
    narrow(&m);
    const kvl_model small = v41_small(v41);
    int rc = probe_v41(&m, V41_CACHE_F32, o->seed);
    if (rc == KVL_OK) rc = probe_v41(&small, V41_CACHE_NATIVE, o->seed);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", v41->path, kvl_error());
    rc = probe_v4(v4, o->seed);
    return rc == KVL_OK ? bound_work(v41, v4, o) : kvl_fail(rc, "%s: %s", v4->path, kvl_error());
}

static int run(const kvl_model *v41, const kvl_model *v4, const options *o)
{
    stack real, st;
    int rc = v41_stack_config_from_model(&real.s, v41);
    if (rc == KVL_OK) {
        printf("replay: V4.1-Flash's causal encoder-decoder and bounded replay (%s)\n\n", V41);
        print_work(&real.s);
        v41_stack_config_free(&real.s);
    }
    kvl_model m = *v41;
    narrow(&m);
    if (rc == KVL_OK) rc = stack_make(&st, &m, o->seed);
    if (rc != KVL_OK) return rc;
    size_t longest = 0;
    for (size_t i = 0; i < o->n_prompts; i++)
        longest = o->prompts[i] > longest ? o->prompts[i] : longest;
    kvl_rng rng;
    kvl_rng_seed(&rng, o->seed + 4);
    float *x = normals((longest + 1) * st.d, &rng);
    if (!x) rc = kvl_fail(KVL_ENOMEM, "replay: out of memory for a %zu-token prompt", longest);
    if (rc == KVL_OK) rc = print_replay(&st, x, o);
    free(x);
    stack_free(&st);
    if (rc == KVL_OK) rc = print_files(v41, v4, o);
    return rc;
}

/* Both configs read and checked: KVL_OK with both to free, else neither. */
static int load_both(kvl_model *v41, kvl_model *v4, const options *o)
{
    KVL_TRY(load(v41, V41));
    int rc = load(v4, V4);
    if (rc != KVL_OK) {
        kvl_model_free(v41);
        return rc;
    }
    rc = check_configs(v41, v4, o);
    if (rc != KVL_OK) {
        kvl_model_free(v41);
        kvl_model_free(v4);
    }
    return rc;
}

enum { F_PROMPTS, F_PERSIST_TOKENS, F_SEED };
static const kvl_flag FLAGS[] = {{"--prompts", 1}, {"--persist-tokens", 1}, {"--seed", 1}};

#define WORK_DIR_NAME "/kvl-replay-XXXXXX"

/* o->dir: a new directory under $TMPDIR (where set and not empty), else under /tmp. 0, or the
 * exit status after one line: 2 naming TMPDIR when it is too long or no directory can be made in
 * it, 1 when none can be made in /tmp. */
static int make_work_dir(options *o)
{
    const char *tmp = getenv("TMPDIR");
    const int given = tmp && *tmp;
    char shown[96];
    if (given && strlen(tmp) + sizeof WORK_DIR_NAME > sizeof o->dir) {
        fprintf(stderr, "replay: TMPDIR=%s: longer than %zu characters, more than the prefix "
                        "files' paths hold\n",
                kvl_shown(shown, sizeof shown, tmp), sizeof o->dir - sizeof WORK_DIR_NAME);
        return 2;
    }
    snprintf(o->dir, sizeof o->dir, "%s" WORK_DIR_NAME, given ? tmp : "/tmp");
    if (mkdtemp(o->dir)) return 0;
    fprintf(stderr, "replay: %s%s: cannot make a directory for the prefix files there: %s\n",
            given ? "TMPDIR=" : "", kvl_shown(shown, sizeof shown, given ? tmp : "/tmp"),
            strerror(errno));
    return given ? 2 : 1;
}

int main(int argc, char **argv)
{
    options o = {.persist_tokens = 2048, .seed = 11};
    if (kvl_parse_contexts(o.prompts, &o.n_prompts, MAX_PROMPTS, MAX_PROMPT, "1K,4K") != KVL_OK)
        return 1;
    kvl_args a = kvl_args_start("replay", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *v;
    size_t n;
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) {
            usage(stdout);
            return kvl_exit_status("replay", 0);
        }
        if (k == KVL_ARGS_BAD) return 2;
        if (k == F_PROMPTS) {
            int ok =
                kvl_parse_contexts(o.prompts, &o.n_prompts, MAX_PROMPTS, MAX_PROMPT, v) == KVL_OK;
            for (size_t j = 0; ok && j < o.n_prompts; j++) ok = o.prompts[j] >= 256;
            if (!ok)
                return kvl_bad_usage(
                    "replay", "--prompts takes up to 8 lengths of 256..64K tokens, as 1K,4K", v);
        }
        if (k == F_PERSIST_TOKENS && kvl_parse_size(&o.persist_tokens, v, 256, MAX_PERSIST))
            return kvl_bad_usage("replay", "--persist-tokens must be an integer in [256, 16384]",
                                 v);
        if (k == F_SEED && kvl_parse_size(&n, v, 0, UINT32_MAX))
            return kvl_bad_usage("replay", "--seed must be an integer in [0, 2^32)", v);
        if (k == F_SEED) o.seed = n;
    }
    int rc = make_work_dir(&o);
    if (rc != 0) return rc;
    kvl_progress_start("replay");
    kvl_progress("checking the configs");
    kvl_model v41, v4;
    if (load_both(&v41, &v4, &o) != KVL_OK) {   /* bad input: 2, before any output */
        rmdir(o.dir);
        kvl_progress_stop();
        fprintf(stderr, "replay: %s\n", kvl_error());
        return 2;
    }
    rc = run(&v41, &v4, &o);
    kvl_model_free(&v41);
    kvl_model_free(&v4);
    static const char *const files[] = {"v41-narrow.kvp", "v41.kvp", "v4-global.kvp",
                                        "v4-window.kvp"};
    for (size_t i = 0; i < sizeof files / sizeof *files;
         i++) { /* left behind only by a failed run */
        char path[288];
        snprintf(path, sizeof path, "%s/%s", o.dir, files[i]);
        remove(path);
    }
    rmdir(o.dir);
    kvl_progress_stop();
    if (rc != KVL_OK) {
        fprintf(stderr, "replay: %s\n", kvl_error());
        return 1;
    }
    return kvl_exit_status("replay", 0);
}
