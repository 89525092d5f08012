/* Lab solution: where replay starts after a prefix-cache hit (the contract is above the stub,
 * labs/07_v41/replay_start.c). */
#include "lab.h"

size_t replay_start(size_t P, size_t n_layers, size_t W, int bounded)
{
    const size_t back = bounded ? W : n_layers * (W - 1); /* tokens before P where replay begins */
    return P > back ? P - back : 0;
}
