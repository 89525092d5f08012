/* V4.1's candidate pool on the device: block maxima, then the entries of the picked blocks.
 *
 * Build: included by cuda/v41_indexer_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_block_scores_kernel  one thread per (query, block): the maximum of the block's scores over the
 *                            n_t entries the query sees (−∞ pads the last block, blocks past them −∞), +∞
 *                            for the block holding entry n_t − 1
 *   kvl_pool_mark_kernel     one thread per (query, entry): 1 for an entry the query sees whose block is
 *                            among its picks, else 0
 * The picks between them are kvl_topk_kernel's (topk_cuda.cuh). The scores over the pool:
 *   kvl_pool_count_kernel    one block of 256 threads per (chunk of 2048 entries, query): how many entries
 *                            of the chunk the pool marks (a block-wide scan's total)
 *   kvl_pool_list_kernel     the same blocks: the chunk's place in the row's list (the counts of the chunks
 *                            before it), then tiles of 256 entries, a block-wide exclusive scan placing each
 *                            marked entry, so the list comes out ascending; −∞ into the scores of the
 *                            entries left out; the row's last chunk writes the list's length
 *   kvl_pool_scores_kernel<R>  kvl_index_scores_kernel's tiles (dsa_cuda.cuh) over the list instead of a
 *                            run of entries: one block per (split of 256 listed entries, query), each tile
 *                            gathers the rows the list names; a split past the list's length returns at
 *                            once, so keys read and products done are the pool's, not the N entries'. */
#ifndef KVL_CSA2_INDEXER_CUDA_CUH
#define KVL_CSA2_INDEXER_CUDA_CUH

#include <math.h>

#include "device.cuh"
#include "dsa_cuda.cuh"

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

#define KVL_POOL_CHUNK 2048 /* pool entries per block of the list kernels: 8 per thread */

struct kvl_pool_list_shape {
    size_t S, N, C; /* queries, entries, chunks of KVL_POOL_CHUNK per row */
};

/* one past chunk c's last entry */
__device__ __forceinline__ size_t kvl_pool_chunk_end(const kvl_pool_list_shape &p, size_t c)
{
    const size_t end = (c + 1) * KVL_POOL_CHUNK;
    return end < p.N ? end : p.N;
}

/* n_in[S][C] from pool[S][N]: the marked entries of each chunk */
static __global__ void kvl_pool_count_kernel(unsigned *n_in, const uint8_t *pool, kvl_pool_list_shape p)
{
    KVL_SHARED(unsigned, scratch, KVL_WARP);
    const size_t s = blockIdx.y, c = blockIdx.x, end = kvl_pool_chunk_end(p, c);
    unsigned n = 0, total;
    for (size_t i = c * KVL_POOL_CHUNK + threadIdx.x; i < end; i += blockDim.x) n += pool[s * p.N + i] != 0;
    kvl_block_exclusive_scan(n, &total, scratch);
    if (threadIdx.x == 0) n_in[s * p.C + c] = total;
}

/* list[S][N]: row s's marked entries, ascending, n_pool[s] of them; I[S][N] = −∞ at the unmarked entries */
static __global__ void kvl_pool_list_kernel(int32_t *list, unsigned *n_pool, float *I, const uint8_t *pool,
                                            const unsigned *n_in, kvl_pool_list_shape p)
{
    KVL_SHARED(unsigned, scratch, KVL_WARP);
    const size_t s = blockIdx.y, c = blockIdx.x, end = kvl_pool_chunk_end(p, c);
    unsigned before = 0, at;
    for (size_t k = threadIdx.x; k < c; k += blockDim.x) before += n_in[s * p.C + k];
    kvl_block_exclusive_scan(before, &at, scratch);
    for (size_t t0 = c * KVL_POOL_CHUNK; t0 < end; t0 += blockDim.x) {
        const size_t i = t0 + threadIdx.x;
        const bool in = i < end && pool[s * p.N + i] != 0;
        unsigned tile;
        const unsigned k = kvl_block_exclusive_scan(in, &tile, scratch);
        if (in) list[s * p.N + at + k] = static_cast<int32_t>(i);
        else if (i < end) I[s * p.N + i] = -INFINITY;
        at += tile;
    }
    if (c == p.C - 1 && threadIdx.x == 0) n_pool[s] = at;
}

/* key r of a tile whose entries a list names from `at` on */
struct kvl_index_listed {
    const uint8_t *rows;
    size_t row_bytes;
    const int32_t *at;
    __device__ const uint8_t *operator()(size_t r) const { return rows + static_cast<size_t>(at[r]) * row_bytes; }
};

struct kvl_pool_scores_shape {
    size_t S, N, HI, DI; /* queries, entries, index heads, head width */
};

/* I[S][N] at the listed entries list[S][N] (n_pool[s] of row s) from q_idx[S][HI][DI], w_idx[S][HI] and the
 * keys */
template <typename R>
__global__ void __launch_bounds__(KVL_IDX_THREADS)
    kvl_pool_scores_kernel(float *I, const float *q_idx, const float *w_idx, const int32_t *list,
                           const unsigned *n_pool, kvl_pool_scores_shape sh, kvl_index_keys keys)
{
    KVL_DYNAMIC_SHARED(float, smem);
    const size_t HI = sh.HI, DI = sh.DI, s = blockIdx.y, n = n_pool[s];
    const size_t lo = blockIdx.x * static_cast<size_t>(KVL_IDX_SPLIT);
    if (lo >= n) return;
    const size_t hi = lo + KVL_IDX_SPLIT < n ? lo + KVL_IDX_SPLIT : n;
    kvl_smem<float> q_s = smem, w_s = q_s + HI * DI, k_s = w_s + HI;
    const unsigned j = threadIdx.x / KVL_IDX_LANES, part = threadIdx.x % KVL_IDX_LANES;
    const int32_t *row_list = list + s * sh.N;
    kvl_index_query_load(q_s, w_s, q_idx + s * HI * DI, w_idx + s * HI, HI, DI);
    for (size_t tile = lo; tile < hi; tile += KVL_IDX_TK) {
        const kvl_index_listed row{keys.rows, keys.row_bytes, row_list + tile};
        const float acc = kvl_index_tile_scores<R>(k_s, q_s, w_s, row, hi - tile, HI, DI);
        if (part == 0 && tile + j < hi) I[s * sh.N + static_cast<size_t>(row_list[tile + j])] = acc;
    }
}

#endif
