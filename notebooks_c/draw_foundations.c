/* draw_foundations: notebook 00's line charts (draw_foundations.h). */
#include "draw_foundations.h"

#include <math.h>

#include "nb.h"
#include "svg.h"

/* Layout: the plot area and the room around it. */
enum { CH_X0 = 90, CH_Y0 = 70, CH_W = 560, CH_H = 300, CH_LEGEND = 230 };

static double px(const nb00_chart *c, double x)
{
    const double lo = c->x[0], hi = c->x[c->n - 1];
    return CH_X0 + (x - lo) / (hi - lo) * CH_W;
}

static double py(const nb00_chart *c, double y)
{
    return CH_Y0 + CH_H - (y - c->y_lo) / (c->y_hi - c->y_lo) * CH_H;
}

static void dashed_vertical(svg_doc *s, double x, double y0, double y1)
{
    for (double y = y0; y < y1; y += 8) svg_line(s, x, y, x, fmin(y + 4, y1), "#888888", 1);
}

static void dashed_horizontal(svg_doc *s, double y, double x0, double x1)
{
    for (double x = x0; x < x1; x += 8) svg_line(s, x, y, fmin(x + 4, x1), y, "#888888", 1);
}

static void axes(svg_doc *s, const nb00_chart *c)
{
    svg_line(s, CH_X0, CH_Y0 + CH_H, CH_X0 + CH_W, CH_Y0 + CH_H, "#333333", 1);
    svg_line(s, CH_X0, CH_Y0, CH_X0, CH_Y0 + CH_H, "#333333", 1);
    for (int k = 0; k <= 4; k++) {
        /* whole ticks: the x axes count pairs and positions */
        const double x = round(c->x[0] + (c->x[c->n - 1] - c->x[0]) * k / 4);
        svg_text(s, px(c, x), CH_Y0 + CH_H + 16, 11, "middle", "%.0f", x);
    }
    if (c->log_ticks)
        for (double k = ceil(c->y_lo); k <= c->y_hi; k++)
            svg_text(s, CH_X0 - 6, py(c, k) + 4, 11, "end", "10^%.0f", k);
    else
        for (int k = 0; k <= 4; k++) {
            const double y = c->y_lo + (c->y_hi - c->y_lo) * k / 4;
            svg_text(s, CH_X0 - 6, py(c, y) + 4, 11, "end", "%.3g", y);
        }
    svg_text(s, CH_X0 + CH_W / 2.0, CH_Y0 + CH_H + 36, 12, "middle", "%s", c->x_label);
    svg_text(s, 14, CH_Y0 - 12, 12, "start", "%s", c->y_label);
}

static void curve(svg_doc *s, const nb00_chart *c, const nb00_series *v)
{
    for (size_t i = 0; i < c->n; i++) {
        const double x = px(c, c->x[i]), y = py(c, v->y[i]);
        if (v->dots) svg_rect(s, x - 2.5, y - 2.5, 5, 5, v->colour);
        else if (i > 0) svg_line(s, px(c, c->x[i - 1]), py(c, v->y[i - 1]), x, y, v->colour, 2);
    }
}

int nb00_draw_chart(const nb00_chart *c, const nb00_series *series, size_t n_series)
{
    svg_doc s;
    svg_begin(&s, CH_X0 + CH_W + CH_LEGEND, CH_Y0 + CH_H + 60);
    svg_title(&s, 20, 24, 15, "%s", c->title);
    svg_text(&s, 20, 44, 12, "start", "%s", c->subtitle);
    axes(&s, c);
    for (size_t k = 0; k < c->n_vlines; k++) {
        dashed_vertical(&s, px(c, c->vlines[k]), CH_Y0, CH_Y0 + CH_H);
        svg_text(&s, px(c, c->vlines[k]) + 4, CH_Y0 + 12 + 14.0 * k, 11, "start", "%s",
                 c->vline_labels[k]);
    }
    if (!isnan(c->hline)) {
        dashed_horizontal(&s, py(c, c->hline), CH_X0, CH_X0 + CH_W);
        svg_text(&s, CH_X0 + 6, py(c, c->hline) - 5, 11, "start", "%s", c->hline_label);
    }
    for (size_t k = 0; k < n_series; k++) {
        curve(&s, c, &series[k]);
        const double y = CH_Y0 + 20.0 * k;
        svg_rect(&s, CH_X0 + CH_W + 20, y, 14, 14, series[k].colour);
        svg_text(&s, CH_X0 + CH_W + 40, y + 11, 12, "start", "%s", series[k].label);
    }
    svg_end(&s);
    return nb_figure(c->name, &s);
}
