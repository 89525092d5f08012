/* Chapter 9's grader: make lab-09 (your files) or make lab-09 SOLUTION=1 (the worked solutions).
 * Each lab is checked against ref/serving.h's definition for the same config and deployment, over
 * every config of ref/configs/, chapters 1's and 3's, and a GQA shape whose KV heads tp does not
 * divide. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grade.h"
#include "kvtable.h"
#include "lab.h"
#include "params.h"
#include "program.h"
#include "serving.h"
#include "status.h"

/* The shared comparison reads a real answer as float32, 2^-24 relative; a wrong split or budget
 * moves it by 1e-3 or more. Byte sizes and counts are integers: exact. */
#define ATOL 0
#define RTOL 1e-6

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MAX_MODELS 16

static const char *const extra_files[] = {"chapters/01_mha/llama-3-70b.json",
                                          "chapters/03_swa/mistral-7b.json"};

/* Qwen2.5-32B's attention shape: 40 query heads, 8 KV heads, so tp 5 leaves a rank part of a
 * group */
static const char qwen_shape[] =
    "{\"model_type\": \"qwen2\", \"hidden_size\": 5120, \"num_hidden_layers\": 64, "
    "\"num_attention_heads\": 40,"
    " \"num_key_value_heads\": 8, \"intermediate_size\": 27648, \"vocab_size\": 152064}";

typedef struct {
    kvl_model m;
    kvl_kv_footprint f; /* chapter 8's whole rows */
    kvl_params p;
    char name[96];
} model_case;

/* out's footprint and parameters, once out->m is loaded */
static void complete(model_case *out, const char *path)
{
    grade_require(kvl_kv_footprint_of(&out->f, &out->m));
    grade_require(kvl_params_of(&out->p, &out->m));
    const char *base = strrchr(path, '/');
    snprintf(out->name, sizeof out->name, "%s", base ? base + 1 : path);
}

/* models[*n]: every config of ref/configs/ (by file name), chapters 1's and 3's, the Qwen shape */
static void load_all(model_case *models, size_t *n)
{
    char **paths, path[1024];
    size_t n_paths;
    grade_configs(&paths, &n_paths);
    *n = 0;
    for (size_t i = 0; i < n_paths && *n < MAX_MODELS - 3; i++, (*n)++) {
        grade_require(kvl_model_load(&models[*n].m, paths[i]));
        complete(&models[*n], paths[i]);
    }
    kvl_config_files_free(paths, n_paths);
    for (size_t i = 0; i < sizeof extra_files / sizeof extra_files[0]; i++, (*n)++) {
        snprintf(path, sizeof path, "%s/%s", kvl_root_dir(), extra_files[i]);
        grade_require(kvl_model_load(&models[*n].m, path));
        complete(&models[*n], path);
    }
    grade_require(
        kvl_model_parse(&models[*n].m, qwen_shape, strlen(qwen_shape), "Qwen2.5-32B shape"));
    complete(&models[(*n)++], "Qwen2.5-32B shape (40 heads, 8 KV heads)");
}

static void free_all(model_case *models, size_t n)
{
    for (size_t i = 0; i < n; i++) kvl_model_free(&models[i].m);
}

static int grade_rank_split(void)
{
    static const kvl_deployment plans[] = {
        {8, 1, 0, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {8, 2, 0, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {8, 4, 0, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {8, 8, 0, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {16, 16, 0, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {10, 5, 0, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {10, 10, 0, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {8, 8, 1, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {8, 2, 1, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {10, 5, 1, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
    };
    lab_grade g;
    grade_begin(&g, "rank_split",
                "MHA/GQA: ceil(Hkv/tp) heads a rank (≥ 1; all Hkv under dp attention), row / Hkv · "
                "heads; a "
                "latent or shared row whole; bytes += (row + key) / M; groups = gpus/tp or gpus "
                "(chapter 9, "
                "\"What it computes\")");
    static model_case models[MAX_MODELS];
    size_t n;
    load_all(models, &n);
    for (size_t i = 0; i < n && !g.wrong; i++)
        for (size_t k = 0; k < sizeof plans / sizeof plans[0] && !g.wrong; k++) {
            const kvl_deployment *d = &plans[k];
            kvl_rank_cache want;
            if (kvl_rank_cache_of(&want, &models[i].m, &models[i].f, d) != KVL_OK)
                continue; /* tp ∤ heads */
            grade_case(&g, "%s (%s, Hkv = %zu), %zu GPUs, tp %zu, %s attention", models[i].name,
                       kvl_generation_name(models[i].m.generation), models[i].m.n_kv_heads, d->gpus,
                       d->tp, d->dp_attention ? "data-parallel" : "tensor-parallel");
            const rank_share got = rank_split(&models[i].m, models[i].f.main_row_bytes,
                                              models[i].f.index_key_bytes, d);
            grade_value(&g, "kv_heads", (int64_t)got.kv_heads, (int64_t)want.kv_heads);
            grade_value(&g, "main_row_bytes", (int64_t)got.main_row_bytes,
                        (int64_t)want.main_row_bytes);
            grade_real(&g, "bytes_per_token", got.bytes_per_token, want.bytes_per_token, ATOL,
                       RTOL);
            grade_value(&g, "groups_per_node", (int64_t)got.groups_per_node,
                        (int64_t)want.groups_per_node);
        }
    free_all(models, n);
    return grade_end(&g);
}

/* One GPU's memory and the fraction of it kept for activations. */
typedef struct {
    double gib, activations;
} gpu;

/* One model on one deployment and GPU, at every context: 0 while right. */
static int grade_contexts(lab_grade *g, const model_case *c, const kvl_deployment *d, const gpu *u)
{
    static const size_t contexts[] = {1, 63, 64, 65, 1000, 131072, 1048576};
    const kvl_ffn *ffn = &c->m.ffn;
    kvl_rank_cache r;
    if (kvl_rank_cache_of(&r, &c->m, &c->f, d) != KVL_OK)
        return 0; /* tp ∤ heads: no such deployment */
    const double memory = u->gib * GIB;
    const double weights =
        kvl_rank_weight_bytes(&c->p, d, ffn->linear, ffn->experts, ffn->scale_e8m0);
    const double budget =
        memory * (1 - u->activations) - weights; /* as the serving program leaves it */
    if (!(budget > (double)r.window_bytes_per_sequence)) return 0; /* the GPU holds no sequence */
    for (size_t k = 0; k < sizeof contexts / sizeof contexts[0] && !g->wrong; k++) {
        const size_t T = contexts[k];
        kvl_fit want;
        grade_require(kvl_fit_of(&want, &c->m, &r, d, budget, T));
        grade_case(
            g,
            "%s, %zu GPUs, tp %zu, %s attention, page %zu, T = %zu, %g GiB (%g for activations), "
            "%.0f B of weights",
            c->name, d->gpus, d->tp, d->dp_attention ? "data-parallel" : "tensor-parallel", d->page,
            T, u->gib, u->activations, weights);
        const node_fit got = node_sequences(&c->m, &r, d, memory, u->activations, weights, T);
        grade_real(g, "budget", got.budget, budget, ATOL, RTOL);
        grade_whole(g, "sequence_bytes", got.sequence_bytes, want.sequence_bytes);
        grade_whole(g, "sequences_per_gpu", got.sequences_per_gpu, want.sequences_per_gpu);
        grade_whole(g, "sequences_per_node", got.sequences_per_node, want.sequences_per_node);
    }
    return g->wrong;
}

static int grade_node_sequences(void)
{
    static const kvl_deployment plans[] = {
        {8, 8, 0, 1, KVL_ENGINE_PLAIN, 0, 0, 0},
        {8, 8, 1, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {8, 4, 0, 64, KVL_ENGINE_PLAIN, 0, 0, 0},
        {8, 8, 0, 256, KVL_ENGINE_PLAIN, 0, 0, 0},
        {8, 4, 1, 256, KVL_ENGINE_PLAIN, 0, 0, 0}};
    static const gpu gpus[] = {{80, 0.1}, {141, 0.15}};
    lab_grade g;
    grade_begin(&g, "node_sequences",
                "budget = memory·(1 − activations) − weights; B/seq = window + Σ layers "
                "ceil(ceil(min(T, bound)/M)/page)·page·(row + key); floor(budget / B/seq) × groups "
                "(chapter 9, "
                "\"What it computes\")");
    static model_case models[MAX_MODELS];
    size_t n;
    load_all(models, &n);
    for (size_t i = 0; i < n && !g.wrong; i++)
        for (size_t k = 0; k < sizeof plans / sizeof plans[0] && !g.wrong; k++)
            for (size_t u = 0; u < sizeof gpus / sizeof gpus[0] && !g.wrong; u++)
                grade_contexts(&g, &models[i], &plans[k], &gpus[u]);
    free_all(models, n);
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_rank_split, grade_node_sequences};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
