#include "svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grouped.h"

#define FONT "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\""
#define INK "#222"
#define AXIS "#bbb"
#define DARK "#1f4e8c"
#define LIGHT "#a9c1e0"

/* ---- the text buffer ------------------------------------------------------------------------- */

static void append(svg_doc *s, const char *text, size_t n)
{
    if (s->failed) return;
    if (s->len + n + 1 > s->cap) {
        size_t cap = s->cap ? s->cap : 4096;
        while (cap < s->len + n + 1) cap *= 2;
        char *grown = realloc(s->text, cap);
        if (!grown) { s->failed = 1; return; }
        s->text = grown;
        s->cap = cap;
    }
    memcpy(s->text + s->len, text, n);
    s->len += n;
    s->text[s->len] = '\0';
}

static void vprint(svg_doc *s, const char *fmt, va_list ap)
{
    char small[512];
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    if (n < 0) { s->failed = 1; va_end(again); return; }
    if ((size_t)n < sizeof small) {
        append(s, small, (size_t)n);
    } else {
        char *big = malloc((size_t)n + 1);
        if (!big) s->failed = 1;
        else {
            vsnprintf(big, (size_t)n + 1, fmt, again);
            append(s, big, (size_t)n);
            free(big);
        }
    }
    va_end(again);
}

static void print(svg_doc *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void print(svg_doc *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprint(s, fmt, ap);
    va_end(ap);
}

/* What byte c of a text becomes in XML: an entity for &, <, > and ", a space for a control
 * character (XML 1.0 allows none), else NULL (the byte itself). */
static const char *xml_entity(unsigned char c)
{
    switch (c) {
    case '&': return "&amp;";
    case '<': return "&lt;";
    case '>': return "&gt;";
    case '"': return "&quot;";
    default: return c < 0x20 || c == 0x7f ? " " : NULL;
    }
}

static void append_escaped(svg_doc *s, const char *text)
{
    for (const char *p = text; *p; p++) {
        const char *e = xml_entity((unsigned char)*p);
        append(s, e ? e : p, e ? strlen(e) : 1);
    }
}

void svg_put_text(FILE *f, const char *text)
{
    for (const char *p = text; *p; p++) {
        const char *e = xml_entity((unsigned char)*p);
        if (e) fputs(e, f);
        else fputc(*p, f);
    }
}

/* ---- primitives ------------------------------------------------------------------------------ */

void svg_begin(svg_doc *s, double width, double height)
{
    *s = (svg_doc){0};
    print(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" " FONT
        ">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
        width, height, width, height);
}

void svg_end(svg_doc *s)
{
    print(s, "</svg>\n");
}

void svg_free(svg_doc *s)
{
    free(s->text);
    *s = (svg_doc){0};
}

void svg_rect(svg_doc *s, double x, double y, double w, double h, const char *fill)
{
    print(s, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"/>\n", x, y, w,
          h, fill);
}

void svg_line(svg_doc *s, double x1, double y1, double x2, double y2, const char *stroke,
              double width)
{
    print(
        s,
        "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"/>\n",
        x1, y1, x2, y2, stroke, width);
}

static void text_element(svg_doc *s, double x, double y, double size, const char *anchor,
                         const char *weight, const char *fmt, va_list ap)
{
    char body[1024];
    vsnprintf(body, sizeof body, fmt, ap);
    print(
        s,
        "<text x=\"%.1f\" y=\"%.1f\" font-size=\"%.0f\" text-anchor=\"%s\" font-weight=\"%s\" fill=\"" INK
        "\">",
        x, y, size, anchor, weight);
    append_escaped(s, body);
    print(s, "</text>\n");
}

void svg_text(svg_doc *s, double x, double y, double size, const char *anchor, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    text_element(s, x, y, size, anchor, "normal", fmt, ap);
    va_end(ap);
}

void svg_title(svg_doc *s, double x, double y, double size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    text_element(s, x, y, size, "start", "bold", fmt, ap);
    va_end(ap);
}

/* v as a bar or tick label: grouped with up to two decimals, or two significant digits below
 * 0.01 (an error of 4e-08 must not read "0") */
static const char *bar_number(char *buf, size_t cap, double v)
{
    if (v != 0 && fabs(v) < 0.01) {
        snprintf(buf, cap, "%.2g", v);
        return buf;
    }
    return kvl_grouped(buf, cap, v, 2);
}

/* ---- bars on a log axis ---------------------------------------------------------------------- */

void svg_bars_log(svg_doc *s, const char *title, const char *subtitle, const char *const *labels,
                  const double *values, const int *emphasis, size_t n, const char *unit)
{
    const double left = 230, right = 760, top = 74, bar = 26, gap = 10, width = 1000;
    const double height = top + (double)n * (bar + gap) + 50;
    double lo = INFINITY, hi = 0;
    for (size_t i = 0; i < n; i++) {
        lo = fmin(lo, values[i]);
        hi = fmax(hi, values[i]);
    }
    double d0 = n ? floor(log10(lo)) : 0, d1 = n ? ceil(log10(hi)) : 1;
    if (d1 <= d0) d1 = d0 + 1;
    svg_begin(s, width, height);
    svg_title(s, 20, 28, 17, "%s", title);
    if (subtitle) svg_text(s, 20, 50, 13, "start", "%s", subtitle);
    const double axis_y = top + (double)n * (bar + gap) + 4;
    for (double e = d0; e <= d1; e++) {
        double x = left + (e - d0) / (d1 - d0) * (right - left);
        char tick[40];
        svg_line(s, x, top - 8, x, axis_y, AXIS, 1);
        svg_text(s, x, axis_y + 18, 12, "middle", "%s %s",
                 bar_number(tick, sizeof tick, pow(10, e)), unit);
    }
    for (size_t i = 0; i < n; i++) {
        double y = top + (double)i * (bar + gap);
        double w = (log10(values[i]) - d0) / (d1 - d0) * (right - left);
        char v[40];
        svg_text(s, left - 8, y + bar * 0.68, 13, "end", "%s", labels[i]);
        svg_rect(s, left, y, w, bar, !emphasis || emphasis[i] ? DARK : LIGHT);
        svg_text(s, left + w + 6, y + bar * 0.68, 13, "start", "%s %s",
                 bar_number(v, sizeof v, values[i]), unit);
    }
    svg_end(s);
}

void svg_pair_bars_log(svg_doc *s, const char *title, const char *subtitle,
                       const char *const *labels, const double *light, const double *dark, size_t n)
{
    const double left = 190, right = 760, top = 80, bar = 16, gap = 14;
    double hi = 10;
    for (size_t i = 0; i < n; i++) hi = fmax(hi, fmax(light[i], dark[i]));
    const double d1 = ceil(log10(hi)), bottom = top + (double)n * (2 * bar + gap);
    svg_begin(s, 900, bottom + 40);
    svg_title(s, 20, 30, 18, "%s", title);
    svg_text(s, 20, 52, 13, "start", "%s", subtitle);
    for (double e = 0; e <= d1; e++) {
        const double x = left + e / d1 * (right - left);
        char tick[40];
        svg_line(s, x, top - 8, x, bottom, AXIS, 1);
        svg_text(s, x, bottom + 16, 12, "middle", "%s", bar_number(tick, sizeof tick, pow(10, e)));
    }
    for (size_t i = 0; i < n; i++) {
        const double y = top + (double)i * (2 * bar + gap), v[2] = {light[i], dark[i]};
        svg_text(s, left - 8, y + bar + 4, 13, "end", "%s", labels[i]);
        for (int k = 0; k < 2; k++) {
            const double w = v[k] >= 1 ? log10(v[k]) / d1 * (right - left) : 0;
            char num[40];
            svg_rect(s, left, y + k * bar, w, bar - 2, k ? DARK : LIGHT);
            svg_text(s, left + w + 6, y + k * bar + bar - 4, 12, "start", "%s",
                     bar_number(num, sizeof num, v[k]));
        }
    }
    svg_end(s);
}

/* ---- a grid of categories -------------------------------------------------------------------- */

void svg_grid(svg_doc *s, const char *title, const unsigned char *cells, size_t rows, size_t cols,
              const char *const *colours, const char *const *legend, size_t n_colours,
              const char *row_label, const char *col_label, size_t row_tick, size_t col_tick)
{
    const double cell = rows > 48 || cols > 48 ? 8 : 14, left = 70, top = 60;
    const double grid_w = cell * (double)cols, grid_h = cell * (double)rows;
    const double legend_x = left + grid_w + 30, width = legend_x + 230;
    const double height = fmax(top + grid_h + 60, top + 24.0 * (double)n_colours + 40);
    svg_begin(s, width, height);
    svg_title(s, 20, 28, 17, "%s", title);
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            unsigned k = cells[r * cols + c];
            svg_rect(s, left + cell * (double)c, top + cell * (double)r, cell - 1, cell - 1,
                     k < n_colours ? colours[k] : "black");
        }
    for (size_t i = 0; row_tick && i < rows; i += row_tick)
        svg_text(s, left - 6, top + cell * ((double)i + 0.8), 10, "end", "%zu", i);
    for (size_t j = 0; col_tick && j < cols; j += col_tick)
        svg_text(s, left + cell * ((double)j + 0.5), top + grid_h + 14, 10, "middle", "%zu", j);
    svg_text(s, left + grid_w / 2, top + grid_h + 34, 13, "middle", "%s", col_label);
    print(
        s,
        "<text x=\"18\" y=\"%.1f\" font-size=\"13\" text-anchor=\"middle\" transform=\"rotate(-90 18 %.1f)\" fill=\"" INK
        "\">",
        top + grid_h / 2, top + grid_h / 2);
    append_escaped(s, row_label);
    print(s, "</text>\n");
    for (size_t k = 0, shown = 0; k < n_colours; k++) {
        if (!legend[k]) continue;
        double y = top + 24.0 * (double)shown++;
        svg_rect(s, legend_x, y, 14, 14, colours[k]);
        svg_text(s, legend_x + 22, y + 12, 13, "start", "%s", legend[k]);
    }
    svg_end(s);
}

/* ---- a histogram ----------------------------------------------------------------------------- */

void svg_histogram(svg_doc *s, const char *title, const double *x, size_t n, size_t bins, double lo,
                   double hi, const char *x_label)
{
    const double left = 70, right = 700, top = 60, bottom = 300, width = 740, height = 360;
    size_t *count = calloc(bins ? bins : 1, sizeof *count), peak = 1;
    if (!count) { s->failed = 1; return; }
    for (size_t i = 0; i < n && bins; i++) {
        double f = (x[i] - lo) / (hi - lo) * (double)bins;
        size_t b = f < 0 ? 0 : f >= (double)bins ? bins - 1 : (size_t)f;
        count[b]++;
    }
    for (size_t b = 0; b < bins; b++) peak = count[b] > peak ? count[b] : peak;
    svg_begin(s, width, height);
    svg_title(s, 20, 28, 17, "%s", title);
    const double bw = (right - left) / (double)(bins ? bins : 1);
    for (size_t b = 0; b < bins; b++) {
        double h = (bottom - top) * (double)count[b] / (double)peak;
        svg_rect(s, left + bw * (double)b, bottom - h, bw - 1, h, DARK);
    }
    svg_line(s, left, bottom, right, bottom, INK, 1);
    svg_line(s, left, top, left, bottom, INK, 1);
    for (int i = 0; i <= 4; i++) {
        double v = lo + (hi - lo) * i / 4.0, xx = left + (right - left) * i / 4.0;
        svg_line(s, xx, bottom, xx, bottom + 5, INK, 1);
        svg_text(s, xx, bottom + 20, 12, "middle", "%.3g", v);
    }
    svg_text(s, left - 8, top + 10, 12, "end", "%zu", peak);
    svg_text(s, left - 8, bottom, 12, "end", "0");
    svg_text(s, (left + right) / 2, bottom + 42, 13, "middle", "%s", x_label);
    svg_end(s);
    free(count);
}
