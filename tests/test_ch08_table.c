/* Chapter 8: the bytes-per-token table, derived from the configs and the formats library's row
 * sizes, reproduces the lineage's figures; it follows a config that changes; kvtable's outputs and
 * error exits behave. The figures below are the sources' (chapters/DISAGREEMENTS.md), checked here, never used by the code. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "kvtable.h"
#include "status.h"

static kvl_kv_footprint footprint(const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "ref/configs/%s", name);
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path(rel)) == KVL_OK, "%s", kvl_error());
    kvl_kv_footprint f;
    ck_assert_msg(kvl_kv_footprint_of(&f, &m) == KVL_OK, "%s", kvl_error());
    kvl_model_free(&m);
    return f;
}

START_TEST(test_llm67b_holds_389120_bytes_per_token)
{
    kvl_kv_footprint f = footprint("deepseek-llm-67b.json");
    ck_assert_uint_eq(f.main_row_bytes, 4096);        /* 2 · 8 KV heads · 128 · 2 B */
    ck_assert_uint_eq(f.global_layers, 95);
    ck_assert_double_eq(f.bytes_per_token, 389120);
    ck_assert_uint_eq(f.window_bytes_per_sequence, 0);
}
END_TEST

START_TEST(test_v3_holds_70272_bytes_per_token)
{
    kvl_kv_footprint f = footprint("deepseek-v3.json");
    ck_assert_uint_eq(f.main_row_bytes, 1152);        /* (512 + 64) · 2 B */
    ck_assert_double_eq(f.bytes_per_token, 70272);
}
END_TEST

START_TEST(test_v32_holds_48068_bytes_per_token)
{
    kvl_kv_footprint f = footprint("deepseek-v3.2-exp.json");
    ck_assert_uint_eq(f.main_row_bytes, 656);
    ck_assert_uint_eq(f.index_key_bytes, 132);
    ck_assert_uint_eq(f.index_layers, 61);
    ck_assert_double_eq(f.bytes_per_token, 48068);
}
END_TEST

START_TEST(test_v4_flash_holds_3514_25_bytes_per_token)
{
    kvl_kv_footprint f = footprint("deepseek-v4-flash.json");
    ck_assert_uint_eq(f.global_layers, 41);
    ck_assert_uint_eq(f.index_layers, 21);           /* CSA layers only */
    ck_assert_double_eq(f.entries_per_token, 21.0 / 4 + 20.0 / 128);
    ck_assert_double_eq(f.bytes_per_token, 3514.25);
    ck_assert_uint_eq(f.window_bytes_per_sequence, 43 * 128 * 584);   /* 3,214,336: about 3.2 MB */
    ck_assert_double_eq_tol(f.bytes_per_entry, 650.0, 0.05);        /* a mean entry of about 650 B */
}
END_TEST

START_TEST(test_v41_flash_holds_890_bytes_per_token)
{
    kvl_kv_footprint f = footprint("deepseek-v4.1-flash.json");
    ck_assert_uint_eq(f.global_layers, 4);
    ck_assert_double_eq(f.entries_per_token, 2.5);
    ck_assert_uint_eq(f.main_row_bytes + f.index_key_bytes, 356);
    ck_assert_double_eq(f.bytes_per_token, 890);
    ck_assert_uint_eq(f.window_bytes_per_sequence, 2703360);          /* 40 · 128 · 528: about 2.7 MB */
}
END_TEST

/* Mistral 7B's sliding_window of 4,096 in every layer: each token costs its rows while it is in the
 * window, and a sequence never holds more than W of them: 32 · 4,096 · 4,096 B = 512 MiB at any length. */
/* A bf16 cache keeps every value in bf16: each global layer's entry (V4/V4.1: head_dim values; V3.2:
 * the latent and RoPE key) and its own index key per M tokens, and V4/V4.1's window rows. The oracle
 * walks the layers. */
START_TEST(test_a_bf16_cache_holds_every_value_of_every_row_in_two_bytes)
{
    static const char *const names[] = {"deepseek-v3.2-exp.json", "deepseek-v4-flash.json", "deepseek-v4.1-flash.json"};
    for (size_t i = 0; i < 3; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "ref/configs/%s", names[i]);
        kvl_model m;
        ck_assert_msg(kvl_model_load(&m, kvl_path(rel)) == KVL_OK, "%s", kvl_error());
        m.kv_cache = KVL_CACHE_BF16;
        kvl_kv_footprint f;
        ck_assert_msg(kvl_kv_footprint_of(&f, &m) == KVL_OK, "%s", kvl_error());
        const int v4 = m.generation == KVL_GEN_V4 || m.generation == KVL_GEN_V41;
        const double entry = v4 ? (double)m.head_dim : (double)(m.kv_lora_rank + m.qk_rope_head_dim);
        double want = 0;
        for (size_t l = 0; l < m.n_layers; l++) {
            if (!kvl_layer_writes_cache(&m, l)) continue;
            const double key = kvl_layer_stores_index_key(&m, l) ? (double)m.index_head_dim : 0;
            want += 2 * (entry + key) / (double)m.layers[l].compress_ratio;
        }
        ck_assert_msg(f.bytes_per_token == want, "%s: %g B/token in bf16, want %g", names[i], f.bytes_per_token, want);
        ck_assert_uint_eq(f.window_bytes_per_sequence, v4 ? m.n_layers * m.window * m.head_dim * 2 : 0);
        kvl_model_free(&m);
    }
}
END_TEST

START_TEST(test_a_window_in_every_layer_bounds_what_a_sequence_holds)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("chapters/03_swa/mistral-7b.json")) == KVL_OK, "%s", kvl_error());
    kvl_kv_footprint f;
    ck_assert_msg(kvl_kv_footprint_of(&f, &m) == KVL_OK, "%s", kvl_error());
    const double row = 2.0 * 8 * 128 * 2, per_token = 32 * row;   /* K and V of 8 KV heads of 128, bf16 */
    ck_assert_double_eq(f.bytes_per_token, per_token);
    ck_assert_uint_eq(f.bounded_tokens, 4096);
    ck_assert_double_eq(kvl_kv_bytes_held(&f, 1000), 1000 * per_token);
    ck_assert_double_eq(kvl_kv_bytes_held(&f, 4096), 4096 * per_token);
    ck_assert_double_eq(kvl_kv_bytes_held(&f, 1 << 20), 4096 * per_token);
    ck_assert_double_eq(4096 * per_token, 512.0 * 1024 * 1024);
    kvl_model_free(&m);
    char cmd[1024], out[8192], err[512];
    snprintf(cmd, sizeof cmd, "kvtable --format csv %s", kvl_path("chapters/03_swa/mistral-7b.json"));
    ck_assert_msg(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(strstr(out, "\"131,072\"") && strstr(out, "\"536,870,912\",0.50,0.50"), "%s", out);
    /* a model without a window holds every token */
    ck_assert_msg(kvl_model_load(&m, kvl_path("chapters/01_mha/llama-3-70b.json")) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(kvl_kv_footprint_of(&f, &m) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(f.bounded_tokens, 0);
    ck_assert_double_eq(kvl_kv_bytes_held(&f, 1 << 20), (1 << 20) * f.bytes_per_token);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_lineage_shrinks_437_fold)
{
    double ratio = footprint("deepseek-llm-67b.json").bytes_per_token / footprint("deepseek-v4.1-flash.json").bytes_per_token;
    ck_assert_double_eq_tol(ratio, 437.2, 0.05);
    ck_assert_double_eq_tol(footprint("deepseek-v3.2-exp.json").bytes_per_token /
                            footprint("deepseek-v4-flash.json").bytes_per_token, 13.68, 0.005);
}
END_TEST

/* Write `text` with one substring replaced to a temporary file; return its path (caller unlinks). */
static void edited_config(char *path, size_t cap, const char *name, const char *from, const char *to)
{
    char rel[128];
    snprintf(rel, sizeof rel, "ref/configs/%s", name);
    FILE *f = fopen(kvl_path(rel), "rb");
    ck_assert(f != NULL);
    static char text[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = '\0';
    fclose(f);
    char *at = strstr(text, from);
    ck_assert_msg(at != NULL, "\"%s\" not in %s", from, name);
    snprintf(path, cap, "/tmp/kvl_cfg_XXXXXX");
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    ck_assert(write(fd, text, (size_t)(at - text)) == at - text);
    ck_assert(write(fd, to, strlen(to)) == (ssize_t)strlen(to));
    size_t rest = strlen(at + strlen(from));
    ck_assert(write(fd, at + strlen(from), rest) == (ssize_t)rest);
    close(fd);
}

START_TEST(test_table_follows_a_changed_config)
{
    /* Drop layer 14 as a KV source: it becomes a Reindex layer over layer 8, and V4.1 loses 178 B. */
    char path[64];
    edited_config(path, sizeof path, "deepseek-v4.1-flash.json", "\"kv_source_layers\": [\n    2,\n    8,\n    14,\n",
                  "\"kv_source_layers\": [\n    2,\n    8,\n");
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, path) == KVL_OK, "%s", kvl_error());
    kvl_kv_footprint f;
    ck_assert(kvl_kv_footprint_of(&f, &m) == KVL_OK);
    ck_assert_int_eq(m.layers[14].kind, KVL_LAYER_REINDEX);
    ck_assert_double_eq(f.bytes_per_token, 712);
    kvl_model_free(&m);
    unlink(path);
}
END_TEST

START_TEST(test_kvtable_json_keeps_exact_values)
{
    static char out[1 << 16], err[4096];
    int rc = kvl_run("kvtable --format json", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    cJSON *arr = cJSON_Parse(out);
    ck_assert_msg(cJSON_IsArray(arr), "not a JSON array: %.200s", out);
    const char *names[] = {"DeepSeek LLM 67B", "DeepSeek-V4-Flash", "DeepSeek-V4.1-Flash"};
    const double bpt[] = {389120, 3514.25, 890};
    for (size_t k = 0; k < 3; k++) {
        int found = 0;
        for (cJSON *o = arr->child; o; o = o->next) {
            if (strcmp(cJSON_GetObjectItem(o, "model")->valuestring, names[k]) != 0) continue;
            found = 1;
            ck_assert_double_eq(cJSON_GetObjectItem(o, "bytes_per_token")->valuedouble, bpt[k]);
            ck_assert(cJSON_GetObjectItem(o, "entries_per_token") && cJSON_GetObjectItem(o, "bytes_per_entry"));
            ck_assert(cJSON_GetObjectItem(o, "global_kv_layers") && cJSON_GetObjectItem(o, "window_bytes_per_sequence"));
        }
        ck_assert_msg(found, "%s missing from kvtable --format json", names[k]);
    }
    cJSON_Delete(arr);
}
END_TEST

START_TEST(test_kvtable_text_markdown_csv_and_svg)
{
    static char out[1 << 16], err[4096];
    ck_assert_int_eq(kvl_run("kvtable", NULL, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "389,120") && strstr(out, "48,068") && strstr(out, "3,514.25") && strstr(out, "437.2x"),
                  "%s", out);
    ck_assert_int_eq(kvl_run("kvtable --format markdown", NULL, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "| DeepSeek-V3.2-Exp ") && strstr(out, "|---|"), "%s", out);
    ck_assert_int_eq(kvl_run("kvtable --format csv", NULL, out, sizeof out, err, sizeof err), 0);
    ck_assert(strstr(out, "DeepSeek-V4.1-Flash,2026-09,V4.1,v41-fp4,4,2.5,288+68,890,") != NULL);
    char svg[] = "/tmp/kvl_chart_XXXXXX";
    int fd = mkstemp(svg);
    close(fd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "kvtable --svg %s", svg);
    ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 0);
    FILE *f = fopen(svg, "r");
    size_t n = fread(out, 1, sizeof out - 1, f);
    out[n] = '\0';
    fclose(f);
    unlink(svg);
    ck_assert(strncmp(out, "<svg", 4) == 0 && strstr(out, "DeepSeek-V4.1-Flash") && strstr(out, "</svg>"));
    /* the model card's generations are drawn bold, the others are not */
    ck_assert_msg(strstr(out, "font-weight=\"bold\">389,120 B") && strstr(out, "font-weight=\"bold\">890 B"), "%s", out);
    ck_assert_msg(strstr(out, "font-size=\"13\">70,272 B") != NULL, "%s", out);
}
END_TEST

/* A model name holding a comma, a quote and markup is one quoted CSV field (RFC 4180: the quote
 * doubled) and XML text in the SVG (entities), so that neither output breaks. */
START_TEST(test_kvtable_escapes_names_in_csv_and_svg)
{
    static char out[1 << 16], err[4096];
    char path[64], cmd[192], svg[] = "/tmp/kvl_chart_XXXXXX";
    edited_config(path, sizeof path, "deepseek-v3.json", "\"name\": \"DeepSeek-V3\"",
                  "\"name\": \"V3, \\\"<b>&co</b>\\\"\"");
    snprintf(cmd, sizeof cmd, "kvtable --format csv %s", path);
    ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "\n\"V3, \"\"<b>&co</b>\"\"\",") != NULL, "%s", out);
    const int fd = mkstemp(svg);
    close(fd);
    snprintf(cmd, sizeof cmd, "kvtable --svg %s %s", svg, path);
    ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 0);
    char *text = kvl_read_text(svg);
    unlink(svg);
    unlink(path);
    ck_assert(text != NULL);
    ck_assert_msg(strstr(text, ">V3, &quot;&lt;b&gt;&amp;co&lt;/b&gt;&quot;</text>") && !strstr(text, "<b>"), "%s", text);
    free(text);
}
END_TEST

/* The cells of one GitHub Markdown table row, read as the renderer reads it: a '|' not escaped by
 * '\' ends a cell, "\|" and "\\" are a '|' and a '\', the leading and trailing '|' open and close the
 * row; cells[k] trimmed of the spaces around it. Returns the number of cells. */
static size_t markdown_row_cells(char cells[][128], size_t max, const char *row)
{
    size_t n = 0, len = 0;
    ck_assert(*row == '|');
    for (const char *p = row + 1; *p && *p != '\n'; p++) {
        if (*p == '|') {
            ck_assert(n < max);
            cells[n][len] = '\0';
            while (len && cells[n][len - 1] == ' ') cells[n][--len] = '\0';
            memmove(cells[n], cells[n] + strspn(cells[n], " "), strlen(cells[n]) + 1);
            n++, len = 0;
            continue;
        }
        if (*p == '\\' && (p[1] == '|' || p[1] == '\\')) p++;
        ck_assert(n < max && len < 127);
        cells[n][len++] = *p;
    }
    return n;
}

/* A model name holding '|', '\' and a line break is one Markdown cell: the row has as many cells as
 * the header, and its first cell reads back as the name (the line break a space). */
START_TEST(test_kvtable_markdown_keeps_a_name_with_bars_in_its_cell)
{
    static char out[1 << 16], err[4096];
    char path[64], cmd[192], header[16][128], cells[16][128];
    edited_config(path, sizeof path, "deepseek-v3.json", "\"name\": \"DeepSeek-V3\"",
                  "\"name\": \"V3 | a\\\\|b \\\\ c\\nd\"");
    snprintf(cmd, sizeof cmd, "kvtable --format markdown %s", path);
    const int rc = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    unlink(path);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    const char *rule = strstr(out, "\n|---"), *row = rule ? strchr(rule + 1, '\n') : NULL;
    ck_assert_msg(row && row[1] == '|', "no table row: %s", out);
    const size_t columns = markdown_row_cells(header, 16, out);
    ck_assert_uint_eq(markdown_row_cells(cells, 16, row + 1), columns);
    ck_assert_str_eq(cells[0], "V3 | a\\|b \\ c d");
    ck_assert_msg(!strchr(row + 1, '\n') || strchr(row + 1, '\n')[1] == '\0', "more than one row: %s", out);
}
END_TEST

/* The attention column names what the config's heads make it: H query heads over Hkv KV heads is MHA
 * when Hkv = H, MQA when Hkv = 1 and GQA-Hkv between (the 67B, Llama 3 70B and Mistral 7B are
 * GQA-8); the heads are read from the file's own text, and two copies of the 67B change them. */
START_TEST(test_kvtable_names_mha_gqa_and_mqa_by_the_config_heads)
{
    static const struct {
        const char *file, *kv_heads, *want;   /* kv_heads: the copy's num_key_value_heads (NULL: as is) */
    } cases[] = {
        {"ref/configs/deepseek-llm-67b.json", NULL, "GQA-8"},
        {"chapters/01_mha/llama-3-70b.json", NULL, "GQA-8"},
        {"chapters/03_swa/mistral-7b.json", NULL, "GQA-8"},
        {"ref/configs/deepseek-llm-67b.json", "64", "MHA"},
        {"ref/configs/deepseek-llm-67b.json", "1", "MQA"},
        {"ref/configs/deepseek-v3.json", NULL, "MLA"},
    };
    static char out[1 << 16], err[1 << 12];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = kvl_read_text(kvl_path(cases[i].file)), cmd[1024];
        ck_assert_msg(text != NULL, "%s is missing", cases[i].file);
        const char *heads = strstr(text, "\"num_attention_heads\": "), *kv = strstr(text, "\"num_key_value_heads\": ");
        if (strcmp(cases[i].want, "MLA")) {
            ck_assert_msg(heads && kv, "%s: no head counts", cases[i].file);
            const long H = strtol(heads + 23, NULL, 10), Hkv = cases[i].kv_heads ? strtol(cases[i].kv_heads, NULL, 10)
                                                                                  : strtol(kv + 23, NULL, 10);
            char from_heads[16];
            snprintf(from_heads, sizeof from_heads, Hkv == H ? "MHA" : Hkv == 1 ? "MQA" : "GQA-%ld", Hkv);
            ck_assert_str_eq(from_heads, cases[i].want);
        }
        char edit[160] = "true";
        if (cases[i].kv_heads)
            snprintf(edit, sizeof edit,
                     "sed -i 's/\"num_key_value_heads\": [0-9]*/\"num_key_value_heads\": %s/' /tmp/kvl-heads.json",
                     cases[i].kv_heads);
        snprintf(cmd, sizeof cmd,
                 "(cp '%s' /tmp/kvl-heads.json && %s && kvtable --format csv /tmp/kvl-heads.json; s=$?; "
                 "rm -f /tmp/kvl-heads.json; exit $s)",
                 kvl_path(cases[i].file), edit);
        const int rc = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: kvtable exited %d: %s", cases[i].file, rc, err);
        const char *row = strchr(out, '\n');
        ck_assert(row != NULL);
        const char *name_end = strchr(row + 1, ','), *date = name_end ? strchr(name_end + 1, ',') : NULL;
        const char *end = date ? strchr(date + 1, ',') : NULL;
        ck_assert_msg(date && end && (size_t)(end - date - 1) == strlen(cases[i].want) &&
                          !strncmp(date + 1, cases[i].want, strlen(cases[i].want)),
                      "%s (KV heads %s): attention column of \"%s\", expected %s", cases[i].file,
                      cases[i].kv_heads ? cases[i].kv_heads : "as is", row + 1, cases[i].want);
        free(text);
    }
}
END_TEST

START_TEST(test_kvtable_bad_input_exits_2_with_a_message)
{
    static char out[4096], err[4096];
    ck_assert_int_eq(kvl_run("kvtable --format yaml", NULL, out, sizeof out, err, sizeof err), 2);
    ck_assert(strstr(err, "yaml") != NULL);
    ck_assert_int_eq(kvl_run("kvtable --colour", NULL, out, sizeof out, err, sizeof err), 2);
    ck_assert(strstr(err, "--colour") != NULL);
    ck_assert_int_eq(kvl_run("kvtable /nonexistent.json", NULL, out, sizeof out, err, sizeof err), 2);
    ck_assert(strstr(err, "/nonexistent.json") != NULL);
    char path[64], cmd[128];
    edited_config(path, sizeof path, "deepseek-v3.json", "\"n_layers\": 61", "\"n_layers\": -61");
    snprintf(cmd, sizeof cmd, "kvtable %s", path);
    ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 2);
    ck_assert_msg(strstr(err, path) && strstr(err, "n_layers") && strstr(err, "-61"), "%s", err);
    ck_assert_msg(out[0] == '\0', "partial output on a bad config: %s", out);
    snprintf(cmd, sizeof cmd, "kvtable --svg /tmp/kvl_never.svg %s", path);
    ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 2);
    ck_assert(access("/tmp/kvl_never.svg", F_OK) != 0);
    unlink(path);
}
END_TEST

START_TEST(test_a_cache_layout_that_does_not_fit_the_dims_is_refused)
{
    char path[64];
    edited_config(path, sizeof path, "deepseek-v3.2-exp.json", "\"kv_lora_rank\": 512", "\"kv_lora_rank\": 256");
    kvl_model m;
    ck_assert(kvl_model_load(&m, path) == KVL_OK);
    kvl_kv_footprint f;
    ck_assert_int_eq(kvl_kv_footprint_of(&f, &m), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "kv_lora_rank") && strstr(kvl_error(), "576"), "%s", kvl_error());
    kvl_model_free(&m);
    unlink(path);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch08_table");
    TCase *fig = tcase_create("figures");
    tcase_add_test(fig, test_llm67b_holds_389120_bytes_per_token);
    tcase_add_test(fig, test_a_window_in_every_layer_bounds_what_a_sequence_holds);
    tcase_add_test(fig, test_a_bf16_cache_holds_every_value_of_every_row_in_two_bytes);
    tcase_add_test(fig, test_v3_holds_70272_bytes_per_token);
    tcase_add_test(fig, test_v32_holds_48068_bytes_per_token);
    tcase_add_test(fig, test_v4_flash_holds_3514_25_bytes_per_token);
    tcase_add_test(fig, test_v41_flash_holds_890_bytes_per_token);
    tcase_add_test(fig, test_lineage_shrinks_437_fold);
    tcase_add_test(fig, test_table_follows_a_changed_config);
    tcase_add_test(fig, test_a_cache_layout_that_does_not_fit_the_dims_is_refused);
    suite_add_tcase(s, fig);
    TCase *prog = tcase_create("kvtable");
    tcase_add_test(prog, test_kvtable_json_keeps_exact_values);
    tcase_add_test(prog, test_kvtable_text_markdown_csv_and_svg);
    tcase_add_test(prog, test_kvtable_markdown_keeps_a_name_with_bars_in_its_cell);
    tcase_add_test(prog, test_kvtable_escapes_names_in_csv_and_svg);
    tcase_add_test(prog, test_kvtable_bad_input_exits_2_with_a_message);
    tcase_add_test(prog, test_kvtable_names_mha_gqa_and_mqa_by_the_config_heads);
    suite_add_tcase(s, prog);
    return s;
}
