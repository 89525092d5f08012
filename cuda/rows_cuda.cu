/* DeepSeek KV rows on the GPU (rows_cuda.h): the byte map read from formats/, the row's recipe, the
 * quantised part and the tail each one launch.
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c rows_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: rows_cuda.cuh and block_cuda.cuh. */
#include "rows_cuda.cuh"

#include <string.h>

#include "block_cuda.h"

#include "rows_cuda.h"

namespace {

/* g = the layout's byte map (kvf_row_fields) with the given strides; KVF_ELAYOUT if unknown. */
int geometry_of(kvl_row_geometry *g, kvf_row layout, size_t stride, size_t vstride)
{
    size_t n = 0;
    const kvf_row_field *f = kvf_row_fields(layout, &n);
    if (!f) return KVF_ELAYOUT;
    memset(g, 0, sizeof *g);
    g->values = kvf_row_values(layout);
    g->row_bytes = kvf_row_bytes(layout);
    for (size_t i = 0; i < n; i++) {
        if (strcmp(f[i].name, "nope") == 0 || strcmp(f[i].name, "codes") == 0) g->code_off = f[i].offset;
        if (strcmp(f[i].name, "scale") == 0) g->scale_off = f[i].offset;
        if (strcmp(f[i].name, "rope") == 0) g->raw_off = f[i].offset, g->raw = f[i].size / 2;
        if (strcmp(f[i].name, "pad") == 0) g->pad_off = f[i].offset, g->pad = f[i].size;
    }
    g->quant = g->values - g->raw;
    g->stride = stride ? stride : g->row_bytes;
    g->vstride = vstride ? vstride : g->values;
    return KVF_OK;
}

kvl_qlayout rows_layout(const kvl_row_geometry &g) { return kvl_qlayout{g.quant, g.vstride, g.stride, g.stride}; }

int launch_grid(dim3 *grid, size_t threads)
{
    const size_t blocks = kvl_div_up(threads, KVL_QUANT_THREADS);
    if (blocks > 0x7FFFFFFFu) return kvl_fail(KVL_EINVAL, "rows: %zu threads are more than one launch takes", threads);
    *grid = dim3(static_cast<unsigned>(blocks ? blocks : 1));
    return KVL_OK;
}

template <typename R> int pack(const kvl_row_geometry &g, uint8_t *rows, const float *values, size_t n_rows)
{
    int rc = kvl_quant_rows_cuda<R>(rows + g.code_off, rows + g.scale_off, values, rows_layout(g), n_rows, 0.0f);
    if (rc != KVL_OK || g.raw + g.pad == 0) return rc;
    dim3 grid;
    if ((rc = launch_grid(&grid, n_rows * (g.raw + g.pad))) != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_row_tail_pack_kernel, grid, KVL_QUANT_THREADS, 0, rows, values, g, n_rows));
    return KVL_OK;
}

template <typename R> int unpack(const kvl_row_geometry &g, float *values, const uint8_t *rows, size_t n_rows)
{
    int rc = kvl_dequant_rows_cuda<R>(values, rows + g.code_off, rows + g.scale_off, rows_layout(g), n_rows, 0.0f);
    if (rc != KVL_OK || g.raw == 0) return rc;
    dim3 grid;
    if ((rc = launch_grid(&grid, n_rows * g.raw)) != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_row_tail_unpack_kernel, grid, KVL_QUANT_THREADS, 0, values, rows, g, n_rows));
    return KVL_OK;
}

/* values are read and written 16 bytes at a time, codes 4 (E4M3) or 2 (E2M1) */
int check_aligned(const kvl_row_geometry &g, const float *values, const uint8_t *rows)
{
    if (reinterpret_cast<uintptr_t>(values) % 16 != 0 || reinterpret_cast<uintptr_t>(rows) % 4 != 0 ||
        g.vstride % 4 != 0 || g.stride % 4 != 0)
        return kvl_fail(KVL_EINVAL, "rows: values at %p, %zu floats apart, need 16-byte alignment and rows at %p, "
                        "%zu bytes apart, 4-byte", static_cast<const void *>(values), g.vstride,
                        static_cast<const void *>(rows), g.stride);
    return KVL_OK;
}

/* Every value of every row is finite (one pass when the rows are contiguous). */
int check_finite_rows(const kvl_row_geometry &g, const float *values, size_t n_rows)
{
    if (g.vstride == g.values) return kvf_check_finite_cuda(values, n_rows * g.values);
    int rc = KVF_OK;
    for (size_t r = 0; r < n_rows && rc == KVF_OK; r++) rc = kvf_check_finite_cuda(values + r * g.vstride, g.values);
    return rc;
}

} /* namespace */

/* Each layout's recipe, as formats/rows.h lists them. */
int kvf_row_pack_strided_cuda(kvf_row layout, uint8_t *rows, size_t row_stride, const float *values,
                              size_t value_stride, size_t n_rows)
{
    kvl_row_geometry g;
    int rc = geometry_of(&g, layout, row_stride, value_stride);
    if (rc == KVF_OK) rc = check_finite_rows(g, values, n_rows);
    if (rc == KVF_OK && n_rows > 0) rc = check_aligned(g, values, rows);
    if (rc != KVF_OK || n_rows == 0) return rc;
    switch (layout) {
    case KVF_ROW_V32_MAIN:
    case KVF_ROW_V32_INDEX: return pack<kvl_recipe_ue8m0_f32>(g, rows, values, n_rows);
    case KVF_ROW_V4_MAIN: return pack<kvl_recipe_rceil_e8m0<KVF_V4_BLOCK>>(g, rows, values, n_rows);
    case KVF_ROW_V4_INDEX: return pack<kvl_recipe_mxfp4_rceil>(g, rows, values, n_rows);
    case KVF_ROW_V41_MAIN: return pack<kvl_recipe_fp4_v41>(g, rows, values, n_rows);
    case KVF_ROW_V41_WINDOW: return pack<kvl_recipe_rceil_e8m0<KVF_V41_WIN_BLOCK>>(g, rows, values, n_rows);
    case KVF_N_ROW: break;
    }
    return KVF_ELAYOUT;
}

int kvf_row_unpack_strided_cuda(kvf_row layout, float *values, size_t value_stride, const uint8_t *rows,
                                size_t row_stride, size_t n_rows)
{
    kvl_row_geometry g;
    int rc = geometry_of(&g, layout, row_stride, value_stride);
    if (rc == KVF_OK && n_rows > 0) rc = check_aligned(g, values, rows);
    if (rc != KVF_OK || n_rows == 0) return rc;
    switch (layout) {
    case KVF_ROW_V32_MAIN:
    case KVF_ROW_V32_INDEX: return unpack<kvl_recipe_ue8m0_f32>(g, values, rows, n_rows);
    case KVF_ROW_V4_MAIN: return unpack<kvl_recipe_rceil_e8m0<KVF_V4_BLOCK>>(g, values, rows, n_rows);
    case KVF_ROW_V4_INDEX: return unpack<kvl_recipe_mxfp4_rceil>(g, values, rows, n_rows);
    case KVF_ROW_V41_MAIN: return unpack<kvl_recipe_fp4_v41>(g, values, rows, n_rows);
    case KVF_ROW_V41_WINDOW: return unpack<kvl_recipe_rceil_e8m0<KVF_V41_WIN_BLOCK>>(g, values, rows, n_rows);
    case KVF_N_ROW: break;
    }
    return KVF_ELAYOUT;
}

int kvf_row_pack_cuda(kvf_row layout, uint8_t *rows, const float *values, size_t n_rows)
{
    return kvf_row_pack_strided_cuda(layout, rows, kvf_row_bytes(layout), values, kvf_row_values(layout), n_rows);
}

int kvf_row_unpack_cuda(kvf_row layout, float *values, const uint8_t *rows, size_t n_rows)
{
    return kvf_row_unpack_strided_cuda(layout, values, kvf_row_values(layout), rows, kvf_row_bytes(layout), n_rows);
}
