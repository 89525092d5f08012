/* Block quantisers on the GPU (block_cuda.h): argument checks, the finiteness pass, one launch.
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c block_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels and their versions: block_cuda.cuh. */
#include "block_cuda.cuh"

#include <math.h>

#include "block_cuda.h"

extern "C" {
#include "block.h"
}

namespace {

/* The flags word the finiteness pass reports into, allocated on first use and kept. */
int flag_word(unsigned **flag)
{
    static unsigned *word = nullptr;
    if (!word) CUDA_CHECK(cudaMalloc(&word, sizeof *word));
    *flag = word;
    return KVL_OK;
}

int check_aligned(const void *p, size_t align, const char *what)
{
    if (reinterpret_cast<uintptr_t>(p) % align != 0)
        return kvl_fail(KVL_EINVAL, "block quantisers: %s at %p is not %zu-byte aligned", what, p, align);
    return KVL_OK;
}

/* Lengths first, then finiteness, as formats/block.c checks them. */
int check_input(const float *x, size_t n, size_t block)
{
    if (block == 0 || n % block != 0) return KVF_ELENGTH;
    return kvf_check_finite_cuda(x, n);
}

template <typename R> int check_buffers(const uint8_t *codes, const float *x)
{
    int rc = check_aligned(x, 16, "x");
    if (rc == KVL_OK) rc = check_aligned(codes, R::elem == KVL_ELEM_E4M3 ? 4 : 2, "codes");
    return rc;
}

int check_global_scale(float s_global) { return isfinite(s_global) && s_global > 0.0f ? KVF_OK : KVF_ESCALE; }

/* the quantiser proper (SIMPLE: the readable twin's kernel): lengths and buffers checked, finiteness
 * assumed */
template <typename R, bool SIMPLE = false>
int quant_finite(uint8_t *codes, uint8_t *scales, const float *x, size_t n, float param)
{
    if (n % R::block != 0) return KVF_ELENGTH;
    if (n == 0) return KVF_OK;
    int rc = check_buffers<R>(codes, x);
    if (rc != KVL_OK) return rc;
    const kvl_qlayout L{n, n, 0, 0};
    return SIMPLE ? kvl_quant_rows_simple_cuda<R>(codes, scales, x, L, 1, param)
                  : kvl_quant_rows_cuda<R>(codes, scales, x, L, 1, param);
}

template <bool SIMPLE>
int quant_finite_recipe(const char *fn, kvf_recipe_cuda recipe, uint8_t *codes, uint8_t *scales, const float *x,
                        size_t n, float param)
{
    switch (recipe) {
    case KVF_RECIPE_MXFP8_E4M3: return quant_finite<kvl_recipe_mxfp8, SIMPLE>(codes, scales, x, n, 0.0f);
    case KVF_RECIPE_MXFP4: return quant_finite<kvl_recipe_mxfp4, SIMPLE>(codes, scales, x, n, 0.0f);
    case KVF_RECIPE_NVFP4: {
        int rc = check_global_scale(param);
        return rc != KVF_OK ? rc : quant_finite<kvl_recipe_nvfp4, SIMPLE>(codes, scales, x, n, param);
    }
    case KVF_RECIPE_FP4_V41: return quant_finite<kvl_recipe_fp4_v41, SIMPLE>(codes, scales, x, n, 0.0f);
    case KVF_RECIPE_FP8_UE8M0: return quant_finite<kvl_recipe_ue8m0_f32, SIMPLE>(codes, scales, x, n, 0.0f);
    case KVF_RECIPE_FP8_E8M0_RCEIL_64:
        return quant_finite<kvl_recipe_rceil_e8m0<64>, SIMPLE>(codes, scales, x, n, 0.0f);
    case KVF_RECIPE_FP8_E8M0_RCEIL_32:
        return quant_finite<kvl_recipe_rceil_e8m0<32>, SIMPLE>(codes, scales, x, n, 0.0f);
    case KVF_RECIPE_MXFP4_RCEIL: return quant_finite<kvl_recipe_mxfp4_rceil, SIMPLE>(codes, scales, x, n, 0.0f);
    case KVF_N_RECIPE_CUDA: break;
    }
    return kvl_fail(KVL_EINVAL, "%s: unknown recipe %d", fn, static_cast<int>(recipe));
}

template <typename R> int quant(uint8_t *codes, uint8_t *scales, const float *x, size_t n, float param)
{
    int rc = check_input(x, n, R::block);
    return rc != KVF_OK ? rc : quant_finite<R>(codes, scales, x, n, param);
}

template <typename R> int dequant(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, float param)
{
    if (n % R::block != 0) return KVF_ELENGTH;
    if (n == 0) return KVF_OK;
    int rc = check_buffers<R>(codes, x);
    if (rc != KVL_OK) return rc;
    return kvl_dequant_rows_cuda<R>(x, codes, scales, kvl_qlayout{n, n, 0, 0}, 1, param);
}


/* The E8M0 act_quant recipe instantiated for each block it takes. */
int fp8_rceil(uint8_t *codes, uint8_t *scales, const float *x, size_t n, size_t block)
{
    switch (block) {
    case 4: return quant<kvl_recipe_rceil_e8m0<4>>(codes, scales, x, n, 0.0f);
    case 8: return quant<kvl_recipe_rceil_e8m0<8>>(codes, scales, x, n, 0.0f);
    case 16: return quant<kvl_recipe_rceil_e8m0<16>>(codes, scales, x, n, 0.0f);
    case 32: return quant<kvl_recipe_rceil_e8m0<32>>(codes, scales, x, n, 0.0f);
    case 64: return quant<kvl_recipe_rceil_e8m0<64>>(codes, scales, x, n, 0.0f);
    case 128: return quant<kvl_recipe_rceil_e8m0<128>>(codes, scales, x, n, 0.0f);
    }
    return block == 0 || n % block ? KVF_ELENGTH
                                   : kvl_fail(KVL_EINVAL, "kvf_quant_fp8_e8m0_rceil_cuda: block %zu is not a power "
                                                          "of two from 4 to 128", block);
}

int fp8_e8m0_dequant(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, size_t block)
{
    switch (block) {
    case 4: return dequant<kvl_recipe_rceil_e8m0<4>>(x, codes, scales, n, 0.0f);
    case 8: return dequant<kvl_recipe_rceil_e8m0<8>>(x, codes, scales, n, 0.0f);
    case 16: return dequant<kvl_recipe_rceil_e8m0<16>>(x, codes, scales, n, 0.0f);
    case 32: return dequant<kvl_recipe_rceil_e8m0<32>>(x, codes, scales, n, 0.0f);
    case 64: return dequant<kvl_recipe_rceil_e8m0<64>>(x, codes, scales, n, 0.0f);
    case 128: return dequant<kvl_recipe_rceil_e8m0<128>>(x, codes, scales, n, 0.0f);
    }
    return block == 0 || n % block ? KVF_ELENGTH
                                   : kvl_fail(KVL_EINVAL, "kvf_dequant_fp8_e8m0_cuda: block %zu is not a power of "
                                                          "two from 4 to 128", block);
}

} /* namespace */

int kvf_check_finite_cuda(const float *x, size_t n)
{
    if (n == 0) return KVF_OK;
    if (kvl_div_up(n, KVL_QUANT_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "kvf_check_finite_cuda: %zu elements are more than one launch takes", n);
    unsigned *flag, found = 0;
    int rc = flag_word(&flag);
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(cudaMemset(flag, 0, sizeof *flag));
    const dim3 grid(static_cast<unsigned>(kvl_div_up(n, KVL_QUANT_THREADS)));
    CUDA_CHECK(KVL_LAUNCH(kvl_finite_kernel<float>, grid, KVL_QUANT_THREADS, 0, flag, x, n));
    CUDA_CHECK(cudaMemcpy(&found, flag, sizeof found, cudaMemcpyDeviceToHost));
    return found & 1u ? KVF_ENAN : found & 2u ? KVF_EINF : KVF_OK;
}

int kvf_quant_mxfp8_e4m3_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    return quant<kvl_recipe_mxfp8>(codes, scales, x, n, 0.0f);
}

int kvf_dequant_mxfp8_e4m3_cuda(float *x, const uint8_t *codes, const uint8_t *scales, size_t n)
{
    return dequant<kvl_recipe_mxfp8>(x, codes, scales, n, 0.0f);
}

int kvf_quant_mxfp4_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    return quant<kvl_recipe_mxfp4>(codes, scales, x, n, 0.0f);
}

int kvf_dequant_mxfp4_cuda(float *x, const uint8_t *codes, const uint8_t *scales, size_t n)
{
    return dequant<kvl_recipe_mxfp4>(x, codes, scales, n, 0.0f);
}

int kvf_quant_nvfp4_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n, float s_global)
{
    int rc = check_global_scale(s_global);
    return rc != KVF_OK ? rc : quant<kvl_recipe_nvfp4>(codes, scales, x, n, s_global);
}

int kvf_dequant_nvfp4_cuda(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, float s_global)
{
    int rc = check_global_scale(s_global);
    return rc != KVF_OK ? rc : dequant<kvl_recipe_nvfp4>(x, codes, scales, n, s_global);
}

int kvf_quant_fp4_v41_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    return quant<kvl_recipe_fp4_v41>(codes, scales, x, n, 0.0f);
}

int kvf_dequant_fp4_v41_cuda(float *x, const uint8_t *codes, const uint8_t *scales, size_t n)
{
    return dequant<kvl_recipe_fp4_v41>(x, codes, scales, n, 0.0f);
}

int kvf_quant_fp8_ue8m0_cuda(uint8_t *codes, float *scales, const float *x, size_t n)
{
    return quant<kvl_recipe_ue8m0_f32>(codes, reinterpret_cast<uint8_t *>(scales), x, n, 0.0f);
}

int kvf_dequant_fp8_ue8m0_cuda(float *x, const uint8_t *codes, const float *scales, size_t n)
{
    return dequant<kvl_recipe_ue8m0_f32>(x, codes, reinterpret_cast<const uint8_t *>(scales), n, 0.0f);
}

int kvf_quant_fp8_e8m0_rceil_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n, size_t block)
{
    return fp8_rceil(codes, scales, x, n, block);
}

int kvf_dequant_fp8_e8m0_cuda(float *x, const uint8_t *codes, const uint8_t *scales, size_t n, size_t block)
{
    return fp8_e8m0_dequant(x, codes, scales, n, block);
}

int kvf_quant_mxfp4_rceil_cuda(uint8_t *codes, uint8_t *scales, const float *x, size_t n)
{
    return quant<kvl_recipe_mxfp4_rceil>(codes, scales, x, n, 0.0f);
}

int kvf_quant_finite_cuda(kvf_recipe_cuda recipe, uint8_t *codes, uint8_t *scales, const float *x, size_t n,
                          float param)
{
    return quant_finite_recipe<false>("kvf_quant_finite_cuda", recipe, codes, scales, x, n, param);
}

int kvf_quant_simple_cuda(kvf_recipe_cuda recipe, uint8_t *codes, uint8_t *scales, const float *x, size_t n,
                          float param)
{
    return quant_finite_recipe<true>("kvf_quant_simple_cuda", recipe, codes, scales, x, n, param);
}

const char *kvf_recipe_cuda_name(kvf_recipe_cuda recipe)
{
    static const char *const names[KVF_N_RECIPE_CUDA] = {"mxfp8_e4m3", "mxfp4", "nvfp4", "fp4_v41", "fp8_ue8m0",
                                                          "fp8_e8m0_rceil/64", "fp8_e8m0_rceil/32", "mxfp4_rceil"};
    return static_cast<unsigned>(recipe) < KVF_N_RECIPE_CUDA ? names[recipe] : NULL;
}
