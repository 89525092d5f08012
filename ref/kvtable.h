/* The KV cache a model keeps per token of context, derived from its config and the row sizes of
 * formats/ (chapter 8). Nothing here is a typed-in figure: change a config and every number follows.
 *
 * A layer contributes only if it writes a global (per-token) cache (kvl_layer_writes_cache): every
 * layer of MHA/MLA/DSA, the CSA and HCA layers of V4, the KV-source layers of V4.1. A layer that
 * compresses M tokens into one entry adds 1/M entries per token. Window rows are bounded per
 * sequence and reported apart, never folded into the per-token figure. A model windowed in every
 * layer (an MHA config's sliding_window) still pays bytes_per_token for each token inside its window,
 * and holds at most W of them: bounded_tokens. */
#ifndef KVL_KVTABLE_H
#define KVL_KVTABLE_H

#include <stddef.h>

#include "config.h"

typedef struct {
    size_t global_layers;        /* layers that write a per-token cache */
    size_t index_layers;         /* of those, layers that also store an indexer key per entry */
    double entries_per_token;    /* Σ over global layers of 1/M */
    double bytes_per_token;      /* Σ over global layers of (main row + index key) / M */
    double bytes_per_entry;      /* bytes_per_token / entries_per_token: the mean entry */
    size_t main_row_bytes;       /* one cached entry of the main attention */
    size_t index_key_bytes;      /* one indexer key (0 when the model has no indexer keys) */
    size_t window_row_bytes;     /* one window row (0 when the model has no window) */
    size_t window_bytes_per_sequence;  /* V4/V4.1: W window rows in every layer, whatever the context */
    size_t bounded_tokens;       /* a model whose every layer attends a window of W (MHA with sliding_window,
                                  * Mistral): its per-token cache holds at most W tokens; 0: no bound */
} kvl_kv_footprint;

/* Fill f from m. Fails (KVL_EINVAL, message naming the model file) when the config's dims do not
 * fit the row layout of its cache (a v32-fp8 cache needs kv_lora_rank + qk_rope_head_dim = 576...). */
int kvl_kv_footprint_of(kvl_kv_footprint *f, const kvl_model *m);

/* The layout priced, as a table shows it: kvl_cache_layout_name, except for a model read from a GGUF
 * file in the bf16 layout, which llama.cpp stores in its cache type: "f16 (llama.cpp)" (two bytes a
 * value, as bf16), "q8_0 (llama.cpp)", ..., or "f16 K+V (llama.cpp)" for whole K and V heads (a
 * deepseek2 file converted without the MLA split). */
const char *kvl_kv_cache_label(const kvl_model *m);

/* "f16", "q8_0", "q4_0" (and "none"); the reverse for the first three → KVL_OK, else KVL_EINVAL. */
const char *kvl_llama_cache_name(kvl_llama_cache c);
int kvl_llama_cache_from_name(const char *name, kvl_llama_cache *out);

/* A layer stores an index key per entry when it runs its own indexer over its own entries. */
int kvl_layer_stores_index_key(const kvl_model *m, size_t layer);

/* Bytes the caches hold for one sequence of T tokens: min(T, bounded_tokens) · bytes_per_token (T when
 * unbounded) + the window rows. */
double kvl_kv_bytes_held(const kvl_kv_footprint *f, double T);

#endif
