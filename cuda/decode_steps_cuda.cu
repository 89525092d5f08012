/* Chapter 10's decode kernels, their argument checks and launches (decode_steps_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c decode_steps_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: decode_steps_cuda.cuh. */
#include "decode_steps_cuda.cuh"

#include "decode_steps_cuda.h"

/* KVL_OK when lo ≤ x ≤ hi, else KVL_EINVAL naming the call and the argument */
static int in_range(const char *call, const char *name, size_t x, size_t lo, size_t hi)
{
    if (x >= lo && x <= hi) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "%s: %s is %zu, outside %zu … %zu", call, name, x, lo, hi);
}

int kvl_step1_attend_cuda(float *o, const float *q, const float *k, const float *v, size_t n, size_t D, float scale,
                          kvl_step_kernel which)
{
    static const char call[] = "kvl_step1_attend_cuda";
    int rc = in_range(call, "n", n, 1, KVL_STEP1_MAX_ROWS);
    if (rc == KVL_OK) rc = in_range(call, "D", D, 1, KVL_STEP1_MAX_D);
    if (rc != KVL_OK) return rc;
    const unsigned un = static_cast<unsigned>(n), uD = static_cast<unsigned>(D);
    if (which == KVL_STEP_PLANTED) CUDA_CHECK(KVL_LAUNCH(kvl_step1_kernel<true>, 1, uD, 0, o, q, k, v, un, uD, scale));
    else CUDA_CHECK(KVL_LAUNCH(kvl_step1_kernel<false>, 1, uD, 0, o, q, k, v, un, uD, scale));
    return KVL_OK;
}

static int step2_check(size_t Hkv, size_t G, size_t n, size_t D, size_t split)
{
    static const char call[] = "kvl_step2_attend_cuda";
    int rc = in_range(call, "Hkv", Hkv, 1, 65535);
    if (rc == KVL_OK) rc = in_range(call, "G", G, 1, KVL_STEP2_MAX_G);
    if (rc == KVL_OK) rc = in_range(call, "n", n, 1, 0x7FFFFFFF);
    if (rc == KVL_OK) rc = in_range(call, "split", split, 1, 0x7FFFFFFF);
    if (rc == KVL_OK) rc = in_range(call, "D", D, KVL_WARP, KVL_STEP2_MAX_D);
    if (rc == KVL_OK && D % KVL_WARP != 0) rc = kvl_fail(KVL_EINVAL, "%s: D is %zu, not a multiple of 32", call, D);
    if (rc == KVL_OK && kvl_div_up(n, split) > 65535)
        rc = kvl_fail(KVL_EINVAL, "%s: %zu rows in splits of %zu are more splits than one launch takes", call, n, split);
    return rc;
}

int kvl_step2_attend_cuda(float *o, const float *q, const float *k, const float *v, size_t Hkv, size_t G, size_t n,
                          size_t D, size_t split, float scale, kvl_step_kernel which)
{
    int rc = step2_check(Hkv, G, n, D, split);
    if (rc != KVL_OK) return rc;
    const size_t H = Hkv * G, S = kvl_div_up(n, split);
    const kvl_step2_shape p = {static_cast<unsigned>(G), static_cast<unsigned>(n), static_cast<unsigned>(D),
                               static_cast<unsigned>(split), static_cast<unsigned>(S), scale};
    float *part = NULL;
    rc = kvl_cuda_alloc(reinterpret_cast<void **>(&part), H * S * (D + 2) * sizeof(float));
    if (rc != KVL_OK) return rc;
    float *part_m = part + H * S * D, *part_l = part_m + H * S;
    const dim3 grid(static_cast<unsigned>(Hkv), static_cast<unsigned>(S));
    const cudaError_t e =
        which == KVL_STEP_PLANTED
            ? KVL_LAUNCH(kvl_step2_split_kernel<true>, grid, KVL_WARP * p.G, 0, part, part_m, part_l, q, k, v, p)
            : KVL_LAUNCH(kvl_step2_split_kernel<false>, grid, KVL_WARP * p.G, 0, part, part_m, part_l, q, k, v, p);
    const cudaError_t e2 = e != cudaSuccess ? e
                                            : KVL_LAUNCH(kvl_step2_combine_kernel, static_cast<unsigned>(H), p.D, 0, o,
                                                         part, part_m, part_l, p.n_splits);
    kvl_cuda_free(part);
    CUDA_CHECK(e2);
    return KVL_OK;
}

int kvl_step3_scores_cuda(float *S, const uint16_t *Q, const uint16_t *K, size_t n, size_t Dk, kvl_step_kernel which)
{
    static const char call[] = "kvl_step3_scores_cuda";
    int rc = in_range(call, "n", n, 1, 0x7FFFFFFF);
    if (rc == KVL_OK) rc = in_range(call, "Dk", Dk, 16, KVL_STEP3_MAX_DK);
    if (rc == KVL_OK && Dk % 16 != 0) rc = kvl_fail(KVL_EINVAL, "%s: Dk is %zu, not a multiple of 16", call, Dk);
    if (rc != KVL_OK) return rc;
    const unsigned un = static_cast<unsigned>(n), uDk = static_cast<unsigned>(Dk);
    if (which == KVL_STEP_PLANTED) CUDA_CHECK(KVL_LAUNCH(kvl_step3_scores_kernel<true>, 1, KVL_WARP, 0, S, Q, K, un, uDk));
    else CUDA_CHECK(KVL_LAUNCH(kvl_step3_scores_kernel<false>, 1, KVL_WARP, 0, S, Q, K, un, uDk));
    return KVL_OK;
}

int kvl_step3_fragments_cuda(uint32_t *a, uint32_t *b, float *d, const uint16_t *A, const uint16_t *Bt)
{
    CUDA_CHECK(KVL_LAUNCH(kvl_step3_fragments_kernel, 1, KVL_WARP, 0, a, b, d, A, Bt));
    return KVL_OK;
}

int kvl_step4_attend_v32_cuda(float *o, const float *q, const uint8_t *rows, size_t H, size_t n, float scale,
                              kvl_step_kernel which)
{
    static const char call[] = "kvl_step4_attend_v32_cuda";
    int rc = in_range(call, "H", H, 1, KVL_STEP4_MAX_H);
    if (rc == KVL_OK) rc = in_range(call, "n", n, 1, 0x7FFFFFFF);
    if (rc != KVL_OK) return rc;
    const unsigned block = KVL_WARP * static_cast<unsigned>(H), un = static_cast<unsigned>(n);
    if (which == KVL_STEP_PLANTED) CUDA_CHECK(KVL_LAUNCH(kvl_step4_v32_kernel<true>, 1, block, 0, o, q, rows, un, scale));
    else CUDA_CHECK(KVL_LAUNCH(kvl_step4_v32_kernel<false>, 1, block, 0, o, q, rows, un, scale));
    return KVL_OK;
}
