/* Element codecs on the GPU: the twins of formats/element.h's bulk casts, with the same shapes and,
 * code for code, the same results (kernels in element_cuda.cuh). Arrays are device buffers; each
 * function returns KVL_OK or KVL_ECUDA (device.h). */
#ifndef KVL_ELEMENT_CUDA_H
#define KVL_ELEMENT_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* codes[n] ← x[n] */
int kvf_e4m3_encode_n_cuda(uint8_t *codes, const float *x, size_t n);
int kvf_e4m3_encode_sat_n_cuda(uint8_t *codes, const float *x, size_t n);
/* x[n] ← codes[n] */
int kvf_e4m3_decode_n_cuda(float *x, const uint8_t *codes, size_t n);

int kvf_e5m2_encode_n_cuda(uint8_t *codes, const float *x, size_t n);
int kvf_e5m2_encode_sat_n_cuda(uint8_t *codes, const float *x, size_t n);
int kvf_e5m2_decode_n_cuda(float *x, const uint8_t *codes, size_t n);

/* packed[(n+1)/2] ← x[n], element 2j in the low nibble of byte j (odd n: the last high nibble is 0);
 * the version the GPU it runs on uses (element_cuda.cuh) */
int kvf_e2m1_encode_n_cuda(uint8_t *packed, const float *x, size_t n);
/* The same through each of the two E2M1 encoders by name, whatever the GPU (for tests). */
int kvf_e2m1_encode_n_compare_cuda(uint8_t *packed, const float *x, size_t n);
int kvf_e2m1_encode_n_cvt_cuda(uint8_t *packed, const float *x, size_t n);
/* x[n] ← packed[(n+1)/2] */
int kvf_e2m1_decode_n_cuda(float *x, const uint8_t *packed, size_t n);

int kvf_bf16_encode_n_cuda(uint16_t *codes, const float *x, size_t n);
int kvf_bf16_encode_sat_n_cuda(uint16_t *codes, const float *x, size_t n);
int kvf_bf16_decode_n_cuda(float *x, const uint16_t *codes, size_t n);

#ifdef __cplusplus
}
#endif

#endif
