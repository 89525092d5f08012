/* Sliding windows: which keys a query sees (Mistral 7B paper, section 2; chapters/03_swa/README.md).
 *
 * A window of W keys includes the query: query t sees keys j with t − W < j ≤ t, i.e. positions
 * max(0, t − W + 1) … t. W = 0 means no window (every j ≤ t). The whole-sequence path applies this as
 * a banded causal mask.
 *
 * The incremental path keeps the rows in a ring (ref/kv_ring.h) of S = W slots, which for a query at
 * the newest position holds exactly its window. */
#ifndef KVL_SWA_H
#define KVL_SWA_H

#include <stddef.h>

#include "attend.h"
#include "kv_ring.h"

/* ---- the window rule ------------------------------------------------------------------------------ */

/* 1 if query position t sees key position j under a window of W (0: none), else 0. */
int swa_visible(size_t t, size_t j, size_t W);

/* The first key position query t sees: max(0, t − W + 1), or 0 when W = 0. */
size_t swa_first_visible(size_t t, size_t W);

/* The banded causal mask as additive scores: mask[S][n_keys], row i for query position start + i,
 * column j for key position key_start + j; 0 where visible, −INFINITY elsewhere. */
void swa_mask_rows(float *mask, size_t start, size_t S, size_t key_start, size_t n_keys, size_t W);

/* A chunk's queries at positions start + i against keys at positions key_start + j, under a window
 * (0: none): the ctx of swa_block_mask and swa_block_band. */
typedef struct {
    size_t start, key_start, window;
} swa_span;

/* The banded causal mask of a block of a chunk's queries, as a kvl_block_mask (ref/core/attend.h): n is
 * the keys up to the block's last query position (later keys are its future), and when n ≤ N, mask[b][n]
 * is filled for queries first … first + b − 1 of the span `span`. */
size_t swa_block_mask(float *mask, size_t first, size_t b, size_t N, const void *span);

/* The same mask as each query's run of keys, a kvl_block_band: query t sees swa_first_visible(t, W) … t. */
size_t swa_block_band(size_t *lo, size_t *hi, size_t first, size_t b, size_t N, const void *span);

/* The span's mask as a chunk's mask (ref/core/attend.h): its rows and its runs. */
kvl_chunk_mask swa_chunk_mask(const swa_span *span);

#endif
