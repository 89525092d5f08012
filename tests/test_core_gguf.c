/* GGUF files (ref/core/gguf.h) through the programs: kvtable prices a GGUF file's cache as llama.cpp
 * keeps it, the same bytes per token as the model's config.json for an MLA conversion and a llama
 * model, whole K and V heads for an older deepseek2 conversion, and refuses by name every file it
 * cannot read right: an architecture or key combination it does not know, a key of the wrong type,
 * two keys that disagree, a truncated or malformed header.
 *
 * Oracles: the config.json rows kvtable prints (test_ch08_table checks those against their
 * definitions); the header's own numbers, found in the file's bytes here without the reader; and
 * malformed files written here byte by byte. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "gguf.h"
#include "params.h"
#include "status.h"

#define OUT_CAP (1 << 16)

static char out[OUT_CAP], err[OUT_CAP];

/* ---- kvtable's figures --------------------------------------------------------------------------- */

/* A number of kvtable --format json's one row for `file`. */
static double kvtable_number(const char *file, const char *field)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "kvtable --format json '%s'", file);
    ck_assert_msg(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err) == 0, "%s: %s", file, err);
    cJSON *arr = cJSON_Parse(out);
    ck_assert_msg(cJSON_GetArraySize(arr) == 1, "%s: one row expected", file);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(arr, 0), field);
    ck_assert_msg(cJSON_IsNumber(v), "%s: no %s", file, field);
    const double d = v->valuedouble;
    cJSON_Delete(arr);
    return d;
}

static void same_bytes_per_token(const char *gguf, const char *config)
{
    const double g = kvtable_number(kvl_path(gguf), "bytes_per_token");
    const double c = kvtable_number(kvl_path(config), "bytes_per_token");
    ck_assert_msg(g == c, "%s prices %.0f bytes per token, %s %.0f", gguf, g, config, c);
}

START_TEST(test_an_mla_conversion_prices_the_configs_latent)
{
    same_bytes_per_token("tests/data/gguf/deepseek-v3-mla.gguf", "ref/configs/deepseek-v3.json");
    same_bytes_per_token("tests/data/gguf/deepseek-v2.gguf", "ref/configs/deepseek-v2.json");
}
END_TEST

START_TEST(test_a_llama_gguf_prices_the_configs_gqa_rows)
{
    same_bytes_per_token("tests/data/gguf/deepseek-llm-67b.gguf", "ref/configs/deepseek-llm-67b.json");
}
END_TEST

/* The parameter count (ref/params.h) of a GGUF file's model equals its config.json's: the same layers,
 * widths, experts and gated FFNs, so serving prices the same weights. */
static void same_parameters(const char *gguf, const char *config)
{
    kvl_model g, c;
    ck_assert_msg(kvl_model_load(&g, kvl_path(gguf)) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(kvl_model_load(&c, kvl_path(config)) == KVL_OK, "%s", kvl_error());
    kvl_params pg, pc;
    ck_assert_int_eq(kvl_params_of(&pg, &g), KVL_OK);
    ck_assert_int_eq(kvl_params_of(&pc, &c), KVL_OK);
    ck_assert_msg(pg.backbone == pc.backbone && pg.dense_ffn == pc.dense_ffn && pg.routed_experts == pc.routed_experts,
                  "%s: %llu parameters (FFN %llu), %s: %llu (FFN %llu)", gguf, (unsigned long long)pg.backbone,
                  (unsigned long long)pg.dense_ffn, config, (unsigned long long)pc.backbone,
                  (unsigned long long)pc.dense_ffn);
    kvl_model_free(&g);
    kvl_model_free(&c);
}

START_TEST(test_a_gguf_model_counts_the_configs_parameters)
{
    same_parameters("tests/data/gguf/deepseek-llm-67b.gguf", "ref/configs/deepseek-llm-67b.json");
    same_parameters("tests/data/gguf/deepseek-v3-mla.gguf", "ref/configs/deepseek-v3.json");
    same_parameters("tests/data/gguf/deepseek-v2.gguf", "ref/configs/deepseek-v2.json");
}
END_TEST

/* The uint32 stored under `key` in a GGUF file's bytes, found by its length-prefixed spelling and
 * type 4 (uint32), without the reader under test. */
static uint32_t header_u32(const uint8_t *b, size_t n, const char *key)
{
    const size_t k = strlen(key);
    for (size_t i = 0; i + 8 + k + 8 <= n; i++) {
        uint64_t len = 0;
        for (int j = 7; j >= 0; j--) len = len << 8 | b[i + (size_t)j];
        if (len != k || memcmp(b + i + 8, key, k) != 0) continue;
        const uint8_t *t = b + i + 8 + k;
        ck_assert_msg(t[0] == 4 && !t[1] && !t[2] && !t[3], "%s is not a uint32", key);
        return (uint32_t)t[4] | (uint32_t)t[5] << 8 | (uint32_t)t[6] << 16 | (uint32_t)t[7] << 24;
    }
    ck_abort_msg("no key %s", key);
    return 0;
}

START_TEST(test_an_older_deepseek2_conversion_prices_whole_k_and_v_heads)
{
    const char *file = kvl_path("tests/data/gguf/deepseek-v3-kv.gguf");
    FILE *f = fopen(file, "rb");
    ck_assert(f != NULL);
    static uint8_t b[1 << 16];
    const size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    const double layers = header_u32(b, n, "deepseek2.block_count");
    const double heads = header_u32(b, n, "deepseek2.attention.head_count_kv");
    const double k = header_u32(b, n, "deepseek2.attention.key_length");
    const double v = header_u32(b, n, "deepseek2.attention.value_length");
    const double f16 = 2;   /* llama.cpp's default cache type */
    ck_assert_double_eq(kvtable_number(file, "main_row_bytes"), heads * (k + v) * f16);
    ck_assert_double_eq(kvtable_number(file, "bytes_per_token"), layers * heads * (k + v) * f16);
}
END_TEST

/* kvtable --llama-cache TYPE's bytes per token of `file`, against ggml's blocks of 32 values (a 2-byte
 * f16 scale and 32 int8 for q8_0, 32 nibbles for q4_0) over the rows the header's numbers give: one
 * latent of kv_lora_rank + rope.dimension_count (MLA), or K and V of every head (whole heads). */
static void prices_ggml_blocks(const char *type, double block_bytes)
{
    static const char *const files[] = {"tests/data/gguf/deepseek-v3-mla.gguf", "tests/data/gguf/deepseek-v3-kv.gguf"};
    for (int i = 0; i < 2; i++) {
        char file[900], cmd[1024];
        snprintf(file, sizeof file, "%s", kvl_path(files[i]));
        FILE *f = fopen(file, "rb");
        ck_assert(f != NULL);
        static uint8_t b[1 << 16];
        const size_t n = fread(b, 1, sizeof b, f);
        fclose(f);
        const double layers = header_u32(b, n, "deepseek2.block_count");
        const double heads = header_u32(b, n, "deepseek2.attention.head_count_kv");
        const double k = header_u32(b, n, "deepseek2.attention.key_length");
        const double v = header_u32(b, n, "deepseek2.attention.value_length");
        /* MLA: one head whose key is the latent, V its first values (not stored again) */
        const double values = i == 0 ? k : heads * (k + v);
        snprintf(cmd, sizeof cmd, "kvtable --llama-cache %s --format json '%s'", type, file);
        ck_assert_msg(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err) == 0, "%s", err);
        cJSON *arr = cJSON_Parse(out);
        const cJSON *row = cJSON_GetArrayItem(arr, 0);
        const double bpt = cJSON_GetObjectItemCaseSensitive(row, "bytes_per_token")->valuedouble;
        const char *label = cJSON_GetObjectItemCaseSensitive(row, "kv_cache")->valuestring;
        ck_assert_msg(bpt == layers * values / 32 * block_bytes, "%s %s: %.0f bytes per token", file, type, bpt);
        ck_assert_msg(strncmp(label, type, strlen(type)) == 0, "%s priced as %s", type, label);
        cJSON_Delete(arr);
    }
}

START_TEST(test_a_llama_cpp_cache_type_prices_ggml_blocks)
{
    prices_ggml_blocks("q8_0", 2 + 32);
    prices_ggml_blocks("q4_0", 2 + 16);
    prices_ggml_blocks("f16", 2 * 32);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "kvtable --llama-cache q8_0 '%s'", kvl_path("ref/configs/deepseek-v3.json"));
    ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 2);   /* no GGUF file to price so */
    ck_assert_str_eq(out, "");
    ck_assert_msg(strstr(err, "--llama-cache") && strstr(err, "GGUF"), "%s", err);
}
END_TEST

START_TEST(test_kvtable_names_the_llama_cpp_cache_it_priced)
{
    char cmd[2048], mla[900];
    snprintf(mla, sizeof mla, "%s", kvl_path("tests/data/gguf/deepseek-v3-mla.gguf"));   /* kvl_path's buffer is reused */
    snprintf(cmd, sizeof cmd, "kvtable --format csv '%s' '%s'", mla, kvl_path("tests/data/gguf/deepseek-v3-kv.gguf"));
    ck_assert_msg(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(strstr(out, "\nDeepSeek-V3 GGUF MLA,-,MLA,f16 (llama.cpp),"), "%s", out);
    ck_assert_msg(strstr(out, "\nDeepSeek-V3 GGUF K+V,-,MLA,f16 K+V (llama.cpp),"), "%s", out);
}
END_TEST

/* ---- GGUF files written byte by byte ---------------------------------------------------------------- */

typedef struct {
    uint8_t b[8192];
    size_t n;
} bytes;

static void put(bytes *o, uint64_t v, size_t n)
{
    ck_assert(o->n + n <= sizeof o->b);
    for (size_t i = 0; i < n; i++) o->b[o->n++] = (uint8_t)(v >> 8 * i);
}

static void put_str(bytes *o, const char *s)
{
    put(o, strlen(s), 8);
    ck_assert(o->n + strlen(s) <= sizeof o->b);
    memcpy(o->b + o->n, s, strlen(s));
    o->n += strlen(s);
}

/* One pair: a uint32 (type 4), a float32 (6) or a string (8) value, or `raw` bytes after type `type`. */
typedef struct {
    const char *key;
    int type;
    uint32_t u;
    float f;
    const char *s;
} pair;

static void put_pair(bytes *o, const pair *p)
{
    put_str(o, p->key);
    put(o, (uint64_t)p->type, 4);
    if (p->type == 8) put_str(o, p->s);
    else if (p->type == 6) { uint32_t w; memcpy(&w, &p->f, 4); put(o, w, 4); }
    else put(o, p->u, p->type == 10 ? 8 : p->type == 5 || p->type == 4 ? 4 : 1);
}

/* A deepseek2 MLA conversion of V3's attention, header only. */
static const pair MLA[] = {
    {"general.architecture", 8, 0, 0, "deepseek2"},
    {"deepseek2.block_count", 4, 61, 0, 0},
    {"deepseek2.context_length", 4, 163840, 0, 0},
    {"deepseek2.embedding_length", 4, 7168, 0, 0},
    {"deepseek2.feed_forward_length", 4, 18432, 0, 0},
    {"deepseek2.attention.head_count", 4, 128, 0, 0},
    {"deepseek2.attention.head_count_kv", 4, 1, 0, 0},
    {"deepseek2.attention.layer_norm_rms_epsilon", 6, 0, 1e-6f, 0},
    {"deepseek2.leading_dense_block_count", 4, 3, 0, 0},
    {"deepseek2.attention.q_lora_rank", 4, 1536, 0, 0},
    {"deepseek2.attention.kv_lora_rank", 4, 512, 0, 0},
    {"deepseek2.attention.key_length", 4, 576, 0, 0},
    {"deepseek2.attention.value_length", 4, 512, 0, 0},
    {"deepseek2.attention.key_length_mla", 4, 192, 0, 0},
    {"deepseek2.attention.value_length_mla", 4, 128, 0, 0},
    {"deepseek2.expert_feed_forward_length", 4, 2048, 0, 0},
    {"deepseek2.expert_count", 4, 256, 0, 0},
    {"deepseek2.expert_used_count", 4, 8, 0, 0},
    {"deepseek2.expert_shared_count", 4, 1, 0, 0},
    {"deepseek2.expert_weights_scale", 6, 0, 2.5f, 0},
    {"deepseek2.rope.dimension_count", 4, 64, 0, 0},
};
enum { N_MLA = sizeof MLA / sizeof *MLA };

/* The MLA file with pair `at` replaced by *with (with NULL: left out), version 3, no tensors. */
static void mla_file(bytes *o, size_t at, const pair *with)
{
    o->n = 0;
    put(o, 0x46554747, 4);   /* "GGUF" */
    put(o, 3, 4);
    put(o, 0, 8);
    put(o, N_MLA - (at < N_MLA && !with), 8);
    for (size_t i = 0; i < N_MLA; i++)
        if (i != at) put_pair(o, &MLA[i]);
        else if (with) put_pair(o, with);
}

static size_t index_of(const char *key)
{
    for (size_t i = 0; i < N_MLA; i++)
        if (strcmp(MLA[i].key, key) == 0) return i;
    ck_abort_msg("no %s", key);
    return 0;
}

static void write_file(const char *path, const uint8_t *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    ck_assert_uint_eq(fwrite(b, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

/* kvtable on b[n] exits 2 with nothing on stdout and one line on stderr naming the file and each of
 * want[]. */
static void refused(const uint8_t *b, size_t n, const char *const *want, size_t n_want)
{
    char path[] = "/tmp/kvl_gguf_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    ck_assert(fd >= 0);
    close(fd);
    write_file(path, b, n);
    char cmd[256];
    snprintf(cmd, sizeof cmd, "kvtable %s", path);
    const int rc = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    unlink(path);
    ck_assert_msg(rc == 2, "exit %d, stdout %s", rc, out);
    ck_assert_str_eq(out, "");
    ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "not one line: %s", err);
    ck_assert_msg(strstr(err, path), "the file is not named: %s", err);
    for (size_t i = 0; i < n_want; i++) ck_assert_msg(strstr(err, want[i]), "no \"%s\" in: %s", want[i], err);
}

START_TEST(test_the_written_mla_file_is_read)
{
    bytes o;
    mla_file(&o, N_MLA, NULL);
    char path[] = "/tmp/kvl_gguf_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    ck_assert(fd >= 0);
    close(fd);
    write_file(path, o.b, o.n);
    const double bpt = kvtable_number(path, "bytes_per_token");
    unlink(path);
    ck_assert_double_eq(bpt, 61.0 * (512 + 64) * 2);   /* the latent of every layer, f16 */
}
END_TEST

START_TEST(test_an_architecture_not_read_is_refused_by_name)
{
    bytes o;
    const pair qwen = {"general.architecture", 8, 0, 0, "qwen2"};
    mla_file(&o, 0, &qwen);
    refused(o.b, o.n, (const char *[]){"general.architecture", "qwen2"}, 2);
}
END_TEST

START_TEST(test_half_of_the_mla_key_pair_is_refused)
{
    bytes o;
    mla_file(&o, index_of("deepseek2.attention.value_length_mla"), NULL);
    refused(o.b, o.n, (const char *[]){"key_length_mla", "value_length_mla", "192"}, 3);
}
END_TEST

START_TEST(test_a_missing_key_is_refused_by_name)
{
    bytes o;
    mla_file(&o, index_of("deepseek2.attention.kv_lora_rank"), NULL);
    refused(o.b, o.n, (const char *[]){"missing key", "deepseek2.attention.kv_lora_rank"}, 2);
}
END_TEST

START_TEST(test_a_key_of_the_wrong_type_is_refused)
{
    bytes o;
    const pair as_int32 = {"deepseek2.block_count", 5, 61, 0, 0};
    mla_file(&o, index_of("deepseek2.block_count"), &as_int32);
    refused(o.b, o.n, (const char *[]){"deepseek2.block_count", "uint32", "int32"}, 3);
    const pair as_u32 = {"deepseek2.attention.layer_norm_rms_epsilon", 4, 1, 0, 0};
    mla_file(&o, index_of("deepseek2.attention.layer_norm_rms_epsilon"), &as_u32);
    refused(o.b, o.n, (const char *[]){"layer_norm_rms_epsilon", "float32"}, 2);
}
END_TEST

START_TEST(test_two_keys_that_disagree_are_refused)
{
    bytes o;
    const pair value = {"deepseek2.attention.value_length", 4, 128, 0, 0};   /* not kv_lora_rank 512 */
    mla_file(&o, index_of("deepseek2.attention.value_length"), &value);
    refused(o.b, o.n, (const char *[]){"deepseek2.attention.value_length", "128", "512"}, 3);
    const pair key = {"deepseek2.attention.key_length", 4, 192, 0, 0};   /* not 512 + 64 */
    mla_file(&o, index_of("deepseek2.attention.key_length"), &key);
    refused(o.b, o.n, (const char *[]){"deepseek2.attention.key_length", "192", "576"}, 3);
    const pair heads = {"deepseek2.attention.head_count_kv", 4, 128, 0, 0};   /* an MLA file has one */
    mla_file(&o, index_of("deepseek2.attention.head_count_kv"), &heads);
    refused(o.b, o.n, (const char *[]){"deepseek2.attention.head_count_kv", "128"}, 2);
}
END_TEST

START_TEST(test_a_key_given_twice_is_refused)
{
    bytes o;
    const pair again = {"deepseek2.attention.kv_lora_rank", 4, 256, 0, 0};
    mla_file(&o, index_of("deepseek2.expert_weights_scale"), &again);
    refused(o.b, o.n, (const char *[]){"deepseek2.attention.kv_lora_rank", "twice"}, 2);
}
END_TEST

/* Every prefix of a good file is refused in-process without reading past it (the sanitizer build
 * catches a read past the copy), and one through kvtable. */
START_TEST(test_every_truncation_is_refused)
{
    bytes o;
    mla_file(&o, N_MLA, NULL);
    for (size_t n = 0; n < o.n; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, o.b, n);
        kvl_gguf g;
        const int rc = kvl_gguf_parse(&g, copy, n, n, "cut.gguf");
        free(copy);
        ck_assert_msg(rc == KVL_EPARSE, "a file cut to %zu of %zu bytes: %d", n, o.n, rc);
        ck_assert_msg(strncmp(kvl_error(), "cut.gguf: ", 10) == 0, "%s", kvl_error());
    }
    refused(o.b, o.n - 3, (const char *[]){"truncated"}, 1);
}
END_TEST

START_TEST(test_a_malformed_header_is_refused)
{
    bytes o;
    mla_file(&o, N_MLA, NULL);
    o.b[4] = 1;   /* version 1: 32-bit counts */
    refused(o.b, o.n, (const char *[]){"version 1"}, 1);
    mla_file(&o, N_MLA, NULL);
    o.b[4] = 0, o.b[7] = 3;   /* big-endian version 3 */
    refused(o.b, o.n, (const char *[]){"big-endian"}, 1);
    mla_file(&o, N_MLA, NULL);
    o.b[16 + 7] = 0x10;   /* a key-value count of 2^60 */
    refused(o.b, o.n, (const char *[]){"key-value pairs"}, 1);
    mla_file(&o, N_MLA, NULL);
    o.b[24 + 7] = 0x7f;   /* the first key's length: 2^62 and more */
    refused(o.b, o.n, (const char *[]){"truncated", "a key"}, 2);
    mla_file(&o, N_MLA, NULL);
    o.b[24 + 8 + strlen(MLA[0].key)] = 13;   /* no such value type */
    refused(o.b, o.n, (const char *[]){"general.architecture", "value type 13"}, 2);
}
END_TEST

/* An array of 2^61 strings in a small file is refused before anything is allocated or walked. */
START_TEST(test_an_array_longer_than_the_file_is_refused)
{
    bytes o;
    mla_file(&o, N_MLA, NULL);
    o.b[16] = N_MLA + 1;   /* one more pair: tokenizer.ggml.tokens, an array */
    put_str(&o, "tokenizer.ggml.tokens");
    put(&o, 9, 4);
    put(&o, 8, 4);
    put(&o, (uint64_t)1 << 61, 8);
    char at[32];
    snprintf(at, sizeof at, "an array at byte %zu ", o.n);   /* where the elements start: none was read */
    for (int i = 0; i < 3; i++) put_str(&o, "tok");
    refused(o.b, o.n, (const char *[]){"truncated", at}, 2);
}
END_TEST

/* ggml's quantised weights (general.file_type 15, Q4_K_M) leave the cache as it is, and serving,
 * which prices weights as the file ships them, refuses them by name unless told a format. */
START_TEST(test_quantised_weights_are_refused_by_serving_alone)
{
    bytes o;
    mla_file(&o, N_MLA, NULL);
    o.b[16] = N_MLA + 1;
    put_pair(&o, &(pair){"general.file_type", 4, 15, 0, 0});
    char path[] = "/tmp/kvl_gguf_XXXXXX.gguf";
    int fd = mkstemps(path, 5);
    ck_assert(fd >= 0);
    close(fd);
    write_file(path, o.b, o.n);
    const double bpt = kvtable_number(path, "bytes_per_token");
    char cmd[256];
    snprintf(cmd, sizeof cmd, "serving %s", path);
    const int native = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    const int refused_out = out[0] != '\0';
    const int named = strstr(err, "general.file_type") && strstr(err, "15");
    snprintf(cmd, sizeof cmd, "serving --weights bf16 %s", path);
    const int bf16 = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    unlink(path);
    ck_assert_double_eq(bpt, 61.0 * (512 + 64) * 2);
    ck_assert_int_eq(native, 2);
    ck_assert_msg(!refused_out && named, "refusal not by name, or with output");
    ck_assert_msg(bf16 == 0, "%s", err);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_gguf");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_an_mla_conversion_prices_the_configs_latent);
    tcase_add_test(tc, test_a_llama_gguf_prices_the_configs_gqa_rows);
    tcase_add_test(tc, test_a_gguf_model_counts_the_configs_parameters);
    tcase_add_test(tc, test_an_older_deepseek2_conversion_prices_whole_k_and_v_heads);
    tcase_add_test(tc, test_kvtable_names_the_llama_cpp_cache_it_priced);
    tcase_add_test(tc, test_a_llama_cpp_cache_type_prices_ggml_blocks);
    tcase_add_test(tc, test_the_written_mla_file_is_read);
    tcase_add_test(tc, test_an_architecture_not_read_is_refused_by_name);
    tcase_add_test(tc, test_half_of_the_mla_key_pair_is_refused);
    tcase_add_test(tc, test_a_missing_key_is_refused_by_name);
    tcase_add_test(tc, test_a_key_of_the_wrong_type_is_refused);
    tcase_add_test(tc, test_two_keys_that_disagree_are_refused);
    tcase_add_test(tc, test_a_key_given_twice_is_refused);
    tcase_add_test(tc, test_every_truncation_is_refused);
    tcase_add_test(tc, test_a_malformed_header_is_refused);
    tcase_add_test(tc, test_an_array_longer_than_the_file_is_refused);
    tcase_add_test(tc, test_quantised_weights_are_refused_by_serving_alone);
    suite_add_tcase(s, tc);
    return s;
}
