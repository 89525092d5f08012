/* ref/model with V4 layers (chapter 6): the toy stack [window, window, CSA, HCA, CSA] from its config's
 * compress_ratios against its double definition, the cache paths against it, a replay after a prefix-cache
 * hit that rebuilds every window row bit for bit from L·(W−1)+1 tokens and not from one fewer, the live
 * bytes of a V4-Flash stack at real entry widths (3,514.25 per token), and the chapter program
 * (chapters/06_v4/README.md: the 3,514.25 and the replay length of its "Where the sources disagree"). */
#include "common.h"
#include "config.h"
#include "grouped.h"
#include "status.h"
#include "oracle_v4.h"
#include "v4_toy.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct {
    model_config c;
    model_weights w;
} stack;

/* The toy stack (K = topk) with an MLP of width F. */
static void stack_make(stack *s, size_t topk, size_t F, uint64_t seed)
{
    kvl_model m;
    v4_toy_model(&m, topk);
    ck_assert_msg(model_config_from_model(&s->c, &m, F, MODEL_MLP_SWIGLU) == KVL_OK, "%s", kvl_error());
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ck_assert_msg(model_weights_init_random(&s->w, &s->c, &rng) == KVL_OK, "%s", kvl_error());
}

static void stack_free(stack *s)
{
    model_weights_free(&s->w);
    model_config_free(&s->c);
}

/* y[d] = W_down (silu(W_gate n) ⊙ W_up n) */
static void oracle_swiglu(double *y, const model_config *c, const model_layer_weights *lw, const double *n)
{
    const size_t F = c->d_ff;
    double *g = oracle_alloc(F * sizeof *g), *u = oracle_alloc(F * sizeof *u);
    oracle_matvec(g, lw->w_gate, n, F, c->d);
    oracle_matvec(u, lw->w_up, n, F, c->d);
    for (size_t i = 0; i < F; i++) u[i] *= g[i] / (1 + exp(-g[i]));
    oracle_matvec(y, lw->w_down, u, c->d, F);
    free(g);
    free(u);
}

/* Index scores are O(1); a gap ten times the float error cannot be ranked the other way (test_ch06_v4). */
#define PICK_MARGIN 1e-3

/* out[T][d]: h = x; per layer h += Attn(RMSNorm(h)) (a CSA layer with the double indexer's picks on the
 * double hidden state), then h += MLP(RMSNorm(h)) when F > 0. */
static double *oracle_stack(const stack *s, const float *x, size_t T)
{
    const size_t d = s->c.d;
    double *h = oracle_widen(x, T * d), *n = oracle_alloc(T * d * sizeof *n), *a = oracle_alloc(T * d * sizeof *a);
    for (size_t l = 0; l < s->c.n_layers; l++) {
        const model_layer_weights *lw = &s->w.layers[l];
        const v4_config *c = &s->c.layers[l].v4;
        for (size_t t = 0; t < T; t++) oracle_rmsnorm(n + t * d, h + t * d, lw->attn_norm, d, s->c.norm_eps);
        int32_t *sel = NULL;
        if (c->kind == KVL_LAYER_CSA) {
            double margin, kink;
            sel = oracle_alloc(T * c->indexer.topk * sizeof *sel);
            oracle_v4_picks(sel, &margin, &kink, c, &lw->v4, n, T);
            ck_assert_msg(margin > PICK_MARGIN && kink > PICK_MARGIN, "layer %zu: picks too close to call (%g, %g)", l,
                          margin, kink);
        }
        oracle_v4_layer(a, c, &lw->v4, n, T, sel);
        free(sel);
        for (size_t i = 0; i < T * d; i++) h[i] += a[i];
        if (s->c.d_ff == 0) continue;
        for (size_t t = 0; t < T; t++) {
            oracle_rmsnorm(n + t * d, h + t * d, lw->mlp_norm, d, s->c.norm_eps);
            oracle_swiglu(a + t * d, &s->c, lw, n + t * d);
        }
        for (size_t i = 0; i < T * d; i++) h[i] += a[i];
    }
    free(n);
    free(a);
    return h;
}

/* One layer's float error (oracle_v4_tol, plus the MLP's d and F), grown at most 3× by every later layer
 * (residual gain 1, pre-norm gains ≤ 1.5 over an RMS near 1, unit-gain sublayers; as test_ch03_model). */
static double stack_tol(const stack *s, size_t T)
{
    double tol = 0;
    for (size_t l = 0; l < s->c.n_layers; l++) {
        const v4_config *c = &s->c.layers[l].v4;
        const size_t n = c->kind == KVL_LAYER_WINDOW ? 0 : T / c->compressor.ratio;
        tol = 3 * tol + oracle_v4_tol(c, n) + oracle_f32_tol(s->c.d + s->c.d_ff);
    }
    return tol;
}

#define MIN_COS (1 - 1e-6)   /* a guard against a systematic difference, as in test_ch03_model */

/* ---- the stack ----------------------------------------------------------------------------------------- */

START_TEST(test_config_stacks_window_csa_and_hca_layers)
{
    stack s;
    stack_make(&s, 3, 0, 900);
    static const kvl_layer_kind want[5] = {KVL_LAYER_WINDOW, KVL_LAYER_WINDOW, KVL_LAYER_CSA, KVL_LAYER_HCA,
                                           KVL_LAYER_CSA};
    char name[64];
    for (size_t l = 0; l < 5; l++) {
        ck_assert_int_eq(s.c.layers[l].attn, MODEL_ATTN_V4);
        ck_assert_int_eq(s.c.layers[l].v4.kind, want[l]);
    }
    ck_assert_str_eq(model_layer_name(name, sizeof name, &s.c.layers[2]), "CSA(4, top-3)+window(8)");
    ck_assert_str_eq(model_layer_name(name, sizeof name, &s.c.layers[3]), "HCA(8)+window(8)");
    ck_assert_str_eq(model_layer_name(name, sizeof name, &s.c.layers[0]), "window(8)");
    model_cache cache;
    ck_assert_int_eq(model_cache_init(&cache, &s.c, 16, KV_STORE_BF16), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "V4"));
    stack_free(&s);
}
END_TEST

START_TEST(test_v4_stack_matches_definition)
{
    stack s;
    stack_make(&s, 3, 48, 901);
    const size_t T = V4_TOY_T, d = s.c.d;
    float *x = v4_toy_inputs(T, d, 902), *got = oracle_alloc(T * d * sizeof *got);
    ck_assert_msg(model_forward(got, &s.c, &s.w, x, T) == KVL_OK, "%s", kvl_error());
    double *want = oracle_stack(&s, x, T);
    kvl_expect_close("V4 stack forward", got, want, T * d, stack_tol(&s, T), 0, MIN_COS);
    free(x); free(got); free(want);
    stack_free(&s);
}
END_TEST

/* Prefill of 13, ragged chunks across block and window edges, then one token at a time. */
START_TEST(test_v4_stack_decode_matches_forward)
{
    static const size_t chunks[] = {13, 6, 1, 9};
    stack s;
    stack_make(&s, 3, 48, 903);
    const size_t T = V4_TOY_T, d = s.c.d;
    float *x = v4_toy_inputs(T, d, 904), *got = oracle_alloc(T * d * sizeof *got);
    model_cache cache;
    ck_assert_msg(model_cache_init(&cache, &s.c, T, KV_STORE_F32) == KVL_OK, "%s", kvl_error());
    size_t t = 0;
    for (size_t i = 0; i < 4; i++) {
        ck_assert_msg(model_prefill(got + t * d, &s.c, &s.w, &cache, x + t * d, chunks[i]) == KVL_OK, "%s",
                      kvl_error());
        t += chunks[i];
    }
    for (; t < T; t++)
        ck_assert_msg(model_decode(got + t * d, &s.c, &s.w, &cache, x + t * d) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(model_cache_len(&cache), T);
    double *want = oracle_stack(&s, x, T);
    kvl_expect_close("V4 stack through the cache", got, want, T * d, stack_tol(&s, T), 0, MIN_COS);
    model_cache_free(&cache);
    free(x); free(got); free(want);
    stack_free(&s);
}
END_TEST

/* ---- replay after a prefix-cache hit ---------------------------------------------------------------------- */

typedef struct {
    size_t layers_differing;   /* layers whose W window rows differ from the full run's in any bit */
    int last_row_same;         /* the output of the last prompt token is the full run's, bit for bit */
} replay_result;

/* Run P tokens (prefill of s, then of P − s, so the replayed chunk has the full run's shape), keep the
 * window rows, drop every window at s, replay s … P − 1, and compare. */
static replay_result replay_from(const stack *st, const float *x, size_t P, size_t s)
{
    const size_t d = st->c.d, L = st->c.n_layers, W = st->c.layers[0].v4.window, Dh = st->c.layers[0].v4.head_dim;
    float *full = oracle_alloc(P * d * sizeof *full), *re = oracle_alloc(P * d * sizeof *re);
    float *rows = oracle_alloc(L * W * Dh * sizeof *rows), *again = oracle_alloc(W * Dh * sizeof *again);
    model_cache cache;
    ck_assert_msg(model_cache_init(&cache, &st->c, P, KV_STORE_F32) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(model_prefill(full, &st->c, &st->w, &cache, x, s), KVL_OK);
    ck_assert_int_eq(model_prefill(full + s * d, &st->c, &st->w, &cache, x + s * d, P - s), KVL_OK);
    for (size_t l = 0; l < L; l++) ck_assert_int_eq(v4_rows_read(rows + l * W * Dh, &cache.v4[l].window, P - W, W), KVL_OK);
    ck_assert_int_eq(model_cache_drop_windows(&cache, s), KVL_OK);
    ck_assert_msg(model_replay(re + s * d, &st->c, &st->w, &cache, x + s * d, P - s) == KVL_OK, "%s", kvl_error());
    replay_result r = {0, memcmp(full + (P - 1) * d, re + (P - 1) * d, d * sizeof *re) == 0};
    for (size_t l = 0; l < L; l++) {
        ck_assert_int_eq(v4_rows_read(again, &cache.v4[l].window, P - W, W), KVL_OK);
        r.layers_differing += memcmp(again, rows + l * W * Dh, W * Dh * sizeof *again) != 0;
    }
    model_cache_free(&cache);
    free(full); free(re); free(rows); free(again);
    return r;
}

/* Exact rebuild of all L layers' W window rows needs s ≤ P − 1 − L·(W−1): L·(W−1)+1 = 36 tokens for
 * L 5, W 8. The report's n_win·L = 40 is enough too; 35 is not (the last layer's oldest row saw a
 * truncated window two layers down). */
START_TEST(test_replay_rebuilds_every_window_row_from_l_w_minus_1_plus_1_tokens)
{
    stack s;
    stack_make(&s, 3, 48, 905);
    const size_t P = 60, L = s.c.n_layers, W = s.c.layers[0].v4.window, minimum = L * (W - 1) + 1;
    float *x = v4_toy_inputs(P, s.c.d, 906);
    replay_result report = replay_from(&s, x, P, P - W * L);
    ck_assert_uint_eq(report.layers_differing, 0);
    ck_assert(report.last_row_same);
    replay_result exact = replay_from(&s, x, P, P - minimum);
    ck_assert_uint_eq(exact.layers_differing, 0);
    ck_assert(exact.last_row_same);
    replay_result short_by_one = replay_from(&s, x, P, P - minimum + 1);
    ck_assert_uint_ge(short_by_one.layers_differing, 1);
    free(x);
    stack_free(&s);
}
END_TEST

/* ---- live bytes ---------------------------------------------------------------------------------------------- */

/* The V4-Flash layer map (43 layers: 2 window-only, 21 CSA, 20 HCA) at its real entry widths (Dh 512,
 * Dr 64, DI 128, W 128, K 512) and a small model (d 32, one head): after T = 256 tokens in native rows the
 * caches hold 21·(584+68)/4 + 20·584/128 = 3,514.25 bytes per token, and 43·128·584 bytes of window. */
START_TEST(test_flash_stack_holds_3514_25_bytes_per_token)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4-flash.json")) == KVL_OK, "%s", kvl_error());
    m.d = 32;
    m.n_heads = 1;
    m.o_groups = 1;
    m.q_lora_rank = 16;
    m.o_lora_rank = 16;
    m.index_n_heads = 1;
    stack s;
    ck_assert_msg(model_config_from_model(&s.c, &m, 0, MODEL_MLP_SWIGLU) == KVL_OK, "%s", kvl_error());
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, 907);
    ck_assert_msg(model_weights_init_random(&s.w, &s.c, &rng) == KVL_OK, "%s", kvl_error());
    const size_t T = 256, d = s.c.d;
    float *x = v4_toy_inputs(T, d, 908), *out = oracle_alloc(T * d * sizeof *out);
    model_cache cache;
    ck_assert_msg(model_cache_init_v4(&cache, &s.c, T, V4_CACHE_NATIVE) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(model_prefill(out, &s.c, &s.w, &cache, x, T - 1) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(model_decode(out, &s.c, &s.w, &cache, x + (T - 1) * d) == KVL_OK, "%s", kvl_error());
    ck_assert_double_eq((double)model_cache_bytes_used(&cache) / (double)T, 3514.25);
    size_t window = 0;
    for (size_t l = 0; l < s.c.n_layers; l++) window += v4_cache_window_bytes(&cache.v4[l]);
    ck_assert_uint_eq(window, 43 * 128 * 584);
    model_cache_free(&cache);
    free(x); free(out);
    stack_free(&s);
}
END_TEST

/* ---- the chapter program --------------------------------------------------------------------------------- */

#define CAP (1 << 16)

static size_t count(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = strstr(text, what); p; p = strstr(p + 1, what)) n++;
    return n;
}

/* 128 tokens in ragged chunks of 50: the live caches give the formula's 3,514.25 bytes per token; the
 * replays rebuild every window from n_win·L and from L·(W−1)+1 tokens (6 and 43 layers), and, on 6 layers,
 * not from one fewer (through 43 layers the change may round away: the effective reach is shorter). */
START_TEST(test_chapter_program_reports_live_bytes_and_replay)
{
    static char out[CAP], err[CAP];
    ck_assert_msg(kvl_run("v4_cache --tokens 128 --chunk 50", NULL, out, CAP, err, CAP) == 0, "v4_cache: %s", err);
    ck_assert_ptr_nonnull(strstr(out, "= 3,514.25 bytes per token\n"));
    ck_assert_ptr_nonnull(strstr(out, "the live caches hold exactly the formula's bytes"));
    ck_assert_ptr_nonnull(strstr(out, "window rows 3,214,336 B"));
    ck_assert_ptr_nonnull(strstr(out, "n_win*L = 5,504 tokens; the exact minimum L*(W-1)+1 = 5,462"));
    ck_assert_uint_ge(count(out, "43 of 43"), 2);
    ck_assert_uint_eq(count(out, "6 of 6"), 2);
    ck_assert_uint_eq(count(out, "5 of 6"), 1);
}
END_TEST

START_TEST(test_chapter_program_help_and_bad_arguments)
{
    static char out[CAP], err[CAP];
    ck_assert_int_eq(kvl_run("v4_cache --help", NULL, out, CAP, err, CAP), 0);
    ck_assert_ptr_nonnull(strstr(out, "usage: v4_cache"));
    static const char *const bad[] = {"v4_cache --tokens 0", "v4_cache --tokens", "v4_cache --replay-window 1",
                                      "v4_cache --chunk x", "v4_cache --frobnicate 3"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ck_assert_int_eq(kvl_run(bad[i], NULL, out, CAP, err, CAP), 2);
        ck_assert_uint_eq(count(err, "\n"), 1);
        ck_assert_ptr_nonnull(strstr(err, "v4_cache: "));
    }
}
END_TEST

/* --tokens is bounded by the compressed-entry values its queries read, 40,000,000,000 (--help): the
 * refusal names the most tokens the chunk allows, N, which the definition puts at the bound; N + 1
 * is refused (exit 2, one line, nothing on stdout) and N passes every check. Two chunk sizes: the
 * bound is on the work, not on one flag. */
START_TEST(test_chapter_program_bounds_the_entries_its_queries_read)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4-flash.json")) == KVL_OK, "%s", kvl_error());
    const double max = 4e10;
    static const size_t chunks[] = {512, 4096};
    for (size_t i = 0; i < 2; i++) {
        char cmd[128], names[64];
        const char *line;
        snprintf(cmd, sizeof cmd, "v4_cache --tokens 65536 --chunk %zu", chunks[i]);
        kvl_expect_refused(cmd, "--tokens 65536", &line);
        const char *at = strstr(line, "at most --tokens ");
        ck_assert_msg(at != NULL, "%s", line);
        const size_t N = strtoul(at + strlen("at most --tokens "), NULL, 10);
        ck_assert_msg(oracle_v4_entry_values(&m, N, chunks[i], 1) <= max &&
                          oracle_v4_entry_values(&m, N + 1, chunks[i], 1) > max,
                      "chunk %zu: the bound is not at %zu tokens", chunks[i], N);
        snprintf(cmd, sizeof cmd, "v4_cache --tokens %zu --chunk %zu", N + 1, chunks[i]);
        snprintf(names, sizeof names, "--tokens %zu", N + 1);
        kvl_expect_refused(cmd, names, NULL);
        snprintf(cmd, sizeof cmd, "v4_cache --tokens %zu --chunk %zu", N, chunks[i]);
        snprintf(names, sizeof names, "the live cache of %zu tokens", N);
        kvl_expect_accepted(cmd, names, 20);
    }
    kvl_model_free(&m);
}
END_TEST

/* nb_06's V4-Flash entry counts and window comparison against the definitions, from the config's layer map:
 * a layer of ratio M holds ⌊T/M⌋ entries; CSA's top-k covers k·M tokens; a main row is 448 FP8 + 64 bf16
 * RoPE values + 7 E8M0 scales and a pad byte (584 B), an index key 128 FP4 values + 4 E8M0 scales (68 B). */
START_TEST(test_notebook_counts_entries_and_window_rows_by_the_definition)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4-flash.json")) == KVL_OK, "%s", kvl_error());
    const double Dh = (double)m.head_dim, Dr = (double)m.qk_rope_head_dim, DI = (double)m.index_head_dim;
    const double row = (Dh - Dr) + 2 * Dr + (Dh - Dr) / 64 + 1, key = DI / 2 + DI / 32;
    double M_csa = 0, M_hca = 0, main_rows = 0, keys = 0;
    for (size_t l = 0; l < m.n_layers; l++) {
        const double M = (double)m.layers[l].compress_ratio;
        if (m.layers[l].kind == KVL_LAYER_CSA) M_csa = M, keys += key / M;
        if (m.layers[l].kind == KVL_LAYER_HCA) M_hca = M;
        if (m.layers[l].kind == KVL_LAYER_CSA || m.layers[l].kind == KVL_LAYER_HCA) main_rows += row / M;
    }
    const double L = (double)m.n_layers, K = (double)m.index_topk;
    char a[200], b[200], c[300];
    snprintf(a, sizeof a, "CSA's top-%s entries x %s tokens cover %s tokens", KVL_GROUPED(K), KVL_GROUPED(M_csa),
             KVL_GROUPED(K * M_csa));
    snprintf(b, sizeof b, "entries per layer: at 128K %s HCA, %s CSA; at 1M %s HCA (%s if 1M = 10^6)",
             KVL_GROUPED(floor(131072 / M_hca)), KVL_GROUPED(floor(131072 / M_csa)), KVL_GROUPED(floor(1048576 / M_hca)),
             KVL_GROUPED(floor(1e6 / M_hca)));
    snprintf(c, sizeof c, "%s x %s = %s B/token: %.2fx the compressed main rows (%s), %.2fx with the index keys (%s)",
             KVL_GROUPED(L), KVL_GROUPED(row), KVL_GROUPED(L * row), L * row / main_rows,
             kvl_grouped((char[48]){0}, 48, main_rows, 2), L * row / (main_rows + keys),
             kvl_grouped((char[48]){0}, 48, main_rows + keys, 2));
    kvl_model_free(&m);
    const char *const want[] = {a, b, c};
    kvl_expect_prints("nb_06", want, 3, "CSA's top-");
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch06_model");
    TCase *tc = tcase_create("stack");
    tcase_add_test(tc, test_config_stacks_window_csa_and_hca_layers);
    tcase_add_test(tc, test_v4_stack_matches_definition);
    tcase_add_test(tc, test_v4_stack_decode_matches_forward);
    tcase_add_test(tc, test_replay_rebuilds_every_window_row_from_l_w_minus_1_plus_1_tokens);
    tcase_add_test(tc, test_flash_stack_holds_3514_25_bytes_per_token);
    suite_add_tcase(s, tc);
    TCase *tp = tcase_create("program");
    tcase_add_test(tp, test_chapter_program_reports_live_bytes_and_replay);
    tcase_add_test(tp, test_chapter_program_help_and_bad_arguments);
    tcase_add_test(tp, test_chapter_program_bounds_the_entries_its_queries_read);
    tcase_add_test(tp, test_notebook_counts_entries_and_window_rows_by_the_definition);
    suite_add_tcase(s, tp);
    return s;
}
