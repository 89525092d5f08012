#include "linalg.h"

#include "backend.h"
#include "blas_core.h"
#include "status.h"

#include <cblas.h>
#include <limits.h>
#include <string.h>

#ifdef OPENBLAS_USE64BITINT
#define BLASINT_MAX LONG_MAX
#else
#define BLASINT_MAX INT_MAX
#endif

/* OpenBLAS's core checked before main (ref/core/blas_core.h). An executable's constructors run after
 * every shared library's, OpenBLAS's among them, and glibc passes them main's arguments; every program
 * with a product links this file. */
__attribute__((constructor)) static void mend_blas_core(int argc, char **argv, char **envp)
{
    (void)argc, (void)envp;
    kvl_blas_core_mend(argv);
}

static int check_dim(const char *fn, const char *name, size_t value)
{
    if (value > (size_t)BLASINT_MAX)
        return kvl_fail(KVL_EINVAL, "%s: %s = %zu exceeds the BLAS integer limit %ld", fn, name, value,
                        (long)BLASINT_MAX);
    return KVL_OK;
}

static int check_mnk(const char *fn, size_t M, size_t N, size_t K)
{
    int rc = check_dim(fn, "M", M);
    if (rc == KVL_OK) rc = check_dim(fn, "N", N);
    if (rc == KVL_OK) rc = check_dim(fn, "K", K);
    return rc;
}

/* ---- C[M][N] = A[M][K] · B[N][K]^T ------------------------------------------------------------ */

/* The products' edge cases, the same for every backend: an empty C writes nothing, K = 0 writes zeros
 * (the empty sum); 1 when nothing is left to compute. */
static int trivial_f32(float *C, size_t M, size_t N, size_t K)
{
    if (M == 0 || N == 0) return 1;
    if (K == 0) memset(C, 0, M * N * sizeof *C);
    return K == 0;
}

int kvl_matmul_abt_f32(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    KVL_TRY(check_mnk(__func__, M, N, K));
    return trivial_f32(C, M, N, K) ? KVL_OK : kvl_backend_in_use()->matmul_abt(C, A, B, M, N, K);
}

/* One token's row (M = 1) is the matrix-vector product C = B·a: gemm would first pack all of B. */
int kvl_matmul_abt_f32_ref(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    if (M == 1) return kvl_matvec_f32_ref(C, B, A, N, K);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K, 1.0f, A, (blasint)K, B,
                (blasint)K, 0.0f, C, (blasint)N);
    return KVL_OK;
}

int kvl_matmul_abt_f32_loop(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            float acc = 0.0f;
            for (size_t k = 0; k < K; k++) acc += A[i * K + k] * B[j * K + k];
            C[i * N + j] = acc;
        }
    return KVL_OK;
}

int kvl_matmul_abt_f64(double *C, const double *A, const double *B, size_t M, size_t N, size_t K)
{
    KVL_TRY(check_mnk(__func__, M, N, K));
    if (M == 0 || N == 0) return KVL_OK;
    if (K == 0 || M == 1) memset(C, 0, M * N * sizeof *C);
    if (K == 0) return KVL_OK;
    if (M == 1)
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (blasint)N, (blasint)K, 1.0, B, (blasint)K, A, 1, 0.0, C, 1);
    else
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K, 1.0, A, (blasint)K,
                    B, (blasint)K, 0.0, C, (blasint)N);
    return KVL_OK;
}

int kvl_matmul_abt_f64_loop(double *C, const double *A, const double *B, size_t M, size_t N, size_t K)
{
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            double acc = 0.0;
            for (size_t k = 0; k < K; k++) acc += A[i * K + k] * B[j * K + k];
            C[i * N + j] = acc;
        }
    return KVL_OK;
}

/* ---- C[M][N] = A[M][K] · B[K][N] --------------------------------------------------------------- */

int kvl_matmul_ab_f32(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    KVL_TRY(check_mnk(__func__, M, N, K));
    return trivial_f32(C, M, N, K) ? KVL_OK : kvl_backend_in_use()->matmul_ab(C, A, B, M, N, K);
}

int kvl_matmul_ab_f32_ref(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, 1.0f, A, (blasint)K,
                B, (blasint)N, 0.0f, C, (blasint)N);
    return KVL_OK;
}

/* i-k-j order streams rows of B; each C[i][j] is still summed in k order. */
int kvl_matmul_ab_f32_loop(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    for (size_t i = 0; i < M; i++) {
        float *c = C + i * N;
        for (size_t j = 0; j < N; j++) c[j] = 0.0f;
        for (size_t k = 0; k < K; k++) {
            const float a = A[i * K + k], *b = B + k * N;
            for (size_t j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
    return KVL_OK;
}

int kvl_matmul_ab_f64(double *C, const double *A, const double *B, size_t M, size_t N, size_t K)
{
    KVL_TRY(check_mnk(__func__, M, N, K));
    if (M == 0 || N == 0) return KVL_OK;
    if (K == 0) {
        memset(C, 0, M * N * sizeof *C);
        return KVL_OK;
    }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, 1.0, A, (blasint)K, B,
                (blasint)N, 0.0, C, (blasint)N);
    return KVL_OK;
}

int kvl_matmul_ab_f64_loop(double *C, const double *A, const double *B, size_t M, size_t N, size_t K)
{
    for (size_t i = 0; i < M; i++) {
        double *c = C + i * N;
        for (size_t j = 0; j < N; j++) c[j] = 0.0;
        for (size_t k = 0; k < K; k++) {
            const double a = A[i * K + k], *b = B + k * N;
            for (size_t j = 0; j < N; j++) c[j] += a * b[j];
        }
    }
    return KVL_OK;
}

/* ---- y[N] = W[N][K] · x[K] ---------------------------------------------------------------------- */

/* y is cleared first so the result never depends on what y held: gemv's beta = 0 path scales y,
 * and OpenBLAS releases have differed on whether 0·NaN there stays NaN. */
int kvl_matvec_f32(float *y, const float *W, const float *x, size_t N, size_t K)
{
    KVL_TRY(check_mnk(__func__, 1, N, K));
    return trivial_f32(y, 1, N, K) ? KVL_OK : kvl_backend_in_use()->matvec(y, W, x, N, K);
}

int kvl_matvec_f32_ref(float *y, const float *W, const float *x, size_t N, size_t K)
{
    memset(y, 0, N * sizeof *y);
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)N, (blasint)K, 1.0f, W, (blasint)K, x, 1, 0.0f, y, 1);
    return KVL_OK;
}

int kvl_matvec_f32_loop(float *y, const float *W, const float *x, size_t N, size_t K)
{
    return kvl_matmul_abt_f32_loop(y, x, W, 1, N, K);
}

int kvl_matvec_f64(double *y, const double *W, const double *x, size_t N, size_t K)
{
    KVL_TRY(check_mnk(__func__, 1, N, K));
    if (N == 0) return KVL_OK;
    memset(y, 0, N * sizeof *y);
    if (K == 0) return KVL_OK;
    cblas_dgemv(CblasRowMajor, CblasNoTrans, (blasint)N, (blasint)K, 1.0, W, (blasint)K, x, 1, 0.0, y, 1);
    return KVL_OK;
}

int kvl_matvec_f64_loop(double *y, const double *W, const double *x, size_t N, size_t K)
{
    return kvl_matmul_abt_f64_loop(y, x, W, 1, N, K);
}

void kvl_copy_block(float *dst, size_t ld_dst, const float *src, size_t ld_src, size_t rows, size_t cols)
{
    for (size_t i = 0; i < rows; i++) memcpy(dst + i * ld_dst, src + i * ld_src, cols * sizeof *dst);
}
