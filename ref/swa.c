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

/* The leading keys queries first … first + b − 1 of the span see: up to the block's last query position. */
static size_t block_keys(size_t first, size_t b, const swa_span *w)
{
    return w->start + first + b - w->key_start;
}

size_t swa_block_mask(float *mask, size_t first, size_t b, size_t N, const void *span)
{
    const swa_span *w = span;
    const size_t n = block_keys(first, b, w);
    if (n > N) return n;
    swa_mask_rows(mask, w->start + first, b, w->key_start, n, w->window);
    return n;
}

size_t swa_block_band(size_t *lo, size_t *hi, size_t first, size_t b, size_t N, const void *span)
{
    const swa_span *w = span;
    const size_t n = block_keys(first, b, w);
    if (n > N) return n;
    for (size_t r = 0; r < b; r++) {
        const size_t t = w->start + first + r, from = swa_first_visible(t, w->window);
        const size_t last = t + 1 > w->key_start ? t + 1 - w->key_start : 0;
        hi[r] = last < n ? last : n;
        lo[r] = from > w->key_start ? from - w->key_start : 0;
        lo[r] = lo[r] < hi[r] ? lo[r] : hi[r];
    }
    return n;
}

kvl_chunk_mask swa_chunk_mask(const swa_span *span)
{
    return (kvl_chunk_mask){swa_block_mask, swa_block_band, span};
}

/* ---- the ring buffer ------------------------------------------------------------------------------ */

