/* kvsite: the course as a static website.
 *
 *   kvsite --notebooks DIR --out DIR
 *
 * reads the project under $KVL_ROOT (else the tree it was built from): README.md's table of chapters,
 * each chapter's README.md, exercises.md, solutions.md and figures, DIR/NN_name.md (the notebook
 * renderings `make notebooks` writes, a folder given relative to the project), chapters/SOURCES.md and
 * chapters/DISAGREEMENTS.md and chapters/GLOSSARY.md; and writes into the --out folder index.html (the
 * course map), one page per chapter, sources.html, disagreements.html, glossary.html, the figures, and a page for each project file a text links
 * to (src/).
 * `make site` runs it, then copies KaTeX, highlight.js and site/site.{css,js} into assets/.
 *
 * Exit status 0; 2 for bad input (a file missing or unreadable, a link to nothing in the project, a
 * README.md without its table of chapters), after one line on stderr naming the file; 1 when a page
 * cannot be written. Nothing is printed on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chapter.h"
#include "course.h"
#include "markdown.h"
#include "page.h"
#include "program.h"
#include "status.h"

static const kvl_flag FLAGS[] = {{"--notebooks", 1}, {"--out", 1}};

static int usage(void)
{
    printf("usage: kvsite --notebooks DIR --out DIR\n"
           "Writes the course as a static website into the --out folder: index.html, one page per chapter\n"
           "(its text, its notebook's cells and outputs from DIR/NN_name.md, its exercises with their\n"
           "solutions folded), sources.html, disagreements.html, glossary.html and the files they link to. DIR is\n"
           "relative to the project ($KVL_ROOT, else the source tree).\n");
    return kvl_exit_status("kvsite", 0);
}

/* chapters/NAME.md as the page page.html, between prev and next */
static int text_page(site *s, const char *name, const char *page, const char *title, const char *prev,
                     const char *prev_title, const char *next, const char *next_title)
{
    char path[SITE_PATH_MAX], file[SITE_PATH_MAX];
    snprintf(path, sizeof path, "chapters/%s.md", name);
    snprintf(file, sizeof file, "%s.html", page);
    site_anchors a = {0};
    site_md d;
    KVL_TRY(site_md_open(&d, s, path, 0, &a));
    cmark_strbuf body = site_buffer();
    cmark_strbuf_puts(&body, "<article class=\"text\">\n");
    site_md_html(&d, NULL, &body);
    cmark_strbuf_puts(&body, "</article>\n");
    site_md_close(&d);
    site_anchors_free(&a);
    site_page p = {.title = title, .prev_href = prev, .prev_title = prev_title, .next_href = next, .next_title = next_title};
    int rc = site_page_write(s, file, &p, cmark_strbuf_cstr(&body));
    cmark_strbuf_free(&body);
    return rc;
}

/* sources.html, disagreements.html and glossary.html, after the last chapter */
static int citation_pages_write(site *s)
{
    char last[SITE_PATH_MAX];
    snprintf(last, sizeof last, "%s.html", s->n_chapters ? s->chapters[s->n_chapters - 1].dir : "index");
    const char *last_title = s->n_chapters ? s->chapters[s->n_chapters - 1].title : "the course";
    KVL_TRY(text_page(s, "SOURCES", "sources", "sources", last, last_title, "disagreements.html",
                      "where the sources disagree"));
    KVL_TRY(text_page(s, "DISAGREEMENTS", "disagreements", "where the sources disagree", "sources.html", "sources",
                      "glossary.html", "glossary"));
    return text_page(s, "GLOSSARY", "glossary", "glossary", "disagreements.html", "where the sources disagree",
                     "index.html", "the course");
}

static int build(site *s)
{
    KVL_TRY(site_course_read(s));
    for (size_t k = 0; k < s->n_chapters; k++) KVL_TRY(site_chapter_write(s, k));
    KVL_TRY(citation_pages_write(s));
    KVL_TRY(site_index_write(s));
    /* the pages of linked files first: a folder's listing or a rendered README records copies too */
    KVL_TRY(site_sources_write(s));
    for (size_t k = 0; k < s->n_copies; k++) KVL_TRY(site_copy(s, s->copies[k].path, s->copies[k].target));
    return KVL_OK;
}

static void site_free(site *s)
{
    site_course_free(s);
    for (size_t k = 0; k < s->n_copies; k++) free(s->copies[k].path), free(s->copies[k].target);
    free(s->copies);
    for (size_t k = 0; k < s->n_sources; k++) free(s->sources[k].path);
    free(s->sources);
}

int main(int argc, char **argv)
{
    site s = {.root = kvl_root_dir()};
    kvl_args a = kvl_args_start("kvsite", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *value;
    for (int f; (f = kvl_args_next(&a, &value)) != KVL_ARGS_END;) {
        if (f == KVL_ARGS_HELP) return usage();
        if (f == KVL_ARGS_BAD) return 2;
        if (f == 0) s.notebooks = value;
        if (f == 1) s.out = value;
    }
    if (!s.notebooks || !s.out) return kvl_bad_usage("kvsite", "--notebooks and --out are both needed", NULL);
    int rc = build(&s);
    site_free(&s);
    if (rc != KVL_OK) {
        fprintf(stderr, "kvsite: %s\n", kvl_error());
        return site_write_failed() || rc == KVL_ENOMEM ? 1 : 2;
    }
    return kvl_exit_status("kvsite", 0);
}
