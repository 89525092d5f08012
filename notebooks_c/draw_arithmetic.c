/* draw_arithmetic: notebook 08's config loading, checks and lineage figure (draw_arithmetic.h). */
#include "draw_arithmetic.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "draw_compare.h"
#include "nb.h"
#include "status.h"
#include "svg.h"

static int by_date(const void *a, const void *b)
{
    return strcmp(((const nb08_generation *)a)->m.date, ((const nb08_generation *)b)->m.date);
}

static int is_json(const char *name)
{
    const size_t n = strlen(name);
    return n >= 6 && !strcmp(name + n - 5, ".json");
}

int nb08_load_all(nb08_generation *g, size_t *n)
{
    DIR *d = opendir(nb_path("ref/configs"));
    if (!d) return kvl_fail(KVL_EIO, "cannot list ref/configs");
    struct dirent *e;
    int rc = KVL_OK;
    *n = 0;
    while (rc == KVL_OK && (e = readdir(d))) {
        if (!is_json(e->d_name)) continue;
        if (*n == NB08_MAX_MODELS) {
            rc = kvl_fail(KVL_EINVAL, "ref/configs holds more than %d configs", NB08_MAX_MODELS);
            break;
        }
        char rel[600];
        snprintf(rel, sizeof rel, "ref/configs/%s", e->d_name);
        rc = kvl_model_load(&g[*n].m, nb_path(rel));
        if (rc != KVL_OK) break;
        rc = kvl_kv_footprint_of(&g[*n].kv, &g[*n].m);
        if (rc != KVL_OK) kvl_model_free(&g[*n].m);
        else (*n)++;
    }
    closedir(d);
    qsort(g, *n, sizeof *g, by_date);
    return rc;
}

void nb08_free_all(nb08_generation *g, size_t n)
{
    for (size_t i = 0; i < n; i++) kvl_model_free(&g[i].m);
}

const char *nb08_factor_text(char *buf, size_t cap, double f)
{
    if (f >= 1) snprintf(buf, cap, "%.2fx", f);
    else snprintf(buf, cap, "1/%.2f", 1 / f);
    return buf;
}

int nb08_check(const char *what, const double *built, const double *ref, const char *const *names,
               size_t n, double tolerance)
{
    double diff = 0, scale = 0;
    size_t worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs(built[i] - ref[i]) > diff) diff = fabs(built[i] - ref[i]), worst = i;
        scale = fmax(scale, fabs(ref[i]));
    }
    char label[160];
    snprintf(label, sizeof label, "%s, built against ref/kvtable on %zu configs", what, n);
    const int rc = nbc_report(label, diff, scale, tolerance);
    if (rc != KVL_OK && n)
        printf("  worst: %s, built %g, ref/kvtable %g\n", names[worst], built[worst], ref[worst]);
    return rc;
}

int nb08_draw_bytes(const nb08_generation *g, size_t n)
{
    const char *labels[NB08_MAX_MODELS];
    double values[NB08_MAX_MODELS];
    int dark[NB08_MAX_MODELS];
    static char text[NB08_MAX_MODELS][128];
    if (n > NB08_MAX_MODELS) return nb_expect(0, "%zu configs for the figure", n);
    for (size_t i = 0; i < n; i++) {
        snprintf(text[i], sizeof text[i], "%s (%s)", g[i].m.name, g[i].m.date);
        labels[i] = text[i];
        values[i] = g[i].kv.bytes_per_token;
        dark[i] = g[i].m.headline;
    }
    svg_doc s;
    svg_bars_log(
        &s, "KV cache bytes per token, derived from each config.json",
        "dark: the generations on the V4.1-Flash model card's chart; window rows (per sequence) not included",
        labels, values, dark, n, "B");
    return nb_figure("bytes_per_token", &s);
}

/* Layout: boxes from LIN_X0, one area scale (LIN_W px per layer, LIN_H px per byte of a layer). */
enum { LIN_X0 = 200, LIN_Y0 = 70, LIN_STEP = 44, LIN_WIDTH = 1080 };
static const double LIN_W = 6.0, LIN_H = 0.05;

static double box_height(const nb08_box *b) { return fmax(1.0, b->bytes_per_layer * LIN_H); }

/* the text between box b[-1] and b: the step's name and its two factors */
static void step_note(svg_doc *s, const nb08_box *b, double y)
{
    char layers[16], height[16];
    nb08_factor_text(layers, sizeof layers, b[-1].layers / b->layers);
    nb08_factor_text(height, sizeof height, b[-1].bytes_per_layer / b->bytes_per_layer);
    svg_line(s, LIN_X0 - 14, y - 30, LIN_X0 - 14, y + 4, "#9b5d00", 1.5);
    svg_line(s, LIN_X0 - 14, y + 4, LIN_X0 - 18, y - 2, "#9b5d00", 1.5);
    svg_line(s, LIN_X0 - 14, y + 4, LIN_X0 - 10, y - 2, "#9b5d00", 1.5);
    svg_text(s, LIN_X0, y - 14, 12, "start", "%s", b->step);
    svg_text(s, LIN_X0, y + 2, 11, "start",
             "layers %s (width), bytes per layer %s (height), total %.2fx", layers, height,
             b[-1].layers * b[-1].bytes_per_layer / (b->layers * b->bytes_per_layer));
}

int nb08_draw_lineage(const nb08_box *box, size_t n)
{
    double height = LIN_Y0 + 40;
    for (size_t i = 0; i < n; i++) height += box_height(&box[i]) + (i ? LIN_STEP : 0) + 12;
    svg_doc s;
    svg_begin(&s, LIN_WIDTH, height);
    svg_title(&s, 20, 26, 15,
              "Bytes per token as area: cache layers (width) x bytes per layer per token (height)");
    svg_text(&s, 20, 46, 12, "start",
             "one scale for every box: %g px per layer, %g px per byte; window rows (per "
             "sequence) not included",
             LIN_W, LIN_H);
    double y = LIN_Y0;
    for (size_t i = 0; i < n; i++) {
        const nb08_box *b = &box[i];
        if (i) {
            y += LIN_STEP;
            step_note(&s, b, y - 14);
        }
        const double h = box_height(b), w = b->layers * LIN_W;
        svg_rect(&s, LIN_X0, y, w, h, i + 1 == n ? "#1f4e8c" : "#7fa7d9");
        svg_text(&s, LIN_X0 - 24, y + fmin(h, 24) / 2 + 4, 12, "end", "%s", b->name);
        svg_text(&s, LIN_X0 + w + 10, y + fmin(h, 24) / 2 + 4, 12, "start",
                 "%s layers x %s B = %s B/token", nb_num(b->layers, 0),
                 nb_num(b->bytes_per_layer, 2), nb_num(b->layers * b->bytes_per_layer, 2));
        y += h + 12;
    }
    svg_end(&s);
    return nb_figure("lineage", &s);
}
