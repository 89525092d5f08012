/* Lab: the lightning indexer's score of a chunk of queries against every cached index key
 * (chapter 4, "What it computes": I_{t,s} = Σ_j w_{t,j} · ReLU(q^I_{t,j} · k^I_s) for s ≤ t).
 *
 *   q[S][HI][DI]   the chunk's index queries, HI heads of DI channels; query i is at position
 *                  t = start + i
 *   w[S][HI]       each query's head weights (signed: a head can vote against a key)
 *   k[N][DI]       the index keys at positions 0 … N − 1, one per token, shared by every head
 *   I[S][N]        out: I[i][s] = Σ_{j < HI} w[i][j] · ReLU(Σ_{c < DI} q[i][j][c] · k[s][c])
 *                  for s ≤ start + i, and −INFINITY for s > start + i (a key from query i's future)
 *
 * ReLU(x) = max(x, 0) is applied to each head's dot product before its weight; I is never
 * softmaxed, only its order is used (top-k, the next lab).
 *
 * The grader (make lab-04) checks every element of I against kvl_index_scores_ref
 * (ref/core/index_scan.h, the scan V3.2, V4 and V4.1 share) for one decode query, a chunk from an
 * empty cache, a chunk past 1,024 keys (the CPU backend's key tile), V3.2's 64 heads of 128 and a
 * cache holding keys past the chunk's last position, within 1e-4 + 1e-5·|expected| (float32 sums of
 * HI·DI products round at about 1e-5 here; a missing ReLU, weight or mask moves a score by 1e-1 or
 * more). A masked entry must be −∞ exactly. */
#include "lab.h"

#include <math.h>
#include <string.h>

void index_scores(float *I, const float *q, const float *w, const float *k, size_t S, size_t N,
                  size_t HI, size_t DI, size_t start)
{
    (void)q, (void)w, (void)k, (void)HI, (void)DI, (void)start;
    memset(I, 0, S * N * sizeof *I);
}
