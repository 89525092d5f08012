/* The definitions of chapters 1 (MHA/GQA/MQA), 2 (MLA, naive form) and 3 (windows) in plain loops and double
 * precision: the oracles the chapter 1 and 3 suites compare the float32 modules with, and the
 * tolerance those comparisons allow. Nothing here calls ref/: weights and
 * inputs are read as given (float, widened exactly), the RoPE angle p·θ_i is formed from the
 * frequency table, and the window rule is written out again (t − W < j ≤ t).
 *
 * Shapes: x[T][d], weights [out][in] as in ref/mha.h and ref/mla.h, out[T][d]. */
#ifndef KVL_TESTS_ORACLE_ATTENTION_H
#define KVL_TESTS_ORACLE_ATTENTION_H

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

/* Tolerance of a float32 path against the double definition. A float32 sum of n terms errs by at most
 * γ_n·Σ|terms| ≈ n·u·Σ|terms| (Higham; u = FLT_EPSILON/2). One attention output passes through sums
 * of d (projections), Dh (scores), at most T (weighted values) and H·Dh (output) terms; n_path is
 * their total. In the toys every Σ|terms| stays below 8 (inputs N(0,1), weights N(0, 1/fan_in):
 * E Σ|terms| = √(2/π)·√n ≤ 8 for n ≤ 100, and softmax-weighted sums are below max|v|), and each sum
 * passes its inputs' errors on with gain at most 1, so the output errs by at most 8·n_path·u. */
static inline double oracle_f32_tol(size_t n_path) { return 4.0 * (double)n_path * FLT_EPSILON; }

static inline void *oracle_alloc(size_t bytes)
{
    void *p = calloc(1, bytes ? bytes : 1);
    ck_assert(p != NULL);
    return p;
}

/* y[N] = W[N][K] · x[K] in double, W given as float */
static inline void oracle_matvec(double *y, const float *W, const double *x, size_t N, size_t K)
{
    for (size_t n = 0; n < N; n++) {
        double acc = 0;
        for (size_t k = 0; k < K; k++) acc += (double)W[n * K + k] * x[k];
        y[n] = acc;
    }
}

/* Half-split RoPE of v[Dh] at position p: pair i is (i, i + Dh/2), angle p·θ_i. */
static inline void oracle_rope_half_split(double *v, size_t Dh, const float *theta, size_t p)
{
    for (size_t i = 0; i < Dh / 2; i++) {
        double a = v[i], b = v[i + Dh / 2], ang = (double)p * (double)theta[i];
        v[i] = a * cos(ang) - b * sin(ang);
        v[i + Dh / 2] = a * sin(ang) + b * cos(ang);
    }
}

/* Key j is visible to query t: j ≤ t, and t − W < j when W > 0. */
static inline int oracle_visible(size_t t, size_t j, size_t W)
{
    return j <= t && (W == 0 || j + W > t);
}

typedef struct {
    size_t d, H, Hkv, Dh, W;
    const float *theta;                 /* [Dh/2] */
    const size_t *kv_of;                /* [H]: the KV head head h reads */
    const float *w_q, *w_k, *w_v, *w_o; /* [H·Dh][d], [Hkv·Dh][d], [Hkv·Dh][d], [d][H·Dh] */
} oracle_mha_layer;

/* q[T][H][Dh], k[T][Hkv][Dh] (rotated) and v[T][Hkv][Dh] of x[T][d] */
static inline void oracle_mha_qkv(double *q, double *k, double *v, const oracle_mha_layer *L, const double *x,
                                  size_t T)
{
    const size_t qw = L->H * L->Dh, kw = L->Hkv * L->Dh;
    for (size_t t = 0; t < T; t++) {
        oracle_matvec(q + t * qw, L->w_q, x + t * L->d, qw, L->d);
        oracle_matvec(k + t * kw, L->w_k, x + t * L->d, kw, L->d);
        oracle_matvec(v + t * kw, L->w_v, x + t * L->d, kw, L->d);
        for (size_t h = 0; h < L->H; h++) oracle_rope_half_split(q + t * qw + h * L->Dh, L->Dh, L->theta, t);
        for (size_t g = 0; g < L->Hkv; g++) oracle_rope_half_split(k + t * kw + g * L->Dh, L->Dh, L->theta, t);
    }
}

/* out[T][d] = the attention layer of chapter 1 on x[T][d] at positions 0 … T − 1 */
static inline void oracle_mha(double *out, const oracle_mha_layer *L, const double *x, size_t T)
{
    const size_t Dh = L->Dh, qw = L->H * Dh, kw = L->Hkv * Dh;
    double *q = oracle_alloc(T * qw * sizeof *q), *k = oracle_alloc(T * kw * sizeof *k);
    double *v = oracle_alloc(T * kw * sizeof *v), *o = oracle_alloc(qw * sizeof *o), *p = oracle_alloc(T * sizeof *p);
    oracle_mha_qkv(q, k, v, L, x, T);
    for (size_t t = 0; t < T; t++) {
        for (size_t h = 0; h < L->H; h++) {
            const size_t g = L->kv_of[h];
            double mx = -INFINITY, sum = 0;
            for (size_t j = 0; j <= t; j++) {
                if (!oracle_visible(t, j, L->W)) continue;
                double s = 0;
                for (size_t i = 0; i < Dh; i++) s += q[t * qw + h * Dh + i] * k[j * kw + g * Dh + i];
                p[j] = s / sqrt((double)Dh);
                if (p[j] > mx) mx = p[j];
            }
            for (size_t j = 0; j <= t; j++)
                if (oracle_visible(t, j, L->W)) sum += (p[j] = exp(p[j] - mx));
            for (size_t i = 0; i < Dh; i++) {
                double acc = 0;
                for (size_t j = 0; j <= t; j++)
                    if (oracle_visible(t, j, L->W)) acc += p[j] / sum * v[j * kw + g * Dh + i];
                o[h * Dh + i] = acc;
            }
        }
        oracle_matvec(out + t * L->d, L->w_o, o, L->d, qw);
    }
    free(q); free(k); free(v); free(o); free(p);
}

/* RMSNorm of v[n] with gain g[n] (float), ε eps */
static inline void oracle_rmsnorm(double *y, const double *v, const float *g, size_t n, double eps)
{
    double ms = 0;
    for (size_t i = 0; i < n; i++) ms += v[i] * v[i];
    double r = 1.0 / sqrt(ms / (double)n + eps);
    for (size_t i = 0; i < n; i++) y[i] = (double)g[i] * v[i] * r;
}

/* Interleaved RoPE of v[Dr] at position p: pair i is (2i, 2i + 1), angle p·θ_i. */
static inline void oracle_rope_interleaved(double *v, size_t Dr, const float *theta, size_t p)
{
    for (size_t i = 0; i < Dr / 2; i++) {
        double a = v[2 * i], b = v[2 * i + 1], ang = (double)p * (double)theta[i];
        v[2 * i] = a * cos(ang) - b * sin(ang);
        v[2 * i + 1] = a * sin(ang) + b * cos(ang);
    }
}

typedef struct {
    size_t d, H, Dq, Dc, Dnope, Dr, Dv, W;
    double eps, scale;
    const float *theta;                             /* [Dr/2] */
    const float *w_dq, *q_norm, *w_uq, *w_q;        /* Dq > 0: [Dq][d], [Dq], [H·(Dnope+Dr)][Dq]; else w_q [H·(Dnope+Dr)][d] */
    const float *w_dkv, *kv_norm, *w_ukv, *w_o;     /* [Dc+Dr][d], [Dc], [H·(Dnope+Dv)][Dc], [d][H·Dv] */
} oracle_mla_layer;

/* out[T][d] = MLA of chapter 2 in its naive form: every head's key [W_UK^h c_j | k_rope_j] and value
 * W_UV^h c_j rebuilt from the latent, ordinary attention, W_O. */
static inline void oracle_mla(double *out, const oracle_mla_layer *L, const double *x, size_t T)
{
    const size_t H = L->H, dqk = L->Dnope + L->Dr, Dc = L->Dc, Dr = L->Dr, Dv = L->Dv;
    double *q = oracle_alloc(T * H * dqk * sizeof *q), *c = oracle_alloc(T * Dc * sizeof *c);
    double *kr = oracle_alloc(T * Dr * sizeof *kr), *lat = oracle_alloc((Dc + Dr) * sizeof *lat);
    double *cq = oracle_alloc((L->Dq + 1) * sizeof *cq), *cqn = oracle_alloc((L->Dq + 1) * sizeof *cqn);
    double *k = oracle_alloc(T * H * dqk * sizeof *k), *v = oracle_alloc(T * H * Dv * sizeof *v);
    double *o = oracle_alloc(H * Dv * sizeof *o), *p = oracle_alloc(T * sizeof *p);
    for (size_t t = 0; t < T; t++) {
        const double *xt = x + t * L->d;
        if (L->Dq) {
            oracle_matvec(cq, L->w_dq, xt, L->Dq, L->d);
            oracle_rmsnorm(cqn, cq, L->q_norm, L->Dq, L->eps);
            oracle_matvec(q + t * H * dqk, L->w_uq, cqn, H * dqk, L->Dq);
        } else {
            oracle_matvec(q + t * H * dqk, L->w_q, xt, H * dqk, L->d);
        }
        for (size_t h = 0; h < H; h++) oracle_rope_interleaved(q + (t * H + h) * dqk + L->Dnope, Dr, L->theta, t);
        oracle_matvec(lat, L->w_dkv, xt, Dc + Dr, L->d);
        oracle_rmsnorm(c + t * Dc, lat, L->kv_norm, Dc, L->eps);
        memcpy(kr + t * Dr, lat + Dc, Dr * sizeof *kr);
        oracle_rope_interleaved(kr + t * Dr, Dr, L->theta, t);
        for (size_t h = 0; h < H; h++) {
            const float *wuk = L->w_ukv + h * (L->Dnope + Dv) * Dc, *wuv = wuk + L->Dnope * Dc;
            oracle_matvec(k + (t * H + h) * dqk, wuk, c + t * Dc, L->Dnope, Dc);
            memcpy(k + (t * H + h) * dqk + L->Dnope, kr + t * Dr, Dr * sizeof *k);
            oracle_matvec(v + (t * H + h) * Dv, wuv, c + t * Dc, Dv, Dc);
        }
    }
    for (size_t t = 0; t < T; t++) {
        for (size_t h = 0; h < H; h++) {
            double mx = -INFINITY, sum = 0;
            for (size_t j = 0; j <= t; j++) {
                if (!oracle_visible(t, j, L->W)) continue;
                double s = 0;
                for (size_t i = 0; i < dqk; i++) s += q[(t * H + h) * dqk + i] * k[(j * H + h) * dqk + i];
                p[j] = s * L->scale;
                if (p[j] > mx) mx = p[j];
            }
            for (size_t j = 0; j <= t; j++)
                if (oracle_visible(t, j, L->W)) sum += (p[j] = exp(p[j] - mx));
            for (size_t i = 0; i < Dv; i++) {
                double acc = 0;
                for (size_t j = 0; j <= t; j++)
                    if (oracle_visible(t, j, L->W)) acc += p[j] / sum * v[(j * H + h) * Dv + i];
                o[h * Dv + i] = acc;
            }
        }
        oracle_matvec(out + t * L->d, L->w_o, o, L->d, H * Dv);
    }
    free(q); free(c); free(kr); free(lat); free(cq); free(cqn); free(k); free(v); free(o); free(p);
}

static inline double *oracle_widen(const float *x, size_t n)
{
    double *y = oracle_alloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

/* Flop one head spends on one cached token in a decode step, counted by walking the definition's loops
 * (2 per multiply-add, the softmax left out). Absorbed: the score q̂·[c_j | k^R_j] and the term
 * p_j·c_j of the latent sum. Naive: re-expanding k^C_j = W_UK c_j and v_j = W_UV c_j, then the score
 * q·[k^C_j | k^R_j] and the term p_j·v_j. */
static inline double oracle_mla_absorbed_flop_per_token(size_t Dc, size_t Dr)
{
    double flop = 0;
    for (size_t i = 0; i < Dc + Dr; i++) flop += 2;
    for (size_t i = 0; i < Dc; i++) flop += 2;
    return flop;
}

static inline double oracle_mla_naive_flop_per_token(size_t Dc, size_t Dnope, size_t Dr, size_t Dv)
{
    double flop = 0;
    for (size_t o = 0; o < Dnope + Dv; o++)
        for (size_t i = 0; i < Dc; i++) flop += 2;
    for (size_t i = 0; i < Dnope + Dr; i++) flop += 2;
    for (size_t i = 0; i < Dv; i++) flop += 2;
    return flop;
}

#endif
