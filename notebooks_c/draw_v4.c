#include "draw_v4.h"

#include <stdio.h>

#include "nb.h"
#include "svg.h"

int dv4_layer_map_figure(const unsigned char *kind, size_t L)
{
    enum { KINDS = 3, MAX_L = 64 };
    static unsigned char cells[KINDS * MAX_L];   /* [kind][L] */
    if (L > MAX_L) return nb_expect(0, "%zu layers do not fit the figure", L);
    for (size_t k = 0; k < KINDS; k++)
        for (size_t l = 0; l < L; l++) cells[k * L + l] = kind[l] == k ? (unsigned char)(k + 1) : 0;
    static const char *const colours[] = {"#f2f2f2", "#c9c9c9", "#1f4e8c", "#7fa7d9"};
    static const char *const legend[] = {NULL, "0 window-only: 0 B/token", "1 CSA: 163 B/token",
                                         "2 HCA: 4.5625 B/token"};
    svg_doc s;
    svg_grid(&s, "V4-Flash layer map (compress_ratios); every layer also keeps a 128-row window",
             cells, KINDS, L, colours, legend, 4, "kind", "layer", 1, 2);
    return nb_figure("layer_map", &s);
}

int dv4_pooling_figure(const unsigned char *moved, size_t n, size_t T, size_t M)
{
    enum { ROWS = 8, MAX_T = 64 };
    static unsigned char cells[ROWS * MAX_T];   /* [rows][T] */
    if (T > MAX_T) return nb_expect(0, "%zu tokens do not fit the figure", T);
    const size_t rows = n < ROWS ? n : ROWS;
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < T; j++)
            cells[i * T + j] = !moved[i * T + j] ? 0 : j / M == i ? 2 : 1;
    static const char *const colours[] = {"#f2f2f2", "#7fa7d9", "#1f4e8c"};
    static const char *const legend[] = {"not pooled", "block i-1 (first c)", "block i (last c)"};
    svg_doc s;
    svg_grid(&s, "CSA (M = 4, overlap 1): which tokens move each entry (toy, measured)", cells,
             rows, T, colours, legend, 3, "entry i", "token position", 1, 4);
    return nb_figure("csa_pooling", &s);
}

/* ---- the compression windows ----------------------------------------------------------------- */

#define PREV_FILL "#7fa7d9"
#define OWN_FILL "#1f4e8c"
#define UNREAD_FILL "#dddddd"
#define WINDOW_FILL "#d9a441"
#define QUERY_FILL "#b03a2e"

enum { X0 = 170, CELL = 30, ROW = 22, BAR = 16 };

static double token_x(size_t j) { return X0 + (double)j * CELL; }

/* a bar over tokens first … first + len − 1 */
static void draw_bar(svg_doc *s, double y, size_t first, size_t len, const char *fill)
{
    svg_rect(s, token_x(first) + 1, y, (double)len * CELL - 2, BAR, fill);
}

/* entries of a compressor of ratio M and overlap ov over T tokens, one row each from y; query t
 * reads those with i < ⌊(t+1)/M⌋. Returns the y below the last row. */
static double draw_entries(svg_doc *s, double y, const char *name, size_t T, size_t M, size_t ov,
                           size_t t)
{
    const size_t readable = (t + 1) / M;
    for (size_t i = 0; i * M < T; i++, y += ROW) {
        const int read = i < readable;
        svg_text(s, X0 - 10, y + 12, 12, "end", "%s entry %zu%s", name, i,
                 read ? "" : " (not yet)");
        if (ov && i > 0) draw_bar(s, y, (i - 1) * M, M, read ? PREV_FILL : UNREAD_FILL);
        draw_bar(s, y, i * M, M, read ? OWN_FILL : UNREAD_FILL);
    }
    return y;
}

int dv4_windows_figure(size_t T, size_t m_csa, size_t m_hca, size_t W, size_t t)
{
    const double width = token_x(T) + 30;
    const size_t entries = (T + m_csa - 1) / m_csa + (T + m_hca - 1) / m_hca;
    svg_doc s;
    svg_begin(&s, width < 960 ? 960 : width, 230 + (double)entries * ROW);
    svg_title(&s, 20, 28, 17,
              "What each compressed entry pools, and what the query at token %zu reads", t);
    svg_text(&s, 20, 48, 12, "start",
             "CSA M = %zu with overlap, HCA M = %zu, window W = %zu (V4-Flash: M = 4 and 128, "
             "W = 128); a bar is one entry over the tokens it pools",
             m_csa, m_hca, W);
    double y = 70;
    svg_text(&s, X0 - 10, y + 14, 12, "end", "token");
    for (size_t j = 0; j < T; j++) {
        svg_rect(&s, token_x(j) + 1, y, CELL - 2, 20, j == t ? QUERY_FILL : "#f2f2f2");
        svg_text(&s, token_x(j) + CELL / 2.0, y + 14, 11, "middle", "%zu", j);
    }
    y += 34;
    y = draw_entries(&s, y, "CSA", T, m_csa, 1, t) + 8;
    y = draw_entries(&s, y, "HCA", T, m_hca, 0, t) + 8;
    svg_text(&s, X0 - 10, y + 12, 12, "end", "window");
    const size_t first = t + 1 > W ? t + 1 - W : 0;
    draw_bar(&s, y, first, t + 1 - first, WINDOW_FILL);
    y += ROW + 18;
    static const char *const fills[] = {PREV_FILL, OWN_FILL, UNREAD_FILL, WINDOW_FILL};
    static const char *const legend[] = {
        "block i-1, through the first c channels (CSA's overlap)",
        "block i, through the last c channels (HCA: all c)",
        "block not complete: no entry yet, nothing the query reads",
        ("the window: the newest W tokens, uncompressed, in every layer; it covers the tokens "
         "no complete block holds yet (at most M - 1 < W)")};
    for (size_t k = 0; k < 4; k++, y += 18) {
        svg_rect(&s, 20, y - 10, 12, 12, fills[k]);
        svg_text(&s, 38, y, 12, "start", "%s", legend[k]);
    }
    svg_end(&s);
    return nb_figure("compression_windows", &s);
}
