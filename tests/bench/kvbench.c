/* kvbench: runs the benchmark groups and prints one table (bench.h says how a group is written).
 *
 *   kvbench [GROUP...]     every group, or only those named
 *
 * Exit status: 0; 1 if a group could not run; 2 for an unknown group name. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "timing.h"

typedef struct {
    const char *name;
    const char *about;
    int (*run)(void);
} group;

static const group GROUPS[] = {
    {"ceilings", "this machine's memcpy bandwidth", kvb_group_ceilings},
    {"formats", "element casts and block quantisers over 256 MiB of float32", kvb_group_formats},
};
enum { N_GROUPS = sizeof GROUPS / sizeof GROUPS[0] };

double kvb_median_seconds(void (*run)(void *ctx), void *ctx)
{
    double t[KVB_REPEATS];
    run(ctx);
    for (int r = 0; r < KVB_REPEATS; r++) {
        double start = kvl_seconds();
        run(ctx);
        t[r] = kvl_seconds() - start;
    }
    return kvl_median(t, KVB_REPEATS);
}

double kvb_gbps(size_t bytes, double seconds)
{
    return (double)bytes / seconds * 1e-9;
}

void kvb_print_header(void)
{
    printf("%-9s %-28s %7s %9s %10s %10s %7s %7s  %s\n", "group", "what", "MiB", "ms", "rate", "ceiling", "ratio",
           "target", "verdict");
}

void kvb_print_row(const kvb_row *row)
{
    printf("%-9s %-28s %7.0f %9.2f %5.2f %-4s", row->group, row->what, row->mib, row->seconds * 1e3, row->rate,
           row->unit);
    if (row->ceiling > 0) printf(" %5.2f %-4s %7.3f", row->ceiling, row->unit, row->rate / row->ceiling);
    else printf(" %10s %7s", "-", "-");
    if (row->target > 0) printf(" %7.3f  %s\n", row->target, row->rate / row->ceiling >= row->target ? "PASS" : "BELOW");
    else printf(" %7s  %s\n", "-", "-");
    fflush(stdout);
}

static const group *find_group(const char *name)
{
    for (int g = 0; g < N_GROUPS; g++)
        if (strcmp(name, GROUPS[g].name) == 0) return &GROUPS[g];
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: kvbench [GROUP ...]\n"
               "Measures each GROUP (default: all, in this order) on one thread and prints one table:\n");
    for (int g = 0; g < N_GROUPS; g++) fprintf(f, "  %-9s %s\n", GROUPS[g].name, GROUPS[g].about);
}

/* "kvbench: 'ARG' (argument I): WHAT; groups: ceilings formats" on one line, and the status 2 */
static int bad_argument(const char *arg, int i, const char *what)
{
    fprintf(stderr, "kvbench: '%s' (argument %d): %s; groups:", arg, i, what);
    for (int k = 0; k < N_GROUPS; k++) fprintf(stderr, " %s", GROUPS[k].name);
    fprintf(stderr, "\n");
    return 2;
}

int main(int argc, char **argv)
{
    const group *chosen[N_GROUPS];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        const group *g = find_group(argv[i]);
        if (!g) return bad_argument(argv[i], i, argv[i][0] == '-' ? "unknown option" : "unknown group");
        for (int k = 0; k < n; k++)
            if (chosen[k] == g) return bad_argument(argv[i], i, "group given twice");
        chosen[n++] = g;
    }
    for (; argc == 1 && n < N_GROUPS; n++) chosen[n] = &GROUPS[n];
    omp_set_num_threads(1);          /* every figure is one thread's: OpenMP and OpenBLAS pools alike */
    openblas_set_num_threads(1);
    printf("kvbench: one thread; each time is the median of %d runs after a warm-up; GB/s = 10^9 bytes/s\n",
           KVB_REPEATS);
    for (int g = 0; g < n; g++) printf("  %-9s %s\n", chosen[g]->name, chosen[g]->about);
    kvb_print_header();
    int failed = 0;
    for (int g = 0; g < n; g++) {
        if (chosen[g]->run() == 0) continue;
        fprintf(stderr, "kvbench: group %s could not run: out of memory\n", chosen[g]->name);
        failed = 1;
    }
    return failed;
}
