/* MLA's own kernels on the device: reading V3.2's packed FP8 rows, and the per-head products around the
 * attention (the absorption of W_UK into the query, W_UV after it, the naive form's re-expansion).
 *
 * Build: included by cuda/mla_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_head_matvec_kernel      one thread per output: out[b][h][i] = Σ_k W_h(i, k) x[b][h][k], W_h's
 *                               element (i, k) at h·hs + i·ri + k·rk, so one kernel serves W_UV^h
 *                               (rows) and W_UK^hᵀ (columns: neighbouring threads read neighbouring
 *                               columns, so those reads coalesce)
 *   kvl_broadcast_cols_kernel   one thread per copied value: a row's k_rope into every head's key
 *   kvl_attend_kernel<kvl_rows_v32, 1> (attend_cuda.cuh) reads the 656-byte row in place: E4M3 codes
 *                               times their block's FP32 scale, then the bf16 RoPE dims (the reader
 *                               kvl_rows_v32 sits with the others in attend_cuda.cuh)
 *   kvl_mla_mma_kernel<R>       the absorbed attention on tensor cores (bf16 mma.sync m16n8k16, float
 *                               sums) for DeepSeek's widths, Dc 512 and Dr 64: one block of eight warps
 *                               per (split, 64 heads, sequence), so every row is read once per 64 heads.
 *                               A tile of 32 rows goes to shared memory as bf16 (FP8 rows decoded on the
 *                               way, exactly); warp (g, k) scores head group g over half the 576
 *                               channels, four threads per head extend its softmax over the tile (the
 *                               weights rounded to bf16, the denominator summed from the rounded ones), and
 *                               warp (g, k) adds weights × rows into its half of the 512 value channels,
 *                               128 float sums per thread. The row tile serves as K and, its first 512
 *                               channels, as V. Splits merge with kvl_attend_merge_kernel. */
#ifndef KVL_MLA_CUDA_CUH
#define KVL_MLA_CUDA_CUH

#include <stddef.h>

#include "attend_cuda.cuh"

extern "C" {
#include "rows.h"
}

/* Strides of a batch of per-head vectors and matrices (elements). */
struct kvl_head_product {
    size_t B, H, n_out, n_in;   /* out[B][H][n_out] from x[B][H][n_in] */
    size_t hs, ri, rk;          /* W_h(i, k) = W[h·hs + i·ri + k·rk] */
    size_t x_seq, x_head;       /* x[b][h][k] = x[b·x_seq + h·x_head + k] */
    size_t o_seq, o_head;       /* out[b][h][i] = out[b·o_seq + h·o_head + i] */
};

static __global__ void kvl_head_matvec_kernel(float *out, const float *W, const float *x, kvl_head_product p)
{
    const size_t t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (t >= p.B * p.H * p.n_out) return;
    const size_t i = t % p.n_out, h = t / p.n_out % p.H, b = t / p.n_out / p.H;
    const float *w = W + h * p.hs + i * p.ri, *v = x + b * p.x_seq + h * p.x_head;
    float acc = 0.0f;
    for (size_t k = 0; k < p.n_in; k++) acc += w[k * p.rk] * v[k];
    out[b * p.o_seq + h * p.o_head + i] = acc;
}

/* dst[r][h·dst_head + j] = src[r·src_row + j] for rows r < R, heads h < H, j < n */
static __global__ void kvl_broadcast_cols_kernel(float *dst, size_t dst_row, size_t dst_head, const float *src,
                                                 size_t src_row, size_t R, size_t H, size_t n)
{
    const size_t t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (t >= R * H * n) return;
    const size_t j = t % n, h = t / n % H, r = t / n / H;
    dst[r * dst_row + h * dst_head + j] = src[r * src_row + j];
}

/* ---- the tensor-core version ------------------------------------------------------------------------ */

#define KVL_MMA_DK (KVF_V32_NOPE + KVF_V32_ROPE) /* 576 channels of a key */
#define KVL_MMA_DV KVF_V32_NOPE                  /* 512 of a value */
#define KVL_MMA_HEADS 64                         /* heads per block: four groups of 16 */
#define KVL_MMA_TK 32                            /* rows per tile */
#define KVL_MMA_THREADS 256                      /* eight warps */
#define KVL_MMA_KS (KVL_MMA_DK + 8)              /* bf16 per shared row of q̂ and of the tile: the pad puts */
#define KVL_MMA_PS (KVL_MMA_TK + 8)              /* a fragment's 32 words in 32 banks */
#define KVL_MMA_SS (KVL_MMA_TK + 1)
#define KVL_MMA_CHUNKS (KVL_MMA_DK / 8)          /* 16-byte pieces of a bf16 row */

/* Bytes of kvl_mla_mma_kernel's shared memory: q̂ and the tile in bf16, the weights in bf16, two halves'
 * partial scores, the factors and the running softmax of every head. */
#define KVL_MMA_SMEM                                                                                     \
    ((KVL_MMA_HEADS * KVL_MMA_KS + KVL_MMA_TK * KVL_MMA_KS + KVL_MMA_HEADS * KVL_MMA_PS) * 2 +          \
     (2 * KVL_MMA_HEADS * KVL_MMA_SS + KVL_MMA_HEADS) * 4 + KVL_MMA_HEADS * 8)

/* part_o[B][H][n_splits][512], part_ml[B][H][n_splits] from q_hat[B][H][576] over the rows of (sh, kv) */
template <typename R>
__global__ void __launch_bounds__(KVL_MMA_THREADS, 1)
    kvl_mla_mma_kernel(float *part_o, kvl_softmax_part *part_ml, const float *q_hat, kvl_attend_shape sh,
                       kvl_attend_kv kv)
{
    KVL_DYNAMIC_SHARED(uint16_t, smem);
    kvl_smem<uint16_t> q_s = smem, kv_s = q_s + KVL_MMA_HEADS * KVL_MMA_KS, p_s = kv_s + KVL_MMA_TK * KVL_MMA_KS;
    kvl_smem<float> s_s = KVL_SMEM_AS(float, p_s + KVL_MMA_HEADS * KVL_MMA_PS);
    kvl_smem<float> f_s = s_s + 2 * KVL_MMA_HEADS * KVL_MMA_SS;
    kvl_smem<kvl_softmax_part> run_s = KVL_SMEM_AS(kvl_softmax_part, f_s + KVL_MMA_HEADS);
    const unsigned tid = threadIdx.x, warp = tid / KVL_WARP, lane = tid % KVL_WARP, g = lane / 4, t = lane % 4;
    const unsigned hg = warp % 4, half = warp / 4; /* this warp's head group and half of the channels */
    const size_t b = blockIdx.z, h0 = blockIdx.y * static_cast<size_t>(KVL_MMA_HEADS), split = blockIdx.x;
    const size_t nh = sh.H - h0 < KVL_MMA_HEADS ? sh.H - h0 : KVL_MMA_HEADS, key_end = sh.key_first + sh.n_keys;
    const size_t lo = sh.key_first + split * sh.split, hi = lo + sh.split < key_end ? lo + sh.split : key_end;

    for (size_t e = tid; e < KVL_MMA_HEADS * KVL_MMA_DK; e += blockDim.x) {
        const size_t hh = e / KVL_MMA_DK, c = e % KVL_MMA_DK;
        const uint32_t q = hh < nh ? kvl_bf16_encode(q_hat[(b * sh.H + h0 + hh) * KVL_MMA_DK + c]) : 0u;
        q_s[hh * KVL_MMA_KS + c] = static_cast<uint16_t>(q);
    }
    if (tid < KVL_MMA_HEADS) run_s[tid] = kvl_softmax_empty();
    float acc[KVL_MMA_DV / 2 / 8][4] = {};
    for (size_t tile = lo; tile < hi; tile += KVL_MMA_TK) {
        __syncthreads();
        for (unsigned e = tid; e < KVL_MMA_TK * KVL_MMA_CHUNKS; e += blockDim.x) {
            const unsigned r = e / KVL_MMA_CHUNKS, c = e % KVL_MMA_CHUNKS;
            const uint4 v = tile + r < hi ? R::at(kvl_kv_row(kv, b, tile + r), c) : uint4{0, 0, 0, 0};
            KVL_SMEM_AS(uint4, kv_s + r * KVL_MMA_KS)[c] = v;
        }
        __syncthreads();
        /* scores of head group hg over channels [288·half, 288·half + 288) */
        float s[KVL_MMA_TK / 8][4] = {};
        for (unsigned kk = 0; kk < KVL_MMA_DK / 2 / 16; kk++) {
            const size_t c0 = half * (KVL_MMA_DK / 2) + 16 * kk + 2 * t, r0 = (16 * hg + g) * KVL_MMA_KS;
            const uint32_t a[4] = {kvl_pair(q_s, r0 + c0), kvl_pair(q_s, r0 + 8 * KVL_MMA_KS + c0),
                                   kvl_pair(q_s, r0 + c0 + 8), kvl_pair(q_s, r0 + 8 * KVL_MMA_KS + c0 + 8)};
            KVL_UNROLL
            for (unsigned nt = 0; nt < KVL_MMA_TK / 8; nt++) {
                const size_t k_row = (8 * nt + g) * KVL_MMA_KS + c0;
                const uint32_t bk[2] = {kvl_pair(kv_s, k_row), kvl_pair(kv_s, k_row + 8)};
                kvl_mma_bf16(s[nt], a, bk, s[nt]);
            }
        }
        KVL_UNROLL
        for (unsigned nt = 0; nt < KVL_MMA_TK / 8; nt++) {
            const size_t row = (half * KVL_MMA_HEADS + 16 * hg + g) * KVL_MMA_SS + 8 * nt + 2 * t;
            s_s[row] = s[nt][0];
            s_s[row + 1] = s[nt][1];
            s_s[row + 8 * KVL_MMA_SS] = s[nt][2];
            s_s[row + 8 * KVL_MMA_SS + 1] = s[nt][3];
        }
        __syncthreads();
        { /* four threads per head, eight rows each: the head's softmax extended by the tile */
            const unsigned head = tid / 4, part = tid % 4;
            float sc[8], m = -INFINITY, l = 0.0f;
            KVL_UNROLL
            for (int i = 0; i < 8; i++) {
                const unsigned key = 8 * part + i;
                const float both = s_s[head * KVL_MMA_SS + key] + s_s[(KVL_MMA_HEADS + head) * KVL_MMA_SS + key];
                sc[i] = tile + key < hi ? both * sh.scale : -INFINITY;
                m = fmaxf(m, sc[i]);
            }
            const kvl_softmax_part run = run_s[head];
            const float m_new = fmaxf(run.m, kvl_group_max<4>(m));
            KVL_UNROLL
            for (int i = 0; i < 8; i++) {
                const uint32_t w = kvl_bf16_encode(expf(sc[i] - m_new));
                p_s[head * KVL_MMA_PS + 8 * part + i] = static_cast<uint16_t>(w);
                l += kvl_bf16_decode(w);
            }
            l = kvl_group_sum<4>(l);
            const float f = expf(run.m - m_new);
            __syncwarp();
            if (part == 0) {
                run_s[head] = kvl_softmax_part{m_new, run.l * f + l};
                f_s[head] = f;
            }
        }
        __syncthreads();
        /* values: head group hg, channels [256·half, 256·half + 256) */
        const float f_lo = f_s[16 * hg + g], f_hi = f_s[16 * hg + g + 8];
        KVL_UNROLL
        for (unsigned nt = 0; nt < KVL_MMA_DV / 2 / 8; nt++) {
            acc[nt][0] *= f_lo;
            acc[nt][1] *= f_lo;
            acc[nt][2] *= f_hi;
            acc[nt][3] *= f_hi;
        }
        KVL_UNROLL
        for (unsigned kk = 0; kk < KVL_MMA_TK / 16; kk++) {
            const size_t r0 = (16 * hg + g) * KVL_MMA_PS + 16 * kk + 2 * t, k0 = (16 * kk + 2 * t) * KVL_MMA_KS;
            const uint32_t a[4] = {kvl_pair(p_s, r0), kvl_pair(p_s, r0 + 8 * KVL_MMA_PS), kvl_pair(p_s, r0 + 8),
                                   kvl_pair(p_s, r0 + 8 * KVL_MMA_PS + 8)};
            KVL_UNROLL
            for (unsigned nt = 0; nt < KVL_MMA_DV / 2 / 8; nt++) {
                const size_t ch = half * (KVL_MMA_DV / 2) + 8 * nt + g;
                const uint32_t bv[2] = {
                    kv_s[k0 + ch] | static_cast<uint32_t>(kv_s[k0 + KVL_MMA_KS + ch]) << 16,
                    kv_s[k0 + 8 * KVL_MMA_KS + ch] | static_cast<uint32_t>(kv_s[k0 + 9 * KVL_MMA_KS + ch]) << 16};
                kvl_mma_bf16(acc[nt], a, bv, acc[nt]);
            }
        }
    }
    const size_t head_lo = h0 + 16 * hg + g, head_hi = head_lo + 8;
    KVL_UNROLL
    for (unsigned nt = 0; nt < KVL_MMA_DV / 2 / 8; nt++) {
        const size_t ch = half * (KVL_MMA_DV / 2) + 8 * nt + 2 * t;
        if (head_lo < sh.H) {
            float *o = part_o + ((b * sh.H + head_lo) * sh.n_splits + split) * KVL_MMA_DV + ch;
            o[0] = acc[nt][0];
            o[1] = acc[nt][1];
        }
        if (head_hi < sh.H) {
            float *o = part_o + ((b * sh.H + head_hi) * sh.n_splits + split) * KVL_MMA_DV + ch;
            o[0] = acc[nt][2];
            o[1] = acc[nt][3];
        }
    }
    if (tid < nh) part_ml[(b * sh.H + h0 + tid) * sh.n_splits + split] = run_s[tid];
}

#endif
