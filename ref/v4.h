/* DeepSeek-V4 attention: a window in every layer, CSA and HCA compressed branches, sinks and a grouped
 * output (DeepSeek-V4 report, section 2.3; DeepSeek-V4-Flash inference/model.py; transformers deepseek_v4;
 * chapters/06_v4/README.md; tests/test_ch06_v4.c and test_ch06_model.c).
 *
 * Every layer is shared-KV MQA: one Dh-wide vector per key is both key and value. Which keys a query
 * reads depends on the layer's kind (the config's compress_ratios, not the transformers fallback):
 *   window-only (ratio 0)  the W = 128 newest positions, plain RoPE (rope_theta, no YaRN)
 *   HCA (ratio 128)        the window + every compressed entry visible so far (M = 128, no overlap)
 *   CSA (ratio 4)          the window + the K entries the indexer picks (M = 4, overlapping blocks)
 * Layers with a compressor rotate everything (queries, window rows, entries, index keys) with the
 * compress rope: compress_rope_theta with YaRN.
 *
 *   c^Q = RMSNorm(W_DQ x)                         [Dq']       W_DQ [Dq'][d], gain
 *   q_h = (W_UQ c^Q)_h                            [H][Dh]     W_UQ [H·Dh][Dq']
 *   q_h ← q_h / sqrt(mean(q_h²) + ε)              unweighted per-head RMSNorm: V4 only, a separate step
 *                                                 (v4_query_head_norm; transformers q_b_norm)
 *   q_h[Dh−Dr … Dh−1] ← RoPE(·, t)                interleaved, trailing channels (as the code, not
 *                                                 the transformers docstring)
 *   y_t = RMSNorm(W_KV x)  [Dh], y_t[Dh−Dr …] ← RoPE(·, t)      W_KV [Dh][d], gain: the window row
 *   keys of t: window rows y_j, j ∈ [max(0, t−W+1), t], then compressed entries C_i
 *     (ref/v4_compressor.h; entry i visible iff (i+1)·M − 1 ≤ t, i.e. i < ⌊(t+1)/M⌋)
 *   s_{h,i} = q_h·k_i / √Dh;  p = sink softmax with σ_h (ref/core/softmax.h: σ joins the denominator only)
 *   o_h = Σ_i p_{h,i} k_i  [Dh];  ō_h[Dh−Dr …] = RoPE^−1(o_h[Dh−Dr …], t)   (the rotation the values carried)
 *   u_r = W_OA^r concat_{h ∈ group r} ō_h         [Do]        G groups of H/G consecutive heads;
 *                                                             W_OA [G·Do][(H/G)·Dh] read as G blocks
 *   out = W_OB concat_r u_r                       [d]         W_OB [d][G·Do]
 * After the inverse rotation every contribution depends on key position − t only, so shifting every
 * rotary position by the same Δ (config rope_offset) leaves the output unchanged (tests/test_ch06_v4.c).
 *
 * Three paths:
 *   v4_forward   the whole sequence from position 0, the definition: window rows of the whole sequence
 *                under the banded rule, entries from the batched compressor, the float32 indexer;
 *   v4_prefill   a chunk at the cache's next positions; v4_decode one token (the same path, S = 1): the
 *                compressors are fed first (incremental state), so an entry the chunk completes, and its
 *                index key, are readable by the queries that may see it; then the chunk attends;
 *   v4_replay    a prefix-cache hit: the cache keeps every compressed entry, index key and compressor
 *                state but no window rows (v4_cache_drop_window); replay re-runs tokens from s with the
 *                global part read as it is and windows truncated at s (query t sees [max(s, t−W+1), t]).
 *                Rows from s + W − 1 on are the original's; bit for bit when the replayed chunks have the
 *                original's shapes (OpenBLAS rounds a product differently for another batch shape; the
 *                attention core itself computes each query the same way in any chunk).
 *
 * The cache holds, per layer: the window ring (W rows), the compressed entries and (CSA) index keys,
 * and the compressor states. Entries are float32 (exact, for tests) or the deployed bytes: 584-byte main
 * rows for window rows and entries alike, 68-byte MXFP4 index keys (Dh 512, Dr 64, DI 128 only). A
 * native cache is read as the deployed model reads it: attention over the decoded rows, the fp4
 * indexer (ref/v4_indexer.h). Per token per layer it holds (584 + 68)/4 = 163 bytes (CSA) or 584/128 =
 * 4.5625 (HCA), 0 for a window-only layer; the window rows (W·584) and the compressor states are
 * bounded per sequence and reported apart.
 *
 * Out of scope, as in the whole project: hyper-connections (mHC), MoE, MTP. Matrix products go
 * through ref/core/linalg.h (OpenBLAS); call from outside OpenMP parallel regions.
 *
 * Letters: T tokens, S chunk, t query position, d width, H heads, Dh head dim (the entry width), Dr
 * rotary channels, Dq' query latent, G output groups, Do o_lora_rank, W window, M compress ratio, N
 * entries, HI/DI index heads/width, K index_topk. */
#ifndef KVL_V4_H
#define KVL_V4_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "rng.h"
#include "rope.h"
#include "v4_compressor.h"
#include "v4_indexer.h"
#include "v4_rows.h"

typedef struct {
    kvl_layer_kind kind;      /* KVL_LAYER_WINDOW, KVL_LAYER_CSA or KVL_LAYER_HCA */
    size_t d;                 /* model width */
    size_t n_heads;           /* H */
    size_t head_dim;          /* Dh */
    size_t q_lora_rank;       /* Dq' */
    size_t o_groups;          /* G */
    size_t o_lora_rank;       /* Do */
    size_t window;            /* W */
    double norm_eps;          /* every RMSNorm: c^Q, query heads, window rows (the compressors carry theirs) */
    kvl_rope rope;            /* the layer's rotary table, Dr = rope.Dr */
    int64_t rope_offset;      /* Δ added to every rotary position; 0 in a model */
    v4_compressor_config compressor;  /* CSA, HCA: width Dh, ratio M, overlap 1 (CSA) or 0 (HCA) */
    v4_indexer_config indexer;        /* CSA only */
} v4_config;

/* c = layer `layer` of a loaded V4 config: its kind and ratio from compress_ratios, the plain rope for a
 * window-only layer and the compress rope (with YaRN when its factor exceeds 1) otherwise. KVL_EINVAL
 * for another generation or kind, naming the file and the layer. */
int v4_config_from_model(v4_config *c, const kvl_model *m, size_t layer);

/* KVL_EINVAL unless the kind is one of the three, every width is positive, G divides H, 2 ≤ Dr ≤ Dh,
 * W > 0, ε is finite and non-negative, and the compressor (and for CSA the indexer) check and match
 * the layer (width Dh, the layer's rope; indexer d and Dq' the layer's, ratio and overlap the
 * compressor's). The message names the field. Every function below that takes a config checks it so. */
int v4_config_check(const v4_config *c);

/* "window(W)", "CSA(M, top-K)+window(W)", "HCA(M)+window(W)" */
const char *v4_layer_name(char *buf, size_t cap, const v4_config *c);

/* ---- weights: one allocation, cut by a sizes table ------------------------------------------------ */

typedef struct {
    float *w_dq;      /* [Dq'][d] */
    float *q_norm;    /* [Dq'] */
    float *w_uq;      /* [H·Dh][Dq'] */
    float *w_kv;      /* [Dh][d] */
    float *kv_norm;   /* [Dh] */
    float *sinks;     /* [H] one raw logit per head */
    float *w_oa;      /* [G·Do][(H/G)·Dh] */
    float *w_ob;      /* [d][G·Do] */
    v4_compressor_weights compressor;  /* CSA, HCA */
    v4_indexer_weights indexer;        /* CSA */
    float *block;     /* the allocation every field points into */
    size_t n_floats;  /* its length */
} v4_weights;

/* The number of floats v4_weights_alloc would allocate for c (a checked config), allocating nothing. */
uint64_t v4_weights_count(const v4_config *c);

/* Allocate the weights of c, zeroed: the layer's own (the order above), then the compressor's, then the
 * indexer's (ref/v4_compressor.h, ref/v4_indexer.h). KVL_EINVAL (bad config, overflow), KVL_ENOMEM; on
 * failure *w is empty and v4_weights_free is harmless. */
int v4_weights_alloc(v4_weights *w, const v4_config *c);

/* Allocate and draw in cut order: matrices N(0, 1/fan_in), gains uniform [0.5, 1.5), sinks and position
 * biases N(0, 1). */
int v4_weights_init_random(v4_weights *w, const v4_config *c, kvl_rng *rng);

void v4_weights_free(v4_weights *w);

/* ---- the pieces ------------------------------------------------------------------------------------ */

/* cq[S][Dq'] = RMSNorm(W_DQ x) for x[S][d] (the indexer reads it too). */
int v4_query_latent(float *cq, const v4_config *c, const v4_weights *w, const float *x, size_t S);

/* q[n][Dh] ← q / sqrt(mean(q²) + ε), row by row, no gain: V4's per-head query norm (V4.1 drops it). */
void v4_query_head_norm(float *q, size_t n, size_t Dh, double eps);

/* q[S][H][Dh] = W_UQ cq, head-normed, trailing Dr channels rotated at rotary position pos0 + i. */
int v4_query(float *q, const v4_config *c, const v4_weights *w, const float *cq, size_t S, int64_t pos0);

/* rows[S][Dh] = RMSNorm(W_KV x), trailing Dr channels rotated at rotary position pos0 + i: window rows. */
int v4_kv(float *rows, const v4_config *c, const v4_weights *w, const float *x, size_t S, int64_t pos0);

/* p[H][N] = the sink softmax of q[H][Dh]·keys[i]/√Dh with σ_h = sinks[h], over the N keys keys[i]
 * (each a [Dh] row); keys[i] = NULL is an invalid pick (a −1 index): weight exactly 0. A row with no
 * valid key is all zeros. Dot products in float32; softmax as ref/core/softmax.h. */
void v4_attend_weights(float *p, const float *q, const float *const *keys, size_t N, const float *sinks, size_t H,
                       size_t Dh);

/* o[H][Dh] = Σ_i p[h][i]·keys[i] (keys[i] = NULL skipped), summed in float32 in key order. */
void v4_attend_values(float *o, const float *p, const float *const *keys, size_t N, size_t H, size_t Dh);

/* The same two steps for one query over its window and its entries: o[H][Dh] for q[H][Dh] over its n_win
 * window rows win[n_win][Dh], then K entries of the view: the picks sel[K] (−1: an invalid pick, left
 * out: its weight is exactly 0), or with sel NULL the first K (HCA's), in order, by kvl_attend
 * (ref/core/attend.h) with the sinks, each row both key and value, then rotated back at the query's
 * position pos (v4_unrotate_heads with rope). The entries are read where they are, through a view
 * that puts them after the window rows (decoded as read when packed), never gathered into a copy
 * first. V4's CSA and HCA layers and all of V4.1's modes (K = 0: the window alone) run it. KVL_EINVAL
 * for a pick outside −1 … N − 1 (naming it), K entries without a view or past its N, entries of another
 * width; otherwise as kvl_attend. */
int v4_attend_query(float *o, const float *q, const float *win, size_t n_win, const kvl_row_tiles *entries,
                    const int32_t *sel, size_t K, const float *sinks, size_t H, size_t Dh, const kvl_rope *rope,
                    int64_t pos);

/* o[S][H][Dh] for the queries q[S][H][Dh] at positions start … start + S − 1, un-rotated (ō): the core
 * every path runs. Query t reads, in this order,
 *   its window rows: win[(j − win_first)] for j ∈ [max(win_first, t − W + 1), t], win holding the rows
 *     of positions win_first … start + S − 1 ([start + S − win_first][Dh]; win_first > 0 truncates the
 *     window, as a replay does);
 *   its compressed rows from the N entries of Dh (a view, ref/core/row_tiles.h: float32 rows, or a cache's
 *     packed rows decoded a tile or a pick at a time as they are read): HCA every e < ⌊(t+1)/M⌋, CSA the
 *     picks sel[i][0 … K−1] (−1 skipped; sel[S][K]), none for a window-only layer (entries, sel unused).
 * Queries run one after another, each through v4_attend_query (kvl_attend with the online softmax,
 * ref/core/attend.h; v4_attend_weights and v4_attend_values are the same two steps written out): its
 * window rows then its entries, read where they are. Each query is computed the same way whatever chunk
 * it comes in.
 * KVL_EINVAL for a pick outside −1 … N − 1, or fewer entries than an HCA query sees. */
int v4_attend(float *o, const v4_config *c, const v4_weights *w, const float *q, const float *win, size_t win_first,
              const kvl_row_tiles *entries, const int32_t *sel, size_t S, size_t start);

/* out[S][d] = W_OB concat_r W_OA^r concat_{h∈r} o[·][h] for o[S][H][Dh] (already un-rotated). */
int v4_output(float *out, const v4_config *c, const v4_weights *w, const float *o, size_t S);

/* ---- whole sequence -------------------------------------------------------------------------------- */

/* out[T][d] for x[T][d] at positions 0 … T − 1: the definition. sel[T][K] receives a CSA layer's picks
 * (entry indices ascending, −1 padding; NULL: not wanted; untouched for other kinds). */
int v4_forward(float *out, int32_t *sel, const v4_config *c, const v4_weights *w, const float *x, size_t T);

/* ---- the cache --------------------------------------------------------------------------------------- */

typedef enum {
    V4_CACHE_F32,     /* every row float32: exact, for equivalence tests */
    V4_CACHE_NATIVE,  /* 584-byte main rows (window and entries), 68-byte index keys: Dh 512, Dr 64, DI 128 */
} v4_cache_format;

/* "f32" or "native" */
const char *v4_cache_format_name(v4_cache_format f);

typedef struct {
    v4_cache_format fmt;
    size_t len;                        /* positions the compressors have seen (global state covers 0 … len−1) */
    size_t max_tokens;
    v4_rows window;                    /* [W][Dh] ring: positions window.first … window.len − 1, newest W */
    v4_rows entries;                   /* [⌊max_tokens/M⌋][Dh] compressed entries (CSA, HCA) */
    v4_rows index_keys;                /* [⌊max_tokens/M⌋][DI] (CSA): rotated by H_DI/√DI when native */
    v4_compressor_state kv_state;      /* the layer compressor's running buffers (CSA, HCA) */
    v4_compressor_state index_state;   /* the indexer compressor's (CSA) */
} v4_cache;

/* A cache for positions 0 … max_tokens − 1. KVL_EINVAL (bad config, zero max_tokens, native at widths
 * other than the rows', overflow), KVL_ENOMEM; on failure *cache is empty. */
int v4_cache_init(v4_cache *cache, const v4_config *c, size_t max_tokens, v4_cache_format fmt);
void v4_cache_free(v4_cache *cache);

/* Bytes of the per-token part held now: entries + index keys (native: 584 and 68 bytes each). */
size_t v4_cache_bytes_used(const v4_cache *cache);
/* Bytes of the window rows held now (at most W rows), bounded per sequence. */
size_t v4_cache_window_bytes(const v4_cache *cache);
/* Bytes of the compressor states (float32 kv and gate buffers), bounded per sequence. */
size_t v4_cache_state_bytes(const v4_cache *cache);

/* What a prefix-cache hit leaves: keep the entries, index keys and compressor states, forget every
 * window row; the window refills from position s (s ≤ len) through v4_replay. */
int v4_cache_drop_window(v4_cache *cache, size_t s);

/* ---- incremental ---------------------------------------------------------------------------------------
 * A chunk x[S][d] (S ≥ 1, finite) at positions start … start + S − 1: window rows and entries pass through
 * the cache's storage before any query reads them, the chunk attends, and its window rows are appended.
 * sel[S][K] receives a CSA layer's picks (NULL: not wanted; untouched for other kinds). A bad argument
 * leaves the cache unchanged; KVL_ENOMEM may leave it part-way and unusable. */

/* out[S][d], start = len (the window must be complete: window.len = len): the compressors take the
 * chunk first, then it attends. Any split of a sequence gives v4_forward's rows. */
int v4_prefill(float *out, int32_t *sel, const v4_config *c, const v4_weights *w, v4_cache *cache, const float *x,
               size_t S);

/* out[d] for the token x_t[d] at position len: v4_prefill with S = 1. */
int v4_decode(float *out, int32_t *sel, const v4_config *c, const v4_weights *w, v4_cache *cache, const float *x_t);

/* out[S][d] at positions start = window.len … (start + S ≤ len): attend and refill the window without
 * feeding the compressors; the global part is read as it is, each query seeing only what is visible at
 * its position. */
int v4_replay(float *out, int32_t *sel, const v4_config *c, const v4_weights *w, v4_cache *cache, const float *x,
              size_t S);

#endif
