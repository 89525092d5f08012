/* kvbench: runs the benchmark groups and prints one table (bench.h says how a group is written).
 *
 *   kvbench [GROUP...]     every group, or only those named
 *
 * Exit status: 0; 1 if a group could not run; 2 for an unknown group name. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "bench.h"

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

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

double kvb_median_seconds(void (*run)(void *ctx), void *ctx)
{
    double t[KVB_REPEATS];
    run(ctx);
    for (int r = 0; r < KVB_REPEATS; r++) {
        double start = now();
        run(ctx);
        t[r] = now() - start;
    }
    for (int i = 1; i < KVB_REPEATS; i++)   /* insertion sort of five numbers */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double tmp = t[j];
            t[j] = t[j - 1];
            t[j - 1] = tmp;
        }
    return t[KVB_REPEATS / 2];
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

int main(int argc, char **argv)
{
    const group *chosen[N_GROUPS];
    int n = 0;
    for (int i = 1; i < argc; i++) {
        const group *g = find_group(argv[i]);
        if (!g) {
            fprintf(stderr, "kvbench: unknown group '%s' (argument %d); groups:", argv[i], i);
            for (int k = 0; k < N_GROUPS; k++) fprintf(stderr, " %s", GROUPS[k].name);
            fprintf(stderr, "\n");
            return 2;
        }
        if (n < N_GROUPS) chosen[n++] = g;
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
