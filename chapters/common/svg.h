/* svg: the figures the notebooks and programs draw, written as SVG text by the project itself
 * (no plotting library).
 *
 * A figure is built in memory (svg_doc) from a few primitives, then handed to the notebook
 * runtime (nb.h, nb_figure), which embeds it in the notebook or writes it to a file. The chart
 * helpers below are the three shapes the course needs: bars on a log axis (bytes per token,
 * elements per entry), a grid of categories (attention masks, windows, top-k selections) and a
 * histogram (quantisation error).
 *
 * Output is deterministic: coordinates print with one decimal, so the same inputs give the same
 * bytes on every machine and a committed figure can be compared with a fresh one. Text is
 * escaped for XML. An allocation failure marks the document failed; later calls do nothing and
 * nb_figure reports it.
 *
 * Shapes: values[n] and labels[n] for bars; cells[rows][cols] of category indices for grids;
 * x[n] samples for histograms. Sizes are in SVG user units (pixels). */
#ifndef KVL_SVG_H
#define KVL_SVG_H

#include <stddef.h>
#include <stdio.h>

typedef struct {
    char *text;     /* the document so far, NUL-terminated */
    size_t len, cap;
    int failed;     /* an allocation failed: the document is incomplete */
} svg_doc;

/* ---- primitives ------------------------------------------------------------------------------ */

/* Start a width × height document with a white background and a sans-serif font. */
void svg_begin(svg_doc *s, double width, double height);
/* Close the document; s->text is then the finished SVG. */
void svg_end(svg_doc *s);
void svg_free(svg_doc *s);

void svg_rect(svg_doc *s, double x, double y, double w, double h, const char *fill);
void svg_line(svg_doc *s, double x1, double y1, double x2, double y2, const char *stroke,
              double width);
/* Text at (x, y) (baseline), anchor "start", "middle" or "end", printf-style, escaped for XML. */
void svg_text(svg_doc *s, double x, double y, double size, const char *anchor, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
/* text streamed to f as an SVG element's text: &, <, > and " as XML entities, control characters
 * as spaces, the rule every svg_text follows (for a program that writes its chart to a file
 * itself). */
void svg_put_text(FILE *f, const char *text);
/* The same, bold. */
void svg_title(svg_doc *s, double x, double y, double size, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* ---- charts: each is a whole document -------------------------------------------------------- */

/* Horizontal bars on a log10 axis: one per value, labelled on the left, the value (with `unit`)
 * at the bar's end; bars whose emphasis[i] is non-zero are dark, the others light (emphasis may
 * be NULL: all dark). Every value must be positive. */
void svg_bars_log(svg_doc *s, const char *title, const char *subtitle, const char *const *labels,
                  const double *values, const int *emphasis, size_t n, const char *unit);

/* Two horizontal bars per label on a log10 axis from 1 to the next power of ten above the
 * largest value (at least 10): light[i] above dark[i], each with its value; a value below 1
 * draws no bar. */
void svg_pair_bars_log(svg_doc *s, const char *title, const char *subtitle,
                       const char *const *labels, const double *light, const double *dark,
                       size_t n);

/* A grid of cells[rows][cols], cell (r, c) filled with colours[cells[r][c]] (an index below
 * n_colours), rows top to bottom, columns left to right; a legend names each colour (legend[i];
 * NULL skips one). row_label and col_label name the axes; rows and columns are numbered every
 * row_tick and col_tick (0: not numbered). */
void svg_grid(svg_doc *s, const char *title, const unsigned char *cells, size_t rows, size_t cols,
              const char *const *colours, const char *const *legend, size_t n_colours,
              const char *row_label, const char *col_label, size_t row_tick, size_t col_tick);

/* A histogram of x[n] over [lo, hi) in `bins` equal bins (samples outside are counted in the edge
 * bins), with the x-axis named x_label. */
void svg_histogram(svg_doc *s, const char *title, const double *x, size_t n, size_t bins, double lo,
                   double hi, const char *x_label);

#endif
