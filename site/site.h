/* kvsite: the course as a static website (`make site`). What every part of the generator shares: where
 * it reads, where it writes, and the files the pages link to.
 *
 * Paths inside the project are repository-relative ("chapters/02_mla/README.md"), read under root;
 * paths inside the site are relative to out ("02_mla.html"). Every file is written whole or not at all
 * (kvl_file_out). Text is built in cmark's own growing buffer (cmark_strbuf), the one the Markdown
 * renderer already uses, rather than a second buffer type. */
#ifndef KVL_SITE_H
#define KVL_SITE_H

#include <cmark-gfm.h>
#include <cmark-gfm/buffer.h>
#include <stddef.h>

/* A chapter as the course table in README.md lists it. */
typedef struct {
    char *dir;         /* "02_mla": chapters/02_mla/ and the page 02_mla.html */
    char *title;       /* the first heading of its README.md */
    char *teaches;     /* the table's mechanism column */
    char *time;        /* the table's time column */
    int has_notebook;  /* NOTEBOOKS/02_mla.md exists */
} site_chapter;

typedef struct {
    char *path;        /* in the project: a file, or a folder (is_dir) */
    int is_dir;
    int written;
} site_source;

typedef struct {
    char *path;        /* in the project */
    char *target;      /* in the site */
} site_copy_item;

typedef struct {
    const char *root;       /* the project */
    const char *notebooks;  /* repository-relative folder of the notebook renderings */
    const char *out;        /* the site */
    site_chapter *chapters;
    size_t n_chapters;
    site_copy_item *copies; /* project files copied into the site as they are (figures), deduplicated */
    size_t n_copies;
    site_source *sources;   /* project files and folders shown as pages under src/ */
    size_t n_sources;
} site;

/* The longest path the generator handles, in the project or in the site. */
#define SITE_PATH_MAX 1024
/* The largest text file it reads. */
#define SITE_READ_MAX (16u << 20)

/* *text = the project file at path (repository-relative), NUL-terminated. KVL_EIO "ROOT/PATH: cannot
 * open: ...", KVL_EINVAL (too large), KVL_ENOMEM. */
int site_read(const site *s, const char *path, char **text);

/* 1 if the project has a regular file at path, 2 a folder, 0 nothing. */
int site_exists(const site *s, const char *path);

/* Write data[n] to the site file at path (relative to out), creating its folders. KVL_EIO naming it. */
int site_write(const site *s, const char *path, const void *data, size_t n);

/* 1 once a site_write has failed: the run's failure is the output's, not its input's (exit 1, not 2). */
int site_write_failed(void);

/* Copy the project file at path to the site file at target. */
int site_copy(const site *s, const char *path, const char *target);

/* a = a + "/" + b, with "." and ".." segments resolved; a is repository-relative (no leading '/').
 * KVL_EINVAL when ".." climbs above the project or the result is longer than SITE_PATH_MAX. */
int site_path_join(char *out, const char *dir, const char *rel);

/* The folder part of path ("chapters/02_mla" for "chapters/02_mla/README.md", "" for "README.md"). */
void site_path_dir(char *out, const char *path);

/* 1 if s ends with tail. */
int site_ends_with(const char *s, const char *tail);

/* Append text to b with &, <, >, " as entities. */
void site_escape(cmark_strbuf *b, const char *text);

/* Append printf-style text to b. */
void site_printf(cmark_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A new buffer on cmark's allocator. */
cmark_strbuf site_buffer(void);

#endif
