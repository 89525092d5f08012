/* Chapter 5's grader: make lab-05 (your files) or make lab-05 SOLUTION=1 (the worked solutions).
 * Each lab is checked against the cast or quantiser the chapter's module uses (formats/element.h,
 * formats/block.h). Codes are integers, so every check is exact: the encoders over every float32
 * boundary E4M3 and E2M1 have (each code's value, each midpoint between neighbours and one float32
 * step either side, overflow, zeros, subnormals, NaN) and a sweep of bit patterns; MXFP4 over
 * blocks built to reach each branch of its scale rule. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "element.h"
#include "element_inline.h"
#include "grade.h"
#include "lab.h"
#include "rng.h"

/* The sweep visits float32 bit patterns i · SWEEP_STRIDE for i < SWEEP_COUNT: an odd stride near
 * 2^32 / SWEEP_COUNT spreads them over every exponent, sign and low mantissa bit. */
#define SWEEP_COUNT (1u << 20)
#define SWEEP_STRIDE 4093u

typedef uint8_t (*encoder)(float);

/* a growing list of inputs */
typedef struct {
    float *x;
    size_t n, cap;
} inputs;

static void add(inputs *in, float x)
{
    if (in->n == in->cap) {
        in->cap = in->cap ? 2 * in->cap : 256;
        float *grown = grade_alloc(in->cap * sizeof *grown);
        if (in->n) memcpy(grown, in->x, in->n * sizeof *grown);
        free(in->x);
        in->x = grown;
    }
    in->x[in->n++] = x;
}

/* x and −x */
static void add_both_signs(inputs *in, float x)
{
    add(in, x);
    add(in, -x);
}

/* One case: the lab's code for every input against the definition's. A difference is reported with
 * the input that gave it, as a case of its own ("…: x = 464 (float32 bits 0x43e80000)"). */
static void check_encoder(lab_grade *g, const char *lab, const char *what, const inputs *in,
                          encoder got, encoder want)
{
    if (g->wrong) return;
    grade_case(g, "%s", what);
    uint8_t *codes = grade_alloc(in->n), *wanted = grade_alloc(in->n);
    for (size_t i = 0; i < in->n; i++) wanted[i] = want(in->x[i]);
    for (size_t i = 0; i < in->n; i++) codes[i] = got(in->x[i]);
    size_t i = 0;
    while (i < in->n && codes[i] == wanted[i]) i++;
    char name[48];
    snprintf(name, sizeof name, "%s(x)", lab);
    if (i < in->n) {
        grade_case(g, "%s: x = %.9g (float32 bits 0x%08x)", what, (double)in->x[i],
                   float_bits(in->x[i]));
        grade_u8(g, &(grade_shape){name, {1}, 0}, codes + i, wanted + i);
    } else {
        grade_u8(g, &(grade_shape){name, {in->n}, 1}, codes, wanted);
    }
    free(codes);
    free(wanted);
}

/* Inputs of a format with decode `value` and magnitude codes 0 … top (the largest finite). */
static void code_values(inputs *in, float (*value)(uint8_t), uint8_t top, uint8_t sign)
{
    for (uint8_t m = 0; m <= top; m++) {
        add(in, value(m));
        add(in, value((uint8_t)(sign | m)));
    }
}

/* each midpoint between neighbouring magnitudes (exact: one bit more than the format holds) and the
 * float32 on either side of it, both signs */
static void midpoints(inputs *in, float (*value)(uint8_t), uint8_t top)
{
    for (uint8_t m = 0; m < top; m++) {
        const float mid = (value(m) + value((uint8_t)(m + 1))) / 2;
        add_both_signs(in, mid);
        add_both_signs(in, nextafterf(mid, 0));
        add_both_signs(in, nextafterf(mid, INFINITY));
    }
}

/* past the largest finite value `max`, whose next step would be `beyond` */
static void overflow(inputs *in, float max, float beyond)
{
    const float tie = (max + beyond) / 2;
    const float past[] = {max, nextafterf(max, INFINITY), tie, nextafterf(tie, 0),
                          nextafterf(tie, INFINITY), beyond, 2 * beyond, 1e30f, FLT_MAX, INFINITY};
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++) add_both_signs(in, past[i]);
}

/* ±0, float32 subnormals and smallest normal, and the format's smallest step `step` with the values
 * around its half, the tie to 0 */
static void near_zero(inputs *in, float step)
{
    const float tiny[] = {0.0f, 0x1p-149f, 0x1p-140f, 0x1.8p-130f, 0x1p-127f, FLT_MIN,
                          step / 4, step / 2, nextafterf(step / 2, 0), nextafterf(step / 2, 1),
                          3 * step / 4, step, 1.5f * step};
    for (size_t i = 0; i < sizeof tiny / sizeof tiny[0]; i++) add_both_signs(in, tiny[i]);
}

static void nans(inputs *in)
{
    const uint32_t bits[] = {0x7FC00000u, 0xFFC00000u, 0x7F800001u,
                             0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu};
    for (size_t i = 0; i < sizeof bits / sizeof bits[0]; i++) add(in, bits_float(bits[i]));
}

static void sweep(inputs *in)
{
    for (uint32_t i = 0; i < SWEEP_COUNT; i++) add(in, bits_float(i * SWEEP_STRIDE));
}

/* A format's encoder, every boundary: `top` its largest finite magnitude code, `beyond` the value
 * the next code would have, `step` its smallest subnormal. */
typedef struct {
    const char *lab;
    encoder got, want;
    float (*value)(uint8_t);
    uint8_t top, sign;
    float beyond, step;
} element_lab;

static void check_element(lab_grade *g, const element_lab *e)
{
    inputs in[6] = {{0}};
    code_values(&in[0], e->value, e->top, e->sign);
    midpoints(&in[1], e->value, e->top);
    overflow(&in[2], e->value(e->top), e->beyond);
    near_zero(&in[3], e->step);
    nans(&in[4]);
    sweep(&in[5]);
    static const char *what[] = {
        "every code's own value",
        "midpoints between neighbouring values (ties to even) and one float32 step either side",
        "the largest finite value and past it (saturation)",
        "±0, float32 subnormals, half the smallest step (a tie to 0) and around it",
        "NaN of either sign",
        "a sweep of float32 bit patterns",
    };
    for (size_t k = 0; k < 6; k++) {
        check_encoder(g, e->lab, what[k], &in[k], e->got, e->want);
        free(in[k].x);
    }
}

static int grade_e4m3_encode_sat(void)
{
    lab_grade g;
    grade_begin(&g, "e4m3_encode_sat",
                "E4M3 1.4.3, bias 7: |x| to the nearest of 8 steps of 2^(e−3) per binade (2^−9 "
                "below 2^−6), a tie to the even code; |x| ≥ 448 and ±inf → 0x7E with the sign; "
                "NaN → 0x7F with the sign (chapter 5, \"What it computes\")");
    const element_lab e4m3 = {"e4m3_encode_sat", e4m3_encode_sat, kvf_e4m3_encode_sat,
                              kvf_e4m3_decode, 0x7E, 0x80, 480.0f, 0x1p-9f};
    check_element(&g, &e4m3);
    return grade_end(&g);
}

static int grade_e2m1_encode(void)
{
    lab_grade g;
    grade_begin(&g, "e2m1_encode",
                "E2M1 1.2.1, bias 1: |x| to the nearest of 0 0.5 1 1.5 2 3 4 6, a tie to the even "
                "code; |x| ≥ 6 and ±inf → 0x7 with the sign (bit 3); +NaN → 0x8, −NaN → 0x0 "
                "(chapter 5, \"What it computes\" and \"Where the sources disagree\")");
    const element_lab e2m1 = {"e2m1_encode", e2m1_encode, kvf_e2m1_encode, kvf_e2m1_decode,
                              0x7, 0x8, 8.0f, 0.5f};
    check_element(&g, &e2m1);
    return grade_end(&g);
}

/* ---- MXFP4 ----------------------------------------------------------------------------------- */

#define MX KVF_MX_BLOCK

/* x[n]: each block drawn in ±1, then scaled by 2^e with e drawn from [lo, hi] per block */
static void draw_blocks(kvl_rng *rng, float *x, size_t n, int lo, int hi)
{
    kvl_rng_uniform_f32(rng, x, n, -1, 1);
    for (size_t b = 0; b < n / MX; b++) {
        const int e = lo + (int)(kvl_rng_next_u64(rng) % (uint64_t)(hi - lo + 1));
        for (size_t i = 0; i < MX; i++) x[b * MX + i] = ldexpf(x[b * MX + i], e);
    }
}

/* block b all +0, block b + 1 all −0, block b + 2 alternating */
static void zero_blocks(float *x)
{
    for (size_t i = 0; i < MX; i++) {
        x[i] = 0.0f;
        x[MX + i] = -0.0f;
        x[2 * MX + i] = i % 2 ? -0.0f : 0.0f;
    }
}

/* block b: values in ±1e-3 and one of magnitude 1000 at position b, its sign alternating by
 * block */
static void one_large(kvl_rng *rng, float *x, size_t blocks)
{
    kvl_rng_uniform_f32(rng, x, blocks * MX, -1e-3, 1e-3);
    for (size_t b = 0; b < blocks; b++) x[b * MX + b % MX] = b % 2 ? -1000.0f : 1000.0f;
}

/* one block per maximum in `amax`, the rest drawn in ±amax; the maximum's sign alternates */
static void set_maxima(kvl_rng *rng, float *x, const float *amax, size_t blocks)
{
    for (size_t b = 0; b < blocks; b++) {
        kvl_rng_uniform_f32(rng, x + b * MX, MX, -(double)amax[b], (double)amax[b]);
        x[b * MX + (b * 7) % MX] = b % 2 ? -amax[b] : amax[b];
    }
}

/* block maxima at, around and between powers of two: the floor rule's edges (4·2^k gives quotients
 * up to 4 exactly; just below 8·2^k saturates at 6), and around float32's smallest normal and
 * its largest */
static const float maxima[] = {
    4.0f, 0x1.fffffep2f, 6.0f, 7.0f, 0x1p-3f, 0x1.fffffep-1f, 1e-30f, 3e20f,
    0x1p-149f, 0x1p-130f, 0x1.fffffcp-127f, FLT_MIN, 0x1.8p-126f, 0x1p-125f, 0x1p-124f, 0x1p-123f,
    FLT_MAX, 0x1p127f, 0x1.fffffep126f, 0x1p126f,
};
#define N_MAXIMA (sizeof maxima / sizeof maxima[0])

/* blocks under scale 1 (a 4 in each) whose other values sit on, and one float32 step either side
 * of, the midpoints between E2M1's magnitudes */
static size_t midpoint_blocks(float *x)
{
    static const float mid[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    size_t n = 0;
    for (int side = -1; side <= 1; side++)
        for (int sign = 0; sign < 2; sign++) {
            float *b = x + n;
            for (size_t i = 0; i < MX; i++) {
                float v = mid[i % 7];
                if (side) v = nextafterf(v, side * INFINITY);
                b[i] = sign ? -v : v;
            }
            b[MX - 1] = 4.0f;
            n += MX;
        }
    return n;
}

/* One MXFP4 case over x[n]: scales and packed codes against kvf_quant_mxfp4's. The outputs start
 * filled with 0xAA, so that a byte left unwritten is a difference. */
static void check_mxfp4(lab_grade *g, const float *x, size_t n)
{
    if (g->wrong) return;
    const size_t blocks = n / MX;
    uint8_t *codes = grade_alloc(n / 2), *scales = grade_alloc(blocks);
    uint8_t *want_codes = grade_alloc(n / 2), *want_scales = grade_alloc(blocks);
    if (kvf_quant_mxfp4(want_codes, want_scales, x, n) != KVF_OK) abort();
    memset(codes, 0xAA, n / 2);
    memset(scales, 0xAA, blocks);
    mxfp4_quant(codes, scales, x, n);
    grade_u8(g, &(grade_shape){"scales", {blocks}, 1}, scales, want_scales);
    grade_u8(g, &(grade_shape){"codes", {blocks, MX / 2}, 2}, codes, want_codes);
    free(codes), free(scales), free(want_codes), free(want_scales);
}

static int grade_mxfp4_quant(void)
{
    lab_grade g;
    grade_begin(&g, "mxfp4_quant",
                "per block of 32: k = ⌊log2 amax⌋ − 2 (amax < 2^−126 read as 2^−126, k ≥ −127), "
                "scales[b] = k + 127, q_i = e2m1(x_i / 2^k) saturating at ±6; codes[b][j] = "
                "q_2j | q_2j+1 << 4 (chapter 5, \"What it computes\")");
    kvl_rng rng;
    kvl_rng_seed(&rng, 501);
    float *x = grade_alloc(64 * MX * sizeof *x);

    grade_case(&g, "one block of values in ±1");
    draw_blocks(&rng, x, MX, 0, 0);
    check_mxfp4(&g, x, MX);

    grade_case(&g, "64 blocks, each scaled by its own 2^e, e in −20 … 20");
    draw_blocks(&rng, x, 64 * MX, -20, 20);
    check_mxfp4(&g, x, 64 * MX);

    grade_case(&g, "all-zero blocks: +0, −0, and the two alternating");
    zero_blocks(x);
    check_mxfp4(&g, x, 3 * MX);

    grade_case(&g, "a single ±1000 among values in ±1e-3, at each position of its block");
    one_large(&rng, x, MX);
    check_mxfp4(&g, x, MX * MX);

    grade_case(&g, "block maxima at and below powers of two, 6, 7, around 2^−126, near FLT_MAX");
    set_maxima(&rng, x, maxima, N_MAXIMA);
    check_mxfp4(&g, x, N_MAXIMA * MX);

    grade_case(&g, "scale 1, quotients on the midpoints between E2M1 values and a step each side");
    check_mxfp4(&g, x, midpoint_blocks(x));

    free(x);
    return grade_end(&g);
}

int main(void)
{
    static const grade_fn labs[] = {grade_e4m3_encode_sat, grade_e2m1_encode, grade_mxfp4_quant};
    return grade_main(labs, sizeof labs / sizeof labs[0]);
}
