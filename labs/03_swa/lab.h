/* Chapter 3's labs: the functions labs/03_swa/<lab>.c define, each graded by grade.c against
 * ref/kv_ring.h's ring and ref/swa.h's window rule. Their contracts are written above the stubs. */
#ifndef KVL_LAB_03_H
#define KVL_LAB_03_H

#include <stddef.h>

size_t ring_window(float *out, const float *slots, size_t W, size_t D, size_t T);

void window_attend(float *o, const float *q, const float *K, const float *V, size_t start, size_t S,
                   size_t W, size_t H, size_t Hkv, size_t Dh);

#endif
