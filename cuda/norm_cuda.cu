/* RMSNorm on the GPU (norm_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c norm_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernel: norm_cuda.cuh. */
#include "norm_cuda.cuh"

#include "norm_cuda.h"

#define NORM_ROWS_PER_BLOCK 4

int kvl_rmsnorm_f32_cuda(float *y, const float *x, const float *g, size_t T, size_t n, size_t stride, double eps)
{
    if (T == 0 || n == 0) return KVL_OK;
    const size_t blocks = kvl_div_up(T, NORM_ROWS_PER_BLOCK);
    if (blocks > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "kvl_rmsnorm_f32_cuda: %zu rows is more than one launch takes", T);
    CUDA_CHECK(KVL_LAUNCH(kvl_rmsnorm_kernel, dim3(static_cast<unsigned>(blocks)), NORM_ROWS_PER_BLOCK * KVL_WARP, 0, y,
                          x, g, T, n, stride, eps));
    return KVL_OK;
}
