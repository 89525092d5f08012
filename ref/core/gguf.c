#include "gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file_io.h"
#include "status.h"

/* Counts beyond these are no model's: a file claiming more is malformed. */
#define MAX_KV 65536
#define MIN_KV_BYTES 14       /* key length 8 + one key byte + type 4 + the smallest value 1 */
#define MIN_TENSOR_BYTES 33   /* name length 8 + one byte + n_dims 4 + one dim 8 + type 4 + offset 8 */
#define MAX_KEY 65535         /* the GGUF specification's bound on a key */

static const char *const type_names[KVL_GGUF_N_TYPES] = {
    "uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array",
    "uint64", "int64", "float64"};
/* Bytes of one value of each type; 0: variable (string, array). */
static const size_t type_bytes[KVL_GGUF_N_TYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

const char *kvl_gguf_type_name(kvl_gguf_type t) { return (unsigned)t < KVL_GGUF_N_TYPES ? type_names[t] : "?"; }

/* A string from the file, for messages: at most 48 bytes, a quote or a byte outside printable
 * ASCII as \xNN, so that the message stays one line. */
static const char *shown(kvl_gguf_str s)
{
    static _Thread_local char buf[4 * 48 + 8];
    size_t o = 0, i = 0;
    for (; i < s.len && i < 48; i++) {
        unsigned char c = (unsigned char)s.bytes[i];
        if (c < 0x20 || c >= 0x7f || c == '"') o += (size_t)snprintf(buf + o, sizeof buf - o, "\\x%02x", c);
        else buf[o++] = (char)c;
    }
    snprintf(buf + o, sizeof buf - o, "%s", i < s.len ? "..." : "");
    return buf;
}

/* ---- the reader: a cursor over the bytes read, which may stop before the file does ---------------- */

typedef struct {
    const uint8_t *start, *p, *end;
    uint64_t file_size;
    const char *origin;
} cursor;

static int need(const cursor *c, uint64_t n, const char *what)
{
    if ((uint64_t)(c->end - c->p) >= n) return KVL_OK;
    const uint64_t at = (uint64_t)(c->p - c->start);
    if ((uint64_t)(c->end - c->start) < c->file_size && n <= c->file_size - at)
        return kvl_fail(KVL_EPARSE, "%s: the metadata runs past its first %zu bytes, more than any model's",
                        c->origin, KVL_GGUF_MAX_META);
    return kvl_fail(KVL_EPARSE, "%s: truncated: %s at byte %llu needs %llu bytes, the file has %llu left", c->origin,
                    what, (unsigned long long)at, (unsigned long long)n,
                    (unsigned long long)(c->file_size - at));
}

/* A little-endian unsigned integer of n bytes (n <= 8), whatever the host. */
static int take_uint(cursor *c, size_t n, uint64_t *out, const char *what)
{
    KVL_TRY(need(c, n, what));
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | c->p[i];
    c->p += n;
    *out = v;
    return KVL_OK;
}

static int take_str(cursor *c, kvl_gguf_str *s, const char *what)
{
    uint64_t n;
    KVL_TRY(take_uint(c, 8, &n, what));
    KVL_TRY(need(c, n, what));
    *s = (kvl_gguf_str){(const char *)c->p, (size_t)n};
    c->p += n;
    return KVL_OK;
}

static int take_type(cursor *c, const kvl_gguf_str *key, kvl_gguf_type *t)
{
    uint64_t v;
    KVL_TRY(take_uint(c, 4, &v, "a value type"));
    if (v >= KVL_GGUF_N_TYPES)
        return kvl_fail(KVL_EPARSE, "%s: key \"%s\": value type %llu is not a GGUF type (0 to 12)", c->origin,
                        shown(*key), (unsigned long long)v);
    *t = (kvl_gguf_type)v;
    return KVL_OK;
}

/* A scalar of type t into kv->v. */
static int take_scalar(cursor *c, kvl_gguf_kv *kv, kvl_gguf_type t)
{
    if (t == KVL_GGUF_STRING) return take_str(c, &kv->v.s, "a string value");
    uint64_t u;
    const size_t n = type_bytes[t];
    KVL_TRY(take_uint(c, n, &u, "a value"));
    switch (t) {
    case KVL_GGUF_I8: kv->v.i = (int8_t)u; break;
    case KVL_GGUF_I16: kv->v.i = (int16_t)u; break;
    case KVL_GGUF_I32: kv->v.i = (int32_t)u; break;
    case KVL_GGUF_I64: kv->v.i = (int64_t)u; break;
    case KVL_GGUF_F32: { uint32_t b = (uint32_t)u; float f; memcpy(&f, &b, 4); kv->v.f = f; break; }
    case KVL_GGUF_F64: memcpy(&kv->v.f, &u, 8); break;
    case KVL_GGUF_BOOL:
        if (u > 1)
            return kvl_fail(KVL_EPARSE, "%s: key \"%s\": a bool holds 0 or 1, got %llu", c->origin, shown(kv->key),
                            (unsigned long long)u);
        __attribute__((fallthrough));
    default: kv->v.u = u; break;
    }
    return KVL_OK;
}

/* An array's elements are skipped: no key read here needs them, only their count. */
static int take_array(cursor *c, kvl_gguf_kv *kv)
{
    KVL_TRY(take_type(c, &kv->key, &kv->elem));
    KVL_TRY(take_uint(c, 8, &kv->count, "an array length"));
    if (kv->elem == KVL_GGUF_ARRAY)
        return kvl_fail(KVL_EPARSE, "%s: key \"%s\": an array of arrays", c->origin, shown(kv->key));
    /* a string is at least its 8-byte length: the count is bounded by the bytes left before the loop */
    const uint64_t n = kv->elem == KVL_GGUF_STRING ? 8 : type_bytes[kv->elem];
    KVL_TRY(need(c, kv->count > UINT64_MAX / n ? UINT64_MAX : kv->count * n, "an array"));
    if (kv->elem != KVL_GGUF_STRING) {
        c->p += kv->count * n;
        return KVL_OK;
    }
    for (uint64_t i = 0; i < kv->count; i++) {
        kvl_gguf_str s;
        KVL_TRY(take_str(c, &s, "an array of strings"));
    }
    return KVL_OK;
}

static int take_kv(cursor *c, kvl_gguf_kv *kv)
{
    KVL_TRY(take_str(c, &kv->key, "a key"));
    if (kv->key.len == 0 || kv->key.len > MAX_KEY)
        return kvl_fail(KVL_EPARSE, "%s: a key of %zu bytes at byte %llu (1 to %d)", c->origin, kv->key.len,
                        (unsigned long long)(c->p - c->start - kv->key.len), MAX_KEY);
    KVL_TRY(take_type(c, &kv->key, &kv->type));
    return kv->type == KVL_GGUF_ARRAY ? take_array(c, kv) : take_scalar(c, kv, kv->type);
}

static int by_key(const void *a, const void *b)
{
    const kvl_gguf_kv *x = *(kvl_gguf_kv *const *)a, *y = *(kvl_gguf_kv *const *)b;
    const size_t n = x->key.len < y->key.len ? x->key.len : y->key.len;
    const int d = memcmp(x->key.bytes, y->key.bytes, n);
    return d ? d : (x->key.len > y->key.len) - (x->key.len < y->key.len);
}

/* A key given twice would leave its meaning to whichever reader looks first: refused. */
static int no_key_twice(const kvl_gguf *g)
{
    if (g->n_kv < 2) return KVL_OK;
    kvl_gguf_kv **order = malloc(g->n_kv * sizeof *order);
    if (!order) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu keys", g->origin, g->n_kv);
    for (size_t i = 0; i < g->n_kv; i++) order[i] = &g->kv[i];
    qsort(order, g->n_kv, sizeof *order, by_key);
    int rc = KVL_OK;
    for (size_t i = 1; i < g->n_kv && rc == KVL_OK; i++)
        if (by_key(&order[i - 1], &order[i]) == 0)
            rc = kvl_fail(KVL_EINVAL, "%s: key \"%s\" appears twice", g->origin, shown(order[i]->key));
    free(order);
    return rc;
}

static int take_header(cursor *c, kvl_gguf *g, uint64_t *n_kv)
{
    uint64_t magic, version;
    KVL_TRY(take_uint(c, 4, &magic, "the magic"));
    if (memcmp(c->start, "GGUF", 4) != 0) return kvl_fail(KVL_EPARSE, "%s: not a GGUF file (no \"GGUF\" magic)", c->origin);
    KVL_TRY(take_uint(c, 4, &version, "the version"));
    if (version == 0x02000000 || version == 0x03000000)
        return kvl_fail(KVL_EPARSE, "%s: version %llu: a big-endian GGUF file; only little-endian ones are read",
                        c->origin, (unsigned long long)version);
    if (version != 2 && version != 3)
        return kvl_fail(KVL_EPARSE, "%s: version %llu; GGUF versions 2 and 3 are read", c->origin,
                        (unsigned long long)version);
    g->version = (uint32_t)version;
    KVL_TRY(take_uint(c, 8, &g->n_tensors, "the tensor count"));
    KVL_TRY(take_uint(c, 8, n_kv, "the key-value count"));
    if (g->n_tensors > c->file_size / MIN_TENSOR_BYTES)
        return kvl_fail(KVL_EPARSE, "%s: %llu tensors cannot fit in a file of %llu bytes: truncated or malformed", c->origin,
                        (unsigned long long)g->n_tensors, (unsigned long long)c->file_size);
    if (*n_kv > MAX_KV || *n_kv > (c->file_size - 24) / MIN_KV_BYTES)
        return kvl_fail(KVL_EPARSE, "%s: %llu key-value pairs: more than a file of %llu bytes holds (or %d): "
                        "truncated or malformed",
                        c->origin, (unsigned long long)*n_kv, (unsigned long long)c->file_size, MAX_KV);
    return KVL_OK;
}

int kvl_gguf_parse(kvl_gguf *g, const uint8_t *bytes, size_t len, uint64_t file_size, const char *origin)
{
    memset(g, 0, sizeof *g);
    if (file_size < len) file_size = len;
    cursor c = {bytes, bytes, bytes + len, file_size, origin};
    uint64_t n_kv = 0;
    g->origin = origin;
    KVL_TRY(take_header(&c, g, &n_kv));
    g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof *g->kv);
    if (!g->kv) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %llu keys", origin, (unsigned long long)n_kv);
    int rc = KVL_OK;
    for (; g->n_kv < n_kv && rc == KVL_OK; g->n_kv++) rc = take_kv(&c, &g->kv[g->n_kv]);
    if (rc == KVL_OK) rc = no_key_twice(g);
    if (rc != KVL_OK) kvl_gguf_free(g);
    return rc;
}

void kvl_gguf_free(kvl_gguf *g)
{
    free(g->kv);
    memset(g, 0, sizeof *g);
}

const kvl_gguf_kv *kvl_gguf_find(const kvl_gguf *g, const char *key)
{
    const size_t n = strlen(key);
    for (size_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].key.len == n && memcmp(g->kv[i].key.bytes, key, n) == 0) return &g->kv[i];
    return NULL;
}

/* ---- files ------------------------------------------------------------------------------------- */

/* buf[0 .. *got) = up to cap bytes from the start of fd. */
static int read_prefix(int fd, uint8_t *buf, size_t cap, size_t *got, const char *path)
{
    *got = 0;
    while (*got < cap) {
        ssize_t n = read(fd, buf + *got, cap - *got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return kvl_fail(KVL_EIO, "%s: cannot read: %s", path, strerror(errno));
        if (n == 0) break;
        *got += (size_t)n;
    }
    return KVL_OK;
}

int kvl_gguf_file(const char *path)
{
    int fd;
    size_t size, got = 0;
    uint8_t magic[4];
    if (kvl_file_open_regular(&fd, &size, path) != KVL_OK) return 0;
    int rc = read_prefix(fd, magic, sizeof magic, &got, path);
    close(fd);
    kvl_clear_error();
    return rc == KVL_OK && got == 4 && memcmp(magic, "GGUF", 4) == 0;
}

int kvl_model_load_gguf(kvl_model *m, const char *path)
{
    memset(m, 0, sizeof *m);
    int fd;
    size_t size, got;
    KVL_TRY(kvl_file_open_regular(&fd, &size, path));
    const size_t cap = size < KVL_GGUF_MAX_META ? size : KVL_GGUF_MAX_META;
    uint8_t *buf = malloc(cap ? cap : 1);
    int rc = buf ? read_prefix(fd, buf, cap, &got, path) : kvl_fail(KVL_ENOMEM, "%s: out of memory", path);
    close(fd);
    kvl_gguf g;
    if (rc == KVL_OK) rc = kvl_gguf_parse(&g, buf, got, got < cap ? got : size, path);
    if (rc == KVL_OK) {
        rc = kvl_model_from_gguf(m, &g);
        kvl_gguf_free(&g);
    }
    free(buf);
    return rc;
}
