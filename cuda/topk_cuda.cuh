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
 *                    ascending; −1 fills the rest. The row is read ten times, never sorted. The
 *                    readable twin: a row's ten passes run on one SM.
 *   kvl_topk_slices_kernel<GATHER>  the same select as rounds of a tournament (kvl_topk_slices_cuda): one
 *                    block per slice of L keys keeps that slice's best K, ascending; the next round
 *                    reads those lists (GATHER: position, then its score) until one slice holds what is
 *                    left, and the last round writes sel. Nothing is lost: a key among the row's best K
 *                    has fewer than K keys above it in the order (score, then smaller position), so
 *                    fewer in its slice, so its slice keeps it; the lists stay in position order, so
 *                    the ties keep ref/core/topk.c's rule.
 *                    Bound by issue rate, not bytes (tests/bench/README.md, "Design measurements").
 *   kvl_selection_check_kernel  one thread per selected entry: flags an entry outside −1 … len − 1 */
#ifndef KVL_TOPK_CUDA_CUH
#define KVL_TOPK_CUDA_CUH

#include "element_cuda.cuh"
#include "primitives.cuh"

#define KVL_TOPK_THREADS 256
#define KVL_TOPK_WARPS (KVL_TOPK_THREADS / KVL_WARP)
#define KVL_TOPK_BITS 4
#define KVL_TOPK_BINS (1 << KVL_TOPK_BITS)
#define KVL_TOPK_SLICE_BLOCKS 3 /* resident per SM (80 registers): 24 warps hide the latency of the passes' loads */
#define KVL_TOPK_MIN_SLICE 8192 /* keys: a block's ten passes over fewer would cost less than its launch */

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

/* Where a selection reads its n scores: position s of a slice of one row in place (score row[s], position
 * base + s), or through a candidate list (score row[cand[s]], position cand[s]; −1 is no candidate). */
struct kvl_topk_row_src {
    const float *row;
    size_t base;
    __device__ float score(size_t s) const { return row[s]; }
    __device__ int32_t pos(size_t s) const { return static_cast<int32_t>(base + s); }
};

struct kvl_topk_cand_src {
    const float *row;
    const int32_t *cand;
    __device__ float score(size_t s) const { return cand[s] < 0 ? -INFINITY : row[cand[s]]; }
    __device__ int32_t pos(size_t s) const { return cand[s]; }
};

/* Legal scores of src[n] whose key has `prefix` under `mask`, counted per digit at `shift`, over the block */
template <typename Src>
__device__ void kvl_topk_histogram(kvl_smem<unsigned> totals, Src src, size_t n, uint32_t prefix, uint32_t mask,
                                   int shift, kvl_smem<unsigned> scratch)
{
    unsigned counts[KVL_TOPK_BINS] = {};
    for (size_t s = threadIdx.x; s < n; s += blockDim.x) {
        const float v = src.score(s);
        const uint32_t k = kvl_topk_key(v);
        if (!kvl_topk_legal(v) || (k & mask) != prefix) continue;
        const uint32_t digit = (k >> shift) & (KVL_TOPK_BINS - 1);
        KVL_UNROLL
        for (int d = 0; d < KVL_TOPK_BINS; d++) counts[d] += digit == static_cast<uint32_t>(d);
    }
    kvl_topk_block_counts(totals, counts, scratch);
}

/* out[K_out] = the positions of the min(K, legal) best of src[n] in src's order, then −1 (K_out ≥ min(K, n)).
 * The k-th key by radix select, then one ordered pass; equal keys are kept in src's order, so a source in
 * ascending position keeps the smaller positions on ties, as ref/core/topk.c does. */
template <typename Src>
__device__ void kvl_topk_select(int32_t *out, Src src, size_t n, size_t K, size_t K_out, kvl_smem<unsigned> totals,
                                kvl_smem<unsigned> scratch)
{
    unsigned legal = 0, n_legal;
    for (size_t s = threadIdx.x; s < n; s += blockDim.x) legal += kvl_topk_legal(src.score(s));
    kvl_block_exclusive_scan(legal, &n_legal, scratch);
    /* the threshold key and how many keys equal to it are kept; with no more legal scores than K, all */
    uint32_t prefix = 0, mask = 0;
    unsigned need = 0;
    if (n_legal > K) {
        need = static_cast<unsigned>(K);
        for (int shift = 32 - KVL_TOPK_BITS; shift >= 0; shift -= KVL_TOPK_BITS) {
            kvl_topk_histogram(totals, src, n, prefix, mask, shift, scratch);
            uint32_t digit = KVL_TOPK_BINS - 1;
            for (unsigned c = totals[digit]; c < need; c = totals[--digit]) need -= c;
            prefix |= digit << shift;
            mask |= static_cast<uint32_t>(KVL_TOPK_BINS - 1) << shift;
        }
    }
    const unsigned n_out = n_legal > K ? static_cast<unsigned>(K) : n_legal;
    unsigned eq_seen = 0, written = 0;
    for (size_t t0 = 0; t0 < n && written < n_out; t0 += blockDim.x) {
        const size_t s = t0 + threadIdx.x;
        const float v = s < n ? src.score(s) : -INFINITY;
        const uint32_t k = kvl_topk_legal(v) ? kvl_topk_key(v) : 0u;
        unsigned eq_tile, kept_tile;
        const unsigned eq_before = kvl_block_exclusive_scan(k != 0u && k == prefix, &eq_tile, scratch);
        const bool keep = k > prefix || (k != 0u && k == prefix && eq_seen + eq_before < need);
        const unsigned at = kvl_block_exclusive_scan(keep, &kept_tile, scratch);
        if (keep) out[written + at] = src.pos(s);
        eq_seen += eq_tile;
        written += kept_tile;
    }
    for (size_t k = n_out + threadIdx.x; k < K_out; k += blockDim.x) out[k] = -1;
}

/* sel[S][K] from I[S][N]: the readable twin, one block per row */
static __global__ void __launch_bounds__(KVL_TOPK_THREADS, 1)
    kvl_topk_kernel(int32_t *sel, const float *I, size_t N, size_t K)
{
    KVL_SHARED(unsigned, scratch, KVL_TOPK_WARPS * KVL_TOPK_BINS);
    KVL_SHARED(unsigned, totals, KVL_TOPK_BINS);
    kvl_topk_select(sel + blockIdx.x * K, kvl_topk_row_src{I + blockIdx.x * N, 0}, N, K, K, totals, scratch);
}

/* One round of the tournament. Row r's n entries (I[r][N] itself, or candidates cand[r][n] into it when
 * GATHER) are cut into P = ⌈n / L⌉ slices of L; block r·P + p writes slice p's best min(K, legal) positions,
 * ascending, then −1, to out[r][p][K_out]. Reading the slices in order, the next round's list out[r][P·K_out]
 * is ascending in position again. */
template <bool GATHER>
__global__ void __launch_bounds__(KVL_TOPK_THREADS, KVL_TOPK_SLICE_BLOCKS)
    kvl_topk_slices_kernel(int32_t *out, const float *I, size_t N, const int32_t *cand, size_t n, size_t L, size_t K,
                           size_t K_out)
{
    KVL_SHARED(unsigned, scratch, KVL_TOPK_WARPS * KVL_TOPK_BINS);
    KVL_SHARED(unsigned, totals, KVL_TOPK_BINS);
    const size_t P = n > L ? kvl_div_up(n, L) : 1, r = blockIdx.x / P, p = blockIdx.x % P;
    const size_t len = n - p * L < L ? n - p * L : L;
    int32_t *o = out + blockIdx.x * K_out;
    if constexpr (GATHER)
        kvl_topk_select(o, kvl_topk_cand_src{I + r * N, cand + r * n + p * L}, len, K, K_out, totals, scratch);
    else
        kvl_topk_select(o, kvl_topk_row_src{I + r * N + p * L, p * L}, len, K, K_out, totals, scratch);
}

/* *bad |= 1 if an entry of sel[n] lies outside −1 … len − 1 */
static __global__ void kvl_selection_check_kernel(unsigned *bad, const int32_t *sel, size_t n, size_t len)
{
    const size_t k = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (k < n && (sel[k] < -1 || (sel[k] >= 0 && static_cast<size_t>(sel[k]) >= len))) atomicOr(bad, 1u);
}

#endif
