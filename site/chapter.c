#include "chapter.h"

#include <stdlib.h>
#include <string.h>

#include "markdown.h"
#include "page.h"
#include "status.h"

int site_chapter_title(site *s, const char *dir, char **title)
{
    char path[SITE_PATH_MAX];
    snprintf(path, sizeof path, "chapters/%s/README.md", dir);
    site_anchors a = {0};
    site_md d;
    int rc = site_md_open(&d, s, path, 0, &a);
    cmark_node *h = rc == KVL_OK ? site_md_heading(&d, 1) : NULL;
    if (rc == KVL_OK && !h) rc = kvl_fail(KVL_EINVAL, "%s/%s: no title (a first-level heading)", s->root, path);
    if (rc == KVL_OK && !(*title = site_md_text(&d, h))) rc = kvl_fail(KVL_ENOMEM, "out of memory");
    if (d.doc) site_md_close(&d);
    site_anchors_free(&a);
    return rc;
}

/* The section a heading opens: the nodes after it up to the next heading of its level or above. */
static cmark_node *section_end(cmark_node *heading)
{
    const int level = cmark_node_get_heading_level(heading);
    cmark_node *c = cmark_node_next(heading);
    while (c && !(cmark_node_get_type(c) == CMARK_NODE_HEADING && cmark_node_get_heading_level(c) <= level))
        c = cmark_node_next(c);
    return c;
}

static void html_range(const site_md *d, cmark_node *from, cmark_node *to, cmark_strbuf *out)
{
    for (cmark_node *c = from; c && c != to; c = cmark_node_next(c)) site_md_html(d, c, out);
}

/* The heading of sol whose text is `text` and that no exercise has claimed yet, or NULL. */
static cmark_node *solution_for(const site_md *sol, const char *text, const unsigned char *used, cmark_node **nodes,
                                size_t n, size_t *which)
{
    for (size_t k = 0; k < n; k++) {
        char *t = used[k] ? NULL : site_md_text(sol, nodes[k]);
        const int same = t && !strcmp(t, text);
        free(t);
        if (same) return *which = k, nodes[k];
    }
    return NULL;
}

static void solution(const site_md *sol, cmark_node *h, const char *summary, cmark_strbuf *out)
{
    /* the anchor solutions.md#... points at: the heading's own, kept on the folded block */
    const char *anchor = cmark_node_get_literal(cmark_node_first_child(h));
    const char *id = strstr(anchor, "id=\"");
    cmark_strbuf_puts(out, "<details class=\"solution\"");
    if (id) {
        const char *end = strchr(id + 4, '"');
        cmark_strbuf_puts(out, " ");
        cmark_strbuf_put(out, (const unsigned char *)id, (bufsize_t)(end - id + 1));
    }
    cmark_strbuf_puts(out, "><summary>");
    site_escape(out, summary);
    cmark_strbuf_puts(out, "</summary>\n");
    html_range(sol, cmark_node_next(h), section_end(h), out);
    cmark_strbuf_puts(out, "</details>\n");
}

/* The headings that open sol's solutions: those of the level its first one below the title has. */
static size_t solution_headings(const site_md *sol, cmark_node ***out)
{
    int level = 0;
    size_t n = 0;
    for (cmark_node *c = cmark_node_first_child(sol->doc); c; c = cmark_node_next(c)) {
        if (cmark_node_get_type(c) != CMARK_NODE_HEADING || c == site_md_heading(sol, 1)) continue;
        if (!level) level = cmark_node_get_heading_level(c);
        if (cmark_node_get_heading_level(c) != level) continue;
        cmark_node **grown = realloc(*out, (n + 1) * sizeof *grown);
        if (!grown) abort();   /* as cmark's own allocator does */
        (*out = grown)[n++] = c;
    }
    return n;
}

/* Exercises with their solutions: each exercise's section, then its solution folded; the solutions'
 * preamble (how they are worked) folded after the exercises' own; a solution no exercise names, last. */
static void exercises_html(const site_md *ex, const site_md *sol, cmark_strbuf *out)
{
    cmark_node **heads = NULL;
    const size_t n = solution_headings(sol, &heads);
    unsigned char *used = calloc(n + 1, 1);
    if (!used) abort();
    cmark_node *first_ex = NULL;
    for (cmark_node *c = cmark_node_first_child(ex->doc); c && !first_ex; c = cmark_node_next(c))
        if (cmark_node_get_type(c) == CMARK_NODE_HEADING && c != site_md_heading(ex, 1)) first_ex = c;
    html_range(ex, cmark_node_first_child(ex->doc), first_ex, out);
    cmark_node *sol_first = n ? heads[0] : NULL, *sol_title = site_md_heading(sol, 1);
    cmark_node *pre = sol_title ? cmark_node_next(sol_title) : cmark_node_first_child(sol->doc);
    if (pre && pre != sol_first) {
        cmark_strbuf_puts(out, "<details class=\"solution\"><summary>How the solutions are worked</summary>\n");
        html_range(sol, pre, sol_first, out);
        cmark_strbuf_puts(out, "</details>\n");
    }
    for (cmark_node *h = first_ex; h;) {
        cmark_node *end = section_end(h);
        html_range(ex, h, end, out);
        char *text = site_md_text(ex, h);
        size_t k;
        cmark_node *s = text ? solution_for(sol, text, used, heads, n, &k) : NULL;
        if (s) used[k] = 1, solution(sol, s, "Solution", out);
        free(text);
        h = end;
    }
    for (size_t k = 0; k < n; k++) {
        if (used[k]) continue;
        char *text = site_md_text(sol, heads[k]), summary[SITE_PATH_MAX];
        snprintf(summary, sizeof summary, "Solution: %s", text ? text : "");
        solution(sol, heads[k], summary, out);
        free(text);
    }
    free(used);
    free(heads);
}

static int chapter_body(site *s, const site_chapter *c, cmark_strbuf *body)
{
    char path[SITE_PATH_MAX];
    site_anchors a = {0};
    site_md text = {0}, nb = {0}, ex = {0}, sol = {0};
    int rc = KVL_OK;
    const char *sections[] = {"notebook", "exercises"};
    for (size_t k = 0; k < 2 && rc == KVL_OK; k++)
        if (!site_anchor(&a, sections[k])) rc = kvl_fail(KVL_ENOMEM, "out of memory");
    snprintf(path, sizeof path, "chapters/%s/README.md", c->dir);
    if (rc == KVL_OK) rc = site_md_open(&text, s, path, 0, &a);
    snprintf(path, sizeof path, "%s/%s.md", s->notebooks, c->dir);
    if (rc == KVL_OK && c->has_notebook) rc = site_md_open(&nb, s, path, 1, &a);
    snprintf(path, sizeof path, "chapters/%s/exercises.md", c->dir);
    if (rc == KVL_OK) rc = site_md_open(&ex, s, path, 1, &a);
    snprintf(path, sizeof path, "chapters/%s/solutions.md", c->dir);
    if (rc == KVL_OK) rc = site_md_open(&sol, s, path, 1, &a);
    if (rc == KVL_OK) {
        cmark_strbuf_puts(body, "<nav class=\"contents\"><a href=\"#\">text</a> · <a href=\"#notebook\">notebook</a> · "
                                "<a href=\"#exercises\">exercises</a></nav>\n<article class=\"text\">\n");
        site_md_html(&text, NULL, body);
        cmark_strbuf_puts(body, "</article>\n<section id=\"notebook\" class=\"notebook\">\n");
        if (c->has_notebook) site_md_html(&nb, NULL, body);
        else cmark_strbuf_puts(body, "<h2>Notebook</h2>\n<p>This chapter has no notebook yet.</p>\n");
        cmark_strbuf_puts(body, "</section>\n<section id=\"exercises\" class=\"exercises\">\n");
        exercises_html(&ex, &sol, body);
        cmark_strbuf_puts(body, "</section>\n");
    }
    site_md *docs[] = {&text, &nb, &ex, &sol};
    for (size_t k = 0; k < 4; k++)
        if (docs[k]->doc) site_md_close(docs[k]);
    site_anchors_free(&a);
    return rc;
}

int site_chapter_write(site *s, size_t k)
{
    const site_chapter *c = &s->chapters[k];
    char page[SITE_PATH_MAX], prev[SITE_PATH_MAX], next[SITE_PATH_MAX];
    snprintf(page, sizeof page, "%s.html", c->dir);
    site_page p = {.title = c->title, .prev_href = "index.html", .prev_title = "the course"};
    if (k > 0) {
        snprintf(prev, sizeof prev, "%s.html", s->chapters[k - 1].dir);
        p.prev_href = prev, p.prev_title = s->chapters[k - 1].title;
    }
    snprintf(next, sizeof next, "%s.html", k + 1 < s->n_chapters ? s->chapters[k + 1].dir : "sources");
    p.next_href = next, p.next_title = k + 1 < s->n_chapters ? s->chapters[k + 1].title : "sources";
    cmark_strbuf body = site_buffer();
    int rc = chapter_body(s, c, &body);
    if (rc == KVL_OK) rc = site_page_write(s, page, &p, cmark_strbuf_cstr(&body));
    cmark_strbuf_free(&body);
    return rc;
}
