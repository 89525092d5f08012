/* draw_v41: notebook 07's config reading, map check and layer-map figure (draw_v41.h). */
#include "draw_v41.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb.h"
#include "status.h"
#include "svg.h"

static int read_text(char **text, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return kvl_fail(KVL_EIO, "%s: cannot open", path);
    static char buf[1 << 16];
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    const int whole = feof(f) && !ferror(f);
    fclose(f);
    if (!whole) return kvl_fail(KVL_EIO, "%s: unreadable or over %zu bytes", path, sizeof buf - 1);
    buf[n] = '\0';
    *text = buf;
    return KVL_OK;
}

/* out[i] = the i-th number of root[field], i < n; *n = the list's length when want is 0, else want
 * (the list may hold more). */
static int read_numbers(const cJSON *root, const char *field, const char *path, size_t *out,
                        size_t *n, size_t want)
{
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, field);
    if (!cJSON_IsArray(a))
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" is not a list", path, field);
    const size_t len = (size_t)cJSON_GetArraySize(a);
    *n = want ? want : len;
    if (len < *n || *n > NB07_MAX_LAYERS)
        return kvl_fail(KVL_EINVAL, "%s: field \"%s\" has %zu entries, %zu wanted", path, field,
                        len, *n);
    for (size_t i = 0; i < *n; i++) {
        const cJSON *v = cJSON_GetArrayItem(a, (int)i);
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble >= 1e6)
            return kvl_fail(KVL_EINVAL, "%s: field \"%s\" entry %zu is not a small count", path,
                            field, i);
        out[i] = (size_t)v->valuedouble;
    }
    return KVL_OK;
}

/* flags[L] = 1 at every layer root[field] lists */
static int read_flags(unsigned char *flags, const cJSON *root, const char *field, const char *path,
                      size_t L)
{
    size_t v[NB07_MAX_LAYERS], n;
    const int rc = read_numbers(root, field, path, v, &n, 0);
    if (rc != KVL_OK) return rc;
    memset(flags, 0, L);
    for (size_t i = 0; i < n; i++) {
        if (v[i] >= L)
            return kvl_fail(KVL_EINVAL, "%s: field \"%s\" lists layer %zu of %zu", path, field,
                            v[i], L);
        flags[v[i]] = 1;
    }
    return KVL_OK;
}

int nb07_read_lists(nb07_lists *t, const char *path)
{
    char *text;
    int rc = read_text(&text, path);
    if (rc != KVL_OK) return rc;
    cJSON *root = cJSON_Parse(text);
    if (!root) return kvl_fail(KVL_EPARSE, "%s: not JSON", path);
    const cJSON *L = cJSON_GetObjectItemCaseSensitive(root, "n_layers");
    if (!cJSON_IsNumber(L) || L->valuedouble < 1 || L->valuedouble > NB07_MAX_LAYERS)
        rc = kvl_fail(KVL_EINVAL, "%s: field \"n_layers\" is not 1 to %d", path, NB07_MAX_LAYERS);
    size_t n = 0;
    if (rc == KVL_OK)
        rc = read_numbers(root, "compress_ratios", path, t->ratio, &n, (size_t)L->valuedouble);
    t->n_layers = n;
    if (rc == KVL_OK) rc = read_flags(t->kv, root, "kv_source_layers", path, n);
    if (rc == KVL_OK) rc = read_flags(t->ix, root, "index_source_layers", path, n);
    cJSON_Delete(root);
    return rc;
}

static int same_layer(const kvl_layer *a, const kvl_layer *b)
{
    return a->kind == b->kind && a->compress_ratio == b->compress_ratio &&
           a->kv_source == b->kv_source && a->index_source == b->index_source;
}

int nb07_check_map(const kvl_layer *built, const kvl_layer *ref, size_t L)
{
    size_t differ = 0, first = 0;
    for (size_t l = L; l-- > 0;)
        if (!same_layer(&built[l], &ref[l])) differ++, first = l;
    printf(
        "built map against ref/core/config's: %zu of %zu layers differ (mode, ratio, KV source, index source)\n",
        differ, L);
    return nb_expect(differ == 0, "layer %zu: built %s (kv %d, index %d), ref %s (kv %d, index %d)",
                     first, kvl_layer_kind_name(built[first].kind), built[first].kv_source,
                     built[first].index_source, kvl_layer_kind_name(ref[first].kind),
                     ref[first].kv_source, ref[first].index_source);
}

int nb07_draw_modes(const kvl_layer *map, size_t L)
{
    static const kvl_layer_kind modes[] = {KVL_LAYER_WINDOW, KVL_LAYER_FULL, KVL_LAYER_REINDEX,
                                           KVL_LAYER_REUSE};
    enum { N_MODES = sizeof modes / sizeof modes[0] };
    static unsigned char cells[N_MODES * NB07_MAX_LAYERS];   /* [mode][L] */
    if (L > NB07_MAX_LAYERS) return nb_expect(0, "%zu layers do not fit the figure", L);
    for (size_t k = 0; k < N_MODES; k++)
        for (size_t l = 0; l < L; l++)
            cells[k * L + l] = map[l].kind == modes[k] ? (unsigned char)(k + 1) : 0;
    static const char *const colours[] = {"#f2f2f2", "#c9c9c9", "#1f4e8c", "#7fa7d9", "#e3b04b"};
    static const char *const legend[] = {NULL, "0 window-only", "1 Full: stores, scans",
                                         "2 Reindex: the pool", "3 Reuse: no indexer"};
    svg_doc s;
    svg_grid(&s, "V4.1-Flash layer modes; every layer also keeps a 128-row window", cells, N_MODES,
             L, colours, legend, 5, "mode", "layer", 1, 2);
    return nb_figure("layer_modes", &s);
}

/* Layout: one column per layer; the boxes' row, the KV arrows' level above it, the index arrows'
 * below. */
enum {
    MAP_X0 = 40,
    MAP_COL = 24,
    MAP_BOX = 20,
    MAP_BOX_Y = 150,
    MAP_BOX_H = 30,
    MAP_KV_Y = 112,
    MAP_IX_Y = 222
};

static double col_x(size_t l) { return MAP_X0 + (double)l * MAP_COL + MAP_BOX / 2.0; }

static const char *mode_fill(kvl_layer_kind k)
{
    switch (k) {
    case KVL_LAYER_FULL: return "#1f4e8c";
    case KVL_LAYER_REINDEX: return "#7fa7d9";
    case KVL_LAYER_REUSE: return "#e3b04b";
    default: return "#c9c9c9";
    }
}

/* A vertical arrow from (x, y0) to (x, y1), its head at y1. */
static void arrow(svg_doc *s, double x, double y0, double y1, const char *stroke)
{
    const double dir = y1 > y0 ? -1 : 1;
    svg_line(s, x, y0, x, y1, stroke, 1.5);
    svg_line(s, x, y1, x - 4, y1 + 6 * dir, stroke, 1.5);
    svg_line(s, x, y1, x + 4, y1 + 6 * dir, stroke, 1.5);
}

static void dashed(svg_doc *s, double x, double y0, double y1)
{
    for (double y = y0; y < y1; y += 8)
        svg_line(s, x, y, x, y + 4 < y1 ? y + 4 : y1, "#555555", 1.5);
}

/* For every source k some later layer reads (src(l) == k, l ≠ k): a bar at `level` over its
 * readers, a tick from each reader to the bar and an arrow from the bar into k's box edge
 * `edge`. */
static void source_arrows(svg_doc *s, const kvl_layer *map, size_t L, int kv, double level,
                          double edge, const char *stroke)
{
    for (size_t k = 0; k < L; k++) {
        size_t last = k;
        for (size_t l = k + 1; l < L; l++) {
            const int src = kv ? map[l].kv_source : map[l].index_source;
            if (src != (int)k) continue;
            last = l;
            const double from = level < edge ? MAP_BOX_Y : MAP_BOX_Y + MAP_BOX_H;
            svg_line(s, col_x(l), from, col_x(l), level, stroke, 1.5);
        }
        if (last == k) continue;
        svg_line(s, col_x(k), level, col_x(last), level, stroke, 1.5);
        arrow(s, col_x(k), level, edge, stroke);
    }
}

static void map_legend(svg_doc *s, double y)
{
    static const kvl_layer_kind kinds[] = {KVL_LAYER_WINDOW, KVL_LAYER_FULL, KVL_LAYER_REINDEX,
                                           KVL_LAYER_REUSE};
    static const char *const names[] = {
        "window-only (ratio 0)", "Full: compresses, stores, scans its own entries",
        "Reindex: own index queries over the pool", "Reuse: the source's entries and top-k"};
    for (int i = 0; i < 4; i++) {
        const double x = 20 + (i % 2) * 470.0, yy = y + (i / 2) * 20.0;
        svg_rect(s, x, yy - 11, 14, 14, mode_fill(kinds[i]));
        svg_text(s, x + 22, yy, 12, "start", "%s", names[i]);
    }
    svg_text(s, 20, y + 46, 12, "start",
             "the number in a box is its compress ratio M; every layer also keeps a "
             "128-row window");
}

int nb07_draw_sources(const char *model, const kvl_layer *map, size_t L, size_t E)
{
    const double width = MAP_X0 + (double)L * MAP_COL + 40,
                 split = MAP_X0 + (double)E * MAP_COL - 2;
    svg_doc s;
    svg_begin(&s, width < 960 ? 960 : width, 350);
    svg_title(&s, 20, 26, 15, "%s: the layer map and the source each layer reads", model);
    svg_text(&s, 20, 46, 12, "start",
             "above: arrows into the KV source whose entries a layer reads; below: into "
             "the index source whose top-k it uses");
    svg_text(&s, (MAP_X0 + split) / 2, 76, 12, "middle", "encoder: layers 0-%zu", E - 1);
    svg_text(&s, (split + MAP_X0 + (double)L * MAP_COL) / 2, 76, 12, "middle",
             "decoder: layers %zu-%zu", E, L - 1);
    svg_text(&s, split + 4, 92, 11, "start",
             "early exit: a prefill stops here, after layer %zu's compressor", E);
    dashed(&s, split, 62, 262);
    source_arrows(&s, map, L, 1, MAP_KV_Y, MAP_BOX_Y, "#1f4e8c");
    source_arrows(&s, map, L, 0, MAP_IX_Y, MAP_BOX_Y + MAP_BOX_H, "#9b5d00");
    for (size_t l = 0; l < L; l++) {
        const double x = MAP_X0 + (double)l * MAP_COL;
        svg_rect(&s, x, MAP_BOX_Y, MAP_BOX, MAP_BOX_H, mode_fill(map[l].kind));
        svg_text(&s, x + MAP_BOX / 2.0, MAP_BOX_Y + 19, 11, "middle", "%zu", map[l].compress_ratio);
        if (l % 2 == 0) svg_text(&s, x + MAP_BOX / 2.0, MAP_IX_Y + 20, 10, "middle", "%zu", l);
    }
    svg_text(&s, 20, MAP_IX_Y + 36, 11, "start", "layer");
    map_legend(&s, 290);
    svg_end(&s);
    return nb_figure("layer_sources", &s);
}

int nb07_draw_replay(const double *err, const size_t *start, size_t n, size_t P)
{
    static char names[NB07_MAX_BARS][40];
    const char *labels[NB07_MAX_BARS];
    int dark[NB07_MAX_BARS];
    if (n == 0 || n > NB07_MAX_BARS) return nb_expect(0, "%zu replay starts for the figure", n);
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n)
            snprintf(names[i], sizeof names[i], "from %zu (%zu tokens)", start[i], P - start[i]);
        else snprintf(names[i], sizeof names[i], "bounded, from %zu (W)", start[i]);
        labels[i] = names[i];
        dark[i] = i + 1 == n;
    }
    svg_doc s;
    svg_bars_log(
        &s, "Replay start against the next token's error (toy, random weights)",
        "next token's relative error, to one digit; exact replay (not drawn) gives 0; under 1e-06 (float32 "
        "rounding) drawn at 1e-06",
        labels, err, dark, n, "");
    return nb_figure("replay_error", &s);
}
