/* Ceilings: what this machine gives, the yardsticks every other group is read against. A ceiling is
 * the fastest of its runs (what the machine can do; a shared machine slows some runs), where every
 * other row reports the median. A step's row is read against a short sample of its ceiling taken
 * beside each of its runs (kvb_sample_ceiling, below), and against the FMA peak (fma_peak.c), which
 * bounds every kernel however it is written.
 *
 *   scan    a read-only float sum over kvb_stream_bytes() in four streams (STREAM's "read" kernel): bytes read
 *   copy    memcpy of kvb_stream_bytes(): bytes copied (each read and written once); on 2 threads each copies
 *           its half
 *   gather  KVB_GATHER_ROWS rows of KVB_GATHER_ROW bytes (V3.2's FP8 cache row) at random positions of
 *           kvb_stream_bytes() into a packed buffer: bytes gathered (a top-k read)
 *   sgemm   OpenBLAS at a skinny decode shape: for each tile of cached rows and each group of query rows,
 *           S[Gq][tile] = Q[Gq][Dk]·K_tileᵀ and, for attention, A[Gq][Dv] += S·V_tile: the products of a
 *           tiled decode step (ref/core/attend.h) without the softmax, or of the indexer's scan
 *           (ref/core/index_scan.h) without its weighing. Five shapes:
 *             MLA    V3's absorbed step, one group of 128 query rows over [Dc | Dr] rows (Dk 576, Dv 512)
 *             GQA    the 67B's step, 8 groups of 8 query rows, each over its own 128 key and 128 value
 *                    columns of a [K | V] row of 2048
 *             V4     V4-Flash's and V4.1-Flash's attention, 64 query rows over rows of 512 that are both
 *                    key and value (window rows, picked or compressed entries)
 *             index  one token's index queries, 64 heads (V3.2, V4) or 32 (V4.1), against tiles of
 *                    KVL_INDEX_KEY_TILE 128-wide keys, one product
 *           Fewer query rows leave OpenBLAS's 16-row kernel partly idle and its packing of each tile
 *           read by fewer rows, so the thinner products run below MLA's on the same machine: each is
 *           the ceiling of the steps at its shape (the ratios to MLA's are printed). On 1 thread, and
 *           on 2 the way ref/core/attend.h threads a step: the rows halved, one single-threaded BLAS
 *           caller per half (kvl_run_parts). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attend_cpu.h"
#include "bench.h"
#include "index_scan_cpu.h"
#include "linalg.h"
#include "threads.h"
#include "rng.h"
#include "timing.h"

/* after the project's headers: cblas.h brings complex.h's macro I, a parameter name in ref/'s */
#include <cblas.h>

#define GATHER_ROWS ((size_t)1 << 16)
#define SGEMM_ROWS ((size_t)1 << 15)
#define SGEMM_PARTS 2
/* A ceiling is the fastest of more runs than a step's median, in rounds a few seconds apart: the
 * machine's best, less often missed when a neighbour takes the memory bus or the second core for a
 * while (on the README's VM one round's GQA and indexer products ran at three quarters of the next's). */
#define CEILING_REPEATS 5
#define CEILING_ROUNDS 3

typedef struct {
    const char *name, *family;
    size_t Gq, groups, Dk, Dv, stride, v_off; /* group g's keys at g·Dk, its values at v_off + g·Dv */
                                              /* Dv 0: one product, no values */
    size_t tile;                              /* cached rows a product reads */
} sgemm_shape;

static const sgemm_shape SHAPES[KVB_SGEMM_SHAPES] = {
    [KVB_SGEMM_MLA] = {"MLA H128 576/512", "MLA", 128, 1, 576, 512, 576, 0, KVL_ATTEND_TILE},
    [KVB_SGEMM_GQA] = {"GQA 8x8 128/128", "GQA", 8, 8, 128, 128, 2048, 1024, KVL_ATTEND_TILE},
    [KVB_SGEMM_V4] = {"V4 H64 512/512", "V4", 64, 1, 512, 512, 512, 0, KVL_ATTEND_TILE},
    [KVB_SGEMM_INDEX_H64] = {"index H64 128", "index H64", 64, 1, 128, 0, 128, 0, KVL_INDEX_KEY_TILE},
    [KVB_SGEMM_INDEX_H32] = {"index H32 128", "index H32", 32, 1, 128, 0, 128, 0, KVL_INDEX_KEY_TILE},
};
/* The largest query block, accumulator and score tile of any shape. */
#define SGEMM_MOST_Q (128 * 576)
#define SGEMM_MOST_S (64 * KVL_INDEX_KEY_TILE)

kvb_sgemm_shape kvb_index_shape(size_t n_heads)
{
    for (int k = KVB_SGEMM_INDEX_H64; k <= KVB_SGEMM_INDEX_H32; k++)
        if (SHAPES[k].Gq == n_heads) return (kvb_sgemm_shape)k;
    return KVB_SGEMM_MLA;
}

typedef struct {
    uint8_t *dst;
    const uint8_t *src;
    size_t bytes, parts;
} copy_job;

/* Part p of `parts`: its contiguous share of the bytes, on its own thread. */
static void copy_part(void *ctx, size_t p)
{
    const copy_job *j = ctx;
    const size_t first = j->bytes * p / j->parts;
    memcpy(j->dst + first, j->src + first, j->bytes * (p + 1) / j->parts - first);
}

static void run_copy(void *ctx)
{
    copy_job *j = ctx;
    kvl_run_parts(copy_part, j, j->parts);
}

typedef struct {
    const float *x;
    size_t n, parts;
    volatile float sum[2];
} scan_job;

/* The four quarters of x read side by side, each into its own 4-wide sums (SSE, every x86-64 has it), so
 * the adds keep up with memory and four streams are in flight. One stream leaves memory idle part of the
 * time: on the 2-core VM of the README's table one stream read 10.9 GB/s and four 16.4, and OpenBLAS's
 * gemv over a decode step's weight matrices (many rows at once) read 13.5, past what one stream gives.
 * On two threads each reads its half so: a weight stream split over both cores reads faster than one. */
typedef float f32x4 __attribute__((vector_size(16)));

static float scan_sum(const float *x_all, size_t n)
{
    const size_t q = n / 4 - n / 4 % 8;
    const float *x[4] = {x_all, x_all + q, x_all + 2 * q, x_all + 3 * q};
    f32x4 a = {0}, b = {0}, c = {0}, d = {0};
    for (size_t i = 0; i < q; i += 8) {
        f32x4 v[8];
        for (size_t k = 0; k < 4; k++) memcpy(v + 2 * k, x[k] + i, 2 * sizeof *v);
        a += v[0] + v[1];
        b += v[2] + v[3];
        c += v[4] + v[5];
        d += v[6] + v[7];
    }
    const f32x4 t = a + b + c + d;
    return t[0] + t[1] + t[2] + t[3];
}

/* Part p of `parts`: its contiguous share of x, on its own thread. */
static void scan_part(void *ctx, size_t p)
{
    scan_job *j = ctx;
    j->sum[p] = scan_sum(j->x + j->n * p / j->parts, j->n / j->parts);
}

static void run_scan(void *ctx)
{
    scan_job *j = ctx;
    kvl_run_parts(scan_part, j, j->parts);
}

typedef struct {
    uint8_t *dst;
    const uint8_t *src;
    const size_t *pick; /* [n] row numbers */
    size_t n;
} gather_job;

static void run_gather(void *ctx)
{
    gather_job *j = ctx;
    for (size_t i = 0; i < j->n; i++)
        memcpy(j->dst + i * KVB_GATHER_ROW, j->src + j->pick[i] * KVB_GATHER_ROW, KVB_GATHER_ROW);
}

typedef struct {
    const sgemm_shape *sh;
    const float *q, *rows;
    float *s[SGEMM_PARTS], *acc[SGEMM_PARTS];
    size_t parts, n_rows;
} sgemm_job;

/* Part p: rows [R·p/P, R·(p+1)/P), tile by tile, every group. */
static void sgemm_part(void *ctx, size_t p)
{
    const sgemm_job *j = ctx;
    const sgemm_shape *sh = j->sh;
    const int n = (int)sh->tile;
    const size_t end = j->n_rows * (p + 1) / j->parts;
    for (size_t t = j->n_rows * p / j->parts; t < end; t += sh->tile) {
        const float *tile = j->rows + t * sh->stride;
        for (size_t g = 0; g < sh->groups; g++) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)sh->Gq, n, (int)sh->Dk, 1.0f,
                        j->q + g * sh->Gq * sh->Dk, (int)sh->Dk, tile + g * sh->Dk, (int)sh->stride, 0.0f, j->s[p], n);
            if (sh->Dv)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)sh->Gq, (int)sh->Dv, n, 1.0f, j->s[p], n,
                            tile + sh->v_off + g * sh->Dv, (int)sh->stride, 1.0f, j->acc[p] + g * sh->Gq * sh->Dv,
                            (int)sh->Dv);
        }
    }
}

static void run_sgemm(void *ctx)
{
    sgemm_job *j = ctx;
    kvl_run_parts(sgemm_part, j, j->parts);
}

static double sgemm_gflop_over(const sgemm_shape *sh, size_t n_rows)
{
    return 2.0 * (double)(sh->Gq * sh->groups) * (double)n_rows * (double)(sh->Dk + sh->Dv) * 1e-9;
}

static double sgemm_gflop(const sgemm_shape *sh) { return sgemm_gflop_over(sh, SGEMM_ROWS); }

static double sgemm_mib(const sgemm_shape *sh) { return (double)SGEMM_ROWS * (double)sh->stride * 4 / KVB_MIB; }

/* ---- the streams' size ---------------------------------------------------------------------------- */

/* The largest cache sysfs lists for CPU 0 (bytes), else what the C library reports for L3, else 0. */
static size_t largest_cache(void)
{
    size_t most = 0;
    for (int i = 0; i < 16; i++) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f) break;
        unsigned long long n = 0;
        char unit = 0;
        if (fscanf(f, "%llu%c", &n, &unit) >= 1) {
            const unsigned long long bytes = n << (unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0);
            if (bytes > most) most = (size_t)bytes;
        }
        fclose(f);
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (!most && l3 > 0) most = (size_t)l3;
#endif
    return most;
}

#define STREAM_LEAST (256 * KVB_MIB)
#define STREAM_STEP (64 * KVB_MIB)

size_t kvb_stream_bytes(void)
{
    static size_t bytes;
    if (!bytes) {
        const size_t twice = 2 * largest_cache();
        bytes = twice > STREAM_LEAST ? (twice + STREAM_STEP - 1) / STREAM_STEP * STREAM_STEP : STREAM_LEAST;
    }
    return bytes;
}

/* One measurement of every ceiling: the rates and the times they came from. */
typedef struct {
    kvb_ceiling_set rate;
    kvb_time scan[2], copy[2], gather, sgemm[KVB_SGEMM_SHAPES][2], fma[2];
} measurement;

static measurement first;
static int have_first;

/* m = every ceiling, measured now; 1 when the buffers do not fit. */
static int measure(measurement *m)
{
    const size_t bytes = kvb_stream_bytes(), rows = bytes / KVB_GATHER_ROW;
    uint8_t *src = malloc(bytes), *dst = malloc(bytes);
    size_t *pick = malloc(GATHER_ROWS * sizeof *pick);
    const size_t most = SGEMM_MOST_Q;
    float *q = malloc(most * sizeof *q), *s[SGEMM_PARTS], *acc[SGEMM_PARTS];
    int ok = src && dst && pick && q;
    for (size_t p = 0; p < SGEMM_PARTS; p++) {
        s[p] = malloc(SGEMM_MOST_S * sizeof *s[p]);
        acc[p] = calloc(most, sizeof *acc[p]);
        ok = ok && s[p] && acc[p];
    }
    if (ok) {
        kvl_rng rng;
        kvl_rng_seed(&rng, 3);
        kvl_rng_uniform_f32(&rng, (float *)src, bytes / sizeof(float), -1.0, 1.0);
        kvl_rng_uniform_f32(&rng, q, most, -1.0, 1.0);
        for (size_t i = 0; i < GATHER_ROWS; i++) pick[i] = kvl_rng_next_u64(&rng) % rows;
        for (int th = 0; th < 2; th++) {
            kvb_progress("ceilings: read-only scan of %zu MiB, %d thread(s)", bytes / KVB_MIB, th + 1);
            kvb_set_threads(th + 1);
            scan_job job = {(const float *)src, bytes / sizeof(float), (size_t)th + 1, {0, 0}};
            m->scan[th] = kvb_time_runs(run_scan, &job, CEILING_REPEATS);
            kvb_progress("ceilings: memcpy of %zu MiB, %d thread(s)", bytes / KVB_MIB, th + 1);
            m->copy[th] = kvb_time_runs(run_copy, &(copy_job){dst, src, bytes, (size_t)th + 1}, CEILING_REPEATS);
        }
        kvb_set_threads(1);
        kvb_progress("ceilings: random gather of %zu rows of %d bytes", GATHER_ROWS, KVB_GATHER_ROW);
        m->gather = kvb_time_runs(run_gather, &(gather_job){dst, src, pick, GATHER_ROWS}, CEILING_REPEATS);
        m->rate = (kvb_ceiling_set){.scan_gbps = {kvb_gbps(bytes, m->scan[0].min), kvb_gbps(bytes, m->scan[1].min)},
                                    .copy_gbps = {kvb_gbps(bytes, m->copy[0].min), kvb_gbps(bytes, m->copy[1].min)},
                                    .gather_gbps = kvb_gbps(GATHER_ROWS * KVB_GATHER_ROW, m->gather.min)};
        for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++)
            for (int th = 0; th < 2; th++) {
                kvb_progress("ceilings: sgemm at the %s decode shape, %d thread(s)", SHAPES[k].name, th + 1);
                kvb_set_threads(th + 1);
                sgemm_job job = {&SHAPES[k], q, (const float *)src, {s[0], s[1]}, {acc[0], acc[1]},
                                 kvl_parts(SGEMM_ROWS, KVL_ATTEND_PART_ROWS, sgemm_gflop(&SHAPES[k]) * 5e8),
                                 SGEMM_ROWS};
                m->sgemm[k][th] = kvb_time_runs(run_sgemm, &job, CEILING_REPEATS);
                m->rate.sgemm_gflops[k][th] = sgemm_gflop(&SHAPES[k]) / m->sgemm[k][th].min;
            }
        for (int th = 0; th < 2; th++) {
            kvb_progress("ceilings: %s peak, %d thread(s)", kvb_fma_isa(), th + 1);
            kvb_set_threads(th + 1);
            m->fma[th] = kvb_time_fma(th + 1, CEILING_REPEATS);
            m->rate.fma_gflops[th] = kvb_fma_gflop(th + 1) / m->fma[th].min;
        }
        kvb_set_threads(1);
    }
    free(src);
    free(dst);
    free(pick);
    free(q);
    for (size_t p = 0; p < SGEMM_PARTS; p++) {
        free(s[p]);
        free(acc[p]);
    }
    return ok ? 0 : 1;
}

/* m ← the faster of m and n, ceiling by ceiling. */
static void keep_fastest(measurement *m, const measurement *n)
{
    for (int th = 0; th < 2; th++) {
        if (n->scan[th].min < m->scan[th].min) m->scan[th] = n->scan[th], m->rate.scan_gbps[th] = n->rate.scan_gbps[th];
        if (n->copy[th].min < m->copy[th].min) m->copy[th] = n->copy[th], m->rate.copy_gbps[th] = n->rate.copy_gbps[th];
    }
    if (n->gather.min < m->gather.min) m->gather = n->gather, m->rate.gather_gbps = n->rate.gather_gbps;
    for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++)
        for (int th = 0; th < 2; th++)
            if (n->sgemm[k][th].min < m->sgemm[k][th].min)
                m->sgemm[k][th] = n->sgemm[k][th], m->rate.sgemm_gflops[k][th] = n->rate.sgemm_gflops[k][th];
    for (int th = 0; th < 2; th++)
        if (n->fma[th].min < m->fma[th].min) m->fma[th] = n->fma[th], m->rate.fma_gflops[th] = n->rate.fma_gflops[th];
}

const kvb_ceiling_set *kvb_ceilings(void)
{
    if (have_first) return &first.rate;
    if (measure(&first) != 0) return NULL;
    for (int r = 1; r < CEILING_ROUNDS; r++) {
        measurement next;
        if (measure(&next) != 0) return NULL;
        keep_fastest(&first, &next);
    }
    have_first = 1;
    return &first.rate;
}

void kvb_set_threads(int n) { kvl_set_threads(n); }

/* The samples' buffers, kept for the run: rows for the sgemm, the scan, the copy and the gather, the
 * copy's and the gather's destination (each kvb_stream_bytes(), read and written a 64 MiB window at a
 * time, the next window each sample, so that every sample reads past the last-level cache), the
 * gather's random row numbers, the query block, and each part's scores and accumulator. */
#define SAMPLE_ROWS (SGEMM_ROWS / 8)
#define SAMPLE_BYTES STREAM_STEP
#define SAMPLE_GATHER_ROWS (GATHER_ROWS / 8)
static struct {
    float *rows, *q, *s[SGEMM_PARTS], *acc[SGEMM_PARTS];
    uint8_t *copy; /* the copy's destination */
    size_t *pick;  /* [SAMPLE_GATHER_ROWS] */
    size_t window; /* the next sample's 64 MiB window */
} sample;

/* The offset of the next sample's window in the sample buffers (the scan and copy samples take turns). */
static size_t next_window(void)
{
    const size_t windows = kvb_stream_bytes() / SAMPLE_BYTES;
    return (sample.window++ % windows) * SAMPLE_BYTES;
}

static int sample_buffers(void)
{
    if (sample.rows) return 0;
    const size_t bytes = kvb_stream_bytes();
    sample.rows = malloc(bytes);
    sample.q = malloc(SGEMM_MOST_Q * sizeof *sample.q);
    sample.copy = malloc(bytes);
    sample.pick = malloc(SAMPLE_GATHER_ROWS * sizeof *sample.pick);
    int ok = sample.rows && sample.q && sample.copy && sample.pick;
    for (size_t p = 0; p < SGEMM_PARTS; p++) {
        sample.s[p] = calloc(SGEMM_MOST_S, sizeof *sample.s[p]);
        sample.acc[p] = calloc(SGEMM_MOST_Q, sizeof *sample.acc[p]);
        ok = ok && sample.s[p] && sample.acc[p];
    }
    if (ok) {
        kvl_rng rng;
        kvl_rng_seed(&rng, 5);
        kvl_rng_uniform_f32(&rng, sample.rows, bytes / sizeof(float), -1.0, 1.0);
        kvl_rng_uniform_f32(&rng, sample.q, SGEMM_MOST_Q, -1.0, 1.0);
        memset(sample.copy, 0, bytes); /* faults its pages in */
        for (size_t i = 0; i < SAMPLE_GATHER_ROWS; i++)
            sample.pick[i] = kvl_rng_next_u64(&rng) % (bytes / KVB_GATHER_ROW);
        return 0;
    }
    free(sample.pick);
    free(sample.rows);
    free(sample.q);
    free(sample.copy);
    for (size_t p = 0; p < SGEMM_PARTS; p++) {
        free(sample.s[p]);
        free(sample.acc[p]);
    }
    sample = (__typeof__(sample)){0};
    return 1;
}

double kvb_sample_ceiling(kvb_bounding b, int threads, double *stored)
{
    const kvb_ceiling_set *c = kvb_ceilings();
    *stored = 0;
    if (!c || sample_buffers()) return 0;
    const int th = threads > 1;
    double start, took, work;
    if (b.kind == KVB_BOUND_SCAN) {
        *stored = c->scan_gbps[th];
        scan_job job = {sample.rows + next_window() / sizeof(float), SAMPLE_BYTES / sizeof(float), (size_t)th + 1,
                        {0, 0}};
        start = kvl_seconds();
        run_scan(&job);
        took = kvl_seconds() - start;
        work = (double)SAMPLE_BYTES * 1e-9;
    } else if (b.kind == KVB_BOUND_GATHER) {
        *stored = c->gather_gbps;
        gather_job job = {sample.copy, (const uint8_t *)sample.rows, sample.pick, SAMPLE_GATHER_ROWS};
        start = kvl_seconds();
        run_gather(&job);
        took = kvl_seconds() - start;
        work = (double)(SAMPLE_GATHER_ROWS * KVB_GATHER_ROW) * 1e-9;
    } else if (b.kind == KVB_BOUND_COPY) {
        *stored = c->copy_gbps[th];
        const size_t at = next_window();
        copy_job job = {sample.copy + at, (const uint8_t *)sample.rows + at, SAMPLE_BYTES, (size_t)th + 1};
        start = kvl_seconds();
        run_copy(&job);
        took = kvl_seconds() - start;
        work = (double)SAMPLE_BYTES * 1e-9;
    } else {
        const sgemm_shape *sh = &SHAPES[b.shape];
        *stored = c->sgemm_gflops[b.shape][th];
        work = sgemm_gflop_over(sh, SAMPLE_ROWS);
        sgemm_job job = {sh, sample.q, sample.rows, {sample.s[0], sample.s[1]}, {sample.acc[0], sample.acc[1]},
                         th ? kvl_parts(SAMPLE_ROWS, KVL_ATTEND_PART_ROWS, work * 5e8) : 1, SAMPLE_ROWS};
        start = kvl_seconds();
        run_sgemm(&job);
        took = kvl_seconds() - start;
    }
    return work / took;
}

static const char *const SCAN_ROW[2] = {"read-only scan", "read-only scan, 2 threads"};
static const char *const COPY_ROW[2] = {"memcpy", "memcpy, 2 threads"};

/* "AVX2+FMA peak, 2 threads": the FMA peak's row on th + 1 threads */
static void fma_row(char *what, size_t cap, int th)
{
    snprintf(what, cap, "%s peak, %d thread%s", kvb_fma_isa(), th + 1, th ? "s" : "");
}

int kvb_group_ceilings(void)
{
    const kvb_ceiling_set *c = kvb_ceilings();
    if (!c) return 1;
    const double mib = (double)kvb_stream_bytes() / KVB_MIB;
    for (int th = 0; th < 2; th++)
        kvb_print_row(&(kvb_row){"ceilings", SCAN_ROW[th], mib, first.scan[th].min, c->scan_gbps[th], "GB/s", 0, 0,
                                 first.scan[th].min, first.scan[th].max, 0});
    for (int th = 0; th < 2; th++)
        kvb_print_row(&(kvb_row){"ceilings", COPY_ROW[th], mib, first.copy[th].min, c->copy_gbps[th], "GB/s", 0, 0,
                                 first.copy[th].min, first.copy[th].max, 0});
    kvb_print_row(&(kvb_row){"ceilings", "random 656-byte row gather", (double)GATHER_ROWS * KVB_GATHER_ROW / KVB_MIB,
                             first.gather.min, c->gather_gbps, "GB/s", 0, 0, first.gather.min, first.gather.max, 0});
    for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++) {
        const sgemm_shape *sh = &SHAPES[k];
        char what[64];
        for (int th = 0; th < 2; th++) {
            snprintf(what, sizeof what, "sgemm %s, %d thread%s", sh->name, th + 1, th ? "s" : "");
            kvb_print_row(&(kvb_row){"ceilings", what, sgemm_mib(sh), first.sgemm[k][th].min, c->sgemm_gflops[k][th],
                                     "GF/s", 0, 0, first.sgemm[k][th].min, first.sgemm[k][th].max, sgemm_gflop(sh)});
        }
        /* the machine's own 2-thread speedup: below 1.6 of the ideal 2, the second core was busy */
        snprintf(what, sizeof what, "sgemm %s, 2 threads / 1", sh->family);
        kvb_print_row(&(kvb_row){"ceilings", what, sgemm_mib(sh), first.sgemm[k][1].min,
                                 c->sgemm_gflops[k][1] / c->sgemm_gflops[k][0], "x", 2.0, 0.8, 0, 0, 0});
    }
    for (int th = 0; th < 2; th++) {
        char what[64];
        fma_row(what, sizeof what, th);
        kvb_print_row(&(kvb_row){"ceilings", what, 0, first.fma[th].min, c->fma_gflops[th], "GF/s", 0, 0,
                                 first.fma[th].min, first.fma[th].max, kvb_fma_gflop(th + 1)});
    }
    /* what share of the peak OpenBLAS's products reach at each shape */
    for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++)
        for (int th = 0; th < 2; th++) {
            char what[64];
            snprintf(what, sizeof what, "sgemm %s / peak, %dT", SHAPES[k].family, th + 1);
            kvb_print_row(&(kvb_row){"ceilings", what, sgemm_mib(&SHAPES[k]), first.sgemm[k][th].min,
                                     c->sgemm_gflops[k][th] / c->fma_gflops[th], "x", 0, 0, 0, 0, 0});
        }
    /* how far below MLA's products the thinner ones run on this machine */
    for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++) {
        if (k == KVB_SGEMM_MLA) continue;
        char what[64];
        snprintf(what, sizeof what, "sgemm %s / MLA, 1 thread", SHAPES[k].family);
        kvb_print_row(&(kvb_row){"ceilings", what, sgemm_mib(&SHAPES[k]), first.sgemm[k][0].min,
                                 c->sgemm_gflops[k][0] / c->sgemm_gflops[KVB_SGEMM_MLA][0], "x", 0, 0, 0, 0, 0});
    }
    return 0;
}

/* Every ceiling measured again, each row read against the first measurement: a ratio far from 1 says
 * the machine changed during the run (a neighbour came or went), and so how far to trust the rows
 * between. */
int kvb_group_recheck(void)
{
    const kvb_ceiling_set *c = kvb_ceilings();
    measurement again;
    if (!c || measure(&again) != 0) return 1;
    const double mib = (double)kvb_stream_bytes() / KVB_MIB;
    for (int th = 0; th < 2; th++)
        kvb_print_row(&(kvb_row){"recheck", SCAN_ROW[th], mib, again.scan[th].min, again.rate.scan_gbps[th], "GB/s",
                                 c->scan_gbps[th], 0, again.scan[th].min, again.scan[th].max, 0});
    for (int th = 0; th < 2; th++)
        kvb_print_row(&(kvb_row){"recheck", COPY_ROW[th], mib, again.copy[th].min, again.rate.copy_gbps[th], "GB/s",
                                 c->copy_gbps[th], 0, again.copy[th].min, again.copy[th].max, 0});
    kvb_print_row(&(kvb_row){"recheck", "random 656-byte row gather", (double)GATHER_ROWS * KVB_GATHER_ROW / KVB_MIB,
                             again.gather.min, again.rate.gather_gbps, "GB/s", c->gather_gbps, 0, again.gather.min,
                             again.gather.max, 0});
    for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++)
        for (int th = 0; th < 2; th++) {
            char what[64];
            snprintf(what, sizeof what, "sgemm %s, %d thread%s", SHAPES[k].name, th + 1, th ? "s" : "");
            kvb_print_row(&(kvb_row){"recheck", what, sgemm_mib(&SHAPES[k]), again.sgemm[k][th].min,
                                     again.rate.sgemm_gflops[k][th], "GF/s", c->sgemm_gflops[k][th], 0,
                                     again.sgemm[k][th].min, again.sgemm[k][th].max, sgemm_gflop(&SHAPES[k])});
        }
    for (int th = 0; th < 2; th++) {
        char what[64];
        fma_row(what, sizeof what, th);
        kvb_print_row(&(kvb_row){"recheck", what, 0, again.fma[th].min, again.rate.fma_gflops[th], "GF/s",
                                 c->fma_gflops[th], 0, again.fma[th].min, again.fma[th].max, kvb_fma_gflop(th + 1)});
    }
    return 0;
}
