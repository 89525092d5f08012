/* Lab solution: which layer's cache each V4.1 layer reads (the contract is above the stub,
 * labs/07_v41/layer_sources.c). */
#include "lab.h"

static int listed(const size_t *v, size_t n, size_t l)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == l) return 1;
    return 0;
}

int layer_sources(kvl_layer *map, const size_t *ratio, size_t L, const size_t *kv, size_t n_kv,
                  const size_t *ix, size_t n_ix)
{
    int latest_kv = -1, latest_ix = -1;
    for (size_t l = 0; l < L; l++) {
        const int own_kv = listed(kv, n_kv, l), own_ix = listed(ix, n_ix, l);
        if (own_kv && !own_ix) return -1;
        if (ratio[l] == 0) {
            if (own_kv || own_ix) return -1;
            map[l] = (kvl_layer){KVL_LAYER_WINDOW, 0, -1, -1};
            continue;
        }
        if (own_kv) latest_kv = (int)l;
        if (own_ix) latest_ix = (int)l;
        if (latest_kv < 0 || ratio[l] != ratio[latest_kv]) return -1;
        const kvl_layer_kind kind =
            own_kv ? KVL_LAYER_FULL : own_ix ? KVL_LAYER_REINDEX : KVL_LAYER_REUSE;
        map[l] = (kvl_layer){kind, ratio[l], latest_kv, latest_ix};
    }
    return 0;
}
