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
 * Threads: the definitions start none of their own; OpenBLAS may use its pool. The CPU backend splits
 * its work over OpenMP's threads and runs OpenBLAS on one (cpu/threads.h). */
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

#endif
