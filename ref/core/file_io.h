/* Files in and out, for every reader and writer of the project's formats, and the one element
 * conversion the readers share.
 *
 * In: only a regular file is opened. Its type is checked with stat before the open, so a FIFO or a
 * device given as an input is refused instead of blocking the reader; the open itself is non-blocking
 * and fstat then checks that the file opened is the one stat saw (no swap in between).
 *
 * Out: a file is written whole or not at all. The bytes go to "<path>.tmp.<pid>" in the same
 * directory, every write and the close are checked, and only a complete file is renamed to path; on
 * any failure (disk full, the file-size limit) the temporary is removed and path is left as it was. */
#ifndef KVL_FILE_IO_H
#define KVL_FILE_IO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* *fd = path opened read-only, *size its length in bytes. KVL_EIO "PATH: cannot open: ERROR" or
 * "PATH: not a regular file". The caller closes *fd. */
int kvl_file_open_regular(int *fd, size_t *size, const char *path);

/* *bytes = the whole regular file at path, NUL-terminated (the NUL not counted in *size), in memory
 * the caller frees; nothing is allocated beyond the file's size. KVL_EIO (as above, or a read error),
 * KVL_EINVAL "PATH: N bytes, over the M-byte limit" when it is larger than max_bytes, KVL_ENOMEM. */
int kvl_file_read_all(char **bytes, size_t *size, const char *path, size_t max_bytes);

typedef struct {
    FILE *fp;
    char *tmp;           /* "<path>.tmp.<pid>" */
    const char *path;    /* the caller's, kept alive until commit */
    int err;             /* errno of the first failed write, 0 while every write succeeded */
} kvl_file_out;

/* Create o's temporary for path. KVL_EIO "PATH: cannot create: ERROR", KVL_ENOMEM. */
int kvl_file_out_open(kvl_file_out *o, const char *path);

/* Append data[n]; a failure is remembered and reported by kvl_file_out_commit. A caller may also
 * fprintf to o->fp: the stream's error indicator is read at commit. */
void kvl_file_out_write(kvl_file_out *o, const void *data, size_t n);

/* Close the temporary and rename it to path if every write and the close succeeded; otherwise
 * remove it. KVL_EIO "PATH: cannot write: ERROR". o is finished either way. */
int kvl_file_out_commit(kvl_file_out *o);

/* out[n] = the little-endian float64 values raw[8n] (numpy's '<f8', safetensors' F64) rounded to the
 * nearest float32, ties to even (C's conversion under the default rounding mode); beyond float32's
 * range they become ±inf. */
void kvl_f64_to_f32(float *out, const uint8_t *raw, size_t n);

#endif
