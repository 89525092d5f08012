/* kvtable: the lineage's KV bytes per token, rebuilt from the configs in ref/configs/ and the row
 * sizes of formats/ (chapter 8). Every figure is derived at run time; edit a config and it moves.
 *
 *   kvtable [--format text|markdown|csv|json] [--svg FILE] [--llama-cache f16|q8_0|q4_0]
 *           [CONFIG.json|MODEL.gguf ...]
 *
 * Without CONFIG arguments it reads every .json file in ref/configs/, ordered by release date.
 * A GGUF file is priced as the cache llama.cpp keeps for it, in f16 or the --llama-cache type. */
#include <cjson/cJSON.h>
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
#include "program.h"
#include "rows.h"
#include "svg.h"
#include "status.h"

#define CONTEXT_128K 131072.0
#define CONTEXT_1M 1048576.0
#define GIB 1073741824.0

typedef struct {
    kvl_model model;
    kvl_kv_footprint kv;
} row;

typedef enum { OUT_TEXT, OUT_MARKDOWN, OUT_CSV, OUT_JSON } out_format;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: kvtable [--format text|markdown|csv|json] [--svg FILE] [--llama-cache f16|q8_0|q4_0]\n"
        "               [CONFIG.json|MODEL.gguf ...]\n"
        "Prints the KV cache bytes per token of each model, derived from its config.json and the\n"
        "row sizes of formats/. Without CONFIG arguments: every ref/configs/ *.json by date.\n"
        "A GGUF file (MODEL.gguf, llama.cpp's format: architectures deepseek2 and llama) is read from its\n"
        "metadata, and priced as the cache llama.cpp keeps for it: f16 (two bytes a value, as bf16), the\n"
        "MLA latent for an MLA conversion, whole K and V heads for an older deepseek2 one.\n"
        "--llama-cache q8_0 or q4_0 prices them in that llama.cpp cache type instead (its -ctk and -ctv:\n"
        "blocks of 32 values, 34 or 18 bytes).\n");
    kvl_usage_model_types(f);
}

static void entry_text(const row *r, char *buf, size_t cap)
{
    const kvl_kv_footprint *k = &r->kv;
    char main_row[32];
    kvl_grouped(main_row, sizeof main_row, (double)k->main_row_bytes, 0);
    if (!k->index_layers) snprintf(buf, cap, "%s", main_row);
    else if (k->index_layers == k->global_layers)
        snprintf(buf, cap, "%zu+%zu", k->main_row_bytes, k->index_key_bytes);
    else
        snprintf(buf, cap, "%zu (+%zu on %zu)", k->main_row_bytes, k->index_key_bytes,
                 k->index_layers);
}

/* ---- the table ------------------------------------------------------------------------------- */

typedef struct {
    const char *name, *date, *cache, *entry;
    char gen[16], layers[16], entries[32], bpt[32], prev[16], first[16], window[32], gib128[16],
        gib1m[16];
} cells;

static void fill_cells(cells *c, char *entry, size_t entry_cap, const row *rows, size_t i)
{
    const row *r = &rows[i];
    char tmp[64];
    entry_text(r, entry, entry_cap);
    *c = (cells){.name = r->model.name,
                 .date = r->model.date[0] ? r->model.date : "-",
                 .cache = kvl_kv_cache_label(&r->model),
                 .entry = entry};
    kvl_attention_name(&r->model, c->gen, sizeof c->gen);
    snprintf(c->layers, sizeof c->layers, "%zu", r->kv.global_layers);
    snprintf(c->entries, sizeof c->entries, "%s",
             kvl_grouped(tmp, sizeof tmp, r->kv.entries_per_token, 5));
    snprintf(c->bpt, sizeof c->bpt, "%s", kvl_grouped(tmp, sizeof tmp, r->kv.bytes_per_token, 4));
    double prev = i ? rows[i - 1].kv.bytes_per_token / r->kv.bytes_per_token : 1;
    double first = rows[0].kv.bytes_per_token / r->kv.bytes_per_token;
    snprintf(c->prev, sizeof c->prev, i ? "%.2fx" : "-", prev);
    snprintf(c->first, sizeof c->first, "%.1fx", first);
    const double window = r->kv.bounded_tokens
                              ? (double)r->kv.bounded_tokens * r->kv.bytes_per_token
                              : (double)r->kv.window_bytes_per_sequence;
    snprintf(c->window, sizeof c->window, "%s",
             window > 0 ? kvl_grouped(tmp, sizeof tmp, window, 0) : "-");
    snprintf(c->gib128, sizeof c->gib128, "%.2f", kvl_kv_bytes_held(&r->kv, CONTEXT_128K) / GIB);
    snprintf(c->gib1m, sizeof c->gib1m, "%.2f", kvl_kv_bytes_held(&r->kv, CONTEXT_1M) / GIB);
}

static const char *const headers[] = {"model",     "date",          "attention",    "cache",
                                      "KV layers", "entries/token", "bytes/entry",  "bytes/token",
                                      "x prev",    "x first",       "window B/seq", "GiB@128K",
                                      "GiB@1M"};
enum { N_COLS = sizeof headers / sizeof *headers };

static void cell_list(const cells *c, const char *out[N_COLS])
{
    const char *v[N_COLS] = {c->name, c->date, c->gen,   c->cache,  c->layers, c->entries, c->entry,
                             c->bpt,  c->prev, c->first, c->window, c->gib128, c->gib1m};
    memcpy(out, v, sizeof v);
}

/* One CSV field after `sep`, quoted as RFC 4180 asks when it holds a comma, a quote or a line break
 * (a quote inside doubled). */
static void print_csv_field(const char *sep, const char *v)
{
    fputs(sep, stdout);
    if (!strpbrk(v, ",\"\r\n")) {
        fputs(v, stdout);
        return;
    }
    putchar('"');
    for (const char *p = v; *p; p++) {
        if (*p == '"') putchar('"');
        putchar(*p);
    }
    putchar('"');
}

/* v as the text of one Markdown table cell: a '\' in front of each '|' (which would end the cell)
 * and '\' (which would escape a '|' after it), a space for a line break or other control byte
 * (which would end the row); in memory the caller frees, NULL when out of memory. */
static char *markdown_cell(const char *v)
{
    char *out = malloc(2 * strlen(v) + 1), *o = out;
    for (const char *p = v; out && *p; p++) {
        if (*p == '|' || *p == '\\') *o++ = '\\';
        *o++ = (unsigned char)*p < 0x20 || *p == 0x7f ? ' ' : *p;
    }
    if (out) *o = '\0';
    return out;
}

static void print_grid(const row *rows, size_t n, out_format fmt)
{
    const char *(*v)[N_COLS] = calloc(n ? n : 1, sizeof *v);
    cells *c = calloc(n ? n : 1, sizeof *c);
    char (*entry)[48] = calloc(n ? n : 1, sizeof *entry);
    char *(*escaped)[N_COLS] = calloc(n ? n : 1, sizeof *escaped);   /* Markdown's cells */
    if (!v || !c || !entry || !escaped) { fprintf(stderr, "kvtable: out of memory\n"); exit(1); }
    size_t width[N_COLS];
    for (size_t j = 0; j < N_COLS; j++) width[j] = strlen(headers[j]);
    for (size_t i = 0; i < n; i++) {
        fill_cells(&c[i], entry[i], sizeof entry[i], rows, i);
        cell_list(&c[i], v[i]);
        for (size_t j = 0; j < N_COLS && fmt == OUT_MARKDOWN; j++) {
            if (!(escaped[i][j] = markdown_cell(v[i][j]))) {
                fprintf(stderr, "kvtable: out of memory\n");
                exit(1);
            }
            v[i][j] = escaped[i][j];
        }
        for (size_t j = 0; j < N_COLS; j++)
            if (strlen(v[i][j]) > width[j]) width[j] = strlen(v[i][j]);
    }
    const char *sep = fmt == OUT_CSV ? "," : fmt == OUT_MARKDOWN ? " | " : "  ";
    const char *lead = fmt == OUT_MARKDOWN ? "| " : "", *tail = fmt == OUT_MARKDOWN ? " |" : "";
    for (size_t j = 0; j < N_COLS; j++)
        printf("%s%-*s%s", j ? sep : lead, fmt == OUT_CSV ? 0 : (int)width[j], headers[j],
               j + 1 < N_COLS ? "" : tail);
    printf("\n");
    if (fmt == OUT_MARKDOWN) {
        for (size_t j = 0; j < N_COLS; j++) printf("%s%s", j ? "|" : "|", j < 4 ? "---" : "---:");
        printf("|\n");
    }
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < N_COLS; j++) {
            int right = j >= 4 && fmt == OUT_TEXT;
            int w = fmt == OUT_CSV ? 0 : (int)width[j];
            if (fmt == OUT_CSV) print_csv_field(j ? sep : lead, v[i][j]);
            else printf(right ? "%s%*s" : "%s%-*s", j ? sep : lead, w, v[i][j]);
        }
        printf("%s\n", tail);
    }
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < N_COLS; j++) free(escaped[i][j]);
    free(escaped);
    free(v);
    free(c);
    free(entry);
}

/* The FP8 row vLLM and SGLang store for an MLA model (kv-cache dtype fp8): the dense mla-fp8
 * layout, priced from the last MLA config listed, against V3.2's sparse v32-fp8 row. */
static void print_dense_fp8_note(const row *rows, size_t n)
{
    for (size_t i = n; i-- > 0;) {
        const kvl_model *given = &rows[i].model;
        if (given->generation != KVL_GEN_MLA || given->llama_cache != KVL_LLAMA_NONE) continue;
        kvl_model m = *given;
        kvl_kv_footprint dense;
        m.kv_cache = KVL_CACHE_MLA_FP8;
        if (kvl_kv_footprint_of(&dense, &m) != KVL_OK) continue;
        printf("An MLA model's FP8 cache in vLLM and SGLang is the dense mla-fp8 row: latent and\n"
               "RoPE key, one E4M3 byte a value, one scale per tensor: %zu + %zu = %zu B a layer for %s\n"
               "(v32-fp8's %zu B, with float32 scales and a bf16 RoPE key, is V3.2's sparse row).\n",
               m.kv_lora_rank, m.qk_rope_head_dim, dense.main_row_bytes, m.name,
               kvf_row_bytes(KVF_ROW_V32_MAIN));
        return;
    }
}

static void print_notes(const row *rows, size_t n)
{
    if (n == 0) return;
    printf(
        "\nKV layers: layers that write a per-token cache. entries/token: sum of 1/M over them.\n"
        "bytes/entry: main row + indexer key, from formats/ row sizes. Window rows are per sequence,\n"
        "not per token; GiB@128K/@1M = bytes/token x 131,072 / 1,048,576 tokens + the window rows.\n");
    for (size_t i = 0; i < n; i++)
        if (rows[i].kv.bounded_tokens) {
            printf(
                "A model whose every layer attends a window of W tokens (%s: W %zu) holds at most W of\n"
                "them: its window B/seq is W x bytes/token, and the GiB columns count min(T, W) tokens.\n",
                rows[i].model.name, rows[i].kv.bounded_tokens);
            break;
        }
    print_dense_fp8_note(rows, n);
    printf("\n");
    for (size_t i = 0; i < n; i++)
        if (rows[i].model.mechanism[0])
            printf("  %-20s %s\n", rows[i].model.name, rows[i].model.mechanism);
    char a[32], b[32];
    printf("\n%s -> %s bytes per token: %.1fx over the lineage.\n",
           kvl_grouped(a, sizeof a, rows[0].kv.bytes_per_token, 4),
           kvl_grouped(b, sizeof b, rows[n - 1].kv.bytes_per_token, 4),
           rows[0].kv.bytes_per_token / rows[n - 1].kv.bytes_per_token);
}

static int print_json(const row *rows, size_t n)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; arr && i < n; i++) {
        const row *r = &rows[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", r->model.name);
        cJSON_AddStringToObject(o, "date", r->model.date);
        cJSON_AddStringToObject(o, "config", r->model.path);
        char attention[16];
        cJSON_AddStringToObject(o, "attention",
                                kvl_attention_name(&r->model, attention, sizeof attention));
        cJSON_AddStringToObject(o, "kv_cache", kvl_kv_cache_label(&r->model));
        cJSON_AddNumberToObject(o, "global_kv_layers", (double)r->kv.global_layers);
        cJSON_AddNumberToObject(o, "entries_per_token", r->kv.entries_per_token);
        cJSON_AddNumberToObject(o, "bytes_per_entry", r->kv.bytes_per_entry);
        cJSON_AddNumberToObject(o, "main_row_bytes", (double)r->kv.main_row_bytes);
        cJSON_AddNumberToObject(o, "index_key_bytes", (double)r->kv.index_key_bytes);
        cJSON_AddNumberToObject(o, "bytes_per_token", r->kv.bytes_per_token);
        cJSON_AddNumberToObject(o, "factor_vs_previous",
                                i ? rows[i - 1].kv.bytes_per_token / r->kv.bytes_per_token : 1);
        cJSON_AddNumberToObject(o, "factor_vs_first",
                                rows[0].kv.bytes_per_token / r->kv.bytes_per_token);
        cJSON_AddNumberToObject(o, "window_bytes_per_sequence",
                                (double)r->kv.window_bytes_per_sequence);
        cJSON_AddNumberToObject(o, "bounded_tokens", (double)r->kv.bounded_tokens);
        cJSON_AddNumberToObject(o, "bytes_held_128k", kvl_kv_bytes_held(&r->kv, CONTEXT_128K));
        cJSON_AddNumberToObject(o, "bytes_held_1m", kvl_kv_bytes_held(&r->kv, CONTEXT_1M));
        cJSON_AddItemToArray(arr, o);
    }
    char *text = arr ? cJSON_Print(arr) : NULL;
    cJSON_Delete(arr);
    if (!text) { fprintf(stderr, "kvtable: out of memory\n"); return 1; }
    printf("%s\n", text);
    free(text);
    return 0;
}

/* ---- the chart ------------------------------------------------------------------------------- */

/* Horizontal bars on a log10 axis, one per model, labelled with the model and its bytes per token.
 * The generations the V4.1-Flash model card charts (_kvlineage.headline) are drawn dark, the others
 * light, so the chart reads on its own. Written whole or not at all (ref/core/file_io.h). */
static int write_svg(const char *path, const row *rows, size_t n)
{
    kvl_file_out o;
    if (kvl_file_out_open(&o, path) != KVL_OK) {
        fprintf(stderr, "kvtable: --svg %s\n", kvl_error());
        return 2;
    }
    FILE *f = o.fp;
    const double left = 190, right = 760, top = 70, bar = 34, gap = 14;
    double lo = 1e300, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = fmin(lo, rows[i].kv.bytes_per_token);
        hi = fmax(hi, rows[i].kv.bytes_per_token);
    }
    double d0 = floor(log10(lo > 0 ? lo : 1)), d1 = ceil(log10(hi > 1 ? hi : 10));
    if (d1 <= d0) d1 = d0 + 1;
    double height = top + (double)n * (bar + gap) + 70;
    fprintf(
        f,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"980\" height=\"%.0f\" font-family=\"sans-serif\">\n",
        height);
    fprintf(
        f,
        "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
        "<text x=\"20\" y=\"30\" font-size=\"18\" font-weight=\"bold\">KV cache bytes per token, "
        "log scale, derived from each config.json</text>\n"
        "<text x=\"20\" y=\"52\" font-size=\"13\" fill=\"#444\">dark bars: the generations on the "
        "V4.1-Flash model card's chart; window rows (per sequence) not included</text>\n");
    for (double e = d0; e <= d1; e++) {
        double x = left + (e - d0) / (d1 - d0) * (right - left);
        char tick[32];
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#ccc\"/>\n", x,
                top - 8, x, height - 55);
        fprintf(f,
                "<text x=\"%.1f\" y=\"%.0f\" font-size=\"12\" text-anchor=\"middle\">%s B</text>\n",
                x, height - 38, kvl_grouped(tick, sizeof tick, pow(10, e), 0));
    }
    for (size_t i = 0; i < n; i++) {
        double y = top + (double)i * (bar + gap), v = rows[i].kv.bytes_per_token;
        double w = (log10(v) - d0) / (d1 - d0) * (right - left);
        int headline = rows[i].model.headline;
        char num[32];
        fprintf(f, "<text x=\"%.0f\" y=\"%.1f\" font-size=\"13\" text-anchor=\"end\">", left - 8,
                y + bar * 0.65);
        svg_put_text(f, rows[i].model.name);
        fputs("</text>\n", f);
        fprintf(f, "<rect x=\"%.0f\" y=\"%.1f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>\n",
                left, y, w, bar, headline ? "#1f4e8c" : "#a9c1e0");
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" font-size=\"13\"%s>%s B  (", left + w + 6,
                y + bar * 0.65, headline ? " font-weight=\"bold\"" : "",
                kvl_grouped(num, sizeof num, v, 2));
        svg_put_text(f, rows[i].model.date);
        fputs(")</text>\n", f);
    }
    char a[32], b[32];
    fprintf(f,
            "<text x=\"20\" y=\"%.0f\" font-size=\"13\">%s to %s bytes per token: %.1fx</text>\n",
            height - 12, kvl_grouped(a, sizeof a, rows[0].kv.bytes_per_token, 2),
            kvl_grouped(b, sizeof b, rows[n - 1].kv.bytes_per_token, 2),
            rows[0].kv.bytes_per_token / rows[n - 1].kv.bytes_per_token);
    fprintf(f, "</svg>\n");
    if (kvl_file_out_commit(&o) != KVL_OK) {
        fprintf(stderr, "kvtable: --svg %s\n", kvl_error());
        return 2;
    }
    return 0;
}

/* ---- inputs ---------------------------------------------------------------------------------- */

static int by_date(const void *a, const void *b)
{
    return kvl_model_date_order(&((const row *)a)->model, &((const row *)b)->model);
}

enum { F_FORMAT, F_SVG, F_LLAMA_CACHE };
static const kvl_flag FLAGS[] = {{"--format", 1}, {"--svg", 1}, {"--llama-cache", 1}};

/* Load and price one model, its cache in llama.cpp's type `llama` when it is a GGUF file's
 * (NONE: as read); *gguf counts the GGUF files. 2 after one line on stderr. */
static int load_row(row *r, const char *path, kvl_llama_cache llama, size_t *gguf)
{
    if (kvl_model_load(&r->model, path) != KVL_OK) {
        fprintf(stderr, "kvtable: %s\n", kvl_error());
        return 2;
    }
    if (r->model.llama_cache != KVL_LLAMA_NONE) {
        ++*gguf;
        if (llama != KVL_LLAMA_NONE) r->model.llama_cache = llama;
    }
    if (kvl_kv_footprint_of(&r->kv, &r->model) != KVL_OK) {
        fprintf(stderr, "kvtable: %s\n", kvl_error());
        return 2;
    }
    if (r->kv.bytes_per_token <= 0) {
        fprintf(stderr, "kvtable: %s: no layer writes a per-token cache\n", path);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    out_format fmt = OUT_TEXT;
    const char *svg = NULL;
    kvl_llama_cache llama = KVL_LLAMA_NONE;
    size_t n_gguf = 0;
    char **given = calloc((size_t)argc, sizeof *given);   /* the CONFIG arguments */
    size_t n_given = 0;
    if (!given) { fprintf(stderr, "kvtable: out of memory\n"); return 1; }
    kvl_args a = kvl_args_start("kvtable", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 1);
    const char *v;
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) {
            usage(stdout);
            free(given);
            return kvl_exit_status("kvtable", 0);
        }
        if (k == KVL_ARGS_BAD) { free(given); return 2; }
        if (k == KVL_ARGS_POSITIONAL) given[n_given++] = (char *)v;
        if (k == F_SVG) svg = v;
        if (k == F_LLAMA_CACHE && kvl_llama_cache_from_name(v, &llama) != KVL_OK) {
            free(given);
            return kvl_bad_usage("kvtable", "--llama-cache must be f16, q8_0 or q4_0", v);
        }
        if (k != F_FORMAT) continue;
        if (strcmp(v, "text") == 0) fmt = OUT_TEXT;
        else if (strcmp(v, "markdown") == 0) fmt = OUT_MARKDOWN;
        else if (strcmp(v, "csv") == 0) fmt = OUT_CSV;
        else if (strcmp(v, "json") == 0) fmt = OUT_JSON;
        else {
            free(given);
            return kvl_bad_usage("kvtable", "--format must be text, markdown, csv or json", v);
        }
    }
    size_t n = n_given;
    char **paths = given;
    for (size_t i = 0; i < n_given; i++) kvl_file_input(given[i], given[i]);
    int status = svg ? kvl_check_output("kvtable", "--svg", svg) : 0;
    if (status) {
        free(given);
        return status;
    }
    if (!n_given && kvl_config_files(&paths, &n) != KVL_OK) {
        fprintf(stderr, "kvtable: %s\n", kvl_error());
        free(given);
        return 2;
    }
    row *rows = n ? calloc(n, sizeof *rows) : NULL;
    if (!n) { fprintf(stderr, "kvtable: no config files\n"); status = 2; }
    else if (!rows) { fprintf(stderr, "kvtable: out of memory\n"); status = 1; }
    for (size_t i = 0; i < n && !status; i++) status = load_row(&rows[i], paths[i], llama, &n_gguf);
    if (!status && llama != KVL_LLAMA_NONE && !n_gguf)
        status = kvl_bad_usage("kvtable", "--llama-cache prices GGUF files, and none was given",
                               kvl_llama_cache_name(llama));
    if (!status) {
        if (!n_given) qsort(rows, n, sizeof *rows, by_date);
        if (svg) status = write_svg(svg, rows, n);
    }
    if (!status) {
        if (fmt == OUT_JSON) status = print_json(rows, n);
        else {
            print_grid(rows, n, fmt);
            if (fmt == OUT_TEXT) print_notes(rows, n);
        }
    }
    for (size_t i = 0; rows && i < n; i++) kvl_model_free(&rows[i].model);
    free(rows);
    if (!n_given) kvl_config_files_free(paths, n);
    free(given);
    return kvl_exit_status("kvtable", status);
}
