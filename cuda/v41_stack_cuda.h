/* The V4.1 layer stack on the GPU: the device twin of ref/v41_stack.h's cache and of its passes over a range
 * of layers, as host entry points over the layer twins of v41_cuda.h (kernels in v41_stack_cuda.cuh).
 *
 *   h ← h + Attn_ℓ(RMSNorm(h; g_ℓ))        per layer, as the ref: pre-norm, attention, residual
 *
 * Each layer's pass: the pre-norm (kvl_rmsnorm_f32_cuda), its window rows (W_KV product, RMSNorm, rotation:
 * the twins of v4_kv's pieces), the window of the chunk gathered from the ring in the store's bytes and the
 * chunk's own rows packed after it, a KV source fed (v41_source_push_cuda) or read as held, the layer's
 * mode (v41_window_layer_cuda, v41_full_layer_cuda, v41_reindex_layer_cuda, v41_reuse_layer_cuda; the
 * candidate source's pool by v41_candidate_pool_cuda), then the chunk's rows appended to the ring and the
 * residual added (the one kernel of this file). No attention of its own.
 *
 * The cache holds, per layer, a ring of W window rows and, per KV source, its entries and index keys and its
 * compressor tail, in the store: float32, or the deployed bytes (528-byte FP8 window rows, 288-byte FP4
 * entries, 68-byte MXFP4 index keys, formats/rows.h; Dh 512 and DI 128 only). As in the ref, a chunk reads
 * its own rows through the store before any query does. Window rows run from the ring's first position: 0,
 * or the s where a replay restarted it, so query t sees rows [max(s, t − W + 1), t].
 *
 * Weights: v41_stack_weights whose gains and layers point to device copies (v41_stack_weights_to_cuda).
 * Arrays named h, x, out, sel are device buffers. Outputs match the ref's to float rounding, picks the ref's
 * (tests/cuda/test_cuda_v41_ced.c). The indexer's scored-count the ref keeps is not kept. Functions return
 * KVL_OK, KVL_EINVAL (kvl_error() names the problem), KVL_ENOMEM or KVL_ECUDA.
 *
 * Letters: S chunk, d width, L layers, W window, Dh head dim, DI index width, N entries, K index_topk. */
#ifndef KVL_CSA2_STACK_CUDA_H
#define KVL_CSA2_STACK_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "v41_compressor_cuda.h"
#include "v41_cuda.h"
#include "v41_stack.h"
#include "device.h"
#include "rows.h"

/* dev = device copies of host's gains [L][d] and of every layer's weights (v41_weights_to_cuda), for the
 * stack s. On failure *dev is empty. */
int v41_stack_weights_to_cuda(v41_stack_weights *dev, const v41_stack_weights *host, const v41_stack_config *s);
void v41_stack_weights_free_cuda(v41_stack_weights *dev);

/* Rows of one kind on the device, the row of position p in slot p mod slots (ref/v4_rows.h's rule): a window
 * ring of W slots, or one slot per entry a KV source may publish. */
typedef struct {
    kvf_row layout;   /* the packed row, or KVF_N_ROW for float32 */
    size_t width;     /* values per row */
    size_t row_bytes; /* 4·width, or the packed row's */
    size_t slots;
    size_t first;     /* the position this run of rows started at */
    size_t len;       /* the next position to append */
    uint8_t *bytes;   /* device [slots][row_bytes] */
} v41_rows_cuda;

/* Forget every row; the next one appended is at position pos (first = len = pos). */
void v41_rows_restart_cuda(v41_rows_cuda *r, size_t pos);

/* Positions held: max(first, len − slots) … len − 1. */
size_t v41_rows_oldest_cuda(const v41_rows_cuda *r);
size_t v41_rows_held_cuda(const v41_rows_cuda *r);

/* out[n][width] (device, float32) = the rows of positions first … first + n − 1 decoded. KVL_EINVAL unless
 * all are held. */
int v41_rows_read_cuda(float *out, const v41_rows_cuda *r, size_t first, size_t n);

/* The temporaries of a pass, kept by the cache between calls. */
typedef struct {
    kvl_workspace chunk;    /* the normed input, a layer's output, the chunk's window rows: [S][d], [S][d], [S][Dh] */
    kvl_workspace win;      /* [start + S − win_first][row bytes]: the rows a chunk's queries see */
    kvl_workspace latents;  /* a KV source's latents while it is fed */
    kvl_workspace fresh;    /* [n][Dh] entries and [n][DI] keys a push completes */
    kvl_workspace scores;   /* [S][N] a Full layer's scores */
    kvl_workspace pool;     /* [S][N] the candidate source's pool */
    kvl_workspace *keys;    /* [L] [N][DI] each KV source's index keys as the cache gives them back */
    kvl_workspace *sel;     /* [L] [S][K] each index source's picks */
    v41_work_cuda layer;   /* the layer twins' own */
} v41_stack_work_cuda;

typedef struct {
    v41_cuda_store store;
    size_t len, max_tokens, n_layers;
    v41_rows_cuda *window;            /* [L] rings of W rows */
    v41_rows_cuda *entries, *keys;    /* [L] entries and index keys (KV sources only) */
    v41_compressor_state_cuda *state; /* [L] compressor tails (KV sources only) */
    v41_stack_work_cuda work;
} v41_cache_cuda;

/* KVL_EINVAL (native at widths other than Dh 512, DI 128; an unknown store), KVL_ENOMEM, KVL_ECUDA; on failure
 * *c is empty. */
int v41_cache_init_cuda(v41_cache_cuda *c, const v41_stack_config *s, size_t max_tokens, v41_cuda_store store);
void v41_cache_free_cuda(v41_cache_cuda *c);
/* Forget every token: every run of rows restarts at 0, every compressor tail is empty (a benchmark's repeated
 * prefill of the same prompt). */
void v41_cache_reset_cuda(v41_cache_cuda *c);

/* out[S][d] for x[S][d] at positions len … len + S − 1; sel[L][S][K] receives each index source's picks (NULL:
 * not wanted; rows of other layers untouched). */
int v41_stack_prefill_cuda(float *out, int32_t *sel, const v41_stack_config *s, const v41_stack_weights *w,
                            v41_cache_cuda *c, const float *x, size_t S);
/* out[d] for x_t[d] at position len. */
int v41_stack_decode_cuda(float *out, const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
                           const float *x_t);

/* h[S][d] ← the residual stream after layers l0 … l1 − 1, for h[S][d] entering layer l0 at positions
 * len … len + S − 1: their window rows appended, their compressors fed. c->len is left to the caller. */
int v41_stack_prefill_layers_cuda(float *h, const v41_stack_config *s, const v41_stack_weights *w,
                                   v41_cache_cuda *c, size_t l0, size_t l1, size_t S);

/* Feed KV source l's compressor the chunk h[S][d] at positions len … len + S − 1 (layer l's pre-norm applied
 * here) and store the entries and index keys it completes. Nothing attends. */
int v41_stack_push_source_cuda(const v41_stack_config *s, const v41_stack_weights *w, v41_cache_cuda *c,
                                size_t l, const float *h, size_t S);

/* Replay from position `from` < len: h[len − from][d] enters layer l0 at positions from … len − 1 and leaves
 * layer l1 − 1; each layer's window restarts at `from`. Entries, index keys and compressor tails are read as
 * the cache holds them; index sources score again. sel[L][len − from][K] as in v41_stack_prefill_cuda. */
int v41_stack_replay_layers_cuda(float *h, int32_t *sel, const v41_stack_config *s, const v41_stack_weights *w,
                                  v41_cache_cuda *c, size_t l0, size_t l1, size_t from);

#ifdef __cplusplus
}
#endif

#endif
