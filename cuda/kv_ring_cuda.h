/* The ring of cached rows on the GPU: the twin of ref/kv_ring.h's ring (kv_ring), with its rows in device
 * memory and B sequences that decode in step (kernels in kv_ring_cuda.cuh).
 *
 * As in the ref, the row of position p sits in slot p mod S, S = W for a windowed cache and
 * max_tokens for a full one, and the ring holds the last min(len, S) positions. Each of the B
 * sequences has its own S slots: rows [B][S][row_bytes]. Rows are stored as float32, bf16 (RNE) or,
 * for MLA's 576-wide rows, DeepSeek V3.2's packed 656-byte FP8 row (formats/rows.h, KVF_ROW_V32_MAIN).
 * Functions return KVL_OK, KVL_EINVAL (with kvl_error() naming the problem), KVL_ENOMEM or KVL_ECUDA. */
#ifndef KVL_KV_RING_CUDA_H
#define KVL_KV_RING_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "swa.h"

typedef enum {
    KV_CUDA_F32,      /* float32, as KV_STORE_F32 */
    KV_CUDA_BF16,     /* bfloat16 RNE, as KV_STORE_BF16 */
    KV_CUDA_V32_MAIN, /* V3.2's 656-byte FP8 row; rows of 576 values only */
} kv_cuda_store;

/* The device store of a ref store. */
kv_cuda_store kv_cuda_store_of(kv_store s);
/* Bytes of one stored row of `width` values: 4·width, 2·width or 656. */
size_t kv_cuda_row_bytes(kv_cuda_store s, size_t width);

typedef struct {
    kv_cuda_store store;
    size_t width;      /* values per row */
    size_t row_bytes;  /* bytes per stored row */
    size_t slots;      /* S */
    size_t max_tokens; /* positions 0 … max_tokens − 1 */
    size_t len;        /* positions appended so far, the same in every sequence */
    size_t batch;      /* B */
    void *rows;        /* device [B][S][row_bytes] */
} kv_ring_cuda;

/* kv_ring_init's rule for S, times B sequences. KVL_EINVAL for a zero width, max_tokens or batch, a
 * V3.2 row whose width is not 576, or a size that overflows. On failure *r is empty. */
int kv_ring_init_cuda(kv_ring_cuda *r, size_t W, size_t max_tokens, size_t width, kv_cuda_store store,
                       size_t batch);
void kv_ring_free_cuda(kv_ring_cuda *r);

size_t kv_ring_held_cuda(const kv_ring_cuda *r);   /* min(len, S) */
size_t kv_ring_oldest_cuda(const kv_ring_cuda *r); /* len − held */

/* Append rows[B][n][width] (device, float32) at positions len … len + n − 1 of every sequence,
 * converting to the store; only the last min(n, S) are written. KVL_EINVAL past max_tokens or, for
 * the FP8 row, on a non-finite value (nothing is written then). */
int kv_ring_append_cuda(kv_ring_cuda *r, const float *rows, size_t n);

/* out[B][n][width] (device, float32) = positions first … first + n − 1; KVL_EINVAL unless all held. */
int kv_ring_read_cuda(float *out, const kv_ring_cuda *r, size_t first, size_t n);

/* B · held · row_bytes */
size_t kv_ring_bytes_used_cuda(const kv_ring_cuda *r);

#ifdef __cplusplus
}
#endif

#endif
