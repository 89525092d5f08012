/* DeepSeek sparse attention, V3.2 (DeepSeek-V3.2-Exp report; DeepSeek-V3.2 inference/model.py, class Indexer;
 * chapters/04_dsa/README.md; tests/test_ch04_dsa.c and test_ch04_indexer.c).
 *
 * MLA as in ref/mla.h in every layer, plus a lightning indexer per layer that picks, for each query,
 * the K earlier positions whose latent rows the attention may read. One selected set per query serves
 * all H heads, so the attention stays in MLA's absorbed MQA form over K rows instead of t + 1.
 *
 * Letters: T tokens, S tokens of one chunk, N keys (positions 0 … N − 1), d model width, Dq' query
 * latent, H heads, Dc latent, Dr rotary width, Dnope, Dv as in ref/mla.h; HI index heads, DI index
 * head width, K index_topk.
 *
 *   c^Q   = RMSNorm(W_DQ x)                       [Dq']      MLA's query latent, shared
 *   q^I   = W_IQ c^Q  → [HI][DI]                  W_IQ [HI·DI][Dq']
 *   k^I   = LayerNorm(W_IK x) with gain and bias  W_IK [DI][d], ε 1e-6; one key per token, all heads
 *   RoPE on the LEADING Dr channels of every q^I head and of k^I, half-split pairs (i, i + Dr/2), with
 *        MLA's YaRN frequencies (DeepSeek-V3.2 inference/model.py: "rope in indexer is not interleaved")
 *   w     = W_IW x · HI^−½ · DI^−½                W_IW [HI][d] (float32 in the reference)
 *   I_t,s = Σ_j w_j · ReLU(q^I_j · k^I_s)   for s ≤ t, −∞ for s > t
 *   S_t   = the min(K, t + 1) largest I_t,s; larger score first, the smaller position on ties, stored
 *           ascending, −1 padding up to K (ref/core/topk.h)
 *   MLA scores of query t forced to −∞ outside S_t; plain softmax.
 * I is never softmaxed in the model: only its order is used, but both scale factors are applied so the scores
 * can be compared with any reference dump (chapters/DISAGREEMENTS.md). The index key of the current token is
 * written before scoring, so every query can select itself.
 *
 * Two formulations of the sparse attention, equal in exact arithmetic:
 *   masked  the additive mask over the full [S][N] score matrix (0 on S_t, −∞ elsewhere), what the
 *           reference runs: its prefill in MLA's naive per-head form (a block of queries at a time),
 *           its decode in the absorbed form;
 *   gather  the chosen rows copied out by index, then absorbed attention over those K rows only, what
 *           the sparse kernels run (FlashMLA's sparse decode).
 *
 * Two forms of the indexer:
 *   f32     the formula above in float32;
 *   fp8     DeepSeek's deployed one: q^I heads and k^I rotated by the orthonormal H_DI/√DI
 *           (ref/hadamard.h), then FP8 E4M3 with one power-of-two FP32 scale per 128 channels
 *           (formats' kvf_quant_fp8_ue8m0), and scored as above on the decoded values. With
 *           power-of-two scales that is the reference kernel's k_scale·Σ_j ReLU(q8_j·k8)·(w_j·q_scale_j)
 *           with the scales factored out exactly.
 *
 * The cache keeps, per token, MLA's row [c_kv | k_rope] and the index key, either as float32 or in the
 * deployed bytes (formats/rows.h): the 656-byte V3.2 main row (E4M3 latent, four scales, bf16 RoPE)
 * and the 132-byte index key (the rotated k^I in E4M3 with one scale), 788 bytes per token per layer.
 * A V3.2 cache is read as the deployed model reads it: attention over the decoded rows, and the fp8
 * indexer (its keys are stored rotated and quantised). The whole-sequence forward is the f32
 * definition.
 *
 * Matrix products go through ref/core/linalg.h (OpenBLAS); call from outside OpenMP parallel regions. */
#ifndef KVL_DSA_H
#define KVL_DSA_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "mla.h"
#include "rng.h"
#include "swa.h"

/* LayerNorm ε of the index key: the V3.2 Indexer's LayerNorm default, not the config's norm_eps. */
#define DSA_INDEX_NORM_EPS 1e-6

typedef struct {
    mla_config mla;         /* the attention; no window, Dq' > 0 (the indexer reads c^Q) */
    size_t index_n_heads;   /* HI */
    size_t index_head_dim;  /* DI ≥ Dr */
    size_t index_topk;      /* K */
    double index_norm_eps;  /* LayerNorm ε of k^I */
} dsa_config;

/* c = the attention and indexer of a loaded V3.2 config. KVL_EINVAL for another generation, naming
 * the file. */
int dsa_config_from_model(dsa_config *c, const kvl_model *m);

/* KVL_EINVAL unless mla_config_check passes, the window is 0, Dq' > 0, HI, DI and K are positive,
 * DI ≥ Dr and ε is finite and non-negative; the message names the field. Every function below that
 * takes a config checks it so. */
int dsa_config_check(const dsa_config *c);

/* ---- weights: one allocation, MLA's weights first, then the indexer's, in field order ------------- */

typedef struct {
    mla_weights mla;  /* cut from the front of block */
    float *w_iq;      /* [HI·DI][Dq'] */
    float *w_ik;      /* [DI][d] */
    float *k_norm;    /* [DI] LayerNorm gain */
    float *k_bias;    /* [DI] LayerNorm bias */
    float *w_iw;      /* [HI][d] */
    float *block;     /* the allocation every field points into */
    size_t n_floats;  /* its length */
} dsa_weights;

/* *n_floats = the block length dsa_weights_alloc would allocate for c (MLA's weights, then the
 * indexer's), allocating nothing. KVL_EINVAL for a bad config or an overflow. */
int dsa_weights_size(size_t *n_floats, const dsa_config *c);

/* Allocate the weights of c, zeroed. KVL_EINVAL (bad config, size overflow), KVL_ENOMEM; on failure
 * *w is empty and dsa_weights_free is harmless. */
int dsa_weights_alloc(dsa_weights *w, const dsa_config *c);

/* Allocate and draw: MLA's weights as mla_weights_init_random draws them, then in field order each
 * matrix N(0, 1/fan_in), the LayerNorm gain uniform on [0.5, 1.5) and its bias uniform on [−0.5, 0.5)
 * (so that a dropped gain or bias shows). */
int dsa_weights_init_random(dsa_weights *w, const dsa_config *c, kvl_rng *rng);

void dsa_weights_free(dsa_weights *w);

/* ---- the indexer, piece by piece ------------------------------------------------------------------ */

/* q_idx[S][HI][DI] (each head's leading Dr channels rotated at position start + i) and
 * w_idx[S][HI] = W_IW x · HI^−½·DI^−½, for x[S][d]. */
int dsa_index_query(float *q_idx, float *w_idx, const dsa_config *c, const dsa_weights *w, const float *x,
                    size_t S, size_t start);

/* k_idx[S][DI] = RoPE(LayerNorm(W_IK x)) for x[S][d], row i at position start + i. */
int dsa_index_key(float *k_idx, const dsa_config *c, const dsa_weights *w, const float *x, size_t S,
                  size_t start);

/* I[S][N] = Σ_j w_idx[i][j]·ReLU(q_idx[i][j]·k_idx[s]) for key positions s ≤ start + i, −INFINITY for
 * s > start + i; queries at positions start … start + S − 1, keys at 0 … N − 1. The head sum runs in
 * float32, head by head. */
int dsa_index_scores(float *I, const dsa_config *c, const float *q_idx, const float *w_idx, const float *k_idx,
                     size_t S, size_t N, size_t start);

/* v[n][DI] ← the fp8 indexer's view of n query heads or keys: rotated by H_DI/√DI, then quantised to
 * E4M3 with one power-of-two scale per 128 channels and decoded. KVL_EINVAL unless DI is a power of
 * two and a multiple of 128, or for a NaN or infinity in v (v then unchanged). */
int dsa_index_quantise(float *v, const dsa_config *c, size_t n);

/* Top-k selection: kvl_topk (ref/core/topk.h). */

/* ---- the indexer over a whole sequence -------------------------------------------------------------- */

/* I[T][T] for x[T][d] at positions 0 … T − 1 (−INFINITY above the diagonal): the f32 and the fp8 form. */
int dsa_indexer_f32(float *I, const dsa_config *c, const dsa_weights *w, const float *x, size_t T);
int dsa_indexer_fp8(float *I, const dsa_config *c, const dsa_weights *w, const float *x, size_t T);

/* *recall = Σ_t |S_t^fp8 ∩ S_t^f32| / Σ_t |S_t^f32| over the T queries of x[T][d]: the share of the
 * float32 indexer's picks the fp8 indexer also makes (queries with t < K count, trivially 1). */
int dsa_index_recall(double *recall, const dsa_config *c, const dsa_weights *w, const float *x, size_t T);

/* ---- the sparse attention, both formulations --------------------------------------------------------
 * o[S][H][Dv] for queries q[S][H][Dnope+Dr] (mla_query) over key rows rows[N][Dc+Dr] (mla_latent),
 * query i reading the rows sel[i][0 … K − 1] (−1 entries skipped; positions index rows). A query with
 * no valid entry gets o = 0. KVL_EINVAL for an entry outside −1 … N − 1, and in the gather form for a
 * position selected twice (it gathers at most min(K, N) distinct rows). */

/* mask[S][N] = 0 at the positions in sel[S][K], −INFINITY elsewhere. */
int dsa_index_mask(float *mask, const int32_t *sel, size_t S, size_t N, size_t K);

/* The masked formulation, MLA's naive form (the reference prefill; mla_attend_naive, a block of queries
 * at a time against the rows up to the block's furthest pick) and absorbed form (its decode). */
int dsa_attend_masked_naive(float *o, const dsa_config *c, const dsa_weights *w, const float *q, const float *rows,
                            const int32_t *sel, size_t S, size_t N);
int dsa_attend_masked_absorbed(float *o, const dsa_config *c, const dsa_weights *w, const float *q,
                               const float *rows, const int32_t *sel, size_t S, size_t N);

/* The gather formulation: per query, the selected rows [≤K][Dc+Dr] copied out, absorbed attention. */
int dsa_attend_gather(float *o, const dsa_config *c, const dsa_weights *w, const float *q, const float *rows,
                      const int32_t *sel, size_t S, size_t N);

/* ---- whole sequence ---------------------------------------------------------------------------------- */

/* out[T][d] for x[T][d] at positions 0 … T − 1: the definition (f32 indexer, masked naive attention).
 * sel[T][K] receives the selections (NULL: not wanted). */
int dsa_forward(float *out, int32_t *sel, const dsa_config *c, const dsa_weights *w, const float *x, size_t T);

/* ---- the cache ------------------------------------------------------------------------------------- */

typedef enum {
    DSA_CACHE_F32, /* rows and index keys as float32: exact, for equivalence tests */
    DSA_CACHE_V32, /* the deployed bytes: 656-byte main row + 132-byte index key per token (Dc 512,
                      Dr 64, DI 128 only) */
} dsa_cache_format;

/* "f32" or "v32" */
const char *dsa_cache_format_name(dsa_cache_format f);

typedef struct {
    dsa_cache_format fmt;
    size_t len;           /* positions held: 0 … len − 1 */
    size_t max_tokens;
    mla_cache latent;     /* F32: rows [c_kv | k_rope] on MLA's ring (no window: it never wraps) */
    kv_ring index_keys;  /* F32: k^I [DI] per position */
    uint8_t *main_rows;   /* V32: [max_tokens][656], KVF_ROW_V32_MAIN */
    uint8_t *index_rows;  /* V32: [max_tokens][132], KVF_ROW_V32_INDEX of H_DI/√DI · k^I; the paged
                             cache keeps a page's codes and scales apart, here a token's bytes are
                             contiguous (DeepGEMM's tests/test_attention.py
                             has the paged layout) */
} dsa_cache;

/* A cache for positions 0 … max_tokens − 1. KVL_EINVAL (bad config, zero max_tokens, V32 at widths
 * other than the rows', size overflow), KVL_ENOMEM; on failure *cache is empty. */
int dsa_cache_init(dsa_cache *cache, const dsa_config *c, size_t max_tokens, dsa_cache_format fmt);

/* Bytes the cache holds now: len · ((Dc + Dr + DI)·4) for F32, len · (656 + 132) for V32. */
size_t dsa_cache_bytes_used(const dsa_cache *cache);

void dsa_cache_free(dsa_cache *cache);

/* ---- incremental --------------------------------------------------------------------------------------
 * Each call takes the tokens at the cache's next positions start … start + S − 1, computes their rows
 * and index keys and passes them through the cache's storage, scores the indexer over positions
 * 0 … start + S − 1 (the new keys included), selects, attends, and only then appends to the cache (on
 * failure the cache is unchanged). sel[S][K] receives the selections (NULL: not wanted). */

/* out[S][d] for a chunk x[S][d]: the reference prefill, masked naive attention over [S][start + S]. */
int dsa_prefill(float *out, int32_t *sel, const dsa_config *c, const dsa_weights *w, dsa_cache *cache,
                const float *x, size_t S);

/* ô[H][Dc] = attention of one absorbed query q_hat[H][Dc+Dr] (mla_absorb_query) over the held rows
 * sel[K] names, as kvl_topk lists them (positions, then −1; positions in any order, each < cache->len):
 * dsa_decode_gather's sparse attention. Tiled (ref/core/attend.h); each thread's part reads its picks
 * where the cache holds them, a V32 row decoded a pick at a time, so nothing is gathered first.
 * KVL_EINVAL for a NULL array, a bad config or cache, a position < −1 or past the held ones. */
int dsa_attend_picks(float *o_hat, const dsa_config *c, const float *q_hat, const dsa_cache *cache,
                     const int32_t *sel);

/* out[d] for one token x_t[d]: masked absorbed attention over every held row (the reference decode),
 * or absorbed attention over the K selected rows read from the cache by index (what kernels run; its
 * own row is among them when picked), as dsa_attend_picks reads them. */
int dsa_decode_masked(float *out, int32_t *sel, const dsa_config *c, const dsa_weights *w, dsa_cache *cache,
                      const float *x_t);
int dsa_decode_gather(float *out, int32_t *sel, const dsa_config *c, const dsa_weights *w, dsa_cache *cache,
                      const float *x_t);

#endif
