/* Wall-clock timing for the programs that time a step: a monotonic clock and the median of
 * repeats. */
#ifndef KVL_TIMING_H
#define KVL_TIMING_H

#include <stddef.h>

/* Seconds on the monotonic clock, from an arbitrary origin: only differences mean anything. */
double kvl_seconds(void);

/* The median of t[n], n ≥ 1 (the mean of the middle two when n is even); sorts t in place. */
double kvl_median(double *t, size_t n);

#endif
