/* Sliding windows: which keys a query sees, and the ring buffer that holds them (Mistral 7B
 * paper, section 2; chapters/03_swa/README.md).
 *
 * A window of W keys includes the query: query t sees keys j with t − W < j ≤ t, i.e. positions
 * max(0, t − W + 1) … t. W = 0 means no window (every j ≤ t). The whole-sequence path applies this as
 * a banded causal mask; the incremental path keeps the keys in a ring.
 *
 * The ring holds rows of any width (K|V of every KV head for MHA, the latent and the RoPE key for
 * MLA), one row per position, in a storage format (float32, or bf16 through formats/element.h).
 * The row of position p sits in slot p mod S, S the ring's slot count (DeepSeek-V4.1-Flash inference/model.py,
 * Mistral's rule). A windowed cache has S = W; a full cache is the same ring with S = the largest context it
 * accepts, so it never wraps and holds every position. Either way the ring holds the last min(len, S)
 * positions, which for a query at the newest position is exactly its window: one read path serves
 * both, and nothing switches on whether the layer is windowed.
 *
 * Shapes: rows are [n][width] in position order when they enter (append) or leave (read) the ring;
 * inside it they are [S][width] in slot order. */
#ifndef KVL_SWA_H
#define KVL_SWA_H

#include <stddef.h>

#include "row_tiles.h"

/* Storage of a ring's elements. */
typedef enum {
    SWA_STORE_F32,   /* float32: exact, for equivalence tests */
    SWA_STORE_BF16,  /* bfloat16, round to nearest even (the deployed V2/V3 and MHA cache) */
} swa_store;

/* Bytes of one element: 4 or 2. */
size_t swa_store_bytes(swa_store s);
/* "f32" or "bf16" */
const char *swa_store_name(swa_store s);

/* x[n] ← the values a ring of this store gives back for x (bf16: rounded to nearest even; f32: as is).
 * A chunk that attends to its own keys before they reach the ring reads them through this, so every
 * query sees exactly what the cache holds. */
void swa_store_round(float *x, size_t n, swa_store s);

/* ---- the window rule ------------------------------------------------------------------------------ */

/* 1 if query position t sees key position j under a window of W (0: none), else 0. */
int swa_visible(size_t t, size_t j, size_t W);

/* The first key position query t sees: max(0, t − W + 1), or 0 when W = 0. */
size_t swa_first_visible(size_t t, size_t W);

/* The banded causal mask as additive scores: mask[S][n_keys], row i for query position start + i,
 * column j for key position key_start + j; 0 where visible, −INFINITY elsewhere. */
void swa_mask_rows(float *mask, size_t start, size_t S, size_t key_start, size_t n_keys, size_t W);

/* A chunk's queries at positions start + i against keys at positions key_start + j, under a window
 * (0: none): the ctx of swa_block_mask. */
typedef struct {
    size_t start, key_start, window;
} swa_span;

/* The banded causal mask of a block of a chunk's queries, as a kvl_block_mask (ref/core/attend.h): n is
 * the keys up to the block's last query position (later keys are its future), and when n ≤ N, mask[b][n]
 * is filled for queries first … first + b − 1 of the span `span`. */
size_t swa_block_mask(float *mask, size_t first, size_t b, size_t N, const void *span);

/* ---- the ring buffer ------------------------------------------------------------------------------ */

typedef struct {
    swa_store store;
    size_t width;       /* elements per row */
    size_t slots;       /* S: rows it can hold */
    size_t max_tokens;  /* positions 0 … max_tokens − 1 may be appended */
    size_t len;         /* positions appended so far; the next one is len */
    void *rows;         /* [slots][width] elements of `store`, slot order, from a 64-byte boundary */
    void *block;        /* the allocation rows lies in */
} swa_ring;

/* A ring for rows of `width` elements at positions 0 … max_tokens − 1, keeping the last W of them
 * (S = min(W, max_tokens)), or all of them when W = 0 (S = max_tokens). KVL_EINVAL for a zero width
 * or max_tokens, or a size that overflows; KVL_ENOMEM. On failure *r is empty (free is harmless). */
int swa_ring_init(swa_ring *r, size_t W, size_t max_tokens, size_t width, swa_store store);
void swa_ring_free(swa_ring *r);

/* Forget every row (len = 0); the allocation stays. */
void swa_ring_reset(swa_ring *r);

/* Slot of position p: p mod S. */
size_t swa_ring_slot(const swa_ring *r, size_t p);

/* Positions held now: oldest … len − 1, oldest = len − min(len, S). */
size_t swa_ring_oldest(const swa_ring *r);
size_t swa_ring_held(const swa_ring *r);

/* Append rows[n][width] (float32) at positions len … len + n − 1, converting to the ring's store.
 * Only the last min(n, S) rows are written (the earlier ones would be overwritten within the call).
 * KVL_EINVAL if len + n exceeds max_tokens (nothing written). */
int swa_ring_append(swa_ring *r, const float *rows, size_t n);

/* out[n][width] (float32) = the rows of positions first … first + n − 1, in position order.
 * KVL_EINVAL unless all of them are held. */
int swa_ring_read(float *out, const swa_ring *r, size_t first, size_t n);

/* The rows the ring holds, slots 0 … held − 1, as a view for ref/core/attend.h and ref/core/index_scan.h:
 * float32 rows read in place, bf16 rows widened as they are read. Slot order is not position order,
 * which softmax does not see. */
kvl_row_tiles swa_ring_view(const swa_ring *r);

/* o[Hq][Dv] = attention of q[Hq][Dk] over every row the ring holds (kvl_attend over swa_ring_view):
 * the Hq query rows in `groups` groups, group g's keys columns k_off + g·Dk … of a row and its values
 * v_off + g·Dv …. Errors as kvl_attend. */
int swa_ring_attend(float *o, const float *q, size_t Hq, const swa_ring *r, size_t groups, size_t k_off, size_t Dk,
                    size_t v_off, size_t Dv, float scale);

/* Bytes of the rows it holds now: held · width · element bytes (what the cache really keeps;
 * a windowed ring stops growing at W rows). */
size_t swa_ring_bytes_used(const swa_ring *r);

/* Bytes allocated: S · width · element bytes. */
size_t swa_ring_bytes_allocated(const swa_ring *r);

#endif
