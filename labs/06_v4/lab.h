/* Chapter 6's labs: the functions labs/06_v4/<lab>.c define, each graded by grade.c against the
 * project's definition (ref/v4_compressor.h, ref/core/softmax.h, ref/core/attend.h). Their
 * contracts are written above the stubs. */
#ifndef KVL_LAB_06_H
#define KVL_LAB_06_H

#include <stddef.h>
#include <stdint.h>

#include "rope.h"

void csa_compress(float *entries, const float *x, size_t T, size_t d, size_t c, size_t M,
                  const float *w_kv, const float *w_gate, const float *ape, const float *norm,
                  double eps, const kvl_rope *rope);

void sink_softmax(float *p, const float *s, size_t n, float sigma);

void sink_attend(float *o, const float *q, size_t H, size_t D, const float *Y, const int32_t *sel,
                 size_t K, const float *sigma, float scale);

#endif
