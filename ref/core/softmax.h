/* Softmax over one row of scores, in place, plain or with a per-head sink logit.
 *
 *   plain:  p_i = exp(s_i − μ) / Σ_j exp(s_j − μ),                 μ = max_j s_j
 *   sink:   p_i = exp(s_i − μ) / (exp(σ − μ) + Σ_j exp(s_j − μ)),  μ = max(σ, max_j s_j)
 *
 * The sink (gpt-oss model.py; transformers deepseek_v4; DeepSeek-V4.1-Flash inference sparse_attn) is a learned
 * raw logit σ per head that joins the denominator only: it takes probability mass and contributes no value, so
 * the row sums to 1 − p_sink with p_sink = exp(σ − μ)/denominator. σ = −INFINITY is plain softmax exactly. σ
 * must be finite or −INFINITY.
 *
 * A score of −INFINITY marks an invalid entry (masked, or a −1 index); it gets probability 0. A row with no
 * valid entry becomes all zeros, not NaN, with or without a sink (a choice: the CUDA kernels match it). A NaN
 * score makes the whole row NaN. n = 0 is an empty row.
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

/* The online softmax (Milakov & Gimelshein, "Online normalizer calculation for softmax", 2018; the
 * rescaling FlashAttention and FlashMLA run): one head over rows met one at a time, holding the running
 * maximum m, the sum l of exp(s − m) and the unnormalised weighted sum acc[Dv] of the values, so that
 * after any row acc / l is softmax(s) · V over the rows so far:
 *   m' = max(m, s),   α = exp(m − m'),   p = exp(s − m'),   l ← α·l + p,   acc ← α·acc + p·v
 * A sink σ starts the state at m = σ, l = exp(σ − σ) = 1, acc = 0: it joins the denominator only. A
 * score of −∞ adds nothing; a NaN score makes the output NaN; nothing but −∞ gives o = 0, as
 * kvl_softmax_sink_f32. m and l are held in double, acc in float. */
typedef struct {
    double m, l;
} kvl_online;

/* st and acc[Dv] before the first row, with sink sigma (−∞: none). */
void kvl_online_start(kvl_online *st, float *acc, size_t Dv, float sigma);

/* One row: its score s and value v[Dv] folded in. */
void kvl_online_step(kvl_online *st, float *acc, float s, const float *v, size_t Dv);

/* o[Dv] = acc / l (o may be acc). */
void kvl_online_finish(float *o, const kvl_online *st, const float *acc, size_t Dv);

#endif
