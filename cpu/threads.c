#include "threads.h"

#include <cblas.h>
#include <omp.h>
#include <stdio.h>

#include "status.h"

int kvl_threads(void) { return omp_get_max_threads(); }

void kvl_set_threads(int n) { omp_set_num_threads(n > 0 ? n : 1); }

size_t kvl_parts(size_t n, size_t min_rows, double macs)
{
    if (macs < KVL_SPLIT_MIN_MACS || omp_in_parallel()) return 1;
    const int threads = omp_get_max_threads();
    const size_t most = min_rows ? n / min_rows : n;
    size_t parts = threads > 1 ? (size_t)threads : 1;
    if (parts > most) parts = most;
    return parts ? parts : 1;
}

/* OpenBLAS on one thread for good: its pool would otherwise spin between calls on the cores the OpenMP
 * team is about to use (and the team's spinning workers slow its calls), many times the cost of either. */
static void blas_on_one_thread(void)
{
    if (!omp_in_parallel() && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void kvl_run_parts(void (*run)(void *ctx, size_t p), void *ctx, size_t parts)
{
    blas_on_one_thread();
    if (parts <= 1) {
        run(ctx, 0);
        return;
    }
#pragma omp parallel for schedule(static, 1) num_threads((int)parts)
    for (size_t p = 0; p < parts; p++) run(ctx, p);
}

int kvl_run_parts_checked(int (*run)(void *ctx, size_t p), void *ctx, size_t parts)
{
    blas_on_one_thread();
    if (parts <= 1) return run(ctx, 0);
    int rc = KVL_OK;
    size_t failed = parts;
    char why[512] = "";
#pragma omp parallel for schedule(static, 1) num_threads((int)parts)
    for (size_t p = 0; p < parts; p++) {
        int part_rc = run(ctx, p);
        if (part_rc == KVL_OK) continue;
#pragma omp critical(kvl_run_parts_checked)
        if (p < failed) {
            failed = p;
            rc = part_rc;
            snprintf(why, sizeof why, "%s", kvl_error());
        }
    }
    return rc == KVL_OK ? KVL_OK : kvl_fail(rc, "%s", why);
}
