/* Attention of queries over cached rows on the device, the kernels the MHA, SWA, MLA, DSA and V4 twins
 * share: flash-decoding (the context cut into splits, a partial softmax per split, then one merge) for
 * decode, and tiles of queries over their causal band for prefill.
 *
 * Build: included by cuda/mha_cuda.cu, mla_cuda.cu, dsa_cuda.cu and v4_cuda.cu (make cuda for nvcc, make
 *        test for the emulator).
 * Kernels (one line per version):
 *   kvl_attend_kernel<R, QT>  one block of 128 threads per (split or tile of QT queries, query head,
 *                             sequence). Keys go through shared memory 32 at a time: the K tile is
 *                             loaded (rows decoded by the reader R), each of the QT·32 (query, key) pairs
 *                             scores one dot product, warp w extends query w's running softmax by the 32
 *                             scores (kvl_softmax_extend_warp), the V tile replaces K, and each thread
 *                             updates its (query, channel) sums. Writes the split's partial (unnormalised
 *                             sums, max, denominator). QT = 1 for decode, 4 for prefill.
 *   kvl_gather_attend_kernel<RW, RE, P>  the decode version over keys that a key source P names one by one
 *                             instead of a range of positions (a sparse selection, or V4's window plus its
 *                             compressed rows): per tile, 32 threads look up their key's row (NULL: an
 *                             invalid pick, scored −∞), the rows are read in place once, as K and, their
 *                             first Dv channels, as V. One row source (RW = RE) decodes every key with RW;
 *                             two (V4.1: FP8 window rows, FP4 entries) decode the first P::n_window(b) keys
 *                             with RW and the rest with RE. One block of 128 threads per (split of the
 *                             keys, head, query set b).
 *   kvl_sparse_mma_kernel<R, P>  the sparse decode (V3.2's DSA) on tensor cores, built as FlashMLA's sparse
 *                             FP8 decode is, for DeepSeek's widths (Dc 512, Dr 64): one block of eight warps per
 *                             (split of the picks, 64 heads, query token), so each picked row is gathered and
 *                             decoded once for 64 heads instead of once per head. A tile of 32 picks goes to
 *                             shared memory as bf16 (an FP8 row's eight codes from one 8-byte load, decoded
 *                             exactly; a NULL pick as zeros, scored −∞); warp (g, k) scores head group g over
 *                             half the 576 channels with bf16 mma.sync m16n8k16, four threads per head extend
 *                             its softmax (weights rounded to bf16), warp (g, k) adds weights × rows into its
 *                             half of the 512 value channels. kvl_gather_attend_kernel is its readable twin.
 *                             Bound by the bf16 matrix rate; its ceiling, expected share and occupancy
 *                             are in tests/bench/README.md, "Design measurements".
 *   kvl_attend_merge_kernel   one block per (query, head, sequence): the splits' partials merged with
 *                             kvl_softmax_merge, and a head's sink logit σ_h (if any) merged as one more
 *                             part {σ_h, 1} with no value (it joins the denominator only), divided by the
 *                             merged denominator.
 * Keys sit at positions key_first …; position p lives in the ring (slot p mod S of its sequence) when
 * p < ring_end, else in `fresh` rows (a prefill chunk's own, or re-expanded keys). A query at position
 * t sees keys t − W < p ≤ t (W = 0: p ≤ t), as ref/swa.h. Each KV head serves G consecutive query
 * heads (GQA); K and V of KV head g are the columns k_off + g·k_head … and v_off + g·v_head … of a row,
 * Dk and Dv wide. */
#ifndef KVL_ATTEND_CUDA_CUH
#define KVL_ATTEND_CUDA_CUH

#include <type_traits>

#include "element_cuda.cuh"
#include "primitives.cuh"

extern "C" {
#include "rows.h"
}

#define KVL_ATT_TK 32      /* keys per tile: one per lane of the warp that extends a query's softmax */
#define KVL_ATT_THREADS 128
#define KVL_ATT_ACC 8      /* (query, channel) sums per thread: QT·Dv ≤ 8·128 */
#define KVL_SMEM_OPTIN (227 * 1024) /* shared memory a block may opt into on sm_90 (sm_80: 163 KB, refused there) */

struct kvl_attend_shape {
    size_t B, H, G, Dk, Dv, Q; /* sequences, query heads, query heads per KV head, widths, queries */
    size_t q_first;            /* position of query 0 */
    size_t key_first, n_keys;  /* the keys the queries may see */
    size_t split, n_splits;    /* keys per split; splits */
    size_t window;             /* W */
    float scale;               /* the softmax scale the scores are multiplied by */
};

struct kvl_attend_kv {
    const uint8_t *ring;
    size_t slots, ring_row_bytes, ring_end;
    const uint8_t *fresh;
    size_t fresh_rows, fresh_row_bytes; /* fresh rows per sequence and their size */
    size_t k_off, k_head, v_off, v_head;
};

/* Row readers: value `col` of a stored row. */
struct kvl_rows_f32 {
    __device__ static float at(const uint8_t *row, size_t col) { return KVL_GLOBAL_AS(const float, row)[col]; }
};
struct kvl_rows_bf16 {
    __device__ static float at(const uint8_t *row, size_t col)
    {
        return kvl_bf16_decode(KVL_GLOBAL_AS(const uint16_t, row)[col]);
    }
};

/* The FP32 a row stores little-endian at s (a block's scale) */
__device__ __forceinline__ float kvl_le_f32(const uint8_t *s)
{
    return __uint_as_float(s[0] | s[1] << 8 | s[2] << 16 | static_cast<uint32_t>(s[3]) << 24);
}

/* Value col of a V3.2 main row (formats/rows.h): col < 512 from the FP8 codes, the rest bf16. */
struct kvl_rows_v32 {
    __device__ static float at(const uint8_t *row, size_t col)
    {
        if (col < KVF_V32_NOPE) {
            const float scale = kvl_le_f32(row + offsetof(kvf_row_v32_main, scale) + 4 * (col / KVF_V32_BLOCK));
            return kvl_e4m3_decode(row[col]) * scale;
        }
        const uint8_t *r = row + offsetof(kvf_row_v32_main, rope) + 2 * (col - KVF_V32_NOPE);
        return kvl_bf16_decode(r[0] | r[1] << 8);
    }
};

/* Row readers for the tensor-core kernels (MLA's, and the sparse one below): values 8c … 8c + 7 of a stored
 * row, as bf16 (exact for both). They read 16 bytes at a time (8 from the E4M3 codes, one uint2), so every row
 * and its RoPE part start 16-byte aligned when the buffer does. */
static_assert((KVF_V32_NOPE + KVF_V32_ROPE) * 2 % 16 == 0, "a bf16 row of 576 channels is whole 16-byte chunks");
static_assert(sizeof(kvf_row_v32_main) % 16 == 0, "656-byte rows keep each other 16-byte aligned");
static_assert(offsetof(kvf_row_v32_main, rope) % 16 == 0, "the bf16 RoPE part is read as uint4");
static_assert(offsetof(kvf_row_v32_main, nope) % 8 == 0 && KVF_V32_NOPE % 8 == 0, "codes are read as uint2");
struct kvl_chunks_bf16 {
    __device__ static uint4 at(const uint8_t *row, unsigned c) { return KVL_GLOBAL_AS(const uint4, row)[c]; }
};
struct kvl_chunks_v32 {
    __device__ static uint4 at(const uint8_t *row, unsigned c)
    {
        if (c >= KVF_V32_NOPE / 8)
            return KVL_GLOBAL_AS(const uint4, row + offsetof(kvf_row_v32_main, rope))[c - KVF_V32_NOPE / 8];
        const float scale = kvl_le_f32(row + offsetof(kvf_row_v32_main, scale) + 4 * (8 * c / KVF_V32_BLOCK));
        const uint2 q = KVL_GLOBAL_AS(const uint2, row)[c];
        uint32_t w[4];
        KVL_UNROLL
        for (int i = 0; i < 4; i++) {
            const uint32_t pair = (i < 2 ? q.x : q.y) >> (16 * (i % 2));
            w[i] = kvl_bf16_encode(kvl_e4m3_decode(pair) * scale) |
                   kvl_bf16_encode(kvl_e4m3_decode(pair >> 8) * scale) << 16;
        }
        return uint4{w[0], w[1], w[2], w[3]};
    }
};

/* two consecutive bf16 of a shared row as one fragment register (the lower index in the low half) */
__device__ __forceinline__ uint32_t kvl_pair(kvl_smem<uint16_t> p, size_t i) { return KVL_SMEM_AS(uint32_t, p + i)[0]; }

__device__ __forceinline__ size_t kvl_first_visible(size_t t, size_t W) { return W == 0 || t < W ? 0 : t - W + 1; }
__device__ __forceinline__ bool kvl_visible(size_t t, size_t j, size_t W) { return j <= t && (W == 0 || t - j < W); }

__device__ __forceinline__ const uint8_t *kvl_kv_row(const kvl_attend_kv &kv, size_t b, size_t p)
{
    return p < kv.ring_end ? kv.ring + (b * kv.slots + p % kv.slots) * kv.ring_row_bytes
                           : kv.fresh + (b * kv.fresh_rows + p - kv.ring_end) * kv.fresh_row_bytes;
}

/* dst[32][D + 1] ← columns off … off + D − 1 of positions tile … tile + 31 (0 past hi) */
template <typename R>
__device__ void kvl_load_tile(kvl_smem<float> dst, const kvl_attend_kv &kv, size_t b, size_t tile, size_t hi,
                              size_t off, size_t D)
{
    for (size_t e = threadIdx.x; e < KVL_ATT_TK * D; e += blockDim.x) {
        const size_t r = e / D, d = e % D, p = tile + r;
        dst[r * (D + 1) + d] = p < hi ? R::at(kvl_kv_row(kv, b, p), off + d) : 0.0f;
    }
}

/* part_o[B][H][Q][n_splits][Dv], part_ml[B][H][Q][n_splits] from q[B][Q][H][Dk] */
template <typename R, int QT>
__global__ void __launch_bounds__(KVL_ATT_THREADS)
    kvl_attend_kernel(float *part_o, kvl_softmax_part *part_ml, const float *q, kvl_attend_shape sh, kvl_attend_kv kv)
{
    static_assert(QT * KVL_ATT_TK <= KVL_ATT_THREADS && QT <= KVL_ATT_THREADS / KVL_WARP, "a score per thread");
    KVL_DYNAMIC_SHARED(float, smem);
    const size_t Dk = sh.Dk, Dv = sh.Dv, Dmax = Dk > Dv ? Dk : Dv;
    kvl_smem<float> q_s = smem, kv_s = q_s + QT * Dk, p_s = kv_s + KVL_ATT_TK * (Dmax + 1), f_s = p_s + QT * KVL_ATT_TK;
    const unsigned t = threadIdx.x, warp = t / KVL_WARP, lane = t % KVL_WARP;
    const size_t b = blockIdx.z, h = blockIdx.y, g = h / sh.G, split = blockIdx.x % sh.n_splits;
    const size_t q0 = blockIdx.x / sh.n_splits * QT, nq = sh.Q - q0 < QT ? sh.Q - q0 : QT;
    const size_t key_end = sh.key_first + sh.n_keys, q_last = sh.q_first + q0 + nq - 1;
    size_t lo = sh.key_first + split * sh.split, hi = lo + sh.split < key_end ? lo + sh.split : key_end;
    const size_t band_lo = kvl_first_visible(sh.q_first + q0, sh.window);
    lo = lo > band_lo ? lo : band_lo;
    hi = hi < q_last + 1 ? hi : q_last + 1;

    for (size_t e = t; e < QT * Dk; e += blockDim.x)
        q_s[e] = e / Dk < nq ? q[((b * sh.Q + q0 + e / Dk) * sh.H + h) * Dk + e % Dk] : 0.0f;
    kvl_softmax_part run = kvl_softmax_empty();
    float acc[KVL_ATT_ACC] = {};
    for (size_t tile = lo; tile < hi; tile += KVL_ATT_TK) {
        __syncthreads();
        kvl_load_tile<R>(kv_s, kv, b, tile, hi, kv.k_off + g * kv.k_head, Dk);
        __syncthreads();
        if (t < QT * KVL_ATT_TK) {
            const size_t qi = t / KVL_ATT_TK, j = t % KVL_ATT_TK, p = tile + j;
            float s = -INFINITY;
            if (qi < nq && p < hi && kvl_visible(sh.q_first + q0 + qi, p, sh.window)) {
                float dot = 0.0f;
                for (size_t d = 0; d < Dk; d++) dot += q_s[qi * Dk + d] * kv_s[j * (Dk + 1) + d];
                s = dot * sh.scale;
            }
            p_s[t] = s;
        }
        __syncthreads();
        if (warp < QT) {
            float pv, f;
            run = kvl_softmax_extend_warp(run, p_s[warp * KVL_ATT_TK + lane], &pv, &f);
            p_s[warp * KVL_ATT_TK + lane] = pv;
            if (lane == 0) f_s[warp] = f;
        }
        __syncthreads();
        kvl_load_tile<R>(kv_s, kv, b, tile, hi, kv.v_off + g * kv.v_head, Dv);
        __syncthreads();
        KVL_UNROLL
        for (int k = 0; k < KVL_ATT_ACC; k++) {
            const size_t i = t + static_cast<size_t>(k) * blockDim.x, qi = i / Dv, d = i % Dv;
            if (i >= QT * Dv) break;
            float a = acc[k] * f_s[qi];
            for (size_t j = 0; j < KVL_ATT_TK; j++) a += p_s[qi * KVL_ATT_TK + j] * kv_s[j * (Dv + 1) + d];
            acc[k] = a;
        }
    }
    const size_t part = ((b * sh.H + h) * sh.Q + q0) * sh.n_splits + split;
    KVL_UNROLL
    for (int k = 0; k < KVL_ATT_ACC; k++) {
        const size_t i = t + static_cast<size_t>(k) * blockDim.x, qi = i / Dv;
        if (i < QT * Dv && qi < nq) part_o[(part + qi * sh.n_splits) * Dv + i % Dv] = acc[k];
    }
    if (warp < nq && lane == 0) part_ml[part + warp * sh.n_splits] = run;
}

/* Keys of query set b that the window's reader RW decodes: all of them for one row source, else the
 * first P::n_window(b). */
template <typename RW, typename RE, typename P>
__device__ __forceinline__ size_t kvl_window_keys(const P &keys, size_t b)
{
    if constexpr (std::is_same<RW, RE>::value) return keys.count(b);
    else return keys.n_window(b);
}

/* Value col of key k's row: RW's reading below n_win, RE's from there. */
template <typename RW, typename RE>
__device__ __forceinline__ float kvl_read_key(const uint8_t *row, size_t k, size_t n_win, size_t col)
{
    if constexpr (std::is_same<RW, RE>::value) return RW::at(row, col);
    else return k < n_win ? RW::at(row, col) : RE::at(row, col);
}

/* part_o[B][H][n_splits][Dv], part_ml[B][H][n_splits] from q[B][H][Dk] over the keys of query set b: key
 * k < P::count(b) is the row P::row(b, k) (NULL: an invalid pick, weight 0), read by RW (k below
 * kvl_window_keys) or RE, one key head whose first Dv channels are also the value */
template <typename RW, typename RE, typename P>
__global__ void __launch_bounds__(KVL_ATT_THREADS)
    kvl_gather_attend_kernel(float *part_o, kvl_softmax_part *part_ml, const float *q, kvl_attend_shape sh, P keys)
{
    KVL_DYNAMIC_SHARED(float, smem);
    KVL_SHARED(const uint8_t *, rows_s, KVL_ATT_TK);
    const size_t Dk = sh.Dk, Dv = sh.Dv;
    kvl_smem<float> q_s = smem, kv_s = q_s + Dk, p_s = kv_s + KVL_ATT_TK * (Dk + 1), f_s = p_s + KVL_ATT_TK;
    const unsigned t = threadIdx.x, warp = t / KVL_WARP, lane = t % KVL_WARP;
    const size_t b = blockIdx.z, h = blockIdx.y, split = blockIdx.x, n = keys.count(b), lo = split * sh.split;
    const size_t hi = lo + sh.split < n ? lo + sh.split : n, n_win = kvl_window_keys<RW, RE>(keys, b);

    for (size_t e = t; e < Dk; e += blockDim.x) q_s[e] = q[(b * sh.H + h) * Dk + e];
    kvl_softmax_part run = kvl_softmax_empty();
    float acc[KVL_ATT_ACC] = {};
    for (size_t tile = lo; tile < hi; tile += KVL_ATT_TK) {
        __syncthreads();
        if (t < KVL_ATT_TK) rows_s[t] = tile + t < hi ? keys.row(b, tile + t) : NULL;
        __syncthreads();
        for (size_t e = t; e < KVL_ATT_TK * Dk; e += blockDim.x) {
            const uint8_t *row = rows_s[e / Dk];
            kv_s[e / Dk * (Dk + 1) + e % Dk] = row ? kvl_read_key<RW, RE>(row, tile + e / Dk, n_win, e % Dk) : 0.0f;
        }
        __syncthreads();
        if (t < KVL_ATT_TK) {
            float s = -INFINITY;
            if (static_cast<const uint8_t *>(rows_s[t])) {
                float dot = 0.0f;
                for (size_t d = 0; d < Dk; d++) dot += q_s[d] * kv_s[t * (Dk + 1) + d];
                s = dot * sh.scale;
            }
            p_s[t] = s;
        }
        __syncthreads();
        if (warp == 0) {
            float pv, f;
            run = kvl_softmax_extend_warp(run, p_s[lane], &pv, &f);
            p_s[lane] = pv;
            if (lane == 0) f_s[0] = f;
        }
        __syncthreads();
        KVL_UNROLL
        for (int k = 0; k < KVL_ATT_ACC; k++) {
            const size_t d = t + static_cast<size_t>(k) * blockDim.x;
            if (d >= Dv) break;
            float a = acc[k] * f_s[0];
            for (size_t j = 0; j < KVL_ATT_TK; j++) a += p_s[j] * kv_s[j * (Dk + 1) + d];
            acc[k] = a;
        }
    }
    const size_t part = (b * sh.H + h) * sh.n_splits + split;
    KVL_UNROLL
    for (int k = 0; k < KVL_ATT_ACC; k++) {
        const size_t d = t + static_cast<size_t>(k) * blockDim.x;
        if (d < Dv) part_o[part * Dv + d] = acc[k];
    }
    if (t == 0) part_ml[part] = run;
}

/* ---- the sparse decode on tensor cores ---------------------------------------------------------------- */

#define KVL_SPARSE_DK (KVF_V32_NOPE + KVF_V32_ROPE) /* 576 channels of a key */
#define KVL_SPARSE_DV KVF_V32_NOPE                  /* 512 of a value */
#define KVL_SPARSE_HEADS 64                         /* heads per block: four groups of 16 */
#define KVL_SPARSE_TK 32                            /* picked rows per tile */
#define KVL_SPARSE_THREADS 256                      /* eight warps */
#define KVL_SPARSE_KS (KVL_SPARSE_DK + 8)           /* bf16 per shared row of q̂ and of the tile: row g of a */
#define KVL_SPARSE_PS (KVL_SPARSE_TK + 8)           /* fragment starts at bank 4g, so its 32 words hit 32 banks */
#define KVL_SPARSE_SS (KVL_SPARSE_TK + 1)
#define KVL_SPARSE_CHUNKS (KVL_SPARSE_DK / 8)       /* 16-byte pieces of a bf16 row */
#define KVL_SPARSE_FILL (KVL_SPARSE_TK * KVL_SPARSE_CHUNKS / KVL_SPARSE_THREADS) /* pieces per thread and tile */
static_assert(KVL_SPARSE_TK * KVL_SPARSE_CHUNKS % KVL_SPARSE_THREADS == 0, "a tile is whole pieces per thread");
static_assert(KVL_SPARSE_THREADS == 4 * KVL_SPARSE_HEADS, "four threads per head extend its softmax");

/* The tile's steps on tensor cores, kvl_mma_query, kvl_mma_scores and kvl_mma_values (kvl_mma_rescale), serve
 * mla_cuda.cuh's kvl_mla_mma_kernel too, whose KVL_MMA_* geometry is this one. */

/* Bytes of kvl_sparse_mma_kernel's dynamic shared memory: q̂ and the tile in bf16, the weights in bf16, the two
 * halves' partial scores, the factors and the running softmax of every head (134,912). */
#define KVL_SPARSE_SMEM                                                                                   \
    ((KVL_SPARSE_HEADS * KVL_SPARSE_KS + KVL_SPARSE_TK * KVL_SPARSE_KS + KVL_SPARSE_HEADS * KVL_SPARSE_PS) * 2 + \
     (2 * KVL_SPARSE_HEADS * KVL_SPARSE_SS + KVL_SPARSE_HEADS) * 4 + KVL_SPARSE_HEADS * 8)

/* q_s[64][KS] ← the nh ≤ 64 heads q[nh][576] in bf16 (0 past nh) */
__device__ __forceinline__ void kvl_mma_query(kvl_smem<uint16_t> q_s, const float *q, size_t nh)
{
    for (size_t e = threadIdx.x; e < KVL_SPARSE_HEADS * KVL_SPARSE_DK; e += blockDim.x) {
        const size_t hh = e / KVL_SPARSE_DK, c = e % KVL_SPARSE_DK;
        q_s[hh * KVL_SPARSE_KS + c] = static_cast<uint16_t>(hh < nh ? kvl_bf16_encode(q[e]) : 0u);
    }
}

/* kv_s[32][KS] ← the tile's rows rows_s[32] in bf16, decoded by R (0 for a NULL row). Every load of the
 * thread's nine pieces is issued before the first store, so their latencies overlap. */
template <typename R>
__device__ __forceinline__ void kvl_sparse_fill(kvl_smem<uint16_t> kv_s, kvl_smem<const uint8_t *> rows_s)
{
    uint4 v[KVL_SPARSE_FILL];
    KVL_UNROLL
    for (unsigned i = 0; i < KVL_SPARSE_FILL; i++) {
        const unsigned e = threadIdx.x + i * KVL_SPARSE_THREADS;
        const uint8_t *row = rows_s[e / KVL_SPARSE_CHUNKS];
        v[i] = row ? R::at(row, e % KVL_SPARSE_CHUNKS) : uint4{0, 0, 0, 0};
    }
    KVL_UNROLL
    for (unsigned i = 0; i < KVL_SPARSE_FILL; i++) {
        const unsigned e = threadIdx.x + i * KVL_SPARSE_THREADS;
        KVL_SMEM_AS(uint4, kv_s + e / KVL_SPARSE_CHUNKS * KVL_SPARSE_KS)[e % KVL_SPARSE_CHUNKS] = v[i];
    }
}

/* s_s[side][64][SS] ← the scores (unscaled) of head group hg's 16 heads against the tile's 32 rows over
 * channels [288·side, 288·side + 288), one m16n8k16 product per 16 channels and 8 rows */
__device__ __forceinline__ void kvl_mma_scores(kvl_smem<float> s_s, kvl_smem<uint16_t> q_s, kvl_smem<uint16_t> kv_s,
                                               unsigned hg, unsigned side)
{
    const unsigned lane = threadIdx.x % KVL_WARP, g = lane / 4, t = lane % 4;
    float s[KVL_SPARSE_TK / 8][4] = {};
    for (unsigned kk = 0; kk < KVL_SPARSE_DK / 2 / 16; kk++) {
        const size_t c0 = side * (KVL_SPARSE_DK / 2) + 16 * kk + 2 * t, r0 = (16 * hg + g) * KVL_SPARSE_KS;
        const uint32_t a[4] = {kvl_pair(q_s, r0 + c0), kvl_pair(q_s, r0 + 8 * KVL_SPARSE_KS + c0),
                               kvl_pair(q_s, r0 + c0 + 8), kvl_pair(q_s, r0 + 8 * KVL_SPARSE_KS + c0 + 8)};
        KVL_UNROLL
        for (unsigned nt = 0; nt < KVL_SPARSE_TK / 8; nt++) {
            const size_t k_row = (8 * nt + g) * KVL_SPARSE_KS + c0;
            const uint32_t bk[2] = {kvl_pair(kv_s, k_row), kvl_pair(kv_s, k_row + 8)};
            kvl_mma_bf16(s[nt], a, bk, s[nt]);
        }
    }
    KVL_UNROLL
    for (unsigned nt = 0; nt < KVL_SPARSE_TK / 8; nt++) {
        const size_t row = (side * KVL_SPARSE_HEADS + 16 * hg + g) * KVL_SPARSE_SS + 8 * nt + 2 * t;
        s_s[row] = s[nt][0];
        s_s[row + 1] = s[nt][1];
        s_s[row + 8 * KVL_SPARSE_SS] = s[nt][2];
        s_s[row + 8 * KVL_SPARSE_SS + 1] = s[nt][3];
    }
}

/* Four threads per head, eight keys each: the head's running softmax run_s[64] extended by the tile's
 * scores (both halves of s_s, times `scale`; −∞ for a key with no row), its weights p_s[64][PS] rounded to
 * bf16 (the denominator sums the rounded ones, as the values will), f_s[64] the factor its sums scale by.
 * A tile that sees no row yet leaves the part empty (weights 0, factor 1), never exp(−∞ + ∞). */
__device__ __forceinline__ void kvl_sparse_softmax(kvl_smem<uint16_t> p_s, kvl_smem<float> f_s,
                                                   kvl_smem<kvl_softmax_part> run_s, kvl_smem<float> s_s,
                                                   kvl_smem<const uint8_t *> rows_s, float scale)
{
    const unsigned head = threadIdx.x / 4, part = threadIdx.x % 4;
    float sc[8], m = -INFINITY, l = 0.0f;
    KVL_UNROLL
    for (int i = 0; i < 8; i++) {
        const unsigned key = 8 * part + i;
        const float both = s_s[head * KVL_SPARSE_SS + key] + s_s[(KVL_SPARSE_HEADS + head) * KVL_SPARSE_SS + key];
        sc[i] = static_cast<const uint8_t *>(rows_s[key]) ? both * scale : -INFINITY;
        m = fmaxf(m, sc[i]);
    }
    const kvl_softmax_part run = run_s[head];
    const float m_new = fmaxf(run.m, kvl_group_max<4>(m));
    const bool seen = m_new > -INFINITY;
    KVL_UNROLL
    for (int i = 0; i < 8; i++) {
        const uint32_t w = kvl_bf16_encode(seen ? expf(sc[i] - m_new) : 0.0f);
        p_s[head * KVL_SPARSE_PS + 8 * part + i] = static_cast<uint16_t>(w);
        l += kvl_bf16_decode(w);
    }
    l = kvl_group_sum<4>(l);
    const float f = seen ? expf(run.m - m_new) : 1.0f;
    __syncwarp();
    if (part == 0) {
        run_s[head] = kvl_softmax_part{m_new, run.l * f + l};
        f_s[head] = f;
    }
}

/* acc[nt] (the C fragments of one warp, as kvl_mma_values lays them out) ← acc[nt]·f: heads g and g + 8 of
 * head group hg scaled by their factors f_s[16hg + g] and f_s[16hg + g + 8] */
__device__ __forceinline__ void kvl_mma_rescale(float (&acc)[KVL_SPARSE_DV / 2 / 8][4], kvl_smem<float> f_s,
                                                unsigned hg, unsigned g)
{
    const float f_lo = f_s[16 * hg + g], f_hi = f_s[16 * hg + g + 8];
    KVL_UNROLL
    for (unsigned nt = 0; nt < KVL_SPARSE_DV / 2 / 8; nt++) {
        acc[nt][0] *= f_lo;
        acc[nt][1] *= f_lo;
        acc[nt][2] *= f_hi;
        acc[nt][3] *= f_hi;
    }
}

/* acc ← acc·f + weights × rows for head group hg's 16 heads and value channels [256·side, 256·side + 256):
 * the bf16 weights p_s[64][PS] times the tile's bf16 rows kv_s[32][KS], one m16n8k16 product per 16 keys
 * and 8 channels, summed in float; thread (g, t) of the warp holds acc[nt] = channels 8nt + 2t, +1 of heads
 * g and g + 8 (the C fragment) */
__device__ __forceinline__ void kvl_mma_values(float (&acc)[KVL_SPARSE_DV / 2 / 8][4], kvl_smem<uint16_t> p_s,
                                               kvl_smem<uint16_t> kv_s, kvl_smem<float> f_s, unsigned hg,
                                               unsigned side)
{
    const unsigned lane = threadIdx.x % KVL_WARP, g = lane / 4, t = lane % 4;
    kvl_mma_rescale(acc, f_s, hg, g);
    KVL_UNROLL
    for (unsigned kk = 0; kk < KVL_SPARSE_TK / 16; kk++) {
        const size_t r0 = (16 * hg + g) * KVL_SPARSE_PS + 16 * kk + 2 * t, k0 = (16 * kk + 2 * t) * KVL_SPARSE_KS;
        const uint32_t a[4] = {kvl_pair(p_s, r0), kvl_pair(p_s, r0 + 8 * KVL_SPARSE_PS), kvl_pair(p_s, r0 + 8),
                               kvl_pair(p_s, r0 + 8 * KVL_SPARSE_PS + 8)};
        KVL_UNROLL
        for (unsigned nt = 0; nt < KVL_SPARSE_DV / 2 / 8; nt++) {
            const size_t ch = side * (KVL_SPARSE_DV / 2) + 8 * nt + g;
            const uint32_t bv[2] = {
                kv_s[k0 + ch] | static_cast<uint32_t>(kv_s[k0 + KVL_SPARSE_KS + ch]) << 16,
                kv_s[k0 + 8 * KVL_SPARSE_KS + ch] | static_cast<uint32_t>(kv_s[k0 + 9 * KVL_SPARSE_KS + ch]) << 16};
            kvl_mma_bf16(acc[nt], a, bv, acc[nt]);
        }
    }
}

/* One warp's mma C fragments acc[nt] (kvl_mma_bf16's layout: channels 8nt + 2t and + 1 of heads head_lo and
 * head_lo + 8, in the half of Dv from side·Dv/2) into split `split` of part_o[B][H][n_splits][Dv]; a head at
 * or past H (a partial head block) is not stored. */
template <size_t Dv>
__device__ __forceinline__ void kvl_mma_store_part(float *part_o, const float (&acc)[Dv / 2 / 8][4], size_t b,
                                                   const kvl_attend_shape &sh, size_t split, size_t head_lo,
                                                   unsigned side, unsigned t)
{
    KVL_UNROLL
    for (unsigned nt = 0; nt < Dv / 2 / 8; nt++) {
        const size_t ch = side * (Dv / 2) + 8 * nt + 2 * t;
        KVL_UNROLL
        for (unsigned i = 0; i < 2; i++) {
            const size_t head = head_lo + 8 * i;
            if (head >= sh.H) continue;
            float *o = part_o + ((b * sh.H + head) * sh.n_splits + split) * Dv + ch;
            o[0] = acc[nt][2 * i];
            o[1] = acc[nt][2 * i + 1];
        }
    }
}

/* part_o[B][H][n_splits][512], part_ml[B][H][n_splits] from q_hat[B][H][576] over the keys of query set b:
 * key k < P::count(b) is the row P::row(b, k) (NULL: an invalid pick, weight 0), read by the chunk reader R
 * (kvl_chunks_bf16 or kvl_chunks_v32), one key head whose first 512 channels are also the value */
template <typename R, typename P>
__global__ void __launch_bounds__(KVL_SPARSE_THREADS, 1)
    kvl_sparse_mma_kernel(float *part_o, kvl_softmax_part *part_ml, const float *q_hat, kvl_attend_shape sh, P keys)
{
    KVL_DYNAMIC_SHARED(uint16_t, smem);
    KVL_SHARED(const uint8_t *, rows_s, KVL_SPARSE_TK);
    kvl_smem<uint16_t> q_s = smem, kv_s = q_s + KVL_SPARSE_HEADS * KVL_SPARSE_KS;
    kvl_smem<uint16_t> p_s = kv_s + KVL_SPARSE_TK * KVL_SPARSE_KS;
    kvl_smem<float> s_s = KVL_SMEM_AS(float, p_s + KVL_SPARSE_HEADS * KVL_SPARSE_PS);
    kvl_smem<float> f_s = s_s + 2 * KVL_SPARSE_HEADS * KVL_SPARSE_SS;
    kvl_smem<kvl_softmax_part> run_s = KVL_SMEM_AS(kvl_softmax_part, f_s + KVL_SPARSE_HEADS);
    const unsigned tid = threadIdx.x, warp = tid / KVL_WARP, lane = tid % KVL_WARP, g = lane / 4, t = lane % 4;
    const unsigned hg = warp % 4, side = warp / 4; /* this warp's head group and half of the channels */
    const size_t b = blockIdx.z, h0 = blockIdx.y * static_cast<size_t>(KVL_SPARSE_HEADS), split = blockIdx.x;
    const size_t nh = sh.H - h0 < KVL_SPARSE_HEADS ? sh.H - h0 : KVL_SPARSE_HEADS, n = keys.count(b);
    const size_t lo = split * sh.split, hi = lo + sh.split < n ? lo + sh.split : n;

    kvl_mma_query(q_s, q_hat + (b * sh.H + h0) * KVL_SPARSE_DK, nh);
    if (tid < KVL_SPARSE_HEADS) run_s[tid] = kvl_softmax_empty();
    float acc[KVL_SPARSE_DV / 2 / 8][4] = {};
    for (size_t tile = lo; tile < hi; tile += KVL_SPARSE_TK) {
        __syncthreads();
        if (tid < KVL_SPARSE_TK) rows_s[tid] = tile + tid < hi ? keys.row(b, tile + tid) : NULL;
        __syncthreads();
        kvl_sparse_fill<R>(kv_s, rows_s);
        __syncthreads();
        kvl_mma_scores(s_s, q_s, kv_s, hg, side);
        __syncthreads();
        kvl_sparse_softmax(p_s, f_s, run_s, s_s, rows_s, sh.scale);
        __syncthreads();
        kvl_mma_values(acc, p_s, kv_s, f_s, hg, side);
    }
    kvl_mma_store_part<KVL_SPARSE_DV>(part_o, acc, b, sh, split, h0 + 16 * hg + g, side, t);
    if (tid < nh) part_ml[(b * sh.H + h0 + tid) * sh.n_splits + split] = run_s[tid];
}

/* o[B][Q][H][Dv] = the merge of every split's partial and of the head's sink sinks[H] (NULL: none); 0 where
 * nothing was seen (a sparse query that selects no key) */
template <typename T>
__global__ void kvl_attend_merge_kernel(T *o, const float *part_o, const kvl_softmax_part *part_ml, const float *sinks,
                                        size_t H, size_t Q, size_t Dv, size_t n_splits)
{
    const size_t qi = blockIdx.x, h = blockIdx.y, b = blockIdx.z, base = ((b * H + h) * Q + qi) * n_splits;
    for (size_t d = threadIdx.x; d < Dv; d += blockDim.x) {
        kvl_softmax_part run = kvl_softmax_empty();
        float a = 0.0f, fa, fb;
        for (size_t p = 0; p < n_splits; p++) {
            run = kvl_softmax_merge(run, part_ml[base + p], &fa, &fb);
            a = a * fa + part_o[(base + p) * Dv + d] * fb;
        }
        if (sinks) {
            run = kvl_softmax_merge(run, kvl_softmax_part{sinks[h], 1.0f}, &fa, &fb);
            a *= fa;
        }
        o[((b * Q + qi) * H + h) * Dv + d] = run.l > 0.0f ? a / run.l : 0.0f;
    }
}

/* ---- launch (host) ---------------------------------------------------------------------------------- */

#define KVL_MIN_SPLIT 64
/* Keys per split when n_keys are cut into at most `fill` splits, none shorter than KVL_MIN_SPLIT keys, a whole
 * number of 32-key tiles */
inline size_t kvl_split_keys(size_t n_keys, size_t fill)
{
    const size_t most = kvl_div_up(n_keys, KVL_MIN_SPLIT), n_splits = fill < most ? fill : most;
    return n_splits ? kvl_div_up(kvl_div_up(n_keys, n_splits), 32) * 32 : KVL_MIN_SPLIT;
}

/* Keys per split of a decode over n_keys keys whose launch has `blocks` blocks per split (sequences × head
 * groups × query tiles): `fixed` where a cache sets one, else as FlashMLA's get_mla_metadata schedules (splits
 * from the SM count and the batch): enough splits for the grid to fill every SM twice (kvl_split_keys). The
 * workspace, blocks × splits partial rows, then depends on the SMs and the batch and not on n_keys. */
inline size_t kvl_decode_split(size_t fixed, size_t n_keys, size_t blocks)
{
    if (fixed) return fixed;
    return kvl_split_keys(n_keys, kvl_div_up(2 * static_cast<size_t>(kvl_cuda_sm_count()), blocks ? blocks : 1));
}

/* Floats of workspace kvl_attend_cuda needs: the partial sums and the partial softmax parts. */
inline size_t kvl_attend_work_floats(const kvl_attend_shape &sh)
{
    return sh.B * sh.H * sh.Q * sh.n_splits * (sh.Dv + sizeof(kvl_softmax_part) / sizeof(float));
}

/* o[B][Q][H][Dv] = softmax(q·Kᵀ·scale)·V over the keys of (sh, kv); work holds kvl_attend_work_floats. */
template <typename R, int QT>
int kvl_attend_cuda(float *o, const float *q, const kvl_attend_shape &sh, const kvl_attend_kv &kv, float *work)
{
    const size_t Dmax = sh.Dk > sh.Dv ? sh.Dk : sh.Dv;
    const size_t smem = (QT * sh.Dk + KVL_ATT_TK * (Dmax + 1) + QT * KVL_ATT_TK + QT) * sizeof(float);
    const size_t blocks = sh.n_splits * kvl_div_up(sh.Q, QT);
    if (QT * sh.Dv > KVL_ATT_ACC * KVL_ATT_THREADS || blocks > 0x7FFFFFFFu || sh.H > 65535 || sh.B > 65535)
        return kvl_fail(KVL_EINVAL, "attention: %zu queries of %zu heads of %zu channels in %zu sequences are more "
                        "than the kernel takes", sh.Q, sh.H, sh.Dv, sh.B);
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kvl_attend_kernel<R, QT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
    float *part_o = work;
    kvl_softmax_part *part_ml = reinterpret_cast<kvl_softmax_part *>(work + sh.B * sh.H * sh.Q * sh.n_splits * sh.Dv);
    const dim3 grid(static_cast<unsigned>(blocks), static_cast<unsigned>(sh.H), static_cast<unsigned>(sh.B));
    CUDA_CHECK(KVL_LAUNCH(kvl_attend_kernel<R, QT>, grid, KVL_ATT_THREADS, smem, part_o, part_ml, q, sh, kv));
    const dim3 merge_grid(static_cast<unsigned>(sh.Q), static_cast<unsigned>(sh.H), static_cast<unsigned>(sh.B));
    CUDA_CHECK(KVL_LAUNCH(kvl_attend_merge_kernel<float>, merge_grid, KVL_ATT_THREADS, 0, o, part_o, part_ml,
                          static_cast<const float *>(NULL), sh.H, sh.Q, sh.Dv, sh.n_splits));
    return KVL_OK;
}

/* o[B][H][Dv] = the merge of a decode's split partials part_o[B][H][n_splits][Dv], part_ml[B][H][n_splits]
 * (sh.Q = 1) and of the sinks[H] if not NULL */
inline int kvl_decode_merge_cuda(float *o, const float *part_o, const kvl_softmax_part *part_ml,
                                 const kvl_attend_shape &sh, const float *sinks)
{
    const dim3 merge_grid(1, static_cast<unsigned>(sh.H), static_cast<unsigned>(sh.B));
    CUDA_CHECK(KVL_LAUNCH(kvl_attend_merge_kernel<float>, merge_grid, KVL_ATT_THREADS, 0, o, part_o, part_ml, sinks,
                          sh.H, static_cast<size_t>(1), sh.Dv, sh.n_splits));
    return KVL_OK;
}

/* o[B][H][Dv] = softmax(q·Kᵀ·scale, with the sinks[H] if not NULL)·V over the keys `keys` names for each
 * query set b (sh.n_keys: the most any set has, sh.Q = 1, sh.G = H), the window's rows read by RW and the
 * rest by RE; work holds kvl_attend_work_floats. */
template <typename RW, typename RE, typename P>
int kvl_gather_attend_two_cuda(float *o, const float *q, const kvl_attend_shape &sh, const P &keys, const float *sinks,
                               float *work)
{
    const size_t smem = (sh.Dk + KVL_ATT_TK * (sh.Dk + 1) + KVL_ATT_TK + 1) * sizeof(float);
    if (sh.Dv > KVL_ATT_ACC * KVL_ATT_THREADS || sh.Dv > sh.Dk || smem > KVL_SMEM_OPTIN || sh.n_splits > 0x7FFFFFFFu ||
        sh.H > 65535 || sh.B > 65535)
        return kvl_fail(KVL_EINVAL, "attention: %zu heads of %zu channels over %zu query sets are more than the gather "
                        "kernel takes", sh.H, sh.Dk, sh.B);
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kvl_gather_attend_kernel<RW, RE, P>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)));
    float *part_o = work;
    kvl_softmax_part *part_ml = reinterpret_cast<kvl_softmax_part *>(work + sh.B * sh.H * sh.n_splits * sh.Dv);
    const dim3 grid(static_cast<unsigned>(sh.n_splits), static_cast<unsigned>(sh.H), static_cast<unsigned>(sh.B));
    CUDA_CHECK(KVL_LAUNCH(kvl_gather_attend_kernel<RW, RE, P>, grid, KVL_ATT_THREADS, smem, part_o, part_ml, q, sh,
                          keys));
    return kvl_decode_merge_cuda(o, part_o, part_ml, sh, sinks);
}

/* The same over keys of one row source, every row read by R. */
template <typename R, typename P>
int kvl_gather_attend_cuda(float *o, const float *q, const kvl_attend_shape &sh, const P &keys, const float *sinks,
                           float *work)
{
    return kvl_gather_attend_two_cuda<R, R>(o, q, sh, keys, sinks, work);
}

/* Keys per split of kvl_sparse_mma_kernel over n_keys picks with `blocks` blocks per split (sequences × head
 * groups): `fixed` where a cache sets one, else as many splits as fit the SMs once (one block fills an SM: its
 * shared memory), ⌊SMs / blocks⌋ and at least one. At B 64 and 128 heads that is one split, 128 blocks on an
 * H200's 132 SMs, and the partials cost one write and one read of the output. */
inline size_t kvl_sparse_split(size_t fixed, size_t n_keys, size_t blocks)
{
    if (fixed) return fixed;
    const size_t sms = static_cast<size_t>(kvl_cuda_sm_count());
    return kvl_split_keys(n_keys, blocks && blocks < sms ? sms / blocks : 1);
}

/* o[B][H][512] = softmax(q̂·Kᵀ·scale)·V over the keys `keys` names for each query set b (q_hat[B][H][576]; sh.Dk
 * 576, sh.Dv 512, sh.Q = 1), on tensor cores, rows read by the chunk reader R; work holds
 * kvl_attend_work_floats. */
template <typename R, typename P>
int kvl_sparse_mma_cuda(float *o, const float *q_hat, const kvl_attend_shape &sh, const P &keys, float *work)
{
    const size_t head_blocks = kvl_div_up(sh.H, KVL_SPARSE_HEADS);
    if (sh.Dk != KVL_SPARSE_DK || sh.Dv != KVL_SPARSE_DV)
        return kvl_fail(KVL_EINVAL, "sparse attention on tensor cores: rows of %zu channels, values of %zu (it takes "
                        "%d and %d)", sh.Dk, sh.Dv, KVL_SPARSE_DK, KVL_SPARSE_DV);
    if (sh.n_splits > 0x7FFFFFFFu || head_blocks > 65535 || sh.B > 65535)
        return kvl_fail(KVL_EINVAL, "sparse attention on tensor cores: %zu splits of %zu heads over %zu query sets are "
                        "more than one launch takes", sh.n_splits, sh.H, sh.B);
    float *part_o = work;
    kvl_softmax_part *part_ml = reinterpret_cast<kvl_softmax_part *>(work + sh.B * sh.H * sh.n_splits * sh.Dv);
    CUDA_CHECK(cudaFuncSetAttribute(kvl_sparse_mma_kernel<R, P>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    KVL_SPARSE_SMEM));
    const dim3 grid(static_cast<unsigned>(sh.n_splits), static_cast<unsigned>(head_blocks),
                    static_cast<unsigned>(sh.B));
    CUDA_CHECK(KVL_LAUNCH(kvl_sparse_mma_kernel<R, P>, grid, KVL_SPARSE_THREADS, KVL_SPARSE_SMEM, part_o, part_ml,
                          q_hat, sh, keys));
    return kvl_decode_merge_cuda(o, part_o, part_ml, sh, NULL);
}

#endif
