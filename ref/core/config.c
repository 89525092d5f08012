#include "config.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config_fields.h"
#include "file_io.h"
#include "gguf.h"
#include "json_text.h"
#include "rope.h"
#include "status.h"

/* Largest width, head count or rank accepted: anything above is a typo, and sizes derived from it
 * (products of a few of them) must not overflow size_t. */
#define MAX_DIM ((size_t)1 << 24)
#define MAX_LAYERS 4096

/* How a window applies to a model type's layers (transformers' modeling and configuration files). */
typedef enum {
    WINDOW_NONE,        /* no window: its class defines no window field, so check_fields refuses them */
    WINDOW_EVERY_LAYER, /* sliding_window on every layer (Mistral, Mixtral); null: none */
    WINDOW_QWEN,        /* only while use_sliding_window is true, on layers i >= max_window_layers (Qwen2, Qwen3) */
} window_rule;

/* What transformers' configuration class of one model type means where a file leaves a field out, and how
 * its model attends. Only the types listed are read; kvl_model_types() names them. */
typedef struct {
    const char *type;           /* model_type */
    kvl_generation generation;
    size_t head_dim;            /* head_dim when absent; 0: hidden_size / num_attention_heads */
    size_t kv_heads;            /* num_key_value_heads when absent; 0: num_attention_heads */
    window_rule window;
    size_t window_dflt;         /* sliding_window when absent */
    size_t max_window_layers;   /* WINDOW_QWEN: its default */
    double norm_eps;            /* rms_norm_eps when absent */
    int tied;                   /* tie_word_embeddings when absent */
    unsigned writers;           /* whose fields a file of this type may set (config_fields.h) */
} type_reading;

static const type_reading type_readings[] = {
    {"llama", KVL_GEN_MHA, 0, 0, WINDOW_NONE, 0, 0, 1e-6, 0, W_LLAMA | W_BASE | W_KVLINEAGE},
    {"mistral", KVL_GEN_MHA, 0, 8, WINDOW_EVERY_LAYER, 4096, 0, 1e-6, 0, W_MISTRAL | W_BASE | W_KVLINEAGE},
    {"mixtral", KVL_GEN_MHA, 0, 8, WINDOW_EVERY_LAYER, 0, 0, 1e-5, 0, W_MIXTRAL | W_BASE | W_KVLINEAGE},
    {"qwen2", KVL_GEN_MHA, 0, 32, WINDOW_QWEN, 4096, 28, 1e-6, 0, W_QWEN2 | W_BASE | W_KVLINEAGE},
    {"qwen3", KVL_GEN_MHA, 128, 32, WINDOW_QWEN, 4096, 28, 1e-6, 0, W_QWEN3 | W_BASE | W_KVLINEAGE},
    {"gemma", KVL_GEN_MHA, 256, 16, WINDOW_NONE, 0, 0, 1e-6, 1, W_GEMMA | W_BASE | W_KVLINEAGE},
    {"falcon", KVL_GEN_MHA, 0, 0, WINDOW_NONE, 0, 0, 1e-5, 1, W_FALCON | W_BASE | W_KVLINEAGE},
    {"deepseek_v2", KVL_GEN_MLA, 0, 0, WINDOW_NONE, 0, 0, 1e-6, 0, W_V2 | W_HUB | W_BASE | W_KVLINEAGE},
    {"deepseek_v3", KVL_GEN_MLA, 0, 0, WINDOW_NONE, 0, 0, 1e-6, 0, W_V3 | W_HUB | W_BASE | W_KVLINEAGE},
    {"deepseek_v32", KVL_GEN_DSA, 0, 0, WINDOW_NONE, 0, 0, 1e-6, 0, W_V32 | W_HUB | W_BASE | W_KVLINEAGE},
    {"deepseek_v4", KVL_GEN_V4, 0, 1, WINDOW_NONE, 0, 0, 1e-6, 0, W_V4 | W_HUB | W_BASE | W_KVLINEAGE},
};

/* The reading of a file without model_type: the lineage's own configs and DeepSeek's inference spelling
 * (its ModelArgs), or a hand-written Llama-shaped file. */
static const type_reading untyped_reading = {NULL, KVL_GEN_MHA, 0, 0, WINDOW_EVERY_LAYER, 0, 0, 1e-6, 0, ~0u};

typedef struct {
    const char *origin;   /* file name for messages */
    const cJSON *root;
    const type_reading *t;
} reader;

/* The file's model_type is `type` (a file without one is of no type). */
static int is_type(const reader *r, const char *type)
{
    return r->t->type && strcmp(r->t->type, type) == 0;
}

/* ---- field access ------------------------------------------------------------------------------ */

/* Levenshtein distance, capped: used only to suggest the field a typo meant. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 63 || lb > 63) return 99;
    size_t row[64];
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

static const cJSON *find(const cJSON *obj, const char *name)
{
    return name ? cJSON_GetObjectItemCaseSensitive(obj, name) : NULL;
}

/* A key or a string from the file, for messages: at most 48 bytes of it, a quote or a control byte
 * as \xNN, so that the message stays one line. */
static const char *file_text(const char *s)
{
    static _Thread_local char buf[4 * 48 + 4];
    size_t o = 0, i = 0;
    for (; s[i] && i < 48; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '"') o += (size_t)snprintf(buf + o, sizeof buf - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    snprintf(buf + o, sizeof buf - o, "%s", s[i] ? "..." : "");
    return buf;
}

static int missing(const reader *r, const cJSON *obj, const char *hf, const char *ds)
{
    const cJSON *best = NULL;
    size_t best_d = 3;
    for (const cJSON *c = obj->child; c; c = c->next) {
        size_t dh = edit_distance(c->string, hf), dd = ds ? edit_distance(c->string, ds) : 99;
        size_t dmin = dh < dd ? dh : dd;
        if (dmin > 0 && dmin < best_d) { best = c; best_d = dmin; }
    }
    char alt[96] = "";
    if (ds) snprintf(alt, sizeof alt, " (or \"%s\")", ds);
    if (best)
        return kvl_fail(KVL_EINVAL, "%s: missing field \"%s\"%s; found \"%s\": is it misspelled?", r->origin,
                        hf, alt, file_text(best->string));
    return kvl_fail(KVL_EINVAL, "%s: missing field \"%s\"%s", r->origin, hf, alt);
}

/* The JSON text of an item, shortened, for messages. */
static const char *shown(const cJSON *it)
{
    static _Thread_local char buf[64];
    if (cJSON_IsNumber(it) && !isfinite(it->valuedouble)) {   /* cJSON prints these as null */
        snprintf(buf, sizeof buf, "%s (beyond double range)", it->valuedouble > 0 ? "inf" : "-inf");
        return buf;
    }
    char *s = cJSON_PrintUnformatted(it);
    snprintf(buf, sizeof buf, "%s", s ? s : "?");
    if (s && strlen(s) >= sizeof buf) strcpy(buf + sizeof buf - 4, "...");
    free(s);
    return buf;
}

/* An integer field in [lo, hi]. Absent, or JSON null (transformers writes an unset field as null):
 * *out = dflt when optional, else an error; null_is_zero reads null as 0 even for a required field
 * (q_lora_rank of V2-Lite). A field under both its spellings must hold one value in both. */
typedef struct { const char *hf, *ds; size_t lo, hi; int optional; size_t dflt; int null_is_zero; } size_field;

static int read_size_as(const reader *r, const cJSON *obj, size_field f, const char *name, size_t *out)
{
    const cJSON *it = find(obj, name);
    if (!it || cJSON_IsNull(it)) {
        if (it && f.null_is_zero) { *out = 0; return KVL_OK; }
        if (f.optional) { *out = f.dflt; return KVL_OK; }
        if (it) return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be an integer, got null", r->origin, name);
        return missing(r, obj, f.hf, f.ds);
    }
    if (!cJSON_IsNumber(it))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be an integer, got %s", r->origin, name, shown(it));
    double v = it->valuedouble;
    if (!(v == floor(v)) || v < (double)f.lo || v > (double)f.hi)
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be an integer in [%zu, %zu], got %s", r->origin, name,
                        f.lo, f.hi, shown(it));
    *out = (size_t)v;
    return KVL_OK;
}

static int two_spellings(const reader *r, const char *a, const char *b, const char *va, const char *vb)
{
    return kvl_fail(KVL_EINVAL, "%s: fields \"%s\" (%s) and \"%s\" (%s) spell one setting and disagree: keep one",
                    r->origin, a, va, b, vb);
}

static int read_size(const reader *r, const cJSON *obj, size_field f, size_t *out)
{
    if (!f.ds || !find(obj, f.ds)) return read_size_as(r, obj, f, f.hf, out);
    if (!find(obj, f.hf)) return read_size_as(r, obj, f, f.ds, out);
    size_t a, b;
    KVL_TRY(read_size_as(r, obj, f, f.hf, &a));
    KVL_TRY(read_size_as(r, obj, f, f.ds, &b));
    if (a != b) {
        char va[24], vb[24];
        snprintf(va, sizeof va, "%zu", a);
        snprintf(vb, sizeof vb, "%zu", b);
        return two_spellings(r, f.hf, f.ds, va, vb);
    }
    *out = a;
    return KVL_OK;
}

/* A number in [lo, hi]; absent or null: dflt when optional. Both spellings: one value. */
typedef struct { const char *hf, *ds; double lo, hi; int optional; double dflt; } real_field;

static int read_real_as(const reader *r, const cJSON *obj, real_field f, const char *name, double *out)
{
    const cJSON *it = find(obj, name);
    if (!it || cJSON_IsNull(it)) {
        if (f.optional) { *out = f.dflt; return KVL_OK; }
        if (it) return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be a number, got null", r->origin, name);
        return missing(r, obj, f.hf, f.ds);
    }
    if (!cJSON_IsNumber(it))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be a number, got %s", r->origin, name, shown(it));
    double v = it->valuedouble;
    if (!(v >= f.lo && v <= f.hi))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be in [%g, %g], got %s", r->origin, name, f.lo, f.hi,
                        shown(it));
    *out = v;
    return KVL_OK;
}

static int read_real(const reader *r, const cJSON *obj, real_field f, double *out)
{
    if (!f.ds || !find(obj, f.ds)) return read_real_as(r, obj, f, f.hf, out);
    if (!find(obj, f.hf)) return read_real_as(r, obj, f, f.ds, out);
    double a, b;
    KVL_TRY(read_real_as(r, obj, f, f.hf, &a));
    KVL_TRY(read_real_as(r, obj, f, f.ds, &b));
    if (a != b) {
        char va[32], vb[32];
        snprintf(va, sizeof va, "%.17g", a);
        snprintf(vb, sizeof vb, "%.17g", b);
        return two_spellings(r, f.hf, f.ds, va, vb);
    }
    *out = a;
    return KVL_OK;
}

static int read_text(const reader *r, const cJSON *obj, const char *name, char *out, size_t cap)
{
    const cJSON *it = find(obj, name);
    if (!it) return KVL_OK;
    if (!cJSON_IsString(it) || strlen(it->valuestring) >= cap)
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be a string of fewer than %zu characters, got %s",
                        r->origin, name, cap, shown(it));
    snprintf(out, cap, "%s", it->valuestring);
    return KVL_OK;
}

/* A list of integers, each in [0, hi); `strict` also requires it to be ascending without repeats.
 * Returns the count in *n and the values in a new array *out. */
static int read_list(const reader *r, const cJSON *obj, const char *name, size_t hi, int strict, size_t **out,
                     size_t *n)
{
    const cJSON *it = find(obj, name);
    if (!it) return missing(r, obj, name, NULL);
    if (!cJSON_IsArray(it))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be a list of integers, got %s", r->origin, name, shown(it));
    size_t count = (size_t)cJSON_GetArraySize(it), i = 0;
    size_t *v = malloc((count ? count : 1) * sizeof *v);
    if (!v) return kvl_fail(KVL_ENOMEM, "%s: out of memory reading \"%s\"", r->origin, name);
    for (const cJSON *e = it->child; e; e = e->next, i++) {
        double x = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!cJSON_IsNumber(e) || x != floor(x) || x < 0 || x >= (double)hi) {
            free(v);
            return kvl_fail(KVL_EINVAL, "%s: field \"%s\" entry %zu must be an integer in [0, %zu), got %s", r->origin,
                            name, i, hi, shown(e));
        }
        v[i] = (size_t)x;
        if (strict && i > 0 && v[i] <= v[i - 1]) {
            size_t now = v[i], before = v[i - 1];
            free(v);
            return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be ascending without repeats, got %zu after %zu",
                            r->origin, name, now, before);
        }
    }
    *out = v;
    *n = count;
    return KVL_OK;
}

/* No object anywhere under `it` (at `path`, "" for the top level) holds a key twice: cJSON would
 * silently read the first, whichever one the author meant. */
static int no_duplicates(const reader *r, const cJSON *it, const char *path)
{
    size_t n = 0;
    for (const cJSON *c = it->child; c; c = c->next) n++;
    if (cJSON_IsObject(it) && n > 1) {
        const char *dup;
        KVL_TRY(kvl_json_repeated_key(&dup, it, r->origin));
        if (dup)
            return kvl_fail(KVL_EINVAL, "%s: field \"%s%s%s\" appears twice", r->origin, path, *path ? "." : "",
                            file_text(dup));
    }
    size_t i = 0;
    for (const cJSON *c = it->child; c; c = c->next, i++) {
        if (!c->child) continue;
        char inner[256];
        if (cJSON_IsObject(it)) snprintf(inner, sizeof inner, "%s%s%s", path, *path ? "." : "", file_text(c->string));
        else snprintf(inner, sizeof inner, "%s[%zu]", path, i);
        KVL_TRY(no_duplicates(r, c, inner));
    }
    return KVL_OK;
}

/* ---- which fields a file may hold: config_fields.h's rule --------------------------------------- */

/* The field's default value as JSON text equals `it` (or `it` is null). */
static int at_default(const cJSON *it, const char *dflt)
{
    if (cJSON_IsNull(it)) return 1;
    char *s = cJSON_PrintUnformatted(it);
    int same = s && strcmp(s, dflt) == 0;
    free(s);
    return same;
}

/* A key no writer defines, in a file without model_type, with the field it most likely meant. */
static int unknown_field(const reader *r, const char *key)
{
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t i = 0; i < kvl_config_fields_count; i++) {
        size_t d = edit_distance(key, kvl_config_fields[i].name);
        if (d > 0 && d < best_d) { best = kvl_config_fields[i].name; best_d = d; }
    }
    char hint[96] = "";
    if (best) snprintf(hint, sizeof hint, "; is it a misspelled \"%s\"?", best);
    return kvl_fail(KVL_EINVAL, "%s: field \"%s\" is not one DeepSeek's inference code or transformers defines (the file "
                    "has no model_type, and ModelArgs refuses a keyword it lacks)%s", r->origin, file_text(key), hint);
}

static int check_fields(const reader *r)
{
    const char *type = r->t->type;
    for (const cJSON *c = r->root->child; c; c = c->next) {
        const kvl_config_field *f = kvl_config_field_find(c->string);
        if (!f) {
            if (type) continue;   /* transformers keeps it as an attribute its model never reads */
            return unknown_field(r, c->string);
        }
        if (f->use == KVL_FIELD_DEFAULT && !at_default(c, f->note))
            return kvl_fail(KVL_EINVAL, "%s: field \"%s\" is %s: this project computes only %s = %s", r->origin, f->name,
                            shown(c), f->name, f->note);
        if (f->use == KVL_FIELD_IGNORED || (f->writers & r->t->writers) || cJSON_IsNull(c)) continue;
        if (!(f->writers & ~W_DEEPSEEK_INFERENCE))
            return kvl_fail(KVL_EINVAL, "%s: field \"%s\" is DeepSeek's inference spelling, which transformers' \"%s\" "
                            "configuration does not read: drop it, or drop model_type to read the file as DeepSeek's code "
                            "does", r->origin, f->name, type);
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" is not one transformers' \"%s\" configuration defines, so its model "
                        "would ignore what this project reads: refused rather than read either way", r->origin, f->name, type);
    }
    return KVL_OK;
}

/* The second spelling of `hf` in this file: DeepSeek's inference name `ds` where there is no model_type, else
 * the alias the type's configuration class maps onto hf (its attribute_map or a legacy keyword), or NULL. */
static const char *spelling(const reader *r, const char *hf, const char *ds)
{
    static const struct { const char *type, *hf, *alias; } aliases[] = {
        {"deepseek_v2", "n_routed_experts", "num_experts"},
        {"deepseek_v3", "n_routed_experts", "num_local_experts"},
        {"deepseek_v3", "num_nextn_predict_layers", "num_mtp_layers"},
        {"deepseek_v32", "n_routed_experts", "num_local_experts"},
        {"deepseek_v4", "n_routed_experts", "num_local_experts"},
        {"deepseek_v4", "moe_intermediate_size", "intermediate_size"},
        {"mixtral", "num_local_experts", "num_experts"},
        {"falcon", "hidden_size", "n_embed"},
    };
    if (!r->t->type) return ds;
    for (size_t i = 0; i < sizeof aliases / sizeof *aliases; i++)
        if (strcmp(r->t->type, aliases[i].type) == 0 && strcmp(hf, aliases[i].hf) == 0) return aliases[i].alias;
    return NULL;
}

/* ---- the parts of a model ---------------------------------------------------------------------- */

/* A V4 layer kind as transformers 5 spells it in layer_types (configuration_deepseek_v4.py). */
static const char *const v4_layer_types[] = {"sliding_attention", "compressed_sparse_attention",
                                             "heavily_compressed_attention"};

static int is_v4_layer_types(const cJSON *types)
{
    if (!cJSON_IsArray(types)) return 0;
    for (const cJSON *e = types->child; e; e = e->next)
        if (cJSON_IsString(e) && (strcmp(e->valuestring, v4_layer_types[1]) == 0 || strcmp(e->valuestring, v4_layer_types[2]) == 0))
            return 1;
    return 0;
}

static kvl_generation recognise(const cJSON *root)
{
    if (find(root, "kv_source_layers")) return KVL_GEN_V41;
    if (find(root, "compress_ratios") || find(root, "compress_rates") || find(root, "compress_rate_csa") ||
        find(root, "compress_rate_hca") || is_v4_layer_types(find(root, "layer_types")))
        return KVL_GEN_V4;
    if (find(root, "index_topk")) return KVL_GEN_DSA;
    if (find(root, "kv_lora_rank")) return KVL_GEN_MLA;
    return KVL_GEN_MHA;
}

/* Model types refused with the reason a reader would want: each computes something ref/ does not. */
static const struct { const char *type, *why; } types_refused[] = {
    {"gemma2", "alternates sliding-window and full layers"},
    {"gemma3", "alternates sliding-window and full layers"},
    {"gemma3_text", "alternates sliding-window and full layers"},
    {"cohere2", "alternates sliding-window and full layers"},
    {"ministral", "alternates sliding-window and full layers"},
    {"gpt_oss", "alternates sliding-window and full layers, with sinks"},
    {"bamba", "has state-space layers without attention or KV cache"},
    {"jamba", "has state-space layers without attention or KV cache"},
    {"nemotron_h", "has state-space layers without attention or KV cache"},
    {"falcon_h1", "runs state-space heads beside attention in every layer"},
    {"falcon_mamba", "has no attention"},
    {"mamba", "has no attention"},
    {"mamba2", "has no attention"},
    {"zamba", "has state-space layers without attention or KV cache"},
    {"zamba2", "has state-space layers without attention or KV cache"},
    {"granitemoehybrid", "has state-space layers without attention or KV cache"},
    {"qwen3_next", "has linear-attention layers without a KV cache"},
    {"lfm2", "has convolution layers without attention or KV cache"},
    {"recurrent_gemma", "has recurrent layers without attention or KV cache"},
    {"RefinedWeb", "is the pre-transformers Falcon spelling; transformers reads it as model type falcon"},
    {"RefinedWebModel", "is the pre-transformers Falcon spelling; transformers reads it as model type falcon"},
};

void kvl_model_types(char *out, size_t cap)
{
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < sizeof type_readings / sizeof *type_readings && o < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? ", " : "", type_readings[i].type);
}

/* The reading of the file's model_type; refused when the type is not one of type_readings, or when the fields
 * present belong to another generation than the type's class reads (transformers would ignore them). */
static int read_model_type(reader *r, kvl_generation *g)
{
    const cJSON *it = find(r->root, "model_type");
    *g = recognise(r->root);
    if (!it || cJSON_IsNull(it)) {
        r->t = &untyped_reading;
        return KVL_OK;
    }
    if (!cJSON_IsString(it))
        return kvl_fail(KVL_EINVAL, "%s: field \"model_type\" must be a string, got %s", r->origin, shown(it));
    const char *type = it->valuestring;
    r->t = NULL;
    for (size_t i = 0; i < sizeof type_readings / sizeof *type_readings; i++)
        if (strcmp(type, type_readings[i].type) == 0) r->t = &type_readings[i];
    if (!r->t) {
        char known[256];
        kvl_model_types(known, sizeof known);
        for (size_t i = 0; i < sizeof types_refused / sizeof *types_refused; i++)
            if (strcmp(type, types_refused[i].type) == 0)
                return kvl_fail(KVL_EINVAL, "%s: field \"model_type\" is \"%s\", which %s: ref/ computes none of it, "
                                "so it is refused (read: %s)", r->origin, file_text(type), types_refused[i].why, known);
        return kvl_fail(KVL_EINVAL, "%s: field \"model_type\" is \"%s\", not one whose meaning this project holds to "
                        "(it reads %s)", r->origin, file_text(type), known);
    }
    if (*g != r->t->generation) {
        static const char *const marks[] = {NULL, "kv_lora_rank", "index_topk", "compress_ratios", "kv_source_layers"};
        const char *mark = *g > r->t->generation ? marks[*g] : marks[r->t->generation];
        if (*g == KVL_GEN_V4 && !find(r->root, mark)) mark = find(r->root, "compress_rates") ? "compress_rates" : "layer_types";
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" %s, but model_type \"%s\" is a %s model: its code %s; refused "
                        "rather than read either way", r->origin, mark, *g > r->t->generation ? "is present" : "is missing",
                        type, kvl_generation_name(r->t->generation),
                        *g > r->t->generation ? "ignores that field" : "needs it");
    }
    return KVL_OK;
}

/* ---- rotary settings ---------------------------------------------------------------------------
 * Three spellings, each read with the meaning of the code that writes it:
 *   rope_scaling {...} / rope_parameters {...}  transformers (modeling_rope_utils.py,
 *       _compute_yarn_parameters; modeling_deepseek_v3.py, yarn_apply_mscale): cos and sin are
 *       multiplied by attention_factor (given, or m(factor, mscale) / m(factor, mscale_all_dim) when
 *       both are set and non-zero, else m(factor, 1)), and MLA's softmax scale by m(factor,
 *       mscale_all_dim)² when mscale_all_dim is non-zero;
 *   flat rope_factor, original_seq_len, mscale  DeepSeek's inference code (inference/model.py,
 *       precompute_freqs_cis and MLA.__init__): no factor on cos and sin, the softmax scale times
 *       m(rope_factor, mscale)²; for V2/V3 its ModelArgs defaults apply to the fields a file leaves
 *       out (rope_factor 40, original_seq_len 4096, mscale 1), and YaRN only while max_seq_len
 *       (default 16384) exceeds original_seq_len;
 *   none of these   plain RoPE at rope_theta.
 * with m(f, s) = 0.1·s·ln f + 1 (1 for f ≤ 1; kvl_yarn_mscale, ref/core/rope.h). The published DeepSeek configs set mscale equal to
 * mscale_all_dim, where both conventions compute the same layer. */

static const char *const flat_rope_fields[] = {"rope_factor", "original_seq_len", "mscale", "max_seq_len"};

/* obj's member `name` when it is an object; NULL when absent or null; an error for anything else. */
static int optional_object(const reader *r, const cJSON *obj, const char *name, const char *path,
                           const cJSON **out)
{
    const cJSON *it = find(obj, name);
    *out = NULL;
    if (!it || cJSON_IsNull(it)) return KVL_OK;
    if (!cJSON_IsObject(it))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s%s\" must be an object or null, got %s", r->origin, path, name,
                        shown(it));
    *out = it;
    return KVL_OK;
}

/* A string member or NULL; anything else than a string or null is an error. */
static int optional_string(const reader *r, const cJSON *obj, const char *name, const char *path, const char **out)
{
    const cJSON *it = find(obj, name);
    *out = NULL;
    if (!it || cJSON_IsNull(it)) return KVL_OK;
    if (!cJSON_IsString(it))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s%s\" must be a string, got %s", r->origin, path, name, shown(it));
    *out = it->valuestring;
    return KVL_OK;
}

static int optional_bool(const reader *r, const cJSON *obj, const char *name, int dflt, int *out)
{
    const cJSON *it = find(obj, name);
    *out = dflt;
    if (!it || cJSON_IsNull(it)) return KVL_OK;
    if (!cJSON_IsBool(it))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must be true or false, got %s", r->origin, name, shown(it));
    *out = cJSON_IsTrue(it);
    return KVL_OK;
}

/* rope_theta as the top level and the rotary object `obj` (at `path`, ending in '.') state it: both
 * must agree. */
static int read_theta(const reader *r, const char *top_name, const cJSON *obj, const char *path, int optional,
                      double *theta)
{
    const real_field f = {.hf = top_name, .lo = 1, .hi = 1e12, .optional = 1, .dflt = 0};
    double top, inner = 0;
    KVL_TRY(read_real(r, r->root, f, &top));
    if (obj) KVL_TRY(read_real(r, obj, (real_field){.hf = "rope_theta", .lo = 1, .hi = 1e12, .optional = 1}, &inner));
    if (top && inner && top != inner) {
        char va[32], vb[32], name[64];
        snprintf(va, sizeof va, "%.17g", top);
        snprintf(vb, sizeof vb, "%.17g", inner);
        snprintf(name, sizeof name, "%srope_theta", path);
        return two_spellings(r, top_name, name, va, vb);
    }
    *theta = top ? top : inner ? inner : 10000;
    if (!top && !inner && !optional) return missing(r, r->root, top_name, NULL);
    return KVL_OK;
}

/* Plain RoPE: no YaRN, no factor on cos and sin; the unused YaRN fields at DeepSeek's defaults. */
static void plain_rope(kvl_rope_config *rope)
{
    rope->factor = 1;
    rope->original_len = 4096;
    rope->beta_fast = 32;
    rope->beta_slow = 1;
    rope->mscale = 1;
    rope->attention_factor = 1;
}

/* The rope type of a transformers rotary object: "rope_type", or the older "type"; both must agree. */
static int rope_type(const reader *r, const cJSON *obj, const char *path, const char **type)
{
    const char *a, *b;
    KVL_TRY(optional_string(r, obj, "rope_type", path, &a));
    KVL_TRY(optional_string(r, obj, "type", path, &b));
    if (a && b && strcmp(a, b)) {
        char na[64], nb[64], qa[64], qb[64];
        snprintf(na, sizeof na, "%srope_type", path);
        snprintf(nb, sizeof nb, "%stype", path);
        snprintf(qa, sizeof qa, "\"%s\"", file_text(a));
        snprintf(qb, sizeof qb, "\"%s\"", file_text(b));
        return two_spellings(r, na, nb, qa, qb);
    }
    *type = a ? a : b ? b : "default";
    return KVL_OK;
}

/* YaRN's original context, as transformers' standardize_rope_params settles it: a top-level
 * original_max_position_embeddings takes precedence over the rotary object's (two values are refused here),
 * and where neither states one, max_position_embeddings. */
static int read_original_len(const reader *r, const cJSON *obj, const char *path, double *len)
{
    const real_field f = {.hf = "original_max_position_embeddings", .lo = 1, .hi = 1e9, .optional = 1, .dflt = 0};
    double top, inner;
    KVL_TRY(read_real(r, r->root, f, &top));
    KVL_TRY(read_real(r, obj, f, &inner));
    if (top && inner && top != inner) {
        char va[32], vb[32], name[80];
        snprintf(va, sizeof va, "%.17g", top);
        snprintf(vb, sizeof vb, "%.17g", inner);
        snprintf(name, sizeof name, "%soriginal_max_position_embeddings", path);
        return two_spellings(r, "original_max_position_embeddings", name, va, vb);
    }
    *len = top ? top : inner;
    if (*len) return KVL_OK;
    KVL_TRY(read_real(r, r->root, (real_field){.hf = "max_position_embeddings", .lo = 1, .hi = 1e9, .optional = 1}, len));
    if (*len) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "%s: missing field \"%soriginal_max_position_embeddings\" (nor \"max_position_embeddings\", "
                    "which transformers takes in its place)", r->origin, path);
}

/* YaRN ramps the frequencies between the dimension where beta_fast rotations fit the original context and the
 * one where beta_slow do: beta_fast must be the larger, or the ramp is empty (equal) or runs backwards. */
static int check_betas(const reader *r, const char *path, const kvl_rope_config *rope)
{
    if (rope->beta_fast > rope->beta_slow) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "%s: fields \"%sbeta_fast\" (%g) and \"%sbeta_slow\" (%g): YaRN needs beta_fast > beta_slow "
                    "(are they swapped?)", r->origin, path, rope->beta_fast, path, rope->beta_slow);
}

/* A transformers rotary object `obj` (at `path`, ending in '.') with rope_type default or yarn.
 * unit_attention_factor: the writer fills attention_factor 1 when the file leaves it out
 * (transformers' DeepseekV4Config does for the compress rope it builds from rope_scaling). */
static int read_hf_rope(const reader *r, const cJSON *obj, const char *path, int unit_attention_factor,
                        kvl_rope_config *rope)
{
    const char *type = "default";
    KVL_TRY(rope_type(r, obj, path, &type));
    plain_rope(rope);
    double factor;
    KVL_TRY(read_real(r, obj, (real_field){.hf = "factor", .lo = 1, .hi = 1e6, .optional = 1, .dflt = 1}, &factor));
    if (strcmp(type, "default") == 0) {
        if (factor != 1)
            return kvl_fail(KVL_EINVAL, "%s: field \"%sfactor\" is %g under rope type \"default\", which ignores it: set "
                            "\"rope_type\": \"yarn\" or drop the factor", r->origin, path, factor);
        return KVL_OK;
    }
    if (strcmp(type, "yarn") != 0)
        return kvl_fail(KVL_EINVAL, "%s: field \"%srope_type\" is \"%s\": only \"default\" and \"yarn\" rotary "
                        "embeddings are implemented", r->origin, path, file_text(type));
    int truncate;
    KVL_TRY(optional_bool(r, obj, "truncate", 1, &truncate));
    if (!truncate)
        return kvl_fail(KVL_EINVAL, "%s: field \"%struncate\" is false: only YaRN's truncated correction range "
                        "(the default) is implemented", r->origin, path);
    if (!find(obj, "factor")) return missing(r, obj, "factor", NULL);
    rope->factor = factor;
    KVL_TRY(read_original_len(r, obj, path, &rope->original_len));
    /* transformers reads beta_fast `or 32` and beta_slow `or 1`: 0 and null are the defaults too */
    KVL_TRY(read_real(r, obj, (real_field){.hf = "beta_fast", .lo = 0, .hi = 1e6, .optional = 1, .dflt = 32}, &rope->beta_fast));
    KVL_TRY(read_real(r, obj, (real_field){.hf = "beta_slow", .lo = 0, .hi = 1e6, .optional = 1, .dflt = 1}, &rope->beta_slow));
    if (rope->beta_fast == 0) rope->beta_fast = 32;
    if (rope->beta_slow == 0) rope->beta_slow = 1;
    KVL_TRY(check_betas(r, path, rope));
    double ms, mad, af;
    KVL_TRY(read_real(r, obj, (real_field){.hf = "mscale", .lo = 0, .hi = 1e3, .optional = 1, .dflt = 0}, &ms));
    KVL_TRY(read_real(r, obj, (real_field){.hf = "mscale_all_dim", .lo = 0, .hi = 1e3, .optional = 1, .dflt = 0}, &mad));
    KVL_TRY(read_real(r, obj, (real_field){.hf = "attention_factor", .lo = 0, .hi = 1e3, .optional = 1, .dflt = -1}, &af));
    if (af < 0) af = unit_attention_factor ? 1 : ms && mad ? kvl_yarn_mscale(factor, ms) / kvl_yarn_mscale(factor, mad) : kvl_yarn_mscale(factor, 1);
    rope->attention_factor = af;
    rope->mscale = mad;
    return KVL_OK;
}

/* DeepSeek's flat YaRN fields; v3_model_args: V2/V3's ModelArgs defaults and max_seq_len rule. */
static int read_flat_rope(const reader *r, int v3_model_args, kvl_rope_config *rope)
{
    const cJSON *o = r->root;
    KVL_TRY(read_real(r, o, (real_field){.hf = "rope_factor", .lo = 1, .hi = 1e6, .optional = 1, .dflt = v3_model_args ? 40 : 1}, &rope->factor));
    int yarn = rope->factor > 1;
    KVL_TRY(read_real(r, o, (real_field){.hf = "original_seq_len", .lo = 1, .hi = 1e9, .optional = !yarn || v3_model_args, .dflt = 4096}, &rope->original_len));
    KVL_TRY(read_real(r, o, (real_field){.hf = "beta_fast", .lo = 1e-6, .hi = 1e6, .optional = 1, .dflt = 32}, &rope->beta_fast));
    KVL_TRY(read_real(r, o, (real_field){.hf = "beta_slow", .lo = 1e-6, .hi = 1e6, .optional = 1, .dflt = 1}, &rope->beta_slow));
    KVL_TRY(check_betas(r, "", rope));
    KVL_TRY(read_real(r, o, (real_field){.hf = "mscale", .lo = 0, .hi = 1e3, .optional = 1, .dflt = 1}, &rope->mscale));
    double max_seq_len;
    KVL_TRY(read_real(r, o, (real_field){.hf = "max_seq_len", .lo = 1, .hi = 1e12, .optional = 1, .dflt = 16384}, &max_seq_len));
    if (v3_model_args && max_seq_len <= rope->original_len) rope->factor = 1;
    rope->attention_factor = 1;
    return KVL_OK;
}

/* The rotary object of a transformers file (rope_scaling or rope_parameters, not both), and whether
 * DeepSeek's flat YaRN fields sit beside it (an error: one setting in two spellings). */
static int rope_object(const reader *r, kvl_model *m, const cJSON **obj, const char **path)
{
    const cJSON *scaling, *params;
    KVL_TRY(optional_object(r, r->root, "rope_scaling", "", &scaling));
    KVL_TRY(optional_object(r, r->root, "rope_parameters", "", &params));
    if (scaling && params)
        return kvl_fail(KVL_EINVAL, "%s: fields \"rope_scaling\" and \"rope_parameters\" both hold rotary settings: "
                        "keep one", r->origin);
    *obj = scaling ? scaling : params;
    *path = scaling ? "rope_scaling." : "rope_parameters.";
    int flat = 0;
    for (size_t i = 0; i < sizeof flat_rope_fields / sizeof *flat_rope_fields; i++)
        if (find(r->root, flat_rope_fields[i])) {
            if (*obj)
                return kvl_fail(KVL_EINVAL, "%s: field \"%s\" (DeepSeek's flat YaRN spelling) beside \"%.*s\": the "
                                "two spellings mean different scalings; keep one", r->origin, flat_rope_fields[i],
                                (int)strlen(*path) - 1, *path);
            flat = 1;
        }
    m->rope_spelling = scaling ? KVL_ROPE_SCALING : params ? KVL_ROPE_PARAMETERS : flat ? KVL_ROPE_FLAT : KVL_ROPE_PLAIN;
    return KVL_OK;
}

/* A partial_rotary_factor in `obj` (or the top level) must give the rotary width Dr of head_dim. */
static int check_partial_rotary(const reader *r, const cJSON *obj, const char *path, size_t Dr, size_t head_dim)
{
    if (!obj) return KVL_OK;
    double f;
    KVL_TRY(read_real(r, obj, (real_field){.hf = "partial_rotary_factor", .lo = 0, .hi = 1, .optional = 1, .dflt = -1}, &f));
    if (f < 0 || f * (double)head_dim == (double)Dr) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "%s: field \"%spartial_rotary_factor\" (%g) rotates %g of the %zu head channels; the "
                    "config's rotary width is %zu", r->origin, path, f, f * (double)head_dim, head_dim, Dr);
}

/* MHA, MLA and DSA: one rotary table for queries and keys. */
static int read_rope_dense(const reader *r, kvl_model *m, size_t head_dim)
{
    const cJSON *obj;
    const char *path;
    KVL_TRY(rope_object(r, m, &obj, &path));
    if (obj && (cJSON_IsObject(find(obj, "main")) || cJSON_IsObject(find(obj, "compress"))))
        return kvl_fail(KVL_EINVAL, "%s: field \"%smain\": rotary settings per rope kind are V4's, and this config "
                        "has no compress_ratios or compress_rates", r->origin, path);
    KVL_TRY(read_theta(r, "rope_theta", obj, path, 1, &m->rope.theta));
    int dsv3 = m->generation != KVL_GEN_MHA && find(r->root, "dim") != NULL;
    if (obj) KVL_TRY(read_hf_rope(r, obj, path, 0, &m->rope));
    else if (m->rope_spelling == KVL_ROPE_FLAT || dsv3) {
        m->rope_spelling = KVL_ROPE_FLAT;
        KVL_TRY(read_flat_rope(r, m->generation != KVL_GEN_MHA, &m->rope));
    } else plain_rope(&m->rope);
    KVL_TRY(check_partial_rotary(r, r->root, "", m->qk_rope_head_dim, head_dim));
    KVL_TRY(check_partial_rotary(r, obj, path, m->qk_rope_head_dim, head_dim));
    /* DeepSeek's MLA pairs channels (2i, 2i+1); transformers' rope_interleave false pairs (i, i + Dr/2),
     * as MHA here does always (transformers' rotate_half). */
    KVL_TRY(optional_bool(r, r->root, "rope_interleave", m->generation != KVL_GEN_MHA, &m->rope.interleaved));
    if (m->generation == KVL_GEN_MHA && m->rope.interleaved)
        return kvl_fail(KVL_EINVAL, "%s: field \"rope_interleave\" is true: MHA here rotates the pairs (i, i + Dh/2), "
                        "as transformers' Llama does", r->origin);
    return KVL_OK;
}

/* V4 and V4.1: plain RoPE at rope_theta on window-only layers, the compress rope (compress_rope_theta,
 * YaRN) on every layer with a compressor. transformers 5 nests them as rope_parameters.main and
 * .compress. Neither code scales cos and sin here, nor pairs the channels other than (2i, 2i+1). */
static int read_rope_v4(const reader *r, kvl_model *m)
{
    const cJSON *obj, *main_obj = NULL, *compress_obj;
    const char *path, *compress_path;
    KVL_TRY(rope_object(r, m, &obj, &path));
    int nested = obj && (find(obj, "main") || find(obj, "compress"));
    if (nested) {
        KVL_TRY(optional_object(r, obj, "main", path, &main_obj));
        KVL_TRY(optional_object(r, obj, "compress", path, &compress_obj));
        if (!main_obj || !compress_obj)
            return kvl_fail(KVL_EINVAL, "%s: field \"%s\" must hold both \"main\" and \"compress\"", r->origin, "rope_parameters");
        compress_path = "rope_parameters.compress.";
    } else {
        compress_obj = obj;
        compress_path = path;
    }
    double theta, ctheta;
    KVL_TRY(read_theta(r, "rope_theta", nested ? main_obj : obj, nested ? "rope_parameters.main." : path, 1, &theta));
    KVL_TRY(read_theta(r, "compress_rope_theta", nested ? compress_obj : NULL, "rope_parameters.compress.", 0, &ctheta));
    if (main_obj) {
        kvl_rope_config plain = {0};
        KVL_TRY(read_hf_rope(r, main_obj, "rope_parameters.main.", 1, &plain));
        if (plain.factor != 1)
            return kvl_fail(KVL_EINVAL, "%s: field \"rope_parameters.main.rope_type\": YaRN on the window-only layers' "
                            "rope is outside V4's design, which scales only the compress rope: refused", r->origin);
    }
    m->compress_rope.theta = ctheta;
    if (compress_obj) KVL_TRY(read_hf_rope(r, compress_obj, compress_path, !nested, &m->compress_rope));
    else KVL_TRY(read_flat_rope(r, 0, &m->compress_rope));
    if (m->compress_rope.attention_factor != 1)
        return kvl_fail(KVL_EINVAL, "%s: field \"%sattention_factor\" is %g (transformers derives it when it is left out "
                        "of a nested rope_parameters): this project keeps V4's cos and sin unscaled; set it to 1.0, "
                        "as transformers' own DeepseekV4Config does", r->origin, compress_path, m->compress_rope.attention_factor);
    m->compress_rope.interleaved = 1;
    int interleaved;
    KVL_TRY(optional_bool(r, r->root, "rope_interleave", 1, &interleaved));
    if (!interleaved)
        return kvl_fail(KVL_EINVAL, "%s: field \"rope_interleave\" is false: V4 pairs its rotary channels (2i, 2i+1)",
                        r->origin);
    KVL_TRY(check_partial_rotary(r, r->root, "", m->qk_rope_head_dim, m->head_dim));
    KVL_TRY(check_partial_rotary(r, main_obj, "rope_parameters.main.", m->qk_rope_head_dim, m->head_dim));
    KVL_TRY(check_partial_rotary(r, compress_obj, compress_path, m->qk_rope_head_dim, m->head_dim));
    m->rope = (kvl_rope_config){.theta = theta, .factor = 1, .original_len = m->compress_rope.original_len,
                                .beta_fast = m->compress_rope.beta_fast, .beta_slow = m->compress_rope.beta_slow,
                                .mscale = 1, .attention_factor = 1, .interleaved = 1};
    return KVL_OK;
}

/* A layer_types list of "full_attention" and "sliding_attention": the window W read from sliding_window stays
 * when every layer slides and is dropped when none does; ref/mha and the tables apply one window to a whole
 * model, so a mix is refused. */
static int window_of_layer_types(const reader *r, kvl_model *m, const cJSON *types)
{
    if (!cJSON_IsArray(types))
        return kvl_fail(KVL_EINVAL, "%s: field \"layer_types\" must be a list of strings, got %s", r->origin, shown(types));
    size_t n_sliding = 0, i = 0;
    for (const cJSON *e = types->child; e; e = e->next, i++) {
        int sliding = cJSON_IsString(e) && strcmp(e->valuestring, "sliding_attention") == 0;
        if (!sliding && !(cJSON_IsString(e) && strcmp(e->valuestring, "full_attention") == 0))
            return kvl_fail(KVL_EINVAL, "%s: field \"layer_types\" entry %zu must be \"full_attention\" or "
                            "\"sliding_attention\", got %s", r->origin, i, shown(e));
        n_sliding += (size_t)sliding;
    }
    if (i < m->n_layers)
        return kvl_fail(KVL_EINVAL, "%s: field \"layer_types\" has %zu entries for %zu layers", r->origin, i, m->n_layers);
    if (n_sliding == 0) m->window = 0;
    else if (n_sliding < i)
        return kvl_fail(KVL_EINVAL, "%s: field \"layer_types\" mixes %zu sliding-window layers with %zu full ones: ref/mha "
                        "and the tables apply one window to every layer of a model, so this is refused", r->origin, n_sliding, i - n_sliding);
    else if (!m->window)
        return kvl_fail(KVL_EINVAL, "%s: field \"layer_types\" makes every layer \"sliding_attention\" but "
                        "\"sliding_window\" sets no window", r->origin);
    return KVL_OK;
}

/* Qwen2 and Qwen3 (configuration_qwen2.py, _qwen3.py): no window unless use_sliding_window (default false);
 * then layer_types as written, or sliding on the layers i >= max_window_layers. */
static int read_qwen_window(const reader *r, kvl_model *m)
{
    int use;
    KVL_TRY(optional_bool(r, r->root, "use_sliding_window", 0, &use));
    size_t first;
    KVL_TRY(read_size(r, r->root, (size_field){.hf = "max_window_layers", .lo = 0, .hi = MAX_LAYERS, .optional = 1,
                                               .dflt = r->t->max_window_layers}, &first));
    if (!use || !m->window) {
        m->window = 0;
        return KVL_OK;
    }
    const cJSON *types = find(r->root, "layer_types");
    if (types && !cJSON_IsNull(types)) return window_of_layer_types(r, m, types);
    if (first >= m->n_layers) m->window = 0;
    else if (first > 0)
        return kvl_fail(KVL_EINVAL, "%s: field \"max_window_layers\" (%zu) slides layers %zu to %zu only: ref/mha and the "
                        "tables apply one window to every layer of a model, so this is refused", r->origin, first, first,
                        m->n_layers - 1);
    return KVL_OK;
}

/* MHA's window W, by the model type's rule (type_reading.window). A file without model_type keeps the
 * fields' plain meaning: sliding_window (window_size), dropped where use_sliding_window is false, and
 * layer_types as written. */
static int read_mha_window(const reader *r, kvl_model *m)
{
    if (r->t->window == WINDOW_NONE) {   /* check_fields has refused the window fields its class lacks */
        m->window = 0;
        return KVL_OK;
    }
    KVL_TRY(read_size(r, r->root, (size_field){.hf = "sliding_window", .ds = spelling(r, "sliding_window", "window_size"), .lo = 0,
                                               .hi = MAX_DIM, .optional = 1, .dflt = r->t->window_dflt, .null_is_zero = 1},
                      &m->window));
    if (r->t->window == WINDOW_QWEN) return read_qwen_window(r, m);
    const cJSON *types = find(r->root, "layer_types");
    if (r->t->type) return KVL_OK;   /* Mistral, Mixtral: every layer; check_fields refused a layer_types */
    int use;
    KVL_TRY(optional_bool(r, r->root, "use_sliding_window", 1, &use));
    if (!use) m->window = 0;
    if (!types || cJSON_IsNull(types)) return KVL_OK;
    return window_of_layer_types(r, m, types);
}

/* V4's rotary width Dr: qk_rope_head_dim (rope_head_dim in DeepSeek's spelling), or what transformers'
 * DeepseekV4Config keeps, partial_rotary_factor·head_dim; check_partial_rotary holds the two equal. */
static int read_v4_rotary_width(const reader *r, kvl_model *m)
{
    KVL_TRY(read_size(r, r->root, (size_field){.hf = "qk_rope_head_dim", .ds = spelling(r, "qk_rope_head_dim", "rope_head_dim"), .lo = 2, .hi = MAX_DIM, .optional = 1}, &m->qk_rope_head_dim));
    if (m->qk_rope_head_dim) return KVL_OK;
    double f;
    KVL_TRY(read_real(r, r->root, (real_field){.hf = "partial_rotary_factor", .lo = 0, .hi = 1, .optional = 1, .dflt = -1}, &f));
    if (f < 0) return missing(r, r->root, "qk_rope_head_dim", "rope_head_dim");
    double dr = f * (double)m->head_dim;
    if (dr != floor(dr) || dr < 2)
        return kvl_fail(KVL_EINVAL, "%s: field \"partial_rotary_factor\" (%g) of head_dim %zu is not a whole rotary "
                        "width of at least 2", r->origin, f, m->head_dim);
    m->qk_rope_head_dim = (size_t)dr;
    return KVL_OK;
}

/* attention_bias as the type's modeling file applies it: q, k, v (MLA: q_a, kv_a) and o together; Qwen2
 * biases q, k and v whatever the config says, and V4's modeling builds no bias at all. */
static int read_attention_bias(const reader *r, kvl_model *m)
{
    int on;
    KVL_TRY(optional_bool(r, r->root, "attention_bias", 0, &on));
    m->attention_bias = on ? KVL_BIAS_IN | KVL_BIAS_OUT : 0;
    if (is_type(r, "qwen2")) m->attention_bias = KVL_BIAS_IN;
    if (m->generation >= KVL_GEN_V4) m->attention_bias = 0;
    return KVL_OK;
}

/* MHA's head width Dh (head_dim, or the type's default; Falcon's class has none: hidden_size / heads) and, for
 * Falcon, its KV heads, which its configuration derives: num_kv_heads where new_decoder_architecture is true or multi_query false, else 1 (multi_query's
 * default is true); a num_key_value_heads in the file must agree with what Falcon derives. */
static int read_mha_heads(const reader *r, kvl_model *m)
{
    const cJSON *o = r->root;
    const int falcon = is_type(r, "falcon");
    if (falcon) {
        size_t kv;
        int new_arch, multi_query;
        KVL_TRY(read_size(r, o, (size_field){.hf = "num_kv_heads", .lo = 1, .hi = MAX_DIM, .optional = 1, .dflt = m->n_heads}, &kv));
        KVL_TRY(optional_bool(r, o, "new_decoder_architecture", 0, &new_arch));
        KVL_TRY(optional_bool(r, o, "multi_query", 1, &multi_query));
        const size_t derived = new_arch || !multi_query ? kv : 1;
        if (find(o, "num_key_value_heads") && m->n_kv_heads != derived)
            return kvl_fail(KVL_EINVAL, "%s: field \"num_key_value_heads\" (%zu) disagrees with the %zu KV heads Falcon "
                            "derives from num_kv_heads, multi_query and new_decoder_architecture: keep one", r->origin,
                            m->n_kv_heads, derived);
        m->n_kv_heads = derived;
    }
    const size_t derived_dh = m->d / m->n_heads;
    if (!r->t->head_dim && !find(o, "head_dim") && m->d % m->n_heads)
        return kvl_fail(KVL_EINVAL, "%s: field \"num_attention_heads\" (%zu) does not divide \"hidden_size\" (%zu)",
                        r->origin, m->n_heads, m->d);
    const size_t dflt = r->t->head_dim ? r->t->head_dim : derived_dh;
    KVL_TRY(read_size(r, o, (size_field){.hf = "head_dim", .lo = 2, .hi = MAX_DIM, .optional = 1, .dflt = dflt}, &m->head_dim));
    return KVL_OK;
}

static int read_dims(const reader *r, kvl_model *m)
{
    const cJSON *o = r->root;
    const size_t D = MAX_DIM;
    KVL_TRY(read_size(r, o, (size_field){.hf = "hidden_size", .ds = spelling(r, "hidden_size", "dim"), .lo = 1, .hi = D}, &m->d));
    KVL_TRY(read_size(r, o, (size_field){.hf = "num_hidden_layers", .ds = spelling(r, "num_hidden_layers", "n_layers"), .lo = 1, .hi = MAX_LAYERS}, &m->n_layers));
    KVL_TRY(read_size(r, o, (size_field){.hf = "num_attention_heads", .ds = spelling(r, "num_attention_heads", "n_heads"), .lo = 1, .hi = D}, &m->n_heads));
    const size_t kv_dflt = r->t->kv_heads ? r->t->kv_heads : m->generation >= KVL_GEN_V4 ? 1 : m->n_heads;
    KVL_TRY(read_size(r, o,
                      (size_field){.hf = "num_key_value_heads", .lo = 1, .hi = D, .optional = 1,
                                   .dflt = kv_dflt},
                      &m->n_kv_heads));
    KVL_TRY(read_real(r, o, (real_field){.hf = "rms_norm_eps", .ds = spelling(r, "rms_norm_eps", "norm_eps"), .lo = 0, .hi = 1, .optional = 1, .dflt = r->t->norm_eps}, &m->norm_eps));
    if (m->norm_eps == 0)   /* RMSNorm of an all-zero row would be 0/0 */
        return kvl_fail(KVL_EINVAL, "%s: field \"rms_norm_eps\" (or \"norm_eps\") must be positive, got 0", r->origin);
    KVL_TRY(read_attention_bias(r, m));
    switch (m->generation) {
    case KVL_GEN_MHA:
        KVL_TRY(read_mha_heads(r, m));
        m->qk_rope_head_dim = m->head_dim;
        m->v_head_dim = m->head_dim;
        KVL_TRY(read_mha_window(r, m));
        KVL_TRY(read_rope_dense(r, m, m->head_dim));
        break;
    case KVL_GEN_DSA:
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_n_heads", .ds = NULL, .lo = 1, .hi = D}, &m->index_n_heads));
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_head_dim", .ds = NULL, .lo = 2, .hi = D},
                          &m->index_head_dim));
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_topk", .ds = NULL, .lo = 1, .hi = D}, &m->index_topk));
        __attribute__((fallthrough));  /* DSA is MLA plus an indexer */
    case KVL_GEN_MLA:
        KVL_TRY(read_size(r, o, (size_field){.hf = "q_lora_rank", .ds = NULL, .lo = 0, .hi = D, .optional = 1, .dflt = 0, .null_is_zero = 1}, &m->q_lora_rank));
        KVL_TRY(read_size(r, o, (size_field){.hf = "kv_lora_rank", .ds = NULL, .lo = 1, .hi = D}, &m->kv_lora_rank));
        KVL_TRY(read_size(r, o, (size_field){.hf = "qk_nope_head_dim", .ds = NULL, .lo = 1, .hi = D}, &m->qk_nope_head_dim));
        KVL_TRY(read_size(r, o, (size_field){.hf = "qk_rope_head_dim", .ds = spelling(r, "qk_rope_head_dim", "rope_head_dim"), .lo = 2, .hi = D}, &m->qk_rope_head_dim));
        KVL_TRY(read_size(r, o, (size_field){.hf = "v_head_dim", .ds = NULL, .lo = 1, .hi = D}, &m->v_head_dim));
        m->head_dim = m->qk_nope_head_dim + m->qk_rope_head_dim;
        KVL_TRY(read_rope_dense(r, m, m->qk_rope_head_dim));
        break;
    case KVL_GEN_V4:
    case KVL_GEN_V41:
        KVL_TRY(read_size(r, o, (size_field){.hf = "head_dim", .ds = NULL, .lo = 2, .hi = D}, &m->head_dim));
        KVL_TRY(read_v4_rotary_width(r, m));
        KVL_TRY(read_size(r, o, (size_field){.hf = "q_lora_rank", .ds = NULL, .lo = 1, .hi = D}, &m->q_lora_rank));
        KVL_TRY(read_size(r, o, (size_field){.hf = "o_groups", .ds = NULL, .lo = 1, .hi = D}, &m->o_groups));
        KVL_TRY(read_size(r, o, (size_field){.hf = "o_lora_rank", .ds = NULL, .lo = 1, .hi = D}, &m->o_lora_rank));
        KVL_TRY(read_size(r, o, (size_field){.hf = "sliding_window", .ds = spelling(r, "sliding_window", "window_size"), .lo = 1, .hi = D},
                          &m->window));
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_n_heads", .ds = NULL, .lo = 1, .hi = D}, &m->index_n_heads));
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_head_dim", .ds = NULL, .lo = 2, .hi = D},
                          &m->index_head_dim));
        KVL_TRY(read_size(r, o, (size_field){.hf = "index_topk", .ds = NULL, .lo = 1, .hi = D}, &m->index_topk));
        m->v_head_dim = m->head_dim;
        if (m->n_kv_heads != 1)
            return kvl_fail(KVL_EINVAL, "%s: field \"num_key_value_heads\" must be 1 (one shared key-value entry), got %zu",
                            r->origin, m->n_kv_heads);
        if (m->n_heads % m->o_groups)
            return kvl_fail(KVL_EINVAL, "%s: field \"o_groups\" (%zu) does not divide the %zu heads", r->origin,
                            m->o_groups, m->n_heads);
        KVL_TRY(read_rope_v4(r, m));
        break;
    }
    if (m->n_heads % m->n_kv_heads)
        return kvl_fail(KVL_EINVAL, "%s: field \"num_key_value_heads\" (%zu) does not divide the %zu query heads",
                        r->origin, m->n_kv_heads, m->n_heads);
    if (m->qk_rope_head_dim % 2)
        return kvl_fail(KVL_EINVAL, "%s: field \"qk_rope_head_dim\" must be even (rotation pairs), got %zu", r->origin,
                        m->qk_rope_head_dim);
    if (m->qk_rope_head_dim > m->head_dim)
        return kvl_fail(KVL_EINVAL, "%s: field \"qk_rope_head_dim\" (%zu) exceeds the head dim (%zu)", r->origin,
                        m->qk_rope_head_dim, m->head_dim);
    if (m->index_n_heads && m->index_head_dim < m->qk_rope_head_dim)
        return kvl_fail(KVL_EINVAL, "%s: field \"index_head_dim\" (%zu) is narrower than the rotary part (%zu)",
                        r->origin, m->index_head_dim, m->qk_rope_head_dim);
    return KVL_OK;
}

/* compress_ratios covers the backbone, optionally followed by one entry per MTP/DSpark layer. */
static int read_ratios(const reader *r, const kvl_model *m, size_t **ratios)
{
    size_t n_extra, n;
    KVL_TRY(read_size(r, r->root, (size_field){.hf = "num_nextn_predict_layers", .ds = spelling(r, "num_nextn_predict_layers", "n_mtp_layers"), .lo = 0, .hi = MAX_LAYERS, .optional = 1, .dflt = 0},
                      &n_extra));
    KVL_TRY(read_list(r, r->root, "compress_ratios", MAX_DIM, 0, ratios, &n));
    if (n != m->n_layers && n != m->n_layers + n_extra) {
        free(*ratios);
        *ratios = NULL;
        return kvl_fail(KVL_EINVAL, "%s: field \"compress_ratios\" has %zu entries; expected %zu (one per layer)%s", r->origin,
                        n, m->n_layers, n_extra ? " or that plus one per MTP layer" : "");
    }
    return KVL_OK;
}

/* compress_ratios as DeepSeek's V4 inference code reads them: ratio 4 overlaps blocks and carries an
 * indexer (CSA); any other positive ratio pools whole blocks and reads every entry (HCA). */
static kvl_layer v4_layer_of_ratio(size_t i, size_t ratio)
{
    if (ratio == 0) return (kvl_layer){KVL_LAYER_WINDOW, 0, -1, -1};
    if (ratio == 4) return (kvl_layer){KVL_LAYER_CSA, 4, (int)i, (int)i};
    return (kvl_layer){KVL_LAYER_HCA, ratio, (int)i, -1};
}

/* The ratio of each layer kind of transformers' DeepseekV4Config: compress_rates {kind: M}, default
 * CSA 4 and HCA 128, or its older scalars compress_rate_csa / compress_rate_hca (the same setting). */
static int read_compress_rates(const reader *r, size_t rate[3])
{
    static const char *const scalar[] = {NULL, "compress_rate_csa", "compress_rate_hca"};
    const size_t dflt[] = {0, 4, 128};
    const cJSON *rates;
    KVL_TRY(optional_object(r, r->root, "compress_rates", "", &rates));
    for (const cJSON *c = rates ? rates->child : NULL; c; c = c->next)
        if (strcmp(c->string, v4_layer_types[1]) && strcmp(c->string, v4_layer_types[2]))
            return kvl_fail(KVL_EINVAL, "%s: field \"compress_rates.%s\": the rated layer types are \"%s\" and \"%s\"",
                            r->origin, file_text(c->string), v4_layer_types[1], v4_layer_types[2]);
    rate[0] = 0;
    for (size_t k = 1; k < 3; k++) {
        size_t in_rates = 0, alone = 0;
        if (rates)
            KVL_TRY(read_size(r, rates, (size_field){.hf = v4_layer_types[k], .lo = 1, .hi = MAX_DIM, .optional = 1}, &in_rates));
        KVL_TRY(read_size(r, r->root, (size_field){.hf = scalar[k], .lo = 1, .hi = MAX_DIM, .optional = 1}, &alone));
        if (in_rates && alone && in_rates != alone) {
            char name[80], va[24], vb[24];
            snprintf(name, sizeof name, "compress_rates.%s", v4_layer_types[k]);
            snprintf(va, sizeof va, "%zu", in_rates);
            snprintf(vb, sizeof vb, "%zu", alone);
            return two_spellings(r, name, scalar[k], va, vb);
        }
        rate[k] = in_rates ? in_rates : alone ? alone : dflt[k];
    }
    return KVL_OK;
}

/* layer_types as transformers 5 writes them, each kind at its compress_rates ratio; without the field
 * (and without compress_ratios) transformers' default: two HCA layers, then HCA and CSA alternating. */
static int read_v4_layer_types(const reader *r, kvl_model *m, size_t n_extra)
{
    size_t rate[3];
    KVL_TRY(read_compress_rates(r, rate));
    const cJSON *types = find(r->root, "layer_types");
    if (!types || cJSON_IsNull(types)) {
        for (size_t i = 0; i < m->n_layers; i++) {
            size_t k = i < 2 || i % 2 == 0 ? 2 : 1;
            m->layers[i] = (kvl_layer){k == 1 ? KVL_LAYER_CSA : KVL_LAYER_HCA, rate[k], (int)i, k == 1 ? (int)i : -1};
        }
        return KVL_OK;
    }
    size_t n = cJSON_IsArray(types) ? (size_t)cJSON_GetArraySize(types) : 0;
    if (!cJSON_IsArray(types) || (n != m->n_layers && n != m->n_layers + n_extra))
        return kvl_fail(KVL_EINVAL, "%s: field \"layer_types\" must list one kind per layer (%zu)%s, got %s", r->origin,
                        m->n_layers, n_extra ? " or that plus one per MTP layer" : "", shown(types));
    size_t i = 0;
    for (const cJSON *e = types->child; e && i < m->n_layers; e = e->next, i++) {
        size_t k = 0;
        while (k < 3 && !(cJSON_IsString(e) && strcmp(e->valuestring, v4_layer_types[k]) == 0)) k++;
        if (k == 3)
            return kvl_fail(KVL_EINVAL, "%s: field \"layer_types\" entry %zu must be one of \"%s\", \"%s\", \"%s\", got %s",
                            r->origin, i, v4_layer_types[0], v4_layer_types[1], v4_layer_types[2], shown(e));
        static const kvl_layer_kind kinds[] = {KVL_LAYER_WINDOW, KVL_LAYER_CSA, KVL_LAYER_HCA};
        m->layers[i] = (kvl_layer){kinds[k], rate[k], k ? (int)i : -1, k == 1 ? (int)i : -1};
    }
    return KVL_OK;
}

/* Under compress_ratios transformers takes only each layer's kind (4 CSA, 128 HCA) and its ratio from
 * compress_rates or the older compress_rate_csa / compress_rate_hca: a rate spelled there must agree with
 * every layer of its kind, or the layer would run at a ratio its writer did not mean. */
static int check_rates_beside_ratios(const reader *r, const kvl_model *m)
{
    static const char *const scalar[] = {NULL, "compress_rate_csa", "compress_rate_hca"};
    size_t rate[3];
    KVL_TRY(read_compress_rates(r, rate));
    const cJSON *rates = find(r->root, "compress_rates");
    for (size_t i = 0; i < m->n_layers; i++) {
        const kvl_layer *l = &m->layers[i];
        size_t k = l->kind == KVL_LAYER_CSA ? 1 : l->kind == KVL_LAYER_HCA ? 2 : 0;
        char name[80];
        if (k && find(r->root, scalar[k])) snprintf(name, sizeof name, "%s", scalar[k]);
        else if (k && cJSON_IsObject(rates) && find(rates, v4_layer_types[k]))
            snprintf(name, sizeof name, "compress_rates.%s", v4_layer_types[k]);
        else continue;
        if (rate[k] != l->compress_ratio)
            return kvl_fail(KVL_EINVAL, "%s: layer %zu is %s at ratio %zu under \"compress_ratios\", but field \"%s\" "
                            "gives %zu: keep one spelling", r->origin, i, kvl_layer_kind_name(l->kind), l->compress_ratio,
                            name, rate[k]);
    }
    return KVL_OK;
}

/* V4's layer map from compress_ratios, or layer_types and compress_rates; a file with both must give
 * every layer the same kind and ratio under each. */
static int layers_v4(const reader *r, kvl_model *m)
{
    size_t n_extra;
    KVL_TRY(read_size(r, r->root, (size_field){.hf = "num_nextn_predict_layers", .ds = spelling(r, "num_nextn_predict_layers", "n_mtp_layers"), .lo = 0, .hi = MAX_LAYERS, .optional = 1, .dflt = 0}, &n_extra));
    const cJSON *ratios = find(r->root, "compress_ratios");
    if (!ratios || cJSON_IsNull(ratios)) return read_v4_layer_types(r, m, n_extra);
    size_t *ratio;
    KVL_TRY(read_ratios(r, m, &ratio));
    int rc = KVL_OK;
    const cJSON *types = find(r->root, "layer_types");
    if (types && !cJSON_IsNull(types)) rc = read_v4_layer_types(r, m, n_extra);
    for (size_t i = 0; rc == KVL_OK && i < m->n_layers; i++) {
        kvl_layer want = v4_layer_of_ratio(i, ratio[i]);
        kvl_layer *l = &m->layers[i];
        if (types && !cJSON_IsNull(types) && (l->kind != want.kind || l->compress_ratio != want.compress_ratio))
            rc = kvl_fail(KVL_EINVAL, "%s: layer %zu is %s at ratio %zu under \"layer_types\" and \"compress_rates\", but "
                          "%s at ratio %zu under \"compress_ratios\": keep one spelling", r->origin, i,
                          kvl_layer_kind_name(l->kind), l->compress_ratio, kvl_layer_kind_name(want.kind), ratio[i]);
        *l = want;
    }
    free(ratio);
    if (rc == KVL_OK && (!types || cJSON_IsNull(types))) rc = check_rates_beside_ratios(r, m);
    return rc;
}

static int is_in(const size_t *v, size_t n, size_t x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x) return 1;
    return 0;
}

static int assign_v41(const reader *r, kvl_model *m, const size_t *ratio, const size_t *kv, size_t n_kv,
                      const size_t *ix, size_t n_ix)
{
    int latest_kv = -1, latest_ix = -1;
    for (size_t i = 0; i < m->n_layers; i++) {
        kvl_layer *l = &m->layers[i];
        int own_kv = is_in(kv, n_kv, i), own_ix = is_in(ix, n_ix, i);
        if (own_kv && !own_ix)
            return kvl_fail(KVL_EINVAL, "%s: field \"kv_source_layers\" lists layer %zu, absent from \"index_source_layers\"",
                            r->origin, i);
        if (ratio[i] == 0) {
            if (own_kv || own_ix)
                return kvl_fail(KVL_EINVAL, "%s: layer %zu is listed as a source but its compress_ratios entry is 0",
                                r->origin, i);
            *l = (kvl_layer){KVL_LAYER_WINDOW, 0, -1, -1};
            continue;
        }
        if (own_kv) latest_kv = (int)i;
        if (own_ix) latest_ix = (int)i;
        if (latest_kv < 0)
            return kvl_fail(KVL_EINVAL, "%s: layer %zu compresses (ratio %zu) but no KV source layer precedes it in "
                            "\"kv_source_layers\"", r->origin, i, ratio[i]);
        if (ratio[i] != ratio[latest_kv])
            return kvl_fail(KVL_EINVAL, "%s: layer %zu has ratio %zu but reads KV source %d of ratio %zu", r->origin, i,
                            ratio[i], latest_kv, ratio[latest_kv]);
        kvl_layer_kind kind = own_kv ? KVL_LAYER_FULL : own_ix ? KVL_LAYER_REINDEX : KVL_LAYER_REUSE;
        *l = (kvl_layer){kind, ratio[i], latest_kv, latest_ix};
    }
    return KVL_OK;
}

static int layers_v41(const reader *r, kvl_model *m)
{
    size_t *ratio = NULL, *kv = NULL, *ix = NULL, n_kv = 0, n_ix = 0;
    const size_t L = m->n_layers;
    int rc = read_ratios(r, m, &ratio);
    if (rc == KVL_OK) rc = read_list(r, r->root, "kv_source_layers", L, 1, &kv, &n_kv);
    if (rc == KVL_OK) rc = read_list(r, r->root, "index_source_layers", L, 1, &ix, &n_ix);
    if (rc == KVL_OK) rc = read_size(r, r->root, (size_field){.hf = "candidate_source_layer", .ds = NULL, .lo = 0, .hi = L - 1},
                                     &m->candidate_source_layer);
    if (rc == KVL_OK) rc = read_size(r, r->root, (size_field){.hf = "candidate_topk_blocks", .ds = NULL, .lo = 1, .hi = MAX_DIM},
                                     &m->candidate_topk_blocks);
    if (rc == KVL_OK) rc = read_size(r, r->root, (size_field){.hf = "candidate_block_size", .ds = NULL, .lo = 1, .hi = MAX_DIM},
                                     &m->candidate_block_size);
    if (rc == KVL_OK && !is_in(kv, n_kv, m->candidate_source_layer))
        rc = kvl_fail(KVL_EINVAL, "%s: field \"candidate_source_layer\" (%zu) is not one of \"kv_source_layers\"",
                      r->origin, m->candidate_source_layer);
    if (rc == KVL_OK) rc = assign_v41(r, m, ratio, kv, n_kv, ix, n_ix);
    free(ratio);
    free(kv);
    free(ix);
    return rc;
}

static int build_layers(const reader *r, kvl_model *m)
{
    m->layers = calloc(m->n_layers, sizeof *m->layers);
    if (!m->layers) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu layers", r->origin, m->n_layers);
    switch (m->generation) {
    case KVL_GEN_MHA:
    case KVL_GEN_MLA:
        for (size_t i = 0; i < m->n_layers; i++) m->layers[i] = (kvl_layer){KVL_LAYER_DENSE, 1, (int)i, -1};
        return KVL_OK;
    case KVL_GEN_DSA:
        for (size_t i = 0; i < m->n_layers; i++) m->layers[i] = (kvl_layer){KVL_LAYER_SPARSE, 1, (int)i, (int)i};
        return KVL_OK;
    case KVL_GEN_V4: return layers_v4(r, m);
    case KVL_GEN_V41: return layers_v41(r, m);
    }
    return KVL_OK;
}

static const char *const cache_names[] = {"bf16", "v32-fp8", "v4-fp8", "v41-fp4", "mla-fp8"};

static int read_annotations(const reader *r, kvl_model *m)
{
    static const kvl_cache_layout by_generation[] = {KVL_CACHE_BF16, KVL_CACHE_BF16, KVL_CACHE_V32_FP8,
                                                     KVL_CACHE_V4_FP8, KVL_CACHE_V41_FP4};
    m->kv_cache = by_generation[m->generation];
    const char *base = strrchr(r->origin, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : r->origin);
    char *dot = strrchr(m->name, '.');
    if (dot && strcmp(dot, ".json") == 0) *dot = '\0';

    const cJSON *a = find(r->root, "_kvlineage");
    if (!a) return KVL_OK;
    if (!cJSON_IsObject(a))
        return kvl_fail(KVL_EINVAL, "%s: field \"_kvlineage\" must be an object, got %s", r->origin, shown(a));
    KVL_TRY(read_text(r, a, "name", m->name, sizeof m->name));
    KVL_TRY(read_text(r, a, "date", m->date, sizeof m->date));
    KVL_TRY(read_text(r, a, "mechanism", m->mechanism, sizeof m->mechanism));
    const cJSON *headline = find(a, "headline");
    if (headline && !cJSON_IsBool(headline))
        return kvl_fail(KVL_EINVAL, "%s: field \"_kvlineage.headline\" must be true or false, got %s", r->origin,
                        shown(headline));
    m->headline = cJSON_IsTrue(headline);
    char cache[16] = "";
    KVL_TRY(read_text(r, a, "kv_cache", cache, sizeof cache));
    if (!cache[0]) return KVL_OK;
    for (size_t i = 0; i < sizeof cache_names / sizeof *cache_names; i++)
        if (strcmp(cache, cache_names[i]) == 0) { m->kv_cache = (kvl_cache_layout)i; return KVL_OK; }
    return kvl_fail(KVL_EINVAL, "%s: field \"_kvlineage.kv_cache\" must be one of bf16, v32-fp8, v4-fp8, v41-fp4, mla-fp8, got \"%s\"",
                    r->origin, file_text(cache));
}

/* ---- vocabulary, feed-forward networks and precision --------------------------------------------- */

/* A string field that must be one of names[n] when present: its index, or -1 when absent. */
static int read_choice(const reader *r, const cJSON *obj, const char *name, const char *path,
                       const char *const *names, size_t n, int *out)
{
    const char *v;
    KVL_TRY(optional_string(r, obj, name, path, &v));
    *out = -1;
    if (!v) return KVL_OK;
    for (size_t i = 0; i < n; i++)
        if (strcmp(v, names[i]) == 0) { *out = (int)i; return KVL_OK; }
    char known[160] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s\"%s\"", i ? ", " : "", names[i]);
    return kvl_fail(KVL_EINVAL, "%s: field \"%s%s\" is \"%s\"; this project reads %s", r->origin, path, name,
                    file_text(v), known);
}

/* FP8 weights in blocks of 128 × 128, one scale each: the only block the parameter bytes (ref/params.h) and
 * the weight reader (ref/core/weight_read.h) compute with. */
static int check_weight_block(const reader *r, const cJSON *q)
{
    const cJSON *b = find(q, "weight_block_size");
    if (!b || cJSON_IsNull(b)) return KVL_OK;
    const cJSON *e0 = cJSON_IsArray(b) ? b->child : NULL, *e1 = e0 ? e0->next : NULL;
    if (e1 && !e1->next && cJSON_IsNumber(e0) && cJSON_IsNumber(e1) && e0->valuedouble == 128 && e1->valuedouble == 128)
        return KVL_OK;
    return kvl_fail(KVL_EINVAL, "%s: field \"quantization_config.weight_block_size\" is %s: the FP8 weights here are read "
                    "and priced in blocks of [128, 128] only", r->origin, shown(b));
}

/* The precision. DeepSeek's inference spelling says dtype ("bf16", "fp8") and expert_dtype; transformers
 * says torch_dtype, or dtype from version 5 ("bfloat16", "float16", "float32"), and a quantization_config
 * for FP8 (whose weights are E4M3 whatever the dtype names: the dtype of what is not quantised). */
static int read_precision(const reader *r, kvl_ffn *f)
{
    static const char *const dtypes[] = {"bf16", "fp8", "bfloat16", "float16", "float32"};
    static const kvl_weight_format by_dtype[] = {KVL_WEIGHTS_BF16, KVL_WEIGHTS_FP8, KVL_WEIGHTS_BF16, KVL_WEIGHTS_BF16,
                                                 KVL_WEIGHTS_F32};
    static const char *const expert_dtypes[] = {"fp8", "fp4"};
    static const char *const methods[] = {"fp8"}, *const scales[] = {"ue8m0"}, *const fp8_fmts[] = {"e4m3"};
    int dtype, torch_dtype, expert, method = -1, scale = -1;
    KVL_TRY(read_choice(r, r->root, "dtype", "", dtypes, 5, &dtype));
    KVL_TRY(read_choice(r, r->root, "torch_dtype", "", dtypes + 2, 3, &torch_dtype));
    if (dtype < 0 && torch_dtype >= 0) dtype = torch_dtype + 2;
    KVL_TRY(read_choice(r, r->root, "expert_dtype", "", expert_dtypes, 2, &expert));
    const cJSON *q;
    KVL_TRY(optional_object(r, r->root, "quantization_config", "", &q));
    if (q) {
        KVL_TRY(read_choice(r, q, "quant_method", "quantization_config.", methods, 1, &method));
        KVL_TRY(read_choice(r, q, "scale_fmt", "quantization_config.", scales, 1, &scale));
        if (method < 0)
            return kvl_fail(KVL_EINVAL, "%s: field \"quantization_config\" has no \"quant_method\"", r->origin);
        int fmt, inner_expert;
        KVL_TRY(read_choice(r, q, "fmt", "quantization_config.", fp8_fmts, 1, &fmt));
        KVL_TRY(read_choice(r, q, "expert_dtype", "quantization_config.", expert_dtypes, 2, &inner_expert));
        if (inner_expert >= 0 && expert >= 0 && inner_expert != expert)
            return two_spellings(r, "expert_dtype", "quantization_config.expert_dtype", expert_dtypes[expert],
                                 expert_dtypes[inner_expert]);
        if (inner_expert >= 0) expert = inner_expert;
        KVL_TRY(check_weight_block(r, q));
    }
    f->linear = method == 0 ? KVL_WEIGHTS_FP8 : dtype >= 0 ? by_dtype[dtype] : KVL_WEIGHTS_BF16;
    f->experts = expert == 1 ? KVL_WEIGHTS_FP4 : expert == 0 ? KVL_WEIGHTS_FP8 : f->linear;
    f->scale_e8m0 = scale == 0;
    return KVL_OK;
}

/* Mixtral (configuration_mixtral.py): every layer's FFN is num_local_experts experts of intermediate_size, of
 * which num_experts_per_tok run. */
static int read_mixtral_ffn(const reader *r, kvl_ffn *f)
{
    const cJSON *o = r->root;
    KVL_TRY(read_size(r, o, (size_field){.hf = "intermediate_size", .lo = 1, .hi = MAX_DIM, .optional = 1, .dflt = 14336}, &f->moe_inter_dim));
    KVL_TRY(read_size(r, o, (size_field){.hf = "num_local_experts", .ds = spelling(r, "num_local_experts", NULL), .lo = 1, .hi = MAX_DIM, .optional = 1, .dflt = 8}, &f->n_routed_experts));
    KVL_TRY(read_size(r, o, (size_field){.hf = "num_experts_per_tok", .lo = 1, .hi = f->n_routed_experts, .optional = 1, .dflt = 2},
                      &f->n_activated_experts));
    f->ffn_matrices = 3;
    return KVL_OK;
}

/* Falcon (configuration_falcon.py, modeling_falcon.py): a GELU MLP of two matrices, ffn_hidden_size wide
 * (4·hidden_size when absent), in every layer. */
static int read_falcon_ffn(const reader *r, const kvl_model *m, kvl_ffn *f)
{
    KVL_TRY(read_size(r, r->root, (size_field){.hf = "ffn_hidden_size", .lo = 1, .hi = MAX_DIM, .optional = 1,
                                               .dflt = 4 * m->d}, &f->inter_dim));
    f->n_dense_layers = m->n_layers;
    f->ffn_matrices = 2;
    return KVL_OK;
}

/* transformers' mlp_layer_types (V3.2: "dense" then "sparse"; V4: "hash_moe" or "moe", every layer MoE) must
 * be the map the count builds: the first first_k_dense_replace layers dense, the rest MoE. */
static int check_mlp_layer_types(const reader *r, const kvl_model *m)
{
    const cJSON *types = find(r->root, "mlp_layer_types");
    if (!types || cJSON_IsNull(types)) return KVL_OK;
    size_t i = 0;
    for (const cJSON *e = cJSON_IsArray(types) ? types->child : NULL; e; e = e->next, i++) {
        const char *v = cJSON_IsString(e) ? e->valuestring : "";
        int dense = strcmp(v, "dense") == 0, moe = !strcmp(v, "sparse") || !strcmp(v, "moe") || !strcmp(v, "hash_moe");
        if ((!dense && !moe) || dense != (i < m->ffn.n_dense_layers))
            return kvl_fail(KVL_EINVAL, "%s: field \"mlp_layer_types\" entry %zu is %s, where the count has %s (the first "
                            "%zu layers dense, then MoE)", r->origin, i, shown(e), i < m->ffn.n_dense_layers ? "\"dense\"" :
                            "MoE", m->ffn.n_dense_layers);
    }
    if (!cJSON_IsArray(types) || i < m->n_layers)
        return kvl_fail(KVL_EINVAL, "%s: field \"mlp_layer_types\" must list one entry per layer (%zu), got %s", r->origin,
                        m->n_layers, shown(types));
    return KVL_OK;
}

static int read_ffn(const reader *r, kvl_model *m)
{
    kvl_ffn *f = &m->ffn;
    const cJSON *o = r->root;
    KVL_TRY(read_size(r, o, (size_field){.hf = "vocab_size", .lo = 0, .hi = MAX_DIM, .optional = 1}, &f->vocab_size));
    KVL_TRY(optional_bool(r, o, "tie_word_embeddings", r->t->tied, &f->tied_embeddings));
    if (is_type(r, "mixtral")) KVL_TRY(read_mixtral_ffn(r, f));
    if (is_type(r, "falcon")) KVL_TRY(read_falcon_ffn(r, m, f));
    if (f->ffn_matrices) return read_precision(r, f);
    f->ffn_matrices = 3;
    const char *moe_width_alias = spelling(r, "moe_intermediate_size", "moe_inter_dim");
    if (!moe_width_alias || strcmp(moe_width_alias, "intermediate_size"))   /* V4's intermediate_size is its experts' */
        KVL_TRY(read_size(r, o, (size_field){.hf = "intermediate_size", .ds = spelling(r, "intermediate_size", "inter_dim"), .lo = 0, .hi = MAX_DIM, .optional = 1},
                      &f->inter_dim));
    KVL_TRY(read_size(r, o, (size_field){.hf = "moe_intermediate_size", .ds = moe_width_alias, .lo = 0, .hi = MAX_DIM,
                                         .optional = 1}, &f->moe_inter_dim));
    KVL_TRY(read_size(r, o, (size_field){.hf = "n_routed_experts", .ds = spelling(r, "n_routed_experts", NULL), .lo = 0, .hi = MAX_DIM, .optional = 1, .null_is_zero = 1},
                      &f->n_routed_experts));
    KVL_TRY(read_size(r, o, (size_field){.hf = "n_shared_experts", .lo = 0, .hi = MAX_DIM, .optional = 1, .null_is_zero = 1},
                      &f->n_shared_experts));
    KVL_TRY(read_size(r, o, (size_field){.hf = "num_experts_per_tok", .ds = spelling(r, "num_experts_per_tok", "n_activated_experts"), .lo = 0,
                                         .hi = f->n_routed_experts, .optional = 1, .null_is_zero = 1}, &f->n_activated_experts));
    const size_t all_dense = f->n_routed_experts || !f->inter_dim ? 0 : m->n_layers;
    KVL_TRY(read_size(r, o, (size_field){.hf = "first_k_dense_replace", .ds = spelling(r, "first_k_dense_replace", "n_dense_layers"), .lo = 0, .hi = m->n_layers,
                                         .optional = 1, .dflt = all_dense}, &f->n_dense_layers));
    KVL_TRY(read_size(r, o, (size_field){.hf = "num_nextn_predict_layers", .ds = spelling(r, "num_nextn_predict_layers", "n_mtp_layers"), .lo = 0, .hi = MAX_LAYERS,
                                         .optional = 1}, &f->n_mtp_layers));
    KVL_TRY(read_size(r, o, (size_field){.hf = "hc_mult", .lo = 0, .hi = 64, .optional = 1}, &f->hc_mult));
    size_t moe_every;   /* DeepSeek's V2/V3 code: layer i ≥ first_k_dense_replace is MoE when i % moe_layer_freq == 0 */
    KVL_TRY(read_size(r, o, (size_field){.hf = "moe_layer_freq", .lo = 1, .hi = MAX_LAYERS, .optional = 1, .dflt = 1}, &moe_every));
    if (moe_every != 1)
        return kvl_fail(KVL_EINVAL, "%s: field \"moe_layer_freq\" is %zu: DeepSeek's code then makes only every %zu-th layer "
                        "MoE, transformers' every layer; the count here has no such layers: refused", r->origin, moe_every,
                        moe_every);
    KVL_TRY(check_mlp_layer_types(r, m));
    if (f->n_routed_experts && (!f->moe_inter_dim || !f->n_activated_experts))
        return kvl_fail(KVL_EINVAL, "%s: %zu routed experts but no expert width or experts per token", r->origin,
                        f->n_routed_experts);
    if (f->n_dense_layers && !f->inter_dim)
        return kvl_fail(KVL_EINVAL, "%s: %zu dense FFN layers but no \"intermediate_size\" (\"inter_dim\")", r->origin,
                        f->n_dense_layers);
    return read_precision(r, f);
}

/* ---- entry points ------------------------------------------------------------------------------ */

static void where(const char *json, size_t len, const char *at, size_t *line, size_t *col)
{
    *line = 1; *col = 1;
    for (const char *p = json; p < at && p < json + len; p++) {
        if (*p == '\n') { (*line)++; *col = 1; } else (*col)++;
    }
}

/* The first byte in [p, stop) that is not a JSON blank (a NUL byte counts as text), or NULL. cJSON
 * stops after one value and ignores the rest, which may be a second object or a half-pasted one. */
static const char *after_blanks(const char *p, const char *stop)
{
    while (p < stop && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
    return p < stop ? p : NULL;
}

int kvl_model_parse(kvl_model *m, const char *json, size_t len, const char *origin)
{
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", origin);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
    size_t line, col;
    if (!root) {
        where(json, len, end ? end : json + len, &line, &col);
        return kvl_fail(KVL_EPARSE, len ? "%s: not valid JSON near line %zu, column %zu" : "%s: empty file", origin,
                        line, col);
    }
    const char *rest = after_blanks(end, json + len);
    if (rest) {
        cJSON_Delete(root);
        where(json, len, rest, &line, &col);
        return kvl_fail(KVL_EPARSE, "%s: text after the JSON object, at line %zu, column %zu", origin, line, col);
    }
    reader r = {origin, root, &untyped_reading};
    int rc = kvl_json_text_check(json, len, origin);   /* what cJSON takes and RFC 8259 does not */
    if (rc == KVL_OK && !cJSON_IsObject(root))
        rc = kvl_fail(KVL_EINVAL, "%s: the top level must be a JSON object, got %s", origin,
                      cJSON_IsArray(root) ? "an array" : "a scalar");
    if (rc == KVL_OK) rc = no_duplicates(&r, root, "");
    if (rc == KVL_OK) rc = read_model_type(&r, &m->generation);
    if (rc == KVL_OK) rc = check_fields(&r);
    if (rc == KVL_OK) rc = read_dims(&r, m);
    if (rc == KVL_OK) rc = build_layers(&r, m);
    if (rc == KVL_OK) rc = read_ffn(&r, m);
    if (rc == KVL_OK) rc = read_annotations(&r, m);
    cJSON_Delete(root);
    if (rc != KVL_OK) kvl_model_free(m);
    return rc;
}

int kvl_model_load(kvl_model *m, const char *path)
{
    if (kvl_gguf_file(path)) return kvl_model_load_gguf(m, path);
    memset(m, 0, sizeof *m);
    char *text;
    size_t len;
    KVL_TRY(kvl_file_read_all(&text, &len, path, (size_t)1 << 26));
    int rc = kvl_model_parse(m, text, len, path);
    free(text);
    return rc;
}

void kvl_model_free(kvl_model *m)
{
    free(m->layers);
    m->layers = NULL;
}

const char *kvl_generation_name(kvl_generation g)
{
    static const char *const names[] = {"MHA", "MLA", "DSA", "V4", "V4.1"};
    return names[g];
}

const char *kvl_attention_name(const kvl_model *m, char *buf, size_t cap)
{
    if (m->generation != KVL_GEN_MHA || m->n_kv_heads == m->n_heads)
        snprintf(buf, cap, "%s", kvl_generation_name(m->generation));
    else if (m->n_kv_heads == 1)
        snprintf(buf, cap, "MQA");
    else
        snprintf(buf, cap, "GQA-%zu", m->n_kv_heads);
    return buf;
}

const char *kvl_layer_kind_name(kvl_layer_kind k)
{
    static const char *const names[] = {"dense", "sparse", "window", "CSA", "HCA", "Full", "Reindex", "Reuse"};
    return names[k];
}

const char *kvl_cache_layout_name(kvl_cache_layout c) { return cache_names[c]; }

int kvl_layer_writes_cache(const kvl_model *m, size_t layer)
{
    const kvl_layer *l = &m->layers[layer];
    return l->kind != KVL_LAYER_WINDOW && l->kv_source == (int)layer;
}

void kvl_rope_describe(char *out, size_t cap, const kvl_model *m)
{
    static const char *const source[] = {"no YaRN field: plain RoPE", "rope_scaling, as transformers computes it",
                                         "rope_parameters, as transformers computes it",
                                         "flat rope_factor, as DeepSeek's inference code computes it"};
    const kvl_rope_config *r = m->generation >= KVL_GEN_V4 ? &m->compress_rope : &m->rope;
    if (r->factor <= 1) {
        snprintf(out, cap, "rotary: %s (%s), no YaRN%s", m->rope_spelling == KVL_ROPE_PLAIN ? "plain RoPE" : "read from",
                 m->rope_spelling == KVL_ROPE_PLAIN ? "theta only" : source[m->rope_spelling],
                 r->interleaved ? "" : ", pairs (i, i + Dr/2)");
        return;
    }
    const double m2 = m->generation >= KVL_GEN_V4 ? 1 : pow(kvl_yarn_mscale(r->factor, r->mscale), 2);
    snprintf(out, cap, "rotary: YaRN factor %g from %s: cos and sin x %.6g, softmax scale x %.6g%s", r->factor,
             source[m->rope_spelling], r->attention_factor, m2, r->interleaved ? "" : ", pairs (i, i + Dr/2)");
}

int kvl_model_date_order(const kvl_model *a, const kvl_model *b)
{
    const int c = strcmp(a->date, b->date);
    return c ? c : strcmp(a->name, b->name);
}
