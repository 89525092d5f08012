/* Reliability of every program that reads a config.json (kvtable, cost, mla_cost, dsa_cost): a bad
 * file, a bad field or dims a program cannot run is answered with exit status 2, exactly one line on
 * stderr that starts with the program's name and names the file and what is wrong in it (the field
 * and its value, or the line and column), and nothing on stdout: no half-printed table. kvtable --svg
 * leaves no chart, and no partial one, behind.
 *
 * Bad files are written from the real configs (ref/configs/, chapters/) with one field changed
 * through cJSON, or as raw text where the defect is in the text itself. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define CAP (1 << 16)

enum { KVTABLE = 1, COST = 2, MLA_COST = 4, DSA_COST = 8, EVERY = 15 };

static const struct {
    unsigned bit;
    const char *name, *cmd;  /* cmd: a printf format taking the config's path */
} PROGRAMS[] = {
    {KVTABLE, "kvtable", "kvtable '%s'"},
    {COST, "cost", "cost --config '%s'"},
    {MLA_COST, "mla_cost", "mla_cost --config '%s' --contexts 1 --repeats 1"},
    {DSA_COST, "dsa_cost", "dsa_cost --config '%s' --contexts 1 --no-timing"},
};

static char out[CAP], err[CAP];

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* ---- writing bad configs ----------------------------------------------------------------------- */

/* A new file /tmp/kvl_rel_XXXXXX.json holding text[len]; its name in path[64]. */
static void write_file(char *path, const char *text, size_t len)
{
    snprintf(path, 64, "/tmp/kvl_rel_XXXXXX.json");
    int fd = mkstemps(path, 5);
    ck_assert_msg(fd >= 0, "cannot create a temporary config");
    ck_assert(write(fd, text, len) == (ssize_t)len);
    close(fd);
}

/* The text of a file below the project root (or at an absolute path); caller frees. */
static char *slurp(const char *relative)
{
    const char *path = relative[0] == '/' ? relative : kvl_path(relative);
    char *text = kvl_read_text(path);
    ck_assert_msg(text != NULL, "cannot open %s", path);
    return text;
}

/* base (a config below the root) with the field at `dotted` (such as "rope_scaling.factor") set to
 * the JSON text `value`, or removed when value is NULL; written to a new file named in path[64]. */
static void edited(char *path, const char *base, const char *dotted, const char *value)
{
    char *text = slurp(base);
    cJSON *root = cJSON_Parse(text);
    free(text);
    ck_assert_msg(root != NULL, "%s is not JSON", base);
    char key[128];
    snprintf(key, sizeof key, "%s", dotted);
    cJSON *obj = root;
    char *dot = strchr(key, '.');
    if (dot) {
        *dot = '\0';
        obj = cJSON_GetObjectItemCaseSensitive(root, key);
        ck_assert_msg(cJSON_IsObject(obj), "%s has no object \"%s\"", base, key);
        memmove(key, dot + 1, strlen(dot + 1) + 1);
    }
    if (value) {
        cJSON *v = cJSON_Parse(value);
        ck_assert_msg(v != NULL, "bad test value %s", value);
        if (cJSON_GetObjectItemCaseSensitive(obj, key)) cJSON_ReplaceItemInObjectCaseSensitive(obj, key, v);
        else cJSON_AddItemToObject(obj, key, v);
    } else {
        ck_assert_msg(cJSON_GetObjectItemCaseSensitive(obj, key) != NULL, "%s has no field \"%s\"", base, dotted);
        cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
    }
    char *printed = cJSON_Print(root);
    cJSON_Delete(root);
    write_file(path, printed, strlen(printed));
    free(printed);
}

/* base with `text` inserted right after the first occurrence of `after`; written to path[64]. */
static void inserted(char *path, const char *base, const char *after, const char *text)
{
    char *orig = slurp(base);
    char *at = strstr(orig, after);
    ck_assert_msg(at != NULL, "\"%s\" not in %s", after, base);
    at += strlen(after);
    size_t head = (size_t)(at - orig), tail = strlen(at), mid = strlen(text);
    char *joined = malloc(head + mid + tail + 1);
    ck_assert(joined != NULL);
    memcpy(joined, orig, head);
    memcpy(joined + head, text, mid);
    memcpy(joined + head + mid, at, tail + 1);
    write_file(path, joined, head + mid + tail);
    free(joined);
    free(orig);
}

/* ---- the property ------------------------------------------------------------------------------- */

/* Every program in `programs` refuses the config at path: exit 2, stdout empty, stderr one line
 * "<program>: ..." that names the path and each non-NULL fragment. */
static void expect_refused(const char *path, unsigned programs, const char *name1, const char *name2)
{
    for (size_t p = 0; p < sizeof PROGRAMS / sizeof PROGRAMS[0]; p++) {
        if (!(programs & PROGRAMS[p].bit)) continue;
        char cmd[512], prefix[32];
        snprintf(cmd, sizeof cmd, PROGRAMS[p].cmd, path);
        snprintf(prefix, sizeof prefix, "%s: ", PROGRAMS[p].name);
        int rc = kvl_run(cmd, NULL, out, CAP, err, CAP);
        ck_assert_msg(rc == 2, "%s: exit %d, want 2 (stderr: %s)", cmd, rc, err);
        ck_assert_msg(out[0] == '\0', "%s: printed to stdout: %.200s", cmd, out);
        ck_assert_msg(count_lines(err) == 1 && strncmp(err, prefix, strlen(prefix)) == 0,
                      "%s: stderr is not one line starting \"%s\": %s", cmd, prefix, err);
        ck_assert_msg(strstr(err, path) != NULL, "%s: stderr does not name the file: %s", cmd, err);
        ck_assert_msg(!name1 || strstr(err, name1), "%s: stderr does not name \"%s\": %s", cmd, name1, err);
        ck_assert_msg(!name2 || strstr(err, name2), "%s: stderr does not name \"%s\": %s", cmd, name2, err);
    }
}

static void refused_edit(const char *base, const char *dotted, const char *value, unsigned programs,
                         const char *name1, const char *name2)
{
    char path[64];
    edited(path, base, dotted, value);
    expect_refused(path, programs, name1, name2);
    unlink(path);
}

static void refused_text(const char *text, size_t len, unsigned programs, const char *name1, const char *name2)
{
    char path[64];
    write_file(path, text, len);
    expect_refused(path, programs, name1, name2);
    unlink(path);
}

#define V3 "ref/configs/deepseek-v3.json"
#define V32 "ref/configs/deepseek-v3.2-exp.json"
#define V4 "ref/configs/deepseek-v4-flash.json"
#define V41 "ref/configs/deepseek-v4.1-flash.json"
#define LLAMA "chapters/01_mha/llama-3-70b.json"

/* ---- malformed files ------------------------------------------------------------------------------ */

START_TEST(test_an_empty_file_is_refused_by_every_program)
{
    refused_text("", 0, EVERY, "empty file", NULL);
}
END_TEST

START_TEST(test_truncated_json_is_refused_with_its_line_and_column)
{
    char *text = slurp(V3);
    char *cut = strstr(text, "\"n_heads\"");
    ck_assert(cut != NULL);
    refused_text(text, (size_t)(cut - text) + 5, EVERY, "not valid JSON", "line 14");
    free(text);
}
END_TEST

START_TEST(test_a_top_level_array_or_scalar_is_refused)
{
    char *text = slurp(V3);
    size_t n = strlen(text);
    char *wrapped = malloc(n + 3);
    ck_assert(wrapped != NULL);
    snprintf(wrapped, n + 3, "[%s]", text);
    refused_text(wrapped, n + 2, EVERY, "top level must be a JSON object", "an array");
    refused_text("61", 2, EVERY, "top level must be a JSON object", "a scalar");
    free(wrapped);
    free(text);
}
END_TEST

START_TEST(test_text_after_the_object_is_refused_with_its_position)
{
    char *text = slurp(V3);
    size_t n = strlen(text);
    char *twice = malloc(2 * n + 1);
    ck_assert(twice != NULL);
    memcpy(twice, text, n);
    memcpy(twice + n, text, n + 1);
    refused_text(twice, 2 * n, EVERY, "text after the JSON object", "line 35, column 1");
    memcpy(twice + n, "\0\0{", 4);   /* a NUL byte does not end the file early */
    refused_text(twice, n + 3, EVERY, "text after the JSON object", "line 35, column 1");
    free(twice);
    free(text);
}
END_TEST

START_TEST(test_binary_bytes_are_refused_as_not_json)
{
    static const char binary[] = "\x7f" "ELF\x02\x01\x01\0\0\0\0\xff\xfe{\"dim\": 64}";
    refused_text(binary, sizeof binary - 1, EVERY, "not valid JSON", "line 1, column 1");
    static const char nul_inside[] = "{\"dim\": 6\0004}";
    refused_text(nul_inside, sizeof nul_inside - 1, EVERY, "not valid JSON", "line 1");
}
END_TEST

START_TEST(test_a_directory_or_a_missing_file_is_refused_with_the_reason)
{
    char dir[] = "/tmp/kvl_rel_dir_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    expect_refused(dir, EVERY, dir, "not a regular file");
    rmdir(dir);
    expect_refused("/tmp/kvl_rel_no_such_dir/model.json", EVERY, "cannot open", "No such file or directory");
}
END_TEST

/* A FIFO would block a reader that opened it before checking its type. */
START_TEST(test_a_fifo_is_refused_without_blocking)
{
    char dir[] = "/tmp/kvl_rel_fifo_XXXXXX", fifo[64];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(fifo, sizeof fifo, "%s/config.json", dir);
    ck_assert(mkfifo(fifo, 0600) == 0);
    expect_refused(fifo, EVERY, fifo, "not a regular file");
    unlink(fifo);
    rmdir(dir);
}
END_TEST

/* cJSON reads these; RFC 8259 does not allow them, and each could be a file its writer did not mean. */
START_TEST(test_json_that_is_not_strict_is_refused_with_its_position)
{
    static const char *const text[] = {"{\"hidden_size\": 064}", "{\"_source\": \"a\x01b\"}",
                                       "{\"_source\": \"\xc3\x28\"}"};
    refused_text(text[0], strlen(text[0]), EVERY, "a number with a leading zero", "line 1, column 17");
    refused_text(text[1], strlen(text[1]), EVERY, "line 1, column 15", NULL);
    refused_text(text[2], strlen(text[2]), EVERY, "UTF-8", "line 1, column 14");
}
END_TEST

/* ---- fields ---------------------------------------------------------------------------------------- */

START_TEST(test_wrong_types_are_refused_naming_field_and_value)
{
    refused_edit(V3, "dim", "\"7168\"", EVERY, "\"dim\"", "\"7168\"");
    refused_edit(V3, "n_layers", "true", EVERY, "\"n_layers\"", "true");
    refused_edit(V32, "index_topk", "null", EVERY, "\"index_topk\"", "null");
    refused_edit(V3, "kv_lora_rank", "[512]", EVERY, "\"kv_lora_rank\"", "[512]");
    refused_edit(V4, "rope_scaling", "5", EVERY, "\"rope_scaling\"", "5");
    refused_edit(V4, "rope_scaling", "[{\"factor\": 16}]", EVERY, "\"rope_scaling\" must be an object", "[{");
    refused_edit(V4, "compress_ratios", "{\"0\": 4}", EVERY, "\"compress_ratios\"", "must be a list");
    refused_edit(V41, "kv_source_layers", "\"2,8\"", EVERY, "\"kv_source_layers\"", "\"2,8\"");
    refused_edit(V41, "compress_ratios", "[0, 0, \"4\"]", EVERY, "\"compress_ratios\" entry 2", "\"4\"");
    refused_edit(V3, "_kvlineage", "[]", EVERY, "\"_kvlineage\"", "must be an object");
    refused_edit(V3, "_kvlineage.headline", "\"yes\"", EVERY, "_kvlineage.headline", "\"yes\"");
}
END_TEST

START_TEST(test_missing_fields_are_refused_naming_the_field)
{
    refused_edit(V3, "dim", NULL, EVERY, "missing field \"hidden_size\"", "\"dim\"");
    refused_edit(V32, "index_n_heads", NULL, EVERY, "missing field \"index_n_heads\"", NULL);
    refused_edit(V41, "index_source_layers", NULL, EVERY, "missing field \"index_source_layers\"", NULL);
    refused_edit(V4, "compress_rope_theta", NULL, EVERY, "missing field \"compress_rope_theta\"", NULL);
    /* transformers takes max_position_embeddings where YaRN's original context is missing: only both missing
     * leave it unknown */
    char path[64];
    edited(path, V4, "max_position_embeddings", NULL);
    refused_edit(path, "rope_scaling.original_max_position_embeddings", NULL, EVERY,
                 "missing field \"rope_scaling.original_max_position_embeddings\"", NULL);
    unlink(path);
}
END_TEST

START_TEST(test_duplicated_fields_are_refused_at_any_depth)
{
    char path[64];
    inserted(path, V32, "{", "\n  \"n_heads\": 64,");
    expect_refused(path, EVERY, "field \"n_heads\" appears twice", NULL);
    unlink(path);
    inserted(path, V4, "\"rope_scaling\": {", "\n    \"factor\": 1,");
    expect_refused(path, EVERY, "field \"rope_scaling.factor\" appears twice", NULL);
    unlink(path);
    inserted(path, V3, "\"_kvlineage\": {", "\n    \"name\": \"V3 again\",");
    expect_refused(path, EVERY, "field \"_kvlineage.name\" appears twice", NULL);
    unlink(path);
}
END_TEST

START_TEST(test_negative_and_huge_dimensions_are_refused_naming_the_value)
{
    refused_edit(V3, "n_layers", "-61", EVERY, "\"n_layers\"", "-61");
    refused_edit(V3, "n_heads", "0", EVERY, "\"n_heads\"", "got 0");
    refused_edit(V3, "dim", "1e30", EVERY, "\"dim\"", "1e+30");
    refused_edit(V3, "kv_lora_rank", "16777217", EVERY, "\"kv_lora_rank\"", "16777217");
    refused_edit(V32, "index_topk", "-2048", EVERY, "\"index_topk\"", "-2048");
    refused_edit(V41, "head_dim", "512.5", EVERY, "\"head_dim\"", "512.5");
    refused_edit(V41, "window_size", "-128", EVERY, "\"window_size\"", "-128");
    refused_edit(V32, "rope_factor", "-40", EVERY, "\"rope_factor\"", "-40");
    refused_edit(LLAMA, "rope_theta", "1e13", EVERY, "\"rope_theta\"", "10000000000000");
    refused_edit(V41, "n_layers", "5000", EVERY, "\"n_layers\"", "5000");
    char path[64];
    inserted(path, V3, "\"dim\": ", "1e400, \"max_batch_size\": ");   /* beyond double: cJSON would print null */
    expect_refused(path, EVERY, "\"dim\"", "inf");
    unlink(path);
}
END_TEST

START_TEST(test_a_norm_eps_of_zero_is_refused)
{
    refused_edit(LLAMA, "rms_norm_eps", "0", EVERY, "\"rms_norm_eps\"", "must be positive");
    refused_edit(V41, "norm_eps", "-0.0", EVERY, "\"norm_eps\"", "must be positive");
}
END_TEST

START_TEST(test_layer_lists_out_of_range_or_unsorted_are_refused)
{
    refused_edit(V41, "kv_source_layers", "[2, 8, 14, 40]", EVERY, "\"kv_source_layers\" entry 3", "40");
    refused_edit(V41, "kv_source_layers", "[8, 2, 14, 20]", EVERY, "\"kv_source_layers\"", "ascending");
    refused_edit(V41, "kv_source_layers", "[2, 2, 14, 20]", EVERY, "\"kv_source_layers\"", "ascending");
    refused_edit(V41, "kv_source_layers", "[-1, 8, 14, 20]", EVERY, "\"kv_source_layers\" entry 0", "-1");
    refused_edit(V41, "index_source_layers", "[2, 8, 14.5, 20]", EVERY, "\"index_source_layers\" entry 2", "14.5");
    refused_edit(V41, "index_source_layers", "[8, 14, 20, 24]", EVERY, "lists layer 2", "index_source_layers");
    refused_edit(V41, "candidate_source_layer", "40", EVERY, "\"candidate_source_layer\"", "40");
    refused_edit(V41, "candidate_source_layer", "24", EVERY, "\"candidate_source_layer\" (24)", "kv_source_layers");
}
END_TEST

START_TEST(test_compress_ratios_of_the_wrong_length_are_refused)
{
    char *text = slurp(V4);
    cJSON *root = cJSON_Parse(text);
    free(text);
    ck_assert(root != NULL);
    cJSON *ratios = cJSON_GetObjectItemCaseSensitive(root, "compress_ratios");
    ck_assert_int_eq(cJSON_GetArraySize(ratios), 44);
    cJSON_DeleteItemFromArray(ratios, 43);
    cJSON_DeleteItemFromArray(ratios, 42);   /* 42: neither the 43 layers nor 43 + 1 MTP layer */
    char *short_list = cJSON_PrintUnformatted(ratios);
    cJSON_AddItemToArray(ratios, cJSON_CreateNumber(4));
    cJSON_AddItemToArray(ratios, cJSON_CreateNumber(4));
    cJSON_AddItemToArray(ratios, cJSON_CreateNumber(4));
    char *long_list = cJSON_PrintUnformatted(ratios);
    cJSON_Delete(root);
    refused_edit(V4, "compress_ratios", short_list, EVERY, "\"compress_ratios\" has 42 entries", "expected 43");
    refused_edit(V4, "compress_ratios", long_list, EVERY, "\"compress_ratios\" has 45 entries", "expected 43");
    refused_edit(V4, "compress_ratios", "[]", EVERY, "\"compress_ratios\" has 0 entries", NULL);
    free(short_list);
    free(long_list);
}
END_TEST

/* ---- dims a program cannot run -------------------------------------------------------------------- */

START_TEST(test_a_config_a_program_cannot_price_is_refused_before_any_output)
{
    refused_edit(LLAMA, "rope_scaling",
                 "{\"rope_type\": \"yarn\", \"factor\": 8, \"original_max_position_embeddings\": 8192}",
                 COST, "rope scaling factor 8", NULL);
    refused_edit(LLAMA, "head_dim", "512", COST, "head_dim", "512");
    refused_edit(LLAMA, "_kvlineage.kv_cache", "\"v41-fp4\"", COST, "kv_cache v41-fp4", NULL);
    expect_refused(kvl_path(V3), COST, "generation MLA", NULL);
    refused_edit(V3, "qk_rope_head_dim", "512", MLA_COST, "rotary", "512");
    expect_refused(kvl_path(LLAMA), MLA_COST, "attention is MHA", NULL);
    refused_edit(V32, "index_head_dim", "96", DSA_COST, "index_head_dim 96", NULL);
    refused_edit(V32, "q_lora_rank", "0", DSA_COST, "q_lora_rank", NULL);
    expect_refused(kvl_path(V3), DSA_COST, "not DSA", NULL);
    refused_edit(V32, "kv_lora_rank", "256", KVTABLE, "kv_lora_rank", "576");
}
END_TEST

/* ---- kvtable --svg ----------------------------------------------------------------------------------- */

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

START_TEST(test_kvtable_svg_leaves_no_file_on_any_failure)
{
    char dir[] = "/tmp/kvl_rel_svg_XXXXXX", svg[128], partial[160], bad[64], cmd[512];
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(svg, sizeof svg, "%s/chart.svg", dir);
    snprintf(partial, sizeof partial, "%s.partial", svg);
    edited(bad, V41, "kv_source_layers", "[8, 2]");

    /* a bad config after a good one: nothing printed, nothing written */
    snprintf(cmd, sizeof cmd, "kvtable --svg '%s' '%s' '%s'", svg, kvl_path(V3), bad);
    ck_assert_int_eq(kvl_run(cmd, NULL, out, CAP, err, CAP), 2);
    ck_assert_msg(out[0] == '\0' && count_lines(err) == 1 && strstr(err, bad), "%s: %s", cmd, err);
    ck_assert(!exists(svg) && !exists(partial));

    /* a directory that does not exist, and a path that is a directory */
    snprintf(cmd, sizeof cmd, "kvtable --svg '%s/no/such/dir.svg' '%s'", dir, kvl_path(V3));
    ck_assert_int_eq(kvl_run(cmd, NULL, out, CAP, err, CAP), 2);
    ck_assert_msg(out[0] == '\0' && count_lines(err) == 1 && strstr(err, "No such file or directory"), "%s", err);
    snprintf(cmd, sizeof cmd, "kvtable --svg '%s' '%s'", dir, kvl_path(V3));
    ck_assert_int_eq(kvl_run(cmd, NULL, out, CAP, err, CAP), 2);
    ck_assert_msg(out[0] == '\0' && count_lines(err) == 1 && strstr(err, "is a directory"), "%s", err);
    char dir_partial[160];
    snprintf(dir_partial, sizeof dir_partial, "%s.partial", dir);
    ck_assert_msg(!exists(dir_partial), "%s left behind", dir_partial);

    /* and the good run writes the chart and nothing else */
    snprintf(cmd, sizeof cmd, "kvtable --svg '%s' '%s'", svg, kvl_path(V3));
    ck_assert_int_eq(kvl_run(cmd, NULL, out, CAP, err, CAP), 0);
    ck_assert(exists(svg) && !exists(partial));
    unlink(svg);
    unlink(bad);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reliability_configs");
    TCase *files = tcase_create("malformed_files");
    tcase_add_test(files, test_an_empty_file_is_refused_by_every_program);
    tcase_add_test(files, test_truncated_json_is_refused_with_its_line_and_column);
    tcase_add_test(files, test_a_top_level_array_or_scalar_is_refused);
    tcase_add_test(files, test_text_after_the_object_is_refused_with_its_position);
    tcase_add_test(files, test_binary_bytes_are_refused_as_not_json);
    tcase_add_test(files, test_a_directory_or_a_missing_file_is_refused_with_the_reason);
    tcase_add_test(files, test_a_fifo_is_refused_without_blocking);
    tcase_add_test(files, test_json_that_is_not_strict_is_refused_with_its_position);
    suite_add_tcase(s, files);
    TCase *fields = tcase_create("fields");
    tcase_add_test(fields, test_wrong_types_are_refused_naming_field_and_value);
    tcase_add_test(fields, test_missing_fields_are_refused_naming_the_field);
    tcase_add_test(fields, test_duplicated_fields_are_refused_at_any_depth);
    tcase_add_test(fields, test_negative_and_huge_dimensions_are_refused_naming_the_value);
    tcase_add_test(fields, test_a_norm_eps_of_zero_is_refused);
    tcase_add_test(fields, test_layer_lists_out_of_range_or_unsorted_are_refused);
    tcase_add_test(fields, test_compress_ratios_of_the_wrong_length_are_refused);
    suite_add_tcase(s, fields);
    TCase *programs = tcase_create("programs");
    tcase_add_test(programs, test_a_config_a_program_cannot_price_is_refused_before_any_output);
    tcase_add_test(programs, test_kvtable_svg_leaves_no_file_on_any_failure);
    suite_add_tcase(s, programs);
    return s;
}
