/* draw_compare: how a notebook prints and checks the difference between its own build of a mechanism
 * and ref/'s fast path on the same input (notebooks 03 and 04), so that the cell shows only the two
 * computations. */
#ifndef KVL_NB_DRAW_COMPARE_H
#define KVL_NB_DRAW_COMPARE_H

#include <stddef.h>

/* max |a − b| over n values; *scale = max |b| (the size the difference is measured against). Equal
 * infinities count as no difference, so masked (−∞) scores compare too. */
double nbc_max_diff(const float *a, const float *b, size_t n, double *scale);

/* Print "what: max |difference| D, relative D/scale (tolerance T)" and check the relative difference
 * against T: KVL_OK, or a failure naming `what`. */
int nbc_report(const char *what, double diff, double scale, double tolerance);

#endif
