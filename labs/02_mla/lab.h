/* Chapter 2's labs: the functions labs/02_mla/<lab>.c define, each graded by grade.c against
 * ref/mla.h's absorbed form and ref/core/rope.h's rotation. Their contracts are written above the
 * stubs. */
#ifndef KVL_LAB_02_H
#define KVL_LAB_02_H

#include <stddef.h>
#include <stdint.h>

void absorbed_decode(float *o, const float *q, const float *W_UKV, const float *rows, size_t N,
                     size_t H, size_t Dc, size_t Dnope, size_t Dr, size_t Dv, float scale);

void rope_key(float *rows, const float *theta, size_t T, size_t Dc, size_t Dr, int64_t start);

#endif
