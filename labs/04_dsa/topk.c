/* Lab: the indexer's top-k, the set of positions a query's attention may read (chapter 4, "What it
 * computes": S_t = the min(K, t + 1) largest I_{t,s}).
 *
 *   I[N]     one query's index scores; −INFINITY marks a position it may not read (its future), and
 *            NaN is never selected either. Every other value, negative or +INFINITY, is legal.
 *   sel[K]   out: the positions of the min(K, #legal) largest legal scores, in ASCENDING position
 *            order, then −1 in each slot left over
 *
 * The project's tie rule (ref/core/topk.h, so that the CPU and CUDA agree exactly): score a ranks
 * above score b when it is larger, or equal (−0 equals +0) at a smaller position. Which positions
 * are picked follows that order; the order they are stored in is ascending position, as
 * DeepSeek-V4.1-Flash's inference code stores them.
 *
 * The grader (make lab-04) checks every entry of sel exactly (a position is right or wrong) against
 * kvl_topk for distinct scores, K = 1, scores with many ties cut inside a tie, −∞ tails with K past
 * the legal count, NaN entries, K larger than N, rows with no legal entry, negative scores with +∞
 * and ±0, and a row of 1,100 scores. */
#include "lab.h"

#include <math.h>

void topk(int32_t *sel, const float *I, size_t N, size_t K)
{
    (void)I, (void)N;
    for (size_t k = 0; k < K; k++) sel[k] = 0;
}
