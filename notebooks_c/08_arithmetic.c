// %% [markdown]
// # Chapter 8 · The arithmetic, rebuilt: the lineage's bytes per token
//
// The V4.1-Flash model card charts four numbers, the bytes per token of DeepSeek LLM 67B, V3.2,
// V4-Flash and V4.1-Flash; the first cell prints them. This notebook rebuilds every one of them
// from the `config.json` files in `ref/configs/` and the row sizes of `formats/`
// (`ref/kvtable`), splits each step into the levers it pulled, and weighs live caches where the
// generation's module exists. The arithmetic itself is built in plain C below and checked against
// `ref/kvtable` on every config.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them.
// `build/bin/nb_08 --step` walks it cell by cell; `build/bin/kvtable` prints the same table with
// more columns.

// %%
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "draw_arithmetic.h"
#include "kvtable.h"
#include "mha.h"
#include "mla.h"
#include "nb.h"
#include "rows.h"
#include "svg.h"
#include "swa.h"

// %% [markdown]
// ## The table
//
// For every layer $\ell$ that writes a per-token cache, a layer compressing $M_\ell$ tokens into
// one entry adds $1/M_\ell$ entries per token, and an entry costs its main row plus its index key
// (if the generation has one). Window rows are bounded per sequence and stay out of the per-token
// figure. The table is `ref/kvtable`'s; the next section builds it by hand.

// %%
enum { MAX_MODELS = NB08_MAX_MODELS };
typedef nb08_generation generation;

static generation gens[MAX_MODELS];
static size_t n_gens;

NB_CELL(cell_table)
{
    int rc = nb08_load_all(gens, &n_gens);
    if (rc != KVL_OK) return rc;
    printf("%-20s %-8s %-8s %9s %13s %13s %12s %8s %8s\n", "model", "date", "cache", "KV layers",
           "entries/token", "B/entry", "B/token", "x prev", "x first");
    for (size_t i = 0; i < n_gens; i++) {
        const generation *g = &gens[i];
        char prev[16] = "-";
        if (i)
            snprintf(prev, sizeof prev, "%.2fx",
                     gens[i - 1].kv.bytes_per_token / g->kv.bytes_per_token);
        printf("%-20s %-8s %-8s %9zu %13s %13s %12s %8s %7.1fx\n", g->m.name, g->m.date,
               kvl_cache_layout_name(g->m.kv_cache), g->kv.global_layers,
               nb_num(g->kv.entries_per_token, 5), nb_num(g->kv.bytes_per_entry, 2),
               nb_num(g->kv.bytes_per_token, 2), prev,
               gens[0].kv.bytes_per_token / g->kv.bytes_per_token);
    }
    printf("\n%s -> %s bytes per token: %.1fx over the lineage\n",
           nb_num(gens[0].kv.bytes_per_token, 2), nb_num(gens[n_gens - 1].kv.bytes_per_token, 2),
           gens[0].kv.bytes_per_token / gens[n_gens - 1].kv.bytes_per_token);
    return KVL_OK;
}

// %% [markdown]
// ## The arithmetic, built
//
// Let $\mathcal{G}$ be the layers that write a per-token cache: those that are their own KV source
// (every layer up to V3.2, V4's CSA and HCA layers, V4.1's KV sources). Then
//
// $$\frac{\text{bytes}}{\text{token}}
//     = \sum_{\ell \in \mathcal{G}}
//       \frac{R_{\mathrm{main}} + [\ell \text{ indexes itself}]\, R_{\mathrm{key}}}{M_\ell}
//     = |\mathcal{G}| \times \frac{\text{entries}}{\text{layer} \cdot \text{token}}
//     \times \frac{\text{bytes}}{\text{entry}},$$
//
// the second form with the mean over $\mathcal{G}$ of entries per layer and of bytes per entry. The
// main row $R_{\mathrm{main}}$ is $2 H_{kv} D_h$ bf16 values for MHA/GQA (K and V of every KV
// head), $r + D_r$ for MLA (the latent and the shared RoPE key), and a packed row of `formats/`
// from V3.2 on: 656 B (V3.2), 584 B (V4), 288 B (V4.1), with index keys of 132 B (V3.2) and 68 B
// (V4, V4.1). The window rows are per sequence, $W$ of $R_{\mathrm{win}}$ bytes in each of the $L$
// layers: $L \cdot W \cdot R_{\mathrm{win}}$. The cell builds both for every config and holds them
// to `ref/kvtable`'s.

// %%
/* one config's cache: |G| layers, entries per token, bytes per token, window bytes per sequence */
typedef struct {
    double layers, entries, bytes, window;
} cache_cost;

/* R_main, R_key and R_win of m's cache layout (0 where it has none) */
static void row_sizes(double *r_main, double *r_key, double *r_win, const kvl_model *m)
{
    const double bf16 = 2, mha = 2.0 * (double)(m->n_kv_heads * m->head_dim);
    const double mla = (double)(m->kv_lora_rank + m->qk_rope_head_dim);
    *r_main = *r_key = *r_win = 0;
    switch (m->kv_cache) {
    case KVL_CACHE_BF16: { /* every value in bf16; V3.2's and V4's keys and V4's window rows too */
        const int v4 = m->generation == KVL_GEN_V4 || m->generation == KVL_GEN_V41;
        *r_main = bf16 * (m->generation == KVL_GEN_MHA ? mha : v4 ? (double)m->head_dim : mla);
        if (m->generation != KVL_GEN_MHA && m->generation != KVL_GEN_MLA)
            *r_key = bf16 * (double)m->index_head_dim;
        if (v4) *r_win = bf16 * (double)m->head_dim;
        break;
    }
    case KVL_CACHE_V32_FP8:
        *r_main = (double)kvf_row_bytes(KVF_ROW_V32_MAIN);
        if (m->generation == KVL_GEN_DSA) *r_key = (double)kvf_row_bytes(KVF_ROW_V32_INDEX);
        break;
    case KVL_CACHE_V4_FP8:   /* the main row serves the window too */
        *r_main = *r_win = (double)kvf_row_bytes(KVF_ROW_V4_MAIN);
        *r_key = (double)kvf_row_bytes(KVF_ROW_V4_INDEX);
        break;
    case KVL_CACHE_MLA_FP8:   /* latent and RoPE key, one E4M3 byte a value */
        *r_main = mla;
        break;
    case KVL_CACHE_V41_FP4:
        *r_main = (double)kvf_row_bytes(KVF_ROW_V41_MAIN);
        *r_key = (double)kvf_row_bytes(KVF_ROW_V4_INDEX);
        *r_win = (double)kvf_row_bytes(KVF_ROW_V41_WINDOW);
        break;
    }
}

// %%
/* the sums over G: layers, entries and bytes per token; and the window rows of one sequence */
static cache_cost cost_of(const kvl_model *m)
{
    double r_main, r_key, r_win;
    row_sizes(&r_main, &r_key, &r_win, m);
    cache_cost c = {0, 0, 0, (double)m->n_layers * (double)m->window * r_win};
    for (size_t l = 0; l < m->n_layers; l++) {
        const kvl_layer *y = &m->layers[l];
        if (y->kind == KVL_LAYER_WINDOW || y->kv_source != (int)l) continue;   /* not in G */
        const double M = (double)y->compress_ratio, key = y->index_source == (int)l ? r_key : 0;
        c.layers += 1;
        c.entries += 1 / M;
        c.bytes += (r_main + key) / M;
    }
    return c;
}

// %%
NB_CELL(cell_built)
{
    double built[4][MAX_MODELS], ref[4][MAX_MODELS];
    const char *names[MAX_MODELS];
    for (size_t i = 0; i < n_gens; i++) {
        const cache_cost c = cost_of(&gens[i].m);
        const kvl_kv_footprint *k = &gens[i].kv;
        printf("%-20s %3g layers x %-8s entries x %8s B = %10s B/token; window %s B/seq\n",
               gens[i].m.name, c.layers, nb_num(c.entries / c.layers, 5),
               nb_num(c.bytes / c.entries, 2), nb_num(c.bytes, 2), nb_num(c.window, 0));
        names[i] = gens[i].m.name;
        built[0][i] = c.layers, built[1][i] = c.entries, built[2][i] = c.bytes,
        built[3][i] = c.window;
        ref[0][i] = (double)k->global_layers, ref[1][i] = k->entries_per_token,
        ref[2][i] = k->bytes_per_token;
        ref[3][i] = (double)k->window_bytes_per_sequence;
    }
    static const char *const what[4] = {"layers with a cache", "entries per token",
                                        "bytes per token", "window bytes per sequence"};
    int rc = KVL_OK;
    for (size_t j = 0; j < 4 && rc == KVL_OK; j++)
        rc = nb08_check(what[j], built[j], ref[j], names, n_gens,
                        0); /* one summation order: equal */
    return rc;
}

// %% [markdown]
// ## Each chart figure from its parts
//
// The layer maps come from the configs: V4-Flash's `compress_ratios` (2 window-only layers, 21 CSA
// at ratio 4, 20 HCA at ratio 128) and V4.1-Flash's KV-source layers (three encoder layers at ratio
// 2, one decoder layer at ratio 1).

// %%
static const generation *find(kvl_generation gen)
{
    for (size_t i = n_gens; i-- > 0;)
        if (gens[i].m.generation == gen && gens[i].m.headline) return &gens[i];
    return NULL;
}

/* how many of m's layers are of `kind` */
static size_t count_kind(const kvl_model *m, kvl_layer_kind kind)
{
    size_t n = 0;
    for (size_t l = 0; l < m->n_layers; l++) n += m->layers[l].kind == kind;
    return n;
}

NB_CELL(cell_parts)
{
    const generation *v32 = find(KVL_GEN_DSA), *v4 = find(KVL_GEN_V4), *v41 = find(KVL_GEN_V41);
    if (!v32 || !v4 || !v41)
        return kvl_fail(KVL_EINVAL, "ref/configs lacks a V3.2, V4 or V4.1 headline config");
    const double r656 = (double)kvf_row_bytes(KVF_ROW_V32_MAIN),
                 r132 = (double)kvf_row_bytes(KVF_ROW_V32_INDEX);
    const double r584 = (double)kvf_row_bytes(KVF_ROW_V4_MAIN),
                 r68 = (double)kvf_row_bytes(KVF_ROW_V4_INDEX);
    const double r288 = (double)kvf_row_bytes(KVF_ROW_V41_MAIN);
    printf("%s: %zu x (%s + %s) = %s\n", v32->m.name, v32->kv.global_layers, nb_num(r656, 0),
           nb_num(r132, 0), nb_num((double)v32->kv.global_layers * (r656 + r132), 0));
    const size_t csa = count_kind(&v4->m, KVL_LAYER_CSA), hca = count_kind(&v4->m, KVL_LAYER_HCA);
    const size_t win = count_kind(&v4->m, KVL_LAYER_WINDOW);
    printf(
        "%s: %zu window-only + %zu CSA + %zu HCA layers; %zu x (%s + %s)/4 + %zu x %s/128 = %s\n",
        v4->m.name, win, csa, hca, csa, nb_num(r584, 0), nb_num(r68, 0), hca, nb_num(r584, 0),
        nb_num((double)csa * (r584 + r68) / 4 + (double)hca * r584 / 128, 2));
    printf("%s: KV sources", v41->m.name);
    double entries = 0;
    for (size_t l = 0; l < v41->m.n_layers; l++)
        if (kvl_layer_writes_cache(&v41->m, l)) {
            printf(" %zu (ratio %zu)", l, v41->m.layers[l].compress_ratio);
            entries += 1.0 / (double)v41->m.layers[l].compress_ratio;
        }
    printf("; %s entries x (%s + %s) = %s\n", nb_num(entries, 2), nb_num(r288, 0), nb_num(r68, 0),
           nb_num(entries * (r288 + r68), 2));
    printf(
        "%zu KV-source layers in V4.1 against %zu in V4-Flash; %s is %.1f%% of V4-Flash's figure\n",
        v41->kv.global_layers, v4->kv.global_layers, nb_num(v41->kv.bytes_per_token, 0),
        100 * v41->kv.bytes_per_token / v4->kv.bytes_per_token);
    printf(
        "with vLLM's %s-byte FP8 row instead of the %s-byte FP4 one: %s x (%s + %s) = %s B/token, %.2fx\n",
        nb_num(r584, 0), nb_num(r288, 0), nb_num(entries, 2), nb_num(r584, 0), nb_num(r68, 0),
        nb_num(entries * (r584 + r68), 2), (r584 + r68) / (r288 + r68));
    return KVL_OK;
}

// %% [markdown]
// ## Which lever each step pulled
//
// $$\frac{\text{bytes}}{\text{token}} = (\text{layers with a cache}) \times
//     (\text{entries per token per such layer}) \times (\text{bytes per entry}),$$
//
// so each step's factor splits exactly into three. The rows below step from the newest model of
// each attention generation to the next. Each step is often credited to one lever (V1 → V3 the
// entry, V3.2 → V4-Flash the sequence, V4 → V4.1 layers and precision together); the split
// shows where that is the whole story and where it is not: V1 → V3 owes 1.56× to fewer layers
// besides the entry's 3.56×; V3.2 → V4-Flash owes 1.49× to layers and 1.21× to smaller entries
// besides the sequence's 7.58×; V4 → V4.1 gains 10.25× on layers and 1.83× on bytes but gives back
// 4.74× on entries per layer (ratios 2 and 1 instead of 4 and 128).

// %%
/* 1 if no later config has g's attention generation: the newest model of each generation */
static int newest_of_its_kind(size_t i)
{
    for (size_t j = i + 1; j < n_gens; j++)
        if (gens[j].m.generation == gens[i].m.generation) return 0;
    return 1;
}

NB_CELL(cell_levers)
{
    printf("%-20s %-20s %8s %8s %9s %8s\n", "from", "to", "layers", "entries", "B/entry", "total");
    const generation *prev = NULL;
    int rc = KVL_OK;
    for (size_t i = 0; i < n_gens && rc == KVL_OK; i++) {
        const generation *g = &gens[i];
        if (!newest_of_its_kind(i)) continue;
        if (prev) {
            const double layers = (double)prev->kv.global_layers / (double)g->kv.global_layers;
            const double entries = (prev->kv.entries_per_token / (double)prev->kv.global_layers) /
                                   (g->kv.entries_per_token / (double)g->kv.global_layers);
            const double entry = prev->kv.bytes_per_entry / g->kv.bytes_per_entry;
            const double total = prev->kv.bytes_per_token / g->kv.bytes_per_token;
            char a[16], b[16], c[16];
            printf("%-20s %-20s %8s %8s %9s %7.2fx\n", prev->m.name, g->m.name,
                   nb08_factor_text(a, sizeof a, layers), nb08_factor_text(b, sizeof b, entries),
                   nb08_factor_text(c, sizeof c, entry), total);
            /* three ratios of doubles whose product is the total: agreement to rounding */
            rc = nb_expect(fabs(layers * entries * entry / total - 1) < 1e-12,
                           "the levers of %s do not multiply out", g->m.name);
        }
        prev = g;
    }
    return rc;
}

// %% [markdown]
// ## What stays out of the per-token figure
//
// V4 and V4.1 keep a 128-row window in every layer: bounded per sequence, so it is reported apart.
// The cell prints it with the bytes one sequence holds at $T$ = 128K and 1M tokens (K = 1,024),
// $T \cdot \text{bytes/token} + L \cdot W \cdot R_{\mathrm{win}}$.

// %%
NB_CELL(cell_windows)
{
    printf("%-20s %16s %10s %12s %12s\n", "model", "window B/seq", "MiB", "GiB @128K", "GiB @1M");
    for (size_t i = 0; i < n_gens; i++) {
        const kvl_kv_footprint *k = &gens[i].kv;
        printf("%-20s %16s %10.2f %12.2f %12.2f\n", gens[i].m.name,
               nb_num((double)k->window_bytes_per_sequence, 0),
               (double)k->window_bytes_per_sequence / 1048576.0,
               kvl_kv_bytes_held(k, 131072) / 1073741824.0,
               kvl_kv_bytes_held(k, 1048576) / 1073741824.0);
    }
    const generation *v32 = find(KVL_GEN_DSA), *v4 = find(KVL_GEN_V4);
    if (!v32 || !v4) return kvl_fail(KVL_EINVAL, "ref/configs lacks a V3.2 or V4 headline config");
    printf(
        "\nat 1M tokens V4-Flash holds %.2f%% of V3.2's cache per token (%.2f%% with its window rows)\n",
        100 * v4->kv.bytes_per_token / v32->kv.bytes_per_token,
        100 * kvl_kv_bytes_held(&v4->kv, 1048576) / kvl_kv_bytes_held(&v32->kv, 1048576));
    return KVL_OK;
}

// %% [markdown]
// ## Live caches
//
// Where the generation's module exists, a cache at the real geometry is filled with rows and asked
// for its bytes: `ref/mha` at DeepSeek LLM 67B's heads, `ref/mla` at V3's latent, both in bf16.
// (V3.2's 656- and 132-byte rows are packed and checked byte for byte by
// `tests/test_ch05_formats_rows`; V4's and V4.1's caches come with their chapters.)

// %%
/* bytes per token one cache holds after n zero rows, weighed through the module's own report */
static int live_mha(double *per_token, const kvl_model *m, size_t n)
{
    mha_config c;
    mha_cache cache;
    int rc = mha_config_from_model(&c, m, 0);
    if (rc == KVL_OK) rc = mha_cache_init(&cache, &c, n, KV_STORE_BF16);
    if (rc != KVL_OK) return rc;
    float *rows = calloc(n * cache.ring.width, sizeof *rows);
    rc = rows ? kv_ring_append(&cache.ring, rows, n) : kvl_fail(KVL_ENOMEM, "out of memory");
    if (rc == KVL_OK) *per_token = (double)mha_cache_bytes_used(&cache) / (double)n;
    free(rows);
    mha_cache_free(&cache);
    return rc;
}

static int live_mla(double *per_token, const kvl_model *m, size_t n)
{
    mla_config c;
    mla_cache cache;
    int rc = mla_config_from_model(&c, m);
    if (rc == KVL_OK) rc = mla_cache_init(&cache, &c, n, KV_STORE_BF16);
    if (rc != KVL_OK) return rc;
    float *rows = calloc(n * (c.kv_lora_rank + c.qk_rope), sizeof *rows);
    rc = rows ? mla_cache_append(&cache, &c, rows, n) : kvl_fail(KVL_ENOMEM, "out of memory");
    if (rc == KVL_OK) *per_token = (double)mla_cache_bytes_used(&cache) / (double)n;
    free(rows);
    mla_cache_free(&cache);
    return rc;
}

NB_CELL(cell_live)
{
    int rc = KVL_OK;
    for (size_t i = 0; i < n_gens && rc == KVL_OK; i++) {
        const generation *g = &gens[i];
        double layer = 0;
        if (g->m.generation == KVL_GEN_MHA) rc = live_mha(&layer, &g->m, 64);
        else if (g->m.generation == KVL_GEN_MLA) rc = live_mla(&layer, &g->m, 64);
        else continue;
        if (rc != KVL_OK) break;
        const double live = layer * (double)g->kv.global_layers;
        printf("%-20s live cache: %s B per layer x %zu layers = %s B per token (table: %s)\n",
               g->m.name, nb_num(layer, 0), g->kv.global_layers, nb_num(live, 0),
               nb_num(g->kv.bytes_per_token, 2));
        rc = nb_expect(live == g->kv.bytes_per_token, "%s: live %g B/token, table %g", g->m.name,
                       live, g->kv.bytes_per_token);
    }
    return rc;
}

// %% [markdown]
// ## The lineage as areas
//
// Each step's newest model as one box: $|\mathcal{G}|$ cache layers wide and
// $\text{bytes}/(\text{token} \cdot \text{layer})$ tall, so that its area is its bytes per token,
// all to one scale. Between two boxes, the step and the factors it removed: the width is the layers
// lever, the height the other two together (entries per layer times bytes per entry).

// %%
/* what the step into a generation changed */
static const char *step_of(kvl_generation g)
{
    switch (g) {
    case KVL_GEN_MLA: return "MLA: one latent and one RoPE key instead of K and V per head";
    case KVL_GEN_DSA: return "V3.2: the latent in FP8 (656 B) and a 132-byte index key";
    case KVL_GEN_V4: return "V4: entries compressed 4:1 (CSA) and 128:1 (HCA), FP8 rows of 584 B";
    case KVL_GEN_V41: return "V4.1: four KV-source layers at ratios 2 and 1, FP4 rows of 288 B";
    default: return "";
    }
}

NB_CELL(cell_lineage)
{
    nb08_box box[MAX_MODELS];
    size_t n = 0;
    for (size_t i = 0; i < n_gens; i++) {
        if (!newest_of_its_kind(i)) continue;
        const cache_cost c = cost_of(&gens[i].m);
        const char *step = n ? step_of(gens[i].m.generation) : NULL;
        box[n++] = (nb08_box){gens[i].m.name, step, c.layers, c.bytes / c.layers};
    }
    return nb08_draw_lineage(box, n);
}

// %% [markdown]
// ## The figure
//
// Every config's bytes per token on a log axis; the generations the model card charts are dark. The
// README shows it (`chapters/08_arithmetic/figures/bytes_per_token.svg`).

// %%
NB_CELL(cell_figure)
{
    const int rc = nb08_draw_bytes(gens, n_gens);
    nb08_free_all(gens, n_gens);
    return rc;
}

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_table),   NB_RUN(cell_built), NB_RUN(cell_parts),
                                    NB_RUN(cell_levers),  NB_RUN(cell_windows), NB_RUN(cell_live),
                                    NB_RUN(cell_lineage), NB_RUN(cell_figure)};
    static const char *const figures[] = {"bytes_per_token", "lineage", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
