#include "attend_cpu.h"

#include <cblas.h>
#include <math.h>

#include "linalg.h"
#include "threads.h"
#include "scratch.h"
#include "softmax_cpu.h"
#include "status.h"

/* The definition's blocks of KVL_QUERY_BLOCK queries a product takes at once. Each block keeps its own
 * mask and its own n (so each row scores the keys the definition scores, no more), but the keys all the
 * group's blocks see are scored, and weigh their values, in one product of KVL_CHUNK_GROUP ·
 * KVL_QUERY_BLOCK rows: OpenBLAS packs the keys and values once for four times the rows, and its kernel
 * runs on taller tiles. */
#define KVL_CHUNK_GROUP 4

/* One definition's block of a group: its first query in the chunk, its queries, the leading keys it
 * sees, and its mask: its rows, mask[b][n], or for a band (kvl_block_band) each query's run of keys,
 * lo[b] and hi[b] (mask NULL). */
typedef struct {
    size_t first, b, n;
    const float *mask;
    size_t lo[KVL_QUERY_BLOCK], hi[KVL_QUERY_BLOCK];
} chunk_block;

/* A group of blocks: rows queries from `first`, their scores s[rows][ld] (ld: the widest block's n),
 * and the keys every block sees, shared (the fewest any block sees). */
typedef struct {
    size_t first, rows, ld, shared, count;
    chunk_block blk[KVL_CHUNK_GROUP];
} chunk_group;

/* s[n] ← its softmax in float (the vectorised exponentials of cpu/softmax_cpu.h): a row with no score
 * above −∞ becomes zeros, and a NaN score makes the row NaN, as kvl_softmax_f32 gives. */
static void softmax_row(float *row, size_t n)
{
    const float mu = kvl_max_f32(row, n);
    if (mu == -INFINITY) { /* every score −∞, or NaN */
        float fill = 0.0f;
        for (size_t i = 0; i < n; i++) fill = isnan(row[i]) ? row[i] : fill;
        for (size_t i = 0; i < n; i++) row[i] = fill;
        return;
    }
    kvl_scale_f32(row, 1.0f / kvl_softmax_exp_f32(row, n, mu), n);
}

/* One row of scaled scores s[n] ← the softmax of s + m, m[n] its row of the mask. */
static void softmax_masked_row(float *row, const float *m, size_t n)
{
    for (size_t i = 0; i < n; i++) row[i] += m[i];
    softmax_row(row, n);
}

/* Whether adding −∞ to some of s[n] gives a NaN: a NaN or +∞ among them. */
static int masking_gives_nan(const float *s, size_t n)
{
    int nan = 0;
    for (size_t i = 0; i < n; i++) nan |= isnan(s[i]) || s[i] == INFINITY;
    return nan;
}

/* One row of scaled scores s[n] ← softmax_masked_row's result for the mask that is 0 on keys [lo, hi)
 * and −∞ elsewhere, without that mask written out or read. */
static void softmax_band_row(float *row, size_t lo, size_t hi, size_t n)
{
    const int nan = masking_gives_nan(row, lo) || masking_gives_nan(row + hi, n - hi);
    for (size_t i = 0; i < lo; i++) row[i] = 0.0f;
    for (size_t i = hi; i < n; i++) row[i] = 0.0f;
    softmax_row(row + lo, hi - lo);
    if (nan)
        for (size_t i = 0; i < n; i++) row[i] = NAN;
}

/* Each row of a group's scores s[rows][ld] ← its masked softmax over its block's n keys: from its run of
 * keys for a band, from the rows the mask wrote otherwise. */
static void group_softmax(float *s, const chunk_group *g)
{
    for (size_t i = 0; i < g->count; i++) {
        const chunk_block *b = &g->blk[i];
        float *rows = s + (b->first - g->first) * g->ld;
        for (size_t r = 0; r < b->b; r++) {
            if (b->mask) softmax_masked_row(rows + r * g->ld, b->mask + r * b->n, b->n);
            else softmax_band_row(rows + r * g->ld, b->lo[r], b->hi[r], b->n);
        }
    }
}

/* Asks the mask for each of the group's blocks: a band for its runs, any other mask for its rows, into
 * mask[rows][N] (block i's [b][n] from row i·B):
 * KVL_OK, or KVL_EINVAL for a block that sees more than N keys. */
static int group_masks(chunk_group *g, float *mask, size_t first, size_t rows, const kvl_chunk_head *c)
{
    *g = (chunk_group){.first = first, .rows = rows, .shared = c->N};
    for (size_t at = 0; at < rows; at += KVL_QUERY_BLOCK, g->count++) {
        chunk_block *k = &g->blk[g->count];
        k->first = first + at;
        k->b = rows - at < KVL_QUERY_BLOCK ? rows - at : KVL_QUERY_BLOCK;
        k->mask = c->mask.band ? NULL : mask + at * c->N;
        k->n = c->mask.band ? c->mask.band(k->lo, k->hi, k->first, k->b, c->N, c->mask.ctx)
                            : c->mask.rows(mask + at * c->N, k->first, k->b, c->N, c->mask.ctx);
        if (k->n > c->N) return kvl_chunk_mask_too_wide(k->first, k->b, k->n, c->N);
        g->shared = k->n < g->shared ? k->n : g->shared;
        g->ld = k->n > g->ld ? k->n : g->ld;
    }
    return KVL_OK;
}

/* A leading dimension for BLAS, which refuses 0 even where a width of 0 leaves nothing to read (a
 * product over K = 0 writes zeros, the empty sum). */
static blasint blas_ld(size_t ld)
{
    return ld ? (blasint)ld : 1;
}

/* s[rows][ld] ← scale · q·kᵀ over each block's own n keys: the shared keys for every row at once, then
 * each block's keys past them. Columns past a block's n are left unwritten. */
static void group_scores(float *s, const chunk_group *g, const float *q, const float *k, const kvl_chunk_head *c)
{
    const blasint ld = (blasint)g->ld, Dk = (blasint)c->Dk, ldq = blas_ld(c->ldq), ldk = blas_ld(c->Dk);
    if (g->shared)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)g->rows, (blasint)g->shared, Dk, c->scale,
                    q + g->first * c->ldq, ldq, k, ldk, 0.0f, s, ld);
    for (size_t i = 0; i < g->count; i++) {
        const chunk_block *b = &g->blk[i];
        if (b->n > g->shared)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)b->b, (blasint)(b->n - g->shared), Dk,
                        c->scale, q + b->first * c->ldq, ldq, k + g->shared * c->Dk, ldk, 0.0f,
                        s + (b->first - g->first) * g->ld + g->shared, ld);
    }
}

/* o rows first … first + rows − 1 ← p·v, p[rows][ld] the weights (zero past each block's n, where they
 * are not read): the shared keys' values for every row at once, then each block's past them added. */
static void group_values(float *o, const float *p, const chunk_group *g, const float *v, const kvl_chunk_head *c)
{
    const blasint ld = (blasint)g->ld, Dv = (blasint)c->Dv, ldv = blas_ld(c->Dv), ldo = blas_ld(c->ldo);
    float *o_g = o + g->first * c->ldo;
    if (g->shared)
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)g->rows, Dv, (blasint)g->shared, 1.0f, p, ld,
                    v, ldv, 0.0f, o_g, ldo);
    else
        for (size_t r = 0; r < g->rows; r++)
            for (size_t d = 0; d < c->Dv; d++) o_g[r * c->ldo + d] = 0.0f;
    for (size_t i = 0; i < g->count; i++) {
        const chunk_block *b = &g->blk[i];
        const size_t at = b->first - g->first;
        if (b->n > g->shared)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)b->b, Dv, (blasint)(b->n - g->shared), 1.0f,
                        p + at * g->ld + g->shared, ld, v + g->shared * c->Dv, ldv, 1.0f, o_g + at * c->ldo, ldo);
    }
}

/* The groups of blocks split among the threads, in a snake: of each 2P groups part p takes the p-th
 * from either end, so that under a causal mask, where each group sees more keys than the one before, the
 * parts' work evens out (taking groups p, p + P, … left the last part 1/16 more than the first on two
 * threads of a 4K chunk). Each group in its thread's scratch, its products single-threaded BLAS. A
 * group's output does not depend on the split. */
typedef struct {
    float *o;
    const float *q, *k, *v;
    const kvl_chunk_head *c;
    size_t B, groups, parts;
} chunk_job;

/* Group `at` of the job, its scores in s and its mask in mask (B·N floats each; mask unused for the
 * band). */
static int chunk_group_run(const chunk_job *j, size_t at, float *s, float *mask)
{
    const kvl_chunk_head *c = j->c;
    const size_t first = at * j->B, rows = c->S - first < j->B ? c->S - first : j->B;
    chunk_group g;
    KVL_TRY(group_masks(&g, mask, first, rows, c));
    group_scores(s, &g, j->q, j->k, c);
    group_softmax(s, &g);
    group_values(j->o, s, &g, j->v, c);
    return KVL_OK;
}

static int chunk_part(void *ctx, size_t p)
{
    const chunk_job *j = ctx;
    const size_t N = j->c->N, round = 2 * j->parts;
    const size_t held = j->c->mask.band ? 1 : 2; /* a band writes no mask */
    float *s = kvl_scratch(KVL_SCRATCH_CHUNK, held * j->B * N * sizeof *s);
    if (!s) return kvl_fail(KVL_ENOMEM, "kvl_attend_chunk_head: out of memory for %zu scores", j->B * N);
    for (size_t base = 0; base < j->groups; base += round) {
        const size_t near = base + p, far = base + round - 1 - p;
        if (near < j->groups) KVL_TRY(chunk_group_run(j, near, s, s + j->B * N));
        if (far < j->groups) KVL_TRY(chunk_group_run(j, far, s, s + j->B * N));
    }
    return KVL_OK;
}

int kvl_attend_chunk_head_cpu(float *o, const float *q, const float *k, const float *v, const kvl_chunk_head *c)
{
    const size_t B = KVL_CHUNK_GROUP * KVL_QUERY_BLOCK, groups = (c->S + B - 1) / B;
    const double macs = (double)c->S * (double)c->N * (double)(c->Dk + c->Dv);
    chunk_job j = {o, q, k, v, c, B, groups, kvl_parts(groups, 1, macs)};
    return kvl_run_parts_checked(chunk_part, &j, j.parts);
}
