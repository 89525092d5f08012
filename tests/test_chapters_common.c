/* chapters/common: the numbers every program prints (kvl_grouped), the context lists they read
 * (kvl_parse_contexts), their command-line counts (kvl_parse_size) and the median they time
 * (kvl_median), against definitions written here. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "contexts.h"
#include "grouped.h"
#include "program.h"
#include "rng.h"
#include "status.h"
#include "timing.h"

/* The definition for an integer: the groups of three digits, by division, most significant first. */
static void oracle_grouped_integer(char *buf, size_t cap, uint64_t v)
{
    unsigned groups[8];
    size_t n = 0;
    do {
        groups[n++] = (unsigned)(v % 1000);
        v /= 1000;
    } while (v);
    size_t o = (size_t)snprintf(buf, cap, "%u", groups[n - 1]);
    for (size_t i = n - 1; i-- > 0;) o += (size_t)snprintf(buf + o, cap - o, ",%03u", groups[i]);
}

START_TEST(test_grouped_integers_match_groups_of_three_by_division)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 12);
    char got[48], want[48];
    for (int i = 0; i < 4000; i++) {
        /* every digit count from 1 to 16, so each position of the first comma occurs */
        const uint64_t v = (uint64_t)(kvl_rng_random(&rng) * pow(10.0, 1 + i % 16));
        oracle_grouped_integer(want, sizeof want, v);
        ck_assert_str_eq(kvl_grouped(got, sizeof got, (double)v, 0), want);
        char neg[49];
        snprintf(neg, sizeof neg, "-%s", want);
        ck_assert_str_eq(kvl_grouped(got, sizeof got, -(double)v, 0), v ? neg : want);
    }
}
END_TEST

START_TEST(test_grouped_decimals_drop_trailing_zeros_and_never_show_minus_zero)
{
    static const struct { double v; int decimals; const char *want; } cases[] = {
        {1234.25, 2, "1,234.25"}, {1234.5, 4, "1,234.5"}, {1234.0, 4, "1,234"},   {999.996, 2, "1,000"},
        {0.5, 0, "0"},            {12, 5, "12"},          {-1234.25, 1, "-1,234.2"}, {-0.001, 2, "0"},
        {-0.0, 0, "0"},           {0.0625, 4, "0.0625"},  {1e6, 2, "1,000,000"},  {100, 0, "100"},
    };
    char got[48];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_str_eq(kvl_grouped(got, sizeof got, cases[i].v, cases[i].decimals), cases[i].want);
}
END_TEST

START_TEST(test_grouped_text_is_cut_at_the_buffer_and_always_terminated)
{
    char got[8];
    memset(got, 'x', sizeof got);
    ck_assert_str_eq(kvl_grouped(got, 6, 1234567, 0), "1,234");
    ck_assert_str_eq(kvl_grouped(got, 5, 1234567, 0), "1,23");
    ck_assert_str_eq(kvl_grouped(got, 3, 1234567, 0), "1,");
    ck_assert_str_eq(kvl_grouped(got, 1, 1234567, 0), "");
    ck_assert_int_eq(got[6], 'x');
}
END_TEST

START_TEST(test_context_lists_read_counts_and_K_suffixes)
{
    size_t c[4], n = 99;
    ck_assert_int_eq(kvl_parse_contexts(c, &n, 4, 1u << 20, "4K,8k,100,1024K"), KVL_OK);
    ck_assert_uint_eq(n, 4);
    ck_assert_uint_eq(c[0], 4096);
    ck_assert_uint_eq(c[1], 8192);
    ck_assert_uint_eq(c[2], 100);
    ck_assert_uint_eq(c[3], 1u << 20);
    ck_assert_int_eq(kvl_parse_contexts(c, &n, 4, 1u << 20, "1"), KVL_OK);
    ck_assert_uint_eq(n, 1);
    ck_assert_uint_eq(c[0], 1);
}
END_TEST

START_TEST(test_context_lists_out_of_range_or_malformed_are_refused_by_name)
{
    static const struct { const char *list; const char *names; } bad[] = {
        {"", "--contexts: empty list"},
        {"0", "\"0\": each context must be 1 to 1048576 tokens"},
        {"1025K", "\"1025K\": each context must be"},
        {"1048577", "\"1048577\": each context must be"},
        {"18446744073709551616", "\"18446744073709551616\" is not a list"},
        {"99999999999999999K", "each context must be"},
        {"1,,2", "\"1,,2\" is not a list"},
        {"4K,", "\"4K,\" ends with a comma"},
        {",4K", "\",4K\" is not a list"},
        {"+5", "\"+5\" is not a list"},
        {"-5", "\"-5\" is not a list"},
        {" 5", "\" 5\" is not a list"},
        {"0x10", "\"0x10\": each context must be"},
        {"4M", "\"4M\": each context must be"},
        {"1,2,3,4,5", "--contexts: at most 4 contexts"},
    };
    size_t c[4], n;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kvl_clear_error();
        ck_assert_msg(kvl_parse_contexts(c, &n, 4, 1u << 20, bad[i].list) == KVL_EINVAL, "\"%s\" accepted", bad[i].list);
        ck_assert_msg(strstr(kvl_error(), bad[i].names) != NULL, "\"%s\": message \"%s\" lacks \"%s\"", bad[i].list,
                      kvl_error(), bad[i].names);
    }
}
END_TEST

START_TEST(test_sizes_are_plain_digits_within_their_bounds)
{
    size_t v = 7;
    ck_assert_int_eq(kvl_parse_size(&v, "4096", 1, 4096), 0);
    ck_assert_uint_eq(v, 4096);
    ck_assert_int_eq(kvl_parse_size(&v, "0", 0, 1), 0);
    ck_assert_uint_eq(v, 0);
    static const char *const bad[] = {"", "4097", "0x", "+1", "-1", " 1", "1 ", "1.0", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        v = 7;
        ck_assert_msg(kvl_parse_size(&v, bad[i], 0, 4096) == -1 && v == 7, "\"%s\" accepted", bad[i]);
    }
    ck_assert_int_eq(kvl_parse_size(&v, "1", 2, 4096), -1);
}
END_TEST

/* The definition: the value with as many others at or below it as at or above it, found by counting. */
static double oracle_median(const double *t, size_t n)
{
    double lo = NAN, hi = NAN;
    for (size_t i = 0; i < n; i++) {
        size_t below = 0, equal = 0;
        for (size_t j = 0; j < n; j++) below += t[j] < t[i], equal += t[j] == t[i];
        if (below <= (n - 1) / 2 && (n - 1) / 2 < below + equal) lo = t[i];
        if (below <= n / 2 && n / 2 < below + equal) hi = t[i];
    }
    return 0.5 * (lo + hi);
}

START_TEST(test_median_is_the_middle_value_or_the_mean_of_the_middle_two)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 5);
    for (size_t n = 1; n <= 12; n++)
        for (int trial = 0; trial < 20; trial++) {
            double t[12], copy[12];
            for (size_t i = 0; i < n; i++) t[i] = copy[i] = (double)(int)(kvl_rng_random(&rng) * 6);   /* ties */
            ck_assert_double_eq(kvl_median(t, n), oracle_median(copy, n));
        }
    const double a = kvl_seconds(), b = kvl_seconds();
    ck_assert(b >= a);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("chapters_common");
    TCase *tc = tcase_create("program_text");
    tcase_add_test(tc, test_grouped_integers_match_groups_of_three_by_division);
    tcase_add_test(tc, test_grouped_decimals_drop_trailing_zeros_and_never_show_minus_zero);
    tcase_add_test(tc, test_grouped_text_is_cut_at_the_buffer_and_always_terminated);
    tcase_add_test(tc, test_context_lists_read_counts_and_K_suffixes);
    tcase_add_test(tc, test_context_lists_out_of_range_or_malformed_are_refused_by_name);
    tcase_add_test(tc, test_sizes_are_plain_digits_within_their_bounds);
    tcase_add_test(tc, test_median_is_the_middle_value_or_the_mean_of_the_middle_two);
    suite_add_tcase(s, tc);
    return s;
}
