/* Lab solution: YaRN's frequency table, DeepSeek's form (the contract is above the stub,
 * labs/00_foundations/yarn_freqs.c). */
#include "lab.h"

#include <math.h>

/* the pair index whose wavelength fits n times into L */
static double corr(double n, size_t Dr, double base, double L)
{
    return (double)Dr * log(L / (2 * M_PI * n)) / (2 * log(base));
}

void yarn_freqs(double *theta, size_t Dr, double base, double s, double L, double beta_fast,
                double beta_slow)
{
    const double lo = fmax(floor(corr(beta_fast, Dr, base, L)), 0);
    double hi = fmin(ceil(corr(beta_slow, Dr, base, L)), (double)Dr - 1);
    if (hi == lo) hi += 0.001; /* a ramp of zero width would divide by zero */
    for (size_t i = 0; i < Dr / 2; i++) {
        const double plain = pow(base, -2.0 * (double)i / (double)Dr);
        const double g = fmin(fmax(((double)i - lo) / (hi - lo), 0), 1);
        theta[i] = plain * (1 - g) + plain / s * g;
    }
}
