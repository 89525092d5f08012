#include "prefix_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_io.h"
#include "status.h"

static const char MAGIC[8] = {'K', 'V', 'L', 'P', 'R', 'F', 'X', '\0'};

uint64_t prefix_fnv1a(uint64_t h, const void *bytes, size_t n)
{
    const uint8_t *b = bytes;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* *bytes = rows · row_bytes; 0 on overflow. */
static int section_bytes(uint64_t *bytes, uint64_t rows, uint64_t row_bytes)
{
    if (row_bytes && rows > UINT64_MAX / row_bytes) return 0;
    *bytes = rows * row_bytes;
    return 1;
}

/* header[PREFIX_HEADER_BYTES + PREFIX_ENTRY_BYTES·n] for the sections laid out after it in order. */
static int encode_header(uint8_t *header, uint64_t tokens, uint64_t fingerprint, const prefix_section *sec, size_t n)
{
    memcpy(header, MAGIC, 8);
    put_u32(header + 8, PREFIX_FILE_VERSION);
    put_u32(header + 12, (uint32_t)n);
    put_u64(header + 16, tokens);
    put_u64(header + 24, fingerprint);
    uint64_t offset = PREFIX_HEADER_BYTES + (uint64_t)PREFIX_ENTRY_BYTES * n;
    for (size_t i = 0; i < n; i++) {
        uint8_t *e = header + PREFIX_HEADER_BYTES + PREFIX_ENTRY_BYTES * i;
        const size_t tag_len = strnlen(sec[i].tag, sizeof sec[i].tag);
        uint64_t bytes;
        if (tag_len == 0 || tag_len > 8) return kvl_fail(KVL_EINVAL, "prefix file: section %zu has tag \"%.9s\"", i, sec[i].tag);
        if (!section_bytes(&bytes, sec[i].rows, sec[i].row_bytes) || bytes > UINT64_MAX - offset)
            return kvl_fail(KVL_EINVAL, "prefix file: section %s of layer %u overflows", sec[i].tag, sec[i].layer);
        memset(e, 0, 8);
        memcpy(e, sec[i].tag, tag_len);
        put_u32(e + 8, sec[i].layer);
        put_u32(e + 12, sec[i].store);
        put_u64(e + 16, sec[i].row_bytes);
        put_u64(e + 24, sec[i].rows);
        put_u64(e + 32, sec[i].first);
        put_u64(e + 40, offset);
        offset += bytes;
    }
    return KVL_OK;
}

static void write_hashed(kvl_file_out *o, const void *bytes, size_t n, uint64_t *h)
{
    *h = prefix_fnv1a(*h, bytes, n);
    if (n) kvl_file_out_write(o, bytes, n);
}

int prefix_file_write(const char *path, uint64_t tokens, uint64_t fingerprint, const prefix_section *sections,
                      size_t n)
{
    if (!path || (n && !sections)) return kvl_fail(KVL_EINVAL, "prefix_file_write: NULL path or sections");
    if (n > PREFIX_MAX_SECTIONS)
        return kvl_fail(KVL_EINVAL, "prefix_file_write: %zu sections, at most %u", n, PREFIX_MAX_SECTIONS);
    const size_t header_bytes = PREFIX_HEADER_BYTES + PREFIX_ENTRY_BYTES * n;
    uint8_t *header = malloc(header_bytes);
    if (!header) return kvl_fail(KVL_ENOMEM, "prefix_file_write: out of memory");
    int rc = encode_header(header, tokens, fingerprint, sections, n);
    kvl_file_out o;
    if (rc == KVL_OK) rc = kvl_file_out_open(&o, path);
    if (rc == KVL_OK) {
        uint64_t h = PREFIX_FNV_BASIS;
        write_hashed(&o, header, header_bytes, &h);
        for (size_t i = 0; i < n; i++) write_hashed(&o, sections[i].bytes, sections[i].rows * sections[i].row_bytes, &h);
        uint8_t sum[8];
        put_u64(sum, h);
        kvl_file_out_write(&o, sum, 8);
        rc = kvl_file_out_commit(&o);
    }
    free(header);
    return rc;
}

void prefix_file_free(prefix_file *f)
{
    free(f->sections);
    free(f->buf);
    memset(f, 0, sizeof *f);
}

/* f->sections from the table of the checked buffer f->buf[f->size]. */
static int parse_sections(prefix_file *f, const char *name)
{
    const uint8_t *b = f->buf;
    const uint64_t payload_end = f->size - 8;
    uint64_t next = PREFIX_HEADER_BYTES + (uint64_t)PREFIX_ENTRY_BYTES * f->n;
    if (next > payload_end)
        return kvl_fail(KVL_EPARSE, "%s: %zu sections do not fit in %zu bytes", name, f->n, f->size);
    f->sections = calloc(f->n ? f->n : 1, sizeof *f->sections);
    if (!f->sections) return kvl_fail(KVL_ENOMEM, "%s: out of memory", name);
    for (size_t i = 0; i < f->n; i++) {
        const uint8_t *e = b + PREFIX_HEADER_BYTES + PREFIX_ENTRY_BYTES * i;
        prefix_section *s = &f->sections[i];
        memcpy(s->tag, e, 8);
        s->tag[8] = '\0';
        s->layer = get_u32(e + 8);
        s->store = get_u32(e + 12);
        s->row_bytes = get_u64(e + 16);
        s->rows = get_u64(e + 24);
        s->first = get_u64(e + 32);
        const uint64_t offset = get_u64(e + 40);
        uint64_t bytes;
        if (s->tag[0] == '\0')
            return kvl_fail(KVL_EPARSE, "%s: section %zu has no tag", name, i);
        if (offset != next)
            return kvl_fail(KVL_EPARSE, "%s: section %zu (%s) starts at byte %llu, expected %llu", name, i, s->tag,
                            (unsigned long long)offset, (unsigned long long)next);
        if (!section_bytes(&bytes, s->rows, s->row_bytes) || bytes > payload_end - offset)
            return kvl_fail(KVL_EPARSE, "%s: section %zu (%s): %llu rows of %llu bytes run past the end of the file",
                            name, i, s->tag, (unsigned long long)s->rows, (unsigned long long)s->row_bytes);
        s->bytes = b + offset;
        next = offset + bytes;
    }
    if (next != payload_end)
        return kvl_fail(KVL_EPARSE, "%s: %llu bytes after the last section", name,
                        (unsigned long long)(payload_end - next));
    return KVL_OK;
}

/* The checks on buf[size], which *f takes over (freed on failure). */
static int parse_owned(prefix_file *f, uint8_t *buf, size_t size, const char *name)
{
    memset(f, 0, sizeof *f);
    f->buf = buf;
    f->size = size;
    int rc = KVL_OK;
    if (size < PREFIX_HEADER_BYTES + 8)
        rc = kvl_fail(KVL_EPARSE, "%s: %zu bytes, shorter than a prefix-cache header", name, size);
    else if (memcmp(buf, MAGIC, 8) != 0)
        rc = kvl_fail(KVL_EPARSE, "%s: not a kvlineage prefix-cache file (bad magic)", name);
    else if (get_u32(buf + 8) != PREFIX_FILE_VERSION)
        rc = kvl_fail(KVL_EPARSE, "%s: version %u, this reader knows %u", name, get_u32(buf + 8), PREFIX_FILE_VERSION);
    if (rc == KVL_OK) {
        const uint64_t sum = get_u64(buf + size - 8), h = prefix_fnv1a(PREFIX_FNV_BASIS, buf, size - 8);
        if (sum != h)
            rc = kvl_fail(KVL_EPARSE, "%s: checksum %016llx, the bytes give %016llx: the file is damaged or truncated",
                          name, (unsigned long long)sum, (unsigned long long)h);
    }
    if (rc == KVL_OK && get_u32(buf + 12) > PREFIX_MAX_SECTIONS)
        rc = kvl_fail(KVL_EPARSE, "%s: %u sections, at most %u", name, get_u32(buf + 12), PREFIX_MAX_SECTIONS);
    if (rc == KVL_OK) {
        f->n = get_u32(buf + 12);
        f->tokens = get_u64(buf + 16);
        f->fingerprint = get_u64(buf + 24);
        rc = parse_sections(f, name);
    }
    if (rc != KVL_OK) prefix_file_free(f);
    return rc;
}

int prefix_file_parse(prefix_file *f, const uint8_t *buf, size_t size, const char *name)
{
    memset(f, 0, sizeof *f);
    uint8_t *copy = malloc(size ? size : 1);
    if (!copy) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu bytes", name, size);
    if (size) memcpy(copy, buf, size);
    return parse_owned(f, copy, size, name);
}

int prefix_file_read(prefix_file *f, const char *path)
{
    memset(f, 0, sizeof *f);
    char *buf;
    size_t size;
    KVL_TRY(kvl_file_read_all(&buf, &size, path, PREFIX_MAX_FILE_BYTES));
    return parse_owned(f, (uint8_t *)buf, size, path);
}

const prefix_section *prefix_file_find(const prefix_file *f, const char *tag, uint32_t layer)
{
    for (size_t i = 0; i < f->n; i++)
        if (f->sections[i].layer == layer && strcmp(f->sections[i].tag, tag) == 0) return &f->sections[i];
    return NULL;
}
