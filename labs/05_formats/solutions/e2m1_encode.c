/* Lab solution: the cast of a float32 to E2M1 (the contract is above the stub,
 * labs/05_formats/e2m1_encode.c). */
#include "lab.h"

#include <math.h>

/* ⌊log2 a⌋, never below 0: E2M1's one subnormal, 0.5, is spaced as its smallest binade, [1, 2) */
static int binade(float a)
{
    return a < 1.0f ? 0 : ilogbf(a);
}

uint8_t e2m1_encode(float x)
{
    /* no NaN code: ml_dtypes' cast gives −0 for +NaN and +0 for −NaN, and the project follows it */
    if (isnan(x)) return signbit(x) ? 0x0 : 0x8;
    const uint8_t sign = signbit(x) ? 0x8 : 0x0;
    const float a = fabsf(x);
    if (a >= 6.0f) return sign | 0x7;
    const int e = binade(a);
    /* a in steps of 2^(e−1), exact; rintf rounds a tie to even, and a carry to 4 steps is the next
     * binade's first code */
    const int steps = (int)rintf(ldexpf(a, 1 - e));
    return (uint8_t)(sign | (e * 2 + steps));
}
