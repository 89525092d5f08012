/* Chapter 9's labs: the functions labs/09_serving/<lab>.c define, each graded by grade.c against
 * ref/serving.h's definition for the same config and deployment. Their contracts are written above
 * the stubs. */
#ifndef KVL_LAB_09_H
#define KVL_LAB_09_H

#include <stddef.h>

#include "config.h"
#include "serving.h"

/* What one GPU (one rank) of a deployment stores of the cache. */
typedef struct {
    size_t kv_heads;         /* KV heads the rank holds (MHA/GQA); 0 for a latent or shared row */
    size_t main_row_bytes;   /* one entry of the main attention on the rank */
    double bytes_per_token;  /* Σ over the layers that write a cache of (row + index key) / M */
    size_t groups_per_node;  /* ranks of the node holding different tokens */
} rank_share;

rank_share rank_split(const kvl_model *m, size_t main_row_bytes, size_t index_key_bytes,
                      const kvl_deployment *d);

/* How many sequences of a context one GPU and one node hold. */
typedef struct {
    double budget;              /* bytes of cache per GPU */
    double sequence_bytes;      /* one sequence on one rank: paged rows + window rows */
    double sequences_per_gpu;
    double sequences_per_node;
} node_fit;

node_fit node_sequences(const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d,
                        double memory, double activations, double weight_bytes, size_t T);

#endif
