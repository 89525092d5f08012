/* The V4.1 CSA2 compressor: M consecutive tokens pooled into one pre-rotary latent L_i
 * (DeepSeek-V4.1 report, section 2.3; DeepSeek-V4.1-Flash inference/model.py; tests/test_ch07_v41.c).
 *
 * Unlike V4's compressor (ref/v4_compressor.h) it has no learned position bias and no overlap: block i is
 * tokens iM … iM+M−1 and nothing else.
 *   M = 1   L_t = RMSNorm(W_C x_t)                                    (no gate; W_Z absent)
 *   M = 2   α_r = softmax_r((W_Z x_{2i+r})[ch]) per channel ch,  L_i = RMSNorm(Σ_r α_r W_C x_{2i+r})
 * RMSNorm with gain. L_i is NOT rotated here: the index key is projected from it first (ref/v41_indexer.h),
 * then the main entry rotates its trailing Dr channels at iM (v41_main_entry in ref/v41.h).
 * Entry i exists once token iM+M−1 has been seen; a tail of fewer than M tokens waits in the state.
 *
 * Two forms, equal by construction: v41_compressor_forward (whole sequence) and v41_compressor_push
 * (incremental; the state holds the unfinished block's projections, [M][c] values and gate logits).
 * Projections in float32 (OpenBLAS); the per-channel softmax and weighted sum in double, rounded once.
 *
 * Letters: T tokens, S chunk, d input width, c entry width (Dh), M ratio, N entries. */
#ifndef KVL_CSA2_COMPRESSOR_H
#define KVL_CSA2_COMPRESSOR_H

#include <stddef.h>

typedef struct {
    size_t d;         /* input width */
    size_t width;     /* c */
    size_t ratio;     /* M ≥ 1 */
    double norm_eps;
} v41_compressor_config;

typedef struct {
    float *w_c;    /* W_C [c][d] */
    float *w_z;    /* W_Z [c][d]; NULL for M = 1 */
    float *norm;   /* [c] RMSNorm gain */
} v41_compressor_weights;

/* KVL_EINVAL unless d, c and M are positive and ε is finite and non-negative. */
int v41_compressor_config_check(const v41_compressor_config *c);

/* L[⌊T/M⌋][c] for x[T][d] at positions 0 … T − 1. */
int v41_compressor_forward(float *L, const v41_compressor_config *c, const v41_compressor_weights *w,
                            const float *x, size_t T);

typedef struct {
    size_t pos;   /* tokens seen */
    size_t M, c;
    float *a;     /* [M][c] W_C x of the unfinished block */
    float *z;     /* [M][c] W_Z x of the unfinished block */
} v41_compressor_state;

int v41_compressor_state_init(v41_compressor_state *s, const v41_compressor_config *c);
void v41_compressor_state_free(v41_compressor_state *s);
/* Bytes of the tail state (values and gates, float32), bounded per sequence. */
size_t v41_compressor_state_bytes(const v41_compressor_state *s);

/* Feed x[S][d] at positions pos … pos + S − 1; L[n][c] receives the n = ⌊(pos+S)/M⌋ − ⌊pos/M⌋ entries the
 * chunk completes, *n_new = n. */
int v41_compressor_push(float *L, size_t *n_new, const v41_compressor_config *c,
                         const v41_compressor_weights *w, v41_compressor_state *s, const float *x, size_t S);

#endif
