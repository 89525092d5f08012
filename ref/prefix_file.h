/* The prefix-cache file: what a server writes to disk for a prompt prefix and reads back on a hit
 * (ref/prefix_cache.h decides what goes in; this file only keeps it whole).
 *
 * Version 1, every integer little-endian:
 *
 *   offset        bytes        field
 *   0             8            magic "KVLPRFX\0"
 *   8             4            version (1)
 *   12            4            n, the number of sections (at most PREFIX_MAX_SECTIONS)
 *   16            8            tokens: the prefix length P the file covers
 *   24            8            fingerprint of the model and cache format that wrote it
 *   32            48·n         section table, one entry per section:
 *                                tag[8] (NUL-padded), layer u32, store u32, row_bytes u64, rows u64,
 *                                first u64 (position of the first row, or a state's token count), offset u64
 *   32 + 48·n     …            the sections' bytes, rows × row_bytes each, in table order, no gaps
 *   size − 8      8            FNV-1a 64 of every byte before it
 *
 * A reader accepts a file only whole: the size, magic, version and checksum first, then every section
 * inside the payload, in order, with rows × row_bytes computed without overflow. Nothing is handed to a
 * cache before all of that holds, so a truncated or damaged file is refused, never half-loaded. Only a
 * regular file is read (ref/core/file_io.h: a FIFO fails at once); a file is written whole under a
 * temporary name and renamed, or not at all. */
#ifndef KVL_PREFIX_FILE_H
#define KVL_PREFIX_FILE_H

#include <stddef.h>
#include <stdint.h>

#define PREFIX_FILE_VERSION 1u
#define PREFIX_MAX_SECTIONS 4096u
#define PREFIX_HEADER_BYTES 32u
#define PREFIX_ENTRY_BYTES 48u
/* The largest file read back: 16 GiB, V4.1-Flash's global cache for about 19M tokens at 890 B/token */
#define PREFIX_MAX_FILE_BYTES ((size_t)1 << 34)

typedef struct {
    char tag[9];            /* "entries", "keys", "window", "tail", …; NUL-terminated */
    uint32_t layer;
    uint32_t store;         /* the row store (ref/v4_rows.h v4_rows_store) */
    uint64_t row_bytes, rows, first;
    const uint8_t *bytes;   /* [rows][row_bytes] */
} prefix_section;

typedef struct {
    uint64_t tokens, fingerprint;
    size_t n;
    prefix_section *sections;  /* [n], bytes pointing into buf */
    uint8_t *buf;              /* the whole file */
    size_t size;
} prefix_file;

/* Write the file atomically: to path + ".tmp", then renamed over path, so an error leaves no partial file.
 * KVL_EINVAL (a tag longer than 8 bytes, too many sections, a size overflow), KVL_EIO naming the path. */
int prefix_file_write(const char *path, uint64_t tokens, uint64_t fingerprint, const prefix_section *sections,
                      size_t n);

/* Read and check a whole file. KVL_EIO (cannot open or read), KVL_EPARSE naming the path and what is wrong.
 * On failure *f is empty and prefix_file_free is harmless. */
int prefix_file_read(prefix_file *f, const char *path);

/* The checks of prefix_file_read on buf[size] (copied; `name` for messages). */
int prefix_file_parse(prefix_file *f, const uint8_t *buf, size_t size, const char *name);

void prefix_file_free(prefix_file *f);

/* The section with this tag and layer, or NULL. */
const prefix_section *prefix_file_find(const prefix_file *f, const char *tag, uint32_t layer);

/* FNV-1a 64 of bytes[n] continuing from h (start with PREFIX_FNV_BASIS). */
#define PREFIX_FNV_BASIS 0xcbf29ce484222325ull
uint64_t prefix_fnv1a(uint64_t h, const void *bytes, size_t n);

#endif
