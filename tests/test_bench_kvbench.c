/* kvbench's command line, without running a measurement: the groups it lists, and that a missing or
 * unwritable --out folder and an unknown group stop it before anything is measured (exit 2 for what
 * the command line gets wrong, 1 for a folder it cannot write). `make bench` runs the measurements. */
#include "common.h"

#include <string.h>

#define CAP 8192

static int run(const char *cmdline, char *out, char *err)
{
    return kvl_run(cmdline, NULL, out, CAP, err, CAP);
}

START_TEST(test_help_lists_every_group)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(run("kvbench --help", out, err), 0);
    /* each group on its own line ("  NAME  about"): a name inside another's description does not count */
    const char *groups[] = {"\n  ceilings ", "\n  formats ", "\n  decode ", "\n  peer ", "\n  v41 ",
                            "\n  native ",   "\n  prefill ", "\n  recheck ", "--out DIR"};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        ck_assert_msg(strstr(out, groups[i]), "kvbench --help does not mention %s:\n%s", groups[i], out);
}
END_TEST

START_TEST(test_out_without_a_folder_exits_2)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(run("kvbench --out", out, err), 2);
    ck_assert_msg(strstr(err, "'--out' (argument 1): needs a folder"), "stderr: %s", err);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_unwritable_out_folder_exits_1_before_measuring)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(run("kvbench --out /nonexistent/kvbench ceilings", out, err), 1);
    ck_assert_msg(strstr(err, "cannot write /nonexistent/kvbench/results.md"), "stderr: %s", err);
    ck_assert_msg(!strstr(out, "ceilings "), "measured before failing:\n%s", out);
}
END_TEST

START_TEST(test_unknown_group_after_out_exits_2)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(run("kvbench --out /tmp decod", out, err), 2);
    ck_assert_msg(strstr(err, "'decod' (argument 3): unknown group"), "stderr: %s", err);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("bench_kvbench");
    TCase *tc = tcase_create("command_line");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_help_lists_every_group);
    tcase_add_test(tc, test_out_without_a_folder_exits_2);
    tcase_add_test(tc, test_unwritable_out_folder_exits_1_before_measuring);
    tcase_add_test(tc, test_unknown_group_after_out_exits_2);
    suite_add_tcase(s, tc);
    return s;
}
