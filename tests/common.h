/* What every Check suite shares: main(), one comparison helper, and a way to run the programs.
 *
 * A suite file defines `Suite *kvl_suite(void)`; main() here runs it and prints Check's summary.
 * Tolerances passed to the comparison are named constants in the test with a one-line derivation
 * (ULPs of the storage format, or a bound scaled by the reduction length), never tuned until green. */
#ifndef KVL_TESTS_COMMON_H
#define KVL_TESTS_COMMON_H

#include <check.h>
#include <stddef.h>

#include "backend.h"
#include "rng.h"

Suite *kvl_suite(void);

/* Per-test time limit in seconds (sanitizer builds run several times slower). */
#define KVL_TEST_TIMEOUT 120

/* Compare got[n] with the oracle want[n]:
 *  1. NaN and ±inf appear at the same positions with the same sign;
 *  2. every finite element satisfies |got − want| ≤ atol + rtol·|want|;
 *  3. the cosine between the finite parts is at least min_cos (pass 0 to skip; an all-zero pair passes).
 * On failure it prints `what`, the worst element (index, got, want, error) and fails the test. */
/* The backends a suite runs a module's steps under (ref/core/backend.h): i = 0 the definitions, 1 the
 * CPU backend, NULL past them. A test that loops over them names the one that failed. */
const kvl_backend *kvl_test_backend(size_t i);

void kvl_expect_close(const char *what, const float *got, const double *want, size_t n,
                      double atol, double rtol, double min_cos);
void kvl_expect_close_f64(const char *what, const double *got, const double *want, size_t n,
                          double atol, double rtol, double min_cos);

/* n floats drawn uniformly from [lo, hi) by rng, in memory the caller frees (a test failure if there is
 * none; n = 0 gives a valid pointer). */
float *kvl_uniform_floats(kvl_rng *rng, size_t n, double lo, double hi);

/* Makes the widest instruction set the CPU runs active again (formats/isa.h), after a test that forced
 * others. */
void kvl_force_widest_isa(void);

/* Run `cmdline` through /bin/sh with `input` (may be NULL) on stdin; capture stdout and stderr
 * into the two buffers (NUL-terminated, truncated to cap) and return the exit status (or -1 if the
 * program died of a signal). Programs are found in $KVL_BIN (set by `make test`), else build/bin. */
int kvl_run(const char *cmdline, const char *input, char *out, size_t out_cap, char *err, size_t err_cap);

/* Run `cmdline` (it must exit 0) and fail unless its output holds each of want[0..n), strings the
 * test formats from the definition; the message names the first one missing and shows the output from
 * `near` on (where that line should be; NULL: from the start), cut short to fit Check's message. */
void kvl_expect_prints(const char *cmdline, const char *const *want, size_t n, const char *near);

/* Run `cmdline` and fail unless it is refused as bad input: exit 2, nothing on stdout, one line on
 * stderr holding `names` (the flag and value, the limit). The line goes to *line (may be NULL), whose
 * storage lives until the next call. */
void kvl_expect_refused(const char *cmdline, const char *names, const char **line);

/* Run `cmdline` with its progress on (KVL_PROGRESS=1, every 0.1 s) for at most `seconds`, and fail
 * unless it reached `stage` (a progress line's text), i.e. passed every check it makes before its
 * first line: a run accepted, its end not awaited. */
void kvl_expect_accepted(const char *cmdline, const char *stage, int seconds);

/* The whole file at path, NUL-terminated, in memory the caller frees; NULL if it cannot be opened. */
char *kvl_read_text(const char *path);

/* Path of a file below the project root ($KVL_ROOT, set by `make test`, else the current directory). */
const char *kvl_path(const char *relative);

/* The course's chapters/NN_name folders that hold the file `holding` (a chapter whose text or
 * exercises are not written yet lacks it): names[0..n) sorted, at most max of them. */
size_t kvl_list_chapters(char names[][64], size_t max, const char *holding);

/* Every program the tree builds, by the Makefile's rules: chapters/X/NAME.c (not common/) is NAME,
 * notebooks_c/NN_name.c is nb_NN, and nb_ipynb and kvbench; names[0..n), at most max of them. */
size_t kvl_list_programs(char names[][32], size_t max);

#endif
