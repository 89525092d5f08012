/* The config loader: every real config loads with the layer map its generation implies, both key
 * spellings read the same model, and each class of bad config gets its own error naming the file
 * and the field. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "params.h"
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
                   "field \"n_kv_heads\" is not one DeepSeek's inference code or transformers defines");
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


/* ---- model types: each read as transformers' configuration class for it reads it ------------------ */

#define TYPED(type, rest) "{\"model_type\": \"" type "\", " MHA_HF rest "}"

/* configuration_falcon.py: num_key_value_heads = num_kv_heads if new_decoder_architecture or not multi_query,
 * else 1; multi_query defaults to true, so a Falcon file that says nothing is multi-query. */
START_TEST(test_falcon_kv_heads_follow_multi_query_and_new_decoder_architecture)
{
    kvl_model m = parsed(TYPED("falcon", ""));
    ck_assert_uint_eq(m.n_kv_heads, 1);
    ck_assert(m.ffn.tied_embeddings);
    kvl_model_free(&m);
    m = parsed(TYPED("falcon", ", \"multi_query\": false"));
    ck_assert_uint_eq(m.n_kv_heads, 4);
    kvl_model_free(&m);
    m = parsed(TYPED("falcon", ", \"new_decoder_architecture\": true, \"num_kv_heads\": 2"));
    ck_assert_uint_eq(m.n_kv_heads, 2);
    kvl_model_free(&m);
    m = parsed(TYPED("falcon", ", \"multi_query\": true, \"num_kv_heads\": 2"));
    ck_assert_uint_eq(m.n_kv_heads, 1);
    kvl_model_free(&m);
    expect_refused(TYPED("falcon", ", \"num_key_value_heads\": 4"),
                   "\"num_key_value_heads\" (4) disagrees with the 1 KV heads Falcon derives");
    expect_refused(TYPED("falcon", ", \"head_dim\": 32"), "field \"head_dim\" is not one transformers' \"falcon\" configuration");
}
END_TEST

/* configuration_qwen2.py and _qwen3.py: no window unless use_sliding_window (default false); then the layers
 * i >= max_window_layers (default 28) slide. Qwen3's head_dim defaults to 128, Qwen2's to hidden_size/heads. */
START_TEST(test_qwen_windows_follow_use_sliding_window_and_max_window_layers)
{
    kvl_model m = parsed(TYPED("qwen2", ", \"num_key_value_heads\": 2, \"sliding_window\": 32, \"max_window_layers\": 0"));
    ck_assert_uint_eq(m.window, 0);
    ck_assert_uint_eq(m.head_dim, 16);
    kvl_model_free(&m);
    m = parsed(TYPED("qwen2", ", \"num_key_value_heads\": 2, \"sliding_window\": 32, \"use_sliding_window\": true"));
    ck_assert_uint_eq(m.window, 0);   /* 2 layers, all below max_window_layers 28 */
    kvl_model_free(&m);
    m = parsed(TYPED("qwen2", ", \"num_key_value_heads\": 2, \"sliding_window\": 32, \"use_sliding_window\": true, \"max_window_layers\": 2"));
    ck_assert_uint_eq(m.window, 0);
    kvl_model_free(&m);
    m = parsed(TYPED("qwen3", ", \"num_key_value_heads\": 2, \"sliding_window\": 32, \"use_sliding_window\": true, \"max_window_layers\": 0"));
    ck_assert_uint_eq(m.window, 32);
    ck_assert_uint_eq(m.head_dim, 128);
    kvl_model_free(&m);
    expect_refused(TYPED("qwen2", ", \"num_key_value_heads\": 2, \"sliding_window\": 32, \"use_sliding_window\": true, \"max_window_layers\": 1"),
                   "\"max_window_layers\" (1) slides layers 1 to 1 only");
}
END_TEST

/* Mistral and Mixtral slide every layer by sliding_window, Mistral's 4096 when the file has none; Llama and
 * Gemma have no window field at all, so a window field there (unless null) is refused rather than read or
 * dropped. */
START_TEST(test_window_fields_follow_the_model_type)
{
    kvl_model m = parsed(TYPED("mistral", ", \"num_key_value_heads\": 2"));
    ck_assert_uint_eq(m.window, 4096);
    kvl_model_free(&m);
    m = parsed(TYPED("mistral", ", \"num_key_value_heads\": 2, \"sliding_window\": null"));
    ck_assert_uint_eq(m.window, 0);
    kvl_model_free(&m);
    expect_refused(TYPED("mistral", ", \"num_key_value_heads\": 2, \"use_sliding_window\": false"),
                   "field \"use_sliding_window\" is not one transformers' \"mistral\" configuration defines");
    m = parsed(TYPED("mixtral", ", \"num_key_value_heads\": 2"));
    ck_assert_uint_eq(m.window, 0);
    kvl_model_free(&m);
    m = parsed(TYPED("llama", ", \"sliding_window\": null"));
    ck_assert_uint_eq(m.window, 0);
    kvl_model_free(&m);
    expect_refused(TYPED("llama", ", \"sliding_window\": 4096"),
                   "field \"sliding_window\" is not one transformers' \"llama\" configuration defines");
    expect_refused(TYPED("mistral", ", \"num_key_value_heads\": 2, \"layer_types\": [\"sliding_attention\", \"full_attention\"]"),
                   "field \"layer_types\" is not one transformers' \"mistral\" configuration defines");
    m = parsed(TYPED("gemma", ", \"num_key_value_heads\": 1"));
    ck_assert_uint_eq(m.head_dim, 256);
    ck_assert(m.ffn.tied_embeddings);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_model_types_outside_the_list_are_refused_by_name)
{
    expect_refused(TYPED("gemma2", ", \"sliding_window_pattern\": 2"),
                   "field \"model_type\" is \"gemma2\", which alternates sliding-window and full layers");
    expect_refused(TYPED("bamba", ", \"attn_layer_indices\": [1]"), "has state-space layers without attention");
    expect_refused(TYPED("nemotron_h", ", \"hybrid_override_pattern\": \"M*\""), "has state-space layers without attention");
    expect_refused(TYPED("gpt2", ""), "field \"model_type\" is \"gpt2\", not one whose meaning this project holds to");
    expect_refused("{\"model_type\": 3, " MHA_HF "}", "field \"model_type\" must be a string, got 3");
    char known[256];
    kvl_model_types(known, sizeof known);
    ck_assert_msg(strstr(known, "llama, mistral") && strstr(known, "deepseek_v4"), "%s", known);
}
END_TEST

/* A field of another generation than the model type's class reads: transformers would ignore it (or miss it). */
START_TEST(test_fields_of_another_generation_under_a_model_type_are_refused)
{
    expect_refused("{\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                   " \"kv_lora_rank\": 24, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 12,"
                   " \"index_topk\": 4, \"index_n_heads\": 2, \"index_head_dim\": 16}",
                   "field \"index_topk\" is present, but model_type \"deepseek_v3\" is a MLA model: its code ignores that field");
    expect_refused(TYPED("llama", ", \"kv_lora_rank\": 16"), "field \"kv_lora_rank\" is present");
    expect_refused("{\"model_type\": \"deepseek_v32\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4,"
                   " \"kv_lora_rank\": 24, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 12}",
                   "field \"index_topk\" is missing, but model_type \"deepseek_v32\" is a DSA model: its code needs it");
    expect_refused("{\"model_type\": \"deepseek_v3\", " MLA_DS "}", "field \"dim\" is DeepSeek's inference spelling");
}
END_TEST

#define MLA_HF "\"model_type\": \"deepseek_v3\", \"hidden_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 4," \
               " \"kv_lora_rank\": 24, \"qk_nope_head_dim\": 16, \"qk_rope_head_dim\": 8, \"v_head_dim\": 12"
#define YARN4 "\"rope_type\": \"yarn\", \"factor\": 4"

/* YaRN's ramp runs from beta_fast's dimension up to beta_slow's: both spellings refuse an empty or reversed one. */
START_TEST(test_yarn_betas_that_are_equal_or_swapped_are_refused)
{
    expect_refused("{" MLA_HF ", \"rope_scaling\": {" YARN4 ", \"original_max_position_embeddings\": 2048, \"beta_fast\": 1,"
                   " \"beta_slow\": 32}}", "\"rope_scaling.beta_fast\" (1) and \"rope_scaling.beta_slow\" (32): YaRN needs");
    expect_refused("{" MLA_HF ", \"rope_scaling\": {" YARN4 ", \"original_max_position_embeddings\": 2048, \"beta_fast\": 8,"
                   " \"beta_slow\": 8}}", "YaRN needs beta_fast > beta_slow");
    expect_refused("{" MLA_DS ", \"beta_fast\": 2, \"beta_slow\": 2}", "\"beta_fast\" (2) and \"beta_slow\" (2)");
    kvl_model m = parsed("{" MLA_DS ", \"beta_fast\": 2, \"beta_slow\": 1}");
    ck_assert_double_eq(m.rope.beta_fast, 2);
    kvl_model_free(&m);
}
END_TEST

/* transformers' standardize_rope_params: a top-level original_max_position_embeddings wins over the rotary
 * object's, and max_position_embeddings stands in where neither is given. Two values are refused here. */
START_TEST(test_yarn_original_context_is_read_from_one_place_only)
{
    kvl_model m = parsed("{" MLA_HF ", \"original_max_position_embeddings\": 1024, \"rope_scaling\": {" YARN4 "}}");
    ck_assert_double_eq(m.rope.original_len, 1024);
    kvl_model_free(&m);
    m = parsed("{" MLA_HF ", \"max_position_embeddings\": 8192, \"rope_scaling\": {" YARN4 "}}");
    ck_assert_double_eq(m.rope.original_len, 8192);
    kvl_model_free(&m);
    m = parsed("{" MLA_HF ", \"original_max_position_embeddings\": 1024, \"rope_scaling\": {" YARN4 ", "
               "\"original_max_position_embeddings\": 1024}}");
    ck_assert_double_eq(m.rope.original_len, 1024);
    kvl_model_free(&m);
    expect_refused("{" MLA_HF ", \"original_max_position_embeddings\": 4096, \"rope_scaling\": {" YARN4 ", "
                   "\"original_max_position_embeddings\": 2048}}",
                   "fields \"original_max_position_embeddings\" (4096) and \"rope_scaling.original_max_position_embeddings\" "
                   "(2048) spell one setting and disagree");
    expect_refused("{" MLA_HF ", \"rope_scaling\": {" YARN4 "}}", "missing field \"rope_scaling.original_max_position_embeddings\"");
}
END_TEST

/* What the parameter count and the weight reader compute with: FP8 blocks of 128 × 128, every layer after
 * the dense ones MoE. Anything else changes what serving prints, so it is refused. */
START_TEST(test_weight_blocks_and_moe_layer_frequencies_not_counted_are_refused)
{
    kvl_model m = parsed("{" MLA_DS ", \"moe_layer_freq\": 1, \"quantization_config\": {\"quant_method\": \"fp8\", "
                         "\"weight_block_size\": [128, 128], \"fmt\": \"e4m3\", \"expert_dtype\": \"fp4\"}}");
    ck_assert_int_eq(m.ffn.linear, KVL_WEIGHTS_FP8);
    ck_assert_int_eq(m.ffn.experts, KVL_WEIGHTS_FP4);
    kvl_model_free(&m);
    expect_refused("{" MLA_DS ", \"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [64, 128]}}",
                   "\"quantization_config.weight_block_size\" is [64,128]");
    expect_refused("{" MLA_DS ", \"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128, 1]}}",
                   "weight_block_size\" is [128,128,1]");
    expect_refused("{" MLA_DS ", \"quantization_config\": {\"quant_method\": \"fp8\", \"weight_block_size\": [128, 64]}}",
                   "weight_block_size\" is [128,64]");
    expect_refused("{" MLA_DS ", \"moe_layer_freq\": 2}", "field \"moe_layer_freq\" is 2");
    expect_refused("{" MLA_DS ", \"expert_dtype\": \"fp8\", \"quantization_config\": {\"quant_method\": \"fp8\", "
                   "\"expert_dtype\": \"fp4\"}}", "\"expert_dtype\" (fp8) and \"quantization_config.expert_dtype\" (fp4)");
}
END_TEST

/* Mixtral's FFN is num_local_experts SwiGLU experts of intermediate_size in every layer; Falcon's a two-matrix
 * MLP of ffn_hidden_size (4·hidden_size by default). */
START_TEST(test_mixtral_experts_and_falcon_mlp_are_counted_as_their_code_builds_them)
{
    kvl_model m = parsed(TYPED("mixtral", ", \"num_key_value_heads\": 2, \"intermediate_size\": 96, \"num_local_experts\": 8,"
                               " \"num_experts_per_tok\": 2"));
    kvl_params p;
    ck_assert_int_eq(kvl_params_of(&p, &m), KVL_OK);
    ck_assert_uint_eq(p.dense_ffn, 0);
    ck_assert_uint_eq(p.routed_experts, 2u * 8 * 3 * 64 * 96);
    ck_assert_uint_eq(m.ffn.n_activated_experts, 2);
    kvl_model_free(&m);
    m = parsed(TYPED("falcon", ""));
    ck_assert_int_eq(kvl_params_of(&p, &m), KVL_OK);
    ck_assert_uint_eq(p.dense_ffn, 2u * 2 * 64 * (4 * 64));
    ck_assert_uint_eq(p.routed_experts, 0);
    kvl_model_free(&m);
}
END_TEST


/* Biases as transformers' modeling files build them: Llama's q, k, v and o under attention_bias, Qwen2's q, k
 * and v always, V3's q_a_proj, kv_a_proj_with_mqa and o_proj under attention_bias; per layer, on top of the
 * weights. */
static uint64_t attention_of(const char *json)
{
    kvl_model m = parsed(json);
    kvl_params p;
    ck_assert_int_eq(kvl_params_of(&p, &m), KVL_OK);
    kvl_model_free(&m);
    return p.attention;
}

START_TEST(test_attention_biases_are_counted_where_the_modeling_file_builds_them)
{
    const uint64_t L = 2, H = 4, Hkv = 2, Dh = 16, d = 64;
    const uint64_t plain = attention_of(TYPED("llama", ", \"num_key_value_heads\": 2"));
    ck_assert_uint_eq(attention_of(TYPED("llama", ", \"num_key_value_heads\": 2, \"attention_bias\": true")) - plain,
                      L * ((H + 2 * Hkv) * Dh + d));
    ck_assert_uint_eq(attention_of(TYPED("qwen2", ", \"num_key_value_heads\": 2")) - plain, L * (H + 2 * Hkv) * Dh);
    const uint64_t mla = attention_of("{" MLA_HF ", \"q_lora_rank\": 32}");
    ck_assert_uint_eq(attention_of("{" MLA_HF ", \"q_lora_rank\": 32, \"attention_bias\": true}") - mla,
                      1 * (32 + 24 + 8 + d));
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
    TCase *types = tcase_create("model_types");
    tcase_add_test(types, test_falcon_kv_heads_follow_multi_query_and_new_decoder_architecture);
    tcase_add_test(types, test_qwen_windows_follow_use_sliding_window_and_max_window_layers);
    tcase_add_test(types, test_window_fields_follow_the_model_type);
    tcase_add_test(types, test_model_types_outside_the_list_are_refused_by_name);
    tcase_add_test(types, test_fields_of_another_generation_under_a_model_type_are_refused);
    tcase_add_test(types, test_yarn_betas_that_are_equal_or_swapped_are_refused);
    tcase_add_test(types, test_yarn_original_context_is_read_from_one_place_only);
    tcase_add_test(types, test_weight_blocks_and_moe_layer_frequencies_not_counted_are_refused);
    tcase_add_test(types, test_mixtral_experts_and_falcon_mlp_are_counted_as_their_code_builds_them);
    tcase_add_test(types, test_attention_biases_are_counted_where_the_modeling_file_builds_them);
    suite_add_tcase(s, sp);
    suite_add_tcase(s, types);
    return s;
}
