/* MHA, GQA and MQA on the GPU, and the sliding window over its ring: the twins of ref/mha.h's decode
 * and prefill, on device weights and a device cache (kernels in attend_cuda.cuh; projections through
 * linalg_cuda, rotations through rope_cuda, the ring through kv_ring_cuda).
 *
 * mha_decode_cuda is flash-decoding: the held rows are cut into splits of cache->split keys (by default
 * as many as fill the GPU's SMs twice for the batch, kvl_decode_split), each split's partial softmax is computed by its own block, and one merge combines
 * them; a windowed layer reads the W rows of its ring in slot order. B sequences decode in step, each
 * with its own ring, sharing one weight set (B = 1 is the ref's function). mha_prefill_cuda runs a
 * chunk of one sequence (B = 1) in tiles of four queries over their causal band.
 * Results match the ref to float rounding (tests/cuda/test_cuda_mha.c states the tolerance).
 * Functions return KVL_OK, KVL_EINVAL (kvl_error() names the problem), KVL_ENOMEM or KVL_ECUDA. */
#ifndef KVL_MHA_CUDA_H
#define KVL_MHA_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "device.h"
#include "mha.h"
#include "kv_ring_cuda.h"

/* dev = a device copy of host's weights (one allocation, the same cut). */
int mha_weights_to_cuda(mha_weights *dev, const mha_weights *host, const mha_config *c);
void mha_weights_free_cuda(mha_weights *dev);

typedef struct {
    kv_ring_cuda ring;  /* rows [B][S][2·Hkv·Dh]: K of every KV head, then V */
    size_t window;       /* the W it was made for */
    size_t split;        /* keys per decode split; 0: chosen from the SM count and the batch */
    kvl_workspace work;  /* the calls' temporaries */
} mha_cache_cuda;

/* An empty cache of B sequences for up to max_tokens positions each, stored as `store`. */
int mha_cache_init_cuda(mha_cache_cuda *cache, const mha_config *c, size_t max_tokens, kv_store store, size_t batch);
size_t mha_cache_bytes_used_cuda(const mha_cache_cuda *cache);
void mha_cache_free_cuda(mha_cache_cuda *cache);

/* out[B][d] for x[B][d], each sequence's token at position len, appending its row. */
int mha_decode_cuda(float *out, const mha_config *c, const mha_weights *w, mha_cache_cuda *cache, const float *x);

/* out[S][d] for x[S][d] at positions len … len + S − 1 of a one-sequence cache, appending their rows. */
int mha_prefill_cuda(float *out, const mha_config *c, const mha_weights *w, mha_cache_cuda *cache, const float *x,
                     size_t S);

#ifdef __cplusplus
}
#endif

#endif
