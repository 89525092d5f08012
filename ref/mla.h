/* Multi-head latent attention, DeepSeek-V2/V3 (DeepSeek-V2 paper, section 2.1; DeepSeek-V3 inference/model.py,
 * class MLA), in its two forms.
 *
 * Every token is cached as one row [c_kv | k_rope] of Dc + Dr values: the RMS-normalised KV latent and
 * the decoupled RoPE key that all heads share. The two forms read the same rows:
 *   naive     rebuilds every head's key [W_UK^h c_j | k_rope_j] and value W_UV^h c_j from each row,
 *             then runs ordinary attention (what DeepSeek-V3 runs with attn_impl "naive", and V3.2 for prefill);
 *   absorbed  folds W_UK^h into the query (q̂_h = W_UK^hᵀ q^C_h, Dnope → Dc per head), scores every head
 *             against the Dc + Dr wide rows in one product, sums the rows' c_kv under the weights, and
 *             applies W_UV^h after (DeepSeek-V3 attn_impl "absorb", V3.2 decode, FlashMLA's "MQA mode").
 * They are one function in exact arithmetic (tests/test_ch02_mla.c); in float they differ by rounding.
 *
 * Letters: T tokens, S tokens of one chunk, N cached keys, d model width, H heads, Dq' query latent
 * (q_lora_rank), Dc KV latent (kv_lora_rank), Dnope and Dr the non-rotary and rotary query/key channels,
 * Dv value channels, W window. A head's query is [q^C | q^R] of Dnope + Dr channels, q^R last.
 *
 *   c^Q = RMSNorm(W_DQ x)              W_DQ  [Dq'][d]             (Dq' = 0: q = W_Q x, W_Q [H·(Dnope+Dr)][d])
 *   q   = W_UQ c^Q  → [H][Dnope+Dr]     W_UQ  [H·(Dnope+Dr)][Dq']   q^R rotated at the token's position
 *   [c̃ | k̃] = W_DKV x                  W_DKV [Dc+Dr][d]            c_kv = RMSNorm(c̃), k_rope = RoPE(k̃)
 *   W_UKV [H·(Dnope+Dv)][Dc], viewed [H][Dnope+Dv][Dc]: W_UK^h its first Dnope rows, W_UV^h the next Dv
 *   s = (q^C·W_UK^h c_j + q^R·k_rope_j)·scale,  scale = (Dnope+Dr)^−½·m² (YaRN mscale m)
 *   out = W_O concat_h o_h               W_O   [d][H·Dv]
 * RoPE pairs channels (2i, 2i+1) with the YaRN frequencies of the config (ref/core/rope.h).
 *
 * A window W > 0 restricts query t to keys t − W < j ≤ t (ref/swa.h); the cache is then a ring of W
 * rows. The whole-sequence forward applies the same rule as a banded mask.
 * Matrix products go through ref/core/linalg.h (OpenBLAS); call these functions from outside OpenMP
 * parallel regions. */
#ifndef KVL_MLA_H
#define KVL_MLA_H

#include <stddef.h>

#include "attend.h"
#include "config.h"
#include "rope.h"
#include "rng.h"
#include "swa.h"

typedef struct {
    size_t d;             /* model width */
    size_t n_heads;       /* H */
    size_t q_lora_rank;   /* Dq'; 0: the query is projected from x directly */
    size_t kv_lora_rank;  /* Dc */
    size_t qk_nope;       /* Dnope */
    size_t qk_rope;       /* Dr, equal to rope.Dr */
    size_t v_head;        /* Dv */
    size_t window;        /* W; 0: none */
    double norm_eps;      /* RMSNorm epsilon of c^Q and c_kv (MLA_LATENT_NORM_EPS from a config) */
    double softmax_scale; /* (Dnope+Dr)^−½·m² */
    kvl_rope rope;        /* interleaved RoPE of q^R and k_rope */
} mla_config;

/* ε of the latent norms q_a_layernorm and kv_a_layernorm: transformers' DeepseekV2/V3/V32Attention build
 * them with their RMSNorm's default and DeepSeek's V3 and V3.2 inference code with its RMSNorm's default,
 * never the config's rms_norm_eps (which only the decoder layer's norms take). */
#define MLA_LATENT_NORM_EPS 1e-6

/* c = the attention of a loaded MLA or DSA config (dims, window, norm_eps = MLA_LATENT_NORM_EPS; YaRN RoPE and the mscale
 * softmax factor when rope factor > 1, plain RoPE and Dqk^−½ otherwise, taken from the config, never
 * from a buffer size as DeepSeek-V3's max_seq_len gate does). KVL_EINVAL for any other generation,
 * naming the file. */
int mla_config_from_model(mla_config *c, const kvl_model *m);

/* KVL_EINVAL unless every width but Dq' and W is positive, rope.Dr = Dr and the scale is finite and
 * positive; the message names the field. Every function below that takes a config checks it so. */
int mla_config_check(const mla_config *c);

/* Flop one head spends on one cached token in a decode step, by the definition (2 per multiply-add;
 * the softmax left out). The chapter programs and notebooks count work with these and nothing else.
 * Naive: rebuild the key's Dnope channels and the value from c_kv, 2·Dc·(Dnope + Dv), then score the
 * (Dnope + Dr)-wide key and add the Dv-wide value into the sum, 2·(Dnope + Dr) + 2·Dv. Absorbed:
 * score q̂·[c_kv | k_rope], 2·(Dc + Dr), and add c_kv into the sum, 2·Dc: 4·Dc + 2·Dr in all.
 * (mla_values_absorbed runs its product over the whole row and drops the k_rope columns after, a
 * convenience of the dense layout that is not the operation's work.) */
double mla_naive_flop_per_token(const mla_config *c);
double mla_absorbed_flop_per_token(const mla_config *c);

/* ---- weights: one allocation, cut in the order of the fields ------------------------------------ */

typedef struct {
    float *w_dq;     /* [Dq'][d]                 NULL when Dq' = 0 */
    float *q_norm;   /* [Dq']                    NULL when Dq' = 0 */
    float *w_uq;     /* [H·(Dnope+Dr)][Dq']      NULL when Dq' = 0 */
    float *w_q;      /* [H·(Dnope+Dr)][d]        NULL when Dq' > 0 */
    float *w_dkv;    /* [Dc+Dr][d] */
    float *kv_norm;  /* [Dc] */
    float *w_ukv;    /* [H·(Dnope+Dv)][Dc] */
    float *w_o;      /* [d][H·Dv] */
    float *block;    /* the allocation every field points into */
    size_t n_floats; /* its length */
} mla_weights;

/* Allocate the weights of c, zeroed. KVL_EINVAL (bad config, size overflow), KVL_ENOMEM; on failure
 * *w is empty and mla_weights_free is harmless. */
int mla_weights_alloc(mla_weights *w, const mla_config *c);

/* Allocate and draw, in field order: each matrix N(0, 1/fan_in) (fan_in = its row length), each norm
 * gain uniform on [0.5, 1.5) so that a dropped gain shows. */
int mla_weights_init_random(mla_weights *w, const mla_config *c, kvl_rng *rng);

void mla_weights_free(mla_weights *w);

/* For a module that extends MLA (ref/dsa.h) and keeps MLA's weights at the front of its own single
 * allocation: *n_floats = the block length mla_weights_alloc would allocate (KVL_EINVAL: bad config,
 * overflow); mla_weights_cut points w's fields into block[*n_floats], which the caller owns and frees
 * (never mla_weights_free); mla_weights_draw draws them as mla_weights_init_random does. */
int mla_weights_size(size_t *n_floats, const mla_config *c);
void mla_weights_cut(mla_weights *w, const mla_config *c, float *block);
void mla_weights_draw(mla_weights *w, const mla_config *c, kvl_rng *rng);

/* ---- the cache: one [Dc+Dr] row per token in a ring (ref/swa.h) -------------------------------- */

typedef struct {
    kv_ring ring; /* rows [c_kv | k_rope]; W slots when windowed, max_tokens otherwise */
} mla_cache;

/* A cache for positions 0 … max_tokens − 1 storing rows as `store` (float32 or bf16). */
int mla_cache_init(mla_cache *cache, const mla_config *c, size_t max_tokens, kv_store store);

/* Append rows[n][Dc+Dr] computed elsewhere (mla_latent, or synthetic rows for a benchmark) at the
 * next n positions. KVL_EINVAL if the cache would pass max_tokens or the width does not match c. */
int mla_cache_append(mla_cache *cache, const mla_config *c, const float *rows, size_t n);

/* Bytes the cache holds now: (Dc+Dr)·element bytes per held token. */
size_t mla_cache_bytes_used(const mla_cache *cache);

void mla_cache_free(mla_cache *cache);

/* ---- the pieces both forms share ----------------------------------------------------------------- */

/* cq[S][Dq'] = c^Q = RMSNorm(W_DQ x) for x[S][d], the query latent (the V3.2 indexer reads it too).
 * KVL_EINVAL when Dq' = 0. */
int mla_query_latent(float *cq, const mla_config *c, const mla_weights *w, const float *x, size_t S);

/* q[S][H][Dnope+Dr] for x[S][d], row i at position start + i (q^R rotated). */
int mla_query(float *q, const mla_config *c, const mla_weights *w, const float *x, size_t S, size_t start);

/* rows[S][Dc+Dr] = [c_kv | k_rope] for x[S][d], row i at position start + i. */
int mla_latent(float *rows, const mla_config *c, const mla_weights *w, const float *x, size_t S, size_t start);

/* ---- the two forms, step by step --------------------------------------------------------------------
 * scores[S][H][N]: the scaled logits of query i, head h against key row j, plus mask[S][N] (additive,
 * 0 or −INFINITY; NULL: every key visible). Softmax them into weights p[S][H][N] (kvl_softmax_f32 on
 * each of the S·H rows), then o[S][H][Dv] = Σ_j p·v_{j,h}. Keys are rows[N][Dc+Dr] in any order. */

int mla_scores_naive(float *scores, const mla_config *c, const mla_weights *w, const float *q,
                     const float *rows, const float *mask, size_t S, size_t N);
int mla_values_naive(float *o, const mla_config *c, const mla_weights *w, const float *p, const float *rows,
                     size_t S, size_t N);

/* The naive form a block of queries at a time, for chunks too long for [S][H][N] scores (a 4K chunk of V3's
 * 128 heads after 28K tokens would hold 64 GiB of them): o[S][H][Dv] for q[S][H][Dnope+Dr] over
 * rows[N][Dc+Dr], head by head (its keys and values expanded once), KVL_QUERY_BLOCK queries at a time
 * against the leading rows the block sees, under the rows `mask` gives for the block
 * (kvl_attend_chunk_head, ref/core/attend.h: the softmax in float). The same function as
 * mla_scores_naive, kvl_softmax_f32 and mla_values_naive under the whole mask, to float rounding, in
 * memory O(N·(Dc + Dnope + Dr + Dv)) and O(KVL_QUERY_BLOCK·N) a thread. The heads run one after another;
 * a head's query blocks may be split among threads by the backend's kvl_attend_chunk_head, so `mask`'s
 * functions can be called from several threads at once. KVL_EINVAL also for a mask block wider than N. */
int mla_attend_naive(float *o, const mla_config *c, const mla_weights *w, const float *q, const float *rows,
                     size_t S, size_t N, kvl_chunk_mask mask);

int mla_scores_absorbed(float *scores, const mla_config *c, const mla_weights *w, const float *q,
                        const float *rows, const float *mask, size_t S, size_t N);
int mla_values_absorbed(float *o, const mla_config *c, const mla_weights *w, const float *p,
                        const float *rows, size_t S, size_t N);

/* The absorbed form's two ends, for attention run on its own (kvl_attend over a view of rows; V3.2's
 * sparse decode): q_hat[S·H][Dc+Dr] = [q^C_h W_UK^h | q^R_h] for q[S][H][Dnope+Dr], and
 * o[S][H][Dv] = W_UV^h ô_h for o_hat[S·H][Dc]. */
int mla_absorb_query(float *q_hat, const mla_config *c, const mla_weights *w, const float *q, size_t S);
int mla_expand_output(float *o, const mla_config *c, const mla_weights *w, const float *o_hat, size_t S);

/* ---- whole sequence and incremental ---------------------------------------------------------------- */

/* out[T][d] for x[T][d] at positions 0 … T − 1: the definition (naive form, causal or banded mask, run
 * by mla_attend_naive). */
int mla_forward(float *out, const mla_config *c, const mla_weights *w, const float *x, size_t T);

/* out[S][d] for a chunk x[S][d] at the cache's next positions start … start + S − 1 (start = tokens
 * cached so far), naive form: the chunk's queries see the cached rows in their window and the chunk's
 * own rows under the mask [S][start+S] with j ≤ start + i (mla_attend_naive); then the chunk's rows are
 * appended. Any split of a sequence into chunks gives the forward's rows. The chunk's rows pass through the cache's
 * storage before any query reads them, as they would from the cache. */
int mla_prefill(float *out, const mla_config *c, const mla_weights *w, mla_cache *cache, const float *x,
                size_t S);

/* out[d] for one token x_t[d] at the cache's next position: append its row, then attend over every
 * held row (the window, or the whole context). The naive form re-expands K [N][H][Dnope+Dr] and
 * V [N][H][Dv] head by head; the absorbed form reads the rows as they are, in the ring's store, as
 * matrix products over tiles of rows with an online softmax (ref/core/attend.h). */
int mla_decode_naive(float *out, const mla_config *c, const mla_weights *w, mla_cache *cache, const float *x_t);
int mla_decode_absorbed(float *out, const mla_config *c, const mla_weights *w, mla_cache *cache,
                        const float *x_t);

#endif
