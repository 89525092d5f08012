/* What the chapter programs refuse before they print: a config they would run at a size past the
 * bound their --help states. Each check returns KVL_OK, or KVL_EINVAL with a one-line
 * kvl_error() that names the config file, the field and its value, and the bound. */
#ifndef KVL_BOUNDS_H
#define KVL_BOUNDS_H

#include <stddef.h>

#include "config.h"

/* m's field `field` (its config.json names: "sliding_window (window_size)") holds value, from lo
 * to hi. */
int kvl_bound_field(const kvl_model *m, const char *field, size_t value, size_t lo, size_t hi);

/* Every entry of m's compress_ratios at most max. */
int kvl_bound_ratios(const kvl_model *m, size_t max);

/* A run at m's fields `fields` ("num_attention_heads 128, kv_lora_rank 512") that needs `amount` of
 * `unit` ("GiB of memory", "TFLOP"), at most max. */
int kvl_bound_run(const kvl_model *m, const char *fields, double amount, double max,
                  const char *unit);

/* Values of compressed entries the queries of m's V4 layers read over T tokens prefilled in chunks
 * of C (C ≥ T: one chunk): a CSA layer of ratio M scores, for each of a chunk's S queries, the
 * ⌊(start + S)/M⌋ index keys the chunk sees (index_n_heads·index_head_dim values each) and reads
 * the min(index_topk, ⌊(t + 1)/M⌋) entries query t picks; an HCA layer reads all ⌊(t + 1)/M⌋
 * entries (head_dim values each). Decoding and multiplying these is what a V4 stack's run costs
 * beyond a few thousand tokens: quadratic in T, where window rows and projections are linear. */
double kvl_v4_entry_values(const kvl_model *m, size_t T, size_t C);

/* KVL_OK when kvl_v4_entry_values(m, T, C) ≤ max; else KVL_EINVAL, "FLAG T: its queries would read
 * V values of compressed entries, more than MAX (in chunks of C, at most FLAG N)", N the most
 * tokens that stay within max. */
int kvl_bound_v4_tokens(const kvl_model *m, const char *flag, size_t T, size_t C, double max);

/* The same for the queries of m's V4.1 layers over T tokens (one query at a time): a Full layer of
 * ratio M scores all ⌊(t + 1)/M⌋ index keys query t sees, a Reindex layer as many but at most the
 * candidate pool's positions when it reads the pool's source, and Full, Reindex and Reuse layers
 * read the min(index_topk, ⌊(t + 1)/M⌋) entries picked. */
double kvl_v41_entry_values(const kvl_model *m, size_t T);

#endif
