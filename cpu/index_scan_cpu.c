#include "index_scan_cpu.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "isa.h"
#include "linalg.h"
#include "threads.h"
#include "scratch.h"
#include "status.h"

/* The dot products of one tile, [rows·HI][KVL_INDEX_KEY_TILE], stay under this many floats (256 KiB). */
#define INDEX_DOT_FLOATS ((size_t)1 << 16)

/* row[0 … n) = Σ_j w_j·ReLU(dot_j[0 … visible)) head by head in j order, −∞ from visible on, for one
 * query's dot products dot[HI][n] (lanes independent, so the simd loop gives the scalar loop's bits), compiled
 * once per instruction set (formats/isa.h). */
void KVF_ISA_FN(kvl_index_weigh_heads)(float *row, const float *dot, const float *w, size_t HI, size_t n,
                                        size_t visible)
{
    for (size_t s = 0; s < visible; s++) row[s] = 0.0f;
    for (size_t s = visible; s < n; s++) row[s] = -INFINITY;
    for (size_t j = 0; j < HI; j++) {
        const float wj = w[j], *d = dot + j * n;
#pragma omp simd
        for (size_t s = 0; s < visible; s++) row[s] += wj * (d[s] > 0.0f ? d[s] : 0.0f);
    }
}

#if KVF_ISA_ONCE

typedef void weigh_fn(float *row, const float *dot, const float *w, size_t HI, size_t n, size_t visible);
weigh_fn kvl_index_weigh_heads_baseline, kvl_index_weigh_heads_avx2, kvl_index_weigh_heads_avx512;

static void weigh_heads(float *row, const float *dot, const float *w, size_t HI, size_t n, size_t visible)
{
    KVF_ISA_CALL(, kvl_index_weigh_heads, (row, dot, w, HI, n, visible))
}

/* Per-part scratch: the dot products [rows·HI][tile] and a key tile [tile][DI] (decoded or gathered; none
 * for keys read in place), carved from the calling thread's scratch block (cpu/scratch.h). */
typedef struct {
    size_t n_parts;
    float **dot, **keys;
    int *rc;
} parts;

static void parts_free(parts *p)
{
    free(p->dot);
    free(p->keys);
    free(p->rc);
}

static int parts_alloc(parts *p, size_t n_parts, size_t dot_floats, size_t key_floats, const char *fn)
{
    *p = (parts){.n_parts = n_parts};
    const size_t most = SIZE_MAX / 4 / sizeof(float) / n_parts;
    if (dot_floats > most || key_floats > most)
        return kvl_fail(KVL_EINVAL, "%s: a tile of %zu products or %zu key values overflows", fn, dot_floats,
                        key_floats);
    const size_t dot_bytes = kvl_scratch_round(dot_floats * sizeof(float));
    const size_t part_bytes = dot_bytes + kvl_scratch_round(key_floats * sizeof(float));
    char *mem = kvl_scratch(KVL_SCRATCH_INDEX_SCAN, n_parts * part_bytes);
    p->dot = calloc(n_parts, sizeof *p->dot);
    p->keys = calloc(n_parts, sizeof *p->keys);
    p->rc = calloc(n_parts, sizeof *p->rc);
    if (!mem || !p->dot || !p->keys || !p->rc) {
        parts_free(p);
        return kvl_fail(KVL_ENOMEM, "%s: out of memory", fn);
    }
    for (size_t i = 0; i < n_parts; i++) {
        p->dot[i] = (float *)(mem + i * part_bytes);
        p->keys[i] = key_floats ? (float *)(mem + i * part_bytes + dot_bytes) : NULL;
    }
    return KVL_OK;
}

static int parts_status(const parts *p)
{
    for (size_t i = 0; i < p->n_parts; i++)
        if (p->rc[i] != KVL_OK) return p->rc[i];
    return KVL_OK;
}

/* ---- every visible key ------------------------------------------------------------------------------------- */

typedef struct {
    float *I;
    const float *q, *w;
    const kvl_row_tiles *k;
    size_t S, HI, start, M, rows;
    parts p;
} scan;

static size_t visible(const scan *x, size_t i)
{
    const size_t n = (x->start + i + 1) / x->M;
    return n < x->k->N ? n : x->k->N;
}

/* Query rows i0 … i0 + m − 1 against keys s0 … s0 + n − 1, in part p. A tile past every row's reach is
 * −∞ without a product. */
static int scan_block(const scan *x, size_t p, const float *keys, size_t i0, size_t m, size_t s0, size_t n)
{
    const size_t N = x->k->N, HI = x->HI, DI = x->k->width, reach = visible(x, i0 + m - 1);
    const size_t cols = reach <= s0 ? 0 : reach - s0 < n ? reach - s0 : n;
    if (cols) KVL_TRY(kvl_matmul_abt_f32(x->p.dot[p], x->q + i0 * HI * DI, keys, m * HI, cols, DI));
    for (size_t i = 0; i < m; i++) {
        const size_t v = visible(x, i0 + i), seen = v <= s0 ? 0 : v - s0 < cols ? v - s0 : cols;
        float *row = x->I + (i0 + i) * N + s0;
        weigh_heads(row, x->p.dot[p] + i * HI * cols, x->w + (i0 + i) * HI, HI, cols, seen);
        for (size_t s = cols; s < n; s++) row[s] = -INFINITY;
    }
    return KVL_OK;
}

static int scan_range(const scan *x, size_t p, size_t first, size_t end)
{
    for (size_t s0 = first; s0 < end; s0 += KVL_INDEX_KEY_TILE) {
        const size_t n = end - s0 < KVL_INDEX_KEY_TILE ? end - s0 : KVL_INDEX_KEY_TILE;
        const size_t need = visible(x, x->S - 1) > s0 ? visible(x, x->S - 1) - s0 : 0;
        const float *keys = need ? x->k->tile(x->p.keys[p], x->k, s0, need < n ? need : n) : NULL;
        if (need && !keys) return KVL_EINVAL;
        for (size_t i0 = 0; i0 < x->S; i0 += x->rows)
            KVL_TRY(scan_block(x, p, keys, i0, x->S - i0 < x->rows ? x->S - i0 : x->rows, s0, n));
    }
    return KVL_OK;
}

static void scan_part(void *ctx, size_t p)
{
    scan *x = ctx;
    const size_t N = x->k->N;
    x->p.rc[p] = scan_range(x, p, N * p / x->p.n_parts, N * (p + 1) / x->p.n_parts);
}

int kvl_index_scores_cpu(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t S, size_t HI,
                         size_t start, size_t M)
{
    if (S == 0 || k->N == 0) return KVL_OK;
    const size_t per_query = HI * KVL_INDEX_KEY_TILE;
    const size_t block = per_query >= INDEX_DOT_FLOATS ? 1 : INDEX_DOT_FLOATS / per_query;
    scan x = {.I = I, .q = q, .w = w, .k = k, .S = S, .HI = HI, .start = start, .M = M, .rows = block < S ? block : S};
    const double macs = (double)S * (double)k->N * (double)(HI * k->width) / (double)M;
    KVL_TRY(parts_alloc(&x.p, kvl_parts(k->N, KVL_INDEX_KEY_TILE / 2, macs), x.rows * per_query,
                        k->in_place ? 0 : KVL_INDEX_KEY_TILE * k->width, "kvl_index_scores"));
    kvl_run_parts(scan_part, &x, x.p.n_parts);
    const int rc = parts_status(&x.p);
    parts_free(&x.p);
    return rc;
}

/* ---- listed keys ------------------------------------------------------------------------------------------- */

typedef struct {
    float *I;
    const float *q, *w;
    const kvl_row_tiles *k;
    const int32_t *at;
    size_t n, HI;
    parts p;
} listed;

/* keys[m][DI] ← the listed keys at[0 … m), read a run of consecutive entries at a time. */
static int gather(float *keys, const kvl_row_tiles *k, const int32_t *at, size_t m)
{
    for (size_t j = 0, run; j < m; j += run) {
        for (run = 1; j + run < m && at[j + run] == at[j] + (int32_t)run; run++) {}
        KVL_TRY(kvl_row_tiles_read(keys + j * k->width, k, (size_t)at[j], run));
    }
    return KVL_OK;
}

/* A tile's scores are weighed into the part's row after its products (dot[HI][tile], row[tile]), then
 * written to the listed entries. */
static int listed_range(const listed *x, size_t p, size_t first, size_t end)
{
    float *row = x->p.dot[p] + x->HI * KVL_INDEX_KEY_TILE;
    for (size_t t0 = first; t0 < end; t0 += KVL_INDEX_KEY_TILE) {
        const size_t m = end - t0 < KVL_INDEX_KEY_TILE ? end - t0 : KVL_INDEX_KEY_TILE;
        KVL_TRY(gather(x->p.keys[p], x->k, x->at + t0, m));
        KVL_TRY(kvl_matmul_abt_f32_ref(x->p.dot[p], x->q, x->p.keys[p], x->HI, m, x->k->width));
        weigh_heads(row, x->p.dot[p], x->w, x->HI, m, m);
        for (size_t i = 0; i < m; i++) x->I[x->at[t0 + i]] = row[i];
    }
    return KVL_OK;
}

static void listed_part(void *ctx, size_t p)
{
    listed *x = ctx;
    x->p.rc[p] = listed_range(x, p, x->n * p / x->p.n_parts, x->n * (p + 1) / x->p.n_parts);
}

/* I[N] ← −∞ in parts, a 4 MB row at a million entries being a fifth of a pool's scan on one thread. */
typedef struct {
    float *I;
    size_t N, parts;
} fill_job;

static void fill_part(void *ctx, size_t p)
{
    const fill_job *f = ctx;
    for (size_t i = f->N * p / f->parts; i < f->N * (p + 1) / f->parts; i++) f->I[i] = -INFINITY;
}

int kvl_index_scores_listed_cpu(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t HI,
                                const int32_t *at, size_t n)
{
    fill_job f = {I, k->N, kvl_parts(k->N, 1u << 16, (double)k->N * 32.0)};
    kvl_run_parts(fill_part, &f, f.parts);
    if (n == 0) return KVL_OK;
    listed x = {.I = I, .q = q, .w = w, .k = k, .at = at, .n = n, .HI = HI};
    const double macs = (double)n * (double)(HI * k->width);
    KVL_TRY(parts_alloc(&x.p, kvl_parts(n, KVL_INDEX_KEY_TILE / 2, macs), (HI + 1) * KVL_INDEX_KEY_TILE,
                        KVL_INDEX_KEY_TILE * k->width, "kvl_index_scores_listed"));
    kvl_run_parts(listed_part, &x, x.p.n_parts);
    const int rc = parts_status(&x.p);
    parts_free(&x.p);
    return rc;
}

#endif /* KVF_ISA_ONCE */
