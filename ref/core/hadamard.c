#include "hadamard.h"

#include <math.h>

#include "status.h"

int kvl_hadamard_size_ok(size_t n) { return n > 0 && (n & (n - 1)) == 0; }

/* x[n] ← H_n x: butterflies on pairs (i, i + h) inside blocks of 2h, h = 1, 2, 4, … n/2 */
static void fwht(float *x, size_t n)
{
    for (size_t h = 1; h < n; h *= 2)
        for (size_t b = 0; b < n; b += 2 * h)
            for (size_t i = b; i < b + h; i++) {
                const float a = x[i], c = x[i + h];
                x[i] = a + c;
                x[i + h] = a - c;
            }
}

int kvl_hadamard_rotate_rows_f32(float *x, size_t rows, size_t n)
{
    if (!kvl_hadamard_size_ok(n))
        return kvl_fail(KVL_EINVAL, "kvl_hadamard_rotate_rows_f32: length %zu is not a power of two", n);
    if (rows && !x) return kvl_fail(KVL_EINVAL, "kvl_hadamard_rotate_rows_f32: NULL rows");
    const float scale = (float)(1.0 / sqrt((double)n));
    for (size_t r = 0; r < rows; r++) {
        float *v = x + r * n;
        fwht(v, n);
        for (size_t i = 0; i < n; i++) v[i] *= scale;
    }
    return KVL_OK;
}
