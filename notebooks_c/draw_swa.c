/* draw_swa: notebook 03's figures and config look-up (draw_swa.h). */
#include "draw_swa.h"

#include <cjson/cJSON.h>
#include <stdio.h>

#include "nb.h"
#include "status.h"
#include "svg.h"

int nb03_draw_band(const unsigned char *cells, size_t T, size_t W)
{
    static const char *const colours[] = {"#f2f2f2", "#c9c9c9", "#1f4e8c"};
    static const char *const legend[] = {"future (causal mask)", "past, outside the window",
                                         "visible: the window"};
    char title[96];
    snprintf(title, sizeof title, "A causal window of W = %zu keys, the query included", W);
    svg_doc s;
    svg_grid(&s, title, cells, T, T, colours, legend, 3, "query position t", "key position j", 4,
             4);
    return nb_figure("window_band", &s);
}

/* Layout of the ring figure: one row per step, one box per slot. */
enum { RING_X0 = 120, RING_Y0 = 86, RING_BOX = 46, RING_ROW = 30, RING_GAP = 4 };

static void ring_legend(svg_doc *s, double y)
{
    static const char *const fills[] = {"#f4a261", "#bcd4ee", "#f2f2f2"};
    static const char *const names[] = {"written at step t: slot t mod W",
                                        "held: the window of the newest query",
                                        "empty: fewer than W positions so far"};
    for (int i = 0; i < 3; i++) {
        svg_rect(s, 20, y + 20.0 * i - 11, 14, 14, fills[i]);
        svg_text(s, 42, y + 20.0 * i, 12, "start", "%s", names[i]);
    }
}

int nb03_draw_ring(const size_t *held, const size_t *written, size_t steps, size_t W)
{
    const double width = RING_X0 + W * (RING_BOX + RING_GAP) + 230;
    const double rows_end = RING_Y0 + steps * RING_ROW;
    svg_doc s;
    svg_begin(&s, width, rows_end + 80);
    svg_title(&s, 20, 26, 15, "A ring of W = %zu slots: position t is written to slot t mod W", W);
    svg_text(&s, 20, 46, 12, "start",
             "each row is the ring after step t; a number is the position its slot holds");
    for (size_t k = 0; k < W; k++)
        svg_text(&s, RING_X0 + k * (RING_BOX + RING_GAP) + RING_BOX / 2.0, RING_Y0 - 10, 12,
                 "middle", "slot %zu", k);
    for (size_t t = 0; t < steps; t++) {
        const double y = RING_Y0 + t * RING_ROW;
        svg_text(&s, RING_X0 - 14, y + 19, 12, "end", "step t = %zu", t);
        size_t oldest = t + 1 > W ? t + 1 - W : 0;
        for (size_t k = 0; k < W; k++) {
            const size_t p = held[t * W + k];
            const double x = RING_X0 + k * (RING_BOX + RING_GAP);
            const char *fill = k == written[t]   ? "#f4a261"
                               : p == NB03_EMPTY ? "#f2f2f2"
                                                 : "#bcd4ee";
            svg_rect(&s, x, y, RING_BOX, RING_ROW - RING_GAP, fill);
            if (p != NB03_EMPTY) svg_text(&s, x + RING_BOX / 2.0, y + 19, 13, "middle", "%zu", p);
        }
        const double note = RING_X0 + W * (RING_BOX + RING_GAP) + 10;
        if (t < W)
            svg_text(&s, note, y + 19, 12, "start", "holds %zu..%zu, wrote slot %zu", oldest, t,
                     written[t]);
        else
            svg_text(&s, note, y + 19, 12, "start", "holds %zu..%zu, wrote slot %zu over %zu",
                     oldest, t, written[t], t - W);
    }
    ring_legend(&s, rows_end + 22);
    svg_end(&s);
    return nb_figure("ring_buffer", &s);
}

int nb03_draw_reach(const unsigned char *cells, size_t layers, size_t T, size_t W)
{
    static const char *const colours[] = {"#f2f2f2", "#deebf7", "#9ecae1", "#4292c6", "#08306b"};
    static const char *const legend[] = {"unchanged (bit-identical)", "< 0.001 of token 0's change",
                                         "0.001 .. 0.01", "0.01 .. 0.1", ">= 0.1"};
    char title[96];
    snprintf(title, sizeof title,
             "Where a change to token 0 reaches through l windowed layers (W = %zu)", W);
    svg_doc s;
    svg_grid(&s, title, cells, layers + 1, T, colours, legend, 5, "depth l", "position", 1, W - 1);
    return nb_figure("reach", &s);
}

int nb03_context_of(double *out, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return kvl_fail(KVL_EIO, "%s: cannot open", path);
    static char buf[1 << 14];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *root = cJSON_Parse(buf);
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "max_position_embeddings");
    int rc =
        cJSON_IsNumber(it) ? KVL_OK : kvl_fail(KVL_EINVAL, "%s: no max_position_embeddings", path);
    if (rc == KVL_OK) *out = it->valuedouble;
    cJSON_Delete(root);
    return rc;
}
