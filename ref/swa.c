#include "swa.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "element.h"
#include "status.h"

size_t swa_store_bytes(swa_store s)
{
    return s == SWA_STORE_BF16 ? kvf_element_bits(KVF_BF16) / 8 : sizeof(float);
}

const char *swa_store_name(swa_store s) { return s == SWA_STORE_BF16 ? "bf16" : "f32"; }

void swa_store_round(float *x, size_t n, swa_store s)
{
    if (s != SWA_STORE_BF16) return;
    for (size_t i = 0; i < n; i++) x[i] = kvf_bf16_decode(kvf_bf16_encode(x[i]));
}

/* ---- the window rule ------------------------------------------------------------------------------ */

int swa_visible(size_t t, size_t j, size_t W)
{
    return j <= t && (W == 0 || t - j < W);
}

size_t swa_first_visible(size_t t, size_t W)
{
    return W == 0 || t < W ? 0 : t - W + 1;
}

void swa_mask_rows(float *mask, size_t start, size_t S, size_t key_start, size_t n_keys, size_t W)
{
    for (size_t i = 0; i < S; i++)
        for (size_t j = 0; j < n_keys; j++)
            mask[i * n_keys + j] = swa_visible(start + i, key_start + j, W) ? 0.0f : -INFINITY;
}

size_t swa_block_mask(float *mask, size_t first, size_t b, size_t N, const void *span)
{
    const swa_span *w = span;
    const size_t n = w->start + first + b - w->key_start;
    if (n > N) return n;
    swa_mask_rows(mask, w->start + first, b, w->key_start, n, w->window);
    return n;
}

/* ---- the ring buffer ------------------------------------------------------------------------------ */

/* The rows start on a cache line: the attention kernels load them 64 bytes at a time, and a load that
 * straddles two lines costs two (calloc's large blocks start 16 bytes into a page; MLA's absorbed step
 * over float32 rows at 32K ran 4% slower from there). calloc, not aligned_alloc and a memset: a ring's
 * pages are zeroed as they are first written, so a long ring mostly empty costs no memory. */
#define RING_ALIGN 64

int swa_ring_init(swa_ring *r, size_t W, size_t max_tokens, size_t width, swa_store store)
{
    memset(r, 0, sizeof *r);
    if (width == 0 || max_tokens == 0)
        return kvl_fail(KVL_EINVAL, "swa_ring_init: width (%zu) and max_tokens (%zu) must be positive", width,
                        max_tokens);
    size_t slots = W == 0 || W > max_tokens ? max_tokens : W;
    size_t eb = swa_store_bytes(store);
    if (slots > (SIZE_MAX - RING_ALIGN) / width / eb)
        return kvl_fail(KVL_EINVAL, "swa_ring_init: %zu slots of %zu elements overflow", slots, width);
    char *block = calloc(slots * width * eb + RING_ALIGN, 1);
    if (!block)
        return kvl_fail(KVL_ENOMEM, "swa_ring_init: out of memory for %zu slots of %zu elements", slots, width);
    void *rows = block + (RING_ALIGN - (uintptr_t)block % RING_ALIGN) % RING_ALIGN;
    *r = (swa_ring){.store = store, .width = width, .slots = slots, .max_tokens = max_tokens, .rows = rows,
                    .block = block};
    return KVL_OK;
}

void swa_ring_free(swa_ring *r)
{
    free(r->block);
    memset(r, 0, sizeof *r);
}

void swa_ring_reset(swa_ring *r) { r->len = 0; }

size_t swa_ring_slot(const swa_ring *r, size_t p) { return p % r->slots; }

size_t swa_ring_held(const swa_ring *r) { return r->len < r->slots ? r->len : r->slots; }

size_t swa_ring_oldest(const swa_ring *r) { return r->len - swa_ring_held(r); }

/* Address of slot s. */
static void *slot_row(const swa_ring *r, size_t s)
{
    return (unsigned char *)r->rows + s * r->width * swa_store_bytes(r->store);
}

static void encode_row(void *dst, const float *src, size_t width, swa_store store)
{
    if (store == SWA_STORE_BF16) kvf_bf16_encode_n(dst, src, width);
    else memcpy(dst, src, width * sizeof *src);
}

static void decode_row(float *dst, const void *src, size_t width, swa_store store)
{
    if (store == SWA_STORE_BF16) kvf_bf16_decode_n(dst, src, width);
    else memcpy(dst, src, width * sizeof *dst);
}

int swa_ring_append(swa_ring *r, const float *rows, size_t n)
{
    if (n > r->max_tokens - r->len)
        return kvl_fail(KVL_EINVAL, "swa_ring_append: %zu rows after %zu exceed the %zu positions the cache accepts", n,
                        r->len, r->max_tokens);
    size_t skip = n > r->slots ? n - r->slots : 0;
    for (size_t i = skip; i < n; i++)
        encode_row(slot_row(r, swa_ring_slot(r, r->len + i)), rows + i * r->width, r->width, r->store);
    r->len += n;
    return KVL_OK;
}

int swa_ring_read(float *out, const swa_ring *r, size_t first, size_t n)
{
    size_t oldest = swa_ring_oldest(r);
    if (first < oldest || first > r->len || n > r->len - first)
        return kvl_fail(KVL_EINVAL, "swa_ring_read: positions [%zu, %zu + %zu) requested, the ring holds [%zu, %zu)",
                        first, first, n, oldest, r->len);
    for (size_t i = 0; i < n; i++)
        decode_row(out + i * r->width, slot_row(r, swa_ring_slot(r, first + i)), r->width, r->store);
    return KVL_OK;
}

kvl_row_tiles swa_ring_view(const swa_ring *r)
{
    const size_t held = swa_ring_held(r);
    if (r->store == SWA_STORE_BF16) return kvl_row_tiles_bf16(r->rows, held, r->width);
    return kvl_row_tiles_f32(r->rows, held, r->width);
}

int swa_ring_attend(float *o, const float *q, size_t Hq, const swa_ring *r, size_t groups, size_t k_off, size_t Dk,
                    size_t v_off, size_t Dv, float scale)
{
    const kvl_row_tiles view = swa_ring_view(r);
    const kvl_attend_rows rows = {.N = view.N, .stride = r->width, .k_off = k_off, .Dk = Dk, .v_off = v_off,
                                  .Dv = Dv, .groups = groups};
    return kvl_attend(o, q, Hq, &view, &rows, scale, NULL, NULL);
}

size_t swa_ring_bytes_used(const swa_ring *r)
{
    return swa_ring_held(r) * r->width * swa_store_bytes(r->store);
}

size_t swa_ring_bytes_allocated(const swa_ring *r)
{
    return r->slots * r->width * swa_store_bytes(r->store);
}
