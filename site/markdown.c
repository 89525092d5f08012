#include "markdown.h"

#include <cmark-gfm-core-extensions.h>
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "links.h"
#include "status.h"

/* Raw HTML passes: the course's text is the project's own, and nb_ipynb heads its rendering with a comment. */
static const int OPTIONS = CMARK_OPT_UNSAFE;

const char *site_anchor(site_anchors *a, const char *id)
{
    char **grown = realloc(a->ids, (a->n + 1) * sizeof *grown);
    if (!grown) return NULL;
    a->ids = grown;
    return a->ids[a->n] = strdup(id), a->ids[a->n] ? a->ids[a->n++] : NULL;
}

void site_anchors_free(site_anchors *a)
{
    for (size_t k = 0; k < a->n; k++) free(a->ids[k]);
    free(a->ids);
    *a = (site_anchors){0};
}

static int taken(const site_anchors *a, const char *id)
{
    for (size_t k = 0; k < a->n; k++)
        if (!strcmp(a->ids[k], id)) return 1;
    return 0;
}

/* GitHub's anchor of a heading's text, after prefix, made unique in a. Bytes beyond ASCII are dropped:
 * in the course's headings they are symbols (·, →, …), which GitHub drops too. */
static const char *heading_anchor(site_anchors *a, const char *prefix, const char *text)
{
    char id[SITE_PATH_MAX], unique[SITE_PATH_MAX + 16];
    size_t n = (size_t)snprintf(id, sizeof id, "%s", prefix);
    for (const unsigned char *p = (const unsigned char *)text; *p && n + 1 < sizeof id; p++) {
        if (isalnum(*p) && *p < 128) id[n++] = (char)tolower(*p);
        else if (*p == ' ' || *p == '-') id[n++] = '-';
        else if (*p == '_') id[n++] = '_';
    }
    id[n] = '\0';
    snprintf(unique, sizeof unique, "%s", id);
    for (int k = 1; taken(a, unique); k++) snprintf(unique, sizeof unique, "%s-%d", id, k);
    return site_anchor(a, unique);
}

/* The formula a placeholder stands for, appended to b; the text as it is otherwise. */
static void text_with_math(const site_md *d, cmark_strbuf *b, const char *literal)
{
    if (!d) {
        cmark_strbuf_puts(b, literal);
        return;
    }
    cmark_strbuf html = site_buffer();
    site_math_restore(&d->math, &html, literal);
    /* the spans restore wraps around each formula carry no text of their own: drop the tags */
    int in_tag = 0;
    for (const char *p = cmark_strbuf_cstr(&html); *p; p++) {
        if (*p == '<') in_tag = 1;
        else if (*p == '>') in_tag = 0;
        else if (!in_tag) cmark_strbuf_putc(b, *p);
    }
    cmark_strbuf_free(&html);
}

char *site_md_text(const site_md *d, cmark_node *n)
{
    cmark_strbuf b = site_buffer();
    cmark_iter *it = cmark_iter_new(n);
    for (cmark_event_type ev; (ev = cmark_iter_next(it)) != CMARK_EVENT_DONE;) {
        cmark_node *c = cmark_iter_get_node(it);
        const cmark_node_type t = cmark_node_get_type(c);
        if (ev == CMARK_EVENT_ENTER && (t == CMARK_NODE_TEXT || t == CMARK_NODE_CODE))
            text_with_math(d, &b, cmark_node_get_literal(c));
        else if (ev == CMARK_EVENT_ENTER && (t == CMARK_NODE_SOFTBREAK || t == CMARK_NODE_LINEBREAK))
            cmark_strbuf_putc(&b, ' ');
    }
    cmark_iter_free(it);
    char *text = strdup(cmark_strbuf_cstr(&b));
    cmark_strbuf_free(&b);
    return text;
}

cmark_node *site_md_heading(const site_md *d, int level)
{
    const int now = level + d->demote > 6 ? 6 : level + d->demote;
    for (cmark_node *c = cmark_node_first_child(d->doc); c; c = cmark_node_next(c))
        if (cmark_node_get_type(c) == CMARK_NODE_HEADING && cmark_node_get_heading_level(c) == now) return c;
    return NULL;
}

/* The links and images of the document, pointed at the site from a page `top` below its top folder. */
static int rewrite_links(site_md *d, site *s, const char *top)
{
    int rc = KVL_OK;
    cmark_iter *it = cmark_iter_new(d->doc);
    for (cmark_event_type ev; rc == KVL_OK && (ev = cmark_iter_next(it)) != CMARK_EVENT_DONE;) {
        cmark_node *c = cmark_iter_get_node(it);
        const cmark_node_type t = cmark_node_get_type(c);
        if (ev != CMARK_EVENT_ENTER || (t != CMARK_NODE_LINK && t != CMARK_NODE_IMAGE)) continue;
        char *target;
        rc = site_link(s, d->path, cmark_node_get_url(c), &target);
        if (rc == KVL_OK && *top && target[0] != '#' && !strstr(target, "://") && strncmp(target, "mailto:", 7)) {
            cmark_strbuf up = site_buffer();
            site_printf(&up, "%s%s", top, target);
            cmark_node_set_url(c, cmark_strbuf_cstr(&up));
            cmark_strbuf_free(&up);
        } else if (rc == KVL_OK) {
            cmark_node_set_url(c, target);
        }
        free(target);
    }
    cmark_iter_free(it);
    return rc;
}

/* Headings demoted, each opened by an empty anchor carrying its id: cmark renders no attributes, so
 * the id rides on an inline HTML node inside the heading. */
static int anchor_headings(site_md *d, site *s, int demote, site_anchors *a)
{
    const char *prefix = site_anchor_prefix(s, d->path);
    cmark_iter *it = cmark_iter_new(d->doc);
    int rc = KVL_OK;
    for (cmark_event_type ev; rc == KVL_OK && (ev = cmark_iter_next(it)) != CMARK_EVENT_DONE;) {
        cmark_node *h = cmark_iter_get_node(it);
        if (ev != CMARK_EVENT_EXIT || cmark_node_get_type(h) != CMARK_NODE_HEADING) continue;
        const int level = cmark_node_get_heading_level(h) + demote;
        cmark_node_set_heading_level(h, level > 6 ? 6 : level);
        char *text = site_md_text(d, h);
        const char *id = text ? heading_anchor(a, prefix, text) : NULL;
        free(text);
        if (!id) { rc = kvl_fail(KVL_ENOMEM, "out of memory"); break; }
        cmark_strbuf tag = site_buffer();
        site_printf(&tag, "<a class=\"anchor\" id=\"%s\" href=\"#%s\" aria-hidden=\"true\"></a>", id, id);
        cmark_node *anchor = cmark_node_new(CMARK_NODE_HTML_INLINE);
        cmark_node_set_literal(anchor, cmark_strbuf_cstr(&tag));
        cmark_strbuf_free(&tag);
        cmark_node_prepend_child(h, anchor);
    }
    cmark_iter_free(it);
    return rc;
}

static int open_text(site_md *d, site *s, const char *text, const char *top, int demote, site_anchors *a)
{
    d->parser = cmark_parser_new(OPTIONS);
    const char *ext[] = {"table", "strikethrough", "autolink"};
    for (size_t k = 0; k < sizeof ext / sizeof *ext; k++)
        cmark_parser_attach_syntax_extension(d->parser, cmark_find_syntax_extension(ext[k]));
    cmark_strbuf md = site_buffer();
    site_math_protect(&d->math, &md, text);
    cmark_parser_feed(d->parser, cmark_strbuf_cstr(&md), (size_t)md.size);
    cmark_strbuf_free(&md);
    d->doc = cmark_parser_finish(d->parser);
    int rc = rewrite_links(d, s, top);
    if (rc == KVL_OK) rc = anchor_headings(d, s, demote, a);
    return rc;
}

int site_md_open_below(site_md *d, site *s, const char *path, const char *top, int demote, site_anchors *a)
{
    char *text;
    *d = (site_md){.path = path, .demote = demote};
    cmark_gfm_core_extensions_ensure_registered();
    KVL_TRY(site_read(s, path, &text));
    int rc = open_text(d, s, text, top, demote, a);
    free(text);
    if (rc != KVL_OK) site_md_close(d);
    return rc;
}

int site_md_open(site_md *d, site *s, const char *path, int demote, site_anchors *a)
{
    return site_md_open_below(d, s, path, "", demote, a);
}

void site_md_html(const site_md *d, cmark_node *n, cmark_strbuf *out)
{
    char *html = cmark_render_html(n ? n : d->doc, OPTIONS, cmark_parser_get_syntax_extensions(d->parser));
    site_math_restore(&d->math, out, html);
    free(html);
}

void site_md_close(site_md *d)
{
    if (d->doc) cmark_node_free(d->doc);
    if (d->parser) cmark_parser_free(d->parser);
    site_math_free(&d->math);
    *d = (site_md){0};
}
