/* Lab solution: OCP MXFP4 (the contract is above the stub, labs/05_formats/mxfp4_quant.c). */
#include "lab.h"

#include <float.h>
#include <math.h>

#define BLOCK 32

/* max |x_i| of one block */
static float block_amax(const float *x)
{
    float amax = 0;
    for (size_t i = 0; i < BLOCK; i++) amax = fmaxf(amax, fabsf(x[i]));
    return amax;
}

/* E8M0 code of 2^(⌊log2 amax⌋ − 2); OCP reads an amax below 2^−126 (zero too) as 2^−126 */
static uint8_t scale_code(float amax)
{
    int k = (amax < FLT_MIN ? -126 : ilogbf(amax)) - 2;
    if (k < -127) k = -127;
    return (uint8_t)(k + 127);
}

void mxfp4_quant(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    for (size_t b = 0; b < n / BLOCK; b++) {
        const float *xb = x + b * BLOCK;
        uint8_t *cb = codes + b * BLOCK / 2;
        scales[b] = scale_code(block_amax(xb));
        const float s = ldexpf(1.0f, scales[b] - 127);
        for (size_t j = 0; j < BLOCK / 2; j++)
            cb[j] = (uint8_t)(e2m1_encode(xb[2 * j] / s) | e2m1_encode(xb[2 * j + 1] / s) << 4);
    }
}
