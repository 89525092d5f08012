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

/* The exponentials of a tiled softmax (ref/core/attend.h), whose running max m is at least every
 * score: s[j] ← e^{s[j] − m} by kvl_exp_f32 for j < n, and their float sum returned (in eight running
 * sums, s[j] into sum j mod 8, added pairwise: one order on every build). A score of −∞ gives 0; a NaN
 * stays NaN and makes the sum the quiet NaN. */
float kvl_softmax_exp_f32(float *s, size_t n, float m);

/* The same for R rows at once, s[R][n] (rows n apart), row r against m[r], its sum in sum[r]: one call for
 * a group's rows of a tile, where a call a row spent more time setting up than exponentiating 64 scores.
 * m[r] = +∞ gives the row weights 0 (a NaN stays NaN): a head with nothing visible yet. */
void kvl_softmax_exp_rows_f32(float *s, size_t R, size_t n, const float *m, float *sum);

/* The largest element of s[n] that is not NaN (a NaN is passed over: the exp then turns it into NaN),
 * −∞ if there is none (n = 0, or all NaN); between +0 and −0, either. A tiled softmax's tile maximum. */
float kvl_max_f32(const float *s, size_t n);

/* The same two down the columns of s[n][G] (key j's scores at s + j·G, a head per column: the key-major
 * scores of ref/core/many_rows.h): mx[h] the largest of column h that is not NaN (−∞ if none), and
 * s[j][h] ← e^{s[j][h] − m[h]} with sum[h] their float sum in key order (the quiet NaN if it is NaN). */
void kvl_max_cols_f32(float *mx, const float *s, size_t n, size_t G);
void kvl_exp_cols_f32(float *s, size_t n, size_t G, const float *m, float *sum);

/* y[n] ← a·y[n]: a tiled softmax's rescale of its accumulator to a new maximum, and its final division. */
void kvl_scale_f32(float *y, float a, size_t n);

/* kvl_softmax_exp_f32 and its rows form, kvl_max_f32, the column forms and kvl_scale_f32 run the variant
 * formats/isa.h chooses for the CPU; every variant gives the same bits. */

/* e^x in float for x ≤ 88: within KVL_EXP_F32_ULP units in the last place of e^x for x ≥ −87.3, and 0
 * below (where e^x < 1.2·10^−38, under float's smallest normal); −∞ gives 0, NaN gives NaN, 0 gives
 * exactly 1. Written without a branch, so that a loop of them vectorises, which expf's does not:
 * x = n·ln 2 + r with n the nearest integer to x/ln 2 and |r| ≤ ln 2 / 2 (ln 2 in Cody and Waite's
 * two parts, so that x − n·ln 2 loses nothing to cancellation), e^r = 1 + r + r²·P(r) with Cephes'
 * degree-5 P for expf, and 2^n set straight into the exponent bits. */
#define KVL_EXP_F32_ULP 2
float kvl_exp_f32(float x);

#endif
