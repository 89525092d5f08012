#include "v41_compressor.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "linalg.h"
#include "norm.h"
#include "status.h"

int v41_compressor_config_check(const v41_compressor_config *c)
{
    if (!c) return kvl_fail(KVL_EINVAL, "v41 compressor: config is NULL");
    if (c->d == 0 || c->width == 0 || c->ratio == 0)
        return kvl_fail(KVL_EINVAL, "v41 compressor: d (%zu), width (%zu) and ratio (%zu) must be positive", c->d,
                        c->width, c->ratio);
    if (!isfinite(c->norm_eps) || c->norm_eps < 0)
        return kvl_fail(KVL_EINVAL, "v41 compressor: norm_eps %g must be finite and non-negative", c->norm_eps);
    return KVL_OK;
}

/* L[c] = Σ_r α_r a[r] with α = softmax over the M rows of z, per channel (z unused for M = 1). */
static void pool_block(float *L, const float *a, const float *z, size_t M, size_t c)
{
    for (size_t ch = 0; ch < c; ch++) {
        if (M == 1) {
            L[ch] = a[ch];
            continue;
        }
        double mu = -INFINITY, den = 0, num = 0;
        for (size_t r = 0; r < M; r++) mu = fmax(mu, z[r * c + ch]);
        for (size_t r = 0; r < M; r++) {
            const double e = exp(z[r * c + ch] - mu);
            den += e;
            num += e * a[r * c + ch];
        }
        L[ch] = (float)(num / den);
    }
}

/* a[S][c] = W_C x, z[S][c] = W_Z x (M > 1). */
static int project(float *a, float *z, const v41_compressor_config *c, const v41_compressor_weights *w,
                   const float *x, size_t S)
{
    int rc = kvl_matmul_abt_f32(a, x, w->w_c, S, c->width, c->d);
    if (rc == KVL_OK && c->ratio > 1) rc = kvl_matmul_abt_f32(z, x, w->w_z, S, c->width, c->d);
    return rc;
}

static int check(const char *fn, const v41_compressor_config *c, const v41_compressor_weights *w)
{
    int rc = v41_compressor_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    if (!w || !w->w_c || !w->norm || (c->ratio > 1 && !w->w_z))
        return kvl_fail(KVL_EINVAL, "%s: missing weights", fn);
    return KVL_OK;
}

int v41_compressor_forward(float *L, const v41_compressor_config *c, const v41_compressor_weights *w,
                            const float *x, size_t T)
{
    int rc = check(__func__, c, w);
    if (rc != KVL_OK) return rc;
    const size_t M = c->ratio, cw = c->width, N = T / M;
    if (N == 0) return KVL_OK;
    if (N * M > SIZE_MAX / sizeof(float) / cw / 2) return kvl_fail(KVL_EINVAL, "%s: %zu tokens overflow", __func__, T);
    float *a = malloc(2 * N * M * cw * sizeof *a);
    if (!a) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu tokens", __func__, T);
    float *z = a + N * M * cw;
    rc = project(a, z, c, w, x, N * M);
    for (size_t i = 0; i < N && rc == KVL_OK; i++) pool_block(L + i * cw, a + i * M * cw, z + i * M * cw, M, cw);
    if (rc == KVL_OK) kvl_rmsnorm_f32(L, L, w->norm, N, cw, c->norm_eps);
    free(a);
    return rc;
}

int v41_compressor_state_init(v41_compressor_state *s, const v41_compressor_config *c)
{
    memset(s, 0, sizeof *s);
    int rc = v41_compressor_config_check(c);
    if (rc != KVL_OK) return rc;
    if (c->ratio > SIZE_MAX / sizeof(float) / c->width / 2)
        return kvl_fail(KVL_EINVAL, "v41_compressor_state_init: %zu x %zu overflows", c->ratio, c->width);
    s->a = calloc(2 * c->ratio * c->width, sizeof *s->a);
    if (!s->a) return kvl_fail(KVL_ENOMEM, "v41_compressor_state_init: out of memory");
    s->z = s->a + c->ratio * c->width;
    s->M = c->ratio;
    s->c = c->width;
    return KVL_OK;
}

void v41_compressor_state_free(v41_compressor_state *s)
{
    free(s->a);
    memset(s, 0, sizeof *s);
}

size_t v41_compressor_state_bytes(const v41_compressor_state *s)
{
    return s->a ? 2 * s->M * s->c * sizeof(float) : 0;
}

int v41_compressor_push(float *L, size_t *n_new, const v41_compressor_config *c,
                         const v41_compressor_weights *w, v41_compressor_state *s, const float *x, size_t S)
{
    int rc = check(__func__, c, w);
    if (rc != KVL_OK) return rc;
    if (!s->a || s->M != c->ratio || s->c != c->width)
        return kvl_fail(KVL_EINVAL, "%s: the state was not made for this compressor", __func__);
    const size_t M = c->ratio, cw = c->width;
    *n_new = 0;
    if (S == 0) return KVL_OK;
    if (S > SIZE_MAX / sizeof(float) / cw / 2) return kvl_fail(KVL_EINVAL, "%s: %zu tokens overflow", __func__, S);
    float *a = malloc(2 * S * cw * sizeof *a);
    if (!a) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu tokens", __func__, S);
    float *z = a + S * cw;
    rc = project(a, z, c, w, x, S);
    for (size_t i = 0; i < S && rc == KVL_OK; i++, s->pos++) {
        const size_t r = s->pos % M;
        memcpy(s->a + r * cw, a + i * cw, cw * sizeof *a);
        if (M > 1) memcpy(s->z + r * cw, z + i * cw, cw * sizeof *z);
        if (r + 1 < M) continue;
        pool_block(L + *n_new * cw, s->a, s->z, M, cw);
        kvl_rmsnorm_f32(L + *n_new * cw, L + *n_new * cw, w->norm, 1, cw, c->norm_eps);
        ++*n_new;
    }
    free(a);
    return rc;
}
