/* ref/core/linalg: every OpenBLAS product against its loop twin and against a dot-product oracle
 * written here, the float products under each backend (TCase "ref": one BLAS call each; TCase "cpu":
 * cpu/linalg_cpu.h's split, the only one that splits), at sizes that are not multiples of any vector width (1×1, K = 1, odd and prime
 * sizes), plus the edges: K = 0 and sizes beyond the BLAS integer; and the parts that split them.
 *
 * Every output buffer is filled with NaN before the call, so a product that reads its output
 * (accumulates instead of overwriting) fails as well. */
#include "common.h"
#include "backend_cpu.h"
#include "linalg.h"
#include "threads.h"
#include "rng.h"
#include "status.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Higham's γ_K = K·u/(1 − K·u) bounds |fl(Σ a_k b_k) − Σ a_k b_k| by γ_K·Σ|a_k b_k| for any
 * summation order (blocked or vectorised BLAS included). Two results that each meet it differ by at
 * most 2γ_K·Σ|a_k b_k|; every comparison below allows that, with Σ|a_k b_k| taken at its largest
 * over the output. u is FLT_EPSILON/2 for float, DBL_EPSILON/2 for double. */
static double gamma_k(size_t K, double u) { return (double)K * u / (1.0 - (double)K * u); }

#define U_F32 (FLT_EPSILON / 2)
#define U_F64 (DBL_EPSILON / 2)

typedef struct { size_t M, N, K; } dims;

/* Ragged sizes: 1×1, K = 1, odd/prime sizes that leave tails after 4-, 8- and 16-wide kernels. */
static const dims SIZES[] = {
    {1, 1, 1}, {1, 7, 1}, {5, 3, 1}, {3, 5, 7}, {1, 31, 257}, {7, 1, 300},
    {17, 13, 33}, {65, 63, 31}, {33, 65, 129}, {100, 37, 211},
};
/* The same shapes with one row, for the matrix-vector product (y[N] = W[N][K] x[K]). */
static const dims SIZES_M1[] = {
    {1, 1, 1}, {1, 7, 1}, {1, 3, 1}, {1, 5, 7}, {1, 31, 257}, {1, 1, 300},
    {1, 13, 33}, {1, 63, 31}, {1, 65, 129}, {1, 37, 211},
};
#define N_SIZES (sizeof SIZES / sizeof SIZES[0])
_Static_assert(sizeof SIZES_M1 == sizeof SIZES, "one M = 1 shape per shape");

static float *rand_f32(size_t n, kvl_rng *rng)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert(x != NULL);
    kvl_rng_uniform_f32(rng, x, n, -1.0, 1.0);
    return x;
}

static double *rand_f64(size_t n, kvl_rng *rng)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert(x != NULL);
    for (size_t i = 0; i < n; i++) x[i] = 2.0 * kvl_rng_random(rng) - 1.0;
    return x;
}

static float *nan_f32(size_t n)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert(x != NULL);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}

static double *nan_f64(size_t n)
{
    double *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert(x != NULL);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}

/* The oracle: want[M][N] = Σ_k A(i,k)·B(k,j) in long double, where A(i,k) = A[i·a_row + k·a_col]
 * and B(k,j) = B[k·b_row + j·b_col]; returns max over (i,j) of Σ_k |A(i,k)·B(k,j)|. */
static double oracle(double *want, const double *A, size_t a_row, size_t a_col, const double *B, size_t b_row,
                     size_t b_col, size_t M, size_t N, size_t K)
{
    double abs_max = 0.0;
    for (size_t i = 0; i < M; i++)
        for (size_t j = 0; j < N; j++) {
            long double acc = 0.0L, abs_acc = 0.0L;
            for (size_t k = 0; k < K; k++) {
                long double p = (long double)A[i * a_row + k * a_col] * (long double)B[k * b_row + j * b_col];
                acc += p;
                abs_acc += fabsl(p);
            }
            want[i * N + j] = (double)acc;
            if ((double)abs_acc > abs_max) abs_max = (double)abs_acc;
        }
    return abs_max;
}

static double *widen(const float *x, size_t n)
{
    double *y = malloc((n ? n : 1) * sizeof *y);
    ck_assert(y != NULL);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

typedef int (*product_f32)(float *, const float *, const float *, size_t, size_t, size_t);
typedef int (*product_f64)(double *, const double *, const double *, size_t, size_t, size_t);

/* B is [N][K] (the transposed operand) when b_is_nk, else [K][N]; A is [M][K]. */
static void check_f32(const char *name, product_f32 blas, product_f32 loop, int b_is_nk, const dims *sizes,
                      uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    for (size_t c = 0; c < N_SIZES; c++) {
        const size_t M = sizes[c].M, N = sizes[c].N, K = sizes[c].K;
        float *A = rand_f32(M * K, &rng), *B = rand_f32(K * N, &rng);
        float *got = nan_f32(M * N), *twin = nan_f32(M * N);
        double *Ad = widen(A, M * K), *Bd = widen(B, K * N), *want = malloc(M * N * sizeof *want);
        ck_assert(want != NULL);
        const double abs_max = b_is_nk ? oracle(want, Ad, K, 1, Bd, 1, K, M, N, K)
                                       : oracle(want, Ad, K, 1, Bd, N, 1, M, N, K);
        const double tol = 2 * gamma_k(K, U_F32) * abs_max;

        ck_assert_int_eq(blas(got, A, B, M, N, K), KVL_OK);
        ck_assert_int_eq(loop(twin, A, B, M, N, K), KVL_OK);
        char what[96];
        snprintf(what, sizeof what, "%s M=%zu N=%zu K=%zu vs oracle", name, M, N, K);
        kvl_expect_close(what, got, want, M * N, tol, 0, 0);
        double *twin_d = widen(twin, M * N);
        snprintf(what, sizeof what, "%s M=%zu N=%zu K=%zu vs loop twin", name, M, N, K);
        kvl_expect_close(what, got, twin_d, M * N, tol, 0, 0);
        free(A); free(B); free(got); free(twin); free(Ad); free(Bd); free(want); free(twin_d);
    }
}

static void check_f64(const char *name, product_f64 blas, product_f64 loop, int b_is_nk, const dims *sizes,
                      uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    for (size_t c = 0; c < N_SIZES; c++) {
        const size_t M = sizes[c].M, N = sizes[c].N, K = sizes[c].K;
        double *A = rand_f64(M * K, &rng), *B = rand_f64(K * N, &rng);
        double *got = nan_f64(M * N), *twin = nan_f64(M * N), *want = malloc(M * N * sizeof *want);
        ck_assert(want != NULL);
        const double abs_max = b_is_nk ? oracle(want, A, K, 1, B, 1, K, M, N, K)
                                       : oracle(want, A, K, 1, B, N, 1, M, N, K);
        const double tol = 2 * gamma_k(K, U_F64) * abs_max;

        ck_assert_int_eq(blas(got, A, B, M, N, K), KVL_OK);
        ck_assert_int_eq(loop(twin, A, B, M, N, K), KVL_OK);
        char what[96];
        snprintf(what, sizeof what, "%s M=%zu N=%zu K=%zu vs oracle", name, M, N, K);
        kvl_expect_close_f64(what, got, want, M * N, tol, 0, 0);
        snprintf(what, sizeof what, "%s M=%zu N=%zu K=%zu vs loop twin", name, M, N, K);
        kvl_expect_close_f64(what, got, twin, M * N, tol, 0, 0);
        free(A); free(B); free(got); free(twin); free(want);
    }
}

/* matvec as a product with M = 1: y[N] = W[N][K] x[K] is x[1][K] · W[N][K]^T. */
static int matvec_f32_as_product(float *y, const float *x, const float *W, size_t M, size_t N, size_t K)
{
    ck_assert(M == 1);
    return kvl_matvec_f32(y, W, x, N, K);
}
static int matvec_f32_loop_as_product(float *y, const float *x, const float *W, size_t M, size_t N, size_t K)
{
    ck_assert(M == 1);
    return kvl_matvec_f32_loop(y, W, x, N, K);
}
static int matvec_f64_as_product(double *y, const double *x, const double *W, size_t M, size_t N, size_t K)
{
    ck_assert(M == 1);
    return kvl_matvec_f64(y, W, x, N, K);
}
static int matvec_f64_loop_as_product(double *y, const double *x, const double *W, size_t M, size_t N, size_t K)
{
    ck_assert(M == 1);
    return kvl_matvec_f64_loop(y, W, x, N, K);
}

START_TEST(test_matmul_abt_f32_matches_loop_at_ragged_sizes)
{
    check_f32("matmul_abt_f32", kvl_matmul_abt_f32, kvl_matmul_abt_f32_loop, 1, SIZES, 1);
}
END_TEST

START_TEST(test_matmul_abt_f64_matches_loop_at_ragged_sizes)
{
    check_f64("matmul_abt_f64", kvl_matmul_abt_f64, kvl_matmul_abt_f64_loop, 1, SIZES, 2);
}
END_TEST

START_TEST(test_matmul_ab_f32_matches_loop_at_ragged_sizes)
{
    check_f32("matmul_ab_f32", kvl_matmul_ab_f32, kvl_matmul_ab_f32_loop, 0, SIZES, 3);
}
END_TEST

START_TEST(test_matmul_ab_f64_matches_loop_at_ragged_sizes)
{
    check_f64("matmul_ab_f64", kvl_matmul_ab_f64, kvl_matmul_ab_f64_loop, 0, SIZES, 4);
}
END_TEST

START_TEST(test_matvec_f32_matches_loop_at_ragged_sizes)
{
    check_f32("matvec_f32", matvec_f32_as_product, matvec_f32_loop_as_product, 1, SIZES_M1, 5);
}
END_TEST

START_TEST(test_matvec_f64_matches_loop_at_ragged_sizes)
{
    check_f64("matvec_f64", matvec_f64_as_product, matvec_f64_loop_as_product, 1, SIZES_M1, 6);
}
END_TEST

/* Past KVL_SPLIT_MIN_MACS a product splits C across threads (blocks of rows, or of columns when it has
 * few rows; linalg.h): at 1, 2 and 3 threads, every element within 2γ_K·K of the loop twin (OpenBLAS's
 * kernels at a block's edge may sum in another order, so the threads need not agree bit for bit). */
typedef int (*product_f32)(float *, const float *, const float *, size_t, size_t, size_t);

static int matvec_f32_split(float *y, const float *x, const float *W, size_t M, size_t N, size_t K)
{
    ck_assert(M == 1);
    return kvl_matvec_f32(y, W, x, N, K);
}

static void check_split(const char *what, product_f32 fn, product_f32 loop, size_t M, size_t N, size_t K)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 41);
    float *A = rand_f32(M * K, &rng), *B = rand_f32(N * K, &rng), *want = nan_f32(M * N), *got = nan_f32(M * N);
    ck_assert_int_eq(loop(want, A, B, M, N, K), KVL_OK);
    const int threads = kvl_threads();
    for (int t = 1; t <= 3; t++) {
        kvl_set_threads(t);
        ck_assert_uint_eq(kvl_parts(M > N ? M : N, 16, (double)(M * N * K)), (size_t)t);
        ck_assert_int_eq(fn(got, A, B, M, N, K), KVL_OK);
        double worst = 0;
        for (size_t i = 0; i < M * N; i++) worst = fmax(worst, fabs((double)got[i] - (double)want[i]));
        ck_assert_msg(worst <= 2.0 * gamma_k(K, U_F32) * (double)K, "%s %zux%zux%zu on %d threads: %g from the loop",
                      what, M, N, K, t, worst);
    }
    kvl_set_threads(threads);
    free(A);
    free(B);
    free(want);
    free(got);
}

START_TEST(test_products_split_across_threads_match_loop)
{
    check_split("matmul_abt_f32 by rows", kvl_matmul_abt_f32, kvl_matmul_abt_f32_loop, 300, 259, 217);
    check_split("matmul_abt_f32 by columns", kvl_matmul_abt_f32, kvl_matmul_abt_f32_loop, 5, 1700, 1999);
    check_split("matmul_ab_f32 by rows", kvl_matmul_ab_f32, kvl_matmul_ab_f32_loop, 300, 259, 217);
    check_split("matmul_ab_f32 by columns", kvl_matmul_ab_f32, kvl_matmul_ab_f32_loop, 5, 1700, 1999);
    check_split("matvec_f32", matvec_f32_split, matvec_f32_loop_as_product, 1, 4099, 4101);
}
END_TEST

/* K = 0 is the empty sum: every product writes zeros over whatever the output held. */
START_TEST(test_products_with_k_zero_write_zeros)
{
    enum { M = 3, N = 5 };
    const float a32 = 1.0f;
    const double a64 = 1.0;
    float c32[M * N];
    double c64[M * N], zeros[M * N] = {0};
    product_f32 f32s[] = {kvl_matmul_abt_f32, kvl_matmul_abt_f32_loop, kvl_matmul_ab_f32, kvl_matmul_ab_f32_loop,
                          matvec_f32_as_product, matvec_f32_loop_as_product};
    product_f64 f64s[] = {kvl_matmul_abt_f64, kvl_matmul_abt_f64_loop, kvl_matmul_ab_f64, kvl_matmul_ab_f64_loop,
                          matvec_f64_as_product, matvec_f64_loop_as_product};
    for (size_t f = 0; f < 6; f++) {
        const size_t rows = f >= 4 ? 1 : M;
        for (size_t i = 0; i < M * N; i++) { c32[i] = NAN; c64[i] = NAN; }
        ck_assert_int_eq(f32s[f](c32, &a32, &a32, rows, N, 0), KVL_OK);
        ck_assert_int_eq(f64s[f](c64, &a64, &a64, rows, N, 0), KVL_OK);
        kvl_expect_close("K = 0, f32", c32, zeros, rows * N, 0, 0, 0);
        kvl_expect_close_f64("K = 0, f64", c64, zeros, rows * N, 0, 0, 0);
    }
}
END_TEST

/* A size OpenBLAS cannot represent is refused before any pointer is touched (they are NULL here). */
START_TEST(test_sizes_beyond_blas_int_are_rejected)
{
    const size_t big = SIZE_MAX;  /* beyond both the 32- and the 64-bit BLAS integer */
    const size_t cases[3][3] = {{big, 1, 1}, {1, big, 1}, {1, 1, big}};
    const char *names[3] = {"M = ", "N = ", "K = "};
    for (size_t c = 0; c < 3; c++) {
        const size_t M = cases[c][0], N = cases[c][1], K = cases[c][2];
        kvl_clear_error();
        ck_assert_int_eq(kvl_matmul_abt_f32(NULL, NULL, NULL, M, N, K), KVL_EINVAL);
        ck_assert_msg(strstr(kvl_error(), names[c]) != NULL, "message names the size: %s", kvl_error());
        ck_assert_int_eq(kvl_matmul_abt_f64(NULL, NULL, NULL, M, N, K), KVL_EINVAL);
        ck_assert_int_eq(kvl_matmul_ab_f32(NULL, NULL, NULL, M, N, K), KVL_EINVAL);
        ck_assert_int_eq(kvl_matmul_ab_f64(NULL, NULL, NULL, M, N, K), KVL_EINVAL);
    }
    ck_assert_int_eq(kvl_matvec_f32(NULL, NULL, NULL, big, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_matvec_f32(NULL, NULL, NULL, 1, big), KVL_EINVAL);
    ck_assert_int_eq(kvl_matvec_f64(NULL, NULL, NULL, big, 1), KVL_EINVAL);
    ck_assert_int_eq(kvl_matvec_f64(NULL, NULL, NULL, 1, big), KVL_EINVAL);
}
END_TEST

/* Parts that fail: kvl_run_parts_checked runs every part and reports the lowest-numbered failure, its
 * code and its message (recorded on the part's own thread) on the caller's thread. */
typedef struct {
    int ran[4];
    int fail_from; /* parts ≥ this fail, part p with code 100 + p */
} parts_probe;

static int probe_part(void *ctx, size_t p)
{
    parts_probe *t = ctx;
    t->ran[p]++;
    return (int)p >= t->fail_from ? kvl_fail(100 + (int)p, "part %zu failed", p) : KVL_OK;
}

START_TEST(test_checked_parts_report_lowest_failure_and_run_every_part)
{
    for (size_t parts = 1; parts <= 4; parts++)
        for (int fail_from = 0; fail_from <= (int)parts; fail_from++) {
            parts_probe t = {.fail_from = fail_from};
            kvl_clear_error();
            const int rc = kvl_run_parts_checked(probe_part, &t, parts);
            for (size_t p = 0; p < parts; p++) ck_assert_int_eq(t.ran[p], 1);
            if (fail_from == (int)parts) {
                ck_assert_int_eq(rc, KVL_OK);
                continue;
            }
            char want[32];
            snprintf(want, sizeof want, "part %d failed", fail_from);
            ck_assert_int_eq(rc, 100 + fail_from);
            ck_assert_str_eq(kvl_error(), want);
        }
}
END_TEST

static void use_ref(void) { kvl_backend_use(&kvl_backend_ref); }
static void use_cpu(void) { kvl_backend_use(&kvl_backend_cpu); }

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_linalg");
    void (*const use[])(void) = {use_ref, use_cpu};
    const char *const names[] = {"ref", "cpu"};
    for (size_t b = 0; b < 2; b++) {
        TCase *tc = tcase_create(names[b]);
        tcase_add_checked_fixture(tc, use[b], NULL);
        tcase_add_test(tc, test_matmul_abt_f32_matches_loop_at_ragged_sizes);
        tcase_add_test(tc, test_matmul_ab_f32_matches_loop_at_ragged_sizes);
        tcase_add_test(tc, test_matvec_f32_matches_loop_at_ragged_sizes);
        tcase_add_test(tc, test_products_with_k_zero_write_zeros);
        if (use[b] == use_cpu) tcase_add_test(tc, test_products_split_across_threads_match_loop);
        suite_add_tcase(s, tc);
    }
    TCase *tc = tcase_create("linalg");
    tcase_add_test(tc, test_matmul_abt_f64_matches_loop_at_ragged_sizes);
    tcase_add_test(tc, test_matmul_ab_f64_matches_loop_at_ragged_sizes);
    tcase_add_test(tc, test_matvec_f64_matches_loop_at_ragged_sizes);
    tcase_add_test(tc, test_sizes_beyond_blas_int_are_rejected);
    tcase_add_test(tc, test_checked_parts_report_lowest_failure_and_run_every_part);
    suite_add_tcase(s, tc);
    return s;
}
