/* V4's rows and key sets on the device: the 584-byte main row and the 68-byte MXFP4 index key read in
 * place, and the keys a query attends to.
 *
 * Build: included by cuda/v4_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_gather_attend_kernel<R, R, kvl_v4_keys> (attend_cuda.cuh) V4's attention core: query i's keys are
 *                               its window rows, then its compressed rows (HCA: every visible entry; CSA:
 *                               its picks, −1 scored −∞); R reads float32 or the 584-byte row (E4M3 code
 *                               times its block's E8M0 scale, then the bf16 RoPE channels); the merge adds
 *                               each head's sink to the denominator
 *   kvl_index_scores_kernel<R> (dsa_cuda.cuh) the CSA indexer over entries, with M the compress ratio;
 *                               kvl_rows_v4_index decodes a 68-byte key: E2M1 (element 2j in the low
 *                               nibble) times the E8M0 scale of its 32 */
#ifndef KVL_V4_CUDA_CUH
#define KVL_V4_CUDA_CUH

#include "dsa_cuda.cuh"

extern "C" {
#include "config.h"
}

/* Value col of a V4 main row: col < 448 an E4M3 code times its 64-block's E8M0 scale, the rest bf16. */
struct kvl_rows_v4_main {
    __device__ static float at(const uint8_t *row, size_t col)
    {
        if (col < KVF_V4_NOPE)
            return kvl_e4m3_decode(row[col]) *
                   kvl_e8m0_decode(row[offsetof(kvf_row_v4_main, scale) + col / KVF_V4_BLOCK]);
        const uint8_t *r = row + offsetof(kvf_row_v4_main, rope) + 2 * (col - KVF_V4_NOPE);
        return kvl_bf16_decode(r[0] | r[1] << 8);
    }
};

/* Value col of a V4 index key: E2M1 times its 32-block's E8M0 scale. */
struct kvl_rows_v4_index {
    __device__ static float at(const uint8_t *row, size_t col)
    {
        const uint32_t code = row[offsetof(kvf_row_v4_index, codes) + col / 2] >> (4 * (col % 2)) & 0xFu;
        return kvl_e2m1_decode(code) *
               kvl_e8m0_decode(row[offsetof(kvf_row_v4_index, scale) + col / KVF_V4_INDEX_BLOCK]);
    }
};

/* The keys of query i (position start + i): window rows of positions max(win_first, t − W + 1) … t, then
 * compressed rows by the layer's kind. */
struct kvl_v4_keys {
    const uint8_t *win, *entries;
    size_t row_bytes, win_first, start, W, M;
    const int32_t *sel; /* [S][K], CSA */
    size_t K;
    kvl_layer_kind kind;

    __device__ size_t first_window(size_t t) const
    {
        return t + 1 > W && t + 1 - W > win_first ? t + 1 - W : win_first;
    }
    __device__ size_t count(size_t i) const
    {
        const size_t t = start + i, n_win = t + 1 - first_window(t);
        return n_win + (kind == KVL_LAYER_HCA ? (t + 1) / M : kind == KVL_LAYER_CSA ? K : 0);
    }
    __device__ const uint8_t *row(size_t i, size_t k) const
    {
        const size_t t = start + i, j0 = first_window(t), n_win = t + 1 - j0;
        if (k < n_win) return win + (j0 + k - win_first) * row_bytes;
        if (kind == KVL_LAYER_HCA) return entries + (k - n_win) * row_bytes;
        const int32_t e = sel[i * K + k - n_win];
        return e < 0 ? NULL : entries + static_cast<size_t>(e) * row_bytes;
    }
};

#endif
