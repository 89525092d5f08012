/* The V3.2 lightning indexer, top-k and sparse MLA (chapter 4) in plain loops and double
 * precision: the oracles the chapter 4 suites compare ref/dsa with. Nothing here calls ref/: weights
 * and inputs are read from the module's structs as given (float, widened exactly), the RoPE angle is
 * formed from the frequency table, LayerNorm and the Hadamard matrix are written out again, and the
 * top-k is a full sort of every legal position.
 *
 * Shapes: x[T][d]; q_idx[T][HI][DI], w_idx[T][HI], k_idx[T][DI]; I[T][T]; sel[T][K]; out[T][d]. */
#ifndef KVL_TESTS_ORACLE_DSA_H
#define KVL_TESTS_ORACLE_DSA_H

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dsa.h"
#include "oracle_attention.h"

/* The layer as the oracle reads it: MLA's fields as oracle_attention.h's layer, plus the indexer. */
typedef struct {
    oracle_mla_layer mla;
    size_t HI, DI, K;
    double index_eps;
    const float *w_iq, *w_ik, *k_norm, *k_bias, *w_iw; /* [HI·DI][Dq'], [DI][d], [DI], [DI], [HI][d] */
} oracle_dsa_layer;

static inline oracle_dsa_layer oracle_dsa_of(const dsa_config *c, const dsa_weights *w)
{
    const mla_config *m = &c->mla;
    oracle_dsa_layer L = {
        .mla = {.d = m->d, .H = m->n_heads, .Dq = m->q_lora_rank, .Dc = m->kv_lora_rank, .Dnope = m->qk_nope,
                .Dr = m->qk_rope, .Dv = m->v_head, .W = 0, .eps = m->norm_eps, .scale = m->softmax_scale,
                .theta = m->rope.theta, .w_dq = w->mla.w_dq, .q_norm = w->mla.q_norm, .w_uq = w->mla.w_uq,
                .w_q = w->mla.w_q, .w_dkv = w->mla.w_dkv, .kv_norm = w->mla.kv_norm, .w_ukv = w->mla.w_ukv,
                .w_o = w->mla.w_o},
        .HI = c->index_n_heads, .DI = c->index_head_dim, .K = c->index_topk, .index_eps = c->index_norm_eps,
        .w_iq = w->w_iq, .w_ik = w->w_ik, .k_norm = w->k_norm, .k_bias = w->k_bias, .w_iw = w->w_iw};
    return L;
}

/* LayerNorm of v[n]: g ⊙ (v − mean)/sqrt(biased var + ε) + b */
static inline void oracle_layernorm(double *y, const double *v, const float *g, const float *b, size_t n, double eps)
{
    double mean = 0, var = 0;
    for (size_t i = 0; i < n; i++) mean += v[i];
    mean /= (double)n;
    for (size_t i = 0; i < n; i++) var += (v[i] - mean) * (v[i] - mean);
    const double r = 1.0 / sqrt(var / (double)n + eps);
    for (size_t i = 0; i < n; i++) y[i] = (double)g[i] * (v[i] - mean) * r + (double)b[i];
}

/* The indexer's inputs for the token x[d] at position p: q_idx[HI][DI], w_idx[HI], k_idx[DI]. */
static inline void oracle_dsa_index_token(double *q_idx, double *w_idx, double *k_idx, const oracle_dsa_layer *L,
                                          const double *x, size_t p)
{
    const size_t d = L->mla.d, Dq = L->mla.Dq, Dr = L->mla.Dr, HI = L->HI, DI = L->DI;
    double *cq = oracle_alloc(Dq * sizeof *cq), *cqn = oracle_alloc(Dq * sizeof *cqn), *k = oracle_alloc(DI * sizeof *k);
    oracle_matvec(cq, L->mla.w_dq, x, Dq, d);
    oracle_rmsnorm(cqn, cq, L->mla.q_norm, Dq, L->mla.eps);
    oracle_matvec(q_idx, L->w_iq, cqn, HI * DI, Dq);
    for (size_t j = 0; j < HI; j++) oracle_rope_half_split(q_idx + j * DI, Dr, L->mla.theta, p);
    oracle_matvec(w_idx, L->w_iw, x, HI, d);
    for (size_t j = 0; j < HI; j++) w_idx[j] /= sqrt((double)HI) * sqrt((double)DI);
    oracle_matvec(k, L->w_ik, x, DI, d);
    oracle_layernorm(k_idx, k, L->k_norm, L->k_bias, DI, L->index_eps);
    oracle_rope_half_split(k_idx, Dr, L->mla.theta, p);
    free(cq); free(cqn); free(k);
}

/* q_idx[T][HI][DI], w_idx[T][HI], k_idx[T][DI] for x[T][d] at positions 0 … T − 1 */
static inline void oracle_dsa_index_inputs(double *q_idx, double *w_idx, double *k_idx, const oracle_dsa_layer *L,
                                           const double *x, size_t T)
{
    for (size_t t = 0; t < T; t++)
        oracle_dsa_index_token(q_idx + t * L->HI * L->DI, w_idx + t * L->HI, k_idx + t * L->DI, L,
                               x + t * L->mla.d, t);
}

/* I[T][N] = Σ_j w_j·ReLU(q_j·k_s) for s ≤ t, −INFINITY for s > t (queries 0 … T − 1, keys 0 … N − 1) */
static inline void oracle_dsa_index_scores(double *I, const double *q_idx, const double *w_idx, const double *k_idx,
                                           size_t HI, size_t DI, size_t T, size_t N)
{
    for (size_t t = 0; t < T; t++)
        for (size_t s = 0; s < N; s++) {
            if (s > t) {
                I[t * N + s] = -INFINITY;
                continue;
            }
            double acc = 0;
            for (size_t j = 0; j < HI; j++) {
                double dot = 0;
                for (size_t i = 0; i < DI; i++) dot += q_idx[(t * HI + j) * DI + i] * k_idx[s * DI + i];
                acc += w_idx[t * HI + j] * (dot > 0 ? dot : 0);
            }
            I[t * N + s] = acc;
        }
}

/* A per-element bound on the float32 error of I[T][T]: n_path·FLT_EPSILON·Σ_j |w_j|·‖q_j‖·‖k_s‖. A
 * float32 stage of reduction length n errs by at most n·u of the sum of |terms| (Higham; u =
 * FLT_EPSILON/2), a relative error ε_q of q and ε_k of k moves q·k by at most (ε_q + ε_k)·‖q‖·‖k‖
 * (Cauchy-Schwarz), ReLU passes an error on with gain at most 1, and the head sum weighs each error
 * by |w_j|. n_path is the stages' total reduction length; the factor 2 of u → FLT_EPSILON covers the
 * product of each error with the next stage's. Entries above the diagonal get 0. */
static inline void oracle_dsa_index_bound(double *bound, const double *q_idx, const double *w_idx,
                                          const double *k_idx, size_t HI, size_t DI, size_t T, size_t n_path)
{
    for (size_t t = 0; t < T; t++)
        for (size_t s = 0; s < T; s++) {
            double acc = 0, kk = 0;
            for (size_t i = 0; i < DI; i++) kk += k_idx[s * DI + i] * k_idx[s * DI + i];
            for (size_t j = 0; j < HI; j++) {
                double qq = 0;
                for (size_t i = 0; i < DI; i++) qq += q_idx[(t * HI + j) * DI + i] * q_idx[(t * HI + j) * DI + i];
                acc += fabs(w_idx[t * HI + j]) * sqrt(qq) * sqrt(kk);
            }
            bound[t * T + s] = s > t ? 0 : (double)n_path * FLT_EPSILON * acc;
        }
}

/* Reduction lengths along the float32 path of one index score (oracle_dsa_index_bound's n_path): W_DQ
 * (d), the RMSNorm mean and W_IQ (Dq' each), W_IK (d) and the LayerNorm mean and variance (DI each), W_IW
 * (d), the q·k dot (DI), the head sum (HI), and one rounding for each of RoPE, the scale and the ReLU
 * product. */
static inline size_t oracle_dsa_index_path(const dsa_config *c)
{
    return 3 * c->mla.d + 2 * c->mla.q_lora_rank + 3 * c->index_head_dim + c->index_n_heads + 3;
}

/* I[T][T] of the f32 definition for x[T][d] */
static inline void oracle_dsa_indexer(double *I, const oracle_dsa_layer *L, const double *x, size_t T)
{
    double *q = oracle_alloc(T * L->HI * L->DI * sizeof *q), *w = oracle_alloc(T * L->HI * sizeof *w);
    double *k = oracle_alloc(T * L->DI * sizeof *k);
    oracle_dsa_index_inputs(q, w, k, L, x, T);
    oracle_dsa_index_scores(I, q, w, k, L->HI, L->DI, T, T);
    free(q); free(w); free(k);
}

/* ---- top-k by a full sort ------------------------------------------------------------------------- */

typedef struct {
    double score;
    int32_t pos;
} oracle_pick;

/* larger score first, the smaller position on ties */
static inline int oracle_pick_order(const void *a, const void *b)
{
    const oracle_pick *x = a, *y = b;
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->pos > y->pos) - (x->pos < y->pos);
}

static inline int oracle_pos_order(const void *a, const void *b)
{
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* sel[K] from I[N]: every legal position (not −∞, not NaN) sorted by oracle_pick_order, the first
 * min(K, #legal) kept, ascending, −1 after. Returns #legal. */
static inline size_t oracle_topk_row(int32_t *sel, const double *I, size_t N, size_t K)
{
    oracle_pick *all = oracle_alloc(N * sizeof *all);
    size_t n = 0;
    for (size_t s = 0; s < N; s++)
        if (!isnan(I[s]) && I[s] != -INFINITY) all[n++] = (oracle_pick){I[s], (int32_t)s};
    qsort(all, n, sizeof *all, oracle_pick_order);
    const size_t kept = n < K ? n : K;
    for (size_t k = 0; k < kept; k++) sel[k] = all[k].pos;
    qsort(sel, kept, sizeof *sel, oracle_pos_order);
    for (size_t k = kept; k < K; k++) sel[k] = -1;
    free(all);
    return n;
}

/* 1 if a float32 path whose scores err by at most the bound of oracle_dsa_index_bound (n_path) must
 * select exactly what the oracle selects from I[T][T] in rows t0 … T − 1 (q_idx, w_idx, k_idx as
 * oracle_dsa_index_inputs gives them), else 0 with *row the first row where it might not. The cut of
 * row t is safe when no other legal score lies within the two bounds of the K-th largest, or when the K-th largest is an
 * exact 0 and every score near it is a "certain zero": every head's q·k is below −(its bound), so the
 * float path's ReLU zeroes it too and the tie falls to the positions, in both, by the same rule. (Exact
 * zeros are common: a position scores 0 whenever all HI dot products are negative.) */
static inline int oracle_dsa_cut_is_safe(size_t *row, const double *I, const double *q_idx, const double *w_idx,
                                         const double *k_idx, size_t HI, size_t DI, size_t T, size_t K, size_t n_path,
                                         size_t t0)
{
    double *bound = oracle_alloc(T * T * sizeof *bound);
    oracle_pick *all = oracle_alloc(T * sizeof *all);
    oracle_dsa_index_bound(bound, q_idx, w_idx, k_idx, HI, DI, T, n_path);
    int safe = 1;
    for (size_t t = t0; t < T && safe; t++) {
        size_t n = 0;
        for (size_t s = 0; s <= t; s++) all[n++] = (oracle_pick){I[t * T + s], (int32_t)s};
        if (n <= K) continue;
        qsort(all, n, sizeof *all, oracle_pick_order);
        const double cut = all[K - 1].score, cut_bound = bound[t * T + (size_t)all[K - 1].pos];
        for (size_t i = 0; i < n && safe; i++) {
            const size_t s = (size_t)all[i].pos;
            if (i == K - 1 || fabs(all[i].score - cut) > cut_bound + bound[t * T + s]) continue;
            int certain_zero = cut == 0 && all[i].score == 0;
            for (size_t j = 0; j < HI && certain_zero; j++) {
                double dot = 0, qq = 0, kk = 0;
                for (size_t c = 0; c < DI; c++) {
                    const double a = q_idx[(t * HI + j) * DI + c], b = k_idx[s * DI + c];
                    dot += a * b, qq += a * a, kk += b * b;
                }
                certain_zero = dot < -(double)n_path * FLT_EPSILON * sqrt(qq) * sqrt(kk);
            }
            safe = certain_zero;
        }
        if (!safe) *row = t;
    }
    free(bound);
    free(all);
    return safe;
}

/* ---- sparse MLA ------------------------------------------------------------------------------------- */

/* rows[T][Dc+Dr] = [c_kv | k_rope] of x[T][d] at positions 0 … T − 1 (chapter 2) */
static inline void oracle_dsa_rows(double *rows, const oracle_dsa_layer *L, const double *x, size_t T)
{
    const oracle_mla_layer *M = &L->mla;
    const size_t Dc = M->Dc, Dr = M->Dr;
    double *lat = oracle_alloc((Dc + Dr) * sizeof *lat);
    for (size_t t = 0; t < T; t++) {
        oracle_matvec(lat, M->w_dkv, x + t * M->d, Dc + Dr, M->d);
        oracle_rmsnorm(rows + t * (Dc + Dr), lat, M->kv_norm, Dc, M->eps);
        memcpy(rows + t * (Dc + Dr) + Dc, lat + Dc, Dr * sizeof *rows);
        oracle_rope_interleaved(rows + t * (Dc + Dr) + Dc, Dr, M->theta, t);
    }
    free(lat);
}

/* out[T][d] = MLA of chapter 2 in its naive form over the key rows rows[T][Dc+Dr], query t (from x[t],
 * at position t) reading only the rows in sel[t][K] (−1 skipped): every head's key
 * [W_UK^h c_j | k_rope_j] and value W_UV^h c_j, softmax over the selected j, W_O. *max_logit (NULL: not
 * wanted) receives the largest |scaled score|. */
static inline void oracle_dsa_attend(double *out, double *max_logit, const oracle_dsa_layer *L, const double *x,
                                     const double *rows, const int32_t *sel, size_t T)
{
    const oracle_mla_layer *M = &L->mla;
    const size_t H = M->H, Dn = M->Dnope, Dr = M->Dr, Dc = M->Dc, Dv = M->Dv, dqk = Dn + Dr, K = L->K;
    double *q = oracle_alloc(H * dqk * sizeof *q), *cq = oracle_alloc(M->Dq * sizeof *cq);
    double *cqn = oracle_alloc(M->Dq * sizeof *cqn), *kn = oracle_alloc(Dn * sizeof *kn);
    double *v = oracle_alloc(K * Dv * sizeof *v), *o = oracle_alloc(H * Dv * sizeof *o), *p = oracle_alloc(K * sizeof *p);
    double biggest = 0;
    for (size_t t = 0; t < T; t++) {
        oracle_matvec(cq, M->w_dq, x + t * M->d, M->Dq, M->d);
        oracle_rmsnorm(cqn, cq, M->q_norm, M->Dq, M->eps);
        oracle_matvec(q, M->w_uq, cqn, H * dqk, M->Dq);
        for (size_t h = 0; h < H; h++) oracle_rope_interleaved(q + h * dqk + Dn, Dr, M->theta, t);
        const int32_t *st = sel + t * K;
        for (size_t h = 0; h < H; h++) {
            const float *wuk = M->w_ukv + h * (Dn + Dv) * Dc, *wuv = wuk + Dn * Dc;
            double mx = -INFINITY, sum = 0;
            for (size_t k = 0; k < K; k++) {
                if (st[k] < 0) continue;
                const double *row = rows + (size_t)st[k] * (Dc + Dr);
                oracle_matvec(kn, wuk, row, Dn, Dc);
                oracle_matvec(v + k * Dv, wuv, row, Dv, Dc);
                double s = 0;
                for (size_t i = 0; i < Dn; i++) s += q[h * dqk + i] * kn[i];
                for (size_t i = 0; i < Dr; i++) s += q[h * dqk + Dn + i] * row[Dc + i];
                p[k] = s * M->scale;
                mx = fmax(mx, p[k]);
                biggest = fmax(biggest, fabs(p[k]));
            }
            for (size_t k = 0; k < K; k++)
                if (st[k] >= 0) sum += (p[k] = exp(p[k] - mx));
            for (size_t i = 0; i < Dv; i++) {
                double acc = 0;
                for (size_t k = 0; k < K; k++)
                    if (st[k] >= 0) acc += p[k] / sum * v[k * Dv + i];
                o[h * Dv + i] = acc;
            }
        }
        oracle_matvec(out + t * M->d, M->w_o, o, M->d, H * Dv);
    }
    if (max_logit) *max_logit = biggest;
    free(q); free(cq); free(cqn); free(kn); free(v); free(o); free(p);
}

/* target[T][T]: dense causal MLA attention of x[T][d] over rows[T][Dc+Dr], the weights of every head
 * summed and L1-normalised per query (the indexer's training target, DeepSeek-V3.2-Exp report, section 2.1); 0 for s > t. */
static inline void oracle_dsa_attention_target(double *target, const oracle_dsa_layer *L, const double *x,
                                               const double *rows, size_t T)
{
    const oracle_mla_layer *M = &L->mla;
    const size_t H = M->H, Dn = M->Dnope, Dr = M->Dr, Dc = M->Dc, Dv = M->Dv, dqk = Dn + Dr;
    double *q = oracle_alloc(H * dqk * sizeof *q), *cq = oracle_alloc(M->Dq * sizeof *cq);
    double *cqn = oracle_alloc(M->Dq * sizeof *cqn), *kn = oracle_alloc(Dn * sizeof *kn), *p = oracle_alloc(T * sizeof *p);
    for (size_t t = 0; t < T; t++) {
        oracle_matvec(cq, M->w_dq, x + t * M->d, M->Dq, M->d);
        oracle_rmsnorm(cqn, cq, M->q_norm, M->Dq, M->eps);
        oracle_matvec(q, M->w_uq, cqn, H * dqk, M->Dq);
        for (size_t h = 0; h < H; h++) oracle_rope_interleaved(q + h * dqk + Dn, Dr, M->theta, t);
        for (size_t s = 0; s < T; s++) target[t * T + s] = 0;
        for (size_t h = 0; h < H; h++) {
            const float *wuk = M->w_ukv + h * (Dn + Dv) * Dc;
            double mx = -INFINITY, sum = 0;
            for (size_t s = 0; s <= t; s++) {
                const double *row = rows + s * (Dc + Dr);
                oracle_matvec(kn, wuk, row, Dn, Dc);
                double dot = 0;
                for (size_t i = 0; i < Dn; i++) dot += q[h * dqk + i] * kn[i];
                for (size_t i = 0; i < Dr; i++) dot += q[h * dqk + Dn + i] * row[Dc + i];
                p[s] = dot * M->scale;
                mx = fmax(mx, p[s]);
            }
            for (size_t s = 0; s <= t; s++) sum += (p[s] = exp(p[s] - mx));
            for (size_t s = 0; s <= t; s++) target[t * T + s] += p[s] / sum / (double)H;
        }
    }
    free(q); free(cq); free(cqn); free(kn); free(p);
}

#endif
