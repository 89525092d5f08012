/* The V4 token compressor: M consecutive tokens pooled into one entry (DeepSeek-V4 report,
 * sections 2.3.1–2.3.2; DeepSeek-V4-Flash inference/model.py; tests/test_ch06_compressor.c).
 *
 * Every compressed branch of DeepSeek-V4 is this one skeleton at some width c: the HCA layer's (c = Dh,
 * M = 128), the CSA layer's (c = Dh, M = 4) and the one inside the CSA indexer (c = DI, M = 4).
 *
 *   a_t  = W_C x_t,   z'_t = W_Z x_t + B_{t mod M}        both [(1+ov)·c]; B is the learned position bias
 *   block i = tokens iM … iM+M−1; entry i pools (1+ov)·M slots:
 *     ov = 0 (HCA)  slots 0…M−1   = block i   through channels 0…c−1
 *     ov = 1 (CSA)  slots 0…M−1   = block i−1 through the FIRST c channels (absent for i = 0: weight 0)
 *                   slots M…2M−1  = block i   through the SECOND c channels
 *   per channel ch: α = softmax over the slots of z'[ch],  Ĉ_i[ch] = Σ_slots α·a[ch]
 *   C_i = RMSNorm(Ĉ_i) with gain;  C_i[c−Dr … c−1] ← RoPE(·, iM)     (the block's first position)
 * One softmax spans both halves, so the two blocks compete for each channel's mass; an entry mixes
 * (1+ov)·M tokens and entries still arrive once per M tokens. Entry i exists once token iM+M−1 has
 * been seen; a tail of fewer than M tokens produces nothing yet.
 *
 * Two forms, equal by construction (the test proves it, token by token and in ragged chunks):
 *   batched      v4_compressor_forward: the whole sequence at once (what training and transformers run);
 *   incremental  v4_compressor_push on a v4_compressor_state (DeepSeek-V4-Flash decode): running kv and gate buffers
 *                of (1+ov)·M rows by (1+ov)·c channels, gate −∞ where empty. Token t lands in row
 *                ov·M + (t mod M); when (t+1) mod M = 0 the entry is pooled from the buffers (row r
 *                reads the channel half r/M), and for ov = 1 rows M…2M−1 are copied to rows 0…M−1:
 *                the carry-over that makes the next entry see this block through its first half.
 *
 * Precision: projections in float32 (OpenBLAS); each channel's softmax and weighted sum in double,
 * rounded once; RMSNorm as ref/core/norm.h; rotation as ref/core/rope.h (interleaved).
 *
 * Letters: T tokens, S tokens of a chunk, d input width, c entry width, M ratio, ov overlap (0 or 1),
 * Dr rotary channels (rope.Dr), N entries. Rotary positions may be shifted by a constant Δ
 * (rope_offset) to check that nothing depends on absolute position (tests/test_ch06_v4.c). */
#ifndef KVL_V4_COMPRESSOR_H
#define KVL_V4_COMPRESSOR_H

#include <stddef.h>
#include <stdint.h>

#include "rng.h"
#include "rope.h"

typedef struct {
    size_t d;         /* input width */
    size_t width;     /* c: channels of one entry */
    size_t ratio;     /* M: tokens per entry */
    size_t overlap;   /* ov: earlier blocks an entry also pools, 1 for CSA and 0 for HCA */
    double norm_eps;  /* RMSNorm ε of the entry */
    kvl_rope rope;    /* rotation of the trailing rope.Dr channels */
} v4_compressor_config;

/* KVL_EINVAL unless d, c and M are positive, ov ≤ 1, 2 ≤ Dr ≤ c, and ε is finite and non-negative;
 * the message names the field. */
int v4_compressor_config_check(const v4_compressor_config *c);

/* ---- weights, as rows of the owning layer's sizes table (ref/v4.h cuts them from its one block) -- */

typedef struct {
    float *w_kv;    /* W_C [(1+ov)·c][d] */
    float *w_gate;  /* W_Z [(1+ov)·c][d] */
    float *ape;     /* B   [M][(1+ov)·c]  position bias of the gate */
    float *norm;    /* [c] RMSNorm gain */
} v4_compressor_weights;

/* How a weight is drawn by the random initialisers of every V4 module. */
typedef enum {
    V4_DRAW_MATRIX,  /* N(0, 1/cols): a projection, fan-in = its row length */
    V4_DRAW_GAIN,    /* uniform [0.5, 1.5): a norm gain (so that a dropped gain shows) */
    V4_DRAW_LOGIT,   /* N(0, 1): a raw logit (position bias, attention sink) */
} v4_draw;

/* One row of a sizes table: the field a slice of the block is cut for, its shape and its draw. */
typedef struct {
    float **field;
    size_t rows, cols;
    v4_draw draw;
} v4_weight;

#define V4_COMPRESSOR_N_WEIGHTS 4

/* t[V4_COMPRESSOR_N_WEIGHTS] = the compressor's sizes table for w, in cut and draw order. */
void v4_compressor_weight_table(v4_weight *t, v4_compressor_weights *w, const v4_compressor_config *c);

/* ---- the two forms ------------------------------------------------------------------------------- */

/* Entries a sequence of T tokens has produced: ⌊T/M⌋. */
size_t v4_compressor_entries(const v4_compressor_config *c, size_t T);

/* entries[⌊T/M⌋][c] for x[T][d] at positions 0 … T − 1, entry i rotated at iM + rope_offset. */
int v4_compressor_forward(float *entries, const v4_compressor_config *c, const v4_compressor_weights *w,
                          const float *x, size_t T, int64_t rope_offset);

typedef struct {
    size_t pos;    /* tokens seen: the next one is at position pos */
    size_t rows;   /* (1+ov)·M */
    size_t cols;   /* (1+ov)·c */
    float *kv;     /* [(1+ov)·M][(1+ov)·c] a of the slots */
    float *gate;   /* [(1+ov)·M][(1+ov)·c] z' of the slots, −∞ where no token has landed */
} v4_compressor_state;

/* An empty state (no token seen). KVL_EINVAL (bad config, overflow), KVL_ENOMEM; on failure *s is
 * empty and v4_compressor_state_free is harmless. */
int v4_compressor_state_init(v4_compressor_state *s, const v4_compressor_config *c);
void v4_compressor_state_free(v4_compressor_state *s);

/* Bytes the state holds: kv and gate, float32 (bounded per sequence, whatever the context). */
size_t v4_compressor_state_bytes(const v4_compressor_state *s);

/* Feed x[S][d] at positions pos … pos + S − 1. entries[n][c] receives the n = ⌊(pos+S)/M⌋ − ⌊pos/M⌋
 * entries the chunk completes, in order, rotated at their block's first position + rope_offset; *n_new
 * = n. S = 0 is allowed. KVL_EINVAL for a state of another shape. */
int v4_compressor_push(float *entries, size_t *n_new, const v4_compressor_config *c,
                       const v4_compressor_weights *w, v4_compressor_state *s, const float *x, size_t S,
                       int64_t rope_offset);

#endif
