/* Rotary position embedding: frequency tables (plain and YaRN), the YaRN softmax-scale factor, and
 * the rotation of Dr channels in both pairings (DeepSeek-V3 inference/model.py,
 * precompute_freqs_cis and MLA; chapters/02_mla/README.md).
 *
 * Frequencies. θ_i = base^(−2i/Dr), i < Dr/2, computed as DeepSeek's precompute_freqs_cis does in
 * float32: the exponent (2i)/Dr is a float32 quotient, base^e is evaluated in double and rounded once
 * to float32 (what a correctly rounded powf gives), and θ_i = 1/that in float32. The YaRN blend is
 * likewise done in float32, in the reference's order. Tables therefore hold the float32 values the
 * DeepSeek references rotate with, up to the last bit of their pow.
 *
 * Angles. The angle of pair i at position p is p·θ_i formed in double (exact θ_i, one rounding), and
 * cos and sin are taken in double. The references form p·θ_i in float32, which at p = 10^5 can be
 * off by 4·10^-3 rad (half a float32 ulp of the angle); the double angle removes that error and
 * makes the inverse exact in the sense that the angle at −p is −(angle at p), so cos is equal and
 * sin is negated bit for bit. The _f32 rotations round cos and sin to float and rotate in float,
 * a·cos − b·sin as fmaf(a, cos, −b·sin): one explicit fused multiply-add, so the bits do not depend
 * on whether the compiler fuses, and the error is at most (√2 + 2)·u·‖pair‖, u = 2^−24. The _f64
 * rotations do the same in double (oracles, toy checks).
 *
 * Pairings (never mix them up):
 *   interleaved  pair i = channels (2i, 2i+1)       DeepSeek MLA, V4, V4.1
 *   half-split   pair i = channels (i, i + Dr/2)    V3.2 indexer, Hugging Face rotate_half, gpt-oss
 * each pair (a, b) → (a cos − b sin, a sin + b cos); the inverse uses −sin.
 *
 * Partial RoPE: pass the pointer to the first rotary channel (DeepSeek rotates the trailing Dr
 * channels of a head, the V3.2 indexer the leading Dr). */
#ifndef KVL_ROPE_H
#define KVL_ROPE_H

#include <stddef.h>
#include <stdint.h>

/* Largest rotary width a kvl_rope holds (DeepSeek uses 64). */
#define KVL_ROPE_MAX_DR 256

typedef struct {
    size_t Dr;                           /* rotary channels, even, 2 ≤ Dr ≤ KVL_ROPE_MAX_DR */
    float theta[KVL_ROPE_MAX_DR / 2];    /* θ_i, radians per position, i < Dr/2 */
} kvl_rope;

/* ---- frequency tables --------------------------------------------------------------------------- */

/* theta[Dr/2] = base^(−2i/Dr). KVL_EINVAL unless Dr is even and ≥ 2 and base > 1. */
int kvl_rope_freqs(float *theta, size_t Dr, double base);

/* The YaRN correction range: corr(n) = Dr·ln(L_orig/(2π n)) / (2 ln base),
 * lo = max(⌊corr(beta_fast)⌋, 0), hi = min(⌈corr(beta_slow)⌉, Dr − 1), and hi += 0.001 when lo = hi
 * (so the ramp never divides by zero); both are returned as used by the ramp. Pairs i ≤ lo keep θ_i,
 * pairs i ≥ hi are divided by the factor. V3: lo 10, hi 23; V4 compress rope: lo 15, hi 25.
 * KVL_EINVAL unless Dr is even and ≥ 2, base > 1, L_orig > 0 and 0 < beta_slow ≤ beta_fast. */
int kvl_yarn_range(double *lo, double *hi, size_t Dr, double base, double L_orig, double beta_fast,
                   double beta_slow);

/* theta[Dr/2] = θ_i·(1 − ramp_i) + (θ_i/factor)·ramp_i, ramp_i = clamp((i − lo)/(hi − lo), 0, 1).
 * factor 1 gives the plain table to within one float32 rounding. KVL_EINVAL as kvl_yarn_range, or
 * unless factor ≥ 1. */
int kvl_yarn_freqs(float *theta, size_t Dr, double base, double factor, double L_orig, double beta_fast,
                   double beta_slow);

/* m = 0.1·mscale·ln(factor) + 1, and 1 for factor ≤ 1. V3 (mscale 1, factor 40): 1.368888. */
double kvl_yarn_mscale(double factor, double mscale);

/* The V2/V3/V3.2 softmax scale d_qk^−½·m² with d_qk = Dnope + Dr; V3: 192^−½·1.368888² = 0.1352338.
 * (V4/V4.1 use Dh^−½ with no mscale.) */
double kvl_yarn_softmax_scale(size_t d_qk, double factor, double mscale);

/* ---- the rotary table a layer carries ------------------------------------------------------------ */

/* r = plain RoPE of width Dr. KVL_EINVAL as kvl_rope_freqs, or Dr > KVL_ROPE_MAX_DR. */
int kvl_rope_init(kvl_rope *r, size_t Dr, double base);

/* r = YaRN RoPE (DeepSeek form). KVL_EINVAL as kvl_yarn_freqs, or Dr > KVL_ROPE_MAX_DR. */
int kvl_rope_init_yarn(kvl_rope *r, size_t Dr, double base, double factor, double L_orig, double beta_fast,
                       double beta_slow);

/* ---- rotation of one vector's rotary channels x[Dr], in place, at position pos ------------------- */

void kvl_rope_rotate_interleaved(float *x, const kvl_rope *r, int64_t pos);
void kvl_rope_unrotate_interleaved(float *x, const kvl_rope *r, int64_t pos);
void kvl_rope_rotate_half_split(float *x, const kvl_rope *r, int64_t pos);
void kvl_rope_unrotate_half_split(float *x, const kvl_rope *r, int64_t pos);

void kvl_rope_rotate_interleaved_f64(double *x, const kvl_rope *r, int64_t pos);
void kvl_rope_unrotate_interleaved_f64(double *x, const kvl_rope *r, int64_t pos);
void kvl_rope_rotate_half_split_f64(double *x, const kvl_rope *r, int64_t pos);
void kvl_rope_unrotate_half_split_f64(double *x, const kvl_rope *r, int64_t pos);

/* ---- rotation of rows x[T][stride], channels offset .. offset+Dr−1, row t at position start + t --- */
/* (a [T][H][Dh] tensor is the heads form below) */

void kvl_rope_rotate_rows_interleaved(float *x, size_t T, size_t stride, size_t offset, const kvl_rope *r,
                                      int64_t start);
void kvl_rope_unrotate_rows_interleaved(float *x, size_t T, size_t stride, size_t offset, const kvl_rope *r,
                                        int64_t start);
void kvl_rope_rotate_rows_half_split(float *x, size_t T, size_t stride, size_t offset, const kvl_rope *r,
                                     int64_t start);
void kvl_rope_unrotate_rows_half_split(float *x, size_t T, size_t stride, size_t offset, const kvl_rope *r,
                                       int64_t start);

/* ---- rotation of tokens' heads: x[T][stride], token t at position start + t, its H vectors' rotary ---
 * channels at offset + h·head_stride, h < H (a [T][H][Dh] tensor: stride H·Dh, head_stride Dh). The same
 * bits as H row rotations, with each token's cos and sin computed once for all its heads, so that the
 * trigonometry is paid per token, not per head. */

void kvl_rope_rotate_heads_interleaved(float *x, size_t T, size_t stride, size_t offset, size_t H,
                                       size_t head_stride, const kvl_rope *r, int64_t start);
void kvl_rope_unrotate_heads_interleaved(float *x, size_t T, size_t stride, size_t offset, size_t H,
                                         size_t head_stride, const kvl_rope *r, int64_t start);
void kvl_rope_rotate_heads_half_split(float *x, size_t T, size_t stride, size_t offset, size_t H,
                                      size_t head_stride, const kvl_rope *r, int64_t start);

#endif
