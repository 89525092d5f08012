/* Chapter 8's grader: make lab-08 (your files) or make lab-08 SOLUTION=1 (the worked solutions).
 * Each lab is checked against ref/kvtable.h's footprint of the same config, the chapter's
 * definition of the per-token cache, over every config of ref/configs/, chapters 1's and 3's, and
 * edited copies (another row layout, other dims, another layer map). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_io.h"
#include "grade.h"
#include "kvtable.h"
#include "lab.h"
#include "program.h"
#include "status.h"

/* The shared comparison reads a lab's answer as float32, 2^-24 relative; every figure here is exact
 * in double, and a wrong layer set, ratio, key or window moves it by 1e-4 or more. */
#define ATOL 0
#define RTOL 1e-6

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MAX_MODELS 32

/* A config under the project root, optionally with the first `from` replaced by `to`. */
typedef struct {
    const char *path, *from, *to, *what;
} config_case;

static const config_case extra[] = {
    {"chapters/01_mha/llama-3-70b.json", NULL, NULL, "Llama 3 70B, GQA-8"},
    {"chapters/03_swa/mistral-7b.json", NULL, NULL, "Mistral 7B, every layer windowed"},
    {"ref/configs/deepseek-v3.json", "\"date\": \"2024-12\",",
     "\"date\": \"2024-12\", \"kv_cache\": \"v32-fp8\",", "V3 in v32-fp8 rows"},
    {"ref/configs/deepseek-v3.json", "\"kv_lora_rank\": 512", "\"kv_lora_rank\": 256",
     "V3, half the latent"},
    {"ref/configs/deepseek-llm-67b.json", "\"num_key_value_heads\": 8",
     "\"num_key_value_heads\": 1", "67B as MQA"},
    {"ref/configs/deepseek-v3.2-exp.json", "\"headline\": true",
     "\"headline\": true, \"kv_cache\": \"bf16\"", "V3.2 in bf16"},
    {"ref/configs/deepseek-v4-flash.json", "\"headline\": true",
     "\"headline\": true, \"kv_cache\": \"bf16\"", "V4-Flash in bf16"},
    {"ref/configs/deepseek-v4.1-flash.json", "\"headline\": true",
     "\"headline\": true, \"kv_cache\": \"bf16\"", "V4.1-Flash in bf16"},
    {"ref/configs/deepseek-v4-flash.json", "\"compress_ratios\": [\n    0,\n    0,\n    4,",
     "\"compress_ratios\": [\n    0,\n    0,\n    0,", "V4-Flash, layer 2 window-only"},
    {"ref/configs/deepseek-v4.1-flash.json", "\"kv_source_layers\": [\n    2,\n    8,\n    14,\n",
     "\"kv_source_layers\": [\n    2,\n    8,\n", "V4.1-Flash, layer 14 no longer a KV source"},
};

typedef struct {
    kvl_model m;
    kvl_kv_footprint f; /* the definition */
    char name[160];
} model_case;

/* out = the config at `path` (absolute), edited as c says */
static void load(model_case *out, const char *path, const config_case *c)
{
    char *text;
    size_t len;
    grade_require(kvl_file_read_all(&text, &len, path, 1 << 20));
    char *at = c && c->from ? strstr(text, c->from) : NULL;
    if (c && c->from && !at) {
        kvl_fail(KVL_EINVAL, "%s: the text to edit (%s) is not there", path, c->what);
        grade_require(KVL_EINVAL);
    }
    if (at) {
        const size_t head = (size_t)(at - text), tail = len - head - strlen(c->from);
        char *edited = grade_alloc(head + strlen(c->to) + tail + 1);
        memcpy(edited, text, head);
        memcpy(edited + head, c->to, strlen(c->to));
        memcpy(edited + head + strlen(c->to), at + strlen(c->from), tail + 1);
        free(text);
        text = edited;
        len = strlen(edited);
    }
    grade_require(kvl_model_parse(&out->m, text, len, path));
    grade_require(kvl_kv_footprint_of(&out->f, &out->m));
    free(text);
    const char *base = strrchr(path, '/');
    snprintf(out->name, sizeof out->name, "%s%s%s", base ? base + 1 : path, c ? ": " : "",
             c ? c->what : "");
}

/* models[*n]: every config of ref/configs/ (by file name), then the extra cases */
static void load_all(model_case *models, size_t *n)
{
    char **paths, path[1024];
    size_t n_paths;
    grade_configs(&paths, &n_paths);
    *n = 0;
    for (size_t i = 0; i < n_paths && *n < MAX_MODELS; i++) load(&models[(*n)++], paths[i], NULL);
    kvl_config_files_free(paths, n_paths);
    for (size_t i = 0; i < sizeof extra / sizeof extra[0] && *n < MAX_MODELS; i++) {
        snprintf(path, sizeof path, "%s/%s", kvl_root_dir(), extra[i].path);
        load(&models[(*n)++], path, &extra[i]);
    }
}

static void free_all(model_case *models, size_t n)
{
    for (size_t i = 0; i < n; i++) kvl_model_free(&models[i].m);
}

static kv_rows rows_of(const kvl_kv_footprint *f)
{
    return (kv_rows){f->main_row_bytes, f->index_key_bytes, f->window_row_bytes};
}

static int grade_cache_rows(void)
{
    lab_grade g;
    grade_begin(
        &g, "cache_rows",
        "bf16: 2 B a value (K and V of every KV head; latent + RoPE key; V4's head_dim entry), "
        "else kvf_row_bytes of the layout's rows (chapter 8, \"The cost it attacks\")");
    static model_case models[MAX_MODELS];
    size_t n;
    load_all(models, &n);
    for (size_t i = 0; i < n && !g.wrong; i++) {
        const kvl_kv_footprint *f = &models[i].f;
        grade_case(&g, "%s (%s, kv_cache %s)", models[i].name,
                   kvl_generation_name(models[i].m.generation),
                   kvl_cache_layout_name(models[i].m.kv_cache));
        const kv_rows got = cache_rows(&models[i].m);
        grade_value(&g, "main_row", (int64_t)got.main_row, (int64_t)f->main_row_bytes);
        grade_value(&g, "index_key", (int64_t)got.index_key, (int64_t)f->index_key_bytes);
        grade_value(&g, "window_row", (int64_t)got.window_row, (int64_t)f->window_row_bytes);
    }
    free_all(models, n);
    return grade_end(&g);
}

static int grade_per_token(void)
{
    lab_grade g;
    grade_begin(&g, "per_token",
                "over the layers with kv_source == l, not window-only: entries += 1/M, bytes += "
                "(main row + "
                "index key if index_source == l) / M (chapter 8, \"What it computes\")");
    static model_case models[MAX_MODELS];
    size_t n;
    load_all(models, &n);
    for (size_t i = 0; i < n && !g.wrong; i++) {
        const kvl_kv_footprint *f = &models[i].f;
        const kv_rows r = rows_of(f);
        grade_case(&g, "%s (rows %zu + %zu B)", models[i].name, r.main_row, r.index_key);
        const kv_account got = per_token(&models[i].m, &r);
        grade_value(&g, "cache_layers", (int64_t)got.cache_layers, (int64_t)f->global_layers);
        grade_real(&g, "entries_per_token", got.entries_per_token, f->entries_per_token, ATOL,
                   RTOL);
        grade_real(&g, "bytes_per_token", got.bytes_per_token, f->bytes_per_token, ATOL, RTOL);
        grade_real(&g, "bytes_per_entry", got.bytes_per_entry, f->bytes_per_entry, ATOL, RTOL);
    }
    free_all(models, n);
    return grade_end(&g);
}

static int grade_held_gib(void)
{
    /* below, at and past V4's 128-row window and Mistral's 4,096-token one; 128K and 1M contexts */
    static const double contexts[] = {1, 127, 128, 129, 4095, 4096, 4097, 131072, 1048576};
    lab_grade g;
    grade_begin(&g, "held_gib",
                "(min(T, W) for an MHA model with a window, else T) · bytes/token + n_layers · W · "
                "window row, "
                "over 2^30 (chapter 8, \"What it stores per token\")");
    static model_case models[MAX_MODELS];
    size_t n;
    load_all(models, &n);
    for (size_t i = 0; i < n && !g.wrong; i++) {
        const kvl_kv_footprint *f = &models[i].f;
        const kv_rows r = rows_of(f);
        for (size_t k = 0; k < sizeof contexts / sizeof contexts[0] && !g.wrong; k++) {
            const double T = contexts[k];
            grade_case(&g, "%s, T = %.0f (W = %zu, %g B/token)", models[i].name, T,
                       models[i].m.window, f->bytes_per_token);
            grade_real(&g, "GiB", held_gib(&models[i].m, &r, f->bytes_per_token, T),
                       kvl_kv_bytes_held(f, T) / GIB, ATOL, RTOL);
        }
    }
    free_all(models, n);
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_cache_rows, grade_per_token, grade_held_gib};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
