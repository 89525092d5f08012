/* Lab solution: one copy of a model's cache per token of context (the contract is above the stub,
 * labs/08_arithmetic/per_token.c). */
#include "lab.h"

kv_account per_token(const kvl_model *m, const kv_rows *r)
{
    kv_account a = {0, 0, 0, 0};
    for (size_t l = 0; l < m->n_layers; l++) {
        const kvl_layer *y = &m->layers[l];
        if (y->kind == KVL_LAYER_WINDOW || y->kv_source != (int)l) continue;
        const double M = (double)y->compress_ratio;
        const size_t key = y->index_source == (int)l ? r->index_key : 0;
        a.cache_layers++;
        a.entries_per_token += 1 / M;
        a.bytes_per_token += (double)(r->main_row + key) / M;
    }
    a.bytes_per_entry = a.entries_per_token > 0 ? a.bytes_per_token / a.entries_per_token : 0;
    return a;
}
