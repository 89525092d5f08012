/* kvl_fail and kvl_error: the message a failure leaves, including a message built on the previous one. */
#include <string.h>

#include "common.h"
#include "status.h"

START_TEST(test_fail_returns_its_code_and_keeps_its_message)
{
    kvl_clear_error();
    ck_assert_str_eq(kvl_error(), "");
    ck_assert_int_eq(kvl_fail(KVL_EPARSE, "%s: field \"%s\" got %d", "a.json", "dim", -1), KVL_EPARSE);
    ck_assert_str_eq(kvl_error(), "a.json: field \"dim\" got -1");
}
END_TEST

START_TEST(test_fail_may_prefix_context_onto_the_current_message)
{
    kvl_fail(KVL_EINVAL, "inner %d", 7);
    kvl_fail(KVL_EINVAL, "outer: %s", kvl_error());
    ck_assert_str_eq(kvl_error(), "outer: inner 7");
    kvl_fail(KVL_EINVAL, "%s / %s", kvl_error(), kvl_error());
    ck_assert_str_eq(kvl_error(), "outer: inner 7 / outer: inner 7");
}
END_TEST

START_TEST(test_long_messages_are_truncated_not_overrun)
{
    char big[2000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    kvl_fail(KVL_EINVAL, "%s", big);
    ck_assert_uint_lt(strlen(kvl_error()), sizeof big - 1);
    ck_assert_uint_gt(strlen(kvl_error()), 100);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_status");
    TCase *tc = tcase_create("status");
    tcase_add_test(tc, test_fail_returns_its_code_and_keeps_its_message);
    tcase_add_test(tc, test_fail_may_prefix_context_onto_the_current_message);
    tcase_add_test(tc, test_long_messages_are_truncated_not_overrun);
    suite_add_tcase(s, tc);
    return s;
}
