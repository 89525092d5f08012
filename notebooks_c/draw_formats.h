/* draw_formats: what notebooks_c/05_formats.c needs around its teaching cells: the probe values
 * its encoders are checked on, numpy's printing of a rounded number, the relative error of a
 * round trip, and the chapter's figures (the E2M1 ladder; the bit layouts and an MXFP4 block).
 * Prefix dfmt_. */
#ifndef KVL_NB_DRAW_FORMATS_H
#define KVL_NB_DRAW_FORMATS_H

#include <stddef.h>
#include <stdint.h>

/* x[≤ cap] ← probes for an encoder of the format whose n_codes positive codes decode(c) lists
 * (NaN codes skipped): every value, every midpoint between neighbours and the floats just either
 * side, values past the largest, ±infinity, then random magnitudes across the range, each with
 * both signs. Returns how many were written. */
size_t dfmt_probes(float *x, size_t cap, float (*decode)(uint8_t), unsigned n_codes, uint64_t seed);

/* ‖y − x‖ / ‖x‖ over n values, in double */
double dfmt_rel_l2(const float *y, const float *x, size_t n);

/* v rounded to `decimals` places as numpy's round prints it: shortest text, "4.0" for a whole
 * number. Two rotating buffers. */
const char *dfmt_numpy_round(double v, int decimals);

/* The E2M1 ladder: mags[8], the magnitudes of codes 0 … 7. Hands the figure "fp4_ladder" to
 * nb_figure. */
int dfmt_ladder_figure(const float *mags);

/* The figure "bit_layouts": E4M3, E2M1 and E8M0 fields, each with one example (value and code),
 * and an MXFP4 block: packed[16] (32 E2M1 codes, element 2j in the low nibble of byte j) under
 * its E8M0 scale. */
typedef struct {
    float e4m3_value, e2m1_value, e8m0_value;
    uint8_t e4m3, e2m1, e8m0;
} dfmt_examples;
int dfmt_layouts_figure(const dfmt_examples *ex, const uint8_t *packed, uint8_t scale);

#endif
