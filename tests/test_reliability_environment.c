/* Reliability of every program (the chapters' programs and kvlayer, the notebooks nb_NN and nb_ipynb,
 * kvbench) against the environment variables it and its libraries read (ref/core/environment.h):
 *  - a value that is not valid is refused before anything else: exit 2, nothing on stdout, exactly one
 *    line on stderr starting with the program's name and naming the variable and its value (control
 *    bytes written \xNN, an empty value as ""), and no line of libgomp's own;
 *  - a thread count beyond the processors here is lowered to their number, said in one line, and the
 *    run goes on (OMP_NUM_THREADS=100000 overflowed libgomp's stack at the first parallel region);
 *  - a valid value changes nothing the program prints;
 *  - replay refuses a TMPDIR it cannot make its directory in, or too long for its files' paths, the
 *    same way, by name. */
#define _GNU_SOURCE   /* sched_getaffinity */
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

#define CAP (1 << 16)

static char out[CAP], err[CAP], plain[CAP];

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* The processors this process may run on, as the programs count them. */
static size_t processors_here(void)
{
    cpu_set_t set;
    ck_assert(sched_getaffinity(0, sizeof set, &set) == 0);
    return (size_t)CPU_COUNT(&set);
}

typedef struct {
    const char *name;
    const char *value;   /* as the shell's single quotes hold it */
    const char *shown;   /* how the refusal writes it */
} setting;

/* Grouped by variable: every program is run with the first of each, the first program with all. */
static const setting REFUSED[] = {
    {"OMP_NUM_THREADS", "0", "0"},           {"OMP_NUM_THREADS", "abc", "abc"},
    {"OMP_NUM_THREADS", "", "\"\""},         {"OMP_NUM_THREADS", "2,", "2,"},
    {"OMP_NUM_THREADS", " 2", " 2"},         {"OMP_NUM_THREADS", "-1", "-1"},
    {"OMP_NUM_THREADS", "1\n2", "1\\x0a2"},  {"OPENBLAS_NUM_THREADS", "0", "0"},
    {"OPENBLAS_NUM_THREADS", "2,2", "2,2"},  {"OMP_PROC_BIND", "bogus", "bogus"},
    {"OMP_PROC_BIND", "", "\"\""},           {"OMP_PROC_BIND", "close,true", "close,true"},
    {"OMP_DYNAMIC", "maybe", "maybe"},       {"KVL_ISA", "bogus", "bogus"},
    {"KVL_ISA", "avx2\033[31m", "avx2\\x1b[31m"},
};

START_TEST(test_an_invalid_environment_value_is_refused_in_one_line_before_any_output)
{
    char names[64][32];
    const size_t n = kvl_list_programs(names, 64);
    for (size_t p = 0; p < n; p++)
        for (size_t s = 0; s < sizeof REFUSED / sizeof *REFUSED; s++) {
            const setting *v = &REFUSED[s];
            if (p > 0 && s > 0 && !strcmp(v->name, REFUSED[s - 1].name)) continue;
            char cmd[4096], want[4096];
            snprintf(cmd, sizeof cmd, "env '%s=%s' %s --help", v->name, v->value, names[p]);
            snprintf(want, sizeof want, "%s: %s=%s: ", names[p], v->name, v->shown);
            const int rc = kvl_run(cmd, "", out, CAP, err, CAP);
            ck_assert_msg(rc == 2, "%s: exit %d, want 2 (stderr: %.300s)", cmd, rc, err);
            ck_assert_msg(out[0] == '\0', "%s: printed to stdout: %.200s", cmd, out);
            ck_assert_msg(count_lines(err) == 1 && strncmp(err, want, strlen(want)) == 0,
                          "%s: stderr is not one line starting \"%s\": %s", cmd, want, err);
        }
}
END_TEST

/* The runs that start OpenMP's threads and OpenBLAS's, each at a size that takes a fraction of a second. */
static const char *const THREADED[] = {"mla_cost --contexts 64 --repeats 1", "dsa_cost --contexts 1K --no-timing",
                                       "v4_cache --tokens 128 --replay-window 2", "kvtable"};

START_TEST(test_a_thread_count_beyond_the_processors_is_lowered_and_said_once)
{
    const size_t most = processors_here();
    static const char *const vars[] = {"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"};
    for (size_t i = 0; i < sizeof THREADED / sizeof *THREADED; i++)
        for (size_t k = 0; k < 2; k++) {
            char cmd[256], want[256];
            snprintf(cmd, sizeof cmd, "%s=100000 %s", vars[k], THREADED[i]);
            snprintf(want, sizeof want, "%.*s: %s=100000 is more than the %zu processor%s here; using %zu\n",
                     (int)strcspn(THREADED[i], " "), THREADED[i], vars[k], most, most == 1 ? "" : "s", most);
            const int rc = kvl_run(cmd, "", out, CAP, err, CAP);
            ck_assert_msg(rc == 0, "%s: exit %d, want 0 (stderr: %.300s)", cmd, rc, err);
            ck_assert_msg(out[0] != '\0', "%s: printed nothing", cmd);
            ck_assert_msg(strcmp(err, want) == 0, "%s: stderr is \"%s\", not \"%s\"", cmd, err, want);
        }
    /* each count of a list on its own, those within the processors kept as written */
    char cmd[128], want[256];
    snprintf(cmd, sizeof cmd, "OMP_NUM_THREADS=01,100000 kvtable");
    snprintf(want, sizeof want, "kvtable: OMP_NUM_THREADS=01,100000 is more than the %zu processor%s here; using 01,%zu\n",
             most, most == 1 ? "" : "s", most);
    ck_assert_int_eq(kvl_run(cmd, "", out, CAP, err, CAP), 0);
    ck_assert_msg(strcmp(err, want) == 0, "%s: stderr is \"%s\", not \"%s\"", cmd, err, want);
}
END_TEST

static const char *const ACCEPTED[] = {
    "OMP_NUM_THREADS=1",      "OMP_NUM_THREADS=1,1",       "OPENBLAS_NUM_THREADS=1", "OMP_PROC_BIND=TRUE",
    "OMP_PROC_BIND=false",    "OMP_PROC_BIND=close,spread", "OMP_DYNAMIC=False",      "KVL_ISA=baseline",
    "KVL_ISA=",
};

START_TEST(test_a_valid_environment_changes_nothing_a_program_prints)
{
    ck_assert_int_eq(kvl_run("kvtable", "", plain, CAP, err, CAP), 0);
    for (size_t i = 0; i < sizeof ACCEPTED / sizeof *ACCEPTED; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "%s kvtable", ACCEPTED[i]);
        const int rc = kvl_run(cmd, "", out, CAP, err, CAP);
        ck_assert_msg(rc == 0 && err[0] == '\0', "%s: exit %d, stderr %s", cmd, rc, err);
        ck_assert_msg(strcmp(out, plain) == 0, "%s: printed another table", cmd);
    }
}
END_TEST

START_TEST(test_replay_refuses_a_tmpdir_it_cannot_use_by_name)
{
    char long_dir[320];
    snprintf(long_dir, sizeof long_dir, "/tmp/%0300d", 0);
    /* missing; a file, not a directory; a file system nobody makes directories in, root included;
     * longer than the prefix files' paths hold */
    const struct { const char *dir, *why; } dirs[] = {{"/nonexistent/kvl", "cannot make a directory"},
                                                       {"/etc/passwd", "cannot make a directory"},
                                                       {"/proc", "cannot make a directory"},
                                                       {long_dir, "longer than"}};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        char cmd[512], want[96];
        snprintf(cmd, sizeof cmd, "TMPDIR='%s' replay --prompts 256 --persist-tokens 256", dirs[i].dir);
        snprintf(want, sizeof want, "replay: TMPDIR=%.60s", dirs[i].dir);
        const int rc = kvl_run(cmd, "", out, CAP, err, CAP);
        ck_assert_msg(rc == 2, "%s: exit %d, want 2 (stderr: %.300s)", cmd, rc, err);
        ck_assert_msg(out[0] == '\0', "%s: printed to stdout: %.200s", cmd, out);
        ck_assert_msg(count_lines(err) == 1 && strncmp(err, want, strlen(want)) == 0 && strstr(err, dirs[i].why),
                      "%s: stderr is not one line starting \"%s\" saying \"%s\": %s", cmd, want, dirs[i].why, err);
    }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reliability_environment");
    TCase *tc = tcase_create("environment");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_an_invalid_environment_value_is_refused_in_one_line_before_any_output);
    tcase_add_test(tc, test_a_thread_count_beyond_the_processors_is_lowered_and_said_once);
    tcase_add_test(tc, test_a_valid_environment_changes_nothing_a_program_prints);
    tcase_add_test(tc, test_replay_refuses_a_tmpdir_it_cannot_use_by_name);
    suite_add_tcase(s, tc);
    return s;
}
