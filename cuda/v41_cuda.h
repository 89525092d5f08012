/* DeepSeek-V4.1 CSA2 on the GPU: the twins of ref/v41.h's pieces and of its layer modes, on device arrays
 * (kernels in v41_cuda.cuh and attend_cuda.cuh; the products, norms, rotations, indexer, picks and grouped
 * output are the twins in linalg_cuda.h, norm_cuda.h, rope_cuda.h, v41_indexer_cuda.h, topk_cuda.h and
 * v4_cuda.h).
 *
 *   v41_main_entry_cuda     a KV source's main entries: the compressor's latent L with the trailing Dr
 *                            channels of entry i rotated at iM + Δ
 *   v41_source_push_cuda    what a KV source publishes for a chunk of its input (the early exit's work on
 *                            the encoder's output): the compressor fed (v41_compressor_cuda.h), the index
 *                            keys and main entries of the latents it completes
 *   v41_attend_cuda         the attention core: every query over its window rows and then its K picks with
 *                            the head's sink in the denominator, the trailing Dr channels of the output
 *                            rotated back at the query's position; rows as float32, or native: 528-byte
 *                            FP8 window rows and 288-byte FP4 entries, each decoded inside the kernel by its
 *                            own reader
 *   v41_window_layer_cuda   a window-only layer: query latent, query heads, window attention, grouped output
 *   v41_full_layer_cuda     its own index queries scoring every visible entry of its own source, its own
 *                            top-k, attention over the picks
 *   v41_reindex_layer_cuda  the same over the latest KV source, scoring only the candidate pool when one
 *                            is given
 *   v41_reuse_layer_cuda    attention over the latest KV source's entries at the latest index source's picks
 * The three modes are separate entry points over the same pieces and kernels, as in the ref. Weights are
 * v41_weights whose fields point to device copies (core: w_dq, q_norm, w_uq, sinks, w_oa, w_ob; w_iq, w_iw).
 * Outputs match the ref to float rounding, picks the ref's (tests/cuda/test_cuda_v41.c). The scored-count
 * the ref keeps is not kept here. Functions return KVL_OK, KVL_EINVAL (kvl_error() names the problem),
 * KVL_ENOMEM or KVL_ECUDA.
 *
 * Letters: S chunk, t query position, d width, H heads, Dh head dim, Dr rotary, Dq' query latent, W window,
 * M ratio, N entries, HI/DI index heads/width, K index_topk. */
#ifndef KVL_CSA2_CUDA_H
#define KVL_CSA2_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "v41.h"
#include "v41_compressor_cuda.h"
#include "device.h"

typedef enum {
    V41_CUDA_F32,    /* window rows and entries of Dh float32 */
    V41_CUDA_NATIVE, /* 528-byte FP8 window rows, 288-byte FP4 entries (formats/rows.h): Dh 512 only */
} v41_cuda_store;

/* Bytes of one window row and of one entry of Dh values in the store: 4·Dh, or 528 and 288. */
size_t v41_cuda_window_bytes(v41_cuda_store s, size_t Dh);
size_t v41_cuda_entry_bytes(v41_cuda_store s, size_t Dh);

/* Z[n][Dh] = L[n][Dh] with the trailing Dr channels of entry first + i rotated at (first + i)·M + Δ; Z may
 * be L. */
int v41_main_entry_cuda(float *Z, const v41_config *c, const float *L, size_t n, size_t first);

/* Feed the Full layer's compressor state st (pos tokens seen) x[S][d], the layer's normed input at positions
 * pos … pos + S − 1: Z[n][Dh] and keys[n][DI] receive the main entries and index keys of the *n_new = n
 * entries the chunk completes, numbered from ⌊pos/M⌋ (keys as computed, before any rounding the cache
 * applies). w's compressor, w_ik and ik_norm on the device; work holds the latents. */
int v41_source_push_cuda(float *Z, float *keys, size_t *n_new, const v41_config *c, const v41_weights *w,
                          v41_compressor_state_cuda *st, const float *x, size_t S, kvl_workspace *work);

/* o[S][H][Dh] (un-rotated) for q[S][H][Dh] at positions start … start + S − 1 over the window rows win
 * (positions win_first … start + S − 1) and the picks sel[S][K] into entries[N] (NULL for a window-only
 * layer); sinks[H] the heads' sink logits. work holds the temporaries. KVL_EINVAL for a pick outside
 * −1 … N − 1 or win_first after start. */
int v41_attend_cuda(float *o, const v41_config *c, const float *sinks, const float *q, const void *win,
                     size_t win_first, const void *entries, size_t N, const int32_t *sel, size_t S, size_t start,
                     v41_cuda_store store, kvl_workspace *work);

/* What a KV source publishes, on the device: entries[N] in the store, index keys[N][DI] as the cache gives
 * them back (rounded to MXFP4 when keys_mxfp4, so queries are rounded the same way). */
typedef struct {
    const void *entries;
    const float *keys;
    size_t N;
    int keys_mxfp4;
} v41_source_cuda;

/* One chunk of queries on the device: x[S][d] at positions start … (the layer's normed input) and the
 * window rows win[start + S − win_first] in the store, of positions win_first … start + S − 1. */
typedef struct {
    const float *x;
    size_t S, start;
    const void *win;
    size_t win_first;
    v41_cuda_store store;
} v41_chunk_cuda;

/* A layer call's device temporaries: the chunk's buffers, and the scratch of the pieces they pass through. */
typedef struct {
    kvl_workspace buffers, scratch;
} v41_work_cuda;

void v41_work_free_cuda(v41_work_cuda *work);

/* dev = a device copy of host's weights: core's block and the layer's block each copied whole, every field
 * pointing where the host's points in its block (the fields the layer modes, the window rows and a KV source
 * read). On failure *dev is empty. */
int v41_weights_to_cuda(v41_weights *dev, const v41_weights *host);
void v41_weights_free_cuda(v41_weights *dev);

/* out[S][d] for a window-only layer. */
int v41_window_layer_cuda(float *out, const v41_config *c, const v41_weights *w, const v41_chunk_cuda *ch,
                           v41_work_cuda *work);

/* out[S][d], sel[S][K] its own top-k, I[S][N] its scores over every visible entry of src (its own). */
int v41_full_layer_cuda(float *out, int32_t *sel, float *I, const v41_config *c, const v41_weights *w,
                         const v41_source_cuda *src, const v41_chunk_cuda *ch, v41_work_cuda *work);

/* out[S][d], sel[S][K]: src re-scored by the layer's own index queries, over pool[S][N] when pool is not NULL
 * (the candidate source's), else over every visible entry. */
int v41_reindex_layer_cuda(float *out, int32_t *sel, const v41_config *c, const v41_weights *w,
                            const v41_source_cuda *src, const uint8_t *pool, const v41_chunk_cuda *ch,
                            v41_work_cuda *work);

/* out[S][d]: src's entries at the picks sel[S][K] of the latest index source. */
int v41_reuse_layer_cuda(float *out, const v41_config *c, const v41_weights *w, const v41_source_cuda *src,
                          const int32_t *sel, const v41_chunk_cuda *ch, v41_work_cuda *work);

#ifdef __cplusplus
}
#endif

#endif
