#include "row_tiles.h"

#include <string.h>

#include "element.h"
#include "status.h"

static const float *f32_tile(float *scratch, const kvl_row_tiles *r, size_t first, size_t n)
{
    (void)scratch;
    (void)n;
    return (const float *)r->src + first * r->width;
}

kvl_row_tiles kvl_row_tiles_f32(const float *rows, size_t N, size_t width)
{
    return (kvl_row_tiles){.N = N, .width = width, .tile = f32_tile, .src = rows, .in_place = 1};
}

static const float *bf16_tile(float *scratch, const kvl_row_tiles *r, size_t first, size_t n)
{
    kvf_bf16_decode_n(scratch, (const uint16_t *)r->src + first * r->width, n * r->width);
    return scratch;
}

/* Columns c0 … c0 + w − 1 of bf16 rows, widened row by row. */
static const float *bf16_cols(float *scratch, const kvl_row_tiles *r, size_t first, size_t n, size_t c0, size_t w)
{
    const uint16_t *rows = (const uint16_t *)r->src + first * r->width + c0;
    for (size_t i = 0; i < n; i++) kvf_bf16_decode_n(scratch + i * w, rows + i * r->width, w);
    return scratch;
}

kvl_row_tiles kvl_row_tiles_bf16(const uint16_t *rows, size_t N, size_t width)
{
    return (kvl_row_tiles){.N = N, .width = width, .tile = bf16_tile, .src = rows, .cols = bf16_cols, .bf16 = rows};
}

int kvl_row_tiles_read(float *dst, const kvl_row_tiles *r, size_t first, size_t n)
{
    if (first > r->N || n > r->N - first)
        return kvl_fail(KVL_EINVAL, "kvl_row_tiles_read: rows [%zu, %zu + %zu) of %zu", first, first, n, r->N);
    const float *src = r->tile(dst, r, first, n);
    if (!src) return KVL_EINVAL;
    if (src != dst) memcpy(dst, src, n * r->width * sizeof *dst);
    return KVL_OK;
}
