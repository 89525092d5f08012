#include "course.h"

#include <cmark-gfm-core-extensions.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chapter.h"
#include "markdown.h"
#include "page.h"
#include "status.h"

/* The sections of README.md a student reads on the index, in the order it shows them (the course map
 * first); the rest (requirements, targets, layout) is for whoever builds the project. */
static const char *const INDEX_SECTIONS[] = {
    "The course", "What you will learn", "Before you start", "One chapter at a time", "Two commands",
};

static int is(cmark_node *n, const char *type)
{
    return n && !strcmp(cmark_node_get_type_string(n), type);
}

static cmark_node *cell(cmark_node *row, int k)
{
    cmark_node *c = cmark_node_first_child(row);
    while (c && k-- > 0) c = cmark_node_next(c);
    return c;
}

/* The column of the header row named name, or -1 */
static int column(cmark_node *header, const char *name)
{
    int k = 0;
    for (cmark_node *c = cmark_node_first_child(header); c; c = cmark_node_next(c), k++) {
        char *t = site_md_text(NULL, c);
        const int same = t && !strcasecmp(t, name);
        free(t);
        if (same) return k;
    }
    return -1;
}

static int chapters_table(cmark_node *t, int *col)
{
    cmark_node *header = cmark_node_first_child(t);
    if (!is(t, "table") || !is(header, "table_header")) return 0;
    const char *names[] = {"chapter", "mechanism", "time"};
    for (int k = 0; k < 3; k++)
        if ((col[k] = column(header, names[k])) < 0) return 0;
    return 1;
}

/* "chapters/02_mla/README.md" in the chapter cell's link → "02_mla" */
static char *chapter_dir(cmark_node *c)
{
    for (cmark_node *l = cmark_node_first_child(c); l; l = cmark_node_next(l)) {
        const char *url = cmark_node_get_type(l) == CMARK_NODE_LINK ? cmark_node_get_url(l) : "";
        if (strncmp(url, "chapters/", 9)) continue;
        const char *end = strchr(url + 9, '/');
        return end ? strndup(url + 9, (size_t)(end - url - 9)) : NULL;
    }
    return NULL;
}

static int add_row(site *s, cmark_node *row, const int *col)
{
    site_chapter *grown = realloc(s->chapters, (s->n_chapters + 1) * sizeof *grown);
    if (!grown) return kvl_fail(KVL_ENOMEM, "out of memory");
    s->chapters = grown;
    site_chapter *c = &s->chapters[s->n_chapters];
    *c = (site_chapter){.dir = chapter_dir(cell(row, col[0])), .teaches = site_md_text(NULL, cell(row, col[1])),
                        .time = site_md_text(NULL, cell(row, col[2]))};
    s->n_chapters++;
    if (!c->dir)
        return kvl_fail(KVL_EINVAL, "%s/README.md: a row of the table of chapters links no chapters/NN_name/ folder",
                        s->root);
    if (!c->teaches || !c->time) return kvl_fail(KVL_ENOMEM, "out of memory");
    char nb[SITE_PATH_MAX];
    snprintf(nb, sizeof nb, "%s/%s.md", s->notebooks, c->dir);
    c->has_notebook = site_exists(s, nb) == 1;
    return site_chapter_title(s, c->dir, &c->title);
}

int site_course_read(site *s)
{
    char *text;
    KVL_TRY(site_read(s, "README.md", &text));
    cmark_gfm_core_extensions_ensure_registered();
    cmark_parser *p = cmark_parser_new(CMARK_OPT_DEFAULT);
    cmark_parser_attach_syntax_extension(p, cmark_find_syntax_extension("table"));
    cmark_parser_feed(p, text, strlen(text));
    free(text);
    cmark_node *doc = cmark_parser_finish(p);
    int col[3], rc = KVL_OK, found = 0;
    for (cmark_node *t = cmark_node_first_child(doc); t && !found; t = cmark_node_next(t)) {
        if (!chapters_table(t, col)) continue;
        found = 1;
        for (cmark_node *r = cmark_node_next(cmark_node_first_child(t)); r && rc == KVL_OK; r = cmark_node_next(r))
            rc = add_row(s, r, col);
    }
    cmark_node_free(doc);
    cmark_parser_free(p);
    if (rc == KVL_OK && !found)
        rc = kvl_fail(KVL_EINVAL, "%s/README.md: no table of chapters (columns chapter, mechanism, time)", s->root);
    return rc;
}

void site_course_free(site *s)
{
    for (size_t k = 0; k < s->n_chapters; k++) {
        free(s->chapters[k].dir);
        free(s->chapters[k].title);
        free(s->chapters[k].teaches);
        free(s->chapters[k].time);
    }
    free(s->chapters);
    s->chapters = NULL;
    s->n_chapters = 0;
}

static void course_map(const site *s, cmark_strbuf *b)
{
    cmark_strbuf_puts(b, "<ol class=\"course-map\">\n");
    for (size_t k = 0; k < s->n_chapters; k++) {
        const site_chapter *c = &s->chapters[k];
        site_printf(b, "<li><a class=\"chapter\" href=\"%s.html\">", c->dir);
        site_escape(b, c->title);
        cmark_strbuf_puts(b, "</a>\n<p class=\"teaches\">");
        site_escape(b, c->teaches);
        cmark_strbuf_puts(b, "</p>\n<p class=\"meta\"><span class=\"time\">");
        site_escape(b, c->time);
        site_printf(b, "</span> · %s · <a href=\"%s.html#exercises\">exercises</a></p></li>\n",
                    c->has_notebook ? "text, notebook" : "text", c->dir);
    }
    cmark_strbuf_puts(b, "</ol>\n");
}

/* Append the HTML of the README's opening (before its first section) when section is NULL, else of
 * the section headed `section`, its table of chapters drawn as the course map. */
static void index_part(const site *s, const site_md *d, const char *section, cmark_strbuf *body)
{
    int keep = section == NULL, col[3];
    for (cmark_node *c = cmark_node_first_child(d->doc); c; c = cmark_node_next(c)) {
        if (cmark_node_get_type(c) == CMARK_NODE_HEADING && cmark_node_get_heading_level(c) == 2) {
            char *t = section ? site_md_text(d, c) : NULL;
            keep = t && !strcmp(t, section);
            free(t);
        }
        if (!keep) continue;
        if (chapters_table(c, col)) course_map(s, body);
        else site_md_html(d, c, body);
    }
}

int site_index_write(site *s)
{
    site_anchors a = {0};
    site_md d;
    KVL_TRY(site_md_open(&d, s, "README.md", 0, &a));
    cmark_strbuf body = site_buffer();
    index_part(s, &d, NULL, &body);
    for (size_t k = 0; k < sizeof INDEX_SECTIONS / sizeof *INDEX_SECTIONS; k++) index_part(s, &d, INDEX_SECTIONS[k], &body);
    site_md_close(&d);
    site_anchors_free(&a);
    site_page p = {.title = "the course"};
    char next[SITE_PATH_MAX];
    if (s->n_chapters) {
        snprintf(next, sizeof next, "%s.html", s->chapters[0].dir);
        p.next_href = next, p.next_title = s->chapters[0].title;
    }
    int rc = site_page_write(s, "index.html", &p, cmark_strbuf_cstr(&body));
    cmark_strbuf_free(&body);
    return rc;
}
