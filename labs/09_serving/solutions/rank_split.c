/* Lab solution: what one GPU of a deployment stores of the cache per token (the contract is above
 * the stub, labs/09_serving/rank_split.c). */
#include "lab.h"

/* KV heads a rank holds: its share of the heads, one at least, all of them for its own sequences */
static size_t rank_heads(size_t Hkv, const kvl_deployment *d)
{
    if (d->dp_attention) return Hkv;
    const size_t h = (Hkv + d->tp - 1) / d->tp;
    return h ? h : 1;
}

rank_share rank_split(const kvl_model *m, size_t main_row_bytes, size_t index_key_bytes,
                      const kvl_deployment *d)
{
    rank_share s = {0, main_row_bytes, 0, d->dp_attention ? d->gpus : d->gpus / d->tp};
    if (m->generation == KVL_GEN_MHA) {
        s.kv_heads = rank_heads(m->n_kv_heads, d);
        s.main_row_bytes = main_row_bytes / m->n_kv_heads * s.kv_heads;
    }
    for (size_t l = 0; l < m->n_layers; l++) {
        const kvl_layer *y = &m->layers[l];
        if (y->kind == KVL_LAYER_WINDOW || y->kv_source != (int)l) continue;
        const size_t key = y->index_source == (int)l ? index_key_bytes : 0;
        s.bytes_per_token += (double)(s.main_row_bytes + key) / (double)y->compress_ratio;
    }
    return s;
}
