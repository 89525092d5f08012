/* Reading the project, writing the site, and the path arithmetic of links. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "file_io.h"
#include "site.h"
#include "status.h"

cmark_strbuf site_buffer(void)
{
    cmark_strbuf b;
    cmark_strbuf_init(cmark_get_default_mem_allocator(), &b, 0);
    return b;
}

int site_ends_with(const char *s, const char *tail)
{
    const size_t n = strlen(s), t = strlen(tail);
    return n >= t && !strcmp(s + n - t, tail);
}

void site_escape(cmark_strbuf *b, const char *text)
{
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '&': cmark_strbuf_puts(b, "&amp;"); break;
        case '<': cmark_strbuf_puts(b, "&lt;"); break;
        case '>': cmark_strbuf_puts(b, "&gt;"); break;
        case '"': cmark_strbuf_puts(b, "&quot;"); break;
        default: cmark_strbuf_putc(b, *p);
        }
    }
}

void site_printf(cmark_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[512];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof small) {
        cmark_strbuf_put(b, (const unsigned char *)small, n);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (!big) abort();   /* as cmark's own allocator does */
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    cmark_strbuf_put(b, (const unsigned char *)big, n);
    free(big);
}

static int project_path(char *full, const site *s, const char *path)
{
    if ((size_t)snprintf(full, SITE_PATH_MAX, "%s/%s", s->root, path) >= SITE_PATH_MAX)
        return kvl_fail(KVL_EINVAL, "%s/%s: path too long", s->root, path);
    return KVL_OK;
}

int site_read(const site *s, const char *path, char **text)
{
    char full[SITE_PATH_MAX];
    size_t n;
    KVL_TRY(project_path(full, s, path));
    return kvl_file_read_all(text, &n, full, SITE_READ_MAX);
}

int site_exists(const site *s, const char *path)
{
    char full[SITE_PATH_MAX];
    struct stat st;
    if (project_path(full, s, path) != KVL_OK || stat(full, &st) != 0) return 0;
    return S_ISREG(st.st_mode) ? 1 : S_ISDIR(st.st_mode) ? 2 : 0;
}

/* mkdir -p of the folders above path */
static int make_parents(const char *path)
{
    char dir[SITE_PATH_MAX];
    if ((size_t)snprintf(dir, sizeof dir, "%s", path) >= sizeof dir) return kvl_fail(KVL_EINVAL, "%s: path too long", path);
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(dir, 0777) != 0 && errno != EEXIST) return kvl_fail(KVL_EIO, "%s: cannot create: %s", dir, strerror(errno));
        *p = '/';
    }
    return KVL_OK;
}

static int write_failed;

int site_write_failed(void)
{
    return write_failed;
}

int site_write(const site *s, const char *path, const void *data, size_t n)
{
    char full[SITE_PATH_MAX];
    if ((size_t)snprintf(full, sizeof full, "%s/%s", s->out, path) >= sizeof full)
        return kvl_fail(KVL_EINVAL, "%s/%s: path too long", s->out, path);
    kvl_file_out o;
    int rc = make_parents(full);
    if (rc == KVL_OK) rc = kvl_file_out_open(&o, full);
    if (rc == KVL_OK) {
        kvl_file_out_write(&o, data, n);
        rc = kvl_file_out_commit(&o);
    }
    write_failed |= rc != KVL_OK;
    return rc;
}

int site_copy(const site *s, const char *path, const char *target)
{
    char full[SITE_PATH_MAX], *bytes;
    size_t n;
    KVL_TRY(project_path(full, s, path));
    KVL_TRY(kvl_file_read_all(&bytes, &n, full, SITE_READ_MAX));
    int rc = site_write(s, target, bytes, n);
    free(bytes);
    return rc;
}

void site_path_dir(char *out, const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash ? (size_t)(slash - path) : 0;
    memcpy(out, path, n);
    out[n] = '\0';
}

int site_path_join(char *out, const char *dir, const char *rel)
{
    char joined[SITE_PATH_MAX];
    if ((size_t)snprintf(joined, sizeof joined, "%s%s%s", dir, *dir ? "/" : "", rel) >= sizeof joined)
        return kvl_fail(KVL_EINVAL, "%s/%s: path too long", dir, rel);
    size_t len = 0;
    out[0] = '\0';
    for (char *save = NULL, *seg = strtok_r(joined, "/", &save); seg; seg = strtok_r(NULL, "/", &save)) {
        if (!strcmp(seg, ".")) continue;
        if (!strcmp(seg, "..")) {
            if (len == 0) return kvl_fail(KVL_EINVAL, "%s: climbs out of the project", rel);
            while (len > 0 && out[len - 1] != '/') len--;
            len = len ? len - 1 : 0;
            out[len] = '\0';
            continue;
        }
        len += (size_t)sprintf(out + len, "%s%s", len ? "/" : "", seg);
    }
    return KVL_OK;
}
