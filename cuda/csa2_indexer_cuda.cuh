/* V4.1's candidate pool on the device: block maxima, then the entries of the picked blocks.
 *
 * Build: included by cuda/csa2_indexer_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_block_scores_kernel  one thread per (query, block): the maximum of the block's scores over the
 *                            n_t entries the query sees (−∞ pads the last block, blocks past them −∞), +∞
 *                            for the block holding entry n_t − 1
 *   kvl_pool_mark_kernel     one thread per (query, entry): 1 for an entry the query sees whose block is
 *                            among its picks, else 0
 * The picks between them are kvl_topk_kernel's (topk_cuda.cuh). */
#ifndef KVL_CSA2_INDEXER_CUDA_CUH
#define KVL_CSA2_INDEXER_CUDA_CUH

#include <math.h>

#include "device.cuh"

struct kvl_pool_shape_v41 {
    size_t S, N, start, M, B, NB, P; /* queries, entries, query 0's position, ratio, block, blocks per row, picks */
};

/* entries query s sees: ⌊(start + s + 1)/M⌋, at most N */
__device__ __forceinline__ size_t kvl_pool_seen(const kvl_pool_shape_v41 &p, size_t s)
{
    const size_t n = (p.start + s + 1) / p.M;
    return n < p.N ? n : p.N;
}

/* bs[S][NB] from I[S][N] */
static __global__ void kvl_block_scores_kernel(float *bs, const float *I, kvl_pool_shape_v41 p)
{
    const size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (e >= p.S * p.NB) return;
    const size_t s = e / p.NB, b = e % p.NB, n_t = kvl_pool_seen(p, s);
    float m = -INFINITY;
    for (size_t i = b * p.B; i < (b + 1) * p.B && i < n_t; i++) m = fmaxf(m, I[s * p.N + i]);
    bs[e] = n_t > 0 && b == (n_t - 1) / p.B ? INFINITY : m;
}

/* pool[S][N] from the block picks pick[S][P] (ascending, −1 padding) */
static __global__ void kvl_pool_mark_kernel(uint8_t *pool, const int32_t *pick, kvl_pool_shape_v41 p)
{
    const size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (e >= p.S * p.N) return;
    const size_t s = e / p.N, i = e % p.N;
    uint8_t in = 0;
    if (i < kvl_pool_seen(p, s))
        for (size_t k = 0; k < p.P && pick[s * p.P + k] >= 0; k++)
            in |= static_cast<size_t>(pick[s * p.P + k]) == i / p.B;
    pool[e] = in;
}

#endif
