/* The CPU backend's lightning-indexer scan: ref/core/index_scan.h's scores, written as products tile by
 * tile. KVL_INDEX_KEY_TILE keys against a block of query rows, whose [rows·HI][tile] dot products (one
 * sgemm) stay inside L2 while they are weighed (the weighing compiled once per instruction set,
 * formats/isa.h), so a long sequence never holds its whole [S·HI][N] product. The keys split into one
 * part per thread (ref/core/linalg.h's kvl_parts), each with its own products and decoded key tile in
 * its thread's scratch (cpu/scratch.h); a part's scores do not depend on the split. The head sum runs in
 * float32, head by head in j order, as the definition's; the dot products are BLAS's, so the two agree
 * to float rounding (tests/test_cpu_index_scan.c). */
#ifndef KVL_INDEX_SCAN_CPU_H
#define KVL_INDEX_SCAN_CPU_H

#include <stddef.h>
#include <stdint.h>

#include "index_scan.h"

/* Keys per tile: 1,024 keys against 64 heads is 256 KiB of dot products. */
#define KVL_INDEX_KEY_TILE 1024

/* kvl_index_scores_ref's and kvl_index_scores_listed_ref's results, for arguments their checks passed. */
int kvl_index_scores_cpu(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t S, size_t HI,
                         size_t start, size_t M);
int kvl_index_scores_listed_cpu(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t HI,
                                const int32_t *at, size_t n);

#endif
