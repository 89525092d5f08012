#include "attend_cpu.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "element.h"
#include "few_rows.h"
#include "linalg.h"
#include "threads.h"
#include "many_rows.h"
#include "scratch.h"
#include "softmax_cpu.h"
#include "status.h"

/* ---- the tiled form ---------------------------------------------------------------------------- */

/* The running state of Hq heads over some of the rows: m[Hq] the largest scaled score so far, l[Hq]
 * the sum of exp(score − m), acc[Hq][Dv] the unnormalised weighted sum of values. Every part's state
 * lives in the calling thread's scratch block (cpu/scratch.h), kept from one step to the next. */
typedef struct {
    float *s;      /* [Hq][KVL_ATTEND_TILE] scores, then weights, of one tile */
    double *m, *l; /* [Hq] */
    float *cols;   /* [3][Hq] one tile's new maxima, shifts and sums */
    float *acc;    /* [Hq][Dv]: the output buffer for part 0, its own for the others */
    float *tile;   /* [KVL_ATTEND_TILE][stride] a packed tile decoded (or a group's columns, [n][Dk + Dv] with
                      Dk + Dv ≤ stride); NULL for rows read in place */
    const float *qs; /* the queries packed for the few- or many-row kernels, by this part's thread; or NULL */
    int rc;        /* KVL_OK, or the status of a tile that could not be read */
    int empty;     /* no tile folded in yet: acc is all zeros, which rescaling leaves as they are */
} online;

/* Bytes of one part's state: m and l, the scores, its own acc (own_acc), a tile of scratch (decodes),
 * each piece aligned; 0 if that does not fit a size_t (each piece is kept under a quarter of it). */
static size_t part_bytes(size_t Hq, const kvl_attend_rows *r, int own_acc, int decodes)
{
    const size_t h = Hq ? Hq : 1, quarter = SIZE_MAX / 4 - KVL_SCRATCH_ALIGN;
    if (h > quarter / sizeof(float) / KVL_ATTEND_TILE || r->stride > quarter / sizeof(float) / KVL_ATTEND_TILE ||
        r->Dv > quarter / sizeof(float) / h)
        return 0;
    return kvl_scratch_round(2 * h * sizeof(double)) + kvl_scratch_round(3 * h * sizeof(float)) +
           kvl_scratch_round(h * KVL_ATTEND_TILE * sizeof(float)) +
           (own_acc ? kvl_scratch_round(h * r->Dv * sizeof(float)) : 0) +
           (decodes ? kvl_scratch_round(KVL_ATTEND_TILE * r->stride * sizeof(float)) : 0);
}

/* st laid out at mem (part_bytes of it), starting from nothing: acc the buffer to accumulate in, NULL
 * for one of its own at mem; sigma the sinks (NULL: none); decodes: the rows need a tile of scratch. */
static void online_init(online *st, char *mem, float *acc, size_t Hq, const kvl_attend_rows *r, const float *sigma,
                        int decodes)
{
    const size_t h = Hq ? Hq : 1;
    *st = (online){.rc = KVL_OK, .empty = 1};
    st->m = (double *)mem;
    st->l = st->m + h;
    mem += kvl_scratch_round(2 * h * sizeof(double));
    st->cols = (float *)mem;
    mem += kvl_scratch_round(3 * h * sizeof(float));
    st->s = (float *)mem;
    mem += kvl_scratch_round(h * KVL_ATTEND_TILE * sizeof(float));
    st->acc = acc;
    if (!acc) {
        st->acc = (float *)mem;
        mem += kvl_scratch_round(h * r->Dv * sizeof(float));
    }
    st->tile = decodes ? (float *)mem : NULL;
    for (size_t i = 0; i < Hq; i++) {
        st->m[i] = sigma ? sigma[i] : -INFINITY;
        st->l[i] = sigma && sigma[i] != -INFINITY ? 1.0 : 0.0; /* exp(σ − m) with m = σ */
    }
    memset(st->acc, 0, Hq * r->Dv * sizeof *st->acc);
}

/* y[n] ← a·y, vectorised for the CPU it runs on (softmax.h; each element on its own: the plain loop's values). */
static void scale_floats(float *restrict y, float a, size_t n)
{
    kvl_scale_f32(y, a, n);
}

/* Head h's tile folded in: m its new running max, sum the tile's exp(s − m), acc_h[Dv] its accumulator.
 * l and acc are rescaled from the old max to m (acc only once a tile has added to it: before, it is
 * zeros, and a 64-head window step spent 3% of its time rescaling them); while nothing is visible
 * (m = −∞) the sum (0, or NaN) is only added. */
static void online_fold(online *st, float *acc_h, size_t h, double m, float sum, size_t Dv)
{
    if (m == -INFINITY) {
        st->l[h] += sum;
        return;
    }
    const double alpha = st->m[h] == -INFINITY ? 0.0 : st->m[h] == m ? 1.0 : exp(st->m[h] - m);
    st->l[h] = st->l[h] * alpha + sum;
    st->m[h] = m;
    if (alpha != 1.0 && !st->empty) scale_floats(acc_h, (float)alpha, Dv);
}

/* m[Gq] ← the running max of heads h0 … h0 + Gq − 1 with a tile's maxima m folded in (floats, as every
 * score), and shift[Gq] what their weights are taken against: m, or +∞ for a head with nothing visible yet
 * (m = −∞), which leaves every weight 0 and a NaN NaN. */
static void running_max(const online *st, float *m, float *shift, size_t h0, size_t Gq)
{
    for (size_t r = 0; r < Gq; r++) {
        m[r] = m[r] > st->m[h0 + r] ? m[r] : (float)st->m[h0 + r];
        shift[r] = m[r] == -INFINITY ? INFINITY : m[r];
    }
}

/* For heads h0 … h0 + Gq − 1: s[Gq][n] (scaled scores) ← exp(s − m'), with m' the new running max,
 * and acc[Gq][Dv], l rescaled to m', the group's rows exponentiated in one call. A NaN score is passed
 * over by the max and turns its exp, and so l, into NaN; online_finish then gives the head NaN. */
static void online_weights(online *st, float *acc, size_t h0, size_t Gq, size_t n, size_t Dv)
{
    float *m = st->cols, *shift = m + Gq, *sum = shift + Gq;
    for (size_t r = 0; r < Gq; r++) m[r] = kvl_max_f32(st->s + r * n, n);
    running_max(st, m, shift, h0, Gq);
    kvl_softmax_exp_rows_f32(st->s, Gq, n, shift, sum);
    for (size_t r = 0; r < Gq; r++) online_fold(st, acc + r * Dv, h0 + r, m[r], sum[r], Dv);
}

/* online_weights for scores held key-major, s[n][Gq] (a head per column): the same weights and rescaling,
 * each head's maximum and sum taken down its column. */
static void online_weights_cols(online *st, float *acc, size_t h0, size_t Gq, size_t n, size_t Dv)
{
    float *m = st->cols, *shift = m + Gq, *sum = shift + Gq;
    kvl_max_cols_f32(m, st->s, n, Gq);
    running_max(st, m, shift, h0, Gq);
    kvl_exp_cols_f32(st->s, n, Gq, shift, sum);
    for (size_t r = 0; r < Gq; r++) online_fold(st, acc + r * Dv, h0 + r, m[r], sum[r], Dv);
}

/* One tile of n rows, group g's Gq heads: scaled scores against K[n][Dk] (row stride ldk), weights,
 * acc_g += P·V[n][Dv] (row stride ldv). */
static void online_group(online *st, const float *q, size_t g, size_t Gq, const float *K, size_t ldk,
                         const float *V, size_t ldv, size_t n, const kvl_attend_rows *r, float scale)
{
    const size_t Dk = r->Dk, Dv = r->Dv;
    float *acc_g = st->acc + g * Gq * Dv;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)Gq, (blasint)n, (blasint)Dk, scale,
                q + g * Gq * Dk, (blasint)Dk, K, (blasint)ldk, 0.0f, st->s, (blasint)n);
    online_weights(st, acc_g, g * Gq, Gq, n, Dv);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)Gq, (blasint)Dv, (blasint)n, 1.0f, st->s,
                (blasint)n, V, (blasint)ldv, 1.0f, acc_g, (blasint)Dv);
}

/* One tile of n whole rows (float32, row stride ld), every group. */
static void online_tile(online *st, const float *q, size_t Hq, const float *rows, size_t ld, size_t n,
                        const kvl_attend_rows *r, float scale)
{
    const size_t Gq = Hq / r->groups;
    for (size_t g = 0; g < r->groups; g++)
        online_group(st, q, g, Gq, rows + r->k_off + g * r->Dk, ld, rows + r->v_off + g * r->Dv, ld, n, r, scale);
}

/* The same tile for a group of few query rows (Gq ≤ KVL_FEW_ROWS), read where it lies by the
 * register-blocked kernels: no packed copy of K or V, and bf16 widened in registers; the queries qp
 * packed once for the step (kvl_few_pack_q). */
static void online_group_few(online *st, const float *qp, size_t g, size_t Gq, const kvl_few_tile *t, float scale)
{
    float *acc_g = st->acc + g * Gq * t->Dv;
    kvl_few_scores(st->s, qp + g * Gq * t->Dk, Gq, t, scale);
    online_weights(st, acc_g, g * Gq, Gq, t->n, t->Dv);
    kvl_few_values(acc_g, st->s, Gq, t);
}

/* The same tile for a group of many query rows, heads in the vector lanes (cpu/many_rows.h): scores
 * against the group's scaled queries qs[Dk][Gq], packed once for the step, key-major. */
static void online_group_many(online *st, const float *qs, size_t g, size_t Gq, const kvl_many_tile *t)
{
    float *acc_g = st->acc + g * Gq * t->Dv;
    kvl_many_scores(st->s, qs + g * Gq * t->Dk, Gq, t);
    online_weights_cols(st, acc_g, g * Gq, Gq, t->n, t->Dv);
    kvl_many_values(acc_g, st->s, Gq, t);
}

/* Heads h0 … h1 − 1 of part b folded into part a: the two partial softmaxes rescaled to their common max
 * (FlashDecoding's split-KV reduction). A part that saw nothing (m = −∞) weighs 0, and 0·NaN keeps a NaN. */
static void online_merge(online *a, const online *b, size_t h0, size_t h1, size_t Dv)
{
    for (size_t h = h0; h < h1; h++) {
        const double m = a->m[h] > b->m[h] ? a->m[h] : b->m[h];
        const double wa = a->m[h] == -INFINITY ? 0.0 : exp(a->m[h] - m);
        const double wb = b->m[h] == -INFINITY ? 0.0 : exp(b->m[h] - m);
        a->l[h] = wa * a->l[h] + wb * b->l[h];
        a->m[h] = m;
        float *restrict x = a->acc + h * Dv;
        const float *restrict y = b->acc + h * Dv;
        const float fa = (float)wa, fb = (float)wb;
#pragma omp simd
        for (size_t i = 0; i < Dv; i++) x[i] = fa * x[i] + fb * y[i];
    }
}

/* o[h][Dv] = acc / l for heads h0 … h1 − 1; a head with l = 0 (nothing visible) stays 0. */
static void online_finish(float *o, const online *st, size_t h0, size_t h1, size_t Dv)
{
    for (size_t h = h0; h < h1; h++) {
        const float inv = st->l[h] > 0.0 ? (float)(1.0 / st->l[h]) : 0.0f;
        if (isnan(st->l[h])) for (size_t i = 0; i < Dv; i++) o[h * Dv + i] = NAN;
        else scale_floats(o + h * Dv, inv, Dv);
    }
}

typedef struct split split;

/* How a part reads and folds in the tile of n rows from row j: KVL_OK, or KVL_EINVAL where the view could
 * not read it. */
typedef int (*tile_step)(online *st, const split *sp, size_t j, size_t n);

/* The rows split into n_parts contiguous parts, part p = rows [N·p/P, N·(p+1)/P), each a tile loop
 * (run_part) with its own state, every part's tiles read the same way. */
struct split {
    online *parts;
    size_t n_parts, Hq;
    const float *q;
    const kvl_row_tiles *rows;
    const kvl_attend_rows *r;
    float scale;
    tile_step step;
    size_t tile_rows; /* rows per tile, at most KVL_ATTEND_TILE */
    /* How each part packs the queries for the step's kernels (pack_few, pack_many; NULL: none), into its
     * `packed` bytes from qs_mem, part p's at qs_mem + p·packed. */
    void (*pack)(float *qs, const split *sp);
    char *qs_mem;
    size_t packed;
    /* Where each part's state lies (part 0's first bytes at mem, part p's at mem + first + (p − 1)·other)
     * and how it starts: part 0 accumulates into o, from the sinks; decodes: the rows need a tile. */
    char *mem;
    size_t first, other;
    float *o;
    const float *sigma;
    int decodes;
    const kvl_attend_then *then; /* NULL: nothing after a head is finished */
};

/* Heads [Hq·p/P, Hq·(p+1)/P) of every part merged into part 0 and finished, on the thread of part p: the
 * reduction split by heads, so that each thread reads half of the other parts' accumulators (a 128-row
 * V4 window step spent a tenth of its two-thread time merging on one thread). */
static void merge_part(void *ctx, size_t p)
{
    const split *sp = ctx;
    const size_t h0 = sp->Hq * p / sp->n_parts, h1 = sp->Hq * (p + 1) / sp->n_parts;
    for (size_t b = 1; b < sp->n_parts; b++) online_merge(&sp->parts[0], &sp->parts[b], h0, h1, sp->r->Dv);
    online_finish(sp->parts[0].acc, &sp->parts[0], h0, h1, sp->r->Dv);
    if (sp->then && h1 > h0) sp->then->run(sp->parts[0].acc + h0 * sp->r->Dv, h1 - h0, sp->r->Dv, sp->then->ctx);
}

/* A tile of whole rows: in place, or decoded once for every group. */
static int step_rows(online *st, const split *sp, size_t j, size_t n)
{
    const float *tile = sp->rows->tile(st->tile, sp->rows, j, n);
    if (!tile) return KVL_EINVAL;
    online_tile(st, sp->q, sp->Hq, tile, sp->r->stride, n, sp->r, sp->scale);
    return KVL_OK;
}

/* A tile a group's key and value columns at a time (a view with cols, several groups): each group
 * decodes only its own n·(Dk + Dv) values, which stay in cache for its two products, where a whole
 * decoded tile of GQA rows (256 × 2,048 floats, 2 MiB) would not. */
static int step_groups(online *st, const split *sp, size_t j, size_t n)
{
    const kvl_attend_rows *r = sp->r;
    const size_t Gq = sp->Hq / r->groups;
    for (size_t g = 0; g < r->groups; g++) {
        const float *K = sp->rows->cols(st->tile, sp->rows, j, n, r->k_off + g * r->Dk, r->Dk);
        const float *V = K ? sp->rows->cols(st->tile + n * r->Dk, sp->rows, j, n, r->v_off + g * r->Dv, r->Dv) : NULL;
        if (!V) return KVL_EINVAL;
        online_group(st, sp->q, g, Gq, K, r->Dk, V, r->Dv, n, r, sp->scale);
    }
    return KVL_OK;
}

/* Group g's keys and values in rows first … first + n − 1 of a view the few-row kernels read (float32
 * in place or bf16). */
static kvl_few_tile few_tile(const kvl_row_tiles *rows, const kvl_attend_rows *r, size_t g, size_t first, size_t n)
{
    const size_t k0 = first * r->stride + r->k_off + g * r->Dk, v0 = first * r->stride + r->v_off + g * r->Dv;
    kvl_few_tile t = {.ldk = r->stride, .ldv = r->stride, .n = n, .Dk = r->Dk, .Dv = r->Dv, .bf16 = !!rows->bf16};
    if (rows->bf16) {
        t.k = rows->bf16 + k0;
        t.v = rows->bf16 + v0;
    } else {
        const float *base = rows->tile(NULL, rows, 0, rows->N);
        t.k = base + k0;
        t.v = base + v0;
    }
    return t;
}

/* Where the kernels read next after group g's part of rows first … first + n − 1: the next group's part
 * of the same rows, or after the last group the first group's part of the next rows (none past the
 * cache), which the scores pull into cache as they near the tile's end, so that no group starts on rows
 * that miss every cache. */
static void few_chain(kvl_few_tile *t, const kvl_row_tiles *rows, const kvl_attend_rows *r, size_t g, size_t first,
                      size_t n)
{
    const size_t left = r->N - first - n;
    if (g + 1 == r->groups && left == 0) return;
    const kvl_few_tile next =
        g + 1 < r->groups ? few_tile(rows, r, g + 1, first, n) : few_tile(rows, r, 0, first + n, left);
    t->next_k = next.k;
    t->next_v = next.v;
    t->next_n = next.n;
}

/* A tile of every group through the few-row kernels. */
static int step_few(online *st, const split *sp, size_t j, size_t n)
{
    const size_t Gq = sp->Hq / sp->r->groups;
    for (size_t g = 0; g < sp->r->groups; g++) {
        kvl_few_tile t = few_tile(sp->rows, sp->r, g, j, n);
        few_chain(&t, sp->rows, sp->r, g, j, n);
        online_group_few(st, st->qs, g, Gq, &t, sp->scale);
    }
    return KVL_OK;
}

/* Part p's rows, [N·p/P, N·(p+1)/P), a tile at a time through sp->step, its state laid out and zeroed
 * and its queries packed first, on the part's own thread; a tile that cannot be read stops the part with
 * its status. On two threads of a 128-row V4 window step, zeroing every part's accumulators on the
 * calling thread took a tenth of the time (98 µs, then 91), and the second part, reading the queries
 * from the cache of the core that had packed them, ran its scores at half speed (90 µs, then 85). */
static void run_part(void *ctx, size_t p)
{
    const split *sp = ctx;
    const size_t N = sp->r->N, j1 = N * (p + 1) / sp->n_parts;
    online *st = &sp->parts[p];
    online_init(st, sp->mem + (p ? sp->first + (p - 1) * sp->other : 0), p ? NULL : sp->o, sp->Hq, sp->r,
                p ? NULL : sp->sigma, sp->decodes);
    if (sp->pack) {
        float *qs = (float *)(sp->qs_mem + p * sp->packed);
        sp->pack(qs, sp);
        st->qs = qs;
    }
    for (size_t j = N * p / sp->n_parts; j < j1 && st->rc == KVL_OK; j += sp->tile_rows) {
        st->rc = sp->step(st, sp, j, j1 - j < sp->tile_rows ? j1 - j : sp->tile_rows);
        st->empty = 0;
    }
}

/* 1 for rows the kernels read as they are stored: float32 in place, or bf16 codes widened in registers
 * (a view of another format decodes every tile into scratch). */
static int read_as_stored(const kvl_row_tiles *rows) { return rows->in_place || rows->bf16; }

/* What group 0's scores pull into cache as they read rows j … j + n − 1 (tile the first of them):
 * rows read in place, the rows KVL_MANY_AHEAD on, as many as the tile, as far as the cache reaches;
 * bf16 rows, decoded a tile at a time, the next tile's codes, so that its decode reads them from cache
 * (from memory, the decode took 6% of the MLA step over bf16). Other stores, nothing. */
static void many_ahead(kvl_many_tile *t, const kvl_row_tiles *rows, const float *tile, const kvl_attend_rows *r,
                       size_t j, size_t n)
{
    const size_t N = r->N, from = rows->in_place ? j + KVL_MANY_AHEAD : j + n;
    if (from >= N || !read_as_stored(rows)) return;
    const size_t count = N - from < n ? N - from : n;
    if (rows->in_place) {
        t->ahead = tile + KVL_MANY_AHEAD * r->stride;
        t->ahead_bytes = count * r->stride * sizeof(float);
    } else {
        t->ahead = rows->bf16 + from * r->stride;
        t->ahead_bytes = count * r->stride * sizeof(uint16_t);
    }
}

/* A tile of whole rows (in place, or decoded once) through the many-row kernels, every group. */
static int step_many(online *st, const split *sp, size_t j, size_t n)
{
    const kvl_attend_rows *r = sp->r;
    const float *tile = sp->rows->tile(st->tile, sp->rows, j, n);
    if (!tile) return KVL_EINVAL;
    const size_t Gq = sp->Hq / r->groups;
    for (size_t g = 0; g < r->groups; g++) {
        kvl_many_tile t = {tile + r->k_off + g * r->Dk, tile + r->v_off + g * r->Dv, r->stride, r->stride, n,
                           r->Dk, r->Dv, NULL, 0};
        if (g == 0) many_ahead(&t, sp->rows, tile, r, j, n);
        online_group_many(st, st->qs, g, Gq, &t);
    }
    return KVL_OK;
}

/* Rows per tile for the few-row kernels: KVL_FEW_TILE_BYTES of rows as stored, 8 to KVL_ATTEND_TILE. */
static size_t few_tile_rows(const kvl_row_tiles *rows, const kvl_attend_rows *r)
{
    const size_t row_bytes = r->stride * (rows->bf16 ? sizeof(uint16_t) : sizeof(float));
    const size_t n = KVL_FEW_TILE_BYTES / (row_bytes ? row_bytes : 1);
    return n < 8 ? 8 : n > KVL_ATTEND_TILE ? KVL_ATTEND_TILE : n;
}

/* The few-row kernels take the step where a group has few query rows, the rows are float32 in place or
 * bf16, and the CPU runs the kernels' SIMD form at these widths (elsewhere BLAS is faster). */
static int reads_few(const kvl_row_tiles *rows, const kvl_attend_rows *r, size_t Hq)
{
    const kvl_few_tile widths = {.Dk = r->Dk, .Dv = r->Dv};
    return rows && Hq / r->groups <= KVL_FEW_ROWS && read_as_stored(rows) && kvl_few_simd(&widths);
}

/* The many-row kernels take a step the few-row ones do not where the CPU runs their SIMD form for a
 * group of this many query rows and this value width (elsewhere BLAS is faster). */
static int reads_many(const kvl_row_tiles *rows, const kvl_attend_rows *r, size_t Hq)
{
    return rows && kvl_many_simd(Hq / r->groups, r->Dv);
}

/* qs[groups][Gq·Dk]: each group's queries as the few-row kernels read them over these rows. */
static void pack_few(float *qs, const split *sp)
{
    const kvl_attend_rows *r = sp->r;
    const size_t Gq = sp->Hq / r->groups;
    const kvl_few_tile widths = {.Dk = r->Dk, .Dv = r->Dv, .bf16 = !!sp->rows->bf16};
    for (size_t g = 0; g < r->groups; g++) kvl_few_pack_q(qs + g * Gq * r->Dk, sp->q + g * Gq * r->Dk, Gq, &widths);
}

/* qs[groups][Dk][Gq]: each group's queries scaled and packed for the many-row kernels. */
static void pack_many(float *qs, const split *sp)
{
    const kvl_attend_rows *r = sp->r;
    const size_t Gq = sp->Hq / r->groups;
    for (size_t g = 0; g < r->groups; g++)
        kvl_many_pack_q(qs + g * Gq * r->Dk, sp->q + g * Gq * r->Dk, Gq, r->Dk, sp->scale);
}

/* The step over the rows in parts (attend.h), its arguments checked. */
static int attend_rows_split(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows,
                             const kvl_attend_rows *r, float scale, const float *sigma, const kvl_attend_then *then,
                             const char *fn)
{
    int rc = KVL_OK;
    const size_t n_parts = kvl_parts(r->N, KVL_ATTEND_PART_ROWS, (double)r->N * (double)Hq * (double)(r->Dk + r->Dv));
    const int few = reads_few(rows, r, Hq), many = !few && reads_many(rows, r, Hq);
    const int decodes = rows && !rows->in_place && !few;
    const size_t first = part_bytes(Hq, r, 0, decodes), other = part_bytes(Hq, r, 1, decodes);
    const size_t packed = !few && !many                ? 0
                          : Hq <= SIZE_MAX / 8 / r->Dk ? kvl_scratch_round(Hq * r->Dk * sizeof(float))
                                                       : SIZE_MAX;
    if (!first || !other || other > (SIZE_MAX - first) / n_parts ||
        packed > (SIZE_MAX - first - (n_parts - 1) * other) / n_parts)
        return kvl_fail(KVL_EINVAL, "%s: %zu heads or a stride of %zu overflow a tile", fn, Hq, r->stride);
    char *mem = kvl_scratch(KVL_SCRATCH_ATTEND, n_parts * packed + first + (n_parts - 1) * other);
    online *parts = calloc(n_parts, sizeof *parts);
    if (!mem || !parts) {
        free(parts);
        return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu heads", fn, Hq);
    }
    split sp = {parts, n_parts, Hq, q, rows, r, scale,
                few ? step_few : many ? step_many : decodes && rows->cols && r->groups > 1 ? step_groups : step_rows,
                few ? few_tile_rows(rows, r) : many ? KVL_MANY_TILE : KVL_ATTEND_TILE,
                few ? pack_few : many ? pack_many : NULL, mem, packed, mem + n_parts * packed, first, other, o, sigma,
                decodes, then};
    if (Hq) kvl_run_parts(run_part, &sp, n_parts);
    for (size_t p = 0; p < n_parts && rc == KVL_OK; p++) rc = parts[p].rc;
    if (rc == KVL_OK && Hq) kvl_run_parts(merge_part, &sp, n_parts);
    free(parts);
    return rc;
}

/* The step split by heads instead (attend.h): part p takes heads [16·⌊U·p/P⌋, 16·⌊U·(p+1)/P⌋) of the
 * U = Hq/16 blocks of 16 (the many-row kernels' unit) over every row, on its own thread. */
typedef struct {
    float *o;
    const float *q;
    size_t Hq, n_parts;
    const kvl_row_tiles *rows;
    const kvl_attend_rows *r;
    float scale;
    const float *sigma;
    const kvl_attend_then *then;
    const char *fn;
} head_split;

static int heads_part(void *ctx, size_t p)
{
    const head_split *hs = ctx;
    const size_t U = hs->Hq / 16, h0 = 16 * (U * p / hs->n_parts), h1 = 16 * (U * (p + 1) / hs->n_parts);
    return attend_rows_split(hs->o + h0 * hs->r->Dv, hs->q + h0 * hs->r->Dk, h1 - h0, hs->rows, hs->r, hs->scale,
                             hs->sigma ? hs->sigma + h0 : NULL, hs->then, hs->fn);
}

/* Parts to split the heads into: more than 1 where one group of many query rows takes the many-row
 * kernels over rows that cost little to read twice (float32 in place, bf16), every part gets two blocks
 * of 16 heads or more (more than KVL_FEW_ROWS: still those kernels), and the rows hold no more values
 * than the queries and accumulators, N·stride ≤ Hq·(Dk + Dv). A split of the rows then spends more on
 * packing every part's queries, zeroing its accumulators and merging them than a split of the heads
 * spends reading every row on every thread (V4's 128-row window; from a few hundred rows on, the split by
 * rows is the faster). Packed rows are left to the split by rows, which decodes each row once. */
static size_t head_parts(const kvl_row_tiles *rows, const kvl_attend_rows *r, size_t Hq)
{
    if (!rows || !read_as_stored(rows) || r->groups != 1 || Hq % 16) return 1;
    const size_t P = kvl_parts(Hq / 16, 2, (double)r->N * (double)Hq * (double)(r->Dk + r->Dv));
    const int small = (double)r->N * (double)r->stride <= (double)Hq * (double)(r->Dk + r->Dv);
    return P > 1 && small && reads_many(rows, r, 16) ? P : 1;
}

int kvl_attend_cpu(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows, const kvl_attend_rows *r,
                   float scale, const float *sigma, const kvl_attend_then *then)
{
    const size_t P = head_parts(rows, r, Hq);
    if (P == 1) return attend_rows_split(o, q, Hq, rows, r, scale, sigma, then, "kvl_attend");
    head_split hs = {o, q, Hq, P, rows, r, scale, sigma, then, "kvl_attend"};
    return kvl_run_parts_checked(heads_part, &hs, P);
}
