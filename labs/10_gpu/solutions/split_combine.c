/* Worked solution: the combine of split-KV partials (the contract is in ../split_combine.c). */
#include "lab.h"

#include <math.h>
#include <string.h>

void split_combine(float *o, const float *m, const float *l, const float *acc, size_t S, size_t D)
{
    double mx = -INFINITY;
    for (size_t p = 0; p < S; p++) mx = fmax(mx, m[p]);
    memset(o, 0, D * sizeof *o);
    /* no split saw a row: the output is zero, as the online softmax leaves it */
    if (mx == -INFINITY) return;
    double sum = 0;
    for (size_t p = 0; p < S; p++) sum += exp(m[p] - mx) * l[p];
    for (size_t d = 0; d < D; d++) {
        double weighted = 0;
        for (size_t p = 0; p < S; p++) weighted += exp(m[p] - mx) * acc[p * D + d];
        o[d] = (float)(weighted / sum);
    }
}
