/* Lab solution: one decode step of MLA in its absorbed form (the contract is above the stub,
 * labs/02_mla/absorbed_decode.c). Each head folds W_UK^h into its query once, scores the stored
 * rows as one wide key, sums their latents under the weights, and applies W_UV^h once to that
 * sum. */
#include "lab.h"

#include <math.h>
#include <stdlib.h>

/* q_hat[Dc+Dr] = [W_UK^hᵀ q^C_h | q^R_h] for one head; W_UK[Dnope][Dc] */
static void absorb(float *q_hat, const float *q_h, const float *W_UK, size_t Dc, size_t Dnope,
                   size_t Dr)
{
    for (size_t c = 0; c < Dc; c++) {
        float sum = 0;
        for (size_t i = 0; i < Dnope; i++) sum += q_h[i] * W_UK[i * Dc + c];
        q_hat[c] = sum;
    }
    for (size_t i = 0; i < Dr; i++) q_hat[Dc + i] = q_h[Dnope + i];
}

/* o_hat[Dc] = Σ_j softmax_j(s_j)·c_j; s[N] holds the scores on entry */
static void weighted_latents(float *o_hat, float *s, const float *rows, size_t N, size_t Dc,
                             size_t Dr)
{
    float max = -INFINITY, sum = 0;
    for (size_t j = 0; j < N; j++) max = fmaxf(max, s[j]);
    for (size_t j = 0; j < N; j++) sum += s[j] = expf(s[j] - max);
    for (size_t c = 0; c < Dc; c++) o_hat[c] = 0;
    for (size_t j = 0; j < N; j++)
        for (size_t c = 0; c < Dc; c++) o_hat[c] += s[j] / sum * rows[j * (Dc + Dr) + c];
}

void absorbed_decode(float *o, const float *q, const float *W_UKV, const float *rows, size_t N,
                     size_t H, size_t Dc, size_t Dnope, size_t Dr, size_t Dv, float scale)
{
    const size_t Dw = Dc + Dr;
    float *q_hat = malloc(Dw * sizeof *q_hat), *o_hat = malloc(Dc * sizeof *o_hat);
    float *s = malloc((N ? N : 1) * sizeof *s);
    if (!q_hat || !o_hat || !s) abort();
    for (size_t h = 0; h < H; h++) {
        const float *W_UK = W_UKV + h * (Dnope + Dv) * Dc, *W_UV = W_UK + Dnope * Dc;
        absorb(q_hat, q + h * (Dnope + Dr), W_UK, Dc, Dnope, Dr);
        for (size_t j = 0; j < N; j++) {
            float dot = 0;
            for (size_t c = 0; c < Dw; c++) dot += q_hat[c] * rows[j * Dw + c];
            s[j] = dot * scale;
        }
        weighted_latents(o_hat, s, rows, N, Dc, Dr);
        for (size_t v = 0; v < Dv; v++) {
            float sum = 0;
            for (size_t c = 0; c < Dc; c++) sum += W_UV[v * Dc + c] * o_hat[c];
            o[h * Dv + v] = sum;
        }
    }
    free(q_hat), free(o_hat), free(s);
}
