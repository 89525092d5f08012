/* The notebooks in Jupyter: the project's kernel (notebooks_c/kernel/kvl_kernel.py) driven as Jupyter
 * drives it, against what the notebook programs print themselves.
 *
 * Where a python3 imports nbclient and ipykernel (Debian's python3-nbclient and python3-ipykernel, which
 * make deps installs), the kernelspec is installed into a temporary JUPYTER_PATH, run by that python3,
 * and tests/jupyter/check_kernel.py drives it: every notebook, executed cell by cell through nbclient,
 * shows in each code cell exactly the outputs nb_NN --cells gave that cell (the .ipynb nb_ipynb makes of
 * them), text that the committed rendering chapters/NN_name/notebook.md holds too; a cell whose printf
 * changed shows its new text and not its old; a cell sent again with its cellId replaces its earlier
 * version; a failing cell shows the compiler's or the program's message and is not kept. The kernel
 * builds against this suite's own build ($KVL_BIN's parent, sanitized when this suite is). Elsewhere
 * the suite says in one line that it is skipped, and passes. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NOTEBOOKS 16
#define OUT_CAP (1 << 20)

/* the make arguments that name this suite's build: SAN=1 when it is sanitized */
#if defined(__SANITIZE_ADDRESS__)
#define SAN_ARG " SAN=1"
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SAN_ARG " SAN=1"
#endif
#endif
#ifndef SAN_ARG
#define SAN_ARG ""
#endif

static char out[OUT_CAP], err[OUT_CAP];

/* a python3 that imports nbclient and ipykernel, or NULL; asked before any test runs */
static const char *python;

static const char *python_with_jupyter(void)
{
    static const char *const candidates[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "%s -c 'import nbclient, ipykernel' >/dev/null 2>&1", candidates[i]);
        if (system(cmd) == 0) return candidates[i];
    }
    return NULL;
}

typedef struct {
    char dir[64];   /* the kernelspec (share/jupyter/) and the converted notebooks */
} jupyter;

/* BUILD for make: $KVL_BIN's parent, relative to the project where it lies inside it */
static void build_dir(char *build, size_t cap)
{
    const char *bin = getenv("KVL_BIN"), *root = kvl_path(".");
    snprintf(build, cap, "%s", bin && *bin ? bin : "build/bin");
    char *slash = strrchr(build, '/');
    if (slash) *slash = '\0';
    const size_t n = strlen(root) - 1;   /* kvl_path(".") is "ROOT/." */
    if (!strncmp(build, root, n) && build[n]) memmove(build, build + n, strlen(build + n) + 1);
}

static void jupyter_open(jupyter *j)
{
    snprintf(j->dir, sizeof j->dir, "/tmp/kvl_jupyter_XXXXXX");
    ck_assert(mkdtemp(j->dir) != NULL);
    char build[4096], cmd[8600];
    build_dir(build, sizeof build);
    snprintf(cmd, sizeof cmd, "%s '%s/notebooks_c/kernel/kvl_kernel.py' install '%s' 'BUILD=%s" SAN_ARG "'",
             python, kvl_path("."), j->dir, build);
    ck_assert_msg(kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP) == 0, "%s failed:\n%s", cmd, err);
}

static void jupyter_close(const jupyter *j)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", j->dir);
    ck_assert(system(cmd) == 0);
}

/* tests/jupyter/check_kernel.py ARGS from the project root, with the kernelspec on JUPYTER_PATH */
static void check_kernel(const jupyter *j, const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && JUPYTER_PATH='%s/share/jupyter' JUPYTER_RUNTIME_DIR='%s/runtime' %s "
             "tests/jupyter/check_kernel.py %s",
             kvl_path("."), j->dir, j->dir, python, args);
    const int rc = kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP);
    ck_assert_msg(rc == 0, "check_kernel.py %s exited %d:\n%.3000s", args, rc, err);
}

/* notebooks_c/NAME.c → dir/NAME.ipynb, with the outputs nb_NN --cells prints */
static void convert(const jupyter *j, const char *name)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "nb_%.2s --cells > '%s/%s.cells' && nb_ipynb '%s/notebooks_c/%s.c' '%s/%s.cells' '%s/%s'",
             name, j->dir, name, kvl_path("."), name, j->dir, name, j->dir, name);
    ck_assert_msg(kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP) == 0, "%s failed:\n%s", cmd, err);
}

/* The notebooks are the chapters with a rendered notebook.md; one per loop index, so that each has the
 * per-test time limit. */
START_TEST(test_every_notebook_cell_shows_in_jupyter_what_its_program_prints)
{
    char names[MAX_NOTEBOOKS][64];
    const size_t n = kvl_list_chapters(names, MAX_NOTEBOOKS, "notebook.md");
    ck_assert_msg(n >= 6, "expected the notebooks of chapters 1-5 and 8, found %zu", n);
    if ((size_t)_i >= n) return;
    jupyter j;
    jupyter_open(&j);
    convert(&j, names[_i]);
    char args[4400];
    snprintf(args, sizeof args, "notebook '%s/%s.ipynb' 'chapters/%s/notebook.md'", j.dir, names[_i], names[_i]);
    check_kernel(&j, args);
    jupyter_close(&j);
}
END_TEST

START_TEST(test_an_edited_cell_shows_its_new_output_and_not_its_old)
{
    char names[MAX_NOTEBOOKS][64];
    ck_assert(kvl_list_chapters(names, MAX_NOTEBOOKS, "notebook.md") > 0);
    jupyter j;
    jupyter_open(&j);
    convert(&j, names[0]);
    char args[4400];
    snprintf(args, sizeof args, "edit '%s/%s.ipynb'", j.dir, names[0]);
    check_kernel(&j, args);
    jupyter_close(&j);
}
END_TEST

START_TEST(test_a_cell_is_replaced_by_its_id_and_a_failing_cell_is_reported_and_not_kept)
{
    jupyter j;
    jupyter_open(&j);
    check_kernel(&j, "cells");
    jupyter_close(&j);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_jupyter");
    TCase *tc = tcase_create("kernel");
    python = python_with_jupyter();
    if (!python) {
        printf("test_course_jupyter: SKIPPED: no python3 imports nbclient and ipykernel "
               "(apt-get install python3-nbclient python3-ipykernel, or make deps)\n");
    } else {
        tcase_add_loop_test(tc, test_every_notebook_cell_shows_in_jupyter_what_its_program_prints, 0, MAX_NOTEBOOKS);
        tcase_add_test(tc, test_an_edited_cell_shows_its_new_output_and_not_its_old);
        tcase_add_test(tc, test_a_cell_is_replaced_by_its_id_and_a_failing_cell_is_reported_and_not_kept);
    }
    suite_add_tcase(s, tc);
    return s;
}
