#include "pager.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "tex_text.h"

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

/* Rows the terminal folds line into. */
static size_t line_rows(const nb_pager *p, const char *line)
{
    const size_t w = nb_text_width(line, strlen(line));
    return w == 0 ? 1 : (w + p->cols - 1) / p->cols;
}

/* A prompt first unless `rows` more rows fit on this screen. 0 once the reader quit. */
static int make_room(nb_pager *p, size_t rows)
{
    if (p->quit) return 0;
    if (p->used > 0 && p->used + rows > p->rows - 1)
        return nb_pager_wait(p, "-- more: Enter, q: quit -- ");
    return 1;
}

static void show(nb_pager *p, const char *line)
{
    printf("%s\n", line);
    p->used += line_rows(p, line);
}

int nb_pager_line(nb_pager *p, const char *line)
{
    if (!make_room(p, line_rows(p, line))) return 0;
    show(p, line);
    return 1;
}

int nb_pager_block(nb_pager *p, const char *const *lines, size_t n)
{
    size_t rows = 0;
    for (size_t i = 0; i < n; i++) rows += line_rows(p, lines[i]);
    if (!make_room(p, rows)) return 0;
    for (size_t i = 0; i < n; i++) show(p, lines[i]);
    return 1;
}

/* A table's line: two of its words stand a gap of two spaces apart (printf's columns). */
static int has_columns(const char *l)
{
    l += strspn(l, " ");
    const char *gap = strstr(l, "  ");
    return gap && gap[strspn(gap, " ")] != '\0';
}

int nb_pager_output(nb_pager *p, const char *const *lines, size_t n)
{
    int ok = 1;
    for (size_t i = 0, end; i < n && ok; i = end) {
        for (end = i; end < n && has_columns(lines[end]); end++) {}
        if (end - i >= 2) ok = nb_pager_block(p, lines + i, end - i);
        else {
            ok = nb_pager_line(p, lines[i]);
            end = i + 1;
        }
    }
    return ok;
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

/* text with each math span as tex_text.h writes it, into out (emptied first). An inline span's
 * spaces become no-break spaces when glue, so that wrapping never splits a formula; a span the
 * translator cannot read stays as written. 0 when out of memory. */
static int math_as_text(paragraph *out, const char *text, int glue)
{
    out->len = 0;
    if (!append(out, "", 0)) return 0;
    size_t len;
    int display;
    for (const char *at = text, *m; *at; at = m + len) {
        m = tex_text_find(at, &len, &display);
        if (!m) return append(out, at, strlen(at));
        char buf[8192];
        tex_text_error err;
        const size_t d = 1 + (size_t)display;
        const size_t n = tex_text(buf, sizeof buf, m + d, len - 2 * d, &err);
        if (!append(out, at, (size_t)(m - at))) return 0;
        if (n >= sizeof buf) {   /* unread, or (size_t)-1 */
            if (!append(out, m, len)) return 0;
            continue;
        }
        for (const char *c = buf; *c; c++)
            if (!(*c == ' ' && glue ? append(out, "\u00a0", 2) : append(out, c, 1))) return 0;
    }
    return 1;
}

/* Print text's words in lines of at most p->width columns (a longer word alone on its line);
 * lines after the first start `indent` columns in. */
static int wrap(nb_pager *p, const char *text, size_t len, size_t indent)
{
    char *line = malloc(len + indent + 1);
    if (!line) return 0;
    size_t at = 0;
    while (text[at] == ' ') line[at] = ' ', at++;   /* a nested item keeps its indentation */
    size_t cols = at, start = at;
    int ok = 1;
    for (const char *w = text + at; *w && ok;) {
        const char *end = strchr(w, ' ');
        const size_t n = end ? (size_t)(end - w) : strlen(w), ww = nb_text_width(w, n);
        if (cols > start && cols + 1 + ww > p->width) {
            line[at] = '\0';
            ok = nb_pager_line(p, line);
            memset(line, ' ', indent);
            at = cols = start = indent;
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
    return ok;
}

static int flush_paragraph(nb_pager *p, paragraph *g)
{
    if (!g->len) return !p->quit;
    paragraph t = {0};
    const int ok = math_as_text(&t, g->text, 1) && wrap(p, t.text, t.len, g->indent);
    free(t.text);
    g->len = 0;
    return ok;
}

/* Print lines[n] with their math as text, all of them together (nb_pager_block). */
static int show_together(nb_pager *p, const char *const *lines, size_t n)
{
    char **shown = calloc(n, sizeof *shown);
    int ok = shown != NULL;
    for (size_t i = 0; i < n && ok; i++) {
        paragraph t = {0};
        ok = math_as_text(&t, lines[i], 0);
        shown[i] = t.text;
    }
    if (ok) ok = nb_pager_block(p, (const char *const *)shown, n);
    for (size_t i = 0; shown && i < n; i++) free(shown[i]);
    free(shown);
    return ok;
}

/* The pieces a display formula's text is shown in: itself when it fits p->width, else broken
 * before each `=` outside brackets and at its \qquad gaps. Writes piece starts and lengths into
 * at[], bytes[] (at most max) and returns how many. */
static size_t display_pieces(const nb_pager *p, const char *text, const char **at, size_t *bytes,
                             size_t max)
{
    size_t n = 0;
    at[0] = text;
    if (nb_text_width(text, strlen(text)) > p->width) {
        int depth = 0;
        for (const char *c = text; *c && n + 1 < max; c++) {
            depth += (*c == '(' || *c == '[' || *c == '{') - (*c == ')' || *c == ']' || *c == '}');
            const int gap = !strncmp(c, "    ", 4), eq = !strncmp(c, " = ", 3);
            if (depth || !(gap || eq) || c == at[n]) continue;
            bytes[n] = (size_t)(c - at[n]);
            n++;
            c += strspn(c, " ");
            at[n] = c--;
        }
    }
    bytes[n] = strlen(at[n]);
    return n + 1;
}

/* A display formula on lines of its own, centred as a block; a piece still wider than the screen
 * is wrapped, two columns in. */
static int show_display(nb_pager *p, const char *text)
{
    enum { MAX_PIECES = 16 };
    const char *at[MAX_PIECES];
    size_t bytes[MAX_PIECES], widest = 0;
    const size_t n = display_pieces(p, text, at, bytes, MAX_PIECES);
    for (size_t i = 0; i < n; i++)
        if (nb_text_width(at[i], bytes[i]) > widest) widest = nb_text_width(at[i], bytes[i]);
    const int indent = widest <= p->width ? (int)(p->width - widest) / 2 : 2;
    char *lines[MAX_PIECES];
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        lines[i] = malloc((size_t)indent + bytes[i] + 1);
        if (lines[i]) sprintf(lines[i], "%*s%.*s", indent, "", (int)bytes[i], at[i]);
        ok = ok && lines[i];
    }
    if (ok && widest <= p->width) ok = nb_pager_block(p, (const char *const *)lines, n);
    for (size_t i = 0; i < n && ok && widest > p->width; i++)   /* wrapped, two columns in */
        ok = wrap(p, lines[i], strlen(lines[i]), 2 * (size_t)indent);
    for (size_t i = 0; i < n; i++) free(lines[i]);
    return ok;
}

/* The display formula `$$…$$` that starts lines[0] and ends on lines[*used - 1], shown as text;
 * as written when the translator cannot read it. A `$$` not closed in the cell is its line as
 * written. */
static int show_display_lines(nb_pager *p, const char *const *lines, size_t n, size_t *used)
{
    paragraph src = {0}, t = {0};
    size_t len;
    int display = 0, ok = 1, closed = 0;
    for (*used = 0; *used < n && ok && !closed; ++*used) {
        ok = (!*used || append(&src, "\n", 1)) && append(&src, lines[*used], strlen(lines[*used]));
        closed = ok && tex_text_find(src.text, &len, &display) == src.text && display;
    }
    if (ok && !closed) {
        *used = 1;
        ok = nb_pager_line(p, lines[0]);
    } else if (ok && (ok = math_as_text(&t, src.text, 0)) && strncmp(t.text, "$$", 2)) {
        ok = show_display(p, t.text);
    } else {
        for (size_t i = 0; i < *used && ok; i++) ok = nb_pager_line(p, lines[i]);
    }
    free(src.text);
    free(t.text);
    return ok;
}

/* Rows of the Markdown table that starts at lines[0]: the run of lines that start with `|`. */
static size_t table_rows(const char *const *lines, size_t n)
{
    size_t k = 0;
    while (k < n && lines[k][0] == '|') k++;
    return k;
}

int nb_pager_markdown(nb_pager *p, const char *const *lines, size_t n)
{
    paragraph g = {0};
    int ok = 1, fenced = 0;
    for (size_t i = 0, used = 1; i < n && ok; i += used, used = 1) {
        const char *l = lines[i];
        const size_t marker = item_marker(l);
        if (fenced || is_fence(l)) {
            fenced ^= is_fence(l);
            ok = flush_paragraph(p, &g) && nb_pager_line(p, l);
        } else if (l[0] == '|') {
            used = table_rows(lines + i, n - i);
            ok = flush_paragraph(p, &g) && show_together(p, lines + i, used);
        } else if (!strncmp(l, "$$", 2)) {
            ok = flush_paragraph(p, &g) && show_display_lines(p, lines + i, n - i, &used);
        } else if (l[0] == '#') {
            ok = flush_paragraph(p, &g) && show_together(p, lines + i, 1);
        } else if (!*skip_spaces(l) || l[0] == '<' ||
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
