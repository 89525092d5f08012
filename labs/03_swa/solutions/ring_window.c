/* Lab solution: what a ring of W slots holds after T appends (the contract is above the stub,
 * labs/03_swa/ring_window.c). */
#include "lab.h"

#include <string.h>

size_t ring_window(float *out, const float *slots, size_t W, size_t D, size_t T)
{
    const size_t n = T < W ? T : W, oldest = T - n;
    for (size_t k = 0; k < n; k++) {
        const size_t p = oldest + k;
        memcpy(out + k * D, slots + (p % W) * D, D * sizeof *out);
    }
    return n;
}
