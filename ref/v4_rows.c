#include "v4_rows.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "rows.h"
#include "linalg.h"
#include "status.h"

const char *v4_rows_store_name(v4_rows_store s)
{
    switch (s) {
    case V4_ROWS_MAIN: return "v4-main";
    case V4_ROWS_INDEX: return "v4-index";
    case V4_ROWS_V41_MAIN: return "v41-main";
    case V4_ROWS_V41_WINDOW: return "v41-window";
    default: return "f32";
    }
}

/* The packed layout of a store, or KVF_N_ROW for float32. */
static kvf_row layout_of(v4_rows_store s)
{
    switch (s) {
    case V4_ROWS_MAIN: return KVF_ROW_V4_MAIN;
    case V4_ROWS_INDEX: return KVF_ROW_V4_INDEX;
    case V4_ROWS_V41_MAIN: return KVF_ROW_V41_MAIN;
    case V4_ROWS_V41_WINDOW: return KVF_ROW_V41_WINDOW;
    default: return KVF_N_ROW;
    }
}

int v4_rows_init(v4_rows *r, v4_rows_store store, size_t width, size_t slots)
{
    memset(r, 0, sizeof *r);
    if (width == 0 || slots == 0)
        return kvl_fail(KVL_EINVAL, "v4_rows_init: width (%zu) and slots (%zu) must be positive", width, slots);
    const kvf_row layout = layout_of(store);
    if (layout != KVF_N_ROW && width != kvf_row_values(layout))
        return kvl_fail(KVL_EINVAL, "v4_rows_init: a %s row holds %zu values, not %zu", v4_rows_store_name(store),
                        kvf_row_values(layout), width);
    if (layout == KVF_N_ROW && width > SIZE_MAX / sizeof(float))
        return kvl_fail(KVL_EINVAL, "v4_rows_init: width %zu overflows", width);
    const size_t row_bytes = layout == KVF_N_ROW ? width * sizeof(float) : kvf_row_bytes(layout);
    if (slots > SIZE_MAX / row_bytes)
        return kvl_fail(KVL_EINVAL, "v4_rows_init: %zu slots of %zu bytes overflow", slots, row_bytes);
    uint8_t *bytes = calloc(slots, row_bytes);
    if (!bytes) return kvl_fail(KVL_ENOMEM, "v4_rows_init: out of memory for %zu rows of %zu bytes", slots, row_bytes);
    *r = (v4_rows){.store = store, .width = width, .row_bytes = row_bytes, .slots = slots, .bytes = bytes};
    return KVL_OK;
}

void v4_rows_free(v4_rows *r)
{
    free(r->bytes);
    memset(r, 0, sizeof *r);
}

void v4_rows_restart(v4_rows *r, size_t pos) { r->first = r->len = pos; }

size_t v4_rows_held(const v4_rows *r)
{
    const size_t run = r->len - r->first;
    return run < r->slots ? run : r->slots;
}

size_t v4_rows_oldest(const v4_rows *r) { return r->len - v4_rows_held(r); }

size_t v4_rows_bytes_used(const v4_rows *r) { return v4_rows_held(r) * r->row_bytes; }

static uint8_t *slot(const v4_rows *r, size_t pos) { return r->bytes + (pos % r->slots) * r->row_bytes; }

static int check_finite(const char *fn, const v4_rows *r, const float *x, size_t n)
{
    if (layout_of(r->store) == KVF_N_ROW) return KVL_OK;
    int err = kvf_check_finite(x, n * r->width);
    if (err != KVF_OK) return kvl_fail(KVL_EINVAL, "%s: %s row: %s", fn, v4_rows_store_name(r->store), kvf_strerror(err));
    return KVL_OK;
}

/* row ← x[width] in the store's bytes (finite input, checked by the caller) */
static void encode(uint8_t *row, const v4_rows *r, const float *x)
{
    const kvf_row layout = layout_of(r->store);
    if (layout == KVF_N_ROW) memcpy(row, x, r->row_bytes);
    else kvf_row_pack(layout, row, x);
}

static void decode(float *x, const v4_rows *r, const uint8_t *row)
{
    const kvf_row layout = layout_of(r->store);
    if (layout == KVF_N_ROW) memcpy(x, row, r->row_bytes);
    else kvf_row_unpack(layout, x, row);
}

int v4_rows_round(float *x, const v4_rows *r, size_t n)
{
    if (layout_of(r->store) == KVF_N_ROW || n == 0) return KVL_OK;
    int rc = check_finite(__func__, r, x, n);
    if (rc != KVL_OK) return rc;
    uint8_t row[sizeof(kvf_row_v4_main) > sizeof(kvf_row_v4_index) ? sizeof(kvf_row_v4_main)
                                                                      : sizeof(kvf_row_v4_index)];
    for (size_t i = 0; i < n; i++) {
        encode(row, r, x + i * r->width);
        decode(x + i * r->width, r, row);
    }
    return KVL_OK;
}

int v4_rows_append(v4_rows *r, const float *x, size_t n)
{
    if (n == 0) return KVL_OK;
    if (!x || !r->bytes) return kvl_fail(KVL_EINVAL, "v4_rows_append: NULL rows");
    int rc = check_finite(__func__, r, x, n);
    if (rc != KVL_OK) return rc;
    const size_t skip = n > r->slots ? n - r->slots : 0;
    for (size_t i = skip; i < n; i++) encode(slot(r, r->len + i), r, x + i * r->width);
    r->len += n;
    return KVL_OK;
}

int v4_rows_read(float *out, const v4_rows *r, size_t first, size_t n)
{
    const size_t oldest = v4_rows_oldest(r);
    if (first < oldest || first > r->len || n > r->len - first)
        return kvl_fail(KVL_EINVAL, "v4_rows_read: positions [%zu, %zu + %zu) requested, the store holds [%zu, %zu)",
                        first, first, n, oldest, r->len);
    for (size_t i = 0; i < n; i++) decode(out + i * r->width, r, slot(r, first + i));
    return KVL_OK;
}

static const float *row_tile(float *scratch, const kvl_row_tiles *view, size_t first, size_t n)
{
    const v4_rows *r = view->src;
    const int in_place = layout_of(r->store) == KVF_N_ROW && first >= v4_rows_oldest(r) && first + n <= r->len &&
                         first % r->slots + n <= r->slots;
    if (in_place) return (const float *)slot(r, first);
    return v4_rows_read(scratch, r, first, n) == KVL_OK ? scratch : NULL;
}

kvl_row_tiles v4_rows_tiles(const v4_rows *r)
{
    return (kvl_row_tiles){.N = r->len, .width = r->width, .tile = row_tile, .src = r};
}

void v4_rows_export(uint8_t *out, const v4_rows *r)
{
    const size_t oldest = v4_rows_oldest(r), held = v4_rows_held(r);
    for (size_t i = 0; i < held; i++) memcpy(out + i * r->row_bytes, slot(r, oldest + i), r->row_bytes);
}

int v4_rows_import(v4_rows *r, const uint8_t *in, size_t first, size_t n)
{
    if (!r->bytes || (n && !in)) return kvl_fail(KVL_EINVAL, "v4_rows_import: NULL rows");
    if (n > r->slots) return kvl_fail(KVL_EINVAL, "v4_rows_import: %zu rows, the store has %zu slots", n, r->slots);
    if (first > SIZE_MAX - n) return kvl_fail(KVL_EINVAL, "v4_rows_import: position %zu overflows", first);
    float *x = malloc(r->width * sizeof *x);
    if (!x) return kvl_fail(KVL_ENOMEM, "v4_rows_import: out of memory");
    for (size_t i = 0; i < n; i++) {
        decode(x, r, in + i * r->row_bytes);
        if (kvf_check_finite(x, r->width) != KVF_OK) {
            free(x);
            return kvl_fail(KVL_EINVAL, "v4_rows_import: %s row %zu (position %zu) decodes to a NaN or infinity",
                            v4_rows_store_name(r->store), i, first + i);
        }
    }
    free(x);
    v4_rows_restart(r, first);
    for (size_t i = 0; i < n; i++) memcpy(slot(r, first + i), in + i * r->row_bytes, r->row_bytes);
    r->len = first + n;
    return KVL_OK;
}
