/* mla_cost: what multi-head latent attention stores, and what absorbing W_UK buys at decode
 * (chapter 2).
 *
 *   mla_cost [--config FILE] [--contexts N,N,...] [--repeats R] [--naive-budget SECONDS]
 *
 * (a) Cache bytes at the config's head geometry (DeepSeek-V3 by default): the latent row against
 *     MHA and GQA-8 with the same heads, and the figures often quoted that size V like K, all
 *     derived from the config; a live MLA cache confirms the per-token bytes.
 * (b) One decode step of one layer at the config's attention dims, from the query to the heads'
 *     outputs, naive (re-expand K and V from every cached latent) against absorbed (score the
 *     latent rows directly): time, counted flop and bytes, rates. The naive form is timed while
 *     a step fits the budget; beyond that its work is counted only.
 * (c) A small numpy check of absorption (chapters/02_mla/README.md), redone in double with the
 *     project's rng.
 * Every figure is computed at run time. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "config.h"
#include "contexts.h"
#include "grouped.h"
#include "linalg.h"
#include "mla.h"
#include "program.h"
#include "progress.h"
#include "rng.h"
#include "softmax.h"
#include "status.h"
#include "swa.h"
#include "timing.h"

#define MAX_CONTEXTS 16
#define MAX_CONTEXT (1u << 20)
#define MAX_REPEATS 100
#define BF16_BYTES 2
#define GQA_GROUPS 8
#define LIVE_TOKENS 1000
#define NAIVE_CALIBRATION 256  /* tokens of the untimed naive step that predicts the others */
#define MAX_NAIVE_BUDGET 60.0
#define MAX_RUN_GIB 8.0        /* memory a run may take: weights, rows and scores */
#define MAX_TIMED_TFLOP                                                                            \
    8.0 /* counted flop of every timed absorbed step and the naive calibration */
#define GIB 1073741824.0

typedef struct {
    char config[1024];
    size_t contexts[MAX_CONTEXTS], n_contexts;
    size_t repeats;
    double naive_budget;  /* seconds one naive step may take to be timed */
} options;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: mla_cost [--config FILE] [--contexts N,N,...] [--repeats R] [--naive-budget SECONDS]\n"
        "MLA's cache against MHA and GQA-8, a naive against an absorbed decode step at the config's\n"
        "attention dims, and a small numpy check of absorption redone in double.\n"
        "  --config FILE         an MLA config.json (default: ref/configs/deepseek-v3.json)\n"
        "  --contexts LIST       cached tokens per decode step, K = 1024\n"
        "                        (default 1K,4K,8K,16K,32K,64K,128K)\n"
        "  --repeats R           timed repeats per step, median reported (default 3)\n"
        "  --naive-budget S      time the naive step only while one step is predicted under S seconds\n"
        "                        (0 < S <= 60, default 2)\n"
        "A config and contexts whose run needs more than %.0f GiB of memory or %.0f TFLOP of timed steps\n"
        "are refused before anything is printed.\n",
        MAX_RUN_GIB, MAX_TIMED_TFLOP);
    kvl_usage_backend(f);
}

#define G(v) KVL_GROUPED(v)   /* short, for the many counts in the printf calls below */

/* ---- (a) cache bytes ------------------------------------------------------------------------- */

static int cache_bytes(const kvl_model *m)
{
    const double L = (double)m->n_layers, H = (double)m->n_heads, Dc = (double)m->kv_lora_rank;
    const double Dr = (double)m->qk_rope_head_dim, Dn = (double)m->qk_nope_head_dim,
                 Dv = (double)m->v_head_dim;
    const double Dk = Dn + Dr, b = BF16_BYTES;
    const double mla = (Dc + Dr) * b, mha = H * (Dk + Dv) * b, gqa = GQA_GROUPS * (Dk + Dv) * b;
    const double mha_v_as_k = H * Dk * 2 * b, gqa_v_as_k = GQA_GROUPS * Dk * 2 * b;

    printf(
        "(a) KV cache at %s's head geometry (%s): %zu layers, H %zu, Dc %zu, Dr %zu, Dnope %zu, Dv %zu, bf16\n\n",
        m->name[0] ? m->name : "this model", m->path, m->n_layers, m->n_heads, m->kv_lora_rank,
        m->qk_rope_head_dim, m->qk_nope_head_dim, m->v_head_dim);
    printf(
        "  MLA     [c_kv | k_rope] = %s + %s = %s values x %.0f B = %s B/layer, x %s layers = %s B/token\n",
        G(Dc), G(Dr), G(Dc + Dr), b, G(mla), G(L), G(mla * L));
    printf(
        "  MHA     H(Dnope+Dr + Dv) = %s(%s + %s) x %.0f B = %s B/layer = %s B/token (%.1fx MLA)\n",
        G(H), G(Dk), G(Dv), b, G(mha), G(mha * L), mha / mla);
    printf("  GQA-%d   %d(%s + %s) x %.0f B = %s B/layer = %s B/token (%.2fx MLA)\n", GQA_GROUPS,
           GQA_GROUPS, G(Dk), G(Dv), b, G(gqa), G(gqa * L), gqa / mla);
    printf("  naive MLA, K and V re-expanded per head: %s values per token per layer, as MHA\n",
           G(H * (Dk + Dv)));
    printf(
        "\n  Priced with V sized like K (%s channels), as often quoted: MHA %s(%s x 2) x %.0f B = %s B/layer\n"
        "  = %s B/token (%.1fx), GQA-%d %s B/token (%.2fx). But a value has v_head_dim = %s channels, not %s:\n"
        "  the decoupled RoPE channels belong to the keys only, so the MHA and GQA rows above are the caches.\n",
        G(Dk), G(H), G(Dk), b, G(mha_v_as_k), G(mha_v_as_k * L), mha_v_as_k / mla, GQA_GROUPS,
        G(gqa_v_as_k * L), gqa_v_as_k / mla, G(Dv), G(Dk));
    printf("\n  The latent caches %s values, as many as GQA with %.2f groups of K and V heads of "
           "%s channels:\n  (Dc + Dr) / (2 Dv) = %s / %s = %.2f groups",
           G(Dc + Dr), (Dc + Dr) / (2 * Dv), G(Dv), G(Dc + Dr), G(2 * Dv), (Dc + Dr) / (2 * Dv));
    /* the V2 paper's Table 1 prices MLA at 2.25 groups for its own proportions only */
    if (Dc == 4 * Dv && 2 * Dr == Dv)
        printf(" (the V2 paper's Table 1, with Dc = 4 Dh and Dr = Dh/2).\n");
    else
        printf(" (the V2 paper's Table 1 gives 2.25 for Dc = 4 Dh and Dr = Dh/2;\n"
               "  here Dc = %s and Dr = %s against Dh = %s).\n", G(Dc), G(Dr), G(Dv));

    mla_config c;
    mla_cache cache;
    int rc = mla_config_from_model(&c, m);
    if (rc == KVL_OK) rc = mla_cache_init(&cache, &c, LIVE_TOKENS, KV_STORE_BF16);
    if (rc != KVL_OK) return rc;
    float *rows = calloc((size_t)LIVE_TOKENS * (c.kv_lora_rank + c.qk_rope), sizeof *rows);
    if (!rows) {
        mla_cache_free(&cache);
        return kvl_fail(KVL_ENOMEM, "out of memory for the live cache rows");
    }
    rc = mla_cache_append(&cache, &c, rows, LIVE_TOKENS);
    if (rc == KVL_OK)
        printf(
            "\n  live: a bf16 MLA cache holding %s tokens reports %s B = %s B/token per layer\n\n",
            G(LIVE_TOKENS), G(mla_cache_bytes_used(&cache)),
            G((double)mla_cache_bytes_used(&cache) / LIVE_TOKENS));
    free(rows);
    mla_cache_free(&cache);
    return rc;
}

/* ---- (b) one decode step --------------------------------------------------------------------- */

typedef struct { double flop, bytes; } work;

/* Counted per matrix product: flop = 2·M·N·K, bytes = both operands read once, float32. Softmax
 * (about 5 operations per score) is left out of both forms. */
static work naive_work(const mla_config *c, double N)
{
    const double H = (double)c->n_heads, Dc = (double)c->kv_lora_rank, Dn = (double)c->qk_nope;
    const double Dr = (double)c->qk_rope, Dv = (double)c->v_head, f = sizeof(float);
    work w;
    /* per head: K = C W_UKᵀ, scores = q·K, V = C W_UVᵀ, o = p V */
    w.flop = H * N * mla_naive_flop_per_token(c);
    w.bytes = f * (N * (Dc + Dr) +
                   H * (N * Dc + Dn * Dc + N * (Dn + Dr) + N * Dc + Dv * Dc + N + N * Dv));
    return w;
}

static work absorbed_work(const mla_config *c, double N)
{
    const double H = (double)c->n_heads, Dc = (double)c->kv_lora_rank, Dn = (double)c->qk_nope;
    const double Dr = (double)c->qk_rope, Dv = (double)c->v_head, Dw = Dc + Dr, f = sizeof(float);
    work w;
    /* q̂ = W_UKᵀ q^C per head, scores = Q̂ [C | K_rope]ᵀ, ô = P C, o = W_UV ô per head */
    w.flop = H * (2 * Dn * Dc + N * mla_absorbed_flop_per_token(c) + 2 * Dc * Dv);
    w.bytes = f * (H * Dn * Dc + N * Dw + H * N + N * Dc + H * Dv * Dc);
    return w;
}

/* the projections both forms share: W_DQ, W_UQ (or W_Q), W_DKV in; W_O out */
static work projection_work(const mla_config *c)
{
    const double d = (double)c->d, Dq = (double)c->q_lora_rank, H = (double)c->n_heads;
    const double Dqk = (double)(c->qk_nope + c->qk_rope),
                 Dw = (double)(c->kv_lora_rank + c->qk_rope);
    const double floats =
        (Dq ? Dq * d + H * Dqk * Dq : H * Dqk * d) + Dw * d + d * H * (double)c->v_head;
    return (work){2 * floats, sizeof(float) * floats};
}

typedef int (*scores_fn)(float *, const mla_config *, const mla_weights *, const float *,
                         const float *, const float *, size_t, size_t);
typedef int (*values_fn)(float *, const mla_config *, const mla_weights *, const float *,
                         const float *, size_t, size_t);

/* One head-attention step over rows[N][Dc+Dr]: scores, softmax, values; the median of `repeats`
 * in *t. */
static int time_step(double *t, scores_fn scores, values_fn values, const mla_config *c,
                     const mla_weights *w, const float *q, const float *rows, size_t N, float *s,
                     float *o, size_t repeats)
{
    double times[MAX_REPEATS];
    for (size_t r = 0; r < repeats; r++) {
        const double t0 = kvl_seconds();
        int rc = scores(s, c, w, q, rows, NULL, 1, N);
        if (rc != KVL_OK) return rc;
#pragma omp parallel for schedule(static)
        for (size_t h = 0; h < c->n_heads; h++) kvl_softmax_f32(s + h * N, N);
        rc = values(o, c, w, s, rows, 1, N);
        if (rc != KVL_OK) return rc;
        times[r] = kvl_seconds() - t0;
    }
    *t = kvl_median(times, repeats);
    return KVL_OK;
}

static void print_row(size_t N, const char *form, double t, work w)
{
    char ctx[32];
    snprintf(ctx, sizeof ctx, "%s", N ? G(N) : "");
    if (t > 0)
        printf("  %8s  %-9s %10s %10s %10s %9s %8s\n", ctx, form, KVL_FIXED(1e3 * t, 2),
               KVL_FIXED(1e-9 * w.flop, 2), KVL_FIXED(1e-9 * w.bytes, 3),
               KVL_FIXED(1e-9 * w.flop / t, 1), KVL_FIXED(1e-9 * w.bytes / t, 1));
    else
        printf("  %8s  %-9s %10s %10s %10s %9s %8s\n", ctx, form, "-", KVL_FIXED(1e-9 * w.flop, 2),
               KVL_FIXED(1e-9 * w.bytes, 3), "-", "-");
}

typedef struct {
    mla_config c;
    mla_weights w;
    float *q, *rows, *scores, *o;
} bench;

static void bench_free(bench *b)
{
    mla_weights_free(&b->w);
    free(b->q);
    free(b->rows);
    free(b->scores);
    free(b->o);
}

/* Weights allocated for the whole layer; only W_UKV, the one both forms use differently, is
 * drawn. Query and cached rows ~ N(0, 1): c_kv leaves its RMSNorm at unit scale, and k_rope is
 * rotated noise. */
static int bench_init(bench *b, const kvl_model *m, size_t max_N)
{
    memset(b, 0, sizeof *b);
    int rc = mla_config_from_model(&b->c, m);
    if (rc == KVL_OK) rc = mla_weights_alloc(&b->w, &b->c);
    if (rc != KVL_OK) return rc;
    const mla_config *c = &b->c;
    const size_t H = c->n_heads, Dw = c->kv_lora_rank + c->qk_rope;
    b->q = malloc(H * (c->qk_nope + c->qk_rope) * sizeof *b->q);
    b->rows = malloc(max_N * Dw * sizeof *b->rows);
    b->scores = malloc(H * max_N * sizeof *b->scores);
    b->o = malloc(H * c->v_head * sizeof *b->o);
    if (!b->q || !b->rows || !b->scores || !b->o)
        return kvl_fail(KVL_ENOMEM, "out of memory for a %zu-token decode step", max_N);
    kvl_rng rng;
    kvl_rng_seed(&rng, 2);
    kvl_rng_normal_f32(&rng, b->w.w_ukv, H * (c->qk_nope + c->v_head) * c->kv_lora_rank,
                       1.0 / sqrt((double)c->kv_lora_rank));
    kvl_rng_normal_f32(&rng, b->q, H * (c->qk_nope + c->qk_rope), 1.0);
    kvl_rng_normal_f32(&rng, b->rows, max_N * Dw, 1.0);
    return KVL_OK;
}

static int decode_step(const kvl_model *m, const options *opt)
{
    size_t max_N = 0;
    for (size_t i = 0; i < opt->n_contexts; i++)
        max_N = opt->contexts[i] > max_N ? opt->contexts[i] : max_N;
    bench b;
    int rc = bench_init(&b, m, max_N);
    if (rc != KVL_OK) {
        bench_free(&b);
        return rc;
    }
    const mla_config *c = &b.c;
    const work proj = projection_work(c);
    printf(
        "(b) One decode step of one layer at the attention dims of %s: H %zu, Dc %zu, Dr %zu, Dnope %zu, Dv %zu;\n"
        "    float32 rows, random weights. Timed: from the query q [H][%zu] and the N cached rows [N][%zu] to the\n"
        "    heads' outputs o [H][%zu] (scores, softmax, values). The projections around it (W_DQ, W_UQ, W_DKV\n"
        "    in, W_O out: %.2f GFLOP, %.2f GB of weights) are the same in both forms and not timed.\n"
        "    Median of %zu; flop and bytes counted per matrix product (2MNK, operands read once).\n\n",
        m->name[0] ? m->name : m->path, c->n_heads, c->kv_lora_rank, c->qk_rope, c->qk_nope,
        c->v_head, c->qk_nope + c->qk_rope, c->kv_lora_rank + c->qk_rope, c->v_head,
        1e-9 * proj.flop, 1e-9 * proj.bytes, opt->repeats);
    printf("  %8s  %-9s %10s %10s %10s %9s %8s\n", "context", "form", "ms", "GFLOP", "GB read",
           "GFLOP/s", "GB/s");
    /* flop/s of the last timed naive step, to predict the next; first from one short step */
    double naive_rate = 0, t_cal = 0;
    const size_t n_cal =
        opt->contexts[0] < NAIVE_CALIBRATION ? opt->contexts[0] : NAIVE_CALIBRATION;
    rc = time_step(&t_cal, mla_scores_naive, mla_values_naive, c, &b.w, b.q, b.rows, n_cal,
                   b.scores, b.o, 1);
    if (rc == KVL_OK) naive_rate = naive_work(c, (double)n_cal).flop / t_cal;
    size_t timed_up_to = 0, skipped = 0;
    for (size_t i = 0; i < opt->n_contexts && rc == KVL_OK; i++) {
        const size_t N = opt->contexts[i];
        const work wn = naive_work(c, (double)N), wa = absorbed_work(c, (double)N);
        double tn = 0, ta = 0;
        const int time_naive = wn.flop / naive_rate <= opt->naive_budget;
        if (time_naive) {
            rc = time_step(&tn, mla_scores_naive, mla_values_naive, c, &b.w, b.q, b.rows, N,
                           b.scores, b.o, opt->repeats);
            if (rc == KVL_OK) naive_rate = wn.flop / tn, timed_up_to = N;
        } else {
            skipped++;
        }
        if (rc == KVL_OK)
            rc = time_step(&ta, mla_scores_absorbed, mla_values_absorbed, c, &b.w, b.q, b.rows, N,
                           b.scores, b.o, opt->repeats);
        if (rc != KVL_OK) break;
        print_row(N, "naive", tn, wn);
        print_row(0, "absorbed", ta, wa);
        if (tn > 0)
            printf("  %8s  naive / absorbed: %.1fx the time, %.1fx the flop, %.1fx the bytes\n", "",
                   tn / ta, wn.flop / wa.flop, wn.bytes / wa.bytes);
        else
            printf(
                "  %8s  naive / absorbed: %.1fx the flop, %.1fx the bytes; naive predicted %.1f s at %.1f GFLOP/s\n",
                "", wn.flop / wa.flop, wn.bytes / wa.bytes, wn.flop / naive_rate,
                1e-9 * naive_rate);
    }
    if (rc == KVL_OK && skipped && timed_up_to)
        printf(
            "\n  The naive step was timed up to %s tokens; past that one step is predicted over the %.1f s budget\n"
            "  (--naive-budget), so only its work is counted (time -).\n",
            G(timed_up_to), opt->naive_budget);
    else if (rc == KVL_OK && skipped)
        printf(
            "\n  The naive step was not timed: at the %.1f GFLOP/s it ran over %s tokens, every step asked for is\n"
            "  predicted over the %.1f s budget (--naive-budget), so only its work is counted (time -).\n",
            1e-9 * naive_rate, G(n_cal), opt->naive_budget);
    if (rc == KVL_OK)
        printf(
            "\n  The naive form rebuilds every head's %zu-channel key and %zu-channel value from each cached latent\n"
            "  on every step: 2 Dc (Dnope + Dv) = %s flop per token per head before any attention is done.\n"
            "  The absorbed form scores the %zu-wide rows as they are and sums their latents, 2 (Dc + Dr) +\n"
            "  2 Dc = %s flop per token per head: on long contexts the per-step work falls %.0fx, and each\n"
            "  step reads the cache as stored instead of rebuilding K and V from it, which is why servers\n"
            "  decode in the absorbed form (FlashMLA's \"MQA mode\"). Every cached row serves all %zu heads:\n"
            "  the absorbed step does %.0f flop"
            " per byte read at %s tokens, tending to %.0f on long contexts, so the\n"
            "  processor's ratio of flop/s to bytes/s decides whether arithmetic or memory bounds it.\n\n",
            c->qk_nope + c->qk_rope, c->v_head, G(2.0 * c->kv_lora_rank * (c->qk_nope + c->v_head)),
            c->kv_lora_rank + c->qk_rope, G(mla_absorbed_flop_per_token(c)),
            naive_work(c, 1e6).flop / absorbed_work(c, 1e6).flop, c->n_heads,
            absorbed_work(c, (double)max_N).flop / absorbed_work(c, (double)max_N).bytes, G(max_N),
            absorbed_work(c, 1e12).flop / absorbed_work(c, 1e12).bytes);
    bench_free(&b);
    return rc;
}

/* ---- (c) the numpy absorption check in double ------------------------------------------------ */

enum { WT_D = 64, WT_NH = 4, WT_DH = 16, WT_DC = 32, WT_T = 10 };

/* x[n] = rng.standard_normal(n) / sqrt(fan), the numpy check's draw of each array */
static void draw(kvl_rng *rng, double *x, size_t n, double fan)
{
    kvl_rng_normal_f64(rng, x, n, 1.0);
    for (size_t i = 0; i < n; i++) x[i] /= sqrt(fan);
}

/* out[h][i] = Σ_t p[h][t] · (W[h] C[t])_i, and the like, through linalg's plain double loops:
 * its BLAS products would order the sums by the machine's kernel, and the digits printed with
 * them (2.66e-15 on an AVX-512 OpenBLAS, 3.55e-15 on an AVX2 one) with it */
static int absorption_toy_check(void)
{
    static double W_DKV[WT_DC][WT_D], W_UK[WT_NH][WT_DH][WT_DC], W_UV[WT_NH][WT_DH][WT_DC],
        W_Q[WT_NH][WT_DH][WT_D], Hs[WT_T][WT_D], h_t[WT_D], C[WT_T][WT_DC];
    kvl_rng rng;
    kvl_rng_seed(&rng, 0);
    draw(&rng, &W_DKV[0][0], WT_DC * WT_D, WT_D);
    draw(&rng, &W_UK[0][0][0], WT_NH * WT_DH * WT_DC, WT_DC);
    draw(&rng, &W_UV[0][0][0], WT_NH * WT_DH * WT_DC, WT_DC);
    draw(&rng, &W_Q[0][0][0], WT_NH * WT_DH * WT_D, WT_D);
    draw(&rng, &Hs[0][0], WT_T * WT_D, 1);
    draw(&rng, h_t, WT_D, 1);
    int rc = kvl_matmul_abt_f64_loop(&C[0][0], &Hs[0][0], &W_DKV[0][0], WT_T, WT_DC, WT_D);
    double ds = 0, dout = 0;
    for (int h = 0; h < WT_NH && rc == KVL_OK; h++) {
        double q[WT_DH], K[WT_T][WT_DH], V[WT_T][WT_DH], s[WT_T], s_abs[WT_T], q_abs[WT_DC],
            o_lat[WT_DC];
        double out[WT_DH], out_abs[WT_DH];
        rc = kvl_matvec_f64_loop(q, &W_Q[h][0][0], h_t, WT_DH, WT_D);
        /* naive: K and V up-projected for every cached token */
        if (rc == KVL_OK)
            rc = kvl_matmul_abt_f64_loop(&K[0][0], &C[0][0], &W_UK[h][0][0], WT_T, WT_DH, WT_DC);
        if (rc == KVL_OK)
            rc = kvl_matmul_abt_f64_loop(&V[0][0], &C[0][0], &W_UV[h][0][0], WT_T, WT_DH, WT_DC);
        if (rc == KVL_OK) rc = kvl_matvec_f64_loop(s, &K[0][0], q, WT_T, WT_DH);
        double p[WT_T];
        memcpy(p, s, sizeof p);
        kvl_softmax_f64(p, WT_T);
        if (rc == KVL_OK) rc = kvl_matmul_ab_f64_loop(out, p, &V[0][0], 1, WT_DH, WT_T);
        /* absorbed: q̂ = W_UKᵀ q, scores against C, latent sum, W_UV after */
        if (rc == KVL_OK) rc = kvl_matmul_ab_f64_loop(q_abs, q, &W_UK[h][0][0], 1, WT_DC, WT_DH);
        if (rc == KVL_OK) rc = kvl_matvec_f64_loop(s_abs, &C[0][0], q_abs, WT_T, WT_DC);
        if (rc == KVL_OK) rc = kvl_matmul_ab_f64_loop(o_lat, p, &C[0][0], 1, WT_DC, WT_T);
        if (rc == KVL_OK) rc = kvl_matvec_f64_loop(out_abs, &W_UV[h][0][0], o_lat, WT_DH, WT_DC);
        for (int t = 0; t < WT_T; t++) ds = fmax(ds, fabs(s[t] - s_abs[t]));
        for (int i = 0; i < WT_DH; i++) dout = fmax(dout, fabs(out[i] - out_abs[i]));
    }
    if (rc != KVL_OK) return rc;
    printf(
        "(c) The numpy absorption check in double (d %d, n_h %d, d_h %d, d_c %d, T %d, default_rng(0),\n"
        "    drawn in its order W_DKV, W_UK, W_UV, W_Q, H, h_t):\n\n",
        WT_D, WT_NH, WT_DH, WT_DC, WT_T);
    printf("max |score diff| : %.16g\n", ds);
    printf("max |output diff|: %.16g\n", dout);
    printf("cached floats per token, naive K+V: %d  absorbed latent: %d\n", 2 * WT_NH * WT_DH,
           WT_DC);
    return KVL_OK;
}

/* ---- arguments ------------------------------------------------------------------------------- */

enum { F_CONFIG, F_CONTEXTS, F_REPEATS, F_NAIVE_BUDGET };
static const kvl_flag FLAGS[] = {
    {"--config", 1}, {"--contexts", 1}, {"--repeats", 1}, {"--naive-budget", 1}};

/* 0: run; 1: --help printed; 2: bad arguments (message printed) */
static int parse_args(options *opt, int argc, char **argv)
{
    snprintf(opt->config, sizeof opt->config, "%s/ref/configs/deepseek-v3.json", kvl_root_dir());
    static const size_t defaults[] = {1024, 4096, 8192, 16384, 32768, 65536, 131072};
    memcpy(opt->contexts, defaults, sizeof defaults);
    opt->n_contexts = sizeof defaults / sizeof defaults[0];
    opt->repeats = 3;
    opt->naive_budget = 2.0;
    kvl_args a = kvl_args_start("mla_cost", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *v;
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) {
            usage(stdout);
            return 1;
        }
        if (k == KVL_ARGS_BAD) return 2;
        if (k == F_CONFIG) snprintf(opt->config, sizeof opt->config, "%s", v);
        if (k == F_CONTEXTS && kvl_parse_contexts(opt->contexts, &opt->n_contexts, MAX_CONTEXTS,
                                                  MAX_CONTEXT, v) != KVL_OK)
            return kvl_bad_usage("mla_cost", kvl_error(), NULL);
        if (k == F_REPEATS && kvl_parse_size(&opt->repeats, v, 1, MAX_REPEATS))
            return kvl_bad_usage("mla_cost", "--repeats must be an integer from 1 to 100", v);
        if (k == F_NAIVE_BUDGET && (kvl_parse_real(&opt->naive_budget, v, 0, MAX_NAIVE_BUDGET) ||
                                    !(opt->naive_budget > 0)))
            return kvl_bad_usage("mla_cost",
                                 "--naive-budget must be a number of seconds in (0, 60]", v);
    }
    return 0;
}

/* What (a) and (b) allocate and time, against the bounds --help states: a config the program cannot
 * run is refused before the first line. */
static int check_run(const kvl_model *m, const options *opt)
{
    mla_config c;
    size_t weights, max_N = 0;
    int rc = mla_config_from_model(&c, m);
    if (rc == KVL_OK) rc = mla_weights_size(&weights, &c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", m->path, kvl_error());
    for (size_t i = 0; i < opt->n_contexts; i++)
        max_N = opt->contexts[i] > max_N ? opt->contexts[i] : max_N;
    const double H = (double)c.n_heads, Dw = (double)(c.kv_lora_rank + c.qk_rope),
                 N = (double)max_N;
    const double floats =
        (double)weights + N * Dw + H * N + H * (double)(c.qk_nope + c.qk_rope + c.v_head);
    const double bytes = sizeof(float) * floats + LIVE_TOKENS * Dw * (sizeof(float) + BF16_BYTES);
    double flop = naive_work(&c, NAIVE_CALIBRATION).flop;
    for (size_t i = 0; i < opt->n_contexts; i++)
        flop += (double)opt->repeats * absorbed_work(&c, (double)opt->contexts[i]).flop;
    char fields[256];
    snprintf(fields, sizeof fields,
             "num_attention_heads (n_heads) %zu, kv_lora_rank %zu, qk_rope_head_dim %zu, "
             "hidden_size (dim) %zu and %zu cached tokens",
             c.n_heads, c.kv_lora_rank, c.qk_rope, c.d, max_N);
    KVL_TRY(kvl_bound_run(m, fields, bytes / GIB, MAX_RUN_GIB, "GiB of memory"));
    return kvl_bound_run(m, fields, flop * 1e-12, MAX_TIMED_TFLOP, "TFLOP of timed steps");
}

int main(int argc, char **argv)
{
    options opt;
    int p = parse_args(&opt, argc, argv);
    if (p) return p == 1 ? kvl_exit_status("mla_cost", 0) : 2;
    kvl_progress_start("mla_cost");
    kvl_progress("checking the config");
    kvl_model m;
    if (kvl_model_load(&m, opt.config) != KVL_OK) {
        kvl_progress_stop();
        fprintf(stderr, "mla_cost: %s\n", kvl_error());
        return 2;
    }
    if (m.generation != KVL_GEN_MLA && m.generation != KVL_GEN_DSA) {
        kvl_progress_stop();
        fprintf(stderr, "mla_cost: %s: attention is %s, not MLA\n", opt.config,
                kvl_generation_name(m.generation));
        kvl_model_free(&m);
        return 2;
    }
    if (check_run(&m, &opt) != KVL_OK) {
        kvl_progress_stop();
        fprintf(stderr, "mla_cost: %s\n", kvl_error());
        kvl_model_free(&m);
        return 2;
    }
    int rc = cache_bytes(&m);
    if (rc == KVL_OK) kvl_progress("the decode step, naive and absorbed");
    if (rc == KVL_OK) rc = decode_step(&m, &opt);
    if (rc == KVL_OK) kvl_progress("the toy check");
    if (rc == KVL_OK) rc = absorption_toy_check();
    kvl_progress_stop();
    kvl_model_free(&m);
    if (rc != KVL_OK) {
        fprintf(stderr, "mla_cost: %s\n", kvl_error());
        return 1;
    }
    return kvl_exit_status("mla_cost", 0);
}
