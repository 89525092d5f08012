/* Lab solution: the lightning indexer's score (the contract is above the stub,
 * labs/04_dsa/index_scores.c). */
#include "lab.h"

#include <math.h>

/* Σ_j w_j · ReLU(q_j · key) for one query's heads q[HI][DI], w[HI] and one key[DI] */
static float score(const float *q, const float *w, const float *key, size_t HI, size_t DI)
{
    float I = 0;
    for (size_t j = 0; j < HI; j++) {
        float dot = 0;
        for (size_t c = 0; c < DI; c++) dot += q[j * DI + c] * key[c];
        I += w[j] * fmaxf(dot, 0);
    }
    return I;
}

void index_scores(float *I, const float *q, const float *w, const float *k, size_t S, size_t N,
                  size_t HI, size_t DI, size_t start)
{
    for (size_t i = 0; i < S; i++) {
        const float *qi = q + i * HI * DI, *wi = w + i * HI;
        for (size_t s = 0; s < N; s++)
            I[i * N + s] = s <= start + i ? score(qi, wi, k + s * DI, HI, DI) : -INFINITY;
    }
}
