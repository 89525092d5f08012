/* The hot loops' three builds (formats/isa.h): every dispatched function run as baseline x86-64, as
 * AVX2+FMA and as AVX-512 on the same inputs gives the same bytes (memcmp), and the dispatcher picks the
 * widest the CPU has. The inputs reach every rounding path: ties to even, subnormals in and out, saturation
 * and overflow, NaN and ±inf, signed zeros, lengths that are no multiple of a vector and starts one
 * element past a vector boundary, over 2^17 values. A vector variant the CPU (or the build) lacks is
 * skipped, saying so. */
#include "common.h"

#include "block.h"
#include "element.h"
#include "isa.h"
#include "rng.h"
#include "softmax.h"
#include "softmax_cpu.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_VALUES ((size_t)1 << 17) /* a multiple of every block (16, 32, 128) */
/* The shifted call: one element in (a start off every vector boundary) and a length no vector width
 * divides; for the block schemes a length that stays a multiple of their blocks. */
#define SHIFT 1
#define ODD_TAIL 7
#define BLOCK_TAIL 128

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert(p != NULL);
    return p;
}

static float bits_f32(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* 1 if a vector variant can run beside the baseline; else says why the test is skipped. A variant the
 * CPU lacks (AVX-512 on most) is left out of the comparisons, once said. */
static int vector_variants(const char *test)
{
    if (!kvf_isa_available(KVF_ISA_AVX2)) {
        printf("%s: skipped, this CPU or build has no AVX2+FMA variant\n", test);
        return 0;
    }
    if (!kvf_isa_available(KVF_ISA_AVX512)) printf("%s: baseline against avx2 only, this CPU has no AVX-512\n", test);
    return 1;
}

/* The first byte where the baseline's a[bytes] and variant isa's b[bytes] differ, as a failure naming
 * `what`. */
static void expect_same_bytes(const char *what, kvf_isa isa, const void *a, const void *b, size_t bytes)
{
    if (memcmp(a, b, bytes) == 0) return;
    const unsigned char *p = a, *q = b;
    size_t i = 0;
    while (p[i] == q[i]) i++;
    ck_abort_msg("%s: baseline and %s differ at byte %zu of %zu (0x%02x vs 0x%02x)", what, kvf_isa_name(isa), i,
                 bytes, p[i], q[i]);
}

/* ---- inputs ------------------------------------------------------------------------------------- */

/* Values at every edge of the element formats: signed zeros, float32 subnormals and the formats'
 * subnormal ranges, the midpoint between each pair of neighbouring codes (a tie), their neighbours one
 * float32 ulp away, the largest finite values and past them, ±inf and NaNs with payloads. */
static size_t edge_values(float *x, size_t cap)
{
    size_t n = 0;
#define PUT(v) do { if (n < cap) x[n++] = (v); } while (0)
    const float fixed[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, bits_f32(0x7F800001u), bits_f32(0xFFC00001u),
                           1e-45f, -1e-45f, 1.1754942e-38f, 1.17549435e-38f, 3.4028235e38f, -3.4028235e38f,
                           448.0f, 464.0f, 480.0f, 57344.0f, 61440.0f, 65536.0f, 6.0f, 7.0f, 1e30f, -1e30f};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) PUT(fixed[i]);
    float (*const decode[])(uint8_t) = {kvf_e4m3_decode, kvf_e5m2_decode, kvf_e2m1_decode};
    for (size_t f = 0; f < 3; f++) {
        for (unsigned c = 0; c + 1 < (f == 2 ? 16u : 256u); c++) {
            const float a = decode[f]((uint8_t)c), b = decode[f]((uint8_t)(c + 1));
            if (!isfinite(a) || !isfinite(b) || signbit(a) != signbit(b)) continue;
            const float mid = (float)(((double)a + (double)b) / 2);
            PUT(mid);
            PUT(nextafterf(mid, INFINITY));
            PUT(nextafterf(mid, -INFINITY));
            PUT(-mid);
        }
    }
    for (uint32_t low = 0x7FFFu; low <= 0x8001u; low++) { /* bf16 ties: the dropped half exactly 0x8000 */
        PUT(bits_f32(0x3F800000u | low));
        PUT(bits_f32(0x00010000u | low)); /* a float32 subnormal */
        PUT(bits_f32(0xFF7F0000u | low)); /* next to −max */
    }
#undef PUT
    return n;
}

/* x[n]: the edge values, then random float32 bit patterns (every class, mostly huge or tiny), then
 * normals at scales from 2^-140 to 2^120, in blocks of 64 that share a scale. */
static float *mixed_values(size_t n, uint64_t seed)
{
    float *x = xmalloc(n * sizeof *x);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    size_t i = edge_values(x, n);
    for (; i < n / 4; i++) x[i] = bits_f32((uint32_t)kvl_rng_next_u64(&rng));
    for (; i < n; i += 64) {
        const int e = (int)(kvl_rng_next_u64(&rng) % 261) - 140;
        for (size_t j = i; j < i + 64 && j < n; j++) x[j] = (float)ldexp(kvl_rng_normal(&rng), e);
    }
    return x;
}

/* mixed_values with every NaN and ±inf replaced by a finite value: the quantisers reject those. Some
 * blocks are all zeros of both signs, some the largest floats (the satfinite path), some hold only
 * codes' midpoints times a power of two (ties in the elements). */
static float *finite_values(size_t n, uint64_t seed)
{
    float *x = mixed_values(n, seed);
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) x[i] = (float)(i % 7) - 3.0f;
    for (size_t b = 0; b + 128 <= n; b += 128 * 29) {
        for (size_t j = 0; j < 32; j++) x[b + j] = j % 2 ? -0.0f : 0.0f;
        for (size_t j = 32; j < 64; j++) x[b + j] = (j % 2 ? -1.0f : 1.0f) * 3.4028235e38f / (float)(1 + j % 5);
        for (size_t j = 64; j < 128; j++) x[b + j] = ldexpf(0.25f + 0.5f * (float)(j % 12), (int)(b % 40) - 20);
    }
    return x;
}

static uint8_t *random_bytes(size_t n, uint64_t seed)
{
    uint8_t *b = xmalloc(n);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) b[i] = (uint8_t)kvl_rng_next_u64(&rng);
    return b;
}

/* ---- running one function in both variants ------------------------------------------------------- */

/* A dispatched function applied to `in` at element offset `off`, `n` elements, writing into `out`. */
typedef void (*job)(void *out, const void *in, size_t off, size_t n);

/* out_bytes of output from the baseline and from every vector variant the CPU runs, all buffers
 * prefilled alike, compared byte for byte; once at the start with length n, once shifted (off) with
 * length m. */
static void expect_variants_agree(const char *what, job f, const void *in, size_t n, size_t off, size_t m,
                                  size_t out_bytes)
{
    unsigned char *a = xmalloc(out_bytes), *b = xmalloc(out_bytes);
    const size_t calls[2][2] = {{0, n}, {off, m}};
    for (size_t c = 0; c < 2; c++) {
        memset(a, 0xA5, out_bytes);
        ck_assert(kvf_isa_force(KVF_ISA_BASELINE) == 0);
        f(a, in, calls[c][0], calls[c][1]);
        for (kvf_isa isa = KVF_ISA_AVX2; isa < KVF_N_ISA; isa++) {
            if (kvf_isa_force(isa) != 0) continue;
            memset(b, 0xA5, out_bytes);
            f(b, in, calls[c][0], calls[c][1]);
            char label[96];
            snprintf(label, sizeof label, "%s (start %zu, length %zu)", what, calls[c][0], calls[c][1]);
            expect_same_bytes(label, isa, a, b, out_bytes);
        }
    }
    free(a);
    free(b);
}

/* ---- the element casts ----------------------------------------------------------------------------- */

#define ENCODE_JOB(name, code_t)                                                      \
    static void job_##name(void *out, const void *in, size_t off, size_t n)           \
    {                                                                                 \
        kvf_##name((code_t *)out + off, (const float *)in + off, n);                  \
    }
#define DECODE_JOB(name, code_t)                                                      \
    static void job_##name(void *out, const void *in, size_t off, size_t n)           \
    {                                                                                 \
        kvf_##name((float *)out + off, (const code_t *)in + off, n);                  \
    }
ENCODE_JOB(e4m3_encode_n, uint8_t)
ENCODE_JOB(e4m3_encode_sat_n, uint8_t)
ENCODE_JOB(e5m2_encode_n, uint8_t)
ENCODE_JOB(e5m2_encode_sat_n, uint8_t)
ENCODE_JOB(bf16_encode_n, uint16_t)
ENCODE_JOB(bf16_encode_sat_n, uint16_t)
DECODE_JOB(e4m3_decode_n, uint8_t)
DECODE_JOB(e5m2_decode_n, uint8_t)
DECODE_JOB(bf16_decode_n, uint16_t)

/* E2M1 packs two codes a byte: the shift moves the input by one element and the output by one byte. */
static void job_e2m1_encode_n(void *out, const void *in, size_t off, size_t n)
{
    kvf_e2m1_encode_n((uint8_t *)out + off, (const float *)in + off, n);
}

static void job_e2m1_decode_n(void *out, const void *in, size_t off, size_t n)
{
    kvf_e2m1_decode_n((float *)out + off, (const uint8_t *)in + off, n);
}

START_TEST(test_element_casts_are_bit_identical_in_every_variant)
{
    if (!vector_variants("test_element_casts_are_bit_identical_in_every_variant")) return;
    const size_t n = N_VALUES, m = N_VALUES - ODD_TAIL;
    float *x = mixed_values(n, 31);
    const struct { const char *what; job f; size_t code_bytes; } enc[] = {
        {"e4m3_encode_n", job_e4m3_encode_n, 1},         {"e4m3_encode_sat_n", job_e4m3_encode_sat_n, 1},
        {"e5m2_encode_n", job_e5m2_encode_n, 1},         {"e5m2_encode_sat_n", job_e5m2_encode_sat_n, 1},
        {"bf16_encode_n", job_bf16_encode_n, 2},         {"bf16_encode_sat_n", job_bf16_encode_sat_n, 2},
    };
    for (size_t i = 0; i < sizeof enc / sizeof enc[0]; i++)
        expect_variants_agree(enc[i].what, enc[i].f, x, n, SHIFT, m, n * enc[i].code_bytes);
    expect_variants_agree("e2m1_encode_n", job_e2m1_encode_n, x, n, SHIFT, m, n);
    uint8_t *codes = random_bytes(2 * n, 32); /* every code many times; bf16 from byte pairs */
    expect_variants_agree("e4m3_decode_n", job_e4m3_decode_n, codes, n, SHIFT, m, n * sizeof(float));
    expect_variants_agree("e5m2_decode_n", job_e5m2_decode_n, codes, n, SHIFT, m, n * sizeof(float));
    expect_variants_agree("e2m1_decode_n", job_e2m1_decode_n, codes, n, SHIFT, m, n * sizeof(float));
    expect_variants_agree("bf16_decode_n", job_bf16_decode_n, codes, n, SHIFT, m, n * sizeof(float));
    free(codes);
    free(x);
}
END_TEST

/* ---- the block schemes ------------------------------------------------------------------------------ */

/* Output layout of a quantiser's job: codes first (n bytes, enough for either element), then the
 * scales (n/16 of them at most, as float for fp8_ue8m0), then the return codes of both calls. */
#define Q_SCALES_OFF(n) (n)
#define Q_BYTES(n) ((n) + ((n) / 16) * sizeof(float) + sizeof(int))

static int *q_status(void *out, size_t n) { return (int *)((unsigned char *)out + Q_BYTES(n) - sizeof(int)); }

/* the job's n is the quantiser's length; the output buffer spans N_VALUES */
#define QUANT_JOB(name, scale_t, ...)                                                                   \
    static void job_##name(void *out, const void *in, size_t off, size_t n)                             \
    {                                                                                                   \
        uint8_t *codes = out;                                                                           \
        scale_t *scales = (scale_t *)((unsigned char *)out + Q_SCALES_OFF(N_VALUES));                   \
        *q_status(out, N_VALUES) = kvf_##name(codes, scales, (const float *)in + off, n __VA_ARGS__);   \
    }
QUANT_JOB(quant_mxfp8_e4m3, uint8_t)
QUANT_JOB(quant_mxfp4, uint8_t)
QUANT_JOB(quant_nvfp4, uint8_t, , 0.75f)
QUANT_JOB(quant_fp4_v41, uint8_t)
QUANT_JOB(quant_fp8_ue8m0, float)
QUANT_JOB(quant_fp8_e8m0_rceil, uint8_t, , 64)
QUANT_JOB(quant_mxfp4_rceil, uint8_t)

static void job_check_finite(void *out, const void *in, size_t off, size_t n)
{
    *(int *)out = kvf_check_finite((const float *)in + off, n);
}

START_TEST(test_block_quantisers_are_bit_identical_in_every_variant)
{
    if (!vector_variants("test_block_quantisers_are_bit_identical_in_every_variant")) return;
    const size_t n = N_VALUES, m = N_VALUES - BLOCK_TAIL;
    float *x = finite_values(n, 41);
    const struct { const char *what; job f; } q[] = {
        {"quant_mxfp8_e4m3", job_quant_mxfp8_e4m3}, {"quant_mxfp4", job_quant_mxfp4},
        {"quant_nvfp4", job_quant_nvfp4},           {"quant_fp4_v41", job_quant_fp4_v41},
        {"quant_fp8_ue8m0", job_quant_fp8_ue8m0},   {"quant_fp8_e8m0_rceil", job_quant_fp8_e8m0_rceil},
        {"quant_mxfp4_rceil", job_quant_mxfp4_rceil},
    };
    unsigned char *probe = xmalloc(Q_BYTES(n));
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
        q[i].f(probe, x, 0, n);
        ck_assert_msg(*q_status(probe, n) == KVF_OK, "%s refused the finite input: %s", q[i].what,
                      kvf_strerror(*q_status(probe, n)));
        expect_variants_agree(q[i].what, q[i].f, x, n, SHIFT, m, Q_BYTES(n));
    }
    free(probe);
    float *y = mixed_values(n, 42); /* NaN and inf: both variants refuse alike */
    for (size_t i = 0; i < sizeof q / sizeof q[0]; i++)
        expect_variants_agree(q[i].what, q[i].f, y, n, SHIFT, m, Q_BYTES(n));
    expect_variants_agree("check_finite", job_check_finite, y, n, SHIFT, m, sizeof(int));
    expect_variants_agree("check_finite", job_check_finite, x, n, SHIFT, m, sizeof(int));
    free(y);
    free(x);
}
END_TEST

/* Dequantiser jobs read codes from `in` and scales from the same random bytes further on. */
#define DEQ_SCALES(in) ((const unsigned char *)(in) + N_VALUES)
#define DEQUANT_JOB(name, scale_t, ...)                                                                 \
    static void job_##name(void *out, const void *in, size_t off, size_t n)                             \
    {                                                                                                   \
        *(int *)((float *)out + N_VALUES) = kvf_##name((float *)out + off, (const uint8_t *)in + off,   \
                                                       (const scale_t *)DEQ_SCALES(in), n __VA_ARGS__); \
    }
DEQUANT_JOB(dequant_mxfp8_e4m3, uint8_t)
DEQUANT_JOB(dequant_mxfp4, uint8_t)
DEQUANT_JOB(dequant_nvfp4, uint8_t, , 0.75f)
DEQUANT_JOB(dequant_fp4_v41, uint8_t)
DEQUANT_JOB(dequant_fp8_ue8m0, float)
DEQUANT_JOB(dequant_fp8_e8m0, uint8_t, , 64)

START_TEST(test_block_dequantisers_are_bit_identical_in_every_variant)
{
    if (!vector_variants("test_block_dequantisers_are_bit_identical_in_every_variant")) return;
    const size_t n = N_VALUES, m = N_VALUES - BLOCK_TAIL;
    /* codes, then scales: random E8M0 and E4M3 bytes (NaN scales included), and for fp8_ue8m0 random
     * float bits (every class) */
    uint8_t *in = random_bytes(n + n / 16 * sizeof(float), 51);
    const struct { const char *what; job f; } d[] = {
        {"dequant_mxfp8_e4m3", job_dequant_mxfp8_e4m3}, {"dequant_mxfp4", job_dequant_mxfp4},
        {"dequant_nvfp4", job_dequant_nvfp4},           {"dequant_fp4_v41", job_dequant_fp4_v41},
        {"dequant_fp8_ue8m0", job_dequant_fp8_ue8m0},   {"dequant_fp8_e8m0", job_dequant_fp8_e8m0},
    };
    for (size_t i = 0; i < sizeof d / sizeof d[0]; i++)
        expect_variants_agree(d[i].what, d[i].f, in, n, SHIFT, m, (n + 1) * sizeof(float));
    free(in);
}
END_TEST

/* ---- the softmax loops and the index weighting ------------------------------------------------------- */

/* A NaN of either sign with a payload from r. */
static float nan_like(uint32_t r)
{
    return bits_f32((r & 0x80000000u) | 0x7FC00000u | (r & 0x003FFFFFu));
}

/* Scores s[n] with a running max m at least every finite score: normals around m, −∞ (masked), NaN,
 * ±0, and scores far below m (exp underflow to 0 and the clamp at −87.3). */
static float *scores(size_t n, float m, uint64_t seed)
{
    float *s = xmalloc(n * sizeof *s);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        const uint64_t r = kvl_rng_next_u64(&rng);
        switch (r % 16) {
        case 0: s[i] = -INFINITY; break;
        case 1: s[i] = r % 1024 == 1 ? nan_like((uint32_t)(r >> 32)) : m - 87.3f - (float)(r % 64) * 0.125f; break;
        case 2: s[i] = (r >> 8) % 2 ? 0.0f : -0.0f; break;
        case 3: s[i] = m; break;
        default: s[i] = m - (float)(3.0 * fabs(kvl_rng_normal(&rng)));
        }
    }
    return s;
}

static void job_softmax_exp(void *out, const void *in, size_t off, size_t n)
{
    float *s = out;
    memcpy(s + off, (const float *)in + off, n * sizeof *s);
    s[N_VALUES] = kvl_softmax_exp_f32(s + off, n, 0.5f);
}

static void job_max(void *out, const void *in, size_t off, size_t n)
{
    *(float *)out = kvl_max_f32((const float *)in + off, n);
}

static void job_scale(void *out, const void *in, size_t off, size_t n)
{
    float *y = out;
    memcpy(y + off, (const float *)in + off, n * sizeof *y);
    kvl_scale_f32(y + off, 0x1.8p-126f, n); /* products below float32's normals, and ties in them */
}

/* The column forms over s[rows][COLS], an odd number of heads past every vector width, and the rows form
 * over s[COLS][n / COLS], rows of an odd length. */
#define COLS 37

static void job_exp_rows(void *out, const void *in, size_t off, size_t n)
{
    float *s = out, m[COLS];
    for (size_t r = 0; r < COLS; r++) m[r] = r % 7 == 6 ? INFINITY : 0.5f + 0.25f * (float)(r % 5);
    memcpy(s + off, (const float *)in + off, n / COLS * COLS * sizeof *s);
    kvl_softmax_exp_rows_f32(s + off, COLS, n / COLS, m, s + N_VALUES);
}

static void job_max_cols(void *out, const void *in, size_t off, size_t n)
{
    kvl_max_cols_f32(out, (const float *)in + off, n / COLS, COLS);
}

static void job_exp_cols(void *out, const void *in, size_t off, size_t n)
{
    float *s = out, m[COLS];
    for (size_t h = 0; h < COLS; h++) m[h] = 0.5f + 0.25f * (float)(h % 5);
    memcpy(s + off, (const float *)in + off, n / COLS * COLS * sizeof *s);
    kvl_exp_cols_f32(s + off, n / COLS, COLS, m, s + N_VALUES);
}

#ifdef KVF_ISA_HAVE_X86
typedef void weigh_fn(float *row, const float *dot, const float *w, size_t HI, size_t n, size_t visible);
weigh_fn kvl_index_weigh_heads_baseline, kvl_index_weigh_heads_avx2, kvl_index_weigh_heads_avx512;

/* cpu/index_scan_cpu.c's weighting, called straight in one variant (it is internal to the scan):
 * 4 heads over dot[4][n/4], the last ODD_TAIL keys not visible. */
static void weigh_heads(weigh_fn *f, float *row, const float *dot, size_t off, size_t n)
{
    const float w[4] = {0.3f, -1.7f, 1e-30f, 3e30f};
    const size_t keys = n / 4;
    memset(row, 0, N_VALUES * sizeof *row);
    f(row + off, dot + off, w, 4, keys, keys - ODD_TAIL);
}
#endif

START_TEST(test_softmax_loops_and_index_weighting_are_bit_identical_in_every_variant)
{
    if (!vector_variants("test_softmax_loops_and_index_weighting_are_bit_identical_in_every_variant")) return;
    const size_t n = N_VALUES, m = N_VALUES - ODD_TAIL;
    float *s = scores(n, 0.5f, 61);
    expect_variants_agree("softmax_exp_f32", job_softmax_exp, s, n, SHIFT, m, (n + 1) * sizeof(float));
    expect_variants_agree("max_f32", job_max, s, n, SHIFT, m, sizeof(float));
    float *x = mixed_values(n, 62);
    expect_variants_agree("max_f32 (every class)", job_max, x, n, SHIFT, m, sizeof(float));
    expect_variants_agree("scale_f32", job_scale, x, n, SHIFT, m, n * sizeof(float));
    expect_variants_agree("max_cols_f32", job_max_cols, x, n, SHIFT, m, COLS * sizeof(float));
    expect_variants_agree("exp_cols_f32", job_exp_cols, s, n, SHIFT, m, (n + COLS) * sizeof(float));
    expect_variants_agree("softmax_exp_rows_f32", job_exp_rows, s, n, SHIFT, m, (n + COLS) * sizeof(float));
#ifdef KVF_ISA_HAVE_X86
    weigh_fn *const weigh[KVF_N_ISA] = {kvl_index_weigh_heads_baseline, kvl_index_weigh_heads_avx2,
                                        kvl_index_weigh_heads_avx512};
    float *a = xmalloc(n * sizeof *a), *b = xmalloc(n * sizeof *b);
    for (size_t off = 0; off <= SHIFT; off++) {
        weigh_heads(weigh[KVF_ISA_BASELINE], a, x, off, n - off);
        for (kvf_isa isa = KVF_ISA_AVX2; isa < KVF_N_ISA; isa++) {
            if (!kvf_isa_available(isa)) continue;
            weigh_heads(weigh[isa], b, x, off, n - off);
            expect_same_bytes("index weigh_heads", isa, a, b, n * sizeof *a);
        }
    }
    free(a);
    free(b);
#endif
    free(x);
    free(s);
}
END_TEST

/* ---- the choice ----------------------------------------------------------------------------------- */

START_TEST(test_dispatcher_picks_the_widest_variant_the_cpu_has)
{
    const char *env = getenv("KVL_ISA");
    if (env && *env) {
        printf("test_dispatcher_picks_the_widest_variant_the_cpu_has: skipped, KVL_ISA=%s overrides the choice\n", env);
        return;
    }
#if defined(KVF_ISA_HAVE_X86)
    __builtin_cpu_init();
    const int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const int avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
    const int avx2 = 0, avx512 = 0;
#endif
    ck_assert_int_eq(kvf_isa_available(KVF_ISA_AVX2), avx2);
    ck_assert_int_eq(kvf_isa_available(KVF_ISA_AVX512), avx512);
    const kvf_isa want = avx512 ? KVF_ISA_AVX512 : avx2 ? KVF_ISA_AVX2 : KVF_ISA_BASELINE;
    ck_assert_msg(kvf_isa_active() == want, "picked %s on a CPU whose widest variant is %s",
                  kvf_isa_name(kvf_isa_active()), kvf_isa_name(want));
    if (want != KVF_ISA_AVX512)
        printf("test_dispatcher_picks_the_widest_variant_the_cpu_has: %s is the widest here\n", kvf_isa_name(want));
}
END_TEST

START_TEST(test_forcing_a_variant_switches_and_refuses_unknown_ones)
{
    ck_assert_int_eq(kvf_isa_force(KVF_ISA_BASELINE), 0);
    ck_assert_int_eq(kvf_isa_active(), KVF_ISA_BASELINE);
    ck_assert_int_eq(kvf_isa_force(KVF_N_ISA), -1);
    ck_assert_int_eq(kvf_isa_active(), KVF_ISA_BASELINE);
    for (kvf_isa isa = KVF_ISA_AVX2; isa < KVF_N_ISA; isa++) {
        ck_assert_int_eq(kvf_isa_force(isa), kvf_isa_available(isa) ? 0 : -1);
        if (kvf_isa_available(isa)) ck_assert_int_eq(kvf_isa_active(), isa);
        kvf_isa named;
        ck_assert(kvf_isa_from_name(kvf_isa_name(isa), &named) == 0 && named == isa);
    }
    kvf_isa isa;
    ck_assert(kvf_isa_from_name("avx2", &isa) == 0 && isa == KVF_ISA_AVX2);
    ck_assert(kvf_isa_from_name("avx512", &isa) == 0 && isa == KVF_ISA_AVX512);
    ck_assert(kvf_isa_from_name("baseline", &isa) == 0 && isa == KVF_ISA_BASELINE);
    ck_assert_int_eq(kvf_isa_from_name("avx10", &isa), -1);
    ck_assert_ptr_null(kvf_isa_name(KVF_N_ISA));
}
END_TEST

/* kvfmt quant --scheme mxfp4 over one block (a program whose first dispatched call reads KVL_ISA) with
 * KVL_ISA=`isa`: its exit status, stdout and stderr. */
static int quant_with(const char *isa, char *out, size_t out_cap, char *err, size_t err_cap)
{
    char cmd[128], input[32 * 8] = "";
    snprintf(cmd, sizeof cmd, "KVL_ISA=%s kvfmt quant --scheme mxfp4", isa);
    for (int i = 0; i < 32; i++) snprintf(input + strlen(input), sizeof input - strlen(input), "%g\n", (i - 15) * 0.37);
    return kvl_run(cmd, input, out, out_cap, err, err_cap);
}

START_TEST(test_kvl_isa_selects_a_variant_and_an_unknown_name_is_refused)
{
    static char out[2][8192], err[2][4096], msg[4096];
    ck_assert_int_eq(quant_with("baseline", out[0], sizeof out[0], err[0], sizeof err[0]), 0);
    ck_assert_msg(err[0][0] == '\0', "KVL_ISA=baseline printed: %s", err[0]);
    for (kvf_isa isa = KVF_ISA_AVX2; isa < KVF_N_ISA; isa++) {
        const char *name = kvf_isa_name(isa);
        ck_assert_int_eq(quant_with(name, out[1], sizeof out[1], err[1], sizeof err[1]), 0);
        if (kvf_isa_available(isa)) {
            ck_assert_msg(err[1][0] == '\0', "KVL_ISA=%s printed: %s", name, err[1]);
        } else {
            char want[160];
            snprintf(want, sizeof want, "KVL_ISA=%s: not available here", name);
            ck_assert_msg(strstr(err[1], want) != NULL, "KVL_ISA=%s gave stderr \"%s\", not \"%s\"", name, err[1], want);
        }
        ck_assert_msg(strcmp(out[0], out[1]) == 0, "KVL_ISA=baseline and %s print different blocks", name);
    }
    /* an unknown name is refused before the program reads its input (ref/core/environment.h) */
    ck_assert_int_eq(quant_with("avx10", out[1], sizeof out[1], msg, sizeof msg), 2);
    const char *want = "kvfmt: KVL_ISA=avx10: unknown instruction set (baseline, avx2 or avx512)\n";
    ck_assert_msg(strcmp(msg, want) == 0, "KVL_ISA=avx10 gave stderr \"%s\", not \"%s\"", msg, want);
    ck_assert_msg(out[1][0] == '\0', "KVL_ISA=avx10 printed %s", out[1]);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_isa");
    TCase *tc = tcase_create("isa");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_dispatcher_picks_the_widest_variant_the_cpu_has);
    tcase_add_test(tc, test_forcing_a_variant_switches_and_refuses_unknown_ones);
    tcase_add_test(tc, test_kvl_isa_selects_a_variant_and_an_unknown_name_is_refused);
    tcase_add_test(tc, test_element_casts_are_bit_identical_in_every_variant);
    tcase_add_test(tc, test_block_quantisers_are_bit_identical_in_every_variant);
    tcase_add_test(tc, test_block_dequantisers_are_bit_identical_in_every_variant);
    tcase_add_test(tc, test_softmax_loops_and_index_weighting_are_bit_identical_in_every_variant);
    suite_add_tcase(s, tc);
    return s;
}
