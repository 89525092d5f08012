/* The backend: who runs the arithmetic a module reaches for.
 *
 * A module (ref/mla.c, ref/v4.c, …) writes its step in the paper's names and calls a handful of
 * kernels for the heavy arithmetic: the float products (ref/core/linalg.h), decode attention
 * (ref/core/attend.h) and the lightning indexer's scan (ref/core/index_scan.h). Each kernel checks its
 * arguments, then runs the backend in use:
 *
 *   ref   the definitions beside each kernel: plain loops, or one BLAS call per product (the default)
 *   cpu   cpu/: the same functions tiled, split over threads and vectorised (cpu/backend_cpu.h)
 *
 * The CUDA twins (cuda/) are a third backend with their own entry points, since their data lives on
 * the device. Every backend returns the definition's result to float rounding; tests/test_cpu_*.c hold
 * the CPU backend to it, kernel by kernel and module by module.
 *
 * A program chooses once, before its first step (cpu/backend_cpu.h's kvl_backend_choose: the CPU
 * backend unless KVL_BACKEND=ref); a test names the backend it runs. Not to be switched while a step
 * runs on another thread. */
#ifndef KVL_BACKEND_H
#define KVL_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "attend.h"

typedef struct {
    const char *name; /* "ref", "cpu" */
    int (*matmul_abt)(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
    int (*matmul_ab)(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
    int (*matvec)(float *y, const float *W, const float *x, size_t N, size_t K);
    int (*attend)(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows, const kvl_attend_rows *r,
                  float scale, const float *sigma, const kvl_attend_then *then);
    int (*index_scores)(float *scores, const float *q, const float *w, const kvl_row_tiles *k, size_t S, size_t HI,
                        size_t start, size_t M);
    int (*index_scores_listed)(float *scores, const float *q, const float *w, const kvl_row_tiles *k, size_t HI,
                               const int32_t *at, size_t n);
    int (*attend_chunk_head)(float *o, const float *q, const float *k, const float *v, const kvl_chunk_head *c);
} kvl_backend;

/* The definitions. */
extern const kvl_backend kvl_backend_ref;

/* The backend the kernels run (kvl_backend_ref until a program chooses), and a new one (NULL: ref). */
const kvl_backend *kvl_backend_in_use(void);
void kvl_backend_use(const kvl_backend *b);

#endif
