#include "rope.h"

#include "status.h"

#include <math.h>

/* ---- frequency tables --------------------------------------------------------------------------- */

static int check_width(const char *fn, size_t Dr, double base)
{
    if (Dr < 2 || Dr % 2 != 0)
        return kvl_fail(KVL_EINVAL, "%s: rotary width Dr = %zu must be even and at least 2", fn, Dr);
    if (!(base > 1.0) || !isfinite(base))
        return kvl_fail(KVL_EINVAL, "%s: rope base %g must be finite and greater than 1", fn, base);
    return KVL_OK;
}

/* DeepSeek-V3 inference/model.py, precompute_freqs_cis: 1/(base ** (arange(0, Dr, 2, float32)/Dr)), all in
 * float32; base is rounded to float32 first, as the reference's float32 pow sees it. */
static void plain_freqs(float *theta, size_t Dr, double base)
{
    const double base_f32 = (double)(float)base;
    for (size_t i = 0; i < Dr / 2; i++) {
        const float e = (float)(2 * i) / (float)Dr;
        const float p = (float)pow(base_f32, (double)e);
        theta[i] = 1.0f / p;
    }
}

int kvl_rope_freqs(float *theta, size_t Dr, double base)
{
    int rc = check_width(__func__, Dr, base);
    if (rc != KVL_OK) return rc;
    plain_freqs(theta, Dr, base);
    return KVL_OK;
}

/* DeepSeek-V3 inference/model.py, find_correction_dim: the pair index whose wavelength fits n_rot rotations in
 * L_orig. */
static double correction_dim(double n_rot, size_t Dr, double base, double L_orig)
{
    return (double)Dr * log(L_orig / (n_rot * 2 * M_PI)) / (2 * log(base));
}

static int check_yarn(const char *fn, size_t Dr, double base, double L_orig, double beta_fast, double beta_slow)
{
    int rc = check_width(fn, Dr, base);
    if (rc != KVL_OK) return rc;
    if (!(L_orig > 0.0) || !isfinite(L_orig))
        return kvl_fail(KVL_EINVAL, "%s: original length L_orig = %g must be finite and positive", fn, L_orig);
    if (!(beta_slow > 0.0) || !(beta_fast >= beta_slow) || !isfinite(beta_fast))
        return kvl_fail(KVL_EINVAL, "%s: need 0 < beta_slow <= beta_fast, got beta_fast %g, beta_slow %g", fn,
                        beta_fast, beta_slow);
    return KVL_OK;
}

/* DeepSeek-V3 inference/model.py, find_correction_range, plus linear_ramp_factor's bump of an empty range. */
static void yarn_range(double *lo, double *hi, size_t Dr, double base, double L_orig, double beta_fast,
                       double beta_slow)
{
    *lo = fmax(floor(correction_dim(beta_fast, Dr, base, L_orig)), 0.0);
    *hi = fmin(ceil(correction_dim(beta_slow, Dr, base, L_orig)), (double)(Dr - 1));
    if (*lo == *hi) *hi += 0.001;
}

int kvl_yarn_range(double *lo, double *hi, size_t Dr, double base, double L_orig, double beta_fast,
                   double beta_slow)
{
    int rc = check_yarn(__func__, Dr, base, L_orig, beta_fast, beta_slow);
    if (rc != KVL_OK) return rc;
    yarn_range(lo, hi, Dr, base, L_orig, beta_fast, beta_slow);
    return KVL_OK;
}

/* DeepSeek-V3 inference/model.py, precompute_freqs_cis, YaRN branch, in its float32 order of operations:
 *   ramp = clamp((arange(Dr/2) − lo)/(hi − lo), 0, 1); smooth = 1 − ramp;
 *   θ' = θ/factor·(1 − smooth) + θ·smooth */
static void yarn_freqs(float *theta, size_t Dr, double base, double factor, double L_orig, double beta_fast,
                       double beta_slow)
{
    double lo, hi;
    yarn_range(&lo, &hi, Dr, base, L_orig, beta_fast, beta_slow);
    plain_freqs(theta, Dr, base);
    const float lo_f = (float)lo, span = (float)(hi - lo), factor_f = (float)factor;
    for (size_t i = 0; i < Dr / 2; i++) {
        const float ramp = fminf(fmaxf(((float)i - lo_f) / span, 0.0f), 1.0f);
        const float smooth = 1.0f - ramp;
        theta[i] = theta[i] / factor_f * (1.0f - smooth) + theta[i] * smooth;
    }
}

int kvl_yarn_freqs(float *theta, size_t Dr, double base, double factor, double L_orig, double beta_fast,
                   double beta_slow)
{
    int rc = check_yarn(__func__, Dr, base, L_orig, beta_fast, beta_slow);
    if (rc != KVL_OK) return rc;
    if (!(factor >= 1.0) || !isfinite(factor))
        return kvl_fail(KVL_EINVAL, "%s: YaRN factor %g must be finite and at least 1", __func__, factor);
    yarn_freqs(theta, Dr, base, factor, L_orig, beta_fast, beta_slow);
    return KVL_OK;
}

/* DeepSeek-V3 inference/model.py, ModelArgs and MLA: mscale = 0.1·mscale·ln(factor) + 1 (HF yarn_get_mscale: 1
 * for factor ≤ 1). */
double kvl_yarn_mscale(double factor, double mscale)
{
    if (factor <= 1.0) return 1.0;
    return 0.1 * mscale * log(factor) + 1.0;
}

double kvl_yarn_softmax_scale(size_t d_qk, double factor, double mscale)
{
    const double m = kvl_yarn_mscale(factor, mscale);
    return pow((double)d_qk, -0.5) * m * m;
}

static int check_capacity(const char *fn, size_t Dr)
{
    if (Dr > KVL_ROPE_MAX_DR)
        return kvl_fail(KVL_EINVAL, "%s: rotary width Dr = %zu exceeds KVL_ROPE_MAX_DR = %d", fn, Dr,
                        KVL_ROPE_MAX_DR);
    return KVL_OK;
}

int kvl_rope_init(kvl_rope *r, size_t Dr, double base)
{
    int rc = check_capacity(__func__, Dr);
    if (rc != KVL_OK) return rc;
    rc = kvl_rope_freqs(r->theta, Dr, base);
    if (rc != KVL_OK) return rc;
    r->Dr = Dr;
    return KVL_OK;
}

int kvl_rope_init_yarn(kvl_rope *r, size_t Dr, double base, double factor, double L_orig, double beta_fast,
                       double beta_slow)
{
    int rc = check_capacity(__func__, Dr);
    if (rc != KVL_OK) return rc;
    rc = kvl_yarn_freqs(r->theta, Dr, base, factor, L_orig, beta_fast, beta_slow);
    if (rc != KVL_OK) return rc;
    r->Dr = Dr;
    return KVL_OK;
}

/* ---- rotation ------------------------------------------------------------------------------------ */

/* Pair i is channels (i·step, i·step + mate): interleaved step 2, mate 1; half-split step 1, mate Dr/2.
 * pos is a double so the inverse can pass −pos without overflowing INT64_MIN; (−p)·θ = −(p·θ) exactly.
 * Each output is one explicit fused multiply-add over one rounded product, a·cos − b·sin =
 * fma(a, cos, −(b·sin)): the compiler has nothing left to fuse, so every caller (one vector, rows,
 * either pairing) gets the same bits for the same pair whatever the -march flags, and a kernel that
 * writes the same fmaf gets them too, given the same cos and sin.
 *
 * turn_f32 turns x's pairs by the angles of cos c[half] and sin s[half]. On x86-64 it is built twice
 * and the machine picks at load: with FMA the fmaf is one instruction, without it a call to libm's; the
 * bits are the same (fmaf is exact either way), the first three times faster (a token's 64 heads of V4:
 * 15 µs → 5; computing the angles once for the heads, not per head, took it from 70 µs to 15). Other
 * machines (ARMv8 has FMA in its base set) build it once. */
#if defined(__x86_64__) && defined(__GNUC__)
#define FMA_CLONES __attribute__((target_clones("fma", "default")))
#else
#define FMA_CLONES
#endif

FMA_CLONES
static void turn_f32(float *x, const float *c, const float *s, size_t half, size_t step, size_t mate)
{
    for (size_t i = 0; i < half; i++) {
        float *a = x + i * step, *b = a + mate;
        const float u = *a, v = *b;
        *a = fmaf(u, c[i], -(v * s[i]));
        *b = fmaf(u, s[i], v * c[i]);
    }
}

/* c[Dr/2], s[Dr/2]: cos and sin of each pair's angle at pos, rounded to float. */
static void angles_f32(float *c, float *s, const kvl_rope *r, double pos)
{
    for (size_t i = 0; i < r->Dr / 2; i++) {
        const double angle = pos * (double)r->theta[i];
        c[i] = (float)cos(angle);
        s[i] = (float)sin(angle);
    }
}

/* n vectors x + k·stride at one position: the angles once, the pairs of each vector turned by them. */
static void rotate_f32_n(float *x, size_t n, size_t stride, const kvl_rope *r, double pos, size_t step,
                         size_t mate)
{
    float c[KVL_ROPE_MAX_DR / 2], s[KVL_ROPE_MAX_DR / 2];
    angles_f32(c, s, r, pos);
    for (size_t k = 0; k < n; k++) turn_f32(x + k * stride, c, s, r->Dr / 2, step, mate);
}

static void rotate_f32(float *x, const kvl_rope *r, double pos, size_t step, size_t mate)
{
    rotate_f32_n(x, 1, 0, r, pos, step, mate);
}

static void rotate_f64(double *x, const kvl_rope *r, double pos, size_t step, size_t mate)
{
    for (size_t i = 0; i < r->Dr / 2; i++) {
        const double angle = pos * (double)r->theta[i];
        const double c = cos(angle), s = sin(angle);
        double *a = x + i * step, *b = a + mate;
        const double u = *a, v = *b;
        *a = fma(u, c, -(v * s));
        *b = fma(u, s, v * c);
    }
}

void kvl_rope_rotate_interleaved(float *x, const kvl_rope *r, int64_t pos)
{
    rotate_f32(x, r, (double)pos, 2, 1);
}

void kvl_rope_unrotate_interleaved(float *x, const kvl_rope *r, int64_t pos)
{
    rotate_f32(x, r, -(double)pos, 2, 1);
}

void kvl_rope_rotate_half_split(float *x, const kvl_rope *r, int64_t pos)
{
    rotate_f32(x, r, (double)pos, 1, r->Dr / 2);
}

void kvl_rope_unrotate_half_split(float *x, const kvl_rope *r, int64_t pos)
{
    rotate_f32(x, r, -(double)pos, 1, r->Dr / 2);
}

void kvl_rope_rotate_interleaved_f64(double *x, const kvl_rope *r, int64_t pos)
{
    rotate_f64(x, r, (double)pos, 2, 1);
}

void kvl_rope_unrotate_interleaved_f64(double *x, const kvl_rope *r, int64_t pos)
{
    rotate_f64(x, r, -(double)pos, 2, 1);
}

void kvl_rope_rotate_half_split_f64(double *x, const kvl_rope *r, int64_t pos)
{
    rotate_f64(x, r, (double)pos, 1, r->Dr / 2);
}

void kvl_rope_unrotate_half_split_f64(double *x, const kvl_rope *r, int64_t pos)
{
    rotate_f64(x, r, -(double)pos, 1, r->Dr / 2);
}

/* x[T][stride], H vectors a row at offset + h·head_stride; row t at position start + t, or at −(start + t)
 * when sign is −1 (the inverse). */
static void rotate_rows_f32(float *x, size_t T, size_t stride, size_t offset, size_t H, size_t head_stride,
                            const kvl_rope *r, int64_t start, double sign, size_t step, size_t mate)
{
    for (size_t t = 0; t < T; t++)
        rotate_f32_n(x + t * stride + offset, H, head_stride, r, sign * (double)(start + (int64_t)t), step, mate);
}

void kvl_rope_rotate_rows_interleaved(float *x, size_t T, size_t stride, size_t offset, const kvl_rope *r,
                                      int64_t start)
{
    rotate_rows_f32(x, T, stride, offset, 1, 0, r, start, 1.0, 2, 1);
}

void kvl_rope_unrotate_rows_interleaved(float *x, size_t T, size_t stride, size_t offset, const kvl_rope *r,
                                        int64_t start)
{
    rotate_rows_f32(x, T, stride, offset, 1, 0, r, start, -1.0, 2, 1);
}

void kvl_rope_rotate_rows_half_split(float *x, size_t T, size_t stride, size_t offset, const kvl_rope *r,
                                     int64_t start)
{
    rotate_rows_f32(x, T, stride, offset, 1, 0, r, start, 1.0, 1, r->Dr / 2);
}

void kvl_rope_unrotate_rows_half_split(float *x, size_t T, size_t stride, size_t offset, const kvl_rope *r,
                                       int64_t start)
{
    rotate_rows_f32(x, T, stride, offset, 1, 0, r, start, -1.0, 1, r->Dr / 2);
}

void kvl_rope_rotate_heads_interleaved(float *x, size_t T, size_t stride, size_t offset, size_t H,
                                       size_t head_stride, const kvl_rope *r, int64_t start)
{
    rotate_rows_f32(x, T, stride, offset, H, head_stride, r, start, 1.0, 2, 1);
}

void kvl_rope_unrotate_heads_interleaved(float *x, size_t T, size_t stride, size_t offset, size_t H,
                                         size_t head_stride, const kvl_rope *r, int64_t start)
{
    rotate_rows_f32(x, T, stride, offset, H, head_stride, r, start, -1.0, 2, 1);
}

void kvl_rope_rotate_heads_half_split(float *x, size_t T, size_t stride, size_t offset, size_t H,
                                      size_t head_stride, const kvl_rope *r, int64_t start)
{
    rotate_rows_f32(x, T, stride, offset, H, head_stride, r, start, 1.0, 1, r->Dr / 2);
}
