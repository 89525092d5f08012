/* kvl_fail and kvl_error: the message a failure leaves, including a message built on the previous one,
 * and one line of text whatever control bytes the quoted path or field holds. */
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

START_TEST(test_control_bytes_in_a_message_are_escaped_so_it_stays_one_line)
{
    kvl_fail(KVL_EPARSE, "%s: header field 'descr' is '%s'", "in\nput.npy", "<f\t4\x7f\r");
    ck_assert_str_eq(kvl_error(), "in\\x0aput.npy: header field 'descr' is '<f\\x094\\x7f\\x0d'");
    kvl_fail(KVL_EINVAL, "outer: %s", kvl_error());
    ck_assert_str_eq(kvl_error(), "outer: in\\x0aput.npy: header field 'descr' is '<f\\x094\\x7f\\x0d'");
    kvl_fail(KVL_EINVAL, "caf\xc3\xa9 \\ \"q\"");   /* UTF-8, a backslash and quotes stay as they are */
    ck_assert_str_eq(kvl_error(), "caf\xc3\xa9 \\ \"q\"");
}
END_TEST

START_TEST(test_a_message_of_escapes_is_cut_between_two_of_them)
{
    char newlines[300];
    memset(newlines, '\n', sizeof newlines - 1);
    newlines[sizeof newlines - 1] = '\0';
    kvl_fail(KVL_EINVAL, "a%s", newlines);
    size_t n = strlen(kvl_error());
    ck_assert_uint_le(n, 511);
    ck_assert_uint_gt(n, 400);
    ck_assert_uint_eq((n - 1) % 4, 0);   /* "a", then whole "\x0a"s */
    for (size_t i = 1; i < n; i += 4) ck_assert_msg(strncmp(kvl_error() + i, "\\x0a", 4) == 0, "at %zu", i);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_status");
    TCase *tc = tcase_create("status");
    tcase_add_test(tc, test_fail_returns_its_code_and_keeps_its_message);
    tcase_add_test(tc, test_fail_may_prefix_context_onto_the_current_message);
    tcase_add_test(tc, test_long_messages_are_truncated_not_overrun);
    tcase_add_test(tc, test_control_bytes_in_a_message_are_escaped_so_it_stays_one_line);
    tcase_add_test(tc, test_a_message_of_escapes_is_cut_between_two_of_them);
    suite_add_tcase(s, tc);
    return s;
}
