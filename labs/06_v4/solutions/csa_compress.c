/* Lab solution: the CSA compressor with its overlap (the contract is above the stub,
 * labs/06_v4/csa_compress.c). */
#include "lab.h"

#include <math.h>
#include <stdlib.h>

#include "norm.h"

/* out[n] = m[n][k] · v[k] */
static void matvec(float *out, const float *m, const float *v, size_t n, size_t k)
{
    for (size_t r = 0; r < n; r++) {
        float sum = 0;
        for (size_t j = 0; j < k; j++) sum += m[r * k + j] * v[j];
        out[r] = sum;
    }
}

/* The column of a[t] and z[t] that entry i's channel ch reads: block i−1 the first half, block i
 * the second. */
static size_t slot_column(size_t t, size_t i, size_t M, size_t c, size_t ch)
{
    return (t >= i * M ? c : 0) + ch;
}

/* entry[c] = Σ_slots softmax(z)·a per channel over blocks i−1 (if any) and i of a[T][2c],
 * z[T][2c] */
static void pool(float *entry, const float *a, const float *z, size_t i, size_t c, size_t M)
{
    const size_t first = i ? (i - 1) * M : 0, last = (i + 1) * M;
    for (size_t ch = 0; ch < c; ch++) {
        float mu = -INFINITY, den = 0, num = 0;
        for (size_t t = first; t < last; t++)
            mu = fmaxf(mu, z[t * 2 * c + slot_column(t, i, M, c, ch)]);
        for (size_t t = first; t < last; t++) {
            const size_t col = t * 2 * c + slot_column(t, i, M, c, ch);
            const float e = expf(z[col] - mu);
            den += e;
            num += e * a[col];
        }
        entry[ch] = num / den;
    }
}

void csa_compress(float *entries, const float *x, size_t T, size_t d, size_t c, size_t M,
                  const float *w_kv, const float *w_gate, const float *ape, const float *norm,
                  double eps, const kvl_rope *rope)
{
    const size_t N = T / M;
    float *a = malloc((N * M * 2 * c + 1) * sizeof *a),
          *z = malloc((N * M * 2 * c + 1) * sizeof *z);
    if (!a || !z) abort();
    for (size_t t = 0; t < N * M; t++) {
        matvec(a + t * 2 * c, w_kv, x + t * d, 2 * c, d);
        matvec(z + t * 2 * c, w_gate, x + t * d, 2 * c, d);
        for (size_t ch = 0; ch < 2 * c; ch++) z[t * 2 * c + ch] += ape[(t % M) * 2 * c + ch];
    }
    for (size_t i = 0; i < N; i++) {
        float *e = entries + i * c;
        pool(e, a, z, i, c, M);
        kvl_rmsnorm_f32(e, e, norm, 1, c, eps);
        kvl_rope_rotate_interleaved(e + c - rope->Dr, rope, (int64_t)(i * M));
    }
    free(a);
    free(z);
}
