/* draw_foundations: the plumbing of notebook 00 (notebooks_c/00_foundations.c): its line charts,
 * kept out of the cells so that a cell reads like the formula above it. */
#ifndef KVL_NB_DRAW_FOUNDATIONS_H
#define KVL_NB_DRAW_FOUNDATIONS_H

#include <stddef.h>

/* One curve of a chart: y[n] at the chart's x[n], drawn as a line, or as dots when dots is set. */
typedef struct {
    const double *y;
    const char *colour, *label;
    int dots;
} nb00_series;

/* A chart of curves over x[n] within [y_lo, y_hi]: its axes, a dashed vertical line at each
 * vlines[n_vlines] (labelled vline_labels[k]) and a dashed horizontal one at hline (NaN: none,
 * labelled hline_label). y values are drawn as given; with log_ticks the y axis is labelled
 * 10^k at every whole k (the values being log10 of something). */
typedef struct {
    const char *name, *title, *subtitle, *x_label, *y_label;
    const double *x;
    size_t n;
    double y_lo, y_hi;
    int log_ticks;
    const double *vlines;
    const char *const *vline_labels;
    size_t n_vlines;
    double hline;
    const char *hline_label;
} nb00_chart;

int nb00_draw_chart(const nb00_chart *c, const nb00_series *series, size_t n_series);

#endif
