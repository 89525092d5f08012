/* DSA's kernels on the device: the lightning indexer's scores and the sparse attention over the rows a
 * selection names.
 *
 * Build: included by cuda/dsa_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_index_scores_kernel<R>  one block of 128 threads per (split of 256 keys, query, sequence): the
 *                               query's HI heads and weights sit in shared memory; keys go through shared
 *                               memory 32 at a time (rows decoded by the reader R: float32, or the
 *                               132-byte index row's E4M3 codes times its scale), four threads per key
 *                               each sum w_j·ReLU(q_j·k) over every fourth head, a group sum adds the
 *                               four (kvl_index_tile_scores, which V4.1's pool scores share). Keys the
 *                               query may not see get −∞ and are never read. V4's and V4.1's indexers
 *                               over compressed entries (v4_cuda.h, v41_indexer_cuda.h) run it too.
 *   kvl_index_mma_kernel<Row>   the fp8 indexer (132-byte keys, DI 128, up to 64 heads) on bf16 tensor cores,
 *                               kvl_index_scores_kernel<kvl_rows_v32_index> its readable twin: the same
 *                               blocks, the query's 64 heads in shared memory as bf16; each warp takes 16 keys
 *                               at a time, S[16 keys][64 heads] = K·Qᵀ by 64 m16n8k16 products whose A
 *                               fragments are the keys' codes read straight from memory (a 32-bit word of
 *                               four codes per key and 16 channels, decoded to bf16 exactly; the channels'
 *                               order inside the fragment is free, as the dot product does not see it), the
 *                               row's scale, ReLU and head weights applied to the float scores in registers,
 *                               the heads summed across a fragment's four lanes. Bound by the copy's
 *                               bandwidth (tests/bench/README.md, "Design measurements").
 *   kvl_gather_attend_kernel<R, R, kvl_dsa_picks> (attend_cuda.cuh) the sparse attention on float cores,
 *                               one block per head: the K rows a selection names, read from the ring in
 *                               place (R decodes float32, bf16 or the 656-byte FP8 row), an entry of −1
 *                               scored −∞; splits of the K entries merge with kvl_attend_merge_kernel. The
 *                               twin of the next, and the kernel for other widths and float32 rows.
 *   kvl_sparse_mma_kernel<R, kvl_dsa_picks> (attend_cuda.cuh) the same on tensor cores at DeepSeek's widths
 *                               over bf16 or FP8 rows, 64 heads a block sharing each gathered row: what
 *                               dsa_attend_gather_cuda runs there. */
#ifndef KVL_DSA_CUDA_CUH
#define KVL_DSA_CUDA_CUH

#include "attend_cuda.cuh"

#define KVL_IDX_TK 32      /* keys per tile */
#define KVL_IDX_THREADS 128
#define KVL_IDX_LANES 4    /* threads per key: KVL_IDX_TK · KVL_IDX_LANES = KVL_IDX_THREADS */
#define KVL_IDX_SPLIT 256  /* keys per block */

/* Query i (at position start + i) sees keys s < ⌊(start + i + 1)/M⌋: M = 1 for V3.2's tokens (s ≤ t), the
 * compress ratio for V4's entries. */
struct kvl_index_shape {
    size_t B, S, N, HI, DI, start, M; /* sequences, queries, keys, index heads, head width, query 0's position */
};

/* keys of sequence b at rows + (b·N + s)·row_bytes */
struct kvl_index_keys {
    const uint8_t *rows;
    size_t row_bytes;
};

/* Value col of a V3.2 index row (formats/rows.h): E4M3 code times the row's FP32 scale. */
struct kvl_rows_v32_index {
    __device__ static float at(const uint8_t *row, size_t col)
    {
        const float scale = kvl_le_f32(row + offsetof(kvf_row_v32_index, scale) + 4 * (col / KVF_V32_BLOCK));
        return kvl_e4m3_decode(row[col]) * scale;
    }
};

/* Shared memory of the indexer's kernels: the query's heads q_s[HI·DI] and weights w_s[HI], a key tile
 * k_s[TK][DI + 1] (padded against bank conflicts). */
__host__ __device__ inline size_t kvl_index_smem_floats(size_t HI, size_t DI)
{
    return HI * DI + HI + KVL_IDX_TK * (DI + 1);
}

/* q_s[HI·DI], w_s[HI] ← one query's q[HI][DI], w[HI] */
__device__ __forceinline__ void kvl_index_query_load(kvl_smem<float> q_s, kvl_smem<float> w_s, const float *q,
                                                     const float *w, size_t HI, size_t DI)
{
    for (size_t e = threadIdx.x; e < HI * DI; e += blockDim.x) q_s[e] = q[e];
    for (size_t e = threadIdx.x; e < HI; e += blockDim.x) w_s[e] = w[e];
}

/* Σ_h w_h·ReLU(q_h·k_j) for the n ≤ TK keys of a tile, key r's row at row(r) (decoded by R): thread t holds
 * key t / LANES's score (every lane of its group); k_s is the tile. */
template <typename R, typename Row>
__device__ float kvl_index_tile_scores(kvl_smem<float> k_s, kvl_smem<float> q_s, kvl_smem<float> w_s, const Row &row,
                                       size_t n, size_t HI, size_t DI)
{
    static_assert(KVL_IDX_TK * KVL_IDX_LANES == KVL_IDX_THREADS, "four threads per key of a tile");
    const unsigned t = threadIdx.x, j = t / KVL_IDX_LANES, part = t % KVL_IDX_LANES;
    __syncthreads();
    for (size_t e = t; e < KVL_IDX_TK * DI; e += blockDim.x) {
        const size_t r = e / DI, d = e % DI;
        k_s[r * (DI + 1) + d] = r < n ? R::at(row(r), d) : 0.0f;
    }
    __syncthreads();
    float acc = 0.0f;
    for (size_t h = part; h < HI; h += KVL_IDX_LANES) {
        float dot = 0.0f;
        for (size_t d = 0; d < DI; d++) dot += q_s[h * DI + d] * k_s[j * (DI + 1) + d];
        acc += w_s[h] * (dot > 0.0f ? dot : 0.0f);
    }
    return kvl_group_sum<KVL_IDX_LANES>(acc);
}

/* key r of a run of consecutive rows from `first` */
struct kvl_index_run {
    const uint8_t *first;
    size_t row_bytes;
    __device__ const uint8_t *operator()(size_t r) const { return first + r * row_bytes; }
};

/* I[B][S][N] from q_idx[B][S][HI][DI], w_idx[B][S][HI] and the keys */
template <typename R>
__global__ void __launch_bounds__(KVL_IDX_THREADS)
    kvl_index_scores_kernel(float *I, const float *q_idx, const float *w_idx, kvl_index_shape sh, kvl_index_keys keys)
{
    KVL_DYNAMIC_SHARED(float, smem);
    const size_t HI = sh.HI, DI = sh.DI, i = blockIdx.y, b = blockIdx.z;
    kvl_smem<float> q_s = smem, w_s = q_s + HI * DI, k_s = w_s + HI;
    const unsigned t = threadIdx.x, j = t / KVL_IDX_LANES, part = t % KVL_IDX_LANES;
    const size_t visible = (sh.start + i + 1) / sh.M, lo = blockIdx.x * static_cast<size_t>(KVL_IDX_SPLIT);
    const size_t hi = lo + KVL_IDX_SPLIT < sh.N ? lo + KVL_IDX_SPLIT : sh.N, seen = hi < visible ? hi : visible;
    float *out = I + (b * sh.S + i) * sh.N;
    for (size_t s = (lo > seen ? lo : seen) + t; s < hi; s += blockDim.x) out[s] = -INFINITY;
    if (lo >= seen) return;
    kvl_index_query_load(q_s, w_s, q_idx + (b * sh.S + i) * HI * DI, w_idx + (b * sh.S + i) * HI, HI, DI);
    for (size_t tile = lo; tile < seen; tile += KVL_IDX_TK) {
        const kvl_index_run row{keys.rows + (b * sh.N + tile) * keys.row_bytes, keys.row_bytes};
        const float acc = kvl_index_tile_scores<R>(k_s, q_s, w_s, row, seen - tile, HI, DI);
        if (part == 0 && tile + j < seen) out[tile + j] = acc;
    }
}

/* ---- the fp8 indexer on tensor cores ------------------------------------------------------------------ */

#define KVL_IDXM_HEADS 64                   /* index heads a block holds: eight n-tiles of 8 */
#define KVL_IDXM_QS (KVF_INDEX_DIM + 16)    /* bf16 per shared query row: 72 words, ≡ 8 mod 32 banks */
#define KVL_IDXM_KEYS 16                    /* keys per warp step: the M of m16n8k16 */
#define KVL_IDXM_WARPS (KVL_IDX_THREADS / KVL_WARP)
static_assert(KVF_INDEX_DIM == 128 && KVF_INDEX_DIM == KVF_V32_BLOCK, "a 132-byte key: 128 codes, one scale");
static_assert(offsetof(kvf_row_v32_index, codes) == 0 && sizeof(kvf_row_v32_index) % 4 == 0,
              "a key's codes are read four at a time, as uint32");

/* two E4M3 codes (the low 16 bits of `pair`) as one bf16 pair, exactly */
__device__ __forceinline__ uint32_t kvl_e4m3x2_bf16x2(uint32_t pair)
{
    return kvl_bf16_encode(kvl_e4m3_decode(pair & 0xFFu)) | kvl_bf16_encode(kvl_e4m3_decode(pair >> 8 & 0xFFu)) << 16;
}

/* q_s[64][QS] ← one query's HI ≤ 64 heads q[HI][128] in bf16, w_s[64] ← w[HI] (0 past HI) */
__device__ __forceinline__ void kvl_index_mma_query(kvl_smem<uint16_t> q_s, kvl_smem<float> w_s, const float *q,
                                                    const float *w, size_t HI)
{
    for (size_t e = threadIdx.x; e < KVL_IDXM_HEADS * KVF_INDEX_DIM; e += blockDim.x) {
        const size_t h = e / KVF_INDEX_DIM, d = e % KVF_INDEX_DIM;
        q_s[h * KVL_IDXM_QS + d] = static_cast<uint16_t>(h < HI ? kvl_bf16_encode(q[e]) : 0u);
    }
    for (size_t h = threadIdx.x; h < KVL_IDXM_HEADS; h += blockDim.x) w_s[h] = h < HI ? w[h] : 0.0f;
}

/* The weighed scores Σ_h w_h·ReLU(q_h·k) of keys g and g + 8 (g = lane / 4) of the 16 132-byte rows from
 * `rows`, n ≤ 16 of them real (0 past n): S[16 keys][64 heads] = K·Qᵀ on tensor cores, eight m16n8k16 per 16
 * channels. The dot product does not depend on the order of its channels, so thread (g, t)'s A fragment for
 * channels 16kk … 16kk + 15 takes key g's and key g + 8's fourth word 4kk + t whole (channels 16kk + 4t … + 3)
 * as its logical columns 2t, 2t + 1, 2t + 8, 2t + 9, and its B fragment the same four channels of q: one
 * 32-bit load per key and step, no shared staging. w[16] holds w_h for the heads of the thread's C fragment,
 * 8nt + 2t and 8nt + 2t + 1; the row's scale multiplies each head's dot product before its ReLU. */
template <typename Row>
__device__ __forceinline__ float2 kvl_index_mma_keys(kvl_smem<uint16_t> q_s, const float (&w)[16],
                                                     const uint8_t *rows, size_t row_bytes, size_t n)
{
    const unsigned lane = threadIdx.x % KVL_WARP, g = lane / 4, t = lane % 4;
    const uint8_t *k_lo = g < n ? rows + g * row_bytes : NULL, *k_hi = g + 8 < n ? rows + (g + 8) * row_bytes : NULL;
    float c[KVL_IDXM_HEADS / 8][4] = {};
    KVL_UNROLL
    for (unsigned kk = 0; kk < KVF_INDEX_DIM / 16; kk++) {
        const uint32_t lo = k_lo ? KVL_GLOBAL_AS(const uint32_t, k_lo)[4 * kk + t] : 0u;
        const uint32_t hi = k_hi ? KVL_GLOBAL_AS(const uint32_t, k_hi)[4 * kk + t] : 0u;
        const uint32_t a[4] = {kvl_e4m3x2_bf16x2(lo), kvl_e4m3x2_bf16x2(hi), kvl_e4m3x2_bf16x2(lo >> 16),
                               kvl_e4m3x2_bf16x2(hi >> 16)};
        KVL_UNROLL
        for (unsigned nt = 0; nt < KVL_IDXM_HEADS / 8; nt++) {
            const uint2 q = KVL_SMEM_AS(uint2, q_s + (8 * nt + g) * KVL_IDXM_QS + 16 * kk + 4 * t)[0];
            const uint32_t b[2] = {q.x, q.y};
            kvl_mma_bf16(c[nt], a, b, c[nt]);
        }
    }
    const size_t scale_at = offsetof(Row, scale);
    const float s_lo = k_lo ? kvl_le_f32(k_lo + scale_at) : 0.0f, s_hi = k_hi ? kvl_le_f32(k_hi + scale_at) : 0.0f;
    float sum_lo = 0.0f, sum_hi = 0.0f;
    KVL_UNROLL
    for (unsigned nt = 0; nt < KVL_IDXM_HEADS / 8; nt++)
        KVL_UNROLL
        for (unsigned j = 0; j < 2; j++) {
            sum_lo += w[2 * nt + j] * fmaxf(c[nt][j] * s_lo, 0.0f);
            sum_hi += w[2 * nt + j] * fmaxf(c[nt][2 + j] * s_hi, 0.0f);
        }
    return make_float2(kvl_group_sum<4>(sum_lo), kvl_group_sum<4>(sum_hi));
}

/* I[B][S][N] from q_idx[B][S][HI ≤ 64][128], w_idx[B][S][HI] and keys laid out as Row (kvf_row_v32_index: 128
 * codes, then one FP32 scale): kvl_index_scores_kernel's blocks and masking, each of its four warps scoring 16
 * keys at a time on tensor cores */
template <typename Row>
__global__ void __launch_bounds__(KVL_IDX_THREADS)
    kvl_index_mma_kernel(float *I, const float *q_idx, const float *w_idx, kvl_index_shape sh, kvl_index_keys keys)
{
    KVL_SHARED(uint16_t, q_s, KVL_IDXM_HEADS * KVL_IDXM_QS);
    KVL_SHARED(float, w_s, KVL_IDXM_HEADS);
    const size_t i = blockIdx.y, b = blockIdx.z, lo = blockIdx.x * static_cast<size_t>(KVL_IDX_SPLIT);
    const unsigned warp = threadIdx.x / KVL_WARP, lane = threadIdx.x % KVL_WARP, g = lane / 4, t = lane % 4;
    const size_t visible = (sh.start + i + 1) / sh.M, hi = lo + KVL_IDX_SPLIT < sh.N ? lo + KVL_IDX_SPLIT : sh.N;
    const size_t seen = hi < visible ? hi : visible;
    float *out = I + (b * sh.S + i) * sh.N;
    for (size_t s = (lo > seen ? lo : seen) + threadIdx.x; s < hi; s += blockDim.x) out[s] = -INFINITY;
    if (lo >= seen) return;
    kvl_index_mma_query(q_s, w_s, q_idx + (b * sh.S + i) * sh.HI * KVF_INDEX_DIM, w_idx + (b * sh.S + i) * sh.HI,
                        sh.HI);
    __syncthreads();
    float w[16];
    KVL_UNROLL
    for (unsigned k = 0; k < 16; k++) w[k] = w_s[8 * (k / 2) + 2 * t + k % 2];
    for (size_t k0 = lo + warp * KVL_IDXM_KEYS; k0 < seen; k0 += KVL_IDXM_WARPS * KVL_IDXM_KEYS) {
        const float2 sc = kvl_index_mma_keys<Row>(q_s, w, keys.rows + (b * sh.N + k0) * keys.row_bytes, keys.row_bytes,
                                             seen - k0);
        if (t == 0 && k0 + g < seen) out[k0 + g] = sc.x;
        if (t == 0 && k0 + g + 8 < seen) out[k0 + g + 8] = sc.y;
    }
}

/* The keys of sequence b's query: the ring rows its selection sel[b][0 … K − 1] names (−1: none). */
struct kvl_dsa_picks {
    kvl_attend_kv kv;
    const int32_t *sel;
    size_t K;
    __device__ size_t count(size_t) const { return K; }
    __device__ const uint8_t *row(size_t b, size_t k) const
    {
        const int32_t p = sel[b * K + k];
        return p < 0 ? NULL : kvl_kv_row(kv, b, static_cast<size_t>(p));
    }
};

/* ---- launch (host) ---------------------------------------------------------------------------------- */

/* KVL_OK if one launch of the indexer's blocks takes (sh, smem bytes) and its arrays are there */
inline int kvl_index_launch_check(const float *I, const float *q_idx, const float *w_idx, const kvl_index_shape &sh,
                                  const kvl_index_keys &keys, size_t smem, const char *fn)
{
    if (!I || !q_idx || !w_idx || !keys.rows) return kvl_fail(KVL_EINVAL, "%s: NULL array", fn);
    if (smem > KVL_SMEM_OPTIN || kvl_div_up(sh.N, KVL_IDX_SPLIT) > 0x7FFFFFFFu || sh.S > 65535 || sh.B > 65535)
        return kvl_fail(KVL_EINVAL, "%s: %zu index heads of %zu channels, %zu keys, %zu queries in %zu sequences are "
                        "more than the kernel takes", fn, sh.HI, sh.DI, sh.N, sh.S, sh.B);
    return KVL_OK;
}

/* I[B][S][N] for (sh, keys); fn names the caller in an error. */
template <typename R>
int kvl_index_scores_cuda(float *I, const float *q_idx, const float *w_idx, const kvl_index_shape &sh,
                          const kvl_index_keys &keys, const char *fn)
{
    if (sh.B == 0 || sh.S == 0 || sh.N == 0) return KVL_OK;
    const size_t smem = kvl_index_smem_floats(sh.HI, sh.DI) * sizeof(float);
    KVL_TRY(kvl_index_launch_check(I, q_idx, w_idx, sh, keys, smem, fn));
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kvl_index_scores_kernel<R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
    const dim3 grid(static_cast<unsigned>(kvl_div_up(sh.N, KVL_IDX_SPLIT)), static_cast<unsigned>(sh.S),
                    static_cast<unsigned>(sh.B));
    CUDA_CHECK(KVL_LAUNCH(kvl_index_scores_kernel<R>, grid, KVL_IDX_THREADS, smem, I, q_idx, w_idx, sh, keys));
    return KVL_OK;
}

/* The same on tensor cores over 132-byte keys (sh.DI 128, sh.HI ≤ 64; q rounded to bf16, which the fp8
 * indexer's view of a query is exactly) */
inline int kvl_index_mma_cuda(float *I, const float *q_idx, const float *w_idx, const kvl_index_shape &sh,
                              const kvl_index_keys &keys, const char *fn)
{
    if (sh.B == 0 || sh.S == 0 || sh.N == 0) return KVL_OK;
    if (sh.DI != KVF_INDEX_DIM || sh.HI > KVL_IDXM_HEADS)
        return kvl_fail(KVL_EINVAL, "%s: the tensor-core indexer takes DI %d and at most %d heads (got %zu, %zu)", fn,
                        KVF_INDEX_DIM, KVL_IDXM_HEADS, sh.DI, sh.HI);
    KVL_TRY(kvl_index_launch_check(I, q_idx, w_idx, sh, keys, 0, fn));
    const dim3 grid(static_cast<unsigned>(kvl_div_up(sh.N, KVL_IDX_SPLIT)), static_cast<unsigned>(sh.S),
                    static_cast<unsigned>(sh.B));
    CUDA_CHECK(
        KVL_LAUNCH(kvl_index_mma_kernel<kvf_row_v32_index>, grid, KVL_IDX_THREADS, 0, I, q_idx, w_idx, sh, keys));
    return KVL_OK;
}

#endif
