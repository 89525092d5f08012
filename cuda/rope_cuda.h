/* RoPE on the GPU: the twins of ref/core/rope.h's heads rotations (kvl_rope_rotate_heads_*), every head
 * of a row in one launch (kernel in rope_cuda.cuh). x is a device buffer [T][stride]; the rotary channels
 * of head h start at offset + h·head_stride, and row t is at position start + t·pos_step. With pos_step 1
 * one call equals the ref's call with the same arguments; pos_step 0 rotates a batch of rows that share
 * one position (B sequences decoding in step). Computed as the ref does: the angle
 * p·θ_i in double, cos and sin in double rounded to float, the pair rotated with one fmaf each. */
#ifndef KVL_ROPE_CUDA_H
#define KVL_ROPE_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "rope.h"

/* pairs (i, i + Dr/2): the MHA module's pairing */
int kvl_rope_rotate_heads_half_split_cuda(float *x, size_t T, size_t stride, size_t offset, size_t n_heads,
                                          size_t head_stride, const kvl_rope *r, int64_t start, size_t pos_step);
/* pairs (2i, 2i+1): DeepSeek MLA's */
int kvl_rope_rotate_heads_interleaved_cuda(float *x, size_t T, size_t stride, size_t offset, size_t n_heads,
                                           size_t head_stride, const kvl_rope *r, int64_t start, size_t pos_step);

#ifdef __cplusplus
}
#endif

#endif
