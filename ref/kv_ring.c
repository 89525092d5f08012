#include "kv_ring.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "element.h"
#include "status.h"

size_t kv_store_bytes(kv_store s)
{
    return s == KV_STORE_BF16 ? kvf_element_bits(KVF_BF16) / 8 : sizeof(float);
}

const char *kv_store_name(kv_store s) { return s == KV_STORE_BF16 ? "bf16" : "f32"; }

void kv_store_round(float *x, size_t n, kv_store s)
{
    if (s != KV_STORE_BF16) return;
    for (size_t i = 0; i < n; i++) x[i] = kvf_bf16_decode(kvf_bf16_encode(x[i]));
}

/* The rows start on a cache line: the attention kernels load them 64 bytes at a time, and a load that
 * straddles two lines costs two (calloc's large blocks start 16 bytes into a page; MLA's absorbed step
 * over float32 rows at 32K ran 4% slower from there). calloc, not aligned_alloc and a memset: a ring's
 * pages are zeroed as they are first written, so a long ring mostly empty costs no memory. */
#define RING_ALIGN 64

int kv_ring_init(kv_ring *r, size_t W, size_t max_tokens, size_t width, kv_store store)
{
    memset(r, 0, sizeof *r);
    if (width == 0 || max_tokens == 0)
        return kvl_fail(KVL_EINVAL, "kv_ring_init: width (%zu) and max_tokens (%zu) must be positive", width,
                        max_tokens);
    size_t slots = W == 0 || W > max_tokens ? max_tokens : W;
    size_t eb = kv_store_bytes(store);
    if (slots > (SIZE_MAX - RING_ALIGN) / width / eb)
        return kvl_fail(KVL_EINVAL, "kv_ring_init: %zu slots of %zu elements overflow", slots, width);
    char *block = calloc(slots * width * eb + RING_ALIGN, 1);
    if (!block)
        return kvl_fail(KVL_ENOMEM, "kv_ring_init: out of memory for %zu slots of %zu elements", slots, width);
    void *rows = block + (RING_ALIGN - (uintptr_t)block % RING_ALIGN) % RING_ALIGN;
    *r = (kv_ring){.store = store, .width = width, .slots = slots, .max_tokens = max_tokens, .rows = rows,
                    .block = block};
    return KVL_OK;
}

void kv_ring_free(kv_ring *r)
{
    free(r->block);
    memset(r, 0, sizeof *r);
}

void kv_ring_reset(kv_ring *r) { r->len = 0; }

size_t kv_ring_slot(const kv_ring *r, size_t p) { return p % r->slots; }

size_t kv_ring_held(const kv_ring *r) { return r->len < r->slots ? r->len : r->slots; }

size_t kv_ring_oldest(const kv_ring *r) { return r->len - kv_ring_held(r); }

/* Address of slot s. */
static void *slot_row(const kv_ring *r, size_t s)
{
    return (unsigned char *)r->rows + s * r->width * kv_store_bytes(r->store);
}

static void encode_row(void *dst, const float *src, size_t width, kv_store store)
{
    if (store == KV_STORE_BF16) kvf_bf16_encode_n(dst, src, width);
    else memcpy(dst, src, width * sizeof *src);
}

static void decode_row(float *dst, const void *src, size_t width, kv_store store)
{
    if (store == KV_STORE_BF16) kvf_bf16_decode_n(dst, src, width);
    else memcpy(dst, src, width * sizeof *dst);
}

int kv_ring_append(kv_ring *r, const float *rows, size_t n)
{
    if (n > r->max_tokens - r->len)
        return kvl_fail(KVL_EINVAL, "kv_ring_append: %zu rows after %zu exceed the %zu positions the cache accepts", n,
                        r->len, r->max_tokens);
    size_t skip = n > r->slots ? n - r->slots : 0;
    for (size_t i = skip; i < n; i++)
        encode_row(slot_row(r, kv_ring_slot(r, r->len + i)), rows + i * r->width, r->width, r->store);
    r->len += n;
    return KVL_OK;
}

int kv_ring_read(float *out, const kv_ring *r, size_t first, size_t n)
{
    size_t oldest = kv_ring_oldest(r);
    if (first < oldest || first > r->len || n > r->len - first)
        return kvl_fail(KVL_EINVAL, "kv_ring_read: positions [%zu, %zu + %zu) requested, the ring holds [%zu, %zu)",
                        first, first, n, oldest, r->len);
    for (size_t i = 0; i < n; i++)
        decode_row(out + i * r->width, slot_row(r, kv_ring_slot(r, first + i)), r->width, r->store);
    return KVL_OK;
}

kvl_row_tiles kv_ring_view(const kv_ring *r)
{
    const size_t held = kv_ring_held(r);
    if (r->store == KV_STORE_BF16) return kvl_row_tiles_bf16(r->rows, held, r->width);
    return kvl_row_tiles_f32(r->rows, held, r->width);
}

int kv_ring_attend(float *o, const float *q, size_t Hq, const kv_ring *r, size_t groups, size_t k_off, size_t Dk,
                    size_t v_off, size_t Dv, float scale)
{
    const kvl_row_tiles view = kv_ring_view(r);
    const kvl_attend_rows rows = {.N = view.N, .stride = r->width, .k_off = k_off, .Dk = Dk, .v_off = v_off,
                                  .Dv = Dv, .groups = groups};
    return kvl_attend(o, q, Hq, &view, &rows, scale, NULL, NULL);
}

size_t kv_ring_bytes_used(const kv_ring *r)
{
    return kv_ring_held(r) * r->width * kv_store_bytes(r->store);
}

size_t kv_ring_bytes_allocated(const kv_ring *r)
{
    return r->slots * r->width * kv_store_bytes(r->store);
}
