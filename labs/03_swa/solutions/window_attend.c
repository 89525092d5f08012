/* Lab solution: a chunk's attention under a sliding window (the contract is above the stub,
 * labs/03_swa/window_attend.c). Token i at t = start + i reads the keys first … t, a contiguous run
 * of at most W rows. */
#include "lab.h"

#include <math.h>
#include <stdlib.h>

/* The first key position t sees: max(0, t − W + 1), or 0 without a window */
static size_t first_visible(size_t t, size_t W)
{
    return W == 0 || t < W ? 0 : t - W + 1;
}

/* o_h[Dh] = Σ_k softmax_k(s_k)·V[first + k][g] over n keys; s[n] holds the scores on entry */
static void weighted_values(float *o_h, float *s, const float *V, size_t first, size_t n,
                            size_t Hkv, size_t g, size_t Dh)
{
    float max = -INFINITY, sum = 0;
    for (size_t k = 0; k < n; k++) max = fmaxf(max, s[k]);
    for (size_t k = 0; k < n; k++) sum += s[k] = expf(s[k] - max);
    for (size_t i = 0; i < Dh; i++) o_h[i] = 0;
    for (size_t k = 0; k < n; k++)
        for (size_t i = 0; i < Dh; i++) o_h[i] += s[k] / sum * V[((first + k) * Hkv + g) * Dh + i];
}

void window_attend(float *o, const float *q, const float *K, const float *V, size_t start, size_t S,
                   size_t W, size_t H, size_t Hkv, size_t Dh)
{
    float *s = malloc((start + S ? start + S : 1) * sizeof *s);
    if (!s) abort();
    const float scale = 1.0f / sqrtf((float)Dh);
    for (size_t i = 0; i < S; i++) {
        const size_t t = start + i, first = first_visible(t, W), n = t - first + 1;
        for (size_t h = 0; h < H; h++) {
            const size_t g = h / (H / Hkv);
            const float *q_h = q + (i * H + h) * Dh;
            for (size_t k = 0; k < n; k++) {
                float dot = 0;
                for (size_t c = 0; c < Dh; c++) dot += q_h[c] * K[((first + k) * Hkv + g) * Dh + c];
                s[k] = dot * scale;
            }
            weighted_values(o + (i * H + h) * Dh, s, V, first, n, Hkv, g, Dh);
        }
    }
    free(s);
}
