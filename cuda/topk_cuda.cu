/* Top-k selection on the GPU (topk_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c topk_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernel: topk_cuda.cuh. */
#include "topk_cuda.cuh"

#include "topk_cuda.h"

#define CHECK_THREADS 256

int kvl_topk_cuda(int32_t *sel, const float *I, size_t S, size_t N, size_t K)
{
    if (K == 0) return kvl_fail(KVL_EINVAL, "kvl_topk_cuda: K must be positive");
    if (N > static_cast<size_t>(INT32_MAX))
        return kvl_fail(KVL_EINVAL, "kvl_topk_cuda: %zu keys do not fit int32 positions", N);
    if (K > static_cast<size_t>(INT32_MAX) || S > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "kvl_topk_cuda: %zu rows of top-%zu are more than one launch takes", S, K);
    if (S && (!sel || (N && !I))) return kvl_fail(KVL_EINVAL, "kvl_topk_cuda: NULL array");
    if (S == 0) return KVL_OK;
    CUDA_CHECK(KVL_LAUNCH(kvl_topk_kernel, dim3(static_cast<unsigned>(S)), KVL_TOPK_THREADS, 0, sel, I, N, K));
    return KVL_OK;
}

int kvl_selection_check_cuda(const int32_t *sel, size_t n, size_t len, unsigned *flag, const char *fn)
{
    if (n == 0) return KVL_OK;
    const size_t blocks = kvl_div_up(n, CHECK_THREADS);
    if (blocks > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "%s: %zu selected entries are more than one launch takes", fn, n);
    CUDA_CHECK(cudaMemset(flag, 0, sizeof *flag));
    CUDA_CHECK(KVL_LAUNCH(kvl_selection_check_kernel, dim3(static_cast<unsigned>(blocks)), CHECK_THREADS, 0, flag, sel,
                          n, len));
    unsigned bad = 0;
    CUDA_CHECK(cudaMemcpy(&bad, flag, sizeof bad, cudaMemcpyDeviceToHost));
    if (bad) return kvl_fail(KVL_EINVAL, "%s: a selection names a position outside -1 .. %zu", fn, len ? len - 1 : 0);
    return KVL_OK;
}
