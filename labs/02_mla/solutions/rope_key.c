/* Lab solution: the decoupled RoPE key of MLA's cached rows (the contract is above the stub,
 * labs/02_mla/rope_key.c). */
#include "lab.h"

#include <math.h>

/* k[Dr]: each interleaved pair (2i, 2i+1) turned by pos·θ_i, the angle in double */
static void rotate(float *k, const float *theta, size_t Dr, int64_t pos)
{
    for (size_t i = 0; i < Dr / 2; i++) {
        const double angle = (double)pos * theta[i];
        const double c = cos(angle), s = sin(angle), a = k[2 * i], b = k[2 * i + 1];
        k[2 * i] = (float)(a * c - b * s);
        k[2 * i + 1] = (float)(a * s + b * c);
    }
}

void rope_key(float *rows, const float *theta, size_t T, size_t Dc, size_t Dr, int64_t start)
{
    for (size_t t = 0; t < T; t++) rotate(rows + t * (Dc + Dr) + Dc, theta, Dr, start + (int64_t)t);
}
