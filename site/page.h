/* The frame every page of the site shares: the head that loads KaTeX, highlight.js and the site's
 * own style and script from assets/ (all copied into the site, so nothing is fetched from a network),
 * the bar with the course's name and the previous and next pages, and the body. */
#ifndef KVL_SITE_PAGE_H
#define KVL_SITE_PAGE_H

#include "site.h"

typedef struct {
    const char *title;       /* plain text */
    const char *prev_href, *prev_title;   /* NULL: none */
    const char *next_href, *next_title;
} site_page;

/* Write the site page at path (relative to the site, e.g. "02_mla.html" or "src/ref/mla.c.html"),
 * its links to assets made relative to its folder, with body (HTML) inside <main>. */
int site_page_write(const site *s, const char *path, const site_page *p, const char *body);

/* Write the page of every project file and folder the pages link to (src/...), those recorded while
 * they are written included. */
int site_sources_write(site *s);

#endif
