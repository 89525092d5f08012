/* DeepSeek KV rows on the GPU: the twins of formats/rows.h's kvf_row_pack and kvf_row_unpack, for
 * n_rows rows at once (kernels in rows_cuda.cuh). Arrays are device buffers:
 * values[n_rows][kvf_row_values(layout)] (16-byte aligned) and rows[n_rows][kvf_row_bytes(layout)].
 * Results: KVF_OK; KVF_ENAN or KVF_EINF when any value of any row is not finite (nothing is written
 * then); KVF_ELAYOUT for an unknown layout; negative: KVL_EINVAL (a misaligned buffer, too many rows
 * for one launch) or KVL_ECUDA, with kvl_error() saying which. */
#ifndef KVL_ROWS_CUDA_H
#define KVL_ROWS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "rows.h"

int kvf_row_pack_cuda(kvf_row layout, uint8_t *rows, const float *values, size_t n_rows);
int kvf_row_unpack_cuda(kvf_row layout, float *values, const uint8_t *rows, size_t n_rows);

/* The same for rows row_stride bytes apart whose values sit value_stride floats apart (a slot of a
 * ring per sequence; multiples of 4, value_stride at least the row's values). */
int kvf_row_pack_strided_cuda(kvf_row layout, uint8_t *rows, size_t row_stride, const float *values,
                              size_t value_stride, size_t n_rows);
int kvf_row_unpack_strided_cuda(kvf_row layout, float *values, size_t value_stride, const uint8_t *rows,
                                size_t row_stride, size_t n_rows);

#ifdef __cplusplus
}
#endif

#endif
