/* The benchmark's host logic (tests/cuda/bench_cuda.c), run end to end on the emulator at smoke sizes:
 * it measures its ceilings, runs every kernel it benchmarks, and prints one table, its ceilings first and
 * then its rows, whose figures agree with each other (GB/s = MB / ms, fractions of the ceilings, the early exit's speed-up over its two
 * prefill rows). The GPU's own numbers come only from `make cuda-check` on a machine with one. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* The table prints four significant figures: each figure is within 5e-4 of its value, relative, so one
 * recomputed as the quotient of two others agrees with the printed one to 1.5e-3. */
#define PRINT_RTOL 2e-3

static const char *const ROWS[] = {
    "quant mxfp8_e4m3", "quant mxfp4", "quant nvfp4", "quant fp4_v41", "quant fp8_e8m0_rceil/64",
    "quant mxfp4 + finiteness pass", "v32-main row pack (checked)", "mla absorbed, bf16, tensor cores",
    "mla absorbed, fp8, tensor cores", "mla absorbed, bf16, float kernel", "mha decode step (GQA, bf16)",
    "dsa indexer fp8, tensor cores", "dsa indexer fp8, float kernel", "dsa top-k (radix select)",
    "dsa sparse fp8, tensor cores", "dsa sparse fp8, float kernel", "v4 attend, HCA, 584-byte rows",
    "v4 attend, CSA, 584-byte rows", "v4 indexer scores, fp4 keys",
    "v41 candidate pool", "v41 attend, Full, 528/288-B rows", "v41 index scores, Full, f32 keys",
    "v41 index scores, Reindex, pool", "v41 prefill, every layer", "v41 prefill, early exit (CED)",
    "v41 replay step, last W tokens",
};

typedef struct {
    char name[64];
    double mb, ms, gbps, of_copy;
} parsed_row;

/* "| name | shape | MB | ms | GB/s | of copy% | ..." → *r; 0 for the header or a line that is not a row */
static int parse_row(parsed_row *r, const char *line)
{
    char name[64], shape[64];
    if (sscanf(line, "| %63[^|]| %63[^|]| %lf | %lf | %lf | %lf%%", name, shape, &r->mb, &r->ms, &r->gbps,
               &r->of_copy) != 6)
        return 0;
    size_t n = strlen(name);
    while (n && name[n - 1] == ' ') name[--n] = '\0';
    snprintf(r->name, sizeof r->name, "%s", name);
    return 1;
}

START_TEST(test_bench_prints_one_consistent_table_on_the_emulator)
{
    static char out[1 << 16], err[1 << 14];
    ck_assert_int_eq(kvl_run("bench_cuda_emu --smoke", NULL, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strncmp(out, "bench_cuda on CPU emulator", 26) == 0, "the ceilings are not first:\n%s", out);
    ck_assert_msg(strstr(out, "FAILED") == NULL, "a row failed:\n%s", out);
    double copy = 0;
    const char *c = strstr(out, "copy ");
    ck_assert(c && sscanf(c, "copy %lf GB/s", &copy) == 1 && copy > 0);
    double ratio = 0, full_ms = 0, early_ms = 0;
    const char *q = strstr(out, "layers attend) runs ");
    ck_assert_msg(q && sscanf(q, "layers attend) runs %lfx", &ratio) == 1 && ratio > 0, "the early exit's ratio is missing");
    size_t found = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        parsed_row r;
        if (!parse_row(&r, line)) continue;
        for (size_t k = 0; k < sizeof ROWS / sizeof ROWS[0]; k++) found += strcmp(r.name, ROWS[k]) == 0;
        if (strcmp(r.name, "v41 prefill, every layer") == 0) full_ms = r.ms;
        if (strcmp(r.name, "v41 prefill, early exit (CED)") == 0) early_ms = r.ms;
        ck_assert_msg(r.ms > 0 && r.mb > 0, "%s: %g MB in %g ms", r.name, r.mb, r.ms);
        ck_assert_msg(fabs(r.gbps - r.mb / r.ms) <= PRINT_RTOL * r.gbps, "%s: %g GB/s for %g MB in %g ms", r.name,
                      r.gbps, r.mb, r.ms);
        ck_assert_msg(fabs(r.of_copy - 100 * r.gbps / copy) <= PRINT_RTOL * r.of_copy, "%s: %g%% of %g GB/s", r.name,
                      r.of_copy, copy);
        ck_assert_msg(strstr(line, "n/a") || !strstr(line, ">="), "%s: a target judged at smoke sizes", r.name);
    }
    ck_assert_uint_eq(found, sizeof ROWS / sizeof ROWS[0]);
    ck_assert_msg(fabs(ratio - full_ms / early_ms) <= PRINT_RTOL * ratio, "the early exit runs %gx, but its rows take "
                  "%g ms and %g ms", ratio, full_ms, early_ms);
}
END_TEST

START_TEST(test_bench_probe_finds_the_emulator)
{
    char out[256], err[256];
    ck_assert_int_eq(kvl_run("bench_cuda_emu --probe", NULL, out, sizeof out, err, sizeof err), 0);
}
END_TEST

/* No device is not a failure (the table is skipped, saying so); a runtime that cannot use the driver is,
 * with the error on stderr, so that it never reads as "no device". */
START_TEST(test_bench_probe_tells_no_device_from_a_broken_driver)
{
    char out[256], err[512];
    ck_assert_int_eq(kvl_run("KVL_EMU_DEVICE=none bench_cuda_emu --probe", NULL, out, sizeof out, err, sizeof err), 1);
    ck_assert_msg(strstr(out, "no CUDA device") != NULL, "%s", out);
    ck_assert_int_eq(kvl_run("KVL_EMU_DEVICE=broken bench_cuda_emu --probe", NULL, out, sizeof out, err, sizeof err),
                     2);
    ck_assert_msg(out[0] == '\0' && strstr(err, "driver version is insufficient") != NULL, "out \"%s\" err \"%s\"",
                  out, err);
    ck_assert_int_eq(kvl_run("KVL_EMU_DEVICE=broken bench_cuda_emu --smoke", NULL, out, sizeof out, err, sizeof err),
                     2);
    ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "not one line: %s", err);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("cuda_bench");
    TCase *tc = tcase_create("table");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_bench_prints_one_consistent_table_on_the_emulator);
    tcase_add_test(tc, test_bench_probe_finds_the_emulator);
    tcase_add_test(tc, test_bench_probe_tells_no_device_from_a_broken_driver);
    suite_add_tcase(s, tc);
    return s;
}
