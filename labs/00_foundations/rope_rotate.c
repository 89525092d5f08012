/* Lab: RoPE on one vector's rotary channels, interleaved or half-split (chapter 0, "What it
 * computes": RoPE and pairing).
 *
 *   x[Dr]          in place: the rotary channels of one query or key, at position pos
 *   theta[Dr/2]    θ_i, radians per position of pair i (a plain table base^(−2i/Dr), or YaRN's)
 *   interleaved    1: pair i = channels (2i, 2i+1) (DeepSeek's MLA);
 *                  0: pair i = channels (i, i + Dr/2) (Hugging Face's rotate_half)
 *
 * At position p each pair (a, b) becomes (a cos φ − b sin φ, a sin φ + b cos φ), φ = p·θ_i.
 * The project's rule (ref/core/rope.h): form the angle p·θ_i in double (the θ_i as given) and take
 * cos and sin in double. A float32 angle is off by up to half its ulp, 0.03 rad at p = 10⁶: the
 * grader's long positions see it.
 *
 * The grader (make lab-00) checks every element of x against kvl_rope_rotate_interleaved and
 * kvl_rope_rotate_half_split (ref/core/rope.h) at positions 0, 1, 4,093, 100,003 and 1,000,003,
 * with the plain and V3's YaRN table, Dr 8, 64 and 128, within 1e-6 + 1e-6·|expected| (the
 * reference rounds cos and sin to float and fuses one multiply-add: a few 10⁻⁸; the wrong pairing,
 * a float angle or a swapped sine are off by 10⁻³ or more). */
#include "lab.h"

#include <math.h>

void rope_rotate(float *x, const float *theta, size_t Dr, int64_t pos, int interleaved)
{
    (void)x, (void)theta, (void)Dr, (void)pos, (void)interleaved;
}
