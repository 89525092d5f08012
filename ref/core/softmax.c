#include "softmax.h"

#include <math.h>

/* Plain softmax is the sink form with σ = −∞: exp(σ − μ) = 0 adds nothing to the denominator and
 * μ = max(−∞, max s) = max s, so both public functions share one row routine. A NaN score (or σ)
 * becomes μ and then every exp, so the whole row turns NaN instead of the NaN being skipped. */

static void softmax_row_f32(float *s, size_t n, double sigma)
{
    double mu = sigma;
    for (size_t i = 0; i < n; i++)
        if ((double)s[i] > mu || isnan(s[i])) mu = s[i];
    if (mu == -INFINITY) {
        for (size_t i = 0; i < n; i++) s[i] = 0.0f;
        return;
    }
    double sum = exp(sigma - mu);
    for (size_t i = 0; i < n; i++) {
        const double e = exp((double)s[i] - mu);
        s[i] = (float)e;
        sum += e;
    }
    for (size_t i = 0; i < n; i++) s[i] = (float)((double)s[i] / sum);
}

static void softmax_row_f64(double *s, size_t n, double sigma)
{
    double mu = sigma;
    for (size_t i = 0; i < n; i++)
        if (s[i] > mu || isnan(s[i])) mu = s[i];
    if (mu == -INFINITY) {
        for (size_t i = 0; i < n; i++) s[i] = 0.0;
        return;
    }
    double sum = exp(sigma - mu);
    for (size_t i = 0; i < n; i++) {
        s[i] = exp(s[i] - mu);
        sum += s[i];
    }
    for (size_t i = 0; i < n; i++) s[i] /= sum;
}

void kvl_softmax_f32(float *s, size_t n) { softmax_row_f32(s, n, -INFINITY); }

void kvl_softmax_f64(double *s, size_t n) { softmax_row_f64(s, n, -INFINITY); }

void kvl_softmax_sink_f32(float *s, size_t n, float sigma) { softmax_row_f32(s, n, (double)sigma); }

void kvl_softmax_sink_f64(double *s, size_t n, double sigma) { softmax_row_f64(s, n, sigma); }
