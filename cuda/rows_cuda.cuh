/* DeepSeek KV rows on the device: the twins of formats/rows.c's pack and unpack, byte for byte.
 *
 * Build: included by cuda/rows_cuda.cu (make cuda for nvcc, make test for the emulator).
 *
 * A row is a quantised part (the block kernels of block_cuda.cuh with strides between rows) and a
 * tail: the bf16 values kept as they are (RoPE dims) and pad bytes written 0.
 * Kernels (one line per version):
 *   kvl_quant_kernel<R>, kvl_dequant_kernel<R>  as in block_cuda.cuh, one row per n_row/4 threads
 *   kvl_row_tail_pack_kernel    one thread per tail value or pad byte: bf16 (RNE) little-endian bytes
 *   kvl_row_tail_unpack_kernel  one thread per tail value: two bytes widened to float */
#ifndef KVL_ROWS_CUDA_CUH
#define KVL_ROWS_CUDA_CUH

#include "block_cuda.cuh"

/* Where a row keeps its parts: values per row (quant quantised, then raw bf16), and the byte offsets of
 * the codes, scales, bf16 values and pad bytes (formats/rows.h's byte maps); rows sit `stride` bytes
 * apart and their values `vstride` floats apart. */
struct kvl_row_geometry {
    size_t values, quant, raw, pad, row_bytes, code_off, scale_off, raw_off, pad_off, stride, vstride;
};

static __global__ void kvl_row_tail_pack_kernel(uint8_t *rows, const float *values, kvl_row_geometry g, size_t n_rows)
{
    const size_t per_row = g.raw + g.pad, t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (t >= n_rows * per_row) return;
    const size_t r = t / per_row, j = t % per_row;
    uint8_t *row = rows + r * g.stride;
    if (j < g.raw) {
        const uint32_t h = kvl_bf16_encode(values[r * g.vstride + g.quant + j]);
        row[g.raw_off + 2 * j] = static_cast<uint8_t>(h);
        row[g.raw_off + 2 * j + 1] = static_cast<uint8_t>(h >> 8);
    } else {
        row[g.pad_off + j - g.raw] = 0;
    }
}

static __global__ void kvl_row_tail_unpack_kernel(float *values, const uint8_t *rows, kvl_row_geometry g, size_t n_rows)
{
    const size_t t = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x;
    if (t >= n_rows * g.raw) return;
    const size_t r = t / g.raw, j = t % g.raw;
    const uint8_t *row = rows + r * g.stride;
    values[r * g.vstride + g.quant + j] = kvl_bf16_decode(row[g.raw_off + 2 * j] | row[g.raw_off + 2 * j + 1] << 8);
}

#endif
