/* Top-k selection on the GPU (topk_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c topk_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: topk_cuda.cuh. */
#include "topk_cuda.cuh"

#include "topk_cuda.h"

#define CHECK_THREADS 256
#define MAX_BLOCKS 0x7FFFFFFFu

static int check_args(const char *fn, const int32_t *sel, const float *I, size_t S, size_t N, size_t K)
{
    if (K == 0) return kvl_fail(KVL_EINVAL, "%s: K must be positive", fn);
    if (N > static_cast<size_t>(INT32_MAX))
        return kvl_fail(KVL_EINVAL, "%s: %zu keys do not fit int32 positions", fn, N);
    if (K > static_cast<size_t>(INT32_MAX) || S > MAX_BLOCKS)
        return kvl_fail(KVL_EINVAL, "%s: %zu rows of top-%zu are more than one launch takes", fn, S, K);
    if (S && (!sel || (N && !I))) return kvl_fail(KVL_EINVAL, "%s: NULL array", fn);
    return KVL_OK;
}

int kvl_topk_simple_cuda(int32_t *sel, const float *I, size_t S, size_t N, size_t K)
{
    KVL_TRY(check_args("kvl_topk_simple_cuda", sel, I, S, N, K));
    if (S == 0) return KVL_OK;
    CUDA_CHECK(KVL_LAUNCH(kvl_topk_kernel, dim3(static_cast<unsigned>(S)), KVL_TOPK_THREADS, 0, sel, I, N, K));
    return KVL_OK;
}

/* The entries per row after one round over n with slices of L: K per slice, so with L ≥ 2K a round at
 * least halves an n above L. */
static size_t round_out(size_t n, size_t L, size_t K) { return kvl_div_up(n, L) * K; }

/* The scratch the rounds before the last need for S rows of N: two lists, the first round's and the next. */
static size_t scratch_entries(size_t S, size_t N, size_t L, size_t K)
{
    if (N <= L) return 0;
    const size_t n1 = round_out(N, L, K), n2 = n1 > L ? round_out(n1, L, K) : 0;
    return S * (n1 + n2);
}

/* The device lists between rounds, kept for the process's life and grown on demand (one host thread
 * drives the GPU here, as everywhere in cuda/). */
static kvl_workspace rounds_scratch;

/* One round over n entries per row (I itself when cand is NULL) into out, K_out entries per slice. */
static int launch_round(int32_t *out, const float *I, size_t S, size_t N, const int32_t *cand, size_t n, size_t L,
                        size_t K, size_t K_out)
{
    const size_t P = n > L ? kvl_div_up(n, L) : 1;
    if (P > MAX_BLOCKS / S)
        return kvl_fail(KVL_EINVAL, "kvl_topk_cuda: %zu rows of %zu slices are more than one launch takes", S, P);
    const dim3 grid(static_cast<unsigned>(S * P));
    if (cand)
        CUDA_CHECK(KVL_LAUNCH(kvl_topk_slices_kernel<true>, grid, KVL_TOPK_THREADS, 0, out, I, N, cand, n, L, K,
                              K_out));
    else
        CUDA_CHECK(KVL_LAUNCH(kvl_topk_slices_kernel<false>, grid, KVL_TOPK_THREADS, 0, out, I, N, cand, n, L, K,
                              K_out));
    return KVL_OK;
}

int kvl_topk_slices_cuda(int32_t *sel, const float *I, size_t S, size_t N, size_t K, size_t L)
{
    KVL_TRY(check_args("kvl_topk_slices_cuda", sel, I, S, N, K));
    if (L < 2 * K)
        return kvl_fail(KVL_EINVAL, "kvl_topk_slices_cuda: slices of %zu keys are under 2K = %zu", L, 2 * K);
    if (S == 0) return KVL_OK;
    const size_t entries = scratch_entries(S, N, L, K);
    if (entries) KVL_TRY(kvl_workspace_reserve(&rounds_scratch, entries * sizeof(int32_t)));
    int32_t *lists[2] = {static_cast<int32_t *>(rounds_scratch.p), NULL};
    if (entries) lists[1] = lists[0] + S * round_out(N, L, K);
    const int32_t *cand = NULL;
    size_t n = N;
    for (int round = 0; n > L; round ^= 1) {
        KVL_TRY(launch_round(lists[round], I, S, N, cand, n, L, K, K));
        cand = lists[round];
        n = round_out(n, L, K);
    }
    return launch_round(sel, I, S, N, cand, n, n > 0 ? n : 1, K, K);
}

size_t kvl_topk_slice_keys(size_t K) { return 4 * K > KVL_TOPK_MIN_SLICE ? 4 * K : KVL_TOPK_MIN_SLICE; }

int kvl_topk_cuda(int32_t *sel, const float *I, size_t S, size_t N, size_t K)
{
    KVL_TRY(check_args("kvl_topk_cuda", sel, I, S, N, K));
    return kvl_topk_slices_cuda(sel, I, S, N, K, kvl_topk_slice_keys(K));
}

int kvl_selection_check_cuda(const int32_t *sel, size_t n, size_t len, unsigned *flag, const char *fn)
{
    if (n == 0) return KVL_OK;
    const size_t blocks = kvl_div_up(n, CHECK_THREADS);
    if (blocks > MAX_BLOCKS)
        return kvl_fail(KVL_EINVAL, "%s: %zu selected entries are more than one launch takes", fn, n);
    CUDA_CHECK(cudaMemset(flag, 0, sizeof *flag));
    CUDA_CHECK(KVL_LAUNCH(kvl_selection_check_kernel, dim3(static_cast<unsigned>(blocks)), CHECK_THREADS, 0, flag, sel,
                          n, len));
    unsigned bad = 0;
    CUDA_CHECK(cudaMemcpy(&bad, flag, sizeof bad, cudaMemcpyDeviceToHost));
    if (bad) return kvl_fail(KVL_EINVAL, "%s: a selection names a position outside -1 .. %zu", fn, len ? len - 1 : 0);
    return KVL_OK;
}
