/* Lab solution: the saturating cast of a float32 to E4M3 (the contract is above the stub,
 * labs/05_formats/e4m3_encode_sat.c). */
#include "lab.h"

#include <math.h>

/* ⌊log2 a⌋, never below −6: E4M3's subnormals are spaced as its smallest binade, [2^−6, 2^−5) */
static int binade(float a)
{
    return a < 0x1p-6f ? -6 : ilogbf(a);
}

uint8_t e4m3_encode_sat(float x)
{
    const uint8_t sign = signbit(x) ? 0x80 : 0x00;
    if (isnan(x)) return sign | 0x7F;
    const float a = fabsf(x);
    if (a >= 448.0f) return sign | 0x7E;
    const int e = binade(a);
    /* a in steps of 2^(e−3) is exact (a power-of-two scaling); rintf rounds a tie to even, and 16
     * steps, a carry out of the binade, is the next binade's first code */
    const int steps = (int)rintf(ldexpf(a, 3 - e));
    return (uint8_t)(sign | ((e + 6) * 8 + steps));
}
