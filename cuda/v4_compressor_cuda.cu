/* The V4 token compressor on the GPU (v4_compressor_cuda.h).
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c v4_compressor_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: v4_compressor_cuda.cuh. */
#include "v4_compressor_cuda.cuh"

#include <stdlib.h>
#include <string.h>

#include "linalg_cuda.h"
#include "norm_cuda.h"
#include "rope_cuda.h"
#include "v4_compressor_cuda.h"
#include "status.h"

#define COMPRESS_THREADS 256

namespace {

int check_call(const char *fn, const v4_compressor_config *c, const v4_compressor_weights *w)
{
    const int rc = v4_compressor_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    if (!w || !w->w_kv || !w->w_gate || !w->ape || !w->norm) return kvl_fail(KVL_EINVAL, "%s: NULL weights", fn);
    return KVL_OK;
}

dim3 grid_of(size_t threads) { return dim3(static_cast<unsigned>(kvl_div_up(threads, COMPRESS_THREADS))); }

int check_launch(size_t threads, const char *fn)
{
    if (kvl_div_up(threads, COMPRESS_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "%s: %zu values are more than one launch takes", fn, threads);
    return KVL_OK;
}

/* a[S][(1+ov)c] = W_C x, z = W_Z x + B_{(pos+i) mod M} for x[S][d] */
int project(float *a, float *z, const v4_compressor_config *c, const v4_compressor_weights *w, const float *x, size_t S,
            size_t pos, const char *fn)
{
    const size_t wide = (1 + c->overlap) * c->width;
    KVL_TRY(kvl_matmul_abt_f32_cuda(a, x, w->w_kv, S, wide, c->d));
    KVL_TRY(kvl_matmul_abt_f32_cuda(z, x, w->w_gate, S, wide, c->d));
    KVL_TRY(check_launch(S * wide, fn));
    CUDA_CHECK(KVL_LAUNCH(kvl_gate_bias_kernel, grid_of(S * wide), COMPRESS_THREADS, 0, z, w->ape, S, wide, pos,
                          c->ratio));
    return KVL_OK;
}

int pool(float *out, const float *a, const float *z, const kvl_pool_shape &p, const char *fn)
{
    KVL_TRY(check_launch(p.n * p.c, fn));
    CUDA_CHECK(KVL_LAUNCH(kvl_compress_pool_kernel, grid_of(p.n * p.c), COMPRESS_THREADS, 0, out, a, z, p));
    return KVL_OK;
}

/* entries[n][c] ← RMSNorm with gain, entry k's trailing Dr channels rotated at (first + k)·M + rope_offset */
int finish(float *entries, const v4_compressor_config *c, const v4_compressor_weights *w, size_t n, size_t first,
           int64_t rope_offset)
{
    if (n == 0) return KVL_OK;
    const size_t cw = c->width;
    KVL_TRY(kvl_rmsnorm_f32_cuda(entries, entries, w->norm, n, cw, cw, c->norm_eps));
    return kvl_rope_rotate_heads_interleaved_cuda(entries, n, cw, cw - c->rope.Dr, 1, 0, &c->rope,
                                                  static_cast<int64_t>(first * c->ratio) + rope_offset, c->ratio);
}

} /* namespace */

int v4_compressor_forward_cuda(float *entries, const v4_compressor_config *c, const v4_compressor_weights *w,
                               const float *x, size_t T, int64_t rope_offset, kvl_workspace *work)
{
    KVL_TRY(check_call(__func__, c, w));
    const size_t M = c->ratio, ov = c->overlap, wide = (1 + ov) * c->width, N = T / M, used = N * M;
    if (N == 0) return KVL_OK;
    if (!entries || !x || !work) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    if (used > SIZE_MAX / sizeof(float) / wide / 2) return kvl_fail(KVL_EINVAL, "%s: %zu tokens overflow", __func__, T);
    KVL_TRY(kvl_workspace_reserve(work, 2 * used * wide * sizeof(float)));
    float *a = static_cast<float *>(work->p), *z = a + used * wide;
    KVL_TRY(project(a, z, c, w, x, used, 0, __func__));
    /* entry i's slots: block i − ov (rows from (i − ov)·M, absent below 0), then block i for ov = 1 */
    const kvl_pool_shape p{N, c->width, M, (1 + ov) * M, wide, -static_cast<int64_t>(ov * M), M};
    KVL_TRY(pool(entries, a, z, p, __func__));
    return finish(entries, c, w, N, 0, rope_offset);
}

int v4_compressor_state_init_cuda(v4_compressor_state_cuda *s, const v4_compressor_config *c)
{
    memset(s, 0, sizeof *s);
    const int rc = v4_compressor_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", __func__, kvl_error());
    const size_t rows = (1 + c->overlap) * c->ratio, cols = (1 + c->overlap) * c->width;
    if (rows > SIZE_MAX / sizeof(float) / cols / 2)
        return kvl_fail(KVL_EINVAL, "%s: a state of %zu x %zu overflows", __func__, rows, cols);
    float *kv = NULL;
    KVL_TRY(kvl_cuda_alloc(reinterpret_cast<void **>(&kv), 2 * rows * cols * sizeof(float)));
    float *gate = kv + rows * cols, *empty = static_cast<float *>(malloc(rows * cols * sizeof(float)));
    int err = empty ? kvl_cuda_fill(kv, 0, rows * cols * sizeof(float))
                    : kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu x %zu", __func__, rows, cols);
    for (size_t i = 0; empty && i < rows * cols; i++) empty[i] = -INFINITY;
    if (err == KVL_OK) err = kvl_cuda_upload(gate, empty, rows * cols * sizeof(float));
    free(empty);
    if (err != KVL_OK) {
        kvl_cuda_free(kv);
        return err;
    }
    s->rows = rows;
    s->cols = cols;
    s->kv = kv;
    s->gate = gate;
    return KVL_OK;
}

void v4_compressor_state_free_cuda(v4_compressor_state_cuda *s)
{
    kvl_cuda_free(s->kv); /* gate is the second half of the same allocation */
    kvl_workspace_free(&s->work);
    memset(s, 0, sizeof *s);
}

int v4_compressor_push_cuda(float *entries, size_t *n_new, const v4_compressor_config *c,
                            const v4_compressor_weights *w, v4_compressor_state_cuda *s, const float *x, size_t S,
                            int64_t rope_offset)
{
    KVL_TRY(check_call(__func__, c, w));
    const size_t M = c->ratio, ov = c->overlap, cw = c->width, wide = (1 + ov) * cw;
    if (!n_new || !s || !s->kv || s->rows != (1 + ov) * M || s->cols != wide)
        return kvl_fail(KVL_EINVAL, "%s: the state does not belong to this compressor", __func__);
    *n_new = 0;
    if (S == 0) return KVL_OK;
    if (!x || ((s->pos + S) / M > s->pos / M && !entries)) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    if (S > SIZE_MAX / sizeof(float) / wide / 2) return kvl_fail(KVL_EINVAL, "%s: %zu tokens overflow", __func__, S);
    KVL_TRY(kvl_workspace_reserve(&s->work, 2 * S * wide * sizeof(float)));
    float *a = static_cast<float *>(s->work.p), *z = a + S * wide;
    const size_t first_block = s->pos / M;
    KVL_TRY(project(a, z, c, w, x, S, s->pos, __func__));
    const kvl_pool_shape p{1, cw, M, s->rows, wide, 0, 0};
    size_t n = 0;
    for (size_t i = 0; i < S; i++, s->pos++) {
        const size_t row = ov * M + s->pos % M;
        KVL_TRY(kvl_cuda_copy(s->kv + row * wide, a + i * wide, wide * sizeof(float)));
        KVL_TRY(kvl_cuda_copy(s->gate + row * wide, z + i * wide, wide * sizeof(float)));
        if ((s->pos + 1) % M) continue;
        KVL_TRY(pool(entries + n++ * cw, s->kv, s->gate, p, __func__));
        if (ov) { /* the carry-over: this block is the next entry's first half */
            KVL_TRY(kvl_cuda_copy(s->kv, s->kv + M * wide, M * wide * sizeof(float)));
            KVL_TRY(kvl_cuda_copy(s->gate, s->gate + M * wide, M * wide * sizeof(float)));
        }
    }
    KVL_TRY(finish(entries, c, w, n, first_block, rope_offset));
    *n_new = n;
    return KVL_OK;
}
