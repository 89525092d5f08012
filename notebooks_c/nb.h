/* nb: the runtime every notebook in notebooks_c/ links, so that one C file is at once a jupytext
 * "percent" notebook, a program that prints the chapter's numbers, and a terminal walk-through.
 *
 * A code cell that computes something defines one cell function with NB_CELL; the notebook's
 * last cell lists them, in source order, and hands the list to nb_main:
 *
 *     // %%
 *     NB_CELL(cell_bytes)
 *     {
 *         printf("...");
 *         return KVL_OK;       // or a KVL_E* status: the notebook stops and exits 1
 *     }
 *     ...
 *     int main(int argc, char **argv)
 *     {
 *         static const nb_cell cells[] = {NB_RUN(cell_bytes), ...};
 *         static const char *const figures[] = {"bytes_per_token", ..., NULL};
 *         return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
 *     }
 *
 * NB_CELL records the line it stands on, which is how a cell function is matched to the notebook
 * cell that holds it (nb_source.h) without naming cells twice.
 *
 * How outputs reach a .ipynb. The design is a marker stream: run with --cells, the program
 * prints each cell function's output between marker lines, and the converter nb_ipynb pairs that
 * stream with the cells of the source file. The notebook program stays a plain program (no JSON,
 * no output capture), and the converter needs no knowledge of any chapter. The stream, one
 * marker per line, each preceded by a newline that is not part of the output (so an output that
 * does not end in a newline survives):
 *
 *     %%kvl cell LINE NAME      the output of the cell function defined at LINE follows
 *     %%kvl svg NAME            an SVG figure follows (nb_figure), up to
 *     %%kvl /svg
 *     %%kvl /cell
 *
 * Modes of every notebook program:
 *     nb_NN                    run every cell, print the outputs
 *     nb_NN --step             walk the notebook: each cell's text or code, then its output,
 *                              waiting for Enter between cells (q quits; at end of input it runs
 *                              on); prose is re-wrapped to the terminal and every screenful waits
 *                              too (pager.h). `make nb-NN` rebuilds the notebook and runs this
 *     nb_NN --cells            the marker stream above
 *     --figures DIR            (with any mode) also write each figure to DIR/NAME.svg
 * The source is found as KVL_ROOT/<file>, else under the source tree the program was built from. */
#ifndef KVL_NB_H
#define KVL_NB_H

#include <stddef.h>

#include "status.h"
#include "svg.h"

typedef int (*nb_cell_fn)(void);

typedef struct {
    nb_cell_fn run;
    int line;          /* the line of its NB_CELL */
    const char *name;
} nb_cell;

#define NB_CELL(fn)                \
    enum { fn##_line = __LINE__ }; \
    static int fn(void)
#define NB_RUN(fn) {fn, fn##_line, #fn}

/* Run the notebook in the mode argv asks for; `source` is the notebook's __FILE__, `figures` the
 * names of every figure its cells draw, NULL-terminated (NULL: none), so that with --figures DIR
 * each DIR/NAME.svg is checked before the first cell runs. Returns the exit status: 0, 1 when a
 * cell fails (its message on stderr) or stdout could not be written, 2 for bad arguments or a
 * figure path that cannot be written. */
int nb_main(int argc, char **argv, const char *source, const nb_cell *cells, size_t n_cells,
            const char *const *figures);

/* A figures list for nb_main that admits every name, for a program never run with --figures
 * (nb_main refuses it then): the Jupyter kernel (notebooks_c/kernel/) runs a notebook's first cells
 * before it has seen the last cell, which lists the notebook's figures. */
extern const char *const nb_every_figure[];

/* Show a finished figure: embedded in --cells mode, written to DIR/NAME.svg with --figures DIR, and
 * named in the output otherwise. Frees the document. KVL_ENOMEM if it was incomplete, KVL_EIO if it
 * could not be written, KVL_EINVAL if NAME is not one of the figures given to nb_main. NAME:
 * letters, digits, '-' and '_'. */
int nb_figure(const char *name, svg_doc *svg);

/* KVL_OK when `holds`, else a failure whose message is the printf-style text: how a cell checks a
 * number it prints (return nb_expect(diff < 1e-12, "...", diff)). */
int nb_expect(int holds, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* v with thousands separators and at most `decimals` decimals, trailing zeros dropped: 1234567 →
 * "1,234,567", 1234.25 → "1,234.25". The text lives in one of 16 rotating buffers, so up to 16 may
 * appear in one printf. */
const char *nb_num(double v, int decimals);

/* The path of `relative` under the project root (KVL_ROOT, else the source tree), for configs
 * and data. */
const char *nb_path(const char *relative);

#endif
