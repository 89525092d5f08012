#include "attend.h"

#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "backend.h"
#include "linalg.h"
#include "softmax.h"
#include "status.h"

#ifdef OPENBLAS_USE64BITINT
#define BLASINT_MAX LONG_MAX
#else
#define BLASINT_MAX INT_MAX
#endif

static int check_layout(const char *fn, const float *o, const float *q, size_t Hq, const kvl_row_tiles *rows,
                        const kvl_attend_rows *r, float scale)
{
    if (!o || !q || !r || (r->N && (!rows || !rows->tile))) return kvl_fail(KVL_EINVAL, "%s: NULL array", fn);
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
    if (rows && r->N && (rows->N < r->N || rows->width != r->stride))
        return kvl_fail(KVL_EINVAL, "%s: %zu rows of %zu attended, the view holds %zu of %zu", fn, r->N, r->stride,
                        rows->N, rows->width);
    return KVL_OK;
}

int kvl_attend_check(const char *fn, const float *o, const float *q, size_t Hq, const kvl_row_tiles *rows,
                     const kvl_attend_rows *r, float scale, const float *sigma, const kvl_attend_then *then)
{
    KVL_TRY(check_layout(fn, o, q, Hq, rows, r, scale));
    for (size_t h = 0; sigma && h < Hq; h++)
        if (!isfinite(sigma[h]) && sigma[h] != -INFINITY)
            return kvl_fail(KVL_EINVAL, "%s: sink %zu is %g, not finite or -inf", fn, h, (double)sigma[h]);
    if (then && !then->run) return kvl_fail(KVL_EINVAL, "%s: a then without its function", fn);
    return KVL_OK;
}

int kvl_attend(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows, const kvl_attend_rows *r,
               float scale, const float *sigma, const kvl_attend_then *then)
{
    KVL_TRY(kvl_attend_check(__func__, o, q, Hq, rows, r, scale, sigma, then));
    return kvl_backend_in_use()->attend(o, q, Hq, rows, r, scale, sigma, then);
}

/* ---- the definition ---------------------------------------------------------------------------- */

static float dot(const float *a, const float *b, size_t n)
{
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Row by row: row j read once through the view, then for every head h its score against the key
 * columns of h's group and one online-softmax step with the value columns; o holds the heads'
 * accumulators until the last row. */
int kvl_attend_ref(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows, const kvl_attend_rows *r,
                   float scale, const float *sigma, const kvl_attend_then *then)
{
    const size_t Gq = Hq / r->groups;
    kvl_online *st = malloc((Hq ? Hq : 1) * sizeof *st);
    float *row = malloc((r->stride ? r->stride : 1) * sizeof *row);
    int rc = st && row ? KVL_OK : kvl_fail(KVL_ENOMEM, "kvl_attend: out of memory for %zu heads", Hq);
    for (size_t h = 0; h < Hq && rc == KVL_OK; h++)
        kvl_online_start(&st[h], o + h * r->Dv, r->Dv, sigma ? sigma[h] : -INFINITY);
    for (size_t j = 0; j < r->N && rc == KVL_OK; j++) {
        const float *x = rows->tile(row, rows, j, 1);
        if (!x) rc = KVL_EINVAL;
        for (size_t h = 0; x && h < Hq; h++) {
            const size_t g = h / Gq;
            const float s = scale * dot(q + h * r->Dk, x + r->k_off + g * r->Dk, r->Dk);
            kvl_online_step(&st[h], o + h * r->Dv, s, x + r->v_off + g * r->Dv, r->Dv);
        }
    }
    for (size_t h = 0; h < Hq && rc == KVL_OK; h++) kvl_online_finish(o + h * r->Dv, &st[h], o + h * r->Dv, r->Dv);
    if (rc == KVL_OK && then) then->run(o, Hq, r->Dv, then->ctx);
    free(st);
    free(row);
    return rc;
}

/* ---- a chunk, one head, a block of queries at a time ----------------------------------------------- */

int kvl_chunk_mask_too_wide(size_t first, size_t b, size_t n, size_t N)
{
    return kvl_fail(KVL_EINVAL, "kvl_attend_chunk_head: the mask of queries %zu … %zu sees %zu of %zu keys", first,
                    first + b - 1, n, N);
}

int kvl_attend_chunk_head(float *o, const float *q, const float *k, const float *v, const kvl_chunk_head *c)
{
    if (!o || !q || !k || !v || !c || !c->mask.rows) return kvl_fail(KVL_EINVAL, "%s: NULL array or mask", __func__);
    const size_t most = c->N > c->ldq ? c->N : c->ldq;
    if (most > (size_t)BLASINT_MAX || c->ldo > (size_t)BLASINT_MAX || c->Dk > c->ldq || c->Dv > c->ldo)
        return kvl_fail(KVL_EINVAL, "%s: %zu keys, rows of %zu and %zu for widths %zu and %zu", __func__, c->N, c->ldq,
                        c->ldo, c->Dk, c->Dv);
    return c->S ? kvl_backend_in_use()->attend_chunk_head(o, q, k, v, c) : KVL_OK;
}

/* s[b][n] ← the softmax of each row of scale·s + mask (kvl_softmax_f32: a row masked whole gives zeros,
 * a NaN score a NaN row). */
static void softmax_masked_rows(float *s, const float *mask, size_t b, size_t n, float scale)
{
    for (size_t i = 0; i < b * n; i++) s[i] = s[i] * scale + mask[i];
    for (size_t r = 0; r < b; r++) kvl_softmax_f32(s + r * n, n);
}

int kvl_attend_chunk_head_ref(float *o, const float *q, const float *k, const float *v, const kvl_chunk_head *c)
{
    const size_t B = c->S < KVL_QUERY_BLOCK ? c->S : KVL_QUERY_BLOCK;
    float *q_b = malloc(B * (c->Dk + 2 * c->N + c->Dv) * sizeof *q_b);
    if (!q_b) return kvl_fail(KVL_ENOMEM, "kvl_attend_chunk_head: out of memory for %zu scores", B * c->N);
    float *s = q_b + B * c->Dk, *mask = s + B * c->N, *o_b = mask + B * c->N;
    int rc = KVL_OK;
    for (size_t first = 0; first < c->S && rc == KVL_OK; first += B) {
        const size_t b = c->S - first < B ? c->S - first : B, n = c->mask.rows(mask, first, b, c->N, c->mask.ctx);
        if (n > c->N) {
            rc = kvl_chunk_mask_too_wide(first, b, n, c->N);
            break;
        }
        kvl_copy_block(q_b, c->Dk, q + first * c->ldq, c->ldq, b, c->Dk);
        rc = kvl_matmul_abt_f32(s, q_b, k, b, n, c->Dk);
        softmax_masked_rows(s, mask, b, n, c->scale);
        if (rc == KVL_OK) rc = kvl_matmul_ab_f32(o_b, s, v, b, c->Dv, n);
        kvl_copy_block(o + first * c->ldo, c->ldo, o_b, c->Dv, b, c->Dv);
    }
    free(q_b);
    return rc;
}
