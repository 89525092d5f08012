#include "npy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_io.h"
#include "status.h"

#define MAGIC "\x93NUMPY"
#define MAX_HEADER 65536
#define MAX_ELEMENTS ((size_t)1 << 34)
/* The 12-byte preamble, the longest header and the most elements of the widest type. */
#define MAX_FILE (12 + MAX_HEADER + 8 * MAX_ELEMENTS)

enum { KEY_DESCR, KEY_FORTRAN, KEY_SHAPE, N_KEYS };
static const char *const KEYS[N_KEYS] = {"descr", "fortran_order", "shape"};

typedef struct {
    char descr[8];
    size_t n_dims, shape[2];
} npy_header;

/* The header text being read: p moves from its start towards end. */
typedef struct {
    const char *start, *p, *end;
    const char *origin;
} cursor;

static void skip_spaces(cursor *c)
{
    while (c->p < c->end && *c->p == ' ') c->p++;
}

static int at(const cursor *c, char ch) { return c->p < c->end && *c->p == ch; }

static int eat(cursor *c, char ch)
{
    if (!at(c, ch)) return 0;
    c->p++;
    return 1;
}

static int fail_syntax(const cursor *c, const char *wanted)
{
    return kvl_fail(KVL_EPARSE, "%s: header is not a dict literal: %s expected at byte %zu of the header", c->origin,
                    wanted, (size_t)(c->p - c->start));
}

/* out[cap] = the quoted text at c (either quote, no backslash, no newline); -1 if none or too long. */
static int quoted(char *out, size_t cap, cursor *c)
{
    if (!at(c, '\'') && !at(c, '"')) return -1;
    char q = *c->p++;
    size_t n = 0;
    for (; c->p < c->end && *c->p != q; c->p++) {
        if (*c->p == '\\' || *c->p == '\n' || n + 1 == cap) return -1;
        out[n++] = *c->p;
    }
    out[n] = '\0';
    return eat(c, q) ? 0 : -1;
}

/* *v = the decimal size at c: digits, no leading zero, at most MAX_ELEMENTS; -1 otherwise. */
static int size_literal(size_t *v, cursor *c)
{
    const char *first = c->p;
    size_t x = 0;
    for (; c->p < c->end && *c->p >= '0' && *c->p <= '9'; c->p++) {
        x = x * 10 + (size_t)(*c->p - '0');
        if (x > MAX_ELEMENTS) return -1;
    }
    if (c->p == first || (*first == '0' && c->p - first > 1)) return -1;
    *v = x;
    return 0;
}

/* How much of the value text at from a message quotes: up to the first byte of stops (through it, when
 * it is the last), at most 24 bytes. */
static int quoted_length(const cursor *c, const char *from, const char *stops, int through)
{
    size_t n = 0;
    while (from + n < c->end && n < 24 && !strchr(stops, from[n])) n++;
    return (int)(n + (through && from + n < c->end && n < 24));
}

static int read_descr(npy_header *h, cursor *c)
{
    if (quoted(h->descr, sizeof h->descr, c) != 0)
        return kvl_fail(KVL_EPARSE, "%s: header field 'descr' is not a short quoted string", c->origin);
    if (strcmp(h->descr, "<f4") && strcmp(h->descr, "<f8"))
        return kvl_fail(KVL_EINVAL, "%s: header field 'descr' is '%s', want '<f4' or '<f8'", c->origin, h->descr);
    return KVL_OK;
}

static int read_fortran(cursor *c)
{
    const char *from = c->p;
    size_t left = (size_t)(c->end - c->p);
    int is_false = left >= 5 && memcmp(c->p, "False", 5) == 0, is_true = left >= 4 && memcmp(c->p, "True", 4) == 0;
    c->p += is_false ? 5 : is_true ? 4 : 0;
    if ((!is_false && !is_true) || (!at(c, ' ') && !at(c, ',') && !at(c, '}')))
        return kvl_fail(KVL_EPARSE, "%s: header field 'fortran_order' is %.*s, not False or True", c->origin,
                        quoted_length(c, from, " ,}", 0), from);
    if (is_true) return kvl_fail(KVL_EINVAL, "%s: header field 'fortran_order' must be False (C order)", c->origin);
    return KVL_OK;
}

/* A Python tuple of one or two sizes: "(N,)", "(R, C)", "(R, C,)". */
static int read_shape(npy_header *h, cursor *c)
{
    const char *o = c->origin, *from = c->p;
    if (!eat(c, '('))
        return kvl_fail(KVL_EPARSE, "%s: header field 'shape' is %.*s, not a tuple", o, quoted_length(c, from, ",}", 0),
                        from);
    h->n_dims = 0;
    int comma = 0;
    for (skip_spaces(c); !eat(c, ')'); skip_spaces(c)) {
        if (h->n_dims == 2 || size_literal(&h->shape[h->n_dims], c) != 0)
            return kvl_fail(KVL_EINVAL, "%s: header field 'shape' is %.*s, it must be one or two sizes", o,
                            quoted_length(c, from, ")", 1), from);
        h->n_dims++;
        skip_spaces(c);
        comma = eat(c, ',');
        if (!comma && !at(c, ')'))
            return kvl_fail(KVL_EPARSE, "%s: header field 'shape' is %.*s, a malformed tuple", o,
                            quoted_length(c, from, ")", 1), from);
    }
    if (h->n_dims == 0) return kvl_fail(KVL_EINVAL, "%s: header field 'shape' is () (a scalar), want 1 or 2 dims", o);
    if (h->n_dims == 1 && !comma)
        return kvl_fail(KVL_EPARSE, "%s: header field 'shape' is (%zu) without a comma, a number and not a tuple", o,
                        h->shape[0]);
    return KVL_OK;
}

/* One "'key': value" at c, the key one of KEYS and not in seen[] yet. */
static int read_entry(npy_header *h, cursor *c, int *seen)
{
    char key[16];
    if (quoted(key, sizeof key, c) != 0) return fail_syntax(c, "a quoted key");
    int k = 0;
    while (k < N_KEYS && strcmp(key, KEYS[k]) != 0) k++;
    if (k == N_KEYS)
        return kvl_fail(KVL_EPARSE, "%s: header key '%s' is not 'descr', 'fortran_order' or 'shape'", c->origin, key);
    if (seen[k]) return kvl_fail(KVL_EPARSE, "%s: header field '%s' appears twice", c->origin, key);
    seen[k] = 1;
    skip_spaces(c);
    if (!eat(c, ':')) return fail_syntax(c, "':'");
    skip_spaces(c);
    return k == KEY_DESCR ? read_descr(h, c) : k == KEY_FORTRAN ? read_fortran(c) : read_shape(h, c);
}

/* The dict literal dict[len]: '{', the three entries, '}', spaces, then the final '\n'. */
static int parse_header(npy_header *h, const char *dict, size_t len, const char *origin)
{
    if (len == 0 || dict[len - 1] != '\n') return kvl_fail(KVL_EPARSE, "%s: header does not end with a newline", origin);
    cursor c = {dict, dict, dict + len - 1, origin};
    int seen[N_KEYS] = {0};
    skip_spaces(&c);
    if (!eat(&c, '{')) return fail_syntax(&c, "'{'");
    for (skip_spaces(&c); !eat(&c, '}'); skip_spaces(&c)) {
        KVL_TRY(read_entry(h, &c, seen));
        skip_spaces(&c);
        if (!eat(&c, ',') && !at(&c, '}')) return fail_syntax(&c, "',' or '}'");
    }
    skip_spaces(&c);
    if (c.p != c.end) return fail_syntax(&c, "only spaces after the dict");
    for (int k = 0; k < N_KEYS; k++)
        if (!seen[k]) return kvl_fail(KVL_EPARSE, "%s: header lacks '%s'", origin, KEYS[k]);
    return KVL_OK;
}

/* *data from raw[avail], the bytes after the header, once their length is what the shape says. */
static int read_body(float **data, const npy_header *h, const uint8_t *raw, size_t avail, const char *origin)
{
    size_t r = h->shape[0], cols = h->n_dims == 2 ? h->shape[1] : 1, width = (size_t)(h->descr[2] - '0');
    if (cols && r > MAX_ELEMENTS / cols)
        return kvl_fail(KVL_EINVAL, "%s: shape (%zu, %zu) has over 2^34 elements", origin, r, cols);
    size_t n = r * cols;
    if (avail != n * width)
        return kvl_fail(KVL_EINVAL, "%s: %s data than its shape says (%zu elements of '%s' need %zu bytes, the file "
                        "holds %zu after its header)", origin, avail < n * width ? "less" : "more", n, h->descr,
                        n * width, avail);
    float *out = malloc(n * sizeof *out + 1);
    if (!out) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu elements", origin, n);
    if (width == 4) memcpy(out, raw, 4 * n);
    else kvl_f64_to_f32(out, raw, n);
    *data = out;
    return KVL_OK;
}

int kvl_npy_parse(float **data, size_t *rows, size_t *cols, const uint8_t *bytes, size_t n, const char *origin)
{
    *data = NULL;
    if (n < 10 || memcmp(bytes, MAGIC, 6) != 0)
        return kvl_fail(KVL_EPARSE, "%s: not a .npy file (no \\x93NUMPY magic)", origin);
    unsigned major = bytes[6], minor = bytes[7];
    if (major < 1 || major > 3 || minor != 0)
        return kvl_fail(KVL_EPARSE, "%s: .npy version %u.%u is not one this reader knows (1.0, 2.0, 3.0)", origin,
                        major, minor);
    size_t pre = major == 1 ? 10 : 12;
    if (n < pre) return kvl_fail(KVL_EPARSE, "%s: truncated header", origin);
    size_t hlen = bytes[8] | (size_t)bytes[9] << 8;
    if (major > 1) hlen |= (size_t)bytes[10] << 16 | (size_t)bytes[11] << 24;
    if (hlen > MAX_HEADER) return kvl_fail(KVL_EPARSE, "%s: header of %zu bytes is too long", origin, hlen);
    if (hlen > n - pre) return kvl_fail(KVL_EPARSE, "%s: truncated header", origin);
    npy_header h;
    KVL_TRY(parse_header(&h, (const char *)bytes + pre, hlen, origin));
    KVL_TRY(read_body(data, &h, bytes + pre + hlen, n - pre - hlen, origin));
    *rows = h.n_dims == 2 ? h.shape[0] : 1;
    *cols = h.n_dims == 2 ? h.shape[1] : h.shape[0];
    return KVL_OK;
}

int kvl_npy_read(float **data, size_t *rows, size_t *cols, const char *path)
{
    *data = NULL;
    char *bytes;
    size_t n;
    KVL_TRY(kvl_file_read_all(&bytes, &n, path, MAX_FILE));
    int rc = kvl_npy_parse(data, rows, cols, (const uint8_t *)bytes, n, path);
    free(bytes);
    return rc;
}

int kvl_npy_write(const char *path, const float *data, size_t rows, size_t cols)
{
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
    size_t total = 10 + (size_t)len + 1, pad = (64 - total % 64) % 64, hlen = (size_t)len + pad + 1;
    char header[256];
    memcpy(header, MAGIC, 6);
    header[6] = 1;
    header[7] = 0;
    header[8] = (char)(hlen & 0xff);
    header[9] = (char)(hlen >> 8);
    memcpy(header + 10, dict, (size_t)len);
    memset(header + 10 + len, ' ', pad);
    header[10 + hlen - 1] = '\n';
    kvl_file_out out;
    KVL_TRY(kvl_file_out_open(&out, path));
    kvl_file_out_write(&out, header, 10 + hlen);
    kvl_file_out_write(&out, data, rows * cols * sizeof *data);
    return kvl_file_out_commit(&out);
}
