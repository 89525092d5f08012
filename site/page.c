#include "page.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

#include "links.h"
#include "markdown.h"
#include "status.h"

/* "../" once per folder of path, the way from a page back to the site's top */
static void to_top(char *out, const char *path)
{
    out[0] = '\0';
    for (const char *p = path; *p; p++)
        if (*p == '/') strcat(out, "../");
}

static void nav(cmark_strbuf *b, const char *top, const site_page *p)
{
    cmark_strbuf_puts(b, "<nav class=\"pager\">");
    if (p->prev_href) {
        site_printf(b, "<a class=\"prev\" href=\"%s%s\">← ", top, p->prev_href);
        site_escape(b, p->prev_title);
        cmark_strbuf_puts(b, "</a>");
    }
    if (p->next_href) {
        site_printf(b, "<a class=\"next\" href=\"%s%s\">", top, p->next_href);
        site_escape(b, p->next_title);
        cmark_strbuf_puts(b, " →</a>");
    }
    cmark_strbuf_puts(b, "</nav>\n");
}

int site_page_write(const site *s, const char *path, const site_page *p, const char *body)
{
    char top[SITE_PATH_MAX];
    to_top(top, path);
    cmark_strbuf b = site_buffer();
    cmark_strbuf_puts(&b, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
                          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>");
    site_escape(&b, p->title);
    cmark_strbuf_puts(&b, " · kvlineage</title>\n");
    /* an empty icon: otherwise a static host is asked for /favicon.ico, which it does not have */
    cmark_strbuf_puts(&b, "<link rel=\"icon\" href=\"data:,\">\n");
    site_printf(&b, "<link rel=\"stylesheet\" href=\"%sassets/katex/katex.min.css\">\n"
                    "<link rel=\"stylesheet\" href=\"%sassets/highlight/github.css\">\n"
                    "<link rel=\"stylesheet\" href=\"%sassets/site.css\">\n"
                    "<script defer src=\"%sassets/katex/katex.min.js\"></script>\n"
                    "<script defer src=\"%sassets/highlight/highlight.min.js\"></script>\n"
                    "<script defer src=\"%sassets/site.js\"></script>\n</head>\n<body>\n",
                top, top, top, top, top, top);
    site_printf(&b, "<header class=\"bar\"><a class=\"home\" href=\"%sindex.html\">kvlineage</a>"
                    "<a href=\"%ssources.html\">sources</a><a href=\"%sdisagreements.html\">disagreements</a>"
                    "<a href=\"%sglossary.html\">glossary</a></header>\n",
                top, top, top, top);
    nav(&b, top, p);
    cmark_strbuf_puts(&b, "<main>\n");
    cmark_strbuf_puts(&b, body);
    cmark_strbuf_puts(&b, "</main>\n<footer>");
    nav(&b, top, p);
    cmark_strbuf_puts(&b, "</footer>\n</body>\n</html>\n");
    int rc = site_write(s, path, b.ptr, (size_t)b.size);
    cmark_strbuf_free(&b);
    return rc;
}

/* highlight.js's name for a file's language, "" when it has none */
static const char *language_of(const char *path)
{
    static const char *const by_tail[][2] = {
        {".c", "c"}, {".h", "c"}, {".cu", "cpp"}, {".cuh", "cpp"}, {".cc", "cpp"}, {".py", "python"},
        {".json", "json"}, {".sh", "bash"}, {".md", "markdown"}, {"Makefile", "makefile"}, {".txt", ""},
    };
    for (size_t k = 0; k < sizeof by_tail / sizeof *by_tail; k++)
        if (site_ends_with(path, by_tail[k][0])) return by_tail[k][1];
    return "";
}

/* A Markdown file outside the course (a folder's README): rendered, its links made to work from
 * page, where it lands. */
static int markdown_page(site *s, const site_source *src, const char *page, cmark_strbuf *body)
{
    char top[SITE_PATH_MAX];
    to_top(top, page);
    site_anchors a = {0};
    site_md d;
    int rc = site_md_open_below(&d, s, src->path, top, 0, &a);
    if (rc == KVL_OK) {
        cmark_strbuf_puts(body, "<p class=\"source-note\">");
        site_escape(body, src->path);
        cmark_strbuf_puts(body, "</p>\n<article class=\"text\">\n");
        site_md_html(&d, NULL, body);
        cmark_strbuf_puts(body, "</article>\n");
        site_md_close(&d);
    }
    site_anchors_free(&a);
    return rc;
}

static int file_page(const site *s, const site_source *src, cmark_strbuf *body)
{
    char *text;
    KVL_TRY(site_read(s, src->path, &text));
    const char *lang = language_of(src->path);
    cmark_strbuf_puts(body, "<h1 class=\"source\">");
    site_escape(body, src->path);
    cmark_strbuf_puts(body, "</h1>\n<pre>");
    if (*lang) site_printf(body, "<code class=\"language-%s\">", lang);
    else cmark_strbuf_puts(body, "<code>");
    site_escape(body, text);
    cmark_strbuf_puts(body, "</code></pre>\n");
    free(text);
    return KVL_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A folder: its files, each linked to its own page (recorded in s), and its folders by name. */
static int folder_page(site *s, size_t k, cmark_strbuf *body)
{
    char full[SITE_PATH_MAX];
    snprintf(full, sizeof full, "%s/%s", s->root, s->sources[k].path);
    DIR *dir = opendir(full);
    if (!dir) return kvl_fail(KVL_EIO, "%s: cannot open the folder", full);
    char **names = NULL;
    size_t n = 0;
    int rc = KVL_OK;
    for (struct dirent *e; rc == KVL_OK && (e = readdir(dir));) {
        if (e->d_name[0] == '.') continue;
        char **grown = realloc(names, (n + 1) * sizeof *grown);
        if (!grown) rc = kvl_fail(KVL_ENOMEM, "out of memory");
        else (names = grown)[n++] = strdup(e->d_name);
    }
    closedir(dir);
    qsort(names, n, sizeof *names, by_name);
    cmark_strbuf_puts(body, "<h1 class=\"source\">");
    site_escape(body, s->sources[k].path);
    cmark_strbuf_puts(body, "/</h1>\n<ul class=\"listing\">\n");
    for (size_t i = 0; i < n && rc == KVL_OK; i++) {
        char path[SITE_PATH_MAX], *target = NULL;
        if (!names[i]) { rc = kvl_fail(KVL_ENOMEM, "out of memory"); break; }
        snprintf(path, sizeof path, "%s/%s", s->sources[k].path, names[i]);
        cmark_strbuf_puts(body, "<li>");
        if (site_exists(s, path) == 1 && (rc = site_link(s, "", path, &target)) == KVL_OK) {
            char top[SITE_PATH_MAX], self[SITE_PATH_MAX];
            if ((rc = site_source_page(self, s->sources[k].path, 1)) != KVL_OK) break;
            to_top(top, self);
            site_printf(body, "<a href=\"%s%s\">", top, target);
            site_escape(body, names[i]);
            cmark_strbuf_puts(body, "</a>");
        } else {
            site_escape(body, names[i]);
            cmark_strbuf_puts(body, "/");
        }
        free(target);
        cmark_strbuf_puts(body, "</li>\n");
    }
    cmark_strbuf_puts(body, "</ul>\n");
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

int site_sources_write(site *s)
{
    for (size_t k = 0; k < s->n_sources; k++) {   /* a folder's listing may record more */
        if (s->sources[k].written) continue;
        s->sources[k].written = 1;
        cmark_strbuf body = site_buffer();
        char page[SITE_PATH_MAX];
        const site_source src = s->sources[k];   /* a copy: rendering a page may record more, moving s->sources */
        int rc = site_source_page(page, src.path, src.is_dir);
        if (rc == KVL_OK) {
            rc = src.is_dir                          ? folder_page(s, k, &body)
                 : site_ends_with(src.path, ".md") ? markdown_page(s, &src, page, &body)
                                                   : file_page(s, &src, &body);
        }
        site_page p = {.title = src.path};
        if (rc == KVL_OK) rc = site_page_write(s, page, &p, cmark_strbuf_cstr(&body));
        cmark_strbuf_free(&body);
        KVL_TRY(rc);
    }
    return KVL_OK;
}
