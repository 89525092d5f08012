/* A V4.1 layer stack: pre-norm residual layers whose attention is chosen by the config's layer map
 * (ref/v41.h for the modes). Kept apart from ref/model.h because its layers share state:
 * a Reuse or Reindex layer reads the entries and index keys of the latest KV source, a Reuse layer the
 * top-k of the latest index source, and the Reindex layers after the candidate source its candidate pool.
 *
 *   h ← h + Attn_ℓ(RMSNorm(h; g_ℓ))        no MLP, no embedding, no final norm (the attention cache is the point)
 *
 * Paths: v41_stack_forward (whole sequence: batched compressors, all window rows, the definition) and
 * v41_stack_prefill / v41_stack_decode (a chunk at the cache's next positions: incremental compressors,
 * a ring of W window rows per layer). The cache stores rows as float32 (exact) or as the deployed bytes
 * (ref/v4_rows.h): 288-byte FP4 entries, 68-byte MXFP4 index keys (queries rounded the same way), 528-byte
 * FP8 window rows. Rows pass through the store before any query reads them, the current token's included.
 *
 * Indexer work: every index source adds the scores it evaluates to scored[ℓ] (forward: stats argument;
 * cache: cache->scored), so a Full scan (linear in context) and a pool-bounded Reindex (constant once the
 * pool is full) can be compared.
 *
 * Letters: T tokens, S chunk, d width, L layers, N entries, K index_topk. */
#ifndef KVL_CSA2_STACK_H
#define KVL_CSA2_STACK_H

#include <stddef.h>
#include <stdint.h>

#include "v41.h"
#include "v4_rows.h"

typedef struct {
    size_t d, n_layers;
    double norm_eps;             /* of the pre-norms */
    v41_config *layers;         /* [L] */
    size_t candidate_source;     /* the layer that publishes the pool */
    size_t pool_block, pool_blocks;  /* B = candidate_block_size, P = candidate_topk_blocks */
    size_t n_encoder;            /* layers 0 … n_encoder − 1 are the encoder: L/2 (0–19 of 40 in V4.1-Flash) */
} v41_stack_config;

/* The stack of a loaded V4.1 config at the sizes in m (a caller may shrink m's widths before calling). */
int v41_stack_config_from_model(v41_stack_config *s, const kvl_model *m);
void v41_stack_config_free(v41_stack_config *s);

typedef struct {
    size_t n_layers;
    float *attn_norm;            /* [L][d] pre-norm gains */
    v41_weights *layers;        /* [L] */
} v41_stack_weights;

/* Draw layer by layer: the pre-norm gain (uniform [0.5, 1.5)), then v41_weights_init_random. */
int v41_stack_weights_init_random(v41_stack_weights *w, const v41_stack_config *s, kvl_rng *rng);
void v41_stack_weights_free(v41_stack_weights *w);

/* out[T][d] for x[T][d] at positions 0 … T − 1. sel[L][T][K] receives each index source's picks (NULL: not
 * wanted; rows of other layers untouched); scored[L] += each layer's indexer work (NULL: not wanted). */
int v41_stack_forward(float *out, int32_t *sel, uint64_t *scored, const v41_stack_config *s,
                       const v41_stack_weights *w, const float *x, size_t T);

typedef enum { V41_CACHE_F32, V41_CACHE_NATIVE } v41_cache_format;

typedef struct {
    v41_cache_format fmt;
    size_t len, max_tokens, n_layers;
    v4_rows *window;                   /* [L] rings of W rows */
    v4_rows *entries, *keys;           /* [L] main entries and index keys (KV sources only) */
    v41_compressor_state *state;      /* [L] compressor tails (KV sources only) */
    uint64_t *scored;                  /* [L] scores evaluated so far by each layer's indexer */
} v41_cache;

/* KVL_EINVAL (native at widths other than Dh 512, DI 128), KVL_ENOMEM; on failure *c is empty. */
int v41_cache_init(v41_cache *c, const v41_stack_config *s, size_t max_tokens, v41_cache_format fmt);
void v41_cache_free(v41_cache *c);
/* Bytes of the per-token part held now: entries and index keys of every KV source. */
size_t v41_cache_bytes_used(const v41_cache *c);
/* Bytes of the window rows held now (at most W rows a layer), per sequence. */
size_t v41_cache_window_bytes(const v41_cache *c);
/* Bytes of the compressor tails, per sequence. */
size_t v41_cache_state_bytes(const v41_cache *c);

/* out[S][d] for x[S][d] at positions len … len + S − 1; sel as in v41_stack_forward ([L][S][K]). */
int v41_stack_prefill(float *out, int32_t *sel, const v41_stack_config *s, const v41_stack_weights *w,
                       v41_cache *c, const float *x, size_t S);
/* out[d] for x_t[d] at position len. */
int v41_stack_decode(float *out, const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c,
                      const float *x_t);

/* ---- pieces of a pass, for the causal encoder–decoder and replay (ref/v41_ced.h) ----------------------------
 * Every layer's window runs from its ring's first position: 0, or the s where a replay restarted it, so a
 * query t (replayed or decoded later) sees window rows [max(s, t − W + 1), t]. */

/* h[S][d] ← the residual stream after layers l0 … l1 − 1, for h[S][d] entering layer l0 at positions
 * len … len + S − 1: their window rows appended, their compressors fed. c->len is left to the caller. */
int v41_stack_prefill_layers(float *h, const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c,
                              size_t l0, size_t l1, size_t S);

/* Feed KV source l's compressor the chunk h[S][d] at positions len … len + S − 1 (layer l's pre-norm applied
 * here) and store the entries and index keys it completes. Nothing attends. */
int v41_stack_push_source(const v41_stack_config *s, const v41_stack_weights *w, v41_cache *c, size_t l,
                           const float *h, size_t S);

/* Replay from position `from` < len: h[len − from][d] enters layer l0 at positions from … len − 1 and leaves
 * layer l1 − 1; each layer's window restarts at `from` and is rebuilt from the replayed tokens. Entries, index
 * keys and compressor tails are read as the cache holds them (what replay reuses; the report does not say);
 * index sources score again. sel[L][len − from][K] as in v41_stack_forward. On failure the restarted windows
 * stay empty. */
int v41_stack_replay_layers(float *h, int32_t *sel, const v41_stack_config *s, const v41_stack_weights *w,
                             v41_cache *c, size_t l0, size_t l1, size_t from);

#endif
