/* kvbench --spread RUN.md ...: which runs of kvbench --out on the same code held their ceilings still,
 * and how far each row's ratio moved over those (bench.h's KVB_RECHECK_MOVED, KVB_RUNS_SPREAD). The
 * tables are the Markdown that kvb_print_header and kvb_print_row write; every file is read and checked
 * before a line is printed, so a table that cannot be read gives its file, line and cell on stderr,
 * status 2 and nothing on stdout. The runs must list the same rows in the same order, as runs of one
 * kvbench over the same groups do: a row is named by its group and its what less any parenthesis that
 * holds a figure (where a peer's row puts the rates it measured), and a row named otherwise, or with a
 * figure in one run and none in another, is refused rather than paired with the wrong one.
 * The figures are read as printed, to three decimals: a spread counts only what those digits prove, so
 * that a small ratio (a top-k's 0.008) is not called SPREAD for its last digit's rounding. A run's
 * ceilings moved as far as the largest distance from 1 of its `recheck` rows' ratios. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "file_io.h"
#include "status.h"
#include "timing.h"

#define MOST_RUNS 16
#define HALF_UNIT 0.0005 /* the figures are printed to three decimals (report.c) */
#define MOST_BYTES ((size_t)16 << 20)

enum { COL_GROUP, COL_WHAT, COL_RATIO = 8, COL_FMA = 11, COL_ROOF = 12, N_COLS = 14 };
enum { FIG_RATIO, FIG_FMA, FIG_ROOF, N_FIGS };
static const int FIG_COL[N_FIGS] = {COL_RATIO, COL_FMA, COL_ROOF};
static const char *const FIG_NAME[N_FIGS] = {"ratio", "FMA", "roof"};

typedef struct {
    char group[32], name[96]; /* name: the what cell less its parentheses that hold figures */
    double fig[N_FIGS]; /* NAN where the cell is "-" */
    size_t line;
} row;

typedef struct {
    const char *path;
    char *text;
    row *rows;
    size_t n;
    double moved; /* its recheck ceilings' largest move, NAN without recheck rows */
    int qualifies;
} table;

/* Status 2, after "kvbench --spread: " and the message on stderr. */
static int refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kvbench --spread: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* The next line of *text (its newline replaced by NUL), advancing *text; NULL at the end. */
static char *next_line(char **text)
{
    char *line = *text;
    if (!*line) return NULL;
    char *end = strchr(line, '\n');
    if (end) {
        *end = '\0';
        *text = end + 1;
    } else {
        *text = line + strlen(line);
    }
    return line;
}

/* A figure's cell: "-" (NAN) or a finite number >= 0 written whole. */
static int read_figure(double *x, const char *cell)
{
    if (strcmp(cell, "-") == 0) {
        *x = NAN;
        return 0;
    }
    char *end;
    *x = strtod(cell, &end);
    return end != cell && *end == '\0' && isfinite(*x) && *x >= 0 ? 0 : -1;
}

/* name = what less each " (…)" that holds a digit: "e4m3 encode ml_dtypes/C 1T (same codes; 0.27 vs 2.4 G
 * values/s)" is "e4m3 encode ml_dtypes/C 1T", while "e4m3 encode (saturating) 2T" keeps its words and its
 * thread count. what is shorter than name. */
static void row_name(char *name, const char *what)
{
    while (*what) {
        const char *close = strncmp(what, " (", 2) == 0 ? strchr(what, ')') : NULL;
        const char *digit = close ? strpbrk(what, "0123456789") : NULL;
        if (digit && digit < close) what = close + 1;
        else *name++ = *what++;
    }
    *name = '\0';
}

/* Row `line` of t's table, "| c0 | c1 | … | c13 |", into r. */
static int read_row(row *r, char *text, const table *t, size_t line)
{
    const size_t len = strlen(text);
    if (len < 4 || strncmp(text, "| ", 2) != 0 || strcmp(text + len - 2, " |") != 0)
        return refuse("%s line %zu: a table row starts with \"| \" and ends with \" |\"", t->path, line);
    text[len - 2] = '\0';
    char *cell[N_COLS];
    size_t n = 0;
    for (char *at = text + 2, *sep;; at = sep + 3) {
        if (n == N_COLS) return refuse("%s line %zu: more than the %d cells of a kvbench row", t->path, line, N_COLS);
        cell[n++] = at;
        if (!(sep = strstr(at, " | "))) break;
        *sep = '\0';
    }
    if (n != N_COLS) return refuse("%s line %zu: %zu cells, a kvbench row has %d", t->path, line, n, N_COLS);
    if (strlen(cell[COL_GROUP]) >= sizeof r->group || strlen(cell[COL_WHAT]) >= sizeof r->name)
        return refuse("%s line %zu: the group or what cell is longer than any kvbench writes", t->path, line);
    strcpy(r->group, cell[COL_GROUP]);
    row_name(r->name, cell[COL_WHAT]);
    r->line = line;
    for (int f = 0; f < N_FIGS; f++)
        if (read_figure(&r->fig[f], cell[FIG_COL[f]]) != 0)
            return refuse("%s line %zu: the %s cell holds '%s', neither a number of at least 0 nor -", t->path,
                          line, FIG_NAME[f], cell[FIG_COL[f]]);
    return 0;
}

/* t's table: the rows after its header and rule, up to the first line that is not a row. */
static int read_table(table *t, const char *path)
{
    size_t size;
    *t = (table){path, NULL, NULL, 0, NAN, 0};
    if (kvl_file_read_all(&t->text, &size, path, MOST_BYTES) != KVL_OK) return refuse("%s", kvl_error());
    char *text = t->text, *line;
    size_t at = 0; /* the number of the line last read */
    do {
        if (!(line = next_line(&text)))
            return refuse("%s: no kvbench table (no line is its header, \"%s\")", path, KVB_MARKDOWN_HEADER);
        at++;
    } while (strcmp(line, KVB_MARKDOWN_HEADER) != 0);
    line = next_line(&text);
    if (!line || strcmp(line, KVB_MARKDOWN_RULE) != 0)
        return refuse("%s line %zu: the header is not followed by the table's rule, \"%s\"", path, at + 1,
                      KVB_MARKDOWN_RULE);
    at++;
    const size_t most = size / (2 * N_COLS) + 1; /* a row takes at least "| " and a "-" per cell */
    if (!(t->rows = malloc(most * sizeof *t->rows))) return refuse("%s: out of memory", path);
    while ((line = next_line(&text)) && line[0] == '|') {
        int rc = read_row(&t->rows[t->n], line, t, ++at);
        if (rc) return rc;
        t->n++;
    }
    return t->n ? 0 : refuse("%s: the table has no rows", path);
}

/* Run t against the first run, a: the same rows, in the same order, with the same figures. */
static int same_rows(const table *a, const table *t)
{
    if (t->n != a->n)
        return refuse("%s: %zu rows where %s has %zu: the runs must be of one kvbench over the same groups", t->path,
                      t->n, a->path, a->n);
    for (size_t i = 0; i < a->n; i++) {
        const row *x = &a->rows[i], *y = &t->rows[i];
        if (strcmp(x->group, y->group) != 0 || strcmp(x->name, y->name) != 0)
            return refuse("%s line %zu: row '%s | %s' where %s line %zu has '%s | %s'", t->path, y->line, y->group,
                          y->name, a->path, x->line, x->group, x->name);
        for (int f = 0; f < N_FIGS; f++)
            if (isnan(x->fig[f]) != isnan(y->fig[f]))
                return refuse("%s line %zu: the %s cell holds %s where %s line %zu has %s", t->path, y->line,
                              FIG_NAME[f], isnan(y->fig[f]) ? "-" : "a figure", a->path, x->line,
                              isnan(x->fig[f]) ? "-" : "a figure");
    }
    return 0;
}

/* t's recheck ceilings' largest move, and whether the run qualifies. */
static int judge_run(table *t)
{
    double *r = malloc(t->n * sizeof *r);
    if (!r) return refuse("%s: out of memory", t->path);
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].group, "recheck") == 0 && !isnan(t->rows[i].fig[FIG_RATIO]))
            r[n++] = t->rows[i].fig[FIG_RATIO];
    t->moved = kvb_recheck_moved(r, n);
    t->qualifies = kvb_run_qualifies(t->moved, HALF_UNIT);
    free(r);
    return 0;
}

/* The runs, each with its ceilings' largest move and whether it qualifies; the number that do. */
static int print_runs(const table *t, int n)
{
    int k = 0;
    printf("| run | recheck ceilings' largest move | qualifies |\n|---|--:|---|\n");
    for (int i = 0; i < n; i++) {
        if (isnan(t[i].moved)) printf("| %s | - (no recheck rows) | no |\n", t[i].path);
        else printf("| %s | %.1f%% | %s |\n", t[i].path, t[i].moved * 100, t[i].qualifies ? "yes" : "no");
        k += t[i].qualifies;
    }
    printf("\n%d of %d runs qualify%s.\n\n", k, n,
           k < KVB_STEADY_RUNS ? ": too few to judge a row, every verdict is -" : "");
    return k;
}

/* Row i's ratios, a qualifying run's as it is and another's in brackets, into text[cap]; the qualifying
 * ones into x, their count returned. */
static int row_ratios(char *text, size_t cap, double *x, const table *t, int n, size_t i)
{
    int k = 0;
    size_t at = 0;
    for (int r = 0; r < n; r++) {
        const double v = t[r].rows[i].fig[FIG_RATIO];
        at += (size_t)snprintf(text + at, cap - at, t[r].qualifies ? "%s%.3f" : "%s[%.3f]", r ? ", " : "", v);
        if (t[r].qualifies) x[k++] = v;
    }
    return k;
}

static void print_spreads(const table *t, int n)
{
    size_t rows = 0, steady = 0, spread = 0;
    printf("%s runs compared. A run qualifies when each of its recheck ceilings moved less than %.0f%% from "
           "the first measurement; a row is STEADY when its ratio in every qualifying run lies within %.0f%% of "
           "their median, judged where %d runs or more qualify.\n\n",
           n == 2 ? "Two" : n == 3 ? "Three" : "These", KVB_RECHECK_MOVED * 100, KVB_RUNS_SPREAD * 100,
           KVB_STEADY_RUNS);
    const int qualifying = print_runs(t, n);
    printf("| group | what | ratio in each run ([not qualifying]) | median | largest spread | verdict |\n"
           "|---|---|---|--:|--:|---|\n");
    for (size_t i = 0; i < t[0].n; i++) {
        const row *r = &t[0].rows[i];
        if (isnan(r->fig[FIG_RATIO])) continue;
        char ratios[16 * MOST_RUNS], median[16] = "-", moved[16] = "-";
        double x[MOST_RUNS], q[MOST_RUNS];
        int ok[MOST_RUNS];
        const int k = row_ratios(ratios, sizeof ratios, x, t, n, i);
        if (k) {
            memcpy(q, x, (size_t)k * sizeof *x);
            snprintf(median, sizeof median, "%.3f", kvl_median(q, (size_t)k));
            snprintf(moved, sizeof moved, "%.1f%%", kvb_runs_spread(q, (size_t)k, HALF_UNIT) * 100);
        }
        for (int m = 0; m < n; m++) {
            q[m] = t[m].rows[i].fig[FIG_RATIO];
            ok[m] = t[m].qualifies;
        }
        const char *verdict = kvb_runs_verdict(q, ok, (size_t)n, HALF_UNIT);
        printf("| %s | %s | %s | %s | %s | %s |\n", r->group, r->name, ratios, median, moved, verdict);
        rows++;
        steady += strcmp(verdict, "STEADY") == 0;
        spread += strcmp(verdict, "SPREAD") == 0;
    }
    if (qualifying < KVB_STEADY_RUNS)
        printf("\n%zu rows with a ratio; %d of %d runs qualify, fewer than %d: no row is judged.\n", rows, qualifying,
               n, KVB_STEADY_RUNS);
    else
        printf("\n%zu rows with a ratio over %d qualifying runs of %d: %zu STEADY, %zu SPREAD.\n", rows, qualifying, n,
               steady, spread);
}

int kvb_spread_main(int n, char *const *paths)
{
    if (n < 2 || n > MOST_RUNS) return refuse("compares 2 to %d tables, not %d", MOST_RUNS, n);
    table t[MOST_RUNS];
    int rc = 0, read = 0;
    for (; read < n && !rc; read++) rc = read_table(&t[read], paths[read]);
    for (int k = 1; k < n && !rc; k++) rc = same_rows(&t[0], &t[k]);
    for (int k = 0; k < n && !rc; k++) rc = judge_run(&t[k]);
    if (!rc) print_spreads(t, n);
    for (int k = 0; k < read; k++) {
        free(t[k].text);
        free(t[k].rows);
    }
    return rc;
}
