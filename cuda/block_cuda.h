/* Block quantisers on the GPU: the twins of formats/block.h, with the same arguments (device buffers)
 * and, byte for byte, the same codes and scales (kernels in block_cuda.cuh).
 *
 * Results: the formats codes (KVF_OK, KVF_ELENGTH, KVF_ENAN, KVF_EINF, KVF_ESCALE, all ≥ 0), checked in
 * the same order and with the outputs untouched on error; or a negative status: KVL_EINVAL for a
 * buffer the kernels cannot take (x not 16-byte aligned, codes not 4-byte (E4M3) or 2-byte (E2M1)
 * aligned, a block that is not a power of two from 4 to 128), KVL_ECUDA for a failed call; kvl_error()
 * says which. A quantiser first runs a finiteness pass over x, then the quantiser proper. */
#ifndef KVL_BLOCK_CUDA_H
#define KVL_BLOCK_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* x[n] → KVF_ENAN if any element is NaN, else KVF_EINF if any is ±inf, else KVF_OK */
int kvf_check_finite_cuda(const float *x, size_t n);

/* x[n] → codes[n] (E4M3), scales[n/32] (E8M0, OCP floor) */
int kvf_quant_mxfp8_e4m3_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n);
int kvf_dequant_mxfp8_e4m3_cuda(float *x, const uint8_t *codes, const uint8_t *scales, size_t n);

/* x[n] → codes[n/2] (E2M1 pairs, element 2j low), scales[n/32] (E8M0, OCP floor) */
int kvf_quant_mxfp4_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n);
int kvf_dequant_mxfp4_cuda(float *x, const uint8_t *codes, const uint8_t *scales, size_t n);

/* x[n] → codes[n/2], scales[n/16] (E4M3) under the global scale s_global */
int kvf_quant_nvfp4_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n, float s_global);
int kvf_dequant_nvfp4_cuda(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, float s_global);

/* x[n] → codes[n/2], scales[n/16] (E4M3, no global scale) */
int kvf_quant_fp4_v41_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n);
int kvf_dequant_fp4_v41_cuda(float *x, const uint8_t *codes, const uint8_t *scales, size_t n);

/* x[n] → codes[n] (E4M3), scales[n/128] (float32 powers of two) */
int kvf_quant_fp8_ue8m0_cuda(uint8_t *codes, float *scales, const float *x, size_t n);
int kvf_dequant_fp8_ue8m0_cuda(float *x, const uint8_t *codes, const float *scales, size_t n);

/* x[n] → codes[n] (E4M3), scales[n/block] (E8M0, round up against 448) */
int kvf_quant_fp8_e8m0_rceil_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n, size_t block);
int kvf_dequant_fp8_e8m0_cuda(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, size_t block);

/* x[n] → codes[n/2], scales[n/32] (E8M0, round up against 6); decode with kvf_dequant_mxfp4_cuda */
int kvf_quant_mxfp4_rceil_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n);

/* The recipes by name, for kvf_quant_finite_cuda. */
typedef enum {
    KVF_RECIPE_MXFP8_E4M3,
    KVF_RECIPE_MXFP4,
    KVF_RECIPE_NVFP4,
    KVF_RECIPE_FP4_V41,
    KVF_RECIPE_FP8_UE8M0,
    KVF_RECIPE_FP8_E8M0_RCEIL_64, /* the V4 main row's block */
    KVF_RECIPE_FP8_E8M0_RCEIL_32, /* the V4.1 window row's */
    KVF_RECIPE_MXFP4_RCEIL,
    KVF_N_RECIPE_CUDA
} kvf_recipe_cuda;

/* The quantiser alone, for input known to be finite (as DeepSeek's kernels assume): no finiteness pass,
 * so x is read once; what the benchmark times. Lengths, alignment and NVFP4's s_global (param; 0 for
 * the others) are checked as above; a NaN or inf gets whatever the arithmetic makes of it. */
int kvf_quant_finite_cuda(kvf_recipe_cuda recipe, uint8_t *codes, uint8_t *scales, const float *x, size_t n,
                          float param);
/* The same by the readable twin's kernel (one thread per four values, IEEE divisions), for the tests. */
int kvf_quant_simple_cuda(kvf_recipe_cuda recipe, uint8_t *codes, uint8_t *scales, const float *x, size_t n,
                          float param);
const char *kvf_recipe_cuda_name(kvf_recipe_cuda recipe);

#ifdef __cplusplus
}
#endif

#endif
