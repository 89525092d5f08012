/* The CPU backend's softmax pieces: the exponentials, maxima and rescales of a softmax taken a tile at
 * a time (cpu/attend_cpu.h) or a block of masked rows at a time (the prefill's chunk), in float with an
 * e^x that vectorises, compiled once per instruction set (formats/isa.h). ref/core/softmax.h's softmax
 * and online softmax are the definitions they are held to (tests/test_core_norm_softmax.c,
 * tests/test_core_isa.c). */
#ifndef KVL_SOFTMAX_CPU_H
#define KVL_SOFTMAX_CPU_H

#include <stddef.h>

/* The exponentials of a tiled softmax (cpu/attend_cpu.h), whose running max m is at least every
 * score: s[j] ← e^{s[j] − m} by kvl_exp_f32 for j < n, and their float sum returned (in eight running
 * sums, s[j] into sum j mod 8, added pairwise: one order on every build). A score of −∞ gives 0; a NaN
 * stays NaN and makes the sum the quiet NaN. */
float kvl_softmax_exp_f32(float *s, size_t n, float m);

/* The same for R rows at once, s[R][n] (rows n apart), row r against m[r], its sum in sum[r]: one call for
 * a group's rows of a tile, where a call a row spent more time setting up than exponentiating 64 scores.
 * m[r] = +∞ gives the row weights 0 (a NaN stays NaN): a head with nothing visible yet. */
void kvl_softmax_exp_rows_f32(float *s, size_t R, size_t n, const float *m, float *sum);

/* The largest element of s[n] that is not NaN (a NaN is passed over: the exp then turns it into NaN),
 * −∞ if there is none (n = 0, or all NaN); between +0 and −0, either. A tiled softmax's tile maximum. */
float kvl_max_f32(const float *s, size_t n);

/* The same two down the columns of s[n][G] (key j's scores at s + j·G, a head per column: the key-major
 * scores of cpu/many_rows.h): mx[h] the largest of column h that is not NaN (−∞ if none), and
 * s[j][h] ← e^{s[j][h] − m[h]} with sum[h] their float sum in key order (the quiet NaN if it is NaN). */
void kvl_max_cols_f32(float *mx, const float *s, size_t n, size_t G);
void kvl_exp_cols_f32(float *s, size_t n, size_t G, const float *m, float *sum);

/* y[n] ← a·y[n]: a tiled softmax's rescale of its accumulator to a new maximum, and its final division. */
void kvl_scale_f32(float *y, float a, size_t n);

/* kvl_softmax_exp_f32 and its rows form, kvl_max_f32, the column forms and kvl_scale_f32 run the variant
 * formats/isa.h chooses for the CPU; every variant gives the same bits. */

/* e^x in float for x ≤ 88: within KVL_EXP_F32_ULP units in the last place of e^x for x ≥ −87.3, and 0
 * below (where e^x < 1.2·10^−38, under float's smallest normal); −∞ gives 0, NaN gives NaN, 0 gives
 * exactly 1. Written without a branch, so that a loop of them vectorises, which expf's does not:
 * x = n·ln 2 + r with n the nearest integer to x/ln 2 and |r| ≤ ln 2 / 2 (ln 2 in Cody and Waite's
 * two parts, so that x − n·ln 2 loses nothing to cancellation), e^r = 1 + r + r²·P(r) with Cephes'
 * degree-5 P for expf, and 2^n set straight into the exponent bits. */
#define KVL_EXP_F32_ULP 2
float kvl_exp_f32(float x);

#endif
