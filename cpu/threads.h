/* The CPU backend's threads: OpenMP's, a step split into parts, one per thread.
 *
 * OpenMP owns the threads, and OpenBLAS runs on one: two pools on the same cores spin against each
 * other, OpenBLAS's workers busy-waiting after a call and OpenMP's after a parallel region (the runs
 * behind this are in tests/bench/README.md, "Design measurements"). So a product, an attention step or a
 * scan big enough to share (KVL_SPLIT_MIN_MACS) splits into parts, one single-threaded BLAS call or tile
 * loop per OpenMP thread. OMP_NUM_THREADS, or kvl_set_threads, sets how many threads everything uses. */
#ifndef KVL_THREADS_H
#define KVL_THREADS_H

#include <stddef.h>

/* The threads the library's parallel work uses (OpenMP's), and a new count for what follows. */
int kvl_threads(void);
void kvl_set_threads(int n);

/* Work below this many multiply-adds (a quarter to half a millisecond on one core) stays on one thread:
 * a parallel region costs microseconds on a quiet machine, but a scheduler slice (milliseconds) when
 * another process holds a core. V4's window step (64 heads over 128 rows of 512) is exactly 2^23 and
 * splits. The runs behind the figure: tests/bench/README.md, "Design measurements". */
#define KVL_SPLIT_MIN_MACS ((double)(1 << 23))

/* How many parts a step of `macs` multiply-adds over n rows splits into: the threads (kvl_threads), at
 * most n / min_rows, at least 1; 1 below KVL_SPLIT_MIN_MACS or inside an OpenMP parallel region. */
size_t kvl_parts(size_t n, size_t min_rows, double macs);

/* run(ctx, p) for p = 0 … parts − 1, one OpenMP thread each (parts = 1: on the calling thread), every
 * BLAS call inside on one thread. */
void kvl_run_parts(void (*run)(void *ctx, size_t p), void *ctx, size_t parts);

/* The same for parts that can fail: every part runs, and the result is the code of the lowest-numbered
 * part that failed (KVL_OK if none), its message (kvl_error(), kept per thread) recorded on the calling
 * thread. */
int kvl_run_parts_checked(int (*run)(void *ctx, size_t p), void *ctx, size_t parts);

#endif
