/* draw_dsa: notebook 04's row maps and figures (draw_dsa.h). */
#include "draw_dsa.h"

#include <math.h>
#include <stdio.h>

#include "nb.h"
#include "svg.h"

void nb04_print_row_map(kvf_row layout)
{
    size_t n = 0;
    const kvf_row_field *f = kvf_row_fields(layout, &n);
    printf("%s, %zu bytes:\n", kvf_row_name(layout), kvf_row_bytes(layout));
    for (size_t i = 0; i < n; i++)
        printf("  bytes %3zu..%-3zu %-6s %s\n", f[i].offset, f[i].offset + f[i].size - 1, f[i].name,
               f[i].format);
}

int nb04_draw_selection(const unsigned char *cells, size_t T, size_t K)
{
    static const char *const colours[] = {"#f2f2f2", "#c9c9c9", "#1f4e8c"};
    char title[96], picked[48];
    snprintf(title, sizeof title,
             "What the lightning indexer selects (toy, K = %zu, random weights)", K);
    snprintf(picked, sizeof picked, "selected: top-%zu of I", K);
    const char *const legend[] = {"future (causal mask)", "cached, not selected", picked};
    svg_doc s;
    svg_grid(&s, title, cells, T, T, colours, legend, 3, "query position t", "key position s", 4,
             4);
    return nb_figure("topk_selection", &s);
}

/* ---- the flow figure: three strips of one box per cached position, top to bottom ------------- */

enum { FLOW_X0 = 150, FLOW_CELL = 18, FLOW_GAP = 2, FLOW_H = 22 };
#define PICKED "#f4a261"

/* a line from (x1, y1) to (x2, y2) with an arrowhead at its end */
static void arrow(svg_doc *s, double x1, double y1, double x2, double y2)
{
    const double len = hypot(x2 - x1, y2 - y1), ux = (x2 - x1) / len, uy = (y2 - y1) / len;
    svg_line(s, x1, y1, x2, y2, "#555", 1.2);
    svg_line(s, x2, y2, x2 - 6 * ux + 3.5 * uy, y2 - 6 * uy - 3.5 * ux, "#555", 1.2);
    svg_line(s, x2, y2, x2 - 6 * ux - 3.5 * uy, y2 - 6 * uy + 3.5 * ux, "#555", 1.2);
}

static double cell_x(size_t s)
{
    return FLOW_X0 + (double)s * (FLOW_CELL + FLOW_GAP);
}

static int is_pick(const nb04_flow *f, size_t s)
{
    for (size_t k = 0; k < f->K; k++)
        if (f->picks[k] == (int32_t)s) return 1;
    return 0;
}

/* one strip at y: position s filled `picked` when it is a pick, `other` when not; label on the
 * left */
static void strip(svg_doc *s, const nb04_flow *f, double y, const char *label, const char *picked,
                  const char *other)
{
    svg_text(s, FLOW_X0 - 10, y + 15, 12, "end", "%s", label);
    for (size_t p = 0; p <= f->t; p++)
        svg_rect(s, cell_x(p), y, FLOW_CELL, FLOW_H, is_pick(f, p) ? picked : other);
}

static void ticks(svg_doc *s, const nb04_flow *f, double y)
{
    for (size_t p = 0; p <= f->t; p += 4)
        svg_text(s, cell_x(p) + FLOW_CELL / 2.0, y, 10, "middle", "%zu", p);
    svg_text(s, cell_x(f->t) + FLOW_CELL + 8, y, 10, "start", "s");
}

static void picks_text(char *buf, size_t cap, const nb04_flow *f)
{
    size_t len = (size_t)snprintf(buf, cap, "{");
    for (size_t k = 0; k < f->K && f->picks[k] >= 0 && len < cap; k++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%d", k ? ", " : "", (int)f->picks[k]);
    if (len < cap) snprintf(buf + len, cap - len, "}");
}

int nb04_draw_flow(const nb04_flow *f)
{
    const size_t N = f->t + 1, R = f->Dc + f->Dr;
    char picks[160];
    picks_text(picks, sizeof picks, f);
    svg_doc s;
    svg_begin(&s, cell_x(N) + 80, 384);
    svg_title(&s, 20, 26, 15,
              "DSA for one query: indexer, top-k, sparse attention (toy, t = %zu, K = %zu)", f->t,
              f->K);
    svg_text(&s, 20, 46, 12, "start",
             "every box is a cached position s = 0 … %zu; orange: the %zu the query picks", f->t,
             f->K);
    svg_text(&s, 20, 74, 13, "start",
             "1. the indexer scores every key: I(t, s) = Σ_h w_h · ReLU(q_h · k_s),"
             " q [%zu][%zu], w [%zu]",
             f->HI, f->DI, f->HI);
    strip(&s, f, 84, "index keys k_s", "#bcd4ee", "#bcd4ee");
    svg_text(&s, cell_x(N) + 4, 100, 11, "start", "[%zu][%zu]", N, f->DI);
    ticks(&s, f, 119);
    arrow(&s, 90, 124, 90, 146);
    svg_text(&s, 20, 160, 13, "start",
             "2. top-k keeps the %zu largest, ties to the smaller position: S_t = %s", f->K, picks);
    strip(&s, f, 170, "scores I(t, s)", PICKED, "#bcd4ee");
    svg_text(&s, cell_x(N) + 4, 186, 11, "start", "[%zu]", N);
    for (size_t p = 0; p < N; p++)
        if (is_pick(f, p))
            arrow(&s, cell_x(p) + FLOW_CELL / 2.0, 194, cell_x(p) + FLOW_CELL / 2.0, 236);
    strip(&s, f, 238, "latent rows r_s", PICKED, "#e6e6e6");
    svg_text(&s, cell_x(N) + 4, 254, 11, "start", "[%zu][%zu]", N, R);
    ticks(&s, f, 273);
    svg_text(&s, 20, 298, 13, "start",
             "3. sparse attention reads only the picked rows r_s = [c_s | kR_s]: [%zu][%zu] of"
             " [%zu][%zu]",
             f->K, R, N, R);
    arrow(&s, 90, 306, 90, 328);
    svg_text(&s, 20, 346, 13, "start",
             "ô [H = %zu][Dc = %zu]: per head, Σ over s in S_t of softmax(τ q̂_h · r_s) c_s", f->H,
             f->Dc);
    svg_text(&s, 20, 368, 13, "start",
             "then W_UV per head: o [%zu][Dv = %zu], and W_O: out [d = %zu]", f->H, f->Dv, f->d);
    svg_end(&s);
    return nb_figure("indexer_flow", &s);
}
