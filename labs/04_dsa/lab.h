/* Chapter 4's labs: the functions labs/04_dsa/<lab>.c define, each graded by grade.c against
 * ref/core/index_scan.h's and ref/core/topk.h's definitions. Their contracts are written above the
 * stubs. */
#ifndef KVL_LAB_04_H
#define KVL_LAB_04_H

#include <stddef.h>
#include <stdint.h>

void index_scores(float *I, const float *q, const float *w, const float *k, size_t S, size_t N,
                  size_t HI, size_t DI, size_t start);

void topk(int32_t *sel, const float *I, size_t N, size_t K);

#endif
