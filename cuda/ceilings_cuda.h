/* The device's own ceilings, which the benchmark states every kernel against: how fast it copies
 * memory, and how fast it multiplies bf16 matrices. */
#ifndef KVL_CEILINGS_CUDA_H
#define KVL_CEILINGS_CUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* *gbps = bytes read plus written per second (1e9) of a device-to-device copy of `bytes`, the median of
 * reps timed copies (kvl_cuda_time). */
int kvl_cuda_copy_ceiling(double *gbps, size_t bytes, int reps);

/* *tflops = 2n³ per second (1e12) of an n × n × n product of random matrices, the median of reps timed
 * products (kvl_cuda_time): bf16 inputs and float
 * accumulation through cuBLAS on a GPU; in the emulator (no cuBLAS) the float kernel of linalg_cuda.
 * *what names which was measured. */
int kvl_cuda_gemm_ceiling(double *tflops, const char **what, size_t n, int reps);

#ifdef __cplusplus
}
#endif

#endif
