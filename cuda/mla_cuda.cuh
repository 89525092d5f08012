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
 *   kvl_mla_flash_kernel<F>     the version the host API runs: kvl_mla_mma_kernel's products with the
 *                               tiles double-buffered by cp.async, fragments by ldmatrix, FP8 decoded
 *                               eight codes at a time from registers (its own comment below)
 *   kvl_mla_mma_kernel<R>       the readable twin it is tested against: the absorbed attention on
 *                               tensor cores (bf16 mma.sync m16n8k16, float
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

/* The tile of kvl_sparse_mma_kernel (attend_cuda.cuh), whose steps kvl_mla_mma_kernel runs: 576 channels of
 * a key, 512 of a value, 64 heads per block in four groups of 16, 32 rows per tile, eight warps, shared rows
 * padded so that a fragment's 32 words fall in 32 banks */
#define KVL_MMA_DK KVL_SPARSE_DK
#define KVL_MMA_DV KVL_SPARSE_DV
#define KVL_MMA_HEADS KVL_SPARSE_HEADS
#define KVL_MMA_TK KVL_SPARSE_TK
#define KVL_MMA_THREADS KVL_SPARSE_THREADS
#define KVL_MMA_KS KVL_SPARSE_KS
#define KVL_MMA_PS KVL_SPARSE_PS
#define KVL_MMA_SS KVL_SPARSE_SS
#define KVL_MMA_CHUNKS KVL_SPARSE_CHUNKS

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

    kvl_mma_query(q_s, q_hat + (b * sh.H + h0) * KVL_MMA_DK, nh);
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
        kvl_mma_scores(s_s, q_s, kv_s, hg, half);
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
        kvl_mma_values(acc, p_s, kv_s, f_s, hg, half);
    }
    kvl_mma_store_part<KVL_MMA_DV>(part_o, acc, b, sh, split, h0 + 16 * hg + g, half, t);
    if (tid < nh) part_ml[(b * sh.H + h0 + tid) * sh.n_splits + split] = run_s[tid];
}

/* ---- the pipelined version ----------------------------------------------------------------------------
 * kvl_mla_flash_kernel<F> computes what kvl_mla_mma_kernel<R> does (same blocks, warps, tiles, products
 * and rounding; only the softmax denominator is summed in another order) the way FlashMLA feeds its
 * tensor cores:
 *   - two tile buffers: tile i + 1 is fetched while tile i is scored and weighed. bf16 rows go to shared
 *     memory by 16-byte cp.async.cg (rows past the split zero-filled by the copy itself); of an FP8 row
 *     the bf16 RoPE part goes the same way and the E4M3 codes come into registers, one 8-byte load per
 *     eight codes and one 4-byte load of their block's scale, and are decoded after the tile's products
 *     into the other buffer, eight values to one 16-byte store;
 *   - every fragment by ldmatrix: q̂ and the weights P with .x4, the keys with .x4 (two 8-key tiles per
 *     load), the values with .x4.trans (P·V's B operand is the row tile itself, transposed on the way);
 *   - a tile's rows found from one ring position per tile, not a remainder per 16 bytes;
 *   - the softmax in the registers of the mma results: warp (g, 0) adds the other half's partial scores
 *     (one float per score through shared memory) to its own and extends its 16 heads' softmax there.
 *
 * Its ceiling is shared-memory bandwidth, neither HBM nor the tensor cores; the derivation, the
 * occupancy and the expected shares are in tests/bench/README.md, "Design measurements". */

#define KVL_FLASH_SMEM                                                                                    \
    ((KVL_MMA_HEADS * KVL_MMA_KS + 2 * KVL_MMA_TK * KVL_MMA_KS + KVL_MMA_HEADS * KVL_MMA_PS) * 2 +       \
     (KVL_MMA_HEADS * KVL_MMA_SS + KVL_MMA_HEADS) * 4)
static_assert(KVL_MMA_KS * 2 % 16 == 0 && KVL_MMA_KS * 2 / 16 % 2 == 1,
              "ldmatrix rows 16-byte aligned, eight consecutive rows in distinct bank groups");
static_assert(KVL_MMA_PS * 2 % 16 == 0 && KVL_MMA_PS * 2 / 16 % 2 == 1, "the weights' rows alike");

/* The ring slots of one tile's rows: slot first + r, wrapped by one comparison (valid ≤ slots). */
struct kvl_tile_rows {
    const uint8_t *seq;    /* sequence b's slot 0 */
    size_t first, slots, row_bytes;
    unsigned valid;        /* rows of the tile before the split's end */
    __device__ const uint8_t *row(unsigned r) const
    {
        const size_t s = first + r;
        return seq + (s >= slots ? s - slots : s) * row_bytes;
    }
};

/* the rows tile … tile + 31 (those before hi) of sequence b in a ring-only kv */
__device__ __forceinline__ kvl_tile_rows kvl_tile_at(const kvl_attend_kv &kv, size_t b, size_t tile, size_t hi)
{
    const size_t n = hi - tile < KVL_MMA_TK ? hi - tile : KVL_MMA_TK;
    return kvl_tile_rows{kv.ring + b * kv.slots * kv.ring_row_bytes, tile % kv.slots, kv.slots, kv.ring_row_bytes,
                         static_cast<unsigned>(n)};
}

/* Tile fills: fetch(st, dst, rows, tid) starts bringing a tile into dst[32][KS] (bf16) and commits its
 * cp.async group; store(st, dst, tid) finishes it from the registers st (after the tile's products). */
struct kvl_fill_bf16 {
    static constexpr unsigned PER_THREAD = KVL_MMA_TK * KVL_MMA_CHUNKS / KVL_MMA_THREADS;
    struct staged {};
    __device__ static void fetch(staged &, kvl_smem<uint16_t> dst, const kvl_tile_rows &t, unsigned tid)
    {
        KVL_UNROLL
        for (unsigned i = 0; i < PER_THREAD; i++) {
            const unsigned e = tid + KVL_MMA_THREADS * i, r = e / KVL_MMA_CHUNKS, c = e % KVL_MMA_CHUNKS;
            const bool ok = r < t.valid;
            kvl_cp_async_cg(dst + r * KVL_MMA_KS + 8 * c, t.row(ok ? r : 0) + 16 * c, ok ? 16u : 0u);
        }
        kvl_cp_async_commit();
    }
    __device__ static void store(const staged &, kvl_smem<uint16_t>, unsigned) {}
};
static_assert(KVL_MMA_TK * KVL_MMA_CHUNKS % KVL_MMA_THREADS == 0, "every thread copies as many chunks");

struct kvl_fill_v32 {
    static constexpr unsigned CODE_CHUNKS = KVF_V32_NOPE / 8, ROPE_CHUNKS = KVL_MMA_CHUNKS - CODE_CHUNKS;
    static constexpr unsigned PER_THREAD = KVL_MMA_TK * CODE_CHUNKS / KVL_MMA_THREADS;
    static constexpr unsigned ROWS_PER_PASS = KVL_MMA_THREADS / CODE_CHUNKS;
    /* thread tid holds codes 8c … 8c + 7 (c = tid % 64) of rows tid / 64 + 4i */
    struct staged {
        uint2 code[PER_THREAD];
        float scale[PER_THREAD];
    };
    __device__ static void fetch(staged &st, kvl_smem<uint16_t> dst, const kvl_tile_rows &t, unsigned tid)
    {
        const unsigned rr = tid / ROPE_CHUNKS, rc = tid % ROPE_CHUNKS, c = tid % CODE_CHUNKS;
        const bool rope_ok = rr < t.valid;
        kvl_cp_async_cg(dst + rr * KVL_MMA_KS + KVF_V32_NOPE + 8 * rc,
                        t.row(rope_ok ? rr : 0) + offsetof(kvf_row_v32_main, rope) + 16 * rc, rope_ok ? 16u : 0u);
        kvl_cp_async_commit();
        KVL_UNROLL
        for (unsigned i = 0; i < PER_THREAD; i++) {
            const unsigned r = tid / CODE_CHUNKS + ROWS_PER_PASS * i;
            st.code[i] = uint2{0, 0};
            st.scale[i] = 0.0f;
            if (r < t.valid) {
                const uint8_t *row = t.row(r);
                st.code[i] = KVL_GLOBAL_AS(const uint2, row)[c];
                const uint8_t *scales = row + offsetof(kvf_row_v32_main, scale);
                st.scale[i] = KVL_GLOBAL_AS(const float, scales)[8 * c / KVF_V32_BLOCK];
            }
        }
    }
    __device__ static void store(const staged &st, kvl_smem<uint16_t> dst, unsigned tid)
    {
        const unsigned c = tid % CODE_CHUNKS;
        KVL_UNROLL
        for (unsigned i = 0; i < PER_THREAD; i++) {
            const unsigned r = tid / CODE_CHUNKS + ROWS_PER_PASS * i;
            uint32_t w[4];
            KVL_UNROLL
            for (int k = 0; k < 4; k++) {
                const uint32_t pair = (k < 2 ? st.code[i].x : st.code[i].y) >> (16 * (k % 2));
                w[k] = kvl_bf16_encode(kvl_e4m3_decode(pair & 0xFFu) * st.scale[i]) |
                       kvl_bf16_encode(kvl_e4m3_decode(pair >> 8 & 0xFFu) * st.scale[i]) << 16;
            }
            KVL_SMEM_AS(uint4, dst + r * KVL_MMA_KS + 8 * c)[0] = uint4{w[0], w[1], w[2], w[3]};
        }
    }
};
static_assert(KVL_MMA_TK * (KVL_MMA_CHUNKS - KVF_V32_NOPE / 8) == KVL_MMA_THREADS, "one RoPE chunk per thread");
static_assert(KVL_MMA_THREADS % (KVF_V32_NOPE / 8) == 0 && KVF_V32_BLOCK % 8 == 0, "a thread keeps its codes' column");

/* s[4][4] += scores of heads 16hg … 16hg + 15 (q_s rows) against the 32 rows of kv_s over channels
 * [288·side, 288·side + 288): s[nt] is the mma result for keys 8nt … 8nt + 7 */
__device__ __forceinline__ void kvl_flash_scores(float s[4][4], kvl_smem<uint16_t> q_s, kvl_smem<uint16_t> kv_s,
                                                 unsigned hg, unsigned side, unsigned lane)
{
    const unsigned c0 = side * (KVL_MMA_DK / 2);
    /* A: rows 0-15 of the group, columns +0 (lanes 0-15) and +8 (16-31); B: keys 0-7 (lanes 0-15) and
     * 8-15 (16-31), channels +0 and +8 (lane / 8 even, odd) */
    const kvl_smem<uint16_t> a_at = q_s + (16 * hg + lane % 16) * KVL_MMA_KS + c0 + 8 * (lane / 16);
    const kvl_smem<uint16_t> b_at = kv_s + (8 * (lane / 16) + lane % 8) * KVL_MMA_KS + c0 + 8 * (lane / 8 % 2);
    for (unsigned kk = 0; kk < KVL_MMA_DK / 2 / 16; kk++) {
        uint32_t a[4];
        kvl_ldmatrix_x4(a, a_at + 16 * kk);
        KVL_UNROLL
        for (unsigned np = 0; np < KVL_MMA_TK / 16; np++) {
            uint32_t bk[4];
            kvl_ldmatrix_x4(bk, b_at + 16 * np * KVL_MMA_KS + 16 * kk);
            kvl_mma_bf16(s[2 * np], a, bk, s[2 * np]);
            kvl_mma_bf16(s[2 * np + 1], a, bk + 2, s[2 * np + 1]);
        }
    }
}

/* acc[32][4] += P[heads 16hg …][32 keys] (p_s) · V[32 keys][channels 256·side …] (kv_s) */
__device__ __forceinline__ void kvl_flash_values(float acc[KVL_MMA_DV / 2 / 8][4], kvl_smem<uint16_t> p_s,
                                                 kvl_smem<uint16_t> kv_s, unsigned hg, unsigned side, unsigned lane)
{
    /* A as in the scores; B transposed: keys +0 and +8 (lane / 8 even, odd), channels +0 and +8 (lanes
     * 0-15, 16-31) */
    const kvl_smem<uint16_t> a_at = p_s + (16 * hg + lane % 16) * KVL_MMA_PS + 8 * (lane / 16);
    const kvl_smem<uint16_t> v_at =
        kv_s + (8 * (lane / 8 % 2) + lane % 8) * KVL_MMA_KS + side * (KVL_MMA_DV / 2) + 8 * (lane / 16);
    KVL_UNROLL
    for (unsigned kk = 0; kk < KVL_MMA_TK / 16; kk++) {
        uint32_t a[4];
        kvl_ldmatrix_x4(a, a_at + 16 * kk);
        KVL_UNROLL
        for (unsigned np = 0; np < KVL_MMA_DV / 2 / 16; np++) {
            uint32_t bv[4];
            kvl_ldmatrix_x4_trans(bv, v_at + 16 * kk * KVL_MMA_KS + 16 * np);
            kvl_mma_bf16(acc[2 * np], a, bv, acc[2 * np]);
            kvl_mma_bf16(acc[2 * np + 1], a, bv + 2, acc[2 * np + 1]);
        }
    }
}

/* The softmax of rows g (i = 0) and g + 8 (i = 1) of head group hg extended by the tile's scores s
 * (this half's) plus the other half's in s_s: weights to p_s as bf16, the factor the sums take to f_s,
 * m and l (every lane of a quad holds its rows' values) updated. */
__device__ __forceinline__ void kvl_flash_softmax(float m[2], float l[2], const float s[4][4], kvl_smem<float> s_s,
                                                  kvl_smem<uint16_t> p_s, kvl_smem<float> f_s, unsigned hg,
                                                  unsigned lane, size_t valid, float scale)
{
    const unsigned g = lane / 4, t = lane % 4;
    KVL_UNROLL
    for (unsigned i = 0; i < 2; i++) {
        const unsigned head = 16 * hg + g + 8 * i;
        float sc[8], mx = -INFINITY;
        KVL_UNROLL
        for (unsigned k = 0; k < 8; k++) {
            const unsigned nt = k / 2, key = 8 * nt + 2 * t + k % 2;
            const float both = s[nt][2 * i + k % 2] + s_s[head * KVL_MMA_SS + key];
            sc[k] = key < valid ? both * scale : -INFINITY;
            mx = fmaxf(mx, sc[k]);
        }
        const float m_new = fmaxf(m[i], kvl_group_max<4>(mx));
        float sum = 0.0f;
        KVL_UNROLL
        for (unsigned nt = 0; nt < 4; nt++) {
            const uint32_t w0 = kvl_bf16_encode(expf(sc[2 * nt] - m_new));
            const uint32_t w1 = kvl_bf16_encode(expf(sc[2 * nt + 1] - m_new));
            KVL_SMEM_AS(uint32_t, p_s + head * KVL_MMA_PS + 8 * nt + 2 * t)[0] = w0 | w1 << 16;
            sum += kvl_bf16_decode(w0) + kvl_bf16_decode(w1);
        }
        const float f = expf(m[i] - m_new);
        l[i] = l[i] * f + kvl_group_sum<4>(sum);
        m[i] = m_new;
        if (t == 0) f_s[head] = f;
    }
}

/* part_o[B][H][n_splits][512], part_ml[B][H][n_splits] from q_hat[B][H][576] over the rows of (sh, kv),
 * kv a ring only (no fresh rows); F: kvl_fill_bf16 or kvl_fill_v32 */
template <typename F>
__global__ void __launch_bounds__(KVL_MMA_THREADS, 1)
    kvl_mla_flash_kernel(float *part_o, kvl_softmax_part *part_ml, const float *q_hat, kvl_attend_shape sh,
                         kvl_attend_kv kv)
{
    KVL_DYNAMIC_SHARED(uint16_t, smem);
    kvl_smem<uint16_t> q_s = smem, tiles = q_s + KVL_MMA_HEADS * KVL_MMA_KS;
    kvl_smem<uint16_t> p_s = tiles + 2 * KVL_MMA_TK * KVL_MMA_KS;
    kvl_smem<float> s_s = KVL_SMEM_AS(float, p_s + KVL_MMA_HEADS * KVL_MMA_PS);
    kvl_smem<float> f_s = s_s + KVL_MMA_HEADS * KVL_MMA_SS;
    const unsigned tid = threadIdx.x, warp = tid / KVL_WARP, lane = tid % KVL_WARP, g = lane / 4, t = lane % 4;
    const unsigned hg = warp % 4, half = warp / 4;
    const size_t b = blockIdx.z, h0 = blockIdx.y * static_cast<size_t>(KVL_MMA_HEADS), split = blockIdx.x;
    const size_t nh = sh.H - h0 < KVL_MMA_HEADS ? sh.H - h0 : KVL_MMA_HEADS, key_end = sh.key_first + sh.n_keys;
    const size_t lo = sh.key_first + split * sh.split, hi = lo + sh.split < key_end ? lo + sh.split : key_end;

    typename F::staged st;
    F::fetch(st, tiles, kvl_tile_at(kv, b, lo, hi), tid);
    F::store(st, tiles, tid);
    for (unsigned e = tid; e < KVL_MMA_HEADS * (KVL_MMA_DK / 4); e += KVL_MMA_THREADS) {
        const unsigned hh = e / (KVL_MMA_DK / 4), c = 4 * (e % (KVL_MMA_DK / 4));
        const float *q = q_hat + (b * sh.H + h0 + hh) * KVL_MMA_DK + c;
        const bool ok = hh < nh;
        const uint32_t w0 = ok ? kvl_bf16_encode(q[0]) | kvl_bf16_encode(q[1]) << 16 : 0u;
        const uint32_t w1 = ok ? kvl_bf16_encode(q[2]) | kvl_bf16_encode(q[3]) << 16 : 0u;
        KVL_SMEM_AS(uint2, q_s + hh * KVL_MMA_KS + c)[0] = uint2{w0, w1};
    }
    float acc[KVL_MMA_DV / 2 / 8][4] = {}, m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    unsigned cur = 0;
    for (size_t tile = lo; tile < hi; tile += KVL_MMA_TK, cur ^= 1u) {
        kvl_cp_async_wait<0>();
        __syncthreads(); /* tile `cur` is whole, and every warp is done with the other buffer */
        const kvl_smem<uint16_t> kv_s = tiles + cur * KVL_MMA_TK * KVL_MMA_KS,
                                 next = tiles + (cur ^ 1u) * KVL_MMA_TK * KVL_MMA_KS;
        const bool more = tile + KVL_MMA_TK < hi;
        if (more) F::fetch(st, next, kvl_tile_at(kv, b, tile + KVL_MMA_TK, hi), tid);
        float s[KVL_MMA_TK / 8][4] = {};
        kvl_flash_scores(s, q_s, kv_s, hg, half, lane);
        if (half == 1) {
            KVL_UNROLL
            for (unsigned nt = 0; nt < KVL_MMA_TK / 8; nt++) {
                const size_t row = (16 * hg + g) * KVL_MMA_SS + 8 * nt + 2 * t;
                s_s[row] = s[nt][0];
                s_s[row + 1] = s[nt][1];
                s_s[row + 8 * KVL_MMA_SS] = s[nt][2];
                s_s[row + 8 * KVL_MMA_SS + 1] = s[nt][3];
            }
        }
        __syncthreads();
        if (half == 0) kvl_flash_softmax(m, l, s, s_s, p_s, f_s, hg, lane, hi - tile, sh.scale);
        __syncthreads();
        kvl_mma_rescale(acc, f_s, hg, g);
        kvl_flash_values(acc, p_s, kv_s, hg, half, lane);
        if (more) F::store(st, next, tid);
    }
    const size_t head_lo = h0 + 16 * hg + g, head_hi = head_lo + 8;
    kvl_mma_store_part<KVL_MMA_DV>(part_o, acc, b, sh, split, head_lo, half, t);
    if (half == 0 && t == 0) {
        if (head_lo < sh.H) part_ml[(b * sh.H + head_lo) * sh.n_splits + split] = kvl_softmax_part{m[0], l[0]};
        if (head_hi < sh.H) part_ml[(b * sh.H + head_hi) * sh.n_splits + split] = kvl_softmax_part{m[1], l[1]};
    }
}

#endif
