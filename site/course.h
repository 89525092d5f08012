/* The course as README.md's table of chapters lists it (the table whose header has the columns
 * "chapter", "mechanism" and "time"), so that the site's map and its order of pages are never typed a
 * second time. */
#ifndef KVL_SITE_COURSE_H
#define KVL_SITE_COURSE_H

#include "site.h"

/* s->chapters[s->n_chapters] from the project's README.md, each with its title and whether its
 * notebook was rendered. KVL_EIO (a file), KVL_EINVAL "README.md: no table of chapters ..." or a row
 * that links no chapter folder, KVL_ENOMEM. */
int site_course_read(site *s);

void site_course_free(site *s);

/* The index page: README.md's opening and the sections for a student, its table of chapters
 * replaced by the course map. */
int site_index_write(site *s);

#endif
