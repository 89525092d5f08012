/* DeepSeek-V4.1 attention: CSA2, three static layer modes, the hierarchical indexer and the 4-bit cache
 * (DeepSeek-V4.1 report, sections 2.3 and 2.4.4; DeepSeek-V4.1-Flash inference/model.py; the V4.1 layer
 * walkthrough's equations; chapters/07_v41/README.md; tests/test_ch07_v41.c and test_ch07_cache.c).
 *
 * Every layer keeps V4's skeleton (ref/v4.h: query latent, window rows, sink attention, grouped output),
 * held here as a window-only v4_config / v4_weights (`core`) and reused piece by piece. What changes:
 *   - no per-head query RMSNorm (the V4.1 layer walkthrough's equations and DeepSeek-V4.1-Flash
 *     inference/model.py omit it; V4 keeps it as v4_query_head_norm). v41_query is W_UQ c^Q then RoPE, nothing
 *     between;
 *   - only KV-source layers compress (ref/v41_compressor.h: no position bias, no overlap, M = 2 or 1); the
 *     main entry is the latent rotated at its block's first position, Z_i = L_i, Z_i[Dh−Dr …] ← RoPE(·, iM);
 *     the index key is projected from L_i before that rotation (ref/v41_indexer.h);
 *   - which entries a query reads is decided by the layer's mode (config layer map, kv_source/index_source):
 *       window  (ratio 0)  its window only, plain rope
 *       Full    own compressor, own index keys, own indexer scanning every visible entry, own top-k
 *       Reindex the latest KV source's entries and index keys, scored by its own index queries (only the
 *               candidate pool when the candidate source lies before it)
 *       Reuse   the latest KV source's entries and the latest index source's top-k; no indexer
 *     Layers with ratio > 0 rotate everything (queries, window rows, entries, keys) with the compress rope.
 *   - keys of query t: window rows J^w_t, then the picked entries I_t (a decoder layer with M = 1 may pick
 *     the entry of t itself, also in its window: both kept, as the reference does).
 *
 * Each mode is its own function over a chunk (v41_chunk: its input, positions and window rows) and the
 * source it reads (v41_source). Whole-sequence and cached stacks (ref/v41_stack.h) call the same four.
 * Out of scope: MoE, hyper-connections, Engram, DSpark/MTP, vision.
 *
 * Letters: S chunk, t query position, d width, H heads, Dh head dim, Dr rotary, Dq' query latent, G groups,
 * Do o_lora_rank, W window, M ratio, N entries, HI/DI index heads/width, K index_topk. */
#ifndef KVL_CSA2_H
#define KVL_CSA2_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "v41_compressor.h"
#include "v41_indexer.h"
#include "rng.h"
#include "row_tiles.h"
#include "v4.h"

typedef struct {
    kvl_layer_kind kind;          /* KVL_LAYER_WINDOW, _FULL, _REINDEX, _REUSE */
    v4_config core;               /* kind KVL_LAYER_WINDOW: d, H, Dh, Dq', G, Do, W, ε, the layer's rope, Δ */
    v41_compressor_config compressor;  /* Full: width Dh, ratio M */
    v41_indexer_config indexer;        /* Full, Reindex: HI, DI, K, ratio M of the source scored */
    size_t ratio;                 /* M of the entries read; 0 for a window-only layer */
    int kv_source, index_source;  /* layer map (ref/core/config.h) */
} v41_config;

/* c = layer `layer` of a loaded V4.1 config at the config's sizes. KVL_EINVAL for another generation. */
int v41_config_from_model(v41_config *c, const kvl_model *m, size_t layer);
int v41_config_check(const v41_config *c);
/* "window", "Full", "Reindex", "Reuse" */
const char *v41_mode_name(kvl_layer_kind kind);

typedef struct {
    v4_weights core;                     /* w_dq, q_norm, w_uq, w_kv, kv_norm, sinks, w_oa, w_ob */
    v41_compressor_weights compressor;  /* Full */
    float *w_ik, *ik_norm;               /* Full: [DI][Dh], [DI] */
    float *w_iq, *w_iw;                  /* Full, Reindex: [HI·DI][Dq'], [HI][d] */
    float *block;                        /* the allocation the fields after core point into */
    size_t n_floats;
} v41_weights;

/* A layer's parameters by role, counted from the sizes tables the initialisers cut (nothing allocated):
 * core = query latent, query heads, window projection, sinks, grouped output (ref/v4.h); compressor = W_C,
 * W_Z, gain; index_keys = W_IK, gain; index_query = W_IQ, W_IW. */
typedef struct {
    uint64_t core, compressor, index_keys, index_query;
} v41_params;

v41_params v41_layer_params(const v41_config *c);

/* Draw core (v4_weights_init_random), then W_C, W_Z (M > 1), gain, W_IK, gain, W_IQ, W_IW in that order. */
int v41_weights_init_random(v41_weights *w, const v41_config *c, kvl_rng *rng);
void v41_weights_free(v41_weights *w);

/* q[S][H][Dh] = W_UQ cq, trailing Dr rotated at pos0 + i. No per-head norm (see the top of this file). */
int v41_query(float *q, const v41_config *c, const v41_weights *w, const float *cq, size_t S, int64_t pos0);

/* Z[n][Dh] = L[n][Dh] with the trailing Dr channels of entry first + i rotated at (first + i)·M + Δ. */
void v41_main_entry(float *Z, const v41_config *c, const float *L, size_t n, size_t first);

/* What a KV source publishes to the layers that read it: its N entries and index keys as the cache gives
 * them back, read where they are (ref/core/row_tiles.h): the keys a tile at a time by the indexer, the
 * entries one pick at a time by attention, so a packed cache is never decoded whole. */
typedef struct {
    kvl_row_tiles entries;  /* N main entries of Dh */
    kvl_row_tiles keys;     /* N index keys of DI */
    int keys_mxfp4;         /* the keys are stored as MXFP4, so queries are rounded the same way */
} v41_source;

/* The source of float32 entries[N][Dh] and keys[N][DI]. */
v41_source v41_source_f32(const v41_config *c, const float *entries, const float *keys, size_t N);

/* One chunk of queries: x[S][d] at positions start … start + S − 1 (already the layer's normed input) and
 * the window rows win[start + S − win_first][Dh] of positions win_first … start + S − 1. */
typedef struct {
    const float *x;
    size_t S, start;
    const float *win;
    size_t win_first;
} v41_chunk;

/* out[S][d] for a window-only layer. */
int v41_window_layer(float *out, const v41_config *c, const v41_weights *w, const v41_chunk *ch);

/* out[S][d], sel[S][K] its own top-k, I[S][N] its scores over every visible entry of src (its own). */
int v41_full_layer(float *out, int32_t *sel, float *I, uint64_t *scored, const v41_config *c,
                    const v41_weights *w, const v41_source *src, const v41_chunk *ch);

/* out[S][d], sel[S][K]: src re-scored by the layer's own index queries, over pool[S][N] when pool is not
 * NULL (the candidate source's), else over every visible entry. */
int v41_reindex_layer(float *out, int32_t *sel, uint64_t *scored, const v41_config *c, const v41_weights *w,
                       const v41_source *src, const uint8_t *pool, const v41_chunk *ch);

/* out[S][d]: src's entries at the picks sel[S][K] of the latest index source. */
int v41_reuse_layer(float *out, const v41_config *c, const v41_weights *w, const v41_source *src,
                     const int32_t *sel, const v41_chunk *ch);

#endif
