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

/* Keys per split of a decode over n_keys keys whose launch has `blocks` blocks per split (sequences × head
 * groups × query tiles): `fixed` where a cache sets one, else as FlashMLA's get_mla_metadata schedules (splits
 * from the SM count and the batch): enough splits for the grid to fill every SM twice, none shorter than
 * KVL_MIN_SPLIT keys, a whole number of 32-key tiles. The workspace, blocks × splits partial rows, then
 * depends on the SMs and the batch and not on n_keys. */
#define KVL_MIN_SPLIT 64
inline size_t kvl_decode_split(size_t fixed, size_t n_keys, size_t blocks)
{
    if (fixed) return fixed;
    const size_t fill = kvl_div_up(2 * static_cast<size_t>(kvl_cuda_sm_count()), blocks ? blocks : 1);
    const size_t most = kvl_div_up(n_keys, KVL_MIN_SPLIT), n_splits = fill < most ? fill : most;
    return n_splits ? kvl_div_up(kvl_div_up(n_keys, n_splits), 32) * 32 : KVL_MIN_SPLIT;
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
    const dim3 merge_grid(1, static_cast<unsigned>(sh.H), static_cast<unsigned>(sh.B));
    CUDA_CHECK(KVL_LAUNCH(kvl_attend_merge_kernel<float>, merge_grid, KVL_ATT_THREADS, 0, o, part_o, part_ml, sinks,
                          sh.H, static_cast<size_t>(1), sh.Dv, sh.n_splits));
    return KVL_OK;
}

/* The same over keys of one row source, every row read by R. */
template <typename R, typename P>
int kvl_gather_attend_cuda(float *o, const float *q, const kvl_attend_shape &sh, const P &keys, const float *sinks,
                           float *work)
{
    return kvl_gather_attend_two_cuda<R, R>(o, q, sh, keys, sinks, work);
}

#endif
