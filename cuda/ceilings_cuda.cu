/* The device's ceilings (ceilings_cuda.h): cudaMemcpy for bandwidth, cuBLAS for arithmetic.
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c ceilings_cuda.cu (make cuda), linked with
 *        -lcublas; g++ -x c++ for the emulator (make test), where the product is linalg_cuda's kernel.
 * No kernels of its own. */
#include "device.cuh"

#include <stdlib.h>
#include <string.h>

extern "C" {
#include "element.h"
#include "rng.h"
}
#include "ceilings_cuda.h"
#include "linalg_cuda.h"

namespace {

struct copy_job {
    void *dst;
    const void *src;
    size_t bytes;
};

int run_copy(void *arg)
{
    const copy_job *j = static_cast<const copy_job *>(arg);
    CUDA_CHECK(cudaMemcpy(j->dst, j->src, j->bytes, cudaMemcpyDeviceToDevice));
    return KVL_OK;
}


#ifdef __CUDACC__
struct gemm_job {
    cublasHandle_t handle;
    const void *a, *b;
    void *c;
    int n;
};

int run_gemm(void *arg)
{
    const gemm_job *j = static_cast<const gemm_job *>(arg);
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmEx(j->handle, CUBLAS_OP_N, CUBLAS_OP_N, j->n, j->n, j->n, &one, j->a, CUDA_R_16BF, j->n,
                              j->b, CUDA_R_16BF, j->n, &zero, j->c, CUDA_R_16BF, j->n, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT));
    return KVL_OK;
}

int gemm_ms(double *ms, size_t n, int reps, void *a, void *b, void *c)
{
    gemm_job j{nullptr, a, b, c, static_cast<int>(n)};
    KVL_TRY(kvl_cublas_handle(&j.handle));
    return kvl_cuda_time(ms, run_gemm, &j, reps);
}

const char *const GEMM_WHAT = "cuBLAS bf16 GEMM";
const size_t GEMM_ELEMENT = 2;

/* dst[i] = the element of x[i] the product reads */
void to_element(void *dst, const float *x, size_t n) { kvf_bf16_encode_n(static_cast<uint16_t *>(dst), x, n); }
#else
struct gemm_job {
    float *c;
    const float *a, *b;
    size_t n;
};

int run_gemm(void *arg)
{
    const gemm_job *j = static_cast<const gemm_job *>(arg);
    return kvl_matmul_abt_f32_cuda(j->c, j->a, j->b, j->n, j->n, j->n);
}

int gemm_ms(double *ms, size_t n, int reps, void *a, void *b, void *c)
{
    gemm_job j{static_cast<float *>(c), static_cast<const float *>(a), static_cast<const float *>(b), n};
    return kvl_cuda_time(ms, run_gemm, &j, reps);
}

const char *const GEMM_WHAT = "float matmul kernel (emulator)";
const size_t GEMM_ELEMENT = sizeof(float);

void to_element(void *dst, const float *x, size_t n) { memcpy(dst, x, n * sizeof(float)); }
#endif

} /* namespace */

/* The copy engine moves bytes whatever their values (plain cudaMalloc memory is not compressed), so the
 * source is one repeated byte. */
int kvl_cuda_copy_ceiling(double *gbps, size_t bytes, int reps)
{
    void *src = NULL, *dst = NULL;
    CUDA_CHECK(cudaMalloc(&src, bytes));
    cudaError_t e = cudaMalloc(&dst, bytes);
    int rc = e == cudaSuccess ? KVL_OK : kvl_fail(KVL_ECUDA, "kvl_cuda_copy_ceiling: %s", cudaGetErrorString(e));
    if (rc == KVL_OK) rc = kvl_cuda_fill(src, 0x3C, bytes);
    copy_job j{dst, src, bytes};
    double ms = 0.0;
    if (rc == KVL_OK) rc = kvl_cuda_time(&ms, run_copy, &j, reps);
    cudaFree(src);
    if (dst) cudaFree(dst);
    if (rc == KVL_OK) *gbps = 2.0 * static_cast<double>(bytes) / (ms * 1e6);
    return rc;
}

namespace {

/* d[n] = standard normal values as the product's elements (the tensor cores draw less power on constant
 * data and run faster: 894 TFLOP/s on zeros against 788 on random matrices, measured on an H200) */
int fill_random(void *d, size_t n, uint64_t seed)
{
    float *x = static_cast<float *>(malloc(n * sizeof(float)));
    void *e = malloc(n * GEMM_ELEMENT);
    int rc = x && e ? KVL_OK : kvl_fail(KVL_ENOMEM, "kvl_cuda_gemm_ceiling: out of memory for %zu values", n);
    if (rc == KVL_OK) {
        kvl_rng rng;
        kvl_rng_seed(&rng, seed);
        kvl_rng_normal_f32(&rng, x, n, 1.0);
        to_element(e, x, n);
        rc = kvl_cuda_upload(d, e, n * GEMM_ELEMENT);
    }
    free(x);
    free(e);
    return rc;
}

} /* namespace */

int kvl_cuda_gemm_ceiling(double *tflops, const char **what, size_t n, int reps)
{
    void *m[3] = {NULL, NULL, NULL};
    int rc = KVL_OK;
    for (int i = 0; i < 3 && rc == KVL_OK; i++) {
        rc = kvl_cuda_alloc(&m[i], n * n * GEMM_ELEMENT);
        if (rc == KVL_OK) rc = fill_random(m[i], n * n, 0xCE11 + static_cast<uint64_t>(i));
    }
    double ms = 0.0;
    if (rc == KVL_OK) rc = gemm_ms(&ms, n, reps, m[0], m[1], m[2]);
    for (int i = 0; i < 3; i++) kvl_cuda_free(m[i]);
    if (rc == KVL_OK) *tflops = 2.0 * static_cast<double>(n) * n * n / (ms * 1e9);
    *what = GEMM_WHAT;
    return rc;
}
