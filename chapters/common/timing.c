/* The clock and the median mla_cost, dsa_cost and kvbench report. */
#include "timing.h"

#include <stdlib.h>
#include <time.h>

double kvl_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int ascending(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double kvl_median(double *t, size_t n)
{
    qsort(t, n, sizeof *t, ascending);
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}
