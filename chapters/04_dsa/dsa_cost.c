/* dsa_cost: what DeepSeek-V3.2's sparse attention costs and saves per query, and what its
 * indexer is trained to match (chapter 4).
 *
 *   dsa_cost [--config FILE] [--contexts N,N,...] [--repeats R] [--no-timing]
 *
 * (a) The cache a token leaves per layer: the 656-byte main row and the 132-byte index key
 *     (formats/rows.h), against V3's bf16 latent row.
 * (b) One decode query at context T, at the config's dims (V3.2 by default): dense MLA over all
 *     T latent rows against DSA, the lightning indexer's scan of all T index keys plus MLA over
 *     the K = index_topk rows it picks. Flop and bytes read are counted exactly per product; one
 *     float32 step of each is timed with ref/dsa's pieces. Where sparse starts to pay, and the
 *     cut at the longest context asked for, are derived.
 * (c) The indexer's training target at toy size with random weights: dense attention summed over
 *     heads and L1-normalised per query, against the indexer's distribution (softmax over its
 *     scores); the KL divergence the warm-up stage minimises, and that loss over a short warm-up
 *     of the head weights alone.
 * (d) The top-k recall of the FP8 indexer against float32 at the real indexer width.
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
#include "dsa.h"
#include "topk.h"
#include "mla.h"
#include "program.h"
#include "progress.h"
#include "rng.h"
#include "rows.h"
#include "softmax.h"
#include "status.h"
#include "swa.h"
#include "timing.h"

#define MAX_CONTEXTS 16
#define MAX_CONTEXT (1u << 20)
#define MAX_REPEATS 100
#define BF16_BYTES 2
#define TOY_T 40
#define TOY_SEED 4
#define TOY_SHOWN 8 /* positions listed for one query */
#define MAX_INDEX_CHANNELS 65536.0  /* index_n_heads x index_head_dim that (d) runs at: 8x V3.2's */
#define MAX_RUN_GIB 8.0             /* memory (b) may take: weights, rows, keys and scores */
#define MAX_TIMED_TFLOP 10.0        /* counted flop of every timed step of (b) */
#define GIB 1073741824.0

typedef struct {
    char config[1024];
    size_t contexts[MAX_CONTEXTS], n_contexts;
    size_t repeats;
    int timing;
} options;

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: dsa_cost [--config FILE] [--contexts N,N,...] [--repeats R] [--no-timing]\n"
        "DeepSeek-V3.2's sparse attention per decode query: the lightning indexer's scan plus MLA over\n"
        "the top-k latents, against dense MLA; where sparse starts to pay; and the KL divergence the\n"
        "indexer's warm-up minimises, at toy size.\n"
        "  --config FILE    a DSA config.json (default: ref/configs/deepseek-v3.2-exp.json)\n"
        "  --contexts LIST  context lengths T of the query, K = 1024 (default 2K,4K,8K,16K,32K,64K,128K)\n"
        "  --repeats R      timed repeats per step, median reported (default 3)\n"
        "  --no-timing      count flop and bytes only\n"
        "Refused before anything is printed: an indexer wider than %.0f channels (heads x dim), and a\n"
        "timed run that needs more than %.0f GiB of memory or %.0f TFLOP.\n",
        MAX_INDEX_CHANNELS, MAX_RUN_GIB, MAX_TIMED_TFLOP);
    kvl_usage_backend(f);
}

#define G(v) KVL_GROUPED(v)   /* short, for the many counts in the printf calls below */

/* ---- (a) the cache --------------------------------------------------------------------------- */

static void cache_bytes(const kvl_model *m, const dsa_config *c)
{
    const double L = (double)m->n_layers, main_row = (double)kvf_row_bytes(KVF_ROW_V32_MAIN);
    const double key = (double)kvf_row_bytes(KVF_ROW_V32_INDEX),
                 Dw = (double)(c->mla.kv_lora_rank + c->mla.qk_rope);
    const double DI = (double)c->index_head_dim, bf16 = Dw * BF16_BYTES;
    printf(
        "(a) The cache per token (%s, %s): %s layers, each keeping MLA's latent row and one index key\n\n",
        m->name[0] ? m->name : "this model", m->path, G(L));
    printf(
        "  main row   %s values (Dc %zu + Dr %zu): %s B (E4M3 latent, 4 FP32 scales, bf16 RoPE)\n",
        G(Dw), c->mla.kv_lora_rank, c->mla.qk_rope, G(main_row));
    printf(
        "  index key  %s values (DI): %s B (E4M3, one FP32 scale), %.1f%% of the values, %.1f%% of the bytes\n",
        G(DI), G(key), 100 * DI / Dw, 100 * key / main_row);
    printf(
        "  per layer  %s B/token, x %s layers = %s B/token (V3's bf16 row: %s B/layer, %s B/token, %.2fx)\n\n",
        G(main_row + key), G(L), G((main_row + key) * L), G(bf16), G(bf16 * L),
        bf16 / (main_row + key));
}

/* ---- (b) one decode query -------------------------------------------------------------------- */

typedef struct { double flop, bytes; } work;

/* Per query at context T (T keys), counted per product as 2·M·N·K flop; bytes are the deployed
 * cache rows read (656 per latent row, 132 per index key). The per-query absorption of W_UK into
 * q and of W_UV after the sum (2·H·Dnope·Dc + 2·H·Dc·Dv) is the same in both forms and is
 * included in both; the softmax and the top-k's comparisons are not flop and are left out. */
static double absorb_flop(const dsa_config *c)
{
    const mla_config *m = &c->mla;
    return 2.0 * (double)m->n_heads * (double)m->kv_lora_rank * (double)(m->qk_nope + m->v_head);
}

/* MLA absorbed over n rows, every head */
static double attention_flop(const dsa_config *c, double n)
{
    return (double)c->mla.n_heads * n * mla_absorbed_flop_per_token(&c->mla);
}

/* the indexer over T keys: HI dot products of DI per key, then the weighted ReLU sum (a multiply
 * and an add per head and key) */
static double indexer_flop(const dsa_config *c, double T)
{
    return 2.0 * (double)c->index_n_heads * T * ((double)c->index_head_dim + 1.0);
}

static double topk_rows(const dsa_config *c, double T) { return fmin(T, (double)c->index_topk); }

static work dense_work(const dsa_config *c, double T)
{
    return (work){absorb_flop(c) + attention_flop(c, T),
                  T * (double)kvf_row_bytes(KVF_ROW_V32_MAIN)};
}

static work index_work(const dsa_config *c, double T)
{
    return (work){indexer_flop(c, T), T * (double)kvf_row_bytes(KVF_ROW_V32_INDEX)};
}

static work sparse_work(const dsa_config *c, double T)
{
    const double n = topk_rows(c, T);
    return (work){indexer_flop(c, T) + absorb_flop(c) + attention_flop(c, n),
                  T * (double)kvf_row_bytes(KVF_ROW_V32_INDEX) +
                      n * (double)kvf_row_bytes(KVF_ROW_V32_MAIN)};
}

/* per-token projections, independent of T: MLA's W_DQ, W_UQ, W_DKV, W_O and the indexer's W_IQ,
 * W_IK, W_IW */
static double mla_projection_flop(const dsa_config *c)
{
    const mla_config *m = &c->mla;
    const double d = (double)m->d, H = (double)m->n_heads, Dq = (double)m->q_lora_rank;
    return 2.0 * (Dq * d + H * (double)(m->qk_nope + m->qk_rope) * Dq +
                  (double)(m->kv_lora_rank + m->qk_rope) * d + d * H * (double)m->v_head);
}

static double index_projection_flop(const dsa_config *c)
{
    const double HI = (double)c->index_n_heads, DI = (double)c->index_head_dim,
                 d = (double)c->mla.d;
    return 2.0 * (HI * DI * (double)c->mla.q_lora_rank + DI * d + HI * d);
}

/* What one float32 step reads: the query q [H][Dnope+Dr], its index query q_idx [HI][DI] and
 * head weights w_idx [HI], the cached rows [T][Dc+Dr] and index keys [T][DI]; scratch for scores
 * and picks. */
typedef struct {
    dsa_config c;
    dsa_weights w;
    float *q, *q_idx, *w_idx, *rows, *keys, *scores, *I, *o;
    int32_t *sel;
} bench;

static void bench_free(bench *b)
{
    dsa_weights_free(&b->w);
    free(b->q);
    free(b->q_idx);
    free(b->w_idx);
    free(b->rows);
    free(b->keys);
    free(b->scores);
    free(b->I);
    free(b->o); free(b->sel);
}

/* Weights allocated for the whole layer (zero pages until touched); only W_UKV, which the
 * absorbed attention reads, is drawn. Queries, rows and keys ~ N(0, 1): c_kv and k^I leave their
 * norms at unit scale, and the rotary parts are rotated noise. */
static int bench_init(bench *b, const dsa_config *c, size_t max_T)
{
    memset(b, 0, sizeof *b);
    b->c = *c;
    int rc = dsa_weights_alloc(&b->w, c);
    if (rc != KVL_OK) return rc;
    const mla_config *m = &c->mla;
    const size_t H = m->n_heads, Dw = m->kv_lora_rank + m->qk_rope, HI = c->index_n_heads,
                 DI = c->index_head_dim;
    b->q = malloc(H * (m->qk_nope + m->qk_rope) * sizeof *b->q);
    b->q_idx = malloc(HI * DI * sizeof *b->q_idx);
    b->w_idx = malloc(HI * sizeof *b->w_idx);
    b->rows = malloc(max_T * Dw * sizeof *b->rows);
    b->keys = malloc(max_T * DI * sizeof *b->keys);
    b->scores = malloc(H * max_T * sizeof *b->scores);
    b->I = malloc(max_T * sizeof *b->I);
    b->o = malloc(H * m->v_head * sizeof *b->o);
    b->sel = malloc(c->index_topk * sizeof *b->sel);
    if (!b->q || !b->q_idx || !b->w_idx || !b->rows || !b->keys || !b->scores || !b->I || !b->o ||
        !b->sel)
        return kvl_fail(KVL_ENOMEM, "out of memory for a %zu-token decode step", max_T);
    kvl_rng rng;
    kvl_rng_seed(&rng, 2);
    kvl_rng_normal_f32(&rng, b->w.mla.w_ukv, H * (m->qk_nope + m->v_head) * m->kv_lora_rank,
                       1.0 / sqrt((double)m->kv_lora_rank));
    kvl_rng_normal_f32(&rng, b->q, H * (m->qk_nope + m->qk_rope), 1.0);
    kvl_rng_normal_f32(&rng, b->q_idx, HI * DI, 1.0);
    kvl_rng_normal_f32(&rng, b->w_idx, HI, 1.0 / sqrt((double)HI * (double)DI));
    kvl_rng_normal_f32(&rng, b->rows, max_T * Dw, 1.0);
    kvl_rng_normal_f32(&rng, b->keys, max_T * DI, 1.0);
    return KVL_OK;
}

/* dense: absorbed MLA scores over all T rows, softmax per head, the latent sum and W_UV */
static int dense_step(bench *b, size_t T)
{
    const mla_config *m = &b->c.mla;
    int rc = mla_scores_absorbed(b->scores, m, &b->w.mla, b->q, b->rows, NULL, 1, T);
    if (rc != KVL_OK) return rc;
    for (size_t h = 0; h < m->n_heads; h++) kvl_softmax_f32(b->scores + h * T, T);
    return mla_values_absorbed(b->o, m, &b->w.mla, b->scores, b->rows, 1, T);
}

/* sparse: the query at position T − 1 scores all T index keys, keeps the top K, attends to those
 * rows */
static int sparse_step(bench *b, size_t T)
{
    int rc = dsa_index_scores(b->I, &b->c, b->q_idx, b->w_idx, b->keys, 1, T, T - 1);
    if (rc == KVL_OK) rc = kvl_topk(b->sel, b->I, 1, T, b->c.index_topk);
    if (rc == KVL_OK) rc = dsa_attend_gather(b->o, &b->c, &b->w, b->q, b->rows, b->sel, 1, T);
    return rc;
}

static int time_step(double *t, int (*step)(bench *, size_t), bench *b, size_t T, size_t repeats)
{
    double times[MAX_REPEATS];
    for (size_t r = 0; r < repeats; r++) {
        const double t0 = kvl_seconds();
        int rc = step(b, T);
        if (rc != KVL_OK) return rc;
        times[r] = kvl_seconds() - t0;
    }
    *t = kvl_median(times, repeats);
    return KVL_OK;
}

static void print_row(const char *ctx, const char *form, work w, double t)
{
    printf("  %9s  %-10s %10s %10s %10s\n", ctx, form, KVL_FIXED(1e-9 * w.flop, 3),
           KVL_FIXED(1e-6 * w.bytes, 2), t > 0 ? KVL_FIXED(1e3 * t, 2) : "-");
}

/* T at which the sparse form's linear cost catches up with the dense one's: a·T = b·T + c·K */
static double break_even(double dense_per_key, double index_per_key, double fixed)
{
    return fixed / (dense_per_key - index_per_key);
}

/* what the table's longest context T shows */
static void summary(const dsa_config *c, double T)
{
    const double K = (double)c->index_topk;
    const double main_row = (double)kvf_row_bytes(KVF_ROW_V32_MAIN),
                 key = (double)kvf_row_bytes(KVF_ROW_V32_INDEX);
    const double per_row = attention_flop(c, 1), per_key = indexer_flop(c, 1);
    const double t_flop = break_even(per_row, per_key, per_row * K),
                 t_bytes = break_even(main_row, key, main_row * K);
    const work d = dense_work(c, T), s = sparse_work(c, T), ix = index_work(c, T);
    const double dense_prefill = T * (T + 1) / 2, sparse_prefill = K * (K + 1) / 2 + (T - K) * K;
    printf(
        "\n  While T <= K = %s the top-k keeps every position: DSA is dense MLA (the same output, as\n"
        "  test_ch04_dsa checks) plus the indexer's scan, pure overhead. Past K the attention stays at K rows\n"
        "  while the scan grows with T: %s flop and %s B per index key, against dense MLA's %s flop and %s B\n"
        "  per latent row. Sparse starts to pay at T = K/(1 - %s/%s) = %s tokens in flop and at\n"
        "  T = K/(1 - %s/%s) = %s in bytes read.\n",
        G(K), G(per_key), G(key), G(per_row), G(main_row), G(per_key), G(per_row), G(ceil(t_flop)),
        G(key), G(main_row), G(ceil(t_bytes)));
    if (T <= K) {
        printf(
            "\n  At %s tokens, the longest context asked for, the top-k keeps all %s rows: DSA reads every latent\n"
            "  row dense MLA does, plus the indexer's scan (%.3f GFLOP, %.2f MB of index keys), %.2fx dense MLA's\n"
            "  flop in all.\n",
            G(T), G(T), 1e-9 * ix.flop, 1e-6 * ix.bytes, s.flop / d.flop);
        return;
    }
    char at_128000[48] = "", fewer[48];
    if (T == 131072) snprintf(at_128000, sizeof at_128000, " (%.1fx at 128,000)", 128000.0 / K);
    printf(
        "\n  At %s tokens, the longest context asked for:\n"
        "  the attention reads %s of %s latent rows, %sx fewer%s.\n"
        "  Counting the indexer's scan (%.3f GFLOP, %.2f MB of index keys, %.0f%% of DSA's flop), a query\n"
        "  costs %.1fx fewer flop and reads %.1fx fewer bytes than dense MLA. Over a whole %s-token\n"
        "  prefill the core attention scores sum(min(t+1, K)) query-key pairs instead of sum(t+1) = %s:\n"
        "  %.1fx fewer, while the indexer, O(T) per query with a small constant, still scores all of them.\n",
        G(T), G(K), G(T), kvl_grouped(fewer, sizeof fewer, T / K, 1), at_128000, 1e-9 * ix.flop,
        1e-6 * ix.bytes, 100 * ix.flop / s.flop, d.flop / s.flop, d.bytes / s.bytes, G(T),
        G(dense_prefill), dense_prefill / sparse_prefill);
}

static int decode_query(const dsa_config *c, const options *opt)
{
    size_t max_T = 0;
    for (size_t i = 0; i < opt->n_contexts; i++)
        max_T = opt->contexts[i] > max_T ? opt->contexts[i] : max_T;
    const mla_config *m = &c->mla;
    printf(
        "(b) One decode query at context T: dense MLA over all T latent rows against DSA's indexer scan of\n"
        "    all T index keys plus MLA over the top K = %s. Dims: H %zu, Dc %zu, Dr %zu, Dnope %zu, Dv %zu;\n"
        "    HI %zu, DI %zu. GFLOP counted per product (2MNK; softmax and top-k comparisons left out); MB =\n"
        "    deployed cache bytes read (656 per latent row, 132 per index key). Per token, whatever T is,\n"
        "    MLA's projections cost %.3f GFLOP and the indexer's add %.3f (W_IQ, W_IK, W_IW).\n",
        G(c->index_topk), m->n_heads, m->kv_lora_rank, m->qk_rope, m->qk_nope, m->v_head,
        c->index_n_heads, c->index_head_dim, 1e-9 * mla_projection_flop(c),
        1e-9 * index_projection_flop(c));
    if (opt->timing)
        printf(
            "    Timed: one float32 step with ref/dsa's pieces (mla_scores/values_absorbed; dsa_index_scores,\n"
            "    dsa_topk, dsa_attend_gather), random rows and weights, median of %zu.\n",
            opt->repeats);
    printf("\n  %9s  %-10s %10s %10s %10s\n", "context", "form", "GFLOP", "MB read", "ms");
    bench b;
    int rc = opt->timing ? bench_init(&b, c, max_T) : KVL_OK;
    for (size_t i = 0; i < opt->n_contexts && rc == KVL_OK; i++) {
        const size_t T = opt->contexts[i];
        const work d = dense_work(c, (double)T), s = sparse_work(c, (double)T);
        double td = 0, ts = 0;
        if (opt->timing) rc = time_step(&td, dense_step, &b, T, opt->repeats);
        if (opt->timing && rc == KVL_OK) rc = time_step(&ts, sparse_step, &b, T, opt->repeats);
        if (rc != KVL_OK) break;
        print_row(G(T), "dense MLA", d, td);
        print_row("", "DSA", s, ts);
        if (opt->timing)
            printf("  %9s  %-10s %9.2fx %9.2fx %9.2fx   (attention over %s rows)\n", "",
                   "dense/DSA", d.flop / s.flop, d.bytes / s.bytes, td / ts,
                   G(topk_rows(c, (double)T)));
        else
            printf("  %9s  %-10s %9.2fx %9.2fx %10s   (attention over %s rows)\n", "", "dense/DSA",
                   d.flop / s.flop, d.bytes / s.bytes, "", G(topk_rows(c, (double)T)));
    }
    if (opt->timing) bench_free(&b);
    if (rc == KVL_OK) summary(c, (double)max_T);
    return rc;
}

/* ---- (c) the indexer's training target ------------------------------------------------------- */

/* The toy of tests/test_ch04_dsa.c: the MLA toy of tests/test_ch02_mla.c + HI 4, DI 16, K 6, V3's
 * rotary fields at Dr 8 */
static int toy_config(dsa_config *c)
{
    *c = (dsa_config){.mla = {.d = 64,
                              .n_heads = 4,
                              .q_lora_rank = 32,
                              .kv_lora_rank = 32,
                              .qk_nope = 16,
                              .qk_rope = 8,
                              .v_head = 16,
                              .norm_eps = 1e-6},
                      .index_n_heads = 4,
                      .index_head_dim = 16,
                      .index_topk = 6,
                      .index_norm_eps = DSA_INDEX_NORM_EPS};
    c->mla.softmax_scale = kvl_yarn_softmax_scale(16 + 8, 40, 1);
    return kvl_rope_init_yarn(&c->mla.rope, 8, 1e4, 40, 4096, 32, 1);
}

/* target[T][T]: dense causal attention p[T][H][T] summed over heads, L1-normalised per query */
static int attention_target(double *target, const dsa_config *c, const dsa_weights *w,
                            const float *x, size_t T)
{
    const mla_config *m = &c->mla;
    const size_t H = m->n_heads;
    float *q = malloc(T * H * (m->qk_nope + m->qk_rope) * sizeof *q);
    float *rows = malloc(T * (m->kv_lora_rank + m->qk_rope) * sizeof *rows);
    float *mask = malloc(T * T * sizeof *mask), *p = malloc(T * H * T * sizeof *p);
    int rc = q && rows && mask && p ? KVL_OK
                                    : kvl_fail(KVL_ENOMEM, "out of memory for the toy attention");
    if (rc == KVL_OK) rc = mla_query(q, m, &w->mla, x, T, 0);
    if (rc == KVL_OK) rc = mla_latent(rows, m, &w->mla, x, T, 0);
    if (rc == KVL_OK) {
        swa_mask_rows(mask, 0, T, 0, T, 0);
        rc = mla_scores_naive(p, m, &w->mla, q, rows, mask, T, T);
    }
    if (rc == KVL_OK)
        for (size_t r = 0; r < T * H; r++) kvl_softmax_f32(p + r * T, T);
    for (size_t t = 0; t < T && rc == KVL_OK; t++) {
        double sum = 0;
        for (size_t s = 0; s < T; s++) {
            target[t * T + s] = 0;
            for (size_t h = 0; h < H; h++) target[t * T + s] += p[(t * H + h) * T + s];
            sum += target[t * T + s];
        }
        for (size_t s = 0; s < T; s++) target[t * T + s] /= sum;
    }
    free(q); free(rows); free(mask); free(p);
    return rc;
}

/* Σ_s a_s·ln(a_s/b_s) over the n entries (a_s = 0 contributes 0) */
static double kl(const double *a, const double *b, size_t n)
{
    double d = 0;
    for (size_t s = 0; s < n; s++)
        if (a[s] > 0) d += a[s] * log(a[s] / b[s]);
    return d;
}

/* a[n] ← a restricted to the picks sel[K] and renormalised (0 elsewhere) */
static void restrict_to(double *a, const int32_t *sel, size_t n, size_t K)
{
    double sum = 0;
    for (size_t s = 0; s < n; s++) {
        int picked = 0;
        for (size_t k = 0; k < K && sel[k] >= 0; k++) picked |= (size_t)sel[k] == s;
        if (!picked) a[s] = 0;
        sum += a[s];
    }
    for (size_t s = 0; s < n; s++) a[s] /= sum;
}

static int cmp_desc(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

typedef struct {
    double kl_dense, kl_uniform, kl_sparse;      /* summed over queries */
    double mass_picked, mass_best, mass_random;  /* summed over queries with t + 1 > K */
    size_t n_choosing;
} toy_stats;

/* query t: p = target row, q = softmax of the index scores over s ≤ t */
static void toy_query(toy_stats *st, const double *p, const float *I, const int32_t *sel, size_t t,
                      size_t K, double *q, double *u, double *sorted)
{
    const size_t n = t + 1;
    for (size_t s = 0; s < n; s++) q[s] = I[s], u[s] = 1.0 / (double)n;
    kvl_softmax_f64(q, n);
    st->kl_dense += kl(p, q, n);
    st->kl_uniform += kl(p, u, n);
    if (n <= K) return;
    double picked = 0;
    for (size_t k = 0; k < K; k++) picked += p[sel[k]];
    memcpy(sorted, p, n * sizeof *sorted);
    qsort(sorted, n, sizeof *sorted, cmp_desc);
    double best = 0;
    for (size_t k = 0; k < K; k++) best += sorted[k];
    st->mass_picked += picked;
    st->mass_best += best;
    st->mass_random += (double)K / (double)n;
    st->n_choosing++;
    memcpy(sorted, p, n * sizeof *sorted);
    restrict_to(sorted, sel, n, K);
    restrict_to(q, sel, n, K);
    st->kl_sparse += kl(sorted, q, n);
}

static void toy_show_query(const double *p, const float *I, const int32_t *sel, size_t t, size_t K)
{
    const size_t n = t + 1;
    double *q = malloc(n * sizeof *q), *order = malloc(n * sizeof *order);
    if (!q || !order) {
        free(q); free(order);
        return;
    }
    for (size_t s = 0; s < n; s++) q[s] = I[s];
    kvl_softmax_f64(q, n);
    printf("\n  query %zu, its %d largest target weights:\n  %8s %10s %12s %14s  %s\n", t,
           TOY_SHOWN, "position", "target", "index score", "softmax(score)", "in top-k");
    for (size_t s = 0; s < n; s++) order[s] = p[s];
    qsort(order, n, sizeof *order, cmp_desc);
    size_t shown = 0;
    for (size_t r = 0; r < n && shown < TOY_SHOWN; r++)
        for (size_t s = 0; s < n && shown < TOY_SHOWN; s++) {
            if (p[s] != order[r] || (r > 0 && order[r] == order[r - 1])) continue;
            int picked = 0;
            for (size_t k = 0; k < K && sel[k] >= 0; k++) picked |= (size_t)sel[k] == s;
            printf("  %8zu %10.4f %12.4f %14.4f  %s\n", s, p[s], (double)I[s], q[s],
                   picked ? "yes" : "");
            shown++;
        }
    free(q); free(order);
}

/* ---- a short warm-up: the head weights W_IW alone -------------------------------------------- */

enum { WARMUP_STEPS = 200 };
static const size_t WARMUP_SHOWN[] = {0, 10, 25, 50, 100, 200};

/* The indexer's scores with W_IW as the variable: I[t][s] = Σ_j w[t][j]·φ[t][s][j] for s ≤ t,
 * where φ = ReLU(q^I_t,j·k^I_s) (the frozen part) and w[t] = scale · W x_t. I is linear in W, so
 * L_I is convex in it and gradient descent with a step that never lets the loss rise goes down
 * without tuning. */
typedef struct {
    size_t T, HI, d;
    double scale;
    const float *x;          /* [T][d] */
    double *phi;             /* [T][T][HI], 0 past s = t */
    double *W;               /* [HI][d] */
} warmup;

static void warmup_scores(const warmup *u, const double *W, double *I)
{
    for (size_t t = 0; t < u->T; t++) {
        double w[64];
        for (size_t j = 0; j < u->HI; j++) {
            w[j] = 0;
            for (size_t i = 0; i < u->d; i++) w[j] += W[j * u->d + i] * (double)u->x[t * u->d + i];
            w[j] *= u->scale;
        }
        for (size_t s = 0; s < u->T; s++) {
            I[t * u->T + s] = s <= t ? 0 : -INFINITY;
            for (size_t j = 0; j < u->HI && s <= t; j++)
                I[t * u->T + s] += w[j] * u->phi[(t * u->T + s) * u->HI + j];
        }
    }
}

/* L_I at W, and its gradient into G when G is not NULL; q is scratch [T] */
static double warmup_loss(const warmup *u, const double *target, const double *W, double *G,
                          double *I, double *q)
{
    warmup_scores(u, W, I);
    double loss = 0;
    if (G) memset(G, 0, u->HI * u->d * sizeof *G);
    for (size_t t = 0; t < u->T; t++) {
        const size_t n = t + 1;
        memcpy(q, I + t * u->T, n * sizeof *q);
        kvl_softmax_f64(q, n);
        loss += kl(target + t * u->T, q, n);
        if (!G) continue;
        for (size_t j = 0; j < u->HI; j++) {
            double g = 0;   /* ∂L/∂w[t][j] = Σ_s (softmax(I_t)_s − p_t,s)·φ[t][s][j] */
            for (size_t s = 0; s < n; s++)
                g += (q[s] - target[t * u->T + s]) * u->phi[(t * u->T + s) * u->HI + j];
            for (size_t i = 0; i < u->d; i++)
                G[j * u->d + i] += u->scale * g * (double)u->x[t * u->d + i];
        }
    }
    return loss;
}

/* Train W_IW alone for WARMUP_STEPS steps and print L_I and the top-K mass at WARMUP_SHOWN
 * steps. */
static int warmup_head_weights(const dsa_config *c, const dsa_weights *w, const float *x,
                               const double *target)
{
    const size_t T = TOY_T, HI = c->index_n_heads, DI = c->index_head_dim, d = c->mla.d,
                 K = c->index_topk;
    if (HI > 64) return kvl_fail(KVL_EINVAL, "the warm-up toy holds at most 64 index heads");
    warmup u = {.T = T, .HI = HI, .d = d, .scale = 1.0 / sqrt((double)HI * (double)DI), .x = x};
    float *q_idx = malloc(T * HI * DI * sizeof *q_idx), *w_idx = malloc(T * HI * sizeof *w_idx);
    float *k_idx = malloc(T * DI * sizeof *k_idx), *If = malloc(T * T * sizeof *If);
    double *G = malloc(HI * d * sizeof *G), *trial = malloc(HI * d * sizeof *trial),
           *I = malloc(T * T * sizeof *I);
    double *q = malloc(T * sizeof *q), *v = malloc(T * sizeof *v),
           *sorted = malloc(T * sizeof *sorted);
    int32_t *sel = malloc(T * K * sizeof *sel);
    u.phi = malloc(T * T * HI * sizeof *u.phi);
    u.W = malloc(HI * d * sizeof *u.W);
    int rc =
        q_idx && w_idx && k_idx && If && G && trial && I && q && v && sorted && sel && u.phi && u.W
            ? KVL_OK
            : kvl_fail(KVL_ENOMEM, "out of memory for the warm-up");
    if (rc == KVL_OK) rc = dsa_index_query(q_idx, w_idx, c, w, x, T, 0);
    if (rc == KVL_OK) rc = dsa_index_key(k_idx, c, w, x, T, 0);
    for (size_t t = 0; t < T && rc == KVL_OK; t++)
        for (size_t s = 0; s < T; s++)
            for (size_t j = 0; j < HI; j++) {
                double dot = 0;
                for (size_t i = 0; i < DI && s <= t; i++)
                    dot += (double)q_idx[(t * HI + j) * DI + i] * (double)k_idx[s * DI + i];
                u.phi[(t * T + s) * HI + j] = fmax(dot, 0);
            }
    for (size_t i = 0; i < HI * d && rc == KVL_OK; i++) u.W[i] = w->w_iw[i];
    if (rc == KVL_OK) {
        printf(
            "\n  A short warm-up: gradient descent on the head weights W_IW alone (%zu x %zu), everything else\n"
            "  frozen. The scores are linear in W_IW, so L_I is convex in it; each step halves its size until\n"
            "  the loss does not rise.\n\n  %6s %12s %22s\n",
            HI, d, "step", "L_I (nats)", "target mass in top-K");
        double lr = 1.0, loss = warmup_loss(&u, target, u.W, G, I, q);
        size_t shown = 0;
        for (size_t step = 0; step <= WARMUP_STEPS && rc == KVL_OK; step++) {
            if (shown < sizeof WARMUP_SHOWN / sizeof WARMUP_SHOWN[0] &&
                step == WARMUP_SHOWN[shown]) {
                for (size_t i = 0; i < T * T; i++) If[i] = (float)I[i];
                rc = kvl_topk(sel, If, T, T, K);
                toy_stats st = {0};
                for (size_t t = 0; t < T && rc == KVL_OK; t++)
                    toy_query(&st, target + t * T, If + t * T, sel + t * K, t, K, q, v, sorted);
                if (rc == KVL_OK)
                    printf("  %6zu %12.3f %21.1f%%\n", step, loss,
                           100 * st.mass_picked / (double)st.n_choosing);
                shown++;
            }
            if (step == WARMUP_STEPS) break;
            for (;;) {
                for (size_t i = 0; i < HI * d; i++) trial[i] = u.W[i] - lr * G[i];
                const double next = warmup_loss(&u, target, trial, NULL, I, q);
                if (next <= loss || lr < 1e-12) {
                    memcpy(u.W, trial, HI * d * sizeof *trial);
                    loss = warmup_loss(&u, target, u.W, G, I, q);
                    lr *= 1.5;
                    break;
                }
                lr /= 2;
            }
        }
    }
    free(q_idx);
    free(w_idx);
    free(k_idx);
    free(If);
    free(G);
    free(trial);
    free(I);
    free(q);
    free(v);
    free(sorted);
    free(sel); free(u.phi); free(u.W);
    return rc;
}

static int training_target(void)
{
    dsa_config c;
    dsa_weights w;
    int rc = toy_config(&c);
    if (rc != KVL_OK) return rc;
    kvl_rng rng;
    kvl_rng_seed(&rng, TOY_SEED);
    rc = dsa_weights_init_random(&w, &c, &rng);
    if (rc != KVL_OK) return rc;
    const size_t T = TOY_T, K = c.index_topk;
    float *x = malloc(T * c.mla.d * sizeof *x), *I = malloc(T * T * sizeof *I);
    double *target = malloc(T * T * sizeof *target), *q = malloc(T * sizeof *q),
           *u = malloc(T * sizeof *u);
    double *scratch = malloc(T * sizeof *scratch);
    int32_t *sel = malloc(T * K * sizeof *sel);
    if (!x || !I || !target || !q || !u || !scratch || !sel)
        rc = kvl_fail(KVL_ENOMEM, "out of memory for the toy");
    if (rc == KVL_OK) {
        kvl_rng_normal_f32(&rng, x, T * c.mla.d, 1.0);
        rc = attention_target(target, &c, &w, x, T);
    }
    if (rc == KVL_OK) rc = dsa_indexer_f32(I, &c, &w, x, T);
    if (rc == KVL_OK) rc = kvl_topk(sel, I, T, T, K);
    if (rc == KVL_OK) {
        toy_stats st = {0};
        for (size_t t = 0; t < T; t++)
            toy_query(&st, target + t * T, I + t * T, sel + t * K, t, K, q, u, scratch);
        printf(
            "(c) What the indexer learns, at toy size (d %zu, H %zu, Dc %zu, HI %zu, DI %zu, K %zu, T %zu; random\n"
            "    weights, seed %d). Its target for query t is the main attention summed over the heads and\n"
            "    L1-normalised, p_t,s = sum_h A_t,h,s / sum_s' sum_h A_t,h,s'; its own distribution is\n"
            "    softmax_s(I_t,s) over s <= t. The dense warm-up freezes the model and trains only the indexer\n"
            "    (W_IQ, W_IK and its LayerNorm, W_IW) on L_I = sum_t KL(p_t || softmax(I_t)); the sparse stage\n"
            "    keeps the same loss restricted to each query's top-k set S_t.\n\n",
            c.mla.d, c.mla.n_heads, c.mla.kv_lora_rank, c.index_n_heads, c.index_head_dim, K, T,
            TOY_SEED);
        printf("  dense-stage loss L_I              %8.4f nats (%.4f per query)\n", st.kl_dense,
               st.kl_dense / (double)T);
        printf("  the same with a uniform indexer   %8.4f nats (%.4f per query)\n", st.kl_uniform,
               st.kl_uniform / (double)T);
        printf(
            "  sparse-stage loss over S_t        %8.4f nats over the %zu queries with t + 1 > K\n",
            st.kl_sparse, st.n_choosing);
        printf(
            "  target mass inside the top-%zu:    %.1f%% picked by the indexer, %.1f%% at best, %.1f%% for a\n"
            "                                    random pick (mean over those %zu queries)\n",
            K, 100 * st.mass_picked / (double)st.n_choosing,
            100 * st.mass_best / (double)st.n_choosing,
            100 * st.mass_random / (double)st.n_choosing, st.n_choosing);
        toy_show_query(target + (T - 1) * T, I + (T - 1) * T, sel + (T - 1) * K, T - 1, K);
        const double picked = st.mass_picked / (double)st.n_choosing,
                     chance = st.mass_random / (double)st.n_choosing;
        printf(
            "\n  Untrained, the index scores know nothing of where the heads look: L_I is %s the uniform\n"
            "  indexer's (%.2f against %.2f nats), and the top-k keeps %.1f%% of the target mass against %.1f%%\n"
            "  for a random pick; %.1f%% is the most any top-%zu could keep.\n",
            st.kl_dense > st.kl_uniform ? "above" : "below", st.kl_dense, st.kl_uniform,
            100 * picked, 100 * chance, 100 * st.mass_best / (double)st.n_choosing, K);
        rc = warmup_head_weights(&c, &w, x, target);
    }
    if (rc == KVL_OK)
        printf(
            "\n  Only the head weights moved, so L_I levels off where they alone can take it, well short of 0:\n"
            "  the report's warm-up trains W_IQ, W_IK and its LayerNorm too, on a trained model's attention.\n"
            "  The toy shows the loss falling, not where it ends.\n");
    dsa_weights_free(&w);
    free(x); free(I); free(target); free(q); free(u); free(scratch); free(sel);
    return rc;
}

/* ---- arguments ------------------------------------------------------------------------------- */

enum { F_CONFIG, F_CONTEXTS, F_REPEATS, F_NO_TIMING };
static const kvl_flag FLAGS[] = {
    {"--config", 1}, {"--contexts", 1}, {"--repeats", 1}, {"--no-timing", 0}};

/* 0: run; 1: --help printed; 2: bad arguments (message printed) */
static int parse_args(options *opt, int argc, char **argv)
{
    snprintf(opt->config, sizeof opt->config, "%s/ref/configs/deepseek-v3.2-exp.json",
             kvl_root_dir());
    static const size_t defaults[] = {2048, 4096, 8192, 16384, 32768, 65536, 131072};
    memcpy(opt->contexts, defaults, sizeof defaults);
    opt->n_contexts = sizeof defaults / sizeof defaults[0];
    opt->repeats = 3;
    opt->timing = 1;
    kvl_args a = kvl_args_start("dsa_cost", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *v;
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) {
            usage(stdout);
            return 1;
        }
        if (k == KVL_ARGS_BAD) return 2;
        if (k == F_NO_TIMING) opt->timing = 0;
        if (k == F_CONFIG) snprintf(opt->config, sizeof opt->config, "%s", v);
        if (k == F_CONTEXTS && kvl_parse_contexts(opt->contexts, &opt->n_contexts, MAX_CONTEXTS,
                                                  MAX_CONTEXT, v) != KVL_OK)
            return kvl_bad_usage("dsa_cost", kvl_error(), NULL);
        if (k == F_REPEATS && kvl_parse_size(&opt->repeats, v, 1, MAX_REPEATS))
            return kvl_bad_usage("dsa_cost", "--repeats must be an integer from 1 to 100", v);
    }
    return 0;
}

/* What (b) allocates and times and what (d) runs at, against the bounds --help states: a config the
 * program cannot run is refused before the first line. */
static int check_run(const kvl_model *m, const dsa_config *c, const options *opt)
{
    const mla_config *a = &c->mla;
    const double HI = (double)c->index_n_heads, DI = (double)c->index_head_dim;
    char fields[256];
    snprintf(fields, sizeof fields, "index_n_heads %zu and index_head_dim %zu", c->index_n_heads,
             c->index_head_dim);
    KVL_TRY(
        kvl_bound_run(m, fields, HI * DI, MAX_INDEX_CHANNELS, "indexer channels (heads x dim)"));
    if (!opt->timing) return KVL_OK;
    size_t mla_floats, max_T = 0;
    int rc = mla_weights_size(&mla_floats, a);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", m->path, kvl_error());
    for (size_t i = 0; i < opt->n_contexts; i++)
        max_T = opt->contexts[i] > max_T ? opt->contexts[i] : max_T;
    const double H = (double)a->n_heads, Dw = (double)(a->kv_lora_rank + a->qk_rope),
                 T = (double)max_T;
    const double d = (double)a->d;
    const double weights =
        (double)mla_floats + HI * DI * (double)a->q_lora_rank + DI * d + 2 * DI + HI * d;
    const double scratch = H * (double)(a->qk_nope + a->qk_rope + a->v_head) + HI * DI + HI +
                           T * (Dw + DI + H + 1) + (double)c->index_topk;
    double flop = 0;
    for (size_t i = 0; i < opt->n_contexts; i++) {
        const double Ti = (double)opt->contexts[i];
        flop += (double)opt->repeats * (dense_work(c, Ti).flop + sparse_work(c, Ti).flop);
    }
    snprintf(fields, sizeof fields,
             "num_attention_heads (n_heads) %zu, kv_lora_rank %zu, index_n_heads %zu, "
             "index_head_dim %zu, index_topk %zu and %zu tokens",
             a->n_heads, a->kv_lora_rank, c->index_n_heads, c->index_head_dim, c->index_topk,
             max_T);
    KVL_TRY(kvl_bound_run(m, fields, sizeof(float) * (weights + scratch) / GIB, MAX_RUN_GIB,
                          "GiB of memory"));
    return kvl_bound_run(m, fields, flop * 1e-12, MAX_TIMED_TFLOP, "TFLOP of timed steps");
}

/* ---- (d) the quantised indexer against float32 ----------------------------------------------- */

/* Top-k recall of DeepSeek's FP8 indexer (Hadamard rotation, E4M3 with a power-of-two scale per 128
 * channels) against the float32 indexer, at the real indexer width (HI and DI from the config) on a
 * small random model: the fraction of float32 picks the FP8 path also picks. */
static int fp8_recall(const dsa_config *real)
{
    enum { T = 512 };
    const size_t ks[] = {32, 64, 128, 256};
    dsa_config c = {.mla = {.d = 64,
                            .n_heads = 2,
                            .q_lora_rank = 32,
                            .kv_lora_rank = 32,
                            .qk_nope = 16,
                            .qk_rope = real->mla.qk_rope,
                            .v_head = 16,
                            .norm_eps = 1e-6},
                    .index_n_heads = real->index_n_heads,
                    .index_head_dim = real->index_head_dim,
                    .index_topk = ks[0],
                    .index_norm_eps = DSA_INDEX_NORM_EPS};
    c.mla.softmax_scale = 1.0 / sqrt((double)(c.mla.qk_nope + c.mla.qk_rope));
    int rc = kvl_rope_init(&c.mla.rope, c.mla.qk_rope, 1e4);
    float *x = malloc(sizeof(float) * T * c.mla.d);
    dsa_weights w = {0};
    kvl_rng rng;
    kvl_rng_seed(&rng, 7);
    if (rc == KVL_OK && !x) rc = kvl_fail(KVL_ENOMEM, "out of memory for the recall run");
    if (rc == KVL_OK) rc = dsa_weights_init_random(&w, &c, &rng);
    if (rc == KVL_OK) kvl_rng_normal_f32(&rng, x, (size_t)T * c.mla.d, 1.0);
    printf(
        "(d) The FP8 indexer (Hadamard-rotated q and k, E4M3 with one power-of-two scale per 128\n"
        "    channels) against float32: top-k recall over %d queries at HI %zu, DI %zu (random weights,\n"
        "    d %zu, seed 7). Queries with t + 1 <= K keep every position and count as full recall.\n\n",
        T, c.index_n_heads, c.index_head_dim, c.mla.d);
    for (size_t i = 0; rc == KVL_OK && i < sizeof ks / sizeof *ks; i++) {
        double recall;
        c.index_topk = ks[i];
        rc = dsa_index_recall(&recall, &c, &w, x, T);
        if (rc == KVL_OK) printf("  K %4zu   recall %.4f\n", ks[i], recall);
    }
    dsa_weights_free(&w);
    free(x);
    return rc;
}

/* Part (d) runs the FP8 indexer at the config's DI: a width it cannot rotate and quantise is
 * refused by the library on one zero row, before anything is printed. */
static int check_fp8_width(const dsa_config *c, const char *path)
{
    float *probe = calloc(c->index_head_dim, sizeof *probe);
    int rc = probe ? dsa_index_quantise(probe, c, 1) : kvl_fail(KVL_ENOMEM, "out of memory");
    free(probe);
    return rc == KVL_OK ? rc : kvl_fail(rc, "%s: %s", path, kvl_error());
}

int main(int argc, char **argv)
{
    options opt;
    int p = parse_args(&opt, argc, argv);
    if (p) return p == 1 ? kvl_exit_status("dsa_cost", 0) : 2;
    kvl_progress_start("dsa_cost");
    kvl_progress("checking the config");
    kvl_model m;
    if (kvl_model_load(&m, opt.config) != KVL_OK) {
        kvl_progress_stop();
        fprintf(stderr, "dsa_cost: %s\n", kvl_error());
        return 2;
    }
    dsa_config c;
    if (dsa_config_from_model(&c, &m) != KVL_OK || check_fp8_width(&c, opt.config) != KVL_OK ||
        check_run(&m, &c, &opt) != KVL_OK) {
        kvl_progress_stop();
        fprintf(stderr, "dsa_cost: %s\n", kvl_error());
        kvl_model_free(&m);
        return 2;
    }
    cache_bytes(&m, &c);
    kvl_progress("the decode query");
    int rc = decode_query(&c, &opt);
    if (rc == KVL_OK) {
        printf("\n");
        kvl_progress("the indexer's training target");
        rc = training_target();
    }
    if (rc == KVL_OK) {
        printf("\n");
        kvl_progress("recall of FP8 index keys");
        rc = fp8_recall(&c);
    }
    kvl_progress_stop();
    kvl_model_free(&m);
    if (rc != KVL_OK) {
        fprintf(stderr, "dsa_cost: %s\n", kvl_error());
        return 1;
    }
    return kvl_exit_status("dsa_cost", 0);
}
