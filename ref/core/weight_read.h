/* Weights out of a checkpoint as float32: plain (F32, BF16, F16) or DeepSeek's block-scaled FP8.
 *
 * DeepSeek's FP8 weights [V3 inference `kernel.py` weight_dequant; HF `quantization_config`
 * weight_block_size [128, 128]]: W[R][C] stored as float8_e4m3fn codes q, with one scale per 128×128
 * block, s[⌈R/128⌉][⌈C/128⌉], and W[r][c] = decode(q[r][c]) · s[r/128][c/128]; the edge blocks are
 * ragged (a 130-row weight has a second block row of 2). The scale tensor is named
 * `<name without .weight>.weight_scale_inv` in Hugging Face checkpoints and `.scale` in the inference
 * code's; it is FP32 in V3/V3.2 and float8_e8m0fnu (a power of two) in V4's. Codes decode through
 * formats/element.h and formats/block.h. */
#ifndef KVL_WEIGHT_READ_H
#define KVL_WEIGHT_READ_H

#include <stddef.h>

#include "safetensors.h"

#define KVL_WEIGHT_BLOCK 128

/* w[R][C] = decode(q[r][c]) · s[r/128][c/128] for q [R][C] F8_E4M3 and s [⌈R/128⌉][⌈C/128⌉] of any float
 * dtype. KVL_EINVAL, naming origin, the tensor and the shapes, when q is not 2-D E4M3 or s's shape does
 * not match. */
int kvl_dequant_fp8_blocks(float *w, const kvl_st_tensor *q, const kvl_st_tensor *s, const char *origin);

/* w[shape] = the tensor `name` of c as float32: F32, F64, F16 or BF16 as stored; F8_E4M3 through its 128×128
 * block scales; F4 (E2M1) through one F8_E8M0 `.scale` per 32 along each row (MXFP4, DeepSeek's V4 FP4).
 * KVL_EINVAL naming the tensor when it is missing, its shape is not shape[n_dims], its dtype is another
 * (F8_E8M0, a scale format, or an integer), an E4M3 or F4 weight has no scale tensor, a plain one has one,
 * both .weight_scale_inv and .scale lie beside it, or a value (decoded, scaled) is not finite. */
int kvl_read_weight(float *w, const kvl_st_checkpoint *c, const char *name, size_t n_dims, const size_t *shape);

/* KVL_OK when every element of x[shape] is finite; else KVL_EINVAL naming origin, the tensor `name` and
 * the first non-finite element's index (a NaN weight or input would only surface as a NaN output). */
int kvl_expect_finite(const float *x, const size_t *shape, size_t n_dims, const char *origin, const char *name);

#endif
