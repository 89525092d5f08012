/* Matrix products: OpenBLAS, each with a plain-loop twin of the same signature.
 *
 * Weights are stored [out][in] and applied as y = W x (PyTorch's nn.Linear layout), so the product a
 * layer runs most is activations times weights transposed: C[M][N] = A[M][K] · B[N][K]^T, rows of A
 * against rows of B. The ordinary C = A · B and the matrix-vector y = W x complete the set.
 *
 * All matrices are row-major and dense (leading dimension = row length). Every function overwrites
 * its output; C must not overlap A or B. A size that does not fit OpenBLAS's integer type returns
 * KVL_EINVAL (kvl_error() names the argument) before anything is read or written. K = 0 writes
 * zeros (the empty sum); M = 0 or N = 0 writes nothing.
 *
 * The float products check their arguments and run the backend a program chose (ref/core/backend.h):
 * the _ref functions, one BLAS call each, or cpu/linalg_cpu.h's, the same calls split across threads.
 * The _loop twins are the definition: each output element is one dot product summed in k order in
 * the element type (float for _f32, double for _f64). OpenBLAS blocks and vectorises the same sums,
 * so the two agree to within the usual K·eps bound, not bit for bit. The twins accept any size and
 * return KVL_OK; they return int only to keep the signature. The double products are one BLAS call.
 *
 * Threads: OpenMP owns them, and OpenBLAS runs on one thread (the library sets it so before its first
 * product): two pools on the same cores spin against each other, OpenBLAS's workers busy-waiting after
 * a call and OpenMP's after a parallel region. A backend that splits work runs it in parts with
 * kvl_run_parts below, each part's BLAS calls on its own thread. OMP_NUM_THREADS, or kvl_set_threads,
 * sets how many threads everything uses. */
#ifndef KVL_LINALG_H
#define KVL_LINALG_H

#include <stddef.h>

/* C[M][N] = A[M][K] · B[N][K]^T */
int kvl_matmul_abt_f32(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
int kvl_matmul_abt_f32_ref(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
int kvl_matmul_abt_f32_loop(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
int kvl_matmul_abt_f64(double *C, const double *A, const double *B, size_t M, size_t N, size_t K);
int kvl_matmul_abt_f64_loop(double *C, const double *A, const double *B, size_t M, size_t N, size_t K);

/* C[M][N] = A[M][K] · B[K][N] */
int kvl_matmul_ab_f32(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
int kvl_matmul_ab_f32_ref(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
int kvl_matmul_ab_f32_loop(float *C, const float *A, const float *B, size_t M, size_t N, size_t K);
int kvl_matmul_ab_f64(double *C, const double *A, const double *B, size_t M, size_t N, size_t K);
int kvl_matmul_ab_f64_loop(double *C, const double *A, const double *B, size_t M, size_t N, size_t K);

/* y[N] = W[N][K] · x[K] */
int kvl_matvec_f32(float *y, const float *W, const float *x, size_t N, size_t K);
int kvl_matvec_f32_ref(float *y, const float *W, const float *x, size_t N, size_t K);
int kvl_matvec_f32_loop(float *y, const float *W, const float *x, size_t N, size_t K);
int kvl_matvec_f64(double *y, const double *W, const double *x, size_t N, size_t K);
int kvl_matvec_f64_loop(double *y, const double *W, const double *x, size_t N, size_t K);

/* dst[rows][cols], rows ld_dst apart, = src[rows][cols], rows ld_src apart: a block of columns moved
 * between a packed matrix and a slice of a wider one (one head's columns of [S][H·Dh], say). */
void kvl_copy_block(float *dst, size_t ld_dst, const float *src, size_t ld_src, size_t rows, size_t cols);

/* The threads the library's parallel work uses (OpenMP's), and a new count for what follows. */
int kvl_threads(void);
void kvl_set_threads(int n);

/* Work below this many multiply-adds (a quarter to half a millisecond on one core) stays on one thread:
 * a parallel region costs microseconds on a quiet machine, but a scheduler slice (milliseconds) when
 * another process holds a core. V4's window step (64 heads over 128 rows of 512) is exactly 2^23 and
 * splits. The runs behind the figure: tests/bench/README.md, "Design measurements". */
#define KVL_SPLIT_MIN_MACS ((double)(1 << 23))

/* How many parts a step of `macs` multiply-adds over n rows splits into: the threads (kvl_threads), at
 * most n / min_rows, at least 1; 1 below KVL_SPLIT_MIN_MACS or inside an OpenMP parallel region. */
size_t kvl_parts(size_t n, size_t min_rows, double macs);

/* run(ctx, p) for p = 0 … parts − 1, one OpenMP thread each (parts = 1: on the calling thread), every
 * BLAS call inside on one thread. */
void kvl_run_parts(void (*run)(void *ctx, size_t p), void *ctx, size_t parts);

/* The same for parts that can fail: every part runs, and the result is the code of the lowest-numbered
 * part that failed (KVL_OK if none), its message (kvl_error(), kept per thread) recorded on the calling
 * thread. */
int kvl_run_parts_checked(int (*run)(void *ctx, size_t p), void *ctx, size_t parts);

#endif
