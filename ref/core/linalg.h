/* Matrix products: OpenBLAS for speed, each with a plain-loop twin of the same signature.
 *
 * Weights are stored [out][in] and applied as y = W x (spec generations.md §0), so the product a
 * layer runs most is activations times weights transposed: C[M][N] = A[M][K] · B[N][K]^T, rows of A
 * against rows of B. The ordinary C = A · B and the matrix-vector y = W x complete the set.
 *
 * All matrices are row-major and dense (leading dimension = row length). Every function overwrites
 * its output; C must not overlap A or B. A size that does not fit OpenBLAS's integer type returns
 * KVL_EINVAL (kvl_error() names the argument) before anything is read or written. K = 0 writes
 * zeros (the empty sum); M = 0 or N = 0 writes nothing.
 *
 * The _loop twins are the definition: each output element is one dot product summed in k order in
 * the element type (float for _f32, double for _f64). OpenBLAS blocks and vectorises the same sums,
 * so the two agree to within the usual K·eps bound, not bit for bit. The twins accept any size and
 * return KVL_OK; they return int only to keep the signature.
 *
 * Threads: the Debian OpenBLAS is the pthread build, which starts its own pool. Call these from
 * outside OpenMP parallel regions (parallelise across heads with the _loop twins, or call BLAS once
 * on the stacked heads), or set OPENBLAS_NUM_THREADS=1, so the two pools do not oversubscribe.
 * A step whose products are too thin for OpenBLAS to split well (one decode token's attention, the
 * indexer's scan) splits its rows instead, with kvl_run_parts: one OpenMP thread per part, each calling
 * single-threaded BLAS, so only one of the two pools runs at a time. */
#ifndef KVL_LINALG_H
#define KVL_LINALG_H

#include <stddef.h>

/* C[M][N] = A[M][K] · B[N][K]^T */
int kvl_matmul_abt_f32(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
int kvl_matmul_abt_f32_loop(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
int kvl_matmul_abt_f64(double *C, const double *A, const double *B, size_t M, size_t N, size_t K);
int kvl_matmul_abt_f64_loop(double *C, const double *A, const double *B, size_t M, size_t N, size_t K);

/* C[M][N] = A[M][K] · B[K][N] */
int kvl_matmul_ab_f32(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
int kvl_matmul_ab_f32_loop(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
int kvl_matmul_ab_f64(double *C, const double *A, const double *B, size_t M, size_t N, size_t K);
int kvl_matmul_ab_f64_loop(double *C, const double *A, const double *B, size_t M, size_t N, size_t K);

/* y[N] = W[N][K] · x[K] */
int kvl_matvec_f32(float *y, const float *W, const float *x, size_t N, size_t K);
int kvl_matvec_f32_loop(float *y, const float *W, const float *x, size_t N, size_t K);
int kvl_matvec_f64(double *y, const double *W, const double *x, size_t N, size_t K);
int kvl_matvec_f64_loop(double *y, const double *W, const double *x, size_t N, size_t K);

/* The threads OpenBLAS runs on, and a new count for what follows (openblas_get/set_num_threads). */
int kvl_blas_threads(void);
void kvl_set_blas_threads(int n);

/* How many parts a step over n rows splits into: the threads OpenBLAS was given
 * (openblas_set_num_threads, OPENBLAS_NUM_THREADS), at most n / min_rows, at least 1; 1 inside an
 * OpenMP parallel region. */
size_t kvl_parts(size_t n, size_t min_rows);

/* run(ctx, p) for p = 0 … parts − 1, one OpenMP thread each, with OpenBLAS held at one thread meanwhile
 * and its thread count restored after. parts = 1 runs run(ctx, 0) on the calling thread. */
void kvl_run_parts(void (*run)(void *ctx, size_t p), void *ctx, size_t parts);

#endif
