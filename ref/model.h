/* The layer stack: what chapter 3's receptive-field demo, the live bytes-per-token check and every
 * cache-versus-definition test run on.
 *
 * Each layer is pre-norm:
 *   h ← h + Attn_ℓ(RMSNorm(h; g_attn))
 *   h ← h + MLP_ℓ(RMSNorm(h; g_mlp))          only when the MLP width F > 0
 * with the attention of layer ℓ chosen by the config's layer map (m->layers[ℓ].kind): a dense layer
 * of an MHA-generation config is ref/mha (MHA/GQA/MQA), of an MLA-generation config ref/mla; a
 * window on the config (m->window > 0) makes every layer windowed. A V4 config's window-only, CSA and
 * HCA layers (compress_ratios) are ref/v4. The MLP is small and optional:
 *   SwiGLU  W_down (silu(W_gate n) ⊙ W_up n)      W_gate, W_up [F][d], W_down [d][F]
 *   GELU    W_down gelu(W_up n)                   gelu(u) = u·Φ(u), the erf form
 * The output is the residual stream after the last layer, [T][d]; there is no embedding, final norm
 * or vocabulary head. Out of scope, as in the whole project: MoE, hyper-connections, Engram, MTP,
 * vision (they change what enters a layer, not how attention caches it).
 *
 * Three paths, as in every generation module: model_forward (whole sequence, masks), model_prefill
 * (a chunk at the cache's next positions) and model_decode (one token). The MLA layers decode in the
 * absorbed form, the one servers run. A fourth, model_replay, serves V4 stacks after a prefix-cache hit
 * (ref/v4.h v4_replay).
 *
 * Letters: T tokens, S chunk length, d width, F MLP width, L layers. */
#ifndef KVL_MODEL_H
#define KVL_MODEL_H

#include <stddef.h>

#include "config.h"
#include "mha.h"
#include "mla.h"
#include "rng.h"
#include "swa.h"
#include "v4.h"

typedef enum { MODEL_ATTN_MHA, MODEL_ATTN_MLA, MODEL_ATTN_V4 } model_attn;
typedef enum { MODEL_MLP_SWIGLU, MODEL_MLP_GELU } model_mlp;

typedef struct {
    model_attn attn;
    mha_config mha;   /* used when attn = MODEL_ATTN_MHA */
    mla_config mla;   /* used when attn = MODEL_ATTN_MLA */
    v4_config v4;     /* used when attn = MODEL_ATTN_V4 */
} model_layer_config;

typedef struct {
    size_t d;                    /* model width */
    size_t n_layers;             /* L */
    size_t d_ff;                 /* F; 0: no MLP */
    model_mlp mlp;               /* the MLP's form when F > 0 */
    double norm_eps;             /* of the pre-norms */
    model_layer_config *layers;  /* [L]; a caller may edit a layer (its window, say) before making weights */
} model_config;

/* c = the stack of m with an MLP of width d_ff (0: none) in the form `mlp`. KVL_EINVAL naming the file
 * and the layer for an attention kind the stack does not run (DSA, V4.1 layers), KVL_ENOMEM. */
int model_config_from_model(model_config *c, const kvl_model *m, size_t d_ff, model_mlp mlp);
void model_config_free(model_config *c);

/* "MHA", "GQA-2", "MQA", "MLA", with "+SWA(W)" for a windowed layer, or a V4 layer's v4_layer_name:
 * the layer's attention in words. */
const char *model_layer_name(char *buf, size_t cap, const model_layer_config *lc);

typedef struct {
    float *attn_norm;   /* [d] */
    float *mlp_norm;    /* [d], NULL when F = 0 */
    float *w_gate;      /* [F][d], SwiGLU only */
    float *w_up;        /* [F][d] */
    float *w_down;      /* [d][F] */
    mha_weights mha;    /* the layer's attention: one of the two is filled */
    mla_weights mla;
    v4_weights v4;
} model_layer_weights;

/* Norm gains and MLPs of every layer are cut from one allocation (block); each attention owns its own. */
typedef struct {
    size_t n_layers;
    model_layer_weights *layers;  /* [L] */
    float *block;
} model_weights;

/* Draw layer by layer: g_attn (uniform [0.5, 1.5)), the attention's weights (its own order), g_mlp,
 * then W_gate (SwiGLU), W_up, W_down, each N(0, 1/fan_in). KVL_ENOMEM; on failure *w is empty. */
int model_weights_init_random(model_weights *w, const model_config *c, kvl_rng *rng);
void model_weights_free(model_weights *w);

typedef struct {
    size_t n_layers;
    mha_cache *mha;   /* [L]; a layer's entry is empty unless it is an MHA layer */
    mla_cache *mla;   /* [L]; likewise for MLA layers */
    v4_cache *v4;     /* [L]; likewise for V4 layers */
} model_cache;

/* Caches of every layer for positions 0 … max_tokens − 1, stored as `store` (V4 layers: float32 rows;
 * KVL_EINVAL for bf16, which no V4 cache uses). */
int model_cache_init(model_cache *cache, const model_config *c, size_t max_tokens, kv_store store);
/* The same for a stack of V4 layers, their rows float32 or native (584-byte rows, 68-byte index keys).
 * KVL_EINVAL if a layer is not V4. */
int model_cache_init_v4(model_cache *cache, const model_config *c, size_t max_tokens, v4_cache_format fmt);
/* Bytes every layer's cache holds now, summed. A V4 layer counts its per-token part (v4_cache_bytes_used);
 * its window rows and compressor states are bounded per sequence and read from cache->v4[ℓ] apart. */
size_t model_cache_bytes_used(const model_cache *cache);
/* Positions cached so far (the next token's position). */
size_t model_cache_len(const model_cache *cache);
void model_cache_free(model_cache *cache);

/* out[T][d] = the stack on x[T][d] at positions 0 … T − 1 (T ≥ 1). */
int model_forward(float *out, const model_config *c, const model_weights *w, const float *x, size_t T);

/* out[S][d] for x[S][d] at positions len … len + S − 1, appending to every layer's cache. */
int model_prefill(float *out, const model_config *c, const model_weights *w, model_cache *cache, const float *x,
                  size_t S);

/* out[d] for x_t[d] at position len, appending to every layer's cache. */
int model_decode(float *out, const model_config *c, const model_weights *w, model_cache *cache, const float *x_t);

/* A prefix-cache hit on a V4 stack: every layer keeps its compressed entries, index keys and compressor
 * states and forgets its window rows (v4_cache_drop_window at s). KVL_EINVAL if a layer is not V4. */
int model_cache_drop_windows(model_cache *cache, size_t s);

/* out[S][d] for x[S][d] at positions s … s + S − 1 after model_cache_drop_windows(cache, s) (or a previous
 * replay): every layer runs v4_replay, refilling its window with the global part read as it is. */
int model_replay(float *out, const model_config *c, const model_weights *w, model_cache *cache, const float *x,
                 size_t S);

#endif
