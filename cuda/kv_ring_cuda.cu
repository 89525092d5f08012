/* The sliding-window ring on the GPU (kv_ring_cuda.h): the ref's bookkeeping, device rows.
 *
 * Build: nvcc -std=c++17 -O2 -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
 *        -gencode arch=compute_90,code=compute_90 -c kv_ring_cuda.cu (make cuda); g++ -x c++ for the
 *        emulator (make test). Kernels: kv_ring_cuda.cuh. */
#include "kv_ring_cuda.cuh"

#include <string.h>

#include "block_cuda.h"
#include "rows_cuda.h"
#include "kv_ring_cuda.h"

#define RING_THREADS 256

kv_cuda_store kv_cuda_store_of(kv_store s) { return s == KV_STORE_BF16 ? KV_CUDA_BF16 : KV_CUDA_F32; }

size_t kv_cuda_row_bytes(kv_cuda_store s, size_t width)
{
    switch (s) {
    case KV_CUDA_F32: return width * sizeof(float);
    case KV_CUDA_BF16: return width * sizeof(uint16_t);
    case KV_CUDA_V32_MAIN: return kvf_row_bytes(KVF_ROW_V32_MAIN);
    }
    return 0;
}

int kv_ring_init_cuda(kv_ring_cuda *r, size_t W, size_t max_tokens, size_t width, kv_cuda_store store, size_t batch)
{
    memset(r, 0, sizeof *r);
    if (width == 0 || max_tokens == 0 || batch == 0)
        return kvl_fail(KVL_EINVAL, "kv_ring_init_cuda: width (%zu), max_tokens (%zu) and batch (%zu) must be "
                        "positive", width, max_tokens, batch);
    if (store == KV_CUDA_V32_MAIN && width != kvf_row_values(KVF_ROW_V32_MAIN))
        return kvl_fail(KVL_EINVAL, "kv_ring_init_cuda: the V3.2 FP8 row holds %zu values, not %zu",
                        kvf_row_values(KVF_ROW_V32_MAIN), width);
    const size_t slots = W == 0 || W > max_tokens ? max_tokens : W, row_bytes = kv_cuda_row_bytes(store, width);
    if (row_bytes == 0 || slots > SIZE_MAX / batch / row_bytes)
        return kvl_fail(KVL_EINVAL, "kv_ring_init_cuda: %zu x %zu slots of %zu values overflow", batch, slots, width);
    void *rows = NULL;
    CUDA_CHECK(cudaMalloc(&rows, batch * slots * row_bytes));
    *r = kv_ring_cuda{store, width, row_bytes, slots, max_tokens, 0, batch, rows};
    return KVL_OK;
}

void kv_ring_free_cuda(kv_ring_cuda *r)
{
    if (r->rows) cudaFree(r->rows);
    memset(r, 0, sizeof *r);
}

size_t kv_ring_held_cuda(const kv_ring_cuda *r) { return r->len < r->slots ? r->len : r->slots; }

size_t kv_ring_oldest_cuda(const kv_ring_cuda *r) { return r->len - kv_ring_held_cuda(r); }

size_t kv_ring_bytes_used_cuda(const kv_ring_cuda *r) { return r->batch * kv_ring_held_cuda(r) * r->row_bytes; }

namespace {

int grid_of(dim3 *grid, size_t threads, const char *fn)
{
    if (kvl_div_up(threads, RING_THREADS) > 0x7FFFFFFFu)
        return kvl_fail(KVL_EINVAL, "%s: %zu values are more than one launch takes", fn, threads);
    *grid = dim3(static_cast<unsigned>(kvl_div_up(threads, RING_THREADS)));
    return KVL_OK;
}

template <typename S> int put(kv_ring_cuda *r, const float *rows, size_t n, size_t skip)
{
    dim3 grid;
    int rc = grid_of(&grid, r->batch * (n - skip) * r->width, "kv_ring_append_cuda");
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_ring_put_kernel<S>, grid, RING_THREADS, 0, static_cast<S *>(r->rows), rows, r->batch, n,
                          skip, r->width, r->slots, r->len));
    return KVL_OK;
}

/* V3.2 rows: every value checked first, then one strided pack per appended position (B rows each) */
int put_v32(kv_ring_cuda *r, const float *rows, size_t n, size_t skip)
{
    int rc = kvf_check_finite_cuda(rows, r->batch * n * r->width);
    if (rc != KVF_OK)
        return rc < 0 ? rc : kvl_fail(KVL_EINVAL, "kv_ring_append_cuda: a row is not finite (%s)", kvf_strerror(rc));
    for (size_t i = skip; i < n; i++) {
        uint8_t *slot = static_cast<uint8_t *>(r->rows) + (r->len + i) % r->slots * r->row_bytes;
        rc = kvf_row_pack_strided_cuda(KVF_ROW_V32_MAIN, slot, r->slots * r->row_bytes, rows + i * r->width,
                                       n * r->width, r->batch);
        if (rc != KVF_OK) return rc < 0 ? rc : kvl_fail(KVL_EINVAL, "kv_ring_append_cuda: %s", kvf_strerror(rc));
    }
    return KVL_OK;
}

template <typename S> int get(float *out, const kv_ring_cuda *r, size_t first, size_t n)
{
    dim3 grid;
    int rc = grid_of(&grid, r->batch * n * r->width, "kv_ring_read_cuda");
    if (rc != KVL_OK) return rc;
    CUDA_CHECK(KVL_LAUNCH(kvl_ring_get_kernel<S>, grid, RING_THREADS, 0, out, static_cast<const S *>(r->rows), r->batch,
                          n, first, r->width, r->slots));
    return KVL_OK;
}

int get_v32(float *out, const kv_ring_cuda *r, size_t first, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *slot = static_cast<const uint8_t *>(r->rows) + (first + i) % r->slots * r->row_bytes;
        int rc = kvf_row_unpack_strided_cuda(KVF_ROW_V32_MAIN, out + i * r->width, n * r->width, slot,
                                             r->slots * r->row_bytes, r->batch);
        if (rc != KVF_OK) return rc < 0 ? rc : kvl_fail(KVL_EINVAL, "kv_ring_read_cuda: %s", kvf_strerror(rc));
    }
    return KVL_OK;
}

} /* namespace */

int kv_ring_append_cuda(kv_ring_cuda *r, const float *rows, size_t n)
{
    if (n > r->max_tokens - r->len)
        return kvl_fail(KVL_EINVAL, "kv_ring_append_cuda: %zu rows after %zu exceed the %zu positions the cache "
                        "accepts", n, r->len, r->max_tokens);
    if (n == 0) return KVL_OK;
    const size_t skip = n > r->slots ? n - r->slots : 0;
    int rc = KVL_OK;
    switch (r->store) {
    case KV_CUDA_F32: rc = put<float>(r, rows, n, skip); break;
    case KV_CUDA_BF16: rc = put<uint16_t>(r, rows, n, skip); break;
    case KV_CUDA_V32_MAIN: rc = put_v32(r, rows, n, skip); break;
    }
    if (rc == KVL_OK) r->len += n;
    return rc;
}

int kv_ring_read_cuda(float *out, const kv_ring_cuda *r, size_t first, size_t n)
{
    const size_t oldest = kv_ring_oldest_cuda(r);
    if (first < oldest || first > r->len || n > r->len - first)
        return kvl_fail(KVL_EINVAL, "kv_ring_read_cuda: positions [%zu, %zu + %zu) requested, the ring holds "
                        "[%zu, %zu)", first, first, n, oldest, r->len);
    if (n == 0) return KVL_OK;
    switch (r->store) {
    case KV_CUDA_F32: return get<float>(out, r, first, n);
    case KV_CUDA_BF16: return get<uint16_t>(out, r, first, n);
    case KV_CUDA_V32_MAIN: return get_v32(out, r, first, n);
    }
    return KVL_OK;
}
