/* Decode: one token's attention over its cache, per generation, at the real head geometry read from
 * ref/configs, at 8K, 32K and 128K cached tokens, with float32 and bf16 caches.
 *
 *   MHA/GQA   DeepSeek LLM 67B (H 64, Hkv 8, Dh 128): per KV group, its query heads against the
 *             group's K and V columns of the ring (mha_decode's attention)
 *   MLA       V3 (H 128, Dc 512, Dr 64): absorbed, MQA over the [c_kv | k_rope] rows of the ring
 *             (mla_decode_absorbed's attention); naive, every head's keys and values rebuilt from the
 *             rows (mla_scores_naive, softmax, mla_values_naive), float32 at 8K only (its K and V
 *             expansion costs 2·H·N·Dc·(Dnope + Dv) flop, seconds per token)
 *   DSA       V3.2 (HI 64, DI 128 indexer; K 2048): the indexer's scores over every key
 *             (dsa_index_scores), top-k (kvl_topk; a selection, read against the scan bandwidth with
 *             no target), the K picked rows gathered, absorbed attention over them
 *   V4        V4-Flash (H 64, Dh 512, W 128, sinks): v4_attend for one token of a window-only, a CSA
 *             (M 4, top-512 of the compressed entries) and an HCA layer (M 128, every entry), float32
 *             rows, HCA also at 1M; the CSA indexer is not timed here
 * The projections around the attention (W_Q, W_UK, W_UV, W_O: the same cost at every context) are
 * not timed: this group measures what grows with the context.
 *
 * Each row counts its flop and the bytes of cache it reads, and is read against its roofline (one
 * phase, bench.h): compute-bound steps against the skinny-sgemm ceiling at their products' shape
 * (target 0.8; MLA's for every step but GQA's eight-row products and the indexer's 64-head ones, which
 * have ceilings of their own, ceilings.c), memory-bound ones against the read-scan bandwidth (target
 * 0.75), the gather against the gather ceiling (target 0.8). Compute-bound steps run on 1 and on 2
 * threads (the rows split across them, ref/core/attend.h), and a row gives the speedup against the
 * ideal 2 (target 1.6 of 2); the sgemm ceiling's own speedup says whether the second core was free.
 * GQA's step over bf16 has no target against its ceiling: a row beside it gives its time over the float32
 * step's at the same context and thread count instead. The 1-thread cost of each generation's step is plotted against the context in decode.svg.
 *
 * The peer group times the same steps at 32K in numpy float32 (and float64 for MLA, a side row), torch's
 * matmul + softmax + matmul and torch's scaled_dot_product_attention (peers.py; over a bf16 cache,
 * torch widening it to float32 every step), each checked against the C step's output and timed
 * interleaved with it, and prints peer time over C time (>= 1: C is faster); then, where `make bench-ggml`
 * built it, llama.cpp's ggml_flash_attn_ext over an f16 cache at both shapes (tests/bench/ggml/ggml_peer.c). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "attend.h"
#include "bench.h"
#include "config.h"
#include "dsa.h"
#include "file_io.h"
#include "mha.h"
#include "mla.h"
#include "rng.h"
#include "softmax.h"
#include "status.h"
#include "svg.h"
#include "swa.h"
#include "topk.h"
#include "v4.h"

#define FILL_ROWS 1024     /* distinct random rows, repeated to fill a cache */
#define NAIVE_REPEATS 3

static const size_t CONTEXTS[] = {8192, 32768, 131072};
enum { N_CONTEXTS = sizeof CONTEXTS / sizeof CONTEXTS[0] };
enum { FMA_TARGET_T = 32768 }; /* the context of a step's target on its share of the FMA peak */
static const kv_store STORES[] = {KV_STORE_F32, KV_STORE_BF16};

/* ---- the figure: 1-thread bf16 cost per step against the context, one line per generation ------- */

enum { LINE_MHA, LINE_MLA, LINE_DSA, LINE_HCA, N_LINES };
static const char *const LINE_NAME[N_LINES] = {"67B MHA/GQA", "V3 MLA absorbed", "V3.2 DSA (indexer + top-k)",
                                               "V4-Flash HCA layer (f32)"};
static const char *const LINE_COLOUR[N_LINES] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd"};
static double line_ms[N_LINES][N_CONTEXTS];

/* ---- a ring of T random rows ---------------------------------------------------------------------- */

static int ring_fill(kv_ring *r, size_t T, size_t width, kv_store store, kvl_rng *rng)
{
    if (kv_ring_init(r, 0, T, width, store) != 0) return 1;
    float *rows = malloc(FILL_ROWS * width * sizeof *rows);
    if (!rows) return 1;
    kvl_rng_uniform_f32(rng, rows, FILL_ROWS * width, -1.0, 1.0);
    int rc = 0;
    for (size_t t = 0; t < T && rc == 0; t += FILL_ROWS)
        rc = kv_ring_append(r, rows, T - t < FILL_ROWS ? T - t : FILL_ROWS);
    free(rows);
    return rc;
}

/* ---- rows of the table ---------------------------------------------------------------------------- */

static void label(char *what, size_t cap, const char *step, kv_store store, size_t T, int threads)
{
    snprintf(what, cap, "%s %s %zuK %dT", step, kv_store_name(store), T / 1024, threads);
}

/* Times a step on 1 thread, and on 2 when it is compute-bound (kvb_time_step), against the sgemm ceiling
 * at `shape`, with the compute and memory targets or (targeted 0) none, and fma_target on its 1-thread
 * share of the FMA peak (0: none); returns the 1-thread time. */
static kvb_time time_step_targeted(const char *step, kv_store store, size_t T, void (*run)(void *), void *ctx,
                                   double flop, double bytes, kvb_sgemm_shape shape, int targeted, double fma_target)
{
    char name[96];
    snprintf(name, sizeof name, "%s %s", step, kv_store_name(store));
    return kvb_time_step(&(kvb_step){.group = "decode", .step = name, .T = T, .run = run, .ctx = ctx,
                                     .phase = {{flop, bytes, shape}},
                                     .compute_target = targeted ? KVB_COMPUTE_TARGET : 0,
                                     .memory_target = targeted ? KVB_MEMORY_TARGET : 0, .fma_target = fma_target});
}

static kvb_time time_step_at(const char *step, kv_store store, size_t T, void (*run)(void *), void *ctx, double flop,
                             double bytes, kvb_sgemm_shape shape)
{
    return time_step_targeted(step, store, T, run, ctx, flop, bytes, shape, 1, 0);
}

static kvb_time time_step(const char *step, kv_store store, size_t T, void (*run)(void *), void *ctx, double flop,
                          double bytes)
{
    return time_step_at(step, store, T, run, ctx, flop, bytes, KVB_SGEMM_MLA);
}

/* ---- MHA/GQA and MLA absorbed: attention over the ring, per group --------------------------------- */

typedef struct {
    kv_ring ring;
    float *q, *o;            /* [groups·G][Dk], [groups·G][Dv] */
    size_t groups, G, Dk, Dv;
    size_t v_base;           /* first value column of group 0; group g's columns start g·Dk and v_base + g·Dv */
    float scale;
    kvb_sgemm_shape shape;   /* the sgemm ceiling at its products' shape */
    double fma_target;       /* over float32 at FMA_TARGET_T, on 1 thread: of the FMA peak; 0: none */
} ring_step;

static void run_ring_step(void *ctx)
{
    ring_step *s = ctx;
    kv_ring_attend(s->o, s->q, s->groups * s->G, &s->ring, s->groups, 0, s->Dk, s->v_base, s->Dv, s->scale);
}

/* s's query, output and a ring of T random rows of `width` in `store`; 1 when out of memory. */
static int ring_step_init(ring_step *s, size_t T, size_t width, kv_store store, kvl_rng *rng)
{
    s->q = kvb_random_floats(s->groups * s->G * s->Dk, rng);
    s->o = malloc(s->groups * s->G * s->Dv * sizeof *s->o);
    return !s->q || !s->o || ring_fill(&s->ring, T, width, store, rng);
}

static void ring_step_free(ring_step *s)
{
    kv_ring_free(&s->ring);
    free(s->q);
    free(s->o);
}

/* A row of the bf16 step's 1-thread median time over the float32 step's at context T (t[store]), read
 * against 1: the ratio is that quotient, with no target. */
static void print_bf16_over_f32(const char *step, size_t T, const kvb_time t[2], double bf16_mib)
{
    char what[96];
    snprintf(what, sizeof what, "%s bf16/f32 time %zuK 1T", step, T / 1024);
    kvb_print_row(&(kvb_row){"decode", what, bf16_mib, t[1].median, t[1].median / t[0].median, "x", 1, 0, 0, 0, 0});
}

/* One ring step per store and context; its 1-thread bf16 cost goes to the figure's line. bf16_targeted
 * 0: the bf16 step has no target against its ceiling, and a row gives its time over the float32 step's. */
static int bench_ring_step(const char *step, ring_step proto, size_t width, int line, int bf16_targeted,
                           kvl_rng *rng)
{
    for (size_t k = 0; k < N_CONTEXTS; k++) {
        kvb_time t[2];
        double bytes = 0;
        for (size_t st = 0; st < 2; st++) {
            ring_step s = proto;
            int rc = ring_step_init(&s, CONTEXTS[k], width, STORES[st], rng);
            if (rc == 0) {
                const double N = (double)CONTEXTS[k];
                const double flop = 2.0 * (double)(s.groups * s.G) * N * (double)(s.Dk + s.Dv);
                bytes = N * (double)width * (double)kv_store_bytes(STORES[st]);
                const int fma_row = STORES[st] == KV_STORE_F32 && CONTEXTS[k] == FMA_TARGET_T;
                t[st] = time_step_targeted(step, STORES[st], CONTEXTS[k], run_ring_step, &s, flop, bytes, s.shape,
                                           STORES[st] != KV_STORE_BF16 || bf16_targeted,
                                           fma_row ? s.fma_target : 0);
                if (STORES[st] == KV_STORE_BF16) line_ms[line][k] = t[st].median * 1e3;
            }
            ring_step_free(&s);
            if (rc) return 1;
        }
        if (!bf16_targeted) print_bf16_over_f32(step, CONTEXTS[k], t, bytes / KVB_MIB);
    }
    return 0;
}

/* The GQA step of the 67B (per KV group, its query heads over the group's K and V columns of rows
 * [K of every group | V of every group]) and the V3 MLA absorbed step (every head over [c_kv | k_rope]
 * rows, values their first Dc columns), without their buffers; *width: the ring's row. */
static ring_step gqa_step(const kvl_model *m, size_t *width)
{
    const size_t Hkv = m->n_kv_heads, Dh = m->head_dim;
    *width = 2 * Hkv * Dh;
    return (ring_step){.groups = Hkv, .G = m->n_heads / Hkv, .Dk = Dh, .Dv = Dh, .v_base = Hkv * Dh,
                       .scale = (float)(1.0 / sqrt((double)Dh)), .shape = KVB_SGEMM_GQA};
}

static ring_step mla_step(const mla_config *c, size_t *width)
{
    *width = c->kv_lora_rank + c->qk_rope;
    return (ring_step){.groups = 1, .G = c->n_heads, .Dk = *width, .Dv = c->kv_lora_rank, .v_base = 0,
                       .scale = (float)c->softmax_scale, .shape = KVB_SGEMM_MLA};
}

static int bench_mha(const kvl_model *m, kvl_rng *rng)
{
    size_t width;
    const ring_step s = gqa_step(m, &width);
    return bench_ring_step("67B GQA", s, width, LINE_MHA, 0, rng);
}

static int bench_mla_absorbed(const mla_config *c, kvl_rng *rng)
{
    size_t width;
    ring_step s = mla_step(c, &width);
    s.fma_target = KVB_MLA_DECODE_FMA_TARGET;
    return bench_ring_step("V3 MLA absorbed", s, width, LINE_MLA, 1, rng);
}

/* ---- MLA naive ------------------------------------------------------------------------------------ */

typedef struct {
    const mla_config *c;
    mla_weights w;
    float *q, *rows, *scores, *o;
    size_t N;
} naive_step;

static void run_naive(void *ctx)
{
    naive_step *s = ctx;
    mla_scores_naive(s->scores, s->c, &s->w, s->q, s->rows, NULL, 1, s->N);
    for (size_t h = 0; h < s->c->n_heads; h++) kvl_softmax_f32(s->scores + h * s->N, s->N);
    mla_values_naive(s->o, s->c, &s->w, s->scores, s->rows, 1, s->N);
}

static int bench_mla_naive(const mla_config *c, kvl_rng *rng)
{
    const size_t H = c->n_heads, Dc = c->kv_lora_rank, Dw = Dc + c->qk_rope, N = CONTEXTS[0];
    naive_step s = {.c = c, .N = N};
    int rc = mla_weights_alloc(&s.w, c) != 0;
    s.q = kvb_random_floats(H * (c->qk_nope + c->qk_rope), rng);
    s.rows = kvb_random_floats(N * Dw, rng);
    s.scores = malloc(H * N * sizeof *s.scores);
    s.o = malloc(H * c->v_head * sizeof *s.o);
    rc = rc || !s.q || !s.rows || !s.scores || !s.o;
    if (rc == 0) {
        kvl_rng_normal_f32(rng, s.w.w_ukv, H * (c->qk_nope + c->v_head) * Dc, 1.0 / sqrt((double)Dc));
        const double per_head = 2.0 * (double)N * ((double)Dc * (double)(c->qk_nope + c->v_head) +
                                                   (double)(c->qk_nope + c->qk_rope) + (double)c->v_head);
        const double flop = (double)H * per_head, bytes = (double)N * (double)Dw * sizeof(float);
        kvb_progress("decode: V3 MLA naive f32 %zuK, 1 thread (%d runs of seconds each)", N / 1024, NAIVE_REPEATS);
        kvb_time t = kvb_time_runs(run_naive, &s, NAIVE_REPEATS);
        char what[96];
        label(what, sizeof what, "V3 MLA naive", KV_STORE_F32, N, 1);
        kvb_print_step(&(kvb_step){.group = "decode", .step = what, .T = N, .run = run_naive, .ctx = &s,
                                   .phase = {{flop, bytes, KVB_SGEMM_MLA}}, .compute_target = KVB_COMPUTE_TARGET,
                                   .memory_target = KVB_MEMORY_TARGET},
                       what, t, 1, NULL);
    }
    mla_weights_free(&s.w);
    free(s.q);
    free(s.rows);
    free(s.scores);
    free(s.o);
    return rc;
}

/* ---- DSA: indexer, top-k, gather, sparse attention ----------------------------------------------- */

typedef struct {
    const dsa_config *c;
    kv_ring ring;           /* MLA rows [N][Dc+Dr] */
    float *q_idx, *w_idx, *k_idx, *scores; /* [HI][DI], [HI], [N][DI], [N] */
    int32_t *sel;            /* [K] */
    void *picked;            /* [K][Dc+Dr] rows gathered in the ring's store */
    float *q_hat, *o_hat;    /* [H][Dc+Dr], [H][Dc] */
    size_t N;
} dsa_step;

static void run_index(void *ctx)
{
    dsa_step *s = ctx;
    dsa_index_scores(s->scores, s->c, s->q_idx, s->w_idx, s->k_idx, 1, s->N, s->N - 1);
}

static void run_topk(void *ctx)
{
    dsa_step *s = ctx;
    kvl_topk(s->sel, s->scores, 1, s->N, s->c->index_topk);
}

static void run_gather(void *ctx)
{
    dsa_step *s = ctx;
    const size_t row = s->ring.width * kv_store_bytes(s->ring.store);
    const uint8_t *rows = s->ring.rows;
    for (size_t i = 0; i < s->c->index_topk; i++)
        memcpy((uint8_t *)s->picked + i * row, rows + (size_t)s->sel[i] * row, row);
}

static void run_sparse(void *ctx)
{
    dsa_step *s = ctx;
    const size_t Dc = s->c->mla.kv_lora_rank, Dw = s->ring.width;
    const kvl_attend_rows r = {s->c->index_topk, Dw, 0, Dw, 0, Dc, 1};
    const float scale = (float)s->c->mla.softmax_scale;
    const kvl_row_tiles picked = s->ring.store == KV_STORE_BF16 ? kvl_row_tiles_bf16(s->picked, r.N, Dw)
                                                                  : kvl_row_tiles_f32(s->picked, r.N, Dw);
    kvl_attend(s->o_hat, s->q_hat, s->c->mla.n_heads, &picked, &r, scale, NULL, NULL);
}

static void dsa_step_free(dsa_step *s)
{
    kv_ring_free(&s->ring);
    free(s->q_idx);
    free(s->w_idx);
    free(s->k_idx);
    free(s->scores);
    free(s->sel);
    free(s->picked);
    free(s->q_hat);
    free(s->o_hat);
}

static int dsa_step_init(dsa_step *s, const dsa_config *c, size_t N, kv_store store, kvl_rng *rng)
{
    const size_t HI = c->index_n_heads, DI = c->index_head_dim, K = c->index_topk, H = c->mla.n_heads;
    const size_t Dc = c->mla.kv_lora_rank, Dw = Dc + c->mla.qk_rope;
    *s = (dsa_step){.c = c, .N = N};
    s->q_idx = kvb_random_floats(HI * DI, rng);
    s->w_idx = kvb_random_floats(HI, rng);
    s->k_idx = kvb_random_floats(N * DI, rng);
    s->scores = malloc(N * sizeof *s->scores);
    s->sel = malloc(K * sizeof *s->sel);
    s->picked = malloc(K * Dw * kv_store_bytes(store));
    s->q_hat = kvb_random_floats(H * Dw, rng);
    s->o_hat = malloc(H * Dc * sizeof *s->o_hat);
    if (!s->q_idx || !s->w_idx || !s->k_idx || !s->scores || !s->sel || !s->picked || !s->q_hat || !s->o_hat) return 1;
    if (ring_fill(&s->ring, N, Dw, store, rng)) return 1;
    run_index(s);
    run_topk(s);
    return 0;
}

static int bench_dsa(const dsa_config *c, kvl_rng *rng)
{
    const size_t HI = c->index_n_heads, DI = c->index_head_dim, K = c->index_topk, H = c->mla.n_heads;
    const size_t Dc = c->mla.kv_lora_rank, Dw = Dc + c->mla.qk_rope;
    for (size_t k = 0; k < N_CONTEXTS; k++)
        for (size_t st = 0; st < 2; st++) {
            const size_t N = CONTEXTS[k];
            const kv_store store = STORES[st];
            dsa_step s;
            if (dsa_step_init(&s, c, N, store, rng)) {
                dsa_step_free(&s);
                return 1;
            }
            const double n = (double)N, row = (double)Dw * (double)kv_store_bytes(store);
            /* the index keys are float32 here (the fp8 cache's dequantised view); the row store varies */
            const double index_flop = 2.0 * (double)(HI * DI) * n + 3.0 * (double)HI * n; /* dots, ReLU, weights */
            kvb_time ti = time_step_at("V3.2 DSA indexer", store, N, run_index, &s, index_flop,
                                       n * (double)DI * sizeof(float), kvb_index_shape(HI));
            kvb_progress("decode: V3.2 DSA top-k %s %zuK", kv_store_name(store), N / 1024);
            char what[96];
            label(what, sizeof what, "V3.2 DSA top-k", store, N, 1);
            const kvb_time tk =
                kvb_stream_row("decode", what, run_topk, &s, n * sizeof(float), KVB_BOUND_SCAN, 1, KVB_REPEATS, 0);
            kvb_progress("decode: V3.2 DSA gather %s %zuK", kv_store_name(store), N / 1024);
            label(what, sizeof what, "V3.2 DSA gather", store, N, 1);
            const kvb_time tg = kvb_stream_row("decode", what, run_gather, &s, (double)K * row, KVB_BOUND_GATHER, 1,
                                               KVB_REPEATS, KVB_GATHER_TARGET);
            kvb_time ta = time_step("V3.2 DSA sparse attend", store, N, run_sparse, &s,
                                    2.0 * (double)H * (double)K * (double)(Dw + Dc), (double)K * row);
            if (store == KV_STORE_BF16) line_ms[LINE_DSA][k] = (ti.median + tk.median + tg.median + ta.median) * 1e3;
            dsa_step_free(&s);
        }
    return 0;
}

/* ---- V4: v4_attend for one token ---------------------------------------------------------------- */

typedef struct {
    const v4_config *c;
    v4_weights w;
    float *q, *win, *entries, *o; /* [H][Dh], [W][Dh], [N][Dh], [H][Dh] */
    int32_t *sel;                 /* [K] CSA picks */
    size_t N, T;
} v4_step;

static void run_v4(void *ctx)
{
    v4_step *s = ctx;
    const size_t W = s->c->window;
    const kvl_row_tiles entries = kvl_row_tiles_f32(s->entries, s->N, s->c->head_dim);
    v4_attend(s->o, s->c, &s->w, s->q, s->win, s->T - W, &entries, s->sel, 1, s->T - 1);
}

/* Keys one token reads: its W window rows, then every entry (HCA) or K picks (CSA). */
static size_t v4_keys(const v4_config *c, size_t N)
{
    return c->window + (c->kind == KVL_LAYER_HCA ? N : c->kind == KVL_LAYER_CSA ? c->indexer.topk : 0);
}

static int bench_v4_layer(const v4_config *c, const char *step, size_t T, int line, size_t k, kvl_rng *rng)
{
    const size_t H = c->n_heads, Dh = c->head_dim, W = c->window;
    const size_t N = c->kind == KVL_LAYER_WINDOW ? 0 : T / c->compressor.ratio;
    const size_t K = c->kind == KVL_LAYER_CSA ? c->indexer.topk : 0;
    v4_step s = {.c = c, .N = N, .T = T};
    int rc = v4_weights_alloc(&s.w, c) != KVL_OK;
    s.q = kvb_random_floats(H * Dh, rng);
    s.win = kvb_random_floats(W * Dh, rng);
    s.entries = kvb_random_floats((N ? N : 1) * Dh, rng);
    s.o = malloc(H * Dh * sizeof *s.o);
    s.sel = malloc((K ? K : 1) * sizeof *s.sel);
    rc = rc || !s.q || !s.win || !s.entries || !s.o || !s.sel;
    if (rc == 0) {
        kvl_rng_normal_f32(rng, s.w.sinks, H, 1.0);
        for (size_t i = 0; i < K; i++) s.sel[i] = (int32_t)(kvl_rng_next_u64(rng) % N);
        const double keys = (double)v4_keys(c, N);
        kvb_time t = time_step_at(step, KV_STORE_F32, T, run_v4, &s, 4.0 * (double)(H * Dh) * keys,
                                  keys * (double)Dh * sizeof(float), KVB_SGEMM_V4);
        if (line >= 0) line_ms[line][k] = t.median * 1e3;
    }
    v4_weights_free(&s.w);
    free(s.q);
    free(s.win);
    free(s.entries);
    free(s.o);
    free(s.sel);
    return rc;
}

static int bench_v4(const kvl_model *m, kvl_rng *rng)
{
    v4_config win, csa, hca;
    if (kvb_v4_layer(&win, m, KVL_LAYER_WINDOW) || kvb_v4_layer(&csa, m, KVL_LAYER_CSA) ||
        kvb_v4_layer(&hca, m, KVL_LAYER_HCA)) {
        fprintf(stderr, "kvbench: %s: no window, CSA or HCA layer: %s\n", m->path, kvl_error());
        return 1;
    }
    int rc = 0;
    for (size_t k = 0; k < N_CONTEXTS && rc == 0; k++) {
        rc = bench_v4_layer(&win, "V4-Flash window", CONTEXTS[k], -1, k, rng);
        if (rc == 0) rc = bench_v4_layer(&csa, "V4-Flash CSA", CONTEXTS[k], -1, k, rng);
        if (rc == 0) rc = bench_v4_layer(&hca, "V4-Flash HCA", CONTEXTS[k], LINE_HCA, k, rng);
    }
    if (rc == 0) rc = bench_v4_layer(&hca, "V4-Flash HCA", (size_t)1 << 20, -1, 0, rng);
    return rc;
}

/* ---- the figure ------------------------------------------------------------------------------------ */

static void write_figure(void)
{
    if (!kvb_out_dir) return;
    const double W = 780, Hh = 440, x0 = 90, x1 = 520, y0 = 380, y1 = 60;
    double lo = INFINITY, hi = 0;
    for (int l = 0; l < N_LINES; l++)
        for (int k = 0; k < N_CONTEXTS; k++)
            if (line_ms[l][k] > 0) lo = fmin(lo, line_ms[l][k]), hi = fmax(hi, line_ms[l][k]);
    if (!(hi > 0)) return;
    const double dlo = floor(log10(lo)), dhi = ceil(log10(hi)) > dlo ? ceil(log10(hi)) : dlo + 1;
    const double lx0 = log2((double)CONTEXTS[0]), lx1 = log2((double)CONTEXTS[N_CONTEXTS - 1]);
#define PX(t) (x0 + (log2(t) - lx0) / (lx1 - lx0) * (x1 - x0))
#define PY(ms) (y0 - (log10(ms) - dlo) / (dhi - dlo) * (y0 - y1))
    svg_doc s;
    svg_begin(&s, W, Hh);
    svg_title(&s, x0, 30, 15, "Attention cost per decode step against context (bf16 cache, 1 thread)");
    svg_line(&s, x0, y0, x1, y0, "#000", 1);
    svg_line(&s, x0, y0, x0, y1, "#000", 1);
    for (double d = dlo; d <= dhi; d++) {
        svg_line(&s, x0 - 4, PY(pow(10, d)), x1, PY(pow(10, d)), "#ddd", 1);
        svg_text(&s, x0 - 8, PY(pow(10, d)) + 4, 11, "end", "%g ms", pow(10, d));
    }
    for (int k = 0; k < N_CONTEXTS; k++)
        svg_text(&s, PX((double)CONTEXTS[k]), y0 + 18, 11, "middle", "%zuK", CONTEXTS[k] / 1024);
    svg_text(&s, (x0 + x1) / 2, y0 + 40, 12, "middle", "cached tokens");
    for (int l = 0; l < N_LINES; l++) {
        for (int k = 0; k + 1 < N_CONTEXTS; k++)
            if (line_ms[l][k] > 0 && line_ms[l][k + 1] > 0)
                svg_line(&s, PX((double)CONTEXTS[k]), PY(line_ms[l][k]), PX((double)CONTEXTS[k + 1]),
                         PY(line_ms[l][k + 1]), LINE_COLOUR[l], 2.5);
        const double ly = y1 + 20 * l;
        svg_line(&s, x1 + 20, ly, x1 + 44, ly, LINE_COLOUR[l], 2.5);
        svg_text(&s, x1 + 50, ly + 4, 11, "start", "%s", LINE_NAME[l]);
    }
#undef PX
#undef PY
    svg_end(&s);
    char path[1024];
    snprintf(path, sizeof path, "%s/decode.svg", kvb_out_dir);
    kvl_file_out o;
    int rc = s.failed ? kvl_fail(KVL_ENOMEM, "%s: out of memory", path) : kvl_file_out_open(&o, path);
    if (rc == KVL_OK) {
        kvl_file_out_write(&o, s.text, s.len);
        rc = kvl_file_out_commit(&o);
    }
    if (rc == KVL_OK) kvb_progress("decode: wrote %s", path);
    else kvb_progress("decode: %s", kvl_error());
    svg_free(&s);
}

/* ---- the group ------------------------------------------------------------------------------------- */

int kvb_group_decode(void)
{
    const kvb_ceiling_set *ceil = kvb_ceilings();
    if (!ceil) return 1;
    const double scaling = ceil->sgemm_gflops[KVB_SGEMM_MLA][1] / ceil->sgemm_gflops[KVB_SGEMM_MLA][0];
    printf("decode: sgemm on 2 threads runs %.2fx its 1-thread rate: %s\n", scaling,
           scaling >= 2 * KVB_SCALING_TARGET ? "the second core is free, 2T/1T verdicts hold"
                                         : "the second core is busy, 2T/1T verdicts say nothing about the code");
    kvl_model m67 = {0}, v3 = {0}, v32 = {0}, v4f = {0};
    mla_config mla;
    dsa_config dsa;
    kvl_rng rng;
    kvl_rng_seed(&rng, 11);
    int rc = kvb_load_config(&m67, "deepseek-llm-67b.json") || kvb_load_config(&v3, "deepseek-v3.json") ||
             kvb_load_config(&v32, "deepseek-v3.2-exp.json") || kvb_load_config(&v4f, "deepseek-v4-flash.json");
    if (rc == 0 && (mla_config_from_model(&mla, &v3) != KVL_OK || dsa_config_from_model(&dsa, &v32) != KVL_OK)) {
        fprintf(stderr, "kvbench: %s\n", kvl_error());
        rc = 1;
    }
    memset(line_ms, 0, sizeof line_ms);
    if (rc == 0) rc = bench_mha(&m67, &rng);
    if (rc == 0) rc = bench_mla_absorbed(&mla, &rng);
    if (rc == 0) rc = bench_mla_naive(&mla, &rng);
    if (rc == 0) rc = bench_dsa(&dsa, &rng);
    if (rc == 0) rc = bench_v4(&v4f, &rng);
    if (rc == 0) write_figure();
    kvl_model_free(&m67);
    kvl_model_free(&v3);
    kvl_model_free(&v32);
    kvl_model_free(&v4f);
    return rc;
}

/* ---- the peers ------------------------------------------------------------------------------------ */

#define PEER_T 32768

/* A peer's variant name as the table prints it ("torch_SDPA" -> "torch SDPA"), into name[cap]. */
static void peer_name(char *name, size_t cap, const char *variant)
{
    snprintf(name, cap, "%s", variant);
    for (char *c = name; *c; c++)
        if (*c == '_') *c = ' ';
}

/* Its target: none for a peer at a higher precision (float64) or one whose output is not the C step's. */
static double peer_target(const char *variant, int same)
{
    if (!same || strstr(variant, "f64")) return 0;
    return strstr(variant, "widening") ? KVB_PEER_BF16_TARGET : KVB_PEER_TARGET;
}

/* The C step s over T rows of `width`: its inputs and output handed to the peer, which loads its
 * variants of the same step and checks each against the output; then each variant timed against the
 * C step around it, a row each. 1 only when the files cannot be written. */
static int peer_rows(kvb_peer *p, const char *step, ring_step *s, size_t T, size_t width)
{
    const kv_store store = s->ring.store;
    const size_t Hq = s->groups * s->G, cache_bytes = T * width * kv_store_bytes(store);
    run_ring_step(s);
    if (kvb_peer_write(p, "q.f32", s->q, Hq * s->Dk * sizeof(float)) ||
        kvb_peer_write(p, "rows.bin", s->ring.rows, cache_bytes) ||
        kvb_peer_write(p, "out.f32", s->o, Hq * s->Dv * sizeof(float)))
        return 1;
    kvb_progress("peer: %s %s %zuK: the peers load and check it", step, kv_store_name(store), T / 1024);
    char reply[1024];
    if (kvb_peer_ask(p, reply, sizeof reply, "attend %s %zu %zu %zu %zu %zu %.9g %zu %zu %s", kvb_peer_dir(p),
                     s->groups, s->G, s->Dk, s->Dv, s->v_base, (double)s->scale, T, width,
                     store == KV_STORE_BF16 ? "bf16" : "f32") ||
        strncmp(reply, "variants", 8) != 0) {
        printf("peer: %s %s: the peer stopped; its rows are skipped\n", step, kv_store_name(store));
        return 0;
    }
    char *save = NULL;
    for (char *tok = strtok_r(reply + 8, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        char *colon = strrchr(tok, ':'), name[64], what[160];
        if (!colon) continue;
        *colon = 0;
        const double err = atof(colon + 1);
        const int same = err <= KVB_PEER_TOLERANCE;
        peer_name(name, sizeof name, tok);
        kvb_progress("peer: %s %s %zuK against %s", step, kv_store_name(store), T / 1024, name);
        double c_s = 0, peer_s = 0;
        const kvb_quartiles r = kvb_time_against_peer(p, tok, run_ring_step, s, &c_s, &peer_s);
        if (!(r.median > 0)) {
            printf("peer: %s %s: %s did not run\n", step, kv_store_name(store), name);
            continue;
        }
        snprintf(what, sizeof what, "%s %s %zuK %s/C (%s %.0e)", step, kv_store_name(store), T / 1024, name,
                 same ? "same to" : "DIFFERS by", err);
        kvb_print_peer_row("peer", what, (double)cache_bytes / KVB_MIB, c_s, r, peer_target(tok, same));
    }
    return 0;
}

/* One step's peers over a fresh ring of PEER_T rows in `store`. */
static int peer_step(kvb_peer *p, const char *step, ring_step proto, size_t width, kv_store store, kvl_rng *rng)
{
    ring_step s = proto;
    int rc = ring_step_init(&s, PEER_T, width, store, rng);
    if (rc == 0) rc = peer_rows(p, step, &s, PEER_T, width);
    ring_step_free(&s);
    return rc;
}

/* ggml's rows: tests/bench/ggml/ggml_peer.c's program, where `make bench-ggml` built it (peers/ggml_peer
 * beside the folder this program is in), run with its lines passed on: those of the Markdown table ("| ")
 * to it, the others to stdout. One line where it is not built, or stops. */
static void ggml_rows(void)
{
    char self[4096], path[4200];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    char *slash = n > 0 ? (self[n] = '\0', strrchr(self, '/')) : NULL;
    if (slash) *slash = '\0';
    snprintf(path, sizeof path, "%s/../peers/ggml_peer", slash ? self : ".");
    if (access(path, X_OK) != 0) {
        printf("peer: ggml: skipped, %s is not built (make bench-ggml builds it)\n", path);
        return;
    }
    fflush(stdout);
    FILE *f = popen(path, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f)) {
        if (strncmp(line, "| ", 2) != 0) fputs(line, stdout);
        else if (kvb_markdown) fputs(line, kvb_markdown);
    }
    const int status = f ? pclose(f) : -1;
    if (status != 0) printf("peer: ggml: %s stopped (status %d); its rows are incomplete\n", path, status);
}

int kvb_group_peer(void)
{
    kvl_model m67 = {0}, v3 = {0};
    mla_config c;
    int rc = kvb_load_config(&m67, "deepseek-llm-67b.json") || kvb_load_config(&v3, "deepseek-v3.json");
    if (rc == 0 && mla_config_from_model(&c, &v3) != KVL_OK) {
        fprintf(stderr, "kvbench: %s\n", kvl_error());
        rc = 1;
    }
    kvb_peer *p = rc == 0 ? kvb_peer_start("peer") : NULL;
    if (p && !kvb_peer_has(p, "torch")) printf("peer: python3 has no torch; the torch peers are skipped\n");
    kvl_rng rng;
    kvl_rng_seed(&rng, 13);
    size_t mla_width, gqa_width;
    const ring_step mla = p ? mla_step(&c, &mla_width) : (ring_step){0};
    const ring_step gqa = p ? gqa_step(&m67, &gqa_width) : (ring_step){0};
    kvb_set_threads(1);
    for (size_t st = 0; p && rc == 0 && st < 2; st++) {
        rc = peer_step(p, "V3 MLA absorbed", mla, mla_width, STORES[st], &rng);
        if (rc == 0) rc = peer_step(p, "67B GQA", gqa, gqa_width, STORES[st], &rng);
    }
    kvb_peer_stop(p);
    if (rc == 0) ggml_rows();
    kvl_model_free(&m67);
    kvl_model_free(&v3);
    return rc;
}
