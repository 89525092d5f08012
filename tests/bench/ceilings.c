/* Ceilings: what this machine gives, the yardsticks every other group is read against. A ceiling is
 * the fastest of its runs (what the machine can do; a shared machine slows some runs), where every
 * other row reports the median.
 *
 *   scan    a read-only float sum over KVB_STREAM_BYTES (STREAM's "read" kernel): bytes read
 *   copy    memcpy of KVB_STREAM_BYTES: bytes copied (each read and written once)
 *   gather  KVB_GATHER_ROWS rows of KVB_GATHER_ROW bytes (V3.2's FP8 cache row) at random positions of
 *           KVB_STREAM_BYTES into a packed buffer: bytes gathered (a top-k read)
 *   sgemm   OpenBLAS at the skinny decode shape: for each tile of KVL_ATTEND_TILE rows of
 *           SGEMM_ROWS cached rows [Dc+Dr], S[H][tile] = Q[H][Dc+Dr]·K_tileᵀ and A[H][Dc] += S·V_tile,
 *           the two products of a tiled MLA decode step at V3's geometry without the softmax
 *           (H 128, Dc 512, Dr 64); on 1 and on 2 threads */
#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "bench.h"
#include "rng.h"

#define GATHER_ROWS ((size_t)1 << 16)
#define SGEMM_H 128
#define SGEMM_DC 512
#define SGEMM_DW 576
#define SGEMM_ROWS ((size_t)1 << 15)

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} copy_job;

static void run_copy(void *ctx)
{
    copy_job *j = ctx;
    memcpy(j->dst, j->src, j->bytes);
}

double kvb_memcpy_seconds(void *dst, const void *src, size_t bytes)
{
    copy_job j = {dst, src, bytes};
    return kvb_median_seconds(run_copy, &j);
}

typedef struct {
    const float *x;
    size_t n;
    volatile float sum;
} scan_job;

/* Four independent 4-wide sums (SSE, every x86-64 has it), so that the adds keep up with memory rather
 * than wait on each other. */
typedef float f32x4 __attribute__((vector_size(16)));

static void run_scan(void *ctx)
{
    scan_job *j = ctx;
    const float *x = j->x;
    const size_t n = j->n - j->n % 16;
    f32x4 a = {0}, b = {0}, c = {0}, d = {0};
    for (size_t i = 0; i < n; i += 16) {
        f32x4 v[4];
        memcpy(v, x + i, sizeof v);
        a += v[0];
        b += v[1];
        c += v[2];
        d += v[3];
    }
    const f32x4 t = a + b + c + d;
    j->sum = t[0] + t[1] + t[2] + t[3];
}

typedef struct {
    uint8_t *dst;
    const uint8_t *src;
    const size_t *pick; /* [GATHER_ROWS] row numbers */
} gather_job;

static void run_gather(void *ctx)
{
    gather_job *j = ctx;
    for (size_t i = 0; i < GATHER_ROWS; i++)
        memcpy(j->dst + i * KVB_GATHER_ROW, j->src + j->pick[i] * KVB_GATHER_ROW, KVB_GATHER_ROW);
}

typedef struct {
    const float *q, *rows;
    float *s, *acc;
} sgemm_job;

static void run_sgemm(void *ctx)
{
    sgemm_job *j = ctx;
    for (size_t t = 0; t < SGEMM_ROWS; t += KVL_ATTEND_TILE) {
        const float *tile = j->rows + t * SGEMM_DW;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, SGEMM_H, KVL_ATTEND_TILE, SGEMM_DW, 1.0f, j->q, SGEMM_DW,
                    tile, SGEMM_DW, 0.0f, j->s, KVL_ATTEND_TILE);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, SGEMM_H, SGEMM_DC, KVL_ATTEND_TILE, 1.0f, j->s,
                    KVL_ATTEND_TILE, tile, SGEMM_DW, 1.0f, j->acc, SGEMM_DC);
    }
}

static double sgemm_gflop(void) { return 2.0 * SGEMM_H * (double)SGEMM_ROWS * (SGEMM_DW + SGEMM_DC) * 1e-9; }

static kvb_ceiling_set measured;
static kvb_time scan_t, copy_t, gather_t, sgemm_t[2];
static int have_ceilings;

/* Every buffer the four measurements need, or none. */
static int measure(void)
{
    const size_t bytes = KVB_STREAM_BYTES, rows = bytes / KVB_GATHER_ROW;
    uint8_t *src = malloc(bytes), *dst = malloc(bytes);
    size_t *pick = malloc(GATHER_ROWS * sizeof *pick);
    float *q = malloc(SGEMM_H * SGEMM_DW * sizeof *q), *s = malloc(SGEMM_H * KVL_ATTEND_TILE * sizeof *s);
    float *acc = calloc(SGEMM_H * SGEMM_DC, sizeof *acc);
    int ok = src && dst && pick && q && s && acc;
    if (ok) {
        kvl_rng rng;
        kvl_rng_seed(&rng, 3);
        kvl_rng_uniform_f32(&rng, (float *)src, bytes / sizeof(float), -1.0, 1.0);
        kvl_rng_uniform_f32(&rng, q, SGEMM_H * SGEMM_DW, -1.0, 1.0);
        for (size_t i = 0; i < GATHER_ROWS; i++) pick[i] = kvl_rng_next_u64(&rng) % rows;
        kvb_progress("ceilings: read-only scan of %zu MiB", bytes / KVB_MIB);
        scan_t = kvb_time_runs(run_scan, &(scan_job){(const float *)src, bytes / sizeof(float), 0}, KVB_REPEATS);
        kvb_progress("ceilings: memcpy of %zu MiB", bytes / KVB_MIB);
        copy_t = kvb_time_runs(run_copy, &(copy_job){dst, src, bytes}, KVB_REPEATS);
        kvb_progress("ceilings: random gather of %zu rows of %d bytes", GATHER_ROWS, KVB_GATHER_ROW);
        gather_t = kvb_time_runs(run_gather, &(gather_job){dst, src, pick}, KVB_REPEATS);
        for (int th = 0; th < 2; th++) {
            kvb_progress("ceilings: sgemm at the decode shape, %d thread(s)", th + 1);
            kvb_set_threads(th + 1);
            sgemm_t[th] = kvb_time_runs(run_sgemm, &(sgemm_job){q, (const float *)src, s, acc}, KVB_REPEATS);
        }
        kvb_set_threads(1);
        measured = (kvb_ceiling_set){.scan_gbps = kvb_gbps(bytes, scan_t.min),
                                     .copy_gbps = kvb_gbps(bytes, copy_t.min),
                                     .gather_gbps = kvb_gbps(GATHER_ROWS * KVB_GATHER_ROW, gather_t.min),
                                     .sgemm_gflops = {sgemm_gflop() / sgemm_t[0].min,
                                                      sgemm_gflop() / sgemm_t[1].min}};
        have_ceilings = 1;
    }
    free(src);
    free(dst);
    free(pick);
    free(q);
    free(s);
    free(acc);
    return ok ? 0 : 1;
}

const kvb_ceiling_set *kvb_ceilings(void)
{
    if (!have_ceilings && measure() != 0) return NULL;
    return &measured;
}

void kvb_set_threads(int n) { openblas_set_num_threads(n); }

double kvb_roofline_gflops(double flop, double bytes, int threads, int *compute)
{
    const kvb_ceiling_set *c = kvb_ceilings();
    const double sgemm = c->sgemm_gflops[threads > 1], memory = c->scan_gbps * flop / bytes;
    *compute = sgemm <= memory;
    return *compute ? sgemm : memory;
}

int kvb_group_ceilings(void)
{
    const kvb_ceiling_set *c = kvb_ceilings();
    if (!c) return 1;
    const double mib = (double)KVB_STREAM_BYTES / KVB_MIB, tile_mib = (double)SGEMM_ROWS * SGEMM_DW * 4 / KVB_MIB;
    kvb_print_row(&(kvb_row){"ceilings", "read-only scan", mib, scan_t.min, c->scan_gbps, "GB/s", 0, 0,
                             scan_t.min, scan_t.max, 0});
    kvb_print_row(&(kvb_row){"ceilings", "memcpy", mib, copy_t.min, c->copy_gbps, "GB/s", 0, 0, copy_t.min,
                             copy_t.max, 0});
    kvb_print_row(&(kvb_row){"ceilings", "random 656-byte row gather", (double)GATHER_ROWS * KVB_GATHER_ROW / KVB_MIB,
                             gather_t.min, c->gather_gbps, "GB/s", 0, 0, gather_t.min, gather_t.max, 0});
    for (int th = 0; th < 2; th++)
        kvb_print_row(&(kvb_row){"ceilings", th ? "sgemm H128 576/512, 2 threads" : "sgemm H128 576/512, 1 thread",
                                 tile_mib, sgemm_t[th].min, c->sgemm_gflops[th], "GF/s", 0, 0, sgemm_t[th].min,
                                 sgemm_t[th].max, sgemm_gflop()});
    /* the machine's own 2-thread speedup: below 1.6 of the ideal 2, the second core was busy */
    kvb_print_row(&(kvb_row){"ceilings", "sgemm 2 threads / 1 thread", tile_mib, sgemm_t[1].min,
                             c->sgemm_gflops[1] / c->sgemm_gflops[0], "x", 2.0, 0.8, 0, 0, 0});
    return 0;
}
