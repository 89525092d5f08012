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
 *                               over compressed entries (v4_cuda.h, csa2_indexer_cuda.h) run it too.
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

/* I[B][S][N] for (sh, keys); fn names the caller in an error. */
template <typename R>
int kvl_index_scores_cuda(float *I, const float *q_idx, const float *w_idx, const kvl_index_shape &sh,
                          const kvl_index_keys &keys, const char *fn)
{
    if (sh.B == 0 || sh.S == 0 || sh.N == 0) return KVL_OK;
    if (!I || !q_idx || !w_idx || !keys.rows) return kvl_fail(KVL_EINVAL, "%s: NULL array", fn);
    const size_t smem = kvl_index_smem_floats(sh.HI, sh.DI) * sizeof(float);
    const size_t splits = kvl_div_up(sh.N, KVL_IDX_SPLIT);
    if (smem > KVL_SMEM_OPTIN || splits > 0x7FFFFFFFu || sh.S > 65535 || sh.B > 65535)
        return kvl_fail(KVL_EINVAL, "%s: %zu index heads of %zu channels, %zu keys, %zu queries in %zu sequences are "
                        "more than the kernel takes", fn, sh.HI, sh.DI, sh.N, sh.S, sh.B);
    if (smem > 48 * 1024)
        CUDA_CHECK(cudaFuncSetAttribute(kvl_index_scores_kernel<R>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
    const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(sh.S), static_cast<unsigned>(sh.B));
    CUDA_CHECK(KVL_LAUNCH(kvl_index_scores_kernel<R>, grid, KVL_IDX_THREADS, smem, I, q_idx, w_idx, sh, keys));
    return KVL_OK;
}

#endif