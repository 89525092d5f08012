/* draw_compare: how a notebook prints and checks the difference between its own build of a
 * mechanism and ref/'s fast path on the same input, so that the cell shows only the two
 * computations.
 *
 * The difference is printed as a decade it lies under, never as its digits: two float32 (or
 * double) computations of the same sums in different orders differ by rounding, and which
 * rounding depends on the BLAS kernel the machine runs (an AVX2 kernel and an AVX-512 one block
 * the sums differently), so digits would make the committed renderings of the notebooks true on
 * one CPU only. The decade is a tenth of the tolerance, or the tolerance itself; a difference
 * above the tolerance is printed in full and fails the cell. */
#ifndef KVL_NB_DRAW_COMPARE_H
#define KVL_NB_DRAW_COMPARE_H

#include <stddef.h>

/* max |a − b| over n values; *scale = max |b| (the size the difference is measured against). Equal
 * infinities count as no difference, so masked (−∞) scores compare too. */
double nbc_max_diff(const float *a, const float *b, size_t n, double *scale);

/* buf ← "relative difference under B (tolerance T)" for the relative difference diff/scale (diff
 * itself when scale is 0), B = T/10 or T; or "relative difference D, above the tolerance T". A
 * tolerance of 0 asks for equality: "identical", or the difference. Returns whether it is within
 * T. */
int nbc_describe(char *buf, size_t cap, double diff, double scale, double tolerance);

/* Print "what: <nbc_describe's text>" and check the relative difference against the tolerance:
 * KVL_OK, or a failure naming `what`. */
int nbc_report(const char *what, double diff, double scale, double tolerance);

#endif
