/* serving: what each GPU of a deployment holds of the lineage's KV caches, and how many tokens
 * and sequences of a context fit in the memory it has left for the cache (chapter 9). Every
 * figure is derived from the configs in ref/configs/ and the row sizes of formats/
 * (ref/serving.h).
 *
 *   serving [--gpus N] [--tp N] [--page N] [--context T]
 *           [--budget-gib G | --memory-gib G [--activations F]] [--weights native|bf16|fp8]
 *           [--cache native|bf16|v32-fp8|v4-fp8|v41-fp4] [--svg FILE] [CONFIG.json ...]
 *
 * Without CONFIG arguments it reads every .json file in ref/configs/, ordered by release date. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "file_io.h"
#include "grouped.h"
#include "kvtable.h"
#include "params.h"
#include "program.h"
#include "svg.h"
#include "serving.h"
#include "status.h"

#define GIB 1073741824.0

typedef struct {
    kvl_model model;
    kvl_kv_footprint kv;
    kvl_params params;
    kvl_rank_cache rank[2];   /* [0]: tensor-parallel attention; [1]: data-parallel attention */
    double weights[2];        /* bytes of weights on one GPU */
    double budget[2];         /* bytes of cache on one GPU */
    kvl_fit fit[2];
} row;

/* How the weights are stored: as the config's checkpoint ships them, or all bf16, or all FP8. */
enum { WEIGHTS_NATIVE, WEIGHTS_BF16, WEIGHTS_FP8 };

typedef struct {
    kvl_deployment d;   /* dp_attention set per column */
    size_t context;
    double budget;      /* bytes of cache per GPU, when memory is 0 */
    double memory;      /* bytes per GPU; the cache gets what activations and the weights leave */
    double activations; /* the fraction of memory kept for activations */
    int weights;
    int cache;          /* a kvl_cache_layout for every model, or -1: each config's own */
} plan;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: serving [--gpus N] [--tp N] [--page N] [--context T]\n"
        "               [--budget-gib G | --memory-gib G [--activations F]] [--weights native|bf16|fp8]\n"
        "               [--cache native|bf16|v32-fp8|v4-fp8|v41-fp4] [--svg FILE] [CONFIG.json|MODEL.gguf ...]\n"
        "Prints, per GPU and per node of the deployment, the KV cache bytes per token, the window bytes\n"
        "per sequence, the tokens and sequences of the context that fit in the cache budget, and the\n"
        "weights each GPU holds, with and without data-parallel attention. The budget is G GiB of\n"
        "cache per GPU (--budget-gib), or what a GPU of G GiB (--memory-gib) has left after the\n"
        "fraction F for activations (default 0.1) and its weights, counted from the config's shapes as\n"
        "its checkpoint stores them (native) or all in bf16 or FP8. --cache prices every model's cache\n"
        "in one row layout (chapter 8's; a config whose dims the layout does not hold is refused)\n"
        "instead of its own. Defaults: 8 GPUs, tp 8, page 64,\n"
        "context 131072, budget 100 GiB per GPU. Without CONFIG arguments: every ref/configs/ *.json\n"
        "by date. A GGUF file (MODEL.gguf, llama.cpp's format: architectures deepseek2 and llama) is read\n"
        "wherever a config is, from its metadata; its cache is the one llama.cpp keeps, f16 by default.\n");
    kvl_usage_model_types(f);
}

/* ---- the table ------------------------------------------------------------------------------- */

static const char *const WEIGHT_NAMES[] = {"native", "bf16", "fp8"};

/* What the cache gets, in words: "budget 100 GiB per GPU" or the memory it is left from. */
static void budget_text(char *out, size_t cap, const plan *p)
{
    if (p->memory > 0)
        snprintf(out, cap, "%s GiB per GPU, %s of it for activations, %s weights",
                 kvl_grouped((char[32]){0}, 32, p->memory / GIB, 2),
                 kvl_grouped((char[32]){0}, 32, p->activations, 2), WEIGHT_NAMES[p->weights]);
    else
        snprintf(out, cap, "budget %s GiB per GPU",
                 kvl_grouped((char[32]){0}, 32, p->budget / GIB, 2));
}

static void print_mode(const row *rows, size_t n, int dp, const plan *p)
{
    char budget[96];
    budget_text(budget, sizeof budget, p);
    printf("%s attention (tp %zu, %zu GPUs, page %zu, context %s, %s)\n",
           dp ? "data-parallel" : "tensor-parallel", p->d.tp, p->d.gpus, p->d.page,
           KVL_GROUPED(p->context), budget);
    printf("  %-20s %10s %14s %16s %14s %14s %10s %10s %12s %12s\n", "model", "B/token",
           "window B/seq", "B/seq", "tokens/GPU", "tokens/node", "seqs/GPU", "seqs/node",
           "weights GiB", "cache GiB");
    for (size_t i = 0; i < n; i++) {
        const kvl_rank_cache *r = &rows[i].rank[dp];
        const kvl_fit *f = &rows[i].fit[dp];
        printf("  %-20s %10s %14s %16s %14s %14s %10s %10s %12s %12s\n", rows[i].model.name,
               kvl_grouped((char[32]){0}, 32, r->bytes_per_token, 2),
               KVL_GROUPED(kvl_rank_window_bytes(&rows[i].model, r, &p->d)),
               KVL_GROUPED(f->sequence_bytes),
               KVL_GROUPED(f->tokens_per_gpu), KVL_GROUPED(f->tokens_per_node),
               KVL_GROUPED(f->sequences_per_gpu), KVL_GROUPED(f->sequences_per_node),
               kvl_grouped((char[32]){0}, 32, rows[i].weights[dp] / GIB, 1),
               kvl_grouped((char[32]){0}, 32, rows[i].budget[dp] / GIB, 1));
    }
}

/* Each model's per-token bytes on one GPU by layer kind: "CSA 21 x 163 = 3,423". */
static void print_kinds(const row *rows, size_t n)
{
    printf(
        "\nB/token on one GPU by layer kind (tensor-parallel attention; a kind that reads another\n"
        "layer's entries, or keeps only its window, adds none):\n");
    for (size_t i = 0; i < n; i++) {
        const kvl_rank_cache *r = &rows[i].rank[0];
        printf("  %-20s", rows[i].model.name);
        for (int k = 0, first = 1; k < KVL_N_LAYER_KINDS; k++) {
            if (!r->kind_layers[k]) continue;
            printf("%s%s %zu x %s = %s", first ? " " : "; ", kvl_layer_kind_name((kvl_layer_kind)k),
                   r->kind_layers[k],
                   kvl_grouped((char[32]){0}, 32, r->kind_bytes[k] / (double)r->kind_layers[k], 2),
                   kvl_grouped((char[32]){0}, 32, r->kind_bytes[k], 2));
            first = 0;
        }
        printf("\n");
    }
}

static void print_notes(void)
{
    printf(
        "\nB/token and window B/seq: what one GPU stores. MHA/GQA's KV heads are split over the tp ranks;\n"
        "a latent row (MLA, DSA) and V4's shared entry are whole on every rank. With data-parallel\n"
        "attention each rank holds whole rows for its own sequences, so a node's tokens are the ranks'\n"
        "sum. window B/seq: what a sequence keeps however long it grows, V4's W window rows in every\n"
        "layer or the W tokens of a model windowed in every layer (Mistral). B/seq: one sequence of the\n"
        "context in pages of page entries, plus its window rows.\n"
        "tokens/GPU: budget / B/token; seqs/GPU: budget / B/seq, rounded down. weights GiB: one GPU's\n"
        "share, counted from the config's shapes (ref/params.h): experts spread over every GPU, the rest\n"
        "over the tp ranks, attention whole on each rank under data-parallel attention. cache GiB: the\n"
        "budget, given or left by --memory-gib after activations and weights.\n");
}

/* ---- the chart ------------------------------------------------------------------------------- */

/* The chart of sequences of the context per node, tensor- (light) against data-parallel attention
 * (dark), written whole or not at all (ref/core/file_io.h). */
static int write_svg(const char *path, const row *rows, size_t n, const plan *p)
{
    const char **labels = malloc(n * sizeof *labels);
    double *tp = malloc(n * sizeof *tp), *dp = malloc(n * sizeof *dp);
    if (!labels || !tp || !dp) {
        free(labels), free(tp), free(dp);
        fprintf(stderr, "serving: out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        labels[i] = rows[i].model.name, tp[i] = rows[i].fit[0].sequences_per_node,
        dp[i] = rows[i].fit[1].sequences_per_node;
    char title[96], subtitle[200], budget[96];
    snprintf(title, sizeof title, "Sequences of %s tokens per node, log scale",
             KVL_GROUPED(p->context));
    budget_text(budget, sizeof budget, p);
    snprintf(subtitle, sizeof subtitle,
             "%zu GPUs, tp %zu, page %zu, %s; light: tensor-parallel attention, dark: "
             "data-parallel attention",
             p->d.gpus, p->d.tp, p->d.page, budget);
    svg_doc s;
    svg_pair_bars_log(&s, title, subtitle, labels, tp, dp, n);
    free(labels), free(tp), free(dp);
    kvl_file_out o;
    int rc = s.failed ? kvl_fail(KVL_ENOMEM, "out of memory") : kvl_file_out_open(&o, path);
    if (rc == KVL_OK) {
        kvl_file_out_write(&o, s.text, s.len);
        rc = kvl_file_out_commit(&o);
    }
    svg_free(&s);
    if (rc != KVL_OK) {
        fprintf(stderr, "serving: --svg %s\n", kvl_error());
        return 2;
    }
    return 0;
}

/* ---- inputs ---------------------------------------------------------------------------------- */

static int by_date(const void *a, const void *b)
{
    return kvl_model_date_order(&((const row *)a)->model, &((const row *)b)->model);
}

/* One model under both attention splits; 2 after one line on stderr when the config or the plan
 * is bad. */
static int load_row(row *r, const char *path, const plan *p)
{
    int rc = kvl_model_load(&r->model, path);
    if (rc == KVL_OK && p->cache >= 0) r->model.kv_cache = (kvl_cache_layout)p->cache;
    if (rc != KVL_OK || kvl_kv_footprint_of(&r->kv, &r->model) != KVL_OK) {
        fprintf(stderr, "serving: %s\n", kvl_error());
        return 2;
    }
    if (kvl_params_of(&r->params, &r->model) != KVL_OK) {
        fprintf(stderr, "serving: %s\n", kvl_error());
        return 2;
    }
    const kvl_ffn *ffn = &r->model.ffn;
    if (p->weights == WEIGHTS_NATIVE && ffn->ggml_file_type) {
        fprintf(stderr,
                "serving: %s: key \"general.file_type\" is %u, weights in ggml's quantised blocks, "
                "which serving does not price: give --weights bf16 or fp8\n",
                r->model.path, ffn->ggml_file_type);
        return 2;
    }
    static const kvl_weight_format as[] = {KVL_WEIGHTS_BF16, KVL_WEIGHTS_BF16, KVL_WEIGHTS_FP8};
    const kvl_weight_format linear = p->weights == WEIGHTS_NATIVE ? ffn->linear : as[p->weights];
    const kvl_weight_format experts = p->weights == WEIGHTS_NATIVE ? ffn->experts : as[p->weights];
    for (int dp = 0; dp < 2; dp++) {
        kvl_deployment d = p->d;
        d.dp_attention = dp;
        r->weights[dp] = kvl_rank_weight_bytes(&r->params, &d, linear, experts, ffn->scale_e8m0);
        r->budget[dp] =
            p->memory > 0 ? p->memory * (1 - p->activations) - r->weights[dp] : p->budget;
        if (p->memory > 0 && r->budget[dp] <= 0) {
            fprintf(
                stderr,
                "serving: %s: --memory-gib %s leaves %s GiB after activations, below the %s GiB of "
                "weights a GPU holds (%s attention)\n",
                r->model.path, kvl_grouped((char[32]){0}, 32, p->memory / GIB, 2),
                kvl_grouped((char[32]){0}, 32, p->memory * (1 - p->activations) / GIB, 1),
                kvl_grouped((char[32]){0}, 32, r->weights[dp] / GIB, 1),
                dp ? "data-parallel" : "tensor-parallel");
            return 2;
        }
        if (kvl_rank_cache_of(&r->rank[dp], &r->model, &r->kv, &d) != KVL_OK ||
            kvl_fit_of(&r->fit[dp], &r->model, &r->rank[dp], &d, r->budget[dp], p->context) !=
                KVL_OK) {
            fprintf(stderr, "serving: %s\n", kvl_error());
            return 2;
        }
    }
    return 0;
}

enum {
    F_GPUS,
    F_TP,
    F_PAGE,
    F_CONTEXT,
    F_BUDGET,
    F_SVG,
    F_MEMORY,
    F_ACTIVATIONS,
    F_WEIGHTS,
    F_CACHE
};
static const kvl_flag FLAGS[] = {{"--gpus", 1},       {"--tp", 1},  {"--page", 1},
                                 {"--context", 1},    {"--budget-gib", 1}, {"--svg", 1},
                                 {"--memory-gib", 1}, {"--activations", 1}, {"--weights", 1},
                                 {"--cache", 1}};

/* Reads one flag's value into p; 2 after one line on stderr naming the flag and value. */
static int read_flag(plan *p, const char **svg, int k, const char *v)
{
    size_t *counts[] = {&p->d.gpus, &p->d.tp, &p->d.page, &p->context};
    static const char *const why[] = {"--gpus must be a count from 1 to 4096",
                                      "--tp must be a count from 1 to 4096",
                                      "--page must be a count from 1 to 1048576",
                                      "--context must be a count from 1 to 1073741824"};
    static const size_t hi[] = {4096, 4096, 1048576, 1073741824};
    if (k == F_SVG) *svg = v;
    else if (k == F_MEMORY) {
        double g;
        if (kvl_parse_real(&g, v, 1e-9, 1e6))
            return kvl_bad_usage("serving", "--memory-gib must be a number above 0", v);
        p->memory = g * GIB;
    } else if (k == F_ACTIVATIONS) {
        if (kvl_parse_real(&p->activations, v, 0, 0.99))
            return kvl_bad_usage("serving", "--activations must be a fraction from 0 to 0.99", v);
    } else if (k == F_WEIGHTS) {
        size_t i = 0;
        while (i < 3 && strcmp(v, WEIGHT_NAMES[i])) i++;
        if (i == 3) return kvl_bad_usage("serving", "--weights must be native, bf16 or fp8", v);
        p->weights = (int)i;
    } else if (k == F_CACHE) {
        p->cache = -1;
        for (int i = KVL_CACHE_BF16; i <= KVL_CACHE_V41_FP4; i++)
            if (!strcmp(v, kvl_cache_layout_name((kvl_cache_layout)i))) p->cache = i;
        if (p->cache < 0 && strcmp(v, "native"))
            return kvl_bad_usage("serving",
                                 "--cache must be native, bf16, v32-fp8, v4-fp8 or v41-fp4", v);
    } else if (k == F_BUDGET) {
        double g;
        if (kvl_parse_real(&g, v, 1e-9, 1e6))
            return kvl_bad_usage("serving", "--budget-gib must be a number above 0", v);
        p->budget = g * GIB;
    } else if (kvl_parse_size(counts[k], v, 1, hi[k])) return kvl_bad_usage("serving", why[k], v);
    return 0;
}

int main(int argc, char **argv)
{
    plan p = {.d = {.gpus = 8, .tp = 8, .page = 64},
              .context = 131072,
              .budget = 100 * GIB,
              .activations = 0.1,
              .cache = -1};
    const char *svg = NULL;
    char **given = calloc((size_t)argc, sizeof *given);
    size_t n_given = 0;
    if (!given) { fprintf(stderr, "serving: out of memory\n"); return 1; }
    kvl_args a = kvl_args_start("serving", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 1);
    const char *v;
    int status = 0;
    for (int k; !status && (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) {
            usage(stdout);
            free(given);
            return kvl_exit_status("serving", 0);
        }
        if (k == KVL_ARGS_BAD) status = 2;
        else if (k == KVL_ARGS_POSITIONAL) given[n_given++] = (char *)v;
        else status = read_flag(&p, &svg, k, v);
    }
    const unsigned long long given_flags = a.seen;
    if (!status && (given_flags >> F_MEMORY & 1) && (given_flags >> F_BUDGET & 1))
        status = kvl_bad_usage(
            "serving", "--memory-gib and --budget-gib both set the cache budget: give one", NULL);
    if (!status && (given_flags >> F_ACTIVATIONS & 1) && !(given_flags >> F_MEMORY & 1))
        status = kvl_bad_usage(
            "serving", "--activations is a fraction of --memory-gib, which is not given", NULL);
    if (!status && p.d.gpus % p.d.tp) {
        char tp[32];
        snprintf(tp, sizeof tp, "%zu", p.d.tp);
        status = kvl_bad_usage("serving", "--tp must divide --gpus", tp);
    }
    for (size_t i = 0; i < n_given; i++) kvl_file_input(given[i], given[i]);
    if (!status && svg) status = kvl_check_output("serving", "--svg", svg);
    size_t n = n_given;
    char **paths = status ? NULL : given;
    if (!status && !n_given && kvl_config_files(&paths, &n) != KVL_OK) {
        fprintf(stderr, "serving: %s\n", kvl_error());
        paths = NULL;
        status = 2;
    }
    row *rows = n && !status ? calloc(n, sizeof *rows) : NULL;
    if (!status && !n) { fprintf(stderr, "serving: no config files\n"); status = 2; }
    else if (!status && !rows) { fprintf(stderr, "serving: out of memory\n"); status = 1; }
    for (size_t i = 0; i < n && !status; i++) status = load_row(&rows[i], paths[i], &p);
    if (!status) {
        if (!n_given) qsort(rows, n, sizeof *rows, by_date);
        if (svg) status = write_svg(svg, rows, n, &p);
    }
    if (!status) {
        print_mode(rows, n, 0, &p);
        printf("\n");
        print_mode(rows, n, 1, &p);
        print_kinds(rows, n);
        print_notes();
    }
    for (size_t i = 0; rows && i < n; i++) kvl_model_free(&rows[i].model);
    free(rows);
    if (paths && !n_given) kvl_config_files_free(paths, n);
    free(given);
    return kvl_exit_status("serving", status);
}
