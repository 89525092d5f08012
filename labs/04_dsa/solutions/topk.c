/* Lab solution: the indexer's top-k (the contract is above the stub, labs/04_dsa/topk.c). K rounds,
 * each taking the best legal score not yet taken: O(N·K), plain for a lab. */
#include "lab.h"

#include <math.h>
#include <stdlib.h>

static int legal(float x)
{
    return !isnan(x) && x != -INFINITY;
}

/* position a ranks above position b: the larger score, on a tie the smaller position */
static int ranks_above(const float *I, size_t a, size_t b)
{
    return I[a] > I[b] || (I[a] == I[b] && a < b);
}

/* the best legal position not taken, or N when none is left */
static size_t best_left(const float *I, const unsigned char *taken, size_t N)
{
    size_t best = N;
    for (size_t s = 0; s < N; s++)
        if (legal(I[s]) && !taken[s] && (best == N || ranks_above(I, s, best))) best = s;
    return best;
}

void topk(int32_t *sel, const float *I, size_t N, size_t K)
{
    unsigned char *taken = calloc(N ? N : 1, 1);
    if (!taken) abort();
    for (size_t n = 0; n < K; n++) {
        const size_t best = best_left(I, taken, N);
        if (best == N) break;
        taken[best] = 1;
    }
    /* the taken positions read in order are the ascending list */
    size_t k = 0;
    for (size_t s = 0; s < N; s++)
        if (taken[s]) sel[k++] = (int32_t)s;
    for (; k < K; k++) sel[k] = -1;
    free(taken);
}
