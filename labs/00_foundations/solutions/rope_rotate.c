/* Lab solution: RoPE on one vector's rotary channels, either pairing (the contract is above the
 * stub, labs/00_foundations/rope_rotate.c). */
#include "lab.h"

#include <math.h>

/* the channels of pair i: (2i, 2i+1) interleaved, (i, i + Dr/2) half-split */
static void pair_of(size_t i, size_t Dr, int interleaved, size_t *j, size_t *k)
{
    *j = interleaved ? 2 * i : i;
    *k = interleaved ? 2 * i + 1 : i + Dr / 2;
}

void rope_rotate(float *x, const float *theta, size_t Dr, int64_t pos, int interleaved)
{
    for (size_t i = 0; i < Dr / 2; i++) {
        /* the angle in double: a float angle at p = 10^6 is off by up to 0.03 rad */
        const double phi = (double)pos * theta[i], c = cos(phi), s = sin(phi);
        size_t j, k;
        pair_of(i, Dr, interleaved, &j, &k);
        const double a = x[j], b = x[k];
        x[j] = (float)(a * c - b * s);
        x[k] = (float)(a * s + b * c);
    }
}
