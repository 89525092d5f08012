// %% [markdown]
// # Chapter 2 · MLA: cache a latent, absorb the up-projections
//
// DeepSeek-V2's multi-head latent attention caches one small vector per token per layer instead of
// a key and a value per head, and rebuilds what the heads need from it. This notebook prices the
// latent from the V2 and V3 configs, then builds the mechanism in plain C: the two forms of a
// head's attention, naive (rebuild each head's key and value from the latent) and absorbed (fold
// the up-projections into the query and the output), shown equal on a small numpy check of
// absorption redone with the project's numpy-identical generator; then the latent row itself and a
// whole decode step, run against `ref/mla`'s fast path on the same input.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them (chapter 1's notebook
// explains the layout). `build/bin/nb_02 --step` walks it cell by cell; after editing
// `notebooks_c/02_mla.c`, `make nb-02` rebuilds it and walks it again. Figure layout, file reading
// and the checks' printing live in `notebooks_c/draw_mla.c`, `draw_cost.c` and `draw_compare.c`.

// %%
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "draw_compare.h"
#include "draw_cost.h"
#include "draw_mla.h"
#include "element.h"
#include "mla.h"
#include "nb.h"
#include "rng.h"
#include "rope.h"
#include "svg.h"

// %% [markdown]
// ## The latent
//
// Per token and layer MLA computes one down-projection and caches its normalised and rotated
// halves:
//
// $$[\,\tilde c \mid \tilde k\,] = W_{DKV}\, x_t,$$
// $$c_t = \mathrm{RMSNorm}(\tilde c), \qquad k^R_t = \mathrm{RoPE}(\tilde k, t),$$
//
// $c_t$ the KV latent of $D_c$ values, $k^R_t$ the decoupled RoPE key of $D_r$ values, shared by
// every head. Head $h$'s key content and value are $W_{UK}^h c_t$ and $W_{UV}^h c_t$. The query
// also goes through a latent, $c^Q$ of $D_q'$ values, but that saves activations in training, not
// cache. Everything below is read from `ref/configs/deepseek-v3.json` and `deepseek-v2.json`.

// %%
static kvl_model v3;

NB_CELL(cell_latent)
{
    int rc = kvl_model_load(&v3, nb_path("ref/configs/deepseek-v3.json"));
    kvl_model v2;
    if (rc == KVL_OK) rc = kvl_model_load(&v2, nb_path("ref/configs/deepseek-v2.json"));
    if (rc != KVL_OK) return rc;
    const double b = kvf_element_bits(KVF_BF16) / 8.0, Dc = (double)v3.kv_lora_rank,
                 Dr = (double)v3.qk_rope_head_dim;
    const double mha = 2.0 * (double)v3.n_heads * (double)v3.qk_nope_head_dim;
    printf("%s: H %zu, Dq' %s, Dc %zu, Dr %zu, Dnope %zu, Dv %zu, %zu layers\n", v3.name,
           v3.n_heads, nb_num((double)v3.q_lora_rank, 0), v3.kv_lora_rank, v3.qk_rope_head_dim,
           v3.qk_nope_head_dim, v3.v_head_dim, v3.n_layers);
    printf("cached per token per layer: Dc + Dr = %s + %s = %s values\n", nb_num(Dc, 0),
           nb_num(Dr, 0), nb_num(Dc + Dr, 0));
    printf("MHA with H heads of %zu (the V2 paper's 2*n_h*d_h): %s values: %s x the latent alone, "
           "%.1f x with the RoPE key\n",
           v3.qk_nope_head_dim, nb_num(mha, 0), nb_num(mha / Dc, 1), mha / (Dc + Dr));
    printf("as GQA with heads of d_h = %zu: (Dc + Dr) / (2 d_h) = %.2f groups\n",
           v3.qk_nope_head_dim, (Dc + Dr) / (2.0 * (double)v3.qk_nope_head_dim));
    printf("bf16: %s B per layer; x %zu layers = %s B per token (%s: %zu layers, %s B per token)\n",
           nb_num((Dc + Dr) * b, 0), v3.n_layers, nb_num((Dc + Dr) * b * (double)v3.n_layers, 0),
           v2.name, v2.n_layers, nb_num((Dc + Dr) * b * (double)v2.n_layers, 0));
    kvl_model_free(&v2);
    return KVL_OK;
}

// %% [markdown]
// ## What a long request holds, and in which unit
//
// V3's 70,272 B per token over a 128K-token request is often quoted as "about 9.2 GB", and
// FlashMLA's README prices the same request at $576 \cdot 2 \cdot 62 \cdot 128 \cdot 1024$ B = 8.72
// GiB, which is easy to read as the same figure with the MTP layer added. They are not the same
// figure: 9.2 GB is decimal gigabytes at 61 layers; 8.72 GiB is binary gibibytes at 62 layers. The
// cell prints each with its unit and layer count.

// %%
NB_CELL(cell_long_request)
{
    const double row =
        (double)(v3.kv_lora_rank + v3.qk_rope_head_dim) * kvf_element_bits(KVF_BF16) / 8.0;
    const double L = (double)v3.n_layers, T128k = 131072, GiB = 1073741824.0;
    printf("%zu layers x 131,072 tokens: %s B = %.2f GB = %.2f GiB\n", v3.n_layers,
           nb_num(row * L * T128k, 0), row * L * T128k / 1e9, row * L * T128k / GiB);
    printf("%zu layers x 128,000 tokens: %.2f GB\n", v3.n_layers, row * L * 128000 / 1e9);
    printf("%zu layers (with the MTP layer) x 131,072 tokens: %.2f GiB = %.2f GB\n",
           v3.n_layers + 1, row * (L + 1) * T128k / GiB, row * (L + 1) * T128k / 1e9);
    return KVL_OK;
}

// %% [markdown]
// ## MLA against MHA and GQA with the same heads
//
// A V3 head has a 192-wide key (128 content + 64 RoPE channels) and a 128-wide value
// (`v_head_dim` = 128 in DeepSeek-V3's config.json). A common way to price MHA at this geometry
// sizes the value like the key, 192 channels ($128 \cdot 192 \cdot 2 \cdot 2$ = 98,304 B per
// layer, "85×" MLA; GQA-8 "375 KB, 5.3×"); with the value's real 128 channels the MHA cache is
// 81,920 B per layer. The cell prints the corrected figures, the ones that size V like K (rows
// marked "as quoted"), and the V2 paper's convention (d_h = 128 for K and V, no RoPE part).

// %%
#define GQA_GROUPS 8 /* the usual comparison: Llama-style GQA-8 with V3's heads */

NB_CELL(cell_mha_compare)
{
    const double b = kvf_element_bits(KVF_BF16) / 8.0, L = (double)v3.n_layers,
                 H = (double)v3.n_heads;
    const double Dk = (double)(v3.qk_nope_head_dim + v3.qk_rope_head_dim),
                 Dv = (double)v3.v_head_dim;
    const double Dn = (double)v3.qk_nope_head_dim;
    const double mla = (double)(v3.kv_lora_rank + v3.qk_rope_head_dim) * b * L;
    const struct { const char *what; double heads, k, v;
    } rows[] = {
        {"MHA, K 192 + V 128 (corrected)", H, Dk, Dv},
        {"GQA-8, K 192 + V 128 (corrected)", GQA_GROUPS, Dk, Dv},
        {"MHA, V sized like K (as quoted)", H, Dk, Dk},
        {"GQA-8, V sized like K (as quoted)", GQA_GROUPS, Dk, Dk},
        {"MHA, d_h 128 (V2 paper)", H, Dn, Dn},
        {"GQA-8, d_h 128 (V2 paper)", GQA_GROUPS, Dn, Dn},
    };
    printf("%-34s %10s %12s %8s %8s\n", "cache", "B/layer", "B/token", "MB", "x MLA");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double layer = rows[i].heads * (rows[i].k + rows[i].v) * b;
        printf("%-34s %10s %12s %8.2f %8.2f\n", rows[i].what, nb_num(layer, 0),
               nb_num(layer * L, 0), layer * L / 1e6, layer * L / mla);
    }
    printf("%-34s %10s %12s %8.2f %8.2f\n", "MLA, Dc + Dr = 576", nb_num(mla / L, 0),
           nb_num(mla, 0), mla / 1e6, 1.0);
    return KVL_OK;
}

// %% [markdown]
// ## Absorption: two orders of the same products
//
// Head $h$ asks with $[\,q^C_h \mid q^R_h\,]$ ($D_{nope} + D_r$ values) and reads cached rows
// $[\,c_j \mid k^R_j\,]$ ($D_c + D_r$). The **naive** form rebuilds the head's key and value from
// every row, then runs ordinary attention with the scale $\sigma$:
//
// $$k_{j,h} = [\,W_{UK}^h c_j \mid k^R_j\,], \qquad v_{j,h} = W_{UV}^h c_j,$$
// $$s_j = \sigma\, q_h \cdot k_{j,h}, \qquad p = \mathrm{softmax}(s),$$
// $$o_h = \sum_j p_j\, v_{j,h}.$$
//
// A score is $q^C_h \cdot (W_{UK}^h c_j) = (W_{UK}^{h\top} q^C_h) \cdot c_j$, and a sum of values
// is $\sum_j p_j W_{UV}^h c_j = W_{UV}^h \sum_j p_j c_j$. The **absorbed** form takes the other
// order: fold $W_{UK}^h$ into the query once per step, score every cached row as it stands, sum the
// latents under the weights, and apply $W_{UV}^h$ once, after:
//
// $$\hat q_h = W_{UK}^{h\top} q^C_h,$$
// $$s_j = \sigma\,(\hat q_h \cdot c_j + q^R_h \cdot k^R_j),$$
// $$o_h = W_{UV}^h\, \hat o_h, \qquad \hat o_h = \sum_j p_j\, c_j.$$
//
// The figure draws both orders at V3's widths (`chapters/02_mla/figures/absorption.svg`).

// %%
NB_CELL(cell_absorption_figure)
{
    svg_doc s;
    mlanb_draw_absorption(&s, v3.qk_nope_head_dim, v3.kv_lora_rank, v3.v_head_dim);
    return nb_figure("absorption", &s);
}

// %% [markdown]
// In C, one head at a time, in double. Both toy layers below have $D_c = 32$ and
// $D_{nope} = D_v = 16$; $W_{UK}^h$ is $[D_{nope}][D_c]$ and $W_{UV}^h$ is $[D_v][D_c]$, stored by
// rows. Each form is a score and a value function with the same inputs and outputs, so either pair
// can be handed to a decode step; the softmax between them is the same for both.

// %%
enum { DC = 32, DN = 16, DV = 16, MAX_DR = 8, MAX_T = 40 };

/* what head h reads: its up-projections and the cached rows[T][DC + Dr] */
typedef struct {
    const double *W_UK, *W_UV, *rows;
    size_t T, Dr;
    double scale;
} head_view;

/* y[m] = W[m][n] x[n] */
static void matvec(double *y, const double *W, const double *x, size_t m, size_t n)
{
    for (size_t i = 0; i < m; i++) {
        y[i] = 0;
        for (size_t j = 0; j < n; j++) y[i] += W[i * n + j] * x[j];
    }
}

/* y[n] = Wᵀ x for W[m][n], x[m] */
static void matvec_t(double *y, const double *W, const double *x, size_t m, size_t n)
{
    for (size_t j = 0; j < n; j++) {
        y[j] = 0;
        for (size_t i = 0; i < m; i++) y[j] += W[i * n + j] * x[i];
    }
}

static double dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* p[T] = softmax(s[T]) */
static void softmax(double *p, const double *s, size_t T)
{
    double m = -INFINITY, sum = 0;
    for (size_t j = 0; j < T; j++) m = fmax(m, s[j]);
    for (size_t j = 0; j < T; j++) sum += p[j] = exp(s[j] - m);
    for (size_t j = 0; j < T; j++) p[j] /= sum;
}

// %%
/* naive score: s[T] = σ q · [W_UK c_j | k^R_j], every key rebuilt from its row */
static void score_naive(double *s, const double *q, const head_view *v)
{
    double k[DN + MAX_DR];
    for (size_t j = 0; j < v->T; j++) {
        const double *c = v->rows + j * (DC + v->Dr);
        matvec(k, v->W_UK, c, DN, DC);
        memcpy(k + DN, c + DC, v->Dr * sizeof *k);
        s[j] = v->scale * dot(q, k, DN + v->Dr);
    }
}

/* naive value: o[DV] = Σ_j p_j W_UV c_j, every value rebuilt from its row */
static void value_naive(double o[DV], const double *p, const head_view *v)
{
    double val[DV];
    memset(o, 0, DV * sizeof *o);
    for (size_t j = 0; j < v->T; j++) {
        matvec(val, v->W_UV, v->rows + j * (DC + v->Dr), DV, DC);
        for (int i = 0; i < DV; i++) o[i] += p[j] * val[i];
    }
}

// %%
/* absorbed score: s[T] = σ (q̂ · c_j + q^R · k^R_j), q̂ = W_UKᵀ q^C folded once */
static void score_absorbed(double *s, const double *q, const head_view *v)
{
    double q_hat[DC];
    matvec_t(q_hat, v->W_UK, q, DN, DC);
    for (size_t j = 0; j < v->T; j++) {
        const double *c = v->rows + j * (DC + v->Dr);
        s[j] = v->scale * (dot(q_hat, c, DC) + dot(q + DN, c + DC, v->Dr));
    }
}

/* absorbed value: o[DV] = W_UV ô, ô = Σ_j p_j c_j summed as cached */
static void value_absorbed(double o[DV], const double *p, const head_view *v)
{
    double o_hat[DC] = {0};
    for (size_t j = 0; j < v->T; j++)
        for (int i = 0; i < DC; i++) o_hat[i] += p[j] * v->rows[j * (DC + v->Dr) + i];
    matvec(o, v->W_UV, o_hat, DV, DC);
}

typedef struct {
    void (*score)(double *s, const double *q, const head_view *v);
    void (*value)(double o[DV], const double *p, const head_view *v);
} head_form;

static const head_form NAIVE = {score_naive, value_naive},
                       ABSORBED = {score_absorbed, value_absorbed};

// %% [markdown]
// ## A numpy check of absorption, in C
//
// A small numpy check shows the two forms equal to rounding at $d = 64$, $n_h = 4$, $d_h = 16$,
// $d_c = 32$, $T = 10$ with `default_rng(0)`, without RoPE ($D_r = 0$) and without a scale
// ($\sigma = 1$). It draws, in this order, $W_{DKV}$, $W_{UK}$, $W_{UV}$ and $W_Q$ (each standard
// normal divided by the square root of its input width), then the ten hidden states $H$ and the
// query's $h_t$, and prints the largest score and output differences over all heads.
// `ref/core/rng.h` is numpy's generator bit for bit (PCG64, SeedSequence, the ziggurat normal), so
// the cell below draws the very same matrices in the same order, projects the ten latents
// $c_t = W_{DKV} h_t$, and runs both forms above on every head, with one softmax of the naive
// scores for both sums of values, as the numpy check does.

// %%
enum { WT_D = 64, WT_NH = 4, WT_T = 10 };

static double W_DKV[DC][WT_D], W_UK[WT_NH][DN][DC], W_UV[WT_NH][DV][DC], W_Q[WT_NH][DN][WT_D];
static double Hs[WT_T][WT_D], h_t[WT_D], C[WT_T][DC];
static double scores_naive[WT_NH][WT_T], out_naive[WT_NH][DV];

/* x[n] = rng.standard_normal(n) / sqrt(fan) */
static void draw(kvl_rng *rng, double *x, size_t n, double fan)
{
    kvl_rng_normal_f64(rng, x, n, 1.0);
    for (size_t i = 0; i < n; i++) x[i] /= sqrt(fan);
}

NB_CELL(cell_numpy_check)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 0);
    draw(&rng, &W_DKV[0][0], DC * WT_D, WT_D);
    draw(&rng, &W_UK[0][0][0], WT_NH * DN * DC, DC);
    draw(&rng, &W_UV[0][0][0], WT_NH * DV * DC, DC);
    draw(&rng, &W_Q[0][0][0], WT_NH * DN * WT_D, WT_D);
    draw(&rng, &Hs[0][0], WT_T * WT_D, 1);
    draw(&rng, h_t, WT_D, 1);
    for (int t = 0; t < WT_T; t++) matvec(C[t], &W_DKV[0][0], Hs[t], DC, WT_D);
    double ds = 0, dout = 0;
    for (int h = 0; h < WT_NH; h++) {
        double q[DN], p[WT_T], s[WT_T], o[DV];
        const head_view v = {&W_UK[h][0][0], &W_UV[h][0][0], &C[0][0], WT_T, 0, 1.0};
        matvec(q, &W_Q[h][0][0], h_t, DN, WT_D);
        score_naive(scores_naive[h], q, &v);
        softmax(p, scores_naive[h], WT_T);
        value_naive(out_naive[h], p, &v);
        score_absorbed(s, q, &v);
        value_absorbed(o, p, &v);
        for (int t = 0; t < WT_T; t++) ds = fmax(ds, fabs(scores_naive[h][t] - s[t]));
        for (int i = 0; i < DV; i++) dout = fmax(dout, fabs(out_naive[h][i] - o[i]));
    }
    printf("max |score diff| : %s\n", mlanb_repr(ds));
    printf("max |output diff|: %s\n", mlanb_repr(dout));
    printf("cached floats per token, naive K+V: %d  absorbed latent: %d\n", 2 * WT_NH * DN, DC);
    /* both forms sum O(10) terms of O(1) in double: rounding stays near 1e-15 */
    return nb_expect(ds < 1e-12 && dout < 1e-12,
                     "absorbed and naive differ beyond rounding: %g, %g", ds, dout);
}

// %% [markdown]
// Run under numpy 2.4.1 the check prints `5.329070518200751e-15` and `6.661338147750939e-16`.
// The digits of a rounding difference depend on the order of the sums (numpy's einsum and BLAS
// choose theirs), so only the level, about $10^{-15}$, carries over; a rerun on numpy 1.24 gives
// 4.00e-15 and 8.88e-16. The draws themselves do carry over: numpy's own results for this check are
// committed in `tests/data/mla_toy_numpy.txt` (written by `tests/gen_mla_toy.py`), and the C run
// lands on them.

// %%
NB_CELL(cell_numpy_agrees)
{
    double s[WT_NH * WT_T], o[WT_NH * DV], numpy_diff[2];
    int rc = mlanb_numpy_block(s, WT_NH * WT_T, "scores_naive");
    if (rc == KVL_OK) rc = mlanb_numpy_block(o, WT_NH * DV, "out_naive");
    if (rc == KVL_OK) rc = mlanb_numpy_block(numpy_diff, 2, "max_diff");
    if (rc != KVL_OK) return rc;
    double ds = 0, dout = 0;
    for (int i = 0; i < WT_NH * WT_T; i++) ds = fmax(ds, fabs(s[i] - (&scores_naive[0][0])[i]));
    for (int i = 0; i < WT_NH * DV; i++) dout = fmax(dout, fabs(o[i] - (&out_naive[0][0])[i]));
    printf("C against numpy, same draws: max |score - numpy| %.3g, max |output - numpy| %.3g\n", ds,
           dout);
    printf("numpy's own max diffs in that file: %s, %s\n", mlanb_repr(numpy_diff[0]),
           mlanb_repr(numpy_diff[1]));
    return nb_expect(ds < 1e-12 && dout < 1e-12, "the C draws do not reproduce numpy's (%g, %g)",
                     ds, dout);
}

// %% [markdown]
// ## The two forms in `ref/mla`
//
// The library implements both forms over the same cached rows $[\,c_j \mid k^R_j\,]$, with the
// RMSNorms, the query latent, the decoupled RoPE key and YaRN: `mla_decode_naive` rebuilds every
// head's key and value from each cached row, `mla_decode_absorbed` scores the rows as they are, in
// float, with an online softmax. At the chapter's toy size ($d = 64$, $H = 4$,
// $D_q' = 32$, $D_c = 32$, $D_{nope} = 16$, $D_r = 8$, $D_v = 16$) the cell prefills 39 tokens into
// two caches and decodes token 39 with each form.

// %%
enum { D = 64, HEADS = 4, DR = 8, TOKENS = 40 };

static mlanb_run lib;

NB_CELL(cell_ref_forms)
{
    int rc = mlanb_run_ref(&lib, TOKENS, 12);
    if (rc != KVL_OK) return rc;
    const mla_config *c = &lib.c;
    double scale, diff = nbc_max_diff(lib.y_absorbed, lib.y_naive, c->d, &scale);
    /* float32 sums over Dc = 32 and 40 keys reassociated: a few ulps of the output scale */
    rc = nbc_report("decode at position 39, float32, naive vs absorbed", diff, scale, 1e-5);
    printf(
        "floats cached per token: naive K and V per head H(Dnope+Dr+Dv) = %zu, the row Dc+Dr = %zu\n",
        c->n_heads * (c->qk_nope + c->qk_rope + c->v_head), c->kv_lora_rank + c->qk_rope);
    printf("the cache holds %s B after %d tokens = %s B per token\n",
           nb_num((double)lib.cache_bytes, 0), TOKENS, nb_num((double)lib.cache_bytes / TOKENS, 0));
    mla_config at_v3;
    if (rc == KVL_OK) rc = mla_config_from_model(&at_v3, &v3);
    if (rc != KVL_OK) return rc;
    const double up = 2 * (double)v3.kv_lora_rank * (double)(v3.qk_nope_head_dim + v3.v_head_dim);
    printf(
        "\nper cached token and head at V3's size: naive re-expansion 2 Dc (Dnope + Dv) = %s flop before\n"
        "any attention; absorbed 2 (Dc + Dr) + 2 Dc = %s flop for the score and the sum: %.0fx less in all\n",
        nb_num(up, 0), nb_num(mla_absorbed_flop_per_token(&at_v3), 0),
        mla_naive_flop_per_token(&at_v3) / mla_absorbed_flop_per_token(&at_v3));
    return rc;
}

// %% [markdown]
// ## The latent and a decode step, built, against `ref/mla`
//
// Now the whole layer's step in the notebook, on `ref/mla`'s weights and tokens. The cache row of
// token $t$ is the latent of the first cell, with
// $\mathrm{RMSNorm}(x) = g \odot x / \sqrt{\tfrac{1}{n} \sum_i x_i^2 + \epsilon}$ (gain $g$ =
// `kv_norm`) and RoPE on channel pairs $(2i, 2i{+}1)$ with the YaRN frequencies of the config
// (`ref/core/rope.h`, borrowed). The decode step runs a form on every head and projects out:
//
// $$\mathrm{out} = W_O\,[\,o_0; \dots; o_{H-1}\,].$$
//
// The query $[\,q^C_h \mid q^R_h\,]$ is borrowed from `mla_query` (through the query latent $c^Q$,
// which saves training activations, not cache). $W_{UK}^h$ and $W_{UV}^h$ are the first $D_{nope}$
// and the next $D_v$ rows of head $h$'s block of $W_{UKV}$. The built rows and outputs, in double,
// must meet the library's float ones to a relative $10^{-5}$, and the two built forms each other to
// $10^{-12}$.

// %%
static double W_dkv[DC + DR][D], kv_norm[DC], W_ukv[HEADS][DN + DV][DC], W_o[D][HEADS * DV];
static double X[TOKENS][D], rows[TOKENS][DC + DR], q[HEADS][DN + DR];

static void rms_norm(double *x, const double *g, size_t n, double eps)
{
    const double r = 1.0 / sqrt(dot(x, x, n) / (double)n + eps);
    for (size_t i = 0; i < n; i++) x[i] = g[i] * (x[i] * r);
}

static void latent_row(double row[DC + DR], const double x[D], size_t t, const mla_config *c)
{
    matvec(row, &W_dkv[0][0], x, DC + DR, D);
    rms_norm(row, kv_norm, DC, c->norm_eps);
    kvl_rope_rotate_interleaved_f64(row + DC, &c->rope, (int64_t)t);
}

static void decode(double out[D], const head_form *form, double scale)
{
    double o[HEADS * DV], s[TOKENS], p[TOKENS];
    for (int h = 0; h < HEADS; h++) {
        const head_view v = {&W_ukv[h][0][0], &W_ukv[h][DN][0], &rows[0][0], TOKENS, DR, scale};
        form->score(s, q[h], &v);
        softmax(p, s, TOKENS);
        form->value(o + h * DV, p, &v);
    }
    matvec(out, &W_o[0][0], o, D, HEADS * DV);
}

// %%
NB_CELL(cell_built_vs_ref)
{
    const mla_config *c = &lib.c;
    double lib_rows[TOKENS][DC + DR], lib_naive[D], lib_abs[D], naive[D], absorbed[D];
    cost_widen(&W_dkv[0][0], lib.w.w_dkv, (DC + DR) * D);
    cost_widen(kv_norm, lib.w.kv_norm, DC);
    cost_widen(&W_ukv[0][0][0], lib.w.w_ukv, HEADS * (DN + DV) * DC);
    cost_widen(&W_o[0][0], lib.w.w_o, D * HEADS * DV);
    cost_widen(&X[0][0], lib.x, TOKENS * D);
    cost_widen(&q[0][0], lib.q, HEADS * (DN + DR));
    cost_widen(&lib_rows[0][0], lib.rows, TOKENS * (DC + DR));
    cost_widen(lib_naive, lib.y_naive, D);
    cost_widen(lib_abs, lib.y_absorbed, D);

    for (size_t t = 0; t < TOKENS; t++) latent_row(rows[t], X[t], t, c);
    decode(naive, &NAIVE, c->softmax_scale);
    decode(absorbed, &ABSORBED, c->softmax_scale);

    int rc = cost_check("cache rows [c_kv | k_rope] 0-39, built vs mla_latent", &rows[0][0],
                        &lib_rows[0][0], TOKENS * (DC + DR), 1e-5);
    if (rc == KVL_OK)
        rc = cost_check("decode of token 39, built absorbed vs built naive", absorbed, naive, D,
                        1e-12);
    if (rc == KVL_OK)
        rc = cost_check("decode of token 39, built naive vs mla_decode_naive", naive, lib_naive, D,
                        1e-5);
    if (rc == KVL_OK)
        rc = cost_check("decode of token 39, built absorbed vs mla_decode_absorbed", absorbed,
                        lib_abs, D, 1e-5);
    mlanb_run_free(&lib);
    return rc;
}

// %% [markdown]
// ## The figure
//
// Bytes per token at V3's head geometry and 61 layers, bf16: MHA and GQA-8 with the real 128-wide
// values, MHA priced with values sized like keys, as it is often quoted (light), and MLA's
// 576-value row.
// The README shows it (`chapters/02_mla/figures/cache_per_token.svg`).

// %%
NB_CELL(cell_figure)
{
    const double b = kvf_element_bits(KVF_BF16) / 8.0, L = (double)v3.n_layers,
                 H = (double)v3.n_heads;
    const double Dk = (double)(v3.qk_nope_head_dim + v3.qk_rope_head_dim),
                 Dv = (double)v3.v_head_dim;
    const char *labels[] = {"MHA, V like K (as quoted)", "MHA, K 192 + V 128",
                            "GQA-8, K 192 + V 128", "MLA, c_kv 512 + k_rope 64"};
    const double values[] = {H * 2 * Dk * b * L, H * (Dk + Dv) * b * L,
                             GQA_GROUPS * (Dk + Dv) * b * L,
                             (double)(v3.kv_lora_rank + v3.qk_rope_head_dim) * b * L};
    const int emphasis[] = {0, 1, 1, 1};
    char subtitle[160];
    snprintf(subtitle, sizeof subtitle,
             "%zu layers, bf16, %zu heads; light: MHA with V sized like K, as often quoted",
             v3.n_layers, v3.n_heads);
    svg_doc s;
    svg_bars_log(&s, "DeepSeek-V3 geometry: KV cache bytes per token", subtitle, labels, values,
                 emphasis, 4, "B");
    kvl_model_free(&v3);
    return nb_figure("cache_per_token", &s);
}

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_latent),       NB_RUN(cell_long_request),
                                    NB_RUN(cell_mha_compare),  NB_RUN(cell_absorption_figure),
                                    NB_RUN(cell_numpy_check),  NB_RUN(cell_numpy_agrees),
                                    NB_RUN(cell_ref_forms),    NB_RUN(cell_built_vs_ref),
                                    NB_RUN(cell_figure)};
    static const char *const figures[] = {"absorption", "cache_per_token", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
