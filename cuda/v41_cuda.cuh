/* V4.1's rows and key sets on the device: the 528-byte FP8 window row and the 288-byte FP4 entry read in
 * place, and the keys a query attends to.
 *
 * Build: included by cuda/v41_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_gather_attend_kernel<RW, RE, kvl_v41_keys> (attend_cuda.cuh) V4.1's attention core: query i's keys
 *                               are its window rows (read by RW: float32, or E4M3 times its 32-block's E8M0
 *                               scale), then its K picks (read by RE: float32, or E2M1, element 2j in the
 *                               low nibble, times its 16-block's E4M3 scale; −1 scored −∞); the merge adds
 *                               each head's sink to the denominator
 *   kvl_scale_kernel            one thread per value: x[i] ← x[i]·s in float32 (the index weights' (HI·DI)^−½) */
#ifndef KVL_CSA2_CUDA_CUH
#define KVL_CSA2_CUDA_CUH

#include "attend_cuda.cuh"

/* Value col of a V4.1 window row: an E4M3 code times its 32-block's E8M0 scale. */
struct kvl_rows_v41_window {
    __device__ static float at(const uint8_t *row, size_t col)
    {
        return kvl_e4m3_decode(row[offsetof(kvf_row_v41_window, codes) + col]) *
               kvl_e8m0_decode(row[offsetof(kvf_row_v41_window, scale) + col / KVF_V41_WIN_BLOCK]);
    }
};

/* Value col of a V4.1 entry: an E2M1 code times its 16-block's E4M3 scale. */
struct kvl_rows_v41_main {
    __device__ static float at(const uint8_t *row, size_t col)
    {
        const uint32_t code = row[offsetof(kvf_row_v41_main, codes) + col / 2] >> (4 * (col % 2)) & 0xFu;
        return kvl_e2m1_decode(code) *
               kvl_e4m3_decode(row[offsetof(kvf_row_v41_main, scale) + col / KVF_V41_MAIN_BLOCK]);
    }
};

/* The keys of query i (position start + i): window rows of positions max(win_first, t − W + 1) … t, then the
 * entries its picks sel[i][K] name. */
struct kvl_v41_keys {
    const uint8_t *win, *entries;
    size_t win_bytes, entry_bytes, win_first, start, W;
    const int32_t *sel; /* [S][K]; K = 0 for a window-only layer */
    size_t K;

    __device__ size_t n_window(size_t i) const
    {
        const size_t t = start + i, j0 = t + 1 > W && t + 1 - W > win_first ? t + 1 - W : win_first;
        return t + 1 - j0;
    }
    __device__ size_t count(size_t i) const { return n_window(i) + K; }
    __device__ const uint8_t *row(size_t i, size_t k) const
    {
        const size_t n_win = n_window(i);
        if (k < n_win) return win + (start + i + 1 - n_win + k - win_first) * win_bytes;
        const int32_t e = sel[i * K + k - n_win];
        return e < 0 ? NULL : entries + static_cast<size_t>(e) * entry_bytes;
    }
};

/* x[n] ← x·s */
static __global__ void kvl_scale_kernel(float *x, size_t n, float s)
{
    const size_t e = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (e < n) x[e] *= s;
}

#endif
