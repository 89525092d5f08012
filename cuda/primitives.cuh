/* Block-level cooperation, written once for every kernel in cuda/: warp and block reductions, the
 * maximum over a group of lanes (a quantiser's block), the merge of two partial softmaxes, and the
 * warp's bf16 matrix product.
 *
 * Reductions combine lanes with butterfly shuffles (__shfl_xor_sync), so every lane ends with the
 * result (of its group of lanes, for the group forms); the block's exclusive scan climbs with
 * __shfl_up_sync. Block reductions and the scan need blockDim.x a multiple of 32, one-dimensional blocks,
 * and a shared scratch of 32 words; they end with a barrier, so the scratch can be used again at once. */
#ifndef KVL_PRIMITIVES_CUH
#define KVL_PRIMITIVES_CUH

#include <math.h>

#include "device.cuh"

#define KVL_FULL_MASK 0xFFFFFFFFu
#define KVL_WARP 32

/* ---- lanes and warps ------------------------------------------------------------------------------- */

/* Maximum of v over the G consecutive lanes of an aligned group (G a power of two, at most 32). */
template <int G> __device__ __forceinline__ float kvl_group_max(float v)
{
    static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "a lane group is a power of two up to 32");
    KVL_UNROLL
    for (int k = G / 2; k > 0; k /= 2) v = fmaxf(v, __shfl_xor_sync(KVL_FULL_MASK, v, k));
    return v;
}

__device__ __forceinline__ float kvl_warp_max(float v) { return kvl_group_max<KVL_WARP>(v); }

/* Sum of v over the G consecutive lanes of an aligned group. */
template <int G> __device__ __forceinline__ float kvl_group_sum(float v)
{
    static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "a lane group is a power of two up to 32");
    KVL_UNROLL
    for (int k = G / 2; k > 0; k /= 2) v += __shfl_xor_sync(KVL_FULL_MASK, v, k);
    return v;
}

/* T float, or double where a sum needs more than float's precision */
template <typename T> __device__ __forceinline__ T kvl_warp_sum(T v)
{
    KVL_UNROLL
    for (int k = KVL_WARP / 2; k > 0; k /= 2) v += __shfl_xor_sync(KVL_FULL_MASK, v, k);
    return v;
}

/* ---- the block -------------------------------------------------------------------------------------- */

struct kvl_op_sum {
    __device__ static float warp(float v) { return kvl_warp_sum<float>(v); }
    __device__ static float identity(void) { return 0.0f; }
};
struct kvl_op_max {
    __device__ static float warp(float v) { return kvl_warp_max(v); }
    __device__ static float identity(void) { return -INFINITY; }
};

/* The reduction of v over the block, in every thread; scratch[32] in shared memory. */
template <typename Op> __device__ float kvl_block_reduce(float v, kvl_smem<float> scratch)
{
    const unsigned lane = threadIdx.x % KVL_WARP, warp = threadIdx.x / KVL_WARP, n_warps = blockDim.x / KVL_WARP;
    v = Op::warp(v);
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < n_warps ? static_cast<float>(scratch[lane]) : Op::identity();
    v = Op::warp(v);
    __syncthreads();
    return v;
}

__device__ __forceinline__ float kvl_block_sum(float v, kvl_smem<float> scratch)
{
    return kvl_block_reduce<kvl_op_sum>(v, scratch);
}

__device__ __forceinline__ float kvl_block_max(float v, kvl_smem<float> scratch)
{
    return kvl_block_reduce<kvl_op_max>(v, scratch);
}

/* Σ v over the block before this thread (threads in order), and *total over all; scratch[warps]. */
__device__ __forceinline__ unsigned kvl_block_exclusive_scan(unsigned v, unsigned *total, kvl_smem<unsigned> scratch)
{
    const unsigned lane = threadIdx.x % KVL_WARP, warp = threadIdx.x / KVL_WARP, n_warps = blockDim.x / KVL_WARP;
    unsigned x = v;
    KVL_UNROLL
    for (int o = 1; o < KVL_WARP; o *= 2) {
        const unsigned y = __shfl_up_sync(KVL_FULL_MASK, x, o);
        if (lane >= static_cast<unsigned>(o)) x += y;
    }
    if (lane == KVL_WARP - 1) scratch[warp] = x;
    __syncthreads();
    unsigned before = 0, all = 0;
    for (unsigned w = 0; w < n_warps; w++) {
        const unsigned c = scratch[w];
        before += w < warp ? c : 0u;
        all += c;
    }
    __syncthreads();
    *total = all;
    return before + x - v;
}

/* ---- softmax in parts --------------------------------------------------------------------------------
 * A part of a softmax over some of the scores s_j: its maximum m and l = Σ_j exp(s_j − m), with the
 * weighted sum o = Σ_j exp(s_j − m)·v_j kept by the caller. A part with no scores is {−∞, 0}.
 * Two parts merge into {m, l_a·f_a + l_b·f_b} with m = max(m_a, m_b), f = exp(m_part − m); the caller
 * scales each o by its f and adds. The softmax is o / l of the merge of all parts, in any grouping:
 * flash-decoding merges splits, the kernels merge warps, tiles and splits with this one rule. */
struct kvl_softmax_part {
    float m, l;
};

__device__ __forceinline__ kvl_softmax_part kvl_softmax_empty(void) { return kvl_softmax_part{-INFINITY, 0.0f}; }

__device__ __forceinline__ kvl_softmax_part kvl_softmax_merge(kvl_softmax_part a, kvl_softmax_part b, float *fa,
                                                               float *fb)
{
    const float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) {
        *fa = *fb = 0.0f;
        return kvl_softmax_empty();
    }
    *fa = expf(a.m - m);
    *fb = expf(b.m - m);
    return kvl_softmax_part{m, a.l * *fa + b.l * *fb};
}

/* A part extended by 32 more scores, one per lane of the warp (−∞ for none): returns the new part,
 * with *p = exp(s − m') for this lane's score and *f = exp(m − m') the factor the part's weighted sums
 * take, m' the new maximum (every lane gets the same part and f). */
__device__ __forceinline__ kvl_softmax_part kvl_softmax_extend_warp(kvl_softmax_part run, float s, float *p, float *f)
{
    const float m = fmaxf(run.m, kvl_warp_max(s));
    if (m == -INFINITY) {
        *p = *f = 0.0f;
        return kvl_softmax_empty();
    }
    *p = expf(s - m);
    *f = expf(run.m - m);
    return kvl_softmax_part{m, run.l * *f + kvl_warp_sum<float>(*p)};
}

/* ---- the warp's matrix product -------------------------------------------------------------------------
 * d[4] = A·B + c[4] for A [16][16] and B [16][8] in bf16, accumulated in float: PTX
 * mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 (sm_80+), one per warp, all 32 lanes.
 * Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"), with
 * g = lane / 4 and t = lane % 4, each 32-bit register holding two bf16 (lower column or row first):
 *   a[0] = A[g][2t, 2t+1]     a[1] = A[g+8][2t, 2t+1]    a[2] = A[g][2t+8, 2t+9]   a[3] = A[g+8][2t+8, 2t+9]
 *   b[0] = B[2t, 2t+1][g]     b[1] = B[2t+8, 2t+9][g]
 *   c[0], c[1] = C[g][2t, 2t+1]                          c[2], c[3] = C[g+8][2t, 2t+1] */
__device__ __forceinline__ void kvl_mma_bf16(float d[4], const uint32_t a[4], const uint32_t b[2], const float c[4])
{
#ifdef __CUDACC__
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%10, %11, %12, %13};\n"
                 : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]), "f"(c[2]),
                   "f"(c[3]));
#else
    ::emu::mma_bf16_m16n8k16(::emu::site{__FILE__, __LINE__}, d, a, b, c);
#endif
}

#endif
