#include "attend.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "element.h"
#include "softmax.h"
#include "status.h"

#ifdef OPENBLAS_USE64BITINT
#define BLASINT_MAX LONG_MAX
#else
#define BLASINT_MAX INT_MAX
#endif

static int check_args(const char *fn, const float *o, const float *q, size_t Hq, const void *rows,
                      const kvl_attend_rows *r, float scale)
{
    if (!o || !q || !r || (r->N && !rows)) return kvl_fail(KVL_EINVAL, "%s: NULL array", fn);
    if (r->Dk == 0 || r->Dv == 0 || r->groups == 0)
        return kvl_fail(KVL_EINVAL, "%s: Dk = %zu, Dv = %zu and groups = %zu must be positive", fn, r->Dk, r->Dv,
                        r->groups);
    if (Hq % r->groups)
        return kvl_fail(KVL_EINVAL, "%s: %zu query rows do not split into %zu groups", fn, Hq, r->groups);
    if (r->k_off > r->stride || r->Dk > (r->stride - r->k_off) / r->groups)
        return kvl_fail(KVL_EINVAL, "%s: key columns %zu + %zu x %zu pass the row stride %zu", fn, r->k_off, r->groups,
                        r->Dk, r->stride);
    if (r->v_off > r->stride || r->Dv > (r->stride - r->v_off) / r->groups)
        return kvl_fail(KVL_EINVAL, "%s: value columns %zu + %zu x %zu pass the row stride %zu", fn, r->v_off,
                        r->groups, r->Dv, r->stride);
    if (!(scale > 0.0f) || !isfinite(scale))
        return kvl_fail(KVL_EINVAL, "%s: scale must be finite and positive, got %g", fn, (double)scale);
    if (r->stride > (size_t)BLASINT_MAX || Hq > (size_t)BLASINT_MAX)
        return kvl_fail(KVL_EINVAL, "%s: row stride %zu or %zu heads exceed the BLAS integer", fn, r->stride, Hq);
    return KVL_OK;
}

/* ---- the tiled form ---------------------------------------------------------------------------- */

/* The running state of Hq heads: m[Hq] the largest scaled score so far, l[Hq] the sum of
 * exp(score − m), acc[Hq][Dv] (the output buffer) the unnormalised weighted sum of values. */
typedef struct {
    float *s;      /* [Hq][KVL_ATTEND_TILE] scores, then weights, of one tile */
    double *m, *l; /* [Hq] */
    float *tile;   /* [KVL_ATTEND_TILE][stride] a bf16 tile widened; NULL for float32 rows */
} online;

static void online_free(online *st)
{
    free(st->s);
    free(st->m);
    free(st->l);
    free(st->tile);
}

/* tile_floats: the size of the widening tile, 0 for float32 rows */
static int online_init(online *st, float *acc, size_t Hq, const kvl_attend_rows *r, const float *sigma,
                       size_t tile_floats, const char *fn)
{
    memset(st, 0, sizeof *st);
    if (Hq > SIZE_MAX / sizeof(float) / KVL_ATTEND_TILE || r->stride > SIZE_MAX / sizeof(float) / KVL_ATTEND_TILE)
        return kvl_fail(KVL_EINVAL, "%s: %zu heads or a stride of %zu overflow a tile", fn, Hq, r->stride);
    st->s = malloc((Hq ? Hq : 1) * KVL_ATTEND_TILE * sizeof *st->s);
    st->m = malloc((Hq ? Hq : 1) * sizeof *st->m);
    st->l = malloc((Hq ? Hq : 1) * sizeof *st->l);
    if (tile_floats) st->tile = malloc(tile_floats * sizeof *st->tile);
    if (!st->s || !st->m || !st->l || (tile_floats && !st->tile)) {
        online_free(st);
        return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu heads", fn, Hq);
    }
    for (size_t h = 0; h < Hq; h++) {
        st->m[h] = sigma ? sigma[h] : -INFINITY;
        st->l[h] = sigma && sigma[h] != -INFINITY ? 1.0 : 0.0; /* exp(σ − m) with m = σ */
    }
    memset(acc, 0, Hq * r->Dv * sizeof *acc);
    return KVL_OK;
}

/* For heads h0 … h0 + Gq − 1: s[Gq][n] ← exp(scale·s − m'), with m' the new running max, and
 * acc[Gq][Dv], l rescaled to m'. A NaN score is passed over by the max and turns its exp, and so l,
 * into NaN; online_finish then gives the head NaN. */
static void online_weights(online *st, float *acc, size_t h0, size_t Gq, size_t n, size_t Dv, float scale)
{
    for (size_t r = 0; r < Gq; r++) {
        const size_t h = h0 + r;
        float *s = st->s + r * n, tile_max = -INFINITY;
        for (size_t j = 0; j < n; j++) {
            s[j] *= scale;
            if (s[j] > tile_max) tile_max = s[j];
        }
        const double m = tile_max > st->m[h] ? tile_max : st->m[h];
        if (m == -INFINITY) { /* nothing visible yet: every weight 0 (a NaN stays NaN), nothing to rescale */
            float nan_sum = 0.0f;
            for (size_t j = 0; j < n; j++) nan_sum += s[j] = isnan(s[j]) ? s[j] : 0.0f;
            st->l[h] += nan_sum;
            continue;
        }
        const double alpha = st->m[h] == -INFINITY ? 0.0 : exp(st->m[h] - m);
        const float mf = (float)m;
        float sum = 0.0f;
        for (size_t j = 0; j < n; j++) {
            s[j] = expf(s[j] - mf);
            sum += s[j];
        }
        st->l[h] = st->l[h] * alpha + sum;
        st->m[h] = m;
        if (alpha != 1.0) {
            float *a = acc + r * Dv;
            for (size_t i = 0; i < Dv; i++) a[i] *= (float)alpha;
        }
    }
}

/* One tile of n rows (float32, row stride ld), every group: scores, weights, acc += P·V. */
static void online_tile(online *st, float *acc, const float *q, size_t Hq, const float *rows, size_t ld, size_t n,
                        const kvl_attend_rows *r, float scale)
{
    const size_t Gq = Hq / r->groups, Dk = r->Dk, Dv = r->Dv;
    for (size_t g = 0; g < r->groups; g++) {
        float *acc_g = acc + g * Gq * Dv;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)Gq, (blasint)n, (blasint)Dk, 1.0f,
                    q + g * Gq * Dk, (blasint)Dk, rows + r->k_off + g * Dk, (blasint)ld, 0.0f, st->s, (blasint)n);
        online_weights(st, acc_g, g * Gq, Gq, n, Dv, scale);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)Gq, (blasint)Dv, (blasint)n, 1.0f, st->s,
                    (blasint)n, rows + r->v_off + g * Dv, (blasint)ld, 1.0f, acc_g, (blasint)Dv);
    }
}

/* o[Hq][Dv] = acc / l; a head with l = 0 (nothing visible) stays 0. */
static void online_finish(float *o, const online *st, size_t Hq, size_t Dv)
{
    for (size_t h = 0; h < Hq; h++) {
        const float inv = st->l[h] > 0.0 ? (float)(1.0 / st->l[h]) : 0.0f;
        if (isnan(st->l[h])) for (size_t i = 0; i < Dv; i++) o[h * Dv + i] = NAN;
        else for (size_t i = 0; i < Dv; i++) o[h * Dv + i] *= inv;
    }
}

static int attend_tiled_f32(float *o, const float *q, size_t Hq, const float *rows, const kvl_attend_rows *r,
                            float scale, const float *sigma, const char *fn)
{
    int rc = check_args(fn, o, q, Hq, rows, r, scale);
    if (rc != KVL_OK) return rc;
    online st;
    rc = online_init(&st, o, Hq, r, sigma, 0, fn);
    if (rc != KVL_OK) return rc;
    for (size_t j = 0; j < r->N && Hq; j += KVL_ATTEND_TILE) {
        const size_t n = r->N - j < KVL_ATTEND_TILE ? r->N - j : KVL_ATTEND_TILE;
        online_tile(&st, o, q, Hq, rows + j * r->stride, r->stride, n, r, scale);
    }
    online_finish(o, &st, Hq, r->Dv);
    online_free(&st);
    return KVL_OK;
}

static int attend_tiled_bf16(float *o, const float *q, size_t Hq, const uint16_t *rows, const kvl_attend_rows *r,
                             float scale, const float *sigma, const char *fn)
{
    int rc = check_args(fn, o, q, Hq, rows, r, scale);
    if (rc != KVL_OK) return rc;
    online st;
    rc = online_init(&st, o, Hq, r, sigma, KVL_ATTEND_TILE * r->stride, fn);
    if (rc != KVL_OK) return rc;
    for (size_t j = 0; j < r->N && Hq; j += KVL_ATTEND_TILE) {
        const size_t n = r->N - j < KVL_ATTEND_TILE ? r->N - j : KVL_ATTEND_TILE;
        kvf_bf16_decode_n(st.tile, rows + j * r->stride, n * r->stride);
        online_tile(&st, o, q, Hq, st.tile, r->stride, n, r, scale);
    }
    online_finish(o, &st, Hq, r->Dv);
    online_free(&st);
    return KVL_OK;
}

int kvl_attend_f32(float *o, const float *q, size_t Hq, const float *rows, const kvl_attend_rows *r, float scale)
{
    return attend_tiled_f32(o, q, Hq, rows, r, scale, NULL, __func__);
}

int kvl_attend_bf16(float *o, const float *q, size_t Hq, const uint16_t *rows, const kvl_attend_rows *r,
                    float scale)
{
    return attend_tiled_bf16(o, q, Hq, rows, r, scale, NULL, __func__);
}

/* Every sink finite or −∞ (softmax.h). */
static int check_sinks(const char *fn, const float *sigma, size_t Hq)
{
    if (!sigma) return kvl_fail(KVL_EINVAL, "%s: NULL sinks", fn);
    for (size_t h = 0; h < Hq; h++)
        if (!isfinite(sigma[h]) && sigma[h] != -INFINITY)
            return kvl_fail(KVL_EINVAL, "%s: sink %zu is %g, not finite or -inf", fn, h, (double)sigma[h]);
    return KVL_OK;
}

int kvl_attend_sink_f32(float *o, const float *q, size_t Hq, const float *rows, const kvl_attend_rows *r,
                        float scale, const float *sigma)
{
    int rc = check_sinks(__func__, sigma, Hq);
    return rc != KVL_OK ? rc : attend_tiled_f32(o, q, Hq, rows, r, scale, sigma, __func__);
}

int kvl_attend_sink_bf16(float *o, const float *q, size_t Hq, const uint16_t *rows, const kvl_attend_rows *r,
                         float scale, const float *sigma)
{
    int rc = check_sinks(__func__, sigma, Hq);
    return rc != KVL_OK ? rc : attend_tiled_bf16(o, q, Hq, rows, r, scale, sigma, __func__);
}

/* ---- the definition ---------------------------------------------------------------------------- */

int kvl_attend_f32_loop(float *o, const float *q, size_t Hq, const float *rows, const kvl_attend_rows *r,
                        float scale, const float *sigma)
{
    int rc = check_args(__func__, o, q, Hq, rows, r, scale);
    if (rc != KVL_OK) return rc;
    float *p = malloc((r->N ? r->N : 1) * sizeof *p);
    if (!p) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu scores", __func__, r->N);
    const size_t Gq = Hq / r->groups;
    for (size_t h = 0; h < Hq; h++) {
        const float *qh = q + h * r->Dk;
        const size_t g = h / Gq;
        for (size_t j = 0; j < r->N; j++) {
            const float *k = rows + j * r->stride + r->k_off + g * r->Dk;
            float dot = 0.0f;
            for (size_t i = 0; i < r->Dk; i++) dot += qh[i] * k[i];
            p[j] = dot * scale;
        }
        if (sigma) kvl_softmax_sink_f32(p, r->N, sigma[h]);
        else kvl_softmax_f32(p, r->N);
        float *oh = o + h * r->Dv;
        memset(oh, 0, r->Dv * sizeof *oh);
        for (size_t j = 0; j < r->N; j++) {
            const float *v = rows + j * r->stride + r->v_off + g * r->Dv;
            for (size_t i = 0; i < r->Dv; i++) oh[i] += p[j] * v[i];
        }
    }
    free(p);
    return KVL_OK;
}
