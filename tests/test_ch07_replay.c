/* Chapter 7: the causal encoder–decoder and replay (ref/v41_ced.h; the DeepSeek-V4.1
 * report, sections 2.2 and 3.2.2) on the V4.1 toy (L 10, E 5, W 8): the early exit leaves the same global rows as a full prefill,
 * exact replay rebuilds every window the next token reads, the bound on it is tight, bounded replay is exact
 * in the first layer only, and decode after an early exit with decoder replay equals decode after a full
 * prefill. The oracle is the full prefill of the same prompt (itself proven equal to the definition in
 * test_ch07_v41). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "v41_ced.h"
#include "ch07_flash.h"
#include "ch07_stack_toy.h"
#include "ch07_toy.h"
#include "common.h"
#include "grouped.h"
#include "oracle_v4.h"

#define P 100          /* prompt: 12 windows long, past the exact-replay reach L·(W − 1) = 70 */
#define N_DECODE 3     /* tokens decoded after the prompt */
#define MAX_T (P + N_DECODE)

/* Every comparison with the full run is bit for bit: a replay from s runs the very products of the
 * prefill chunk [s, P) it stands in for (ch07_stack_toy_prefill splits there). */



/* out[N_DECODE][d]: the tokens after the prompt, decoded one by one. */
static void decode_rest(float *out, v41_cache *c, const ch07_stack_toy *t)
{
    for (size_t i = 0; i < N_DECODE; i++)
        ck_assert_msg(v41_stack_decode(out + i * t->d, &t->s, &t->w, c, t->x + (P + i) * t->d) == KVL_OK, "%s",
                      kvl_error());
}

/* max |a − b| / max |b| over n values */
static double rel_err(const float *a, const float *b, size_t n)
{
    double e = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        e = fmax(e, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? e / m : e;
}

/* rows[n][Dh] = layer l's window rows of positions first … first + n − 1. */
static float *window_rows(const v41_cache *c, size_t l, size_t first, size_t n)
{
    float *r = malloc(n * c->window[l].width * sizeof *r);
    ck_assert_msg(v4_rows_read(r, &c->window[l], first, n) == KVL_OK, "%s", kvl_error());
    return r;
}

/* Layers l0 … l1 − 1 whose window rows read by the next token differ in any bit. */
static size_t windows_differing(const v41_cache *got, const v41_cache *want, const ch07_stack_toy *t, size_t l0, size_t l1)
{
    size_t n = 0;
    for (size_t l = l0; l < l1; l++) {
        float *g = window_rows(got, l, P - t->W + 1, t->W - 1), *w = window_rows(want, l, P - t->W + 1, t->W - 1);
        n += memcmp(g, w, (t->W - 1) * got->window[l].width * sizeof *g) != 0;
        free(g);
        free(w);
    }
    return n;
}

static void expect_rows_identical(const v4_rows *a, const v4_rows *b, const char *what)
{
    ck_assert_uint_eq(a->len, b->len);
    ck_assert_uint_eq(v4_rows_held(a), v4_rows_held(b));
    ck_assert_msg(memcmp(a->bytes, b->bytes, v4_rows_held(a) * a->row_bytes) == 0, "%s differ", what);
}

START_TEST(test_early_exit_global_rows_equal_full_prefill_bit_for_bit)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8101, MAX_T);
    v41_cache full, early;
    ch07_stack_toy_prefill(&full, NULL, &t, P, 0);
    ck_assert_int_eq(v41_cache_init(&early, &t.s, MAX_T, V41_CACHE_F32), KVL_OK);
    float *h_enc = malloc(P * t.d * sizeof *h_enc);
    ck_assert_msg(v41_ced_prefill(h_enc, &t.s, &t.w, &early, t.x, P) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(early.len, P);
    size_t sources = 0;
    for (size_t l = 0; l < t.L; l++) {
        if (t.s.layers[l].kind != KVL_LAYER_FULL) continue;
        sources += l >= t.E;
        expect_rows_identical(&early.entries[l], &full.entries[l], "entries");
        expect_rows_identical(&early.keys[l], &full.keys[l], "index keys");
        ck_assert_uint_eq(early.state[l].pos, full.state[l].pos);
        ck_assert(memcmp(early.state[l].a, full.state[l].a, v41_compressor_state_bytes(&full.state[l])) == 0);
    }
    ck_assert_uint_eq(sources, 1);   /* the decoder source is there, and was fed h_enc */
    for (size_t l = 0; l < t.L; l++) ck_assert_uint_eq(v4_rows_held(&early.window[l]), l < t.E ? t.W : 0);
    ck_assert_uint_eq(v41_cache_bytes_used(&early), v41_cache_bytes_used(&full));
    free(h_enc);
    v41_cache_free(&full);
    v41_cache_free(&early);
    ch07_stack_toy_free(&t);
}
END_TEST

START_TEST(test_early_exit_global_rows_equal_full_prefill_native_rows)
{
    /* Native rows need the deployed widths (Dh 512, DI 128): the narrowed V4.1-Flash stack. */
    kvl_model m;
    v41_stack_config s;
    v41_stack_weights w;
    ck_assert_msg(ch07_flash_small(&m, kvl_path("ref/configs/deepseek-v4.1-flash.json")) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(v41_stack_config_from_model(&s, &m), KVL_OK);
    kvl_rng rng;
    kvl_rng_seed(&rng, 8102);
    ck_assert_int_eq(v41_stack_weights_init_random(&w, &s, &rng), KVL_OK);
    enum { T = 9 };
    float *x = malloc(T * s.d * sizeof *x), *o = malloc(T * s.d * sizeof *o);
    kvl_rng_normal_f32(&rng, x, T * s.d, 1.0);
    v41_cache full, early;
    ck_assert_int_eq(v41_cache_init(&full, &s, T, V41_CACHE_NATIVE), KVL_OK);
    ck_assert_int_eq(v41_cache_init(&early, &s, T, V41_CACHE_NATIVE), KVL_OK);
    ck_assert_msg(v41_stack_prefill(o, NULL, &s, &w, &full, x, T) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v41_ced_prefill(o, &s, &w, &early, x, T) == KVL_OK, "%s", kvl_error());
    for (size_t l = 0; l < s.n_layers; l++) {
        if (s.layers[l].kind != KVL_LAYER_FULL) continue;
        expect_rows_identical(&early.entries[l], &full.entries[l], "288-byte entries");
        expect_rows_identical(&early.keys[l], &full.keys[l], "68-byte index keys");
    }
    free(x);
    free(o);
    v41_cache_free(&full);
    v41_cache_free(&early);
    v41_stack_weights_free(&w);
    v41_stack_config_free(&s);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_replay_from_zero_is_the_full_forward)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8101, MAX_T);
    v41_cache c, ref;
    float *want = malloc(P * t.d * sizeof *want), *h = malloc(P * t.d * sizeof *h);
    ch07_stack_toy_prefill(&c, want, &t, P, 0);
    ch07_stack_toy_prefill(&ref, NULL, &t, P, 0);
    memcpy(h, t.x, P * t.d * sizeof *h);
    ck_assert_msg(v41_stack_replay_layers(h, NULL, &t.s, &t.w, &c, 0, t.L, 0) == KVL_OK, "%s", kvl_error());
    ck_assert(memcmp(h, want, P * t.d * sizeof *h) == 0);
    ck_assert_uint_eq(windows_differing(&c, &ref, &t, 0, t.L), 0);
    free(want);
    free(h);
    v41_cache_free(&c);
    v41_cache_free(&ref);
    ch07_stack_toy_free(&t);
}
END_TEST

typedef struct {
    size_t layers_differing;  /* layers whose window rows read by the next token differ in any bit */
    int next_same;            /* the next tokens' outputs equal the full run's bit for bit */
    double next_err;          /* their relative error otherwise (the first of them) */
} replay_result;

/* Replay all layers from s over a cache prefilled in chunks [0, s), [s, P); then decode the next tokens
 * there and after the full run, and compare. */
static replay_result replay_then_decode(const ch07_stack_toy *t, size_t s)
{
    v41_cache ref, c;
    ch07_stack_toy_prefill(&ref, NULL, t, P, s);
    ch07_stack_toy_prefill(&c, NULL, t, P, s);
    float *h = malloc((P - s) * t->d * sizeof *h), *want = malloc(N_DECODE * t->d * sizeof *want),
          *got = malloc(N_DECODE * t->d * sizeof *got);
    memcpy(h, t->x + s * t->d, (P - s) * t->d * sizeof *h);
    ck_assert_msg(v41_stack_replay_layers(h, NULL, &t->s, &t->w, &c, 0, t->L, s) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(v4_rows_oldest(&c.window[0]), s > P - t->W ? s : P - t->W);
    replay_result r = {.layers_differing = windows_differing(&c, &ref, t, 0, t->L)};
    decode_rest(want, &ref, t);
    decode_rest(got, &c, t);
    r.next_same = memcmp(got, want, N_DECODE * t->d * sizeof *got) == 0;
    r.next_err = rel_err(got, want, t->d);
    free(h); free(want); free(got);
    v41_cache_free(&ref);
    v41_cache_free(&c);
    return r;
}

START_TEST(test_exact_replay_rebuilds_every_window_and_the_next_tokens)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8101, MAX_T);
    const size_t s = v41_ced_exact_replay_start(P, t.L, t.W);
    ck_assert_uint_eq(s, P - t.L * (t.W - 1));
    const size_t starts[] = {s, s / 2};
    for (size_t i = 0; i < 2; i++) {
        const replay_result r = replay_then_decode(&t, starts[i]);
        ck_assert_msg(r.layers_differing == 0 && r.next_same, "replay from %zu: %zu layers differ, next tokens %s",
                      starts[i], r.layers_differing, r.next_same ? "same" : "differ");
    }
    ch07_stack_toy_free(&t);
}
END_TEST

START_TEST(test_exact_replay_bound_is_tight)
{
    /* One token later and the last layer's oldest row the next token reads saw a truncated window. */
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8101, MAX_T);
    const replay_result r = replay_then_decode(&t, v41_ced_exact_replay_start(P, t.L, t.W) + 1);
    ck_assert_uint_ge(r.layers_differing, 1);
    ck_assert(!r.next_same);
    ch07_stack_toy_free(&t);
}
END_TEST

START_TEST(test_replay_error_rises_past_the_exact_bound)
{
    /* Just past the bound a row is wrong only through a chain of oldest rows, one per layer, each weighed
     * by attention, so the error rises from float noise near the bound to order one at the bounded start.
     * It is measured here, not assumed to fade. */
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8101, MAX_T);
    const size_t s = v41_ced_exact_replay_start(P, t.L, t.W), bounded = v41_ced_bounded_replay_start(P, t.W);
    printf("ch07 replay from the exact start + k·(W − 1), next-token relative error:");
    double last = 0;
    for (size_t late = t.W - 1; s + late <= bounded; late += t.W - 1) {
        last = replay_then_decode(&t, s + late).next_err;
        printf(" %.2g", last);
    }
    printf("\n");
    ck_assert_msg(last > 1e-2, "near the bounded start the error is %.3g: the truncation changed nothing", last);
    ch07_stack_toy_free(&t);
}
END_TEST

START_TEST(test_bounded_replay_exact_in_first_layer_approximate_deeper)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8101, MAX_T);
    const size_t s = v41_ced_bounded_replay_start(P, t.W);
    ck_assert_uint_eq(s, P - t.W);
    v41_cache ref, c;
    ch07_stack_toy_prefill(&ref, NULL, &t, P, s);
    ch07_stack_toy_prefill(&c, NULL, &t, P, s);
    float *h = malloc(t.W * t.d * sizeof *h);
    memcpy(h, t.x + s * t.d, t.W * t.d * sizeof *h);
    ck_assert_msg(v41_stack_replay_layers(h, NULL, &t.s, &t.w, &c, 0, t.L, s) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(windows_differing(&c, &ref, &t, 0, 1), 0);
    printf("ch07 bounded replay (W = %zu of P = %d), window-row relative error by layer:", t.W, P);
    double last = 0;
    for (size_t l = 0; l < t.L; l++) {
        float *g = window_rows(&c, l, P - t.W + 1, t.W - 1), *w = window_rows(&ref, l, P - t.W + 1, t.W - 1);
        last = rel_err(g, w, (t.W - 1) * c.window[l].width);
        printf(" %.2g", last);
        free(g);
        free(w);
    }
    printf("\n");
    ck_assert_msg(last > 1e-2, "the last layer's rows are near exact (%.3g): the truncation did nothing", last);
    float *got = malloc(N_DECODE * t.d * sizeof *got);
    decode_rest(got, &c, &t);   /* the truncated windows serve decoding */
    for (size_t i = 0; i < N_DECODE * t.d; i++) ck_assert(isfinite(got[i]));
    free(got);
    free(h);
    v41_cache_free(&ref);
    v41_cache_free(&c);
    ch07_stack_toy_free(&t);
}
END_TEST

START_TEST(test_decode_after_early_exit_and_decoder_replay_equals_full_prefill)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8101, MAX_T);
    const size_t s = v41_ced_exact_replay_start(P, t.L - t.E, t.W);
    ck_assert_uint_eq(s, P - (t.L - t.E) * (t.W - 1));
    v41_cache ref, c;
    ch07_stack_toy_prefill(&ref, NULL, &t, P, s);
    ck_assert_int_eq(v41_cache_init(&c, &t.s, MAX_T, V41_CACHE_F32), KVL_OK);
    float *h_enc = malloc(P * t.d * sizeof *h_enc);
    ck_assert_msg(v41_ced_prefill(h_enc, &t.s, &t.w, &c, t.x, s) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v41_ced_prefill(h_enc + s * t.d, &t.s, &t.w, &c, t.x + s * t.d, P - s) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v41_ced_decoder_replay(h_enc + s * t.d, &t.s, &t.w, &c, s) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(windows_differing(&c, &ref, &t, 0, t.L), 0);
    float *want = malloc(N_DECODE * t.d * sizeof *want), *got = malloc(N_DECODE * t.d * sizeof *got);
    decode_rest(want, &ref, &t);
    decode_rest(got, &c, &t);
    ck_assert(memcmp(got, want, N_DECODE * t.d * sizeof *got) == 0);
    free(h_enc); free(want); free(got);
    v41_cache_free(&ref);
    v41_cache_free(&c);
    ch07_stack_toy_free(&t);
}
END_TEST

START_TEST(test_early_exit_refuses_a_decoder_source_after_the_first_decoder_layer)
{
    kvl_model m;
    char json[sizeof CH07_TOY_JSON + 8];
    snprintf(json, sizeof json, "%s", CH07_TOY_JSON);
    const char *from = "\"kv_source_layers\": [2, 5]", *to = "\"kv_source_layers\": [2, 5, 7]";
    const char *at = strstr(CH07_TOY_JSON, from);
    ck_assert_ptr_nonnull(at);
    snprintf(json, sizeof json, "%.*s%s%s", (int)(at - CH07_TOY_JSON), CH07_TOY_JSON, to, at + strlen(from));
    ck_assert_msg(kvl_model_parse(&m, json, strlen(json), "ch07-toy-late-source") == KVL_OK, "%s", kvl_error());
    v41_stack_config s;
    ck_assert_int_eq(v41_stack_config_from_model(&s, &m), KVL_OK);
    ck_assert_int_eq(v41_ced_check(&s), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "layer 7") != NULL, "%s", kvl_error());
    v41_stack_config_free(&s);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_replay_refuses_a_start_past_the_prefix)
{
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8101, MAX_T);
    v41_cache c;
    ch07_stack_toy_prefill(&c, NULL, &t, P, 0);
    float h[64];
    ck_assert_int_eq(v41_stack_replay_layers(h, NULL, &t.s, &t.w, &c, 0, t.L, P), KVL_EINVAL);
    ck_assert_int_eq(v41_stack_replay_layers(h, NULL, &t.s, &t.w, &c, 3, 2, 0), KVL_EINVAL);
    v41_cache_free(&c);
    ch07_stack_toy_free(&t);
}
END_TEST

START_TEST(test_parameter_counts_match_the_allocated_weights)
{
    /* Oracle: the floats the initialiser really allocates, layer by layer. */
    ch07_stack_toy t;
    ch07_stack_toy_make(&t, 8101, MAX_T);
    uint64_t full = 0, early = 0;
    for (size_t l = 0; l < t.L; l++) {
        const v41_config *c = &t.s.layers[l];
        const v41_weights *w = &t.w.layers[l];
        const v41_params p = v41_layer_params(c);
        ck_assert_uint_eq(p.core + p.compressor + p.index_keys + p.index_query, w->core.n_floats + w->n_floats);
        const uint64_t layer = t.d + w->core.n_floats + w->n_floats;
        full += layer;
        if (l < t.E) early += layer;
        else if (c->kind == KVL_LAYER_FULL)   /* pre-norm, W_C (, W_Z), gain, W_IK, gain: not W_IQ, W_IW */
            early += t.d + w->n_floats - c->indexer.n_heads * c->indexer.head_dim * c->core.q_lora_rank -
                     c->indexer.n_heads * t.d;
    }
    v41_ced_work wf, we;
    v41_ced_prefill_work(&wf, &we, &t.s);
    ck_assert_uint_eq(wf.layers, t.L);
    ck_assert_uint_eq(we.layers, t.E);
    ck_assert_uint_eq(wf.params, full);
    ck_assert_uint_eq(we.params, early);
    ch07_stack_toy_free(&t);

    /* The V4.1 layer walkthrough's parameter check of V4.1-Flash layer 24, a Reindex layer. */
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4.1-flash.json")) == KVL_OK, "%s", kvl_error());
    v41_config c;
    ck_assert_int_eq(v41_config_from_model(&c, &m, 24), KVL_OK);
    const v41_params p = v41_layer_params(&c);
    ck_assert_uint_eq(p.core + p.index_query, 132024128u);
    ck_assert_uint_eq(p.compressor + p.index_keys, 0);
    kvl_model_free(&m);
}
END_TEST

/* V4.1-Flash's parameter counts by role, as nb_07 prints them and ref/v41 counts them, against the
 * definition: each matrix's rows times its columns (plus a norm's gain) from the config's widths. */
START_TEST(test_v41_parameter_counts_by_role_are_the_definitions)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4.1-flash.json")) == KVL_OK, "%s", kvl_error());
    const uint64_t d = m.d, Dq = m.q_lora_rank, H = m.n_heads, Dh = m.head_dim, HI = m.index_n_heads,
                   DI = m.index_head_dim, G = m.o_groups, Do = m.o_lora_rank;
    const uint64_t q_latent = d * Dq + Dq, q_heads = Dq * H * Dh, window = d * Dh + Dh, sinks = H;
    const uint64_t wo_a = G * Do * (H / G * Dh), output = wo_a + d * G * Do, indexer = Dq * HI * DI + d * HI;
    const uint64_t core = q_latent + q_heads + window + sinks + output, keys = DI * Dh + DI;
    static const struct { size_t layer; uint64_t compressor, index_keys, index_query; } modes[] = {
        {0, 0, 0, 0},                          /* window-only */
        {3, 0, 0, 0},                          /* Reuse */
        {24, 0, 0, 1},                         /* Reindex: W_IQ, W_IW, no keys */
        {2, 2, 1, 1},                          /* Full at M 2: W_C and W_Z, gain; W_IK, gain */
        {20, 1, 1, 1},                         /* Full at M 1: W_C only */
    };
    uint64_t total[5];
    for (size_t i = 0; i < sizeof modes / sizeof modes[0]; i++) {
        v41_config c;
        ck_assert_int_eq(v41_config_from_model(&c, &m, modes[i].layer), KVL_OK);
        const v41_params p = v41_layer_params(&c);
        const uint64_t compressor = modes[i].compressor * d * Dh + (modes[i].compressor ? Dh : 0);
        ck_assert_uint_eq(p.core, core);
        ck_assert_uint_eq(p.compressor, compressor);
        ck_assert_uint_eq(p.index_keys, modes[i].index_keys * keys);
        ck_assert_uint_eq(p.index_query, modes[i].index_query * indexer);
        total[i] = p.core + p.compressor + p.index_keys + p.index_query;
    }
    kvl_model_free(&m);
    char want[4][320];
    snprintf(want[0], sizeof want[0], "query compression %s, query heads %s, window %s, indexer %s, sinks %s, "
             "grouped output %s", KVL_GROUPED(q_latent), KVL_GROUPED(q_heads), KVL_GROUPED(window), KVL_GROUPED(indexer),
             KVL_GROUPED(sinks), KVL_GROUPED(output));
    snprintf(want[1], sizeof want[1], "Reindex layer: %s parameters; x 4 Reindex layers = %s", KVL_GROUPED(total[2]),
             KVL_GROUPED(4 * total[2]));
    snprintf(want[2], sizeof want[2], "Reuse and window-only layers %s; Full layers %s (M 2: W_C and W_Z) and %s (M 1",
             KVL_GROUPED(total[1]), KVL_GROUPED(total[3]), KVL_GROUPED(total[4]));
    snprintf(want[3], sizeof want[3], "W_OA (wo_a): %s weights per layer; in bf16 %s MiB, in FP8 %s MiB",
             KVL_GROUPED(wo_a), KVL_GROUPED(wo_a * 2 / (1 << 20)), KVL_GROUPED(wo_a / (1 << 20)));
    ck_assert_uint_eq(total[0], total[1]);
    const char *const lines[] = {want[0], want[1], want[2], want[3]};
    kvl_expect_prints("nb_07", lines, 4, "query compression");
}
END_TEST

/* Values of compressed entries the narrow stack's queries read over a T-token prompt, query by query
 * from the layer modes' definitions, at replay's narrow widths (entries of 64 values, index keys of
 * 2 heads x 32): a Full layer of ratio M scores all ⌊(t+1)/M⌋ index keys, a Reindex layer as many
 * but at most the candidate pool's positions when it reads the pool's source, and Full, Reindex and
 * Reuse layers read min(index_topk, ⌊(t+1)/M⌋) picks. */
static double narrow_prompt_values(const kvl_model *m, size_t T)
{
    const size_t pool = m->candidate_topk_blocks * m->candidate_block_size;
    double v = 0;
    for (size_t t = 0; t < T; t++)
        for (size_t l = 0; l < m->n_layers; l++) {
            const kvl_layer *y = &m->layers[l];
            if (y->kind == KVL_LAYER_WINDOW || y->compress_ratio == 0) continue;
            const size_t seen = (t + 1) / y->compress_ratio;
            size_t keys = y->kind == KVL_LAYER_REUSE ? 0 : seen;
            if (y->kind == KVL_LAYER_REINDEX && (size_t)y->kv_source == m->candidate_source_layer && keys > pool)
                keys = pool;
            v += (double)keys * 64 + (double)(seen < m->index_topk ? seen : m->index_topk) * 64;
        }
    return v;
}

/* The N in a refusal's "at most FLAG N" (one line, exit 2, nothing on stdout, naming FLAG VALUE). */
static size_t refused_at_most(const char *cmd, const char *names, const char *at_most)
{
    const char *line;
    kvl_expect_refused(cmd, names, &line);
    const char *at = strstr(line, at_most);
    ck_assert_msg(at != NULL, "%s: %s", cmd, line);
    return strtoul(at + strlen(at_most), NULL, 10);
}

/* replay bounds its two sections' work (--help): the prompts' prefills at 20,000,000,000 values of
 * compressed entries, the V4-Flash file's prefill of --persist-tokens (one chunk, one index head) at
 * 25,000,000,000. Each refusal names the most the definition allows: a prompt of N tokens and N
 * persisted tokens are accepted (they pass every check), N + 1 refused. */
START_TEST(test_program_bounds_the_entries_its_queries_read)
{
    kvl_model v41, v4;
    ck_assert_msg(kvl_model_load(&v41, kvl_path("ref/configs/deepseek-v4.1-flash.json")) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(kvl_model_load(&v4, kvl_path("ref/configs/deepseek-v4-flash.json")) == KVL_OK, "%s", kvl_error());
    char cmd[128], names[64];
    size_t N = refused_at_most("replay --prompts 64K", "--prompts 65536", "one prompt of at most ");
    ck_assert_msg(narrow_prompt_values(&v41, N) <= 2e10 && narrow_prompt_values(&v41, N + 1) > 2e10,
                  "the prompts' bound is not at %zu tokens", N);
    snprintf(cmd, sizeof cmd, "replay --persist-tokens 256 --prompts %zu", N + 1);
    snprintf(names, sizeof names, "--prompts %zu", N + 1);
    kvl_expect_refused(cmd, names, NULL);
    snprintf(cmd, sizeof cmd, "replay --persist-tokens 256 --prompts %zu", N);
    snprintf(names, sizeof names, "the %zu-token prompt: full prefill", N);
    kvl_expect_accepted(cmd, names, 20);
    N = refused_at_most("replay --persist-tokens 16384", "--persist-tokens 16384", "at most --persist-tokens ");
    ck_assert_msg(oracle_v4_entry_values(&v4, N, N, 1) <= 2.5e10 && oracle_v4_entry_values(&v4, N + 1, N + 1, 1) > 2.5e10,
                  "the persisted tokens' bound is not at %zu", N);
    snprintf(cmd, sizeof cmd, "replay --prompts 256 --persist-tokens %zu", N + 1);
    snprintf(names, sizeof names, "--persist-tokens %zu", N + 1);
    kvl_expect_refused(cmd, names, NULL);
    snprintf(cmd, sizeof cmd, "replay --prompts 256 --persist-tokens %zu", N);
    /* the stage the persisted tokens make long enough to be shown: progress skips a stage of under 0.1 s */
    kvl_expect_accepted(cmd, "V4.1's prefix-cache file", 20);
    kvl_model_free(&v41);
    kvl_model_free(&v4);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch07_replay");
    TCase *tc = tcase_create("replay");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_early_exit_global_rows_equal_full_prefill_bit_for_bit);
    tcase_add_test(tc, test_v41_parameter_counts_by_role_are_the_definitions);
    tcase_add_test(tc, test_early_exit_global_rows_equal_full_prefill_native_rows);
    tcase_add_test(tc, test_replay_from_zero_is_the_full_forward);
    tcase_add_test(tc, test_exact_replay_rebuilds_every_window_and_the_next_tokens);
    tcase_add_test(tc, test_exact_replay_bound_is_tight);
    tcase_add_test(tc, test_replay_error_rises_past_the_exact_bound);
    tcase_add_test(tc, test_bounded_replay_exact_in_first_layer_approximate_deeper);
    tcase_add_test(tc, test_decode_after_early_exit_and_decoder_replay_equals_full_prefill);
    tcase_add_test(tc, test_early_exit_refuses_a_decoder_source_after_the_first_decoder_layer);
    tcase_add_test(tc, test_replay_refuses_a_start_past_the_prefix);
    tcase_add_test(tc, test_parameter_counts_match_the_allocated_weights);
    tcase_add_test(tc, test_program_bounds_the_entries_its_queries_read);
    suite_add_tcase(s, tc);
    return s;
}
