/* Lab solution: how many sequences of T tokens fit on one GPU and one node (the contract is above
 * the stub, labs/09_serving/node_sequences.c). */
#include "lab.h"

#include <math.h>

/* entries a layer allocates for `held` tokens at M tokens per entry: whole pages of them */
static size_t paged_entries(size_t held, size_t M, size_t page)
{
    const size_t entries = (held + M - 1) / M;
    return (entries + page - 1) / page * page;
}

static double sequence_bytes(const kvl_model *m, const kvl_rank_cache *r, size_t page, size_t T)
{
    const size_t held = r->bounded_tokens && T > r->bounded_tokens ? r->bounded_tokens : T;
    double bytes = (double)r->window_bytes_per_sequence;
    for (size_t l = 0; l < m->n_layers; l++) {
        const kvl_layer *y = &m->layers[l];
        if (y->kind == KVL_LAYER_WINDOW || y->kv_source != (int)l) continue;
        const size_t key = y->index_source == (int)l ? r->index_key_bytes : 0;
        bytes += (double)paged_entries(held, y->compress_ratio, page) *
                 (double)(r->main_row_bytes + key);
    }
    return bytes;
}

node_fit node_sequences(const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d,
                        double memory, double activations, double weight_bytes, size_t T)
{
    node_fit f;
    f.budget = memory * (1 - activations) - weight_bytes;
    f.sequence_bytes = sequence_bytes(m, r, d->page, T);
    f.sequences_per_gpu = floor(f.budget / f.sequence_bytes);
    f.sequences_per_node = f.sequences_per_gpu * (double)r->groups_per_node;
    return f;
}
