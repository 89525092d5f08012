#include "softmax_cpu.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "isa.h"

/* ---- the tiled softmax's exponentials ---------------------------------------------------------------- */

#define EXP_LOWEST (-87.3f) /* below it e^x is under 2^−126 */

static inline float exp_f32(float x_in)
{
    const float x = __builtin_isless(x_in, EXP_LOWEST) ? EXP_LOWEST : x_in;
    /* n = round(x·log2 e): adding 1.5·2^23 leaves the integer in the low mantissa bits of t */
    const float round_bias = 12582912.0f;
    const float t = x * 1.44269504088896341f + round_bias;
    const float n = t - round_bias;
    const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f; /* ln 2 = 0.693359375 − 2.12194440e−4 */
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const float e_r = p * r * r + r + 1.0f;
    uint32_t t_bits, bias_bits, scale_bits;
    memcpy(&t_bits, &t, sizeof t_bits);
    memcpy(&bias_bits, &round_bias, sizeof bias_bits);
    scale_bits = (t_bits - bias_bits + 127u) << 23; /* 2^n: the biased exponent n + 127 */
    float scale;
    memcpy(&scale, &scale_bits, sizeof scale);
    const float e = e_r * scale;
    return __builtin_isless(x_in, EXP_LOWEST) ? 0.0f : e;
}

/* The sum in eight running sums, s[j] into sum j mod 8, added pairwise at the end: the same bits whether
 * or not the compiler vectorises it (an `omp simd` reduction's order is the compiler's, and a build with
 * the sanitizers, which does not vectorise, would sum in another order than the optimised one). A NaN
 * sum is returned as the quiet NaN: the sum of two NaNs carries the payload of the operand the
 * instruction reads first, an order the two builds (formats/isa.h) may choose differently. */
static float sum_in_eights(const float *s, size_t n)
{
    float part[8] = {0};
    size_t j = 0;
    for (; j + 8 <= n; j += 8)
        for (size_t k = 0; k < 8; k++) part[k] += s[j + k];
    for (size_t k = 0; j < n; j++, k++) part[k] += s[j];
    const float sum = ((part[0] + part[1]) + (part[2] + part[3])) + ((part[4] + part[5]) + (part[6] + part[7]));
    return isnan(sum) ? NAN : sum;
}

/* ---- the hot loops, compiled once per instruction set (formats/isa.h) ------------------------------- */

static inline float exp_row(float *s, size_t n, float m)
{
#pragma omp simd
    for (size_t j = 0; j < n; j++) s[j] = exp_f32(s[j] - m);
    return sum_in_eights(s, n);
}

float KVF_ISA_FN(kvl_softmax_exp_f32)(float *s, size_t n, float m) { return exp_row(s, n, m); }

void KVF_ISA_FN(kvl_softmax_exp_rows_f32)(float *s, size_t R, size_t n, const float *m, float *sum)
{
    for (size_t r = 0; r < R; r++) sum[r] = exp_row(s + r * n, n, m[r]);
}

/* Running maxima side by side, lane l over s[j] with j mod 8 = l, then taken in lane order: a fixed count
 * the compiler holds in one vector, where a single running maximum would leave the loop scalar. */
#define MAX_LANES 8

float KVF_ISA_FN(kvl_max_f32)(const float *s, size_t n)
{
    float lane[MAX_LANES] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    size_t j = 0;
    for (; j + MAX_LANES <= n; j += MAX_LANES)
        for (size_t l = 0; l < MAX_LANES; l++) lane[l] = s[j + l] > lane[l] ? s[j + l] : lane[l];
    for (size_t l = 0; j < n; j++, l++) lane[l] = s[j] > lane[l] ? s[j] : lane[l];
    float m = -INFINITY;
    for (size_t l = 0; l < MAX_LANES; l++) m = lane[l] > m ? lane[l] : m;
    return m;
}

/* Down the columns: each column's maximum, and its sum in key order, held lane by lane across the row, so
 * that every width gives the same bits. */
void KVF_ISA_FN(kvl_max_cols_f32)(float *restrict mx, const float *restrict s, size_t n, size_t G)
{
    for (size_t h = 0; h < G; h++) mx[h] = -INFINITY;
    for (size_t j = 0; j < n; j++)
#pragma omp simd
        for (size_t h = 0; h < G; h++) mx[h] = s[j * G + h] > mx[h] ? s[j * G + h] : mx[h];
}

void KVF_ISA_FN(kvl_exp_cols_f32)(float *restrict s, size_t n, size_t G, const float *restrict m,
                                  float *restrict sum)
{
    for (size_t h = 0; h < G; h++) sum[h] = 0.0f;
    for (size_t j = 0; j < n; j++)
#pragma omp simd
        for (size_t h = 0; h < G; h++) {
            s[j * G + h] = exp_f32(s[j * G + h] - m[h]);
            sum[h] += s[j * G + h];
        }
    for (size_t h = 0; h < G; h++) sum[h] = isnan(sum[h]) ? NAN : sum[h];
}

void KVF_ISA_FN(kvl_scale_f32)(float *restrict y, float a, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) y[i] *= a;
}

#if KVF_ISA_ONCE

float kvl_exp_f32(float x) { return exp_f32(x); }

KVF_ISA_DISPATCH(float, kvl_softmax_exp_f32, (float *s, size_t n, float m), (s, n, m))
KVF_ISA_DISPATCH(float, kvl_max_f32, (const float *s, size_t n), (s, n))
KVF_ISA_DISPATCH_VOID(kvl_softmax_exp_rows_f32, (float *s, size_t R, size_t n, const float *m, float *sum),
                      (s, R, n, m, sum))
KVF_ISA_DISPATCH_VOID(kvl_max_cols_f32, (float *restrict mx, const float *restrict s, size_t n, size_t G),
                      (mx, s, n, G))
KVF_ISA_DISPATCH_VOID(kvl_exp_cols_f32,
                      (float *restrict s, size_t n, size_t G, const float *restrict m, float *restrict sum),
                      (s, n, G, m, sum))
KVF_ISA_DISPATCH_VOID(kvl_scale_f32, (float *restrict y, float a, size_t n), (y, a, n))

#endif /* KVF_ISA_ONCE */
