/* swa_reach: how far a token reaches through stacked sliding windows, in theory and in a toy
 * stack (chapter 3; chapters/03_swa/README.md).
 *
 * A window of W keys includes the query, so one layer moves information at most W − 1 positions
 * forward, and L layers at most L·(W − 1). The program replaces token 0 of a random input, runs
 * a toy ref/model stack of windowed layers on both inputs, and prints ‖Δ out_t‖ grouped by hops
 * of W − 1 positions: every output beyond the theoretical reach is bit-identical, the influence
 * inside it falls off hop by hop, and an effective reach (where the change drops below a
 * threshold) is measured per depth. Carried end to end, the change at the far edge can fall below
 * float32's resolution and round away, so the reach itself is measured layer by layer, the change
 * restored to full size after each (toy_layers). Then the Mistral 7B figures, computed from its
 * config (chapters/03_swa/mistral-7b.json): the cache a window saves at the full context, checked
 * on a live ref/mha ring, and the stacked reach with the query-inclusive window against the
 * Mistral 7B paper's k·W (L·W here). Everything is run and checked before the first line is
 * printed.
 *
 *   swa_reach [--layers L] [--window W] [--threshold R] [--seed S]
 *
 * Configs are found under $KVL_ROOT, else the source tree. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "config.h"
#include "grouped.h"
#include "mha.h"
#include "model.h"
#include "program.h"
#include "rng.h"
#include "status.h"
#include "swa.h"

#define MAX_LAYERS 16
#define MAX_WINDOW 64
#define TOY_MLP 128
#define MAX_CONTEXT 1048576   /* max_position_embeddings the live ring is run through */
#define MAX_RING_GIB 2.0      /* memory the live ring may take */
#define RING_BLOCK 256        /* rows appended to it at a time */
#define GIB 1073741824.0

/* The toy layer of tests/test_ch01_mha.c (d 64, H 4, Dh 16) at Hkv 2 with a window, stacked. */
static const char TOY_STACK[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": %zu, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 16, \"sliding_window\": %zu}";

static const char MISTRAL[] = "chapters/03_swa/mistral-7b.json";

typedef struct {
    size_t layers, window;
    double threshold;
    uint64_t seed;
} options;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: swa_reach [--layers L] [--window W] [--threshold R] [--seed S]\n"
        "Influence of token 0 on every later output of a toy stack of L windowed layers (1..%d,\n"
        "default 4) of window W (2..%d, default 8), by hop, against the reach L*(W-1), which is\n"
        "measured layer by layer; the effective reach is the last position whose change is at least\n"
        "R (default 0.01) of token 0's own.\n"
        "Then the Mistral 7B window figures, computed from %s, whose max_position_embeddings\n"
        "must be at most %d and whose live ring at most %.0f GiB.\n",
        MAX_LAYERS, MAX_WINDOW, MISTRAL, MAX_CONTEXT, MAX_RING_GIB);
    kvl_usage_backend(f);
}

/* ---- the toy stack --------------------------------------------------------------------------- */

/* What the toy stack shows, measured at every depth l = 1 … L before anything is printed. */
typedef struct {
    size_t T;
    size_t *reached;     /* [L] last output of layer l that moved, the change kept at full size */
    size_t *last;        /* [L] last output of depth l that moved, token 0's change end to end */
    size_t *effective;   /* [L] last output of depth l changed end to end by ≥ R·‖Δ out_0‖ */
    double *delta;       /* [T] ‖Δ out_t‖₂ of the top layer, end to end */
    int *same;           /* [T] the top layer's rows that are bit-identical, end to end */
} toy_run;

static void toy_run_free(toy_run *r)
{
    free(r->reached);
    free(r->last);
    free(r->effective);
    free(r->delta);
    free(r->same);
}

/* The toy stack of L windowed layers of window W, its weights drawn from `seed` layer by layer. On
 * failure nothing is left to free. */
static int toy_stack(model_config *c, model_weights *w, size_t L, size_t W, uint64_t seed)
{
    char json[512];
    snprintf(json, sizeof json, TOY_STACK, L, W);
    kvl_model m;
    kvl_rng rng;
    int rc = kvl_model_parse(&m, json, strlen(json), "toy stack");
    if (rc != KVL_OK) return rc;
    rc = model_config_from_model(c, &m, TOY_MLP, MODEL_MLP_SWIGLU);
    kvl_model_free(&m);
    if (rc != KVL_OK) return rc;
    kvl_rng_seed(&rng, seed);
    rc = model_weights_init_random(w, c, &rng);
    if (rc != KVL_OK) model_config_free(c);
    return rc;
}

/* out[T][d] = layer l of the stack alone on in[T][d]: the stack's own code on a one-layer view of
 * it, so that the layers run one after another give model_forward's outputs bit for bit. */
static int one_layer(float *out, const model_config *c, const model_weights *w, size_t l,
                     const float *in, size_t T)
{
    model_config cl = *c;
    const model_weights wl = {.n_layers = 1, .layers = w->layers + l};
    cl.n_layers = 1;
    cl.layers = c->layers + l;
    return model_forward(out, &cl, &wl, in, T);
}

/* delta[T] = ‖a_t − b_t‖₂ and same[T] = the bit-identical rows of a, b [T][d]; returns the last row
 * that differs (0 when none does). */
static size_t row_changes(double *delta, int *same, const float *a, const float *b, size_t T,
                          size_t d)
{
    size_t last = 0;
    for (size_t t = 0; t < T; t++) {
        double s = 0;
        for (size_t i = 0; i < d; i++) {
            const double e = (double)a[t * d + i] - b[t * d + i];
            s += e * e;
        }
        delta[t] = sqrt(s);
        same[t] = memcmp(a + t * d, b + t * d, d * sizeof *a) == 0;
        if (!same[t]) last = t;
    }
    return last;
}

/* b[T][d] ← a + (b − a) rescaled row by row to an RMS of 1, a redrawn token's size, given
 * delta[T] = ‖a_t − b_t‖₂: the rows that moved stay exactly those, each by a change float32
 * resolves however small it had become. */
static void restore_changes(float *b, const float *a, const double *delta, size_t T, size_t d)
{
    for (size_t t = 0; t < T; t++) {
        if (delta[t] == 0) continue;
        const double k = sqrt((double)d) / delta[t];
        for (size_t i = 0; i < d; i++)
            b[t * d + i] = (float)(a[t * d + i] + k * ((double)b[t * d + i] - a[t * d + i]));
    }
}

/* The stack run three ways, layer by layer: h on a random x[T][d], e on x with token 0 redrawn (its
 * change carried end to end), f likewise with the change restored to full size after every layer
 * (restore_changes). The end-to-end change fades by about the weight of a window's oldest key per
 * hop, and far enough out it falls below float32's resolution of the rows it is added to and
 * rounds away: the last output it moves can fall short of the reach, never beyond it. Restored at
 * every layer, it measures the reach itself: which outputs of layer l read an input that token 0
 * reached. */
static int toy_layers(toy_run *r, const model_config *c, const model_weights *w, const options *o)
{
    const size_t T = r->T, n = T * c->d;
    float *buf = malloc(6 * n * sizeof *buf);
    double *scratch = malloc(T * sizeof *scratch);
    if (!buf || !scratch) {
        free(buf);
        free(scratch);
        return kvl_fail(KVL_ENOMEM, "out of memory for %zu tokens", T);
    }
    float *h = buf, *e = h + n, *f = e + n, *h2 = f + n, *e2 = h2 + n, *f2 = e2 + n, *s;
    kvl_rng rng;
    kvl_rng_seed(&rng, o->seed + 1);
    kvl_rng_normal_f32(&rng, h, n, 1.0);
    memcpy(e, h, n * sizeof *e);
    kvl_rng_normal_f32(&rng, e, c->d, 1.0);   /* a different token 0 */
    memcpy(f, e, n * sizeof *f);
    int rc = KVL_OK;
    for (size_t l = 0; l < c->n_layers && rc == KVL_OK; l++) {
        rc = one_layer(h2, c, w, l, h, T);
        if (rc == KVL_OK) rc = one_layer(e2, c, w, l, e, T);
        if (rc == KVL_OK) rc = one_layer(f2, c, w, l, f, T);
        if (rc != KVL_OK) break;
        s = h, h = h2, h2 = s;
        s = e, e = e2, e2 = s;
        s = f, f = f2, f2 = s;
        r->reached[l] = row_changes(scratch, r->same, h, f, T, c->d);
        restore_changes(f, h, scratch, T, c->d);
        r->last[l] = row_changes(r->delta, r->same, h, e, T, c->d);
        r->effective[l] = 0;
        for (size_t t = 0; t < T; t++)
            if (r->delta[t] >= o->threshold * r->delta[0]) r->effective[l] = t;
    }
    free(buf);
    free(scratch);
    return rc;
}

/* r = the toy stack's measurements (above) for the options o. On failure nothing is left to
 * free. */
static int toy_measure(toy_run *r, const options *o)
{
    const size_t L = o->layers, W = o->window;
    memset(r, 0, sizeof *r);
    r->T = L * (W - 1) + 2 * W;
    model_config c;
    model_weights w;
    KVL_TRY(toy_stack(&c, &w, L, W, o->seed));
    r->reached = malloc(L * sizeof *r->reached);
    r->last = malloc(L * sizeof *r->last);
    r->effective = malloc(L * sizeof *r->effective);
    r->delta = malloc(r->T * sizeof *r->delta);
    r->same = malloc(r->T * sizeof *r->same);
    int rc = r->reached && r->last && r->effective && r->delta && r->same
                 ? toy_layers(r, &c, &w, o)
                 : kvl_fail(KVL_ENOMEM, "out of memory for %zu tokens", r->T);
    model_weights_free(&w);
    model_config_free(&c);
    if (rc != KVL_OK) toy_run_free(r);
    return rc;
}

/* KVL_OK when the stack measured what the window rule says: depth l reaches exactly l·(W − 1), and
 * end to end nothing beyond it moved. */
static int toy_check(const toy_run *r, size_t L, size_t W)
{
    for (size_t l = 1; l <= L; l++) {
        if (r->reached[l - 1] != l * (W - 1))
            return kvl_fail(KVL_EINVAL,
                            "the toy stack's depth %zu reaches output %zu, not l*(W-1) = %zu", l,
                            r->reached[l - 1], l * (W - 1));
        if (r->last[l - 1] > l * (W - 1))
            return kvl_fail(KVL_EINVAL,
                            "the toy stack's depth %zu moved output %zu, beyond l*(W-1) = %zu", l,
                            r->last[l - 1], l * (W - 1));
    }
    return KVL_OK;
}

/* The last layer's outputs, by hop: hop h ≥ 1 holds positions (h−1)(W−1)+1 … h(W−1), the ones a
 * change first reaches through h layers; hop 0 is token 0 itself. */
static void print_hops(const toy_run *r, size_t L, size_t W)
{
    const size_t reach = L * (W - 1), T = r->T;
    const double *delta = r->delta;
    printf("\n%6s %12s %14s %14s %14s\n", "hop", "positions", "max |d out|", "mean |d out|",
           "max / |d out_0|");
    for (size_t h = 0; h <= L; h++) {
        size_t lo = h ? (h - 1) * (W - 1) + 1 : 0, hi = h * (W - 1);
        double mx = 0, sum = 0;
        for (size_t t = lo; t <= hi; t++) { mx = fmax(mx, delta[t]); sum += delta[t]; }
        printf("%6zu %6zu..%-5zu %14.6g %14.6g %14.3e\n", h, lo, hi, mx,
               sum / (double)(hi - lo + 1), mx / delta[0]);
    }
    size_t identical = 0;
    for (size_t t = reach + 1; t < T; t++) identical += r->same[t] != 0;
    printf("%6s %6zu..%-5zu %14s   %zu of %zu rows bit-identical\n", "beyond", reach + 1, T - 1,
           "0", identical, T - 1 - reach);
    printf(
        "theoretical reach L*(W-1) = %zu*%zu = %zu; measured: %zu; last output that moved end to end: %zu\n",
        L, W - 1, reach, r->reached[L - 1], r->last[L - 1]);
}

static void toy_print(const toy_run *r, const options *o)
{
    const size_t L = o->layers, W = o->window;
    printf(
        "Stacked windows in a toy stack (ref/model): d 64, H 4, Hkv 2, Dh 16, SwiGLU %d, W %zu, L %zu, T %zu.\n"
        "Token 0 is redrawn; |d out_t| is the L2 change of output t. A window of W keys includes the query,\n"
        "so a hop moves at most W-1 = %zu positions.\n",
        TOY_MLP, W, L, r->T, W - 1);
    printf("\n%6s %15s %10s %12s %17s\n", "depth", "reach l*(W-1)", "measured", "last moved",
           "effective reach");
    for (size_t l = 1; l <= L; l++)
        printf("%6zu %15zu %10zu %12zu %17zu\n", l, l * (W - 1), r->reached[l - 1], r->last[l - 1],
               r->effective[l - 1]);
    printf(
        "(measured: the last output of layer l that moves when every input row that moved is moved by a change\n"
        " of RMS 1, the change restored to full size after each layer so that float32 resolves it;\n"
        " last moved: token 0's change carried end to end, which fades hop by hop and, far enough out, rounds\n"
        " away below float32's resolution: it may fall short of the reach, never beyond it;\n"
        " effective reach: the last position whose end-to-end change is at least %g of |d out_0|)\n",
        o->threshold);
    print_hops(r, L, W);
}

/* ---- Mistral 7B ------------------------------------------------------------------------------ */

/* max_position_embeddings of the config file (not part of kvl_model: only this chapter needs
 * it). */
static int context_of(size_t *out, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return kvl_fail(KVL_EIO, "%s: cannot open: %s", path, strerror(errno));
    char buf[1 << 14];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *root = cJSON_Parse(buf);
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "max_position_embeddings");
    int rc =
        cJSON_IsNumber(it) && it->valuedouble >= 1 && it->valuedouble <= 1e9
            ? KVL_OK
            : kvl_fail(KVL_EINVAL,
                       "%s: field \"max_position_embeddings\" missing or not a positive integer",
                       path);
    if (rc == KVL_OK) *out = (size_t)it->valuedouble;
    cJSON_Delete(root);
    return rc;
}

/* Bytes one layer's ref/mha cache holds after `context` tokens, appended in blocks of zero rows. */
static int live_ring_bytes(size_t *out, const mha_config *c, size_t context)
{
    mha_cache cache;
    int rc = mha_cache_init(&cache, c, context, KV_STORE_BF16);
    const size_t block = RING_BLOCK;
    float *rows = rc == KVL_OK ? calloc(block * cache.ring.width, sizeof *rows) : NULL;
    if (rc == KVL_OK && !rows) rc = kvl_fail(KVL_ENOMEM, "swa_reach: out of memory");
    for (size_t t = 0; t < context && rc == KVL_OK; t += block)
        rc = kv_ring_append(&cache.ring, rows, context - t < block ? context - t : block);
    if (rc == KVL_OK) *out = mha_cache_bytes_used(&cache);
    free(rows);
    mha_cache_free(&cache);
    return rc;
}

typedef struct {
    kvl_model m;
    mha_config c;
    size_t context;   /* max_position_embeddings */
} mistral_model;

/* The Mistral config, read and checked against what the figures run before anything is printed. On
 * failure nothing is left to free. */
static int mistral_load(mistral_model *mm)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", kvl_root_dir(), MISTRAL);
    kvl_model *m = &mm->m;
    int rc = kvl_model_load(m, path);
    if (rc != KVL_OK) return rc;
    rc = context_of(&mm->context, path);
    if (rc == KVL_OK && m->window == 0) rc = kvl_fail(KVL_EINVAL, "%s: no sliding_window", path);
    if (rc == KVL_OK)
        rc = kvl_bound_field(m, "max_position_embeddings", mm->context, 1, MAX_CONTEXT);
    if (rc == KVL_OK &&
        m->window >= mm->context) /* the figures compare a window with the full context */
        rc = kvl_fail(KVL_EINVAL,
                      "%s: field sliding_window is %zu, not below max_position_embeddings %zu",
                      path, m->window, mm->context);
    if (rc == KVL_OK && mha_config_from_model(&mm->c, m, 0) != KVL_OK)
        rc = kvl_fail(KVL_EINVAL, "%s: %s", path, kvl_error());
    if (rc == KVL_OK) {
        const double rows = (double)(m->window < mm->context ? m->window : mm->context);
        const double bytes = (double)(2 * mm->c.n_kv_heads * mm->c.head_dim) *
                             (rows * 2 + RING_BLOCK * sizeof(float));
        char fields[160];
        snprintf(fields, sizeof fields,
                 "sliding_window %zu, num_key_value_heads %zu and head_dim %zu", m->window,
                 mm->c.n_kv_heads, mm->c.head_dim);
        rc = kvl_bound_run(m, fields, bytes / GIB, MAX_RING_GIB, "GiB of memory");
    }
    if (rc != KVL_OK) kvl_model_free(m);
    return rc;
}

/* *live = the bytes of one layer's live ring at the full context; KVL_OK when they are W
 * entries. */
static int mistral_measure(size_t *live, const mistral_model *mm)
{
    KVL_TRY(live_ring_bytes(live, &mm->c, mm->context));
    const size_t row = 2 * mm->c.n_kv_heads * mm->c.head_dim * kv_store_bytes(KV_STORE_BF16);
    if (*live == mm->m.window * row) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "one layer's live ring holds %zu B, not W = %zu entries of %zu B",
                    *live, mm->m.window, row);
}

static void mistral_print(const mistral_model *mm, size_t live)
{
    char a[32], b[32], e[32];
    const kvl_model *m = &mm->m;
    const mha_config *c = &mm->c;
    const size_t C = mm->context;
    const size_t L = m->n_layers, W = m->window;
    const size_t row = 2 * c->n_kv_heads * c->head_dim * kv_store_bytes(KV_STORE_BF16);
    printf(
        "\n%s (%s): %zu layers, window W = %s, GQA-%zu, head dim %zu, bf16; context %s tokens.\n",
        m->name, MISTRAL, L, kvl_grouped(a, sizeof a, W, 0), c->n_kv_heads, c->head_dim,
        kvl_grouped(b, sizeof b, C, 0));
    printf(
        "  cache per layer at %s tokens: full %s entries, windowed %s: %zux smaller (ring slot of position p: p mod %s)\n",
        kvl_grouped(a, sizeof a, C, 0), kvl_grouped(b, sizeof b, C, 0),
        kvl_grouped(e, sizeof e, W, 0), C / W, KVL_GROUPED(W));
    printf(
        "  bytes at %s tokens, all %zu layers: full %s MiB, windowed %s MiB (%s B per entry per layer)\n",
        kvl_grouped(a, sizeof a, C, 0), L, KVL_GROUPED((double)(L * C * row) / 1048576.0),
        KVL_GROUPED((double)(L * W * row) / 1048576.0), kvl_grouped(b, sizeof b, row, 0));
    printf(
        "  live: one layer's ref/mha ring after %s tokens holds %s B = W x %s B (as the formula says)\n",
        kvl_grouped(a, sizeof a, C, 0), kvl_grouped(b, sizeof b, live, 0),
        kvl_grouped(e, sizeof e, row, 0));
    printf("  stacked reach, query-inclusive window: L*(W-1) = %zu*%s = %s positions\n", L,
           KVL_GROUPED(W - 1), kvl_grouped(a, sizeof a, L * (W - 1), 0));
    printf("  the Mistral 7B paper's k*W:            L*W     = %zu*%s = %s positions\n", L,
           KVL_GROUPED(W), kvl_grouped(b, sizeof b, L * W, 0));
    printf(
        "  the %zu between them: a window of W keys that includes the query reaches W-1 positions back per\n"
        "  layer; L*W counts W per layer, as if each window held W keys besides the query.\n",
        L * W - L * (W - 1));
}

/* ---- main ------------------------------------------------------------------------------------ */

enum { F_LAYERS, F_WINDOW, F_THRESHOLD, F_SEED };
static const kvl_flag FLAGS[] = {
    {"--layers", 1}, {"--window", 1}, {"--threshold", 1}, {"--seed", 1}};

int main(int argc, char **argv)
{
    options o = {.layers = 4, .window = 8, .threshold = 1e-2, .seed = 3};
    kvl_args a = kvl_args_start("swa_reach", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *v;
    size_t n;
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) { usage(stdout); return kvl_exit_status("swa_reach", 0); }
        if (k == KVL_ARGS_BAD) return 2;
        if (k == F_LAYERS && kvl_parse_size(&o.layers, v, 1, MAX_LAYERS))
            return kvl_bad_usage("swa_reach", "--layers must be an integer in [1, 16]", v);
        if (k == F_WINDOW && kvl_parse_size(&o.window, v, 2, MAX_WINDOW))
            return kvl_bad_usage("swa_reach", "--window must be an integer in [2, 64]", v);
        if (k == F_SEED && kvl_parse_size(&n, v, 0, UINT32_MAX))
            return kvl_bad_usage("swa_reach", "--seed must be an integer in [0, 2^32)", v);
        if (k == F_SEED) o.seed = n;
        if (k == F_THRESHOLD &&
            (kvl_parse_real(&o.threshold, v, 0, 1) || !(o.threshold > 0 && o.threshold < 1)))
            return kvl_bad_usage("swa_reach", "--threshold must be a number in (0, 1)", v);
    }
    /* Everything is read, run and checked before the first line: a bad config is refused (2), and a
     * measurement that contradicts the window rule fails (1), with nothing on stdout either way. */
    mistral_model mm;
    if (mistral_load(&mm) != KVL_OK) {
        fprintf(stderr, "swa_reach: %s\n", kvl_error());
        return 2;
    }
    toy_run r;
    size_t live = 0;
    int rc = toy_measure(&r, &o);
    if (rc == KVL_OK) {
        rc = toy_check(&r, o.layers, o.window);
        if (rc == KVL_OK) rc = mistral_measure(&live, &mm);
        if (rc == KVL_OK) {
            toy_print(&r, &o);
            mistral_print(&mm, live);
        }
        toy_run_free(&r);
    }
    kvl_model_free(&mm.m);
    if (rc != KVL_OK) {
        fprintf(stderr, "swa_reach: %s\n", kvl_error());
        return 1;
    }
    return kvl_exit_status("swa_reach", 0);
}
