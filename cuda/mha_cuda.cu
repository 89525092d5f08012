/* MHA / GQA / MQA decode and prefill on the GPU (mha_cuda.h): the ref's steps, each a launch.
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c mha_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: attend_cuda.cuh (kvl_attend_kernel<R, 1> decodes, <R, 4>
 *        prefills). */
#include "attend_cuda.cuh"

#include <math.h>
#include <string.h>

#include "element_cuda.h"
#include "linalg_cuda.h"
#include "mha_cuda.h"
#include "rope_cuda.h"
#include "status.h"

namespace {

size_t row_width(const mha_config *c) { return 2 * c->n_kv_heads * c->head_dim; }
size_t q_width(const mha_config *c) { return c->n_heads * c->head_dim; }

/* Floats of every weight, in the order of the host block: w_q, w_k, w_v, w_o. */
size_t weight_floats(const mha_config *c) { return 2 * q_width(c) * c->d + row_width(c) * c->d; }

int check_cache(const mha_config *c, const mha_cache_cuda *cache, size_t n, const char *fn)
{
    const kv_ring_cuda *r = &cache->ring;
    if (!r->rows || r->width != row_width(c) || cache->window != c->window)
        return kvl_fail(KVL_EINVAL, "%s: the cache (rows of %zu, window %zu) was not made for this config (rows of "
                        "%zu, window %zu)", fn, r->width, cache->window, row_width(c), c->window);
    if (n > r->max_tokens - r->len)
        return kvl_fail(KVL_EINVAL, "%s: %zu tokens at position %zu exceed the cache's %zu positions", fn, n, r->len,
                        r->max_tokens);
    return KVL_OK;
}

/* The attention of one layer's queries over its ring, rows of [K | V] per KV head. */
kvl_attend_shape shape_of(const mha_config *c, size_t B, size_t Q, size_t q_first, size_t key_first, size_t n_keys,
                          size_t split)
{
    split = kvl_decode_split(split, n_keys, B * c->n_heads * Q);
    const size_t n_splits = kvl_div_up(n_keys, split);
    const float scale = static_cast<float>(1.0 / sqrt(static_cast<double>(c->head_dim)));
    return kvl_attend_shape{B, c->n_heads, c->n_heads / c->n_kv_heads, c->head_dim, c->head_dim, Q, q_first, key_first,
                            n_keys, split, n_splits, c->window, scale};
}

kvl_attend_kv kv_of(const mha_config *c, const kv_ring_cuda *r, size_t ring_end, const void *fresh, size_t fresh_rows)
{
    return kvl_attend_kv{static_cast<const uint8_t *>(r->rows), r->slots, r->row_bytes, ring_end,
                         static_cast<const uint8_t *>(fresh), fresh_rows, r->row_bytes, 0, c->head_dim,
                         c->n_kv_heads * c->head_dim, c->head_dim};
}

template <int QT> int attend(float *o, const float *q, const kvl_attend_shape &sh, const kvl_attend_kv &kv,
                             const kv_ring_cuda *r, float *work)
{
    return r->store == KV_CUDA_BF16 ? kvl_attend_cuda<kvl_rows_bf16, QT>(o, q, sh, kv, work)
                                     : kvl_attend_cuda<kvl_rows_f32, QT>(o, q, sh, kv, work);
}

/* q[T][H·Dh] and rows kv[T][2·Hkv·Dh] of x[T][d], q and the keys rotated; rows t at start + t·pos_step */
int project_qkv(float *q, float *kv, const mha_config *c, const mha_weights *w, const float *x, size_t T, size_t start,
                size_t pos_step)
{
    KVL_TRY(kvl_matmul_abt_f32_cuda(q, x, w->w_q, T, q_width(c), c->d));
    KVL_TRY(kvl_matmul_abt_f32_cuda(kv, x, w->w_k, T, row_width(c), c->d)); /* w_k then w_v: [K | V] */
    KVL_TRY(kvl_rope_rotate_heads_half_split_cuda(q, T, q_width(c), 0, c->n_heads, c->head_dim, &c->rope,
                                                  static_cast<int64_t>(start), pos_step));
    return kvl_rope_rotate_heads_half_split_cuda(kv, T, row_width(c), 0, c->n_kv_heads, c->head_dim, &c->rope,
                                                 static_cast<int64_t>(start), pos_step);
}

} /* namespace */

int mha_weights_to_cuda(mha_weights *dev, const mha_weights *host, const mha_config *c)
{
    memset(dev, 0, sizeof *dev);
    const size_t n = weight_floats(c);
    float *block = NULL;
    CUDA_CHECK(cudaMalloc(&block, n * sizeof(float)));
    cudaError_t e = cudaMemcpy(block, host->w_q, n * sizeof(float), cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
        cudaFree(block);
        CUDA_CHECK(e);
    }
    *dev = mha_weights{block, block + (host->w_k - host->w_q), block + (host->w_v - host->w_q),
                       block + (host->w_o - host->w_q)};
    return KVL_OK;
}

void mha_weights_free_cuda(mha_weights *dev)
{
    if (dev->w_q) cudaFree(dev->w_q);
    memset(dev, 0, sizeof *dev);
}

int mha_cache_init_cuda(mha_cache_cuda *cache, const mha_config *c, size_t max_tokens, kv_store store, size_t batch)
{
    memset(cache, 0, sizeof *cache);
    KVL_TRY(kv_ring_init_cuda(&cache->ring, c->window, max_tokens, row_width(c), kv_cuda_store_of(store), batch));
    cache->window = c->window;
    return KVL_OK;
}

size_t mha_cache_bytes_used_cuda(const mha_cache_cuda *cache) { return kv_ring_bytes_used_cuda(&cache->ring); }

void mha_cache_free_cuda(mha_cache_cuda *cache)
{
    kv_ring_free_cuda(&cache->ring);
    kvl_workspace_free(&cache->work);
    memset(cache, 0, sizeof *cache);
}

int mha_decode_cuda(float *out, const mha_config *c, const mha_weights *w, mha_cache_cuda *cache, const float *x)
{
    KVL_TRY(check_cache(c, cache, 1, __func__));
    kv_ring_cuda *r = &cache->ring;
    const size_t B = r->batch, t = r->len, n = t + 1 < r->slots ? t + 1 : r->slots;
    const kvl_attend_shape sh = shape_of(c, B, 1, t, t + 1 - n, n, cache->split);
    const size_t qw = q_width(c), floats = 2 * B * qw + B * row_width(c) + kvl_attend_work_floats(sh);
    KVL_TRY(kvl_workspace_reserve(&cache->work, floats * sizeof(float)));
    float *q = static_cast<float *>(cache->work.p), *o = q + B * qw, *row = o + B * qw, *part = row + B * row_width(c);
    KVL_TRY(project_qkv(q, row, c, w, x, B, t, 0));
    KVL_TRY(kv_ring_append_cuda(r, row, 1));
    KVL_TRY(attend<1>(o, q, sh, kv_of(c, r, t + 1, NULL, 0), r, part));
    return kvl_matmul_abt_f32_cuda(out, o, w->w_o, B, c->d, qw);
}

int mha_prefill_cuda(float *out, const mha_config *c, const mha_weights *w, mha_cache_cuda *cache, const float *x,
                     size_t S)
{
    if (S == 0) return kvl_fail(KVL_EINVAL, "mha_prefill_cuda: S must be positive");
    KVL_TRY(check_cache(c, cache, S, __func__));
    kv_ring_cuda *r = &cache->ring;
    if (r->batch != 1)
        return kvl_fail(KVL_EINVAL, "mha_prefill_cuda: a prefill runs one sequence, the cache has %zu", r->batch);
    const size_t start = r->len, first = start < c->window || c->window == 0 ? 0 : start - c->window + 1;
    const kvl_attend_shape sh = shape_of(c, 1, S, start, first, start + S - first, start + S - first);
    const size_t qw = q_width(c), rw = row_width(c);
    const size_t floats = 2 * S * qw + S * rw + S * rw + kvl_attend_work_floats(sh);
    KVL_TRY(kvl_workspace_reserve(&cache->work, floats * sizeof(float)));
    float *q = static_cast<float *>(cache->work.p), *o = q + S * qw, *own = o + S * qw, *stored = own + S * rw;
    float *part = stored + S * rw;
    KVL_TRY(project_qkv(q, own, c, w, x, S, start, 1));
    /* the chunk's rows as the ring will hold them, so each query sees what the cache keeps */
    const void *fresh = own;
    if (r->store == KV_CUDA_BF16) {
        KVL_TRY(kvf_bf16_encode_n_cuda(reinterpret_cast<uint16_t *>(stored), own, S * rw));
        fresh = stored;
    }
    KVL_TRY(attend<4>(o, q, sh, kv_of(c, r, start, fresh, S), r, part));
    KVL_TRY(kvl_matmul_abt_f32_cuda(out, o, w->w_o, S, c->d, qw));
    return kv_ring_append_cuda(r, own, S);
}
