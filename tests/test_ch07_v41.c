/* Chapter 7: V4.1 CSA2 (ref/v41.h): cache paths, the modes and the compressor's limits. Oracles are the definitions in
 * plain loops and double precision, written here. Toy sizes from tests/ch07_toy.h. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ch07_toy.h"
#include "common.h"
#include "config.h"
#include "grouped.h"
#include "v41_stack.h"
#include "linalg.h"
#include "threads.h"
#include "norm.h"
#include "status.h"

/* float32 path vs double oracle: a chain of about six float32 products over sums of at most 64 terms, each
 * about 64·2^−24 ≈ 4e-6 relative; 1e-4 absolute on O(1) outputs leaves 4x headroom over six of them. */
#define F32_ATOL 1e-4
#define F32_RTOL 1e-3
#define F32_COS 0.999999
/* Two float32 paths of the same math (OpenBLAS blocks a one-token product differently from a 45-token one):
 * both within F32_ATOL of the truth, so within twice that of each other. */
#define PATH_ATOL 2e-4
#define PATH_RTOL 2e-3
#define T_TOY 45

typedef struct {
    kvl_model m;
    v41_stack_config s;
    v41_stack_weights w;
} toy;

static void toy_make(toy *t, uint64_t seed)
{
    ck_assert_int_eq(ch07_toy_model(&t->m), KVL_OK);
    ck_assert_msg(v41_stack_config_from_model(&t->s, &t->m) == KVL_OK, "%s", kvl_error());
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ck_assert_msg(v41_stack_weights_init_random(&t->w, &t->s, &rng) == KVL_OK, "%s", kvl_error());
}

static void toy_free(toy *t)
{
    v41_stack_weights_free(&t->w);
    v41_stack_config_free(&t->s);
    kvl_model_free(&t->m);
}

static float *draw(size_t n, uint64_t seed)
{
    float *x = malloc(n * sizeof *x);
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    kvl_rng_normal_f32(&rng, x, n, 1.0);
    return x;
}

/* ---- double oracles ------------------------------------------------------------------------------------ */

/* y[n] = g ⊙ v / sqrt(mean(v²) + ε) */
static void rms_d(double *y, const double *v, const float *g, size_t n, double eps)
{
    double ms = 0;
    for (size_t i = 0; i < n; i++) ms += v[i] * v[i];
    const double r = 1.0 / sqrt(ms / (double)n + eps);
    for (size_t i = 0; i < n; i++) y[i] = (g ? g[i] : 1.0) * v[i] * r;
}

/* y[R] = W[R][C] x[C] */
static void mv_d(double *y, const float *W, const double *x, size_t R, size_t C)
{
    for (size_t r = 0; r < R; r++) {
        double s = 0;
        for (size_t c = 0; c < C; c++) s += (double)W[r * C + c] * x[c];
        y[r] = s;
    }
}

/* interleaved rotation of x[Dr] at pos (sign −1: inverse) with the layer's θ table */
static void rot_d(double *x, const kvl_rope *r, double pos, double sign)
{
    for (size_t i = 0; i < r->Dr / 2; i++) {
        const double a = pos * (double)r->theta[i], c = cos(a), s = sign * sin(a);
        const double x0 = x[2 * i], x1 = x[2 * i + 1];
        x[2 * i] = x0 * c - x1 * s;
        x[2 * i + 1] = x0 * s + x1 * c;
    }
}

/* out[S][d]: one V4.1 layer on x[S][d] at positions 0 … S−1 reading entries[N][Dh] at picks sel[S][K]
 * (NULL: window only). The definition: c^Q, q (no head norm), window rows, sink softmax over window ∪ picks,
 * inverse rotation, grouped output. */
static void layer_oracle(double *out, const v41_config *c, const v41_weights *w, const float *x, size_t S,
                         const float *entries, const int32_t *sel, size_t K)
{
    const v4_config *k = &c->core;
    const size_t d = k->d, H = k->n_heads, Dh = k->head_dim, Dq = k->q_lora_rank, G = k->o_groups, Do = k->o_lora_rank;
    const size_t W = k->window, Dr = k->rope.Dr, gw = H / G * Dh;
    double *xd = malloc(d * sizeof *xd), *cq = malloc(Dq * sizeof *cq), *q = malloc(H * Dh * sizeof *q);
    double *win = malloc(S * Dh * sizeof *win), *o = malloc(H * Dh * sizeof *o), *u = malloc(G * Do * sizeof *u);
    double *p = malloc((W + K) * sizeof *p);
    const float **keys = malloc((W + K) * sizeof *keys);
    const double *wkeys[64];
    for (size_t t = 0; t < S; t++) {
        for (size_t i = 0; i < d; i++) xd[i] = x[t * d + i];
        mv_d(win + t * Dh, w->core.w_kv, xd, Dh, d);
        rms_d(win + t * Dh, win + t * Dh, w->core.kv_norm, Dh, k->norm_eps);
        rot_d(win + t * Dh + Dh - Dr, &k->rope, (double)t, 1);
    }
    for (size_t t = 0; t < S; t++) {
        for (size_t i = 0; i < d; i++) xd[i] = x[t * d + i];
        mv_d(cq, w->core.w_dq, xd, Dq, d);
        rms_d(cq, cq, w->core.q_norm, Dq, k->norm_eps);
        mv_d(q, w->core.w_uq, cq, H * Dh, Dq);
        for (size_t h = 0; h < H; h++) rot_d(q + h * Dh + Dh - Dr, &k->rope, (double)t, 1);
        size_t nw = 0, ne = 0;
        for (size_t j = t + 1 > W ? t + 1 - W : 0; j <= t; j++) wkeys[nw++] = win + j * Dh;
        for (size_t i = 0; sel && i < K; i++)
            if (sel[t * K + i] >= 0) keys[ne++] = entries + (size_t)sel[t * K + i] * Dh;
        for (size_t h = 0; h < H; h++) {
            const double *qh = q + h * Dh;
            double mu = w->core.sinks[h];
            for (size_t j = 0; j < nw + ne; j++) {
                double s = 0;
                for (size_t ch = 0; ch < Dh; ch++) s += qh[ch] * (j < nw ? wkeys[j][ch] : (double)keys[j - nw][ch]);
                p[j] = s / sqrt((double)Dh);
                mu = fmax(mu, p[j]);
            }
            double den = exp(w->core.sinks[h] - mu);
            for (size_t j = 0; j < nw + ne; j++) den += (p[j] = exp(p[j] - mu));
            for (size_t ch = 0; ch < Dh; ch++) {
                double s = 0;
                for (size_t j = 0; j < nw + ne; j++) s += p[j] / den * (j < nw ? wkeys[j][ch] : (double)keys[j - nw][ch]);
                o[h * Dh + ch] = s;
            }
            rot_d(o + h * Dh + Dh - Dr, &k->rope, (double)t, -1);
        }
        for (size_t r = 0; r < G; r++) mv_d(u + r * Do, w->core.w_oa + r * Do * gw, o + r * gw, Do, gw);
        mv_d(out + t * d, w->core.w_ob, u, d, G * Do);
    }
    free(xd); free(cq); free(q); free(win); free(o); free(u); free(p); free(keys);
}

/* L[⌊T/M⌋][c]: the CSA2 compressor's definition. */
static void compressor_oracle(double *L, const v41_compressor_config *c, const v41_compressor_weights *w,
                              const float *x, size_t T)
{
    const size_t M = c->ratio, cw = c->width, d = c->d;
    double *a = malloc(M * cw * sizeof *a), *z = malloc(M * cw * sizeof *z), *xd = malloc(d * sizeof *xd);
    for (size_t i = 0; i < T / M; i++) {
        for (size_t r = 0; r < M; r++) {
            for (size_t k = 0; k < d; k++) xd[k] = x[(i * M + r) * d + k];
            mv_d(a + r * cw, w->w_c, xd, cw, d);
            if (M > 1) mv_d(z + r * cw, w->w_z, xd, cw, d);
            else for (size_t ch = 0; ch < cw; ch++) z[ch] = 0;
        }
        for (size_t ch = 0; ch < cw; ch++) {
            double den = 0, num = 0;
            for (size_t r = 0; r < M; r++) {
                den += exp(z[r * cw + ch]);
                num += exp(z[r * cw + ch]) * a[r * cw + ch];
            }
            L[i * cw + ch] = num / den;
        }
        rms_d(L + i * cw, L + i * cw, w->norm, cw, c->norm_eps);
    }
    free(a); free(z); free(xd);
}

/* ---- compressor limits --------------------------------------------------------------------------------- */

START_TEST(test_compressor_ratio1_gives_normalised_projection)
{
    toy t;
    toy_make(&t, 701);
    const v41_config *c = &t.s.layers[5];   /* Full, M = 1 */
    const v41_weights *w = &t.w.layers[5];
    ck_assert_ptr_null(w->compressor.w_z);
    float *x = draw(T_TOY * 64, 702), *L = malloc(T_TOY * 32 * sizeof *L);
    double *want = malloc(T_TOY * 32 * sizeof *want), *xd = malloc(64 * sizeof *xd);
    ck_assert_int_eq(v41_compressor_forward(L, &c->compressor, &w->compressor, x, T_TOY), KVL_OK);
    for (size_t i = 0; i < T_TOY; i++) {   /* RMSNorm(W_C x_t), written without any gate */
        for (size_t k = 0; k < 64; k++) xd[k] = x[i * 64 + k];
        mv_d(want + i * 32, w->compressor.w_c, xd, 32, 64);
        rms_d(want + i * 32, want + i * 32, w->compressor.norm, 32, c->compressor.norm_eps);
    }
    kvl_expect_close("ratio-1 entries", L, want, T_TOY * 32, F32_ATOL, F32_RTOL, F32_COS);
    free(x); free(L); free(want); free(xd);
    toy_free(&t);
}
END_TEST

START_TEST(test_compressor_ratio2_with_equal_gates_gives_normalised_mean)
{
    toy t;
    toy_make(&t, 703);
    const v41_config *c = &t.s.layers[2];   /* Full, M = 2 */
    v41_weights *w = &t.w.layers[2];
    /* equal gate logits: the rows of each block project to the same z when W_Z is zero */
    memset(w->compressor.w_z, 0, 32 * 64 * sizeof(float));
    float *x = draw(T_TOY * 64, 704), *L = malloc(T_TOY * 32 * sizeof *L);
    double *want = malloc(T_TOY * 32 * sizeof *want), *a = malloc(2 * 32 * sizeof *a), *xd = malloc(64 * sizeof *xd);
    ck_assert_int_eq(v41_compressor_forward(L, &c->compressor, &w->compressor, x, T_TOY), KVL_OK);
    for (size_t i = 0; i < T_TOY / 2; i++) {
        for (size_t r = 0; r < 2; r++) {
            for (size_t k = 0; k < 64; k++) xd[k] = x[(2 * i + r) * 64 + k];
            mv_d(a + r * 32, w->compressor.w_c, xd, 32, 64);
        }
        for (size_t ch = 0; ch < 32; ch++) want[i * 32 + ch] = 0.5 * (a[ch] + a[32 + ch]);
        rms_d(want + i * 32, want + i * 32, w->compressor.norm, 32, c->compressor.norm_eps);
    }
    kvl_expect_close("ratio-2 equal-gate entries", L, want, (T_TOY / 2) * 32, F32_ATOL, F32_RTOL, F32_COS);
    free(x); free(L); free(want); free(a); free(xd);
    toy_free(&t);
}
END_TEST

START_TEST(test_compressor_matches_softmax_gate_definition_at_ratio2)
{
    toy t;
    toy_make(&t, 705);
    const v41_config *c = &t.s.layers[2];
    const v41_weights *w = &t.w.layers[2];
    float *x = draw(T_TOY * 64, 706), *L = malloc(T_TOY * 32 * sizeof *L);
    double *want = malloc(T_TOY * 32 * sizeof *want);
    ck_assert_int_eq(v41_compressor_forward(L, &c->compressor, &w->compressor, x, T_TOY), KVL_OK);
    compressor_oracle(want, &c->compressor, &w->compressor, x, T_TOY);
    kvl_expect_close("ratio-2 entries", L, want, (T_TOY / 2) * 32, F32_ATOL, F32_RTOL, F32_COS);
    free(x); free(L); free(want);
    toy_free(&t);
}
END_TEST

START_TEST(test_compressor_push_matches_forward_when_fed_in_ragged_chunks)
{
    toy t;
    toy_make(&t, 707);
    const v41_config *c = &t.s.layers[2];
    const v41_weights *w = &t.w.layers[2];
    float *x = draw(T_TOY * 64, 708), *L = malloc(T_TOY * 32 * sizeof *L), *got = malloc(T_TOY * 32 * sizeof *got);
    double *want = malloc(T_TOY * 32 * sizeof *want);
    ck_assert_int_eq(v41_compressor_forward(L, &c->compressor, &w->compressor, x, T_TOY), KVL_OK);
    for (size_t i = 0; i < (T_TOY / 2) * 32; i++) want[i] = L[i];
    v41_compressor_state st;
    ck_assert_int_eq(v41_compressor_state_init(&st, &c->compressor), KVL_OK);
    const size_t cuts[] = {1, 2, 3, 5, 7, 1, 26};   /* 45 tokens, blocks straddling chunk edges */
    size_t pos = 0, n = 0;
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        size_t n_new = 0;
        ck_assert_int_eq(v41_compressor_push(got + n * 32, &n_new, &c->compressor, &w->compressor, &st, x + pos * 64,
                                              cuts[k]), KVL_OK);
        pos += cuts[k];
        n += n_new;
        ck_assert_uint_eq(n, pos / 2);   /* an entry appears exactly when its block completes */
    }
    kvl_expect_close("pushed entries", got, want, n * 32, PATH_ATOL, PATH_RTOL, F32_COS);
    v41_compressor_state_free(&st);
    free(x); free(L); free(got); free(want);
    toy_free(&t);
}
END_TEST

/* ---- the index key comes from the pre-rotary latent ------------------------------------------------------ */

START_TEST(test_index_key_is_projected_before_rotation)
{
    toy t;
    toy_make(&t, 709);
    const v41_config *c = &t.s.layers[5];
    const v41_weights *w = &t.w.layers[5];
    float *x = draw(T_TOY * 64, 710), *L = malloc(T_TOY * 32 * sizeof *L), *K = malloc(T_TOY * 16 * sizeof *K);
    double *Ld = malloc(T_TOY * 32 * sizeof *Ld), *want = malloc(T_TOY * 16 * sizeof *want);
    ck_assert_int_eq(v41_compressor_forward(L, &c->compressor, &w->compressor, x, T_TOY), KVL_OK);
    ck_assert_int_eq(v41_index_keys(K, &c->indexer, w->w_ik, w->ik_norm, L, T_TOY, 0), KVL_OK);
    compressor_oracle(Ld, &c->compressor, &w->compressor, x, T_TOY);
    for (size_t i = 0; i < T_TOY; i++) {   /* K^I_i = RMSNorm(W_IK L_i), then RoPE(·, iM) on its last Dr */
        mv_d(want + i * 16, w->w_ik, Ld + i * 32, 16, 32);
        rms_d(want + i * 16, want + i * 16, w->ik_norm, 16, c->indexer.norm_eps);
        rot_d(want + i * 16 + 16 - 8, &c->core.rope, (double)i, 1);
    }
    kvl_expect_close("index keys", K, want, T_TOY * 16, F32_ATOL, F32_RTOL, F32_COS);
    /* and the stack's forward stores exactly these keys: the Full layer's picks equal top-K of scores built
     * on them (checked through the decode test); here the rotated entry would give other keys */
    float *Z = malloc(T_TOY * 32 * sizeof *Z), *K2 = malloc(T_TOY * 16 * sizeof *K2);
    v41_main_entry(Z, c, L, T_TOY, 0);
    ck_assert_int_eq(v41_index_keys(K2, &c->indexer, w->w_ik, w->ik_norm, Z, T_TOY, 0), KVL_OK);
    double diff = 0;
    for (size_t i = 16; i < T_TOY * 16; i++) diff = fmax(diff, fabs(K2[i] - want[i]));
    ck_assert_msg(diff > 1e-3, "keys from the rotated entry should differ from t = 1 on (max diff %g)", diff);
    free(x); free(L); free(K); free(Ld); free(want); free(Z); free(K2);
    toy_free(&t);
}
END_TEST

/* ---- modes ------------------------------------------------------------------------------------------------ */

/* a chunk over the whole sequence x[T][d] for layer c: window rows from v4_kv */
static float *window_rows(const v41_config *c, const v41_weights *w, const float *x, size_t T)
{
    float *win = malloc(T * c->core.head_dim * sizeof *win);
    ck_assert_int_eq(v4_kv(win, &c->core, &w->core, x, T, 0), KVL_OK);
    return win;
}

START_TEST(test_reuse_matches_full_style_attention_over_source_entries_and_picks)
{
    toy t;
    toy_make(&t, 711);
    const v41_config *c = &t.s.layers[6];   /* Reuse of source 5 (M = 1) */
    const v41_weights *w = &t.w.layers[6];
    const size_t N = T_TOY, K = 3;
    float *x = draw(T_TOY * 64, 712), *entries = draw(N * 32, 713), *keys = draw(N * 16, 714);
    int32_t *sel = malloc(T_TOY * K * sizeof *sel);
    kvl_rng rng;
    kvl_rng_seed(&rng, 715);
    for (size_t i = 0; i < T_TOY; i++)   /* picks among the visible entries, some −1 */
        for (size_t k = 0; k < K; k++) {
            const size_t r = (size_t)(kvl_rng_random(&rng) * (double)(i + 2));
            sel[i * K + k] = r > i ? -1 : (int32_t)r;
        }
    float *win = window_rows(c, w, x, T_TOY), *out = malloc(T_TOY * 64 * sizeof *out);
    double *want = malloc(T_TOY * 64 * sizeof *want);
    const v41_source src = v41_source_f32(c, entries, keys, N);
    const v41_chunk ch = {.x = x, .S = T_TOY, .start = 0, .win = win, .win_first = 0};
    ck_assert_msg(v41_reuse_layer(out, c, w, &src, sel, &ch) == KVL_OK, "%s", kvl_error());
    layer_oracle(want, c, w, x, T_TOY, entries, sel, K);
    kvl_expect_close("Reuse layer", out, want, T_TOY * 64, F32_ATOL, F32_RTOL, F32_COS);
    free(x); free(entries); free(keys); free(sel); free(win); free(out); free(want);
    toy_free(&t);
}
END_TEST

/* index scores of a Reindex layer over keys[N][DI], in double: S^I_{t,i} for i < t + 1 (M = 1) */
static void scores_oracle(double *I, const v41_config *c, const v41_weights *w, const float *x, const float *keys,
                          size_t T, size_t N)
{
    const v4_config *k = &c->core;
    const size_t d = k->d, Dq = k->q_lora_rank, HI = c->indexer.n_heads, DI = c->indexer.head_dim;
    double *xd = malloc(d * sizeof *xd), *cq = malloc(Dq * sizeof *cq), *q = malloc(HI * DI * sizeof *q);
    double *wi = malloc(HI * sizeof *wi);
    for (size_t t = 0; t < T; t++) {
        for (size_t i = 0; i < d; i++) xd[i] = x[t * d + i];
        mv_d(cq, w->core.w_dq, xd, Dq, d);
        rms_d(cq, cq, w->core.q_norm, Dq, k->norm_eps);
        mv_d(q, w->w_iq, cq, HI * DI, Dq);
        for (size_t j = 0; j < HI; j++) rot_d(q + j * DI + DI - k->rope.Dr, &k->rope, (double)t, 1);
        mv_d(wi, w->w_iw, xd, HI, d);
        for (size_t i = 0; i < N; i++) {
            double s = 0;
            for (size_t j = 0; j < HI; j++) {
                double dot = 0;
                for (size_t ch = 0; ch < DI; ch++) dot += q[j * DI + ch] * keys[i * DI + ch];
                s += wi[j] / sqrt((double)(HI * DI)) * fmax(dot, 0);
            }
            I[t * N + i] = i < (t + 1) / c->ratio ? s : -INFINITY;
        }
    }
    free(xd); free(cq); free(q); free(wi);
}

START_TEST(test_reindex_matches_full_scan_when_pool_covers_every_block)
{
    toy t;
    toy_make(&t, 716);
    const v41_config *c = &t.s.layers[7];   /* Reindex of source 5 */
    const v41_weights *w = &t.w.layers[7];
    const size_t N = T_TOY, K = 3;
    float *x = draw(T_TOY * 64, 717), *entries = draw(N * 32, 718), *keys = draw(N * 16, 719);
    uint8_t *pool = malloc(T_TOY * N);
    float *Ic = draw(T_TOY * N, 720);   /* any candidate scores: with P·B ≥ N every block is kept */
    ck_assert_int_eq(v41_candidate_pool(pool, Ic, T_TOY, N, 0, 1, 4, (N + 3) / 4), KVL_OK);
    int32_t *sel = malloc(T_TOY * K * sizeof *sel), *sel_full = malloc(T_TOY * K * sizeof *sel_full);
    float *win = window_rows(c, w, x, T_TOY), *out = malloc(T_TOY * 64 * sizeof *out);
    float *out_full = malloc(T_TOY * 64 * sizeof *out_full);
    const v41_source src = v41_source_f32(c, entries, keys, N);
    const v41_chunk ch = {.x = x, .S = T_TOY, .start = 0, .win = win, .win_first = 0};
    uint64_t scored_pool = 0, scored_full = 0;
    ck_assert_int_eq(v41_reindex_layer(out, sel, &scored_pool, c, w, &src, pool, &ch), KVL_OK);
    ck_assert_int_eq(v41_reindex_layer(out_full, sel_full, &scored_full, c, w, &src, NULL, &ch), KVL_OK);
    /* the full scan's picks are the top-K of the double scores */
    double *I = malloc(T_TOY * N * sizeof *I);
    scores_oracle(I, c, w, x, keys, T_TOY, N);
    for (size_t i = 0; i < T_TOY; i++) {
        for (size_t k = 0; k < K; k++) {
            ck_assert_int_eq(sel[i * K + k], sel_full[i * K + k]);
            const int32_t e = sel_full[i * K + k];
            if (e < 0) { ck_assert_uint_le(i + 1, k); continue; }   /* −1 only when fewer than K are visible */
            size_t above = 0;   /* no unpicked visible entry scores above a picked one */
            for (size_t j = 0; j <= i; j++) above += I[i * N + j] > I[i * N + (size_t)e] + 1e-5;
            ck_assert_uint_lt(above, K);
        }
    }
    ck_assert_uint_eq(scored_pool, scored_full);
    ck_assert_uint_eq(scored_full, (uint64_t)T_TOY * (T_TOY + 1) / 2);
    double *want = malloc(T_TOY * 64 * sizeof *want);
    layer_oracle(want, c, w, x, T_TOY, entries, sel_full, K);
    kvl_expect_close("Reindex over a covering pool", out, want, T_TOY * 64, F32_ATOL, F32_RTOL, F32_COS);
    free(x); free(entries); free(keys); free(pool); free(Ic); free(sel); free(sel_full); free(win); free(out);
    free(out_full); free(I); free(want);
    toy_free(&t);
}
END_TEST

START_TEST(test_reindex_with_source_indexer_weights_and_covering_pool_reproduces_source_selection)
{
    /* Property 13, module level: same x, same entries and keys, layer 7 given layer 5's query latent and indexer
     * weights, a pool holding every block: Reindex picks what the Full layer picked. */
    toy t;
    toy_make(&t, 726);
    const v41_config *cf = &t.s.layers[5], *cr = &t.s.layers[7];
    v41_weights *wf = &t.w.layers[5], *wr = &t.w.layers[7];
    memcpy(wr->core.w_dq, wf->core.w_dq, 32 * 64 * sizeof(float));
    memcpy(wr->core.q_norm, wf->core.q_norm, 32 * sizeof(float));
    memcpy(wr->w_iq, wf->w_iq, 4 * 16 * 32 * sizeof(float));
    memcpy(wr->w_iw, wf->w_iw, 4 * 64 * sizeof(float));
    const size_t N = T_TOY, K = 3;
    float *x = draw(T_TOY * 64, 727), *entries = draw(N * 32, 728), *keys = draw(N * 16, 729);
    float *I = malloc(T_TOY * N * sizeof *I), *out = malloc(T_TOY * 64 * sizeof *out);
    uint8_t *pool = malloc(T_TOY * N);
    int32_t *sel_f = malloc(T_TOY * K * sizeof *sel_f), *sel_r = malloc(T_TOY * K * sizeof *sel_r);
    float *win = window_rows(cf, wf, x, T_TOY);
    const v41_source src = v41_source_f32(cf, entries, keys, N);
    const v41_chunk ch = {.x = x, .S = T_TOY, .start = 0, .win = win, .win_first = 0};
    uint64_t scored = 0;
    ck_assert_int_eq(v41_full_layer(out, sel_f, I, &scored, cf, wf, &src, &ch), KVL_OK);
    ck_assert_int_eq(v41_candidate_pool(pool, I, T_TOY, N, 0, 1, 4, (N + 3) / 4), KVL_OK);
    ck_assert_int_eq(v41_reindex_layer(out, sel_r, &scored, cr, wr, &src, pool, &ch), KVL_OK);
    for (size_t i = 0; i < T_TOY * K; i++) ck_assert_int_eq(sel_r[i], sel_f[i]);
    free(x); free(entries); free(keys); free(I); free(out); free(pool); free(sel_f); free(sel_r); free(win);
    toy_free(&t);
}
END_TEST

START_TEST(test_small_pool_keeps_newest_block_and_reindex_picks_only_pool_positions)
{
    toy t;
    toy_make(&t, 721);
    const v41_config *c = &t.s.layers[9];
    const v41_weights *w = &t.w.layers[9];
    const size_t N = T_TOY, K = 3, B = 4, P = 2;
    float *x = draw(T_TOY * 64, 722), *entries = draw(N * 32, 723), *keys = draw(N * 16, 724);
    float *Ic = draw(T_TOY * N, 725);
    for (size_t i = 0; i < T_TOY; i++)
        for (size_t j = i + 1; j < N; j++) Ic[i * N + j] = -INFINITY;
    uint8_t *pool = malloc(T_TOY * N);
    ck_assert_int_eq(v41_candidate_pool(pool, Ic, T_TOY, N, 0, 1, B, P), KVL_OK);
    for (size_t i = 0; i < T_TOY; i++) {
        const size_t n_t = i + 1, nb = (n_t + B - 1) / B, newest = (n_t - 1) / B;
        /* oracle: the newest block, then the best other block by its maximum (smaller block on ties) */
        size_t best = SIZE_MAX;
        double best_s = -INFINITY;
        for (size_t b = 0; b < nb; b++) {
            if (b == newest) continue;
            double m = -INFINITY;
            for (size_t j = b * B; j < (b + 1) * B && j < n_t; j++) m = fmax(m, Ic[i * N + j]);
            if (m > best_s) { best_s = m; best = b; }
        }
        size_t in = 0;
        for (size_t j = 0; j < N; j++) {
            const size_t b = j / B;
            const int want_in = j < n_t && (b == newest || b == best);
            ck_assert_msg(pool[i * N + j] == want_in, "query %zu entry %zu: pool %d, want %d", i, j, pool[i * N + j], want_in);
            in += pool[i * N + j];
        }
        ck_assert_uint_le(in, P * B);
    }
    int32_t *sel = malloc(T_TOY * K * sizeof *sel);
    float *win = window_rows(c, w, x, T_TOY), *out = malloc(T_TOY * 64 * sizeof *out);
    const v41_source src = v41_source_f32(c, entries, keys, N);
    const v41_chunk ch = {.x = x, .S = T_TOY, .start = 0, .win = win, .win_first = 0};
    uint64_t scored = 0, pooled = 0;
    ck_assert_int_eq(v41_reindex_layer(out, sel, &scored, c, w, &src, pool, &ch), KVL_OK);
    for (size_t i = 0; i < T_TOY * N; i++) pooled += pool[i];
    ck_assert_uint_eq(scored, pooled);   /* the work is the pool, not the context */
    for (size_t i = 0; i < T_TOY; i++)
        for (size_t k = 0; k < K; k++)
            if (sel[i * K + k] >= 0) ck_assert(pool[i * N + (size_t)sel[i * K + k]]);
    free(x); free(entries); free(keys); free(Ic); free(pool); free(sel); free(win); free(out);
    toy_free(&t);
}
END_TEST

/* A pool that is a sliver of a context past a million-entry scale's split: scattered blocks of 8, single
 * entries, the first and the last (in a partial word of the list). Each pool entry scores as the full
 * scan scores it, every other entry is exactly −∞, and the work counted is the pool's, on 1 and 2 threads. */
START_TEST(test_pool_scores_equal_the_full_scan_on_the_pool_and_minus_inf_elsewhere)
{
    toy t;
    toy_make(&t, 741);
    const v41_indexer_config *c = &t.s.layers[9].indexer;
    const size_t N = 300007, HI = c->n_heads, DI = c->head_dim;
    float *q = draw(HI * DI, 742), *w = draw(HI, 743), *keys = draw(N * DI, 744);
    float *all = malloc(N * sizeof *all), *got = malloc(N * sizeof *got), *want = malloc(N * sizeof *want);
    double *want_d = malloc(N * sizeof *want_d);
    uint8_t *pool = calloc(N, 1);
    ck_assert(all && got && want && want_d && pool);
    kvl_rng rng;
    kvl_rng_seed(&rng, 745);
    for (size_t b = 0; b < 500; b++) memset(pool + kvl_rng_next_u64(&rng) % (N - 8), 1, 8);
    for (size_t i = 0; i < 300; i++) pool[kvl_rng_next_u64(&rng) % N] = 1;
    pool[0] = pool[N - 1] = 1;
    const kvl_row_tiles view = kvl_row_tiles_f32(keys, N, DI);
    uint64_t scored_all = 0;
    ck_assert_msg(v41_index_scores_all(all, &scored_all, c, q, w, &view, 1, N * c->ratio - 1) == KVL_OK, "%s",
                  kvl_error());
    ck_assert_uint_eq(scored_all, N);
    const int threads = kvl_threads();
    for (int th = 1; th <= 2; th++) {
        kvl_set_threads(th);
        uint64_t scored = 0, pooled = 0;
        ck_assert_msg(v41_index_scores_pool(got, &scored, c, q, w, &view, pool, 1) == KVL_OK, "%s", kvl_error());
        size_t n = 0;
        for (size_t i = 0; i < N; i++) {
            pooled += pool[i];
            if (!pool[i]) ck_assert_msg(got[i] == -INFINITY, "entry %zu outside the pool scored %g", i, (double)got[i]);
            else {
                want[n] = got[i];
                want_d[n++] = all[i];
            }
        }
        ck_assert_uint_eq(scored, pooled);
        ck_assert_uint_gt(pooled, 3000);
        kvl_expect_close("pool scores against the full scan", want, want_d, n, F32_ATOL, F32_RTOL, F32_COS);
    }
    kvl_set_threads(threads);
    free(q); free(w); free(keys); free(all); free(got); free(want); free(want_d); free(pool);
    toy_free(&t);
}
END_TEST

/* ---- cache vs definition for every mode --------------------------------------------------------------------- */

static void decode_vs_forward(const size_t *cuts, size_t n_cuts)
{
    toy t;
    toy_make(&t, 731);
    const size_t L = t.s.n_layers, K = 3, d = 64;
    float *x = draw(T_TOY * d, 732), *want = malloc(T_TOY * d * sizeof *want), *got = malloc(T_TOY * d * sizeof *got);
    int32_t *sel_f = malloc(L * T_TOY * K * sizeof *sel_f), *sel_c = malloc(L * T_TOY * K * sizeof *sel_c);
    int32_t *sel_chunk = malloc(L * T_TOY * K * sizeof *sel_chunk);
    ck_assert_msg(v41_stack_forward(want, sel_f, NULL, &t.s, &t.w, x, T_TOY) == KVL_OK, "%s", kvl_error());
    v41_cache cache;
    ck_assert_int_eq(v41_cache_init(&cache, &t.s, T_TOY, V41_CACHE_F32), KVL_OK);
    size_t pos = 0;
    for (size_t k = 0; k < n_cuts; k++) {
        ck_assert_msg(v41_stack_prefill(got + pos * d, sel_chunk, &t.s, &t.w, &cache, x + pos * d, cuts[k]) == KVL_OK,
                      "%s", kvl_error());
        for (size_t l = 0; l < L; l++)
            memcpy(sel_c + (l * T_TOY + pos) * K, sel_chunk + l * cuts[k] * K, cuts[k] * K * sizeof *sel_c);
        pos += cuts[k];
    }
    ck_assert_uint_eq(pos, T_TOY);
    double *wd = malloc(T_TOY * d * sizeof *wd);
    for (size_t i = 0; i < T_TOY * d; i++) wd[i] = want[i];
    kvl_expect_close("stack prefill/decode vs forward", got, wd, T_TOY * d, L * PATH_ATOL, PATH_RTOL, F32_COS);
    const int sources[] = {2, 5, 7, 9};
    for (size_t s = 0; s < 4; s++)
        for (size_t i = 0; i < T_TOY * K; i++)
            ck_assert_int_eq(sel_c[sources[s] * T_TOY * K + i], sel_f[sources[s] * T_TOY * K + i]);
    v41_cache_free(&cache);
    free(x); free(want); free(got); free(sel_f); free(sel_c); free(sel_chunk); free(wd);
    toy_free(&t);
}

START_TEST(test_decode_matches_forward_for_every_mode_token_by_token)
{
    size_t cuts[T_TOY];
    for (size_t i = 0; i < T_TOY; i++) cuts[i] = 1;
    decode_vs_forward(cuts, T_TOY);
}
END_TEST

START_TEST(test_prefill_matches_forward_for_every_mode_in_ragged_chunks)
{
    const size_t cuts[] = {3, 1, 8, 5, 11, 2, 15};
    decode_vs_forward(cuts, sizeof cuts / sizeof cuts[0]);
}
END_TEST

START_TEST(test_stack_reuse_layer_matches_oracle_over_its_sources_picks)
{
    /* Inside the stack, layer 8 (Reuse) reads source 5's entries and layer 7's top-k: rebuild its input and
     * check its output against the definition with those picks. */
    toy t;
    toy_make(&t, 741);
    const size_t L = t.s.n_layers, K = 3, d = 64;
    float *x = draw(T_TOY * d, 742);
    int32_t *sel = malloc(L * T_TOY * K * sizeof *sel);
    /* run layers 0 … 7 to get layer 8's input, via a stack truncated to 8 layers */
    v41_stack_config s8 = t.s;
    s8.n_layers = 8;
    v41_stack_weights w8 = t.w;
    w8.n_layers = 8;
    float *h8 = malloc(T_TOY * d * sizeof *h8), *h9 = malloc(T_TOY * d * sizeof *h9);
    ck_assert_int_eq(v41_stack_forward(h8, sel, NULL, &s8, &w8, x, T_TOY), KVL_OK);
    s8.n_layers = 9;
    w8.n_layers = 9;
    ck_assert_int_eq(v41_stack_forward(h9, sel, NULL, &s8, &w8, x, T_TOY), KVL_OK);
    /* the source's entries: layer 5's input from a 5-layer run */
    s8.n_layers = 5;
    w8.n_layers = 5;
    float *h5 = malloc(T_TOY * d * sizeof *h5), *n5 = malloc(T_TOY * d * sizeof *n5), *Lat = malloc(T_TOY * 32 * sizeof *Lat);
    float *Z = malloc(T_TOY * 32 * sizeof *Z), *n8 = malloc(T_TOY * d * sizeof *n8);
    ck_assert_int_eq(v41_stack_forward(h5, NULL, NULL, &s8, &w8, x, T_TOY), KVL_OK);
    kvl_rmsnorm_f32(n5, h5, t.w.attn_norm + 5 * d, T_TOY, d, t.s.norm_eps);
    ck_assert_int_eq(v41_compressor_forward(Lat, &t.s.layers[5].compressor, &t.w.layers[5].compressor, n5, T_TOY), KVL_OK);
    v41_main_entry(Z, &t.s.layers[5], Lat, T_TOY, 0);
    kvl_rmsnorm_f32(n8, h8, t.w.attn_norm + 8 * d, T_TOY, d, t.s.norm_eps);
    double *want = malloc(T_TOY * d * sizeof *want);
    layer_oracle(want, &t.s.layers[8], &t.w.layers[8], n8, T_TOY, Z, sel + 7 * T_TOY * K, K);
    for (size_t i = 0; i < T_TOY * d; i++) h9[i] -= h8[i];   /* layer 8's attention output */
    kvl_expect_close("stack Reuse layer 8", h9, want, T_TOY * d, F32_ATOL, F32_RTOL, F32_COS);
    free(x); free(sel); free(h8); free(h9); free(h5); free(n5); free(Lat); free(Z); free(n8); free(want);
    toy_free(&t);
}
END_TEST

/* V4.1-Flash's rotary tables from its config: the ratio-0 layers (0, 1, 40-42) rotate at rope_theta 1e4,
 * every layer with a compressor (Full, Reindex, Reuse) at compress_rope_theta 1.6e5 with YaRN (rope_factor
 * 16, original_seq_len 65536, beta_fast 32, beta_slow 1), and the indexer with the layer's table. */
START_TEST(test_flash_rotary_is_plain_on_window_layers_and_compress_yarn_elsewhere)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4.1-flash.json")) == KVL_OK, "%s", kvl_error());
    for (size_t i = 0; i < m.n_layers; i++) {
        v41_config c;
        ck_assert_msg(v41_config_from_model(&c, &m, i) == KVL_OK, "%s", kvl_error());
        const int window = i < 2 || i >= 40;
        kvl_rope want;
        const int rc = window ? kvl_rope_init(&want, 64, 1e4) : kvl_rope_init_yarn(&want, 64, 1.6e5, 16, 65536, 32, 1);
        ck_assert_int_eq(rc, KVL_OK);
        ck_assert_int_eq(c.kind == KVL_LAYER_WINDOW, window);
        ck_assert_uint_eq(c.core.rope.Dr, 64);
        ck_assert_mem_eq(c.core.rope.theta, want.theta, 32 * sizeof(float));
        ck_assert_mem_eq(c.indexer.rope.theta, c.core.rope.theta, 32 * sizeof(float));
    }
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_config_rejects_a_v4_model)
{
    kvl_model m;
    ck_assert_int_eq(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4-flash.json")), KVL_OK);
    v41_stack_config s;
    ck_assert_int_eq(v41_stack_config_from_model(&s, &m), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "not V4.1"));
    kvl_model_free(&m);
}
END_TEST

/* nb_07's candidate pool, the indexers' scores per query at 1M and the FP4 cache's headroom, from
 * V4.1-Flash's config: the pool is blocks × block size; a Full layer of ratio M scans ⌊T/M⌋ entries
 * and a Reindex layer at most the pool; ‖RMSNorm(v)‖ = √Dh against E4M3's 448 × E2M1's 6. */
START_TEST(test_notebook_prices_the_pool_and_the_fp4_bound_by_the_definition)
{
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v4.1-flash.json")) == KVL_OK, "%s", kvl_error());
    const double pool = (double)m.candidate_topk_blocks * (double)m.candidate_block_size, T = 1048576;
    double scans = 0, reindex = 0;
    for (size_t l = 0; l < m.n_layers; l++) {
        if (m.layers[l].kind == KVL_LAYER_FULL) scans += floor(T / (double)m.layers[l].compress_ratio);
        if (m.layers[l].kind == KVL_LAYER_REINDEX) reindex += fmin(T, pool);
    }
    const double bound = sqrt((double)m.head_dim);
    char a[200], b[200], c[200];
    snprintf(a, sizeof a, "top %s blocks of %s = %s positions", KVL_GROUPED(m.candidate_topk_blocks),
             KVL_GROUPED(m.candidate_block_size), KVL_GROUPED(pool));
    snprintf(b, sizeof b, "T 1,048,576: Full scans %s + Reindex %s = %s scores per query", KVL_GROUPED(scans),
             KVL_GROUPED(reindex), KVL_GROUPED(scans + reindex));
    snprintf(c, sizeof c, "sqrt(%zu) = %.3f; format range 448 x 6 = 2,688, headroom %.0fx", m.head_dim, bound,
             448.0 * 6 / bound);
    kvl_model_free(&m);
    const char *const want[] = {a, b, c};
    kvl_expect_prints("nb_07", want, 3, "candidate pool");
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch07_v41");
    TCase *tc = tcase_create("v41");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_compressor_ratio1_gives_normalised_projection);
    tcase_add_test(tc, test_notebook_prices_the_pool_and_the_fp4_bound_by_the_definition);
    tcase_add_test(tc, test_compressor_ratio2_with_equal_gates_gives_normalised_mean);
    tcase_add_test(tc, test_compressor_matches_softmax_gate_definition_at_ratio2);
    tcase_add_test(tc, test_compressor_push_matches_forward_when_fed_in_ragged_chunks);
    tcase_add_test(tc, test_index_key_is_projected_before_rotation);
    tcase_add_test(tc, test_reuse_matches_full_style_attention_over_source_entries_and_picks);
    tcase_add_test(tc, test_reindex_matches_full_scan_when_pool_covers_every_block);
    tcase_add_test(tc, test_reindex_with_source_indexer_weights_and_covering_pool_reproduces_source_selection);
    tcase_add_test(tc, test_small_pool_keeps_newest_block_and_reindex_picks_only_pool_positions);
    tcase_add_test(tc, test_pool_scores_equal_the_full_scan_on_the_pool_and_minus_inf_elsewhere);
    tcase_add_test(tc, test_decode_matches_forward_for_every_mode_token_by_token);
    tcase_add_test(tc, test_prefill_matches_forward_for_every_mode_in_ragged_chunks);
    tcase_add_test(tc, test_stack_reuse_layer_matches_oracle_over_its_sources_picks);
    tcase_add_test(tc, test_config_rejects_a_v4_model);
    tcase_add_test(tc, test_flash_rotary_is_plain_on_window_layers_and_compress_yarn_elsewhere);
    suite_add_tcase(s, tc);
    return s;
}
