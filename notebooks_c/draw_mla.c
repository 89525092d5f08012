/* draw_mla: see draw_mla.h. */
#include "draw_mla.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nb.h"
#include "rng.h"
#include "status.h"

const char *mlanb_repr(double v)
{
    static char buf[4][40];
    static unsigned next;
    char *s = buf[next++ % 4];
    for (int p = 0; p < 17; p++) {
        snprintf(s, 40, "%.*e", p, v);
        if (strtod(s, NULL) == v) break;
    }
    return s;
}

int mlanb_numpy_block(double *values, size_t n, const char *name)
{
    FILE *f = fopen(nb_path("tests/data/mla_toy_numpy.txt"), "r");
    if (!f) return kvl_fail(KVL_EIO, "cannot open tests/data/mla_toy_numpy.txt");
    char line[256], head[64];
    size_t count = 0, got = 0;
    while (fgets(line, sizeof line, f) && got < n) {
        if (line[0] == '#') continue;
        if (sscanf(line, "%63s %zu", head, &count) == 2 && !strcmp(head, name)) {
            while (got < count && got < n && fgets(line, sizeof line, f))
                values[got++] = strtod(line, NULL);
        }
    }
    fclose(f);
    return got == n ? KVL_OK
                    : kvl_fail(KVL_EPARSE, "mla_toy_numpy.txt: block %s has fewer than %zu values",
                               name, n);
}

static int toy_config(mla_config *c)
{
    *c = (mla_config){.d = 64,
                      .n_heads = 4,
                      .q_lora_rank = 32,
                      .kv_lora_rank = 32,
                      .qk_nope = 16,
                      .qk_rope = 8,
                      .v_head = 16,
                      .norm_eps = 1e-6,
                      .softmax_scale = kvl_yarn_softmax_scale(16 + 8, 40, 1)};
    return kvl_rope_init_yarn(&c->rope, 8, 1e4, 40, 4096, 32, 1);
}

/* r's arrays for T tokens; KVL_ENOMEM */
static int run_alloc(mlanb_run *r, size_t T)
{
    const mla_config *c = &r->c;
    r->x = malloc(T * c->d * sizeof *r->x);
    r->rows = malloc(T * (c->kv_lora_rank + c->qk_rope) * sizeof *r->rows);
    r->q = malloc(c->n_heads * (c->qk_nope + c->qk_rope) * sizeof *r->q);
    r->y_naive = malloc(T * c->d * sizeof *r->y_naive);
    r->y_absorbed = malloc(c->d * sizeof *r->y_absorbed);
    return r->x && r->rows && r->q && r->y_naive && r->y_absorbed
               ? KVL_OK
               : kvl_fail(KVL_ENOMEM, "out of memory");
}

int mlanb_run_ref(mlanb_run *r, size_t T, unsigned seed)
{
    *r = (mlanb_run){.T = T};
    mla_cache naive = {0}, absorbed = {0};
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    int rc = toy_config(&r->c);
    if (rc == KVL_OK) rc = mla_weights_init_random(&r->w, &r->c, &rng);
    if (rc == KVL_OK) rc = run_alloc(r, T);
    if (rc == KVL_OK) rc = mla_cache_init(&naive, &r->c, T, KV_STORE_F32);
    if (rc == KVL_OK) rc = mla_cache_init(&absorbed, &r->c, T, KV_STORE_F32);
    const size_t d = r->c.d;
    if (rc == KVL_OK) {
        kvl_rng_normal_f32(&rng, r->x, T * d, 1.0);
        rc = mla_prefill(r->y_naive, &r->c, &r->w, &naive, r->x, T - 1);
    }
    if (rc == KVL_OK) rc = mla_prefill(r->y_naive, &r->c, &r->w, &absorbed, r->x, T - 1);
    if (rc == KVL_OK) rc = mla_decode_naive(r->y_naive, &r->c, &r->w, &naive, r->x + (T - 1) * d);
    if (rc == KVL_OK)
        rc = mla_decode_absorbed(r->y_absorbed, &r->c, &r->w, &absorbed, r->x + (T - 1) * d);
    if (rc == KVL_OK) rc = kv_ring_read(r->rows, &absorbed.ring, 0, T);
    if (rc == KVL_OK) rc = mla_query(r->q, &r->c, &r->w, r->x + (T - 1) * d, 1, T - 1);
    r->cache_bytes = mla_cache_bytes_used(&absorbed);
    mla_cache_free(&naive);
    mla_cache_free(&absorbed);
    if (rc != KVL_OK) mlanb_run_free(r);
    return rc;
}

void mlanb_run_free(mlanb_run *r)
{
    mla_weights_free(&r->w);
    free(r->x);
    free(r->rows);
    free(r->q);
    free(r->y_naive);
    free(r->y_absorbed);
    *r = (mlanb_run){0};
}

/* ---- the absorption figure ------------------------------------------------------------------- */

#define ABS_PX 0.18          /* pixels per matrix element along a side */
#define ABS_THIN 7.0         /* the drawn width of a vector */
#define ABS_W "#d9822b"      /* the up-projection that moves */
#define ABS_C "#1f4e8c"      /* cached latents */
#define ABS_Q "#999"         /* the query */
#define ABS_GROUP "#f6ead6"  /* the product computed first */

/* A matrix drawn to its rows × cols with `text` above it, or (rows = 0) an operator written as
 * `text`. */
typedef struct {
    const char *text;
    size_t rows, cols;
    const char *fill;
    int first;          /* part of the product computed first */
} abs_item;

static double side(size_t n)
{
    return fmax(ABS_THIN, ABS_PX * (double)n);
}

/* the room an item takes in its row: its drawn width, or its text's if that is wider */
static double item_width(const abs_item *it)
{
    const double text = (it->rows ? 7.0 : 8.0) * (double)strlen(it->text);
    return it->rows ? fmax(side(it->cols), text) : text;
}

static void draw_item(svg_doc *s, const abs_item *it, double x, double ymid)
{
    const double room = item_width(it), w = side(it->cols), h = side(it->rows);
    if (!it->rows) {
        svg_text(s, x + room / 2, ymid + 6, 17, "middle", "%s", it->text);
        return;
    }
    x += (room - w) / 2;
    svg_rect(s, x, ymid - h / 2, w, h, it->fill);
    svg_text(s, x + w / 2, ymid - h / 2 - 6, 12, "middle", "%s", it->text);
    svg_text(s, x + w / 2, ymid + h / 2 + 13, 10, "middle", "%zu×%zu", it->rows, it->cols);
}

/* One order of the products at (x, ymid): the items in a row, the ones computed first on a tinted
 * band captioned `first`, and a title above. The x of the centre of item `mark` goes to *mark_x. */
static void draw_order(svg_doc *s, double x, double ymid, const char *title, const abs_item *it,
                       size_t n, const char *first, size_t mark, double *mark_x)
{
    const double gap = 8;
    double at = x, lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        if (it[i].first) lo = fmin(lo, at - 5), hi = fmax(hi, at + item_width(&it[i]) + 5);
        at += item_width(&it[i]) + gap;
    }
    svg_rect(s, lo, ymid - 68, hi - lo, 136, ABS_GROUP);
    svg_text(s, (lo + hi) / 2, ymid + 82, 11, "middle", "%s", first);
    svg_title(s, x, ymid - 80, 13, "%s", title);
    at = x;
    for (size_t i = 0; i < n; i++) {
        draw_item(s, &it[i], at, ymid);
        if (i == mark) *mark_x = at + item_width(&it[i]) / 2;
        at += item_width(&it[i]) + gap;
    }
}

void mlanb_draw_absorption(svg_doc *s, size_t Dnope, size_t Dc, size_t Dv)
{
    const double y1 = 170, y2 = 400, left = 30, right = 470;
    svg_begin(s, 900, 520);
    svg_title(s, 20, 28, 16,
              "Absorption: the same products in the other order (one head, widths to scale)");
    svg_text(s, 20, 48, 12, "start",
             "tinted: computed first. The RoPE part q^R_h·k^R_j of the score is the same "
             "in both orders and left out; the scale multiplies both.");
    const abs_item score_naive[] = {
        {"q^C_hᵀ", 1, Dnope, ABS_Q, 0}, {"·", 0, 0, NULL, 0},  {"(", 0, 0, NULL, 0},
        {"W_UK^h", Dnope, Dc, ABS_W, 1}, {"c_j", Dc, 1, ABS_C, 1}, {")", 0, 0, NULL, 0}};
    const abs_item score_absorbed[] = {
        {"(", 0, 0, NULL, 0}, {"q^C_hᵀ", 1, Dnope, ABS_Q, 1}, {"W_UK^h", Dnope, Dc, ABS_W, 1},
        {")", 0, 0, NULL, 0}, {"·", 0, 0, NULL, 0},            {"c_j", Dc, 1, ABS_C, 0}};
    const abs_item value_naive[] = {
        {"Σ_j p_j", 0, 0, NULL, 0}, {"(", 0, 0, NULL, 0}, {"W_UV^h", Dv, Dc, ABS_W, 1},
        {"c_j", Dc, 1, ABS_C, 1},   {")", 0, 0, NULL, 0}};
    const abs_item value_absorbed[] = {
        {"W_UV^h", Dv, Dc, ABS_W, 0}, {"(", 0, 0, NULL, 0}, {"Σ_j p_j", 0, 0, NULL, 1},
        {"c_j", Dc, 1, ABS_C, 1},     {")", 0, 0, NULL, 0}};
    char naive_k[96], naive_v[96], once[96];
    snprintf(naive_k, sizeof naive_k, "k^C_j,h rebuilt for every cached token: %zu values", Dnope);
    snprintf(naive_v, sizeof naive_v, "v_j,h rebuilt for every cached token: %zu values", Dv);
    snprintf(once, sizeof once, "q̂_h, once per step: %zu values", Dc);
    double from = 0, to = 0, unused = 0;
    draw_order(s, left, y1, "score, naive", score_naive, 6, naive_k, 3, &from);
    draw_order(s, left, y2, "score, absorbed", score_absorbed, 6, once, 2, &to);
    svg_line(s, from, y1 + 95, to, y2 - 95, ABS_W, 1.5);
    const double len = hypot(to - from, 190 - (y2 - y1)), ux = (to - from) / len,
                 uy = (y2 - y1 - 190) / len;
    svg_line(s, to, y2 - 95, to - 8 * ux - 5 * uy, y2 - 95 - 8 * uy + 5 * ux, ABS_W, 1.5);
    svg_line(s, to, y2 - 95, to - 8 * ux + 5 * uy, y2 - 95 - 8 * uy - 5 * ux, ABS_W, 1.5);
    svg_text(s, (from + to) / 2 + 8, (y1 + y2) / 2 + 4, 11, "start",
             "W_UK^h moves from the keys to the query");
    draw_order(s, right, y1, "value, naive", value_naive, 5, naive_v, 2, &unused);
    draw_order(s, right, y2, "value, absorbed", value_absorbed, 5,
               "Σ_j p_j c_j: the latents summed first", 0, &unused);
    svg_text(s, 20, 505, 11, "start",
             "Per cached token and head the naive order costs 2·%zu·%zu flop for the key and "
             "2·%zu·%zu for the value; the absorbed one 2·%zu for each.",
             Dnope, Dc, Dv, Dc, Dc);
    svg_end(s);
}
