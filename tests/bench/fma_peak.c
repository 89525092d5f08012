/* The machine's floating-point peak: what no float32 kernel on this CPU can exceed, the yardstick
 * beside the sgemm (which is itself a kernel, and reads below the peak by its packing and its edges).
 *
 * FMA_ACCS independent accumulators each take acc ← acc·a + b in a loop, in the widest vectors the CPU
 * runs, chosen at run time so that the same binary runs on every x86-64: 512-bit fused multiply-adds
 * where it has AVX-512, 256-bit where it has AVX2 and FMA, else 128-bit SSE multiplies and adds. (A
 * core with one 512-bit FMA port reads the same at 512 bits as at 256; one with two reads twice as
 * fast, and OpenBLAS's AVX-512 kernels reach it, so a 256-bit peak would sit below the sgemm.) A fused
 * multiply-add has a latency of 4 or 5 cycles and two issue ports on current x86 cores, so fewer than
 * about ten chains leave a port idle waiting on a result; twelve cover both with room to spare. a < 1
 * and b > 0 keep every accumulator near b / (1 − a), far from denormals and overflow, which would slow
 * a core. */
#include <immintrin.h>
#include <stdint.h>

#include "bench.h"
#include "linalg.h"
#include "timing.h"

#define FMA_ACCS 12 /* also the unroll pragmas' count, which take no macro */
#define FMA_A 0.99999f
#define FMA_B 1e-6f

/* 16 lanes · 2 flop per fused multiply-add · FMA_ACCS accumulators, per iteration */
__attribute__((target("avx512f"))) static float chains_avx512(size_t iters)
{
    const __m512 a = _mm512_set1_ps(FMA_A), b = _mm512_set1_ps(FMA_B);
    __m512 acc[FMA_ACCS];
#pragma GCC unroll 12
    for (int k = 0; k < FMA_ACCS; k++) acc[k] = _mm512_set1_ps((float)k);
    for (size_t i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int k = 0; k < FMA_ACCS; k++) acc[k] = _mm512_fmadd_ps(acc[k], a, b);
    __m512 sum = acc[0];
#pragma GCC unroll 12
    for (int k = 1; k < FMA_ACCS; k++) sum = _mm512_add_ps(sum, acc[k]);
    float lanes[16];
    _mm512_storeu_ps(lanes, sum);
    return lanes[0] + lanes[15];
}

/* 8 lanes · 2 flop per fused multiply-add · FMA_ACCS accumulators, per iteration */
__attribute__((target("avx2,fma"))) static float chains_avx2(size_t iters)
{
    const __m256 a = _mm256_set1_ps(FMA_A), b = _mm256_set1_ps(FMA_B);
    __m256 acc[FMA_ACCS];
#pragma GCC unroll 12
    for (int k = 0; k < FMA_ACCS; k++) acc[k] = _mm256_set1_ps((float)k);
    for (size_t i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int k = 0; k < FMA_ACCS; k++) acc[k] = _mm256_fmadd_ps(acc[k], a, b);
    __m256 sum = acc[0];
#pragma GCC unroll 12
    for (int k = 1; k < FMA_ACCS; k++) sum = _mm256_add_ps(sum, acc[k]);
    float lanes[8];
    _mm256_storeu_ps(lanes, sum);
    return lanes[0] + lanes[7];
}

/* 4 lanes · (1 multiply + 1 add) · FMA_ACCS accumulators, per iteration: SSE, which every x86-64 has */
typedef float f32x4 __attribute__((vector_size(16)));
static float chains_sse(size_t iters)
{
    const f32x4 a = {FMA_A, FMA_A, FMA_A, FMA_A}, b = {FMA_B, FMA_B, FMA_B, FMA_B};
    f32x4 acc[FMA_ACCS];
#pragma GCC unroll 12
    for (int k = 0; k < FMA_ACCS; k++) acc[k] = (f32x4){(float)k, (float)k, (float)k, (float)k};
    for (size_t i = 0; i < iters; i++)
#pragma GCC unroll 12
        for (int k = 0; k < FMA_ACCS; k++) acc[k] = acc[k] * a + b;
    f32x4 sum = acc[0];
#pragma GCC unroll 12
    for (int k = 1; k < FMA_ACCS; k++) sum += acc[k];
    return sum[0] + sum[3];
}

typedef struct {
    const char *name;
    double flop_per_iter;
    float (*chains)(size_t iters);
} chains_isa;

/* The widest of the three this CPU runs (the OS enabling its registers: __builtin_cpu_supports checks). */
static const chains_isa *widest(void)
{
    static const chains_isa isas[] = {
        {"AVX-512", 2.0 * FMA_ACCS * 16, chains_avx512},
        {"AVX2+FMA", 2.0 * FMA_ACCS * 8, chains_avx2},
        {"SSE", 2.0 * FMA_ACCS * 4, chains_sse},
    };
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return &isas[0];
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &isas[1];
    return &isas[2];
}

const char *kvb_fma_isa(void) { return widest()->name; }

static double flop_per_iter(void) { return widest()->flop_per_iter; }

/* Iterations of one thread's chains in a timed run: about 8 ms at 100 GFLOP/s with 256-bit FMA, so that
 * the fastest of a ceiling's runs (a dozen a round) is likelier to fall in a quiet slice of a shared core. */
#define FMA_ITERS ((size_t)1 << 22)

/* A sample's: a quarter of that, a few milliseconds beside each run of a step (kvb_sample_fma). */
#define FMA_SAMPLE_ITERS (FMA_ITERS / 4)

typedef struct {
    size_t parts, iters;
    volatile float sink[2];
} chains_job;

/* Part p: its own chains, on its own thread (the result kept, so the loop is not dropped). */
static void chains_part(void *ctx, size_t p)
{
    chains_job *j = ctx;
    j->sink[p & 1] = widest()->chains(j->iters);
}

static void run_chains(void *ctx)
{
    chains_job *j = ctx;
    kvl_run_parts(chains_part, j, j->parts);
}

double kvb_fma_gflop(int threads) { return (double)threads * (double)FMA_ITERS * flop_per_iter() * 1e-9; }

kvb_time kvb_time_fma(int threads, int repeats)
{
    chains_job j = {(size_t)threads, FMA_ITERS, {0, 0}};
    return kvb_time_runs(run_chains, &j, repeats);
}

double kvb_sample_fma(int threads)
{
    chains_job j = {(size_t)threads, FMA_SAMPLE_ITERS, {0, 0}};
    const double start = kvl_seconds();
    run_chains(&j);
    const double took = kvl_seconds() - start;
    return (double)threads * (double)FMA_SAMPLE_ITERS * flop_per_iter() * 1e-9 / took;
}
