/* Lab: the decoupled RoPE key of MLA's cached rows (chapter 2, "What it computes":
 * k_rope = RoPE(k̃, t), one for all heads).
 *
 *   rows[T][Dc+Dr]   in place: row t = [c_t | k̃_t] for the token at position start + t; rotate the
 *                    trailing Dr channels, leave the Dc latent channels as they are
 *   theta[Dr/2]      θ_i, radians per position of pair i (the config's table: YaRN at V3's
 * settings)
 *
 * The project's rule (ref/core/rope.h): pairs are interleaved, pair i = channels (2i, 2i+1) of the
 * k̃ part, and at position p each pair (a, b) becomes (a cos φ − b sin φ, a sin φ + b cos φ) with
 * the angle φ = p·θ_i formed in double (the θ_i as given) and cos, sin taken in double. A float32
 * angle is off by up to half its ulp, 4·10⁻³ rad at p = 10⁵: the grader's long positions see it.
 *
 * The grader (make lab-02) checks every element of rows against kvl_rope_rotate_rows_interleaved
 * (ref/core/rope.h) for rows starting at position 0, 4,093 and past 10⁵ and 10⁶, with the plain and
 * the YaRN table, Dr 8 to 64, within 1e-6 + 1e-6·|expected| (cos and sin rounded to float and one
 * rotation in float differ from the reference's by a few 10⁻⁸; the half-split pairing, a float
 * angle or a swapped sine are off by 10⁻³ or more). */
#include "lab.h"

#include <math.h>

void rope_key(float *rows, const float *theta, size_t T, size_t Dc, size_t Dr, int64_t start)
{
    (void)rows, (void)theta, (void)T, (void)Dc, (void)Dr, (void)start;
}
