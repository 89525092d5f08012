#include "links.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

static const site_chapter *chapter_of(const site *s, const char *path, const char **file)
{
    for (size_t k = 0; k < s->n_chapters; k++) {
        const size_t n = strlen(s->chapters[k].dir);
        if (!strncmp(path, "chapters/", 9) && !strncmp(path + 9, s->chapters[k].dir, n) && path[9 + n] == '/') {
            *file = path + 9 + n + 1;
            return &s->chapters[k];
        }
    }
    return NULL;
}

const char *site_anchor_prefix(const site *s, const char *path)
{
    const char *file;
    if (!chapter_of(s, path, &file)) return "";
    if (!strcmp(file, "exercises.md")) return "ex-";
    if (!strcmp(file, "solutions.md")) return "sol-";
    return "";
}

static int has_scheme(const char *url)
{
    size_t n = strspn(url, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-");
    return n > 0 && url[n] == ':';
}

int site_source_page(char *out, const char *path, int is_dir)
{
    const int n = snprintf(out, SITE_PATH_MAX, "src/%s%s", path, is_dir ? (*path ? "/index.html" : "index.html") : ".html");
    return n < SITE_PATH_MAX ? KVL_OK : kvl_fail(KVL_EINVAL, "%s: path too long", path);
}

static int remember_copy(site *s, const char *path, const char *target)
{
    for (size_t k = 0; k < s->n_copies; k++)
        if (!strcmp(s->copies[k].target, target)) return KVL_OK;
    site_copy_item *grown = realloc(s->copies, (s->n_copies + 1) * sizeof *grown);
    if (!grown) return kvl_fail(KVL_ENOMEM, "out of memory");
    s->copies = grown;
    s->copies[s->n_copies] = (site_copy_item){strdup(path), strdup(target)};
    if (!s->copies[s->n_copies].path || !s->copies[s->n_copies].target) return kvl_fail(KVL_ENOMEM, "out of memory");
    s->n_copies++;
    return KVL_OK;
}

static int remember_source(site *s, const char *path, int is_dir)
{
    for (size_t k = 0; k < s->n_sources; k++)
        if (!strcmp(s->sources[k].path, path)) return KVL_OK;
    site_source *grown = realloc(s->sources, (s->n_sources + 1) * sizeof *grown);
    if (!grown) return kvl_fail(KVL_ENOMEM, "out of memory");
    s->sources = grown;
    s->sources[s->n_sources] = (site_source){.path = strdup(path), .is_dir = is_dir};
    if (!s->sources[s->n_sources].path) return kvl_fail(KVL_ENOMEM, "out of memory");
    s->n_sources++;
    return KVL_OK;
}

/* page + "#" + prefix + anchor, or page + "#" + fallback without an anchor ("" fallback: the page) */
static int with_anchor(char *out, const char *page, const char *prefix, const char *anchor, const char *fallback)
{
    const int n = *anchor ? snprintf(out, SITE_PATH_MAX, "%s#%s%s", page, prefix, anchor)
                          : snprintf(out, SITE_PATH_MAX, "%s%s%s", page, *fallback ? "#" : "", fallback);
    return n < SITE_PATH_MAX ? KVL_OK : kvl_fail(KVL_EINVAL, "%s#%s: path too long", page, anchor);
}

/* The target of the project path `path` (resolved, anchor apart) in the site. */
static int place(site *s, char *out, const char *path, const char *anchor)
{
    const char *file;
    const site_chapter *c = chapter_of(s, path, &file);
    char page[SITE_PATH_MAX];
    if (c) snprintf(page, sizeof page, "%s.html", c->dir);
    if (c && !strcmp(file, "README.md")) return with_anchor(out, page, "", anchor, "");
    if (c && !strcmp(file, "exercises.md")) return with_anchor(out, page, "ex-", anchor, "exercises");
    if (c && !strcmp(file, "solutions.md")) return with_anchor(out, page, "sol-", anchor, "exercises");
    if (!strcmp(path, "chapters/SOURCES.md")) return with_anchor(out, "sources.html", "", anchor, "");
    if (!strcmp(path, "chapters/DISAGREEMENTS.md")) return with_anchor(out, "disagreements.html", "", anchor, "");
    if (!strcmp(path, "chapters/GLOSSARY.md")) return with_anchor(out, "glossary.html", "", anchor, "");
    if (!strcmp(path, "README.md")) return with_anchor(out, "index.html", "", anchor, "");
    const int kind = site_exists(s, path);
    if (kind == 0) return KVL_EIO;
    const size_t nb = strlen(s->notebooks);
    char target[SITE_PATH_MAX];
    if (kind == 1 && !strncmp(path, s->notebooks, nb) && path[nb] == '/') {
        snprintf(target, sizeof target, "notebooks/%s", path + nb + 1);
        KVL_TRY(remember_copy(s, path, target));
    } else if (kind == 1 && (site_ends_with(path, ".svg") || site_ends_with(path, ".png") || site_ends_with(path, ".jpg") ||
                             site_ends_with(path, ".gif"))) {
        if ((size_t)snprintf(target, sizeof target, "files/%s", path) >= sizeof target)
            return kvl_fail(KVL_EINVAL, "%s: path too long", path);
        KVL_TRY(remember_copy(s, path, target));
    } else {
        KVL_TRY(site_source_page(target, path, kind == 2));
        KVL_TRY(remember_source(s, path, kind == 2));
    }
    return with_anchor(out, target, "", kind == 1 && !site_ends_with(path, ".md") ? "" : anchor, "");
}

int site_link(site *s, const char *from, const char *url, char **target)
{
    char out[SITE_PATH_MAX] = "";
    *target = NULL;
    if (has_scheme(url)) {
        snprintf(out, sizeof out, "%s", url);
    } else if (url[0] == '#') {
        snprintf(out, sizeof out, "#%s%s", site_anchor_prefix(s, from), url + 1);
    } else {
        char rel[SITE_PATH_MAX], dir[SITE_PATH_MAX], path[SITE_PATH_MAX];
        snprintf(rel, sizeof rel, "%s", url);
        char *hash = strchr(rel, '#');
        const char *anchor = "";
        if (hash) *hash = '\0', anchor = hash + 1;
        site_path_dir(dir, from);
        int rc = site_path_join(path, dir, rel);
        if (rc == KVL_OK) rc = place(s, out, path, anchor);
        if (rc == KVL_EIO) return kvl_fail(KVL_EINVAL, "%s: link to %s: no such file in the project", from, url);
        if (rc != KVL_OK) return kvl_fail(rc, "%s: link to %s: %s", from, url, kvl_error());
    }
    *target = strdup(out);
    return *target ? KVL_OK : kvl_fail(KVL_ENOMEM, "out of memory");
}
