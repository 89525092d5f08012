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

void kvl_online_start(kvl_online *st, float *acc, size_t Dv, float sigma)
{
    st->m = sigma;
    st->l = sigma == -INFINITY ? 0.0 : 1.0;
    for (size_t i = 0; i < Dv; i++) acc[i] = 0.0f;
}

void kvl_online_step(kvl_online *st, float *acc, float s, const float *v, size_t Dv)
{
    if (s == -INFINITY) return;
    if (isnan(s)) {
        st->l = NAN;
        return;
    }
    const double m = (double)s > st->m ? (double)s : st->m;
    const double alpha = exp(st->m - m), p = exp((double)s - m);
    st->m = m;
    st->l = alpha * st->l + p;
    for (size_t i = 0; i < Dv; i++) acc[i] = (float)(alpha * acc[i] + p * v[i]);
}

void kvl_online_finish(float *o, const kvl_online *st, const float *acc, size_t Dv)
{
    for (size_t i = 0; i < Dv; i++) o[i] = st->l > 0.0 ? (float)(acc[i] / st->l) : isnan(st->l) ? NAN : 0.0f;
}
