/* kvbench's command line, without running a measurement: the groups it lists, and that a missing or
 * unwritable --out folder and an unknown group stop it before anything is measured (exit 2 for what
 * the command line gets wrong, 1 for a folder it cannot write). `make bench` runs the measurements.
 * kvbench --spread over tables written here: which runs qualify, which rows it calls STEADY, and the
 * tables it refuses.
 *
 * And the bench's arithmetic (tests/bench/stats.c) on numbers made up here: a step's roofline against
 * its definition, the ratio of a step timed in pairs with its ceiling, the quartiles of those ratios
 * and the verdict they give; the ratio of a peer's time to the C step's timed around it; a figure's
 * spread over runs, which runs qualify and a row's verdict over them. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "rng.h"

#define CAP 8192

static int run(const char *cmdline, char *out, char *err)
{
    return kvl_run(cmdline, NULL, out, CAP, err, CAP);
}

START_TEST(test_help_lists_every_group)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(run("kvbench --help", out, err), 0);
    /* each group on its own line ("  NAME  about"): a name inside another's description does not count */
    const char *groups[] = {"\n  ceilings ", "\n  formats ", "\n  decode ", "\n  peer ", "\n  v41 ",
                            "\n  native ",   "\n  prefill ", "\n  recheck ", "--out DIR"};
    for (size_t i = 0; i < sizeof groups / sizeof groups[0]; i++)
        ck_assert_msg(strstr(out, groups[i]), "kvbench --help does not mention %s:\n%s", groups[i], out);
}
END_TEST

START_TEST(test_out_without_a_folder_exits_2)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(run("kvbench --out", out, err), 2);
    ck_assert_msg(strstr(err, "'--out' (argument 1): needs a folder"), "stderr: %s", err);
    ck_assert_str_eq(out, "");
}
END_TEST

START_TEST(test_unwritable_out_folder_exits_1_before_measuring)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(run("kvbench --out /nonexistent/kvbench ceilings", out, err), 1);
    ck_assert_msg(strstr(err, "/nonexistent/kvbench/results.md: cannot create"), "stderr: %s", err);
    ck_assert_msg(!strstr(out, "ceilings "), "measured before failing:\n%s", out);
}
END_TEST

START_TEST(test_unknown_group_after_out_exits_2)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(run("kvbench --out /tmp decod", out, err), 2);
    ck_assert_msg(strstr(err, "'decod' (argument 3): unknown group"), "stderr: %s", err);
}
END_TEST

/* Ratios computed two ways in double agree to a few ulps of 1. */
#define RATIO_TOL 1e-12

/* Quartiles of n = 4k + 1 values fall on order statistics: the (n−1)/4-th, (n−1)/2-th and 3(n−1)/4-th
 * smallest, which the test finds by counting, not by sorting. */
static double kth_smallest(const double *x, size_t n, size_t k)
{
    for (size_t i = 0; i < n; i++) {
        size_t below = 0;
        for (size_t j = 0; j < n; j++) below += x[j] < x[i];
        if (below == k) return x[i];
    }
    return NAN;
}

START_TEST(test_quartiles_are_the_order_statistics)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 31);
    for (size_t n = 1; n <= 17; n += 4) {
        double x[17], copy[17];
        for (size_t i = 0; i < n; i++) x[i] = copy[i] = kvl_rng_random(&rng); /* distinct, in no order */
        const kvb_quartiles q = kvb_quartiles_of(copy, n);
        const size_t m = (n - 1) / 4;
        ck_assert_double_eq(q.q1, kth_smallest(x, n, m));
        ck_assert_double_eq(q.median, kth_smallest(x, n, 2 * m));
        ck_assert_double_eq(q.q3, kth_smallest(x, n, 3 * m));
    }
}
END_TEST

START_TEST(test_pair_ratio_is_the_bound_at_the_samples_speed_over_the_time)
{
    /* a step bounded by 2 s at the stored ceiling's 40 GF/s takes 2.5 s beside a sample at 32 GF/s: the
     * bound at 32 GF/s is 2 · 40 / 32 = 2.5 s, so the step ran at its ceiling */
    ck_assert_double_eq_tol(kvb_pair_ratio(2.0, 2.5, 32.0, 40.0), 1.0, RATIO_TOL);
    /* a spell that slows the step and its sample alike by any factor leaves the ratio where it was */
    const double quiet = kvb_pair_ratio(0.3, 0.4, 38.0, 40.0);
    ck_assert_double_eq_tol(quiet, 0.3 * 40.0 / 38.0 / 0.4, RATIO_TOL);
    for (double slow = 1.25; slow < 3; slow += 0.5)
        ck_assert_double_eq_tol(kvb_pair_ratio(0.3, 0.4 * slow, 38.0 / slow, 40.0), quiet, RATIO_TOL);
    /* one the sample does not see (only the step slowed) lowers it by that factor */
    ck_assert_double_eq_tol(kvb_pair_ratio(0.3, 0.8, 38.0, 40.0), quiet / 2, RATIO_TOL);
}
END_TEST

/* A step of bound 1 s on one thread and 0.5 s on two that takes 1.25 and 0.625 s beside samples at the
 * stored speed scales 2×; a neighbour on the second core that slows the two-thread step and its samples
 * alike leaves that, and one the samples do not see lowers it by its factor. */
START_TEST(test_paired_speedup_holds_when_the_second_core_slows_step_and_sample_alike)
{
    const double one = kvb_pair_ratio(1.0, 1.25, 40.0, 40.0);
    ck_assert_double_eq_tol(kvb_paired_speedup(1.0, one, 0.5, kvb_pair_ratio(0.5, 0.625, 80.0, 80.0)), 2.0,
                            RATIO_TOL);
    for (double slow = 1.25; slow < 3; slow += 0.5) {
        const double two = kvb_pair_ratio(0.5, 0.625 * slow, 80.0 / slow, 80.0);
        ck_assert_double_eq_tol(kvb_paired_speedup(1.0, one, 0.5, two), 2.0, RATIO_TOL);
        const double unseen = kvb_pair_ratio(0.5, 0.625 * slow, 80.0, 80.0);
        ck_assert_double_eq_tol(kvb_paired_speedup(1.0, one, 0.5, unseen), 2.0 / slow, RATIO_TOL);
    }
}
END_TEST

START_TEST(test_peer_ratio_is_the_base_times_ratio_under_a_steady_drift)
{
    /* a peer that needs 1.5× the C step's time: on a quiet machine the ratio is 1.5, ≥ 1 as C is faster */
    ck_assert_double_eq_tol(kvb_peer_ratio(1.5, 1.0, 1.0), 1.5, RATIO_TOL);
    /* the machine slowing steadily through a round (C 1.0 s before the peer's run, slow·1.0 s after, the
     * peer run at the middle of that drift) leaves the ratio of the base times */
    for (double slow = 1.1; slow < 3; slow += 0.4) {
        const double middle = (1 + slow) / 2;
        ck_assert_double_eq_tol(kvb_peer_ratio(1.5 * middle, 1.0, slow), 1.5, RATIO_TOL);
        ck_assert_double_eq_tol(kvb_peer_ratio(1.5 * middle, slow, 1.0), 1.5, RATIO_TOL); /* and speeding up */
    }
    /* a peer faster than C reads below 1 */
    ck_assert(kvb_peer_ratio(0.8, 1.0, 1.0) < 1);
}
END_TEST

START_TEST(test_spread_past_the_limit_is_unsteady_whatever_the_ratio)
{
    const double wide = 1.01 * KVB_UNSTEADY_SPREAD, narrow = 0.99 * KVB_UNSTEADY_SPREAD;
    ck_assert(kvb_unsteady((kvb_quartiles){0.9 - wide / 2, 0.9, 0.9 + wide / 2}));
    ck_assert(!kvb_unsteady((kvb_quartiles){1 - narrow / 2, 1, 1 + narrow / 2}));
    /* the limit is a fraction of the median: the same width is steady around a larger ratio */
    ck_assert(!kvb_unsteady((kvb_quartiles){2 - wide / 2, 2, 2 + wide / 2}));
    /* rate 9 over ceiling 10: ratio 0.9 against targets 0.8 (pass) and 0.95 (below) */
    const kvb_row pass = {"g", "w", 1, 1, 9, "GF/s", 10, 0.8, 0, 0, 0};
    const kvb_row below = {"g", "w", 1, 1, 9, "GF/s", 10, 0.95, 0, 0, 0};
    const kvb_row_more steady = {0.9 - narrow * 0.45, 0.9 + narrow * 0.45, 0, 0};
    const kvb_row_more spread = {0.9 - wide * 0.45, 0.9 + wide * 0.45, 0, 0};
    ck_assert_str_eq(kvb_verdict(&pass, &steady), "PASS");
    ck_assert_str_eq(kvb_verdict(&below, &steady), "BELOW");
    ck_assert_str_eq(kvb_verdict(&pass, &spread), "UNSTEADY");
    ck_assert_str_eq(kvb_verdict(&below, &spread), "UNSTEADY");
    ck_assert_str_eq(kvb_verdict(&pass, NULL), "PASS"); /* a row timed alone has no spread */
    const kvb_row ceiling = {"g", "w", 1, 1, 9, "GF/s", 0, 0, 0, 0, 0};
    ck_assert_str_eq(kvb_verdict(&ceiling, &spread), "-");
}
END_TEST

START_TEST(test_fma_roofline_sums_each_phases_larger_bound)
{
    /* three phases: a weight stream (memory-bound), products at GQA's shape, products at MLA's */
    const kvb_step s = {.group = "g", .step = "s", .phase = {{1e9, 4e9, KVB_SGEMM_MLA},
                                                             {8e9, 1e9, KVB_SGEMM_GQA},
                                                             {30e9, 2e9, KVB_SGEMM_MLA}},
                        .compute_target = 0.8, .memory_target = 0.75};
    const double peak = 50, scan = 16;
    double at_peak[KVB_SGEMM_SHAPES], sgemm[KVB_SGEMM_SHAPES];
    for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++) at_peak[k] = peak, sgemm[k] = 40;
    sgemm[KVB_SGEMM_GQA] = 10;
    double want = 0, want_compute = 0, want_allowed = 0;
    for (size_t i = 0; i < 3; i++) {
        const double flop_s = s.phase[i].flop * 1e-9 / peak, bytes_s = s.phase[i].bytes * 1e-9 / scan;
        want += fmax(flop_s, bytes_s);
        want_compute += flop_s >= bytes_s ? flop_s : 0;
        want_allowed += flop_s >= bytes_s ? flop_s / 0.8 : bytes_s / 0.75;
    }
    const kvb_bound b = kvb_bound_at(&s, at_peak, scan);
    ck_assert_double_eq_tol(b.seconds, want, RATIO_TOL);
    ck_assert_double_eq_tol(b.compute_s, want_compute, RATIO_TOL);
    ck_assert_double_eq_tol(b.allowed_s, want_allowed, RATIO_TOL);
    /* the products below the peak at every shape: the sgemm's bound lies above the roofline */
    ck_assert(kvb_bound_at(&s, sgemm, scan).seconds > b.seconds);
}
END_TEST

/* A step with no targets (GQA over bf16, read by its time over float32's instead) is allowed any time, so
 * its row's target, the bound over the time allowed, is 0 (none) and its verdict "-"; its bound is the
 * targeted step's. */
START_TEST(test_step_without_targets_has_no_target_and_the_same_bound)
{
    const kvb_step aimed = {.group = "g", .step = "s", .phase = {{8e9, 1e9, KVB_SGEMM_GQA}}, .compute_target = 0.8,
                            .memory_target = 0.75};
    kvb_step free_step = aimed;
    free_step.compute_target = free_step.memory_target = 0;
    double sgemm[KVB_SGEMM_SHAPES];
    for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++) sgemm[k] = 10;
    const kvb_bound a = kvb_bound_at(&aimed, sgemm, 16), f = kvb_bound_at(&free_step, sgemm, 16);
    ck_assert_double_eq_tol(f.seconds, a.seconds, RATIO_TOL);
    ck_assert_double_eq_tol(a.seconds / a.allowed_s, 0.8, RATIO_TOL);
    ck_assert(isinf(f.allowed_s));
    const kvb_row row = {"g", "s", 1, 1, 5, "GF/s", 10, f.seconds / f.allowed_s, 0, 0, 1};
    ck_assert_double_eq(row.target, 0);
    ck_assert_str_eq(kvb_verdict(&row, NULL), "-");
}
END_TEST

/* Over runs, a spread is each value's distance from the median (not the mean, not the range), less what
 * the printed digits' rounding can account for; a median of 0 has no relative distance to give. */
START_TEST(test_runs_spread_is_the_largest_distance_from_the_median_the_digits_prove)
{
    double a[3] = {1.0, 1.25, 0.95};
    ck_assert_double_eq_tol(kvb_runs_spread(a, 3, 0), 0.25, RATIO_TOL); /* median 1, not the mean 1.0667 */
    double b[4] = {2.0, 1.0, 1.0, 1.0};
    ck_assert_double_eq_tol(kvb_runs_spread(b, 4, 0), 1.0, RATIO_TOL);
    double c[3] = {0.009, 0.007, 0.008}; /* 0.001 apart, printed to 0.001: all of it rounding */
    ck_assert_double_eq_tol(kvb_runs_spread(c, 3, 0.0005), 0.0, RATIO_TOL);
    double d[3] = {0.5, 0.6, 0.55};
    ck_assert_double_eq_tol(kvb_runs_spread(d, 3, 0.0005), 0.049 / 0.55, RATIO_TOL);
    double z[3] = {0, 0, 0}, zn[3] = {0, 0, 0.5};
    ck_assert_double_eq_tol(kvb_runs_spread(z, 3, 0), 0.0, RATIO_TOL);
    ck_assert(isinf(kvb_runs_spread(zn, 3, 0)));
}
END_TEST

/* A run qualifies when every recheck ceiling moved less than 10% from its first measurement, as printed:
 * 9% does, 11% and a printed 0.900 (10.0%) do not, nor a run with no recheck rows. */
START_TEST(test_run_qualifies_when_every_recheck_ceiling_moved_less_than_ten_percent)
{
    const double held[] = {1.09, 0.95, 1.0}, moved[] = {1.0, 0.89, 1.02}, edge[] = {0.900}, inside[] = {1.099};
    ck_assert_double_eq_tol(kvb_recheck_moved(held, 3), 0.09, RATIO_TOL);
    ck_assert_double_eq_tol(kvb_recheck_moved(moved, 3), 0.11, RATIO_TOL);
    ck_assert_int_eq(kvb_run_qualifies(kvb_recheck_moved(held, 3), 0.0005), 1);
    ck_assert_int_eq(kvb_run_qualifies(kvb_recheck_moved(moved, 3), 0.0005), 0);
    ck_assert_int_eq(kvb_run_qualifies(kvb_recheck_moved(edge, 1), 0.0005), 0);
    ck_assert_int_eq(kvb_run_qualifies(kvb_recheck_moved(inside, 1), 0.0005), 1);
    ck_assert(isnan(kvb_recheck_moved(held, 0)));
    ck_assert_int_eq(kvb_run_qualifies(kvb_recheck_moved(held, 0), 0.0005), 0);
}
END_TEST

/* Over three runs whose ceilings held (9%), a row is STEADY when its ratio stays within ±10% of its median
 * and SPREAD when one run is further off; a run whose ceilings moved 11% is left out, both of the count
 * (two that held judge nothing) and of the band (its ratio of 2 spoils nothing). */
START_TEST(test_row_is_steady_when_its_ratio_holds_within_ten_percent_over_three_qualifying_runs)
{
    const double held = kvb_recheck_moved((const double[]){1.09, 0.95}, 2);
    const double moved = kvb_recheck_moved((const double[]){1.11, 1.0}, 2);
    const int q = kvb_run_qualifies(held, 0.0005), nq = kvb_run_qualifies(moved, 0.0005);
    const int three[] = {q, q, q}, two[] = {q, q, nq}, four[] = {q, q, q, nq}, all[] = {q, q, q, q};
    const double within[] = {1.0, 1.09, 0.95}, outside[] = {1.0, 1.12, 0.98}, late[] = {1.0, 1.05, 0.97, 2.0};
    ck_assert_str_eq(kvb_runs_verdict(within, three, 3, 0.0005), "STEADY");
    ck_assert_str_eq(kvb_runs_verdict(outside, three, 3, 0.0005), "SPREAD");
    ck_assert_str_eq(kvb_runs_verdict(within, two, 3, 0.0005), "-");
    ck_assert_str_eq(kvb_runs_verdict(outside, two, 3, 0.0005), "-");
    ck_assert_str_eq(kvb_runs_verdict(late, four, 4, 0.0005), "STEADY");
    ck_assert_str_eq(kvb_runs_verdict(late, all, 4, 0.0005), "SPREAD");
}
END_TEST

/* A table as kvbench --out writes it (its DIR/results.md), rows[n] being the cells after "| ", at a
 * temporary path. */
static void write_results(char *path, size_t cap, const char *const *rows, size_t n)
{
    snprintf(path, cap, "/tmp/kvl_spread_XXXXXX");
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    ck_assert(f != NULL);
    fprintf(f, "# kvbench results\n\nOpenBLAS core X.\n\n%s\n%s\n", KVB_MARKDOWN_HEADER, KVB_MARKDOWN_RULE);
    for (size_t i = 0; i < n; i++) fprintf(f, "| %s |\n", rows[i]);
    fprintf(f, "\nA line after the table.\n");
    ck_assert(fclose(f) == 0);
}

#define ROW(group, what, ratio, fma, roof)                                                               \
    group " | " what " | 1.0 | 2.00 | (1.9 - 2.1) | 1.0 | 5 GF/s | 4 GF/s | " ratio " | - | 0.800 | " fma " | " roof \
          " | PASS"
#define CEILING_ROW(ms, rate) \
    "ceilings | read scan | 960.0 | " ms " | (60.0 - 72.4) | - | " rate " | - | - | - | - | - | - | -"

/* kvbench --spread over the runs' tables, paths[n] freed (unlinked) after; its status, stdout, stderr. */
static int spread_of(char paths[][64], size_t n, char *out, char *err)
{
    char cmd[512] = "kvbench --spread";
    for (size_t i = 0; i < n; i++) snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " %s", paths[i]);
    const int rc = run(cmd, out, err);
    for (size_t i = 0; i < n; i++) unlink(paths[i]);
    return rc;
}

#define RECHECK_ROW(what, ratio)                                                                            \
    "recheck | " what " | 72.0 | 2.00 | (1.9 - 2.1) | 9.1 | 35 GF/s | 33 GF/s | " ratio " | - | - | - | - | -"

/* Four runs: the first three's recheck ceilings moved 9% at most (to 1.090, 0.910), the fourth's 11% (0.890). Over
 * them a row is STEADY when its ratio holds within 10% of its median in the three that qualify, whatever
 * it reads in the fourth and whatever its FMA and roof do, and SPREAD when it moves further; over two
 * qualifying runs and one that does not, no row is judged; a run without recheck rows does not qualify. */
START_TEST(test_spread_judges_a_row_by_its_ratio_over_three_runs_whose_ceilings_held)
{
    static char out[CAP], err[CAP];
    const char *const runs[4][6] = {
        {ROW("decode", "step A 1T", "1.000", "0.500", "0.700"), ROW("decode", "step B 1T", "1.000", "-", "-"),
         ROW("peer", "step A numpy/C (3.1 vs 2.9 ms)", "1.100", "-", "-"), RECHECK_ROW("sgemm MLA", "1.090"),
         RECHECK_ROW("memcpy", "0.950"), CEILING_ROW("65.20", "15.44 GB/s")},
        {ROW("decode", "step A 1T", "1.090", "0.520", "0.400"), ROW("decode", "step B 1T", "1.120", "-", "-"),
         ROW("peer", "step A numpy/C (3.3 vs 2.8 ms)", "1.150", "-", "-"), RECHECK_ROW("sgemm MLA", "0.910"),
         RECHECK_ROW("memcpy", "1.000"), CEILING_ROW("64.00", "15.70 GB/s")},
        {ROW("decode", "step A 1T", "0.950", "0.500", "0.550"), ROW("decode", "step B 1T", "0.990", "-", "-"),
         ROW("peer", "step A numpy/C (2.9 vs 2.9 ms)", "1.000", "-", "-"), RECHECK_ROW("sgemm MLA", "1.000"),
         RECHECK_ROW("memcpy", "1.090"), CEILING_ROW("66.00", "15.20 GB/s")},
        {ROW("decode", "step A 1T", "2.000", "0.900", "0.700"), ROW("decode", "step B 1T", "1.000", "-", "-"),
         ROW("peer", "step A numpy/C (2.9 vs 2.9 ms)", "1.100", "-", "-"), RECHECK_ROW("sgemm MLA", "0.890"),
         RECHECK_ROW("memcpy", "1.000"), CEILING_ROW("66.00", "15.20 GB/s")}};
    char paths[4][64];
    for (size_t r = 0; r < 4; r++) write_results(paths[r], sizeof paths[r], runs[r], 6);
    ck_assert_int_eq(spread_of(paths, 4, out, err), 0);
    ck_assert_msg(err[0] == '\0', "stderr: %s", err);
    char line[512];
    for (size_t r = 0; r < 4; r++) {
        snprintf(line, sizeof line, "| %s | %s | %s |", paths[r], r == 3 ? "11.0%" : "9.0%", r == 3 ? "no" : "yes");
        ck_assert_msg(strstr(out, line), "no line \"%s\" in:\n%s", line, out);
    }
    const char *const want[] = {"| decode | step A 1T | 1.000, 1.090, 0.950, [2.000] | 1.000 | 8.9% | STEADY |",
                                "| decode | step B 1T | 1.000, 1.120, 0.990, [1.000] | 1.000 | 11.9% | SPREAD |",
                                "| peer | step A numpy/C | 1.100, 1.150, 1.000, [1.100] | 1.100 | 9.0% | STEADY |",
                                "| recheck | sgemm MLA | 1.090, 0.910, 1.000, [0.890] | 1.000 | 8.9% | STEADY |",
                                "| recheck | memcpy | 0.950, 1.000, 1.090, [1.000] | 1.000 | 8.9% | STEADY |"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ck_assert_msg(strstr(out, want[i]), "no line \"%s\" in:\n%s", want[i], out);
    ck_assert_msg(!strstr(out, "read scan"), "a row without a ratio was compared:\n%s", out);
    ck_assert_msg(strstr(out, "5 rows with a ratio over 3 qualifying runs of 4: 4 STEADY, 1 SPREAD."), "%s", out);

    /* the same rows, the recheck's read as a decode step's: a run with no recheck rows */
    const char *const bare[] = {ROW("decode", "step A 1T", "1.000", "0.500", "0.700"),
                                ROW("decode", "step B 1T", "1.000", "-", "-"),
                                ROW("peer", "step A numpy/C (3.1 vs 2.9 ms)", "1.100", "-", "-"),
                                ROW("decode", "sgemm MLA", "1.000", "-", "-"),
                                ROW("decode", "memcpy", "1.000", "-", "-"),
                                CEILING_ROW("65.20", "15.44 GB/s")};
    char two[3][64];
    write_results(two[0], sizeof two[0], runs[0], 6);
    write_results(two[1], sizeof two[1], runs[1], 6);
    write_results(two[2], sizeof two[2], runs[3], 6);
    ck_assert_int_eq(spread_of(two, 3, out, err), 0);
    ck_assert_msg(strstr(out, "| decode | step B 1T | 1.000, 1.120, [1.000] | 1.060 | 5.6% | - |"), "%s", out);
    ck_assert_msg(strstr(out, "2 of 3 runs qualify: too few to judge a row"), "%s", out);
    ck_assert_msg(strstr(out, "5 rows with a ratio; 2 of 3 runs qualify, fewer than 3: no row is judged."), "%s", out);
    ck_assert_msg(!strstr(out, "STEADY |") && !strstr(out, "SPREAD |"), "a row was judged:\n%s", out);

    char none[3][64];
    for (size_t r = 0; r < 3; r++) write_results(none[r], sizeof none[r], bare, 6);
    snprintf(line, sizeof line, "| %s | - (no recheck rows) | no |", none[0]);
    ck_assert_int_eq(spread_of(none, 3, out, err), 0);
    ck_assert_msg(strstr(out, line), "no line \"%s\" in:\n%s", line, out);
    ck_assert_msg(strstr(out, "0 of 3 runs qualify"), "%s", out);
}
END_TEST

/* Tables that cannot be paired row for row, or read, stop it before a line is printed: status 2, the
 * file, line and cell on stderr. */
START_TEST(test_spread_refuses_runs_it_cannot_pair_naming_the_file_and_line)
{
    static char out[CAP], err[CAP];
    const char *const first = ROW("decode", "step A 1T", "1.000", "-", "-");
    const char *const good[] = {first, ROW("decode", "step B 1T", "2.0", "-", "-")};
    const char *const renamed[] = {first, ROW("decode", "step C 1T", "2.0", "-", "-")};
    const char *const word[] = {first, ROW("decode", "step B 1T", "fast", "-", "-")};
    const char *const lost[] = {ROW("decode", "step A 1T", "1.000", "0.4", "-"),
                                ROW("decode", "step B 1T", "2.0", "-", "-")};
    const char *const short_row[] = {first, "decode | step B 1T | 2.0"};
    const char *const threads[] = {first, ROW("decode", "step B (saturating) 1T", "2.0", "-", "-")};
    const char *const other_threads[] = {first, ROW("decode", "step B (saturating) 2T", "2.0", "-", "-")};
    const struct {
        const char *const *first, *const *rows;
        const char *want;
    } cases[] = {{good, renamed, "line 8: row 'decode | step C 1T' where "},
                 {threads, other_threads, "line 8: row 'decode | step B (saturating) 2T' where "},
                 {good, word, "line 8: the ratio cell holds 'fast', neither a number of at least 0 nor -"},
                 {good, lost, "line 7: the FMA cell holds a figure where "},
                 {good, short_row, "line 8: 3 cells, a kvbench row has 14"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char paths[2][64];
        write_results(paths[0], sizeof paths[0], cases[i].first, 2);
        write_results(paths[1], sizeof paths[1], cases[i].rows, 2);
        char want[256];
        snprintf(want, sizeof want, "%s %s", paths[1], cases[i].want);
        ck_assert_int_eq(spread_of(paths, 2, out, err), 2);
        ck_assert_msg(strstr(err, want), "case %zu: stderr \"%s\", not \"%s\"", i, err, want);
        ck_assert_msg(out[0] == '\0', "case %zu printed: %s", i, out);
    }
    ck_assert_int_eq(run("kvbench --spread /nonexistent/a.md /nonexistent/b.md", out, err), 2);
    ck_assert_msg(strstr(err, "/nonexistent/a.md"), "stderr: %s", err);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(run("kvbench --spread ONE.md", out, err), 2);
    ck_assert_msg(strstr(err, "'--spread' (argument 1): needs two or more tables (each a run's DIR/results.md)"),
                  "stderr: %s", err);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("bench_kvbench");
    TCase *tc = tcase_create("command_line");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_help_lists_every_group);
    tcase_add_test(tc, test_out_without_a_folder_exits_2);
    tcase_add_test(tc, test_unwritable_out_folder_exits_1_before_measuring);
    tcase_add_test(tc, test_unknown_group_after_out_exits_2);
    tcase_add_test(tc, test_spread_judges_a_row_by_its_ratio_over_three_runs_whose_ceilings_held);
    tcase_add_test(tc, test_spread_refuses_runs_it_cannot_pair_naming_the_file_and_line);
    suite_add_tcase(s, tc);
    TCase *arithmetic = tcase_create("arithmetic");
    tcase_add_test(arithmetic, test_quartiles_are_the_order_statistics);
    tcase_add_test(arithmetic, test_pair_ratio_is_the_bound_at_the_samples_speed_over_the_time);
    tcase_add_test(arithmetic, test_paired_speedup_holds_when_the_second_core_slows_step_and_sample_alike);
    tcase_add_test(arithmetic, test_peer_ratio_is_the_base_times_ratio_under_a_steady_drift);
    tcase_add_test(arithmetic, test_spread_past_the_limit_is_unsteady_whatever_the_ratio);
    tcase_add_test(arithmetic, test_fma_roofline_sums_each_phases_larger_bound);
    tcase_add_test(arithmetic, test_step_without_targets_has_no_target_and_the_same_bound);
    tcase_add_test(arithmetic, test_runs_spread_is_the_largest_distance_from_the_median_the_digits_prove);
    tcase_add_test(arithmetic, test_run_qualifies_when_every_recheck_ceiling_moved_less_than_ten_percent);
    tcase_add_test(arithmetic, test_row_is_steady_when_its_ratio_holds_within_ten_percent_over_three_qualifying_runs);
    suite_add_tcase(s, arithmetic);
    return s;
}
