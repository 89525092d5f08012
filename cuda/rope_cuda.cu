/* RoPE on the GPU (rope_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c rope_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernel: rope_cuda.cuh. */
#include "rope_cuda.cuh"

#include "rope_cuda.h"

#define ROPE_THREADS 128

namespace {

template <int STEP>
int rotate(float *x, size_t T, size_t stride, size_t offset, size_t n_heads, size_t head_stride, const kvl_rope *r,
           int64_t start, size_t pos_step)
{
    const size_t threads = T * n_heads * (r->Dr / 2);
    if (threads == 0) return KVL_OK;
    if (kvl_div_up(threads, ROPE_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "rope: %zu rows of %zu heads are more than one launch takes", T, n_heads);
    CUDA_CHECK(KVL_LAUNCH(kvl_rope_kernel<STEP>, dim3(static_cast<unsigned>(kvl_div_up(threads, ROPE_THREADS))),
                          ROPE_THREADS, 0, x, T, stride, offset, n_heads, head_stride, *r, start, pos_step));
    return KVL_OK;
}

} /* namespace */

int kvl_rope_rotate_heads_half_split_cuda(float *x, size_t T, size_t stride, size_t offset, size_t n_heads,
                                          size_t head_stride, const kvl_rope *r, int64_t start, size_t pos_step)
{
    return rotate<1>(x, T, stride, offset, n_heads, head_stride, r, start, pos_step);
}

int kvl_rope_rotate_heads_interleaved_cuda(float *x, size_t T, size_t stride, size_t offset, size_t n_heads,
                                           size_t head_stride, const kvl_rope *r, int64_t start, size_t pos_step)
{
    return rotate<2>(x, T, stride, offset, n_heads, head_stride, r, start, pos_step);
}
