/* The V4.1 CSA2 compressor on the GPU (v41_compressor_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c v41_compressor_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: kvl_compress_pool_kernel (compress_pool_cuda.cuh), and the product and
 *        norm kernels through linalg_cuda.h and norm_cuda.h. */
#include "compress_pool_cuda.cuh"

#include <string.h>

#include "v41_compressor_cuda.h"
#include "linalg_cuda.h"
#include "norm_cuda.h"
#include "status.h"

#define POOL_THREADS 256

namespace {

int check_call(const char *fn, const v41_compressor_config *c, const v41_compressor_weights *w)
{
    const int rc = v41_compressor_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    if (!w || !w->w_c || !w->norm || (c->ratio > 1 && !w->w_z)) return kvl_fail(KVL_EINVAL, "%s: missing weights", fn);
    return KVL_OK;
}

/* a[S][c] = W_C x, z[S][c] = W_Z x (M > 1) */
int project(float *a, float *z, const v41_compressor_config *c, const v41_compressor_weights *w, const float *x,
            size_t S)
{
    KVL_TRY(kvl_matmul_abt_f32_cuda(a, x, w->w_c, S, c->width, c->d));
    return c->ratio > 1 ? kvl_matmul_abt_f32_cuda(z, x, w->w_z, S, c->width, c->d) : KVL_OK;
}

/* L[n][c]: entry k pools rows first + k·M … of a and z ([rows][c]) */
int pool(float *L, const float *a, const float *z, size_t n, size_t c, size_t M, const char *fn)
{
    if (kvl_div_up(n * c, POOL_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "%s: %zu entries of %zu are more than one launch takes", fn, n, c);
    const kvl_pool_shape p{n, c, M, M, c, 0, M};
    CUDA_CHECK(KVL_LAUNCH(kvl_compress_pool_kernel, dim3(static_cast<unsigned>(kvl_div_up(n * c, POOL_THREADS))),
                          POOL_THREADS, 0, L, a, z, p));
    return KVL_OK;
}

} /* namespace */

int v41_compressor_forward_cuda(float *L, const v41_compressor_config *c, const v41_compressor_weights *w,
                                 const float *x, size_t T, kvl_workspace *work)
{
    KVL_TRY(check_call(__func__, c, w));
    const size_t M = c->ratio, cw = c->width, N = T / M, used = N * M;
    if (N == 0) return KVL_OK;
    if (!L || !x || !work) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    if (used > SIZE_MAX / sizeof(float) / cw / 2) return kvl_fail(KVL_EINVAL, "%s: %zu tokens overflow", __func__, T);
    if (M == 1) {
        KVL_TRY(project(L, NULL, c, w, x, N));
    } else {
        KVL_TRY(kvl_workspace_reserve(work, 2 * used * cw * sizeof(float)));
        float *a = static_cast<float *>(work->p), *z = a + used * cw;
        KVL_TRY(project(a, z, c, w, x, used));
        KVL_TRY(pool(L, a, z, N, cw, M, __func__));
    }
    return kvl_rmsnorm_f32_cuda(L, L, w->norm, N, cw, cw, c->norm_eps);
}

int v41_compressor_state_init_cuda(v41_compressor_state_cuda *s, const v41_compressor_config *c)
{
    memset(s, 0, sizeof *s);
    const int rc = v41_compressor_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", __func__, kvl_error());
    if (c->ratio > SIZE_MAX / sizeof(float) / c->width / 2)
        return kvl_fail(KVL_EINVAL, "%s: %zu x %zu overflows", __func__, c->ratio, c->width);
    float *a = NULL;
    KVL_TRY(kvl_cuda_alloc(reinterpret_cast<void **>(&a), 2 * c->ratio * c->width * sizeof(float)));
    const int err = kvl_cuda_fill(a, 0, 2 * c->ratio * c->width * sizeof(float));
    if (err != KVL_OK) {
        kvl_cuda_free(a);
        return err;
    }
    s->a = a;
    s->z = a + c->ratio * c->width;
    s->M = c->ratio;
    s->c = c->width;
    return KVL_OK;
}

void v41_compressor_state_free_cuda(v41_compressor_state_cuda *s)
{
    kvl_cuda_free(s->a); /* z is the second half of the same allocation */
    kvl_workspace_free(&s->work);
    memset(s, 0, sizeof *s);
}

int v41_compressor_push_cuda(float *L, size_t *n_new, const v41_compressor_config *c,
                              const v41_compressor_weights *w, v41_compressor_state_cuda *s, const float *x,
                              size_t S)
{
    KVL_TRY(check_call(__func__, c, w));
    const size_t M = c->ratio, cw = c->width;
    if (!n_new || !s || !s->a || s->M != M || s->c != cw)
        return kvl_fail(KVL_EINVAL, "%s: the state was not made for this compressor", __func__);
    *n_new = 0;
    if (S == 0) return KVL_OK;
    if (!x || ((s->pos + S) / M > s->pos / M && !L)) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    if (S > SIZE_MAX / sizeof(float) / cw / 2) return kvl_fail(KVL_EINVAL, "%s: %zu tokens overflow", __func__, S);
    KVL_TRY(kvl_workspace_reserve(&s->work, 2 * S * cw * sizeof(float)));
    float *a = static_cast<float *>(s->work.p), *z = a + S * cw;
    KVL_TRY(project(a, z, c, w, x, S));
    size_t n = 0;
    for (size_t i = 0; i < S; i++, s->pos++) {
        const size_t r = s->pos % M;
        KVL_TRY(kvl_cuda_copy(s->a + r * cw, a + i * cw, cw * sizeof(float)));
        if (M > 1) KVL_TRY(kvl_cuda_copy(s->z + r * cw, z + i * cw, cw * sizeof(float)));
        if (r + 1 < M) continue;
        if (M == 1) KVL_TRY(kvl_cuda_copy(L + n * cw, s->a, cw * sizeof(float)));
        else KVL_TRY(pool(L + n * cw, s->a, s->z, 1, cw, M, __func__));
        n++;
    }
    if (n) KVL_TRY(kvl_rmsnorm_f32_cuda(L, L, w->norm, n, cw, cw, c->norm_eps));
    *n_new = n;
    return KVL_OK;
}
