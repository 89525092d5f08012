/* Lab: OCP MXFP4, a vector cut into blocks of 32 that each share one power-of-two scale (chapter 5,
 * "What it computes": block.h's mxfp4, 4 + 8/32 = 4.25 bits per element).
 *
 *   x[n]            the values, all finite; n a multiple of 32 (the grader never gives a ragged
 *                   last block: formats/block.h refuses one)
 *   scales[n/32]    out: block b's scale 2^k as its E8M0 code k + 127
 *   codes[n/2]      out: E2M1 codes, two per byte: element 2j in the LOW nibble of byte j, element
 *                   2j + 1 in the HIGH nibble (as DeepGEMM and PyTorch's float4_e2m1fn_x2 do)
 *
 * For each block (OCP MX v1.0, section 6.3, the scale rule formats/scale.h calls ocp_floor):
 *   amax = max_i |x_i|
 *   k    = ⌊log2 amax⌋ − 2     2 is E2M1's largest exponent (6 = 1.5 · 2^2); k clamped to ≥ −127;
 *                              amax below 2^−126 (an all-zero block included) counts as 2^−126
 *   q_i  = e2m1(x_i / 2^k)     to nearest, ties to even, saturating at ±6: the floor rule puts
 *                              amax / 2^k in [4, 8), so the block's largest values can pass 6
 * Dividing by a power of two is exact, and 2^−127 is a float32 subnormal, so ldexpf(1, k) is the
 * scale. e2m1_encode (lab.h) may do each element.
 *
 * The grader (make lab-05) compares every scale and code byte with kvf_quant_mxfp4 exactly, for
 * random blocks across 2^−20 … 2^20, all-zero blocks (+0 and −0), a single large value among small
 * ones at each position of its block, block maxima at and just below powers of two, quotients on
 * the midpoints between E2M1 values, maxima around float32's smallest normal and near its
 * largest. */
#include "lab.h"

#include <math.h>
#include <string.h>

void mxfp4_quant(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    (void)x;
    memset(codes, 0, n / 2);
    memset(scales, 0, n / 32);
}
