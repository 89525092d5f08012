/* Multi-head attention with grouped KV heads: MHA, GQA and MQA in one module (Shazeer 2019; GQA paper).
 *
 *   q_{t,h} = RoPE(W_Q^h x_t, t)    [H][Dh]        k_{t,g} = RoPE(W_K^g x_t, t)    [Hkv][Dh]
 *   v_{t,g} = W_V^g x_t             [Hkv][Dh]      head h reads KV head g(h) = ⌊h / (H/Hkv)⌋
 *   s_{t,h,j} = q_{t,h}·k_{j,g(h)} / √Dh  for keys j visible to t (swa.h: j ≤ t, and j > t − W when W > 0)
 *   o_{t,h} = Σ_j softmax_j(s) v_{j,g(h)}          out_t = W_O concat_h o_{t,h}    [d ← H·Dh]
 *
 * Hkv is only a dimension: Hkv = H is MHA, Hkv = 1 is MQA, anything dividing H is GQA-Hkv. RoPE rotates
 * all Dh channels with half-split pairing (channel i with i + Dh/2, as Llama-style models) and plain
 * frequencies base^(−2i/Dh). The cache keeps, per token, K and V of every KV head: 2·Hkv·Dh elements
 * (DeepSeek LLM 67B: 2·8·128 bf16 = 4,096 B per layer).
 *
 * Three paths compute the same function (tests/test_ch01_mha.c):
 *   mha_forward   whole sequence from position 0, banded causal mask, matrix products through BLAS;
 *   mha_prefill   a chunk of S tokens at positions len … len + S − 1 of a cache: keys are the cached
 *                 rows the chunk's first query still sees plus the chunk's own, under the same mask;
 *                 the chunk's rows are then appended;
 *   mha_decode    one token: its row is appended, then it attends over every row the ring holds, in
 *                 place in its store, per KV group as matrix products over tiles of rows (ref/core/attend.h).
 *
 * Letters: T tokens, S chunk length, H query heads, Hkv KV heads, Dh head dim, W window, d width. */
#ifndef KVL_MHA_H
#define KVL_MHA_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "rng.h"
#include "rope.h"
#include "swa.h"

typedef struct {
    size_t d;            /* model width */
    size_t n_heads;      /* H */
    size_t n_kv_heads;   /* Hkv, divides H */
    size_t head_dim;     /* Dh, even, at most KVL_ROPE_MAX_DR (RoPE covers the whole head) */
    size_t window;       /* W; 0 = full causal attention */
    kvl_rope rope;       /* half-split over Dh channels */
} mha_config;

/* c = the given dims with plain RoPE of base rope_base. KVL_EINVAL (naming the field) for a zero
 * dim, Hkv not dividing H, or Dh odd or above KVL_ROPE_MAX_DR. */
int mha_config_init(mha_config *c, size_t d, size_t n_heads, size_t n_kv_heads, size_t head_dim, size_t window,
                    double rope_base);

/* c = the attention of layer `layer` of an MHA-generation model (hidden_size, num_attention_heads,
 * num_key_value_heads, head_dim, sliding_window, rope_theta). KVL_EINVAL for another generation, a
 * layer out of range, or rope scaling (this module rotates with plain frequencies only). */
int mha_config_from_model(mha_config *c, const kvl_model *m, size_t layer);

/* Weights, stored [out][in] and applied as y = W x; cut from one allocation. w_k and w_v are
 * adjacent, so [w_k; w_v] is one [2·Hkv·Dh][d] matrix whose product with x is a cache row [K | V]. */
typedef struct {
    float *w_q;   /* [H·Dh][d] */
    float *w_k;   /* [Hkv·Dh][d] */
    float *w_v;   /* [Hkv·Dh][d], directly after w_k */
    float *w_o;   /* [d][H·Dh] */
} mha_weights;

/* The number of floats mha_weights_init_random draws for c, allocating nothing (0 when a product
 * overflows). */
uint64_t mha_weights_size(const mha_config *c);

/* Draw every weight from rng as N(0, 1/fan_in), in the order w_q, w_k, w_v, w_o (each in C order).
 * KVL_ENOMEM; on failure *w is empty. */
int mha_weights_init_random(mha_weights *w, const mha_config *c, kvl_rng *rng);
void mha_weights_free(mha_weights *w);

/* The KV cache: one ring row per token, [K | V] = [Hkv][Dh] keys (rotated) then [Hkv][Dh] values.
 * W slots for a windowed layer, max_tokens for a full one (swa.h). */
typedef struct {
    kv_ring ring;
    size_t window;   /* the W it was made for; prefill and decode check it against the config */
} mha_cache;

/* An empty cache for up to max_tokens positions, stored as `store`. KVL_EINVAL, KVL_ENOMEM. */
int mha_cache_init(mha_cache *cache, const mha_config *c, size_t max_tokens, kv_store store);
/* Bytes of the rows held now: min(len, S)·2·Hkv·Dh·element bytes. */
size_t mha_cache_bytes_used(const mha_cache *cache);
void mha_cache_free(mha_cache *cache);

/* out[T][d] = attention of x[T][d] at positions 0 … T − 1 (T ≥ 1). KVL_EINVAL, KVL_ENOMEM. */
int mha_forward(float *out, const mha_config *c, const mha_weights *w, const float *x, size_t T);

/* out[S][d] for x[S][d] at positions len … len + S − 1 of the cache, appending their rows (S ≥ 1).
 * KVL_EINVAL if the cache does not match the config or has no room; nothing is appended then. */
int mha_prefill(float *out, const mha_config *c, const mha_weights *w, mha_cache *cache, const float *x,
                size_t S);

/* out[d] for x_t[d] at position len of the cache, appending its row. KVL_EINVAL as mha_prefill. */
int mha_decode(float *out, const mha_config *c, const mha_weights *w, mha_cache *cache, const float *x_t);

#endif
