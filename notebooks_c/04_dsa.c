// %% [markdown]
// # Chapter 4 · DSA: a learned indexer picks what attention reads
//
// With MLA the entry is small, but a decode step at 128K context still reads and scores 128K
// latents per layer. DeepSeek-V3.2's sparse attention keeps them all in the cache and reads a few:
// a cheap "lightning indexer" scores every cached position for the current query, and MLA attends
// to the top $K = 2048$ only. This notebook prices the V3.2 cache row by row, runs the toy indexer
// and draws what it selects, then builds the indexer's score, the top-k and the sparse attention
// here and runs them against `ref/dsa`'s fast paths, checks the sparse paths against the dense one,
// and counts the work.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them.
// `build/bin/nb_04 --step` walks it cell by cell. Figures and row maps live in
// `notebooks_c/draw_dsa.c`, the printed comparisons in `notebooks_c/draw_compare.c`.

// %%
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "draw_compare.h"
#include "draw_dsa.h"
#include "dsa.h"
#include "mla.h"
#include "nb.h"
#include "rng.h"
#include "rope.h"
#include "rows.h"
#include "topk.h"

// %% [markdown]
// ## What V3.2 stores per token
//
// Every one of the 61 layers keeps MLA's row and adds one index key. For query $t$, index head
// $h = 1 \dots H_I$ and cached position $s$:
//
// $$q^I_{t,h} = (W_{IQ}\, c^Q_t)_h \in \mathbb{R}^{D_I},$$
//
// $$k^I_s = \mathrm{LayerNorm}(W_{IK}\, x_s) \in \mathbb{R}^{D_I},$$
//
// $$w_{t,h} = (W_{IW}\, x_t)_h \cdot H_I^{-1/2} \cdot D_I^{-1/2},$$
//
// $$I_{t,s} = \sum_{h=1}^{H_I} w_{t,h}\, \mathrm{ReLU}(q^I_{t,h} \cdot k^I_s),$$
//
// $$S_t = \text{the } K \text{ positions } s \le t \text{ of largest } I_{t,s}.$$
//
// One key $k^I_s$ per token serves all index heads; $q^I$ and $k^I$ carry RoPE on their leading
// $D_r$ channels (`ref/dsa.h`). The deployed bytes (`formats/rows.h`): the 656-byte main row (E4M3
// latent with four FP32 scales, the RoPE key in bf16) and the 132-byte index key (E4M3 with one
// FP32 scale). E4M3 is an 8-bit float (4 exponent bits, 3 mantissa bits, largest 448), one byte a
// value; each block's FP32 scale brings its largest value into that range. Here only the byte
// counts matter; chapter 5 builds the format and both rows bit by bit.

// %%
NB_CELL(cell_bytes)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path("ref/configs/deepseek-v3.2-exp.json"));
    if (rc != KVL_OK) return rc;
    nb04_print_row_map(KVF_ROW_V32_MAIN);
    nb04_print_row_map(KVF_ROW_V32_INDEX);
    const double main_row = (double)kvf_row_bytes(KVF_ROW_V32_MAIN),
                 key = (double)kvf_row_bytes(KVF_ROW_V32_INDEX);
    const double latent = (double)(m.kv_lora_rank + m.qk_rope_head_dim),
                 DI = (double)m.index_head_dim;
    printf("\n%s: %zu layers, indexer %zu heads x %zu, top-k %s\n", m.name, m.n_layers,
           m.index_n_heads, m.index_head_dim, nb_num((double)m.index_topk, 0));
    printf("values per token per layer: latent %s + index key %s = %s; "
           "the key is %.1f%% of the latent's values, %.1f%% of its bytes\n",
           nb_num(latent, 0), nb_num(DI, 0), nb_num(latent + DI, 0), 100 * DI / latent,
           100 * key / main_row);
    printf("bytes per token: %zu x (%s + %s) = %s\n", m.n_layers, nb_num(main_row, 0),
           nb_num(key, 0), nb_num((double)m.n_layers * (main_row + key), 0));
    printf("indexer scale HI^-1/2 * DI^-1/2 = (%zu * %zu)^-1/2 = %.6f\n", m.index_n_heads,
           m.index_head_dim, 1 / sqrt((double)(m.index_n_heads * m.index_head_dim)));
    kvl_model_free(&m);
    return KVL_OK;
}

// %% [markdown]
// ## What the indexer selects
//
// At toy size ($d = 64$, $H = 4$, $D_q' = 32$, $D_c = 32$, $D_{nope} = 16$, $D_r = 8$, $D_v = 16$;
// $H_I = 4$, $D_I = 16$, $K = 6$) and random weights, `dsa_forward` runs the indexer over 32 tokens
// and keeps each query's 6 best positions; MLA then attends to those rows only, one selected set
// shared by all heads. Queries 0 to 5 see fewer than $K$ positions and keep them all. Untrained,
// the picks are arbitrary; training (the last section) is what makes them the positions attention
// wants.

// %%
enum { TOY_T = 32, TOY_D = 64, TOY_K = 6 };

static dsa_config toy;
static dsa_weights toy_w;
static float toy_x[TOY_T * TOY_D];
static int32_t toy_sel[TOY_T * TOY_K]; /* dsa_forward's selections */

static int toy_setup(void)
{
    toy = (dsa_config){.mla = {.d = TOY_D,
                               .n_heads = 4,
                               .q_lora_rank = 32,
                               .kv_lora_rank = 32,
                               .qk_nope = 16,
                               .qk_rope = 8,
                               .v_head = 16,
                               .norm_eps = 1e-6},
                       .index_n_heads = 4,
                       .index_head_dim = 16,
                       .index_topk = TOY_K,
                       .index_norm_eps = DSA_INDEX_NORM_EPS};
    toy.mla.softmax_scale = kvl_yarn_softmax_scale(16 + 8, 40, 1);
    int rc = kvl_rope_init_yarn(&toy.mla.rope, 8, 1e4, 40, 4096, 32, 1);
    kvl_rng rng;
    kvl_rng_seed(&rng, 14);
    if (rc == KVL_OK) rc = dsa_weights_init_random(&toy_w, &toy, &rng);
    if (rc == KVL_OK) kvl_rng_normal_f32(&rng, toy_x, TOY_T * TOY_D, 1.0);
    return rc;
}

// %%
NB_CELL(cell_selection)
{
    static float out[TOY_T * TOY_D];
    static unsigned char cells[TOY_T][TOY_T];
    int rc = toy_setup();
    if (rc == KVL_OK) rc = dsa_forward(out, toy_sel, &toy, &toy_w, toy_x, TOY_T);
    if (rc != KVL_OK) return rc;
    for (size_t t = 0; t < TOY_T; t++) {
        for (size_t j = 0; j < TOY_T; j++) cells[t][j] = j > t ? 0 : 1;
        size_t picked = 0;
        for (size_t k = 0; k < TOY_K; k++)
            if (toy_sel[t * TOY_K + k] >= 0) cells[t][toy_sel[t * TOY_K + k]] = 2, picked++;
        rc = nb_expect(picked == (t + 1 < TOY_K ? t + 1 : TOY_K), "query %zu picked %zu positions",
                       t, picked);
        if (rc != KVL_OK) return rc;
    }
    for (size_t t = 4; t < TOY_T; t += 9) {
        printf("query %2zu reads positions", t);
        for (size_t k = 0; k < TOY_K; k++)
            if (toy_sel[t * TOY_K + k] >= 0) printf(" %d", toy_sel[t * TOY_K + k]);
        printf("  (of %zu)\n", t + 1);
    }
    return nb04_draw_selection(&cells[0][0], TOY_T, TOY_K);
}

// %% [markdown]
// ## The indexer's score, built
//
// The projections are chapter 2's ($c^Q$, RoPE) and come from `ref/dsa` (`dsa_index_query`,
// `dsa_index_key`); the score is written here, one query and one key $s \le t$ at a time:
//
// $$I_{t,s} = \sum_h w_{t,h}\, \mathrm{ReLU}(q^I_{t,h} \cdot k^I_s),$$
//
// and $I_{t,s} = -\infty$ for $s > t$, the causal mask. The cell scores all $32 \times 32$ pairs
// and compares them with `dsa_indexer_f32`, which computes the same sum (`ref/core/index_scan.h`;
// on the CPU backend the notebook runs, as matrix products over tiles of keys).

// %%
/* I(t, s) = Σ_h w_h · ReLU(q_h · k_s) for one query's heads q[HI][DI], weights w[HI] and one key
 * k[DI] */
static float index_score(const float *q, const float *w, const float *k, size_t HI, size_t DI)
{
    float I = 0;
    for (size_t h = 0; h < HI; h++) {
        float dot = 0;
        for (size_t i = 0; i < DI; i++) dot += q[h * DI + i] * k[i];
        I += w[h] * fmaxf(dot, 0);
    }
    return I;
}

static float toy_I[TOY_T * TOY_T]; /* the notebook's scores, I[t][s] */

NB_CELL(cell_index_scores)
{
    enum { HI = 4, DI = 16 };
    static float q[TOY_T * HI * DI], w[TOY_T * HI], k[TOY_T * DI], fast[TOY_T * TOY_T];
    int rc = dsa_index_query(q, w, &toy, &toy_w, toy_x, TOY_T, 0);
    if (rc == KVL_OK) rc = dsa_index_key(k, &toy, &toy_w, toy_x, TOY_T, 0);
    if (rc == KVL_OK) rc = dsa_indexer_f32(fast, &toy, &toy_w, toy_x, TOY_T);
    if (rc != KVL_OK) return rc;
    for (size_t t = 0; t < TOY_T; t++)
        for (size_t s = 0; s < TOY_T; s++)
            toy_I[t * TOY_T + s] =
                s <= t ? index_score(q + t * HI * DI, w + t * HI, k + s * DI, HI, DI) : -INFINITY;
    printf("query 31, keys 0..5: I =");
    for (size_t s = 0; s < 6; s++) printf(" %.4f", (double)toy_I[31 * TOY_T + s]);
    double scale, diff = nbc_max_diff(toy_I, fast, TOY_T * TOY_T, &scale);
    printf("\n");
    /* float32 sums of 4 heads of 16 products, in another association than the tiled products */
    return nbc_report("the score against dsa_indexer_f32, 32 x 32 pairs", diff, scale, 1e-5);
}

// %% [markdown]
// ## Top-k, built
//
// $S_t$ is the $\min(K, t + 1)$ largest $I_{t,s}$; on a tie the smaller position wins, so every
// implementation picks the same set. The picks are stored ascending, padded with $-1$ up to $K$.
// The function below takes the largest remaining score $K$ times (a strict $>$ while scanning
// upwards is what sends a tie to the smaller position). Ties are not rare: a key that every head's
// query points away from scores exactly 0 after the ReLU. The cell runs the function on a row with
// ties, then on the notebook's scores for every query, against `ref`'s `kvl_topk` and the
// selections `dsa_forward` made.

// %%
/* sel[K] = the positions of the min(K, #finite) largest of I[n], ascending, then −1 */
static void top_k(int32_t *sel, const float *I, size_t n, size_t K)
{
    unsigned char taken[TOY_T] = {0};
    size_t got = 0;
    for (; got < K; got++) {
        size_t best = n;
        for (size_t s = 0; s < n; s++)
            if (!taken[s] && isfinite(I[s]) && (best == n || I[s] > I[best])) best = s;
        if (best == n) break;
        taken[best] = 1;
    }
    size_t k = 0;
    for (size_t s = 0; s < n; s++)
        if (taken[s]) sel[k++] = (int32_t)s;
    while (k < K) sel[k++] = -1;
}

// %%
NB_CELL(cell_top_k)
{
    static const float ties[] = {1, 3, 3, 2, 3, -INFINITY};
    int32_t two[2], two_ref[2];
    top_k(two, ties, 6, 2);
    int rc = kvl_topk(two_ref, ties, 1, 6, 2);
    printf("scores {1, 3, 3, 2, 3, -inf}, K = 2: picks {%d, %d}, kvl_topk {%d, %d}\n", two[0],
           two[1], two_ref[0], two_ref[1]);
    static int32_t mine[TOY_T * TOY_K], fast[TOY_T * TOY_K];
    for (size_t t = 0; t < TOY_T; t++) top_k(mine + t * TOY_K, toy_I + t * TOY_T, TOY_T, TOY_K);
    if (rc == KVL_OK) rc = kvl_topk(fast, toy_I, TOY_T, TOY_T, TOY_K);
    if (rc != KVL_OK) return rc;
    size_t differ_ref = 0, differ_forward = 0, zeros = 0;
    for (size_t i = 0; i < TOY_T * TOY_K; i++)
        differ_ref += mine[i] != fast[i], differ_forward += mine[i] != toy_sel[i];
    for (size_t i = 0; i < TOY_T * TOY_T; i++) zeros += toy_I[i] == 0;
    printf("%zu of the %d causal scores are exactly 0\n", zeros, TOY_T * (TOY_T + 1) / 2);
    printf(
        "32 queries, K = 6: picks that differ from kvl_topk %zu, from dsa_forward's selections %zu\n",
        differ_ref, differ_forward);
    return nb_expect(
        two[0] == two_ref[0] && two[1] == two_ref[1] && differ_ref == 0 && differ_forward == 0,
        "top-k differs: %zu picks from kvl_topk, %zu from dsa_forward", differ_ref, differ_forward);
}

// %% [markdown]
// ## Sparse attention over the picks, built
//
// Chapter 2's absorbed form, restricted to $S_t$. With the absorbed query
// $\hat q_{t,h} = [\,q^C_{t,h} W^h_{UK} \mid q^R_{t,h}\,]$ (`mla_absorb_query`), the cached rows
// $r_s = [\,c_s \mid k^R_s\,]$ and MLA's softmax scale $\tau$:
//
// $$p_{t,h,s} = \mathrm{softmax}_{s \in S_t}(\tau\, \hat q_{t,h} \cdot r_s),$$
//
// $$\hat o_{t,h} = \sum_{s \in S_t} p_{t,h,s}\, c_s .$$
//
// Only the $K$ picked rows are read; $W^h_{UV}$ then turns $\hat o_{t,h}$ into the head's output.
// The cell runs the last query ($t = 31$) over the notebook's own picks and compares $\hat o$ with
// `dsa_attend_picks`, which reads the same picks from a `dsa_cache` filled by a prefill of the 32
// tokens, with an online softmax. The figure draws that query's path.

// %%
/* ô[H][Dc]: per head, softmax over the picks of τ q̂_h · r_s, weighting the picked rows' latents
 * c_s */
static void sparse_attend(float *o_hat, const float *q_hat, const float *rows, const int32_t *sel,
                          size_t K, size_t H, size_t Dc, size_t Dr, double tau)
{
    const size_t R = Dc + Dr;
    for (size_t h = 0; h < H; h++) {
        double p[TOY_K], mx = -INFINITY, sum = 0;
        size_t n = 0;
        for (; n < K && sel[n] >= 0; n++) {
            double dot = 0;
            for (size_t i = 0; i < R; i++)
                dot += (double)q_hat[h * R + i] * rows[(size_t)sel[n] * R + i];
            mx = fmax(mx, p[n] = tau * dot);
        }
        for (size_t k = 0; k < n; k++) sum += p[k] = exp(p[k] - mx);
        for (size_t i = 0; i < Dc; i++) {
            double acc = 0;
            for (size_t k = 0; k < n; k++) acc += p[k] / sum * rows[(size_t)sel[k] * R + i];
            o_hat[h * Dc + i] = (float)acc;
        }
    }
}

// %%
NB_CELL(cell_sparse_attention)
{
    enum { t = TOY_T - 1, H = 4, Dc = 32, Dr = 8, R = Dc + Dr };
    static float rows[TOY_T * R], q[H * (16 + Dr)], q_hat[H * R], mine[H * Dc], fast[H * Dc],
        out[TOY_T * TOY_D];
    int32_t picks[TOY_K];
    top_k(picks, toy_I + t * TOY_T, TOY_T, TOY_K);
    dsa_cache cache = {0};
    int rc = mla_latent(rows, &toy.mla, &toy_w.mla, toy_x, TOY_T, 0);
    if (rc == KVL_OK) rc = mla_query(q, &toy.mla, &toy_w.mla, toy_x + t * TOY_D, 1, t);
    if (rc == KVL_OK) rc = mla_absorb_query(q_hat, &toy.mla, &toy_w.mla, q, 1);
    if (rc == KVL_OK) rc = dsa_cache_init(&cache, &toy, TOY_T, DSA_CACHE_F32);
    if (rc == KVL_OK) rc = dsa_prefill(out, NULL, &toy, &toy_w, &cache, toy_x, TOY_T);
    if (rc == KVL_OK) rc = dsa_attend_picks(fast, &toy, q_hat, &cache, picks);
    dsa_cache_free(&cache);
    if (rc != KVL_OK) return rc;
    sparse_attend(mine, q_hat, rows, picks, TOY_K, H, Dc, Dr, toy.mla.softmax_scale);
    printf("query %d reads %d of %d rows: positions", t, TOY_K, TOY_T);
    for (size_t k = 0; k < TOY_K; k++) printf(" %d", picks[k]);
    double scale, diff = nbc_max_diff(mine, fast, H * Dc, &scale);
    printf("\n");
    /* double sums over 6 rows against ref's float32 online softmax */
    rc = nbc_report("o_hat against dsa_attend_picks", diff, scale, 1e-5);
    const nb04_flow flow = {t, TOY_K, TOY_D, 4, 16, H, Dc, Dr, 16, picks};
    return rc == KVL_OK ? nb04_draw_flow(&flow) : rc;
}

// %% [markdown]
// ## Sparse equals dense when K covers the context
//
// If $K \ge t + 1$ for every query, top-k keeps everything and DSA is MLA
// (`tests/test_ch04_dsa.c`). And the decode path a server runs, which gathers the $K$ selected rows
// from the cache by index and attends over those alone (FlashMLA's sparse decode), must select and
// output what the whole-sequence definition does. The cell checks both on the toy.

// %%
NB_CELL(cell_paths_agree)
{
    enum { S = 11 };
    static float dense[TOY_T * TOY_D], sparse[TOY_T * TOY_D], want[TOY_T * TOY_D],
        got[TOY_T * TOY_D];
    static int32_t sel_all[TOY_T * TOY_T], sel_want[TOY_T * TOY_K], sel_got[TOY_T * TOY_K];
    dsa_config all = toy;
    all.index_topk = TOY_T;
    double scale = 0;
    int rc = mla_forward(dense, &toy.mla, &toy_w.mla, toy_x, TOY_T);
    if (rc == KVL_OK) rc = dsa_forward(sparse, sel_all, &all, &toy_w, toy_x, TOY_T);
    if (rc != KVL_OK) return rc;
    const double d_dense = nbc_max_diff(sparse, dense, TOY_T * TOY_D, &scale);
    printf("K = %d >= every t + 1: max |DSA - dense MLA| = %.3g (outputs up to %.3g)\n", TOY_T,
           d_dense, scale);
    /* the same float32 attention, masked rows contributing exact zeros */
    rc = nb_expect(d_dense <= 1e-5 * scale, "DSA with K covering everything differs from MLA by %g",
                   d_dense);
    dsa_cache cache = {0};
    if (rc == KVL_OK) rc = dsa_forward(want, sel_want, &toy, &toy_w, toy_x, TOY_T);
    if (rc == KVL_OK) rc = dsa_cache_init(&cache, &toy, TOY_T, DSA_CACHE_F32);
    if (rc == KVL_OK) rc = dsa_prefill(got, sel_got, &toy, &toy_w, &cache, toy_x, S);
    for (size_t t = S; t < TOY_T && rc == KVL_OK; t++)
        rc = dsa_decode_gather(got + t * TOY_D, sel_got + t * TOY_K, &toy, &toy_w, &cache,
                               toy_x + t * TOY_D);
    if (rc == KVL_OK) {
        const double d = nbc_max_diff(got, want, TOY_T * TOY_D, &scale);
        const int same = memcmp(sel_got, sel_want, sizeof sel_got) == 0;
        char outputs[160];
        const int close = nbc_describe(outputs, sizeof outputs, d, scale, 1e-5);
        printf("prefill %d + decode %d by gathering the picked rows: selections %s, outputs' %s\n",
               S, TOY_T - S, same ? "identical" : "DIFFERENT", outputs);
        printf(
            "the cache holds %s B for %d tokens: (Dc + Dr + DI) x 4 B = %s B per token in float32\n",
            nb_num((double)dsa_cache_bytes_used(&cache), 0), TOY_T,
            nb_num((double)dsa_cache_bytes_used(&cache) / TOY_T, 0));
        rc = nb_expect(same && close, "decode path: selections %s, outputs' %s",
                       same ? "equal" : "differ", outputs);
    }
    dsa_cache_free(&cache);
    dsa_weights_free(&toy_w);
    return rc;
}

// %% [markdown]
// ## What DSA saves, counted
//
// Core attention goes from $O(T^2)$ to $O(TK)$ over a sequence: $\sum_{t<T} \min(t+1, K)$ scored
// pairs instead of $\sum_{t<T} (t+1)$. The indexer stays $O(T^2)$, with a small constant (64 heads
// of 128 in FP8 against MLA's 128 heads over 576-wide rows). Per query at position $T$ the
// attention reads $\min(T, K)$ rows instead of $T$. The counts below are score evaluations, exact
// sums, at the config's $K$.

// %%
NB_CELL(cell_counts)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path("ref/configs/deepseek-v3.2-exp.json"));
    if (rc != KVL_OK) return rc;
    const double K = (double)m.index_topk;
    const double contexts[] = {131072, 128000};
    for (int i = 0; i < 2; i++)
        printf("one query at context %s: attention reads %s of %s rows, %.1fx fewer\n",
               nb_num(contexts[i], 0), nb_num(K, 0), nb_num(contexts[i], 0), contexts[i] / K);
    const double T = 131072;
    double core = 0, dense = 0;
    for (double t = 0; t < T; t++) {
        core += fmin(t + 1, K);
        dense += t + 1;
    }
    printf(
        "a whole %s-token prefill: core attention scores %s query-key pairs instead of %s: %.1fx fewer;\n"
        "the indexer still scores all %s\n",
        nb_num(T, 0), nb_num(core, 0), nb_num(dense, 0), dense / core, nb_num(dense, 0));
    printf(
        "below K = %s tokens top-k keeps every position: DSA is dense MLA plus the indexer's scan\n",
        nb_num(K, 0));
    printf(
        "one selected set per query serves all %zu heads; per-head selection would read up to %zux the rows\n",
        m.n_heads, m.n_heads);
    kvl_model_free(&m);
    return KVL_OK;
}

// %% [markdown]
// ## How the indexer learns (quoted)
//
// The V3.2-Exp report trains the indexer to imitate dense attention: first a warm-up with the model
// frozen, matching the heads' summed, L1-normalised attention with a KL loss (1,000 steps, 2.1B
// tokens), then the sparse stage with everything training together (943.7B tokens). These are the
// report's figures, not computed here; `build/bin/dsa_cost` shows the loss at toy size, and
// falling over a short warm-up of the head weights alone.

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_bytes),       NB_RUN(cell_selection),
                                    NB_RUN(cell_index_scores), NB_RUN(cell_top_k),
                                    NB_RUN(cell_sparse_attention), NB_RUN(cell_paths_agree),
                                    NB_RUN(cell_counts)};
    static const char *const figures[] = {"topk_selection", "indexer_flow", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
