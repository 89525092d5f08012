/* Every quantity the course prints for a reader, in its text output, groups its thousands: a count,
 * a byte size, a token count or any other figure whose integer part has four digits or more is
 * written 1,234 (chapters/common/grouped.h, nb_num). A run of four digits or more stands ungrouped
 * only where it is not a quantity:
 *  - a hex code (0x7e80), or digits joined to a name (sm_90, E4M3, bf16, x1234; but 8x1024 is a
 *    product of quantities);
 *  - a seed (seed 1234, --seed 1234);
 *  - a date (2026-09, 2026-12-02);
 *  - a decimal's fraction digits (0.00012345) or an exponent (1e-1234);
 *  - part of a path or file name (a token holding '/' beside a letter, or name.json);
 *  - a line of the CUDA emulator's fault report ("emulator fault in kernel ..."), whose byte
 *    offsets are addresses, written as the GPU's own checkers write them.
 * The runs: each chapter program's default text output (a short variant of the same text where
 * the default takes a minute) and its other text views, every notebook (nb_NN). A chapter program
 * not listed in RUNS is run with no arguments and must exit 0, so that a new one is held too.
 * Machine formats (--format csv and json), figures and the notebooks' converter nb_ipynb are not
 * text output; kvbench measures for minutes and is left out. */
#include "common.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OUT_CAP (1 << 20)
#define MAX_PROGRAMS 64
#define MAX_SHOWN 12

static char out[OUT_CAP], err[OUT_CAP];

/* One run: `program` is its name in build/bin (for the coverage check), `command` its command
 * line, @R the project root. */
typedef struct {
    const char *program;
    const char *command;
} run;

static const run RUNS[] = {
    {"cost", "cost"},
    {"cost", "cost --config @R/chapters/01_mha/llama-3-70b.json"},
    {"cost", "cost --config @R/ref/configs/deepseek-llm-67b.json --tokens 4096"},
    {"mla_cost", "mla_cost --contexts 1K,32K --repeats 1"},
    {"swa_reach", "swa_reach"},
    {"swa_reach", "swa_reach --layers 8 --window 64"},
    {"dsa_cost", "dsa_cost --contexts 2K,128K --repeats 1"},
    {"kvfmt", "kvfmt table --format e5m2"},
    {"kvfmt", "kvfmt table --format e4m3"},
    {"kvfmt", "kvfmt decode --format e5m2 0x7b 0x7a"},
    {"kvfmt", "kvfmt encode --format e4m3 --saturate 1234.5 100000"},
    {"kvfmt", "kvfmt row --layout v32-main"},
    {"kvfmt", "kvfmt row --layout v32-index"},
    {"kvfmt", "kvfmt row --layout v4-main"},
    {"kvfmt", "kvfmt row --layout v41-main"},
    {"kvfmt", "kvfmt row --layout v41-window"},
    {"kvfmt", "kvfmt fp4-demo"},
    {"v4_cache", "v4_cache --tokens 512"},
    {"v41_cache", "v41_cache --tokens 256"},
    {"replay", "replay --prompts 256 --persist-tokens 2048"},
    {"kvtable", "kvtable"},
    {"kvtable", "kvtable --format markdown"},
    {"serving", "serving"},
    {"serving", "serving --gpus 16 --tp 16 --page 64 --context 1048576"},
    {"kvlayer", "kvlayer --config @R/tests/reference/deepseek_v3_tiny.json --weights "
                "@R/tests/reference/deepseek_v3_tiny.safetensors --layer 0 --input "
                "@R/tests/reference/deepseek_v3_tiny.safetensors --output /dev/null --prefill 4 "
                "--cache native"},
};

/* Programs that print no text output to hold (see the head of this file). */
static const char *const NOT_TEXT[] = {"nb_ipynb", "kvbench"};

/* ---- the rule ---------------------------------------------------------------------------------- */

/* The whitespace-delimited token of `line` around offset `at` is a path or a file name. */
static int in_path(const char *line, size_t at, size_t len)
{
    size_t b = at, e = at;
    while (b > 0 && !isspace((unsigned char)line[b - 1])) b--;
    while (e < len && !isspace((unsigned char)line[e])) e++;
    int slash = 0, letter = 0, extension = 0;
    for (size_t i = b; i < e; i++) {
        slash |= line[i] == '/';
        letter |= isalpha((unsigned char)line[i]);
        extension |= line[i] == '.' && i + 1 < e && isalpha((unsigned char)line[i + 1]) && i > at;
    }
    return (slash && letter) || extension;
}

/* The text before offset `at` ends with "seed" (any case), then spaces, '=' or ':'. */
static int after_seed(const char *line, size_t at)
{
    size_t i = at;
    while (i > 0 && (line[i - 1] == ' ' || line[i - 1] == '=' || line[i - 1] == ':')) i--;
    return i >= 4 && strncasecmp(line + i - 4, "seed", 4) == 0;
}

/* The digits at line[at..at+n) are a hex code: 0x and hex digits before them. */
static int in_hex(const char *line, size_t at)
{
    size_t i = at;
    while (i > 0 && isxdigit((unsigned char)line[i - 1])) i--;
    return i >= 2 && line[i - 1] == 'x' && line[i - 2] == '0';
}

/* The digits at line[at..at+n) are YYYY of a date YYYY-MM. */
static int a_date(const char *line, size_t at, size_t n, size_t len)
{
    return n == 4 && at + 7 <= len && line[at + 4] == '-' && isdigit((unsigned char)line[at + 5]) &&
           isdigit((unsigned char)line[at + 6]);
}

/* A run of 4+ digits at line[at..at+n) that stands where a quantity is printed ungrouped. */
static int ungrouped(const char *line, size_t at, size_t n, size_t len)
{
    if (n < 4) return 0;
    if (at > 0) {
        char p = line[at - 1];
        int times = p == 'x' && at > 1 && isdigit((unsigned char)line[at - 2]); /* 8x1024 */
        if (p == '.' || p == ',' || p == '_' || (isalpha((unsigned char)p) && !times)) return 0;
        if ((p == '+' || p == '-') && at > 1 && (line[at - 2] == 'e' || line[at - 2] == 'E')) return 0;
    }
    if (at + n < len && (isalpha((unsigned char)line[at + n]) || line[at + n] == '_') &&
        !(line[at + n] == 'B' || line[at + n] == 'K' || line[at + n] == 'x'))
        return 0; /* a name: 1234abc (a unit or K suffix is still a quantity) */
    return !in_hex(line, at) && !after_seed(line, at) && !a_date(line, at, n, len) &&
           !in_path(line, at, len);
}

/* Append to `report` (cap bytes) each line of `text` that holds an ungrouped quantity, at most
 * `*left` more; returns how many such lines `text` holds. */
static size_t find_ungrouped(const char *text, const char *label, char *report, size_t cap,
                             size_t *left)
{
    size_t found = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        const int fault_report = !strncmp(line, "emulator fault in kernel ", 25);
        for (size_t i = 0; i < len && !fault_report;) {
            if (!isdigit((unsigned char)line[i])) { i++; continue; }
            size_t n = 0;
            while (i + n < len && isdigit((unsigned char)line[i + n])) n++;
            if (ungrouped(line, i, n, len)) {
                found++;
                if (*left > 0) {
                    size_t used = strlen(report);
                    snprintf(report + used, cap - used, "%s: %.*s\n", label, (int)(len > 160 ? 160 : len),
                             line);
                    (*left)--;
                }
                break;
            }
            i += n;
        }
        line = end ? end + 1 : line + len;
    }
    return found;
}

/* ---- the runs ---------------------------------------------------------------------------------- */

/* `command` with @R replaced by the project root. */
static void expand(const char *command, char *cmd, size_t cap)
{
    const char *root = kvl_path(".");
    size_t o = 0;
    for (const char *c = command; *c && o + 1 < cap; c++) {
        if (c[0] == '@' && c[1] == 'R') {
            o += (size_t)snprintf(cmd + o, cap - o, "%s", root);
            c++;
        } else {
            cmd[o++] = *c;
        }
    }
    cmd[o < cap ? o : cap - 1] = '\0';
}

/* Run `command` (it must exit 0) and count the lines of its stdout with an ungrouped quantity. */
static size_t check_run(const char *command, char *report, size_t cap, size_t *left)
{
    char cmd[8192];
    expand(command, cmd, sizeof cmd);
    int rc = kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP);
    ck_assert_msg(rc == 0, "%s exited %d:\n%.2000s", command, rc, err);
    ck_assert_msg(strlen(out) > 0, "%s printed nothing", command);
    return find_ungrouped(out, command, report, cap, left);
}

static int listed(const char *name, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return 1;
    return 0;
}

static int has_run(const char *name)
{
    for (size_t i = 0; i < sizeof RUNS / sizeof *RUNS; i++)
        if (strcmp(RUNS[i].program, name) == 0) return 1;
    return 0;
}

START_TEST(test_the_rule_flags_quantities_and_passes_codes_seeds_dates_names_and_paths)
{
    static const char *const flagged[] = {
        "1234", "total 41728 B", "448 x 6 = 2688", "KiB/token 2560.00", "-1234 off", "4096x",
        "[1024][4096]", "8x1024 + 8x256", "top 1024 blocks of 8 = 8192 positions", "131072 MiB", "1024K tokens"};
    static const char *const passed[] = {
        "1,234", "41,728 B", "0x7e80", "seed 1234", "--seed 20260", "2026-12-02", "2026-09",
        "3.14159265", "1.5e-1234", "sm_1234", "E4M3", "x1234 y", "build/figs/run1234.svg",
        "cache_2048.npy", "999 tokens", "12,345,678.0001"};
    char report[4096] = "";
    size_t left = MAX_SHOWN;
    for (size_t i = 0; i < sizeof flagged / sizeof *flagged; i++)
        ck_assert_msg(find_ungrouped(flagged[i], "flagged", report, sizeof report, &left) == 1,
                      "\"%s\" passed, but it prints a quantity ungrouped", flagged[i]);
    for (size_t i = 0; i < sizeof passed / sizeof *passed; i++)
        ck_assert_msg(find_ungrouped(passed[i], "passed", report, sizeof report, &left) == 0,
                      "\"%s\" was flagged, but it is grouped or not a quantity", passed[i]);
}
END_TEST

START_TEST(test_every_program_and_notebook_prints_its_quantities_grouped)
{
    static char report[3000];
    report[0] = '\0';
    size_t left = MAX_SHOWN, lines = 0;
    for (size_t i = 0; i < sizeof RUNS / sizeof *RUNS; i++)
        lines += check_run(RUNS[i].command, report, sizeof report, &left);
    char names[MAX_PROGRAMS][32];
    size_t n = kvl_list_programs(names, MAX_PROGRAMS);
    for (size_t i = 0; i < n; i++) {
        if (has_run(names[i]) || listed(names[i], NOT_TEXT, sizeof NOT_TEXT / sizeof *NOT_TEXT)) continue;
        lines += check_run(names[i], report, sizeof report, &left);
    }
    ck_assert_msg(lines == 0, "%zu lines print a quantity of 4+ digits without thousands separators:\n%s",
                  lines, report);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_numbers");
    TCase *tc = tcase_create("grouped");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_the_rule_flags_quantities_and_passes_codes_seeds_dates_names_and_paths);
    tcase_add_test(tc, test_every_program_and_notebook_prints_its_quantities_grouped);
    suite_add_tcase(s, tc);
    return s;
}
