#include "draw_formats.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb.h"
#include "rng.h"
#include "svg.h"

/* ---- probes and numbers ---------------------------------------------------------------------- */

static size_t push_both_signs(float *x, size_t n, size_t cap, float v)
{
    if (n + 2 > cap) return n;
    x[n++] = v;
    x[n++] = -v;
    return n;
}

size_t dfmt_probes(float *x, size_t cap, float (*decode)(uint8_t), unsigned n_codes, uint64_t seed)
{
    size_t n = 0;
    float max = 0;
    for (unsigned c = 0; c < n_codes; c++) {
        const float v = decode((uint8_t)c);
        if (isnan(v)) continue;
        max = fmaxf(max, v);
        n = push_both_signs(x, n, cap, v);
        const float next = c + 1 < n_codes ? decode((uint8_t)(c + 1)) : NAN;
        if (isnan(next)) continue;
        const float mid = 0.5f * (v + next);
        n = push_both_signs(x, n, cap, mid);
        n = push_both_signs(x, n, cap, nextafterf(mid, 0));
        n = push_both_signs(x, n, cap, nextafterf(mid, INFINITY));
    }
    static const float past[] = {1.03125f, 1.0625f, 1.5f, 2, 1e6f};
    for (size_t i = 0; i < sizeof past / sizeof past[0]; i++)
        n = push_both_signs(x, n, cap, max * past[i]);
    n = push_both_signs(x, n, cap, INFINITY);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    const double lo = log2(decode(1)) - 2,
                 hi = log2(max) + 1; /* below the smallest step to past the top */
    while (n + 2 <= cap) {
        float u;
        kvl_rng_uniform_f32(&rng, &u, 1, lo, hi);
        n = push_both_signs(x, n, cap, exp2f(u));
    }
    return n;
}

double dfmt_rel_l2(const float *y, const float *x, size_t n)
{
    double e = 0, t = 0;
    for (size_t i = 0; i < n; i++) {
        e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]);
        t += (double)x[i] * x[i];
    }
    return sqrt(e / t);
}

const char *dfmt_numpy_round(double v, int decimals)
{
    static char buf[2][40];
    static unsigned next;
    char *s = buf[next++ % 2];
    const double p = pow(10, decimals), r = rint(v * p) / p;
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(s, 40, "%.*g", digits, r);
        if (strtod(s, NULL) == r) break;
    }
    if (!strchr(s, '.') && !strchr(s, 'e')) strcat(s, ".0");
    return s;
}

/* ---- figures --------------------------------------------------------------------------------- */

#define SIGN_FILL "#f0c36d"
#define EXP_FILL "#9dbce6"
#define MANT_FILL "#d5e3f3"
#define SCALE_FILL "#a8d5b0"

int dfmt_ladder_figure(const float *mags)
{
    const double left = 60, right = 900, y = 110, unit = (right - left) / 6;
    svg_doc s;
    svg_begin(&s, 960, 190);
    svg_title(&s, 20, 28, 17, "E2M1: the eight magnitudes of an FP4 element");
    svg_text(
        &s, 20, 50, 13, "start",
        "rungs 0.5 apart up to 2, then 1, then 2; grey ticks: rounding midpoints (ties go to the even code)");
    svg_line(&s, left, y, right, y, "#222", 1.5);
    for (unsigned c = 0; c < 8; c++) {
        double x = left + unit * mags[c];
        svg_rect(&s, x - 5, y - 5, 10, 10, "#1f4e8c");
        svg_text(&s, x, y + 28, 14, "middle", "%g", (double)mags[c]);
        svg_text(&s, x, y - 14, 11, "middle", "0x%x", c);
        if (c < 7) {
            double m = left + unit * 0.5 * (mags[c] + mags[c + 1]);
            svg_line(&s, m, y - 8, m, y + 8, "#999", 1);
        }
    }
    svg_text(&s, left, y + 58, 12, "start",
             "the negative half mirrors it: codes 0x8-0xf (0x8 is -0)");
    svg_end(&s);
    return nb_figure("fp4_ladder", &s);
}

enum { BIT_W = 34, BIT_H = 30, BITS_X = 200 };

/* One format's fields: sign_bits, exp_bits and mant_bits boxes holding the bits of `code`, each
 * field named under its boxes, the format named on the left and its rule on the right. */
static void draw_fields(svg_doc *s, double y, const char *name, unsigned code, int sign_bits,
                        int exp_bits, int mant_bits, const char *exp_name, const char *rule,
                        const char *example)
{
    const int total = sign_bits + exp_bits + mant_bits;
    svg_title(s, 20, y + 20, 14, "%s", name);
    for (int b = 0; b < total; b++) {
        const char *fill = b < sign_bits              ? SIGN_FILL
                           : b < sign_bits + exp_bits ? EXP_FILL
                                                      : MANT_FILL;
        const double x = BITS_X + b * BIT_W;
        svg_rect(s, x, y, BIT_W - 2, BIT_H, fill);
        svg_text(s, x + BIT_W / 2.0 - 1, y + 20, 14, "middle", "%u", code >> (total - 1 - b) & 1);
    }
    const double under = y + BIT_H + 15;
    if (sign_bits) svg_text(s, BITS_X + BIT_W / 2.0, under, 11, "middle", "s");
    svg_text(s, BITS_X + (sign_bits + exp_bits / 2.0) * BIT_W, under, 11, "middle", "%s", exp_name);
    if (mant_bits)
        svg_text(s, BITS_X + (sign_bits + exp_bits + mant_bits / 2.0) * BIT_W, under, 11, "middle",
                 "m");
    const double right = BITS_X + 8 * BIT_W + 20;
    svg_text(s, right, y + 12, 13, "start", "%s", rule);
    svg_text(s, right, y + 30, 12, "start", "%s", example);
}

/* 32 E2M1 codes from packed[16], one box each (its hex code), under one E8M0 scale box */
static void draw_block(svg_doc *s, double y, const uint8_t *packed, uint8_t scale)
{
    enum { CELL = 26 };
    svg_title(s, 20, y + 20, 14, "MXFP4 block");
    svg_rect(s, BITS_X, y, 8 * BIT_W - 2, BIT_H, SCALE_FILL);
    svg_text(s, BITS_X + 4 * BIT_W, y + 20, 13, "middle", "E8M0 scale 0x%02x = 2^%d", scale,
             (int)scale - 127);
    svg_text(s, BITS_X + 8 * BIT_W + 20, y + 20, 13, "start",
             "one per 32 elements: x_i = 2^(k-127) * e2m1(q_i), k the scale's code");
    const double row = y + BIT_H + 12;
    for (int i = 0; i < 32; i++) {
        const unsigned q = packed[i / 2] >> (4 * (i % 2)) & 0xf;
        const double x = BITS_X + i * CELL;
        svg_rect(s, x, row, CELL - 2, BIT_H, q & 8 ? EXP_FILL : MANT_FILL);
        svg_text(s, x + CELL / 2.0 - 1, row + 20, 12, "middle", "%x", q);
    }
    svg_text(
        s, BITS_X, row + BIT_H + 16, 11, "start",
        "q_0 ... q_31: 4-bit E2M1 codes (sign set: darker), two per byte, element 2j in the low nibble");
    svg_text(s, BITS_X, row + BIT_H + 34, 12, "start",
             "32 x 4 + 8 = 136 bits for 32 values: 4.25 bits per element");
}

int dfmt_layouts_figure(const dfmt_examples *ex, const uint8_t *packed, uint8_t scale)
{
    char e4m3[96], e2m1[96], e8m0[96];
    snprintf(e4m3, sizeof e4m3, "example: %g = code 0x%02x", (double)ex->e4m3_value, ex->e4m3);
    snprintf(e2m1, sizeof e2m1, "example: %g = code 0x%x", (double)ex->e2m1_value, ex->e2m1);
    snprintf(e8m0, sizeof e8m0, "example: 2^%d = code 0x%02x", (int)log2f(ex->e8m0_value),
             ex->e8m0);
    svg_doc s;
    svg_begin(&s, 1160, 420);
    svg_title(&s, 20, 28, 17,
              "The bits a cache stores: E4M3 and E2M1 elements, an E8M0 scale, one MXFP4 block");
    draw_fields(
        &s, 50, "E4M3 (8 bits)", ex->e4m3, 1, 4, 3, "e (bias 7)",
        "(-1)^s 2^(e-7) (1 + m/8); e = 0: (-1)^s 2^-6 m/8; max 448 = 0 1111 110, NaN s 1111 111",
        e4m3);
    draw_fields(&s, 125, "E2M1 (4 bits)", ex->e2m1, 1, 2, 1, "e (bias 1)",
                "(-1)^s 2^(e-1) (1 + m/2); e = 0: (-1)^s m/2; max 6 = 0 11 1, no infinity, no NaN",
                e2m1);
    draw_fields(&s, 200, "E8M0 (8 bits)", ex->e8m0, 0, 8, 0, "e (bias 127)",
                "2^(e-127): no sign, no mantissa, no zero; 0xff NaN", e8m0);
    draw_block(&s, 280, packed, scale);
    svg_end(&s);
    return nb_figure("bit_layouts", &s);
}
