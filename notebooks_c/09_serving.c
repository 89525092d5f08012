// %% [markdown]
// # Chapter 9 · Serving arithmetic: what one GPU holds, and how many sequences fit
//
// Chapter 8 priced one token in one copy of the cache. A deployment splits the model over GPUs,
// keeps its weights beside the cache, allocates the cache in pages and keeps window rows per
// sequence. This notebook builds each of those rules in plain C, holds it to `ref/serving` (header
// `ref/serving.h`) on every config, and ends with a picture of one GPU's memory.
// `build/bin/serving` prints the same figures for any deployment.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them. `make nb-09` rebuilds
// the notebook and walks it cell by cell; change this file and run it again. The figure lives in
// `notebooks_c/draw_serving.c`.

// %%
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "draw_arithmetic.h"
#include "draw_serving.h"
#include "kvtable.h"
#include "nb.h"
#include "params.h"
#include "serving.h"

#define GIB 1073741824.0

static nb08_generation gens[NB08_MAX_MODELS];
static size_t n_gens;

// %% [markdown]
// ## What one GPU stores per token
//
// Tensor parallelism over $t$ ranks splits attention by heads. MHA/GQA's cache has a head axis: a
// rank keeps $\lceil H_{kv} / t \rceil$ KV heads (one, replicated, once $t > H_{kv}$), so its row
// is $2 \lceil H_{kv}/t \rceil D_h$ values. An MLA latent $[c^{KV}; k^R]$ is shared by every head
// and V4's entry by every query head: there is nothing to split, and every rank keeps the whole
// row. Per token a rank then stores
//
// $$B_{\text{rank}} = \sum_{\ell \in \mathcal{G}}
//     \frac{R_\ell(t) + [\ell \text{ indexes itself}]\, R_{\text{key}}}{M_\ell}.$$

// %%
/* bytes one of tp ranks stores per token of m (footprint f): each cache layer's row and key per
 * M */
static double rank_bytes_per_token(const kvl_model *m, const kvl_kv_footprint *f, size_t tp)
{
    const double heads = (double)((m->n_kv_heads + tp - 1) / tp);
    const double row = m->generation == KVL_GEN_MHA ? 2 * heads * (double)m->head_dim * 2
                                                    : (double)f->main_row_bytes;
    double b = 0;
    for (size_t l = 0; l < m->n_layers; l++) {
        if (!kvl_layer_writes_cache(m, l)) continue;
        const double key = kvl_layer_stores_index_key(m, l) ? (double)f->index_key_bytes : 0;
        b += (row + key) / (double)m->layers[l].compress_ratio;
    }
    return b;
}

NB_CELL(cell_split)
{
    int rc = nb08_load_all(gens, &n_gens);
    static const size_t tps[] = {1, 2, 4, 8, 16};
    printf("%-20s", "B/token per GPU, tp");
    for (size_t j = 0; j < 5; j++) printf(" %10zu", tps[j]);
    printf("\n");
    for (size_t i = 0; i < n_gens && rc == KVL_OK; i++) {
        printf("%-20s", gens[i].m.name);
        for (size_t j = 0; j < 5 && rc == KVL_OK; j++) {
            const kvl_deployment d = {.gpus = 16, .tp = tps[j], .page = 64};
            kvl_rank_cache r;
            rc = kvl_rank_cache_of(&r, &gens[i].m, &gens[i].kv, &d);
            const double built = rank_bytes_per_token(&gens[i].m, &gens[i].kv, tps[j]);
            printf(" %10s", nb_num(built, 2));
            if (rc == KVL_OK)
                rc = nb_expect(built == r.bytes_per_token, "%s at tp %zu: %g, ref %g",
                               gens[i].m.name, tps[j], built, r.bytes_per_token);
        }
        printf("\n");
    }
    if (rc == KVL_OK) printf("\nequal to ref/serving's at every tp, for every config\n");
    return rc;
}

// %% [markdown]
// The 67B's bytes halve with every doubling of $t$ until $t = H_{kv} = 8$, and stop there (the
// table above); the latents do not move. That is why serving engines added **data-parallel
// attention** for MLA models: each rank attends for its own sequences with whole rows, so the 8
// ranks of a node hold 8 different sets of tokens instead of 8 copies of one.
//
// ## Pages
//
// A paged cache allocates a sequence's entries in pages of $P$ entries. A layer compressing $M$
// tokens per entry holds $\lceil T/M \rceil$ entries of a $T$-token sequence, in
// $\lceil \lceil T/M \rceil / P \rceil$ pages (this project's rule: no public source states the
// page unit of a compressed layer). Window rows are a ring of $W$ rows per layer, a fixed cost per
// sequence, not paged:
//
// $$S(T) = \sum_{\ell \in \mathcal{G}}
//     \left\lceil \frac{\lceil T / M_\ell \rceil}{P} \right\rceil P
//     \,\big(R_\ell + R_{\text{key},\ell}\big)
//     + L\,W\,R_{\text{win}}.$$

// %%
/* bytes one sequence of T tokens takes on one of tp ranks of m, pages of `page` entries (tp 1:
 * whole rows, as under data-parallel attention) */
static double sequence_bytes(const kvl_model *m, const kvl_kv_footprint *f, size_t tp, size_t page,
                             size_t T)
{
    const double heads = (double)((m->n_kv_heads + tp - 1) / tp);
    const double row = m->generation == KVL_GEN_MHA ? 2 * heads * (double)m->head_dim * 2
                                                    : (double)f->main_row_bytes;
    double b = (double)f->window_bytes_per_sequence;
    for (size_t l = 0; l < m->n_layers; l++) {
        if (!kvl_layer_writes_cache(m, l)) continue;
        const size_t M = m->layers[l].compress_ratio, entries = (T + M - 1) / M;
        const double key = kvl_layer_stores_index_key(m, l) ? (double)f->index_key_bytes : 0;
        b += (double)((entries + page - 1) / page * page) * (row + key);
    }
    return b;
}

NB_CELL(cell_pages)
{
    static const size_t T[] = {1, 64, 65, 256, 257, 1000, 131072};
    const kvl_deployment d = {.gpus = 8, .tp = 8, .page = 64};
    int rc = KVL_OK;
    printf("%-20s %8s %16s %12s\n", "bytes of one sequence", "T", "on one GPU", "per token");
    for (size_t i = 0; i < n_gens && rc == KVL_OK; i++) {
        kvl_rank_cache r;
        rc = kvl_rank_cache_of(&r, &gens[i].m, &gens[i].kv, &d);
        for (size_t j = 0; j < sizeof T / sizeof *T && rc == KVL_OK; j++) {
            const double built = sequence_bytes(&gens[i].m, &gens[i].kv, d.tp, d.page, T[j]);
            const double ref = kvl_rank_sequence_bytes(&gens[i].m, &r, &d, T[j]);
            if (gens[i].m.generation >= KVL_GEN_V4)
                printf("%-20s %8s %16s %12s\n", gens[i].m.name, nb_num((double)T[j], 0),
                       nb_num(built, 0), nb_num(built / (double)T[j], 1));
            rc = nb_expect(built == ref, "%s, T %zu: %g, ref %g", gens[i].m.name, T[j], built, ref);
        }
    }
    if (rc == KVL_OK) printf("\nequal to ref/serving's for every config at every T\n");
    return rc;
}

// %% [markdown]
// V4-Flash's window is the whole of a one-token sequence and a rounding error at 131,072 tokens:
// per token it falls from millions of bytes to chapter 8's figure (the table above).
//
// ## The weights, and what fits beside them
//
// A GPU of $G$ bytes keeps a fraction $a$ for activations and holds its share of the weights $w$;
// the cache gets the rest, $G(1-a) - w$. The experts spread over every GPU of the node, the rest
// over the $t$ ranks (attention whole on each rank under data-parallel attention), each at the
// checkpoint's precision: bf16 2 bytes a weight, FP8 one byte and a 4-byte (or E8M0 1-byte) scale
// per 128 × 128 block, MXFP4 half a byte and one byte per 32. The parameter counts are
// `ref/params`'s, which the chapter's tests hold to the published totals.

// %%
/* bytes of n weights in format fmt */
static double stored(double n, kvl_weight_format fmt, int e8m0)
{
    return fmt == KVL_WEIGHTS_BF16 ? 2 * n : fmt == KVL_WEIGHTS_F32 ? 4 * n
         : fmt == KVL_WEIGHTS_FP8 ? n + n / 16384 * (e8m0 ? 1 : 4) : n / 2 + n / 32;
}

/* one GPU's weights: experts over `gpus`, the rest over tp, attention whole when dp */
static double gpu_weights(const kvl_params *p, const kvl_ffn *f, double gpus, double tp, int dp)
{
    const double kept =
        ceil((double)(p->embedding + p->head) / tp) + (double)(p->norms + p->routers);
    const double linear = (dp ? (double)p->attention : ceil((double)p->attention / tp)) +
                          ceil((double)p->dense_ffn / tp);
    const double experts =
        ceil((double)p->routed_experts / gpus) + ceil((double)p->shared_experts / gpus);
    return stored(kept, KVL_WEIGHTS_BF16, 0) + stored(linear, f->linear, f->scale_e8m0) +
           stored(experts, f->experts, f->scale_e8m0);
}

// %%
static nb09_gpu bars[NB08_MAX_MODELS];

NB_CELL(cell_fit)
{
    const double G = 141 * GIB, a = 0.1;
    const size_t T = 131072;
    int rc = KVL_OK;
    printf("8 GPUs of 141 GiB, a tenth for activations, tp 8, pages of 64, %s-token sequences\n",
           nb_num((double)T, 0));
    printf("%-20s %12s %12s %12s %12s\n", "model", "weights GiB", "cache GiB", "seqs/node tp",
           "seqs/node dp");
    for (size_t i = 0; i < n_gens && rc == KVL_OK; i++) {
        kvl_params p;
        rc = kvl_params_of(&p, &gens[i].m);
        double seqs[2] = {0, 0}, w[2] = {0, 0};
        for (int dp = 0; dp < 2 && rc == KVL_OK; dp++) {
            const kvl_deployment d = {.gpus = 8, .tp = 8, .dp_attention = dp, .page = 64};
            w[dp] = gpu_weights(&p, &gens[i].m.ffn, 8, 8, dp);
            const double ref = kvl_rank_weight_bytes(
                &p, &d, gens[i].m.ffn.linear, gens[i].m.ffn.experts, gens[i].m.ffn.scale_e8m0);
            rc = nb_expect(fabs(w[dp] - ref) <= 1e-9 * ref, "%s: weights %g, ref %g",
                           gens[i].m.name, w[dp], ref);
            kvl_rank_cache r;
            kvl_fit fit;
            if (rc == KVL_OK) rc = kvl_rank_cache_of(&r, &gens[i].m, &gens[i].kv, &d);
            if (rc == KVL_OK) rc = kvl_fit_of(&fit, &gens[i].m, &r, &d, G * (1 - a) - w[dp], T);
            const double one = sequence_bytes(&gens[i].m, &gens[i].kv, dp ? 1 : 8, 64, T);
            seqs[dp] = floor((G * (1 - a) - w[dp]) / one) *
                       (dp ? 8 : 1); /* dp: 8 ranks, 8 sets of tokens */
            if (rc == KVL_OK)
                rc = nb_expect(seqs[dp] == fit.sequences_per_node, "%s: fit", gens[i].m.name);
        }
        printf("%-20s %12s %12s %12s %12s\n", gens[i].m.name, nb_num(w[0] / GIB, 1),
               nb_num((G * (1 - a) - w[0]) / GIB, 1), nb_num(seqs[0], 0), nb_num(seqs[1], 0));
        /* the text below: data-parallel attention costs the GQA model sequences, and gains the
         * latent models some */
        const int gqa = gens[i].m.generation == KVL_GEN_MHA;
        if (rc == KVL_OK)
            rc = nb_expect(gqa ? seqs[1] < seqs[0] : seqs[1] > seqs[0],
                           "%s: %g sequences with data-parallel attention against %g with tp",
                           gens[i].m.name, seqs[1], seqs[0]);
        bars[i] = (nb09_gpu){gens[i].m.name, w[0], G * a, G * (1 - a) - w[0], seqs[0]};
    }
    return rc;
}

// %% [markdown]
// Under data-parallel attention a rank keeps whole rows for its own sequences: the 67B's are 8
// times its split ones, so it loses sequences (18 → 8), while the latent models gain 8× less the
// room their replicated attention weights take (V3: 5 → 32).

// %% [markdown]
// ## What the engines leave
//
// vLLM and SGLang size the same node by their own code (`ref/serving.h` cites each rule). SGLang
// keeps $f = \mathrm{round}((G - r)/G, 3)$ of a card of $G$ MiB for weights and cache, $r$ a
// reserve for activations and CUDA graphs: $512 + 1.5 \cdot 8{,}192 + 1{,}024 + 2 \cdot 512 +
// 1{,}536 = 16{,}384$ MiB for an MLA model at tp 8 on an H200, and $18{,}432$ more under
// data-parallel attention. vLLM keeps $0.9\,G$ less a peak its profile run measures, stated here as
// 6 GiB. Each lays the weights out its own way (the fused projection whole on every rank; under
// data-parallel attention SGLang's embedding, and on vLLM's ranks of tensor parallelism 1 all but
// the routed experts) and rounds the pool to whole pages of its attention backend. One deployment,
// V3 on 8 H200s, FP8 weights and the dense FP8 cache row:

// %%
/* the cache one GPU of engine e gets: plain keeps a tenth for activations; vLLM's peak is 6 GiB */
static int engine_fit(const kvl_model *m, const kvl_kv_footprint *f, const kvl_params *p,
                      kvl_engine e, int dp, kvl_engine_budget *b, kvl_fit *fit, double *w)
{
    const size_t page = e == KVL_ENGINE_PLAIN ? 64 : kvl_engine_page(e, m, 9);
    const kvl_deployment d = {.gpus = 8, .tp = 8, .dp_attention = dp, .page = page, .engine = e};
    const kvl_weight_format f8 = KVL_WEIGHTS_FP8;
    *w = kvl_engine_weight_bytes(p, m, &d, f8, f8, m->ffn.scale_e8m0);
    const double G = kvl_gpu_memory_mib(KVL_GPU_H200);
    kvl_rank_cache r;
    int rc = kvl_engine_budget_of(b, &d, G, *w, 6 * GIB, 0.1, KVL_SGLANG_PREFILL_GRAPH_MLA);
    if (rc == KVL_OK) rc = kvl_rank_cache_of(&r, m, f, &d);
    if (rc == KVL_OK) rc = kvl_fit_of(fit, m, &r, &d, b->cache_bytes, 131072);
    if (rc != KVL_OK) return rc;
    /* the pool: whole pages for an engine, floor(cache / B/token) tokens for the plain rule */
    const double tokens = floor(b->cache_bytes / r.bytes_per_token);
    const double pooled =
        e == KVL_ENGINE_PLAIN ? tokens : floor(tokens / (double)page) * (double)page;
    return nb_expect(fit->tokens_per_gpu == pooled, "%s: %g tokens, ref %g", kvl_engine_name(e),
                     pooled, fit->tokens_per_gpu);
}

/* SGLang's reserve for an MLA model at tp 8 on an H200, and DP attention's padding over 8 ranks */
static double sglang_reserve(int dp)
{
    return 512 + 1.5 * 8192 + 1024 + 2 * 512 + 1536 + (dp ? 3 * 512 * 8 + 1.5 * 512 * 8 : 0);
}

/* each engine's own figure, worked above: SGLang's reserve and fraction, vLLM's 0.9 G less the
 * weights and the peak */
static int check_engine(kvl_engine e, int dp, const kvl_engine_budget *b, double w)
{
    const double G = kvl_gpu_memory_mib(KVL_GPU_H200), r = sglang_reserve(dp);
    if (e == KVL_ENGINE_SGLANG)
        return nb_expect(b->reserved_mib == r && b->fraction == round((G - r) / G * 1000) / 1000,
                         "sglang: reserve %g MiB, fraction %g", b->reserved_mib, b->fraction);
    if (e == KVL_ENGINE_VLLM)
        return nb_expect(fabs(b->cache_bytes - (0.9 * G * 1048576 - w - 6 * GIB)) <= 1,
                         "vllm: cache %g", b->cache_bytes);
    return KVL_OK;
}

NB_CELL(cell_engines)
{
    kvl_model m = {0};
    for (size_t i = 0; i < n_gens; i++)
        if (!strcmp(gens[i].m.name, "DeepSeek-V3")) m = gens[i].m;
    m.kv_cache = KVL_CACHE_MLA_FP8; /* a copy: the other cells keep the config's bf16 row */
    kvl_kv_footprint f;
    kvl_params p;
    int rc = kvl_kv_footprint_of(&f, &m);
    if (rc == KVL_OK) rc = kvl_params_of(&p, &m);
    printf("DeepSeek-V3 on 8 H200s (%s MiB), FP8 weights, mla-fp8 cache, %s-token sequences\n",
           nb_num(kvl_gpu_memory_mib(KVL_GPU_H200), 0), nb_num(131072, 0));
    printf("%-8s %-4s %9s %12s %10s %12s %10s\n", "engine", "attn", "fraction", "weights GiB",
           "cache GiB", "tokens/GPU", "seqs/node");
    for (kvl_engine e = KVL_ENGINE_PLAIN; e <= KVL_ENGINE_SGLANG && rc == KVL_OK; e++)
        for (int dp = 0; dp < 2 && rc == KVL_OK; dp++) {
            kvl_engine_budget b;
            kvl_fit fit;
            double w;
            rc = engine_fit(&m, &f, &p, e, dp, &b, &fit, &w);
            if (rc != KVL_OK) break;
            printf("%-8s %-4s %9.3f %12s %10s %12s %10s\n", kvl_engine_name(e), dp ? "dp" : "tp",
                   b.fraction, nb_num(w / GIB, 1), nb_num(b.cache_bytes / GIB, 1),
                   nb_num(fit.tokens_per_gpu, 0), nb_num(fit.sequences_per_node, 0));
            rc = check_engine(e, dp, &b, w);
        }
    return rc;
}

// %% [markdown]
// SGLang's reserve grows by 18,432 MiB under data-parallel attention, so its fraction falls from
// 0.886 to 0.758 and the cache a GPU keeps falls below the plain rule's; vLLM's ranks hold the
// embedding, head, dense FFNs and shared experts whole. Chapter 9's text walks through the
// figures; `build/bin/serving --engine vllm|sglang` prints them for any deployment.

// %% [markdown]
// ## Sequences per node
//
// `serving`'s own deployment, 100 GiB of cache per GPU with the weights left out, draws the
// chapter's chart: the same bars `build/bin/serving --svg FILE` writes.

// %%
NB_CELL(cell_sequences)
{
    const char *labels[NB08_MAX_MODELS];
    double fit[2][NB08_MAX_MODELS];
    int rc = KVL_OK;
    for (size_t i = 0; i < n_gens && rc == KVL_OK; i++) {
        labels[i] = gens[i].m.name;
        for (int dp = 0; dp < 2 && rc == KVL_OK; dp++) {
            const kvl_deployment d = {.gpus = 8, .tp = 8, .dp_attention = dp, .page = 64};
            kvl_rank_cache r;
            kvl_fit f;
            rc = kvl_rank_cache_of(&r, &gens[i].m, &gens[i].kv, &d);
            if (rc == KVL_OK) rc = kvl_fit_of(&f, &gens[i].m, &r, &d, 100 * GIB, 131072);
            fit[dp][i] = f.sequences_per_node;
        }
        printf("%-20s %8s sequences per node, %8s with data-parallel attention\n", labels[i],
               nb_num(fit[0][i], 0), nb_num(fit[1][i], 0));
    }
    if (rc != KVL_OK) return rc;
    return nb09_draw_sequences(labels, fit[0], fit[1], n_gens, 131072,
                               "8 GPUs, tp 8, page 64, budget 100 GiB per GPU");
}

// %% [markdown]
// ## One GPU's memory
//
// Each bar is one GPU of the deployment above under tensor-parallel attention, to one scale: its
// weights, the tenth kept for activations, and the cache, with the sequences of 131,072 tokens the
// node holds.

// %%
NB_CELL(cell_figure)
{
    const int rc = nb09_draw_gpu(bars, n_gens,
                                 "8 GPUs of 141 GiB, tp 8, pages of 64, 131,072-token sequences");
    nb08_free_all(gens, n_gens);
    return rc;
}

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_split),     NB_RUN(cell_pages),
                                    NB_RUN(cell_fit),       NB_RUN(cell_engines),
                                    NB_RUN(cell_sequences), NB_RUN(cell_figure)};
    static const char *const figures[] = {"gpu_memory", "sequences_per_node", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
