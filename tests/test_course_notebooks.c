/* The course's notebooks (notebooks_c/NN_name.c, programs nb_NN) and their converter nb_ipynb.
 *
 * Every notebook found by name runs to completion (a failing cell exits non-zero and fails the suite),
 * converts into a notebook whose cells are exactly the source's and whose code cells carry the output
 * their cell functions printed, validates against the nbformat 4.5 schema (when python3's nbformat is
 * installed; otherwise the test says so and passes), walks cell by cell with --step, and draws exactly
 * the figures committed under chapters/NN_name/figures/ and prints the rendering committed as
 * chapters/NN_name/notebook.md. The converter is also tested on a small
 * synthetic notebook whose outputs are known. A notebook added for a new chapter is picked up without
 * an edit here. */
#include "common.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_NOTEBOOKS 16
#define OUT_CAP (1 << 20)

static char out[OUT_CAP], err[OUT_CAP];

typedef struct {
    char name[64];   /* "02_mla" */
    char number[8];  /* "02" */
} notebook;

static int by_name(const void *a, const void *b)
{
    return strcmp(((const notebook *)a)->name, ((const notebook *)b)->name);
}

/* notebooks_c/[0-9][0-9]_*.c, sorted */
static size_t list_notebooks(notebook *nb)
{
    DIR *d = opendir(kvl_path("notebooks_c"));
    ck_assert_msg(d != NULL, "cannot list notebooks_c (set KVL_ROOT)");
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < MAX_NOTEBOOKS) {
        const char *s = e->d_name;
        size_t len = strlen(s);
        if (len < 6 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9' || s[2] != '_' || strcmp(s + len - 2, ".c"))
            continue;
        snprintf(nb[n].name, sizeof nb[n].name, "%.*s", (int)(len - 2), s);
        snprintf(nb[n].number, sizeof nb[n].number, "%.2s", s);
        n++;
    }
    closedir(d);
    qsort(nb, n, sizeof *nb, by_name);
    ck_assert_msg(n >= 6, "expected the notebooks of chapters 1-5 and 8, found %zu", n);
    return n;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
}

static void make_temp_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/kvl_course_XXXXXX");
    ck_assert(mkdtemp(dir) != NULL);
}

static void remove_dir(const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert(system(cmd) == 0);
}

/* cells the source holds: `// %%` markers, plus a non-blank unmarked first cell */
static size_t count_source_cells(const char *source_path, size_t *with_cell_function)
{
    char *s = kvl_read_text(source_path);
    ck_assert_msg(s != NULL, "cannot read %s", source_path);
    size_t cells = 0, functions = 0;
    int in_code = 0, counted = 0;
    for (char *line = s; line && *line;) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        if (strncmp(line, "// %%", 5) == 0) {
            cells++;
            in_code = strncmp(line, "// %% [markdown]", 16) != 0;
            counted = 0;
        } else if (cells == 0 && line[strspn(line, " \t")]) {
            ck_abort_msg("%s: text before the first cell marker", source_path);
        } else if (in_code && !counted && strncmp(line, "NB_CELL(", 8) == 0) {
            functions++;
            counted = 1;
        }
        line = next;
    }
    free(s);
    *with_cell_function = functions;
    return cells;
}

/* Run nb_NN --cells and nb_ipynb into dir/NAME.{ipynb,md}. */
static void convert(const notebook *nb, const char *dir)
{
    char cmd[16384], source[4400];
    snprintf(source, sizeof source, "%s/%s.c", kvl_path("notebooks_c"), nb->name);
    snprintf(cmd, sizeof cmd, "nb_%s --cells > '%s/%s.cells' && nb_ipynb '%s' '%s/%s.cells' '%s/%s'", nb->number, dir,
             nb->name, source, dir, nb->name, dir, nb->name);
    int rc = kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP);
    ck_assert_msg(rc == 0, "%s: exit %d\n%s", cmd, rc, err);
}

/* ---- every notebook runs ------------------------------------------------------------------------------ */

START_TEST(test_every_notebook_runs_to_completion)
{
    notebook nb[MAX_NOTEBOOKS];
    size_t n = list_notebooks(nb);
    for (size_t i = 0; i < n; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "nb_%s", nb[i].number);
        int rc = kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP);
        ck_assert_msg(rc == 0, "%s (%s) exited %d:\n%s", cmd, nb[i].name, rc, err);
        ck_assert_msg(strlen(out) > 0, "%s printed nothing", cmd);
    }
}
END_TEST

START_TEST(test_every_notebook_refuses_an_unknown_argument)
{
    notebook nb[MAX_NOTEBOOKS];
    size_t n = list_notebooks(nb);
    for (size_t i = 0; i < n; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "nb_%s --bogus", nb[i].number);
        ck_assert_int_eq(kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP), 2);
        ck_assert_msg(strstr(err, "--bogus") != NULL, "%s: the message does not name the argument: %s", cmd, err);
    }
}
END_TEST

/* A notebook whose output is lost (a full disk, a closed pipe) fails instead of exiting 0. */
START_TEST(test_a_notebook_whose_output_cannot_be_written_exits_1)
{
    notebook nb[MAX_NOTEBOOKS];
    size_t n = list_notebooks(nb);
    for (size_t i = 0; i < n; i++) {
        char cmd[64];
        snprintf(cmd, sizeof cmd, "{ nb_%s >/dev/full; }", nb[i].number);
        ck_assert_int_eq(kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP), 1);
        ck_assert_msg(strstr(err, "cannot write the output") != NULL, "%s: %s", cmd, err);
    }
}
END_TEST

/* ---- the .ipynb ---------------------------------------------------------------------------------------- */

START_TEST(test_every_notebook_converts_with_one_cell_per_source_cell)
{
    notebook nb[MAX_NOTEBOOKS];
    size_t n = list_notebooks(nb);
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    for (size_t i = 0; i < n; i++) {
        convert(&nb[i], dir);
        char path[2400], source[4400];
        snprintf(source, sizeof source, "%s/%s.c", kvl_path("notebooks_c"), nb[i].name);
        size_t functions = 0, cells = count_source_cells(source, &functions);
        snprintf(path, sizeof path, "%s/%s.ipynb", dir, nb[i].name);
        char *text = kvl_read_text(path);
        ck_assert_msg(text != NULL, "no %s", path);
        cJSON *j = cJSON_Parse(text);
        free(text);
        ck_assert_msg(j != NULL, "%s is not JSON", path);
        ck_assert_int_eq(cJSON_GetObjectItem(j, "nbformat")->valueint, 4);
        ck_assert_int_eq(cJSON_GetObjectItem(j, "nbformat_minor")->valueint, 5);
        const cJSON *list = cJSON_GetObjectItem(j, "cells");
        ck_assert_msg((size_t)cJSON_GetArraySize(list) == cells, "%s: %d cells, the source has %zu", nb[i].name,
                      cJSON_GetArraySize(list), cells);
        size_t with_output = 0, figures = 0;
        const cJSON *cell;
        cJSON_ArrayForEach(cell, list) {
            const cJSON *outs = cJSON_GetObjectItem(cell, "outputs");
            with_output += cJSON_GetArraySize(outs) > 0;
            const cJSON *o;
            cJSON_ArrayForEach(o, outs) {
                const cJSON *data = cJSON_GetObjectItem(o, "data");
                const cJSON *svg = data ? cJSON_GetObjectItem(data, "image/svg+xml") : NULL;
                if (!svg) continue;
                figures++;
                ck_assert_msg(strncmp(cJSON_GetArrayItem(svg, 0)->valuestring, "<svg ", 5) == 0,
                              "%s: a figure that is not SVG", nb[i].name);
            }
        }
        ck_assert_msg(with_output == functions, "%s: %zu code cells have output, %zu define a cell function",
                      nb[i].name, with_output, functions);
        ck_assert_msg(figures > 0, "%s draws no figure", nb[i].name);
        char note[1200], run_it[32];
        snprintf(note, sizeof note, "*A rendering of the C program `notebooks_c/%s.c`", nb[i].name);
        snprintf(run_it, sizeof run_it, "`make nb-%s`", nb[i].number);
        const char *first = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 0), "source"), 0)->valuestring;
        ck_assert_msg(!strncmp(first, note, strlen(note)) && strstr(first, run_it), "%s: its first cell begins '%.120s'",
                      nb[i].name, first);
        cJSON_Delete(j);
        snprintf(path, sizeof path, "%s/%s.md", dir, nb[i].name);
        char *md = kvl_read_text(path);
        ck_assert_msg(md && strstr(md, note) && strstr(md, run_it), "%s: the Markdown rendering does not say how to run it",
                      nb[i].name);
        free(md);
    }
    remove_dir(dir);
}
END_TEST

/* a python3 that imports nbformat, or NULL */
static const char *python_with_nbformat(void)
{
    static const char *const candidates[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < 2; i++) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "%s -c 'import nbformat'", candidates[i]);
        if (kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP) == 0) return candidates[i];
    }
    return NULL;
}

START_TEST(test_every_ipynb_validates_against_the_nbformat_schema)
{
    const char *python = python_with_nbformat();
    if (!python) {
        printf("test_course_notebooks: SKIPPED the nbformat schema check: python3's nbformat is not installed "
               "(apt-get install python3-nbformat, or make deps)\n");
        return;
    }
    notebook nb[MAX_NOTEBOOKS];
    size_t n = list_notebooks(nb);
    char dir[64], cmd[8192];
    make_temp_dir(dir, sizeof dir);
    int len = snprintf(cmd, sizeof cmd,
                       "%s -c 'import sys, nbformat\n"
                       "for p in sys.argv[1:]:\n"
                       "    nb = nbformat.read(p, as_version=nbformat.NO_CONVERT)\n"
                       "    assert (nb.nbformat, nb.nbformat_minor) == (4, 5), p\n"
                       "    nbformat.validate(nb)\n'",
                       python);
    for (size_t i = 0; i < n; i++) {
        convert(&nb[i], dir);
        len += snprintf(cmd + len, sizeof cmd - (size_t)len, " '%s/%s.ipynb'", dir, nb[i].name);
    }
    int rc = kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP);
    ck_assert_msg(rc == 0, "nbformat rejects a notebook:\n%s", err);
    remove_dir(dir);
}
END_TEST

/* ---- --step --------------------------------------------------------------------------------------------- */

START_TEST(test_step_mode_walks_every_cell_and_stops_on_q)
{
    notebook nb[MAX_NOTEBOOKS];
    size_t n = list_notebooks(nb);
    static char enters[512];
    memset(enters, '\n', sizeof enters - 1);
    for (size_t i = 0; i < n; i++) {
        char cmd[64], source[4400], last[64], second[64];
        snprintf(source, sizeof source, "%s/%s.c", kvl_path("notebooks_c"), nb[i].name);
        size_t functions, cells = count_source_cells(source, &functions);
        snprintf(cmd, sizeof cmd, "nb_%s --step", nb[i].number);
        snprintf(last, sizeof last, "cell %zu of %zu", cells, cells);
        snprintf(second, sizeof second, "cell 2 of %zu", cells);
        ck_assert_int_eq(kvl_run(cmd, enters, out, OUT_CAP, err, OUT_CAP), 0);
        ck_assert_msg(strstr(out, last) != NULL, "%s never reached \"%s\"", cmd, last);
        ck_assert_msg(strstr(out, "---- output ----") != NULL, "%s showed no output", cmd);
        ck_assert_int_eq(kvl_run(cmd, "q\n", out, OUT_CAP, err, OUT_CAP), 0);
        ck_assert_msg(strstr(out, "cell 1 of") && !strstr(out, second), "%s did not stop after q", cmd);
    }
}
END_TEST

/* Columns a UTF-8 line takes on a terminal: its characters. */
static size_t text_width(const char *s, size_t n)
{
    size_t w = 0;
    for (size_t i = 0; i < n; i++) w += ((unsigned char)s[i] & 0xc0) != 0x80;
    return w;
}

/* Whether a line of output stands in columns: two of its words a gap of two spaces apart. */
static int in_columns(const char *l, size_t len)
{
    for (size_t i = strspn(l, " "); i + 2 < len; i++)
        if (l[i] == ' ' && l[i + 1] == ' ' && i + 2 + strspn(l + i + 2, " ") < len) return 1;
    return 0;
}

/* On an 80 × 24 terminal no screenful between two prompts is taller than 23 rows (so a cell's header
 * is on screen until the reader has seen it) unless it is one table taller than the screen, printed
 * whole after its prompt; and the text cells' prose is wrapped to 80 columns (tables, headings and
 * indented code keep their lines). */
START_TEST(test_step_mode_pages_and_wraps_prose_to_the_terminal)
{
    notebook nb[MAX_NOTEBOOKS];
    size_t n = list_notebooks(nb);
    static char enters[4096];
    memset(enters, '\n', sizeof enters - 1);
    for (size_t i = 0; i < n; i++) {
        char cmd[96];
        snprintf(cmd, sizeof cmd, "COLUMNS=80 LINES=24 nb_%s --step", nb[i].number);
        ck_assert_int_eq(kvl_run(cmd, enters, out, OUT_CAP, err, OUT_CAP), 0);
        size_t rows = 0, line_no = 0;
        int prose = 0, fenced = 0, one_table = 0;
        for (char *l = out, *nl; *l; l = nl + 1, line_no++) {
            nl = strchr(l, '\n');
            if (!nl) nl = l + strlen(l);
            const size_t len = (size_t)(nl - l), w = text_width(l, len);
            if (!strncmp(l, "-- more:", 8) || !strncmp(l, "-- Enter:", 9)) {
                rows = 0;
                prose = 0;
                one_table = 1;
            } else {
                rows += w ? (w + 79) / 80 : 1;
                one_table = one_table && in_columns(l, len);
                ck_assert_msg(rows <= 23 || one_table, "%s: line %zu is row %zu of one screen", cmd, line_no + 1,
                              rows);
            }
            if (!strncmp(l, "==== cell", 9)) prose = strstr(l, ", text (") != NULL && strstr(l, ", text (") < nl;
            else if (prose && !strncmp(l, "```", 3)) fenced = !fenced;
            else if (prose && !fenced && w > 80 && l[0] != '|' && l[0] != '#' && strncmp(l, "    ", 4) &&
                     memchr(l, ' ', len))
                ck_assert_msg(0, "%s: prose line %zu is %zu columns wide: %.*s", cmd, line_no + 1, w, (int)len, l);
            if (!*nl) break;
        }
    }
}
END_TEST

/* ---- the committed figures -------------------------------------------------------------------------------- */

static int by_text(const void *a, const void *b)
{
    return strcmp(a, b);
}

/* names of dir's .svg files, sorted, joined by spaces */
static void list_svgs(char *names, size_t cap, const char *dir)
{
    char found[32][128];
    size_t n = 0;
    DIR *d = opendir(dir);
    names[0] = '\0';
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) && n < 32) {
        size_t len = strlen(e->d_name);
        if (len > 4 && !strcmp(e->d_name + len - 4, ".svg")) snprintf(found[n++], 128, "%s", e->d_name);
    }
    closedir(d);
    qsort(found, n, sizeof found[0], by_text);
    for (size_t i = 0; i < n; i++) {
        strncat(names, found[i], cap - strlen(names) - 1);
        strncat(names, " ", cap - strlen(names) - 1);
    }
}

/* "" when a and b are the same text, else where they first differ: "line N: committed '...', fresh '...'" */
static void first_difference(char *buf, size_t cap, const char *committed, const char *fresh)
{
    buf[0] = '\0';
    if (!strcmp(committed, fresh)) return;
    size_t line = 1;
    const char *a = committed, *b = fresh;
    while (*a && *a == *b) {
        if (*a == '\n') line++;
        a++, b++;
    }
    while (a > committed && a[-1] != '\n') a--, b--;   /* back to the line's start, on both sides */
    snprintf(buf, cap, "line %zu: committed '%.*s', fresh '%.*s'", line, (int)strcspn(a, "\n"), a,
             (int)strcspn(b, "\n"), b);
}

/* One run of each notebook, as `make renders` does it: its figures are the committed
 * chapters/NN_name/figures/NAME.svg, byte for byte and no more or fewer, and its Markdown rendering is
 * the committed chapters/NN_name/notebook.md. What a notebook prints is the same on every machine (its
 * rounding-level differences are printed as a decade, draw_compare.h), so the comparison is exact. */
START_TEST(test_committed_renders_are_what_the_notebooks_print_and_draw)
{
    notebook nb[MAX_NOTEBOOKS];
    size_t n = list_notebooks(nb);
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    for (size_t i = 0; i < n; i++) {
        char cmd[8192], fresh[1400], committed[4400], a[4096], b[4096], diff[600];
        snprintf(fresh, sizeof fresh, "%s/%s", dir, nb[i].name);
        ck_assert(mkdir(fresh, 0777) == 0);
        snprintf(cmd, sizeof cmd, "cd '%s' && nb_%s --cells --figures '%s' > '%s.cells' && "
                 "nb_ipynb notebooks_c/%s.c '%s.cells' '%s' --figures-at figures", kvl_path("."), nb[i].number, fresh,
                 fresh, nb[i].name, fresh, fresh);
        ck_assert_msg(kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP) == 0, "%s failed:\n%s", cmd, err);
        snprintf(committed, sizeof committed, "%s/%s/figures", kvl_path("chapters"), nb[i].name);
        list_svgs(a, sizeof a, fresh);
        list_svgs(b, sizeof b, committed);
        ck_assert_msg(!strcmp(a, b), "%s draws [%s] but chapters/%s/figures holds [%s]; regenerate with make renders",
                      nb[i].name, a, nb[i].name, b);
        for (char *name = strtok(a, " "); name; name = strtok(NULL, " ")) {
            char p[4600], q[4600];
            snprintf(p, sizeof p, "%s/%s", fresh, name);
            snprintf(q, sizeof q, "%s/%s", committed, name);
            char *x = kvl_read_text(p), *y = kvl_read_text(q);
            ck_assert_msg(x && y, "cannot read %s or %s", p, q);
            first_difference(diff, sizeof diff, y, x);
            ck_assert_msg(!diff[0], "chapters/%s/figures/%s differs from what nb_%s draws now, %s; regenerate with "
                          "make renders", nb[i].name, name, nb[i].number, diff);
            free(x);
            free(y);
        }
        char p[1500], q[4400];
        snprintf(p, sizeof p, "%s.md", fresh);
        snprintf(q, sizeof q, "%s/%s/notebook.md", kvl_path("chapters"), nb[i].name);
        char *x = kvl_read_text(p), *y = kvl_read_text(q);
        ck_assert_msg(x, "nb_ipynb wrote no %s", p);
        ck_assert_msg(y, "no chapters/%s/notebook.md; write it with make renders", nb[i].name);
        first_difference(diff, sizeof diff, y, x);
        ck_assert_msg(!diff[0], "chapters/%s/notebook.md differs from a fresh rendering of nb_%s, %s; regenerate with "
                      "make renders", nb[i].name, nb[i].number, diff);
        free(x);
        free(y);
    }
    remove_dir(dir);
}
END_TEST

/* ---- the converter on a notebook whose outputs are known ---------------------------------------------------- */

static const char SYNTHETIC[] =
    "// %% [markdown]\n"          /* 1 */
    "// # Title\n"                /* 2 */
    "//\n"                        /* 3 */
    "// Some *text*.\n"           /* 4 */
    "\n"                          /* 5 */
    "// %%\n"                     /* 6 */
    "#include <stdio.h>\n"        /* 7 */
    "\n"                          /* 8 */
    "// %% a titled cell\n"       /* 9 */
    "NB_CELL(cell_a)\n"           /* 10 */
    "{\n"                         /* 11 */
    "}\n"                         /* 12 */
    "\n"                          /* 13 */
    "// %%\n"                     /* 14 */
    "NB_CELL(cell_b)\n";          /* 15 */

/* the stream nb --cells writes: each marker preceded by a newline that is no output's */
static const char STREAM[] = "\n%%kvl cell 10 cell_a\nhello\nworld\n"
                             "\n%%kvl svg fig\n<svg xmlns=\"http://www.w3.org/2000/svg\"/>"
                             "\n%%kvl /svg\nno newline at the end"
                             "\n%%kvl /cell\n"
                             "\n%%kvl cell 15 cell_b\n"
                             "\n%%kvl /cell\n";

static cJSON *convert_synthetic(const char *dir, const char *stream, int *rc)
{
    char src[128], cells[128], cmd[600], path[160];
    snprintf(src, sizeof src, "%s/nb.c", dir);
    snprintf(cells, sizeof cells, "%s/nb.cells", dir);
    write_text(src, SYNTHETIC);
    write_text(cells, stream);
    snprintf(cmd, sizeof cmd, "nb_ipynb '%s' '%s' '%s/out'", src, cells, dir);
    *rc = kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP);
    snprintf(path, sizeof path, "%s/out.ipynb", dir);
    char *text = *rc == 0 ? kvl_read_text(path) : NULL;
    cJSON *j = text ? cJSON_Parse(text) : NULL;
    free(text);
    return j;
}

/* the lines of a multiline string, joined */
static void joined(char *buf, size_t cap, const cJSON *lines)
{
    buf[0] = '\0';
    const cJSON *l;
    cJSON_ArrayForEach(l, lines) strncat(buf, l->valuestring, cap - strlen(buf) - 1);
}

START_TEST(test_converter_pairs_each_output_with_its_cell)
{
    char dir[64], text[512];
    int rc;
    make_temp_dir(dir, sizeof dir);
    cJSON *j = convert_synthetic(dir, STREAM, &rc);
    ck_assert_msg(rc == 0 && j, "nb_ipynb failed: %s", err);
    const cJSON *cells = cJSON_GetObjectItem(j, "cells");
    ck_assert_int_eq(cJSON_GetArraySize(cells), 4);
    const cJSON *md = cJSON_GetArrayItem(cells, 0), *inc = cJSON_GetArrayItem(cells, 1);
    const cJSON *a = cJSON_GetArrayItem(cells, 2), *b = cJSON_GetArrayItem(cells, 3);
    ck_assert_str_eq(cJSON_GetObjectItem(md, "cell_type")->valuestring, "markdown");
    joined(text, sizeof text, cJSON_GetObjectItem(md, "source"));
    ck_assert_str_eq(text, "# Title\n\nSome *text*.");
    joined(text, sizeof text, cJSON_GetObjectItem(inc, "source"));
    ck_assert_str_eq(text, "#include <stdio.h>");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(inc, "outputs")), 0);
    const cJSON *outs = cJSON_GetObjectItem(a, "outputs");
    ck_assert_int_eq(cJSON_GetArraySize(outs), 3);
    joined(text, sizeof text, cJSON_GetObjectItem(cJSON_GetArrayItem(outs, 0), "text"));
    ck_assert_str_eq(text, "hello\nworld\n");
    const cJSON *fig = cJSON_GetArrayItem(outs, 1);
    ck_assert_str_eq(cJSON_GetObjectItem(fig, "output_type")->valuestring, "display_data");
    joined(text, sizeof text, cJSON_GetObjectItem(cJSON_GetObjectItem(fig, "data"), "image/svg+xml"));
    ck_assert_str_eq(text, "<svg xmlns=\"http://www.w3.org/2000/svg\"/>");
    joined(text, sizeof text, cJSON_GetObjectItem(cJSON_GetArrayItem(outs, 2), "text"));
    ck_assert_str_eq(text, "no newline at the end");
    ck_assert_int_eq(cJSON_GetArraySize(cJSON_GetObjectItem(b, "outputs")), 0);
    ck_assert_int_eq(cJSON_GetObjectItem(b, "execution_count")->valueint, 3);
    cJSON_Delete(j);
    char figure[128];
    snprintf(figure, sizeof figure, "%s/out_files/fig.svg", dir);
    ck_assert_msg(access(figure, R_OK) == 0, "the Markdown rendering's figure %s is missing", figure);
    remove_dir(dir);
}
END_TEST

/* --figures-at: the Markdown links the figures where the chapter keeps them and writes no OUT_files/;
 * the flag without a folder is refused. */
START_TEST(test_converter_links_figures_at_a_given_folder)
{
    char dir[64], src[128], cells[128], cmd[800], path[160];
    make_temp_dir(dir, sizeof dir);
    snprintf(src, sizeof src, "%s/nb.c", dir);
    snprintf(cells, sizeof cells, "%s/nb.cells", dir);
    write_text(src, SYNTHETIC);
    write_text(cells, STREAM);
    snprintf(cmd, sizeof cmd, "nb_ipynb '%s' '%s' '%s/out' --figures-at figures", src, cells, dir);
    ck_assert_msg(kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP) == 0, "%s: %s", cmd, err);
    snprintf(path, sizeof path, "%s/out.md", dir);
    char *md = kvl_read_text(path);
    ck_assert_msg(md && strstr(md, "![fig](figures/fig.svg)"), "the rendering does not link figures/fig.svg:\n%.600s",
                  md ? md : "");
    free(md);
    snprintf(path, sizeof path, "%s/out_files", dir);
    ck_assert_msg(access(path, F_OK) != 0, "%s was written", path);
    snprintf(cmd, sizeof cmd, "nb_ipynb '%s' '%s' '%s/out' --figures-at", src, cells, dir);
    ck_assert_int_eq(kvl_run(cmd, NULL, out, OUT_CAP, err, OUT_CAP), 2);
    remove_dir(dir);
}
END_TEST

START_TEST(test_converter_rejects_a_stream_that_does_not_fit_the_source)
{
    static const struct { const char *stream, *message; } bad[] = {
        {"\n%%kvl cell 3 x\n\n%%kvl /cell\n", "not in a code cell"},
        {"\n%%kvl cell 10 x\nhalf", "ends inside a cell"},
        {"stray\n%%kvl cell 10 x\n\n%%kvl /cell\n", "outside any cell"},
        {"\n%%kvl /svg\n", "out of place"},
        {"\n%%kvl cell 10 x\n\n%%kvl /cell\n\n%%kvl cell 11 y\n\n%%kvl /cell\n", "second output"},
        {"", "an empty stream"},
    };
    char dir[64];
    make_temp_dir(dir, sizeof dir);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc;
        cJSON *j = convert_synthetic(dir, bad[i].stream, &rc);
        cJSON_Delete(j);
        ck_assert_msg(rc == 2, "stream %zu: exit %d, expected 2", i, rc);
        ck_assert_msg(strstr(err, bad[i].message) != NULL, "stream %zu: message \"%s\" lacks \"%s\"", i, err,
                      bad[i].message);
    }
    remove_dir(dir);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_notebooks");
    TCase *run = tcase_create("run");
    tcase_add_test(run, test_every_notebook_runs_to_completion);
    tcase_add_test(run, test_every_notebook_refuses_an_unknown_argument);
    tcase_add_test(run, test_a_notebook_whose_output_cannot_be_written_exits_1);
    tcase_add_test(run, test_step_mode_walks_every_cell_and_stops_on_q);
    tcase_add_test(run, test_step_mode_pages_and_wraps_prose_to_the_terminal);
    tcase_add_test(run, test_committed_renders_are_what_the_notebooks_print_and_draw);
    suite_add_tcase(s, run);
    TCase *ipynb = tcase_create("ipynb");
    tcase_add_test(ipynb, test_every_notebook_converts_with_one_cell_per_source_cell);
    tcase_add_test(ipynb, test_every_ipynb_validates_against_the_nbformat_schema);
    tcase_add_test(ipynb, test_converter_pairs_each_output_with_its_cell);
    tcase_add_test(ipynb, test_converter_links_figures_at_a_given_folder);
    tcase_add_test(ipynb, test_converter_rejects_a_stream_that_does_not_fit_the_source);
    suite_add_tcase(s, ipynb);
    return s;
}
