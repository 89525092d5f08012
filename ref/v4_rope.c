#include "v4_rope.h"

void v4_rotate_heads(float *x, size_t S, size_t H, size_t D, const kvl_rope *r, int64_t pos0)
{
    kvl_rope_rotate_heads_interleaved(x, S, H * D, D - r->Dr, H, D, r, pos0);
}

void v4_unrotate_heads(float *x, size_t S, size_t H, size_t D, const kvl_rope *r, int64_t pos0)
{
    kvl_rope_unrotate_heads_interleaved(x, S, H * D, D - r->Dr, H, D, r, pos0);
}
