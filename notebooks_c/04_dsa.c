// %% [markdown]
// # Chapter 4 · DSA: a learned indexer picks what attention reads
//
// With MLA the entry is small, but a decode step at 128K context still reads and scores 128K latents
// per layer. DeepSeek-V3.2's sparse attention keeps them all in the cache and reads a few: a cheap
// "lightning indexer" scores every cached position for the current query, and MLA attends to the
// top K = 2048 only. This notebook prices the V3.2 cache row by row, runs the toy indexer and draws
// what it selects, checks the sparse paths against the dense one, and counts the work.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them. `build/bin/nb_04 --step`
// walks it cell by cell.

// %%
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "dsa.h"
#include "mla.h"
#include "nb.h"
#include "rng.h"
#include "rope.h"
#include "rows.h"
#include "svg.h"

// %% [markdown]
// ## What V3.2 stores per token
//
// Every one of the 61 layers keeps MLA's row and adds one index key:
//
//     q^I_{t,j} = W_IQ c^Q_t  [HI][DI]          k^I_s = LayerNorm(W_IK x_s)  [DI]    (one key, all heads)
//     w_{t,j}   = (W_IW x_t)_j · HI^−½ · DI^−½
//     I_{t,s}   = Σ_j w_{t,j} · ReLU(q^I_{t,j} · k^I_s)        S_t = top-K of I_{t,·}
//
// The deployed bytes (`formats/rows.h`): the 656-byte main row (E4M3 latent with four FP32 scales, the
// RoPE key in bf16) and the 132-byte index key (E4M3 with one FP32 scale).

// %%
static void print_row_map(kvf_row layout)
{
    size_t n = 0;
    const kvf_row_field *f = kvf_row_fields(layout, &n);
    printf("%s, %zu bytes:\n", kvf_row_name(layout), kvf_row_bytes(layout));
    for (size_t i = 0; i < n; i++)
        printf("  bytes %3zu..%-3zu %-6s %s\n", f[i].offset, f[i].offset + f[i].size - 1, f[i].name, f[i].format);
}

NB_CELL(cell_bytes)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path("ref/configs/deepseek-v3.2-exp.json"));
    if (rc != KVL_OK) return rc;
    print_row_map(KVF_ROW_V32_MAIN);
    print_row_map(KVF_ROW_V32_INDEX);
    const double main_row = (double)kvf_row_bytes(KVF_ROW_V32_MAIN), key = (double)kvf_row_bytes(KVF_ROW_V32_INDEX);
    const double latent = (double)(m.kv_lora_rank + m.qk_rope_head_dim), DI = (double)m.index_head_dim;
    printf("\n%s: %zu layers, indexer %zu heads x %zu, top-k %zu\n", m.name, m.n_layers, m.index_n_heads,
           m.index_head_dim, m.index_topk);
    printf("values per token per layer: latent %s + index key %s = %s; "
           "the key is %.1f%% of the latent's values, %.1f%% of its bytes\n",
           nb_num(latent, 0), nb_num(DI, 0), nb_num(latent + DI, 0), 100 * DI / latent, 100 * key / main_row);
    printf("bytes per token: %zu x (%s + %s) = %s\n", m.n_layers, nb_num(main_row, 0), nb_num(key, 0),
           nb_num((double)m.n_layers * (main_row + key), 0));
    printf("indexer scale HI^-1/2 * DI^-1/2 = (%zu * %zu)^-1/2 = %.6f\n", m.index_n_heads, m.index_head_dim,
           1 / sqrt((double)(m.index_n_heads * m.index_head_dim)));
    kvl_model_free(&m);
    return KVL_OK;
}

// %% [markdown]
// ## What the indexer selects
//
// At toy size (d 64, H 4, Dq' 32, Dc 32, Dnope 16, Dr 8, Dv 16; HI 4, DI 16, K 6) and random
// weights, `dsa_forward` runs the indexer over 32 tokens and keeps each query's 6 best positions;
// MLA then attends to those rows only, one selected set shared by all heads. Queries 0 to 5 see fewer
// than K positions and keep them all. Untrained, the picks are arbitrary; training (next section) is
// what makes them the positions attention wants.

// %%
enum { TOY_T = 32 };

static dsa_config toy;
static dsa_weights toy_w;
static float toy_x[TOY_T * 64];

static int toy_setup(void)
{
    toy = (dsa_config){.mla = {.d = 64, .n_heads = 4, .q_lora_rank = 32, .kv_lora_rank = 32, .qk_nope = 16,
                               .qk_rope = 8, .v_head = 16, .norm_eps = 1e-6},
                       .index_n_heads = 4, .index_head_dim = 16, .index_topk = 6, .index_norm_eps = DSA_INDEX_NORM_EPS};
    toy.mla.softmax_scale = kvl_yarn_softmax_scale(16 + 8, 40, 1);
    int rc = kvl_rope_init_yarn(&toy.mla.rope, 8, 1e4, 40, 4096, 32, 1);
    kvl_rng rng;
    kvl_rng_seed(&rng, 14);
    if (rc == KVL_OK) rc = dsa_weights_init_random(&toy_w, &toy, &rng);
    if (rc == KVL_OK) kvl_rng_normal_f32(&rng, toy_x, TOY_T * 64, 1.0);
    return rc;
}

NB_CELL(cell_selection)
{
    static float out[TOY_T * 64];
    static int32_t sel[TOY_T * 6];
    static unsigned char cells[TOY_T][TOY_T];
    int rc = toy_setup();
    if (rc == KVL_OK) rc = dsa_forward(out, sel, &toy, &toy_w, toy_x, TOY_T);
    if (rc != KVL_OK) return rc;
    const size_t K = toy.index_topk;
    for (size_t t = 0; t < TOY_T; t++) {
        for (size_t j = 0; j < TOY_T; j++) cells[t][j] = j > t ? 0 : 1;
        size_t picked = 0;
        for (size_t k = 0; k < K; k++)
            if (sel[t * K + k] >= 0) cells[t][sel[t * K + k]] = 2, picked++;
        rc = nb_expect(picked == (t + 1 < K ? t + 1 : K), "query %zu picked %zu positions", t, picked);
        if (rc != KVL_OK) return rc;
    }
    for (size_t t = 4; t < TOY_T; t += 9) {
        printf("query %2zu reads positions", t);
        for (size_t k = 0; k < K; k++)
            if (sel[t * K + k] >= 0) printf(" %d", sel[t * K + k]);
        printf("  (of %zu)\n", t + 1);
    }
    static const char *const colours[] = {"#f2f2f2", "#c9c9c9", "#1f4e8c"};
    static const char *const legend[] = {"future (causal mask)", "cached, not selected", "selected: top-6 of I"};
    svg_doc s;
    svg_grid(&s, "What the lightning indexer selects (toy, K = 6, random weights)", &cells[0][0], TOY_T, TOY_T,
             colours, legend, 3, "query position t", "key position s", 4, 4);
    return nb_figure("topk_selection", &s);
}

// %% [markdown]
// ## Sparse equals dense when K covers the context
//
// If K ≥ t + 1 for every query, top-k keeps everything and DSA is MLA (`tests/test_ch04_dsa.c`). And the
// decode path a server runs, which gathers the K selected rows from the cache by index and attends
// over those alone (FlashMLA's sparse decode), must select and output what the whole-sequence
// definition does. The cell checks both on the toy.

// %%
static double max_diff(const float *a, const float *b, size_t n, double *scale)
{
    double d = 0;
    *scale = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        *scale = fmax(*scale, fabs((double)b[i]));
    }
    return d;
}

NB_CELL(cell_paths_agree)
{
    enum { S = 11 };
    static float dense[TOY_T * 64], sparse[TOY_T * 64], want[TOY_T * 64], got[TOY_T * 64];
    static int32_t sel_all[TOY_T * TOY_T], sel_want[TOY_T * 6], sel_got[TOY_T * 6];
    dsa_config all = toy;
    all.index_topk = TOY_T;
    double scale = 0;
    int rc = mla_forward(dense, &toy.mla, &toy_w.mla, toy_x, TOY_T);
    if (rc == KVL_OK) rc = dsa_forward(sparse, sel_all, &all, &toy_w, toy_x, TOY_T);
    if (rc != KVL_OK) return rc;
    const double d_dense = max_diff(sparse, dense, TOY_T * 64, &scale);
    printf("K = %d >= every t + 1: max |DSA - dense MLA| = %.3g (outputs up to %.3g)\n", TOY_T, d_dense, scale);
    /* the same float32 attention, masked rows contributing exact zeros */
    rc = nb_expect(d_dense <= 1e-5 * scale, "DSA with K covering everything differs from MLA by %g", d_dense);
    dsa_cache cache = {0};
    if (rc == KVL_OK) rc = dsa_forward(want, sel_want, &toy, &toy_w, toy_x, TOY_T);
    if (rc == KVL_OK) rc = dsa_cache_init(&cache, &toy, TOY_T, DSA_CACHE_F32);
    if (rc == KVL_OK) rc = dsa_prefill(got, sel_got, &toy, &toy_w, &cache, toy_x, S);
    for (size_t t = S; t < TOY_T && rc == KVL_OK; t++)
        rc = dsa_decode_gather(got + t * 64, sel_got + t * 6, &toy, &toy_w, &cache, toy_x + t * 64);
    if (rc == KVL_OK) {
        const double d = max_diff(got, want, TOY_T * 64, &scale);
        const int same = memcmp(sel_got, sel_want, sizeof sel_got) == 0;
        printf("prefill %d + decode %d by gathering the picked rows: selections %s, max |output difference| %.3g\n", S,
               TOY_T - S, same ? "identical" : "DIFFERENT", d);
        printf("the cache holds %s B for %d tokens: (Dc + Dr + DI) x 4 B = %s B per token in float32\n",
               nb_num((double)dsa_cache_bytes_used(&cache), 0), TOY_T,
               nb_num((double)dsa_cache_bytes_used(&cache) / TOY_T, 0));
        rc = nb_expect(same && d <= 1e-5 * scale, "decode path: selections %s, outputs off by %g",
                       same ? "equal" : "differ", d);
    }
    dsa_cache_free(&cache);
    dsa_weights_free(&toy_w);
    return rc;
}

// %% [markdown]
// ## What DSA saves, counted
//
// Core attention goes from O(T²) to O(T·K) over a sequence; the indexer stays O(T²), with a small
// constant (64 heads of 128 in FP8 against MLA's 128 heads over 576-wide rows). Per query at
// position T the attention reads min(T, K) rows instead of T. The counts below are score evaluations,
// exact sums, at the config's K.

// %%
NB_CELL(cell_counts)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path("ref/configs/deepseek-v3.2-exp.json"));
    if (rc != KVL_OK) return rc;
    const double K = (double)m.index_topk;
    const double contexts[] = {131072, 128000};
    for (int i = 0; i < 2; i++)
        printf("one query at context %s: attention reads %s of %s rows, %.1fx fewer\n", nb_num(contexts[i], 0),
               nb_num(K, 0), nb_num(contexts[i], 0), contexts[i] / K);
    const double T = 131072;
    double core = 0, dense = 0;
    for (double t = 0; t < T; t++) {
        core += fmin(t + 1, K);
        dense += t + 1;
    }
    printf("a whole %s-token prefill: core attention scores %s query-key pairs instead of %s: %.1fx fewer;\n"
           "the indexer still scores all %s\n", nb_num(T, 0), nb_num(core, 0), nb_num(dense, 0), dense / core,
           nb_num(dense, 0));
    printf("below K = %s tokens top-k keeps every position: DSA is dense MLA plus the indexer's scan\n", nb_num(K, 0));
    printf("one selected set per query serves all %zu heads; per-head selection would read up to %zux the rows\n",
           m.n_heads, m.n_heads);
    kvl_model_free(&m);
    return KVL_OK;
}

// %% [markdown]
// ## How the indexer learns (quoted)
//
// The V3.2-Exp report trains the indexer to imitate dense attention: first a warm-up with the model
// frozen, matching the heads' summed, L1-normalised attention with a KL loss (1,000 steps, 2.1B tokens),
// then the sparse stage with everything training together (943.7B tokens). These are the report's
// figures, not computed here; `build/bin/dsa_cost` shows the loss at toy size.

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_bytes), NB_RUN(cell_selection), NB_RUN(cell_paths_agree),
                                    NB_RUN(cell_counts)};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0]);
}
