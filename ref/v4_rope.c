#include "v4_rope.h"

void v4_rotate_heads(float *x, size_t S, size_t H, size_t D, const kvl_rope *r, int64_t pos0)
{
    kvl_rope_rotate_heads_interleaved(x, S, H * D, D - r->Dr, H, D, r, pos0);
}

void v4_unrotate_heads(float *x, size_t S, size_t H, size_t D, const kvl_rope *r, int64_t pos0)
{
    kvl_rope_unrotate_heads_interleaved(x, S, H * D, D - r->Dr, H, D, r, pos0);
}

int v4_layer_rope(kvl_rope *r, const kvl_model *m, kvl_layer_kind kind)
{
    const size_t Dr = m->qk_rope_head_dim;
    if (kind == KVL_LAYER_WINDOW) return kvl_rope_init(r, Dr, m->rope.theta);
    const kvl_rope_config *cr = &m->compress_rope;
    if (cr->factor > 1)
        return kvl_rope_init_yarn(r, Dr, cr->theta, cr->factor, cr->original_len, cr->beta_fast, cr->beta_slow);
    return kvl_rope_init(r, Dr, cr->theta);
}
