#include "swa.h"

#include <math.h>

/* ---- the window rule ------------------------------------------------------------------------------ */

int swa_visible(size_t t, size_t j, size_t W)
{
    return j <= t && (W == 0 || t - j < W);
}

size_t swa_first_visible(size_t t, size_t W)
{
    return W == 0 || t < W ? 0 : t - W + 1;
}

void swa_mask_rows(float *mask, size_t start, size_t S, size_t key_start, size_t n_keys, size_t W)
{
    for (size_t i = 0; i < S; i++)
        for (size_t j = 0; j < n_keys; j++)
            mask[i * n_keys + j] = swa_visible(start + i, key_start + j, W) ? 0.0f : -INFINITY;
}

size_t swa_block_keys(size_t first, size_t b, const swa_span *w)
{
    return w->start + first + b - w->key_start;
}

size_t swa_block_mask(float *mask, size_t first, size_t b, size_t N, const void *span)
{
    const swa_span *w = span;
    const size_t n = swa_block_keys(first, b, w);
    if (n > N) return n;
    swa_mask_rows(mask, w->start + first, b, w->key_start, n, w->window);
    return n;
}

/* ---- the ring buffer ------------------------------------------------------------------------------ */

