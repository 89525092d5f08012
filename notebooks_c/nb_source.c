#include "nb_source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n - 1, f);
        if (n < cap - 1) break;
        char *grown = realloc(buf, cap *= 2);
        if (!grown) { free(buf); buf = NULL; }
        else buf = grown;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) { free(buf); return NULL; }
    buf[n] = '\0';
    *len = n;
    return buf;
}

static int is_marker(const char *line)
{
    return strncmp(line, "// %%", 5) == 0;
}

static int is_blank(const char *line)
{
    return line[strspn(line, " \t\r")] == '\0';
}

/* A cell's text lines are (open, close]: trim blank lines at both ends. */
static nb_source_cell make_cell(const nb_source *s, size_t marker, size_t open, size_t close)
{
    nb_source_cell c = {.kind = NB_CODE, .marker = marker, .first = open + 1, .last = close};
    if (marker && strncmp(s->lines[marker] + 5, " [markdown]", 11) == 0) c.kind = NB_MARKDOWN;
    while (c.first <= c.last && is_blank(nb_source_cell_line(s, &c, c.first))) c.first++;
    while (c.last >= c.first && is_blank(nb_source_cell_line(s, &c, c.last))) c.last--;
    return c;
}

int nb_source_read(nb_source *s, const char *path)
{
    *s = (nb_source){0};
    snprintf(s->path, sizeof s->path, "%s", path);
    size_t len = 0;
    s->text = read_file(path, &len);
    if (!s->text) return kvl_fail(KVL_EIO, "%s: cannot read: %s", path, strerror(errno));
    size_t n = 1;
    for (size_t i = 0; i < len; i++) n += s->text[i] == '\n';
    s->lines = calloc(n + 1, sizeof *s->lines);
    s->cells = calloc(n + 1, sizeof *s->cells);
    if (!s->lines || !s->cells) {
        nb_source_free(s);
        return kvl_fail(KVL_ENOMEM, "%s: out of memory", path);
    }
    for (char *p = s->text; p && *p;) {
        s->lines[++s->n_lines] = p;
        p = strchr(p, '\n');
        if (p) *p++ = '\0';
    }
    size_t open = 0, marker = 0;
    for (size_t i = 1; i <= s->n_lines + 1; i++) {
        if (i <= s->n_lines && !is_marker(s->lines[i])) continue;
        nb_source_cell c = make_cell(s, marker, open, i - 1);
        if (marker || c.first <= c.last) s->cells[s->n_cells++] = c;
        marker = open = i;
    }
    return KVL_OK;
}

void nb_source_free(nb_source *s)
{
    free(s->text);
    free(s->lines);
    free(s->cells);
    *s = (nb_source){0};
}

size_t nb_source_cell_of_line(const nb_source *s, size_t line)
{
    for (size_t k = s->n_cells; k-- > 0;) {
        size_t start = s->cells[k].marker ? s->cells[k].marker : 1;
        if (line >= start) return line <= s->n_lines ? k : s->n_cells;
    }
    return s->n_cells;
}

const char *nb_source_cell_line(const nb_source *s, const nb_source_cell *c, size_t line)
{
    const char *l = s->lines[line];
    if (c->kind == NB_CODE) return l;
    if (strncmp(l, "// ", 3) == 0) return l + 3;
    if (strncmp(l, "//", 2) == 0) return l + 2;
    return l;
}
