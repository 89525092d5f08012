/* One Markdown file of the project, parsed by cmark-gfm (CommonMark with GitHub's tables,
 * strikethrough and autolinks) and made ready for a site page: its formulas kept from cmark
 * (formula.h), its links pointed at the site (links.h), its headings demoted to fit the page and given
 * the anchors GitHub gives them (lower case, punctuation dropped, spaces as hyphens; a repeat gets
 * -1, -2), after the file's anchor prefix. Raw HTML in the text is kept: the text is the project's own. */
#ifndef KVL_SITE_MARKDOWN_H
#define KVL_SITE_MARKDOWN_H

#include "formula.h"
#include "site.h"

/* The anchors of one page, so that none repeats. */
typedef struct {
    char **ids;
    size_t n;
} site_anchors;

/* Reserve id on the page (a section's id); returns it, allocated in a. NULL on no memory. */
const char *site_anchor(site_anchors *a, const char *id);
void site_anchors_free(site_anchors *a);

typedef struct {
    const char *path;          /* the project file */
    cmark_parser *parser;      /* kept for its extensions, which the renderer needs */
    cmark_node *doc;
    int demote;                /* levels its headings were moved down */
    site_math math;
} site_md;

/* Parse the project file path with its headings demoted by `demote` levels (at most to h6) and given
 * anchors in a. KVL_EIO (the file), KVL_EINVAL (a link to nothing), KVL_ENOMEM. */
int site_md_open(site_md *d, site *s, const char *path, int demote, site_anchors *a);

/* The same for a page below the site's top folder: top is the way up from it ("../../"), put in front of
 * every link that leads to another file of the site. */
int site_md_open_below(site_md *d, site *s, const char *path, const char *top, int demote, site_anchors *a);

/* Append the HTML of node n (with its children; NULL: the whole document) to out. */
void site_md_html(const site_md *d, cmark_node *n, cmark_strbuf *out);

/* The plain text of n's inlines, formulas as written (d NULL: a tree cmark parsed directly, which
 * holds no placeholders), allocated; NULL on no memory. */
char *site_md_text(const site_md *d, cmark_node *n);

/* The first heading of level `level` in the document (before any demotion), or NULL. */
cmark_node *site_md_heading(const site_md *d, int level);

void site_md_close(site_md *d);

#endif
