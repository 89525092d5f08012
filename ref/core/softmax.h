/* Softmax over one row of scores, in place, plain or with a per-head sink logit.
 *
 *   plain:  p_i = exp(s_i − μ) / Σ_j exp(s_j − μ),                 μ = max_j s_j
 *   sink:   p_i = exp(s_i − μ) / (exp(σ − μ) + Σ_j exp(s_j − μ)),  μ = max(σ, max_j s_j)
 *
 * The sink (spec generations.md §0, [OSS], [HF4], [V41] sparse_attn) is a learned raw logit σ per head
 * that joins the denominator only: it takes probability mass and contributes no value, so the row
 * sums to 1 − p_sink with p_sink = exp(σ − μ)/denominator. σ = −INFINITY is plain softmax exactly.
 * σ must be finite or −INFINITY.
 *
 * A score of −INFINITY marks an invalid entry (masked, or a −1 index); it gets probability 0. A row
 * with no valid entry becomes all zeros, not NaN, with or without a sink (spec §11.7). A NaN score
 * makes the whole row NaN. n = 0 is an empty row.
 *
 * The _f32 versions subtract μ, exponentiate and sum in double; each exp(s_i − μ) is held in the row
 * as a float until the sum is known, so a probability carries at most two float roundings. */
#ifndef KVL_SOFTMAX_H
#define KVL_SOFTMAX_H

#include <stddef.h>

/* s[n] ← softmax(s) */
void kvl_softmax_f32(float *s, size_t n);
void kvl_softmax_f64(double *s, size_t n);

/* s[n] ← softmax of s with the sink logit sigma in the denominator */
void kvl_softmax_sink_f32(float *s, size_t n, float sigma);
void kvl_softmax_sink_f64(double *s, size_t n, double sigma);

#endif
