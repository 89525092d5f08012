#include "v4_compressor.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "linalg.h"
#include "norm.h"
#include "status.h"
#include "v4_rope.h"

/* ---- config and weights ---------------------------------------------------------------------------- */

int v4_compressor_config_check(const v4_compressor_config *c)
{
    if (!c) return kvl_fail(KVL_EINVAL, "v4 compressor: config is NULL");
    if (c->d == 0 || c->width == 0 || c->ratio == 0)
        return kvl_fail(KVL_EINVAL, "v4 compressor: d (%zu), width (%zu) and ratio (%zu) must be positive", c->d,
                        c->width, c->ratio);
    if (c->overlap > 1) return kvl_fail(KVL_EINVAL, "v4 compressor: overlap must be 0 or 1, got %zu", c->overlap);
    if (c->rope.Dr < 2 || c->rope.Dr > c->width)
        return kvl_fail(KVL_EINVAL, "v4 compressor: rotary width %zu must lie in 2..width (%zu)", c->rope.Dr,
                        c->width);
    if (!(c->norm_eps >= 0.0) || !isfinite(c->norm_eps))
        return kvl_fail(KVL_EINVAL, "v4 compressor: norm_eps must be finite and non-negative, got %g", c->norm_eps);
    const size_t wide = (1 + c->overlap) * c->width;
    if (wide > SIZE_MAX / sizeof(float) / c->d || wide > SIZE_MAX / sizeof(float) / c->ratio / 2)
        return kvl_fail(KVL_EINVAL, "v4 compressor: width %zu, ratio %zu and d %zu overflow", c->width, c->ratio, c->d);
    return KVL_OK;
}

void v4_compressor_weight_table(v4_weight *t, v4_compressor_weights *w, const v4_compressor_config *c)
{
    const size_t wide = (1 + c->overlap) * c->width;
    t[0] = (v4_weight){&w->w_kv, wide, c->d, V4_DRAW_MATRIX};
    t[1] = (v4_weight){&w->w_gate, wide, c->d, V4_DRAW_MATRIX};
    t[2] = (v4_weight){&w->ape, c->ratio, wide, V4_DRAW_LOGIT};
    t[3] = (v4_weight){&w->norm, 1, c->width, V4_DRAW_GAIN};
}

size_t v4_compressor_entries(const v4_compressor_config *c, size_t T) { return c->ratio ? T / c->ratio : 0; }

static int check_call(const char *fn, const v4_compressor_config *c, const v4_compressor_weights *w)
{
    int rc = v4_compressor_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    if (!w || !w->w_kv || !w->w_gate || !w->ape || !w->norm) return kvl_fail(KVL_EINVAL, "%s: NULL weights", fn);
    return KVL_OK;
}

/* ---- the pieces both forms share -------------------------------------------------------------------- */

/* a[S][(1+ov)c] = W_C x, z[S][(1+ov)c] = W_Z x + B_{(pos+i) mod M} for x[S][d] at positions pos … */
static int project(float *a, float *z, const v4_compressor_config *c, const v4_compressor_weights *w,
                   const float *x, size_t S, size_t pos)
{
    const size_t wide = (1 + c->overlap) * c->width;
    KVL_TRY(kvl_matmul_abt_f32(a, x, w->w_kv, S, wide, c->d));
    KVL_TRY(kvl_matmul_abt_f32(z, x, w->w_gate, S, wide, c->d));
    for (size_t i = 0; i < S; i++) {
        const float *b = w->ape + ((pos + i) % c->ratio) * wide;
        for (size_t ch = 0; ch < wide; ch++) z[i * wide + ch] += b[ch];
    }
    return KVL_OK;
}

/* entry[c][ch] = Σ_r softmax_r(z_r[ch])·a_r[ch] over n slots; slot r reads a_rows[r][0 … c−1] and
 * z_rows[r][0 … c−1] (pointers already at the slot's channel half). A gate of −∞ weighs exactly 0. */
static void pool(float *entry, const float *const *a_rows, const float *const *z_rows, size_t n, size_t c)
{
    for (size_t ch = 0; ch < c; ch++) {
        double mu = -INFINITY;
        for (size_t r = 0; r < n; r++) mu = fmax(mu, (double)z_rows[r][ch]);
        double den = 0, num = 0;
        for (size_t r = 0; r < n; r++) {
            if (z_rows[r][ch] == -INFINITY) continue;
            const double e = exp((double)z_rows[r][ch] - mu);
            den += e;
            num += e * (double)a_rows[r][ch];
        }
        entry[ch] = (float)(num / den);
    }
}

/* entries[n][c] ← RMSNorm with gain, then the trailing Dr channels of entry k rotated at
 * (first + k)·M + rope_offset. */
static void finish(float *entries, const v4_compressor_config *c, const v4_compressor_weights *w, size_t n,
                   size_t first, int64_t rope_offset)
{
    kvl_rmsnorm_f32(entries, entries, w->norm, n, c->width, c->norm_eps);
    for (size_t k = 0; k < n; k++)
        v4_rotate_heads(entries + k * c->width, 1, 1, c->width, &c->rope, (int64_t)((first + k) * c->ratio) + rope_offset);
}

/* ---- batched ----------------------------------------------------------------------------------------- */

int v4_compressor_forward(float *entries, const v4_compressor_config *c, const v4_compressor_weights *w,
                          const float *x, size_t T, int64_t rope_offset)
{
    KVL_TRY(check_call(__func__, c, w));
    const size_t M = c->ratio, ov = c->overlap, cw = c->width, wide = (1 + ov) * cw;
    const size_t N = v4_compressor_entries(c, T);
    if (N == 0) return KVL_OK;
    if (!entries || !x) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    const size_t used = N * M;   /* a tail of fewer than M tokens produces no entry */
    if (used > SIZE_MAX / sizeof(float) / wide / 2) return kvl_fail(KVL_EINVAL, "%s: %zu tokens overflow", __func__, T);
    float *a = malloc(2 * used * wide * sizeof *a);
    const float **rows = malloc(2 * (1 + ov) * M * sizeof *rows);
    if (!a || !rows) {
        free(a);
        free(rows);
        return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu tokens", __func__, T);
    }
    float *z = a + used * wide;
    int rc = project(a, z, c, w, x, used, 0);
    for (size_t i = 0; i < N && rc == KVL_OK; i++) {
        const float **ar = rows, **zr = rows + (1 + ov) * M;
        size_t n = 0;
        for (size_t b = 0; b <= ov; b++) {
            if (i + b < ov) continue;   /* block i − 1 of entry 0: absent */
            const size_t block = i + b - ov;
            for (size_t r = 0; r < M; r++, n++) {
                ar[n] = a + (block * M + r) * wide + b * cw;
                zr[n] = z + (block * M + r) * wide + b * cw;
            }
        }
        pool(entries + i * cw, ar, zr, n, cw);
    }
    if (rc == KVL_OK) finish(entries, c, w, N, 0, rope_offset);
    free(a);
    free(rows);
    return rc;
}

/* ---- incremental -------------------------------------------------------------------------------------- */

int v4_compressor_state_init(v4_compressor_state *s, const v4_compressor_config *c)
{
    memset(s, 0, sizeof *s);
    int rc = v4_compressor_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "v4_compressor_state_init: %s", kvl_error());
    const size_t rows = (1 + c->overlap) * c->ratio, cols = (1 + c->overlap) * c->width;
    float *kv = malloc(2 * rows * cols * sizeof *kv);
    if (!kv) return kvl_fail(KVL_ENOMEM, "v4_compressor_state_init: out of memory for %zu x %zu", rows, cols);
    memset(kv, 0, rows * cols * sizeof *kv);
    float *gate = kv + rows * cols;
    for (size_t i = 0; i < rows * cols; i++) gate[i] = -INFINITY;
    *s = (v4_compressor_state){.pos = 0, .rows = rows, .cols = cols, .kv = kv, .gate = gate};
    return KVL_OK;
}

void v4_compressor_state_free(v4_compressor_state *s)
{
    free(s->kv);   /* gate is the second half of the same allocation */
    memset(s, 0, sizeof *s);
}

size_t v4_compressor_state_bytes(const v4_compressor_state *s) { return 2 * s->rows * s->cols * sizeof(float); }

/* entry[c] = the pooled (not yet normalised) entry of the block the state has just completed */
static void pool_state(float *entry, const v4_compressor_config *c, const v4_compressor_state *s,
                       const float **rows)
{
    const size_t M = c->ratio, cw = c->width, n = s->rows;
    const float **ar = rows, **zr = rows + n;
    for (size_t r = 0; r < n; r++) {
        const size_t half = r / M;   /* ov = 1: rows 0…M−1 read the first half, rows M…2M−1 the second */
        ar[r] = s->kv + r * s->cols + half * cw;
        zr[r] = s->gate + r * s->cols + half * cw;
    }
    pool(entry, ar, zr, n, cw);
}

int v4_compressor_push(float *entries, size_t *n_new, const v4_compressor_config *c,
                       const v4_compressor_weights *w, v4_compressor_state *s, const float *x, size_t S,
                       int64_t rope_offset)
{
    KVL_TRY(check_call(__func__, c, w));
    const size_t M = c->ratio, ov = c->overlap, cw = c->width, wide = (1 + ov) * cw;
    if (!n_new || !s || !s->kv || s->rows != (1 + ov) * M || s->cols != wide)
        return kvl_fail(KVL_EINVAL, "%s: the state does not belong to this compressor", __func__);
    *n_new = 0;
    if (S == 0) return KVL_OK;
    if (!x || ((s->pos + S) / M > s->pos / M && !entries)) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    if (S > SIZE_MAX / sizeof(float) / wide / 2) return kvl_fail(KVL_EINVAL, "%s: %zu tokens overflow", __func__, S);
    float *a = malloc(2 * S * wide * sizeof *a);
    const float **rows = malloc(2 * s->rows * sizeof *rows);
    if (!a || !rows) {
        free(a);
        free(rows);
        return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu tokens", __func__, S);
    }
    float *z = a + S * wide;
    const size_t first_block = s->pos / M;
    int rc = project(a, z, c, w, x, S, s->pos);
    size_t n = 0;
    for (size_t i = 0; i < S && rc == KVL_OK; i++, s->pos++) {
        const size_t row = ov * M + s->pos % M;
        memcpy(s->kv + row * wide, a + i * wide, wide * sizeof *a);
        memcpy(s->gate + row * wide, z + i * wide, wide * sizeof *z);
        if ((s->pos + 1) % M) continue;
        pool_state(entries + n * cw, c, s, rows);
        n++;
        if (ov) {
            memcpy(s->kv, s->kv + M * wide, M * wide * sizeof *a);
            memcpy(s->gate, s->gate + M * wide, M * wide * sizeof *z);
        }
    }
    if (rc == KVL_OK) {
        finish(entries, c, w, n, first_block, rope_offset);
        *n_new = n;
    }
    free(a);
    free(rows);
    return rc;
}
