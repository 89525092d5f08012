/* chapters/03_swa/swa_reach: the measured reach of a toy windowed stack equals L·(W−1) exactly (every
 * output beyond it bit-identical), and the Mistral 7B figures come out of its config: an 8× smaller
 * cache at 32K, 32·4095 = 131,040 positions of reach against the lineage write-up's 32·4096 = 131,072. */
#include "common.h"
#include "config.h"
#include "grouped.h"
#include "status.h"

#include <stdio.h>
#include <string.h>

#define CAP 16384

START_TEST(test_reach_default_run)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(kvl_run("swa_reach", NULL, out, CAP, err, CAP), 0);
    ck_assert_msg(strstr(out, "theoretical reach L*(W-1) = 4*7 = 28; last output that moved: 28"), "%s", out);
    ck_assert_msg(strstr(out, "15 of 15 rows bit-identical"), "%s", out);
    ck_assert_msg(strstr(out, "8x smaller"), "%s", out);
    ck_assert_msg(strstr(out, "L*(W-1) = 32*4095 = 131,040 positions"), "%s", out);
    ck_assert_msg(strstr(out, "L*W     = 32*4096 = 131,072 positions"), "%s", out);
    ck_assert_msg(strstr(out, "full 4096 MiB, windowed 512 MiB"), "%s", out);
    ck_assert_msg(strstr(out, "(as the formula says)"), "%s", out);
    ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(test_reach_follows_layers_and_window)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(kvl_run("swa_reach --layers 2 --window 5 --seed 11", NULL, out, CAP, err, CAP), 0);
    ck_assert_msg(strstr(out, "theoretical reach L*(W-1) = 2*4 = 8; last output that moved: 8"), "%s", out);
    ck_assert_msg(strstr(out, "9 of 9 rows bit-identical"), "%s", out);
}
END_TEST

START_TEST(test_reach_help_and_bad_arguments)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(kvl_run("swa_reach --help", NULL, out, CAP, err, CAP), 0);
    ck_assert_ptr_eq(strstr(out, "usage: swa_reach"), out);
    static const char *const bad[] = {"swa_reach --layers 0", "swa_reach --window 1", "swa_reach --window 65",
                                      "swa_reach --threshold 2", "swa_reach --seed -1", "swa_reach --layers",
                                      "swa_reach extra"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(kvl_run(bad[i], NULL, out, CAP, err, CAP), 2);
        size_t lines = 0;
        for (const char *p = err; *p; p++) lines += *p == '\n';
        ck_assert_msg(lines == 1 && strncmp(err, "swa_reach: ", 11) == 0, "%s: stderr \"%s\"", bad[i], err);
        ck_assert_str_eq(out, "");
    }
}
END_TEST

/* nb_03's V4.1 receptive field: the report's n_win·L/2, with W − 1 per hop, and the whole stack's
 * L·(W − 1), from V4.1-Flash's config. */
START_TEST(test_notebook_prints_v41s_field_by_the_definition)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4.1-flash.json")) == KVL_OK, "%s", kvl_error());
    const double L = (double)m.n_layers, W = (double)m.window;
    char a[200];
    snprintf(a, sizeof a, "n_win*L/2 = %s tokens (%s with W-1 per hop); the full stack L*(W-1) = %s", KVL_GROUPED(W * L / 2),
             KVL_GROUPED((W - 1) * L / 2), KVL_GROUPED((W - 1) * L));
    kvl_model_free(&m);
    const char *const want[] = {a};
    kvl_expect_prints("nb_03", want, 1, "n_win*L/2");
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch03_reach");
    TCase *tc = tcase_create("program");
    tcase_add_test(tc, test_reach_default_run);
    tcase_add_test(tc, test_reach_follows_layers_and_window);
    tcase_add_test(tc, test_reach_help_and_bad_arguments);
    tcase_add_test(tc, test_notebook_prints_v41s_field_by_the_definition);
    suite_add_tcase(s, tc);
    return s;
}
