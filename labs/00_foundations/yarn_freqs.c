/* Lab: YaRN's frequency table, as DeepSeek's precompute_freqs_cis builds it (chapter 0, "What it
 * computes": YaRN).
 *
 *   theta[Dr/2]    out: θ'_i, radians per position of pair i
 *   Dr, base       the rotary channels and rope_theta
 *   s, L           the factor (rope_factor) and the original context (original_seq_len)
 *   beta_fast, beta_slow   the turn counts that end the ramp (32 and 1 for V3)
 *
 *   θ_i  = base^(−2i/Dr)
 *   corr(n) = Dr·ln(L/(2π n)) / (2 ln base)           the pair turning n times over L
 *   lo = max(⌊corr(beta_fast)⌋, 0),  hi = min(⌈corr(beta_slow)⌉, Dr − 1)
 *   if hi = lo: hi = lo + 0.001                         (so the ramp never divides by zero)
 *   γ_i = clamp((i − lo)/(hi − lo), 0, 1)
 *   θ'_i = θ_i·(1 − γ_i) + (θ_i/s)·γ_i
 * The clamp of hi is at Dr − 1, DeepSeek's rule, not at the last pair Dr/2 − 1: where corr(1) is
 * past the last pair, the ramp runs past it and the slowest pairs are only partly interpolated.
 *
 * The grader (make lab-00) checks every θ'_i against kvl_yarn_freqs (ref/core/rope.h) for V3's
 * settings, a doubled L, Dr 32, base 500,000, s = 1, an L so short that lo clamps at 0 and one so
 * long that hi clamps at Dr − 1, within 1e-6 relative (ref/core holds the table in float32, one
 * rounding of 6·10⁻⁸ and a float blend; a ramp end off by one pair moves θ'_i by 5% or more). */
#include "lab.h"

#include <math.h>
#include <string.h>

void yarn_freqs(double *theta, size_t Dr, double base, double s, double L, double beta_fast,
                double beta_slow)
{
    (void)base, (void)s, (void)L, (void)beta_fast, (void)beta_slow;
    memset(theta, 0, Dr / 2 * sizeof *theta);
}
