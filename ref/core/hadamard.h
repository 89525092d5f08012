/* The orthonormal Walsh-Hadamard rotation H_n/√n, by the fast transform (DeepSeek-V3.2-Exp and
 * DeepSeek-V4-Flash inference/model.py rotate indexer queries and keys with it before FP8/FP4).
 *
 * H_n is Sylvester's matrix: H_1 = [1], H_2n = [[H_n, H_n], [H_n, −H_n]], so entry (i, j) is
 * (−1)^popcount(i & j). It is symmetric and H_n·H_n = n·I, hence H_n/√n is orthonormal and its own
 * inverse: rotating q and k both leaves every dot product q·k unchanged, while spreading an outlier
 * channel over all n (what makes one shared FP8 scale per block fit). This is the natural (Sylvester)
 * order that fast_hadamard_transform and DeepSeek's rotate_activation use.
 *
 * The fast transform runs log2(n) butterfly stages of sums and differences, n·log2(n) additions
 * instead of the n² multiply-adds of the matrix, then scales once by n^−½ (fl32(1/√n), as the reference
 * passes scale = n ** −0.5). In float each stage adds at most one rounding per element, and the scale
 * and the product one each, so an output errs by at most (log2(n) + 2)·u·‖x‖₁/√n, u = 2^−24.
 *
 * Shapes: x[n] one vector, x[rows][n] a batch of rows; n a power of two (1 included). */
#ifndef KVL_HADAMARD_H
#define KVL_HADAMARD_H

#include <stddef.h>

/* 1 if n is a power of two (n ≥ 1), else 0. */
int kvl_hadamard_size_ok(size_t n);

/* x[rows][n] ← each row times H_n/√n, in place. KVL_EINVAL unless n is a power of two. */
int kvl_hadamard_rotate_rows_f32(float *x, size_t rows, size_t n);

#endif
