/* Files in and out, for every reader and writer of the project's formats, and the one element
 * conversion the readers share.
 *
 * In: only a regular file is opened. Its type is checked with stat before the open, so a FIFO or a
 * device given as an input is refused instead of blocking the reader; the open itself is non-blocking
 * and fstat then checks that the file opened is the one stat saw (no swap in between).
 *
 * Out: one rule for every file a program writes, decided by what the path names (lstat, then stat):
 *   - a regular file, or a name that does not exist yet: written whole or not at all. The bytes go
 *     to "<path>.tmp.<pid>" in the same directory, every write and the close are checked, and only
 *     a complete file is renamed to path; on any failure (disk full, the file-size limit) the
 *     temporary is removed and path is left as it was.
 *   - a symbolic link: followed, and the rule applied to the file it names. A regular file is
 *     replaced as above at its resolved location, so the link stays a link and its target gets the
 *     bytes; a link to nothing is refused (no file is created behind it).
 *   - a character device or a FIFO: written through in place (nothing created, truncated or
 *     renamed). The open is non-blocking, so a FIFO with no reader is refused instead of waiting;
 *     every write and the close are checked, so /dev/full fails with "No space left on device".
 *   - the file this process's stdout writes (a link to /proc/self/fd/1, say, whatever stdout is):
 *     written through stdout's own descriptor, after what the program printed so far, so that
 *     neither replaces the other.
 *   - a directory, a socket or a block device: refused, naming the path.
 *   - the same file (device and inode, so another spelling or a hard link too) as an input of the
 *     run: refused, "PATH: is also an input of this run (ROLE)". The inputs are the paths a program
 *     names with kvl_file_input and, once it calls kvl_file_track_inputs, every file it opens
 *     through kvl_file_open_regular (the shards of a checkpoint directory, say).
 * kvl_file_out_check applies the rule without opening or creating anything, so that a program can
 * refuse a bad output path while it reads its arguments, before its first line of output; only a
 * FIFO's reader and a device's room are left to the open and the writes. */
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

/* Count the regular file at path as an input of this run, named role in a refusal ("--config"); a
 * path that is not a regular file (a directory of shards, a missing file) adds nothing. */
void kvl_file_input(const char *path, const char *role);

/* From now on every file opened through kvl_file_open_regular counts as an input of this run. A
 * program calls it; a library does not, since a library may rewrite a file it read earlier. */
void kvl_file_track_inputs(void);

typedef struct {
    FILE *fp;
    char *tmp;           /* "<dest>.tmp.<pid>"; NULL when written through (a device, a FIFO) */
    char *dest;          /* where the temporary is renamed: path, or the file a link to it names */
    const char *path;    /* the caller's, kept alive until commit */
    int err;             /* errno of the first failed write, 0 while every write succeeded */
} kvl_file_out;

/* KVL_OK when path may be written under the rule above; else KVL_EIO with "PATH: ..." saying why
 * (is a directory, is a socket, is a block device, a symbolic link to nothing, cannot create: the
 * directory is missing or not writable, is also an input of this run (ROLE)). Creates nothing. */
int kvl_file_out_check(const char *path);

/* Open o for path under the rule above: its temporary, or the device or FIFO itself. KVL_EIO (the
 * refusals of kvl_file_out_check, "PATH: cannot create: ERROR", "PATH: a FIFO with no reader"),
 * KVL_ENOMEM. */
int kvl_file_out_open(kvl_file_out *o, const char *path);

/* Append data[n]; a failure is remembered and reported by kvl_file_out_commit. A caller may also
 * fprintf to o->fp: the stream's error indicator is read at commit. */
void kvl_file_out_write(kvl_file_out *o, const void *data, size_t n);

/* Close the temporary and rename it to its destination if every write and the close succeeded;
 * otherwise remove it. Written through, only the writes and the close are left to check. KVL_EIO
 * "PATH: cannot write: ERROR". o is finished either way. */
int kvl_file_out_commit(kvl_file_out *o);

/* out[n] = the little-endian float64 values raw[8n] (numpy's '<f8', safetensors' F64) rounded to the
 * nearest float32, ties to even (C's conversion under the default rounding mode); beyond float32's
 * range they become ±inf. */
void kvl_f64_to_f32(float *out, const uint8_t *raw, size_t n);

#endif
