/* nb_ipynb: a notebook's source and its --cells output stream (nb.h) → a Jupyter notebook and a
 * Markdown rendering of it.
 *
 *   nb_ipynb SOURCE.c STREAM OUT [--figures-at DIR]
 *
 * writes OUT.ipynb (nbformat 4.5: every cell of SOURCE.c, each code cell with the output its
 * cell function really printed, figures as image/svg+xml; its kernelspec is the project's kernel,
 * kvlineage-c, which `make jupyter` installs), OUT.md (the same, for reading without
 * Jupyter) and OUT_files/NAME.svg (the figures the Markdown links to). With --figures-at the
 * Markdown links DIR/NAME.svg instead (DIR relative to OUT.md) and no OUT_files/ is written:
 * `make renders` points a chapter's notebook.md at the figures/ folder the notebook's --figures
 * already fills. Both open by saying they render a C program and how to run it (`make nb-NN`).
 * `make notebooks` runs it for every notebook. Exit status 0; 2 for bad input: a source or
 * stream that cannot be read, a stream that does not match the source (a marker out of place, an
 * output for a line outside any code cell) or holds no cell at all; 1 when an output cannot be
 * written. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "environment.h"
#include "file_io.h"
#include "nb_source.h"
#include "program.h"
#include "status.h"

typedef struct {
    int is_svg;
    char name[64];   /* the figure's */
    char *text;
} output;

typedef struct {
    output *items;
    size_t n;
    int ran;      /* a cell function's output (perhaps empty) was paired with this cell */
} outputs;        /* of one source cell */

typedef struct {
    char *text;
    size_t len, cap;
} buffer;

static int buffer_add(buffer *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 1024;
        while (cap < b->len + n + 1) cap *= 2;
        char *grown = realloc(b->text, cap);
        if (!grown) return kvl_fail(KVL_ENOMEM, "out of memory");
        b->text = grown;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = '\0';
    return KVL_OK;
}

/* ---- the stream ------------------------------------------------------------------------------ */

/* Move what b holds into a new output of cell o (nothing when b is empty); b is left empty. */
static int take_output(outputs *o, buffer *b, int is_svg, const char *name)
{
    if (b->len == 0 && !is_svg) return KVL_OK;
    output *grown = realloc(o->items, (o->n + 1) * sizeof *grown);
    if (!grown) return kvl_fail(KVL_ENOMEM, "out of memory");
    o->items = grown;
    output *it = &o->items[o->n++];
    *it = (output){.is_svg = is_svg, .text = b->text ? b->text : strdup("")};
    snprintf(it->name, sizeof it->name, "%s", name);
    *b = (buffer){0};
    return it->text ? KVL_OK : kvl_fail(KVL_ENOMEM, "out of memory");
}

typedef enum { OUTSIDE, IN_CELL, IN_SVG } place;

typedef struct {
    const nb_source *src;
    outputs *cells;   /* [src->n_cells] */
    const char *stream_path;
    size_t line;      /* of the stream, for messages */
    place at;
    size_t cell;      /* the source cell being filled */
    char svg_name[64];
    buffer text;
} reader;

static int marker(reader *r, const char *m)
{
    /* each marker is preceded by one newline that belongs to no output */
    if (r->text.len && r->text.text[r->text.len - 1] == '\n') r->text.text[--r->text.len] = '\0';
    int line = 0, used = 0;
    char name[64] = "";
    if (sscanf(m, "cell %d %63s%n", &line, name, &used) == 2 && r->at == OUTSIDE && !m[used]) {
        if (r->text.len)
            return kvl_fail(KVL_EINVAL, "%s:%zu: output outside any cell", r->stream_path, r->line);
        size_t k = nb_source_cell_of_line(r->src, (size_t)line);
        if (line < 1 || k == r->src->n_cells || r->src->cells[k].kind != NB_CODE)
            return kvl_fail(KVL_EINVAL,
                            "%s:%zu: cell function %s at line %d of %s is not in a code cell",
                            r->stream_path, r->line, name, line, r->src->path);
        if (r->cells[k].ran)
            return kvl_fail(KVL_EINVAL,
                            "%s:%zu: a second output for the code cell holding line %d of %s",
                            r->stream_path, r->line, line, r->src->path);
        r->cells[k].ran = 1;
        r->cell = k;
        r->at = IN_CELL;
        return KVL_OK;
    }
    if (sscanf(m, "svg %63s%n", name, &used) == 1 && r->at == IN_CELL && !m[used]) {
        r->at = IN_SVG;
        snprintf(r->svg_name, sizeof r->svg_name, "%s", name);
        return take_output(&r->cells[r->cell], &r->text, 0, "");
    }
    if (!strcmp(m, "/svg") && r->at == IN_SVG) {
        r->at = IN_CELL;
        return take_output(&r->cells[r->cell], &r->text, 1, r->svg_name);
    }
    if (!strcmp(m, "/cell") && r->at == IN_CELL) {
        r->at = OUTSIDE;
        return take_output(&r->cells[r->cell], &r->text, 0, "");
    }
    return kvl_fail(KVL_EINVAL, "%s:%zu: marker \"%%%%kvl %s\" out of place", r->stream_path,
                    r->line, m);
}

static int read_stream(outputs *cells, const nb_source *src, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return kvl_fail(KVL_EIO, "%s: cannot read: %s", path, strerror(errno));
    reader r = {.src = src, .cells = cells, .stream_path = path};
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    int rc = KVL_OK;
    while (rc == KVL_OK && (n = getline(&line, &cap, f)) >= 0) {
        r.line++;
        if (strncmp(line, "%%kvl ", 6) == 0) {
            if (line[n - 1] == '\n') line[n - 1] = '\0';
            rc = marker(&r, line + 6);
        } else {
            rc = buffer_add(&r.text, line, (size_t)n);
        }
    }
    if (rc == KVL_OK && r.line == 0)
        rc = kvl_fail(KVL_EINVAL, "%s: an empty stream, no cell output", path);
    if (rc == KVL_OK && r.at != OUTSIDE)
        rc = kvl_fail(KVL_EINVAL, "%s: the stream ends inside a cell", path);
    if (rc == KVL_OK && r.text.len)
        rc = kvl_fail(KVL_EINVAL, "%s: output after the last cell", path);
    free(line);
    free(r.text.text);
    fclose(f);
    return rc;
}

/* ---- the notebook ---------------------------------------------------------------------------- */

/* text → ["line\n", ..., "last"], nbformat's multiline string */
static cJSON *lines_of(const char *text)
{
    cJSON *a = cJSON_CreateArray();
    for (const char *p = text; a && *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
        char *piece = strndup(p, n);
        if (!piece) { cJSON_Delete(a); return NULL; }
        cJSON_AddItemToArray(a, cJSON_CreateString(piece));
        free(piece);
        p += n;
    }
    return a;
}

/* the text of cell c, lines joined with newlines */
static int cell_text(buffer *b, const nb_source *s, const nb_source_cell *c)
{
    int rc = KVL_OK;
    for (size_t l = c->first; l <= c->last && rc == KVL_OK; l++) {
        const char *t = nb_source_cell_line(s, c, l);
        rc = buffer_add(b, t, strlen(t));
        if (rc == KVL_OK && l < c->last) rc = buffer_add(b, "\n", 1);
    }
    if (rc == KVL_OK && !b->text) rc = buffer_add(b, "", 0);
    return rc;
}

static cJSON *output_json(const output *o)
{
    cJSON *j = cJSON_CreateObject();
    if (!o->is_svg) {
        cJSON_AddStringToObject(j, "name", "stdout");
        cJSON_AddStringToObject(j, "output_type", "stream");
        cJSON_AddItemToObject(j, "text", lines_of(o->text));
        return j;
    }
    cJSON *data = cJSON_AddObjectToObject(j, "data");
    char plain[96];
    snprintf(plain, sizeof plain, "<figure %s>", o->name);
    cJSON_AddItemToObject(data, "image/svg+xml", lines_of(o->text));
    cJSON_AddItemToObject(data, "text/plain", lines_of(plain));
    cJSON_AddObjectToObject(j, "metadata");
    cJSON_AddStringToObject(j, "output_type", "display_data");
    return j;
}

/* What a reader of a course notebook's rendering (notebooks_c/NN_name.c) needs first: it is a C
 * program's, and how to run that program: in the .ipynb, also that the project's kernel runs it in
 * Jupyter. Nothing for any other source. */
static int rendering_note(buffer *b, const char *source, int in_jupyter)
{
    const char *base = strrchr(source, '/') ? strrchr(source, '/') + 1 : source;
    if (!(base[0] >= '0' && base[0] <= '9' && base[1] >= '0' && base[1] <= '9' && base[2] == '_'))
        return KVL_OK;
    char note[1400];
    snprintf(
        note, sizeof note,
        "*A rendering of the C program `notebooks_c/%s` with the output it printed; %s "
        "Run it yourself with `make nb-%.2s`, which rebuilds it and walks it cell by cell (or "
        "`build/bin/nb_%.2s` for the outputs alone); change the .c file and run that again.*\n\n",
        base,
        in_jupyter ? "the kernel `make jupyter` installs, C (kvlineage), runs its cells here."
                   : "in Jupyter, its .ipynb (`make notebooks`) runs through the kernel "
                     "`make jupyter` installs.",
        base, base);
    return buffer_add(b, note, strlen(note));
}

static cJSON *notebook_json(const char *source, const nb_source *s, const outputs *cells)
{
    cJSON *nb = cJSON_CreateObject(), *list = cJSON_AddArrayToObject(nb, "cells");
    int count = 0;
    for (size_t k = 0; k < s->n_cells; k++) {
        const nb_source_cell *c = &s->cells[k];
        buffer b = {0};
        int rc = k == 0 && c->kind == NB_MARKDOWN ? rendering_note(&b, source, 1) : KVL_OK;
        if (rc != KVL_OK || cell_text(&b, s, c) != KVL_OK) {
            free(b.text);
            cJSON_Delete(nb);
            return NULL;
        }
        cJSON *cell = cJSON_CreateObject();
        char id[32];
        snprintf(id, sizeof id, "cell-%zu", k + 1);
        cJSON_AddStringToObject(cell, "cell_type", c->kind == NB_CODE ? "code" : "markdown");
        if (c->kind == NB_CODE) cJSON_AddNumberToObject(cell, "execution_count", ++count);
        cJSON_AddStringToObject(cell, "id", id);
        cJSON_AddObjectToObject(cell, "metadata");
        if (c->kind == NB_CODE) {
            cJSON *outs = cJSON_AddArrayToObject(cell, "outputs");
            for (size_t i = 0; i < cells[k].n; i++)
                cJSON_AddItemToArray(outs, output_json(&cells[k].items[i]));
        }
        cJSON_AddItemToObject(cell, "source", lines_of(b.text));
        free(b.text);
        cJSON_AddItemToArray(list, cell);
    }
    cJSON *meta = cJSON_AddObjectToObject(nb, "metadata");
    /* the project's kernel (notebooks_c/kernel/), which Jupyter and VS Code start for it */
    cJSON *kernel = cJSON_AddObjectToObject(meta, "kernelspec");
    cJSON_AddStringToObject(kernel, "name", "kvlineage-c");
    cJSON_AddStringToObject(kernel, "display_name", "C (kvlineage)");
    cJSON_AddStringToObject(kernel, "language", "c");
    cJSON *lang = cJSON_AddObjectToObject(meta, "language_info");
    cJSON_AddStringToObject(lang, "name", "c");
    cJSON_AddStringToObject(lang, "file_extension", ".c");
    cJSON *jt = cJSON_AddObjectToObject(meta, "jupytext");
    cJSON_AddStringToObject(jt, "formats", "c:percent");
    cJSON_AddNumberToObject(nb, "nbformat", 4);
    cJSON_AddNumberToObject(nb, "nbformat_minor", 5);
    return nb;
}

/* ---- writing --------------------------------------------------------------------------------- */

/* Whole or not at all, under the one rule for output paths (ref/core/file_io.h). */
static int write_text(const char *path, const char *text)
{
    kvl_file_out o;
    KVL_TRY(kvl_file_out_open(&o, path));
    kvl_file_out_write(&o, text, strlen(text));
    return kvl_file_out_commit(&o);
}

static int write_ipynb(const char *out, const char *source, const nb_source *s,
                       const outputs *cells)
{
    cJSON *nb = notebook_json(source, s, cells);
    char *text = nb ? cJSON_Print(nb) : NULL;
    cJSON_Delete(nb);
    if (!text) return kvl_fail(KVL_ENOMEM, "out of memory");
    buffer b = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s.ipynb", out);
    int rc = buffer_add(&b, text, strlen(text));
    if (rc == KVL_OK) rc = buffer_add(&b, "\n", 1);
    if (rc == KVL_OK) rc = write_text(path, b.text);
    free(text);
    free(b.text);
    return rc;
}

/* Markdown: text cells as they are, code in ```c fences, printed output in ```text fences, figures
 * as images in OUT_files/. */
static int markdown_cell(buffer *md, const char *out, const char *figures_at, const nb_source *s,
                         size_t k, const outputs *o)
{
    const nb_source_cell *c = &s->cells[k];
    buffer b = {0};
    int rc = cell_text(&b, s, c);
    if (rc == KVL_OK && c->kind == NB_CODE) rc = buffer_add(md, "```c\n", 5);
    if (rc == KVL_OK) rc = buffer_add(md, b.text, b.len);
    if (rc == KVL_OK)
        rc = buffer_add(md, c->kind == NB_CODE ? "\n```\n\n" : "\n\n", c->kind == NB_CODE ? 6 : 2);
    free(b.text);
    const char *base = strrchr(out, '/') ? strrchr(out, '/') + 1 : out;
    for (size_t i = 0; rc == KVL_OK && i < o->n; i++) {
        const output *it = &o->items[i];
        char piece[4352];
        if (it->is_svg && figures_at) {
            snprintf(piece, sizeof piece, "![%s](%s/%s.svg)\n\n", it->name, figures_at, it->name);
            rc = buffer_add(md, piece, strlen(piece));
            continue;
        }
        if (it->is_svg) {
            char path[4096];
            snprintf(path, sizeof path, "%s_files/%s.svg", out, it->name);
            rc = write_text(path, it->text);
            snprintf(piece, sizeof piece, "![%s](%s_files/%s.svg)\n\n", it->name, base, it->name);
            if (rc == KVL_OK) rc = buffer_add(md, piece, strlen(piece));
            continue;
        }
        size_t n = strlen(it->text);
        rc = buffer_add(md, "```text\n", 8);
        if (rc == KVL_OK) rc = buffer_add(md, it->text, n);
        if (rc == KVL_OK)
            rc = buffer_add(md, n && it->text[n - 1] == '\n' ? "```\n\n" : "\n```\n\n",
                            n && it->text[n - 1] == '\n' ? 5 : 6);
    }
    return rc;
}

static int write_markdown(const char *out, const char *figures_at, const char *source,
                          const nb_source *s, const outputs *cells)
{
    char path[4096];
    snprintf(path, sizeof path, "%s_files", out);
    if (!figures_at && mkdir(path, 0777) != 0 && errno != EEXIST)
        return kvl_fail(KVL_EIO, "%s: cannot create: %s", path, strerror(errno));
    buffer md = {0};
    char head[1200];
    snprintf(head, sizeof head,
             "<!-- %s with the output of its cells; nb_ipynb wrote this file -->\n\n", source);
    int rc = buffer_add(&md, head, strlen(head));
    if (rc == KVL_OK) rc = rendering_note(&md, source, 0);
    for (size_t k = 0; k < s->n_cells && rc == KVL_OK; k++)
        rc = markdown_cell(&md, out, figures_at, s, k, &cells[k]);
    snprintf(path, sizeof path, "%s.md", out);
    if (rc == KVL_OK) rc = write_text(path, md.text);
    free(md.text);
    return rc;
}

/* 0 when OUT.ipynb and OUT.md may be written (ref/core/file_io.h) and neither is SOURCE.c or
 * STREAM; else 2 after one line. The figures in OUT_files/ are named by the stream, so they are
 * checked as they are written. */
static int check_outputs(const char *source, const char *stream, const char *out)
{
    kvl_file_input(source, "SOURCE.c");
    kvl_file_input(stream, "STREAM");
    static const char *const written[] = {".ipynb", ".md"};
    int status = 0;
    for (size_t i = 0; i < sizeof written / sizeof *written && !status; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s%s", out, written[i]);
        status = kvl_check_output("nb_ipynb", "OUT", path);
    }
    return status;
}

int main(int argc, char **argv)
{
    if (kvl_environment_check("nb_ipynb")) return 2;
    if (argc == 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf(
            "usage: nb_ipynb SOURCE.c STREAM OUT [--figures-at DIR]\n"
            "Pairs the --cells output STREAM of a notebook program with the cells of SOURCE.c and writes\n"
            "OUT.ipynb (nbformat 4.5), OUT.md and the figures in OUT_files/; with --figures-at, OUT.md links\n"
            "its figures as DIR/NAME.svg (relative to OUT.md) and no OUT_files/ is written.\n");
        return kvl_exit_status("nb_ipynb", 0);
    }
    if (argc != 4 && !(argc == 6 && !strcmp(argv[4], "--figures-at") && argv[5][0])) {
        fprintf(stderr, "nb_ipynb: expected SOURCE.c STREAM OUT [--figures-at DIR] (try --help)\n");
        return 2;
    }
    if (check_outputs(argv[1], argv[2], argv[3])) return 2;
    const char *figures_at = argc == 6 ? argv[5] : NULL;
    nb_source s;
    int rc = nb_source_read(&s, argv[1]);
    outputs *cells = rc == KVL_OK ? calloc(s.n_cells + 1, sizeof *cells) : NULL;
    if (rc == KVL_OK && !cells) rc = kvl_fail(KVL_ENOMEM, "out of memory");
    if (rc == KVL_OK) rc = read_stream(cells, &s, argv[2]);
    const int bad_input = rc != KVL_OK && rc != KVL_ENOMEM;
    if (rc == KVL_OK) rc = write_ipynb(argv[3], argv[1], &s, cells);
    if (rc == KVL_OK) rc = write_markdown(argv[3], figures_at, argv[1], &s, cells);
    for (size_t k = 0; cells && k < s.n_cells; k++) {
        for (size_t i = 0; i < cells[k].n; i++) free(cells[k].items[i].text);
        free(cells[k].items);
    }
    free(cells);
    nb_source_free(&s);
    if (rc != KVL_OK) {
        fprintf(stderr, "nb_ipynb: %s\n", kvl_error());
        return bad_input ? 2 : 1;
    }
    return kvl_exit_status("nb_ipynb", 0);
}
