#include "row_tiles.h"

#include <stdlib.h>
#include <string.h>

#include "element.h"
#include "linalg.h"
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

/* A column range of wide rows is a short run every 4 KiB or more (a GQA group's 256 bytes of a 4 KiB bf16
 * row): the hardware prefetcher does not follow a stride across pages, so the read asks for the run this
 * many rows ahead itself (4 to 16 measured alike on the README's machine, 5% faster than none). */
#define COLS_AHEAD 8

static const float *bf16_cols(float *scratch, const kvl_row_tiles *r, size_t first, size_t n, size_t c0, size_t w)
{
    const uint16_t *rows = (const uint16_t *)r->src + first * r->width + c0;
    for (size_t i = 0; i < n; i++) {
        if (i + COLS_AHEAD < n) {
            const char *next = (const char *)(rows + (i + COLS_AHEAD) * r->width);
            for (size_t b = 0; b < w * sizeof *rows; b += 64) __builtin_prefetch(next + b);
        }
        kvf_bf16_decode_n(scratch + i * w, rows + i * r->width, w);
    }
    return scratch;
}

kvl_row_tiles kvl_row_tiles_bf16(const uint16_t *rows, size_t N, size_t width)
{
    return (kvl_row_tiles){.N = N, .width = width, .tile = bf16_tile, .src = rows, .cols = bf16_cols};
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

typedef struct {
    float *dst;
    const kvl_row_tiles *r;
    const int32_t *at;  /* the valid picks, compacted */
    size_t n, parts;
    int *rc;            /* [parts] */
} gather_job;

static void gather_part(void *ctx, size_t p)
{
    const gather_job *g = ctx;
    const size_t lo = g->n * p / g->parts, hi = g->n * (p + 1) / g->parts, width = g->r->width;
    for (size_t i = lo; i < hi && g->rc[p] == KVL_OK; i++)
        g->rc[p] = kvl_row_tiles_read(g->dst + i * width, g->r, (size_t)g->at[i], 1);
}

int kvl_row_tiles_gather(float *dst, size_t *got, const kvl_row_tiles *r, const int32_t *at, size_t n)
{
    *got = 0;
    if (n && (!dst || !at)) return kvl_fail(KVL_EINVAL, "kvl_row_tiles_gather: NULL array");
    int32_t *valid = malloc((n ? n : 1) * sizeof *valid);
    if (!valid) return kvl_fail(KVL_ENOMEM, "kvl_row_tiles_gather: out of memory for %zu picks", n);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (at[i] < -1 || (at[i] >= 0 && (size_t)at[i] >= r->N)) {
            free(valid);
            return kvl_fail(KVL_EINVAL, "kvl_row_tiles_gather: pick %d (entry %zu) outside -1 … %zu", at[i], i,
                            r->N ? r->N - 1 : 0);
        }
        if (at[i] >= 0) valid[m++] = at[i];
    }
    const double cost = r->in_place ? 0.0 : (double)m * (double)r->width * KVL_DECODE_MACS_PER_VALUE;
    const size_t parts = kvl_parts(m, 16, cost);
    int *rc = calloc(parts, sizeof *rc);
    if (!rc) {
        free(valid);
        return kvl_fail(KVL_ENOMEM, "kvl_row_tiles_gather: out of memory");
    }
    gather_job g = {dst, r, valid, m, parts, rc};
    kvl_run_parts(gather_part, &g, parts);
    int status = KVL_OK;
    for (size_t p = 0; p < parts && status == KVL_OK; p++) status = rc[p];
    free(rc);
    free(valid);
    if (status != KVL_OK) return status;
    *got = m;
    return KVL_OK;
}
