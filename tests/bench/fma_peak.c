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
#include "isa.h"
#include "linalg.h"
#include "threads.h"
#include "timing.h"

#define FMA_ACCS 12 /* also the unroll pragmas' count, which take no macro */
#define FMA_A 0.99999f
#define FMA_B 1e-6f

/* One set of chains: `vec` holds `lanes` floats, step(acc, a, b) is one link (a fused multiply-add, or
 * a multiply and an add), `target` the instruction set the function is compiled for. The sum of the
 * accumulators is returned, so that no loop is dropped. */
#define CHAINS(name, target, vec, lanes, step)                                                          \
    target static float name(size_t iters)                                                              \
    {                                                                                                   \
        const vec a = (vec){0} + FMA_A, b = (vec){0} + FMA_B;                                           \
        vec acc[FMA_ACCS];                                                                              \
        _Pragma("GCC unroll 12") for (int k = 0; k < FMA_ACCS; k++) acc[k] = (vec){0} + (float)k;       \
        for (size_t i = 0; i < iters; i++)                                                              \
            _Pragma("GCC unroll 12") for (int k = 0; k < FMA_ACCS; k++) acc[k] = step(acc[k], a, b);    \
        vec sum = acc[0];                                                                               \
        _Pragma("GCC unroll 12") for (int k = 1; k < FMA_ACCS; k++) sum += acc[k];                      \
        return sum[0] + sum[lanes - 1];                                                                 \
    }

#define FMA_512(x, a, b) _mm512_fmadd_ps(x, a, b)
#define FMA_256(x, a, b) _mm256_fmadd_ps(x, a, b)
#define MUL_ADD(x, a, b) ((x) * (a) + (b))

/* SSE multiplies and adds, which every x86-64 has: two flop per lane and link, as a fused one */
typedef float f32x4 __attribute__((vector_size(16)));

CHAINS(chains_avx512, __attribute__((target("avx512f"))), __m512, 16, FMA_512)
CHAINS(chains_avx2, __attribute__((target("avx2,fma"))), __m256, 8, FMA_256)
CHAINS(chains_sse, , f32x4, 4, MUL_ADD)

typedef struct {
    const char *name;
    double flop_per_iter;
    float (*chains)(size_t iters);
} chains_isa;

/* The widest of the three this CPU runs (the OS enabling its registers: __builtin_cpu_supports checks)
 * and the kernels may use: no wider than the variant kvf_isa_active() picks, so that under KVL_ISA=avx2
 * the 256-bit kernels are read against the 256-bit peak. */
static const chains_isa *widest(void)
{
    static const chains_isa isas[] = {
        {"AVX-512", 2.0 * FMA_ACCS * 16, chains_avx512},
        {"AVX2+FMA", 2.0 * FMA_ACCS * 8, chains_avx2},
        {"SSE", 2.0 * FMA_ACCS * 4, chains_sse},
    };
    __builtin_cpu_init();
    const kvf_isa allowed = kvf_isa_active();
    if (allowed >= KVF_ISA_AVX512 && __builtin_cpu_supports("avx512f")) return &isas[0];
    if (allowed >= KVF_ISA_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return &isas[1];
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
