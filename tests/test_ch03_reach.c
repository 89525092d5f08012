/* chapters/03_swa/swa_reach: the measured reach of a toy windowed stack equals the reach the window rule
 * gives at every depth (every output beyond it bit-identical), over a grid of depths, windows and seeds,
 * and the Mistral 7B figures come out of its config: an 8× smaller cache at 32K, 32·4095 = 131,040
 * positions of reach against the Mistral 7B paper's k·W, 32·4096 = 131,072. */
#include "blas_core.h"
#include "common.h"
#include "config.h"
#include "grouped.h"
#include "status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP 16384
#define MAX_LAYERS 16   /* swa_reach's --layers range, 1 … 16 */
#define MAX_T 1200      /* its largest stack's tokens, 16·63 + 2·64 = 1,136, and room */

START_TEST(test_reach_default_run)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(kvl_run("swa_reach", NULL, out, CAP, err, CAP), 0);
    ck_assert_msg(strstr(out, "theoretical reach L*(W-1) = 4*7 = 28; measured: 28;"), "%s", out);
    ck_assert_msg(strstr(out, "15 of 15 rows bit-identical"), "%s", out);
    ck_assert_msg(strstr(out, "8x smaller"), "%s", out);
    ck_assert_msg(strstr(out, "L*(W-1) = 32*4,095 = 131,040 positions"), "%s", out);
    ck_assert_msg(strstr(out, "L*W     = 32*4,096 = 131,072 positions"), "%s", out);
    ck_assert_msg(strstr(out, "full 4,096 MiB, windowed 512 MiB"), "%s", out);
    ck_assert_msg(strstr(out, "(as the formula says)"), "%s", out);
    ck_assert_str_eq(err, "");
}
END_TEST

START_TEST(test_reach_follows_layers_and_window)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(kvl_run("swa_reach --layers 2 --window 5 --seed 11", NULL, out, CAP, err, CAP), 0);
    ck_assert_msg(strstr(out, "theoretical reach L*(W-1) = 2*4 = 8; measured: 8;"), "%s", out);
    ck_assert_msg(strstr(out, "9 of 9 rows bit-identical"), "%s", out);
}
END_TEST

/* reach[l − 1] = the last position a change to token 0 reaches through l = 1 … L layers of window W over
 * T positions, from the rule alone: query t reads positions max(0, t − W + 1) … t, so output t of a
 * layer moves if any input it reads moved. */
static void reach_by_rule(size_t *reach, size_t L, size_t W, size_t T)
{
    static unsigned char moved[MAX_T], next[MAX_T];
    ck_assert(T <= MAX_T);
    memset(moved, 0, sizeof moved);
    moved[0] = 1;
    for (size_t l = 0; l < L; l++) {
        reach[l] = 0;
        for (size_t t = 0; t < T; t++) {
            next[t] = 0;
            for (size_t j = t + 1 > W ? t + 1 - W : 0; j <= t; j++) next[t] |= moved[j];
            if (next[t]) reach[l] = t;
        }
        memcpy(moved, next, T);
    }
}

/* Runs swa_reach at L, W and seed (with `env` before it, "" for none) and holds every depth's row to
 * the rule: the measured reach equals reach_by_rule's, the last output token 0's change moved end to
 * end is not beyond it, and every output beyond the top layer's reach is bit-identical. */
static void expect_reach_by_rule(const char *env, size_t L, size_t W, size_t seed)
{
    static char out[CAP], err[CAP], cmd[160];
    const size_t T = L * (W - 1) + 2 * W;
    size_t reach[MAX_LAYERS];
    reach_by_rule(reach, L, W, T);
    snprintf(cmd, sizeof cmd, "%s swa_reach --layers %zu --window %zu --seed %zu", env, L, W, seed);
    ck_assert_msg(kvl_run(cmd, NULL, out, CAP, err, CAP) == 0, "%s: %s", cmd, err);
    ck_assert_str_eq(err, "");
    const char *p = strstr(out, "effective reach\n");
    ck_assert_msg(p != NULL, "%s: %s", cmd, out);
    p += strlen("effective reach\n");
    for (size_t l = 1; l <= L; l++) {
        size_t depth, claim, measured, last, effective;
        int used = 0;
        ck_assert_msg(sscanf(p, "%zu %zu %zu %zu %zu%n", &depth, &claim, &measured, &last, &effective, &used) == 5,
                      "%s: depth %zu: %s", cmd, l, p);
        p += used;
        ck_assert_msg(depth == l && claim == reach[l - 1] && measured == reach[l - 1] && last <= reach[l - 1],
                      "%s: depth %zu prints %zu %zu %zu %zu; the rule reaches %zu", cmd, l, depth, claim, measured,
                      last, reach[l - 1]);
    }
    char want[96];
    snprintf(want, sizeof want, "%zu of %zu rows bit-identical", T - 1 - reach[L - 1], T - 1 - reach[L - 1]);
    ck_assert_msg(strstr(out, want), "%s: no \"%s\" in %s", cmd, want, out);
}

/* The sizes where the change carried end to end rounds away before the top layer's reach: 16 × 64 with
 * OpenBLAS's AVX-512 kernels, 7 × 63 and 16 × 16 at seed 1 with its AVX2 ones (run with both where the
 * CPU has AVX2). The program measures the reach itself, and exits 0. */
START_TEST(test_reach_measured_where_the_change_rounds_away)
{
    expect_reach_by_rule("", 16, 64, 3);
    static const size_t avx2[][3] = {{7, 63, 3}, {16, 16, 1}};
    for (size_t i = 0; i < sizeof avx2 / sizeof avx2[0]; i++) {
        expect_reach_by_rule("", avx2[i][0], avx2[i][1], avx2[i][2]);
        if (kvl_cpu_features_here().avx2_fma)
            expect_reach_by_rule("OPENBLAS_CORETYPE=Haswell", avx2[i][0], avx2[i][1], avx2[i][2]);
    }
}
END_TEST

/* Depths, windows and seeds across --layers 1 … 16 and --window 2 … 64, the edges included. */
START_TEST(test_reach_equals_the_window_rule_over_a_grid)
{
    static const size_t grid[][3] = {{1, 2, 0},  {1, 64, 1},  {16, 2, 5},  {2, 5, 11}, {3, 64, 7},
                                     {16, 8, 2}, {5, 33, 9},  {9, 17, 4},  {12, 24, 13}, {11, 3, 4294967295u}};
    for (size_t i = 0; i < sizeof grid / sizeof grid[0]; i++) expect_reach_by_rule("", grid[i][0], grid[i][1], grid[i][2]);
}
END_TEST

START_TEST(test_reach_help_and_bad_arguments)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(kvl_run("swa_reach --help", NULL, out, CAP, err, CAP), 0);
    ck_assert_ptr_eq(strstr(out, "usage: swa_reach"), out);
    static const char *const bad[] = {"swa_reach --layers 0", "swa_reach --window 1", "swa_reach --window 65",
                                      "swa_reach --threshold 2", "swa_reach --seed -1", "swa_reach --layers",
                                      "swa_reach extra"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(kvl_run(bad[i], NULL, out, CAP, err, CAP), 2);
        size_t lines = 0;
        for (const char *p = err; *p; p++) lines += *p == '\n';
        ck_assert_msg(lines == 1 && strncmp(err, "swa_reach: ", 11) == 0, "%s: stderr \"%s\"", bad[i], err);
        ck_assert_str_eq(out, "");
    }
}
END_TEST

/* nb_03's V4.1 receptive field: the report's n_win·L/2, with W − 1 per hop, and the whole stack's
 * L·(W − 1), from V4.1-Flash's config. */
START_TEST(test_notebook_prints_v41s_field_by_the_definition)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4.1-flash.json")) == KVL_OK, "%s", kvl_error());
    const double L = (double)m.n_layers, W = (double)m.window;
    char a[200];
    snprintf(a, sizeof a, "n_win*L/2 = %s tokens (%s with W-1 per hop); the full stack L*(W-1) = %s", KVL_GROUPED(W * L / 2),
             KVL_GROUPED((W - 1) * L / 2), KVL_GROUPED((W - 1) * L));
    kvl_model_free(&m);
    const char *const want[] = {a};
    kvl_expect_prints("nb_03", want, 1, "n_win*L/2");
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch03_reach");
    TCase *tc = tcase_create("program");
    tcase_add_test(tc, test_reach_default_run);
    tcase_add_test(tc, test_reach_follows_layers_and_window);
    tcase_add_test(tc, test_reach_measured_where_the_change_rounds_away);
    tcase_add_test(tc, test_reach_equals_the_window_rule_over_a_grid);
    tcase_add_test(tc, test_reach_help_and_bad_arguments);
    tcase_add_test(tc, test_notebook_prints_v41s_field_by_the_definition);
    suite_add_tcase(s, tc);
    return s;
}
