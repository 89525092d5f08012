/* Reliability of the chapter programs on configs the loader accepts but the program cannot run, and on
 * an output that cannot be written:
 *  - a config that loads but fails half-way (a head count whose weights do not fit, a head_dim the
 *    cache rows do not hold, a window of 1, the second of two configs broken) exits 2 before the first
 *    line: nothing on stdout, one line on stderr naming the file and the field;
 *  - a config that would run for minutes (a compress ratio of 2^20, an index_topk of 2^24) is refused
 *    the same way, within seconds;
 *  - a run whose stdout is /dev/full exits 1 with one line on stderr;
 *  - a long run names its stage on stderr while it runs (chapters/common/progress.h), leaving stdout as
 *    it is, and says nothing there when stderr is not a terminal and nobody asked.
 * Each config is a copy of the project's with one field changed, in a temporary root handed over as
 * KVL_ROOT (or passed with --config). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "timing.h"

#define CAP (1 << 16)
#define QUICK_SECONDS 10.0   /* a refusal comes at once; the runs refused take minutes or never end */

static char out[CAP], err[CAP];

static const char *const CONFIGS[] = {"ref/configs/deepseek-v3.json", "ref/configs/deepseek-v3.2-exp.json",
                                      "ref/configs/deepseek-v4-flash.json", "ref/configs/deepseek-v4.1-flash.json",
                                      "chapters/03_swa/mistral-7b.json"};
#define N_CONFIGS (sizeof CONFIGS / sizeof *CONFIGS)

/* One change to one config: field set to value, or (field "compress_ratios") every entry equal to
 * `from` set to value. */
typedef struct {
    const char *config;   /* one of CONFIGS */
    const char *field;
    double value;
    double from;
} edit;

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    ck_assert(fputs(text, f) >= 0);
    ck_assert(fclose(f) == 0);
}

static void apply(cJSON *root, const edit *e)
{
    cJSON *item = cJSON_GetObjectItemCaseSensitive(root, e->field);
    ck_assert_msg(item != NULL, "%s has no field %s", e->config, e->field);
    if (!cJSON_IsArray(item)) {
        cJSON_SetNumberValue(item, e->value);
        return;
    }
    int changed = 0;
    cJSON *x;
    cJSON_ArrayForEach(x, item)
        if (x->valuedouble == e->from) cJSON_SetNumberValue(x, e->value), changed = 1;
    ck_assert_msg(changed, "%s: no entry %g in %s", e->config, e->from, e->field);
}

/* root[64]: a new temporary project root holding every config of CONFIGS, e applied to its own. */
static void make_root(char *root, const edit *e)
{
    snprintf(root, 64, "/tmp/kvl_prog_XXXXXX");
    ck_assert(mkdtemp(root) != NULL);
    static const char *const dirs[] = {"ref", "ref/configs", "chapters", "chapters/03_swa"};
    char path[256];
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
        ck_assert(mkdir(path, 0700) == 0);
    }
    for (size_t i = 0; i < N_CONFIGS; i++) {
        char *text = kvl_read_text(kvl_path(CONFIGS[i]));
        ck_assert_msg(text != NULL, "cannot read %s", CONFIGS[i]);
        if (e && !strcmp(e->config, CONFIGS[i])) {
            cJSON *j = cJSON_Parse(text);
            ck_assert(j != NULL);
            apply(j, e);
            free(text);
            text = cJSON_Print(j);
            cJSON_Delete(j);
        }
        snprintf(path, sizeof path, "%s/%s", root, CONFIGS[i]);
        write_file(path, text);
        free(text);
    }
}

static void remove_root(const char *root)
{
    char path[256];
    for (size_t i = 0; i < N_CONFIGS; i++) {
        snprintf(path, sizeof path, "%s/%s", root, CONFIGS[i]);
        unlink(path);
    }
    static const char *const dirs[] = {"chapters/03_swa", "chapters", "ref/configs", "ref"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(path, sizeof path, "%s/%s", root, dirs[i]);
        rmdir(path);
    }
    rmdir(root);
}

typedef struct {
    const char *program;   /* and its arguments; "%s" stands for the edited config's path */
    edit change;
    const char *names;     /* what stderr must say besides the file: the field, its value */
} bad_config;

/* The program, on a root with the change, exits 2 within QUICK_SECONDS, prints nothing, and says one
 * line on stderr that starts with its name and names the edited file and `names`. */
static void expect_refused(const bad_config *b)
{
    char root[64], path[192], args[320], cmd[512];
    make_root(root, &b->change);
    snprintf(path, sizeof path, "%s/%s", root, b->change.config);
    snprintf(args, sizeof args, b->program, path);
    snprintf(cmd, sizeof cmd, "KVL_ROOT='%s' timeout 60 %s", root, args);
    const double t0 = kvl_seconds();
    const int rc = kvl_run(cmd, "", out, CAP, err, CAP);
    const double secs = kvl_seconds() - t0;
    remove_root(root);
    const size_t word = strcspn(b->program, " ");
    size_t lines = 0;
    for (const char *p = err; *p; p++) lines += *p == '\n';
    ck_assert_msg(rc == 2, "%s: exit %d, want 2 (stderr: %.300s)", cmd, rc, err);
    ck_assert_msg(out[0] == '\0', "%s: printed to stdout: %.200s", cmd, out);
    ck_assert_msg(lines == 1 && !strncmp(err, b->program, word) && err[word] == ':',
                  "%s: stderr is not one line starting with the program's name: %s", cmd, err);
    ck_assert_msg(strstr(err, path) != NULL, "%s: stderr does not name the file %s: %s", cmd, path, err);
    ck_assert_msg(strstr(err, b->names) != NULL, "%s: stderr does not say \"%s\": %s", cmd, b->names, err);
    ck_assert_msg(secs < QUICK_SECONDS, "%s: refused after %.1f s", cmd, secs);
}

#define V3 "ref/configs/deepseek-v3.json"
#define V32 "ref/configs/deepseek-v3.2-exp.json"
#define V4 "ref/configs/deepseek-v4-flash.json"
#define V41 "ref/configs/deepseek-v4.1-flash.json"
#define MISTRAL "chapters/03_swa/mistral-7b.json"

START_TEST(test_configs_that_load_but_cannot_run_are_refused_before_any_output)
{
    static const bad_config cases[] = {
        {"mla_cost --config '%s'", {V3, "n_heads", 65536, 0}, "n_heads) 65536"},
        {"dsa_cost --config '%s'", {V32, "index_n_heads", 1 << 24, 0}, "index_n_heads 16777216"},
        {"dsa_cost --no-timing --config '%s'", {V32, "index_n_heads", 1 << 24, 0}, "index_n_heads 16777216"},
        {"dsa_cost --config '%s'", {V32, "n_heads", 32768, 0}, "n_heads) 32768"},
        {"v4_cache", {V4, "head_dim", 64, 0}, "head_dim = 64"},
        {"v4_cache", {V4, "sliding_window", 1, 0}, "sliding_window (window_size) is 1"},
        {"v41_cache", {V41, "head_dim", 256, 0}, "head_dim = 256"},
        {"v41_cache", {V41, "window_size", 1, 0}, "window_size (sliding_window) is 1"},
        {"replay", {V41, "window_size", 1, 0}, "window_size (sliding_window) is 1"},
        {"replay", {V41, "head_dim", 256, 0}, "head_dim = 256"},
        {"replay", {V4, "head_dim", 64, 0}, "head_dim = 64"},   /* the config it reads second */
        {"swa_reach", {MISTRAL, "max_position_embeddings", 1e9, 0}, "max_position_embeddings is 1000000000"},
        {"swa_reach", {MISTRAL, "num_key_value_heads", 3, 0}, "num_key_value_heads"},
        {"swa_reach", {MISTRAL, "sliding_window", 65536, 0}, "sliding_window is 65536"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_refused(&cases[i]);
}
END_TEST

START_TEST(test_configs_that_would_run_for_minutes_are_refused_at_once)
{
    static const bad_config cases[] = {
        {"v4_cache", {V4, "compress_ratios", 1 << 20, 128}, "compress_ratios entry 3 is 1048576"},
        {"replay", {V4, "compress_ratios", 1 << 20, 128}, "compress_ratios entry 3 is 1048576"},
        {"replay", {V41, "compress_ratios", 1 << 20, 2}, "compress_ratios entry 2 is 1048576"},
        {"v41_cache", {V41, "compress_ratios", 1 << 20, 2}, "compress_ratios entry 2 is 1048576"},
        {"v41_cache", {V41, "index_topk", 1 << 24, 0}, "index_topk is 16777216"},
        {"v4_cache", {V4, "index_topk", 1 << 24, 0}, "index_topk is 16777216"},
        {"mla_cost --repeats 100 --contexts 1024K --config '%s'", {V3, "n_heads", 256, 0}, "TFLOP"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) expect_refused(&cases[i]);
}
END_TEST

/* Each command, its stdout /dev/full, exits 1 with one line on stderr starting with its program's name. */
START_TEST(test_a_stdout_that_cannot_be_written_fails_every_program)
{
    static const char *const cmds[] = {
        "cost --help", "mla_cost --help", "swa_reach --help", "dsa_cost --help", "kvfmt --help",
        "kvfmt row --help", "v4_cache --help", "v41_cache --help", "replay --help", "kvtable --help",
        "nb_ipynb --help",
        "cost --tokens 8", "mla_cost --contexts 64 --repeats 1", "swa_reach --layers 1 --window 2",
        "dsa_cost --contexts 1K --no-timing", "kvfmt table --format e4m3", "kvfmt fp4-demo",
        "v4_cache --tokens 128 --replay-window 2", "v41_cache --tokens 16 --max-context 16",
        "replay --prompts 256 --persist-tokens 256", "kvtable", "kvtable --format json",
    };
    for (size_t i = 0; i < sizeof cmds / sizeof *cmds; i++) {
        char cmd[160];
        snprintf(cmd, sizeof cmd, "{ %s >/dev/full; }", cmds[i]);
        const int rc = kvl_run(cmd, "", out, CAP, err, CAP);
        const size_t word = strcspn(cmds[i], " ");
        size_t lines = 0;
        for (const char *p = err; *p; p++) lines += *p == '\n';
        ck_assert_msg(rc == 1, "%s: exit %d, want 1 (stderr: %.300s)", cmd, rc, err);
        ck_assert_msg(lines == 1 && !strncmp(err, cmds[i], word), "%s: stderr is not one line naming it: %s", cmd, err);
    }
}
END_TEST

/* The programs whose runs can last longer than a few seconds, each at a size that takes a fraction of one. */
static const char *const LONG_RUNS[] = {
    "mla_cost --contexts 64 --repeats 1", "dsa_cost --contexts 1K --no-timing",
    "v4_cache --tokens 128 --replay-window 2", "v41_cache --tokens 16 --max-context 16",
    "replay --prompts 256 --persist-tokens 256",
};

/* s with every run of digits and points replaced by one '#' and its spaces dropped: a report with its
 * timings, and the padding that aligns them, taken out. */
static int numeral(char c) { return (c >= '0' && c <= '9') || c == '.'; }

static void without_numbers(char *s)
{
    char *w = s;
    for (const char *r = s; *r;) {
        if (*r == ' ') {
            r++;
            continue;
        }
        if (!numeral(*r)) {
            *w++ = *r++;
            continue;
        }
        while (numeral(*r)) r++;
        *w++ = '#';
    }
    *w = '\0';
}

static char quiet[CAP];

START_TEST(test_a_long_run_names_its_stage_on_stderr_and_leaves_stdout_as_it_is)
{
    for (size_t i = 0; i < sizeof LONG_RUNS / sizeof *LONG_RUNS; i++) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "KVL_PROGRESS=0 %s", LONG_RUNS[i]);
        ck_assert_msg(kvl_run(cmd, "", quiet, CAP, err, CAP) == 0 && !*err, "%s: %s", cmd, err);
        snprintf(cmd, sizeof cmd, "KVL_PROGRESS=1 KVL_PROGRESS_SECONDS=0.001 %s", LONG_RUNS[i]);
        ck_assert_msg(kvl_run(cmd, "", out, CAP, err, CAP) == 0, "%s: %s", cmd, err);
        without_numbers(quiet);
        without_numbers(out);
        ck_assert_msg(!strcmp(out, quiet), "%s: stdout differs from the run without progress", cmd);
        const size_t word = strcspn(LONG_RUNS[i], " ");
        const int full = strlen(err) == CAP - 1;   /* a slow machine's many lines: the last one cut */
        size_t lines = 0;
        for (char *line = err, *end; *line; line = end + 1, lines++) {
            end = strchr(line, '\n');
            if (!end && full) break;
            ck_assert_msg(end != NULL, "%s: stderr does not end its line: %s", cmd, line);
            *end = '\0';
            const char *stage = line + word + 2;
            ck_assert_msg(!strncmp(line, LONG_RUNS[i], word) && !strncmp(line + word, ": ", 2) &&
                              strstr(stage, " (") && !strcmp(end - 3, " s)"),
                          "%s: not a progress line \"PROGRAM: STAGE (T s)\": %s", cmd, line);
        }
        ck_assert_msg(lines > 0, "%s: no progress line at a 1 ms interval", cmd);
    }
}
END_TEST

START_TEST(test_progress_stays_off_when_stderr_is_not_a_terminal)
{
    for (size_t i = 0; i < sizeof LONG_RUNS / sizeof *LONG_RUNS; i++) {
        char cmd[200];
        snprintf(cmd, sizeof cmd, "KVL_PROGRESS_SECONDS=0.001 %s", LONG_RUNS[i]);
        ck_assert_msg(kvl_run(cmd, "", out, CAP, err, CAP) == 0, "%s: %s", cmd, err);
        ck_assert_msg(!*err, "%s: stderr is a file, yet it printed: %.200s", cmd, err);
    }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reliability_programs");
    TCase *tc = tcase_create("runs");
    tcase_add_test(tc, test_configs_that_load_but_cannot_run_are_refused_before_any_output);
    tcase_add_test(tc, test_configs_that_would_run_for_minutes_are_refused_at_once);
    tcase_add_test(tc, test_a_stdout_that_cannot_be_written_fails_every_program);
    tcase_add_test(tc, test_a_long_run_names_its_stage_on_stderr_and_leaves_stdout_as_it_is);
    tcase_add_test(tc, test_progress_stays_off_when_stderr_is_not_a_terminal);
    suite_add_tcase(s, tc);
    return s;
}
