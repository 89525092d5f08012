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
        const double e =
            a[i] == b[i] ? 0 : fabs((double)a[i] - b[i]); /* NaN when one side is NaN */
        d = isnan(e) ? INFINITY : fmax(d, e);
        if (isfinite(b[i])) *scale = fmax(*scale, fabs((double)b[i]));
    }
    return d;
}

int nbc_describe(char *buf, size_t cap, double diff, double scale, double tolerance)
{
    const double rel = scale > 0 ? diff / scale : diff;
    const int within = rel <= tolerance;
    if (tolerance == 0)
        snprintf(buf, cap, within ? "identical" : "differ by %.3g, relative %.3g", diff, rel);
    else if (!within)
        snprintf(buf, cap, "relative difference %.3g, above the tolerance %.0e", rel, tolerance);
    else
        snprintf(buf, cap, "relative difference under %.0e (tolerance %.0e)",
                 rel < tolerance / 10 ? tolerance / 10 : tolerance, tolerance);
    return within;
}

int nbc_report(const char *what, double diff, double scale, double tolerance)
{
    char text[160];
    const int within = nbc_describe(text, sizeof text, diff, scale, tolerance);
    printf("%s: %s\n", what, text);
    return nb_expect(within, "%s: %s", what, text);
}
