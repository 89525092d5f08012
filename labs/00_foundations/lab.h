/* Chapter 0's labs: the functions labs/00_foundations/<lab>.c define, each graded by grade.c
 * against ref/core/rope.h's and ref/core/softmax.h's definitions. Their contracts are written
 * above the stubs. */
#ifndef KVL_LAB_00_H
#define KVL_LAB_00_H

#include <stddef.h>
#include <stdint.h>

void rope_rotate(float *x, const float *theta, size_t Dr, int64_t pos, int interleaved);

void yarn_freqs(double *theta, size_t Dr, double base, double s, double L, double beta_fast,
                double beta_slow);

void online_softmax(float *o, const float *s, const float *V, size_t N, size_t Dv);

#endif
