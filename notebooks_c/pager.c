#include "pager.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

enum { MAX_PROSE_WIDTH = 100 };

static size_t env_size(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    if (!v || !*v) return dflt;
    size_t n = 0;
    for (; *v >= '0' && *v <= '9' && n < 100000; v++) n = 10 * n + (size_t)(*v - '0');
    return *v || n == 0 ? dflt : n;
}

void nb_pager_init(nb_pager *p)
{
    struct winsize ws;
    size_t rows = 0, cols = 0;
    if (isatty(STDOUT_FILENO) && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
        rows = ws.ws_row;
        cols = ws.ws_col;
    }
    if (!rows) rows = env_size("LINES", 24);
    if (!cols) cols = env_size("COLUMNS", 80);
    *p = (nb_pager){.rows = rows < 4 ? 4 : rows, .cols = cols < 20 ? 20 : cols};
    p->width = p->cols < MAX_PROSE_WIDTH ? p->cols : MAX_PROSE_WIDTH;
}

size_t nb_text_width(const char *s, size_t bytes)
{
    size_t w = 0;
    for (size_t i = 0; i < bytes; i++) w += ((unsigned char)s[i] & 0xc0) != 0x80;
    return w;
}

int nb_pager_wait(nb_pager *p, const char *prompt)
{
    if (p->quit) return 0;
    printf("%s", prompt);
    fflush(stdout);
    char line[64];
    const int got = fgets(line, sizeof line, stdin) != NULL;
    if (!got || !isatty(STDIN_FILENO))
        printf("\n"); /* a terminal echoes the reader's Enter itself */
    p->used = 0;
    if (got && line[0] == 'q') p->quit = 1;
    return !p->quit;
}

int nb_pager_line(nb_pager *p, const char *line)
{
    if (p->quit) return 0;
    const size_t w = nb_text_width(line, strlen(line));
    const size_t rows = w == 0 ? 1 : (w + p->cols - 1) / p->cols;
    if (p->used > 0 && p->used + rows > p->rows - 1 &&
        !nb_pager_wait(p, "-- more: Enter, q: quit -- "))
        return 0;
    printf("%s\n", line);
    p->used += rows;
    return 1;
}

/* ---- Markdown -------------------------------------------------------------------------------- */

static const char *skip_spaces(const char *l)
{
    while (*l == ' ') l++;
    return l;
}

static int is_fence(const char *l)
{
    l = skip_spaces(l);
    return !strncmp(l, "```", 3) || !strncmp(l, "~~~", 3);
}

/* Headings, table rows, display math and HTML keep their lines. */
static int is_verbatim(const char *l)
{
    return l[0] == '#' || l[0] == '|' || l[0] == '<' || !strncmp(l, "$$", 2);
}

/* The bytes of a list item's marker with the spaces around it ("- ", "  12. "), 0 for none. */
static size_t item_marker(const char *l)
{
    const char *m = skip_spaces(l), *q = m;
    if ((*q == '-' || *q == '*' || *q == '+') && q[1] == ' ') q += 2;
    else {
        while (*q >= '0' && *q <= '9') q++;
        if (q == m || (*q != '.' && *q != ')') || q[1] != ' ') return 0;
        q += 2;
    }
    return (size_t)(skip_spaces(q) - l);
}

typedef struct {
    char *text;
    size_t len, cap;
    size_t indent;       /* columns of the item marker: continuation lines start there */
} paragraph;

static int append(paragraph *g, const char *s, size_t n)
{
    if (g->len + n + 2 > g->cap) {
        size_t cap = 2 * (g->len + n + 2);
        char *t = realloc(g->text, cap);
        if (!t) return 0;
        g->text = t;
        g->cap = cap;
    }
    memcpy(g->text + g->len, s, n);
    g->len += n;
    g->text[g->len] = '\0';
    return 1;
}

/* Print g's words in lines of at most p->width columns (a longer word alone on its line). */
static int flush_paragraph(nb_pager *p, paragraph *g)
{
    if (!g->len) return !p->quit;
    char *line = malloc(g->len + g->indent + 1);
    if (!line) return 0;
    size_t at = 0;
    while (g->text[at] == ' ') line[at] = ' ', at++;   /* a nested item keeps its indentation */
    size_t cols = at, start = at;
    int ok = 1;
    for (const char *w = g->text + at; *w && ok;) {
        const char *end = strchr(w, ' ');
        const size_t n = end ? (size_t)(end - w) : strlen(w), ww = nb_text_width(w, n);
        if (cols > start && cols + 1 + ww > p->width) {
            line[at] = '\0';
            ok = nb_pager_line(p, line);
            memset(line, ' ', g->indent);
            at = cols = start = g->indent;
        }
        if (cols > start) { line[at++] = ' '; cols++; }
        memcpy(line + at, w, n);
        at += n;
        cols += ww;
        w += n;
        while (*w == ' ') w++;
    }
    line[at] = '\0';
    if (ok && at) ok = nb_pager_line(p, line);
    free(line);
    g->len = 0;
    return ok;
}

int nb_pager_markdown(nb_pager *p, const char *const *lines, size_t n)
{
    paragraph g = {0};
    int ok = 1, fenced = 0;
    for (size_t i = 0; i < n && ok; i++) {
        const char *l = lines[i];
        const size_t marker = item_marker(l);
        if (fenced || is_fence(l)) {
            fenced ^= is_fence(l);
            ok = flush_paragraph(p, &g) && nb_pager_line(p, l);
        } else if (!*skip_spaces(l) || is_verbatim(l) ||
                   (!g.len && !marker && !strncmp(l, "    ", 4))) {
            ok = flush_paragraph(p, &g) && nb_pager_line(p, l);
        } else if (marker) {
            ok = flush_paragraph(p, &g) && append(&g, l, strlen(l));
            g.indent = nb_text_width(l, marker);
        } else if (!g.len) {
            g.indent = 0;
            ok = append(&g, l, strlen(l));
        } else {
            const char *rest = skip_spaces(l);
            ok = append(&g, " ", 1) && append(&g, rest, strlen(rest));
        }
    }
    if (ok) ok = flush_paragraph(p, &g);
    free(g.text);
    return ok;
}
