/* Chapter 7: the V4.1 4-bit cache (chapters/07_v41/README.md, "What it stores per token"; formats/rows.h):
 * native rows within their format's bounds, rows quantised before any query reads them,
 * 890 bytes per token held by the live caches of a V4.1-Flash-shaped stack, window rows apart. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ch07_flash.h"
#include "common.h"
#include "v41_stack.h"
#include "norm.h"

#define FLASH_T 130   /* even (whole M = 2 blocks) and past the 128-row window */
#define FLASH_D 64

typedef struct {
    kvl_model m;
    v41_stack_config s;
    v41_stack_weights w;
} flash;

static void flash_make(flash *f)
{
    ck_assert_msg(ch07_flash_small(&f->m, kvl_path("ref/configs/deepseek-v4.1-flash.json")) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v41_stack_config_from_model(&f->s, &f->m) == KVL_OK, "%s", kvl_error());
    kvl_rng rng;
    kvl_rng_seed(&rng, 7001);
    ck_assert_msg(v41_stack_weights_init_random(&f->w, &f->s, &rng) == KVL_OK, "%s", kvl_error());
}

static void flash_free(flash *f)
{
    v41_stack_weights_free(&f->w);
    v41_stack_config_free(&f->s);
    kvl_model_free(&f->m);
}

static float *draw(size_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    kvl_rng_normal_f32(&rng, x, n, 1.0);
    return x;
}

START_TEST(test_live_caches_hold_890_bytes_per_token_with_window_rows_apart)
{
    flash f;
    flash_make(&f);
    float *x = draw(FLASH_T * FLASH_D, 7002), *out = malloc(FLASH_T * FLASH_D * sizeof *out);
    v41_cache c;
    ck_assert_msg(v41_cache_init(&c, &f.s, FLASH_T, V41_CACHE_NATIVE) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v41_stack_prefill(out, NULL, &f.s, &f.w, &c, x, FLASH_T - 2) == KVL_OK, "%s", kvl_error());
    for (size_t t = FLASH_T - 2; t < FLASH_T; t++)
        ck_assert_msg(v41_stack_decode(out + t * FLASH_D, &f.s, &f.w, &c, x + t * FLASH_D) == KVL_OK, "%s", kvl_error());
    /* chapter 7: layers 2, 8, 14 hold (288 + 68)/2 per token, layer 20 holds 288 + 68 */
    ck_assert_uint_eq(v41_cache_bytes_used(&c), 890u * FLASH_T);
    ck_assert_uint_eq(v41_cache_window_bytes(&c), 40u * 128 * 528);   /* 2,703,360 B per sequence */
    size_t writers = 0;
    for (size_t l = 0; l < c.n_layers; l++) {
        ck_assert_uint_eq(c.window[l].row_bytes, 528);
        if (!c.entries[l].bytes) continue;
        writers++;
        ck_assert_uint_eq(c.entries[l].row_bytes, 288);
        ck_assert_uint_eq(c.keys[l].row_bytes, 68);
    }
    ck_assert_uint_eq(writers, 4);
    /* the compressor tails are bounded: [M][512] values and gates per source */
    ck_assert_uint_eq(v41_cache_state_bytes(&c), (3 * 2 + 1) * 2 * 512 * sizeof(float));
    v41_cache_free(&c);
    free(x); free(out);
    flash_free(&f);
}
END_TEST

/* Per-element bounds of each row format for a block whose largest magnitude is amax (formats/block.h, formats/rows.h):
 *   v41-main  E2M1 × E4M3 scale s = e4m3(amax/6): the widest E2M1 gap is 2, so |err| ≤ s; E4M3 rounding of
 *             the scale is within 2^−4, so s ≤ (amax/6)(1 + 2^−4) and a clamp at 6s loses < amax/17 < s;
 *   v41-window E4M3 × power-of-two s ≥ amax/448: 3 mantissa bits give |err| ≤ 2^−4|x| for normals, and the
 *             subnormal spacing 2^−9 s gives at most 2^−10 s below them;
 *   v4-index  E2M1 × power-of-two s ≥ amax/6 (no clamp): |err| ≤ s, the half of the widest gap. */
static void check_store(v4_rows_store store, size_t width, size_t block, uint64_t seed)
{
    const size_t n = 16;
    v4_rows r;
    ck_assert_int_eq(v4_rows_init(&r, store, width, n), KVL_OK);
    float *x = draw(n * width, seed), *y = malloc(n * width * sizeof *y);
    for (size_t i = 0; i < n * width; i++) x[i] *= (float)(1 + i % 37);   /* blocks of very different ranges */
    kvl_rmsnorm_f32(x, x, NULL, n, width, 1e-6);   /* entries and rows are RMS-normalised vectors */
    ck_assert_int_eq(v4_rows_append(&r, x, n), KVL_OK);
    ck_assert_int_eq(v4_rows_read(y, &r, 0, n), KVL_OK);
    double worst = 0;
    for (size_t b = 0; b < n * width / block; b++) {
        double amax = 0;
        for (size_t i = b * block; i < (b + 1) * block; i++) amax = fmax(amax, fabs(x[i]));
        for (size_t i = b * block; i < (b + 1) * block; i++) {
            const double err = fabs((double)y[i] - x[i]);
            double bound;
            if (store == V4_ROWS_V41_WINDOW) bound = ldexp(1, -4) * fabs(x[i]) + ldexp(1, -10) * exp2(ceil(log2(amax / 448)));
            else if (store == V4_ROWS_V41_MAIN) bound = amax / 6 * (1 + ldexp(1, -4));
            else bound = exp2(ceil(log2(amax / 6)));
            ck_assert_msg(err <= bound, "%s row block %zu value %zu: error %g above bound %g", v4_rows_store_name(store), b,
                          i, err, bound);
            worst = fmax(worst, err / amax);
        }
    }
    ck_assert_msg(worst > 0, "%s: the store did not quantise", v4_rows_store_name(store));
    v4_rows_free(&r);
    free(x); free(y);
}

START_TEST(test_native_rows_within_format_bounds)
{
    check_store(V4_ROWS_V41_MAIN, 512, 16, 7003);
    check_store(V4_ROWS_V41_WINDOW, 512, 32, 7004);
    check_store(V4_ROWS_INDEX, 128, 32, 7005);
}
END_TEST

/* out[d] − x of a one-layer stack (layer 0, window-only) for the single token x at position 0, in double, with
 * its window row y[Dh] given: one key, so p = e^s/(e^σ + e^s), o_h = p·y, then un-rotation at 0 (identity)
 * and the grouped output. */
static void one_key_oracle(double *out, const v41_config *c, const v41_weights *w, const float *n, const float *y)
{
    const v4_config *k = &c->core;
    const size_t H = k->n_heads, Dh = k->head_dim, G = k->o_groups, Do = k->o_lora_rank, gw = H / G * Dh, d = k->d;
    float *cq = malloc(k->q_lora_rank * sizeof *cq), *q = malloc(H * Dh * sizeof *q);
    double *o = malloc(H * Dh * sizeof *o), *u = malloc(G * Do * sizeof *u);
    ck_assert_int_eq(v4_query_latent(cq, k, &w->core, n, 1), KVL_OK);
    ck_assert_int_eq(v41_query(q, c, w, cq, 1, 0), KVL_OK);
    for (size_t h = 0; h < H; h++) {
        double s = 0;
        for (size_t ch = 0; ch < Dh; ch++) s += (double)q[h * Dh + ch] * y[ch];
        s /= sqrt((double)Dh);
        const double mu = fmax(s, w->core.sinks[h]), p = exp(s - mu) / (exp(s - mu) + exp(w->core.sinks[h] - mu));
        for (size_t ch = 0; ch < Dh; ch++) o[h * Dh + ch] = p * y[ch];
    }
    for (size_t r = 0; r < G; r++)
        for (size_t i = 0; i < Do; i++) {
            double s = 0;
            for (size_t j = 0; j < gw; j++) s += (double)w->core.w_oa[(r * Do + i) * gw + j] * o[r * gw + j];
            u[r * Do + i] = s;
        }
    for (size_t i = 0; i < d; i++) {
        double s = 0;
        for (size_t j = 0; j < G * Do; j++) s += (double)w->core.w_ob[i * G * Do + j] * u[j];
        out[i] = s;
    }
    free(cq); free(q); free(o); free(u);
}

START_TEST(test_current_token_reads_its_own_row_quantised)
{
    /* Layer 0 alone, one token: the only key is the token's own window row. The native cache must attend
     * over that row after FP8 rounding (528-byte row), not over the float32 row it was made from. */
    flash f;
    flash_make(&f);
    v41_stack_config s1 = f.s;
    v41_stack_weights w1 = f.w;
    s1.n_layers = w1.n_layers = 1;
    const v41_config *c = &f.s.layers[0];
    float *x = draw(FLASH_D, 7006), *out = malloc(FLASH_D * sizeof *out), *n = malloc(FLASH_D * sizeof *n);
    float *y = malloc(512 * sizeof *y), *yq = malloc(512 * sizeof *yq);
    v41_cache cache;
    ck_assert_int_eq(v41_cache_init(&cache, &s1, 4, V41_CACHE_NATIVE), KVL_OK);
    ck_assert_int_eq(v41_stack_decode(out, &s1, &w1, &cache, x), KVL_OK);
    kvl_rmsnorm_f32(n, x, f.w.attn_norm, 1, FLASH_D, f.s.norm_eps);
    ck_assert_int_eq(v4_kv(y, &c->core, &f.w.layers[0].core, n, 1, 0), KVL_OK);
    ck_assert_int_eq(v4_rows_read(yq, &cache.window[0], 0, 1), KVL_OK);   /* the stored bytes, decoded */
    double *want_q = malloc(FLASH_D * sizeof *want_q), *want_f = malloc(FLASH_D * sizeof *want_f);
    float *got = malloc(FLASH_D * sizeof *got);
    one_key_oracle(want_q, c, &f.w.layers[0], n, yq);
    one_key_oracle(want_f, c, &f.w.layers[0], n, y);
    double gap = 0;
    for (size_t i = 0; i < FLASH_D; i++) {
        got[i] = out[i] - x[i];
        gap = fmax(gap, fabs(want_q[i] - want_f[i]));
    }
    /* float32 chain against a double oracle over 512-long sums: 512·2^−24 ≈ 3e-5 relative on O(1) values */
    kvl_expect_close("layer 0 on its own quantised row", got, want_q, FLASH_D, 1e-4, 1e-3, 0.999999);
    ck_assert_msg(gap > 1e-3, "FP8 rounding of the row should move the output (gap %g)", gap);
    v41_cache_free(&cache);
    free(x); free(out); free(n); free(y); free(yq); free(want_q); free(want_f); free(got);
    flash_free(&f);
}
END_TEST

START_TEST(test_fp4_cache_error_of_attention_output_is_measured_and_small)
{
    flash f;
    flash_make(&f);
    float *x = draw(FLASH_T * FLASH_D, 7007), *q = malloc(FLASH_T * FLASH_D * sizeof *q);
    float *r = malloc(FLASH_T * FLASH_D * sizeof *r);
    v41_cache cq, cr;
    ck_assert_int_eq(v41_cache_init(&cq, &f.s, FLASH_T, V41_CACHE_NATIVE), KVL_OK);
    ck_assert_int_eq(v41_cache_init(&cr, &f.s, FLASH_T, V41_CACHE_F32), KVL_OK);
    ck_assert_int_eq(v41_stack_prefill(q, NULL, &f.s, &f.w, &cq, x, FLASH_T), KVL_OK);
    ck_assert_int_eq(v41_stack_prefill(r, NULL, &f.s, &f.w, &cr, x, FLASH_T), KVL_OK);
    double num = 0, den = 0;   /* attention's contribution: the residual stream minus the input */
    for (size_t i = 0; i < FLASH_T * FLASH_D; i++) {
        num += ((double)q[i] - r[i]) * ((double)q[i] - r[i]);
        den += ((double)r[i] - x[i]) * ((double)r[i] - x[i]);
    }
    const double rel = sqrt(num / den);
    printf("ch07: FP4/FP8 cache vs float32, attention output relative RMS error %.4f\n", rel);
    /* 4-bit entries carry about 2^−3 relative error per value, FP8 rows 2^−5; averaged through softmax-weighted
     * sums over ~100 keys and 40 layers the output error stays well under one 4-bit step */
    ck_assert_msg(rel > 1e-4 && rel < 0.125, "relative error %g", rel);
    v41_cache_free(&cq);
    v41_cache_free(&cr);
    free(x); free(q); free(r);
    flash_free(&f);
}
END_TEST

START_TEST(test_native_cache_rejects_toy_widths)
{
    kvl_model m;
    ck_assert_int_eq(ch07_flash_small(&m, kvl_path("ref/configs/deepseek-v4.1-flash.json")), KVL_OK);
    m.head_dim = 256;
    v41_stack_config s;
    ck_assert_int_eq(v41_stack_config_from_model(&s, &m), KVL_OK);
    v41_cache c;
    ck_assert_int_eq(v41_cache_init(&c, &s, 16, V41_CACHE_NATIVE), KVL_EINVAL);
    v41_stack_config_free(&s);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_program_help_and_bad_arguments)
{
    char out[4096], err[1024];
    ck_assert_int_eq(kvl_run("v41_cache --help", NULL, out, sizeof out, err, sizeof err), 0);
    ck_assert_ptr_nonnull(strstr(out, "usage: v41_cache"));
    const char *bad[] = {"v41_cache --tokens 3", "v41_cache --tokens", "v41_cache --pool-blocks 0", "v41_cache --what"};
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(kvl_run(bad[i], NULL, out, sizeof out, err, sizeof err), 2);
        ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "%s: want one line on stderr, got '%s'", bad[i], err);
    }
}
END_TEST

/* --tokens is bounded at 2,048 (--help: the two 40-layer prefills' reads at the real entry widths):
 * 2,050 is refused (exit 2, one line, nothing on stdout), 2,048 passes every check. */
START_TEST(test_program_bounds_its_tokens)
{
    kvl_expect_refused("v41_cache --tokens 2050", "2050", NULL);
    kvl_expect_accepted("v41_cache --tokens 2048", "the work of a live stack", 20);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch07_cache");
    TCase *tc = tcase_create("cache");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_live_caches_hold_890_bytes_per_token_with_window_rows_apart);
    tcase_add_test(tc, test_native_rows_within_format_bounds);
    tcase_add_test(tc, test_current_token_reads_its_own_row_quantised);
    tcase_add_test(tc, test_fp4_cache_error_of_attention_output_is_measured_and_small);
    tcase_add_test(tc, test_native_cache_rejects_toy_widths);
    tcase_add_test(tc, test_program_bounds_its_tokens);
    tcase_add_test(tc, test_program_help_and_bad_arguments);
    suite_add_tcase(s, tc);
    return s;
}
