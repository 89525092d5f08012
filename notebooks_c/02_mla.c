// %% [markdown]
// # Chapter 2 · MLA: cache a latent, absorb the up-projections
//
// DeepSeek-V2's multi-head latent attention caches one small vector per token per layer instead of a
// key and a value per head, and rebuilds what the heads need from it. This notebook prices the latent
// from the V2 and V3 configs, redoes the lineage write-up's numpy absorption check digit for digit with the
// project's numpy-identical generator, and runs the two forms of `ref/mla` against each other.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them (chapter 1's notebook
// explains the layout). `build/bin/nb_02 --step` walks it cell by cell.

// %%
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "element.h"
#include "mla.h"
#include "nb.h"
#include "rng.h"
#include "rope.h"
#include "svg.h"
#include "swa.h"

// %% [markdown]
// ## The latent
//
// Per token and layer MLA computes `[c̃ | k̃^R] = W_DKV x` and caches `c_kv = RMSNorm(c̃)` (Dc values)
// and the decoupled RoPE key `k^R = RoPE(k̃^R)` (Dr values, shared by every head). Keys and values
// per head are `W_UK^h c_kv` and `W_UV^h c_kv`. The query also goes through a latent, c^Q of Dq'
// values, but that saves activations in training, not cache. Everything below is read from
// `ref/configs/deepseek-v3.json` and `deepseek-v2.json`.

// %%
static kvl_model v3;

NB_CELL(cell_latent)
{
    int rc = kvl_model_load(&v3, nb_path("ref/configs/deepseek-v3.json"));
    kvl_model v2;
    if (rc == KVL_OK) rc = kvl_model_load(&v2, nb_path("ref/configs/deepseek-v2.json"));
    if (rc != KVL_OK) return rc;
    const double b = kvf_element_bits(KVF_BF16) / 8.0, Dc = (double)v3.kv_lora_rank, Dr = (double)v3.qk_rope_head_dim;
    const double mha = 2.0 * (double)v3.n_heads * (double)v3.qk_nope_head_dim;
    printf("%s: H %zu, Dq' %zu, Dc %zu, Dr %zu, Dnope %zu, Dv %zu, %zu layers\n", v3.name, v3.n_heads, v3.q_lora_rank,
           v3.kv_lora_rank, v3.qk_rope_head_dim, v3.qk_nope_head_dim, v3.v_head_dim, v3.n_layers);
    printf("cached per token per layer: Dc + Dr = %s + %s = %s values\n", nb_num(Dc, 0), nb_num(Dr, 0),
           nb_num(Dc + Dr, 0));
    printf("MHA with H heads of %zu (the V2 paper's 2*n_h*d_h): %s values: %s x the latent alone, %.1f x with the RoPE key\n",
           v3.qk_nope_head_dim, nb_num(mha, 0), nb_num(mha / Dc, 1), mha / (Dc + Dr));
    printf("as GQA with heads of d_h = %zu: (Dc + Dr) / (2 d_h) = %.2f groups\n", v3.qk_nope_head_dim,
           (Dc + Dr) / (2.0 * (double)v3.qk_nope_head_dim));
    printf("bf16: %s B per layer; x %zu layers = %s B per token (%s: %zu layers, %s B per token)\n",
           nb_num((Dc + Dr) * b, 0), v3.n_layers, nb_num((Dc + Dr) * b * (double)v3.n_layers, 0), v2.name, v2.n_layers,
           nb_num((Dc + Dr) * b * (double)v2.n_layers, 0));
    kvl_model_free(&v2);
    return KVL_OK;
}

// %% [markdown]
// ## What a long request holds, and in which unit
//
// The lineage write-up says a 128K-token request holds "about 9.2 GB", and that FlashMLA's figure
// 576·2·62·128·1024 = 8.72 GiB is the same one with the MTP layer. They are not the same figure:
// 9.2 GB is decimal gigabytes at 61 layers; 8.72 GiB is binary gibibytes at 62 layers. The cell prints
// each with its unit and layer count.

// %%
NB_CELL(cell_long_request)
{
    const double row = (double)(v3.kv_lora_rank + v3.qk_rope_head_dim) * kvf_element_bits(KVF_BF16) / 8.0;
    const double L = (double)v3.n_layers, T128k = 131072, GiB = 1073741824.0;
    printf("%zu layers x 131,072 tokens: %s B = %.2f GB = %.2f GiB\n", v3.n_layers, nb_num(row * L * T128k, 0),
           row * L * T128k / 1e9, row * L * T128k / GiB);
    printf("%zu layers x 128,000 tokens: %.2f GB\n", v3.n_layers, row * L * 128000 / 1e9);
    printf("%zu layers (with the MTP layer) x 131,072 tokens: %.2f GiB = %.2f GB\n", v3.n_layers + 1,
           row * (L + 1) * T128k / GiB, row * (L + 1) * T128k / 1e9);
    return KVL_OK;
}

// %% [markdown]
// ## MLA against MHA and GQA with the same heads
//
// A V3 head has a 192-wide key (128 content + 64 RoPE channels) and a 128-wide value. The lineage
// write-up sizes the value like the key (128·192·2·2 = 98,304 B per layer, "85×", GQA-8 "375 KB,
// 5.3×"); with the value's real 128 channels the MHA cache is 81,920 B per layer. The cell prints the
// corrected figures, the lineage write-up's (rows marked "lineage"), and the V2 paper's convention
// (d_h = 128 for K and V, no RoPE part).

// %%
#define GQA_GROUPS 8 /* the lineage write-up's comparison: Llama-style GQA-8 with V3's heads */

NB_CELL(cell_mha_compare)
{
    const double b = kvf_element_bits(KVF_BF16) / 8.0, L = (double)v3.n_layers, H = (double)v3.n_heads;
    const double Dk = (double)(v3.qk_nope_head_dim + v3.qk_rope_head_dim), Dv = (double)v3.v_head_dim;
    const double Dn = (double)v3.qk_nope_head_dim;
    const double mla = (double)(v3.kv_lora_rank + v3.qk_rope_head_dim) * b * L;
    const struct { const char *what; double heads, k, v; } rows[] = {
        {"MHA, K 192 + V 128 (corrected)", H, Dk, Dv},  {"GQA-8, K 192 + V 128 (corrected)", GQA_GROUPS, Dk, Dv},
        {"MHA, V sized like K (lineage)", H, Dk, Dk},  {"GQA-8, V sized like K (lineage)", GQA_GROUPS, Dk, Dk},
        {"MHA, d_h 128 (V2 paper)", H, Dn, Dn},         {"GQA-8, d_h 128 (V2 paper)", GQA_GROUPS, Dn, Dn},
    };
    printf("%-34s %10s %12s %8s %8s\n", "cache", "B/layer", "B/token", "MB", "x MLA");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        double layer = rows[i].heads * (rows[i].k + rows[i].v) * b;
        printf("%-34s %10s %12s %8.2f %8.2f\n", rows[i].what, nb_num(layer, 0), nb_num(layer * L, 0), layer * L / 1e6,
               layer * L / mla);
    }
    printf("%-34s %10s %12s %8.2f %8.2f\n", "MLA, Dc + Dr = 576", nb_num(mla / L, 0), nb_num(mla, 0), mla / 1e6, 1.0);
    return KVL_OK;
}

// %% [markdown]
// ## Absorption: the lineage write-up's numpy check, in C
//
// The score of head h is `q_h · (W_UK^h c_j) = (W_UK^hᵀ q_h) · c_j`: fold W_UK into the query once per
// step and every cached latent is a key as it stands. Likewise `Σ_j p_j W_UV^h c_j = W_UV^h Σ_j p_j c_j`:
// sum the latents, then apply W_UV. The lineage write-up checks this in numpy at d 64, n_h 4, d_h 16, d_c 32,
// T 10 with `default_rng(0)`. `ref/core/rng.h` is numpy's generator bit for bit (PCG64, SeedSequence,
// the ziggurat normal), so the cell below draws the very same matrices, in the same order, and does
// the same algebra in double with plain loops.

// %%
enum { WT_D = 64, WT_NH = 4, WT_DH = 16, WT_DC = 32, WT_T = 10 };

static double W_DKV[WT_DC][WT_D], W_UK[WT_NH][WT_DH][WT_DC], W_UV[WT_NH][WT_DH][WT_DC], W_Q[WT_NH][WT_DH][WT_D];
static double Hs[WT_T][WT_D], h_t[WT_D], C[WT_T][WT_DC];
static double scores_naive[WT_NH][WT_T], out_naive[WT_NH][WT_DH], out_abs[WT_NH][WT_DH];

/* x[n] = rng.standard_normal(n) / sqrt(fan) */
static void draw(kvl_rng *rng, double *x, size_t n, double fan)
{
    kvl_rng_normal_f64(rng, x, n, 1.0);
    for (size_t i = 0; i < n; i++) x[i] /= sqrt(fan);
}

/* Python's repr of a double: the shortest text that reads back as the same number */
static const char *repr(double v)
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

/* One head: naive scores and output (K, V up-projected per cached token), then the absorbed ones. */
static void head(double *ds, double *dout, int h)
{
    double q[WT_DH] = {0}, K[WT_T][WT_DH] = {{0}}, V[WT_T][WT_DH] = {{0}}, p[WT_T], m = -INFINITY, sum = 0;
    for (int i = 0; i < WT_DH; i++)
        for (int k = 0; k < WT_D; k++) q[i] += W_Q[h][i][k] * h_t[k];
    for (int t = 0; t < WT_T; t++)
        for (int i = 0; i < WT_DH; i++)
            for (int c = 0; c < WT_DC; c++) {
                K[t][i] += W_UK[h][i][c] * C[t][c];
                V[t][i] += W_UV[h][i][c] * C[t][c];
            }
    for (int t = 0; t < WT_T; t++) {
        scores_naive[h][t] = 0;
        for (int i = 0; i < WT_DH; i++) scores_naive[h][t] += q[i] * K[t][i];
        m = fmax(m, scores_naive[h][t]);
    }
    for (int t = 0; t < WT_T; t++) sum += p[t] = exp(scores_naive[h][t] - m);
    for (int t = 0; t < WT_T; t++) p[t] /= sum;
    for (int i = 0; i < WT_DH; i++) {
        out_naive[h][i] = 0;
        for (int t = 0; t < WT_T; t++) out_naive[h][i] += p[t] * V[t][i];
    }
    double q_abs[WT_DC] = {0}, o_lat[WT_DC] = {0};
    for (int c = 0; c < WT_DC; c++)
        for (int i = 0; i < WT_DH; i++) q_abs[c] += W_UK[h][i][c] * q[i];
    for (int t = 0; t < WT_T; t++) {
        double s = 0;
        for (int c = 0; c < WT_DC; c++) s += q_abs[c] * C[t][c];
        *ds = fmax(*ds, fabs(scores_naive[h][t] - s));
        for (int c = 0; c < WT_DC; c++) o_lat[c] += p[t] * C[t][c];
    }
    for (int i = 0; i < WT_DH; i++) {
        out_abs[h][i] = 0;
        for (int c = 0; c < WT_DC; c++) out_abs[h][i] += W_UV[h][i][c] * o_lat[c];
        *dout = fmax(*dout, fabs(out_naive[h][i] - out_abs[h][i]));
    }
}

NB_CELL(cell_numpy_check)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 0);
    draw(&rng, &W_DKV[0][0], WT_DC * WT_D, WT_D);
    draw(&rng, &W_UK[0][0][0], WT_NH * WT_DH * WT_DC, WT_DC);
    draw(&rng, &W_UV[0][0][0], WT_NH * WT_DH * WT_DC, WT_DC);
    draw(&rng, &W_Q[0][0][0], WT_NH * WT_DH * WT_D, WT_D);
    draw(&rng, &Hs[0][0], WT_T * WT_D, 1);
    draw(&rng, h_t, WT_D, 1);
    for (int t = 0; t < WT_T; t++)
        for (int c = 0; c < WT_DC; c++) {
            C[t][c] = 0;
            for (int k = 0; k < WT_D; k++) C[t][c] += Hs[t][k] * W_DKV[c][k];
        }
    double ds = 0, dout = 0;
    for (int h = 0; h < WT_NH; h++) head(&ds, &dout, h);
    printf("max |score diff| : %s\n", repr(ds));
    printf("max |output diff|: %s\n", repr(dout));
    printf("cached floats per token, naive K+V: %d  absorbed latent: %d\n", 2 * WT_NH * WT_DH, WT_DC);
    /* both forms sum O(10) terms of O(1) in double: rounding stays near 1e-15 */
    return nb_expect(ds < 1e-12 && dout < 1e-12, "absorbed and naive differ beyond rounding: %g, %g", ds, dout);
}

// %% [markdown]
// The lineage write-up printed `5.329070518200751e-15` and `6.661338147750939e-16` (numpy 2.4.1). The digits
// of a rounding difference depend on the order of the sums (numpy's einsum and BLAS choose theirs),
// so only the level, about 1e-15, carries over; a rerun on numpy 1.24 gives 4.00e-15 and 8.88e-16. The
// draws themselves do carry over: numpy's own results for this check are committed in
// `tests/data/mla_toy_numpy.txt` (written by `tests/gen_mla_toy.py`), and the C run lands on them.

// %%
/* values[n] of block `name` in tests/data/mla_toy_numpy.txt */
static int numpy_block(double *values, size_t n, const char *name)
{
    FILE *f = fopen(nb_path("tests/data/mla_toy_numpy.txt"), "r");
    if (!f) return kvl_fail(KVL_EIO, "cannot open tests/data/mla_toy_numpy.txt");
    char line[256], head[64];
    size_t count = 0, got = 0;
    while (fgets(line, sizeof line, f) && got < n) {
        if (line[0] == '#') continue;
        if (sscanf(line, "%63s %zu", head, &count) == 2 && !strcmp(head, name)) {
            while (got < count && got < n && fgets(line, sizeof line, f)) values[got++] = strtod(line, NULL);
        }
    }
    fclose(f);
    return got == n ? KVL_OK : kvl_fail(KVL_EPARSE, "mla_toy_numpy.txt: block %s has fewer than %zu values", name, n);
}

NB_CELL(cell_numpy_agrees)
{
    double s[WT_NH * WT_T], o[WT_NH * WT_DH], numpy_diff[2];
    int rc = numpy_block(s, WT_NH * WT_T, "scores_naive");
    if (rc == KVL_OK) rc = numpy_block(o, WT_NH * WT_DH, "out_naive");
    if (rc == KVL_OK) rc = numpy_block(numpy_diff, 2, "max_diff");
    if (rc != KVL_OK) return rc;
    double ds = 0, dout = 0;
    for (int i = 0; i < WT_NH * WT_T; i++) ds = fmax(ds, fabs(s[i] - (&scores_naive[0][0])[i]));
    for (int i = 0; i < WT_NH * WT_DH; i++) dout = fmax(dout, fabs(o[i] - (&out_naive[0][0])[i]));
    printf("C against numpy, same draws: max |score - numpy| %.3g, max |output - numpy| %.3g\n", ds, dout);
    printf("numpy's own max diffs in that file: %s, %s\n", repr(numpy_diff[0]), repr(numpy_diff[1]));
    return nb_expect(ds < 1e-12 && dout < 1e-12, "the C draws do not reproduce numpy's (%g, %g)", ds, dout);
}

// %% [markdown]
// ## The two forms in `ref/mla`
//
// The library implements both forms over the same cached rows `[c_kv | k^R]`, with the RMSNorms, the
// query latent, the decoupled RoPE key and YaRN: `mla_decode_naive` rebuilds every head's key and
// value from each cached row, `mla_decode_absorbed` scores the rows as they are. At the chapter's toy size
// (d 64, H 4, Dq' 32, Dc 32, Dnope 16, Dr 8, Dv 16) the cell prefills 39 tokens into two caches and
// decodes token 39 with each form.

// %%
static int toy_config(mla_config *c)
{
    *c = (mla_config){.d = 64, .n_heads = 4, .q_lora_rank = 32, .kv_lora_rank = 32, .qk_nope = 16, .qk_rope = 8,
                      .v_head = 16, .norm_eps = 1e-6, .softmax_scale = kvl_yarn_softmax_scale(16 + 8, 40, 1)};
    return kvl_rope_init_yarn(&c->rope, 8, 1e4, 40, 4096, 32, 1);
}

NB_CELL(cell_ref_forms)
{
    enum { T = 40 };
    mla_config c;
    mla_weights w = {0};
    mla_cache naive = {0}, absorbed = {0};
    kvl_rng rng;
    kvl_rng_seed(&rng, 12);
    static float x[T * 64], prefill[T * 64], y_naive[64], y_abs[64];
    int rc = toy_config(&c);
    if (rc == KVL_OK) rc = mla_weights_init_random(&w, &c, &rng);
    if (rc == KVL_OK) rc = mla_cache_init(&naive, &c, T, SWA_STORE_F32);
    if (rc == KVL_OK) rc = mla_cache_init(&absorbed, &c, T, SWA_STORE_F32);
    if (rc == KVL_OK) {
        kvl_rng_normal_f32(&rng, x, T * 64, 1.0);
        rc = mla_prefill(prefill, &c, &w, &naive, x, T - 1);
    }
    if (rc == KVL_OK) rc = mla_prefill(prefill, &c, &w, &absorbed, x, T - 1);
    if (rc == KVL_OK) rc = mla_decode_naive(y_naive, &c, &w, &naive, x + (T - 1) * 64);
    if (rc == KVL_OK) rc = mla_decode_absorbed(y_abs, &c, &w, &absorbed, x + (T - 1) * 64);
    double diff = 0, scale = 0;
    for (int i = 0; i < 64; i++) {
        diff = fmax(diff, fabs((double)y_naive[i] - y_abs[i]));
        scale = fmax(scale, fabs((double)y_naive[i]));
    }
    if (rc == KVL_OK) {
        printf("decode at position %d, float32: max |naive - absorbed| = %.3g (outputs up to %.3g)\n", T - 1, diff, scale);
        printf("floats cached per token: naive K and V per head H(Dnope+Dr+Dv) = %zu, the row Dc+Dr = %zu\n",
               c.n_heads * (c.qk_nope + c.qk_rope + c.v_head), c.kv_lora_rank + c.qk_rope);
        printf("the cache holds %s B after %d tokens = %s B per token\n", nb_num((double)mla_cache_bytes_used(&absorbed), 0),
               T, nb_num((double)mla_cache_bytes_used(&absorbed) / T, 0));
        /* float32 sums over Dc = 32 and 40 keys reassociated: a few ulps of the output scale */
        rc = nb_expect(diff <= 1e-5 * scale, "the forms differ by %g", diff);
    }
    const double Dc = (double)v3.kv_lora_rank, Dw = Dc + (double)v3.qk_rope_head_dim;
    const double up = 2 * Dc * (double)(v3.qk_nope_head_dim + v3.v_head_dim), direct = 4 * Dw;
    printf("\nper cached token and head at V3's size, before any attention: naive re-expansion\n"
           "2 Dc (Dnope + Dv) = %s flop; absorbed 4 (Dc + Dr) = %s flop for the scores and the sum: %.0fx less\n",
           nb_num(up, 0), nb_num(direct, 0), (up + 2 * (double)(v3.qk_nope_head_dim + v3.qk_rope_head_dim)) / direct);
    mla_cache_free(&naive);
    mla_cache_free(&absorbed);
    mla_weights_free(&w);
    return rc;
}

// %% [markdown]
// ## The figure
//
// Bytes per token at V3's head geometry and 61 layers, bf16: MHA and GQA-8 with the real 128-wide
// values, the lineage write-up's MHA with values sized like keys (light), and MLA's 576-value row. The README
// shows it (`chapters/02_mla/figures/cache_per_token.svg`).

// %%
NB_CELL(cell_figure)
{
    const double b = kvf_element_bits(KVF_BF16) / 8.0, L = (double)v3.n_layers, H = (double)v3.n_heads;
    const double Dk = (double)(v3.qk_nope_head_dim + v3.qk_rope_head_dim), Dv = (double)v3.v_head_dim;
    const char *labels[] = {"MHA, V like K (lineage write-up)", "MHA, K 192 + V 128", "GQA-8, K 192 + V 128",
                            "MLA, c_kv 512 + k_rope 64"};
    const double values[] = {H * 2 * Dk * b * L, H * (Dk + Dv) * b * L, GQA_GROUPS * (Dk + Dv) * b * L,
                             (double)(v3.kv_lora_rank + v3.qk_rope_head_dim) * b * L};
    const int emphasis[] = {0, 1, 1, 1};
    char subtitle[160];
    snprintf(subtitle, sizeof subtitle, "%zu layers, bf16, %zu heads; light: the lineage write-up's MHA, V like K",
             v3.n_layers, v3.n_heads);
    svg_doc s;
    svg_bars_log(&s, "DeepSeek-V3 geometry: KV cache bytes per token", subtitle, labels, values, emphasis, 4, "B");
    kvl_model_free(&v3);
    return nb_figure("cache_per_token", &s);
}

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_latent),      NB_RUN(cell_long_request), NB_RUN(cell_mha_compare),
                                    NB_RUN(cell_numpy_check), NB_RUN(cell_numpy_agrees), NB_RUN(cell_ref_forms),
                                    NB_RUN(cell_figure)};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0]);
}
