#include "v4_rope.h"

/* Rotary pairs below which a batch stays on one thread: starting a parallel region costs about as much
 * as a few thousand pair rotations (two fused multiply-adds each; a token's cos and sin are computed once
 * for all its heads). One region serves all H heads, where ref/core's row rotation would start one per
 * head. */
#define V4_ROPE_PARALLEL_MIN ((size_t)1 << 14)

void v4_rotate_heads(float *x, size_t S, size_t H, size_t D, const kvl_rope *r, int64_t pos0)
{
    const size_t Dr = r->Dr;
#pragma omp parallel for schedule(static) if (S * H * Dr / 2 >= V4_ROPE_PARALLEL_MIN)
    for (size_t i = 0; i < S; i++)
        kvl_rope_rotate_heads_interleaved(x + i * H * D + D - Dr, H, D, r, pos0 + (int64_t)i);
}

void v4_unrotate_heads(float *x, size_t S, size_t H, size_t D, const kvl_rope *r, int64_t pos0)
{
    const size_t Dr = r->Dr;
#pragma omp parallel for schedule(static) if (S * H * Dr / 2 >= V4_ROPE_PARALLEL_MIN)
    for (size_t i = 0; i < S; i++)
        kvl_rope_unrotate_heads_interleaved(x + i * H * D + D - Dr, H, D, r, pos0 + (int64_t)i);
}
