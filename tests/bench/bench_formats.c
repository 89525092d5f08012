/* Formats: the library's bulk element casts and block quantisers over KVB_STREAM_BYTES of float32
 * (64 Mi values), each against a memcpy of the same float32 bytes measured in this run. Rates count
 * the float32 bytes processed: read by an encoder or quantiser, written by a decoder or dequantiser.
 * Targets on one thread: element casts at least 1/4 of memcpy, block schemes at least 1/8.
 *
 * Input: standard normals times 8 (seed 1), so E4M3 sees its whole normal range and E2M1 saturates
 * often; NVFP4's tensor scale comes from the input's maximum, found before the timing. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "bench.h"
#include "block.h"
#include "element.h"
#include "rng.h"

#define ELEMENT_TARGET (1.0 / 4)
#define BLOCK_TARGET (1.0 / 8)

/* Buffers shared by every kernel: x[n] in, y[n] out, codes[n] (a byte per value suffices for every
 * format here), scales[n/16]. */
typedef struct {
    size_t n;
    float *x, *y;
    uint8_t *codes, *scales;
    float s_global;
} buffers;

static void e4m3_encode(void *ctx)
{
    buffers *b = ctx;
    kvf_e4m3_encode_sat_n(b->codes, b->x, b->n);
}

static void e4m3_decode(void *ctx)
{
    buffers *b = ctx;
    kvf_e4m3_decode_n(b->y, b->codes, b->n);
}

static void e2m1_encode(void *ctx)
{
    buffers *b = ctx;
    kvf_e2m1_encode_n(b->codes, b->x, b->n);
}

static void e2m1_decode(void *ctx)
{
    buffers *b = ctx;
    kvf_e2m1_decode_n(b->y, b->codes, b->n);
}

static void mxfp4_quant(void *ctx)
{
    buffers *b = ctx;
    kvf_quant_mxfp4(b->codes, b->scales, b->x, b->n);
}

static void mxfp4_dequant(void *ctx)
{
    buffers *b = ctx;
    kvf_dequant_mxfp4(b->y, b->codes, b->scales, b->n);
}

static void nvfp4_quant(void *ctx)
{
    buffers *b = ctx;
    kvf_quant_nvfp4(b->codes, b->scales, b->x, b->n, b->s_global);
}

static void nvfp4_dequant(void *ctx)
{
    buffers *b = ctx;
    kvf_dequant_nvfp4(b->y, b->codes, b->scales, b->n, b->s_global);
}

static const struct {
    const char *what;
    void (*run)(void *ctx);
    double target;
} KERNELS[] = {
    {"e4m3 encode (saturating)", e4m3_encode, ELEMENT_TARGET},
    {"e4m3 decode", e4m3_decode, ELEMENT_TARGET},
    {"e2m1 encode", e2m1_encode, ELEMENT_TARGET},
    {"e2m1 decode", e2m1_decode, ELEMENT_TARGET},
    {"mxfp4 quantise", mxfp4_quant, BLOCK_TARGET},
    {"mxfp4 dequantise", mxfp4_dequant, BLOCK_TARGET},
    {"nvfp4 quantise", nvfp4_quant, BLOCK_TARGET},
    {"nvfp4 dequantise", nvfp4_dequant, BLOCK_TARGET},
};
enum { N_KERNELS = sizeof KERNELS / sizeof KERNELS[0] };

static int buffers_alloc(buffers *b, size_t n)
{
    *b = (buffers){.n = n, .x = malloc(n * sizeof(float)), .y = malloc(n * sizeof(float)), .codes = malloc(n),
                   .scales = malloc(n / KVF_NVFP4_BLOCK)};
    return b->x && b->y && b->codes && b->scales ? 0 : 1;
}

static void buffers_free(buffers *b)
{
    free(b->x);
    free(b->y);
    free(b->codes);
    free(b->scales);
}

/* max |x_i| over x[n] */
static float amax_of(const float *x, size_t n)
{
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

int kvb_group_formats(void)
{
    size_t bytes = KVB_STREAM_BYTES;
    buffers b;
    if (buffers_alloc(&b, bytes / sizeof(float))) {
        buffers_free(&b);
        return 1;
    }
    kvl_rng rng;
    kvl_rng_seed(&rng, 1);
    kvl_rng_normal_f32(&rng, b.x, b.n, 8.0);
    b.s_global = kvf_nvfp4_global_scale(amax_of(b.x, b.n));
    double copy = kvb_memcpy_seconds(b.y, b.x, bytes);
    double ceiling = kvb_gbps(bytes, copy);
    kvb_print_row(&(kvb_row){"formats", "memcpy (same bytes)", (double)bytes / KVB_MIB, copy, ceiling, "GB/s", 0, 0,
                             0, 0, 0});
    for (int k = 0; k < N_KERNELS; k++) {
        kvb_progress("formats: %s", KERNELS[k].what);
        kvb_time t = kvb_time_runs(KERNELS[k].run, &b, KVB_REPEATS);
        kvb_print_row(&(kvb_row){"formats", KERNELS[k].what, (double)bytes / KVB_MIB, t.median,
                                 kvb_gbps(bytes, t.median), "GB/s", ceiling, KERNELS[k].target, t.min, t.max, 0});
    }
    buffers_free(&b);
    return 0;
}
