#include "linalg_cpu.h"

#include <cblas.h>
#include <string.h>

#include "linalg.h"
#include "threads.h"
#include "status.h"

/* Rows (or, for a product with few rows, columns) per part at least. */
#define SPLIT_MIN_ROWS 16

/* C[M][N] = A[M][K] · op(B), op(B) = B[N][K]ᵀ (trans_b) or B[K][N], split by blocks of C's rows, or by
 * blocks of its columns when it has too few rows. */
typedef struct {
    int trans_b, by_rows;
    size_t M, N, K, parts;
    const float *A, *B;
    float *C;
} gemm_job;

static void gemm_part(void *ctx, size_t p)
{
    const gemm_job *g = ctx;
    const size_t total = g->by_rows ? g->M : g->N, lo = total * p / g->parts, hi = total * (p + 1) / g->parts;
    const size_t m0 = g->by_rows ? lo : 0, m = g->by_rows ? hi - lo : g->M;
    const size_t n0 = g->by_rows ? 0 : lo, n = g->by_rows ? g->N : hi - lo;
    if (m == 0 || n == 0) return;
    const size_t ldb = g->trans_b ? g->K : g->N, b0 = g->trans_b ? n0 * g->K : n0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, g->trans_b ? CblasTrans : CblasNoTrans, (blasint)m, (blasint)n,
                (blasint)g->K, 1.0f, g->A + m0 * g->K, (blasint)g->K, g->B + b0, (blasint)ldb, 0.0f,
                g->C + m0 * g->N + n0, (blasint)g->N);
}

static void gemm_split(gemm_job g)
{
    g.parts = kvl_parts(g.M > g.N ? g.M : g.N, SPLIT_MIN_ROWS, (double)g.M * (double)g.N * (double)g.K);
    g.by_rows = g.M >= g.parts * SPLIT_MIN_ROWS;
    kvl_run_parts(gemm_part, &g, g.parts);
}

/* y[N] = W[N][K]·x, split by blocks of W's rows. */
typedef struct {
    size_t N, K, parts;
    const float *W, *x;
    float *y;
} gemv_job;

static void gemv_part(void *ctx, size_t p)
{
    const gemv_job *g = ctx;
    const size_t n0 = g->N * p / g->parts, n = g->N * (p + 1) / g->parts - n0;
    if (n == 0) return;
    cblas_sgemv(CblasRowMajor, CblasNoTrans, (blasint)n, (blasint)g->K, 1.0f, g->W + n0 * g->K, (blasint)g->K, g->x,
                1, 0.0f, g->y + n0, 1);
}

int kvl_matvec_f32_cpu(float *y, const float *W, const float *x, size_t N, size_t K)
{
    memset(y, 0, N * sizeof *y);
    gemv_job g = {.N = N, .K = K, .W = W, .x = x, .y = y};
    g.parts = kvl_parts(N, SPLIT_MIN_ROWS, (double)N * (double)K);
    kvl_run_parts(gemv_part, &g, g.parts);
    return KVL_OK;
}

int kvl_matmul_abt_f32_cpu(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    if (M == 1) return kvl_matvec_f32_cpu(C, B, A, N, K);
    gemm_split((gemm_job){.trans_b = 1, .M = M, .N = N, .K = K, .A = A, .B = B, .C = C});
    return KVL_OK;
}

int kvl_matmul_ab_f32_cpu(float *C, const float *A, const float *B, size_t M, size_t N, size_t K)
{
    gemm_split((gemm_job){.trans_b = 0, .M = M, .N = N, .K = K, .A = A, .B = B, .C = C});
    return KVL_OK;
}
