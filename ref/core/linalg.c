#include "linalg.h"

#include "status.h"

#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <string.h>

#ifdef OPENBLAS_USE64BITINT
#define BLASINT_MAX LONG_MAX
#else
#define BLASINT_MAX INT_MAX
#endif

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

int kvl_matmul_abt_f32(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    int rc = check_mnk(__func__, M, N, K);
    if (rc != KVL_OK) return rc;
    if (M == 0 || N == 0) return KVL_OK;
    if (K == 0) { memset(C, 0, M * N * sizeof *C); return KVL_OK; }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K, 1.0f, A,
                (blasint)K, B, (blasint)K, 0.0f, C, (blasint)N);
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
    int rc = check_mnk(__func__, M, N, K);
    if (rc != KVL_OK) return rc;
    if (M == 0 || N == 0) return KVL_OK;
    if (K == 0) { memset(C, 0, M * N * sizeof *C); return KVL_OK; }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)M, (blasint)N, (blasint)K, 1.0, A,
                (blasint)K, B, (blasint)K, 0.0, C, (blasint)N);
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
    int rc = check_mnk(__func__, M, N, K);
    if (rc != KVL_OK) return rc;
    if (M == 0 || N == 0) return KVL_OK;
    if (K == 0) { memset(C, 0, M * N * sizeof *C); return KVL_OK; }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, 1.0f, A,
                (blasint)K, B, (blasint)N, 0.0f, C, (blasint)N);
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
    int rc = check_mnk(__func__, M, N, K);
    if (rc != KVL_OK) return rc;
    if (M == 0 || N == 0) return KVL_OK;
    if (K == 0) { memset(C, 0, M * N * sizeof *C); return KVL_OK; }
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)M, (blasint)N, (blasint)K, 1.0, A,
                (blasint)K, B, (blasint)N, 0.0, C, (blasint)N);
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
    int rc = check_dim(__func__, "N", N);
    if (rc == KVL_OK) rc = check_dim(__func__, "K", K);
    if (rc != KVL_OK) return rc;
    if (N == 0) return KVL_OK;
    memset(y, 0, N * sizeof *y);
    if (K == 0) return KVL_OK;
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)N, (blasint)K, 1.0f, W, (blasint)K, x, 1, 0.0f, y, 1);
    return KVL_OK;
}

int kvl_matvec_f32_loop(float *y, const float *W, const float *x, size_t N, size_t K)
{
    return kvl_matmul_abt_f32_loop(y, x, W, 1, N, K);
}

int kvl_matvec_f64(double *y, const double *W, const double *x, size_t N, size_t K)
{
    int rc = check_dim(__func__, "N", N);
    if (rc == KVL_OK) rc = check_dim(__func__, "K", K);
    if (rc != KVL_OK) return rc;
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

/* ---- a step split into parts ---------------------------------------------------------------------- */

int kvl_blas_threads(void) { return openblas_get_num_threads(); }

void kvl_set_blas_threads(int n) { openblas_set_num_threads(n); }

size_t kvl_parts(size_t n, size_t min_rows)
{
    if (omp_in_parallel()) return 1;
    const int threads = openblas_get_num_threads();
    const size_t most = min_rows ? n / min_rows : n;
    size_t parts = threads > 1 ? (size_t)threads : 1;
    if (parts > most) parts = most;
    return parts ? parts : 1;
}

void kvl_run_parts(void (*run)(void *ctx, size_t p), void *ctx, size_t parts)
{
    if (parts <= 1) {
        run(ctx, 0);
        return;
    }
    const int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
#pragma omp parallel for schedule(static, 1) num_threads((int)parts)
    for (size_t p = 0; p < parts; p++) run(ctx, p);
    openblas_set_num_threads(blas_threads);
}
