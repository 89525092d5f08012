/* Lab: one copy of a model's cache per token of context (chapter 8, "What it computes").
 *
 *   m          a parsed config: m->layers[n_layers], each with kind, compress_ratio M, kv_source
 * and index_source (ref/core/config.h, kvl_layer) r          the bytes of the model's rows (the
 * cache_rows lab; the grader hands you the right ones) returns    kv_account: cache_layers the
 * layers that write a per-token cache entries_per_token  Σ over them of 1/M bytes_per_token    Σ
 * over them of (main row + index key) / M bytes_per_entry    bytes_per_token / entries_per_token (0
 * when there are no entries)
 *
 * A layer writes a per-token cache when it is its own KV source (layers[l].kv_source == l) and not
 * window-only (kind KVL_LAYER_WINDOW, ratio 0): every layer of MHA, MLA and DSA (M = 1), V4's CSA
 * and HCA layers, V4.1's KV sources; V4.1's other layers read a source's entries and add nothing.
 * Its entry carries the index key only when the layer runs its own indexer over its own entries
 * (layers[l].index_source == l): V4's CSA layers do, its HCA layers do not. Window rows are bounded
 * per sequence and stay out of this sum (the held_gib lab adds them).
 *
 * The grader (make lab-08) checks the four numbers against ref/kvtable's kvl_kv_footprint_of on
 * every config of ref/configs/, chapters 1's and 3's, and edited copies (a third window-only layer
 * in V4-Flash, V4.1-Flash with another KV source, other row layouts and dims): cache_layers
 * exactly, the others within 1e-6 relative, as the shared comparison reads them in float32 (2^-24);
 * a wrong layer set, ratio or key moves them by 1e-3 or more. */
#include "lab.h"

kv_account per_token(const kvl_model *m, const kv_rows *r)
{
    (void)m, (void)r;
    return (kv_account){0, 0, 0, 0};
}
