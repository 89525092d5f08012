/* Lab solution: the online softmax over rows read one at a time (the contract is above the stub,
 * labs/00_foundations/online_softmax.c). */
#include "lab.h"

#include <math.h>
#include <string.h>

void online_softmax(float *o, const float *s, const float *V, size_t N, size_t Dv)
{
    double m = -INFINITY, l = 0;
    memset(o, 0, Dv * sizeof *o); /* o holds the running output a until the end */
    for (size_t j = 0; j < N; j++) {
        if (s[j] == -INFINITY) continue; /* a masked row weighs nothing */
        const double m_new = fmax(m, s[j]);
        const double alpha = exp(m - m_new), p = exp(s[j] - m_new);
        l = alpha * l + p;
        for (size_t i = 0; i < Dv; i++) o[i] = (float)(alpha * o[i] + p * V[j * Dv + i]);
        m = m_new;
    }
    if (l > 0)
        for (size_t i = 0; i < Dv; i++) o[i] = (float)(o[i] / l);
}
