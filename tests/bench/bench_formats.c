/* Formats: the library's bulk element casts and block quantisers over kvb_stream_bytes() of float32
 * (64 Mi values or more), on one thread and on two, read against the ceiling of the stream each one is bound by
 * if memory bounds it. Rates count the float32 bytes: read by an encoder or quantiser (its codes are a
 * quarter or an eighth as many bytes; the read scan is its ceiling), written by a decoder or dequantiser
 * (a write stream as large as what it reads; the copy is its ceiling). Target: 0.75 of that ceiling for
 * the decoders and dequantisers. An encoder or quantiser has none here: its rounding costs more
 * instructions a value than the scan leaves it on these CPUs, and its target is the peer's below.
 *
 * The formats library runs on the calling thread (it links nothing but libc and libm; its callers own
 * the threads): on two threads each thread runs the same call on its half of the values, as a caller
 * converting a cache or a checkpoint would. Per kernel, four rows:
 *   1T, 2T       the median rate over the whole buffer, against the ceiling on as many threads
 *   2T/1T        the speedup, against the bounding ceiling's own (no target): a kernel that memory bounds
 *                gains what memory does, about 1; one its arithmetic bounds gains up to the ideal 2x
 *                while the stream gains less, above 1
 *   in L2, 1T    the same call over KVB_FORMATS_CACHED values (their float32 bytes, codes and output fit
 *                in L2), KVB_FORMATS_ROUNDS times a run: the kernel's arithmetic alone, against the same
 *                ceiling (no target). Below 0.75 here, no memory layout can bring the DRAM row to the
 *                target; only fewer instructions a value can.
 *
 * Then ml_dtypes' astype (peers.py) on one thread, each direction of E4M3, E5M2 and E2M1 checked
 * against the C cast's codes and values and timed interleaved with it: peer time over C time. Last the
 * MXFP4 and NVFP4 quantisers against the same recipes written in numpy around astype, checked block for
 * block (codes and scale) against C's and timed the same way. Each runs twice (PEER_SIZES): over the
 * first PEER_VALUES of the values, a stream through memory, and over the first KVB_FORMATS_CACHED, in
 * L2, where both sides time their arithmetic alone. The encoders' and quantisers' target,
 * KVB_PEER_CAST_TARGET, is the in-L2 row's: over the stream a C encoder runs at what the scan leaves it
 * (0.8 of it and more), so there its ratio is the memory's over ml_dtypes' speed, 7 - 9 on a CPU where
 * astype runs 0.3 - 0.4 G values/s, whatever the encoder's code.
 *
 * Input: standard normals times 8 (seed 1), so E4M3 sees its whole normal range and E2M1 saturates
 * often; NVFP4's tensor scale comes from the input's maximum, found before the timing. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "block.h"
#include "element.h"
#include "linalg.h"
#include "threads.h"
#include "rng.h"

#define KVB_FORMATS_CACHED ((size_t)1 << 16)
#define KVB_FORMATS_ROUNDS 16
/* Every slice starts on a block of every scheme (MX's 32 values; NVFP4's 16; E2M1's byte of two). */
#define SLICE_ALIGN KVF_MX_BLOCK

/* Buffers shared by every kernel: x[n] in, y[n] out, codes[n] (a byte per value suffices for every
 * format here), scales[n/16]. */
typedef struct {
    size_t n;
    float *x, *y;
    uint8_t *codes, *scales;
    float s_global;
} buffers;

/* Each kernel converts values first … first + n − 1, first a multiple of SLICE_ALIGN. */
typedef void (*kernel)(const buffers *b, size_t first, size_t n);

static void e4m3_encode(const buffers *b, size_t first, size_t n)
{
    kvf_e4m3_encode_sat_n(b->codes + first, b->x + first, n);
}

static void e4m3_encode_plain(const buffers *b, size_t first, size_t n)
{
    kvf_e4m3_encode_n(b->codes + first, b->x + first, n);
}

static void e4m3_decode(const buffers *b, size_t first, size_t n)
{
    kvf_e4m3_decode_n(b->y + first, b->codes + first, n);
}

static void e5m2_encode(const buffers *b, size_t first, size_t n)
{
    kvf_e5m2_encode_n(b->codes + first, b->x + first, n);
}

static void e5m2_decode(const buffers *b, size_t first, size_t n)
{
    kvf_e5m2_decode_n(b->y + first, b->codes + first, n);
}

static void e2m1_encode(const buffers *b, size_t first, size_t n)
{
    kvf_e2m1_encode_n(b->codes + first / 2, b->x + first, n);
}

static void e2m1_decode(const buffers *b, size_t first, size_t n)
{
    kvf_e2m1_decode_n(b->y + first, b->codes + first / 2, n);
}

static void mxfp4_quant(const buffers *b, size_t first, size_t n)
{
    kvf_quant_mxfp4(b->codes + first / 2, b->scales + first / KVF_MX_BLOCK, b->x + first, n);
}

static void mxfp4_dequant(const buffers *b, size_t first, size_t n)
{
    kvf_dequant_mxfp4(b->y + first, b->codes + first / 2, b->scales + first / KVF_MX_BLOCK, n);
}

static void nvfp4_quant(const buffers *b, size_t first, size_t n)
{
    kvf_quant_nvfp4(b->codes + first / 2, b->scales + first / KVF_NVFP4_BLOCK, b->x + first, n, b->s_global);
}

static void nvfp4_dequant(const buffers *b, size_t first, size_t n)
{
    kvf_dequant_nvfp4(b->y + first, b->codes + first / 2, b->scales + first / KVF_NVFP4_BLOCK, n, b->s_global);
}

/* Which stream bounds a kernel: the float32 values it reads, or the ones it writes. */
typedef enum { READS_FLOATS, WRITES_FLOATS } stream;

static const struct {
    const char *what;
    kernel run;
    stream bound;
} KERNELS[] = {
    {"e4m3 encode (saturating)", e4m3_encode, READS_FLOATS},
    {"e4m3 decode", e4m3_decode, WRITES_FLOATS},
    {"e2m1 encode", e2m1_encode, READS_FLOATS},
    {"e2m1 decode", e2m1_decode, WRITES_FLOATS},
    {"mxfp4 quantise", mxfp4_quant, READS_FLOATS},
    {"mxfp4 dequantise", mxfp4_dequant, WRITES_FLOATS},
    {"nvfp4 quantise", nvfp4_quant, READS_FLOATS},
    {"nvfp4 dequantise", nvfp4_dequant, WRITES_FLOATS},
};
enum { N_KERNELS = sizeof KERNELS / sizeof KERNELS[0] };

/* One timed run: the kernel over values 0 … n − 1, `rounds` times, split into `parts` slices. */
typedef struct {
    kernel run;
    const buffers *b;
    size_t n, parts;
    int rounds;
} job;

static void run_slice(void *ctx, size_t p)
{
    const job *j = ctx;
    const size_t first = j->n * p / j->parts / SLICE_ALIGN * SLICE_ALIGN;
    const size_t end = p + 1 == j->parts ? j->n : j->n * (p + 1) / j->parts / SLICE_ALIGN * SLICE_ALIGN;
    j->run(j->b, first, end - first);
}

static void run_job(void *ctx)
{
    job *j = ctx;
    for (int r = 0; r < j->rounds; r++) kvl_run_parts(run_slice, j, j->parts);
}

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

/* The kernel's rate over j (threads = j->parts), GB/s of float32 bytes, timed in pairs with a sample of
 * `bound` (the scan or the copy) and printed as a row against it; the median time. */
static double time_row(const char *what, const char *label, job *j, kvb_bound_kind bound, double target)
{
    char name[96];
    snprintf(name, sizeof name, "%s %s", what, label);
    kvb_progress("formats: %s", name);
    const double bytes = (double)(j->n * sizeof(float) * (size_t)j->rounds);
    return kvb_stream_row("formats", name, run_job, j, bytes, bound, (int)j->parts, KVB_REPEATS, target).median;
}

static void bench_kernel(int k, const buffers *b, const kvb_ceiling_set *c)
{
    const kvb_bound_kind bound = KERNELS[k].bound == READS_FLOATS ? KVB_BOUND_SCAN : KVB_BOUND_COPY;
    const double *ceiling = bound == KVB_BOUND_SCAN ? c->scan_gbps : c->copy_gbps;
    const double target = KERNELS[k].bound == WRITES_FLOATS ? KVB_MEMORY_TARGET : 0;
    job whole = {KERNELS[k].run, b, b->n, 1, 1};
    const double one = time_row(KERNELS[k].what, "1T", &whole, bound, target);
    whole.parts = 2;
    const double two = time_row(KERNELS[k].what, "2T", &whole, bound, target);
    char name[96];
    snprintf(name, sizeof name, "%s 2T/1T", KERNELS[k].what);
    kvb_print_row(&(kvb_row){"formats", name, (double)b->n * sizeof(float) / KVB_MIB, two, one / two, "x",
                             ceiling[1] / ceiling[0], 0, 0, 0, 0});
    job cached = {KERNELS[k].run, b, KVB_FORMATS_CACHED, 1, KVB_FORMATS_ROUNDS};
    time_row(KERNELS[k].what, "in L2, 1T", &cached, bound, 0);
}

/* ---- ml_dtypes' astype: the peer of the element casts -------------------------------------------- */

/* 64 MiB of float32: past the private caches (a large shared L3 may hold part of it, for the peer and for
 * C alike, which a ratio of their times leaves out). */
#define PEER_VALUES ((size_t)1 << 24)

/* The two lengths each peer runs at: the row's label after "1T", and its target for an encoder or a
 * quantiser. */
static const struct {
    size_t n;
    const char *where;
    double target;
} PEER_SIZES[] = {
    {PEER_VALUES, "", 0},
    {KVB_FORMATS_CACHED, " in L2", KVB_PEER_CAST_TARGET},
};
enum { N_PEER_SIZES = sizeof PEER_SIZES / sizeof PEER_SIZES[0] };

/* The casts that ml_dtypes' astype does too, in their plain (non-saturating) form, which is astype's. */
static const struct {
    const char *what, *format; /* our name, and peers.py's */
    kernel encode, decode;
    int nibbles;               /* codes two a byte (E2M1), which ml_dtypes keeps one a byte */
} CASTS[] = {
    {"e4m3", "e4m3", e4m3_encode_plain, e4m3_decode, 0},
    {"e5m2", "e5m2", e5m2_encode, e5m2_decode, 0},
    {"e2m1", "e2m1", e2m1_encode, e2m1_decode, 1},
};
enum { N_CASTS = sizeof CASTS / sizeof CASTS[0] };

/* The C cast's codes of the first n values one a byte, as ml_dtypes holds them, into one[n]. */
static void codes_one_a_byte(uint8_t *one, const buffers *b, size_t n, int nibbles)
{
    for (size_t i = 0; i < n; i++) one[i] = nibbles ? (b->codes[i / 2] >> (4 * (i & 1))) & 0xF : b->codes[i];
}

/* One kernel against its ml_dtypes peer (the peer's variant `dir`, "encode", "decode" or "quantise") over
 * the length PEER_SIZES[z]: its row, peer/C on one thread, the G values/s of each; `same` says what the
 * check found equal. */
static void peer_row(kvb_peer *p, const char *what, const char *dir, const char *same, job *j, long mismatches,
                     int z, double target)
{
    char name[160];
    snprintf(name, sizeof name, "%s %s", what, dir);
    kvb_progress("formats: %s against ml_dtypes", name);
    double c_s = 0, peer_s = 0;
    const kvb_quartiles r = kvb_time_against_peer(p, dir, run_job, j, &c_s, &peer_s);
    if (!(r.median > 0)) {
        printf("formats: %s: the ml_dtypes peer did not run\n", name);
        return;
    }
    snprintf(name, sizeof name, "%s %s ml_dtypes/C 1T%s (%s; %.3f vs %.2f G values/s)", what, dir,
             PEER_SIZES[z].where, mismatches ? "DIFFERS" : same, (double)j->n * 1e-9 / peer_s,
             (double)j->n * 1e-9 / c_s);
    kvb_print_peer_row("formats", name, (double)j->n * sizeof(float) / KVB_MIB, c_s, r, mismatches ? 0 : target);
}

/* Cast k's C codes and decoded values of the first PEER_SIZES[z].n values handed to the peer, which checks
 * astype against them; then both directions timed against astype. */
static void peer_cast(kvb_peer *p, int k, const buffers *b, uint8_t *one, int z)
{
    const size_t n = PEER_SIZES[z].n;
    job enc = {CASTS[k].encode, b, n, 1, 1}, dec = {CASTS[k].decode, b, n, 1, 1};
    run_job(&enc);
    run_job(&dec);
    codes_one_a_byte(one, b, n, CASTS[k].nibbles);
    char reply[256];
    long bad_codes = -1, bad_values = -1;
    if (kvb_peer_write(p, "x.f32", b->x, n * sizeof(float)) || kvb_peer_write(p, "codes.u8", one, n) ||
        kvb_peer_write(p, "y.f32", b->y, n * sizeof(float)) ||
        kvb_peer_ask(p, reply, sizeof reply, "cast %s %s %zu", CASTS[k].format, kvb_peer_dir(p), n) ||
        sscanf(reply, "variants encode:%ld decode:%ld", &bad_codes, &bad_values) != 2) {
        printf("formats: %s: ml_dtypes did not load it; skipped\n", CASTS[k].what);
        return;
    }
    peer_row(p, CASTS[k].what, "encode", "same codes", &enc, bad_codes, z, PEER_SIZES[z].target);
    peer_row(p, CASTS[k].what, "decode", "same values", &dec, bad_values, z, 0);
}

/* The block quantisers the peer writes in numpy around astype (peers.py's quant). */
static const struct {
    const char *scheme;
    kernel quantise;
    size_t block;
} QUANTS[] = {
    {"mxfp4", mxfp4_quant, KVF_MX_BLOCK},
    {"nvfp4", nvfp4_quant, KVF_NVFP4_BLOCK},
};
enum { N_QUANTS = sizeof QUANTS / sizeof QUANTS[0] };

/* Quantiser k's codes and scales of the first PEER_SIZES[z].n values handed to the peer, which checks its
 * own against them; then both timed. */
static void peer_quant(kvb_peer *p, int k, const buffers *b, int z)
{
    const size_t n = PEER_SIZES[z].n;
    job q = {QUANTS[k].quantise, b, n, 1, 1};
    run_job(&q);
    char reply[256];
    long bad_blocks = -1;
    if (kvb_peer_write(p, "x.f32", b->x, n * sizeof(float)) || kvb_peer_write(p, "codes.u8", b->codes, n / 2) ||
        kvb_peer_write(p, "scales.u8", b->scales, n / QUANTS[k].block) ||
        kvb_peer_ask(p, reply, sizeof reply, "quant %s %s %zu %a", QUANTS[k].scheme, kvb_peer_dir(p), n,
                     (double)b->s_global) ||
        sscanf(reply, "variants quantise:%ld", &bad_blocks) != 1) {
        printf("formats: %s: the numpy quantiser did not run; skipped\n", QUANTS[k].scheme);
        return;
    }
    peer_row(p, QUANTS[k].scheme, "quantise", "same blocks", &q, bad_blocks, z, PEER_SIZES[z].target);
}

static void peer_casts(const buffers *b)
{
    kvb_peer *p = kvb_peer_start("formats");
    if (p && !kvb_peer_has(p, "ml_dtypes")) printf("formats: python3 has no ml_dtypes; its astype peer is skipped\n");
    uint8_t *one = p && kvb_peer_has(p, "ml_dtypes") ? malloc(PEER_VALUES) : NULL;
    for (int z = 0; one && z < N_PEER_SIZES; z++) {
        for (int k = 0; k < N_CASTS; k++) peer_cast(p, k, b, one, z);
        for (int k = 0; k < N_QUANTS; k++) peer_quant(p, k, b, z);
    }
    free(one);
    kvb_peer_stop(p);
}

int kvb_group_formats(void)
{
    const kvb_ceiling_set *c = kvb_ceilings();
    if (!c) return 1;
    buffers b;
    if (buffers_alloc(&b, kvb_stream_bytes() / sizeof(float))) {
        buffers_free(&b);
        return 1;
    }
    kvl_rng rng;
    kvl_rng_seed(&rng, 1);
    kvl_rng_normal_f32(&rng, b.x, b.n, 8.0);
    b.s_global = kvf_nvfp4_global_scale(amax_of(b.x, b.n));
    for (int k = 0; k < N_KERNELS; k++) bench_kernel(k, &b, c);
    peer_casts(&b);
    buffers_free(&b);
    return 0;
}
