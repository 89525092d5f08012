/* Serving arithmetic (chapter 9): what one GPU of a deployment holds of a model's KV cache per token
 * and per sequence, and how many tokens and sequences of a context fit in the memory it has left for
 * the cache. Everything is derived from the config (config.h) and its footprint (kvtable.h).
 *
 * The rules, each with where it comes from:
 *
 *  - Tensor parallelism over tp ranks splits MHA/GQA's KV heads: a rank holds ceil(Hkv / tp) of
 *    them, and when tp > Hkv each head is replicated on tp / Hkv ranks, so a rank still holds one.
 *    vLLM's ModelConfig.get_num_kv_heads (vllm/config.py, commit c0c2335c) returns
 *    max(1, Hkv // tp), the same count whenever one of tp and Hkv divides the other.
 *  - An MLA/DSA row [c_kv | k_rope] is one latent shared by every head, and V4/V4.1 keep a single
 *    shared KV entry: neither has a head axis to split, so every rank holds the whole row in every
 *    layer (DeepSeek-V2 paper, section 2.1; the same get_num_kv_heads returns 1 for an MLA model: "during
 *    decode it becomes MQA"). This is what data-parallel attention answers.
 *  - Data-parallel attention: each rank attends for its own sequences with whole rows (all KV
 *    heads), so the ranks of a node hold different tokens and a node's tokens are their sum. Without
 *    it the tp ranks of a group hold the same tokens, and a node has gpus / tp such groups.
 *  - The indexer key (V3.2, V4, V4.1) is one head per entry: never split.
 *  - Window rows are W rows per layer per sequence in a ring, bounded whatever the context: they are
 *    counted per sequence, not paged (this project's rule). An MHA model windowed in every layer
 *    (Mistral's sliding_window, kvl_kv_footprint.bounded_tokens) holds at most W tokens of its
 *    per-token rows, paged like any other.
 *  - Pages: a layer that stores one entry per token holds a sequence of T tokens in ceil(T / page)
 *    pages of `page` tokens. A layer compressing M tokens per entry holds ceil(T / M) entries, in
 *    pages of `page` entries: ceil(ceil(T / M) / page) pages (this project's rule; a page counted in
 *    entries, not in the tokens behind them).
 *  - Weights on a rank: the routed and shared experts spread over every GPU of the node (expert
 *    parallelism); the embedding, the head and the dense FFNs split over the tp ranks; attention split
 *    over them too, or whole on every rank under data-parallel attention (SGLang's DP-attention guide:
 *    attention replicated over the DP ranks, experts parallel); norms and routers whole everywhere. A
 *    rank's share of n weights over k ranks is ceil(n / k). This project's rule, for an engine's first-
 *    order layout; engines also keep buffers and graphs that the activation fraction stands for.
 *  - Tokens that fit: the cache budget over the per-token bytes, windows and pages aside, as an
 *    engine sizes its token pool (memory left / bytes of one token's cells). Sequences that fit: the
 *    budget over one sequence's paged bytes plus its window rows, rounded down. */
#ifndef KVL_SERVING_H
#define KVL_SERVING_H

#include <stddef.h>

#include "config.h"
#include "kvtable.h"
#include "params.h"

typedef struct {
    size_t gpus;        /* GPUs in one node */
    size_t tp;          /* tensor-parallel degree of attention; divides gpus and n_heads */
    int dp_attention;   /* 1: each rank attends for its own sequences, with whole rows */
    size_t page;        /* entries per page of every paged layer */
} kvl_deployment;

#define KVL_N_LAYER_KINDS (KVL_LAYER_REUSE + 1)

/* What one rank (one GPU) stores, after the split. */
typedef struct {
    size_t kv_heads;                   /* KV heads a rank holds (MHA/GQA); 0 for a latent or shared row */
    size_t main_row_bytes;             /* one entry of the main attention, on one rank */
    size_t index_key_bytes;            /* one indexer key (whole on every rank) */
    double bytes_per_token;            /* Σ over global layers of (row + key) / M, on one rank */
    double kind_bytes[KVL_N_LAYER_KINDS];   /* bytes_per_token's share of each layer kind */
    size_t kind_layers[KVL_N_LAYER_KINDS];  /* layers of each kind (caching or not) */
    size_t window_bytes_per_sequence;  /* W rows in every layer, on one rank */
    size_t bounded_tokens;             /* tokens a sequence keeps at most (footprint's; 0: all) */
    size_t groups_per_node;            /* ranks of a node holding different tokens: gpus / tp, or gpus */
} kvl_rank_cache;

/* How much of a budget one GPU and one node fill. */
typedef struct {
    double sequence_bytes;       /* one sequence of the context on one rank: paged rows + window */
    double tokens_per_gpu;       /* floor(budget / bytes_per_token) */
    double tokens_per_node;      /* tokens_per_gpu · groups_per_node */
    double sequences_per_gpu;    /* floor(budget / sequence_bytes) */
    double sequences_per_node;   /* sequences_per_gpu · groups_per_node */
} kvl_fit;

/* KVL_EINVAL, the message naming the field and its value, for zero gpus, tp or page, a tp that does
 * not divide gpus or the model's n_heads (query heads). */
int kvl_deployment_check(const kvl_deployment *d, const kvl_model *m);

/* KV heads one of tp ranks holds: ceil(n_kv_heads / tp), at least 1 (replicated past n_kv_heads). */
size_t kvl_rank_kv_heads(size_t n_kv_heads, size_t tp);

/* Entries a layer allocates for T tokens at M tokens per entry: ceil(ceil(T / M) / page) · page. */
size_t kvl_paged_entries(size_t T, size_t M, size_t page);

/* r = what one rank of d stores of model m with footprint f (kvl_kv_footprint_of). KVL_EINVAL as
 * kvl_deployment_check. */
int kvl_rank_cache_of(kvl_rank_cache *r, const kvl_model *m, const kvl_kv_footprint *f, const kvl_deployment *d);

/* The rows one sequence keeps on a rank however long it grows: V4's and V4.1's W window rows in
 * every layer, or, for a model windowed in every layer (Mistral: bounded_tokens = W), its W tokens
 * of per-token rows, paged; 0 for a cache that grows with the context. kvtable's window B/seq, per
 * rank. */
double kvl_rank_window_bytes(const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d);

/* Bytes one rank allocates for one sequence of T tokens (at most bounded_tokens of them kept): each
 * global layer's paged entries times its row (and key), plus the window rows. */
double kvl_rank_sequence_bytes(const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d, size_t T);

/* Bytes of weights one GPU of d holds of a model with parameters p, its linear weights stored as
 * `linear` and its experts as `experts` (kvl_params_bytes), split as the rules above say. */
double kvl_rank_weight_bytes(const kvl_params *p, const kvl_deployment *d, kvl_weight_format linear,
                             kvl_weight_format experts, int scale_e8m0);

/* out = what a cache budget of `budget` bytes per GPU holds at context T. KVL_EINVAL, naming the
 * budget, when it is below one sequence's window rows. */
int kvl_fit_of(kvl_fit *out, const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d, double budget,
               size_t T);

#endif
