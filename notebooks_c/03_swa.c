// %% [markdown]
// # Chapter 3 · Sliding windows: a bounded cache, and how far stacked windows reach
//
// MLA shrank the entry. A window shrinks the number of entries a layer keeps: each query sees only
// the last W positions, so the cache is a ring of W rows whatever the context. V4 puts a 128-token
// window in every layer and V4.1's bounded replay leans on how far a stack of windows can see, so
// this notebook draws the window, runs the ring against the banded mask, and measures the reach.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them. `build/bin/nb_03 --step`
// walks it cell by cell.

// %%
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "mha.h"
#include "model.h"
#include "nb.h"
#include "rng.h"
#include "softmax.h"
#include "svg.h"
#include "swa.h"

// %% [markdown]
// ## The window rule
//
// A window of W keys includes the query: query t sees keys `max(0, t−W+1) … t` (`swa_visible`).
// Longformer's window is ½w on each side; a causal decoder puts all of it on the left. Below, T 24 and
// W 6: each row is a query, each column a key; `#` is visible, `-` is a past key the window has let go,
// `.` is the future.

// %%
enum { BAND_T = 24, BAND_W = 6 };

NB_CELL(cell_band)
{
    static unsigned char cells[BAND_T][BAND_T];
    for (size_t t = 0; t < BAND_T; t++) {
        for (size_t j = 0; j < BAND_T; j++) {
            cells[t][j] = j > t ? 0 : swa_visible(t, j, BAND_W) ? 2 : 1;
            putchar(".-#"[cells[t][j]]);
        }
        printf("   query %2zu sees %2zu..%zu\n", t, swa_first_visible(t, BAND_W), t);
    }
    static const char *const colours[] = {"#f2f2f2", "#c9c9c9", "#1f4e8c"};
    static const char *const legend[] = {"future (causal mask)", "past, outside the window", "visible: the window"};
    svg_doc s;
    svg_grid(&s, "A causal window of W = 6 keys, the query included", &cells[0][0], BAND_T, BAND_T, colours, legend, 3,
             "query position t", "key position j", 4, 4);
    return nb_figure("window_band", &s);
}

// %% [markdown]
// The work is O(n·W) instead of O(n²): a causal window scores Σ_t min(t+1, W) pairs. For n 1,000 and
// W 128 (V4's window), against the full causal Σ_t (t+1):

// %%
NB_CELL(cell_work)
{
    const size_t n = 1000, W = 128;
    size_t window = 0, causal = 0;
    for (size_t t = 0; t < n; t++) {
        window += t + 1 < W ? t + 1 : W;
        causal += t + 1;
    }
    printf("n %zu, W %zu: window scores %s pairs <= n*W = %s; full causal attention %s\n", n, W, nb_num((double)window, 0),
           nb_num((double)(n * W), 0), nb_num((double)causal, 0));
    return nb_expect(window <= n * W, "the window count %zu exceeds n*W", window);
}

// %% [markdown]
// ## The ring buffer
//
// Mistral's rule: the row of position p lives in slot `p mod W`. After any number of appends the ring
// holds exactly the last W positions, which is the newest query's window, so a decode step reads the
// whole ring. The cell appends ten positions to a four-slot `swa_ring` and prints the slots.

// %%
NB_CELL(cell_ring)
{
    swa_ring r;
    int rc = swa_ring_init(&r, 4, 10, 1, SWA_STORE_F32);
    for (size_t p = 0; p < 10 && rc == KVL_OK; p++) {
        float row = (float)p;
        rc = swa_ring_append(&r, &row, 1);
        const float *slots = r.rows;
        printf("after position %zu: slots [", p);
        for (size_t k = 0; k < r.slots; k++)
            printf(k < swa_ring_held(&r) ? " %2.0f" : "  .", (double)slots[k]);
        printf(" ]  holds %zu..%zu, next write to slot %zu\n", swa_ring_oldest(&r), p, (p + 1) % r.slots);
    }
    swa_ring_free(&r);
    return rc;
}

// %% [markdown]
// The ring against the banded mask: a windowed layer (`ref/mha`, d 64, H 4, Hkv 2, Dh 16, W 8) over
// 40 tokens, 13 prefilled and 27 decoded through its ring, must give the outputs of the whole-sequence
// forward with the band.

// %%
NB_CELL(cell_ring_equals_band)
{
    enum { T = 40, S = 13, D = 64 };
    mha_config c;
    mha_weights w = {0};
    mha_cache cache = {0};
    kvl_rng rng;
    kvl_rng_seed(&rng, 13);
    static float x[T * D], want[T * D], got[T * D];
    int rc = mha_config_init(&c, D, 4, 2, 16, 8, 1e4);
    if (rc == KVL_OK) rc = mha_weights_init_random(&w, &c, &rng);
    if (rc == KVL_OK) rc = mha_cache_init(&cache, &c, T, SWA_STORE_F32);
    if (rc == KVL_OK) {
        kvl_rng_normal_f32(&rng, x, T * D, 1.0);
        rc = mha_forward(want, &c, &w, x, T);
    }
    if (rc == KVL_OK) rc = mha_prefill(got, &c, &w, &cache, x, S);
    for (size_t t = S; t < T && rc == KVL_OK; t++) rc = mha_decode(got + t * D, &c, &w, &cache, x + t * D);
    double diff = 0, scale = 0;
    for (size_t i = 0; i < T * D; i++) {
        diff = fmax(diff, fabs((double)got[i] - want[i]));
        scale = fmax(scale, fabs((double)want[i]));
    }
    if (rc == KVL_OK) {
        printf("ring (W %zu slots) against the banded mask, %d tokens: max |difference| %.3g (outputs up to %.3g)\n",
               c.window, T, diff, scale);
        printf("the ring now holds positions %zu..%d: %zu old ones and the newest, %s B\n",
               swa_ring_oldest(&cache.ring), T - 1, swa_ring_held(&cache.ring) - 1,
               nb_num((double)mha_cache_bytes_used(&cache), 0));
        /* the same float32 sums over at most 8 keys, in a different association */
        rc = nb_expect(diff <= 1e-5 * scale, "ring and band differ by %g", diff);
    }
    mha_cache_free(&cache);
    mha_weights_free(&w);
    return rc;
}

// %% [markdown]
// ## Mistral's window, and the reach of a stack
//
// One windowed layer moves information at most W − 1 positions forward (the window's oldest key is
// W − 1 back). L stacked layers reach L·(W − 1). Longformer and Mistral state the reach as ℓ·w and
// k·W, which counts W positions per hop; with the course's query-inclusive window that is 32 positions
// too many at Mistral's size. The V4.1 report quotes its theoretical field as n_win·L/2.

// %%
/* max_position_embeddings of a config file (kvl_model does not keep it) */
static int context_of(double *out, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return kvl_fail(KVL_EIO, "%s: cannot open", path);
    static char buf[1 << 14];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    cJSON *root = cJSON_Parse(buf);
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, "max_position_embeddings");
    int rc = cJSON_IsNumber(it) ? KVL_OK : kvl_fail(KVL_EINVAL, "%s: no max_position_embeddings", path);
    if (rc == KVL_OK) *out = it->valuedouble;
    cJSON_Delete(root);
    return rc;
}

NB_CELL(cell_mistral)
{
    kvl_model m, v41;
    double context = 0;
    int rc = kvl_model_load(&m, nb_path("chapters/03_swa/mistral-7b.json"));
    if (rc == KVL_OK) rc = context_of(&context, nb_path("chapters/03_swa/mistral-7b.json"));
    if (rc != KVL_OK) return rc;
    rc = kvl_model_load(&v41, nb_path("ref/configs/deepseek-v4.1-flash.json"));
    if (rc != KVL_OK) { kvl_model_free(&m); return rc; }
    const double L = (double)m.n_layers, W = (double)m.window;
    printf("%s: %zu layers, window %s, context %s tokens\n", m.name, m.n_layers, nb_num(W, 0), nb_num(context, 0));
    printf("  cache per layer: %s entries instead of %s, %.0fx smaller at the full context\n", nb_num(W, 0),
           nb_num(context, 0), context / W);
    printf("  reach L*(W-1) = %s positions; the sources' L*W = %s\n", nb_num(L * (W - 1), 0), nb_num(L * W, 0));
    const double L41 = (double)v41.n_layers, W41 = (double)v41.window;
    printf("%s: %zu layers, window %s\n", v41.name, v41.n_layers, nb_num(W41, 0));
    printf("  the report's theoretical field n_win*L/2 = %s tokens (%s with W-1 per hop); the full stack L*(W-1) = %s\n",
           nb_num(W41 * L41 / 2, 0), nb_num((W41 - 1) * L41 / 2, 0), nb_num((W41 - 1) * L41, 0));
    kvl_model_free(&m);
    kvl_model_free(&v41);
    return KVL_OK;
}

// %% [markdown]
// ## The reach, measured
//
// A toy stack (`ref/model`: d 64, H 4, Hkv 2, Dh 16, W 8, SwiGLU MLP) runs twice, once with token 0
// redrawn, at depths 1 to 4. An output moves only if token 0 reaches it: beyond l·(W − 1) every row
// is bit-identical, and inside the reach the change fades hop by hop. The figure colours each output
// by the size of its change relative to token 0's own; row 0 is the input.

// %%
enum { R_LAYERS = 4, R_W = 8, R_T = R_LAYERS * (R_W - 1) + 2 * R_W, R_D = 64 };

/* delta[T] = ‖out_t − out'_t‖₂ for a stack of `layers` windowed layers, token 0 redrawn in out' */
static int influence(double *delta, size_t layers)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"hidden_size\": %d, \"num_hidden_layers\": %zu, \"num_attention_heads\": 4,"
             " \"num_key_value_heads\": 2, \"head_dim\": 16, \"sliding_window\": %d}", R_D, layers, R_W);
    kvl_model m;
    model_config c;
    model_weights w = {0};
    kvl_rng rng;
    int rc = kvl_model_parse(&m, json, strlen(json), "toy stack");
    if (rc != KVL_OK) return rc;
    rc = model_config_from_model(&c, &m, 128, MODEL_MLP_SWIGLU);
    kvl_model_free(&m);
    if (rc != KVL_OK) return rc;
    kvl_rng_seed(&rng, 3);
    rc = model_weights_init_random(&w, &c, &rng);
    static float x[R_T * R_D], a[R_T * R_D], b[R_T * R_D];
    if (rc == KVL_OK) {
        kvl_rng_seed(&rng, 4);
        kvl_rng_normal_f32(&rng, x, R_T * R_D, 1.0);
        rc = model_forward(a, &c, &w, x, R_T);
    }
    if (rc == KVL_OK) {
        kvl_rng_normal_f32(&rng, x, R_D, 1.0);
        rc = model_forward(b, &c, &w, x, R_T);
    }
    for (size_t t = 0; t < R_T && rc == KVL_OK; t++) {
        double s = 0;
        for (size_t i = 0; i < R_D; i++) {
            const double e = (double)a[t * R_D + i] - b[t * R_D + i];
            s += e * e;
        }
        delta[t] = sqrt(s);
    }
    model_weights_free(&w);
    model_config_free(&c);
    return rc;
}

NB_CELL(cell_reach)
{
    static double delta[R_LAYERS][R_T];
    static unsigned char cells[R_LAYERS + 1][R_T];   /* row 0: the input, where only token 0 changed */
    cells[0][0] = 4;
    int rc = KVL_OK;
    printf("%6s %14s %12s   relative change at positions 0, 7, 14, ..., 42\n", "depth", "reach l(W-1)", "last moved");
    for (size_t l = 1; l <= R_LAYERS && rc == KVL_OK; l++) {
        rc = influence(delta[l - 1], l);
        size_t last = 0;
        for (size_t t = 0; t < R_T; t++) {
            double rel = delta[l - 1][t] / delta[l - 1][0];
            if (rel > 0) last = t;
            cells[l][t] = rel == 0 ? 0 : rel < 1e-3 ? 1 : rel < 1e-2 ? 2 : rel < 1e-1 ? 3 : 4;
        }
        printf("%6zu %14zu %12zu  ", l, l * (R_W - 1), last);
        for (size_t t = 0; t < R_T; t += R_W - 1) printf(" %9.2e", delta[l - 1][t] / delta[l - 1][0]);
        printf("\n");
        if (rc == KVL_OK) rc = nb_expect(last == l * (R_W - 1), "depth %zu: last moved %zu, reach %zu", l, last, l * (R_W - 1));
    }
    if (rc != KVL_OK) return rc;
    static const char *const colours[] = {"#f2f2f2", "#deebf7", "#9ecae1", "#4292c6", "#08306b"};
    static const char *const legend[] = {"unchanged (bit-identical)", "< 0.001 of token 0's change", "0.001 .. 0.01",
                                         "0.01 .. 0.1", ">= 0.1"};
    svg_doc s;
    svg_grid(&s, "Where a change to token 0 reaches through l windowed layers (W = 8)", &cells[0][0], R_LAYERS + 1,
             R_T, colours, legend, 5, "depth l", "position", 1, 7);
    return nb_figure("reach", &s);
}

// %% [markdown]
// PowerAttention (Chen et al., 2025) measured the same fading on trained models: with a window of about
// 2K, sliding-window models retrieve a passkey up to 12K tokens back but degrade at 16K and 32K, and
// the information strength decays to near zero after about 6 layers. Those are the authors' results,
// quoted; the toy above only shows the shape, and the V4.1 report relies on that shape when it replays
// just the last window (chapter 7).

// %% [markdown]
// ## Sinks
//
// V4's window layers (chapter 6) add a sink: one learned logit σ per head that joins the softmax's
// denominator and nothing else. The kept weights then sum to 1 − p_sink, and σ → −∞ gives back the plain
// softmax. The cell checks both on one row of scores.

// %%
NB_CELL(cell_sink)
{
    const double scores[] = {0.3, -1.2, 2.0, 0.7, -0.4};
    double p[5], plain[5], sum = 0, diff = 0;
    const double sigma = 1.5;
    memcpy(p, scores, sizeof p);
    memcpy(plain, scores, sizeof plain);
    kvl_softmax_sink_f64(p, 5, sigma);
    double mx = sigma;
    for (int i = 0; i < 5; i++) mx = fmax(mx, scores[i]);
    double denom = exp(sigma - mx);
    for (int i = 0; i < 5; i++) denom += exp(scores[i] - mx), sum += p[i];
    const double p_sink = exp(sigma - mx) / denom;
    printf("sink logit %.1f: kept weights sum to %.6f, 1 - p_sink = %.6f\n", sigma, sum, 1 - p_sink);
    double q[5];
    memcpy(q, scores, sizeof q);
    kvl_softmax_sink_f64(q, 5, -INFINITY);
    kvl_softmax_f64(plain, 5);
    for (int i = 0; i < 5; i++) diff = fmax(diff, fabs(q[i] - plain[i]));
    printf("sink logit -inf: max |difference from the plain softmax| = %.3g\n", diff);
    /* double softmax of five terms: rounding far below 1e-12 */
    return nb_expect(fabs(sum - (1 - p_sink)) < 1e-12 && diff < 1e-12, "sink softmax off by %g / %g",
                     fabs(sum - (1 - p_sink)), diff);
}

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_band),    NB_RUN(cell_work),  NB_RUN(cell_ring),
                                    NB_RUN(cell_ring_equals_band), NB_RUN(cell_mistral), NB_RUN(cell_reach),
                                    NB_RUN(cell_sink)};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0]);
}
