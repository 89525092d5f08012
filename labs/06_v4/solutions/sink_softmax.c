/* Lab solution: the softmax with a sink logit (the contract is above the stub,
 * labs/06_v4/sink_softmax.c). */
#include "lab.h"

#include <math.h>

void sink_softmax(float *p, const float *s, size_t n, float sigma)
{
    float mu = sigma;
    for (size_t i = 0; i < n; i++) mu = fmaxf(mu, s[i]);
    if (mu == -INFINITY) { /* nothing valid and no sink: zeros, where e^(−∞ − (−∞)) would be NaN */
        for (size_t i = 0; i < n; i++) p[i] = 0;
        return;
    }
    float sum = expf(sigma - mu);
    for (size_t i = 0; i < n; i++) sum += p[i] = expf(s[i] - mu);
    for (size_t i = 0; i < n; i++) p[i] /= sum;
}
