/* Lab solution: one decode step of grouped-query attention over a cache (the contract is above the
 * stub, labs/01_mha/gqa_decode.c). */
#include "lab.h"

#include <math.h>
#include <stdlib.h>

/* o_h[Dh] = Σ_t softmax_t(s_t) · V[t][g] for one head; s[T] holds its scores on entry */
static void weighted_values(float *o_h, float *s, const float *V, size_t T, size_t Hkv, size_t g,
                            size_t Dh)
{
    float max = -INFINITY, sum = 0;
    for (size_t t = 0; t < T; t++) max = fmaxf(max, s[t]);
    for (size_t t = 0; t < T; t++) sum += s[t] = expf(s[t] - max);
    for (size_t i = 0; i < Dh; i++) o_h[i] = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t i = 0; i < Dh; i++) o_h[i] += s[t] / sum * V[(t * Hkv + g) * Dh + i];
}

void gqa_decode(float *o, const float *q, const float *K, const float *V, size_t T, size_t H,
                size_t Hkv, size_t Dh)
{
    float *s = malloc((T ? T : 1) * sizeof *s);
    if (!s) abort();
    const float scale = 1.0f / sqrtf((float)Dh);
    for (size_t h = 0; h < H; h++) {
        const size_t g = h / (H / Hkv);
        for (size_t t = 0; t < T; t++) {
            float dot = 0;
            for (size_t i = 0; i < Dh; i++) dot += q[h * Dh + i] * K[(t * Hkv + g) * Dh + i];
            s[t] = dot * scale;
        }
        weighted_values(o + h * Dh, s, V, T, Hkv, g, Dh);
    }
    free(s);
}
