#include "index_scan.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "backend.h"
#include "status.h"

/* The most keys a backend puts in one product against a query's heads (cpu/index_scan_cpu.h's tile). */
#define PRODUCT_KEYS 1024

int kvl_index_scores_check(const char *fn, const float *I, const float *q, const float *w, const kvl_row_tiles *k,
                           size_t HI, size_t M)
{
    if (!I || !q || !w || !k || !k->tile) return kvl_fail(KVL_EINVAL, "%s: NULL array", fn);
    if (!HI || !k->width) return kvl_fail(KVL_EINVAL, "%s: %zu index heads of %zu channels", fn, HI, k->width);
    if (HI > INT_MAX / PRODUCT_KEYS || k->width > INT_MAX)
        return kvl_fail(KVL_EINVAL, "%s: %zu index heads of %zu channels exceed the BLAS integer", fn, HI, k->width);
    if (!M) return kvl_fail(KVL_EINVAL, "%s: compression ratio 0", fn);
    return KVL_OK;
}

int kvl_index_scores_listed_check(const char *fn, const float *I, const float *q, const float *w,
                                  const kvl_row_tiles *k, size_t HI, const int32_t *at, size_t n)
{
    KVL_TRY(kvl_index_scores_check(fn, I, q, w, k, HI, 1));
    if (n && !at) return kvl_fail(KVL_EINVAL, "%s: NULL list", fn);
    for (size_t j = 0; j < n; j++)
        if (at[j] < 0 || (size_t)at[j] >= k->N)
            return kvl_fail(KVL_EINVAL, "%s: listed key %d (entry %zu of the list) outside 0 … %zu", fn, at[j], j,
                            k->N ? k->N - 1 : 0);
    return KVL_OK;
}

int kvl_index_scores(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t S, size_t HI,
                     size_t start, size_t M)
{
    KVL_TRY(kvl_index_scores_check(__func__, I, q, w, k, HI, M));
    return kvl_backend_in_use()->index_scores(I, q, w, k, S, HI, start, M);
}

int kvl_index_scores_listed(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t HI,
                            const int32_t *at, size_t n)
{
    KVL_TRY(kvl_index_scores_listed_check(__func__, I, q, w, k, HI, at, n));
    return kvl_backend_in_use()->index_scores_listed(I, q, w, k, HI, at, n);
}

/* ---- the definition ---------------------------------------------------------------------------- */

/* Σ_j w_j · ReLU(q_j · key) over the HI heads q[HI][DI], summed in float in j order. */
static float weighed_score(const float *q, const float *w, const float *key, size_t HI, size_t DI)
{
    float I = 0.0f;
    for (size_t j = 0; j < HI; j++) {
        float dot = 0.0f;
        for (size_t c = 0; c < DI; c++) dot += q[j * DI + c] * key[c];
        I += w[j] * (dot > 0.0f ? dot : 0.0f);
    }
    return I;
}

/* Key by key: key s read once, then every query's score for it (−∞ where the query cannot see it yet). */
int kvl_index_scores_ref(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t S, size_t HI,
                         size_t start, size_t M)
{
    const size_t N = k->N, DI = k->width;
    float *buf = malloc(DI * sizeof *buf);
    if (!buf) return kvl_fail(KVL_ENOMEM, "kvl_index_scores: out of memory for a key of %zu", DI);
    int rc = KVL_OK;
    for (size_t s = 0; s < N && rc == KVL_OK; s++) {
        const float *key = k->tile(buf, k, s, 1);
        if (!key) rc = KVL_EINVAL;
        for (size_t i = 0; key && i < S; i++) {
            const int seen = s < (start + i + 1) / M;
            I[i * N + s] = seen ? weighed_score(q + i * HI * DI, w + i * HI, key, HI, DI) : -INFINITY;
        }
    }
    free(buf);
    return rc;
}

int kvl_index_scores_listed_ref(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t HI,
                                const int32_t *at, size_t n)
{
    const size_t DI = k->width;
    for (size_t s = 0; s < k->N; s++) I[s] = -INFINITY;
    float *buf = malloc(DI * sizeof *buf);
    if (!buf) return kvl_fail(KVL_ENOMEM, "kvl_index_scores_listed: out of memory for a key of %zu", DI);
    int rc = KVL_OK;
    for (size_t j = 0; j < n && rc == KVL_OK; j++) {
        const float *key = k->tile(buf, k, (size_t)at[j], 1);
        if (key) I[at[j]] = weighed_score(q, w, key, HI, DI);
        else rc = KVL_EINVAL;
    }
    free(buf);
    return rc;
}
