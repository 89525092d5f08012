/* Lab solution: a chunk of S tokens under the causal mask (the contract is above the stub,
 * labs/01_mha/causal_prefill.c). Token i at position len + i sees keys 0 … len + i: the first
 * len + i + 1 rows of K and V, which is one decode step over that prefix. */
#include "lab.h"

void causal_prefill(float *o, const float *q, const float *K, const float *V, size_t len, size_t S,
                    size_t H, size_t Hkv, size_t Dh)
{
    for (size_t i = 0; i < S; i++)
        gqa_decode(o + i * H * Dh, q + i * H * Dh, K, V, len + i + 1, H, Hkv, Dh);
}
