#include "norm.h"

#include <math.h>

/* y[n] = g ⊙ x / sqrt(mean(x²) + eps), g[n] or NULL */
static void rmsnorm_row_f32(float *y, const float *x, const float *g, size_t n, double eps)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) ss += (double)x[i] * (double)x[i];
    const double r = 1.0 / sqrt(ss / (double)n + eps);
    if (g)
        for (size_t i = 0; i < n; i++) y[i] = (float)((double)g[i] * ((double)x[i] * r));
    else
        for (size_t i = 0; i < n; i++) y[i] = (float)((double)x[i] * r);
}

static void rmsnorm_row_f64(double *y, const double *x, const double *g, size_t n, double eps)
{
    double ss = 0.0;
    for (size_t i = 0; i < n; i++) ss += x[i] * x[i];
    const double r = 1.0 / sqrt(ss / (double)n + eps);
    if (g)
        for (size_t i = 0; i < n; i++) y[i] = g[i] * (x[i] * r);
    else
        for (size_t i = 0; i < n; i++) y[i] = x[i] * r;
}

/* y[n] = g ⊙ (x − mean x) / sqrt(var x + eps) + b; the variance is taken about the mean already
 * computed (two passes), which avoids the cancellation of mean(x²) − mean(x)². */
static void layernorm_row_f32(float *y, const float *x, const float *g, const float *b, size_t n, double eps)
{
    double sum = 0.0, ss = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)x[i];
    const double mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) ss += ((double)x[i] - mean) * ((double)x[i] - mean);
    const double r = 1.0 / sqrt(ss / (double)n + eps);
    for (size_t i = 0; i < n; i++) y[i] = (float)((double)g[i] * (((double)x[i] - mean) * r) + (double)b[i]);
}

static void layernorm_row_f64(double *y, const double *x, const double *g, const double *b, size_t n, double eps)
{
    double sum = 0.0, ss = 0.0;
    for (size_t i = 0; i < n; i++) sum += x[i];
    const double mean = sum / (double)n;
    for (size_t i = 0; i < n; i++) ss += (x[i] - mean) * (x[i] - mean);
    const double r = 1.0 / sqrt(ss / (double)n + eps);
    for (size_t i = 0; i < n; i++) y[i] = g[i] * ((x[i] - mean) * r) + b[i];
}

void kvl_rmsnorm_f32(float *y, const float *x, const float *g, size_t T, size_t n, double eps)
{
    if (n == 0) return;
    for (size_t t = 0; t < T; t++) rmsnorm_row_f32(y + t * n, x + t * n, g, n, eps);
}

void kvl_rmsnorm_f64(double *y, const double *x, const double *g, size_t T, size_t n, double eps)
{
    if (n == 0) return;
    for (size_t t = 0; t < T; t++) rmsnorm_row_f64(y + t * n, x + t * n, g, n, eps);
}

void kvl_layernorm_f32(float *y, const float *x, const float *g, const float *b, size_t T, size_t n, double eps)
{
    if (n == 0) return;
    for (size_t t = 0; t < T; t++) layernorm_row_f32(y + t * n, x + t * n, g, b, n, eps);
}

void kvl_layernorm_f64(double *y, const double *x, const double *g, const double *b, size_t T, size_t n,
                       double eps)
{
    if (n == 0) return;
    for (size_t t = 0; t < T; t++) layernorm_row_f64(y + t * n, x + t * n, g, b, n, eps);
}
