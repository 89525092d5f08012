/* The DeepSeek-V4 layer of ref/v4.h (chapter 6) in plain loops and double precision: the oracles the
 * chapter 6 suites compare ref/v4 with. Nothing here calls ref/: weights and inputs are read from the
 * module's structs as given (float, widened exactly), the RoPE angle is formed from the frequency table,
 * the compressor's slots, the causal threshold, the sink softmax, the top-k (a full sort) and the grouped
 * output are written out again from their definitions.
 *
 * Shapes: x[T][d]; entries[N][c]; q[T][H][Dh]; rows[T][Dh]; I[T][N]; sel[T][K]; out[T][d]. */
#ifndef KVL_TESTS_ORACLE_V4_H
#define KVL_TESTS_ORACLE_V4_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "oracle_attention.h"
#include "v4.h"

/* Tolerance of a float32 V4 path against this oracle: oracle_f32_tol over the sums one output passes
 * through (oracle_attention.h): projections d and Dq', the query head Dh, scores Dh, the weighted keys
 * W + N_max, the compressor's slots (1+ov)·M and its entry c, the index scores HI·DI, and the output
 * (H/G)·Dh + G·Do. */
static inline double oracle_v4_tol(const v4_config *c, size_t n_max)
{
    size_t n = c->d + c->q_lora_rank + 3 * c->head_dim + c->window + n_max + c->n_heads / c->o_groups * c->head_dim +
               c->o_groups * c->o_lora_rank;
    if (c->kind != KVL_LAYER_WINDOW) n += (1 + c->compressor.overlap) * c->compressor.ratio + c->head_dim;
    if (c->kind == KVL_LAYER_CSA) n += c->indexer.n_heads * c->indexer.head_dim;
    return oracle_f32_tol(n);
}

/* Interleaved rotation of v[Dr] by angle p·θ_i (p may be negative: the inverse). */
static inline void oracle_v4_rope(double *v, size_t Dr, const float *theta, double p)
{
    for (size_t i = 0; i < Dr / 2; i++) {
        const double a = v[2 * i], b = v[2 * i + 1], ang = p * (double)theta[i];
        v[2 * i] = a * cos(ang) - b * sin(ang);
        v[2 * i + 1] = a * sin(ang) + b * cos(ang);
    }
}

/* y[n] = v / sqrt(mean(v²) + ε), no gain */
static inline void oracle_v4_unit_rms(double *y, const double *v, size_t n, double eps)
{
    double ms = 0;
    for (size_t i = 0; i < n; i++) ms += v[i] * v[i];
    const double r = 1.0 / sqrt(ms / (double)n + eps);
    for (size_t i = 0; i < n; i++) y[i] = v[i] * r;
}

/* entries[⌊T/M⌋][c]: the compressor of ref/v4_compressor.h on x[T][d]. Entry i pools block i through the LAST c channels
 * and (overlap) block i − 1 through the FIRST c channels, one softmax per channel over all slots, then
 * RMSNorm with gain and the trailing Dr channels rotated at iM + offset. */
static inline void oracle_v4_compress(double *entries, const v4_compressor_config *k, const v4_compressor_weights *w,
                                      const double *x, size_t T, int64_t offset)
{
    const size_t c = k->width, M = k->ratio, ov = k->overlap, wide = (1 + ov) * c, d = k->d, N = T / M;
    double *a = oracle_alloc((T + 1) * wide * sizeof *a), *z = oracle_alloc((T + 1) * wide * sizeof *z);
    double *e = oracle_alloc(c * sizeof *e);
    for (size_t t = 0; t < T; t++) {
        oracle_matvec(a + t * wide, w->w_kv, x + t * d, wide, d);
        oracle_matvec(z + t * wide, w->w_gate, x + t * d, wide, d);
        for (size_t ch = 0; ch < wide; ch++) z[t * wide + ch] += (double)w->ape[(t % M) * wide + ch];
    }
    for (size_t i = 0; i < N; i++) {
        for (size_t ch = 0; ch < c; ch++) {
            /* slots: (token, channel) pairs, previous block first when there is one */
            double mx = -INFINITY, den = 0, num = 0;
            for (size_t pass = 0; pass < 2; pass++)
                for (size_t s = 0; s < (1 + ov) * M; s++) {
                    const int prev = ov && s < M;
                    if (prev && i == 0) continue;
                    const size_t tok = prev ? (i - 1) * M + s : i * M + (s - ov * M);
                    const size_t col = (ov && !prev ? c : 0) + ch;
                    const double zz = z[tok * wide + col];
                    if (pass == 0) mx = fmax(mx, zz);
                    else {
                        den += exp(zz - mx);
                        num += exp(zz - mx) * a[tok * wide + col];
                    }
                }
            e[ch] = num / den;
        }
        oracle_rmsnorm(entries + i * c, e, w->norm, c, k->norm_eps);
        oracle_v4_rope(entries + i * c + c - k->rope.Dr, k->rope.Dr, k->rope.theta, (double)(i * M) + (double)offset);
    }
    free(a); free(z); free(e);
}

/* The per-token pieces of the layer: cq[T][Dq'], q[T][H][Dh], rows[T][Dh] (window rows), rotated at t + offset. */
static inline void oracle_v4_tokens(double *cq, double *q, double *rows, const v4_config *c, const v4_weights *w,
                                    const double *x, size_t T)
{
    const size_t d = c->d, H = c->n_heads, Dh = c->head_dim, Dq = c->q_lora_rank, Dr = c->rope.Dr;
    double *u = oracle_alloc((Dq > Dh ? Dq : Dh) * sizeof *u);
    for (size_t t = 0; t < T; t++) {
        const double pos = (double)t + (double)c->rope_offset;
        oracle_matvec(u, w->w_dq, x + t * d, Dq, d);
        oracle_rmsnorm(cq + t * Dq, u, w->q_norm, Dq, c->norm_eps);
        oracle_matvec(q + t * H * Dh, w->w_uq, cq + t * Dq, H * Dh, Dq);
        for (size_t h = 0; h < H; h++) {
            double *qh = q + (t * H + h) * Dh;
            oracle_v4_unit_rms(qh, qh, Dh, c->norm_eps);
            oracle_v4_rope(qh + Dh - Dr, Dr, c->rope.theta, pos);
        }
        oracle_matvec(u, w->w_kv, x + t * d, Dh, d);
        oracle_rmsnorm(rows + t * Dh, u, w->kv_norm, Dh, c->norm_eps);
        oracle_v4_rope(rows + t * Dh + Dh - Dr, Dr, c->rope.theta, pos);
    }
    free(u);
}

/* I[T][N] = Σ_j w_j·ReLU(q^I_j·K^I_i) for i < ⌊(t+1)/M⌋, −∞ otherwise, w with HI^−½·DI^−½; keys[N][DI].
 * *kink (NULL: not wanted) = the smallest |q^I_j·K^I_i| of a legal pair: how far every ReLU argument is
 * from the kink where float rounding could flip it. */
static inline void oracle_v4_index_scores(double *I, double *keys, double *kink, const v4_config *c,
                                          const v4_weights *w, const double *x, const double *cq, size_t T)
{
    const v4_indexer_config *ix = &c->indexer;
    const size_t d = c->d, Dq = c->q_lora_rank, HI = ix->n_heads, DI = ix->head_dim, Dr = c->rope.Dr;
    const size_t M = ix->compressor.ratio, N = T / M;
    oracle_v4_compress(keys, &ix->compressor, &w->indexer.compressor, x, T, c->rope_offset);
    double *qi = oracle_alloc(HI * DI * sizeof *qi), *wi = oracle_alloc(HI * sizeof *wi), k_min = INFINITY;
    for (size_t t = 0; t < T; t++) {
        oracle_matvec(qi, w->indexer.w_iq, cq + t * Dq, HI * DI, Dq);
        for (size_t j = 0; j < HI; j++)
            oracle_v4_rope(qi + j * DI + DI - Dr, Dr, c->rope.theta, (double)t + (double)c->rope_offset);
        oracle_matvec(wi, w->indexer.w_iw, x + t * d, HI, d);
        for (size_t i = 0; i < N; i++) {
            if ((i + 1) * M - 1 > t) {
                I[t * N + i] = -INFINITY;
                continue;
            }
            double acc = 0;
            for (size_t j = 0; j < HI; j++) {
                double s = 0;
                for (size_t k = 0; k < DI; k++) s += qi[j * DI + k] * keys[i * DI + k];
                k_min = fmin(k_min, fabs(s));
                acc += wi[j] / (sqrt((double)HI) * sqrt((double)DI)) * (s > 0 ? s : 0);
            }
            I[t * N + i] = acc;
        }
    }
    if (kink) *kink = k_min;
    free(qi); free(wi);
}

/* sel[T][K]: each row's K largest finite scores of I[T][N] (larger first, smaller index on ties) by a full
 * selection sort, stored ascending, −1 padding. *margin = the smallest gap between the K-th pick and a
 * different score left out (+∞ when there is none); exact ties (scores of 0, every ReLU closed) are broken
 * by index on both sides. A float path agrees with the sort when the margin and the kink are wide. */
static inline void oracle_v4_topk(int32_t *sel, double *margin, const double *I, size_t T, size_t N, size_t K)
{
    char *taken = oracle_alloc(N + 1);
    *margin = INFINITY;
    for (size_t t = 0; t < T; t++) {
        memset(taken, 0, N + 1);
        size_t n = 0;
        double last = INFINITY;
        for (; n < K; n++) {
            size_t best = N;
            for (size_t i = 0; i < N; i++)
                if (!taken[i] && isfinite(I[t * N + i]) && (best == N || I[t * N + i] > I[t * N + best])) best = i;
            if (best == N) break;
            taken[best] = 1;
            last = I[t * N + best];
        }
        for (size_t i = 0; i < N; i++)
            if (!taken[i] && isfinite(I[t * N + i]) && I[t * N + i] != last && last - I[t * N + i] < *margin)
                *margin = last - I[t * N + i];
        size_t m = 0;
        for (size_t i = 0; i < N; i++)
            if (taken[i]) sel[t * K + m++] = (int32_t)i;
        for (; m < K; m++) sel[t * K + m] = -1;
    }
    free(taken);
}

/* out[T][d] = the layer on x[T][d]. The compressed rows query t reads: none (window-only), every entry
 * i < ⌊(t+1)/M⌋ when sel is NULL (HCA, or CSA "with K ≥ entries"), else the picks sel[t][·]. */
static inline void oracle_v4_layer(double *out, const v4_config *c, const v4_weights *w, const double *x, size_t T,
                                   const int32_t *sel)
{
    const size_t d = c->d, H = c->n_heads, Dh = c->head_dim, Dq = c->q_lora_rank, Dr = c->rope.Dr, W = c->window;
    const size_t G = c->o_groups, Do = c->o_lora_rank, gw = H / G * Dh;
    const size_t M = c->kind == KVL_LAYER_WINDOW ? 0 : c->compressor.ratio, N = M ? T / M : 0;
    const size_t K = c->kind == KVL_LAYER_CSA ? c->indexer.topk : 0;
    double *cq = oracle_alloc(T * Dq * sizeof *cq), *q = oracle_alloc(T * H * Dh * sizeof *q);
    double *rows = oracle_alloc(T * Dh * sizeof *rows), *ent = oracle_alloc((N + 1) * Dh * sizeof *ent);
    double *s = oracle_alloc((W + N + K + 1) * sizeof *s), *o = oracle_alloc(H * Dh * sizeof *o);
    double *u = oracle_alloc(G * Do * sizeof *u);
    const double **keys = oracle_alloc((W + N + K + 1) * sizeof *keys);
    oracle_v4_tokens(cq, q, rows, c, w, x, T);
    if (M) oracle_v4_compress(ent, &c->compressor, &w->compressor, x, T, c->rope_offset);
    for (size_t t = 0; t < T; t++) {
        size_t n = 0;
        for (size_t j = 0; j <= t; j++)
            if (j + W > t) keys[n++] = rows + j * Dh;
        if (M && !sel)
            for (size_t i = 0; (i + 1) * M - 1 <= t && i < N; i++) keys[n++] = ent + i * Dh;
        if (M && sel)
            for (size_t k = 0; k < K; k++)
                if (sel[t * K + k] >= 0) keys[n++] = ent + (size_t)sel[t * K + k] * Dh;
        for (size_t h = 0; h < H; h++) {
            const double *qh = q + (t * H + h) * Dh, sigma = w->sinks[h];
            double mx = sigma, den = 0;
            for (size_t i = 0; i < n; i++) {
                double acc = 0;
                for (size_t k = 0; k < Dh; k++) acc += qh[k] * keys[i][k];
                s[i] = acc / sqrt((double)Dh);
                mx = fmax(mx, s[i]);
            }
            den = exp(sigma - mx);
            for (size_t i = 0; i < n; i++) den += exp(s[i] - mx);
            for (size_t k = 0; k < Dh; k++) {
                double acc = 0;
                for (size_t i = 0; i < n; i++) acc += exp(s[i] - mx) / den * keys[i][k];
                o[h * Dh + k] = acc;
            }
            oracle_v4_rope(o + h * Dh + Dh - Dr, Dr, c->rope.theta, -((double)t + (double)c->rope_offset));
        }
        for (size_t r = 0; r < G; r++)
            for (size_t m = 0; m < Do; m++) {
                double acc = 0;
                for (size_t k = 0; k < gw; k++) acc += (double)w->w_oa[(r * Do + m) * gw + k] * o[r * gw + k];
                u[r * Do + m] = acc;
            }
        oracle_matvec(out + t * d, w->w_ob, u, d, G * Do);
    }
    free(cq); free(q); free(rows); free(ent); free(s); free(o); free(u); free(keys);
}

/* sel[T][K], *margin and *kink (oracle_v4_topk, oracle_v4_index_scores): the CSA picks of the double
 * indexer on x[T][d]. */
static inline void oracle_v4_picks(int32_t *sel, double *margin, double *kink, const v4_config *c,
                                   const v4_weights *w, const double *x, size_t T)
{
    const size_t N = T / c->indexer.compressor.ratio, H = c->n_heads, Dh = c->head_dim;
    double *cq = oracle_alloc(T * c->q_lora_rank * sizeof *cq), *q = oracle_alloc(T * H * Dh * sizeof *q);
    double *rows = oracle_alloc(T * Dh * sizeof *rows), *I = oracle_alloc((T * N + 1) * sizeof *I);
    double *keys = oracle_alloc((N + 1) * c->indexer.head_dim * sizeof *keys);
    oracle_v4_tokens(cq, q, rows, c, w, x, T);
    oracle_v4_index_scores(I, keys, kink, c, w, x, cq, T);
    oracle_v4_topk(sel, margin, I, T, N, c->indexer.topk);
    free(cq); free(q); free(rows); free(I); free(keys);
}

/* Values of compressed entries the queries of m's V4 layers read over T tokens prefilled in chunks
 * of C, with HI index heads, query by query from the layers' definitions: a CSA query t scores every
 * index key its chunk (ending at e) has made, ⌊e/M⌋ of HI·index_head_dim values, and reads its
 * min(index_topk, ⌊(t+1)/M⌋) picks; an HCA query reads all ⌊(t+1)/M⌋ entries; an entry holds
 * head_dim values. The work bound of the programs that run V4 stacks. */
static inline double oracle_v4_entry_values(const kvl_model *m, size_t T, size_t C, size_t HI)
{
    double v = 0;
    for (size_t t = 0; t < T; t++) {
        const size_t e = (t / C + 1) * C < T ? (t / C + 1) * C : T;
        for (size_t l = 0; l < m->n_layers; l++) {
            const size_t M = m->layers[l].compress_ratio, seen = M ? (t + 1) / M : 0;
            const size_t picks = seen < m->index_topk ? seen : m->index_topk;
            if (m->layers[l].kind == KVL_LAYER_CSA)
                v += (double)(e / M) * (double)(HI * m->index_head_dim) + (double)picks * (double)m->head_dim;
            if (m->layers[l].kind == KVL_LAYER_HCA) v += (double)seen * (double)m->head_dim;
        }
    }
    return v;
}

#endif
