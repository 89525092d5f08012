/* Reliability of every program's command line (cost, mla_cost, swa_reach, dsa_cost, kvfmt, v4_cache,
 * v41_cache, replay, kvtable, the notebooks nb_NN, kvbench):
 * an unknown flag, a flag without its value, a value out of range or not a number, a stray argument
 * is answered with exit status 2, exactly one line on stderr that starts with the program's name
 * and names the offending argument, and nothing on stdout. --help prints to stdout and exits 0. The line
 * stays one line whatever the argument holds: control bytes are written \xNN, an empty argument "". */
#include <stdio.h>
#include <string.h>

#include "common.h"

#define CAP (1 << 16)

static char out[CAP], err[CAP];

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

typedef struct {
    const char *cmd;    /* the command line, run through /bin/sh */
    const char *names;  /* a fragment stderr must contain */
} bad_call;

/* Each call exits 2, prints nothing, and says one line on stderr starting with the first word of its
 * command and a colon, containing its fragment. */
static void expect_bad_calls(const bad_call *calls, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char prefix[32];
        size_t word = strcspn(calls[i].cmd, " ");
        snprintf(prefix, sizeof prefix, "%.*s", (int)word, calls[i].cmd);
        int rc = kvl_run(calls[i].cmd, "", out, CAP, err, CAP);
        ck_assert_msg(rc == 2, "%s: exit %d, want 2 (stderr: %s)", calls[i].cmd, rc, err);
        ck_assert_msg(out[0] == '\0', "%s: printed to stdout: %.200s", calls[i].cmd, out);
        const int named = strncmp(err, prefix, word) == 0 && (err[word] == ':' || err[word] == ' ');
        ck_assert_msg(count_lines(err) == 1 && named, "%s: stderr is not one line starting \"%s\": %s", calls[i].cmd,
                      prefix, err);
        ck_assert_msg(strstr(err, calls[i].names) != NULL, "%s: stderr does not name \"%s\": %s", calls[i].cmd,
                      calls[i].names, err);
    }
}

#define EXPECT_BAD(calls) expect_bad_calls(calls, sizeof calls / sizeof calls[0])

START_TEST(test_unknown_flags_are_refused_by_every_program)
{
    static const bad_call calls[] = {
        {"cost --colour", "--colour"},
        {"cost -t 5", "-t"},
        {"mla_cost --context 1", "--context"},
        {"swa_reach --layer 2", "--layer"},
        {"dsa_cost --no-timings", "--no-timings"},
        {"dsa_cost --no-timing=1", "--no-timing=1"},
        {"kvtable --colour", "--colour"},
        {"kvtable --", "--"},
        {"kvfmt encode --format e4m3 --round 1", "--round"},
        {"kvfmt --version", "--version"},
        {"kvfmt quant --scheme mxfp4 --format e4m3", "--format does not apply"},
        {"kvfmt encode --format e4m3 --saturate=yes 1", "--saturate takes no value"},
        {"v4_cache --colour", "--colour"},
        {"v4_cache -t 5", "-t"},
        {"v41_cache --max-contexts 64", "--max-contexts"},
        {"v41_cache --pool 2", "--pool"},
        {"replay --prompt 1K", "--prompt"},
        {"nb_01 --colour", "--colour"},
        {"nb_05 --cell", "--cell"},
        {"nb_08 -s", "-s"},
        {"kvbench --groups", "'--groups' (argument 1): unknown option"},
        {"kvbench ceilings -v", "'-v' (argument 2): unknown option"},
    };
    EXPECT_BAD(calls);
}
END_TEST

START_TEST(test_flags_without_their_values_are_refused_by_every_program)
{
    static const bad_call calls[] = {
        {"cost --tokens", "--tokens"},
        {"cost --config", "--config"},
        {"mla_cost --contexts", "--contexts"},
        {"mla_cost --naive-budget", "--naive-budget"},
        {"mla_cost --repeats", "--repeats"},
        {"mla_cost --config", "--config"},
        {"swa_reach --window", "--window"},
        {"swa_reach --threshold", "--threshold"},
        {"dsa_cost --contexts", "--contexts"},
        {"dsa_cost --repeats", "--repeats"},
        {"kvtable --format", "--format needs a value"},
        {"kvtable --format json --svg", "--svg needs a value"},
        {"kvfmt encode --format", "--format needs a value"},
        {"kvfmt row --layout", "--layout needs a value"},
        {"kvfmt fp4-demo --seed", "--seed needs a value"},
        {"kvfmt encode 1", "--format is required"},
        {"kvfmt quant", "--scheme is required"},
        {"kvfmt", "no command"},
        {"v4_cache --tokens", "--tokens"},
        {"v4_cache --chunk", "--chunk"},
        {"v4_cache --replay-window", "--replay-window"},
        {"v4_cache --seed", "--seed"},
        {"v41_cache --tokens", "--tokens"},
        {"v41_cache --pool-blocks", "--pool-blocks"},
        {"v41_cache --max-context", "--max-context"},
        {"v41_cache --seed", "--seed"},
        {"replay --prompts", "--prompts"},
        {"replay --persist-tokens", "--persist-tokens"},
        {"nb_02 --figures", "--figures: needs a directory"},
    };
    EXPECT_BAD(calls);
}
END_TEST

START_TEST(test_values_out_of_range_or_not_numbers_are_refused)
{
    static const bad_call calls[] = {
        {"cost --tokens 0", "0"},
        {"cost --tokens 4097", "4097"},
        {"cost --tokens -5", "-5"},
        {"cost --tokens 1e3", "1e3"},
        {"cost --tokens 99999999999999999999999", "99999999999999999999999"},
        {"mla_cost --contexts 0", "\"0\""},
        {"mla_cost --contexts 1025K", "1025K"},
        {"mla_cost --contexts 1,,2", "1,,2"},
        {"mla_cost --contexts 4K,", "ends with a comma"},
        {"mla_cost --contexts ''", "empty list"},
        {"mla_cost --contexts 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", "at most 16"},
        {"mla_cost --repeats 101", "101"},
        {"mla_cost --naive-budget nan", "nan"},
        {"mla_cost --naive-budget -1", "-1"},
        {"swa_reach --layers 17", "17"},
        {"swa_reach --window 1", "--window"},
        {"swa_reach --threshold 1", "--threshold"},
        {"swa_reach --threshold inf", "inf"},
        {"swa_reach --seed 4294967296", "4294967296"},
        {"swa_reach --seed -1", "-1"},
        {"dsa_cost --contexts 0x10", "0x10"},
        {"dsa_cost --contexts +5", "+5"},
        {"dsa_cost --repeats 0", ": 0 (try --help)"},
        {"kvtable --format yaml", "yaml"},
        {"kvfmt encode --format e3m4 1", "unknown format 'e3m4'"},
        {"kvfmt encode --format= 1", "unknown format ''"},
        {"kvfmt quant --scheme mxfp5", "unknown scheme 'mxfp5'"},
        {"kvfmt row --layout v5-main", "unknown layout 'v5-main'"},
        {"kvfmt fp4-demo --seed 18446744073709551616", "18446744073709551616"},
        {"kvfmt fp4-demo --seed -1", "'-1'"},
        {"kvfmt fp4-demo --seed 1.5", "'1.5'"},
        {"v4_cache --tokens 0", "0"},
        {"v4_cache --tokens 65537", "65537"},
        {"v4_cache --chunk -1", "-1"},
        {"v4_cache --chunk +4", "+4"},
        {"v4_cache --replay-window 129", "129"},
        {"v4_cache --seed 4294967296", "4294967296"},
        {"v4_cache --tokens 1e3", "1e3"},
        {"v41_cache --tokens 3", "3"},
        {"v41_cache --tokens 4098", "4098"},
        {"v41_cache --pool-blocks 0", "0"},
        {"v41_cache --max-context 15", "15"},
        {"v41_cache --max-context 513", "513"},
        {"v41_cache --seed x", "x"},
        {"replay --prompts 100", "100"},
        {"replay --prompts 1K,,4K", "1K,,4K"},
        {"replay --prompts 65537", "65537"},
        {"replay --persist-tokens 255", "255"},
        {"replay --seed -1", "-1"},
        {"nb_03 --figures /nonexistent/kvl", "--figures /nonexistent/kvl: not a directory"},
        {"nb_04 --figures /dev/null", "--figures /dev/null: not a directory"},
        {"kvbench fromats", "'fromats' (argument 1): unknown group"},
    };
    EXPECT_BAD(calls);
}
END_TEST

START_TEST(test_stray_and_repeated_arguments_are_refused)
{
    static const bad_call calls[] = {
        {"cost extra", "extra"},
        {"mla_cost extra", "extra"},
        {"swa_reach extra", "extra"},
        {"dsa_cost extra", "extra"},
        {"v4_cache extra", "extra"},
        {"v41_cache --tokens 8 extra", "extra"},
        {"replay extra", "extra"},
        {"nb_06 extra", "extra"},
        {"nb_07 --step --cells", "--step or --cells, not both"},
        {"nb_07 --cells --cells", "--cells: given twice"},
        {"nb_01 --figures /tmp --figures /tmp", "--figures: given twice"},
        {"kvbench formats formats", "'formats' (argument 2): group given twice"},
        {"kvfmt table --format e4m3 extra", "unexpected argument 'extra'"},
        {"kvfmt frob", "unknown command 'frob'"},
        {"kvfmt encode --format e4m3 --format e5m2 1", "--format given twice"},
        {"kvfmt row --layout v4-index --pack --unpack", "--pack or --unpack, not both"},
    };
    EXPECT_BAD(calls);
}
END_TEST

/* Counts are plain decimal digits in every program: a sign or a leading space is refused, as is a
 * flag given twice (kvfmt's own reader says so in its words). */
START_TEST(test_signed_spaced_and_repeated_values_are_refused_by_every_program)
{
    static const bad_call calls[] = {
        {"cost --tokens +5", "+5"},
        {"cost --tokens ' 5'", ":  5 (try --help)"},
        {"cost --tokens 5 --tokens 6", "--tokens given twice"},
        {"mla_cost --repeats +5", "+5"},
        {"mla_cost --repeats ' 5'", ":  5 (try --help)"},
        {"mla_cost --contexts +5", "+5"},
        {"mla_cost --naive-budget +1", "+1"},
        {"mla_cost --repeats 1 --repeats 1", "--repeats given twice"},
        {"swa_reach --layers +5", "+5"},
        {"swa_reach --window ' 5'", ":  5 (try --help)"},
        {"swa_reach --threshold ' 0.5'", ":  0.5 (try --help)"},
        {"swa_reach --seed 1 --seed 2", "--seed given twice"},
        {"dsa_cost --repeats +5", "+5"},
        {"dsa_cost --repeats ' 5'", ":  5 (try --help)"},
        {"dsa_cost --no-timing --no-timing", "--no-timing given twice"},
        {"kvfmt fp4-demo --seed +5", "'+5'"},
        {"kvfmt fp4-demo --seed ' 5'", "' 5'"},
        {"kvfmt fp4-demo --seed 1 --seed 2", "--seed given twice"},
        {"v4_cache --tokens +5", "+5"},
        {"v4_cache --replay-window ' 5'", ":  5 (try --help)"},
        {"v4_cache --chunk 4 --chunk 4", "--chunk given twice"},
        {"v41_cache --tokens +8", "+8"},
        {"v41_cache --pool-blocks ' 8'", ":  8 (try --help)"},
        {"v41_cache --seed 1 --seed 1", "--seed given twice"},
        {"replay --persist-tokens +512", "+512"},
        {"replay --persist-tokens ' 512'", ":  512 (try --help)"},
        {"replay --prompts +1K", "+1K"},
        {"replay --seed 1 --seed 1", "--seed given twice"},
        {"kvtable --format csv --format json", "--format given twice"},
        {"kvtable --svg /tmp/kvl_a.svg --svg /tmp/kvl_b.svg", "--svg given twice"},
    };
    EXPECT_BAD(calls);
}
END_TEST

/* An argument holding a newline or an escape sequence is quoted back with \xNN: the message stays
 * one line and sends the terminal nothing it would act on. */
START_TEST(test_control_characters_in_an_argument_are_escaped_in_the_message)
{
    static const bad_call calls[] = {
        {"kvfmt encode --format \"$(printf 'e4m3\\nx')\" 1", "'e4m3\\x0ax'"},
        {"kvfmt decode --format e4m3 \"$(printf '\\033[31m')\"", "'\\x1b[31m'"},
    };
    EXPECT_BAD(calls);
}
END_TEST

/* An empty argument is named as "", not dropped from the message. */
START_TEST(test_an_empty_argument_is_named_as_two_quotes)
{
    static const bad_call calls[] = {
        {"kvtable ''", ": \"\": cannot open"},
        {"cost --tokens ''", ": \"\" (try --help)"},
        {"mla_cost ''", "unexpected argument: \"\""},
        {"nb_01 ''", "nb_01: \"\": unknown argument"},
        {"nb_01 --figures ''", "--figures \"\": not a directory"},
    };
    EXPECT_BAD(calls);
}
END_TEST

/* The flags `cmd --help` names (every "--word" of its usage but --help), as " --a --b ..." in
 * flags[cap], and "" for none. */
static void flags_of(char *flags, size_t cap, const char *cmd)
{
    char help[320];
    snprintf(help, sizeof help, "%s --help", cmd);
    ck_assert_msg(kvl_run(help, NULL, out, CAP, err, CAP) == 0, "%s: exit status not 0", help);
    flags[0] = '\0';
    for (const char *p = out; (p = strstr(p, "--"));) {
        size_t n = 2;
        while ((p[n] >= 'a' && p[n] <= 'z') || (p[n] >= '0' && p[n] <= '9') || (p[n] == '-' && n > 2)) n++;
        char flag[64];
        snprintf(flag, sizeof flag, " %.*s ", (int)n, p);
        p += n;
        if (n == 2 || !strcmp(flag, " --help ")) continue;
        char listed[4096];
        snprintf(listed, sizeof listed, "%s ", flags);
        if (!strstr(listed, flag)) snprintf(flags + strlen(flags), cap - strlen(flags), " %.*s", (int)n, flag + 1);
    }
}

/* 1 if s holds a control byte other than a line's end. */
static int holds_control_bytes(const char *s)
{
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\n') || *s == 0x7f) return 1;
    return 0;
}

/* Every program (and kvfmt's every command), given each flag its usage names, or no flag, with a value
 * holding a newline, a carriage return, a tab, an escape sequence, or nothing at all: one line on stderr
 * with the control bytes written \xNN, nothing on stdout, exit 2. The values lie under a directory that
 * does not exist, so that no file is written. kvbench --out exits 1, a folder it cannot write
 * (test_bench_kvbench). */
START_TEST(test_a_value_with_control_bytes_or_empty_gets_one_line_from_every_program)
{
    static const char *const values[] = {"/nonexistent/1\n2", "/nonexistent/1\r", "/nonexistent/\t1",
                                         "/nonexistent/\033[31m", ""};
    static const char *const kvfmt_commands[] = {"encode", "decode", "table", "quant", "row", "fp4-demo"};
    char names[64 + 6][32];
    size_t n = kvl_list_programs(names, 64);
    for (size_t c = 0; c < sizeof kvfmt_commands / sizeof *kvfmt_commands; c++)
        snprintf(names[n++], 32, "kvfmt %s", kvfmt_commands[c]);
    for (size_t p = 0; p < n; p++) {
        char flags[1024];
        flags_of(flags, sizeof flags, names[p]);
        strcat(flags, " ");   /* and no flag: the value alone */
        for (const char *f = flags; *f; f += strcspn(f + 1, " ") + 1)
            for (size_t v = 0; v < sizeof values / sizeof *values; v++) {
                const int flag_len = (int)strcspn(f + 1, " ");
                char cmd[1200];
                snprintf(cmd, sizeof cmd, "timeout 60 %s %.*s '%s'", names[p], flag_len, f + 1, values[v]);
                const int rc = kvl_run(cmd, "", out, CAP, err, CAP);
                const int want = !strcmp(names[p], "kvbench") && !strncmp(f + 1, "--out", 5) && *values[v] ? 1 : 2;
                ck_assert_msg(rc == want, "%s: exit %d, want %d (stderr: %.300s)", cmd, rc, want, err);
                ck_assert_msg(out[0] == '\0', "%s: printed to stdout: %.200s", cmd, out);
                ck_assert_msg(count_lines(err) == 1 && !holds_control_bytes(err),
                              "%s: stderr is not one line without control bytes: %s", cmd, err);
            }
    }
}
END_TEST

START_TEST(test_help_goes_to_stdout_with_exit_0_in_every_program)
{
    static const char *const programs[] = {"cost",     "mla_cost", "swa_reach", "dsa_cost", "kvtable",
                                           "kvfmt",    "v4_cache", "v41_cache", "replay", "nb_01",    "nb_08",
                                           "kvbench",  "kvfmt encode", "kvfmt row"};
    for (size_t i = 0; i < sizeof programs / sizeof programs[0]; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "%s --help", programs[i]);
        ck_assert_msg(kvl_run(cmd, NULL, out, CAP, err, CAP) == 0, "%s: exit status not 0", cmd);
        ck_assert_msg(strstr(out, "usage: ") == out && err[0] == '\0', "%s: stdout %.80s, stderr %s", cmd, out, err);
    }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reliability_options");
    TCase *tc = tcase_create("command_lines");
    tcase_add_test(tc, test_unknown_flags_are_refused_by_every_program);
    tcase_add_test(tc, test_flags_without_their_values_are_refused_by_every_program);
    tcase_add_test(tc, test_values_out_of_range_or_not_numbers_are_refused);
    tcase_add_test(tc, test_stray_and_repeated_arguments_are_refused);
    tcase_add_test(tc, test_signed_spaced_and_repeated_values_are_refused_by_every_program);
    tcase_add_test(tc, test_control_characters_in_an_argument_are_escaped_in_the_message);
    tcase_add_test(tc, test_help_goes_to_stdout_with_exit_0_in_every_program);
    tcase_add_test(tc, test_a_value_with_control_bytes_or_empty_gets_one_line_from_every_program);
    tcase_add_test(tc, test_an_empty_argument_is_named_as_two_quotes);
    suite_add_tcase(s, tc);
    return s;
}
