/* Lab: how many sequences of T tokens fit on one GPU and one node (chapter 9, "What it computes"
 * and "The weights beside the cache").
 *
 *   m             a parsed config: n_layers, layers[l] (compress_ratio M, kv_source, index_source)
 *   r             what one rank stores (ref/serving.h, kvl_rank_cache; the rank_split lab computes
 * it): main_row_bytes and index_key_bytes of one entry, window_bytes_per_sequence, bounded_tokens
 * (a sequence keeps at most that many tokens; 0: all of them), groups_per_node d             the
 * deployment: d->page, entries per page memory        bytes of one GPU; `activations` the fraction
 * of it kept for activations weight_bytes  the weights that GPU holds (ref/serving's
 * kvl_rank_weight_bytes) T             tokens of context returns       node_fit: budget memory · (1
 * − activations) − weight_bytes: what the cache gets sequence_bytes      window rows + Σ over the
 * layers that write a cache (kv_source == l, not window-only) of ceil(ceil(held / M) / page) · page
 * entries · (main row + the index key where index_source == l), held = min(T, bounded_tokens) when
 *                         bounded, else T: pages are counted in entries, rounded up per sequence
 *     sequences_per_gpu   floor(budget / sequence_bytes)
 *     sequences_per_node  sequences_per_gpu · groups_per_node
 *
 * The grader (make lab-09) checks them against ref/serving's kvl_fit_of with the budget the serving
 * program computes, for every config of ref/configs/ and chapters 1's and 3's, on 8 GPUs at tp 8
 * and 4, with and without data-parallel attention, pages of 1, 64 and 256, T = 1, 63, 64, 65,
 * 1,000, 131,072 and 1,048,576, GPUs of 80 and 141 GiB: the budget within 1e-6 relative (the shared
 * comparison reads float32), the bytes and the counts exactly (they are integers). */
#include "lab.h"

node_fit node_sequences(const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d,
                        double memory, double activations, double weight_bytes, size_t T)
{
    (void)m, (void)r, (void)d, (void)memory, (void)activations, (void)weight_bytes, (void)T;
    return (node_fit){0, 0, 0, 0};
}
