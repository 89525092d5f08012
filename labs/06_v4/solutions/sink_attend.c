/* Lab solution: attention over picked entries with a sink per head (the contract is above the stub,
 * labs/06_v4/sink_attend.c). */
#include "lab.h"

#include <math.h>
#include <stdlib.h>

/* s[K] = scale · q_h · Y[sel[k]], −∞ for an empty pick */
static void scores(float *s, const float *q_h, const float *Y, const int32_t *sel, size_t K,
                   size_t D, float scale)
{
    for (size_t k = 0; k < K; k++) {
        if (sel[k] < 0) {
            s[k] = -INFINITY;
            continue;
        }
        float dot = 0;
        for (size_t i = 0; i < D; i++) dot += q_h[i] * Y[(size_t)sel[k] * D + i];
        s[k] = dot * scale;
    }
}

void sink_attend(float *o, const float *q, size_t H, size_t D, const float *Y, const int32_t *sel,
                 size_t K, const float *sigma, float scale)
{
    float *s = malloc(2 * (K ? K : 1) * sizeof *s), *p = s + (K ? K : 1);
    if (!s) abort();
    for (size_t h = 0; h < H; h++) {
        float *o_h = o + h * D;
        scores(s, q + h * D, Y, sel, K, D, scale);
        sink_softmax(p, s, K, sigma[h]);
        for (size_t i = 0; i < D; i++) o_h[i] = 0;
        for (size_t k = 0; k < K; k++)
            for (size_t i = 0; sel[k] >= 0 && i < D; i++)
                o_h[i] += p[k] * Y[(size_t)sel[k] * D + i];
    }
    free(s);
}
