/* Where a link written in the project's Markdown goes in the site.
 *
 * The course's files link each other as the repository holds them (../02_mla/README.md#a-section,
 * exercises.md, ../SOURCES.md, figures/reach.svg, ../../ref/mla.c); in the site every one of them must
 * resolve offline, from disk or any static host:
 *   chapters/NN/README.md#a       → NN.html#a
 *   chapters/NN/exercises.md#a    → NN.html#ex-a      (no anchor: NN.html#exercises)
 *   chapters/NN/solutions.md#a    → NN.html#sol-a     (no anchor: NN.html#exercises; solutions fold
 *                                                      under their exercises)
 *   chapters/SOURCES.md#a         → sources.html#a
 *   chapters/DISAGREEMENTS.md#a   → disagreements.html#a
 *   chapters/GLOSSARY.md#a        → glossary.html#a
 *   README.md                     → index.html
 *   NOTEBOOKS/X (a figure)        → notebooks/X, copied
 *   an .svg, .png, .jpg or .gif   → files/PATH, copied
 *   any other file or folder      → src/PATH.html, a page showing it (a folder: its listing)
 * A URL with a scheme (https:, mailto:) is left as it is; "#a" alone gets the prefix of the file it is
 * written in. A link to nothing in the project is an error naming both files. */
#ifndef KVL_SITE_LINKS_H
#define KVL_SITE_LINKS_H

#include "site.h"

/* The anchor prefix of headings from the project file path ("ex-" for exercises.md, ...). */
const char *site_anchor_prefix(const site *s, const char *path);

/* *target = where url, written in the project file `from`, goes in the site, relative to the site's
 * top folder, allocated; the copies and pages it needs are recorded in s. KVL_EINVAL "FROM: link to
 * URL: no such file in the project", KVL_ENOMEM. */
int site_link(site *s, const char *from, const char *url, char **target);

/* out[SITE_PATH_MAX] = the site page for the project file or folder path: "src/PATH.html" or
 * "src/PATH/index.html". KVL_EINVAL when too long. */
int site_source_page(char *out, const char *path, int is_dir);

#endif
