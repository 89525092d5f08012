/* kvbench: the benchmark program that `make bench` builds from every tests/bench/ *.c and runs.
 *
 * A group is one function, int kvb_group_<name>(void), in a file of its own: it measures its kernels
 * and prints one table row per measurement with kvb_print_row, each beside a ceiling of this machine
 * measured in the same run (ceilings.c). To add a group, declare it below and add a line to the
 * group table in kvbench.c.
 *
 * Every figure is the median of KVB_REPEATS timed runs after one untimed warm-up run (which also
 * faults the pages in), on the calling thread only. Rows report: a BELOW verdict does not fail the
 * program; a group returns non-zero only when it could not run (out of memory). */
#ifndef KVB_BENCH_H
#define KVB_BENCH_H

#include <stddef.h>

#define KVB_REPEATS 5
#define KVB_MIB ((size_t)1 << 20)
/* The working set of the streaming groups: far past every cache, so rates are DRAM rates. */
#define KVB_STREAM_BYTES (256 * KVB_MIB)

/* Median seconds of KVB_REPEATS calls of run(ctx), after one warm-up call. */
double kvb_median_seconds(void (*run)(void *ctx), void *ctx);

/* One row of the table. rate and ceiling share `unit`; ceiling 0 means the row is a ceiling itself,
 * target 0 means there is no target. The verdict is PASS when rate / ceiling >= target, else BELOW. */
typedef struct {
    const char *group, *what;
    double mib;        /* size of the data processed, MiB */
    double seconds;    /* median time */
    double rate;       /* e.g. GB/s of the data processed */
    const char *unit;
    double ceiling;    /* the ceiling's rate, same unit */
    double target;     /* minimum rate / ceiling */
} kvb_row;

void kvb_print_header(void);
void kvb_print_row(const kvb_row *row);

/* GB/s (10^9 bytes per second) of `bytes` processed in `seconds`. */
double kvb_gbps(size_t bytes, double seconds);

/* ceilings.c: memcpy(dst, src, bytes) on the calling thread, median seconds. */
double kvb_memcpy_seconds(void *dst, const void *src, size_t bytes);

/* The groups, in the order kvbench.c runs them. */
int kvb_group_ceilings(void);   /* ceilings.c */
int kvb_group_formats(void);    /* bench_formats.c */

#endif
