/* The strict JSON text check: every RFC 8259 text is accepted (and cJSON then parses it), and each way
 * of breaking the grammar that cJSON lets through, or that it refuses without saying where, is refused
 * at its line and column, in one line naming the origin. The repeated-key check finds a key held twice
 * among many. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "json_text.h"
#include "status.h"

static void expect_accepted_n(const char *text, size_t len)
{
    ck_assert_msg(kvl_json_text_check(text, len, "t.json") == KVL_OK, "'%s': %s", text, kvl_error());
    cJSON *root = cJSON_ParseWithLength(text, len);
    ck_assert_msg(root != NULL, "cJSON refuses '%s'", text);
    cJSON_Delete(root);
}

static void expect_accepted(const char *text) { expect_accepted_n(text, strlen(text)); }

/* text[len] is refused, the message "t.json: WHAT at line L, column C" holding piece. */
static void expect_refused_n(const char *text, size_t len, const char *piece)
{
    kvl_clear_error();
    ck_assert_msg(kvl_json_text_check(text, len, "t.json") == KVL_EPARSE, "'%s' accepted", text);
    ck_assert_msg(strncmp(kvl_error(), "t.json: ", 8) == 0 && strstr(kvl_error(), piece), "'%s' lacks '%s'",
                  kvl_error(), piece);
    ck_assert_ptr_null(strchr(kvl_error(), '\n'));
}

static void expect_refused(const char *text, const char *piece) { expect_refused_n(text, strlen(text), piece); }

START_TEST(test_every_form_of_the_grammar_is_accepted)
{
    expect_accepted("{}");
    expect_accepted(" \t\r\n[ ] \n");
    expect_accepted("0");
    expect_accepted("-0.5e-3");
    expect_accepted("[1E+2, 10, -1, 0.0, 123456789012345678901234567890]");
    expect_accepted("\"\"");
    expect_accepted("{\"a\": [true, false, null], \"b\": {\"c\": \"d\"}}");
    expect_accepted("\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t \\u00e9 \\uD83D\\uDE00\"");
    expect_accepted("\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xed\x9f\xbf\"");   /* up to U+10FFFF */
    expect_accepted("\"\x7f\"");
}
END_TEST

START_TEST(test_what_cjson_lets_through_is_refused_at_its_line_and_column)
{
    expect_refused("{\"a\": 012}", "a number with a leading zero at line 1, column 7");
    expect_refused("[-01]", "a number with a leading zero at line 1, column 2");
    expect_refused("{\"a\": 1}\n  x", "text after the JSON value at line 2, column 3");
    expect_refused_n("{\"a\": 1}\0", 9, "text after the JSON value at line 1, column 9");
    expect_refused_n("\"a\0b\"", 5, "a raw control byte 0x00 inside a string at line 1, column 3");
    expect_refused("{\n\"a\tb\": 1}", "a raw control byte 0x09 inside a string at line 2, column 3");
    expect_refused("\"\xc3\"", "byte 0xc3 that is not valid UTF-8 inside a string at line 1, column 2");
    expect_refused("\"\xc0\xaf\"", "byte 0xc0 that is not valid UTF-8");       /* overlong '/' */
    expect_refused("\"\xe0\x80\xaf\"", "byte 0xe0 that is not valid UTF-8");   /* overlong, 3 bytes */
    expect_refused("\"\xed\xa0\x80\"", "byte 0xed that is not valid UTF-8");   /* an encoded surrogate */
    expect_refused("\"\xf4\x90\x80\x80\"", "byte 0xf4 that is not valid UTF-8");   /* above U+10FFFF */
    expect_refused("\"\xff\"", "byte 0xff that is not valid UTF-8");
    expect_refused("\"\\u0000\"", "the escape \\u0000 (no C string holds it) at line 1, column 2");
    expect_refused("\"\\uD83D\"", "a high surrogate escape without its low half");
    expect_refused("\"\\uDE00\"", "a low surrogate escape without its high half");
    expect_refused("\"\\u12G4\"", "\\u not followed by four hex digits");
    expect_refused("\"\\x41\"", "an escape that JSON does not have at line 1, column 2");
    expect_refused("\xef\xbb\xbf{}", "byte 0xef where a value was expected at line 1, column 1");   /* a BOM */
}
END_TEST

START_TEST(test_broken_grammar_is_refused_where_it_breaks)
{
    expect_refused("", "the text ends where a value was expected at line 1, column 1");
    expect_refused("  \n ", "the text ends where a value was expected at line 2, column 2");
    expect_refused("{\"a\": 1,}", "'}' where a key (a string) was expected at line 1, column 9");
    expect_refused("[1, 2,]", "']' where a value was expected at line 1, column 7");
    expect_refused("[1 2]", "'2' where ',' or ']' was expected at line 1, column 4");
    expect_refused("{\"a\" 1}", "'1' where ':' was expected at line 1, column 6");
    expect_refused("{a: 1}", "'a' where a key (a string) was expected");
    expect_refused("[1.]", "']' where a digit after the decimal point was expected");
    expect_refused("[1e]", "']' where a digit in the exponent was expected");
    expect_refused("[-]", "']' where a digit was expected");
    expect_refused("[.5]", "'.' where a value was expected");
    expect_refused("[+1]", "'+' where a value was expected");
    expect_refused("[tru]", "'t' where a value was expected at line 1, column 2");
    expect_refused("[NaN]", "'N' where a value was expected");
    expect_refused("\"abc", "a string that is never closed at line 1, column 1");
    expect_refused("'a'", "''' where a value was expected");
}
END_TEST

/* KVL_JSON_MAX_DEPTH arrays nest; one more is refused at the bracket that goes too deep. */
START_TEST(test_nesting_is_accepted_to_its_limit_and_refused_beyond)
{
    char text[2 * KVL_JSON_MAX_DEPTH + 3];
    for (int depth = KVL_JSON_MAX_DEPTH; depth <= KVL_JSON_MAX_DEPTH + 1; depth++) {
        memset(text, '[', (size_t)depth);
        memset(text + depth, ']', (size_t)depth);
        if (depth == KVL_JSON_MAX_DEPTH) expect_accepted_n(text, 2 * (size_t)depth);
        else expect_refused_n(text, 2 * (size_t)depth, "nesting deeper than 512 levels at line 1, column 513");
    }
}
END_TEST

START_TEST(test_a_key_held_twice_is_found_among_many)
{
    enum { N = 5000 };
    char *text = malloc(N * 16 + 32);
    ck_assert(text != NULL);
    for (int repeat = 0; repeat < 2; repeat++) {
        size_t len = 0;
        text[len++] = '{';
        for (int i = 0; i < N; i++) len += (size_t)sprintf(text + len, "%s\"k%d\": %d", i ? ", " : "", i, i);
        if (repeat) len += (size_t)sprintf(text + len, ", \"k2500\": 0");
        text[len++] = '}';
        cJSON *root = cJSON_ParseWithLength(text, len);
        ck_assert(root != NULL);
        const char *dup = "unset";
        ck_assert_int_eq(kvl_json_repeated_key(&dup, root, "t.json"), KVL_OK);
        if (repeat) ck_assert_msg(dup && strcmp(dup, "k2500") == 0, "%s", dup ? dup : "none");
        else ck_assert_ptr_null(dup);
        cJSON_Delete(root);
    }
    free(text);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_json_text");
    TCase *tc = tcase_create("json_text");
    tcase_add_test(tc, test_every_form_of_the_grammar_is_accepted);
    tcase_add_test(tc, test_what_cjson_lets_through_is_refused_at_its_line_and_column);
    tcase_add_test(tc, test_broken_grammar_is_refused_where_it_breaks);
    tcase_add_test(tc, test_nesting_is_accepted_to_its_limit_and_refused_beyond);
    tcase_add_test(tc, test_a_key_held_twice_is_found_among_many);
    suite_add_tcase(s, tc);
    return s;
}
