// %% [markdown]
// # Chapter 6 · V4: compressed entries, a window in every layer, sinks and a grouped output
//
// V3.2 still cached one 788-byte row per token in every one of 61 layers; it only read fewer of
// them. DeepSeek-V4 caches fewer rows: each compressed layer pools M tokens into one 512-wide
// entry, CSA layers (M = 4) pick the entries a query reads with an indexer, HCA layers (M = 128)
// read all of them, and every layer also attends to its 128 newest tokens in full. This notebook
// reads the V4-Flash layer map and prices it, prints the rows and the real shapes, then writes the
// CSA compressor with its overlap and the attention-sink softmax in plain C and checks both against
// `ref/v4`. It measures which tokens an entry pools, runs a toy V4 stack through both of its paths,
// and counts what a query reads at 128K and 1M.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them.
// `build/bin/nb_06 --step` walks it cell by cell; `make nb-06` rebuilds it after an edit and walks
// it again.

// %%
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "draw_compare.h"
#include "draw_v4.h"
#include "kvtable.h"
#include "model.h"
#include "nb.h"
#include "rng.h"
#include "rows.h"
#include "softmax.h"
#include "svg.h"
#include "v4.h"
#include "v4_rope.h"

// %% [markdown]
// ## The layer map, and the bytes it keeps per token
//
// The checkpoint's `compress_ratios` decides each layer: 0 window-only, 4 CSA, 128 HCA. Only the
// compressed entries grow with the context; per token a CSA layer keeps a quarter of a 584-byte row
// plus a quarter of a 68-byte index key, an HCA layer 1/128 of a row, a window-only layer nothing.
// In bytes per token:
//
// $$n_\text{CSA} \cdot \frac{584 + 68}{4} + n_\text{HCA} \cdot \frac{584}{128}.$$
//
// The transformers deepseek_v4 port (configuration_deepseek_v4.py) has a fallback for a config
// without `compress_ratios`, two HCA layers and then CSA at odd indices; read as V4-Flash's
// schedule it gives 20 CSA + 23 HCA layers. The cell prices that too.

// %%
enum { N_KINDS = 3 };
static const kvl_layer_kind KINDS[N_KINDS] = {KVL_LAYER_WINDOW, KVL_LAYER_CSA, KVL_LAYER_HCA};

/* bytes one layer of kind k adds per token: (main row + index key) / M */
static double layer_bytes_per_token(kvl_layer_kind k, size_t ratio)
{
    const double row = (double)kvf_row_bytes(KVF_ROW_V4_MAIN),
                 key = (double)kvf_row_bytes(KVF_ROW_V4_INDEX);
    if (k == KVL_LAYER_CSA) return (row + key) / (double)ratio;
    if (k == KVL_LAYER_HCA) return row / (double)ratio;
    return 0;
}

/* n[N_KINDS]: layers of each kind in KINDS order */
static void count_kinds(size_t *n, const kvl_model *m)
{
    for (size_t k = 0; k < N_KINDS; k++) n[k] = 0;
    for (size_t l = 0; l < m->n_layers; l++)
        for (size_t k = 0; k < N_KINDS; k++) n[k] += m->layers[l].kind == KINDS[k];
}

/* the compress ratio of m's layers of kind k (the config gives every CSA layer one ratio, every HCA
 * layer another); 0 when none is of that kind */
static size_t ratio_of(const kvl_model *m, kvl_layer_kind k)
{
    for (size_t l = 0; l < m->n_layers; l++)
        if (m->layers[l].kind == k) return m->layers[l].compress_ratio;
    return 0;
}

/* kind[l]: the index in KINDS of layer l's kind, as the figure colours it */
static int draw_layer_map(const kvl_model *m)
{
    unsigned char kind[64] = {0};
    for (size_t l = 0; l < m->n_layers && l < sizeof kind; l++)
        for (size_t k = 0; k < N_KINDS; k++)
            if (m->layers[l].kind == KINDS[k]) kind[l] = (unsigned char)k;
    return dv4_layer_map_figure(kind, m->n_layers);
}

// %%
NB_CELL(cell_layer_map)
{
    kvl_model m;
    kvl_kv_footprint f;
    int rc = kvl_model_load(&m, nb_path("ref/configs/deepseek-v4-flash.json"));
    if (rc != KVL_OK) return rc;
    rc = kvl_kv_footprint_of(&f, &m);
    if (rc != KVL_OK) {
        kvl_model_free(&m);
        return rc;
    }
    size_t n[N_KINDS];
    count_kinds(n, &m);
    double sum = 0;
    for (size_t l = 0; l < m.n_layers; l++)
        sum += layer_bytes_per_token(m.layers[l].kind, m.layers[l].compress_ratio);
    printf("%s: %zu layers = %zu window-only + %zu CSA + %zu HCA\n", m.name, m.n_layers, n[0], n[1],
           n[2]);
    printf("window-only layers:");
    for (size_t l = 0; l < m.n_layers; l++)
        if (m.layers[l].kind == KVL_LAYER_WINDOW) printf(" %zu", l);
    printf("\nper token: %zu x (584 + 68)/4 + %zu x 584/128 = %s B/token (ref/kvtable: %s)\n", n[1],
           n[2], nb_num(sum, 2), nb_num(f.bytes_per_token, 2));
    /* transformers' fallback: [HCA, HCA] + [CSA if i odd else HCA for i in range(L - 2)] */
    size_t csa = 0;
    for (size_t i = 0; i + 2 < m.n_layers; i++) csa += i % 2;
    const size_t hca = m.n_layers - csa;
    const double fallback = (double)csa * layer_bytes_per_token(KVL_LAYER_CSA, 4) +
                            (double)hca * layer_bytes_per_token(KVL_LAYER_HCA, 128);
    printf("the fallback schedule instead: %zu CSA + %zu HCA, no window-only layer = %s B/token\n",
           csa, hca, nb_num(fallback, 2));
    rc = nb_expect(sum == f.bytes_per_token, "the map gives %g, ref/kvtable %g", sum,
                   f.bytes_per_token);
    if (rc == KVL_OK) rc = draw_layer_map(&m);
    kvl_model_free(&m);
    return rc;
}

// %% [markdown]
// ## The rows
//
// A compressed entry and a window row share one 584-byte layout: the 448 channels that carry no
// rotation in E4M3 with one power-of-two (E8M0) scale per 64, the 64 rotary channels in bf16. The
// CSA indexer's key is MXFP4: 128 E2M1 values, one E8M0 scale per 32.

// %%
static void print_row_map(kvf_row layout)
{
    size_t n = 0;
    const kvf_row_field *f = kvf_row_fields(layout, &n);
    printf("%s, %zu bytes:\n", kvf_row_name(layout), kvf_row_bytes(layout));
    for (size_t i = 0; i < n; i++)
        printf("  bytes %3zu..%-3zu %-6s %s\n", f[i].offset, f[i].offset + f[i].size - 1, f[i].name,
               f[i].format);
}

/* bytes of the field `name` in the row's byte map, 0 if it has none */
static size_t field_bytes(kvf_row layout, const char *name)
{
    size_t n = 0;
    const kvf_row_field *f = kvf_row_fields(layout, &n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(f[i].name, name)) return f[i].size;
    return 0;
}

NB_CELL(cell_rows)
{
    print_row_map(KVF_ROW_V4_MAIN);
    print_row_map(KVF_ROW_V4_INDEX);
    const size_t row = kvf_row_bytes(KVF_ROW_V4_MAIN), key = kvf_row_bytes(KVF_ROW_V4_INDEX);
    const size_t scales = field_bytes(KVF_ROW_V4_MAIN, "scale"),
                 pad = field_bytes(KVF_ROW_V4_MAIN, "pad");
    printf("main row: 448 E4M3 + 64 x 2 bf16 + %zu E8M0 scales (448/64) + %zu pad = %zu B\n",
           scales, pad, row);
    printf("index key: 128 x 0.5 + %zu E8M0 scales = %zu B\n",
           field_bytes(KVF_ROW_V4_INDEX, "scale"), key);
    printf("against a bf16 row of 512 values (1,024 B): %.1f%%, %.1f%% saved\n",
           100.0 * (double)row / 1024, 100.0 - 100.0 * (double)row / 1024);
    return nb_expect(scales == 7 && pad == 1 && row == 584 && key == 68,
                     "row map: %zu scales, %zu pad, %zu B, key %zu B", scales, pad, row, key);
}

// %% [markdown]
// ## What it computes at real shapes
//
// Every layer is MQA with one 512-wide vector per key serving as key and value. The query comes
// from a 1,024-wide latent, each head is RMS-normalised without a gain, and the trailing 64
// channels rotate. Compressors project to $(1 + \mathrm{ov})\,c$ channels for values and as many
// gate logits; CSA's overlap ($\mathrm{ov} = 1$) doubles them. The cell reads the shapes from the
// config through `ref/v4`'s sizes tables.

// %%
/* t[V4_COMPRESSOR_N_WEIGHTS]: a compressor's sizes table */
static void print_weight_table(const char *what, const v4_weight *t)
{
    static const char *const names[V4_COMPRESSOR_N_WEIGHTS] = {"W_C (values)", "W_Z (gates)",
                                                               "B (position bias)", "RMSNorm gain"};
    printf("  %s:", what);
    for (size_t i = 0; i < V4_COMPRESSOR_N_WEIGHTS; i++)
        printf("%s %s [%s][%s]", i ? "," : "", names[i], nb_num((double)t[i].rows, 0),
               nb_num((double)t[i].cols, 0));
    printf("\n");
}

// %%
NB_CELL(cell_shapes)
{
    kvl_model m;
    v4_config csa, hca;
    int rc = kvl_model_load(&m, nb_path("ref/configs/deepseek-v4-flash.json"));
    if (rc != KVL_OK) return rc;
    rc = v4_config_from_model(&csa, &m, 2);
    if (rc == KVL_OK) rc = v4_config_from_model(&hca, &m, 3);
    kvl_model_free(&m);
    if (rc != KVL_OK) return rc;
    const size_t H = csa.n_heads, Dh = csa.head_dim, G = csa.o_groups, Do = csa.o_lora_rank,
                 d = csa.d;
    printf(
        "d %s, H %zu, Dh %zu (Dr %zu trailing), Dq' %s, W %zu, G %zu, Do %s; indexer HI %zu x DI %zu, top-%s\n",
        nb_num((double)d, 0), H, Dh, csa.rope.Dr, nb_num((double)csa.q_lora_rank, 0), csa.window, G,
        nb_num((double)Do, 0), csa.indexer.n_heads, csa.indexer.head_dim,
        nb_num((double)csa.indexer.topk, 0));
    printf("W_DQ [%s][%s], W_UQ [%s][%s], W_KV [%s][%s]; W_IQ [%s][%s], W_IW [%s][%s]\n",
           nb_num((double)csa.q_lora_rank, 0), nb_num((double)d, 0), nb_num((double)(H * Dh), 0),
           nb_num((double)csa.q_lora_rank, 0), nb_num((double)Dh, 0), nb_num((double)d, 0),
           nb_num((double)(csa.indexer.n_heads * csa.indexer.head_dim), 0),
           nb_num((double)csa.q_lora_rank, 0), nb_num((double)csa.indexer.n_heads, 0),
           nb_num((double)d, 0));
    v4_compressor_weights cw;
    v4_weight t[V4_COMPRESSOR_N_WEIGHTS];
    v4_compressor_weight_table(t, &cw, &csa.compressor);
    print_weight_table("CSA compressor (M 4, ov 1)", t);
    v4_compressor_weight_table(t, &cw, &hca.compressor);
    print_weight_table("HCA compressor (M 128)", t);
    v4_compressor_weight_table(t, &cw, &csa.indexer.compressor);
    print_weight_table("indexer compressor (M 4, ov 1)", t);
    const double dense = (double)(H * Dh) * (double)d;
    const double grouped = (double)(G * Do) * (double)(H / G * Dh) + (double)d * (double)(G * Do);
    printf("heads: %zu x %zu = %s channels; %zu groups of %zu heads, %s channels per group; "
           "W_OA [%s][%s] read as %zu x [%s][%s]\n",
           H, Dh, nb_num((double)(H * Dh), 0), G, H / G, nb_num((double)(H / G * Dh), 0),
           nb_num((double)(G * Do), 0), nb_num((double)(H / G * Dh), 0), G, nb_num((double)Do, 0),
           nb_num((double)(H / G * Dh), 0));
    printf(
        "output projection: dense %s -> %s = %s weights; grouped %zu x %s x %s + %s x %s = %s (%.2f of dense)\n",
        nb_num((double)(H * Dh), 0), nb_num((double)d, 0), nb_num(dense, 0), G,
        nb_num((double)(H / G * Dh), 0), nb_num((double)Do, 0), nb_num((double)d, 0),
        nb_num((double)(G * Do), 0), nb_num(grouped, 0), grouped / dense);
    const double both = 1 / sqrt((double)(csa.indexer.n_heads * csa.indexer.head_dim));
    const double one = 1 / sqrt((double)csa.indexer.head_dim);
    printf("indexer weight scale HI^-1/2 * DI^-1/2 = %.6f; DI^-1/2 alone = %.6f, %.0fx larger\n",
           both, one, one / both);
    return KVL_OK;
}

// %% [markdown]
// ## The compressor, written out
//
// A compressed layer turns every $M$ tokens into one entry of $c$ channels. Each token $t$ projects
// to values and gate logits, $(1 + \mathrm{ov})\,c$ of each, the gate with a learned bias for its
// place in the block:
//
// $$a_t = W_C \, x_t, \qquad z_t = W_Z \, x_t + B_{t \bmod M}.$$
//
// Entry $i$ pools the slots $S_i$: block $i$ ($t = iM \ldots iM + M - 1$) through the last $c$
// channels and, with CSA's overlap ($\mathrm{ov} = 1$), block $i - 1$ through the first $c$. For
// every channel one softmax runs over all $(1 + \mathrm{ov})\,M$ slots, so the two blocks compete
// for its mass:
//
// $$\hat{C}_i[h] = \sum_{t \in S_i} \alpha_t[h] \, a_t[h],$$
//
// $$\alpha_t[h] = \frac{e^{z_t[h]}}{\sum_{u \in S_i} e^{z_u[h]}}.$$
//
// Then $C_i = \mathrm{RMSNorm}(\hat{C}_i) \odot g$, and its trailing $D_r$ channels rotate at the
// block's first position $iM$ (the interleaved rotation of `ref/core/rope.h`). A CSA entry mixes
// $2M$ tokens and still arrives once per $M$; HCA ($\mathrm{ov} = 0$) pools its own block. Entry 0
// has no block $-1$, and a tail of fewer than $M$ tokens makes no entry yet.

// %%
enum { MAX_SLOTS = 256 };   /* (1 + ov)·M: 8 for CSA, 128 for V4's HCA */

static double dot(const float *row, const float *x, size_t d)
{
    double sum = 0;
    for (size_t k = 0; k < d; k++) sum += (double)row[k] * x[k];
    return sum;
}

/* Ĉ_i[h] for x[T][d]: block i − 1 (overlap only) through channel h of a and z, block i through
 * ov·c + h */
static float pool(const v4_compressor_config *c, const v4_compressor_weights *w, const float *x,
                  size_t i, size_t h)
{
    const size_t M = c->ratio, ov = c->overlap, wide = (1 + ov) * c->width;
    double a[MAX_SLOTS], z[MAX_SLOTS], mu = -INFINITY;
    size_t n = 0;
    for (size_t half = 0; half <= ov; half++) {
        if (i + half < ov) continue;   /* entry 0 has no block −1 */
        const size_t block = i + half - ov, row = half * c->width + h;
        for (size_t r = 0; r < M; r++, n++) {
            const float *x_t = x + (block * M + r) * c->d;   /* t mod M = r */
            a[n] = dot(w->w_kv + row * c->d, x_t, c->d);
            z[n] = dot(w->w_gate + row * c->d, x_t, c->d) + w->ape[r * wide + row];
            mu = fmax(mu, z[n]);
        }
    }
    double den = 0, num = 0;   /* μ taken out of every exponent: the softmax is unchanged */
    for (size_t k = 0; k < n; k++) den += exp(z[k] - mu), num += exp(z[k] - mu) * a[k];
    return (float)(num / den);
}

// %%
/* entries[⌊T/M⌋][c] for x[T][d]: pool, RMSNorm with gain, rotate the trailing Dr channels at iM */
static void compress(float *entries, const v4_compressor_config *c, const v4_compressor_weights *w,
                     const float *x, size_t T)
{
    for (size_t i = 0; i < T / c->ratio; i++) {
        float *C = entries + i * c->width;
        double ss = 0;
        for (size_t h = 0; h < c->width; h++) C[h] = pool(c, w, x, i, h), ss += (double)C[h] * C[h];
        const double r = 1 / sqrt(ss / (double)c->width + c->norm_eps);
        for (size_t h = 0; h < c->width; h++) C[h] = (float)(w->norm[h] * (C[h] * r));
        v4_rotate_heads(C, 1, 1, c->width, &c->rope, (int64_t)(i * c->ratio));
    }
}

// %% [markdown]
// The toy's CSA layer ($M = 4$, overlap, $c = 32$, $d = 64$) and HCA layer ($M = 8$) compress the
// same 45 random tokens (the last one, or five, make no entry) here and in `ref/v4`'s
// `v4_compressor_forward`. `ref/v4` projects in float32 through OpenBLAS, this code in double: the
// entries agree to a few float32 ulps, far below $10^{-5}$ of their size.

// %%
enum { TOY_D = 64, TOY_T = 45, POOL_T = 32 };

static const char TOY_JSON[] =
    "{\"hidden_size\": 64, \"num_hidden_layers\": 5, \"num_attention_heads\": 4, \"head_dim\": 32,"
    " \"qk_rope_head_dim\": 8, \"q_lora_rank\": 32, \"o_groups\": 2, \"o_lora_rank\": 16, \"sliding_window\": 8,"
    " \"index_n_heads\": 4, \"index_head_dim\": 16, \"index_topk\": 3, \"compress_ratios\": [0, 0, 4, 8, 4],"
    " \"rope_theta\": 10000, \"compress_rope_theta\": 160000, \"rms_norm_eps\": 1e-6,"
    " \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 16, \"original_max_position_embeddings\": 65536,"
    " \"beta_fast\": 32, \"beta_slow\": 1}}";

static int toy_layer(v4_config *c, v4_weights *w, size_t layer, uint64_t seed)
{
    kvl_model m;
    int rc = kvl_model_parse(&m, TOY_JSON, strlen(TOY_JSON), "v4-toy.json");
    if (rc != KVL_OK) return rc;
    rc = v4_config_from_model(c, &m, layer);
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    return rc == KVL_OK ? v4_weights_init_random(w, c, &rng) : rc;
}

// %%
/* layer `layer` of the toy: this notebook's compressor against ref/v4's on x[TOY_T][TOY_D] */
static int compare_compressor(const char *what, size_t layer, uint64_t seed, const float *x)
{
    static float mine[TOY_T * 32], theirs[TOY_T * 32];
    v4_config c;
    v4_weights w = {0};
    int rc = toy_layer(&c, &w, layer, seed);
    if (rc == KVL_OK) rc = v4_compressor_forward(theirs, &c.compressor, &w.compressor, x, TOY_T, 0);
    if (rc == KVL_OK) {
        const v4_compressor_config *cc = &c.compressor;
        const size_t N = v4_compressor_entries(cc, TOY_T);
        compress(mine, cc, &w.compressor, x, TOY_T);
        double scale, diff = nbc_max_diff(mine, theirs, N * cc->width, &scale);
        char what_n[160];
        snprintf(what_n, sizeof what_n,
                 "%s (M %zu, overlap %zu, c %zu): %zu entries from %d tokens, mine against "
                 "ref/v4",
                 what, cc->ratio, cc->overlap, cc->width, N, TOY_T);
        rc = nbc_report(what_n, diff, scale, 1e-5);
    }
    v4_weights_free(&w);
    return rc;
}

NB_CELL(cell_compressor)
{
    static float x[TOY_T * TOY_D];
    kvl_rng rng;
    kvl_rng_seed(&rng, 66);
    kvl_rng_normal_f32(&rng, x, TOY_T * TOY_D, 1.0);
    int rc = compare_compressor("CSA", 2, 61, x);
    return rc == KVL_OK ? compare_compressor("HCA", 3, 62, x) : rc;
}

// %% [markdown]
// ## What a query reads: compressed entries and the window
//
// Entry $i$ exists once its block is complete, so the query at token $t$ can read the entries $i <
// \lfloor (t + 1)/M \rfloor$. The newest tokens, up to $M - 1$ of them, sit in no entry yet; every
// layer also attends to its newest $W$ tokens uncompressed, and $M - 1 < W$ (V4-Flash: $W = 128$,
// $M$ up to 128) means the window always covers them. The figure draws it at the toy's sizes, for
// the query at token 21.

// %%
NB_CELL(cell_windows)
{
    enum { T = 24, M_CSA = 4, M_HCA = 8, W = 8, t = 21 };
    const size_t csa = (t + 1) / M_CSA, hca = (t + 1) / M_HCA, first = t + 1 - W;
    printf("query %d reads CSA entries 0..%zu (tokens 0..%zu; %zu..%d wait for entry %zu), "
           "HCA entries 0..%zu (tokens 0..%zu)\n",
           t, csa - 1, csa * M_CSA - 1, csa * M_CSA, t, csa, hca - 1, hca * M_HCA - 1);
    printf(
        "and the window, tokens %zu..%d: it covers every token no complete block holds (W = %d > M - 1 = %d)\n",
        first, t, W, M_HCA - 1);
    return dv4_windows_figure(T, M_CSA, M_HCA, W, t);
}

// %% [markdown]
// ## Which tokens an entry pools, measured
//
// The same compressor on 32 random tokens: change one token and see which entries move. A CSA entry
// $i$ pools block $i - 1$ through the first half of the projection and block $i$ through the
// second: eight tokens, one entry per four. An HCA entry pools its own block only.

// %%
/* moved[N][POOL_T]: 1 where changing token j changes entry i */
static void entries_moved(unsigned char *moved, size_t *N, const v4_compressor_config *c,
                          const v4_compressor_weights *w)
{
    static float x[POOL_T * TOY_D], base[POOL_T * 32], again[POOL_T * 32];
    kvl_rng rng;
    kvl_rng_seed(&rng, 6);
    kvl_rng_normal_f32(&rng, x, POOL_T * TOY_D, 1.0);
    *N = POOL_T / c->ratio;
    compress(base, c, w, x, POOL_T);
    for (size_t j = 0; j < POOL_T; j++) {
        const float kept = x[j * TOY_D];
        x[j * TOY_D] += 1.0f;
        compress(again, c, w, x, POOL_T);
        x[j * TOY_D] = kept;
        for (size_t i = 0; i < *N; i++)
            moved[i * POOL_T + j] =
                memcmp(base + i * c->width, again + i * c->width, c->width * sizeof *base) != 0;
    }
}

// %%
static void print_pooled(const char *what, const unsigned char *moved, size_t N, size_t M)
{
    printf("%s, M = %zu: %zu entries from %d tokens\n", what, M, N, POOL_T);
    for (size_t i = 0; i < N; i += 3) {
        size_t first = POOL_T, n = 0;
        for (size_t j = 0; j < POOL_T; j++)
            if (moved[i * POOL_T + j]) first = first < j ? first : j, n++;
        printf("  entry %zu pools %zu tokens, %zu..%zu; visible from query %zu on\n", i, n, first,
               first + n - 1, (i + 1) * M - 1);
    }
}

/* every moved cell lies in block i (or, with overlap, block i − 1), and each of those blocks
 * moved */
static int pools_exactly(const unsigned char *moved, size_t N, size_t M, size_t ov)
{
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < POOL_T; j++) {
            const size_t b = j / M;
            const int expected = b == i || (ov && b + 1 == i);
            if (moved[i * POOL_T + j] != expected) return 0;
        }
    return 1;
}

// %%
NB_CELL(cell_pooling)
{
    static unsigned char csa_moved[POOL_T * POOL_T], hca_moved[POOL_T * POOL_T];
    v4_config csa, hca;
    v4_weights cw = {0}, hw = {0};
    size_t n_csa = 0, n_hca = 0;
    int rc = toy_layer(&csa, &cw, 2, 61);
    if (rc == KVL_OK) rc = toy_layer(&hca, &hw, 3, 62);
    if (rc == KVL_OK) {
        entries_moved(csa_moved, &n_csa, &csa.compressor, &cw.compressor);
        entries_moved(hca_moved, &n_hca, &hca.compressor, &hw.compressor);
        print_pooled("CSA", csa_moved, n_csa, 4);
        print_pooled("HCA", hca_moved, n_hca, 8);
        printf(
            "a CSA entry mixes 2M = 8 tokens and one arrives every M = 4; an HCA entry mixes its own M\n");
        rc = nb_expect(pools_exactly(csa_moved, n_csa, 4, 1) &&
                           pools_exactly(hca_moved, n_hca, 8, 0),
                       "an entry moved with a token outside its blocks");
    }
    if (rc == KVL_OK) rc = dv4_pooling_figure(csa_moved, n_csa, POOL_T, 4);
    v4_weights_free(&cw);
    v4_weights_free(&hw);
    return rc;
}

// %% [markdown]
// ## Sinks: a head may attend to nothing
//
// Each head has a learned logit $\sigma_h$ that joins the softmax's denominator and nothing else:
//
// $$p_i = \frac{e^{s_i}}{e^{\sigma_h} + \sum_j e^{s_j}}.$$
//
// The weights then sum to $1 - e^{\sigma_h} / (e^{\sigma_h} + \sum_j e^{s_j})$, less than one, and
// a head whose scores all sit far below $\sigma_h$ contributes almost nothing. With $\sigma_h \to
// -\infty$ it is the plain softmax. Computed as written, $e^{s_i}$ overflows for large scores;
// taking $\mu = \max(\sigma_h, \max_j s_j)$ out of every exponent changes nothing and keeps each
// below 1.

// %%
static void sink_softmax(double *p, const double *s, size_t n, double sigma)
{
    double mu = sigma, den;
    for (size_t i = 0; i < n; i++) mu = fmax(mu, s[i]);
    den = exp(sigma - mu);
    for (size_t i = 0; i < n; i++) den += exp(s[i] - mu);
    for (size_t i = 0; i < n; i++) p[i] = exp(s[i] - mu) / den;
}

// %% [markdown]
// Four sinks on one row of scores, then 1,000 random rows of 64 scores (standard deviation 4) and
// sinks, each against `ref/`'s `kvl_softmax_sink_f64`, the softmax `ref/v4` attends with.

// %%
/* max |mine − ref| of the sink softmax of s[n] */
static double sink_diff(const double *s, size_t n, double sigma, double *p)
{
    double ref[64], worst = 0;
    memcpy(ref, s, n * sizeof *s);
    kvl_softmax_sink_f64(ref, n, sigma);
    sink_softmax(p, s, n, sigma);
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(p[i] - ref[i]));
    return worst;
}

NB_CELL(cell_sinks)
{
    static const double scores[] = {2, 1, 0, -1};
    static const double sigmas[] = {-INFINITY, 0, 2, 8};
    double p[64], s[65], worst = 0;   /* s: 64 scores, then the sink */
    for (size_t k = 0; k < 4; k++) {
        worst = fmax(worst, sink_diff(scores, 4, sigmas[k], p));
        printf("sigma %4g: weights %.4f %.4f %.4f %.4f, sum %.4f\n", sigmas[k], p[0], p[1], p[2],
               p[3], p[0] + p[1] + p[2] + p[3]);
    }
    kvl_rng rng;
    kvl_rng_seed(&rng, 67);
    for (size_t row = 0; row < 1000; row++) {
        kvl_rng_normal_f64(&rng, s, 65, 4.0);
        worst = fmax(worst, sink_diff(s, 64, s[64], p));
    }
    printf("against ref's kvl_softmax_sink_f64 on these and 1,000 random rows: max |diff| %.2g\n",
           worst);
    /* the same exps and division in double: equal, or a few ulps apart were the sums taken in
     * another order */
    return nb_expect(worst < 1e-15, "the sink softmax differs from ref by %g", worst);
}

// %% [markdown]
// ## A toy V4 stack, two paths
//
// The toy of `tests/v4_toy.h`: $d = 64$, $H = 4$, $D_h = 32$, $D_r = 8$, $D_q' = 32$, $G = 2$, $D_o
// = 16$, $W = 8$, layer map [0, 0, 4, 8, 4] (window, window, CSA $M = 4$ top-3, HCA $M = 8$, CSA),
// 45 tokens. The whole-sequence definition and what a server runs (a prefill of 13 tokens, then one
// token at a time through the caches) must agree. Then a stack at the real entry widths (head dim
// 512, $D_I = 128$) with native rows reports what its caches hold.

// %%
static int toy_stack(model_config *c, model_weights *w, const char *json, uint64_t seed)
{
    kvl_model m;
    int rc = kvl_model_parse(&m, json, strlen(json), "v4-toy.json");
    if (rc != KVL_OK) return rc;
    rc = model_config_from_model(c, &m, 0, MODEL_MLP_SWIGLU);
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    return rc == KVL_OK ? model_weights_init_random(w, c, &rng) : rc;
}

/* x[TOY_T][TOY_D] through the stack both ways */
static int compare_paths(const model_config *c, const model_weights *w, const float *x)
{
    enum { S = 13 };
    static float want[TOY_T * TOY_D], got[TOY_T * TOY_D];
    model_cache cache = {0};
    int rc = model_forward(want, c, w, x, TOY_T);
    if (rc == KVL_OK) rc = model_cache_init_v4(&cache, c, TOY_T, V4_CACHE_F32);
    if (rc == KVL_OK) rc = model_prefill(got, c, w, &cache, x, S);
    for (size_t t = S; t < TOY_T && rc == KVL_OK; t++)
        rc = model_decode(got + t * TOY_D, c, w, &cache, x + t * TOY_D);
    model_cache_free(&cache);
    if (rc != KVL_OK) return rc;
    double scale, diff = nbc_max_diff(got, want, TOY_T * TOY_D, &scale);
    char what[96];
    snprintf(what, sizeof what, "prefill %d + decode %d against the whole-sequence forward", S,
             TOY_T - S);
    /* float32 through 5 layers whose products OpenBLAS blocks differently per batch shape: a few
     * ulps of the residual stream per layer, far below 1e-5 of its scale */
    return nbc_report(what, diff, scale, 1e-5);
}

// %%
static const char WIDE_JSON[] =
    "{\"hidden_size\": 32, \"num_hidden_layers\": 3, \"num_attention_heads\": 2, \"head_dim\": 512,"
    " \"qk_rope_head_dim\": 64, \"q_lora_rank\": 16, \"o_groups\": 1, \"o_lora_rank\": 16, \"sliding_window\": 128,"
    " \"index_n_heads\": 2, \"index_head_dim\": 128, \"index_topk\": 8, \"compress_ratios\": [0, 4, 128],"
    " \"rope_theta\": 10000, \"compress_rope_theta\": 160000, \"rms_norm_eps\": 1e-6,"
    " \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 16, \"original_max_position_embeddings\": 65536,"
    " \"beta_fast\": 32, \"beta_slow\": 1}}";

static int live_bytes(void)
{
    enum { T = 256 };
    static float x[T * 32], y[T * 32];
    model_config c = {0};
    model_weights w = {0};
    model_cache cache = {0};
    int rc = toy_stack(&c, &w, WIDE_JSON, 63);
    if (rc == KVL_OK) rc = model_cache_init_v4(&cache, &c, T, V4_CACHE_NATIVE);
    kvl_rng rng;
    kvl_rng_seed(&rng, 64);
    kvl_rng_normal_f32(&rng, x, T * 32, 1.0);
    if (rc == KVL_OK) rc = model_prefill(y, &c, &w, &cache, x, T);
    for (size_t l = 0; l < c.n_layers && rc == KVL_OK; l++) {
        char name[64];
        const size_t held = v4_cache_bytes_used(&cache.v4[l]);
        printf("  %-26s %6s B for %d tokens = %8.4f B/token; window rows %s B\n",
               model_layer_name(name, sizeof name, &c.layers[l]), nb_num((double)held, 0), T,
               (double)held / T,
               nb_num((double)v4_cache_window_bytes(&cache.v4[l]), 0));
        const double want =
            T * layer_bytes_per_token(c.layers[l].v4.kind, c.layers[l].v4.compressor.ratio);
        rc = nb_expect((double)held == want, "layer %zu holds %zu B, the rows say %g", l, held,
                       want);
    }
    model_cache_free(&cache);
    model_weights_free(&w);
    model_config_free(&c);
    return rc;
}

// %%
NB_CELL(cell_toy_stack)
{
    static float x[TOY_T * TOY_D];
    model_config c = {0};
    model_weights w = {0};
    int rc = toy_stack(&c, &w, TOY_JSON, 60);
    kvl_rng rng;
    kvl_rng_seed(&rng, 65);
    kvl_rng_normal_f32(&rng, x, TOY_T * TOY_D, 1.0);
    for (size_t l = 0; l < c.n_layers && rc == KVL_OK; l++) {
        char name[64];
        printf("layer %zu: %s\n", l, model_layer_name(name, sizeof name, &c.layers[l]));
    }
    if (rc == KVL_OK) rc = compare_paths(&c, &w, x);
    model_weights_free(&w);
    model_config_free(&c);
    if (rc == KVL_OK) {
        printf("real entry widths, native rows (584-byte rows, 68-byte index keys), 256 tokens:\n");
        rc = live_bytes();
    }
    return rc;
}

// %% [markdown]
// ## Counting at real size
//
// Keys one query reads in each kind of layer at context $T$: $\min(T, W)$ in a window-only layer,
// $\min(T, W) + \min(k, \lfloor T/4 \rfloor)$ in a CSA layer (top-$k$ of its entries) and $\min(T,
// W) + \lfloor T/128 \rfloor$ in an HCA layer (all of them); then the entries held at 128K and 1M
// tokens, the bounded window ($L \cdot W \cdot 584$ bytes per sequence), and V4-Flash against V3.2
// per token. "128K" is 131,072 tokens and "1M" 1,048,576 here.

// %%
static void print_reads(const kvl_model *m, double T)
{
    const double W = (double)m->window, K = (double)m->index_topk, win = fmin(T, W);
    printf("query at context %s: window-only reads %s keys, CSA %s + %s = %s, HCA %s + %s = %s\n",
           nb_num(T, 0), nb_num(win, 0), nb_num(win, 0), nb_num(fmin(K, floor(T / 4)), 0),
           nb_num(win + fmin(K, floor(T / 4)), 0), nb_num(win, 0), nb_num(floor(T / 128), 0),
           nb_num(win + floor(T / 128), 0));
}

static int print_against_v32(const kvl_kv_footprint *v4f, double per_seq_window)
{
    kvl_model m;
    kvl_kv_footprint v32;
    int rc = kvl_model_load(&m, nb_path("ref/configs/deepseek-v3.2-exp.json"));
    if (rc != KVL_OK) return rc;
    rc = kvl_kv_footprint_of(&v32, &m);
    kvl_model_free(&m);
    if (rc != KVL_OK) return rc;
    const double T = 1048576;
    printf(
        "V3.2 %s B/token / V4-Flash %s = %.2fx; at 1M tokens V4-Flash keeps %.2f%% of V3.2's cache "
        "(%.2f%% with its window)\n",
        nb_num(v32.bytes_per_token, 2), nb_num(v4f->bytes_per_token, 2),
        v32.bytes_per_token / v4f->bytes_per_token,
        100 * v4f->bytes_per_token / v32.bytes_per_token,
        100 * (v4f->bytes_per_token * T + per_seq_window) / (v32.bytes_per_token * T));
    return KVL_OK;
}

// %%
NB_CELL(cell_counts)
{
    kvl_model m;
    kvl_kv_footprint f;
    int rc = kvl_model_load(&m, nb_path("ref/configs/deepseek-v4-flash.json"));
    if (rc == KVL_OK) rc = kvl_kv_footprint_of(&f, &m);
    if (rc != KVL_OK) {
        kvl_model_free(&m);
        return rc;
    }
    const double L = (double)m.n_layers, W = (double)m.window, K = (double)m.index_topk;
    const double row = (double)kvf_row_bytes(KVF_ROW_V4_MAIN);
    print_reads(&m, 131072);
    const double M_csa = (double)ratio_of(&m, KVL_LAYER_CSA),
                 M_hca = (double)ratio_of(&m, KVL_LAYER_HCA);
    printf(
        "CSA's top-%s entries x %s tokens cover %s tokens; the HCA tail of at most %s tokens sits inside "
        "the %s-token window\n",
        nb_num(K, 0), nb_num(M_csa, 0), nb_num(K * M_csa, 0), nb_num(M_hca - 1, 0), nb_num(W, 0));
    printf("entries per layer: at 128K %s HCA, %s CSA; at 1M %s HCA (%s if 1M = 10^6)\n",
           nb_num(131072 / M_hca, 0), nb_num(131072 / M_csa, 0), nb_num(1048576 / M_hca, 0),
           nb_num(floor(1e6 / M_hca), 0));
    const double window = L * W * row;
    printf("window rows per sequence: %s x %s x %s = %s B = %.2f MB = %.2f MiB\n", nb_num(L, 0),
           nb_num(W, 0), nb_num(row, 0), nb_num(window, 0), window / 1e6, window / 1048576);
    size_t n[N_KINDS];
    count_kinds(n, &m);
    const double main_rows = (double)n[1] * row / M_csa + (double)n[2] * row / M_hca;
    printf(
        "a window row kept per token in every layer would be %s x %s = %s B/token: %.2fx the compressed main "
        "rows (%s), %.2fx with the index keys (%s)\n",
        nb_num(L, 0), nb_num(row, 0), nb_num(L * row, 0), L * row / main_rows, nb_num(main_rows, 2),
        L * row / f.bytes_per_token, nb_num(f.bytes_per_token, 2));
    printf("rebuilding every window row after a prefix-cache hit: n_win x L = %s tokens is enough; "
           "the minimum is L(W-1)+1 = %s\n", nb_num(W * L, 0), nb_num(L * (W - 1) + 1, 0));
    kvl_model_free(&m);
    return print_against_v32(&f, window);
}

// %% [markdown]
// ## Out of scope
//
// Hyper-connections, MoE and MTP change what enters an attention layer, not what its cache holds;
// the project does not model them. `build/bin/v4_cache` rebuilds the per-token figure from live
// caches at the full 43-layer map and shows the window replay bit for bit.

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {
        NB_RUN(cell_layer_map),  NB_RUN(cell_rows),      NB_RUN(cell_shapes),
        NB_RUN(cell_compressor), NB_RUN(cell_windows),   NB_RUN(cell_pooling),
        NB_RUN(cell_sinks),      NB_RUN(cell_toy_stack), NB_RUN(cell_counts)};
    static const char *const figures[] = {"layer_map", "csa_pooling", "compression_windows", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
