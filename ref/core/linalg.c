#include "linalg.h"

#include "blas_core.h"
#include "status.h"

#include <cblas.h>
#include <limits.h>
#include <omp.h>
#include <stdio.h>
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

/* ---- one product split into parts ------------------------------------------------------------- */

/* Rows (or, for a product with few rows, columns) per part at least. */
#define SPLIT_MIN_ROWS 16

/* C[M][N] = A[M][K] · op(B), op(B) = B[N][K]ᵀ (trans_b) or B[K][N], in float (f64 = 0) or double,
 * split by blocks of C's rows, or by blocks of its columns when it has too few rows. */
typedef struct {
    int f64, trans_b, by_rows;
    size_t M, N, K, parts;
    const void *A, *B;
    void *C;
} gemm_job;

static void gemm_part(void *ctx, size_t p)
{
    const gemm_job *g = ctx;
    const size_t total = g->by_rows ? g->M : g->N, lo = total * p / g->parts, hi = total * (p + 1) / g->parts;
    const size_t m0 = g->by_rows ? lo : 0, m = g->by_rows ? hi - lo : g->M;
    const size_t n0 = g->by_rows ? 0 : lo, n = g->by_rows ? g->N : hi - lo;
    if (m == 0 || n == 0) return;
    const size_t ldb = g->trans_b ? g->K : g->N, b0 = g->trans_b ? n0 * g->K : n0;
    const enum CBLAS_TRANSPOSE tb = g->trans_b ? CblasTrans : CblasNoTrans;
    if (g->f64)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, (blasint)m, (blasint)n, (blasint)g->K, 1.0,
                    (const double *)g->A + m0 * g->K, (blasint)g->K, (const double *)g->B + b0, (blasint)ldb, 0.0,
                    (double *)g->C + m0 * g->N + n0, (blasint)g->N);
    else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, (blasint)m, (blasint)n, (blasint)g->K, 1.0f,
                    (const float *)g->A + m0 * g->K, (blasint)g->K, (const float *)g->B + b0, (blasint)ldb, 0.0f,
                    (float *)g->C + m0 * g->N + n0, (blasint)g->N);
}

static void gemm_split(gemm_job g)
{
    g.parts = kvl_parts(g.M > g.N ? g.M : g.N, SPLIT_MIN_ROWS, (double)g.M * (double)g.N * (double)g.K);
    g.by_rows = g.M >= g.parts * SPLIT_MIN_ROWS;
    kvl_run_parts(gemm_part, &g, g.parts);
}

/* y[N] = W[N][K]·x, split by blocks of W's rows. */
typedef struct {
    int f64;
    size_t N, K, parts;
    const void *W, *x;
    void *y;
} gemv_job;

static void gemv_part(void *ctx, size_t p)
{
    const gemv_job *g = ctx;
    const size_t n0 = g->N * p / g->parts, n = g->N * (p + 1) / g->parts - n0;
    if (n == 0) return;
    if (g->f64)
        cblas_dgemv(CblasRowMajor, CblasNoTrans, (blasint)n, (blasint)g->K, 1.0, (const double *)g->W + n0 * g->K,
                    (blasint)g->K, g->x, 1, 0.0, (double *)g->y + n0, 1);
    else
        cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)n, (blasint)g->K, 1.0f, (const float *)g->W + n0 * g->K,
                    (blasint)g->K, g->x, 1, 0.0f, (float *)g->y + n0, 1);
}

static void gemv_split(gemv_job g)
{
    g.parts = kvl_parts(g.N, SPLIT_MIN_ROWS, (double)g.N * (double)g.K);
    kvl_run_parts(gemv_part, &g, g.parts);
}

/* ---- C[M][N] = A[M][K] · B[N][K]^T ------------------------------------------------------------ */

int kvl_matmul_abt_f32(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    int rc = check_mnk(__func__, M, N, K);
    if (rc != KVL_OK) return rc;
    if (M == 0 || N == 0) return KVL_OK;
    if (K == 0 || M == 1) memset(C, 0, M * N * sizeof *C);
    if (K == 0) return KVL_OK;
    if (M == 1) gemv_split((gemv_job){.f64 = 0, .N = N, .K = K, .W = B, .x = A, .y = C});
    else gemm_split((gemm_job){.f64 = 0, .trans_b = 1, .M = M, .N = N, .K = K, .A = A, .B = B, .C = C});
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
    if (K == 0 || M == 1) memset(C, 0, M * N * sizeof *C);
    if (K == 0) return KVL_OK;
    if (M == 1) gemv_split((gemv_job){.f64 = 1, .N = N, .K = K, .W = B, .x = A, .y = C});
    else gemm_split((gemm_job){.f64 = 1, .trans_b = 1, .M = M, .N = N, .K = K, .A = A, .B = B, .C = C});
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
    gemm_split((gemm_job){.f64 = 0, .trans_b = 0, .M = M, .N = N, .K = K, .A = A, .B = B, .C = C});
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
    gemm_split((gemm_job){.f64 = 1, .trans_b = 0, .M = M, .N = N, .K = K, .A = A, .B = B, .C = C});
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
    gemv_split((gemv_job){.f64 = 0, .N = N, .K = K, .W = W, .x = x, .y = y});
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
    gemv_split((gemv_job){.f64 = 1, .N = N, .K = K, .W = W, .x = x, .y = y});
    return KVL_OK;
}

int kvl_matvec_f64_loop(double *y, const double *W, const double *x, size_t N, size_t K)
{
    return kvl_matmul_abt_f64_loop(y, x, W, 1, N, K);
}

/* ---- a step split into parts ---------------------------------------------------------------------- */

int kvl_threads(void) { return omp_get_max_threads(); }

void kvl_set_threads(int n) { omp_set_num_threads(n > 0 ? n : 1); }

void kvl_copy_block(float *dst, size_t ld_dst, const float *src, size_t ld_src, size_t rows, size_t cols)
{
    for (size_t i = 0; i < rows; i++) memcpy(dst + i * ld_dst, src + i * ld_src, cols * sizeof *dst);
}

size_t kvl_parts(size_t n, size_t min_rows, double macs)
{
    if (macs < KVL_SPLIT_MIN_MACS || omp_in_parallel()) return 1;
    const int threads = omp_get_max_threads();
    const size_t most = min_rows ? n / min_rows : n;
    size_t parts = threads > 1 ? (size_t)threads : 1;
    if (parts > most) parts = most;
    return parts ? parts : 1;
}

/* OpenBLAS on one thread for good: its pool would otherwise spin between calls on the cores the OpenMP
 * team is about to use (and the team's spinning workers slow its calls), many times the cost of either. */
static void blas_on_one_thread(void)
{
    if (!omp_in_parallel() && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void kvl_run_parts(void (*run)(void *ctx, size_t p), void *ctx, size_t parts)
{
    blas_on_one_thread();
    if (parts <= 1) {
        run(ctx, 0);
        return;
    }
#pragma omp parallel for schedule(static, 1) num_threads((int)parts)
    for (size_t p = 0; p < parts; p++) run(ctx, p);
}

int kvl_run_parts_checked(int (*run)(void *ctx, size_t p), void *ctx, size_t parts)
{
    blas_on_one_thread();
    if (parts <= 1) return run(ctx, 0);
    int rc = KVL_OK;
    size_t failed = parts;
    char why[512] = "";
#pragma omp parallel for schedule(static, 1) num_threads((int)parts)
    for (size_t p = 0; p < parts; p++) {
        int part_rc = run(ctx, p);
        if (part_rc == KVL_OK) continue;
#pragma omp critical(kvl_run_parts_checked)
        if (p < failed) {
            failed = p;
            rc = part_rc;
            snprintf(why, sizeof why, "%s", kvl_error());
        }
    }
    return rc == KVL_OK ? KVL_OK : kvl_fail(rc, "%s", why);
}
