#include "file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status.h"

int kvl_file_open_regular(int *fd, size_t *size, const char *path)
{
    struct stat before, after;
    *fd = -1;
    char shown[512];
    if (stat(path, &before) != 0)
        return kvl_fail(KVL_EIO, "%s: cannot open: %s", kvl_shown(shown, sizeof shown, path), strerror(errno));
    if (!S_ISREG(before.st_mode)) return kvl_fail(KVL_EIO, "%s: not a regular file", path);
    int f = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (f < 0) return kvl_fail(KVL_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fstat(f, &after) != 0 || !S_ISREG(after.st_mode) || after.st_dev != before.st_dev ||
        after.st_ino != before.st_ino) {
        close(f);
        return kvl_fail(KVL_EIO, "%s: not a regular file", path);
    }
    *fd = f;
    *size = (size_t)after.st_size;
    return KVL_OK;
}

/* buf[n] = the next n bytes of fd; a file that ends early or grows while read fails. */
static int read_exactly(int fd, char *buf, size_t n, const char *path)
{
    for (size_t at = 0; at < n;) {
        ssize_t got = read(fd, buf + at, n - at);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return kvl_fail(KVL_EIO, "%s: cannot read: %s", path, strerror(errno));
        if (got == 0) return kvl_fail(KVL_EIO, "%s: the file shrank while it was read", path);
        at += (size_t)got;
    }
    char extra;
    if (read(fd, &extra, 1) != 0) return kvl_fail(KVL_EIO, "%s: the file grew while it was read", path);
    return KVL_OK;
}

int kvl_file_read_all(char **bytes, size_t *size, const char *path, size_t max_bytes)
{
    int fd;
    size_t n;
    *bytes = NULL;
    KVL_TRY(kvl_file_open_regular(&fd, &n, path));
    if (n > max_bytes) {
        close(fd);
        return kvl_fail(KVL_EINVAL, "%s: %zu bytes, over the %zu-byte limit", path, n, max_bytes);
    }
    char *buf = malloc(n + 1);
    if (!buf) {
        close(fd);
        return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu bytes", path, n);
    }
    int rc = read_exactly(fd, buf, n, path);
    close(fd);
    if (rc != KVL_OK) {
        free(buf);
        return rc;
    }
    buf[n] = '\0';
    *bytes = buf;
    *size = n;
    return KVL_OK;
}

int kvl_file_out_open(kvl_file_out *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    size_t cap = strlen(path) + 32;
    o->tmp = malloc(cap);
    if (!o->tmp) return kvl_fail(KVL_ENOMEM, "%s: out of memory", path);
    snprintf(o->tmp, cap, "%s.tmp.%ld", path, (long)getpid());
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    o->fp = fd < 0 ? NULL : fdopen(fd, "wb");
    if (!o->fp) {
        int e = errno;
        if (fd >= 0) {
            close(fd);
            unlink(o->tmp);
        }
        free(o->tmp);
        o->tmp = NULL;
        return kvl_fail(KVL_EIO, "%s: cannot create: %s", path, strerror(e));
    }
    return KVL_OK;
}

void kvl_file_out_write(kvl_file_out *o, const void *data, size_t n)
{
    if (o->err || n == 0) return;
    errno = 0;
    if (fwrite(data, 1, n, o->fp) != n) o->err = errno ? errno : EIO;
}

int kvl_file_out_commit(kvl_file_out *o)
{
    errno = 0;
    if (ferror(o->fp) && !o->err) o->err = EIO;   /* a caller's own fprintf to o->fp that failed */
    if (fclose(o->fp) != 0 && !o->err) o->err = errno ? errno : EIO;
    o->fp = NULL;
    if (!o->err && rename(o->tmp, o->path) != 0) o->err = errno;
    int e = o->err;
    if (e) unlink(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
    return e ? kvl_fail(KVL_EIO, "%s: cannot write: %s", o->path, strerror(e)) : KVL_OK;
}

void kvl_f64_to_f32(float *out, const uint8_t *raw, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        double v;
        memcpy(&v, raw + 8 * i, 8);
        out[i] = (float)v;
    }
}
