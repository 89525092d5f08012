// %% [markdown]
// # Chapter 3 · Sliding windows: a bounded cache, and how far stacked windows reach
//
// MLA shrank the entry. A window shrinks the number of entries a layer keeps: each query sees only
// the last $W$ positions, so the cache is a ring of $W$ rows whatever the context. V4 puts a
// 128-token window in every layer and V4.1's bounded replay leans on how far a stack of windows can
// see, so this notebook writes the window rule and the ring here, runs the ring against the banded
// mask and against `ref/swa`, and measures the reach.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them.
// `build/bin/nb_03 --step` walks it cell by cell. Figures and the config look-up live in
// `notebooks_c/draw_swa.c`, the printed comparisons in `notebooks_c/draw_compare.c`.

// %%
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "draw_compare.h"
#include "draw_swa.h"
#include "mha.h"
#include "model.h"
#include "nb.h"
#include "rng.h"
#include "softmax.h"
#include "swa.h"

// %% [markdown]
// ## The window rule
//
// A window of $W$ keys includes the query: query $t$ sees key $j$ when
//
// $$t - W < j \le t,$$
//
// that is, keys $\max(0, t-W+1) \dots t$. Longformer's window is $\tfrac{1}{2}w$ on each side; a
// causal decoder puts all of it on the left. Below, $T = 24$ and $W = 6$: each row is a query, each
// column a key; `#` is visible, `-` is a past key the window has let go, `.` is the future. The
// rule is checked against `ref/swa`'s `swa_visible` on every cell.

// %%
enum { BAND_T = 24, BAND_W = 6 };

/* the banded causal mask: t − W < j ≤ t */
static int band_visible(size_t t, size_t j, size_t W)
{
    return j <= t && j + W > t;
}

NB_CELL(cell_band)
{
    static unsigned char cells[BAND_T][BAND_T];
    size_t disagree = 0;
    for (size_t t = 0; t < BAND_T; t++) {
        for (size_t j = 0; j < BAND_T; j++) {
            cells[t][j] = j > t ? 0 : band_visible(t, j, BAND_W) ? 2 : 1;
            disagree += band_visible(t, j, BAND_W) != swa_visible(t, j, BAND_W);
            putchar(".-#"[cells[t][j]]);
        }
        printf("   query %2zu sees %2zu..%zu\n", t, t + 1 > BAND_W ? t + 1 - BAND_W : 0, t);
    }
    printf("cells where the rule and swa_visible disagree: %zu of %d\n", disagree, BAND_T * BAND_T);
    int rc =
        nb_expect(disagree == 0, "the window rule and swa_visible disagree on %zu cells", disagree);
    return rc == KVL_OK ? nb03_draw_band(&cells[0][0], BAND_T, BAND_W) : rc;
}

// %% [markdown]
// The work is $O(nW)$ instead of $O(n^2)$: a causal window scores $\sum_{t<n} \min(t+1, W)$ pairs
// against the full causal $\sum_{t<n} (t+1) = n(n+1)/2$. For $n = 1{,}000$ and $W = 128$ (V4's
// window):

// %%
NB_CELL(cell_work)
{
    const size_t n = 1000, W = 128;
    size_t window = 0, causal = 0;
    for (size_t t = 0; t < n; t++) {
        window += t + 1 < W ? t + 1 : W;
        causal += t + 1;
    }
    printf("n %s, W %zu: window scores %s pairs <= n*W = %s; full causal attention %s\n",
           nb_num((double)n, 0), W,
           nb_num((double)window, 0), nb_num((double)(n * W), 0), nb_num((double)causal, 0));
    return nb_expect(window <= n * W, "the window count %zu exceeds n*W", window);
}

// %% [markdown]
// ## The ring buffer
//
// Mistral's rule: the row of position $t$ is written to slot
//
// $$\mathrm{slot}(t) = t \bmod W .$$
//
// It overwrites position $t - W$, the one key the new query no longer sees. After position $t$ the
// ring holds positions $\max(0, t-W+1) \dots t$ in $\min(t+1, W)$ live slots, which is the
// newest query's window, so a decode step reads every live row and nothing else. The ring below is
// those two lines. The cell appends ten positions (each row is its own position number) to a
// four-slot ring, prints the slots, checks them against `ref/kv_ring` after every step,
// and draws the steps.

// %%
typedef struct {
    size_t W, width;
    float *rows; /* [W][width], slot order */
} ring;

/* write: position t's row goes to slot t mod W */
static void ring_write(ring *r, size_t t, const float *row)
{
    memcpy(r->rows + (t % r->W) * r->width, row, r->width * sizeof *row);
}

/* read: after position t the live slots are the first min(t + 1, W) */
static size_t ring_live(const ring *r, size_t t)
{
    return t + 1 < r->W ? t + 1 : r->W;
}

// %%
enum { RING_W = 4, RING_STEPS = 10 };

NB_CELL(cell_ring)
{
    float slots[RING_W];
    ring r = {RING_W, 1, slots};
    static size_t held[RING_STEPS][RING_W], written[RING_STEPS];
    kv_ring ref;
    int rc = kv_ring_init(&ref, RING_W, RING_STEPS, 1, KV_STORE_F32);
    for (size_t t = 0; t < RING_STEPS && rc == KVL_OK; t++) {
        const float row = (float)t;
        ring_write(&r, t, &row);
        rc = kv_ring_append(&ref, &row, 1);
        written[t] = t % RING_W;
        printf("after position %zu: slots [", t);
        for (size_t k = 0; k < RING_W; k++) {
            held[t][k] = k < ring_live(&r, t) ? (size_t)slots[k] : NB03_EMPTY;
            printf(k < ring_live(&r, t) ? " %2.0f" : "  .", (double)slots[k]);
        }
        printf(" ]  holds %zu..%zu, next write to slot %zu\n", t + 1 - ring_live(&r, t), t,
               (t + 1) % RING_W);
        if (rc == KVL_OK && memcmp(slots, ref.rows, ring_live(&r, t) * sizeof *slots))
            rc = nb_expect(0, "after position %zu the ring and kv_ring hold different rows", t);
    }
    kv_ring_free(&ref);
    return rc == KVL_OK ? nb03_draw_ring(&held[0][0], written, RING_STEPS, RING_W) : rc;
}

// %% [markdown]
// ## The ring against the banded mask
//
// One head of attention, keys and values of width $D$ at every position, scale $D^{-1/2}$. The
// banded mask scores every earlier key and sends the ones outside the window to $-\infty$:
//
// $$o_t = \sum_{j \le t} \mathrm{softmax}_j(s_{tj})\, v_j,$$
//
// $$s_{tj} = q_t \cdot k_j / \sqrt{D} + m_{tj},$$
//
// $$m_{tj} = 0 \text{ for } t - W < j \le t, \text{ else } -\infty.$$
//
// The ring never sees a masked key: at step $t$ it writes $[k_t \mid v_t]$ to slot $t \bmod W$ and
// attends over its live slots, in slot order, which the softmax does not see. Over $T = 40$
// positions with $W = 8$ and $D = 16$ the two must agree, and both must agree with `ref/kv_ring`'s
// `kv_ring_attend` (what a decode step runs, on the CPU backend here) on the same rows.

// %%
enum { ATT_T = 40, ATT_W = 8, ATT_D = 16 };

/* q·k/√D */
static double score(const float *q, const float *k, size_t D)
{
    double s = 0;
    for (size_t i = 0; i < D; i++) s += (double)q[i] * k[i];
    return s / sqrt((double)D);
}

/* o[D] = Σ_j softmax_j(s_j) v_j over rows kv[n][2D] = [k_j | v_j]; s_j = q·k_j/√D where
 * visible[j], else −∞ */
static void attend(float *o, const float *q, const float *kv, const int *visible, size_t n,
                   size_t D)
{
    double p[ATT_T], mx = -INFINITY, sum = 0;
    for (size_t j = 0; j < n; j++)
        mx = fmax(mx, p[j] = visible[j] ? score(q, kv + j * 2 * D, D) : -INFINITY);
    for (size_t j = 0; j < n; j++) sum += p[j] = exp(p[j] - mx);
    for (size_t i = 0; i < D; i++) {
        double acc = 0;
        for (size_t j = 0; j < n; j++) acc += p[j] / sum * kv[j * 2 * D + D + i];
        o[i] = (float)acc;
    }
}

// %%
NB_CELL(cell_ring_against_band)
{
    static float q[ATT_T][ATT_D], kv[ATT_T][2 * ATT_D], slots[ATT_W][2 * ATT_D];
    static float band[ATT_T][ATT_D], by_ring[ATT_T][ATT_D], fast[ATT_T][ATT_D];
    static const int live[ATT_W] = {1, 1, 1, 1, 1, 1, 1, 1};
    kvl_rng rng;
    kvl_rng_seed(&rng, 31);
    kvl_rng_normal_f32(&rng, &q[0][0], ATT_T * ATT_D, 1.0);
    kvl_rng_normal_f32(&rng, &kv[0][0], ATT_T * 2 * ATT_D, 1.0);
    ring r = {ATT_W, 2 * ATT_D, &slots[0][0]};
    kv_ring ref;
    int rc = kv_ring_init(&ref, ATT_W, ATT_T, 2 * ATT_D, KV_STORE_F32);
    for (size_t t = 0; t < ATT_T && rc == KVL_OK; t++) {
        int visible[ATT_T];
        for (size_t j = 0; j < ATT_T; j++) visible[j] = band_visible(t, j, ATT_W);
        attend(band[t], q[t], &kv[0][0], visible, ATT_T, ATT_D);
        ring_write(&r, t, kv[t]);
        attend(by_ring[t], q[t], &slots[0][0], live, ring_live(&r, t), ATT_D);
        rc = kv_ring_append(&ref, kv[t], 1);
        if (rc == KVL_OK)
            rc = kv_ring_attend(fast[t], q[t], 1, &ref, 1, 0, ATT_D, ATT_D, ATT_D,
                                 (float)(1 / sqrt(ATT_D)));
    }
    kv_ring_free(&ref);
    if (rc != KVL_OK) return rc;
    double scale, diff = nbc_max_diff(&by_ring[0][0], &band[0][0], ATT_T * ATT_D, &scale);
    /* the same double sums in another order, rounded once to float */
    rc = nbc_report("the ring against the banded mask, 40 queries", diff, scale, 1e-6);
    diff = nbc_max_diff(&fast[0][0], &by_ring[0][0], ATT_T * ATT_D, &scale);
    /* ref's float32 online softmax over at most 8 rows against double sums */
    return rc == KVL_OK ? nbc_report("the ring against ref's kv_ring_attend", diff, scale, 1e-5)
                        : rc;
}

// %% [markdown]
// The same holds for a whole windowed layer: `ref/mha` (d 64, H 4, Hkv 2, Dh 16, W 8, RoPE) over 40
// tokens, 13 prefilled and 27 decoded through its ring, must give the outputs of the whole-sequence
// forward with the band.

// %%
NB_CELL(cell_layer_ring_equals_band)
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
    if (rc == KVL_OK) rc = mha_cache_init(&cache, &c, T, KV_STORE_F32);
    if (rc == KVL_OK) {
        kvl_rng_normal_f32(&rng, x, T * D, 1.0);
        rc = mha_forward(want, &c, &w, x, T);
    }
    if (rc == KVL_OK) rc = mha_prefill(got, &c, &w, &cache, x, S);
    for (size_t t = S; t < T && rc == KVL_OK; t++)
        rc = mha_decode(got + t * D, &c, &w, &cache, x + t * D);
    if (rc == KVL_OK) {
        double scale, diff = nbc_max_diff(got, want, T * D, &scale);
        printf("the ring now holds positions %zu..%d: %zu old ones and the newest, %s B\n",
               kv_ring_oldest(&cache.ring), T - 1, kv_ring_held(&cache.ring) - 1,
               nb_num((double)mha_cache_bytes_used(&cache), 0));
        /* the same float32 sums over at most 8 keys, in a different association */
        rc = nbc_report("a windowed layer decoded through its ring against its banded forward",
                        diff, scale, 1e-5);
    }
    mha_cache_free(&cache);
    mha_weights_free(&w);
    return rc;
}

// %% [markdown]
// ## Mistral's window, and the reach of a stack
//
// One windowed layer moves information at most $W - 1$ positions forward (the window's oldest key
// is $W - 1$ back), so $L$ stacked layers reach
//
// $$\text{reach}(L, W) = L\,(W - 1).$$
//
// Longformer and Mistral state the reach as $\ell \cdot w$ and $k \cdot W$, which counts $W$
// positions per hop; with the course's query-inclusive window that is 32 positions too many at
// Mistral's size. The V4.1 report quotes its theoretical field as $n_{\mathrm{win}} \cdot L / 2$.

// %%
NB_CELL(cell_mistral)
{
    kvl_model m, v41;
    double context = 0;
    int rc = kvl_model_load(&m, nb_path("chapters/03_swa/mistral-7b.json"));
    if (rc == KVL_OK) rc = nb03_context_of(&context, nb_path("chapters/03_swa/mistral-7b.json"));
    if (rc != KVL_OK) return rc;
    rc = kvl_model_load(&v41, nb_path("ref/configs/deepseek-v4.1-flash.json"));
    if (rc != KVL_OK) {
        kvl_model_free(&m);
        return rc;
    }
    const double L = (double)m.n_layers, W = (double)m.window;
    printf("%s: %zu layers, window %s, context %s tokens\n", m.name, m.n_layers, nb_num(W, 0),
           nb_num(context, 0));
    printf("  cache per layer: %s entries instead of %s, %.0fx smaller at the full context\n",
           nb_num(W, 0), nb_num(context, 0), context / W);
    printf("  reach L*(W-1) = %s positions; the sources' L*W = %s\n", nb_num(L * (W - 1), 0),
           nb_num(L * W, 0));
    const double L41 = (double)v41.n_layers, W41 = (double)v41.window;
    printf("%s: %zu layers, window %s\n", v41.name, v41.n_layers, nb_num(W41, 0));
    printf(
        "  the report's theoretical field n_win*L/2 = %s tokens (%s with W-1 per hop); the full stack L*(W-1) = %s\n",
        nb_num(W41 * L41 / 2, 0), nb_num((W41 - 1) * L41 / 2, 0), nb_num((W41 - 1) * L41, 0));
    kvl_model_free(&m);
    kvl_model_free(&v41);
    return KVL_OK;
}

// %% [markdown]
// ## The reach, measured
//
// A toy stack (`ref/model`: d 64, H 4, Hkv 2, Dh 16, $W = 8$, SwiGLU MLP) runs twice, once with
// token 0 redrawn, at depths $\ell = 1 \dots 4$. Output $t$ moves only if token 0 reaches it:
// beyond $\ell\,(W - 1)$ every row is bit-identical, and inside the reach the change fades hop by
// hop. The cell measures, for the outputs $o$ and $o'$ of the two runs,
//
// $$\delta_t = \lVert o_t - o'_t \rVert_2 / \lVert o_0 - o'_0 \rVert_2 ,$$
//
// and the figure colours each output by it; row 0 is the input. Four layers deep the change still
// moves output $\ell\,(W - 1)$. Deeper it may not: at the far edge it has come through one oldest
// key per layer, each read with a small weight, and some layers into a wide window it falls below
// float32's resolution of the rows it is added to and rounds away a few positions short of the
// reach. `swa_reach` therefore measures the reach layer by layer, restoring the change to full size
// after each.

// %%
enum { R_LAYERS = 4, R_W = 8, R_T = R_LAYERS * (R_W - 1) + 2 * R_W, R_D = 64 };

/* delta[T] = ‖out_t − out'_t‖₂ for a stack of `layers` windowed layers, token 0 redrawn in out' */
static int influence(double *delta, size_t layers)
{
    char json[256];
    snprintf(json, sizeof json,
             "{\"hidden_size\": %d, \"num_hidden_layers\": %zu, \"num_attention_heads\": 4,"
             " \"num_key_value_heads\": 2, \"head_dim\": 16, \"sliding_window\": %d}",
             R_D, layers, R_W);
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

// %%
NB_CELL(cell_reach)
{
    static double delta[R_LAYERS][R_T];
    static unsigned char cells[R_LAYERS + 1]
                              [R_T]; /* row 0: the input, where only token 0 changed */
    cells[0][0] = 4;
    int rc = KVL_OK;
    printf("%6s %14s %12s   relative change at positions 0, 7, 14, ..., 42\n", "depth",
           "reach l(W-1)", "last moved");
    for (size_t l = 1; l <= R_LAYERS && rc == KVL_OK; l++) {
        rc = influence(delta[l - 1], l);
        size_t last = 0;
        for (size_t t = 0; t < R_T; t++) {
            double rel = delta[l - 1][t] / delta[l - 1][0];
            if (rel > 0) last = t;
            cells[l][t] = rel == 0 ? 0 : rel < 1e-3 ? 1 : rel < 1e-2 ? 2 : rel < 1e-1 ? 3 : 4;
        }
        printf("%6zu %14zu %12zu  ", l, l * (R_W - 1), last);
        for (size_t t = 0; t < R_T; t += R_W - 1)
            printf(" %9.2e", delta[l - 1][t] / delta[l - 1][0]);
        printf("\n");
        if (rc == KVL_OK)
            rc = nb_expect(last == l * (R_W - 1), "depth %zu: last moved %zu, reach %zu", l, last,
                           l * (R_W - 1));
    }
    return rc == KVL_OK ? nb03_draw_reach(&cells[0][0], R_LAYERS, R_T, R_W) : rc;
}

// %% [markdown]
// PowerAttention (Chen et al., 2025) measured the same fading on trained models: with a window of
// about 2K, sliding-window models retrieve a passkey up to 12K tokens back but degrade at 16K and
// 32K, and the information strength decays to near zero after about 6 layers. Those are the
// authors' results, quoted; the toy above only shows the shape, and the V4.1 report relies on that
// shape when it replays just the last window (chapter 7).

// %% [markdown]
// ## Sinks
//
// A window changes what a softmax must do: every query spends a total weight of 1 on its $W$ keys,
// even when none of them holds what the head looks for, and then the weight lands on whatever is
// near. V4's window layers (chapter 6, where the sink enters its attention) give each head a way
// out, a sink: one learned logit $\sigma$ per head that joins the softmax's denominator and nothing
// else:
//
// $$p_i = \frac{e^{s_i}}{e^{\sigma} + \sum_j e^{s_j}}.$$
//
// The kept weights then sum to $1 - p_{\mathrm{sink}}$, with
//
// $$p_{\mathrm{sink}} = \frac{e^{\sigma}}{e^{\sigma} + \sum_j e^{s_j}},$$
//
// and $\sigma \to -\infty$ gives back the plain softmax. The cell computes $p_{\mathrm{sink}}$
// from the formula and checks both facts on `ref`'s `kvl_softmax_sink_f64` for one row of scores.

// %%
/* p_sink = e^σ / (e^σ + Σ_j e^{s_j}), shifted by the largest logit */
static double sink_share(const double *s, size_t n, double sigma)
{
    double mx = sigma, denom = 0;
    for (size_t i = 0; i < n; i++) mx = fmax(mx, s[i]);
    for (size_t i = 0; i < n; i++) denom += exp(s[i] - mx);
    return exp(sigma - mx) / (denom + exp(sigma - mx));
}

NB_CELL(cell_sink)
{
    const double scores[] = {0.3, -1.2, 2.0, 0.7, -0.4}, sigma = 1.5;
    double p[5], q[5], plain[5], sum = 0, diff = 0;
    memcpy(p, scores, sizeof p);
    memcpy(q, scores, sizeof q);
    memcpy(plain, scores, sizeof plain);
    kvl_softmax_sink_f64(p, 5, sigma);
    kvl_softmax_sink_f64(q, 5, -INFINITY);
    kvl_softmax_f64(plain, 5);
    for (int i = 0; i < 5; i++) sum += p[i], diff = fmax(diff, fabs(q[i] - plain[i]));
    const double p_sink = sink_share(scores, 5, sigma);
    printf("sink logit %.1f: kept weights sum to %.6f, 1 - p_sink = %.6f\n", sigma, sum,
           1 - p_sink);
    printf("sink logit -inf: max |difference from the plain softmax| = %.3g\n", diff);
    /* double softmax of five terms: rounding far below 1e-12 */
    return nb_expect(fabs(sum - (1 - p_sink)) < 1e-12 && diff < 1e-12,
                     "sink softmax off by %g / %g", fabs(sum - (1 - p_sink)), diff);
}

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_band),    NB_RUN(cell_work),
                                    NB_RUN(cell_ring),    NB_RUN(cell_ring_against_band),
                                    NB_RUN(cell_layer_ring_equals_band), NB_RUN(cell_mistral),
                                    NB_RUN(cell_reach),   NB_RUN(cell_sink)};
    static const char *const figures[] = {"window_band", "ring_buffer", "reach", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
