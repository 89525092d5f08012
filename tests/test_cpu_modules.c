/* The CPU backend (cpu/) against the definitions (ref/core), module by module: every generation's steps
 * (prefill in chunks, then decode) run once under kvl_backend_ref and once under kvl_backend_cpu on one
 * thread and on two, from the same weights and inputs, and the outputs (and a sparse layer's picks) are
 * compared. The kernel suites (test_cpu_attend.c, test_core_index_scan.c, test_core_linalg.c) hold each
 * kernel to its definition; this one holds what a module makes of them: the arguments it passes, the
 * cache views it hands over, its tiles and thread parts engaged by caches past KVL_ATTEND_TILE rows, an
 * index scan past 1,024 keys and products past KVL_SPLIT_MIN_MACS.
 *
 * The definitions and the CPU backend round differently (other summation orders), so the outputs agree to
 * a tolerance derived from the float32 path of one output (oracle_attention.h's oracle_f32_tol), never
 * bit for bit; a sparse layer's picks must agree exactly, on draws whose top-k cut float32 rounding cannot
 * move (the double oracle's check) or whose K covers every key. */
#include "common.h"
#include "ch07_flash.h"
#include "ch07_stack_toy.h"
#include "oracle_dsa.h"
#include "oracle_v4.h"
#include "v4_toy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attend_cpu.h"
#include "backend_cpu.h"
#include "v41_stack.h"
#include "dsa.h"
#include "index_scan_cpu.h"
#include "linalg_cpu.h"
#include "mha.h"
#include "mla.h"
#include "status.h"
#include "threads.h"
#include "v4.h"

static void ok(int rc) { ck_assert_msg(rc == KVL_OK, "status %d: %s", rc, kvl_error()); }

/* ---- one module's steps under each backend --------------------------------------------------------- */

/* A module's steps from an empty cache: out[n_out] (and sel[n_sel], the picks, when n_sel > 0) written
 * under the backend in use. */
typedef void (*steps_fn)(const void *ctx, float *out, int32_t *sel);

typedef struct {
    const char *what;
    steps_fn steps;
    const void *ctx;
    size_t n_out, n_sel;
    double tol; /* of one output, relative to the largest |output| */
} module_run;

/* Two float32 paths each within oracle_f32_tol(n_path) of the definition are within twice that of each
 * other. */
static double twin_tol(size_t n_path) { return 2 * oracle_f32_tol(n_path); }

static double max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static float *nan_floats(size_t n)
{
    float *x = oracle_alloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = NAN;
    return x;
}

static void expect_same_picks(const char *what, const int32_t *got, const int32_t *want, size_t n)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(got[i] == want[i], "%s: pick %zu is %d, the definitions pick %d", what, i, (int)got[i],
                      (int)want[i]);
}

/* r's steps under the definitions, then under the CPU backend on 1 and 2 threads, each held to the first
 * (outputs within r->tol of the largest, picks equal). */
static void expect_cpu_backend_matches_definitions(const module_run *r)
{
    const int threads = kvl_threads();
    float *ref = nan_floats(r->n_out);
    int32_t *ref_sel = oracle_alloc(r->n_sel * sizeof *ref_sel), *sel = oracle_alloc(r->n_sel * sizeof *sel);
    kvl_backend_use(&kvl_backend_ref);
    r->steps(r->ctx, ref, ref_sel);
    double *want = oracle_widen(ref, r->n_out);
    const double atol = r->tol * max_abs(want, r->n_out);
    ck_assert_msg(atol > 0, "%s: the definitions' output is all zero", r->what);
    for (int t = 1; t <= 2; t++) {
        kvl_backend_use(&kvl_backend_cpu);
        kvl_set_threads(t);
        float *got = nan_floats(r->n_out);
        r->steps(r->ctx, got, sel);
        char what[160];
        snprintf(what, sizeof what, "%s, CPU backend on %d thread(s)", r->what, t);
        expect_same_picks(what, sel, ref_sel, r->n_sel);
        kvl_expect_close(what, got, want, r->n_out, atol, 0, 1 - r->tol);
        free(got);
    }
    kvl_set_threads(threads);
    kvl_backend_use(NULL);
    free(ref); free(ref_sel); free(sel); free(want);
}

/* ---- MHA and GQA (ref/mha.h) ------------------------------------------------------------------------- */

/* d 256, H 8, Hkv 2 (GQA groups of 4), Dh 32; T 300 tokens: chunks of 200 and 60 (the first one's
 * products 200·256·256 multiply-adds, past KVL_SPLIT_MIN_MACS), then 40 decodes over a cache past one
 * tile. The window 280 wraps its ring while holding more than a tile. */
#define MHA_D 256
#define MHA_H 8
#define MHA_HKV 2
#define MHA_DH 32
#define MHA_T 300
#define MHA_WINDOW (KVL_ATTEND_TILE + 24)

typedef struct {
    mha_config c;
    mha_weights w;
    float *x;
    kv_store store;
} mha_case;

static void mha_steps(const void *ctx, float *out, int32_t *sel)
{
    (void)sel;
    const mha_case *m = ctx;
    static const size_t chunks[] = {200, 60};
    mha_cache cache;
    ok(mha_cache_init(&cache, &m->c, MHA_T, m->store));
    size_t t = 0;
    for (size_t i = 0; i < sizeof chunks / sizeof chunks[0]; t += chunks[i++])
        ok(mha_prefill(out + t * MHA_D, &m->c, &m->w, &cache, m->x + t * MHA_D, chunks[i]));
    for (; t < MHA_T; t++) ok(mha_decode(out + t * MHA_D, &m->c, &m->w, &cache, m->x + t * MHA_D));
    mha_cache_free(&cache);
}

START_TEST(test_mha_gqa_on_cpu_backend_matches_definitions_in_every_cache_window_and_thread_count)
{
    const size_t windows[] = {0, MHA_WINDOW};
    const kv_store stores[] = {KV_STORE_F32, KV_STORE_BF16};
    for (size_t wi = 0; wi < 2; wi++) {
        mha_case m = {.x = v4_toy_inputs(MHA_T, MHA_D, 1001 + wi)};
        kvl_rng rng;
        kvl_rng_seed(&rng, 1000 + wi);
        ok(mha_config_init(&m.c, MHA_D, MHA_H, MHA_HKV, MHA_DH, windows[wi], 10000.0));
        ok(mha_weights_init_random(&m.w, &m.c, &rng));
        for (size_t s = 0; s < 2; s++) {
            m.store = stores[s];
            char what[96];
            snprintf(what, sizeof what, "MHA H %d Hkv %d W %zu %s cache", MHA_H, MHA_HKV, windows[wi],
                     s ? "bf16" : "f32");
            const module_run r = {.what = what, .steps = mha_steps, .ctx = &m, .n_out = MHA_T * MHA_D,
                                  .tol = twin_tol(MHA_D + MHA_DH + MHA_T + MHA_H * MHA_DH)};
            expect_cpu_backend_matches_definitions(&r);
        }
        mha_weights_free(&m.w);
        free(m.x);
    }
}
END_TEST

/* ---- MLA (ref/mla.h) --------------------------------------------------------------------------------- */

/* d 128, H 32, Dq' 64, Dc 512, Dnope 16, Dr 16, Dv 16; T 300: chunks of 160 and 120, then 8 absorbed
 * and 2 naive decodes over a cache past one tile (an absorbed step, 290·32·(528 + 512) multiply-adds,
 * is past KVL_SPLIT_MIN_MACS: its rows split into parts, merged on two threads). */
#define MLA_T 300
#define MLA_NAIVE 2

typedef struct {
    mla_config c;
    mla_weights w;
    float *x;
    kv_store store;
} mla_case;

static void mla_steps(const void *ctx, float *out, int32_t *sel)
{
    (void)sel;
    const mla_case *m = ctx;
    const size_t d = m->c.d, chunks[] = {160, 120};
    mla_cache cache;
    ok(mla_cache_init(&cache, &m->c, MLA_T, m->store));
    size_t t = 0;
    for (size_t i = 0; i < 2; t += chunks[i++])
        ok(mla_prefill(out + t * d, &m->c, &m->w, &cache, m->x + t * d, chunks[i]));
    for (; t < MLA_T - MLA_NAIVE; t++) ok(mla_decode_absorbed(out + t * d, &m->c, &m->w, &cache, m->x + t * d));
    for (; t < MLA_T; t++) ok(mla_decode_naive(out + t * d, &m->c, &m->w, &cache, m->x + t * d));
    mla_cache_free(&cache);
}

/* The softmax scale is 8 times YaRN's so that the scores spread over several units: flat scores weigh
 * every row alike, and a part of the rows weighed by the wrong maximum would hardly move the output. */
static mla_config mla_test_config(void)
{
    mla_config c = {.d = 128, .n_heads = 32, .q_lora_rank = 64, .kv_lora_rank = 512, .qk_nope = 16, .qk_rope = 16,
                    .v_head = 16, .norm_eps = MLA_LATENT_NORM_EPS};
    ok(kvl_rope_init_yarn(&c.rope, 16, 1e4, 40, 4096, 32, 1));
    c.softmax_scale = 8 * kvl_yarn_softmax_scale(16 + 16, 40, 1);
    return c;
}

/* The stages of one output (as tests/test_ch02_mla.c counts them): W_DQ, RMSNorm and W_UQ, W_UK, the
 * score, the weighted sum over N rows, W_UV, W_O, and the RMSNorm of c_kv. */
static size_t mla_path(const mla_config *c, size_t N)
{
    return c->d + 2 * c->q_lora_rank + 2 * c->kv_lora_rank + c->qk_nope + c->qk_rope + N + c->kv_lora_rank +
           c->n_heads * c->v_head + c->kv_lora_rank;
}

START_TEST(test_mla_prefill_and_both_decodes_on_cpu_backend_match_definitions_in_every_cache_and_thread_count)
{
    mla_case m = {.c = mla_test_config()};
    const int threads = kvl_threads();
    const size_t N = MLA_T - 10, Dk = m.c.kv_lora_rank + m.c.qk_rope;
    kvl_set_threads(2);
    ck_assert_uint_eq(kvl_parts(N, KVL_ATTEND_PART_ROWS, (double)(N * m.c.n_heads * (Dk + m.c.kv_lora_rank))), 2);
    kvl_set_threads(threads);
    kvl_rng rng;
    kvl_rng_seed(&rng, 2000);
    ok(mla_weights_init_random(&m.w, &m.c, &rng));
    m.x = v4_toy_inputs(MLA_T, m.c.d, 2001);
    const kv_store stores[] = {KV_STORE_F32, KV_STORE_BF16};
    for (size_t s = 0; s < 2; s++) {
        m.store = stores[s];
        const module_run r = {.what = s ? "MLA bf16 cache" : "MLA f32 cache", .steps = mla_steps, .ctx = &m,
                              .n_out = MLA_T * m.c.d, .tol = twin_tol(mla_path(&m.c, MLA_T))};
        expect_cpu_backend_matches_definitions(&r);
    }
    mla_weights_free(&m.w);
    free(m.x);
}
END_TEST

/* ---- V3.2 DSA (ref/dsa.h) ---------------------------------------------------------------------------- */

/* float32: chapter 4's toy widths (d 64, H 4, Dq' 32, Dc 32, Dr 8, HI 4, DI 16), K 64 of T 1,100 keys
 * (the index scan past 1,024): chunks of 598 and 498, then 2 gathered and 2 masked decodes, whose
 * outputs and picks are compared (a prefill row's cut is not checked: its picks move none of the rows
 * the decodes read). The draw's top-64 cut in those rows is checked by the double oracle, so that
 * float32 rounding on either backend cannot move it. V3.2 bytes: the deployed widths (Dc 512, Dr 64,
 * DI 128), T 300 with K 512 covering every key (the fp8 indexer's rounding has no cut to move), so the
 * sparse attention reads more than a tile of picks. */
#define DSA_T 1100
#define DSA_K 64
#define DSA_NATIVE_T 300
#define DSA_NATIVE_K 512
#define DSA_DECODES 4

typedef struct {
    dsa_config c;
    dsa_weights w;
    float *x;
    size_t T;
    dsa_cache_format fmt;
} dsa_case;

/* out[DSA_DECODES][d] and sel[DSA_DECODES][K]: the decoded tokens' */
static void dsa_steps(const void *ctx, float *out, int32_t *sel)
{
    const dsa_case *z = ctx;
    const size_t d = z->c.mla.d, K = z->c.index_topk, prefix = z->T - DSA_DECODES, first = prefix / 2 + 50;
    float *prefilled = oracle_alloc(prefix * d * sizeof *prefilled);
    dsa_cache cache;
    ok(dsa_cache_init(&cache, &z->c, z->T, z->fmt));
    ok(dsa_prefill(prefilled, NULL, &z->c, &z->w, &cache, z->x, first));
    ok(dsa_prefill(prefilled + first * d, NULL, &z->c, &z->w, &cache, z->x + first * d, prefix - first));
    for (size_t i = 0; i < DSA_DECODES; i++) {
        int (*decode)(float *, int32_t *, const dsa_config *, const dsa_weights *, dsa_cache *, const float *) =
            i < DSA_DECODES / 2 ? dsa_decode_gather : dsa_decode_masked;
        ok(decode(out + i * d, sel + i * K, &z->c, &z->w, &cache, z->x + (prefix + i) * d));
    }
    dsa_cache_free(&cache);
    free(prefilled);
}

static dsa_config dsa_test_config(size_t d, size_t H, size_t Dc, size_t Dr, size_t DI, size_t K)
{
    dsa_config c = {.mla = {.d = d, .n_heads = H, .q_lora_rank = 32, .kv_lora_rank = Dc, .qk_nope = 16,
                            .qk_rope = Dr, .v_head = 16, .norm_eps = MLA_LATENT_NORM_EPS},
                    .index_n_heads = H, .index_head_dim = DI, .index_topk = K, .index_norm_eps = DSA_INDEX_NORM_EPS};
    ok(kvl_rope_init_yarn(&c.mla.rope, Dr, 1e4, 40, 4096, 32, 1));
    c.mla.softmax_scale = kvl_yarn_softmax_scale(16 + Dr, 40, 1);
    return c;
}

static void dsa_case_make(dsa_case *z, dsa_config c, size_t T, uint64_t seed)
{
    *z = (dsa_case){.c = c, .T = T};
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ok(dsa_weights_init_random(&z->w, &z->c, &rng));
    z->x = v4_toy_inputs(T, c.mla.d, seed + 1);
}

/* Fails unless no decoded row of the draw has two scores within float32 rounding of each other at its
 * top-K cut. */
static void expect_cut_is_safe(const dsa_case *z)
{
    const size_t T = z->T, HI = z->c.index_n_heads, DI = z->c.index_head_dim;
    oracle_dsa_layer L = oracle_dsa_of(&z->c, &z->w);
    double *xd = oracle_widen(z->x, T * z->c.mla.d), *I = oracle_alloc(T * T * sizeof *I);
    double *q = oracle_alloc(T * HI * DI * sizeof *q), *wt = oracle_alloc(T * HI * sizeof *wt);
    double *k = oracle_alloc(T * DI * sizeof *k);
    oracle_dsa_index_inputs(q, wt, k, &L, xd, T);
    oracle_dsa_index_scores(I, q, wt, k, HI, DI, T, T);
    size_t row = 0;
    ck_assert_msg(oracle_dsa_cut_is_safe(&row, I, q, wt, k, HI, DI, T, z->c.index_topk, oracle_dsa_index_path(&z->c),
                                         T - DSA_DECODES),
                  "the draw has a near-tie at the top-%zu cut of row %zu", z->c.index_topk, row);
    free(xd); free(I); free(q); free(wt); free(k);
}

static void expect_dsa_backends_agree(const dsa_case *z, const char *what)
{
    const size_t N = z->T < z->c.index_topk ? z->T : z->c.index_topk;
    const module_run r = {.what = what, .steps = dsa_steps, .ctx = z, .n_out = DSA_DECODES * z->c.mla.d,
                          .n_sel = DSA_DECODES * z->c.index_topk, .tol = twin_tol(mla_path(&z->c.mla, N))};
    expect_cpu_backend_matches_definitions(&r);
}

START_TEST(test_dsa_decode_on_cpu_backend_matches_definitions_in_every_cache_and_thread_count)
{
    dsa_case z;
    dsa_case_make(&z, dsa_test_config(64, 4, 32, 8, 16, DSA_K), DSA_T, 3000);
    expect_cut_is_safe(&z);
    z.fmt = DSA_CACHE_F32;
    expect_dsa_backends_agree(&z, "DSA f32 cache, K 64 of 1,100");
    dsa_weights_free(&z.w);
    free(z.x);

    dsa_case_make(&z, dsa_test_config(64, 2, 512, 64, 128, DSA_NATIVE_K), DSA_NATIVE_T, 3100);
    z.fmt = DSA_CACHE_V32;
    expect_dsa_backends_agree(&z, "DSA V3.2 bytes");
    dsa_weights_free(&z.w);
    free(z.x);
}
END_TEST

/* ---- V4 (ref/v4.h) ----------------------------------------------------------------------------------- */

/* float32: chapter 6's toy CSA (M 4) and HCA (M 8) layers over T 2,100 tokens (525 and 262 entries,
 * past a tile), chunks of 1,500 and 560, then 40 decodes; native rows: the real-width CSA (M 4) and HCA
 * (M 128) layers over T 600. K 1,024 covers every entry, so the index scan's rounding has no cut to move. */
#define V4_T 2100
#define V4_NATIVE_T 600
#define V4_K 1024

typedef struct {
    v4_config c;
    v4_weights w;
    float *x;
    size_t T;
    v4_cache_format fmt;
} v4_case;

static void v4_steps(const void *ctx, float *out, int32_t *sel)
{
    const v4_case *z = ctx;
    const size_t d = z->c.d, K = z->c.indexer.topk, T = z->T, prefix = T - 40, first = prefix * 3 / 4;
    int32_t *picks = z->c.kind == KVL_LAYER_CSA ? sel : NULL;
    v4_cache cache;
    ok(v4_cache_init(&cache, &z->c, T, z->fmt));
    ok(v4_prefill(out, picks, &z->c, &z->w, &cache, z->x, first));
    ok(v4_prefill(out + first * d, picks ? picks + first * K : NULL, &z->c, &z->w, &cache, z->x + first * d,
                  prefix - first));
    for (size_t t = prefix; t < T; t++)
        ok(v4_decode(out + t * d, picks ? picks + t * K : NULL, &z->c, &z->w, &cache, z->x + t * d));
    v4_cache_free(&cache);
}

static void expect_v4_backends_agree(v4_case *z, size_t T, v4_cache_format fmt, const char *what)
{
    z->T = T;
    z->fmt = fmt;
    z->c.indexer.topk = V4_K;
    z->x = v4_toy_inputs(T, z->c.d, 4000 + T);
    const size_t M = z->c.compressor.ratio;
    const module_run r = {.what = what, .steps = v4_steps, .ctx = z, .n_out = T * z->c.d,
                          .n_sel = z->c.kind == KVL_LAYER_CSA ? T * V4_K : 0,
                          .tol = 2 * oracle_v4_tol(&z->c, T / M)};
    expect_cpu_backend_matches_definitions(&r);
    v4_weights_free(&z->w);
    free(z->x);
}

START_TEST(test_v4_csa_and_hca_decode_on_cpu_backend_match_definitions_in_every_cache_and_thread_count)
{
    v4_case z;
    v4_toy_layer(&z.c, &z.w, V4_TOY_LAYER_CSA, V4_K, 4100);
    expect_v4_backends_agree(&z, V4_T, V4_CACHE_F32, "V4 CSA layer, f32 cache");
    v4_toy_layer(&z.c, &z.w, V4_TOY_LAYER_HCA, V4_K, 4200);
    expect_v4_backends_agree(&z, V4_T, V4_CACHE_F32, "V4 HCA layer, f32 cache");
    v4_wide_layer(&z.c, &z.w, 1, 4300);
    expect_v4_backends_agree(&z, V4_NATIVE_T, V4_CACHE_NATIVE, "V4 CSA layer, native rows");
    v4_wide_layer(&z.c, &z.w, 2, 4400);
    expect_v4_backends_agree(&z, V4_NATIVE_T, V4_CACHE_NATIVE, "V4 HCA layer, native rows");
}
END_TEST

/* ---- V4.1 (ref/v41_stack.h) ------------------------------------------------------------------------- */

/* The V4.1-Flash-shaped stack (tests/ch07_flash.h: 40 Full, Reindex and Reuse layers, the real entry
 * widths the 4-bit rows need) over T 300 tokens (ratio-1 layers hold 300 entries, past a tile): chunks of
 * 200 and 80, then 20 decodes. Its K 512 and candidate pool of 2,048 blocks cover every entry. */
#define V41_T 300

typedef struct {
    ch07_stack_toy t;
    v41_cache_format fmt;
} v41_case;

static void v41_steps(const void *ctx, float *out, int32_t *sel)
{
    (void)sel;
    const v41_case *z = ctx;
    const size_t d = z->t.d, chunks[] = {200, 80};
    v41_cache cache;
    ok(v41_cache_init(&cache, &z->t.s, V41_T, z->fmt));
    size_t t = 0;
    for (size_t i = 0; i < 2; t += chunks[i++])
        ok(v41_stack_prefill(out + t * d, NULL, &z->t.s, &z->t.w, &cache, z->t.x + t * d, chunks[i]));
    for (; t < V41_T; t++) ok(v41_stack_decode(out + t * d, &z->t.s, &z->t.w, &cache, z->t.x + t * d));
    v41_cache_free(&cache);
}

/* Every layer's path (oracle_v4_tol's sums at Flash's widths, its ratio at most 2, N at most T) adds to
 * the residual stream the next layer reads. */
static double v41_tol(const ch07_stack_toy *t)
{
    const v41_stack_config *s = &t->s;
    const size_t Dh = 512, DI = 128, HI = 2, G = 1, Do = 16, Dq = 32;
    const size_t layer = t->d + Dq + 3 * Dh + t->W + V41_T + (s->layers[0].core.n_heads / G) * Dh + G * Do +
                         2 * 2 + Dh + HI * DI;
    return twin_tol(t->L * layer);
}

START_TEST(test_v41_stack_on_cpu_backend_matches_definitions_in_every_cache_and_thread_count)
{
    v41_case z;
    ck_assert_msg(ch07_flash_small(&z.t.m, kvl_path("ref/configs/deepseek-v4.1-flash.json")) == KVL_OK, "%s",
                  kvl_error());
    ch07_stack_toy_make_from_model(&z.t, 5000, V41_T);
    const v41_cache_format fmts[] = {V41_CACHE_F32, V41_CACHE_NATIVE};
    for (size_t f = 0; f < 2; f++) {
        z.fmt = fmts[f];
        const module_run r = {.what = f ? "V4.1 stack, 4-bit cache" : "V4.1 stack, f32 cache", .steps = v41_steps,
                              .ctx = &z, .n_out = V41_T * z.t.d, .tol = v41_tol(&z.t)};
        expect_cpu_backend_matches_definitions(&r);
    }
    ch07_stack_toy_free(&z.t);
}
END_TEST

/* ---- the backend a module reaches -------------------------------------------------------------------- */

/* The CPU backend's table names the cpu/ functions, and the backend set is the one in use: a miswired
 * table would otherwise run the definitions twice and agree with itself. */
START_TEST(test_cpu_backend_table_names_the_cpu_kernels_and_is_the_one_in_use)
{
    ck_assert_str_eq(kvl_backend_cpu.name, "cpu");
    ck_assert(kvl_backend_cpu.matmul_abt == kvl_matmul_abt_f32_cpu);
    ck_assert(kvl_backend_cpu.matmul_ab == kvl_matmul_ab_f32_cpu);
    ck_assert(kvl_backend_cpu.matvec == kvl_matvec_f32_cpu);
    ck_assert(kvl_backend_cpu.attend == kvl_attend_cpu);
    ck_assert(kvl_backend_cpu.attend_chunk_head == kvl_attend_chunk_head_cpu);
    ck_assert(kvl_backend_cpu.index_scores == kvl_index_scores_cpu);
    ck_assert(kvl_backend_cpu.index_scores_listed == kvl_index_scores_listed_cpu);
    kvl_backend_use(&kvl_backend_cpu);
    ck_assert_ptr_eq(kvl_backend_in_use(), &kvl_backend_cpu);
    kvl_backend_use(&kvl_backend_ref);
    ck_assert_ptr_eq(kvl_backend_in_use(), &kvl_backend_ref);
    kvl_backend_use(NULL);
    ck_assert_ptr_eq(kvl_backend_in_use(), &kvl_backend_ref);
}
END_TEST

/* Calls that reached the counting backend's kernels. */
static size_t n_attend, n_index;

static int counted_attend(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows, const kvl_attend_rows *r,
                          float scale, const float *sigma, const kvl_attend_then *then)
{
    n_attend++;
    return kvl_backend_cpu.attend(o, q, Hq, rows, r, scale, sigma, then);
}

static int counted_index_scores(float *scores, const float *q, const float *w, const kvl_row_tiles *k, size_t S,
                                size_t HI, size_t start, size_t M)
{
    n_index++;
    return kvl_backend_cpu.index_scores(scores, q, w, k, S, HI, start, M);
}

/* A DSA decode step reaches the backend in use for its index scan and its sparse attention: the kernels
 * the comparisons above exercise are the chosen backend's, not a path the module runs on its own. */
START_TEST(test_dsa_decode_reaches_the_backend_in_use)
{
    kvl_backend counting = kvl_backend_cpu;
    counting.name = "counting";
    counting.attend = counted_attend;
    counting.index_scores = counted_index_scores;
    dsa_case z;
    dsa_case_make(&z, dsa_test_config(64, 4, 32, 8, 16, 8), 40, 6000);
    dsa_cache cache;
    ok(dsa_cache_init(&cache, &z.c, z.T, DSA_CACHE_F32));
    float *out = oracle_alloc(z.T * z.c.mla.d * sizeof *out);
    ok(dsa_prefill(out, NULL, &z.c, &z.w, &cache, z.x, z.T - 1));
    n_attend = n_index = 0;
    kvl_backend_use(&counting);
    ok(dsa_decode_gather(out, NULL, &z.c, &z.w, &cache, z.x + (z.T - 1) * z.c.mla.d));
    kvl_backend_use(NULL);
    ck_assert_uint_ge(n_attend, 1);
    ck_assert_uint_ge(n_index, 1);
    dsa_cache_free(&cache);
    dsa_weights_free(&z.w);
    free(z.x); free(out);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("cpu_modules");
    TCase *wiring = tcase_create("wiring");
    tcase_add_test(wiring, test_cpu_backend_table_names_the_cpu_kernels_and_is_the_one_in_use);
    tcase_add_test(wiring, test_dsa_decode_reaches_the_backend_in_use);
    suite_add_tcase(s, wiring);
    TCase *modules = tcase_create("modules");
    tcase_set_timeout(modules, KVL_TEST_TIMEOUT);
    tcase_add_test(modules, test_mha_gqa_on_cpu_backend_matches_definitions_in_every_cache_window_and_thread_count);
    tcase_add_test(modules, test_mla_prefill_and_both_decodes_on_cpu_backend_match_definitions_in_every_cache_and_thread_count);
    tcase_add_test(modules, test_dsa_decode_on_cpu_backend_matches_definitions_in_every_cache_and_thread_count);
    tcase_add_test(modules, test_v4_csa_and_hca_decode_on_cpu_backend_match_definitions_in_every_cache_and_thread_count);
    tcase_add_test(modules, test_v41_stack_on_cpu_backend_matches_definitions_in_every_cache_and_thread_count);
    suite_add_tcase(s, modules);
    return s;
}
