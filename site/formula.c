#include "formula.h"

#include <stdlib.h>
#include <string.h>

#define PLACEHOLDER "KVLMATH"

/* Length of the run of c at p. */
static size_t run(const char *p, char c)
{
    size_t n = 0;
    while (p[n] == c) n++;
    return n;
}

static int at_line_start(const char *md, const char *p)
{
    return p == md || p[-1] == '\n';
}

/* A fence opening at p (up to three spaces, then three or more ` or ~): its length, else 0. */
static size_t fence_at(const char *p, char *c)
{
    size_t indent = run(p, ' ');
    if (indent > 3 || (p[indent] != '`' && p[indent] != '~')) return 0;
    *c = p[indent];
    size_t n = run(p + indent, *c);
    return n >= 3 ? n : 0;
}

/* The end of the fenced block opened at p (past its closing line, or the end of the text). */
static const char *fence_end(const char *p, char c, size_t len)
{
    const char *line = strchr(p, '\n');
    while (line) {
        line++;
        char k;
        if (fence_at(line, &k) >= len && k == c) {
            const char *nl = strchr(line, '\n');
            return nl ? nl + 1 : line + strlen(line);
        }
        line = strchr(line, '\n');
    }
    return p + strlen(p);
}

/* The next "\n\n" (a paragraph's end) after p, or the text's end. */
static const char *paragraph_end(const char *p)
{
    const char *e = strstr(p, "\n\n");
    return e ? e : p + strlen(p);
}

/* The end of the code span opened by n backticks at p: past its closing run, or NULL when none closes
 * it within the paragraph. */
static const char *code_span_end(const char *p, size_t n)
{
    const char *limit = paragraph_end(p);
    for (const char *q = p + n; q < limit;) {
        size_t k = run(q, '`');
        if (k == n) return q + k;
        q += k ? k : 1;
    }
    return NULL;
}

/* The closing delimiter of a formula whose body starts at p, or NULL. */
static const char *formula_end(const char *p, int display)
{
    const char *limit = paragraph_end(p);
    for (const char *q = p; q < limit; q++) {
        if (*q == '\\' && q[1]) { q++; continue; }
        if (*q != '$') continue;
        if (display) {
            if (q[1] == '$' && q > p) return q;
            continue;
        }
        if (q > p && q[-1] != ' ' && q[-1] != '\n' && !(q[1] >= '0' && q[1] <= '9')) return q;
    }
    return NULL;
}

static void record(site_math *m, cmark_strbuf *out, const char *from, size_t n)
{
    char **grown = realloc(m->tex, (m->n + 1) * sizeof *grown);
    char *tex = strndup(from, n);
    if (!grown || !tex) abort();   /* as cmark's own allocator does */
    m->tex = grown;
    m->tex[m->n] = tex;
    site_printf(out, PLACEHOLDER "%zuX", m->n++);
}

void site_math_protect(site_math *m, cmark_strbuf *out, const char *md)
{
    *m = (site_math){0};
    for (const char *p = md; *p;) {
        char fc;
        size_t len;
        if (at_line_start(md, p) && (len = fence_at(p, &fc)) > 0) {
            const char *e = fence_end(p, fc, len);
            cmark_strbuf_put(out, (const unsigned char *)p, (bufsize_t)(e - p));
            p = e;
            continue;
        }
        if (*p == '\\' && p[1]) {
            cmark_strbuf_put(out, (const unsigned char *)p, 2);
            p += 2;
            continue;
        }
        if (*p == '`') {
            size_t n = run(p, '`');
            const char *e = code_span_end(p, n);
            if (!e) e = p + n;
            cmark_strbuf_put(out, (const unsigned char *)p, (bufsize_t)(e - p));
            p = e;
            continue;
        }
        if (*p == '$') {
            const int display = p[1] == '$';
            const char *body = p + (display ? 2 : 1);
            const char *e = *body != ' ' && *body != '\n' && *body ? formula_end(body, display) : NULL;
            if (e) {
                const char *after = e + (display ? 2 : 1);
                record(m, out, p, (size_t)(after - p));
                p = after;
                continue;
            }
        }
        cmark_strbuf_putc(out, *p++);
    }
}

void site_math_restore(const site_math *m, cmark_strbuf *out, const char *html)
{
    const size_t plen = strlen(PLACEHOLDER);
    for (const char *p = html; *p;) {
        char *end;
        unsigned long k;
        if (!strncmp(p, PLACEHOLDER, plen) && p[plen] >= '0' && p[plen] <= '9' &&
            (k = strtoul(p + plen, &end, 10)) < m->n && *end == 'X') {
            const int display = m->tex[k][1] == '$';
            cmark_strbuf_puts(out, display ? "<span class=\"math display\">" : "<span class=\"math inline\">");
            site_escape(out, m->tex[k]);
            cmark_strbuf_puts(out, "</span>");
            p = end + 1;
            continue;
        }
        cmark_strbuf_putc(out, *p++);
    }
}

void site_math_free(site_math *m)
{
    for (size_t k = 0; k < m->n; k++) free(m->tex[k]);
    free(m->tex);
    *m = (site_math){0};
}
