/* Top-k selection on the device: a radix select for the k-th largest score of a row, then one ordered
 * pass that keeps every score above it and the first of those equal to it, in position order.
 *
 * Build: included by cuda/topk_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_topk_kernel  one block of 256 threads per row. Each legal score maps to an unsigned key with the
 *                    same order (−0 and +0 to one key: they tie, as in ref/core/topk.c). Eight passes of
 *                    four bits, most significant first, narrow the key of the k-th largest: each pass
 *                    counts, per thread in 16 registers, the keys that share the prefix found so far,
 *                    sums the counts over the block and picks the digit where the k-th falls. A last
 *                    pass walks the row in tiles of 256 positions: two block-wide exclusive scans give
 *                    each key equal to the threshold its rank among equals (the smaller positions win
 *                    the tie) and each kept position its place in the output, which thus comes out
 *                    ascending; −1 fills the rest. The row is read ten times, never sorted.
 *   kvl_selection_check_kernel  one thread per selected entry: flags an entry outside −1 … len − 1 */
#ifndef KVL_TOPK_CUDA_CUH
#define KVL_TOPK_CUDA_CUH

#include "element_cuda.cuh"
#include "primitives.cuh"

#define KVL_TOPK_THREADS 256
#define KVL_TOPK_WARPS (KVL_TOPK_THREADS / KVL_WARP)
#define KVL_TOPK_BITS 4
#define KVL_TOPK_BINS (1 << KVL_TOPK_BITS)

__device__ __forceinline__ bool kvl_topk_legal(float s) { return !kvl_is_nan(s) && s != -INFINITY; }

/* An unsigned key in the order of the scores (larger score, larger key); legal keys are never 0. */
__device__ __forceinline__ uint32_t kvl_topk_key(float s)
{
    const uint32_t u = __float_as_uint(s == 0.0f ? 0.0f : s);
    return u & 0x80000000u ? ~u : u | 0x80000000u;
}

/* totals[BINS] (shared) = Σ over the block of every thread's counts[BINS]; scratch[warps][BINS]. */
__device__ void kvl_topk_block_counts(kvl_smem<unsigned> totals, const unsigned counts[KVL_TOPK_BINS],
                                      kvl_smem<unsigned> scratch)
{
    const unsigned lane = threadIdx.x % KVL_WARP, warp = threadIdx.x / KVL_WARP, n_warps = blockDim.x / KVL_WARP;
    KVL_UNROLL
    for (int d = 0; d < KVL_TOPK_BINS; d++) {
        const unsigned c = kvl_warp_sum<unsigned>(counts[d]);
        if (lane == 0) scratch[warp * KVL_TOPK_BINS + d] = c;
    }
    __syncthreads();
    if (threadIdx.x < KVL_TOPK_BINS) {
        unsigned t = 0;
        for (unsigned w = 0; w < n_warps; w++) t += scratch[w * KVL_TOPK_BINS + threadIdx.x];
        totals[threadIdx.x] = t;
    }
    __syncthreads();
}

/* Legal scores of row[N] whose key has `prefix` under `mask`, counted per digit at `shift`, over the block */
__device__ void kvl_topk_histogram(kvl_smem<unsigned> totals, const float *row, size_t N, uint32_t prefix,
                                   uint32_t mask, int shift, kvl_smem<unsigned> scratch)
{
    unsigned counts[KVL_TOPK_BINS] = {};
    for (size_t s = threadIdx.x; s < N; s += blockDim.x) {
        const float v = row[s];
        const uint32_t k = kvl_topk_key(v);
        if (!kvl_topk_legal(v) || (k & mask) != prefix) continue;
        const uint32_t digit = (k >> shift) & (KVL_TOPK_BINS - 1);
        KVL_UNROLL
        for (int d = 0; d < KVL_TOPK_BINS; d++) counts[d] += digit == static_cast<uint32_t>(d);
    }
    kvl_topk_block_counts(totals, counts, scratch);
}

/* sel[S][K] from I[S][N] */
static __global__ void __launch_bounds__(KVL_TOPK_THREADS, 1)
    kvl_topk_kernel(int32_t *sel, const float *I, size_t N, size_t K)
{
    KVL_SHARED(unsigned, scratch, KVL_TOPK_WARPS * KVL_TOPK_BINS);
    KVL_SHARED(unsigned, totals, KVL_TOPK_BINS);
    const float *row = I + blockIdx.x * N;
    int32_t *out = sel + blockIdx.x * K;
    unsigned legal = 0, n_legal;
    for (size_t s = threadIdx.x; s < N; s += blockDim.x) legal += kvl_topk_legal(row[s]);
    kvl_block_exclusive_scan(legal, &n_legal, scratch);
    /* the threshold key and how many keys equal to it are kept; with no more legal scores than K, all */
    uint32_t prefix = 0, mask = 0;
    unsigned need = 0;
    if (n_legal > K) {
        need = static_cast<unsigned>(K);
        for (int shift = 32 - KVL_TOPK_BITS; shift >= 0; shift -= KVL_TOPK_BITS) {
            kvl_topk_histogram(totals, row, N, prefix, mask, shift, scratch);
            uint32_t digit = KVL_TOPK_BINS - 1;
            for (unsigned c = totals[digit]; c < need; c = totals[--digit]) need -= c;
            prefix |= digit << shift;
            mask |= static_cast<uint32_t>(KVL_TOPK_BINS - 1) << shift;
        }
    }
    const unsigned n_out = n_legal > K ? static_cast<unsigned>(K) : n_legal;
    unsigned eq_seen = 0, written = 0;
    for (size_t t0 = 0; t0 < N && written < n_out; t0 += blockDim.x) {
        const size_t s = t0 + threadIdx.x;
        const float v = s < N ? row[s] : -INFINITY;
        const uint32_t k = kvl_topk_legal(v) ? kvl_topk_key(v) : 0u;
        unsigned eq_tile, kept_tile;
        const unsigned eq_before = kvl_block_exclusive_scan(k != 0u && k == prefix, &eq_tile, scratch);
        const bool keep = k > prefix || (k != 0u && k == prefix && eq_seen + eq_before < need);
        const unsigned at = kvl_block_exclusive_scan(keep, &kept_tile, scratch);
        if (keep) out[written + at] = static_cast<int32_t>(s);
        eq_seen += eq_tile;
        written += kept_tile;
    }
    for (size_t k = n_out + threadIdx.x; k < K; k += blockDim.x) out[k] = -1;
}

/* *bad |= 1 if an entry of sel[n] lies outside −1 … len − 1 */
static __global__ void kvl_selection_check_kernel(unsigned *bad, const int32_t *sel, size_t n, size_t len)
{
    const size_t k = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (k < n && (sel[k] < -1 || (sel[k] >= 0 && static_cast<size_t>(sel[k]) >= len))) atomicOr(bad, 1u);
}

#endif
