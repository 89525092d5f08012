/* A chapter's page: its text (README.md), its notebook as `make notebooks` rendered it with every
 * cell's output and figure (NOTEBOOKS/NN_name.md, the same rendering the .ipynb is written from), and
 * its exercises, each followed by its solution folded in a <details> that opens on a click. */
#ifndef KVL_SITE_CHAPTER_H
#define KVL_SITE_CHAPTER_H

#include "site.h"

/* Write s->chapters[k]'s page, NN_name.html, linked to the chapters before and after it. */
int site_chapter_write(site *s, size_t k);

/* The title of chapter dir: the first heading of its README.md, allocated in *title. */
int site_chapter_title(site *s, const char *dir, char **title);

#endif
