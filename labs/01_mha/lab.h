/* Chapter 1's labs: the functions labs/01_mha/<lab>.c define, each graded by grade.c against
 * ref/core/attend.h's definition. Their contracts are written above the stubs. */
#ifndef KVL_LAB_01_H
#define KVL_LAB_01_H

#include <stddef.h>

void gqa_decode(float *o, const float *q, const float *K, const float *V, size_t T, size_t H,
                size_t Hkv, size_t Dh);

void causal_prefill(float *o, const float *q, const float *K, const float *V, size_t len, size_t S,
                    size_t H, size_t Hkv, size_t Dh);

#endif
