/* Multi-head latent attention on the GPU: the twins of ref/mla.h's two decode forms, on device weights
 * and a device cache of [c_kv | k_rope] rows (kernels in mla_cuda.cuh and attend_cuda.cuh).
 *
 *   mla_decode_naive_cuda     re-expands every held row into per-head keys [W_UK^h c | k_rope] and
 *                             values W_UV^h c (one product per head), then runs the MHA attention
 *                             kernel over them: H key heads, H value heads
 *   mla_decode_absorbed_cuda  folds W_UK^h into the query on the GPU (q̂_h = W_UK^hᵀ q^C_h, a kernel),
 *                             attends every head over the rows as they are stored (one key head of
 *                             Dc + Dr channels whose first Dc are also the value: "MQA mode"), then
 *                             applies W_UV^h to each head's latent output
 * Rows are stored as float32, bf16, or DeepSeek V3.2's 656-byte FP8 row (Dc + Dr = 576 only), read
 * and decoded by the attention kernel itself. B sequences decode in step (B = 1 is the ref's
 * function). Results match the ref to float rounding (tests/cuda/test_cuda_mla.c).
 * Functions return KVL_OK, KVL_EINVAL (kvl_error() names the problem), KVL_ENOMEM or KVL_ECUDA. */
#ifndef KVL_MLA_CUDA_H
#define KVL_MLA_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "device.h"
#include "mla.h"
#include "kv_ring_cuda.h"

/* dev = a device copy of host's weights, cut as the host's (mla_weights_cut). */
int mla_weights_to_cuda(mla_weights *dev, const mla_weights *host, const mla_config *c);
void mla_weights_free_cuda(mla_weights *dev);

typedef struct {
    kv_ring_cuda ring; /* rows [B][S][Dc+Dr] */
    size_t split;       /* keys per decode split; 0 (the default): chosen from the SM count and the batch */
    kvl_workspace work; /* the calls' temporaries */
} mla_cache_cuda;

int mla_cache_init_cuda(mla_cache_cuda *cache, const mla_config *c, size_t max_tokens, kv_cuda_store store,
                        size_t batch);
/* Append rows[B][n][Dc+Dr] (device) at the next n positions of every sequence. */
int mla_cache_append_cuda(mla_cache_cuda *cache, const mla_config *c, const float *rows, size_t n);
size_t mla_cache_bytes_used_cuda(const mla_cache_cuda *cache);
void mla_cache_free_cuda(mla_cache_cuda *cache);

/* out[B][d] for x[B][d], each sequence's token at position len: append its row, attend over every
 * held row. */
int mla_decode_naive_cuda(float *out, const mla_config *c, const mla_weights *w, mla_cache_cuda *cache, const float *x);
int mla_decode_absorbed_cuda(float *out, const mla_config *c, const mla_weights *w, mla_cache_cuda *cache,
                             const float *x);

/* The absorbed form's per-head products alone, for B queries: q_hat[B][H][Dc+Dr] = [W_UK^hᵀ q^C_h | q^R_h]
 * for q[B][H][Dnope+Dr], and o[B][H][Dv] = W_UV^h ô_h for o_hat[B][H][Dc] (the sparse twins reuse them). */
int mla_absorb_query_cuda(float *q_hat, const float *q, const mla_config *c, const mla_weights *w, size_t B);
int mla_unabsorb_output_cuda(float *o, const float *o_hat, const mla_config *c, const mla_weights *w, size_t B);

/* The absorbed form's attention alone, over the rows the cache holds now: o_hat[B][H][Dc] from
 * q_hat[B][H][Dc+Dr] (queries already absorbed and rotated). Three versions:
 *   mla_attend_absorbed_cuda      the float kernel mla_decode_absorbed_cuda runs (any widths, any store)
 *   mla_attend_absorbed_mma_cuda  tensor cores, for DeepSeek's widths (Dc 512, Dr 64) over bf16 or FP8
 *                                 rows: q̂ and the softmax weights rounded to bf16, products summed in
 *                                 float (what a server runs; the benchmark times it). The pipelined
 *                                 kernel (cp.async double buffers, ldmatrix), its splits chosen so that
 *                                 the partial sums stay a small share of the traffic (cache->split fixes
 *                                 them). KVL_EINVAL for other widths or a float32 cache.
 *   mla_attend_absorbed_mma_simple_cuda  the same products by the readable kernel the pipelined one
 *                                 is checked against (one tile buffer, scalar fragment loads), split
 *                                 as the attention kernels split */
int mla_attend_absorbed_cuda(float *o_hat, const float *q_hat, const mla_config *c, mla_cache_cuda *cache);
int mla_attend_absorbed_mma_cuda(float *o_hat, const float *q_hat, const mla_config *c, mla_cache_cuda *cache);
int mla_attend_absorbed_mma_simple_cuda(float *o_hat, const float *q_hat, const mla_config *c,
                                        mla_cache_cuda *cache);
/* Keys per split mla_attend_absorbed_mma_cuda takes when cache->split is 0, over n held rows of row_bytes
 * each in batch sequences of `heads` heads: the splits fill the SMs once (one block each) and each
 * split's rows carry at least four times its partial sums' bytes; a multiple of the 32-row tile. */
size_t mla_mma_split_cuda(size_t n, size_t batch, size_t heads, size_t row_bytes);

#ifdef __cplusplus
}
#endif

#endif
