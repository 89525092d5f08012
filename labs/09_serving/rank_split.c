/* Lab: what one GPU of a deployment stores of a model's cache per token (chapter 9, "What it
 * computes").
 *
 *   m                a parsed config: generation, n_kv_heads (Hkv), layers[n_layers]
 * (compress_ratio M, kv_source, index_source: ref/core/config.h) main_row_bytes   one whole entry
 * of the main attention (chapter 8's row: for MHA/GQA, K and V of all Hkv heads, an equal share per
 * head) index_key_bytes  one indexer key (0 where the model has none) d                the
 * deployment: d->gpus in the node, d->tp ranks of attention, d->dp_attention returns rank_share:
 *     kv_heads         MHA/GQA: ceil(Hkv / tp) heads on a rank under tensor-parallel attention (at
 * least one: past tp = Hkv a head is replicated), all Hkv under data-parallel attention; 0 for
 * every other generation main_row_bytes   MHA/GQA: main_row_bytes / Hkv · kv_heads; MLA, DSA, V4,
 * V4.1: the whole row on every rank (one latent, or one shared entry, that every head reads)
 *     bytes_per_token  Σ over the layers that write a cache (kv_source == l, not window-only) of
 *                      (the rank's row + the key where index_source == l) / M; the key is never
 * split groups_per_node  gpus / tp (a tensor-parallel group holds one set of tokens), or gpus under
 *                      data-parallel attention (each rank its own sequences)
 *
 * The grader (make lab-09) compares the four with ref/serving's kvl_rank_cache_of for every config
 * of ref/configs/, chapters 1's and 3's and a 40-head, 8-KV-head model (Qwen2.5-32B's shape, where
 * tp 5 gives a rank 2 heads, not 1) at tp 1 to 16, with and without data-parallel attention: the
 * counts exactly, bytes_per_token within 1e-6 relative (the shared comparison reads float32). */
#include "lab.h"

rank_share rank_split(const kvl_model *m, size_t main_row_bytes, size_t index_key_bytes,
                      const kvl_deployment *d)
{
    (void)m, (void)main_row_bytes, (void)index_key_bytes, (void)d;
    return (rank_share){0, 0, 0, 0};
}
