/* The config loader: every real config loads with the layer map its generation implies, both key
 * spellings read the same model, and each class of bad config gets its own error naming the file
 * and the field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "status.h"

static void load_real(kvl_model *m, const char *name)
{
    char rel[128];
    snprintf(rel, sizeof rel, "ref/configs/%s", name);
    int rc = kvl_model_load(m, kvl_path(rel));
    ck_assert_msg(rc == KVL_OK, "%s: %s", name, kvl_error());
}

static size_t count_kind(const kvl_model *m, kvl_layer_kind k)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_layers; i++) n += m->layers[i].kind == k;
    return n;
}

START_TEST(test_llm67b_is_gqa8_with_95_layers)
{
    kvl_model m;
    load_real(&m, "deepseek-llm-67b.json");
    ck_assert_int_eq(m.generation, KVL_GEN_MHA);
    ck_assert_uint_eq(m.n_layers, 95);
    ck_assert_uint_eq(m.n_kv_heads, 8);
    ck_assert_uint_eq(m.head_dim, 128);
    ck_assert_uint_eq(count_kind(&m, KVL_LAYER_DENSE), 95);
    ck_assert_int_eq(m.kv_cache, KVL_CACHE_BF16);
    ck_assert_str_eq(m.name, "DeepSeek LLM 67B");
    ck_assert(m.headline);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_v3_is_mla_with_yarn_from_the_config)
{
    kvl_model m;
    load_real(&m, "deepseek-v3.json");
    ck_assert_int_eq(m.generation, KVL_GEN_MLA);
    ck_assert_uint_eq(m.n_layers, 61);
    ck_assert_uint_eq(m.kv_lora_rank, 512);
    ck_assert_uint_eq(m.qk_rope_head_dim, 64);
    ck_assert_uint_eq(m.q_lora_rank, 1536);
    ck_assert_double_eq(m.rope.factor, 40);
    ck_assert_double_eq(m.rope.original_len, 4096);
    ck_assert_double_eq(m.rope.mscale, 1.0);
    ck_assert(!m.headline);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_v32_is_dsa_with_its_indexer)
{
    kvl_model m;
    load_real(&m, "deepseek-v3.2-exp.json");
    ck_assert_int_eq(m.generation, KVL_GEN_DSA);
    ck_assert_uint_eq(m.index_n_heads, 64);
    ck_assert_uint_eq(m.index_head_dim, 128);
    ck_assert_uint_eq(m.index_topk, 2048);
    ck_assert_uint_eq(count_kind(&m, KVL_LAYER_SPARSE), 61);
    ck_assert_int_eq(m.kv_cache, KVL_CACHE_V32_FP8);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_v4_flash_has_2_window_21_csa_20_hca_layers)
{
    kvl_model m;
    load_real(&m, "deepseek-v4-flash.json");
    ck_assert_int_eq(m.generation, KVL_GEN_V4);
    ck_assert_uint_eq(m.n_layers, 43);
    ck_assert_uint_eq(count_kind(&m, KVL_LAYER_WINDOW), 2);
    ck_assert_uint_eq(count_kind(&m, KVL_LAYER_CSA), 21);
    ck_assert_uint_eq(count_kind(&m, KVL_LAYER_HCA), 20);
    for (size_t i = 2; i < 43; i++) {
        ck_assert_int_eq(m.layers[i].kind, i % 2 == 0 ? KVL_LAYER_CSA : KVL_LAYER_HCA);
        ck_assert(kvl_layer_writes_cache(&m, i));
    }
    ck_assert_uint_eq(m.layers[3].compress_ratio, 128);
    ck_assert_uint_eq(m.window, 128);
    ck_assert_double_eq(m.compress_rope.theta, 160000);
    ck_assert_double_eq(m.compress_rope.factor, 16);
    ck_assert_double_eq(m.rope.factor, 1);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_v41_flash_layer_modes_follow_the_source_lists)
{
    kvl_model m;
    load_real(&m, "deepseek-v4.1-flash.json");
    ck_assert_int_eq(m.generation, KVL_GEN_V41);
    ck_assert_uint_eq(m.n_layers, 40);
    const size_t full[] = {2, 8, 14, 20}, reindex[] = {24, 28, 32, 36};
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(m.layers[full[i]].kind, KVL_LAYER_FULL);
        ck_assert_int_eq(m.layers[reindex[i]].kind, KVL_LAYER_REINDEX);
        ck_assert_int_eq(m.layers[reindex[i]].kv_source, 20);
    }
    ck_assert_uint_eq(count_kind(&m, KVL_LAYER_WINDOW), 2);
    ck_assert_uint_eq(count_kind(&m, KVL_LAYER_REUSE), 30);
    ck_assert_int_eq(m.layers[3].kv_source, 2);
    ck_assert_int_eq(m.layers[3].index_source, 2);
    ck_assert_int_eq(m.layers[25].kv_source, 20);
    ck_assert_int_eq(m.layers[25].index_source, 24);
    ck_assert_int_eq(m.layers[39].index_source, 36);
    ck_assert_uint_eq(m.layers[19].compress_ratio, 2);
    ck_assert_uint_eq(m.layers[20].compress_ratio, 1);
    size_t writers = 0;
    for (size_t i = 0; i < m.n_layers; i++) writers += (size_t)kvl_layer_writes_cache(&m, i);
    ck_assert_uint_eq(writers, 4);
    ck_assert_uint_eq(m.candidate_source_layer, 20);
    ck_assert_uint_eq(m.candidate_topk_blocks, 2048);
    ck_assert_double_eq(m.norm_eps, 1e-20);
    kvl_model_free(&m);
}
END_TEST

/* The same MLA model written in the Hugging Face and the DeepSeek inference spellings. */
static const char *v3_hf =
    "{\"hidden_size\": 7168, \"num_hidden_layers\": 61, \"num_attention_heads\": 128, \"q_lora_rank\": 1536,"
    " \"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"v_head_dim\": 128,"
    " \"rope_theta\": 10000, \"rope_scaling\": {\"factor\": 40, \"original_max_position_embeddings\": 4096,"
    " \"beta_fast\": 32, \"beta_slow\": 1, \"mscale\": 1.0, \"mscale_all_dim\": 1.0, \"type\": \"yarn\"}}";
static const char *v3_ds =
    "{\"dim\": 7168, \"n_layers\": 61, \"n_heads\": 128, \"q_lora_rank\": 1536, \"kv_lora_rank\": 512,"
    " \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"v_head_dim\": 128, \"rope_theta\": 10000,"
    " \"rope_factor\": 40, \"original_seq_len\": 4096, \"beta_fast\": 32, \"beta_slow\": 1, \"mscale\": 1.0}";

START_TEST(test_hf_spelling_matches_deepseek_spelling)
{
    kvl_model a, b;
    ck_assert_msg(kvl_model_parse(&a, v3_hf, strlen(v3_hf), "hf.json") == KVL_OK, "%s", kvl_error());
    ck_assert_msg(kvl_model_parse(&b, v3_ds, strlen(v3_ds), "ds.json") == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(a.d, b.d);
    ck_assert_uint_eq(a.n_layers, b.n_layers);
    ck_assert_uint_eq(a.n_heads, b.n_heads);
    ck_assert_uint_eq(a.kv_lora_rank, b.kv_lora_rank);
    ck_assert_double_eq(a.rope.theta, b.rope.theta);
    ck_assert_double_eq(a.rope.factor, b.rope.factor);
    ck_assert_double_eq(a.rope.original_len, b.rope.original_len);
    ck_assert_double_eq(a.rope.beta_fast, b.rope.beta_fast);
    ck_assert_double_eq(a.rope.beta_slow, b.rope.beta_slow);
    ck_assert_double_eq(a.rope.mscale, b.rope.mscale);   /* mscale_all_dim 1 = the inference code's mscale 1 */
    ck_assert_double_eq(a.rope.attention_factor, b.rope.attention_factor);   /* m(40, 1)/m(40, 1) = 1 */
    ck_assert_int_eq(a.rope.interleaved, b.rope.interleaved);
    ck_assert_int_eq(a.generation, b.generation);
    kvl_model_free(&a);
    kvl_model_free(&b);
}
END_TEST

/* ---- bad configs: each written to a file, loaded, and the message checked ---------------------- */

static const char *good_v41 =
    "{\"dim\": 64, \"n_layers\": 6, \"n_heads\": 4, \"head_dim\": 32, \"rope_head_dim\": 8, \"q_lora_rank\": 32,"
    " \"o_groups\": 2, \"o_lora_rank\": 16, \"window_size\": 8, \"index_n_heads\": 4, \"index_head_dim\": 16,"
    " \"index_topk\": 3, \"rope_theta\": 10000, \"compress_rope_theta\": 160000, \"rope_factor\": 16,"
    " \"original_seq_len\": 65536, \"beta_fast\": 32, \"beta_slow\": 1, \"compress_ratios\": [0, 2, 2, 1, 1, 1],"
    " \"kv_source_layers\": [1, 3], \"index_source_layers\": [1, 3, 5], \"candidate_source_layer\": 3,"
    " \"candidate_topk_blocks\": 2, \"candidate_block_size\": 4}";

/* Replace the first occurrence of `from` in good_v41 with `to`, write it to a file, and load it. */
static int load_edited(const char *base, const char *from, const char *to, char *path, size_t cap)
{
    char text[2048];
    const char *at = strstr(base, from);
    ck_assert_msg(at != NULL, "test edit: \"%s\" not in the base config", from);
    snprintf(text, sizeof text, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    snprintf(path, cap, "/tmp/kvl_bad_XXXXXX");
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    ck_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    kvl_model m;
    int rc = kvl_model_load(&m, path);
    unlink(path);
    if (rc == KVL_OK) kvl_model_free(&m);
    return rc;
}

static void expect_error(const char *from, const char *to, const char *field, const char *detail)
{
    char path[64];
    int rc = load_edited(good_v41, from, to, path, sizeof path);
    ck_assert_msg(rc != KVL_OK, "edit \"%s\" -> \"%s\" was accepted", from, to);
    const char *msg = kvl_error();
    ck_assert_msg(strstr(msg, path) != NULL, "message does not name the file: %s", msg);
    ck_assert_msg(strstr(msg, field) != NULL, "message does not name \"%s\": %s", field, msg);
    if (detail) ck_assert_msg(strstr(msg, detail) != NULL, "message lacks \"%s\": %s", detail, msg);
}

START_TEST(test_the_toy_v41_config_is_valid)
{
    char path[64];
    ck_assert_msg(load_edited(good_v41, "{", "{", path, sizeof path) == KVL_OK, "%s", kvl_error());
}
END_TEST

START_TEST(test_misspelled_field_is_named_with_its_likely_meaning)
{
    expect_error("\"n_heads\"", "\"n_haeds\"", "n_heads", "n_haeds");
    expect_error("\"index_topk\"", "\"index_top_k\"", "index_topk", "index_top_k");
}
END_TEST

START_TEST(test_wrong_type_is_named)
{
    expect_error("\"n_layers\": 6", "\"n_layers\": \"6\"", "n_layers", "\"6\"");
    expect_error("\"compress_ratios\": [0, 2, 2, 1, 1, 1]", "\"compress_ratios\": 2", "compress_ratios", NULL);
    expect_error("\"compress_ratios\": [0, 2,", "\"compress_ratios\": [0, \"two\",", "compress_ratios", "entry 1");
}
END_TEST

START_TEST(test_out_of_range_sizes_are_named)
{
    expect_error("\"dim\": 64", "\"dim\": -64", "dim", "-64");
    expect_error("\"dim\": 64", "\"dim\": 1e30", "dim", NULL);
    expect_error("\"head_dim\": 32", "\"head_dim\": 32.5", "head_dim", "32.5");
    expect_error("\"n_layers\": 6", "\"n_layers\": 0", "n_layers", NULL);
}
END_TEST

START_TEST(test_source_layers_out_of_range_or_unsorted_are_named)
{
    expect_error("\"kv_source_layers\": [1, 3]", "\"kv_source_layers\": [1, 6]", "kv_source_layers", "6");
    expect_error("\"kv_source_layers\": [1, 3]", "\"kv_source_layers\": [3, 1]", "kv_source_layers", "ascending");
    expect_error("\"index_source_layers\": [1, 3, 5]", "\"index_source_layers\": [3, 5]", "kv_source_layers", NULL);
    expect_error("\"candidate_source_layer\": 3", "\"candidate_source_layer\": 5", "candidate_source_layer", NULL);
    expect_error("\"compress_ratios\": [0, 2,", "\"compress_ratios\": [0, 0,", "compress_ratios", "layer 1");
}
END_TEST

START_TEST(test_compress_ratios_of_the_wrong_length_are_named)
{
    expect_error("[0, 2, 2, 1, 1, 1]", "[0, 2, 2, 1, 1]", "compress_ratios", "5 entries");
}
END_TEST

START_TEST(test_a_head_dim_the_layout_cannot_split_is_named)
{
    expect_error("\"rope_head_dim\": 8", "\"rope_head_dim\": 7", "qk_rope_head_dim", "even");
    expect_error("\"rope_head_dim\": 8", "\"rope_head_dim\": 64", "qk_rope_head_dim", "exceeds");
    expect_error("\"o_groups\": 2", "\"o_groups\": 3", "o_groups", "divide");
}
END_TEST

START_TEST(test_malformed_json_is_refused_with_its_position)
{
    expect_error("\"candidate_block_size\": 4}", "\"candidate_block_size\": 4", "not valid JSON", "line 1");
    expect_error("\"n_heads\": 4,", "\"n_heads\": 4, \"n_heads\": 4,", "n_heads", "twice");
}
END_TEST

START_TEST(test_mha_heads_that_do_not_divide_the_width_are_named)
{
    const char *mha = "{\"hidden_size\": 100, \"num_hidden_layers\": 2, \"num_attention_heads\": 3}";
    char path[64];
    ck_assert(load_edited(mha, "{", "{", path, sizeof path) != KVL_OK);
    ck_assert_msg(strstr(kvl_error(), "num_attention_heads") != NULL, "%s", kvl_error());
    ck_assert(load_edited(mha, "100", "96", path, sizeof path) == KVL_OK);
    const char *mha96 = "{\"hidden_size\": 96, \"num_hidden_layers\": 2, \"num_attention_heads\": 3}";
    ck_assert(load_edited(mha96, "}", ", \"num_key_value_heads\": 2}", path, sizeof path) != KVL_OK);
    ck_assert_msg(strstr(kvl_error(), "num_key_value_heads") != NULL, "%s", kvl_error());
}
END_TEST

START_TEST(test_annotation_fields_are_checked)
{
    expect_error("{", "{\"_kvlineage\": {\"headline\": \"yes\"}, ", "_kvlineage.headline", "\"yes\"");
    expect_error("{", "{\"_kvlineage\": {\"kv_cache\": \"fp2\"}, ", "_kvlineage.kv_cache", "fp2");
    expect_error("{", "{\"_kvlineage\": [1], ", "_kvlineage", "must be an object");
}
END_TEST

START_TEST(test_missing_and_empty_files_are_named)
{
    kvl_model m;
    ck_assert_int_eq(kvl_model_load(&m, "/nonexistent/model.json"), KVL_EIO);
    ck_assert(strstr(kvl_error(), "/nonexistent/model.json") != NULL);
    ck_assert_int_eq(kvl_model_parse(&m, "", 0, "empty.json"), KVL_EPARSE);
    ck_assert(strstr(kvl_error(), "empty.json: empty") != NULL);
    ck_assert_int_eq(kvl_model_parse(&m, "[{}]", 4, "list.json"), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "list.json: the top level must be a JSON object, got an array") != NULL, "%s",
                  kvl_error());
}
END_TEST

/* ---- spellings: each field read with the meaning of the code that writes it ------------------------- */

static kvl_model parsed(const char *json)
{
    kvl_model m;
    ck_assert_msg(kvl_model_parse(&m, json, strlen(json), "t.json") == KVL_OK, "%s", kvl_error());
    return m;
}

static void expect_refused(const char *json, const char *piece)
{
    kvl_model m;
    ck_assert_msg(kvl_model_parse(&m, json, strlen(json), "t.json") != KVL_OK, "accepted: %s", json);
    ck_assert_msg(strstr(kvl_error(), "t.json: ") && strstr(kvl_error(), piece), "'%s' lacks '%s'", kvl_error(), piece);
}

#define MLA_DS "\"dim\": 64, \"n_layers\": 1, \"n_heads\": 4, \"kv_lora_rank\": 24, \"qk_nope_head_dim\": 16," \
               " \"qk_rope_head_dim\": 8, \"v_head_dim\": 12"
#define MHA_HF "\"hidden_size\": 64, \"num_hidden_layers\": 2, \"num_attention_heads\": 4"

/* DeepSeek's V3 inference/model.py ModelArgs: rope_factor 40, original_seq_len 4096, mscale 1, and YaRN
 * only while max_seq_len (16384) exceeds original_seq_len; its config_671B.json states none of them. */
START_TEST(test_deepseek_spelling_without_rotary_fields_takes_the_inference_defaults)
{
    kvl_model m = parsed("{" MLA_DS "}");
    ck_assert_int_eq(m.rope_spelling, KVL_ROPE_FLAT);
    ck_assert_double_eq(m.rope.factor, 40);
    ck_assert_double_eq(m.rope.original_len, 4096);
    ck_assert_double_eq(m.rope.mscale, 1);
    ck_assert_double_eq(m.rope.attention_factor, 1);
    kvl_model_free(&m);
    m = parsed("{" MLA_DS ", \"max_seq_len\": 4096}");
    ck_assert_double_eq(m.rope.factor, 1);
    kvl_model_free(&m);
    m = parsed("{\"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4, \"kv_lora_rank\": 24,"
               " \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 12}");
    ck_assert_int_eq(m.rope_spelling, KVL_ROPE_PLAIN);   /* transformers' DeepseekV3Config: plain unless told */
    ck_assert_double_eq(m.rope.factor, 1);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_transformers_5_rope_parameters_give_mha_its_theta)
{
    kvl_model m = parsed("{" MHA_HF ", \"rope_parameters\": {\"rope_theta\": 1000000.0, \"rope_type\": \"default\"}}");
    ck_assert_double_eq(m.rope.theta, 1e6);
    ck_assert_int_eq(m.rope_spelling, KVL_ROPE_PARAMETERS);
    kvl_model_free(&m);
    expect_refused("{" MHA_HF ", \"rope_parameters\": {\"rope_theta\": 500000.0, \"rope_type\": \"llama3\", \"factor\": 8}}",
                   "\"rope_parameters.rope_type\" is \"llama3\": only \"default\" and \"yarn\"");
    expect_refused("{" MHA_HF ", \"rope_scaling\": {\"factor\": 8}}",
                   "\"rope_scaling.factor\" is 8 under rope type \"default\", which ignores it");
}
END_TEST

/* transformers applies sliding_window only where use_sliding_window is not false and layer_types says so. */
START_TEST(test_mha_windows_follow_use_sliding_window_and_layer_types)
{
    kvl_model m = parsed("{" MHA_HF ", \"sliding_window\": 4096, \"use_sliding_window\": false}");
    ck_assert_uint_eq(m.window, 0);
    kvl_model_free(&m);
    m = parsed("{" MHA_HF ", \"sliding_window\": 4096, \"layer_types\": [\"full_attention\", \"full_attention\"]}");
    ck_assert_uint_eq(m.window, 0);
    kvl_model_free(&m);
    m = parsed("{" MHA_HF ", \"sliding_window\": 128, \"layer_types\": [\"sliding_attention\", \"sliding_attention\"]}");
    ck_assert_uint_eq(m.window, 128);
    kvl_model_free(&m);
    expect_refused("{" MHA_HF ", \"sliding_window\": 128, \"layer_types\": [\"sliding_attention\", \"full_attention\"]}",
                   "mixes 1 sliding-window layers with 1 full ones");
    expect_refused("{" MHA_HF ", \"sliding_window\": 128, \"window_size\": 0}",
                   "fields \"sliding_window\" (128) and \"window_size\" (0) spell one setting and disagree");
    expect_refused("{" MHA_HF ", \"num_key_value_heads\": 4, \"n_kv_heads\": 2}",
                   "\"num_key_value_heads\" (4) and \"n_kv_heads\" (2)");
    expect_refused("{" MHA_HF ", \"rope_interleave\": true}", "field \"rope_interleave\" is true");
}
END_TEST

#define V4_HF "\"hidden_size\": 64, \"num_hidden_layers\": 5, \"num_attention_heads\": 4, \"head_dim\": 32," \
              " \"q_lora_rank\": 32, \"o_groups\": 2, \"o_lora_rank\": 16, \"sliding_window\": 8, \"index_n_heads\": 2," \
              " \"index_head_dim\": 16, \"index_topk\": 2, \"compress_rope_theta\": 160000"

/* transformers' DeepseekV4Config without layer_types: two HCA layers, then CSA on odd layers, HCA on
 * even ones; partial_rotary_factor gives the rotary width when qk_rope_head_dim is left out. */
START_TEST(test_v4_without_layer_types_takes_transformers_default_map)
{
    kvl_model m = parsed("{" V4_HF ", \"partial_rotary_factor\": 0.25, \"compress_rates\": "
                         "{\"compressed_sparse_attention\": 4, \"heavily_compressed_attention\": 16}}");
    ck_assert_int_eq(m.generation, KVL_GEN_V4);
    ck_assert_uint_eq(m.qk_rope_head_dim, 8);
    const kvl_layer_kind want[] = {KVL_LAYER_HCA, KVL_LAYER_HCA, KVL_LAYER_HCA, KVL_LAYER_CSA, KVL_LAYER_HCA};
    for (size_t l = 0; l < 5; l++) {
        ck_assert_int_eq(m.layers[l].kind, want[l]);
        ck_assert_uint_eq(m.layers[l].compress_ratio, want[l] == KVL_LAYER_CSA ? 4 : 16);
    }
    kvl_model_free(&m);
    expect_refused("{" V4_HF ", \"qk_rope_head_dim\": 8, \"partial_rotary_factor\": 0.5, \"compress_rates\": {}, \"layer_types\": "
                   "[\"sliding_attention\", \"sliding_attention\", \"sliding_attention\", \"sliding_attention\", "
                   "\"sliding_attention\"]}", "\"partial_rotary_factor\" (0.5) rotates 16 of the 32 head channels");
    expect_refused("{" V4_HF ", \"qk_rope_head_dim\": 8, \"compress_rates\": {\"full_attention\": 2}}",
                   "field \"compress_rates.full_attention\"");
    expect_refused("{" V4_HF ", \"qk_rope_head_dim\": 8, \"compress_rates\": {}, \"rope_parameters\": {\"main\": {\"rope_type\": \"default\","
                   " \"rope_theta\": 10000}, \"compress\": {\"rope_type\": \"yarn\", \"rope_theta\": 160000, \"factor\": 16,"
                   " \"original_max_position_embeddings\": 65536}}}",
                   "field \"rope_parameters.compress.attention_factor\" is 1.27726");
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_config");
    TCase *real = tcase_create("real_configs");
    tcase_add_test(real, test_llm67b_is_gqa8_with_95_layers);
    tcase_add_test(real, test_v3_is_mla_with_yarn_from_the_config);
    tcase_add_test(real, test_v32_is_dsa_with_its_indexer);
    tcase_add_test(real, test_v4_flash_has_2_window_21_csa_20_hca_layers);
    tcase_add_test(real, test_v41_flash_layer_modes_follow_the_source_lists);
    tcase_add_test(real, test_hf_spelling_matches_deepseek_spelling);
    suite_add_tcase(s, real);
    TCase *bad = tcase_create("bad_configs");
    tcase_add_test(bad, test_the_toy_v41_config_is_valid);
    tcase_add_test(bad, test_misspelled_field_is_named_with_its_likely_meaning);
    tcase_add_test(bad, test_wrong_type_is_named);
    tcase_add_test(bad, test_out_of_range_sizes_are_named);
    tcase_add_test(bad, test_source_layers_out_of_range_or_unsorted_are_named);
    tcase_add_test(bad, test_compress_ratios_of_the_wrong_length_are_named);
    tcase_add_test(bad, test_a_head_dim_the_layout_cannot_split_is_named);
    tcase_add_test(bad, test_malformed_json_is_refused_with_its_position);
    tcase_add_test(bad, test_mha_heads_that_do_not_divide_the_width_are_named);
    tcase_add_test(bad, test_annotation_fields_are_checked);
    tcase_add_test(bad, test_missing_and_empty_files_are_named);
    suite_add_tcase(s, bad);
    TCase *sp = tcase_create("spellings");
    tcase_add_test(sp, test_deepseek_spelling_without_rotary_fields_takes_the_inference_defaults);
    tcase_add_test(sp, test_transformers_5_rope_parameters_give_mha_its_theta);
    tcase_add_test(sp, test_mha_windows_follow_use_sliding_window_and_layer_types);
    tcase_add_test(sp, test_v4_without_layer_types_takes_transformers_default_map);
    suite_add_tcase(s, sp);
    return s;
}
