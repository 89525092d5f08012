/* kvbench: runs the benchmark groups and prints one table (bench.h says how a group is written).
 *
 *   kvbench [--out DIR] [GROUP...]   every group, or only those named; with --out, the table is also
 *                                    written to DIR/results.md and the figures to DIR (DIR must exist)
 *   kvbench --spread RUN.md ...      two or more such tables compared (spread.c): which runs' recheck
 *                                    ceilings held still, and how far each row's ratio moved from its
 *                                    median over those
 *
 * Exit status: 0; 1 if a group could not run or DIR/results.md or DIR/decode.svg cannot be written
 * (ref/core/file_io.h's rule, checked before the first line; DIR/results.md again at the end); 2 for
 * an unknown group name or option, or a table --spread cannot read. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench.h"
#include "blas_core.h"
#include "backend_cpu.h"
#include "environment.h"
#include "file_io.h"
#include "status.h"

typedef struct {
    const char *name;
    const char *about;
    int (*run)(void);
} group;

static const group GROUPS[] = {
    {"ceilings", "this machine's read-scan, copy and random-gather bandwidth, skinny sgemm", kvb_group_ceilings},
    {"formats", "element casts and block quantisers over a stream past the caches", kvb_group_formats},
    {"decode", "each generation's decode attention at 8K, 32K, 128K against its roofline", kvb_group_decode},
    {"peer", "MLA absorbed and GQA decode at 32K against numpy and torch (python3 with numpy)", kvb_group_peer},
    {"v41", "V4.1-Flash's Full, Reindex, Reuse layers at 32K, 128K (f32, native), 1M (native)", kvb_group_v41},
    {"native", "V3.2 and V4-Flash decode over their FP8/FP4 rows through the ref's native paths", kvb_group_native},
    {"prefill", "a 4K-token chunk, one layer, real widths: V3 from empty, V4-Flash after 28K", kvb_group_prefill},
    {"recheck", "the ceilings measured again, against the first: did the machine change?", kvb_group_recheck},
};
enum { N_GROUPS = sizeof GROUPS / sizeof GROUPS[0] };

double kvb_median_seconds(void (*run)(void *ctx), void *ctx)
{
    return kvb_time_runs(run, ctx, KVB_REPEATS).median;
}

double kvb_gbps(size_t bytes, double seconds)
{
    return (double)bytes / seconds * 1e-9;
}

static const group *find_group(const char *name)
{
    for (int g = 0; g < N_GROUPS; g++)
        if (strcmp(name, GROUPS[g].name) == 0) return &GROUPS[g];
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: kvbench [--out DIR] [GROUP ...]\n"
               "       kvbench --spread RUN.md RUN.md ...\n"
               "Measures each GROUP (default: all, in this order) and prints one table; with --out, also\n"
               "DIR/results.md and the figures in DIR. --spread compares such tables of runs on the same\n"
               "code: a run qualifies when its recheck ceilings each moved less than %.0f%%, and a row is\n"
               "STEADY when its ratio stays within %.0f%% of its median over %d qualifying runs or more.\n"
               "The groups:\n",
            KVB_RECHECK_MOVED * 100, KVB_RUNS_SPREAD * 100, KVB_STEADY_RUNS);
    for (int g = 0; g < N_GROUPS; g++) fprintf(f, "  %-9s %s\n", GROUPS[g].name, GROUPS[g].about);
}

/* "kvbench: 'ARG' (argument I): WHAT; groups: ceilings formats" on one line (ARG's control bytes as
 * \xHH), and the status 2 */
/* KVL_OK when every file kvbench writes into --out may be written (ref/core/file_io.h), checked
 * before the first line so that a run of minutes does not end refused. */
static int check_out_dir(void)
{
    static const char *const written[] = {"/results.md", "/decode.svg"};
    for (size_t i = 0; i < sizeof written / sizeof *written; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s%s", kvb_out_dir, written[i]);
        KVL_TRY(kvl_file_out_check(path));
    }
    return KVL_OK;
}

static int bad_argument(const char *arg, int i, const char *what)
{
    char shown[256];
    fprintf(stderr, "kvbench: '%s' (argument %d): %s; groups:", kvl_escape_controls(shown, sizeof shown, arg), i, what);
    for (int k = 0; k < N_GROUPS; k++) fprintf(stderr, " %s", GROUPS[k].name);
    fprintf(stderr, "\n");
    return 2;
}

/* Which kernels the sgemm ceilings and the products ran on (ref/core/blas_core.h), and who chose them. */
static void print_blas_core(void)
{
    const char *core = kvl_blas_core(), *detected = kvl_blas_core_detected(), *asked = getenv("OPENBLAS_CORETYPE");
    char line[320];
    if (detected && asked)
        snprintf(line, sizeof line, "OpenBLAS core %s: its own detection chose %s, narrower than this CPU runs, "
                 "so kvbench restarted with OPENBLAS_CORETYPE=%s%s", core, detected, asked,
                 strcasecmp(core, asked) ? ", which this OpenBLAS (not built for several CPUs) ignored" : "");
    else if (asked)
        snprintf(line, sizeof line, "OpenBLAS core %s (OPENBLAS_CORETYPE=%s, from the environment)", core, asked);
    else
        snprintf(line, sizeof line, "OpenBLAS core %s, its own detection", core);
    printf("kvbench: %s\n", line);
    if (kvb_markdown) fprintf(kvb_markdown, "%s.\n\n", line);
}

/* Which backend the steps ran on (ref/core/backend.h). */
static void print_backend(void)
{
    const char *name = kvl_backend_in_use()->name;
    printf("kvbench: backend %s (KVL_BACKEND=ref times the definitions in ref/, cpu the CPU backend in cpu/)\n", name);
    if (kvb_markdown) fprintf(kvb_markdown, "Backend %s.\n\n", name);
}

/* How long the streams are (bench.h's kvb_stream_bytes). */
static void print_streams(void)
{
    const size_t mib = kvb_stream_bytes() / KVB_MIB;
    const char *what = "twice the largest cache this CPU reports (at least 256)";
    printf("kvbench: streams of %zu MiB, %s\n", mib, what);
    if (kvb_markdown) fprintf(kvb_markdown, "Streams of %zu MiB, %s.\n\n", mib, what);
}

int main(int argc, char **argv)
{
    const group *chosen[N_GROUPS];
    int n = 0;
    if (kvl_environment_check("kvbench")) return 2;
    kvl_backend_choose();
    if (argc > 1 && strcmp(argv[1], "--spread") == 0) {
        if (argc < 4) return bad_argument(argv[1], 1, "needs two or more tables (each a run's DIR/results.md)");
        return kvb_spread_main(argc - 2, argv + 2);
    }
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--out") == 0) {
            if (i + 1 == argc) return bad_argument(argv[i], i, "needs a folder");
            if (!argv[i + 1][0]) return bad_argument(argv[i + 1], i + 1, "--out needs a folder, not an empty name");
            kvb_out_dir = argv[++i];
            continue;
        }
        const group *g = find_group(argv[i]);
        if (!g) return bad_argument(argv[i], i, argv[i][0] == '-' ? "unknown option" : "unknown group");
        for (int k = 0; k < n; k++)
            if (chosen[k] == g) return bad_argument(argv[i], i, "group given twice");
        chosen[n++] = g;
    }
    if (n == 0)
        for (; n < N_GROUPS; n++) chosen[n] = &GROUPS[n];
    char results[1024];
    kvl_file_out markdown;
    if (kvb_out_dir) {
        snprintf(results, sizeof results, "%s/results.md", kvb_out_dir);
        if (check_out_dir() != KVL_OK || kvl_file_out_open(&markdown, results) != KVL_OK) {
            fprintf(stderr, "kvbench: --out %s\n", kvl_error());
            return 1;
        }
        kvb_markdown = markdown.fp;
        fprintf(kvb_markdown, "# kvbench results\n\nEach time is the median of the runs (fastest - slowest); "
                              "ratio = rate / the ceiling that bounds the step.\n\n");
    }
    /* One thread unless a row says 2T (kvb_set_threads): the library's threads are OpenMP's, and
     * OpenBLAS stays on one (cpu/threads.h). */
    kvb_set_threads(1);
    printf("kvbench: one thread unless a row says 2T; each time is the median of at least %d runs (more for "
           "a step under %.0f ms) after %.0f ms of warm-up (min - max); GB/s = 10^9 bytes/s, GF/s = 10^9 flop/s\n"
           "kvbench: a row with (q1 - q3) was timed in pairs with a sample of its ceiling: ratio is the median of the "
           "pairs' ratios, (q1 - q3) their quartiles, UNSTEADY a spread over %.2f of the median; FMA: a compute-bound "
           "step's share of the FMA peak, roof: its FMA roofline over its time, both sampled in the same pairs\n",
           KVB_REPEATS, KVB_TIMED_SECONDS * 1e3 / KVB_REPEATS, KVB_WARM_SECONDS * 1e3, KVB_UNSTEADY_SPREAD);
    print_backend();
    print_blas_core();
    print_streams();
    for (int g = 0; g < n; g++) printf("  %-9s %s\n", chosen[g]->name, chosen[g]->about);
    kvb_print_header();
    int failed = 0;
    for (int g = 0; g < n; g++) {
        if (chosen[g]->run() == 0) continue;
        fprintf(stderr, "kvbench: group %s could not run: out of memory, or a config it needs did not load (its "
                        "message above)\n", chosen[g]->name);
        failed = 1;
    }
    if (kvb_markdown && kvl_file_out_commit(&markdown) != KVL_OK) {
        fprintf(stderr, "kvbench: --out %s\n", kvl_error());
        failed = 1;
    }
    return failed;
}
