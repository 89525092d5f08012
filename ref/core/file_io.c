#include "file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "status.h"

/* ---- the inputs of this run ------------------------------------------------------------------ */

typedef struct {
    dev_t dev;
    ino_t ino;
    char *role;
} input_file;

/* Every input named or opened so far; a mutex since loaders may open files on several threads. */
static struct {
    pthread_mutex_t lock;
    input_file *v;
    size_t n, cap;
    int tracking;
} inputs = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Add st's file under role unless it is there already (the first role given is kept). Out of
 * memory, the file goes unrecorded: the input is still read, only this one refusal is lost. */
static void note_input(const struct stat *st, const char *role)
{
    pthread_mutex_lock(&inputs.lock);
    size_t i = 0;
    while (i < inputs.n && (inputs.v[i].dev != st->st_dev || inputs.v[i].ino != st->st_ino)) i++;
    if (i == inputs.n && inputs.n == inputs.cap) {
        size_t cap = inputs.cap ? 2 * inputs.cap : 16;
        input_file *v = realloc(inputs.v, cap * sizeof *v);
        if (v) inputs.v = v, inputs.cap = cap;
    }
    char *copy = i == inputs.n && inputs.n < inputs.cap ? strdup(role) : NULL;
    if (copy) inputs.v[inputs.n++] = (input_file){st->st_dev, st->st_ino, copy};
    pthread_mutex_unlock(&inputs.lock);
}

void kvl_file_input(const char *path, const char *role)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) note_input(&st, role);
}

void kvl_file_track_inputs(void)
{
    pthread_mutex_lock(&inputs.lock);
    inputs.tracking = 1;
    pthread_mutex_unlock(&inputs.lock);
}

/* KVL_EIO naming path when st is an input of this run. */
static int refuse_input(const struct stat *st, const char *path)
{
    pthread_mutex_lock(&inputs.lock);
    char role[256] = "";
    for (size_t i = 0; i < inputs.n && !*role; i++)
        if (inputs.v[i].dev == st->st_dev && inputs.v[i].ino == st->st_ino)
            snprintf(role, sizeof role, "%s", inputs.v[i].role);
    pthread_mutex_unlock(&inputs.lock);
    return *role ? kvl_fail(KVL_EIO, "%s: is also an input of this run (%s)", path, role) : KVL_OK;
}

/* ---- in -------------------------------------------------------------------------------------- */

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
    pthread_mutex_lock(&inputs.lock);
    const int tracking = inputs.tracking;
    pthread_mutex_unlock(&inputs.lock);
    if (tracking) note_input(&after, path);
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

/* ---- out ------------------------------------------------------------------------------------- */

typedef enum { OUT_NEW, OUT_REPLACE, OUT_THROUGH, OUT_STDOUT } out_way;

/* KVL_OK when the directory that would hold a new file at path exists and may be written; a
 * refusal names `named`, the path the caller gave. */
static int check_new(const char *path, const char *named)
{
    char *copy = strdup(path);
    if (!copy) return kvl_fail(KVL_ENOMEM, "%s: out of memory", path);
    const char *dir = dirname(copy);
    struct stat st;
    int e = stat(dir, &st) != 0 ? errno : !S_ISDIR(st.st_mode) ? ENOTDIR
                                        : access(dir, W_OK | X_OK) != 0 ? errno : 0;
    free(copy);
    return e ? kvl_fail(KVL_EIO, "%s: cannot create: %s", named, strerror(e)) : KVL_OK;
}

/* KVL_OK when the regular file path names (through links) may be replaced beside itself. */
static int check_replace(const char *path)
{
    char *real = realpath(path, NULL);
    if (!real) return kvl_fail(KVL_EIO, "%s: cannot resolve: %s", path, strerror(errno));
    int rc = check_new(real, path);
    free(real);
    return rc;
}

/* How the rule writes path (file_io.h), without touching it; *st what path names when it exists. */
static int out_way_of(out_way *way, struct stat *st, const char *path)
{
    struct stat link;
    if (lstat(path, &link) != 0) {
        if (errno != ENOENT)
            return kvl_fail(KVL_EIO, "%s: cannot create: %s", path, strerror(errno));
        *way = OUT_NEW;
        return check_new(path, path);
    }
    if (stat(path, st) != 0)
        return kvl_fail(KVL_EIO, "%s: a symbolic link to nothing (%s)", path, strerror(errno));
    if (S_ISDIR(st->st_mode)) return kvl_fail(KVL_EIO, "%s: is a directory", path);
    if (S_ISSOCK(st->st_mode)) return kvl_fail(KVL_EIO, "%s: is a socket", path);
    if (S_ISBLK(st->st_mode)) return kvl_fail(KVL_EIO, "%s: is a block device", path);
    if (!S_ISREG(st->st_mode) && !S_ISCHR(st->st_mode) && !S_ISFIFO(st->st_mode))
        return kvl_fail(KVL_EIO, "%s: not a file that can be written", path);
    KVL_TRY(refuse_input(st, path));
    struct stat out;
    if (fstat(STDOUT_FILENO, &out) == 0 && out.st_dev == st->st_dev && out.st_ino == st->st_ino) {
        *way = OUT_STDOUT;
        return KVL_OK;
    }
    *way = S_ISREG(st->st_mode) ? OUT_REPLACE : OUT_THROUGH;
    if (*way == OUT_REPLACE) return check_replace(path);   /* a rename needs only the directory */
    return access(path, W_OK) == 0 ? KVL_OK
                                   : kvl_fail(KVL_EIO, "%s: cannot write: %s", path, strerror(errno));
}

int kvl_file_out_check(const char *path)
{
    out_way way;
    struct stat st;
    return out_way_of(&way, &st, path);
}

/* o->fp = the device or FIFO at path itself, if it is still the file st describes. */
static int open_through(kvl_file_out *o, const char *path, const struct stat *st)
{
    int fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 && errno == ENXIO) return kvl_fail(KVL_EIO, "%s: a FIFO with no reader", path);
    if (fd < 0) return kvl_fail(KVL_EIO, "%s: cannot write: %s", path, strerror(errno));
    struct stat now;
    int flags = fcntl(fd, F_GETFL);
    /* blocking from here on: a slow reader is waited for, not an EAGAIN */
    if (fstat(fd, &now) != 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino ||
        flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 || !(o->fp = fdopen(fd, "wb"))) {
        close(fd);
        return kvl_fail(KVL_EIO, "%s: changed while it was opened, or cannot write", path);
    }
    return KVL_OK;
}

/* o->fp = a second stream on stdout's descriptor, after what stdout holds so far. */
static int open_stdout(kvl_file_out *o, const char *path)
{
    fflush(stdout);
    int fd = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 0);
    if (fd >= 0 && (o->fp = fdopen(fd, "wb"))) return KVL_OK;
    int e = errno;
    if (fd >= 0) close(fd);
    return kvl_fail(KVL_EIO, "%s: cannot write: %s", path, strerror(e));
}

/* o->fp = a new temporary beside o->dest. */
static int open_temporary(kvl_file_out *o, const char *path)
{
    size_t cap = strlen(o->dest) + 32;
    if (!(o->tmp = malloc(cap))) return kvl_fail(KVL_ENOMEM, "%s: out of memory", path);
    snprintf(o->tmp, cap, "%s.tmp.%ld", o->dest, (long)getpid());
    int fd = open(o->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    o->fp = fd < 0 ? NULL : fdopen(fd, "wb");
    if (o->fp) return KVL_OK;
    int e = errno;
    if (fd >= 0) {
        close(fd);
        unlink(o->tmp);
    }
    return kvl_fail(KVL_EIO, "%s: cannot create: %s", path, strerror(e));
}

int kvl_file_out_open(kvl_file_out *o, const char *path)
{
    memset(o, 0, sizeof *o);
    o->path = path;
    out_way way;
    struct stat st;
    KVL_TRY(out_way_of(&way, &st, path));
    if (way == OUT_STDOUT) return open_stdout(o, path);
    if (way == OUT_THROUGH) return open_through(o, path, &st);
    /* a link is replaced at what it names, so that the link itself stays */
    o->dest = way == OUT_REPLACE ? realpath(path, NULL) : strdup(path);
    int rc = o->dest ? open_temporary(o, path) : kvl_fail(KVL_EIO, "%s: cannot resolve: %s", path,
                                                          strerror(errno));
    if (rc != KVL_OK) {
        free(o->tmp);
        free(o->dest);
        o->tmp = o->dest = NULL;
    }
    return rc;
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
    if (!o->err && o->tmp && rename(o->tmp, o->dest) != 0) o->err = errno;
    int e = o->err;
    if (e && o->tmp) unlink(o->tmp);
    free(o->tmp);
    free(o->dest);
    o->tmp = o->dest = NULL;
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
