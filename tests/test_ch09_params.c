/* Chapter 9: a model's weights counted from its config. The counts equal the totals the model cards
 * and papers publish, to the digits they publish; the attention part equals the tensors a transformers
 * checkpoint of the same config holds; the bytes follow each storage format's block layout. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "common.h"
#include "config.h"
#include "params.h"
#include "safetensors.h"
#include "status.h"

static kvl_params params_of(kvl_model *m, const char *rel)
{
    ck_assert_msg(kvl_model_load(m, kvl_path(rel)) == KVL_OK, "%s", kvl_error());
    kvl_params p;
    ck_assert_msg(kvl_params_of(&p, m) == KVL_OK, "%s", kvl_error());
    return p;
}

/* A published count, in billions, and half a unit of its last digit: what "671B" can mean. */
typedef struct {
    const char *config, *source;
    double total, total_half_unit, active, active_half_unit;   /* active 0: not published */
} published;

START_TEST(test_parameter_counts_equal_the_published_totals)
{
    static const published cases[] = {
        {"ref/configs/deepseek-llm-67b.json", "DeepSeek LLM paper: 67B", 67, 0.5, 0, 0},
        {"ref/configs/deepseek-v2.json", "DeepSeek-V2 paper: 236B total, 21B activated", 236, 0.5, 21, 0.5},
        {"ref/configs/deepseek-v3.json", "DeepSeek-V3 README_WEIGHTS: 671B, 36.6B activated with the head", 671, 0.5,
         36.6, 0.05},
        {"ref/configs/deepseek-v4-flash.json", "DeepSeek-V4-Flash model card: 284B total, 13B activated", 284, 0.5, 13,
         0.5},
        {"ref/configs/deepseek-v4.1-flash.json", "DeepSeek-V4.1-Flash model card: 552B backbone, 16B in decode", 552,
         0.5, 16, 0.5},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        kvl_model m;
        const kvl_params p = params_of(&m, cases[i].config);
        const double total = p.backbone / 1e9, active = p.active / 1e9;
        ck_assert_msg(fabs(total - cases[i].total) <= cases[i].total_half_unit, "%s: counted %.3fB (%s)",
                      cases[i].config, total, cases[i].source);
        ck_assert_msg(!cases[i].active || fabs(active - cases[i].active) <= cases[i].active_half_unit,
                      "%s: counted %.3fB active (%s)", cases[i].config, active, cases[i].source);
        kvl_model_free(&m);
    }
}
END_TEST

/* V3.2-Exp is V3 with an indexer in every layer: W_IQ [HI·DI][Dq'], W_IK [DI][d], a LayerNorm of DI
 * (gain and bias) and the head weights [HI][d]. */
START_TEST(test_v32_adds_exactly_its_indexer_to_v3)
{
    kvl_model v3, v32;
    const kvl_params a = params_of(&v3, "ref/configs/deepseek-v3.json");
    const kvl_params b = params_of(&v32, "ref/configs/deepseek-v3.2-exp.json");
    const uint64_t HI = v32.index_n_heads, DI = v32.index_head_dim, d = v32.d, Dq = v32.q_lora_rank;
    const uint64_t indexer = HI * DI * Dq + DI * d + 2 * DI + HI * d;
    ck_assert_uint_eq(b.backbone - a.backbone, v32.n_layers * indexer);
    ck_assert_uint_eq(b.attention - a.attention, v32.n_layers * indexer);
    kvl_model_free(&v3);
    kvl_model_free(&v32);
}
END_TEST

/* The parts by their definitions: the 67B's GQA layers and SwiGLU FFN; V3's three dense layers, 58 MoE
 * layers of 256 + 1 experts and routers with a bias each. */
START_TEST(test_the_parts_follow_their_definitions)
{
    kvl_model m;
    kvl_params p = params_of(&m, "ref/configs/deepseek-llm-67b.json");
    uint64_t d = m.d, L = m.n_layers, Dh = m.d / m.n_heads;
    ck_assert_uint_eq(p.attention, L * (2 * d * d + 2 * d * m.n_kv_heads * Dh));
    ck_assert_uint_eq(p.dense_ffn, L * 3 * d * m.ffn.inter_dim);
    ck_assert_uint_eq(p.embedding + p.head, 2 * (uint64_t)m.ffn.vocab_size * d);
    ck_assert_uint_eq(p.routed_experts + p.shared_experts + p.routers, 0);
    kvl_model_free(&m);

    p = params_of(&m, "ref/configs/deepseek-v3.json");
    d = m.d;
    const uint64_t moe_layers = m.n_layers - 3, expert = 3 * d * 2048;
    ck_assert_uint_eq(m.ffn.n_dense_layers, 3);
    ck_assert_uint_eq(p.dense_ffn, 3 * 3 * d * 18432);
    ck_assert_uint_eq(p.routed_experts, moe_layers * 256 * expert);
    ck_assert_uint_eq(p.shared_experts, moe_layers * expert);
    ck_assert_uint_eq(p.routers, moe_layers * 256 * (d + 1));
    ck_assert_uint_eq(p.active, p.backbone - p.embedding - p.routed_experts + moe_layers * 8 * expert);
    kvl_model_free(&m);
}
END_TEST

/* An MTP module is one more layer shaped as the last, a 2d → d projection and two norm gains: V3 with
 * "n_mtp_layers": 1 (the field DeepSeek's config_671B.json leaves out). Its README_WEIGHTS gives
 * 11.5B unique parameters; the shapes give 11.61B, 0.10B of it the projection (chapter 9). */
START_TEST(test_an_mtp_module_is_one_layer_and_its_projection)
{
    char *text = kvl_read_text(kvl_path("ref/configs/deepseek-v3.json"));
    ck_assert(text && text[0] == '{');
    char path[] = "/tmp/kvl-mtp-XXXXXX.json";
    const int fd = mkstemps(path, 5);
    ck_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    ck_assert(f && fprintf(f, "{\"n_mtp_layers\": 1, %s", text + 1) > 0 && fclose(f) == 0);
    free(text);
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, path) == KVL_OK, "%s", kvl_error());
    remove(path);
    kvl_params p;
    ck_assert(kvl_params_of(&p, &m) == KVL_OK);
    const uint64_t d = m.d, expert = 3 * d * m.ffn.moe_inter_dim, E = m.ffn.n_routed_experts;
    const uint64_t layer = p.attention / m.n_layers + 2 * d + (E + 1) * expert + E * (d + 1);
    ck_assert_uint_eq(p.attention % m.n_layers, 0);   /* every V3 layer's attention is alike */
    ck_assert_uint_eq(p.mtp, layer + 2 * d * d + 2 * d);
    kvl_model v3;
    ck_assert_uint_eq(p.backbone, params_of(&v3, "ref/configs/deepseek-v3.json").backbone);
    kvl_model_free(&v3);
    kvl_model_free(&m);
}
END_TEST

/* Every transformers checkpoint under tests/reference/ecosystem/ holds the attention of its config and
 * nothing else under model.layers. (layers. in DeepSeek's spelling): their elements are the count. */
START_TEST(test_attention_counts_equal_a_transformers_checkpoints_tensors)
{
    DIR *dir = opendir(kvl_path("tests/reference/ecosystem"));
    ck_assert(dir != NULL);
    size_t checked = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        if (e->d_name[0] == '.') continue;
        char cfg[256], st[256];
        snprintf(cfg, sizeof cfg, "tests/reference/ecosystem/%.200s/config.json", e->d_name);
        snprintf(st, sizeof st, "tests/reference/ecosystem/%.200s/model.safetensors", e->d_name);
        kvl_st_file f;
        if (kvl_st_open(&f, kvl_path(st)) != KVL_OK) continue;   /* a config-only case */
        kvl_model m;
        const kvl_params p = params_of(&m, cfg);
        uint64_t held = 0;
        for (size_t i = 0; i < f.n_tensors; i++)
            if (!strncmp(f.tensors[i].name, "model.layers.", 13) || !strncmp(f.tensors[i].name, "layers.", 7))
                held += f.tensors[i].n_elements;
        ck_assert_msg(p.attention == held, "%s: counted %llu attention weights, the checkpoint holds %llu", e->d_name,
                      (unsigned long long)p.attention, (unsigned long long)held);
        checked++;
        kvl_model_free(&m);
        kvl_st_close(&f);
    }
    closedir(dir);
    ck_assert_uint_ge(checked, 5);
}
END_TEST

/* bf16: 2 bytes a weight. FP8: a byte each and a scale per 128 × 128 block, float32 or E8M0. MXFP4
 * experts: a block of 32 is 16 bytes of codes and one scale byte. */
START_TEST(test_weight_bytes_follow_each_formats_blocks)
{
    kvl_model m;
    const kvl_params p = params_of(&m, "ref/configs/deepseek-v4.1-flash.json");
    const double kept = (double)(p.embedding + p.head + p.norms + p.routers);
    const double linear = (double)(p.attention + p.dense_ffn), experts = (double)(p.routed_experts + p.shared_experts);
    ck_assert(kvl_params_bytes(&p, KVL_WEIGHTS_BF16, KVL_WEIGHTS_BF16, 0) == 2 * (kept + linear + experts));
    const double fp8 = kvl_params_bytes(&p, KVL_WEIGHTS_FP8, KVL_WEIGHTS_FP8, 0);
    const double fp8_e8m0 = kvl_params_bytes(&p, KVL_WEIGHTS_FP8, KVL_WEIGHTS_FP8, 1);
    ck_assert(fabs(fp8 - (2 * kept + (linear + experts) * (1 + 4.0 / 16384))) < 1e-6 * fp8);
    ck_assert(fabs(fp8 - fp8_e8m0 - 3 * (linear + experts) / 16384) < 1e-6 * fp8);
    const double fp4 = kvl_params_bytes(&p, KVL_WEIGHTS_FP8, KVL_WEIGHTS_FP4, 1);
    const double block = KVF_MX_BLOCK / 2 + 1;   /* bytes of 32 weights */
    ck_assert(fabs(fp4 - (2 * kept + linear * (1 + 1.0 / 16384) + experts / KVF_MX_BLOCK * block)) < 1e-6 * fp4);
    ck_assert_int_eq(m.ffn.linear, KVL_WEIGHTS_FP8);
    ck_assert_int_eq(m.ffn.experts, KVL_WEIGHTS_FP4);
    kvl_model_free(&m);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch09_params");
    TCase *tc = tcase_create("counts");
    tcase_add_test(tc, test_parameter_counts_equal_the_published_totals);
    tcase_add_test(tc, test_v32_adds_exactly_its_indexer_to_v3);
    tcase_add_test(tc, test_the_parts_follow_their_definitions);
    tcase_add_test(tc, test_an_mtp_module_is_one_layer_and_its_projection);
    tcase_add_test(tc, test_attention_counts_equal_a_transformers_checkpoints_tensors);
    tcase_add_test(tc, test_weight_bytes_follow_each_formats_blocks);
    suite_add_tcase(s, tc);
    return s;
}
