/* chapters/01_mha/cost: the program prints the four levers for DeepSeek LLM 67B and Llama-3-70B with
 * the totals derived from their configs (389,120 B and 327,680 B = 320 KiB per token), its
 * live cache checks all agree, and it handles its arguments as every chapter program must. */
#include "common.h"
#include "config.h"
#include "grouped.h"
#include "status.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define CAP 16384

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

START_TEST(test_cost_derives_deepseek_67b_and_llama_3_70b)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(kvl_run("cost", NULL, out, CAP, err, CAP), 0);
    ck_assert_msg(strstr(out, "95 layers = 389,120 B per token = 380 KiB"), "%s", out);
    ck_assert_msg(strstr(out, "80 layers = 327,680 B per token = 320 KiB"), "%s", out);
    ck_assert_msg(strstr(out, "2,048         2        4,096       4,096        389,120"),
                  "67B GQA-8: 2,048 elements of 2 B, 4,096 B/layer computed and live\n%s", out);
    ck_assert_msg(strstr(out, "3,112,960"), "67B as MHA: 95·32,768\n%s", out);
    ck_assert_msg(strstr(out, "40,960"), "Llama-3-70B as MQA: 80·512\n%s", out);
    ck_assert_uint_eq(count(out, "match"), 6);
    ck_assert_ptr_null(strstr(out, "MISMATCH"));
    ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(test_cost_live_check_follows_tokens)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(kvl_run("cost --tokens 7", NULL, out, CAP, err, CAP), 0);
    /* 4 layers · 7 tokens · 2 · 2 KV heads · 16 · 2 B */
    ck_assert_msg(strstr(out, "4 layers x 7 tokens x 2 x 2 x 16 x 2 B =    3,584 B   live    3,584 B   match"), "%s", out);
}
END_TEST

START_TEST(test_cost_help_and_bad_arguments)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(kvl_run("cost --help", NULL, out, CAP, err, CAP), 0);
    ck_assert_ptr_eq(strstr(out, "usage: cost"), out);
    static const char *const bad[] = {"cost --tokens 0", "cost --tokens 12x", "cost --tokens", "cost --what",
                                      "cost --config"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(kvl_run(bad[i], NULL, out, CAP, err, CAP), 2);
        ck_assert_msg(count(err, "\n") == 1 && strncmp(err, "cost: ", 6) == 0, "%s: stderr \"%s\"", bad[i], err);
        ck_assert_str_eq(out, "");
    }
}
END_TEST

/* A config of another generation is refused with its file named, not priced as MHA. */
START_TEST(test_cost_refuses_an_mla_config)
{
    static char out[CAP], err[CAP], cmd[4096];
    snprintf(cmd, sizeof cmd, "cost --config '%s'", kvl_path("ref/configs/deepseek-v3.json"));
    ck_assert_int_eq(kvl_run(cmd, NULL, out, CAP, err, CAP), 2);
    ck_assert_msg(strstr(err, "deepseek-v3.json") && strstr(err, "MLA"), "%s", err);
    ck_assert_msg(out[0] == '\0', "a refused config still printed: %s", out);
}
END_TEST

/* nb_01's MHA at DeepSeek-V2's size, against 2·H·Dh·L from V2's config (the V2 paper's d_h of 128 for
 * keys and values) at bf16's 2 bytes. */
START_TEST(test_notebook_prices_mha_at_v2s_size_by_the_definition)
{
    kvl_model v2;
    ck_assert_msg(kvl_model_load(&v2, kvl_path("ref/configs/deepseek-v2.json")) == KVL_OK, "%s", kvl_error());
    const double elements = 2.0 * (double)v2.n_heads * (double)v2.qk_nope_head_dim * (double)v2.n_layers;
    char a[160], b[160];
    snprintf(a, sizeof a, "x %zu layers = %s elements per token", v2.n_layers, KVL_GROUPED(elements));
    snprintf(b, sizeof b, "in bf16: %s B = %.2f MB (%.2f MiB) per token", KVL_GROUPED(2 * elements), 2 * elements / 1e6,
             2 * elements / 1048576.0);
    kvl_model_free(&v2);
    const char *const want[] = {a, b};
    kvl_expect_prints("nb_01", want, 2, "MHA at DeepSeek-V2");
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch01_cost");
    TCase *tc = tcase_create("program");
    tcase_add_test(tc, test_cost_derives_deepseek_67b_and_llama_3_70b);
    tcase_add_test(tc, test_cost_live_check_follows_tokens);
    tcase_add_test(tc, test_cost_help_and_bad_arguments);
    tcase_add_test(tc, test_cost_refuses_an_mla_config);
    tcase_add_test(tc, test_notebook_prices_mha_at_v2s_size_by_the_definition);
    suite_add_tcase(s, tc);
    return s;
}
