#include "npy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

#define MAGIC "\x93NUMPY"
#define MAX_HEADER 65536
#define MAX_ELEMENTS ((size_t)1 << 34)

typedef struct {
    char descr[8];
    int fortran;
    size_t n_dims, shape[2];
} npy_header;

static const char *skip_blank(const char *p)
{
    while (*p == ' ') p++;
    return p;
}

/* The text after 'key': in the dict, or NULL. */
static const char *value_of(const char *dict, const char *key)
{
    char quoted[32];
    snprintf(quoted, sizeof quoted, "'%s':", key);
    const char *p = strstr(dict, quoted);
    return p ? skip_blank(p + strlen(quoted)) : NULL;
}

static int parse_shape(npy_header *h, const char *p, const char *path)
{
    if (*p++ != '(') return kvl_fail(KVL_EPARSE, "%s: header field 'shape' is not a tuple", path);
    h->n_dims = 0;
    for (p = skip_blank(p); *p != ')'; p = skip_blank(p)) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || errno || *p == '-' || h->n_dims == 2 || v > MAX_ELEMENTS)
            return kvl_fail(KVL_EINVAL, "%s: header field 'shape' must be one or two sizes", path);
        h->shape[h->n_dims++] = (size_t)v;
        p = skip_blank(end);
        if (*p == ',') p++;
        else if (*p != ')') return kvl_fail(KVL_EPARSE, "%s: header field 'shape' is malformed", path);
    }
    if (h->n_dims == 0) return kvl_fail(KVL_EINVAL, "%s: header field 'shape' is () (a scalar), want 1 or 2 dims", path);
    return KVL_OK;
}

static int parse_header(npy_header *h, const char *dict, const char *path)
{
    const char *descr = value_of(dict, "descr"), *fortran = value_of(dict, "fortran_order"), *shape = value_of(dict, "shape");
    if (!descr || !fortran || !shape)
        return kvl_fail(KVL_EPARSE, "%s: header lacks '%s'", path, !descr ? "descr" : !fortran ? "fortran_order" : "shape");
    if (sscanf(descr, "'%7[^']'", h->descr) != 1) return kvl_fail(KVL_EPARSE, "%s: header field 'descr' is malformed", path);
    if (strcmp(h->descr, "<f4") && strcmp(h->descr, "<f8"))
        return kvl_fail(KVL_EINVAL, "%s: header field 'descr' is '%s', want '<f4' or '<f8'", path, h->descr);
    if (strncmp(fortran, "False", 5) != 0)
        return kvl_fail(KVL_EINVAL, "%s: header field 'fortran_order' must be False (C order)", path);
    return parse_shape(h, shape, path);
}

/* out[n] from the raw little-endian elements of descr. */
static void widen(float *out, const uint8_t *raw, size_t n, const char *descr)
{
    for (size_t i = 0; i < n; i++) {
        if (descr[2] == '4') memcpy(&out[i], raw + 4 * i, 4);
        else {
            double v;
            memcpy(&v, raw + 8 * i, 8);
            out[i] = (float)v;
        }
    }
}

static int read_body(float **data, const npy_header *h, FILE *fp, const char *path)
{
    size_t n = h->shape[0] * (h->n_dims == 2 ? h->shape[1] : 1), width = (size_t)(h->descr[2] - '0');
    if (h->n_dims == 2 && h->shape[1] && h->shape[0] > MAX_ELEMENTS / h->shape[1])
        return kvl_fail(KVL_EINVAL, "%s: shape too large", path);
    uint8_t *raw = malloc(n * width + 1);
    float *out = malloc(n * sizeof *out + 1);
    if (!raw || !out) {
        free(raw);
        free(out);
        return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu elements", path, n);
    }
    size_t got = fread(raw, width, n, fp);
    int extra = fgetc(fp) != EOF;
    if (got != n || extra) {
        free(raw);
        free(out);
        return kvl_fail(KVL_EINVAL, "%s: %s data than its shape says (%zu elements)", path, got != n ? "less" : "more", n);
    }
    widen(out, raw, n, h->descr);
    free(raw);
    *data = out;
    return KVL_OK;
}

static int read_file(float **data, size_t *rows, size_t *cols, FILE *fp, const char *path)
{
    uint8_t pre[12];
    if (fread(pre, 1, 10, fp) != 10 || memcmp(pre, MAGIC, 6) != 0)
        return kvl_fail(KVL_EPARSE, "%s: not a .npy file (no \\x93NUMPY magic)", path);
    size_t hlen = pre[8] | (size_t)pre[9] << 8;
    if (pre[6] >= 2) {
        if (fread(pre + 10, 1, 2, fp) != 2) return kvl_fail(KVL_EPARSE, "%s: truncated header", path);
        hlen |= (size_t)pre[10] << 16 | (size_t)pre[11] << 24;
    } else if (pre[6] != 1)
        return kvl_fail(KVL_EPARSE, "%s: .npy version %u.%u is not one this reader knows", path, pre[6], pre[7]);
    if (hlen > MAX_HEADER) return kvl_fail(KVL_EPARSE, "%s: header of %zu bytes is too long", path, hlen);
    char dict[MAX_HEADER + 1];
    if (fread(dict, 1, hlen, fp) != hlen) return kvl_fail(KVL_EPARSE, "%s: truncated header", path);
    dict[hlen] = '\0';
    if (memchr(dict, '\0', hlen)) return kvl_fail(KVL_EPARSE, "%s: header holds a NUL byte", path);
    npy_header h;
    int rc = parse_header(&h, dict, path);
    if (rc == KVL_OK) rc = read_body(data, &h, fp, path);
    if (rc == KVL_OK) {
        *rows = h.n_dims == 2 ? h.shape[0] : 1;
        *cols = h.n_dims == 2 ? h.shape[1] : h.shape[0];
    }
    return rc;
}

int kvl_npy_read(float **data, size_t *rows, size_t *cols, const char *path)
{
    *data = NULL;
    FILE *fp = fopen(path, "rb");
    if (!fp) return kvl_fail(KVL_EIO, "%s: cannot open: %s", path, strerror(errno));
    int rc = read_file(data, rows, cols, fp, path);
    fclose(fp);
    return rc;
}

int kvl_npy_write(const char *path, const float *data, size_t rows, size_t cols)
{
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
    size_t total = 10 + (size_t)len + 1, pad = (64 - total % 64) % 64;
    FILE *fp = fopen(path, "wb");
    if (!fp) return kvl_fail(KVL_EIO, "%s: cannot create: %s", path, strerror(errno));
    size_t hlen = (size_t)len + pad + 1;
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 0xff), (uint8_t)(hlen >> 8)};
    int ok = fwrite(pre, 1, 10, fp) == 10 && fwrite(dict, 1, (size_t)len, fp) == (size_t)len;
    for (size_t i = 0; ok && i < pad; i++) ok = fputc(' ', fp) != EOF;
    ok = ok && fputc('\n', fp) != EOF && fwrite(data, sizeof *data, rows * cols, fp) == rows * cols;
    if (fclose(fp) != 0) ok = 0;
    return ok ? KVL_OK : kvl_fail(KVL_EIO, "%s: write failed: %s", path, strerror(errno));
}
