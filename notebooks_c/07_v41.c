// %% [markdown]
// # Chapter 7 · V4.1: CSA2, Full/Reindex/Reuse layers, the hierarchical indexer and the 4-bit cache
//
// V4-Flash still wrote a compressed cache in 41 of its 43 layers. DeepSeek-V4.1 writes one in four
// of its 40: a few "KV source" layers compress (M = 2 in the encoder half, M = 1 in the decoder
// half) and the other layers read their entries, re-scoring them with an indexer of their own or
// reusing another layer's picks. The entries themselves drop to 4 bits. This notebook reads the
// V4.1-Flash layer map and draws it, prices the 890-byte token, prints the parameter counts of one
// layer from the config, counts the indexer's work, runs the toy V4.1 stack through both of its
// paths, checks the FP4 range bound, and then serves the toy the V4.1 way: early exit, replay, and
// a prefix-cache file without window rows. Two mechanisms are built here in plain C and checked
// against the reference: the layer selection (which layer is Full, Reindex or Reuse, and which
// layers it reads) and the early exit (where a prefill stops).
//
// Cells that compute define an `NB_CELL` function; the last cell runs them.
// `build/bin/nb_07 --step` walks it cell by cell.

// %%
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "v41_ced.h"
#include "ch07_toy.h"
#include "config.h"
#include "v41_stack.h"
#include "draw_compare.h"
#include "draw_v41.h"
#include "element.h"
#include "kvtable.h"
#include "nb.h"
#include "params.h"
#include "prefix_cache.h"
#include "rng.h"
#include "rows.h"
#include "svg.h"

// %% [markdown]
// ## Selecting the layers: the latest-source rule
//
// Two lists in the config decide every layer: $\mathcal{K}$ = `kv_source_layers` (layers that
// compress and store entries) and $\mathcal{I}$ = `index_source_layers` (layers that run an
// indexer), with $\mathcal{K} \subseteq \mathcal{I}$. A layer $\ell$ whose compress ratio $M_\ell$
// is 0 keeps only its window. Every other layer is
//
// - Full if $\ell \in \mathcal{K}$: it compresses, stores and scans its own entries;
// - Reindex if $\ell \in \mathcal{I} \setminus \mathcal{K}$: it re-scores another layer's entries
//   with its own index queries, inside layer 20's candidate pool;
// - Reuse otherwise: another layer's entries and another layer's picks, no indexer at all.
//
// The layers it reads are the latest sources at or before it:
//
// $$\mathrm{kv}(\ell) = \max\,\{k \in \mathcal{K} : k \le \ell\}, \qquad
//     \mathrm{ix}(\ell) = \max\,\{k \in \mathcal{I} : k \le \ell\}$$
//
// so a Full layer reads itself twice and a Reindex layer reads its own top-k. The cell builds the
// map of V4.1-Flash from the raw lists and holds it equal to the one `ref/core/config` derives.

// %%
#define V41_CONFIG "ref/configs/deepseek-v4.1-flash.json"

/* the latest listed layer k <= l, -1 if none */
static int latest(const unsigned char *listed, size_t l)
{
    for (size_t k = l + 1; k-- > 0;)
        if (listed[k]) return (int)k;
    return -1;
}

/* layer l's mode, ratio, KV source kv(l) and index source ix(l) */
static kvl_layer select_layer(const nb07_lists *t, size_t l)
{
    if (t->ratio[l] == 0) return (kvl_layer){KVL_LAYER_WINDOW, 0, -1, -1};
    const kvl_layer_kind kind = t->kv[l]   ? KVL_LAYER_FULL
                                : t->ix[l] ? KVL_LAYER_REINDEX
                                           : KVL_LAYER_REUSE;
    return (kvl_layer){kind, t->ratio[l], latest(t->kv, l), latest(t->ix, l)};
}

// %%
/* "KV source 2 <- layers 3-7": the layers after k that read source k (kv: its entries, else its
 * top-k) */
static void print_readers(const kvl_layer *map, size_t L, size_t k, int kv)
{
    size_t first = 0, last = 0;
    for (size_t l = k + 1; l < L; l++)
        if ((kv ? map[l].kv_source : map[l].index_source) == (int)k)
            last = l, first = first ? first : l;
    if (first)
        printf("  %s source %2zu <- layers %zu-%zu\n", kv ? "KV   " : "index", k, first, last);
}

static kvl_layer v41_map[NB07_MAX_LAYERS];   /* the map built here; the early-exit cell reads it */
static size_t v41_layers;

NB_CELL(cell_select)
{
    nb07_lists t;
    kvl_model m;
    int rc = nb07_read_lists(&t, nb_path(V41_CONFIG));
    if (rc != KVL_OK) return rc;
    v41_layers = t.n_layers;
    for (size_t l = 0; l < t.n_layers; l++) v41_map[l] = select_layer(&t, l);
    for (size_t k = 0; k < t.n_layers; k++) {
        if (t.kv[k]) print_readers(v41_map, t.n_layers, k, 1);
        if (t.ix[k]) print_readers(v41_map, t.n_layers, k, 0);
    }
    rc = kvl_model_load(&m, nb_path(V41_CONFIG));
    if (rc != KVL_OK) return rc;
    rc = nb_expect(m.n_layers == t.n_layers, "%zu layers, ref/core/config %zu", t.n_layers,
                   m.n_layers);
    if (rc == KVL_OK) rc = nb07_check_map(v41_map, m.layers, t.n_layers);
    kvl_model_free(&m);
    return rc;
}

// %% [markdown]
// ## The layer modes
//
// The same map as `ref/core/config` loads it, counted by mode and drawn.

// %%
enum { N_MODES = 4 };
static const kvl_layer_kind MODES[N_MODES] = {KVL_LAYER_WINDOW, KVL_LAYER_FULL, KVL_LAYER_REINDEX,
                                              KVL_LAYER_REUSE};

/* n[N_MODES]: layers of each mode in MODES order */
static void count_modes(size_t *n, const kvl_model *m)
{
    for (size_t k = 0; k < N_MODES; k++) n[k] = 0;
    for (size_t l = 0; l < m->n_layers; l++)
        for (size_t k = 0; k < N_MODES; k++) n[k] += m->layers[l].kind == MODES[k];
}

static void print_layers_of(const kvl_model *m, kvl_layer_kind kind)
{
    for (size_t l = 0; l < m->n_layers; l++)
        if (m->layers[l].kind == kind) printf(" %zu", l);
    printf("\n");
}

NB_CELL(cell_modes)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path(V41_CONFIG));
    if (rc != KVL_OK) return rc;
    size_t n[N_MODES];
    count_modes(n, &m);
    printf("%s: %zu layers = %zu window-only + %zu Full + %zu Reindex + %zu Reuse\n", m.name,
           m.n_layers, n[0], n[1], n[2], n[3]);
    for (size_t k = 0; k < 3; k++) {
        printf("%-8s layers:", v41_mode_name(MODES[k]));
        print_layers_of(&m, MODES[k]);
    }
    size_t first[3] = {0}, last[3] = {0}, seen[3] = {0};   /* per ratio 0, 2, 1: the layer range */
    for (size_t l = 0; l < m.n_layers; l++) {
        const size_t M = m.layers[l].compress_ratio, r = M == 0 ? 0 : M == 2 ? 1 : 2;
        if (M > 2) return nb_expect(0, "layer %zu has ratio %zu", l, M);
        if (!seen[r]++) first[r] = l;
        last[r] = l;
    }
    printf(
        "compress ratios: 0 at layers %zu-%zu, 2 at %zu-%zu, 1 at %zu-%zu (encoder 0-19 is not all M = 2)\n",
        first[0], last[0], first[1], last[1], first[2], last[2]);
    printf(
        "neither KV nor index source: %zu - %zu window-only - %zu Full - %zu Reindex = %zu Reuse layers "
        "(%zu - 2 - 4 - 8 = %zu subtracts the Full layers twice: they are in both lists)\n",
        m.n_layers, n[0], n[1], n[2], n[3], m.n_layers, m.n_layers - 2 - 4 - 8);
    printf("layers writing a per-token cache: %zu (V4-Flash: 21 CSA + 20 HCA = 41)\n", n[1]);
    printf(
        "candidate pool: layer %zu publishes its top %s blocks of %zu = %s positions (1/%s of 1M = 2^20)\n",
        m.candidate_source_layer, nb_num((double)m.candidate_topk_blocks, 0),
        m.candidate_block_size,
        nb_num((double)(m.candidate_topk_blocks * m.candidate_block_size), 0),
        nb_num(1048576.0 / (double)(m.candidate_topk_blocks * m.candidate_block_size), 0));
    rc = nb_expect(n[0] == 2 && n[1] == 4 && n[2] == 4 && n[3] == 30, "modes %zu/%zu/%zu/%zu", n[0],
                   n[1], n[2], n[3]);
    if (rc == KVL_OK) rc = nb07_draw_modes(m.layers, m.n_layers);
    kvl_model_free(&m);
    return rc;
}

// %% [markdown]
// ## What a token costs
//
// Only the four Full layers store anything per token, each $1/M_\ell$ entries:
//
// $$\sum_{\ell \in \mathcal{K}} \frac{1}{M_\ell}
//     = \tfrac{1}{2} + \tfrac{1}{2} + \tfrac{1}{2} + \tfrac{1}{1}
//     = 2.5 \text{ entries per token.}$$
//
// An entry is a 288-byte FP4 main row ($512 \times \frac{1}{2}$ bytes of E2M1 and one E4M3 scale
// per 16: $256 + 32$) and V4's 68-byte MXFP4 index key. The window rows (FP8, $512 + 16 = 528$
// bytes: 512 E4M3 and one E8M0 scale per 32) are kept per sequence, $W = 128$ per layer, in all 40
// layers.

// %%
NB_CELL(cell_bytes)
{
    kvl_model m, v4;
    kvl_kv_footprint f, f4;
    int rc = kvl_model_load(&m, nb_path(V41_CONFIG));
    if (rc != KVL_OK) return rc;
    rc = kvl_model_load(&v4, nb_path("ref/configs/deepseek-v4-flash.json"));
    if (rc != KVL_OK) {
        kvl_model_free(&m);
        return rc;
    }
    rc = kvl_kv_footprint_of(&f, &m);
    if (rc == KVL_OK) rc = kvl_kv_footprint_of(&f4, &v4);
    const double main_row = (double)kvf_row_bytes(KVF_ROW_V41_MAIN),
                 key = (double)kvf_row_bytes(KVF_ROW_V4_INDEX);
    const double win = (double)kvf_row_bytes(KVF_ROW_V41_WINDOW);
    double entries = 0;
    for (size_t l = 0; l < m.n_layers && rc == KVL_OK; l++) {
        if (!kvl_layer_writes_cache(&m, l)) continue;
        const double M = (double)m.layers[l].compress_ratio;
        printf("layer %2zu (M %g): (%g + %g)/%g = %g B/token\n", l, M, main_row, key, M,
               (main_row + key) / M);
        entries += 1 / M;
    }
    if (rc == KVL_OK) {
        const double total = entries * (main_row + key),
                     fp8 = entries * (kvf_row_bytes(KVF_ROW_V4_MAIN) + key);
        printf(
            "main row 512 x 0.5 + 32 E4M3 scales = %g B; window row 512 + 16 E8M0 scales = %g B\n",
            main_row, win);
        printf("%g entries x (%g + %g) = %s B/token (ref/kvtable: %s)\n", entries, main_row, key,
               nb_num(total, 2), nb_num(f.bytes_per_token, 2));
        printf(
            "against V4-Flash %s B/token: %.1f%%, %.2fx smaller; V4-Flash adds %s entries per token "
            "(21 x 1/4 + 20 x 1/128)\n",
            nb_num(f4.bytes_per_token, 2), 100 * total / f4.bytes_per_token,
            f4.bytes_per_token / total, nb_num(f4.entries_per_token, 5));
        printf(
            "with V4's 584-byte FP8 row instead: 2.5 x (584 + 68) = %s B/token, %.2fx the report's\n",
            nb_num(fp8, 0), fp8 / total);
        printf("window: %zu x %zu x %g = %s B per sequence (%.2f MiB), whatever the context\n",
               m.n_layers, m.window, win, nb_num((double)f.window_bytes_per_sequence, 0),
               (double)f.window_bytes_per_sequence / 1048576);
        rc = nb_expect(total == f.bytes_per_token && total == 890, "890 expected, the map gives %g",
                       total);
    }
    kvl_model_free(&m);
    kvl_model_free(&v4);
    return rc;
}

// %% [markdown]
// ## One layer's parameters, from the config
//
// A Reindex layer (layer 24, say) holds 132,024,128 weights, counted step by step. Every count
// below is the config's widths multiplied out: query latent $W_{DQ}$ plus its norm gain
// ($d D_q + D_q$), the query heads $W_{UQ}$ ($D_q H D_h$), the window's $W_{KV}$ plus gain
// ($d D_h + D_h$), the indexer's $W_{IQ}$ and head weights $W_{IW}$ ($D_q H_I D_I + d H_I$; a
// Reindex layer has no key projection: it reads layer 20's keys), one sink per head ($H$), and the
// grouped output $W_{OA}$ in $G = 8$ blocks and $W_{OB}$ ($G D_o \frac{H}{G} D_h + d G D_o$). The
// other modes differ only in the indexer and compressor rows. The counts should equal the element
// counts of the checkpoint's tensors; no checkpoint is read here, so that is not checked, and what
// the tests check is that these products are what `ref/v41` allocates.
//
// DeepSeek-V4.1-Flash's inference code keeps $W_{OA}$ (`wo_a`) in bf16 where the other large
// matrices are FP8: its conversion dequantises it, and its comment notes that an FP8 grouped
// product would halve that memory. The last line prints what that is per layer.

// %%
NB_CELL(cell_params)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path(V41_CONFIG));
    if (rc != KVL_OK) return rc;
    const double d = (double)m.d, Dq = (double)m.q_lora_rank, H = (double)m.n_heads,
                 Dh = (double)m.head_dim;
    const double HI = (double)m.index_n_heads, DI = (double)m.index_head_dim,
                 G = (double)m.o_groups;
    const double Do = (double)m.o_lora_rank;
    const double q_latent = d * Dq + Dq, q_heads = Dq * H * Dh, window = d * Dh + Dh,
                 indexer = Dq * HI * DI + d * HI;
    const double sinks = H, output = G * Do * (H / G * Dh) + d * G * Do;
    const double reindex = q_latent + q_heads + window + indexer + sinks + output;
    const double reuse = reindex - indexer, keys = DI * Dh + DI;      /* W_IK and its gain */
    const double full2 = reindex + 2 * d * Dh + Dh + keys,
                 full1 = reindex + d * Dh + Dh + keys; /* W_C (, W_Z), gain */
    printf(
        "query compression %s, query heads %s, window %s, indexer %s, sinks %s, grouped output %s\n",
        nb_num(q_latent, 0), nb_num(q_heads, 0), nb_num(window, 0), nb_num(indexer, 0),
        nb_num(sinks, 0), nb_num(output, 0));
    printf("Reindex layer: %s parameters; x 4 Reindex layers = %s\n", nb_num(reindex, 0),
           nb_num(4 * reindex, 0));
    printf(
        "Reuse and window-only layers %s; Full layers %s (M 2: W_C and W_Z) and %s (M 1: W_C only)\n",
        nb_num(reuse, 0), nb_num(full2, 0), nb_num(full1, 0));
    printf("scales: indexer weights / sqrt(%g x %g) = 1/%g; attention scores / sqrt(%g) = 1/%.2f\n",
           DI, HI, sqrt(DI * HI), Dh, sqrt(Dh));
    const double wo_a = G * Do * (H / G * Dh), MiB = 1024.0 * 1024.0;
    printf("W_OA (wo_a): %s weights per layer; in bf16 %s MiB, in FP8 %s MiB plus its scales\n",
           nb_num(wo_a, 0), nb_num(wo_a * kvf_element_bits(KVF_BF16) / 8 / MiB, 0),
           nb_num(wo_a * kvf_element_bits(KVF_E4M3) / 8 / MiB, 0));
    const kvl_rope_config *plain = &m.rope, *comp = &m.compress_rope;
    printf("rotary tables: ratio-0 layers theta %s, %s; compressing layers theta %s, YaRN factor "
           "%g over %s original positions, beta %g/%g\n",
           nb_num(plain->theta, 0), plain->factor > 1 ? "with YaRN" : "no YaRN",
           nb_num(comp->theta, 0), comp->factor, nb_num(comp->original_len, 0), comp->beta_fast,
           comp->beta_slow);
    kvl_params p;
    rc = kvl_params_of(&p, &m);
    if (rc == KVL_OK)
        printf("parameters (ref/params.h): backbone %sB, active for one decoded token %sB\n",
               nb_num((double)p.backbone / 1e9, 1), nb_num((double)p.active / 1e9, 1));
    kvl_model_free(&m);
    if (rc != KVL_OK) return rc;
    return nb_expect(reindex == 132024128, "the Reindex count is %.0f", reindex);
}

// %% [markdown]
// ## The indexer's work
//
// A Full layer scans every visible entry of its own: $\lfloor (t+1)/2 \rfloor$ in layers 2, 8 and
// 14, $t + 1$ in layer 20. A Reindex layer scores only layer 20's candidate pool, at most 2,048
// blocks of 8 = 16,384 positions, whatever the context. Per query the indexers therefore score
//
// $$3 \cdot \frac{T}{2} + T + 4 \min(T,\ 16384)$$
//
// linear in $T$ for the four scans, constant for the four deeper indexers. The claim that only "one
// full scan" remains at 1M forgets the encoder's three Full layers.

// %%
NB_CELL(cell_work)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path(V41_CONFIG));
    if (rc != KVL_OK) return rc;
    const double pool = (double)(m.candidate_topk_blocks * m.candidate_block_size);
    static const double Ts[] = {4096, 131072, 1048576};
    for (size_t i = 0; i < 3; i++) {
        const double T = Ts[i];
        double scan = 0, bounded = 0;
        for (size_t l = 0; l < m.n_layers; l++) {
            const kvl_layer *y = &m.layers[l];
            if (y->kind == KVL_LAYER_FULL) scan += floor(T / (double)y->compress_ratio);
            if (y->kind == KVL_LAYER_REINDEX) bounded += fmin(T, pool);
        }
        printf("T %9s: Full scans %s + Reindex %s = %s scores per query (without the pool: %s)\n",
               nb_num(T, 0), nb_num(scan, 0), nb_num(bounded, 0), nb_num(scan + bounded, 0),
               nb_num(scan + 4 * T, 0));
    }
    printf("at 1M: 3 x T/2 + T + 4 x %s = 2.5T + %s\n", nb_num(pool, 0), nb_num(4 * pool, 0));
    kvl_model_free(&m);
    return KVL_OK;
}

// %% [markdown]
// ## The toy V4.1 stack
//
// The toy of `tests/ch07_toy.h`: d 64, H 4, Dh 32, Dr 8, W 8, HI 4, DI 16, K 3, 10 layers with
// ratios [0, 0, 2, 2, 2, 1, 1, 1, 1, 1], KV sources 2 and 5, index sources 2, 5, 7 and 9, and layer
// 5 publishing a pool of 2 blocks of 4 positions. It runs 45 tokens through `v41_stack_forward`
// (the whole-sequence definition) and through `v41_stack_prefill` of 20 tokens plus 25 decode
// steps over a float32 cache; then one more query counts the scores each indexer evaluates.

// %%
enum { TOY_T = 45, TOY_D = 64, TOY_PREFILL = 20 };

/* fwd[T][d] from the forward, inc[T][d] from prefill + decode, last[L] the scores each layer
 * evaluated for the last query; w is drawn here */
static int toy_run(float *fwd, float *inc, uint64_t *last, const v41_stack_config *s,
                   v41_stack_weights *w)
{
    static float x[TOY_T * TOY_D];
    kvl_rng rng;
    kvl_rng_seed(&rng, 71);
    int rc = v41_stack_weights_init_random(w, s, &rng);
    if (rc != KVL_OK) return rc;
    kvl_rng_normal_f32(&rng, x, TOY_T * TOY_D, 1.0);
    rc = v41_stack_forward(fwd, NULL, NULL, s, w, x, TOY_T);
    v41_cache c;
    if (rc == KVL_OK) rc = v41_cache_init(&c, s, TOY_T, V41_CACHE_F32);
    if (rc != KVL_OK) return rc;
    rc = v41_stack_prefill(inc, NULL, s, w, &c, x, TOY_PREFILL);
    for (size_t t = TOY_PREFILL; t < TOY_T && rc == KVL_OK; t++) {
        if (t + 1 == TOY_T) memcpy(last, c.scored, s->n_layers * sizeof *last);
        rc = v41_stack_decode(inc + t * TOY_D, s, w, &c, x + t * TOY_D);
    }
    for (size_t l = 0; l < s->n_layers; l++) last[l] = c.scored[l] - last[l];
    v41_cache_free(&c);
    return rc;
}

NB_CELL(cell_toy_stack)
{
    static float fwd[TOY_T * TOY_D], inc[TOY_T * TOY_D];
    uint64_t last[16];
    kvl_model m;
    v41_stack_config s;
    v41_stack_weights w;
    memset(&w, 0, sizeof w);
    int rc = ch07_toy_model(&m);
    if (rc != KVL_OK) return rc;
    rc = v41_stack_config_from_model(&s, &m);
    kvl_model_free(&m);
    if (rc != KVL_OK) return rc;
    rc = nb_expect(s.n_layers <= 16, "%zu layers", s.n_layers);
    if (rc == KVL_OK) rc = toy_run(fwd, inc, last, &s, &w);
    if (rc == KVL_OK) {
        double scale;
        const double diff = nbc_max_diff(inc, fwd, TOY_T * TOY_D, &scale);
        printf("layers:");
        for (size_t l = 0; l < s.n_layers; l++)
            printf(" %zu:%s", l, v41_mode_name(s.layers[l].kind));
        char close[160];
        /* the float32 paths differ only by summation order: the decode tests' PATH_ATOL scaled
         * to the outputs */
        const int within = nbc_describe(close, sizeof close, diff, fmax(1, scale), 2e-4);
        printf("\nprefill %d + decode %d against the forward: %s\n", TOY_PREFILL,
               TOY_T - TOY_PREFILL, close);
        printf("query %d: scores evaluated per layer:", TOY_T - 1);
        for (size_t l = 0; l < s.n_layers; l++) printf(" %llu", (unsigned long long)last[l]);
        printf(
            "\n  Full 2 scans floor(45/2) = 22, Full 5 scans 45, Reindex 7 and 9 score only the pool (at most %zu x %zu = %zu)\n",
            s.pool_blocks, s.pool_block, s.pool_blocks * s.pool_block);
        rc = nb_expect(within, "the cached path against the forward: %s", close);
        if (rc == KVL_OK)
            rc = nb_expect(last[2] == 22 && last[5] == 45 && last[7] <= 8 && last[9] <= 8 &&
                               last[3] == 0,
                           "scores per layer: %llu %llu %llu %llu", (unsigned long long)last[2],
                           (unsigned long long)last[5], (unsigned long long)last[7],
                           (unsigned long long)last[9]);
    }
    v41_stack_weights_free(&w);
    v41_stack_config_free(&s);
    return rc;
}

// %% [markdown]
// ## Why E2M1 with an E4M3 scale is enough
//
// A main entry is RMS-normalised before it is stored, and RoPE only rotates channel pairs, so with
// a gain of 1 its L2 norm is exactly
// $\lVert \mathrm{RMSNorm}(v) \rVert_2 = \sqrt{512} \approx 22.627$: no channel can exceed that,
// and a one-hot latent reaches it. The largest value the format can hold is E4M3's 448 times E2M1's
// 6, $448 \times 6 = 2688$: about $2688 / 22.627 \approx 119\times$ of headroom. The cell packs a
// normalised random latent and the one-hot extreme into the 288-byte row and measures what comes
// back.

// %%
NB_CELL(cell_fp4)
{
    enum { N = KVF_V41_DIM };
    float v[N], back[N];
    uint8_t row[512];   /* one v41-main row (288 B) fits */
    kvl_rng rng;
    kvl_rng_seed(&rng, 5);
    kvl_rng_normal_f32(&rng, v, N, 1.0);
    double ss = 0;
    for (size_t i = 0; i < N; i++) ss += (double)v[i] * v[i];
    const double rms = sqrt(ss / N);
    for (size_t i = 0; i < N; i++) v[i] = (float)(v[i] / rms);
    int rc = kvf_row_pack(KVF_ROW_V41_MAIN, row, v);
    if (rc == 0) rc = kvf_row_unpack(KVF_ROW_V41_MAIN, back, row);
    if (rc != 0) return nb_expect(0, "v41-main pack/unpack failed (%d)", rc);
    double num = 0, den = 0, amax = 0;
    for (size_t i = 0; i < N; i++) {
        num += ((double)back[i] - v[i]) * ((double)back[i] - v[i]);
        den += (double)v[i] * v[i];
        amax = fmax(amax, fabs((double)v[i]));
    }
    const double scale_max = kvf_element_max(KVF_E4M3), element_max = kvf_element_max(KVF_E2M1);
    printf("bound: ||RMSNorm(v)|| = sqrt(%d) = %.3f; format range %s x %s = %s, headroom %.0fx\n",
           N, sqrt(N), nb_num(scale_max, 6), nb_num(element_max, 6),
           nb_num(scale_max * element_max, 6), scale_max * element_max / sqrt(N));
    printf("normalised random latent: max |v| %.3f, FP4 relative L2 error %.4f\n", amax,
           sqrt(num / den));
    memset(v, 0, sizeof v);
    v[7] = (float)sqrt(N);
    rc = kvf_row_pack(KVF_ROW_V41_MAIN, row, v);
    if (rc == 0) rc = kvf_row_unpack(KVF_ROW_V41_MAIN, back, row);
    if (rc != 0) return nb_expect(0, "v41-main pack/unpack failed (%d)", rc);
    printf("one-hot latent at the bound: %.3f stored as %.3f\n", v[7], back[7]);
    return nb_expect(fabs((double)back[7] - v[7]) <= 0.25 * v[7],
                     "the one-hot value came back as %g", back[7]);
}

// %% [markdown]
// ## The causal encoder–decoder: an early exit that loses nothing
//
// The report splits the $L$ layers into an encoder, layers $0 \dots E - 1$ with $E = L/2$, and a
// decoder. The decoder's only KV source, its first layer (20 of 40; 5 of the toy's 10), takes the
// encoder's output $h_{\mathrm{enc}}$ as its input, so a prefill can stop there: run the encoder,
// then feed that one layer's compressor and index-key projection $h_{\mathrm{enc}}$, and every
// global entry of the decoder exists. That holds exactly when no later decoder layer is a KV
// source:
//
// $$\{k \in \mathcal{K} : k > E\} = \varnothing.$$
//
// A layer's parameters split by role,
// $P_\ell = d + P^{\mathrm{core}}_\ell + P^{C}_\ell + P^{IK}_\ell + P^{IQ}_\ell$ (pre-norm gain,
// attention core, compressor, index keys, index queries). A full prefill reads $\sum_\ell P_\ell$
// per prompt token; the early exit reads
//
// $$\sum_{\ell < E} P_\ell
//     \; + \sum_{\ell \ge E,\ \ell \in \mathcal{K}} \left(d + P^{C}_\ell + P^{IK}_\ell\right).$$
//
// These are attention-side weights only (no MoE, no embeddings): the model card's "active
// parameters" (8B in prefill, 16B in decode) count the routed experts too, far more. The cell
// decides the exit on the map built above, counts its weights, and checks both against
// `ref/v41_ced`; then it moves a KV source into the decoder's middle, where the exit must be
// refused. The figure is the map with its sources and the split.

// %%
/* a prefill may stop after the encoder: no KV source after layer E = L/2 */
static int can_exit_early(const kvl_layer *map, size_t L)
{
    for (size_t l = L / 2 + 1; l < L; l++)
        if (map[l].kind == KVL_LAYER_FULL) return 0;
    return 1;
}

/* parameters per prompt token of a prefill that stops after the encoder */
static uint64_t early_exit_params(const v41_stack_config *s, const kvl_layer *map)
{
    uint64_t n = 0;
    for (size_t l = 0; l < s->n_layers; l++) {
        const v41_params p = v41_layer_params(&s->layers[l]);
        if (l < s->n_layers / 2) n += s->d + p.core + p.compressor + p.index_keys + p.index_query;
        else if (map[l].kind == KVL_LAYER_FULL)
            n += s->d + p.compressor + p.index_keys; /* its entries only */
    }
    return n;
}

// %%
NB_CELL(cell_exit_rule)
{
    kvl_model m;
    v41_stack_config s;
    int rc = kvl_model_load(&m, nb_path(V41_CONFIG));
    if (rc != KVL_OK) return rc;
    rc = v41_stack_config_from_model(&s, &m);
    kvl_model_free(&m);
    if (rc != KVL_OK) return rc;
    const size_t L = v41_layers, E = L / 2;
    v41_ced_work full, ref;
    v41_ced_prefill_work(&full, &ref, &s);
    const uint64_t built = early_exit_params(&s, v41_map);
    const int exits = can_exit_early(v41_map, L), ref_exits = v41_ced_check(&s) == KVL_OK;
    printf("encoder layers 0-%zu, decoder %zu-%zu; early exit possible: %s (ref/v41_ced: %s)\n",
           E - 1, E, L - 1, exits ? "yes" : "no", ref_exits ? "yes" : "no");
    printf(
        "early exit reads %s attention-side parameters per prompt token, ref/v41_ced %s: difference %s\n",
        nb_num((double)built, 0), nb_num((double)ref.params, 0),
        nb_num((double)built - (double)ref.params, 0));
    rc = nb_expect(exits == ref_exits && built == ref.params && s.n_encoder == E,
                   "the early exit differs from ref/v41_ced");
    if (rc == KVL_OK) rc = nb07_draw_sources("V4.1-Flash", v41_map, L, E);
    if (rc == KVL_OK) {
        kvl_layer moved[NB07_MAX_LAYERS];
        memcpy(moved, v41_map, L * sizeof *moved);
        moved[30].kind = s.layers[30].kind = KVL_LAYER_FULL;   /* layer 30 a KV source too */
        const int moved_exits = can_exit_early(moved, L), moved_ref = v41_ced_check(&s) == KVL_OK;
        printf("with layer 30 a KV source too: early exit possible: %s (ref/v41_ced: %s)\n",
               moved_exits ? "yes" : "no", moved_ref ? "yes" : "no");
        rc = nb_expect(!moved_exits && !moved_ref, "a decoder KV source at 30 was not refused");
    }
    v41_stack_config_free(&s);
    return rc;
}

// %% [markdown]
// `v41_ced_prefill` is the early exit on a cache. The next cell checks on the toy that the entries,
// index keys and compressor tails it leaves are the full prefill's to the bit, and counts the work
// per prompt token at V4.1-Flash's real widths.

// %%
enum {
    RP_P = 100,
    RP_T = RP_P + 1
}; /* the replay cells' prompt: 12 toy windows, past L·(W − 1) = 70 */

typedef struct {
    v41_stack_config s;
    v41_stack_weights w;
    float x[RP_T * TOY_D];
} replay_toy;

static int replay_toy_make(replay_toy *t)
{
    kvl_model m;
    memset(t, 0, sizeof *t);
    int rc = ch07_toy_model(&m);
    if (rc != KVL_OK) return rc;
    rc = v41_stack_config_from_model(&t->s, &m);
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, 72);
    if (rc == KVL_OK) rc = v41_stack_weights_init_random(&t->w, &t->s, &rng);
    if (rc == KVL_OK) kvl_rng_normal_f32(&rng, t->x, RP_T * TOY_D, 1.0);
    return rc;
}

static void replay_toy_free(replay_toy *t)
{
    v41_stack_weights_free(&t->w);
    v41_stack_config_free(&t->s);
}

/* c ← the prompt prefilled in chunks [0, split) and [split, P) (0: one chunk). */
static int prefill_split(v41_cache *c, const replay_toy *t, size_t split)
{
    static float out[RP_P * TOY_D];
    int rc = v41_cache_init(c, &t->s, RP_T, V41_CACHE_F32);
    if (rc == KVL_OK && split) rc = v41_stack_prefill(out, NULL, &t->s, &t->w, c, t->x, split);
    if (rc == KVL_OK)
        rc = v41_stack_prefill(out, NULL, &t->s, &t->w, c, t->x + split * TOY_D, RP_P - split);
    return rc;
}

static int rows_identical(const v4_rows *a, const v4_rows *b)
{
    return a->len == b->len && !memcmp(a->bytes, b->bytes, v4_rows_bytes_used(a));
}

NB_CELL(cell_early_exit)
{
    static replay_toy t;
    static float h_enc[RP_P * TOY_D];
    v41_cache full = {0}, early = {0};
    int rc = replay_toy_make(&t);
    if (rc == KVL_OK) rc = prefill_split(&full, &t, 0);
    if (rc == KVL_OK) rc = v41_cache_init(&early, &t.s, RP_T, V41_CACHE_F32);
    if (rc == KVL_OK) rc = v41_ced_prefill(h_enc, &t.s, &t.w, &early, t.x, RP_P);
    size_t same = 0, sources = 0;
    for (size_t l = 0; l < t.s.n_layers && rc == KVL_OK; l++) {
        if (t.s.layers[l].kind != KVL_LAYER_FULL) continue;
        sources++;
        same +=
            rows_identical(&early.entries[l], &full.entries[l]) &&
            rows_identical(&early.keys[l], &full.keys[l]) &&
            !memcmp(early.state[l].a, full.state[l].a, v41_compressor_state_bytes(&full.state[l]));
        printf("KV source %zu (%s): %zu entries, identical to the full prefill's: %s\n", l,
               l < t.s.n_encoder ? "encoder" : "decoder", early.entries[l].len,
               same == sources ? "yes" : "no");
    }
    if (rc == KVL_OK)
        rc = nb_expect(same == sources && sources == 2, "%zu of %zu sources identical", same,
                       sources);
    kvl_model m;
    v41_stack_config real = {0};
    if (rc == KVL_OK) rc = kvl_model_load(&m, nb_path(V41_CONFIG));
    if (rc == KVL_OK) {
        rc = v41_stack_config_from_model(&real, &m);
        kvl_model_free(&m);
    }
    if (rc == KVL_OK) {
        v41_ced_work full_w, early_w;
        v41_ced_prefill_work(&full_w, &early_w, &real);
        printf(
            "V4.1-Flash, per prompt token: full prefill %zu layers, %s attention-side parameters; early exit %zu "
            "layers, %s (%.3f)\n",
            full_w.layers, nb_num((double)full_w.params, 0), early_w.layers,
            nb_num((double)early_w.params, 0), (double)early_w.params / full_w.params);
    }
    v41_stack_config_free(&real);
    v41_cache_free(&full);
    v41_cache_free(&early);
    replay_toy_free(&t);
    return rc;
}

// %% [markdown]
// ## Replay: exact from L·(W − 1) tokens, bounded from W
//
// The early exit leaves the decoder without window rows, and a prefix-cache hit (below) leaves
// every layer without them. Replay rebuilds them: the prompt's last tokens, from a start $s$, run
// through the layers with every window cut at $s$, so query $i$ sees rows
// $[\max(s,\ i - W + 1),\ i]$, while the global entries, index keys and compressor tails are read
// as they are. Layer $\ell$'s rows come out exact from $s + \ell (W - 1)$ on, so every window the
// next token reads is exact when
//
// $$s \le P - L (W - 1).$$
//
// Bounded replay takes only the last $W$ tokens, $s = P - W$. The cell replays the toy's prompt
// from the exact start and from later starts, one window at a time, and measures the next token's
// output against the full run. The weights are random: nothing trained makes the far tokens'
// influence fade, so the errors show what truncation does, not what it does to V4.1. Each is shown
// to one digit, and one under $10^{-6}$ only as that: there the truncation is below float32
// rounding, whose digits depend on the machine's BLAS kernel.

// %%
/* The next token after replaying every layer from `from`, against the full run: relative error. */
static int replay_error(double *err, const replay_toy *t, size_t from)
{
    static float h[RP_P * TOY_D], want[TOY_D], got[TOY_D];
    v41_cache ref = {0}, c = {0};
    int rc = prefill_split(&ref, t, from);
    if (rc == KVL_OK) rc = prefill_split(&c, t, from);
    memcpy(h, t->x + from * TOY_D, (RP_P - from) * TOY_D * sizeof *h);
    if (rc == KVL_OK)
        rc = v41_stack_replay_layers(h, NULL, &t->s, &t->w, &c, 0, t->s.n_layers, from);
    if (rc == KVL_OK) rc = v41_stack_decode(want, &t->s, &t->w, &ref, t->x + RP_P * TOY_D);
    if (rc == KVL_OK) rc = v41_stack_decode(got, &t->s, &t->w, &c, t->x + RP_P * TOY_D);
    double e = 0, m = 0;
    for (size_t i = 0; i < TOY_D; i++) {
        e = fmax(e, fabs((double)got[i] - want[i]));
        m = fmax(m, fabs((double)want[i]));
    }
    *err = e / m;
    v41_cache_free(&ref);
    v41_cache_free(&c);
    return rc;
}

/* Below this a replay error is float32 rounding, not truncation: the difference of two runs
 * whose sums the BLAS kernel orders differently on different CPUs. */
#define REPLAY_ROUNDING 1e-6

/* err to one significant digit, or REPLAY_ROUNDING when under it: what the cell prints and
 * draws, the same on every machine */
static double replay_shown(double err)
{
    if (err < REPLAY_ROUNDING) return REPLAY_ROUNDING;
    const double p = pow(10, floor(log10(err)));
    return round(err / p) * p;
}

static void print_replay_error(double err)
{
    if (err < REPLAY_ROUNDING) printf("under %.0e (float32 rounding)\n", REPLAY_ROUNDING);
    else printf("%.1g\n", replay_shown(err));
}

NB_CELL(cell_replay)
{
    static replay_toy t;
    int rc = replay_toy_make(&t);
    const size_t L = t.s.n_layers, W = t.s.layers[0].core.window;
    const size_t exact = v41_ced_exact_replay_start(RP_P, L, W),
                 bounded = v41_ced_bounded_replay_start(RP_P, W);
    double errs[NB07_MAX_BARS], e0 = 1;
    size_t starts[NB07_MAX_BARS], n = 0;
    if (rc == KVL_OK) rc = replay_error(&e0, &t, exact);
    if (rc == KVL_OK)
        printf(
            "prompt %d, L %zu, W %zu: exact replay from %zu (%zu tokens): next-token error %.3g\n",
            RP_P, L, W, exact, RP_P - exact, e0);
    for (size_t from = exact + W - 1; from <= bounded && n + 1 < NB07_MAX_BARS && rc == KVL_OK;
         from += W - 1, n++) {
        starts[n] = from;
        rc = replay_error(&errs[n], &t, from);
        printf("  replay from %zu, %zu window(s) late: ", from, (from - exact) / (W - 1));
        print_replay_error(errs[n]);
    }
    starts[n] = bounded;
    if (rc == KVL_OK) rc = replay_error(&errs[n++], &t, bounded);
    if (rc == KVL_OK) {
        printf("bounded replay from %zu (%zu tokens, %zux fewer than the exact %zu): ", bounded, W,
               (RP_P - exact) / W, RP_P - exact);
        print_replay_error(errs[n - 1]);
    }
    for (size_t i = 0; i < n; i++) errs[i] = replay_shown(errs[i]);
    if (rc == KVL_OK) rc = nb_expect(e0 == 0, "exact replay differs from the full run by %g", e0);
    if (rc == KVL_OK) rc = nb07_draw_replay(errs, starts, n, RP_P);
    replay_toy_free(&t);
    return rc;
}

// %% [markdown]
// ## A prefix cache without window rows
//
// What V4.1 persists for a prompt is its global KV only: the KV sources' entries, index keys and
// compressor tails (`v41_prefix_save`, a versioned file with a checksum). A hit loads it into a
// fresh cache (every window empty) and replays the encoder, then the decoder, from the exact start:
// the next token is the full run's to the bit. The file's bytes are the global bytes the cache
// reports, the tails and a small frame.

// %%
NB_CELL(cell_prefix_cache)
{
    static replay_toy t;
    static float h[RP_P * TOY_D], want[TOY_D], got[TOY_D];
    char path[64];
    snprintf(path, sizeof path, "/tmp/kvl-nb07-%ld.kvp", (long)getpid());
    v41_cache full = {0}, hit = {0};
    int rc = replay_toy_make(&t);
    const size_t s = v41_ced_exact_replay_start(RP_P, t.s.n_layers, t.s.layers[0].core.window);
    if (rc == KVL_OK) rc = prefill_split(&full, &t, s);
    if (rc == KVL_OK) rc = v41_prefix_save(path, &t.s, &full);
    if (rc == KVL_OK) rc = v41_cache_init(&hit, &t.s, RP_T, V41_CACHE_F32);
    if (rc == KVL_OK) rc = v41_prefix_load(&hit, &t.s, path);
    prefix_file f = {0};
    if (rc == KVL_OK) rc = prefix_file_read(&f, path);
    remove(path);
    if (rc == KVL_OK)
        printf(
            "file: %s bytes for %d tokens = global rows %s + tails %s + frame %s; no window row\n",
            nb_num((double)f.size, 0), RP_P, nb_num((double)v41_cache_bytes_used(&full), 0),
            nb_num((double)v41_cache_state_bytes(&full), 0),
            nb_num((double)(f.size - v41_cache_bytes_used(&full) - v41_cache_state_bytes(&full)),
                   0));
    memcpy(h, t.x + s * TOY_D, (RP_P - s) * TOY_D * sizeof *h);
    if (rc == KVL_OK) rc = v41_ced_encoder_replay(h, &t.s, &t.w, &hit, s);
    if (rc == KVL_OK) rc = v41_ced_decoder_replay(h, &t.s, &t.w, &hit, s);
    if (rc == KVL_OK) rc = v41_stack_decode(want, &t.s, &t.w, &full, t.x + RP_P * TOY_D);
    if (rc == KVL_OK) rc = v41_stack_decode(got, &t.s, &t.w, &hit, t.x + RP_P * TOY_D);
    if (rc == KVL_OK) {
        const int same = !memcmp(got, want, sizeof got);
        printf(
            "hit + encoder and decoder replay from %zu: next token identical to the full run's: %s\n",
            s, same ? "yes" : "no");
        rc = nb_expect(same, "the next token after a hit differs");
    }
    prefix_file_free(&f);
    v41_cache_free(&full);
    v41_cache_free(&hit);
    replay_toy_free(&t);
    return rc;
}

// %% [markdown]
// At V4.1-Flash's size the same arithmetic. The next token reads $W - 1$ rows of each window, exact
// after a replay of $L (W - 1)$ tokens; every ring's $W$ rows and the last prompt token's output
// need one more, $L (W - 1) + 1$. The report's $n_{\mathrm{win}} L$ is enough, not the least.
// Bounded replay takes $W$.

// %%
NB_CELL(cell_replay_arithmetic)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path(V41_CONFIG));
    if (rc != KVL_OK) return rc;
    const size_t L = m.n_layers, W = m.window;
    printf(
        "exact window rebuild: n_win x L = %s tokens is enough; the minimum is L(W-1)+1 = %s for every ring's W "
        "rows and the last prompt token's output, L(W-1) = %s for the W-1 rows the next token reads (decoder "
        "only: %s)\n",
        nb_num((double)(W * L), 0), nb_num((double)(L * (W - 1) + 1), 0),
        nb_num((double)(L * (W - 1)), 0), nb_num((double)(L / 2 * (W - 1)), 0));
    printf("bounded replay: the last W = %s tokens, %.0fx fewer than n_win x L\n",
           nb_num((double)W, 0), (double)L);
    kvl_model_free(&m);
    return KVL_OK;
}

// %% [markdown]
// ## Out of scope
//
// MoE, hyper-connections, Engram, DSpark/MTP and vision change what enters an attention layer, not
// what its cache holds; the project does not model them. `build/bin/v41_cache` runs the full
// 40-layer map at the real entry widths, sets the FP4 cache against float32 and reads the bytes per
// token off live caches.

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {
        NB_RUN(cell_select), NB_RUN(cell_modes),        NB_RUN(cell_bytes),
        NB_RUN(cell_params), NB_RUN(cell_work),         NB_RUN(cell_toy_stack),
        NB_RUN(cell_fp4),    NB_RUN(cell_exit_rule),    NB_RUN(cell_early_exit),
        NB_RUN(cell_replay), NB_RUN(cell_prefix_cache), NB_RUN(cell_replay_arithmetic)};
    static const char *const figures[] = {"layer_modes", "layer_sources", "replay_error", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
