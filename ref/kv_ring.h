/* The cache of rows a module keeps, one row per position: MHA's [K | V] rows, MLA's [c_kv | k_rope]
 * latent rows, V3.2's rows (ref/mha.h, ref/mla.h, ref/dsa.h).
 *
 * A ring holds rows of any width, one row per position, in a storage format (float32, or bf16
 * through formats/element.h). The row of position p sits in slot p mod S, S the ring's slot count
 * (DeepSeek-V4.1-Flash inference/model.py, Mistral's rule). A windowed cache has S = W; a full
 * cache is the same ring with S = the largest context it accepts, so it never wraps and holds every
 * position. Either way the ring holds the last min(len, S) positions, which for a query at the
 * newest position is exactly its window: one read path serves both, and nothing switches on whether
 * the layer is windowed.
 *
 * Shapes: rows are [n][width] in position order when they enter (append) or leave (read) the ring;
 * inside it they are [S][width] in slot order. */
#ifndef KVL_KV_RING_H
#define KVL_KV_RING_H

#include <stddef.h>

#include "row_tiles.h"

/* Storage of a ring's elements. */
typedef enum {
    KV_STORE_F32,   /* float32: exact, for equivalence tests */
    KV_STORE_BF16,  /* bfloat16, round to nearest even (the deployed V2/V3 and MHA cache) */
} kv_store;

/* Bytes of one element: 4 or 2. */
size_t kv_store_bytes(kv_store s);
/* "f32" or "bf16" */
const char *kv_store_name(kv_store s);

/* x[n] ← the values a ring of this store gives back for x (bf16: rounded to nearest even; f32: as is).
 * A chunk that attends to its own keys before they reach the ring reads them through this, so every
 * query sees exactly what the cache holds. */
void kv_store_round(float *x, size_t n, kv_store s);

typedef struct {
    kv_store store;
    size_t width;       /* elements per row */
    size_t slots;       /* S: rows it can hold */
    size_t max_tokens;  /* positions 0 … max_tokens − 1 may be appended */
    size_t len;         /* positions appended so far; the next one is len */
    void *rows;         /* [slots][width] elements of `store`, slot order, from a 64-byte boundary */
    void *block;        /* the allocation rows lies in */
} kv_ring;

/* A ring for rows of `width` elements at positions 0 … max_tokens − 1, keeping the last W of them
 * (S = min(W, max_tokens)), or all of them when W = 0 (S = max_tokens). KVL_EINVAL for a zero width
 * or max_tokens, or a size that overflows; KVL_ENOMEM. On failure *r is empty (free is harmless). */
int kv_ring_init(kv_ring *r, size_t W, size_t max_tokens, size_t width, kv_store store);
void kv_ring_free(kv_ring *r);

/* Forget every row (len = 0); the allocation stays. */
void kv_ring_reset(kv_ring *r);

/* Slot of position p: p mod S. */
size_t kv_ring_slot(const kv_ring *r, size_t p);

/* Positions held now: oldest … len − 1, oldest = len − min(len, S). */
size_t kv_ring_oldest(const kv_ring *r);
size_t kv_ring_held(const kv_ring *r);

/* Append rows[n][width] (float32) at positions len … len + n − 1, converting to the ring's store.
 * Only the last min(n, S) rows are written (the earlier ones would be overwritten within the call).
 * KVL_EINVAL if len + n exceeds max_tokens (nothing written). */
int kv_ring_append(kv_ring *r, const float *rows, size_t n);

/* out[n][width] (float32) = the rows of positions first … first + n − 1, in position order.
 * KVL_EINVAL unless all of them are held. */
int kv_ring_read(float *out, const kv_ring *r, size_t first, size_t n);

/* The rows the ring holds, slots 0 … held − 1, as a view for ref/core/attend.h and ref/core/index_scan.h:
 * float32 rows read in place, bf16 rows widened as they are read. Slot order is not position order,
 * which softmax does not see. */
kvl_row_tiles kv_ring_view(const kv_ring *r);

/* o[Hq][Dv] = attention of q[Hq][Dk] over every row the ring holds (kvl_attend over kv_ring_view):
 * the Hq query rows in `groups` groups, group g's keys columns k_off + g·Dk … of a row and its values
 * v_off + g·Dv …. Errors as kvl_attend. */
int kv_ring_attend(float *o, const float *q, size_t Hq, const kv_ring *r, size_t groups, size_t k_off, size_t Dk,
                    size_t v_off, size_t Dv, float scale);

/* Bytes of the rows it holds now: held · width · element bytes (what the cache really keeps;
 * a windowed ring stops growing at W rows). */
size_t kv_ring_bytes_used(const kv_ring *r);

/* Bytes allocated: S · width · element bytes. */
size_t kv_ring_bytes_allocated(const kv_ring *r);

#endif
