#include "nb.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend_cpu.h"
#include "environment.h"
#include "file_io.h"
#include "grouped.h"
#include "nb_source.h"
#include "pager.h"
#include "program.h"
#include "status.h"

typedef enum { MODE_RUN, MODE_STEP, MODE_CELLS } nb_mode;

/* What nb_figure needs to know; set once by nb_main. */
static struct {
    nb_mode mode;
    const char *figures;  /* --figures DIR, or NULL */
    const char *program;
    const char *const *names;   /* every figure this notebook draws, NULL-terminated */
} run;

const char *nb_path(const char *relative)
{
    static _Thread_local char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", kvl_root_dir(), relative);
    return buf;
}

const char *nb_num(double v, int decimals)
{
    static _Thread_local char bufs[16][48];
    static _Thread_local unsigned next;
    return kvl_grouped(bufs[next++ % 16], sizeof bufs[0], v, decimals);
}

int nb_expect(int holds, const char *fmt, ...)
{
    if (holds) return KVL_OK;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kvl_fail(KVL_EINVAL, "%s", msg);
}

/* ---- figures --------------------------------------------------------------------------------- */

static int valid_name(const char *name)
{
    if (!*name) return 0;
    for (const char *p = name; *p; p++)
        if (!(*p == '-' || *p == '_' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'z') ||
              (*p >= 'A' && *p <= 'Z')))
            return 0;
    return 1;
}

/* Whole or not at all (ref/core/file_io.h): no half-written figure is left behind. */
static int write_figure(const char *path, const svg_doc *svg)
{
    kvl_file_out o;
    KVL_TRY(kvl_file_out_open(&o, path));
    kvl_file_out_write(&o, svg->text, strlen(svg->text));
    return kvl_file_out_commit(&o);
}

const char *const nb_every_figure[] = {NULL};

/* Whether name is one of the figures given to nb_main, whose paths were checked before the run. */
static int declared(const char *name)
{
    if (run.names == nb_every_figure) return 1;
    for (const char *const *d = run.names; d && *d; d++)
        if (!strcmp(*d, name)) return 1;
    return 0;
}

int nb_figure(const char *name, svg_doc *svg)
{
    int rc = KVL_OK;
    if (!valid_name(name))
        rc = kvl_fail(KVL_EINVAL, "figure name \"%s\": use letters, digits, - and _", name);
    else if (!declared(name))
        rc = kvl_fail(KVL_EINVAL, "figure %s is not in the list of figures given to nb_main", name);
    else if (svg->failed || !svg->text)
        rc = kvl_fail(KVL_ENOMEM, "figure %s: out of memory while drawing", name);
    char path[4096] = "";
    if (rc == KVL_OK && run.figures) {
        snprintf(path, sizeof path, "%s/%s.svg", run.figures, name);
        rc = write_figure(path, svg);
    }
    if (rc == KVL_OK && run.mode == MODE_CELLS)
        printf("\n%%%%kvl svg %s\n%s\n%%%%kvl /svg\n", name, svg->text);
    else if (rc == KVL_OK && run.figures) printf("[figure %s: %s]\n", name, path);
    else if (rc == KVL_OK)
        printf("[figure %s: run with --figures DIR to write it as DIR/%s.svg]\n", name, name);
    svg_free(svg);
    return rc;
}

/* ---- the cells ------------------------------------------------------------------------------- */

static int run_cell(const nb_cell *c, const char *source)
{
    fflush(stdout);
    kvl_clear_error();
    int rc = c->run();
    fflush(stdout);
    if (rc != KVL_OK)
        fprintf(stderr, "%s: cell %s (%s:%d) failed: %s\n", run.program, c->name, source, c->line,
                *kvl_error() ? kvl_error() : "no message");
    return rc;
}

static int run_all(const nb_cell *cells, size_t n, const char *source)
{
    for (size_t i = 0; i < n; i++) {
        if (run.mode == MODE_CELLS) printf("\n%%%%kvl cell %d %s\n", cells[i].line, cells[i].name);
        if (run_cell(&cells[i], source) != KVL_OK) return 1;
        if (run.mode == MODE_CELLS) printf("\n%%%%kvl /cell\n");
    }
    return 0;
}

/* The cell functions must stand in code cells, at most one per cell, in source order. */
static int check_table(const nb_source *s, const nb_cell *cells, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t k = nb_source_cell_of_line(s, (size_t)cells[i].line);
        if (k == s->n_cells || s->cells[k].kind != NB_CODE)
            return kvl_fail(KVL_EINVAL, "%s:%d: cell function %s is not inside a code cell",
                            s->path, cells[i].line, cells[i].name);
        if (i && k <= nb_source_cell_of_line(s, (size_t)cells[i - 1].line))
            return kvl_fail(
                KVL_EINVAL,
                "%s:%d: cell function %s is listed out of source order, or shares a cell", s->path,
                cells[i].line, cells[i].name);
    }
    return KVL_OK;
}

/* Page the lines of f, read whole so that the pager sees each table entire. */
static void page_output(nb_pager *p, FILE *f)
{
    char **lines = NULL, *line = NULL;
    size_t n = 0, cap = 0, lines_cap = 0;
    for (ssize_t len; (len = getline(&line, &cap, f)) >= 0; line = NULL, cap = 0) {
        if (len && line[len - 1] == '\n') line[len - 1] = '\0';
        if (n == lines_cap) {
            char **grown = realloc(lines, (lines_cap = 2 * lines_cap + 64) * sizeof *lines);
            if (!grown) break;
            lines = grown;
        }
        lines[n++] = line;
    }
    free(line);
    nb_pager_output(p, (const char *const *)lines, n);
    for (size_t i = 0; i < n; i++) free(lines[i]);
    free(lines);
}

/* Run cell c with stdout sent to a temporary file, then page what it printed. */
static int run_paged(nb_pager *p, const nb_cell *c, const char *source)
{
    fflush(stdout);
    FILE *out = tmpfile();
    const int saved = out ? dup(STDOUT_FILENO) : -1;
    if (saved < 0 || dup2(fileno(out), STDOUT_FILENO) < 0) {
        if (saved >= 0) close(saved);
        if (out) fclose(out);
        return run_cell(c, source);   /* no temporary file: the output unpaged */
    }
    const int rc = run_cell(c, source);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    rewind(out);
    page_output(p, out);
    fclose(out);
    return rc;
}

static void show_cell(nb_pager *p, const nb_source *s, size_t k)
{
    const nb_source_cell *c = &s->cells[k];
    char head[1400];
    snprintf(head, sizeof head, "==== cell %zu of %zu, %s (%s:%zu) ====", k + 1, s->n_cells,
             c->kind == NB_MARKDOWN ? "text" : "code", s->path, c->marker ? c->marker : 1);
    nb_pager_line(p, "");
    nb_pager_line(p, head);
    if (c->kind == NB_MARKDOWN) {
        const size_t n = c->last >= c->first ? c->last - c->first + 1 : 0;
        const char **lines = malloc((n ? n : 1) * sizeof *lines);
        if (!lines) return;
        for (size_t l = 0; l < n; l++) lines[l] = nb_source_cell_line(s, c, c->first + l);
        nb_pager_markdown(p, lines, n);
        free(lines);
        return;
    }
    for (size_t l = c->first; l <= c->last && !p->quit; l++) {
        char line[4096];
        snprintf(line, sizeof line, "  | %s", nb_source_cell_line(s, c, l));
        nb_pager_line(p, line);
    }
}

/* "nb_02" → "nb-02", the make target that rebuilds the notebook and walks it again */
static void make_target(char *out, size_t cap)
{
    snprintf(out, cap, "%s", run.program);
    char *u = strchr(out, '_');
    if (u) *u = '-';
}

static int step(const nb_cell *cells, size_t n, const char *source)
{
    nb_source s;
    if (nb_source_read(&s, nb_path(source)) != KVL_OK || check_table(&s, cells, n) != KVL_OK) {
        fprintf(stderr, "%s: %s\n", run.program, kvl_error());
        nb_source_free(&s);
        return 1;
    }
    nb_pager p;
    nb_pager_init(&p);
    char target[64], intro[1400];
    make_target(target, sizeof target);
    snprintf(intro, sizeof intro,
             "%s, cell by cell: Enter for the next, q to quit. Change the file, then `make %s` "
             "rebuilds it and walks it again.",
             source, target);
    const char *const intro_lines[] = {intro};
    nb_pager_markdown(&p, intro_lines, 1);
    int status = 0;
    size_t next = 0;
    for (size_t k = 0; k < s.n_cells && status == 0 && !p.quit; k++) {
        show_cell(&p, &s, k);
        if (next < n && nb_source_cell_of_line(&s, (size_t)cells[next].line) == k) {
            nb_pager_line(&p, "---- output ----");
            if (run_paged(&p, &cells[next++], source) != KVL_OK) status = 1;
        }
        if (status == 0 && k + 1 < s.n_cells && !p.quit) {
            nb_pager_line(&p, "");
            nb_pager_wait(&p, "-- Enter: next cell, q: quit -- ");
        }
    }
    nb_source_free(&s);
    return status;
}

/* 2 after one line on stderr when DIR is not a directory this program can write to, or a figure's
 * path inside it could not be written (ref/core/file_io.h), so that no output is printed first. */
static int check_figures(void)
{
    struct stat st;
    if (stat(run.figures, &st) != 0 || !S_ISDIR(st.st_mode) || access(run.figures, W_OK) != 0) {
        char shown[256];
        fprintf(stderr, "%s: --figures %s: not a directory this program can write to\n",
                run.program, kvl_shown(shown, sizeof shown, run.figures));
        return 2;
    }
    for (const char *const *d = run.names; d && *d; d++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s.svg", run.figures, *d);
        if (kvl_file_out_check(path) != KVL_OK) {
            fprintf(stderr, "%s: --figures %s\n", run.program, kvl_error());
            return 2;
        }
    }
    return 0;
}

static void usage(FILE *f, const char *program)
{
    fprintf(
        f,
        "usage: %s [--step | --cells] [--figures DIR]\n"
        "Runs this notebook's cells and prints their output.\n"
        "  --step          walk the notebook cell by cell (text, code, output), Enter between cells\n"
        "  --cells         print each cell's output between %%%%kvl markers, for nb_ipynb\n"
        "  --figures DIR   also write every figure as DIR/NAME.svg\n",
        program);
}

int nb_main(int argc, char **argv, const char *source, const nb_cell *cells, size_t n_cells,
            const char *const *figures)
{
    run.names = figures;
    const char *slash = strrchr(argv[0], '/');
    run.program = slash ? slash + 1 : argv[0];
    if (kvl_environment_check(run.program)) return 2;
    kvl_backend_choose();
    const char *bad = NULL;
    for (int i = 1; i < argc && !bad; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout, run.program);
            return kvl_exit_status(run.program, 0);
        }
        if (!strcmp(argv[i], "--step") || !strcmp(argv[i], "--cells")) {
            const nb_mode mode = argv[i][2] == 's' ? MODE_STEP : MODE_CELLS;
            bad = run.mode == mode       ? "given twice"
                  : run.mode != MODE_RUN ? "--step or --cells, not both"
                                         : NULL;
            run.mode = mode;
        } else if (!strcmp(argv[i], "--figures")) {
            bad = i + 1 == argc ? "needs a directory" : run.figures ? "given twice" : NULL;
            if (!bad) run.figures = argv[++i];
        } else {
            bad = "unknown argument (try --help)";
        }
        if (bad) {
            char shown[256];
            fprintf(stderr, "%s: %s: %s\n", run.program, kvl_shown(shown, sizeof shown, argv[i]),
                    bad);
            return 2;
        }
    }
    if (run.figures && figures == nb_every_figure) {
        fprintf(stderr, "%s: --figures: this program does not list its figures (nb_every_figure)\n",
                run.program);
        return 2;
    }
    if (run.figures && check_figures()) return 2;
    const int status =
        run.mode == MODE_STEP ? step(cells, n_cells, source) : run_all(cells, n_cells, source);
    return kvl_exit_status(run.program, status);
}
