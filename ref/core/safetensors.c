#include "safetensors.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "element.h"
#include "file_io.h"
#include "json_text.h"
#include "status.h"

/* Largest integer a JSON number (a double in cJSON) holds exactly. */
#define MAX_EXACT 9007199254740992.0
#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
/* An index maps each tensor name to a shard: DeepSeek-V3's is 9 MB; the limit is the header's. */
#define MAX_INDEX_BYTES ((size_t)KVL_ST_MAX_HEADER)

static const struct { const char *name; unsigned bits; } DTYPES[KVL_ST_N_DTYPE] = {
    [KVL_ST_F32] = {"F32", 32},         [KVL_ST_F64] = {"F64", 64},        [KVL_ST_F16] = {"F16", 16},
    [KVL_ST_BF16] = {"BF16", 16},       [KVL_ST_F8_E4M3] = {"F8_E4M3", 8}, [KVL_ST_F8_E8M0] = {"F8_E8M0", 8},
    [KVL_ST_F4] = {"F4", 4},            [KVL_ST_I8] = {"I8", 8},           [KVL_ST_U8] = {"U8", 8},
    [KVL_ST_I32] = {"I32", 32},         [KVL_ST_I64] = {"I64", 64},
};

const char *kvl_st_dtype_name(kvl_st_dtype t) { return (unsigned)t < KVL_ST_N_DTYPE ? DTYPES[t].name : NULL; }

unsigned kvl_st_dtype_bits(kvl_st_dtype t) { return (unsigned)t < KVL_ST_N_DTYPE ? DTYPES[t].bits : 0; }

int kvl_st_dtype_from_name(const char *name, kvl_st_dtype *out)
{
    for (int t = 0; t < KVL_ST_N_DTYPE; t++)
        if (name && strcmp(name, DTYPES[t].name) == 0) {
            *out = (kvl_st_dtype)t;
            return 0;
        }
    return -1;
}

/* n_bytes of a tensor of n elements: KVL_EINVAL on overflow or a fraction of a byte. */
static int tensor_bytes(size_t *n_bytes, size_t *n_elements, kvl_st_dtype t, size_t n_dims, const size_t *shape)
{
    size_t n = 1;
    for (size_t i = 0; i < n_dims; i++) {
        if (shape[i] && n > SIZE_MAX / 64 / shape[i]) return KVL_EINVAL;
        n *= shape[i];
    }
    size_t bits = n * kvl_st_dtype_bits(t);
    if (bits % 8) return KVL_EINVAL;
    *n_elements = n;
    *n_bytes = bits / 8;
    return KVL_OK;
}

/* ---- reading ----------------------------------------------------------------------------------- */

static void free_tensors(kvl_st_file *f)
{
    for (size_t i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    for (size_t i = 0; i < 2 * f->n_meta; i++) free(f->meta[i]);
    free(f->meta);
    f->tensors = NULL;
    f->meta = NULL;
    f->n_tensors = f->n_meta = 0;
}

void kvl_st_close(kvl_st_file *f)
{
    free_tensors(f);
    if (f->map) munmap(f->map, f->map_bytes);
    free(f->origin);
    memset(f, 0, sizeof *f);
}

/* A key in a message: printable, no quote, so that the message stays one line. */
static int name_is_printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == '"' || *s == 0x7f) return 0;
    return 1;
}

/* *v = the JSON number it, when it is an integer in [0, 2^53]. */
static int exact_size(size_t *v, const cJSON *it)
{
    if (!cJSON_IsNumber(it)) return -1;
    double d = it->valuedouble;
    if (!(d >= 0 && d <= MAX_EXACT) || d != floor(d)) return -1;
    *v = (size_t)d;
    return 0;
}

static int read_metadata(kvl_st_file *f, const cJSON *obj)
{
    const char *o = f->origin;
    if (!cJSON_IsObject(obj)) return kvl_fail(KVL_EINVAL, "%s: __metadata__ must be an object of strings", o);
    const char *dup;
    KVL_TRY(kvl_json_repeated_key(&dup, obj, o));
    if (dup) return kvl_fail(KVL_EINVAL, "%s: __metadata__ holds the key \"%.64s\" twice", o, name_is_printable(dup) ? dup : "?");
    size_t n = (size_t)cJSON_GetArraySize(obj);
    f->meta = calloc(2 * n + 1, sizeof *f->meta);
    if (!f->meta) return kvl_fail(KVL_ENOMEM, "%s: out of memory for __metadata__", o);
    for (const cJSON *it = obj->child; it; it = it->next) {
        if (!cJSON_IsString(it))
            return kvl_fail(KVL_EINVAL, "%s: __metadata__.%.64s must be a string", o,
                            name_is_printable(it->string) ? it->string : "?");
        char *k = strdup(it->string), *v = strdup(it->valuestring);
        f->meta[2 * f->n_meta] = k;
        f->meta[2 * f->n_meta + 1] = v;
        f->n_meta++;
        if (!k || !v) return kvl_fail(KVL_ENOMEM, "%s: out of memory for __metadata__", o);
    }
    return KVL_OK;
}

/* t ← the header entry it (name it->string); data_len: the data buffer's length. */
static int read_entry(kvl_st_tensor *t, const cJSON *it, const char *o, size_t data_len)
{
    const char *name = it->string;
    if (!name_is_printable(name))
        return kvl_fail(KVL_EINVAL, "%s: a tensor name holds a control byte or a quote", o);
    if (!cJSON_IsObject(it)) return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": its entry must be an object", o, name);
    const char *dup;
    KVL_TRY(kvl_json_repeated_key(&dup, it, o));
    if (dup) return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": a field appears twice", o, name);
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(it, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(it, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(it, "data_offsets");
    if (!cJSON_IsString(dtype)) return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": dtype missing or not a string", o, name);
    if (kvl_st_dtype_from_name(dtype->valuestring, &t->dtype) != 0)
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": dtype \"%.16s\" is not one this reader knows", o, name,
                        name_is_printable(dtype->valuestring) ? dtype->valuestring : "?");
    if (!cJSON_IsArray(shape)) return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": shape missing or not an array", o, name);
    int n_dims = cJSON_GetArraySize(shape);
    if (n_dims > KVL_ST_MAX_DIMS)
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": shape has %d dims, at most %d are read", o, name, n_dims,
                        KVL_ST_MAX_DIMS);
    t->n_dims = (size_t)n_dims;
    size_t i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++)
        if (exact_size(&t->shape[i], d) != 0)
            return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": shape[%zu] is not a non-negative integer", o, name, i);
    if (tensor_bytes(&t->n_bytes, &t->n_elements, t->dtype, t->n_dims, t->shape) != KVL_OK)
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": shape overflows or is not a whole number of bytes of %s",
                        o, name, kvl_st_dtype_name(t->dtype));
    size_t begin, end;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || exact_size(&begin, offs->child) != 0 ||
        exact_size(&end, offs->child->next) != 0)
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": data_offsets must be two non-negative integers", o, name);
    if (begin > end || end > data_len)
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": data_offsets [%zu, %zu] lie outside the %zu data bytes", o,
                        name, begin, end, data_len);
    if (end - begin != t->n_bytes)
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": data_offsets span %zu bytes, its dtype and shape need %zu",
                        o, name, end - begin, t->n_bytes);
    t->data = (const uint8_t *)(uintptr_t)begin;   /* an offset until every entry is read */
    t->name = strdup(name);
    return t->name ? KVL_OK : kvl_fail(KVL_ENOMEM, "%s: out of memory", o);
}

static int by_offset(const void *a, const void *b)
{
    const kvl_st_tensor *x = a, *y = b;
    uintptr_t bx = (uintptr_t)x->data, by = (uintptr_t)y->data;
    if (bx != by) return bx < by ? -1 : 1;
    return (x->n_bytes > y->n_bytes) - (x->n_bytes < y->n_bytes);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const kvl_st_tensor *)a)->name, ((const kvl_st_tensor *)b)->name);
}

/* The tensors, sorted by offset, tile data[data_len] exactly; then point them into it. */
static int place_tensors(kvl_st_file *f, const uint8_t *data, size_t data_len)
{
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, by_offset);
    size_t at = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        kvl_st_tensor *t = &f->tensors[i];
        size_t begin = (size_t)(uintptr_t)t->data;
        if (begin != at)
            return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": data_offsets begin at %zu, where %s at %zu", f->origin,
                            t->name, begin, begin < at ? "the previous tensor ends" : "a gap opens; the data runs",
                            at);
        at = begin + t->n_bytes;
        t->data = data + begin;
    }
    if (at != data_len)
        return kvl_fail(KVL_EINVAL, "%s: the tensors cover %zu of the %zu data bytes", f->origin, at, data_len);
    qsort(f->tensors, f->n_tensors, sizeof *f->tensors, by_name);
    return KVL_OK;
}

static int read_header(kvl_st_file *f, const cJSON *root, const uint8_t *data, size_t data_len)
{
    const char *o = f->origin;
    if (!cJSON_IsObject(root)) return kvl_fail(KVL_EPARSE, "%s: the header must be one JSON object", o);
    const char *dup;
    KVL_TRY(kvl_json_repeated_key(&dup, root, o));
    if (dup) return kvl_fail(KVL_EINVAL, "%s: the header names \"%.64s\" twice", o, name_is_printable(dup) ? dup : "?");
    size_t n = (size_t)cJSON_GetArraySize(root);
    f->tensors = calloc(n + 1, sizeof *f->tensors);
    if (!f->tensors) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu tensors", o, n);
    for (const cJSON *it = root->child; it; it = it->next) {
        if (strcmp(it->string, "__metadata__") == 0) {
            KVL_TRY(read_metadata(f, it));
            continue;
        }
        int rc = read_entry(&f->tensors[f->n_tensors], it, o, data_len);
        if (f->tensors[f->n_tensors].name) f->n_tensors++;
        KVL_TRY(rc);
    }
    return place_tensors(f, data, data_len);
}

/* The header text[len] is strict JSON (ref/core/json_text.h); the message names its place in the file. */
static int json_header_check(const char *text, size_t len, const char *origin)
{
    char where[4200];
    snprintf(where, sizeof where, "%s: header JSON", origin);
    return kvl_json_text_check(text, len, where);
}

int kvl_st_parse(kvl_st_file *f, const uint8_t *bytes, size_t n, const char *origin)
{
    memset(f, 0, sizeof *f);
    f->origin = strdup(origin ? origin : "safetensors");
    if (!f->origin) return kvl_fail(KVL_ENOMEM, "out of memory");
    const char *o = f->origin;
    int rc;
    if (n < 8) {
        rc = kvl_fail(KVL_EPARSE, "%s: %zu bytes, too short for the 8-byte header length", o, n);
        goto fail;
    }
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | bytes[i];
    if (hlen > n - 8) {
        rc = kvl_fail(KVL_EPARSE, "%s: header length %llu runs past the end of the file (%zu bytes)", o,
                      (unsigned long long)hlen, n);
        goto fail;
    }
    if (hlen > KVL_ST_MAX_HEADER) {
        rc = kvl_fail(KVL_EINVAL, "%s: header length %llu is over the %llu-byte limit", o, (unsigned long long)hlen,
                      (unsigned long long)KVL_ST_MAX_HEADER);
        goto fail;
    }
    const char *text = (const char *)bytes + 8;
    if (hlen == 0 || text[0] != '{') {
        rc = kvl_fail(KVL_EPARSE, "%s: the header does not start with '{'", o);
        goto fail;
    }
    rc = json_header_check(text, (size_t)hlen, o);
    if (rc != KVL_OK) goto fail;
    cJSON *root = cJSON_ParseWithLength(text, (size_t)hlen);
    if (!root) {
        rc = kvl_fail(KVL_ENOMEM, "%s: out of memory for the %llu-byte header", o, (unsigned long long)hlen);
        goto fail;
    }
    rc = read_header(f, root, bytes + 8 + hlen, n - 8 - (size_t)hlen);
    cJSON_Delete(root);
    if (rc == KVL_OK) return KVL_OK;
fail:
    kvl_st_close(f);
    return rc;
}

int kvl_st_open(kvl_st_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    int fd;
    size_t n;
    KVL_TRY(kvl_file_open_regular(&fd, &n, path));
    void *map = NULL;
    if (n > 0) {
        map = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            return kvl_fail(KVL_EIO, "%s: cannot map %zu bytes: %s", path, n, strerror(errno));
        }
    }
    close(fd);
    int rc = kvl_st_parse(f, map, n, path);
    if (rc != KVL_OK) {
        if (map) munmap(map, n);
        return rc;
    }
    f->map = map;
    f->map_bytes = n;
    return KVL_OK;
}

const kvl_st_tensor *kvl_st_find(const kvl_st_file *f, const char *name)
{
    if (!f->n_tensors || !name) return NULL;
    kvl_st_tensor key = {.name = (char *)(uintptr_t)name};
    return bsearch(&key, f->tensors, f->n_tensors, sizeof key, by_name);
}

const char *kvl_st_metadata(const kvl_st_file *f, const char *key)
{
    for (size_t i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[2 * i], key) == 0) return f->meta[2 * i + 1];
    return NULL;
}

/* IEEE binary16 → float32, exact (subnormals, inf, NaN kept). */
static float f16_decode(uint16_t h)
{
    unsigned e = (h >> 10) & 0x1f, m = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexpf((float)(m | 0x400), (int)e - 25);
    return (h & 0x8000) ? -v : v;
}

int kvl_st_read_f32(float *out, const kvl_st_tensor *t, const char *origin)
{
    const uint8_t *b = t->data;
    size_t n = t->n_elements;
    switch (t->dtype) {
    case KVL_ST_F32: memcpy(out, b, 4 * n); return KVL_OK;
    case KVL_ST_F64: kvl_f64_to_f32(out, b, n); return KVL_OK;
    case KVL_ST_F16: for (size_t i = 0; i < n; i++) out[i] = f16_decode((uint16_t)(b[2 * i] | b[2 * i + 1] << 8)); return KVL_OK;
    case KVL_ST_BF16: for (size_t i = 0; i < n; i++) out[i] = kvf_bf16_decode((uint16_t)(b[2 * i] | b[2 * i + 1] << 8)); return KVL_OK;
    case KVL_ST_F8_E4M3: kvf_e4m3_decode_n(out, b, n); return KVL_OK;
    case KVL_ST_F8_E8M0: for (size_t i = 0; i < n; i++) out[i] = kvf_e8m0_decode(b[i]); return KVL_OK;
    case KVL_ST_F4: kvf_e2m1_decode_n(out, b, n); return KVL_OK;
    default:
        return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": dtype %s is not a float format", origin, t->name,
                        kvl_st_dtype_name(t->dtype));
    }
}

static void format_shape(char *buf, size_t cap, size_t n_dims, const size_t *shape)
{
    size_t o = (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < n_dims && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%zu", i ? ", " : "", shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

int kvl_st_expect_shape(const kvl_st_tensor *t, const char *origin, size_t n_dims, const size_t *shape)
{
    int same = t->n_dims == n_dims;
    for (size_t i = 0; same && i < n_dims; i++) same = t->shape[i] == shape[i];
    if (same) return KVL_OK;
    char got[160], want[160];
    format_shape(got, sizeof got, t->n_dims, t->shape);
    format_shape(want, sizeof want, n_dims, shape);
    return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": shape %s, the config needs %s", origin, t->name, got, want);
}

/* ---- writing ----------------------------------------------------------------------------------- */

static int by_entry_name(const void *a, const void *b)
{
    return strcmp((*(const kvl_st_entry *const *)a)->name, (*(const kvl_st_entry *const *)b)->name);
}

/* No two of e[n] share a name: sorted, so n log n. */
static int distinct_names(const kvl_st_entry *e, size_t n, const char *path)
{
    if (n < 2) return KVL_OK;
    const kvl_st_entry **sorted = malloc(n * sizeof *sorted);
    if (!sorted) return kvl_fail(KVL_ENOMEM, "%s: out of memory checking %zu names", path, n);
    for (size_t i = 0; i < n; i++) sorted[i] = &e[i];
    qsort(sorted, n, sizeof *sorted, by_entry_name);
    const char *dup = NULL;
    for (size_t i = 1; i < n && !dup; i++)
        if (strcmp(sorted[i - 1]->name, sorted[i]->name) == 0) dup = sorted[i]->name;
    free(sorted);
    return dup ? kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" given twice", path, dup) : KVL_OK;
}

static int check_entries(const kvl_st_entry *e, size_t n, const char *path)
{
    for (size_t i = 0; i < n; i++) {
        size_t bytes, count;
        if (!e[i].name || !name_is_printable(e[i].name) || strcmp(e[i].name, "__metadata__") == 0)
            return kvl_fail(KVL_EINVAL, "%s: entry %zu: name missing, reserved or not printable", path, i);
        if (!kvl_st_dtype_name(e[i].dtype) || e[i].n_dims > KVL_ST_MAX_DIMS ||
            tensor_bytes(&bytes, &count, e[i].dtype, e[i].n_dims, e[i].shape) != KVL_OK || (bytes && !e[i].data))
            return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\": bad dtype, shape or data", path, e[i].name);
    }
    return distinct_names(e, n, path);
}

/* The header text, unpadded; NULL when out of memory. */
static char *header_json(const kvl_st_entry *e, size_t n, const char *const *meta, size_t n_meta)
{
    cJSON *root = cJSON_CreateObject(), *m = n_meta ? cJSON_AddObjectToObject(root, "__metadata__") : NULL;
    for (size_t i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1]);
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        size_t bytes, count;
        tensor_bytes(&bytes, &count, e[i].dtype, e[i].n_dims, e[i].shape);
        cJSON *t = cJSON_AddObjectToObject(root, e[i].name);
        cJSON_AddStringToObject(t, "dtype", kvl_st_dtype_name(e[i].dtype));
        cJSON *shape = cJSON_AddArrayToObject(t, "shape"), *offs = cJSON_AddArrayToObject(t, "data_offsets");
        for (size_t d = 0; d < e[i].n_dims; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)e[i].shape[d]));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)at));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(at + bytes)));
        at += bytes;
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

int kvl_st_write(const char *path, const kvl_st_entry *entries, size_t n, const char *const *meta, size_t n_meta)
{
    KVL_TRY(check_entries(entries, n, path));
    for (size_t i = 0; i < 2 * n_meta; i++)
        if (!meta[i]) return kvl_fail(KVL_EINVAL, "%s: metadata item %zu is NULL", path, i);
    char *text = header_json(entries, n, meta, n_meta);
    if (!text) return kvl_fail(KVL_ENOMEM, "%s: out of memory for the header", path);
    size_t len = strlen(text), padded = (len + 7) / 8 * 8;
    kvl_file_out out;
    int rc = kvl_file_out_open(&out, path);
    if (rc != KVL_OK) {
        free(text);
        return rc;
    }
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)((uint64_t)padded >> (8 * i));
    kvl_file_out_write(&out, le, 8);
    kvl_file_out_write(&out, text, len);
    kvl_file_out_write(&out, "        ", padded - len);
    free(text);
    for (size_t i = 0; i < n; i++) {
        size_t bytes, count;
        tensor_bytes(&bytes, &count, entries[i].dtype, entries[i].n_dims, entries[i].shape);
        kvl_file_out_write(&out, entries[i].data, bytes);
    }
    return kvl_file_out_commit(&out);
}

/* ---- checkpoints -------------------------------------------------------------------------------- */

void kvl_st_checkpoint_close(kvl_st_checkpoint *c)
{
    for (size_t i = 0; i < c->n_files; i++) kvl_st_close(&c->files[i]);
    free(c->files);
    memset(c, 0, sizeof *c);
}

static int ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

static int open_single(kvl_st_checkpoint *c, const char *path)
{
    c->files = calloc(1, sizeof *c->files);
    if (!c->files) return kvl_fail(KVL_ENOMEM, "%s: out of memory", path);
    KVL_TRY(kvl_st_open(&c->files[0], path));
    c->n_files = 1;
    return KVL_OK;
}

/* Open the shard named by it (a weight_map value) unless open already; dir ends with '/'. */
static int open_shard(kvl_st_checkpoint *c, const cJSON *it, const char *index, const char *dir)
{
    if (!cJSON_IsString(it) || !it->valuestring[0] || strchr(it->valuestring, '/') || !name_is_printable(it->valuestring))
        return kvl_fail(KVL_EINVAL, "%s: weight_map.%.64s must name a file in the index's directory", index,
                        name_is_printable(it->string) ? it->string : "?");
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s%s", dir, it->valuestring) >= sizeof path)
        return kvl_fail(KVL_EINVAL, "%s: shard path too long", index);
    for (size_t i = 0; i < c->n_files; i++)
        if (strcmp(c->files[i].origin, path) == 0) return KVL_OK;
    KVL_TRY(kvl_st_open(&c->files[c->n_files], path));
    c->n_files++;
    return KVL_OK;
}

static int open_index_map(kvl_st_checkpoint *c, const cJSON *root, const char *index)
{
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(map)) return kvl_fail(KVL_EINVAL, "%s: weight_map missing or not an object", index);
    const char *dup;
    KVL_TRY(kvl_json_repeated_key(&dup, map, index));
    if (dup)
        return kvl_fail(KVL_EINVAL, "%s: weight_map names \"%.64s\" twice", index, name_is_printable(dup) ? dup : "?");
    char dir[4096];
    const char *slash = strrchr(index, '/');
    size_t dlen = slash ? (size_t)(slash - index) + 1 : 0;
    if (dlen >= sizeof dir) return kvl_fail(KVL_EINVAL, "%s: path too long", index);
    memcpy(dir, index, dlen);
    dir[dlen] = '\0';
    size_t n = (size_t)cJSON_GetArraySize(map);
    c->files = calloc(n + 1, sizeof *c->files);
    if (!c->files) return kvl_fail(KVL_ENOMEM, "%s: out of memory", index);
    for (const cJSON *it = map->child; it; it = it->next) KVL_TRY(open_shard(c, it, index, dir));
    for (const cJSON *it = map->child; it; it = it->next) {
        const kvl_st_file *in = NULL;
        char path[4096];
        snprintf(path, sizeof path, "%s%s", dir, it->valuestring);
        if (!kvl_st_checkpoint_find(c, it->string, &in) || strcmp(in->origin, path) != 0)
            return kvl_fail(KVL_EINVAL, "%s: weight_map.%.64s: tensor not in the shard %.128s", index,
                            name_is_printable(it->string) ? it->string : "?", it->valuestring);
    }
    return KVL_OK;
}

static int open_index(kvl_st_checkpoint *c, const char *index)
{
    char *text;
    size_t n;
    KVL_TRY(kvl_file_read_all(&text, &n, index, MAX_INDEX_BYTES));
    int rc = kvl_json_text_check(text, n, index);
    cJSON *root = rc == KVL_OK ? cJSON_ParseWithLength(text, n) : NULL;
    free(text);
    if (rc != KVL_OK) return rc;
    if (!root) return kvl_fail(KVL_ENOMEM, "%s: out of memory for its %zu bytes", index, n);
    const char *dup = NULL;
    rc = cJSON_IsObject(root) ? kvl_json_repeated_key(&dup, root, index)
                              : kvl_fail(KVL_EPARSE, "%s: not a JSON object", index);
    if (rc == KVL_OK && dup)
        rc = kvl_fail(KVL_EINVAL, "%s: the index names \"%.64s\" twice", index, name_is_printable(dup) ? dup : "?");
    if (rc == KVL_OK) rc = open_index_map(c, root, index);
    cJSON_Delete(root);
    return rc;
}

int kvl_st_checkpoint_open(kvl_st_checkpoint *c, const char *path)
{
    memset(c, 0, sizeof *c);
    struct stat st;
    if (stat(path, &st) != 0) return kvl_fail(KVL_EIO, "%s: %s", path, strerror(errno));
    char inner[4096];
    int rc;
    if (S_ISDIR(st.st_mode)) {
        /* transformers' from_pretrained order: model.safetensors when it is a regular file, else the index */
        char single[4096];
        snprintf(single, sizeof single, "%s/%s", path, SINGLE_NAME);
        snprintf(inner, sizeof inner, "%s/%s", path, INDEX_NAME);
        int regular_single = stat(single, &st) == 0 && S_ISREG(st.st_mode);
        rc = !regular_single && stat(inner, &st) == 0 ? open_index(c, inner) : open_single(c, single);
    } else
        rc = ends_with(path, ".json") ? open_index(c, path) : open_single(c, path);
    if (rc != KVL_OK) kvl_st_checkpoint_close(c);
    return rc;
}

const kvl_st_tensor *kvl_st_checkpoint_find(const kvl_st_checkpoint *c, const char *name, const kvl_st_file **file)
{
    for (size_t i = 0; i < c->n_files; i++) {
        const kvl_st_tensor *t = kvl_st_find(&c->files[i], name);
        if (t) {
            if (file) *file = &c->files[i];
            return t;
        }
    }
    return NULL;
}
