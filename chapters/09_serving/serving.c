/* serving: what each GPU of a deployment holds of the lineage's KV caches, and how many tokens
 * and sequences of a context fit in the memory it has left for the cache (chapter 9). Every
 * figure is derived from the configs in ref/configs/ and the row sizes of formats/
 * (ref/serving.h).
 *
 *   serving [--engine plain|vllm|sglang] [--gpu h100|h200|b200] [--speculative none|mtp]
 *           [--gpus N] [--tp N] [--page N] [--context T]
 *           [--budget-gib G | --memory-gib G [--activations F]] [--activation-peak-gib G]
 *           [--weights native|bf16|fp8] [--cache native|bf16|mla-fp8|v32-fp8|v4-fp8|v41-fp4]
 *           [--mtp-layers N] [--format text|json] [--svg FILE] [CONFIG.json ...]
 *
 * Without CONFIG arguments it reads every .json file in ref/configs/, ordered by release date
 * (the plain engine only: vLLM and SGLang are priced on the configs named). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

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
#define MIB 1048576.0

typedef struct {
    kvl_model model;
    kvl_kv_footprint kv;
    kvl_params params;
    kvl_rank_cache rank[2];   /* [0]: tensor-parallel attention; [1]: data-parallel attention */
    double weights[2];        /* bytes of weights on one GPU */
    double budget[2];         /* bytes of cache on one GPU */
    kvl_engine_budget engine[2];  /* the fraction and reserve that left it (with a GPU's memory) */
    size_t page;              /* tokens a page holds: --page or the engine backend's; 0: plain */
    kvl_fit fit[2];           /* zeros where the split does not fit */
    char misfit[2][256];      /* why a split does not fit (its weights, or state rows, leave no
                                 room); empty where it fits */
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
    kvl_gpu gpu;        /* the card: its memory (unless --memory-gib) and its SM generation */
    double activation_peak;  /* vLLM's profiled peak, bytes per GPU */
    int mtp;            /* speculative decoding with the MTP layer as draft */
    size_t mtp_layers;  /* --mtp-layers: the draft's layers where a config does not say; 0: none */
    int page_given;     /* --page given: it overrides an engine's backend's page */
    int gpu_used;       /* the GPU's memory or generation enters the figures (--gpu, an engine) */
    int json;           /* --format json */
} plan;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: serving [--engine plain|vllm|sglang] [--gpu h100|h200|b200] [--speculative none|mtp]\n"
        "               [--gpus N] [--tp N] [--page N] [--context T]\n"
        "               [--budget-gib G | --memory-gib G [--activations F]] [--activation-peak-gib G]\n"
        "               [--weights native|bf16|fp8] [--cache native|bf16|mla-fp8|v32-fp8|v4-fp8|v41-fp4]\n"
        "               [--mtp-layers N] [--format text|json] [--svg FILE] [CONFIG.json|MODEL.gguf ...]\n"
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
        "wherever a config is, from its metadata; its cache is the one llama.cpp keeps, f16 by default.\n"
        "--engine vllm or sglang sizes MHA, MLA, DSA, V4 and V4.1 configs as that engine's code does\n"
        "(ref/serving.h): one engine over the node (--tp equal to\n"
        "--gpus), its own memory fraction and reserve on a GPU of --gpu's memory (or --memory-gib), its\n"
        "weight layout, its cache dtype for the GPU's generation, pools in whole pages; vLLM needs the\n"
        "activation peak its profile run measures (--activation-peak-gib). --speculative mtp adds the\n"
        "MTP layer as a draft: its cache and weights, as many layers as the config's\n"
        "num_nextn_predict_layers, or --mtp-layers N where the config leaves it out. --gpu alone gives\n"
        "the plain engine that GPU's memory. --format json prints one object: the engine, the inputs\n"
        "and a layouts array, one entry per model and attention split. A split whose weights leave no\n"
        "cache, or whose budget is below one sequence's window rows, prints no tokens and the reason\n"
        "(\"does not fit\"; in JSON \"fits\": false and \"misfit\").\n");
    kvl_usage_model_types(f);
}

/* ---- the table ------------------------------------------------------------------------------- */

static const char *const WEIGHT_NAMES[] = {"native", "bf16", "fp8"};

/* What the cache gets, in words: "budget 100 GiB per GPU" or the memory it is left from. */
static void budget_text(char *out, size_t cap, const plan *p)
{
    if (p->d.engine != KVL_ENGINE_PLAIN)
        snprintf(out, cap, "%s on %s GiB %s GPUs, %s weights%s", kvl_engine_name(p->d.engine),
                 kvl_grouped((char[32]){0}, 32, p->memory / GIB, 2), kvl_gpu_name(p->gpu),
                 WEIGHT_NAMES[p->weights], p->mtp ? ", MTP draft" : "");
    else if (p->memory > 0)
        snprintf(out, cap, "%s GiB per GPU, %s of it for activations, %s weights",
                 kvl_grouped((char[32]){0}, 32, p->memory / GIB, 2),
                 kvl_grouped((char[32]){0}, 32, p->activations, 2), WEIGHT_NAMES[p->weights]);
    else
        snprintf(out, cap, "budget %s GiB per GPU",
                 kvl_grouped((char[32]){0}, 32, p->budget / GIB, 2));
}

/* Layers writing a per-token cache, the MTP draft's too; V4's draft keeps its window only. */
static size_t caching_layers(const row *r, const plan *p)
{
    const int draft = p->mtp && r->model.generation != KVL_GEN_V4;
    return r->kv.global_layers + (draft ? r->model.ffn.n_mtp_layers : 0);
}

/* The cache a split stores: the model's, or the one its engine picks for the split */
static const char *split_cache(const row *r, int dp)
{
    const kvl_cache_layout c = r->rank[dp].cache;
    return c == r->model.kv_cache ? kvl_kv_cache_label(&r->model) : kvl_cache_layout_name(c);
}

/* "  DeepSeek-V3: sglang mem_fraction_static 0.886 (reserve 16,384 MiB), cache bf16, 61 caching
 * layers" */
static void print_engine_line(const row *r, int dp, const plan *p)
{
    const kvl_engine_budget *e = &r->engine[dp];
    printf("  %s: %s %s %s", r->model.name, kvl_engine_name(p->d.engine),
           p->d.engine == KVL_ENGINE_SGLANG ? "mem_fraction_static" : "gpu_memory_utilization",
           kvl_grouped((char[32]){0}, 32, e->fraction, 3));
    if (p->d.engine == KVL_ENGINE_SGLANG) printf(" (reserve %s MiB)", KVL_GROUPED(e->reserved_mib));
    else
        printf(" less a profiled peak of %s GiB",
               kvl_grouped((char[32]){0}, 32, p->activation_peak / GIB, 2));
    printf(", cache %s, %zu caching layers, pages of %zu", split_cache(r, dp),
           caching_layers(r, p), r->page);
    const int v41 = r->model.generation == KVL_GEN_V41;
    if (r->rank[dp].pool_fixed_bytes > 0)
        printf(", %s GiB of %s set aside",
               kvl_grouped((char[32]){0}, 32, r->rank[dp].pool_fixed_bytes / GIB, 2),
               v41 ? "window slots and pair states" : "compressor state rows");
    if (r->rank[dp].running)
        printf(", max_running_requests %zu a GPU", r->rank[dp].running);
    printf("\n");
}

static void print_mode(const row *rows, size_t n, int dp, const plan *p)
{
    char budget[96], page[32] = "the backends' pages";
    budget_text(budget, sizeof budget, p);
    if (p->d.engine == KVL_ENGINE_PLAIN || p->page_given)
        snprintf(page, sizeof page, "page %zu", p->d.page);
    printf("%s attention (tp %zu, %zu GPUs, %s, context %s, %s)\n",
           dp ? "data-parallel" : "tensor-parallel", p->d.tp, p->d.gpus, page,
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
    for (size_t i = 0; p->d.engine != KVL_ENGINE_PLAIN && i < n; i++)
        print_engine_line(&rows[i], dp, p);
    for (size_t i = 0; i < n; i++)
        if (rows[i].misfit[dp][0])
            printf("  %s does not fit: %s\n", rows[i].model.name, rows[i].misfit[dp]);
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

/* ---- JSON ------------------------------------------------------------------------------------ */

/* The inputs as read: GPU, deployment, memory, and what the weights and cache are stored as. */
static cJSON *json_inputs(const plan *p)
{
    cJSON *o = cJSON_CreateObject();
    if (p->gpu_used) cJSON_AddStringToObject(o, "gpu", kvl_gpu_name(p->gpu));
    cJSON_AddNumberToObject(o, "gpus", (double)p->d.gpus);
    cJSON_AddNumberToObject(o, "tp", (double)p->d.tp);
    cJSON_AddNumberToObject(o, "page", (double)p->d.page);
    cJSON_AddNumberToObject(o, "context", (double)p->context);
    if (p->memory > 0) cJSON_AddNumberToObject(o, "memory_gib", p->memory / GIB);
    else cJSON_AddNumberToObject(o, "budget_gib", p->budget / GIB);
    if (p->d.engine == KVL_ENGINE_PLAIN && p->memory > 0)
        cJSON_AddNumberToObject(o, "activations", p->activations);
    if (p->d.engine == KVL_ENGINE_VLLM)
        cJSON_AddNumberToObject(o, "activation_peak_gib", p->activation_peak / GIB);
    cJSON_AddStringToObject(o, "weights", WEIGHT_NAMES[p->weights]);
    const char *cache = p->cache < 0 ? "native" : kvl_cache_layout_name((kvl_cache_layout)p->cache);
    cJSON_AddStringToObject(o, "cache", cache);
    cJSON_AddStringToObject(o, "speculative", p->mtp ? "mtp" : "none");
    return o;
}

/* One model under one attention split. */
static cJSON *json_layout(const row *r, int dp, const plan *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", r->model.name);
    cJSON_AddStringToObject(o, "config", r->model.path);
    cJSON_AddStringToObject(o, "attention", dp ? "dp" : "tp");
    cJSON_AddBoolToObject(o, "fits", !r->misfit[dp][0]);
    if (r->misfit[dp][0]) cJSON_AddStringToObject(o, "misfit", r->misfit[dp]);
    cJSON_AddStringToObject(o, "kv_cache", split_cache(r, dp));
    cJSON_AddNumberToObject(o, "caching_layers", (double)caching_layers(r, p));
    cJSON_AddNumberToObject(o, "page", (double)(r->page ? r->page : p->d.page));
    cJSON_AddNumberToObject(o, "bytes_per_token_per_gpu", r->rank[dp].bytes_per_token);
    if (p->memory > 0) cJSON_AddNumberToObject(o, "memory_fraction", r->engine[dp].fraction);
    if (p->d.engine == KVL_ENGINE_SGLANG)
        cJSON_AddNumberToObject(o, "reserved_mib", r->engine[dp].reserved_mib);
    cJSON_AddNumberToObject(o, "weights_gib_per_gpu", r->weights[dp] / GIB);
    cJSON_AddNumberToObject(o, "cache_gib_per_gpu", r->budget[dp] / GIB);
    if (r->rank[dp].pool_fixed_bytes > 0)
        cJSON_AddNumberToObject(o, "state_bytes_per_gpu", r->rank[dp].pool_fixed_bytes);
    if (r->rank[dp].running)
        cJSON_AddNumberToObject(o, "running_sequences_per_gpu", (double)r->rank[dp].running);
    cJSON_AddNumberToObject(o, "tokens_per_gpu", r->fit[dp].tokens_per_gpu);
    cJSON_AddNumberToObject(o, "window_bytes_per_sequence_per_gpu",
                            kvl_rank_window_bytes(&r->model, &r->rank[dp], &p->d));
    cJSON_AddNumberToObject(o, "sequence_bytes_per_gpu", r->fit[dp].sequence_bytes);
    cJSON_AddNumberToObject(o, "sequences_per_gpu", r->fit[dp].sequences_per_gpu);
    cJSON_AddNumberToObject(o, "sequences_per_node", r->fit[dp].sequences_per_node);
    return o;
}

/* {"engine": ..., "inputs": {...}, "layouts": [...]} on stdout; 1 when out of memory. */
static int print_json(const row *rows, size_t n, const plan *p)
{
    cJSON *root = cJSON_CreateObject(), *layouts = cJSON_CreateArray();
    cJSON_AddStringToObject(root, "engine", kvl_engine_name(p->d.engine));
    cJSON_AddItemToObject(root, "inputs", json_inputs(p));
    for (size_t i = 0; i < n; i++)
        for (int dp = 0; dp < 2; dp++) cJSON_AddItemToArray(layouts, json_layout(&rows[i], dp, p));
    cJSON_AddItemToObject(root, "layouts", layouts);
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) {
        fprintf(stderr, "serving: out of memory\n");
        return 1;
    }
    printf("%s\n", text);
    cJSON_free(text);
    return 0;
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

/* MTP speculation drafts with V3's and V3.2's MTP layers (and V4's, as vLLM and SGLang cache it),
 * as many as the config's num_nextn_predict_layers, or --mtp-layers where the config leaves the
 * field out (DeepSeek's inference spelling does): m's count set, or KVL_EINVAL naming the file and
 * field. */
static int set_draft(kvl_model *m, size_t mtp_layers, kvl_engine e)
{
    const kvl_generation g = m->generation;
    if (g != KVL_GEN_MLA && g != KVL_GEN_DSA && (g != KVL_GEN_V4 || e == KVL_ENGINE_PLAIN))
        return kvl_fail(KVL_EINVAL,
                        "%s: --speculative mtp prices an MLA or DSA model's MTP layer (V4's under --engine "
                        "vllm or sglang), not a %s model's%s",
                        m->path, kvl_generation_name(g),
                        g == KVL_GEN_V4 ? " under the plain engine" : "");
    if (m->ffn.n_mtp_layers && mtp_layers && mtp_layers != m->ffn.n_mtp_layers)
        return kvl_fail(KVL_EINVAL,
                        "%s: --mtp-layers %zu, but field num_nextn_predict_layers is %zu", m->path,
                        mtp_layers, m->ffn.n_mtp_layers);
    if (!m->ffn.n_mtp_layers && !mtp_layers)
        return kvl_fail(KVL_EINVAL,
                        "%s: --speculative mtp: field num_nextn_predict_layers is not given: state the "
                        "MTP layers with --mtp-layers",
                        m->path);
    if (!m->ffn.n_mtp_layers) m->ffn.n_mtp_layers = mtp_layers;
    return KVL_OK;
}

/* One model under both attention splits; 2 after one line on stderr when the config or the plan
 * is bad. */
static int load_row(row *r, const char *path, const plan *p)
{
    int rc = kvl_model_load(&r->model, path);
    if (rc == KVL_OK)
        rc = kvl_engine_cache_layout(&r->model.kv_cache, p->d.engine, &r->model,
                                     kvl_gpu_sm_major(p->gpu), p->cache);
    if (rc == KVL_OK && p->mtp) rc = set_draft(&r->model, p->mtp_layers, p->d.engine);
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
    const kvl_sglang_prefill_graph graph = kvl_sglang_prefill_graph_of(&r->model);
    r->page = p->page_given ? p->d.page
                            : kvl_engine_page(p->d.engine, &r->model, kvl_gpu_sm_major(p->gpu));
    for (int dp = 0; dp < 2; dp++) {
        kvl_deployment d = p->d;
        if (r->page) d.page = r->page;
        d.dp_attention = dp;
        d.draft_layers = p->mtp ? r->model.ffn.n_mtp_layers : 0;
        d.sm = kvl_gpu_sm_major(p->gpu);
        d.capacity_mib = p->memory / MIB;
        r->weights[dp] =
            kvl_engine_weight_bytes(&r->params, &r->model, &d, linear, experts, ffn->scale_e8m0);
        const double w = r->weights[dp];
        rc = p->memory > 0 ? kvl_engine_budget_of(&r->engine[dp], &d, p->memory / MIB, w,
                                                  p->activation_peak, p->activations, graph)
                           : KVL_OK;
        /* a fraction that leaves no cache is an answer, the split does not fit; an engine that
         * cannot size this GPU at all is a refusal */
        if (rc != KVL_OK && !(r->engine[dp].fraction > 0)) {
            fprintf(stderr, "serving: %s: %s\n", r->model.path, kvl_error());
            return 2;
        }
        r->budget[dp] = p->memory > 0 ? fmax(r->engine[dp].cache_bytes, 0) : p->budget;
        if (kvl_rank_cache_of(&r->rank[dp], &r->model, &r->kv, &d) != KVL_OK) {
            fprintf(stderr, "serving: %s\n", kvl_error());
            return 2;
        }
        if (rc != KVL_OK)
            snprintf(r->misfit[dp], sizeof r->misfit[dp],
                     "%s GiB at fraction %s leave no cache beside %s GiB of weights%s",
                     kvl_grouped((char[32]){0}, 32, p->memory / GIB, 2),
                     kvl_grouped((char[32]){0}, 32, r->engine[dp].fraction, 3),
                     kvl_grouped((char[32]){0}, 32, w / GIB, 1),
                     p->d.engine == KVL_ENGINE_VLLM ? " and the profiled peak" : "");
        else if (kvl_fit_of(&r->fit[dp], &r->model, &r->rank[dp], &d, r->budget[dp], p->context) !=
                 KVL_OK)
            snprintf(r->misfit[dp], sizeof r->misfit[dp], "%s", kvl_error());
        if (r->misfit[dp][0]) {
            r->fit[dp] = (kvl_fit){
                .sequence_bytes = kvl_rank_sequence_bytes(&r->model, &r->rank[dp], &d, p->context)};
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
    F_CACHE,
    F_ENGINE,
    F_GPU,
    F_SPECULATIVE,
    F_PEAK,
    F_FORMAT,
    F_MTP_LAYERS
};
static const kvl_flag FLAGS[] = {{"--gpus", 1},       {"--tp", 1},  {"--page", 1},
                                 {"--context", 1},    {"--budget-gib", 1}, {"--svg", 1},
                                 {"--memory-gib", 1}, {"--activations", 1}, {"--weights", 1},
                                 {"--cache", 1},      {"--engine", 1}, {"--gpu", 1},
                                 {"--speculative", 1}, {"--activation-peak-gib", 1},
                                 {"--format", 1},     {"--mtp-layers", 1}};

/* Reads the value of --engine, --gpu, --speculative, --activation-peak-gib or --format into p; 2
 * after one line naming the flag and value. */
static int read_engine_flag(plan *p, int k, const char *v)
{
    if (k == F_ENGINE && kvl_engine_from_name(v, &p->d.engine) != KVL_OK)
        return kvl_bad_usage("serving", "--engine must be plain, vllm or sglang", v);
    if (k == F_GPU && kvl_gpu_from_name(v, &p->gpu) != KVL_OK)
        return kvl_bad_usage("serving", "--gpu must be h100, h200 or b200", v);
    if (k == F_SPECULATIVE && strcmp(v, "none") && strcmp(v, "mtp"))
        return kvl_bad_usage("serving", "--speculative must be none or mtp", v);
    if (k == F_SPECULATIVE) p->mtp = !strcmp(v, "mtp");
    if (k == F_FORMAT && strcmp(v, "text") && strcmp(v, "json"))
        return kvl_bad_usage("serving", "--format must be text or json", v);
    if (k == F_FORMAT) p->json = !strcmp(v, "json");
    double g;
    if (k == F_PEAK && kvl_parse_real(&g, v, 0, 1e6))
        return kvl_bad_usage("serving", "--activation-peak-gib must be a number from 0", v);
    if (k == F_PEAK) p->activation_peak = g * GIB;
    if (k == F_MTP_LAYERS && kvl_parse_size(&p->mtp_layers, v, 1, 16))
        return kvl_bad_usage("serving", "--mtp-layers must be a count from 1 to 16", v);
    return 0;
}

/* Reads one flag's value into p; 2 after one line on stderr naming the flag and value. */
static int read_flag(plan *p, const char **svg, int k, const char *v)
{
    size_t *counts[] = {&p->d.gpus, &p->d.tp, &p->d.page, &p->context};
    static const char *const why[] = {"--gpus must be a count from 1 to 4096",
                                      "--tp must be a count from 1 to 4096",
                                      "--page must be a count from 1 to 1048576",
                                      "--context must be a count from 1 to 1073741824"};
    static const size_t hi[] = {4096, 4096, 1048576, 1073741824};
    if (k >= F_ENGINE) return read_engine_flag(p, k, v);
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
        for (int i = KVL_CACHE_BF16; i <= KVL_CACHE_MLA_FP8; i++)
            if (!strcmp(v, kvl_cache_layout_name((kvl_cache_layout)i))) p->cache = i;
        if (p->cache < 0 && strcmp(v, "native"))
            return kvl_bad_usage("serving",
                                 "--cache must be native, bf16, mla-fp8, v32-fp8, v4-fp8 or v41-fp4", v);
    } else if (k == F_BUDGET) {
        double g;
        if (kvl_parse_real(&g, v, 1e-9, 1e6))
            return kvl_bad_usage("serving", "--budget-gib must be a number above 0", v);
        p->budget = g * GIB;
    } else if (kvl_parse_size(counts[k], v, 1, hi[k])) return kvl_bad_usage("serving", why[k], v);
    return 0;
}

/* The flags read together: 2 after one line naming the flag for a combination that cannot be
 * priced as written. With --gpu or an engine, the GPU's memory stands for --memory-gib. */
static int check_plan(plan *p, unsigned long long seen)
{
    const int engine = p->d.engine != KVL_ENGINE_PLAIN;
    const char *name = kvl_engine_name(p->d.engine);
    if ((seen >> F_MEMORY & 1) && (seen >> F_BUDGET & 1))
        return kvl_bad_usage("serving",
                             "--memory-gib and --budget-gib both set the cache budget: give one", NULL);
    if (engine && (seen >> F_BUDGET & 1))
        return kvl_bad_usage("serving",
                             "--budget-gib is the plain engine's; the engine sizes its own pool", name);
    if (engine && (seen >> F_ACTIVATIONS & 1))
        return kvl_bad_usage("serving",
                             "--activations is the plain engine's; the engine reserves its own", name);
    if ((seen >> F_ACTIVATIONS & 1) && !(seen >> F_MEMORY & 1) && !(seen >> F_GPU & 1))
        return kvl_bad_usage("serving",
                             "--activations is a fraction of --memory-gib, which is not given", NULL);
    if ((p->d.engine == KVL_ENGINE_VLLM) != ((seen >> F_PEAK & 1) != 0))
        return kvl_bad_usage("serving",
                             "--activation-peak-gib is vLLM's profiled peak: give it with --engine vllm "
                             "and only then",
                             name);
    if ((seen >> F_MTP_LAYERS & 1) && !p->mtp)
        return kvl_bad_usage(
            "serving", "--mtp-layers counts the draft of --speculative mtp, which is not given", NULL);
    char tp[32];
    snprintf(tp, sizeof tp, "%zu", p->d.tp);
    if (p->d.gpus % p->d.tp) return kvl_bad_usage("serving", "--tp must divide --gpus", tp);
    p->page_given = (seen >> F_PAGE & 1) != 0;
    p->gpu_used = engine || (seen >> F_GPU & 1);
    if (engine && p->d.tp != p->d.gpus)
        return kvl_bad_usage("serving",
                             "--engine runs one engine over the node: --tp must equal --gpus", tp);
    if ((engine || (seen >> F_GPU & 1)) && !(seen >> F_MEMORY & 1) && !(seen >> F_BUDGET & 1))
        p->memory = kvl_gpu_memory_mib(p->gpu) * MIB;
    return 0;
}

int main(int argc, char **argv)
{
    plan p = {.d = {.gpus = 8, .tp = 8, .page = 64},
              .context = 131072,
              .budget = 100 * GIB,
              .activations = 0.1,
              .cache = -1,
              .gpu = KVL_GPU_H200};
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
    if (!status) status = check_plan(&p, a.seen);
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
    if (!status && p.json) status = print_json(rows, n, &p);
    else if (!status) {
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
