/* draw_compare: a notebook's build against ref/'s fast path (draw_compare.h). */
#include "draw_compare.h"

#include <math.h>
#include <stdio.h>

#include "nb.h"

double nbc_max_diff(const float *a, const float *b, size_t n, double *scale)
{
    double d = 0;
    *scale = 0;
    for (size_t i = 0; i < n; i++) {
        const double e = a[i] == b[i] ? 0 : fabs((double)a[i] - b[i]);   /* NaN when one side is NaN */
        d = isnan(e) ? INFINITY : fmax(d, e);
        if (isfinite(b[i])) *scale = fmax(*scale, fabs((double)b[i]));
    }
    return d;
}

int nbc_report(const char *what, double diff, double scale, double tolerance)
{
    const double rel = scale > 0 ? diff / scale : diff;
    printf("%s: max |difference| %.3g, relative %.3g (tolerance %.0e)\n", what, diff, rel, tolerance);
    return nb_expect(rel <= tolerance, "%s: relative difference %g above %g", what, rel, tolerance);
}
