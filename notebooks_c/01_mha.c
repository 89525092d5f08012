// %% [markdown]
// # Chapter 1 · The cost: what a KV cache holds per token
//
// Every later chapter shrinks one number: the bytes a model keeps in memory for each token of
// context so that later tokens can attend to it. This notebook computes that number for multi-head
// attention and its grouped variants, from the models' `config.json` files, checks it against
// caches that really hold rows (`ref/mha`, `ref/model`), and then builds the mechanism itself: the
// cache row a token writes and one decode step of grouped-query attention over those rows, checked
// against `ref/mha`'s fast path on the same input.
//
// How to read this file. It is a jupytext "percent" notebook and a C program at once: `// %%` lines
// open cells, Markdown cells are comments. A code cell that computes something defines one
// `NB_CELL` function; the last cell runs them in order. `build/bin/nb_01` prints every output,
// `build/bin/nb_01 --step` walks the cells one by one, and `make notebooks` turns it into
// `build/notebooks/01_mha.ipynb`. To change a cell and see the result, edit
// `notebooks_c/01_mha.c` and run `make nb-01`, which rebuilds the notebook and walks it. Figure
// layout and the checks' printing live in `notebooks_c/draw_cost.c` and `draw_compare.c`.

// %%
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "config.h"
#include "draw_compare.h"
#include "draw_cost.h"
#include "element.h"
#include "mha.h"
#include "nb.h"
#include "rng.h"
#include "svg.h"
#include "swa.h"

// %% [markdown]
// ## Four levers
//
// A standard attention layer caches, for every token, one key and one value per KV head. With $L$
// layers, $H_{kv}$ KV heads of $D_h$ values and $b$ bytes per element:
//
// $$\text{bytes/token} = L \times 2 H_{kv} D_h \times b$$
//
// that is, layers × (entries per token per layer) × (elements per entry) × (bytes per element).
//
// Here an "entry" is the token's K and V, so there is one entry per token per layer. The four
// factors are the four levers the DeepSeek lineage pulls, one generation at a time: fewer layers
// that keep a cache (V4.1), fewer entries per token (V4's compression), smaller entries (V2's
// latent) and fewer bytes per element (V3.2's FP8, V4.1's FP4).
//
// The cell below reads DeepSeek LLM 67B (`ref/configs/`) and Llama 3 70B (`chapters/01_mha/`), two
// GQA-8 models with 8 KV heads of 128 in their config.json files (chapters/SOURCES.md), and
// multiplies the levers out.

// %%
/* The levers of one MHA-generation config: L, entries/token/layer, elements/entry,
 * bytes/element. */
typedef struct {
    char name[96];
    size_t d, layers, entries, elements, bytes, n_heads, n_kv_heads, head_dim;
} levers;

static int levers_of(levers *v, const char *config)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path(config));
    if (rc != KVL_OK) return rc;
    *v = (levers){.d = m.d,
                  .layers = m.n_layers,
                  .entries = 1,
                  .elements = 2 * m.n_kv_heads * m.head_dim,
                  .bytes = kvf_element_bits(KVF_BF16) / 8,
                  .n_heads = m.n_heads,
                  .n_kv_heads = m.n_kv_heads,
                  .head_dim = m.head_dim};
    snprintf(v->name, sizeof v->name, "%s", m.name);
    rc = m.generation == KVL_GEN_MHA
             ? KVL_OK
             : kvl_fail(KVL_EINVAL, "%s: not an MHA-generation config", config);
    kvl_model_free(&m);
    return rc;
}

static size_t bytes_per_token(const levers *v)
{
    return v->layers * v->entries * v->elements * v->bytes;
}

static levers ds67b, llama70b;

NB_CELL(cell_levers)
{
    int rc = levers_of(&ds67b, "ref/configs/deepseek-llm-67b.json");
    if (rc == KVL_OK) rc = levers_of(&llama70b, "chapters/01_mha/llama-3-70b.json");
    if (rc != KVL_OK) return rc;
    const levers *all[] = {&ds67b, &llama70b};
    printf("%-18s %7s %9s %15s %7s %12s %11s\n", "model", "layers", "entries", "elements/entry",
           "B/elem", "B/token", "KiB/token");
    for (int i = 0; i < 2; i++) {
        const levers *v = all[i];
        printf("%-18s %7zu %9zu %15s %7zu %12s %11s\n", v->name, v->layers, v->entries,
               nb_num((double)v->elements, 0), v->bytes, nb_num((double)bytes_per_token(v), 0),
               nb_num((double)bytes_per_token(v) / 1024, 2));
    }
    printf(
        "\n%s: 2 x %zu KV heads x %zu dims x %zu B = %s B per layer, x %zu layers = %s B per token\n",
        ds67b.name, ds67b.n_kv_heads, ds67b.head_dim, ds67b.bytes,
        nb_num((double)(ds67b.elements * ds67b.bytes), 0), ds67b.layers,
        nb_num((double)bytes_per_token(&ds67b), 0));
    return KVL_OK;
}

// %% [markdown]
// ## MHA, GQA, MQA: one lever, Hkv
//
// Multi-query attention (Shazeer, 2019) keeps all $H$ query heads but one K head and one V head;
// grouped-query attention (Ainslie et al., 2023) keeps $H_{kv}$ heads, each shared by $H/H_{kv}$
// consecutive query heads. GQA-1 is MQA and GQA-$H$ is MHA, so one module (`ref/mha`) is all three,
// and the cache scales with $H_{kv}$ alone. The same formula prices the MHA that DeepSeek-V2's
// paper compares its latent against: 128 heads of 128 dims over 60 layers
// (`ref/configs/deepseek-v2.json`).

// %%
NB_CELL(cell_variants)
{
    const levers *all[] = {&ds67b, &llama70b};
    for (int i = 0; i < 2; i++) {
        const levers *v = all[i];
        printf("%s, H = %zu query heads:\n", v->name, v->n_heads);
        const size_t kv[] = {v->n_heads, v->n_kv_heads, 1};
        for (int j = 0; j < 3; j++) {
            levers u = *v;
            u.elements = 2 * kv[j] * v->head_dim;
            printf("  Hkv %3zu %-5s %12s B/token   MHA / %zu\n", kv[j],
                   kv[j] == v->n_heads ? "MHA"
                   : kv[j] == 1        ? "MQA"
                                       : "GQA",
                   nb_num((double)bytes_per_token(&u), 0), v->n_heads / kv[j]);
        }
    }
    kvl_model v2;
    int rc = kvl_model_load(&v2, nb_path("ref/configs/deepseek-v2.json"));
    if (rc != KVL_OK) return rc;
    const double elements =
        2.0 * (double)v2.n_heads * (double)v2.qk_nope_head_dim * (double)v2.n_layers;
    const double bytes = elements * kvf_element_bits(KVF_BF16) / 8;
    printf(
        "\nMHA at DeepSeek-V2's size: 2 x %zu heads x %zu dims x %zu layers = %s elements per token\n",
        v2.n_heads, v2.qk_nope_head_dim, v2.n_layers, nb_num(elements, 0));
    printf("  in bf16: %s B = %.2f MB (%.2f MiB) per token\n", nb_num(bytes, 0), bytes / 1e6,
           bytes / 1048576.0);
    kvl_model_free(&v2);
    return KVL_OK;
}

// %% [markdown]
// The picture of that lever: what one token of DeepSeek LLM 67B writes into one layer's cache, a K
// and a V of $D_h = 128$ bf16 values (256 B each) per KV head, drawn to one scale of bytes. MHA's
// 64 pairs shrink to GQA-8's 8 and MQA's 1, while the 64 query heads stay
// (`chapters/01_mha/figures/token_cache.svg`).

// %%
NB_CELL(cell_token_cache_figure)
{
    const char *names[] = {"MHA", "GQA-8", "MQA"};
    const size_t kv[] = {ds67b.n_heads, ds67b.n_kv_heads, 1};
    svg_doc s;
    cost_draw_token_cache(&s, ds67b.name, names, kv, 3, ds67b.n_heads,
                          ds67b.head_dim * ds67b.bytes);
    return nb_figure("token_cache", &s);
}

// %% [markdown]
// ## The formula against live caches
//
// The bytes are not only arithmetic. `ref/mha`'s cache reports the bytes its ring really holds, so
// a cache built at the real geometry (no weights needed: the bytes are a property of the storage)
// can be asked. Then a toy stack of four layers (`ref/model`, d 64, H 4, Dh 16) runs 40 tokens,
// half prefilled and half decoded, and its caches are weighed against
// $L \cdot T \cdot 2 H_{kv} D_h \cdot b$.

// %%
NB_CELL(cell_live)
{
    mha_config c;
    size_t live = 0;
    int rc = mha_config_init(&c, ds67b.d, ds67b.n_heads, ds67b.n_kv_heads, ds67b.head_dim, 0, 1e4);
    if (rc == KVL_OK) rc = cost_live_bytes_per_token(&live, &c, 16);
    if (rc != KVL_OK) return rc;
    printf("one layer of %s, bf16 ring: %s B per token (formula %s)\n", ds67b.name,
           nb_num((double)live, 0), nb_num((double)(ds67b.elements * ds67b.bytes), 0));
    rc = nb_expect(live == ds67b.elements * ds67b.bytes, "live bytes %zu differ from the formula",
                   live);
    for (size_t kv = 4; kv >= 1 && rc == KVL_OK; kv /= 2) {
        size_t got = 0, want = COST_TOY_LAYERS * 40 * 2 * kv * COST_TOY_HEAD_DIM *
                               kv_store_bytes(KV_STORE_BF16);
        rc = cost_toy_stack_bytes(&got, kv, 40);
        if (rc != KVL_OK) break;
        printf("toy stack, Hkv %zu, 40 tokens: caches hold %s B, L*T*2*Hkv*Dh*b = %s B\n", kv,
               nb_num((double)got, 0), nb_num((double)want, 0));
        rc = nb_expect(got == want, "toy stack with Hkv %zu: live %zu B, formula %zu B", kv, got,
                       want);
    }
    return rc;
}

// %% [markdown]
// ## GQA is MHA with copied heads
//
// Grouping changes what is stored, not what is computed: a GQA layer gives the same output as an
// MHA layer whose K and V heads are copies, head $h$ reading KV head
// $\lfloor h / (H/H_{kv}) \rfloor$. The cell builds a GQA-2 layer (d 64, H 4, Dh 16), copies its K
// and V heads into an MHA layer, runs both over 24 tokens and compares. The MHA cache is twice the
// size for the same output.

// %%
/* mha (Hkv = H) ← gqa with every KV head g copied to the query heads that read it */
static void copy_heads_to_mha(mha_weights *mha, const mha_weights *gqa, const mha_config *cg,
                              const mha_config *cm)
{
    const size_t d = cg->d, Dh = cg->head_dim, group = cg->n_heads / cg->n_kv_heads;
    memcpy(mha->w_q, gqa->w_q, cg->n_heads * Dh * d * sizeof(float));
    memcpy(mha->w_o, gqa->w_o, d * cg->n_heads * Dh * sizeof(float));
    for (size_t h = 0; h < cm->n_kv_heads; h++) {
        memcpy(mha->w_k + h * Dh * d, gqa->w_k + (h / group) * Dh * d, Dh * d * sizeof(float));
        memcpy(mha->w_v + h * Dh * d, gqa->w_v + (h / group) * Dh * d, Dh * d * sizeof(float));
    }
}

NB_CELL(cell_gqa_is_mha)
{
    enum { T = 24 };
    mha_config cg, cm;
    mha_weights wg = {0}, wm = {0};
    kvl_rng rng;
    kvl_rng_seed(&rng, 11);
    int rc = mha_config_init(&cg, 64, 4, 2, 16, 0, 1e4);
    if (rc == KVL_OK) rc = mha_config_init(&cm, 64, 4, 4, 16, 0, 1e4);
    if (rc == KVL_OK) rc = mha_weights_init_random(&wg, &cg, &rng);
    if (rc == KVL_OK) rc = mha_weights_init_random(&wm, &cm, &rng);
    static float x[T * 64], yg[T * 64], ym[T * 64];
    if (rc == KVL_OK) {
        copy_heads_to_mha(&wm, &wg, &cg, &cm);
        kvl_rng_normal_f32(&rng, x, T * 64, 1.0);
        rc = mha_forward(yg, &cg, &wg, x, T);
    }
    if (rc == KVL_OK) rc = mha_forward(ym, &cm, &wm, x, T);
    if (rc == KVL_OK) {
        double scale, diff = nbc_max_diff(yg, ym, T * 64, &scale);
        /* float32 sums of 64 and 24 terms: far below 1e-5 of the output's scale */
        rc = nbc_report("GQA-2 vs MHA with copied K/V heads, 24 tokens", diff, scale, 1e-5);
        printf("cache per token per layer: GQA-2 %zu floats, MHA %zu floats\n",
               2 * cg.n_kv_heads * cg.head_dim, 2 * cm.n_kv_heads * cm.head_dim);
    }
    mha_weights_free(&wg);
    mha_weights_free(&wm);
    return rc;
}

// %% [markdown]
// ## The cache row and one decode step, built
//
// The rest of the chapter is the mechanism itself, written out in plain C at a toy size where the
// grouping shows: $d = 64$, $H = 8$ query heads, $H_{kv} = 2$ KV heads (GQA-2, groups of 4),
// $D_h = 16$. Token $t$ with input $x_t$ writes one row into each layer's cache: for every KV head
// $g$ its rotated key and its value,
//
// $$k_{t,g} = \mathrm{RoPE}(W_K^g x_t,\ t), \qquad v_{t,g} = W_V^g x_t,$$
// $$\mathrm{row}_t = [\,k_{t,g}\,]_{g < H_{kv}} \mid [\,v_{t,g}\,]_{g < H_{kv}},$$
//
// $2 H_{kv} D_h = 64$ values: the "elements per entry" of the formula above. RoPE turns channel
// pairs $(i, i + D_h/2)$ by the angle $t\,\theta_i$, $\theta_i = 10000^{-2i/D_h}$; it is the
// one piece this notebook borrows (`ref/core/rope.h`). Weights are stored
// $[\text{out}][\text{in}]$.

// %%
enum { D = 64, H = 8, HKV = 2, DH = 16, GROUP = H / HKV, ROW = 2 * HKV * DH, N = 24 };

static double Wq[H * DH][D], Wk[HKV * DH][D], Wv[HKV * DH][D], Wo[D][H * DH];
static kvl_rope rope;

/* y[m] = W[m][n] x[n] */
static void matvec(double *y, const double *W, const double *x, size_t m, size_t n)
{
    for (size_t i = 0; i < m; i++) {
        y[i] = 0;
        for (size_t j = 0; j < n; j++) y[i] += W[i * n + j] * x[j];
    }
}

static void cache_row(double row[ROW], const double x[D], size_t t)
{
    double *k = row, *v = row + HKV * DH;
    matvec(k, &Wk[0][0], x, HKV * DH, D);
    matvec(v, &Wv[0][0], x, HKV * DH, D);
    for (int g = 0; g < HKV; g++) kvl_rope_rotate_half_split_f64(k + g * DH, &rope, (int64_t)t);
}

// %% [markdown]
// A new token at position $n$ appends its own row, then asks with $H$ queries
// $q_h = \mathrm{RoPE}(W_Q^h x_n,\ n)$ over the $n + 1$ rows. Query head $h$ reads KV head
// $g(h) = \lfloor h / (H/H_{kv}) \rfloor$:
//
// $$s_{h,j} = \frac{q_h \cdot k_{j,g(h)}}{\sqrt{D_h}},$$
// $$p_{h,j} = \frac{e^{s_{h,j}}}{\sum_{i \le n} e^{s_{h,i}}},$$
// $$o_h = \sum_{j \le n} p_{h,j}\, v_{j,g(h)},$$
// $$\mathrm{out} = W_O\,[\,o_0; \dots; o_{H-1}\,].$$
//
// The $H/H_{kv}$ query heads of a group score the same cached keys and sum the same cached values,
// each with its own query: that sharing is all GQA is. Subtracting the largest score before the
// exponentials changes no $p$ and keeps every $e^{s}$ at most 1.

// %%
/* p[n] = softmax(s[n]) */
static void softmax(double *p, const double *s, size_t n)
{
    double m = -INFINITY, sum = 0;
    for (size_t j = 0; j < n; j++) m = fmax(m, s[j]);
    for (size_t j = 0; j < n; j++) sum += p[j] = exp(s[j] - m);
    for (size_t j = 0; j < n; j++) p[j] /= sum;
}

/* o[Dh] = Σ_j p_j v_{j,g}, p = softmax_j(q · k_{j,g} / √Dh), over rows[n] */
static void attend_head(double o[DH], const double q[DH], const double rows[][ROW], size_t n, int g)
{
    double s[N + 1], p[N + 1];
    for (size_t j = 0; j < n; j++) {
        const double *k = rows[j] + g * DH;
        s[j] = 0;
        for (int i = 0; i < DH; i++) s[j] += q[i] * k[i];
        s[j] /= sqrt(DH);
    }
    softmax(p, s, n);
    for (int i = 0; i < DH; i++) o[i] = 0;
    for (size_t j = 0; j < n; j++) {
        const double *v = rows[j] + HKV * DH + g * DH;
        for (int i = 0; i < DH; i++) o[i] += p[j] * v[i];
    }
}

/* out[D] for token x at position n, over rows[0 … n] (row n its own) */
static void gqa_decode(double out[D], const double x[D], const double rows[][ROW], size_t n)
{
    double q[H * DH], o[H * DH];
    matvec(q, &Wq[0][0], x, H * DH, D);
    for (int h = 0; h < H; h++) {
        kvl_rope_rotate_half_split_f64(q + h * DH, &rope, (int64_t)n);
        attend_head(o + h * DH, q + h * DH, rows, n + 1, h / GROUP);
    }
    matvec(out, &Wo[0][0], o, D, H * DH);
}

// %% [markdown]
// ## Built against `ref/mha`
//
// The same weights and tokens go through `ref/mha`: `mha_prefill` caches tokens $0 \dots 23$,
// `mha_decode` appends token 24's row and attends over the ring in float with an online softmax
// (`ref/core/attend.h`; the notebook runs it on the CPU backend, tile by tile). The cell copies the
// weights into the notebook's double arrays, builds the 25 rows and the decode step above, and
// compares both with the library's: they agree to float rounding, a relative $10^{-5}$ at most
// (sums of 64 and 25 float terms).

// %%
static double X[N + 1][D], rows[N + 1][ROW], out[D], lib_rows[N + 1][ROW], lib_out[D];

NB_CELL(cell_built_vs_ref)
{
    cost_gqa_run lib;
    int rc = cost_gqa_run_ref(&lib, D, H, HKV, DH, N, 21);
    if (rc != KVL_OK) return rc;
    cost_widen(&Wq[0][0], lib.w.w_q, H * DH * D);
    cost_widen(&Wk[0][0], lib.w.w_k, HKV * DH * D);
    cost_widen(&Wv[0][0], lib.w.w_v, HKV * DH * D);
    cost_widen(&Wo[0][0], lib.w.w_o, D * H * DH);
    cost_widen(&X[0][0], lib.x, (N + 1) * D);
    cost_widen(&lib_rows[0][0], lib.rows, (N + 1) * ROW);
    cost_widen(lib_out, lib.out, D);
    rope = lib.c.rope;
    cost_gqa_run_free(&lib);

    for (size_t t = 0; t <= N; t++) cache_row(rows[t], X[t], t);
    gqa_decode(out, X[N], rows, N);

    printf("query head h reads KV head:");
    for (int h = 0; h < H; h++) printf(" %d", h / GROUP);
    printf("\none row per token per layer: 2 x %d KV heads x %d = %d values (MHA's would be %d)\n",
           HKV, DH, ROW, 2 * H * DH);
    rc = cost_check("cache rows 0-24, built vs ref/mha's ring", &rows[0][0], &lib_rows[0][0],
                    (N + 1) * ROW, 1e-5);
    if (rc == KVL_OK)
        rc = cost_check("decode of token 24, built vs mha_decode", out, lib_out, D, 1e-5);
    return rc;
}

// %% [markdown]
// ## The figure
//
// Bytes per token on a log axis, for both models as shipped (GQA-8, dark) and as MHA and MQA would
// store them. The chapter's README shows this figure
// (`chapters/01_mha/figures/bytes_per_token.svg`).

// %%
NB_CELL(cell_figure)
{
    const levers *all[] = {&ds67b, &llama70b};
    char labels[6][128];
    const char *label[6];
    double values[6];
    int emphasis[6];
    for (int i = 0, k = 0; i < 2; i++) {
        const size_t kv[] = {all[i]->n_heads, all[i]->n_kv_heads, 1};
        const char *name[] = {"MHA", "GQA-8", "MQA"};
        for (int j = 0; j < 3; j++, k++) {
            levers u = *all[i];
            u.elements = 2 * kv[j] * u.head_dim;
            snprintf(labels[k], sizeof labels[k], "%s, %s", all[i]->name, name[j]);
            label[k] = labels[k];
            values[k] = (double)bytes_per_token(&u);
            emphasis[k] = kv[j] == all[i]->n_kv_heads;
        }
    }
    svg_doc s;
    svg_bars_log(&s, "KV cache bytes per token: MHA, GQA-8, MQA",
                 "L x 2 x Hkv x Dh x 2 B (bf16), from each config.json; dark: as shipped", label,
                 values, emphasis, 6, "B");
    return nb_figure("bytes_per_token", &s);
}

// %% [markdown]
// ## Quoted, not computed
//
// Two numbers in the sources need data outside this project, and are quoted as such: MQA made the
// decoder step about 12× faster in Shazeer's measurements, and DeepSeek-V2's 7B ablation (its
// Appendix D.1) reports MMLU 45.2 for MHA, 41.2 for GQA-8 and 37.9 for MQA. That quality cost is
// what chapter 2's latent avoids.

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_levers),      NB_RUN(cell_variants),
                                    NB_RUN(cell_token_cache_figure), NB_RUN(cell_live),
                                    NB_RUN(cell_gqa_is_mha),  NB_RUN(cell_built_vs_ref),
                                    NB_RUN(cell_figure)};
    static const char *const figures[] = {"token_cache", "bytes_per_token", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
