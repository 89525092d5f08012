/* Chapter 2: multi-head latent attention (ref/mla.h): cache paths = whole-sequence forward, absorbed = naive,
 * and the RoPE/YaRN it uses.
 *
 * The oracle is the definition of ref/mla.h written below in plain double loops: per-head keys
 * [W_UK^h c_j | k_rope_j] and values W_UV^h c_j, a causal (or banded) mask, softmax, W_O. The module's
 * float32 paths (whole-sequence forward, chunked prefill, naive and absorbed decode) are each held to
 * it row by row; the absorbed and the naive scores and values are held to it piece by piece. The
 * small numpy check of absorption (chapters/02_mla/README.md) is redone in double with the project's rng and compared with
 * numpy's own numbers
 * (tests/data/mla_toy_numpy.txt, written by tests/gen_mla_toy.py).
 *
 * Toy size: d 64, H 4, Dq' 32 (and 0), Dc 32, Dnope 16, Dr 8, Dv 16, T 40; YaRN RoPE with
 * V3's rotary fields at Dr 8 (lo 1, hi 3). Windowed runs use W 8. */
#include "attend_cpu.h"
#include "backend_cpu.h"
#include "common.h"
#include "config.h"
#include "element.h"
#include "grouped.h"
#include "linalg.h"
#include "threads.h"
#include "mla.h"
#include "oracle_attention.h"
#include "rng.h"
#include "softmax.h"
#include "status.h"
#include "swa.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOY_T 40
#define TOY_W 8

/* bf16 keeps 8 significant bits (7 stored): round to nearest moves a value by at most half an ulp,
 * 2^-8 of itself (an ulp at 1 is 2^-7). */
#define BF16_UNIT_ROUNDOFF 0x1p-8

/* The numpy absorption check prints differences at 1e-15; anything algebraically different
 * (a missing W_UK, a transposed head) is off by O(1). */
#define TOY_CHECK_MAX_DIFF 1e-13

/* ---- helpers -------------------------------------------------------------------------------------- */

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    ck_assert(p != NULL);
    return p;
}

static void ok(int rc) { ck_assert_msg(rc == KVL_OK, "status %d: %s", rc, kvl_error()); }

static mla_config toy_config(size_t q_lora_rank, size_t window)
{
    mla_config c = {.d = 64, .n_heads = 4, .q_lora_rank = q_lora_rank, .kv_lora_rank = 32, .qk_nope = 16,
                    .qk_rope = 8, .v_head = 16, .window = window, .norm_eps = 1e-6};
    ok(kvl_rope_init_yarn(&c.rope, 8, 1e4, 40, 4096, 32, 1));
    c.softmax_scale = kvl_yarn_softmax_scale(16 + 8, 40, 1);
    return c;
}

static float *normal_f32(kvl_rng *rng, size_t n)
{
    float *x = xmalloc(n * sizeof *x);
    kvl_rng_normal_f32(rng, x, n, 1.0);
    return x;
}

static double *widen(const float *x, size_t n)
{
    double *y = xmalloc(n * sizeof *y);
    for (size_t i = 0; i < n; i++) y[i] = x[i];
    return y;
}

static double max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        if (isfinite(x[i])) m = fmax(m, fabs(x[i]));
    return m;
}

/* ---- the oracle: ref/mla.h's definition in double ----------------------------------------------------- */

/* The weights widened to double, at the same offsets as the float block. */
typedef struct {
    const mla_config *c;
    double *block;
    const double *w_dq, *q_norm, *w_uq, *w_q, *w_dkv, *kv_norm, *w_ukv, *w_o;
} oracle;

static const double *field(const oracle *o, const mla_weights *w, const float *f)
{
    return f ? o->block + (f - w->block) : NULL;
}

static oracle oracle_of(const mla_config *c, const mla_weights *w)
{
    oracle o = {.c = c, .block = widen(w->block, w->n_floats)};
    o.w_dq = field(&o, w, w->w_dq);
    o.q_norm = field(&o, w, w->q_norm);
    o.w_uq = field(&o, w, w->w_uq);
    o.w_q = field(&o, w, w->w_q);
    o.w_dkv = field(&o, w, w->w_dkv);
    o.kv_norm = field(&o, w, w->kv_norm);
    o.w_ukv = field(&o, w, w->w_ukv);
    o.w_o = field(&o, w, w->w_o);
    return o;
}

/* y[rows] = W[rows][cols] · x[cols] */
static void matvec(double *y, const double *W, const double *x, size_t rows, size_t cols)
{
    for (size_t r = 0; r < rows; r++) {
        double s = 0;
        for (size_t k = 0; k < cols; k++) s += W[r * cols + k] * x[k];
        y[r] = s;
    }
}

static void rmsnorm(double *v, const double *g, size_t n, double eps)
{
    double ms = 0;
    for (size_t i = 0; i < n; i++) ms += v[i] * v[i];
    const double inv = 1.0 / sqrt(ms / (double)n + eps);
    for (size_t i = 0; i < n; i++) v[i] = g[i] * v[i] * inv;
}

/* interleaved pairs (2i, 2i+1) turned by pos·θ_i (DeepSeek-V3 inference/model.py) */
static void rope(double *v, const mla_config *c, size_t pos)
{
    for (size_t i = 0; i < c->qk_rope / 2; i++) {
        const double a = (double)pos * (double)c->rope.theta[i], x = v[2 * i], y = v[2 * i + 1];
        v[2 * i] = x * cos(a) - y * sin(a);
        v[2 * i + 1] = x * sin(a) + y * cos(a);
    }
}

/* q[H][Dnope+Dr] of token x[d] at pos */
static void oracle_query(double *q, const oracle *o, const double *x, size_t pos)
{
    const mla_config *c = o->c;
    const size_t Dqk = c->qk_nope + c->qk_rope, n = c->n_heads * Dqk;
    if (c->q_lora_rank) {
        double *cq = xmalloc(c->q_lora_rank * sizeof *cq);
        matvec(cq, o->w_dq, x, c->q_lora_rank, c->d);
        rmsnorm(cq, o->q_norm, c->q_lora_rank, c->norm_eps);
        matvec(q, o->w_uq, cq, n, c->q_lora_rank);
        free(cq);
    } else {
        matvec(q, o->w_q, x, n, c->d);
    }
    for (size_t h = 0; h < c->n_heads; h++) rope(q + h * Dqk + c->qk_nope, c, pos);
}

/* row[Dc+Dr] = [c_kv | k_rope] of token x[d] at pos */
static void oracle_row(double *row, const oracle *o, const double *x, size_t pos)
{
    const mla_config *c = o->c;
    matvec(row, o->w_dkv, x, c->kv_lora_rank + c->qk_rope, c->d);
    rmsnorm(row, o->kv_norm, c->kv_lora_rank, c->norm_eps);
    rope(row + c->kv_lora_rank, c, pos);
}

static int visible(size_t t, size_t j, size_t W) { return j <= t && (W == 0 || t - j < W); }

/* What the definition gives for x[T][d]: q[T][H][Dqk], rows[T][Dw], scores[T][H][T] (−inf where
 * masked), p (the same, after softmax), o[T][H][Dv] and out[T][d]. */
typedef struct {
    size_t T;
    double *q, *rows, *scores, *p, *o, *out;
} oracle_run;

static void oracle_free(oracle_run *r)
{
    free(r->q); free(r->rows); free(r->scores); free(r->p); free(r->o); free(r->out);
}

/* k[Dnope] = W_UK^h c; v[Dv] = W_UV^h c */
static void up_project(double *k, double *v, const oracle *o, size_t h, const double *c_kv)
{
    const mla_config *c = o->c;
    const double *uk = o->w_ukv + h * (c->qk_nope + c->v_head) * c->kv_lora_rank;
    matvec(k, uk, c_kv, c->qk_nope, c->kv_lora_rank);
    matvec(v, uk + c->qk_nope * c->kv_lora_rank, c_kv, c->v_head, c->kv_lora_rank);
}

static void oracle_attend(oracle_run *r, const oracle *o, size_t t, size_t h)
{
    const mla_config *c = o->c;
    const size_t T = r->T, H = c->n_heads, Dn = c->qk_nope, Dr = c->qk_rope, Dc = c->kv_lora_rank;
    const size_t Dqk = Dn + Dr, Dw = Dc + Dr, Dv = c->v_head;
    const double *q = r->q + (t * H + h) * Dqk;
    double *s = r->scores + (t * H + h) * T, *p = r->p + (t * H + h) * T, *out = r->o + (t * H + h) * Dv;
    double k[256], v[256], mx = -INFINITY;
    for (size_t j = 0; j < T; j++) {
        s[j] = -INFINITY;
        if (!visible(t, j, c->window)) continue;
        const double *row = r->rows + j * Dw;
        up_project(k, v, o, h, row);
        double dot = 0;
        for (size_t i = 0; i < Dn; i++) dot += q[i] * k[i];
        for (size_t i = 0; i < Dr; i++) dot += q[Dn + i] * row[Dc + i];
        s[j] = dot * c->softmax_scale;
        mx = fmax(mx, s[j]);
    }
    double sum = 0;
    for (size_t j = 0; j < T; j++) sum += p[j] = isfinite(s[j]) ? exp(s[j] - mx) : 0.0;
    for (size_t i = 0; i < Dv; i++) out[i] = 0;
    for (size_t j = 0; j < T; j++) {
        p[j] /= sum;
        if (p[j] == 0) continue;
        up_project(k, v, o, h, r->rows + j * Dw);
        for (size_t i = 0; i < Dv; i++) out[i] += p[j] * v[i];
    }
}

static oracle_run oracle_forward(const oracle *o, const float *x, size_t T)
{
    const mla_config *c = o->c;
    const size_t H = c->n_heads, Dqk = c->qk_nope + c->qk_rope, Dw = c->kv_lora_rank + c->qk_rope;
    oracle_run r = {.T = T, .q = xmalloc(T * H * Dqk * sizeof(double)), .rows = xmalloc(T * Dw * sizeof(double)),
                    .scores = xmalloc(T * H * T * sizeof(double)), .p = xmalloc(T * H * T * sizeof(double)),
                    .o = xmalloc(T * H * c->v_head * sizeof(double)), .out = xmalloc(T * c->d * sizeof(double))};
    double *xd = widen(x, T * c->d);
    for (size_t t = 0; t < T; t++) {
        oracle_query(r.q + t * H * Dqk, o, xd + t * c->d, t);
        oracle_row(r.rows + t * Dw, o, xd + t * c->d, t);
    }
    for (size_t t = 0; t < T; t++) {
        for (size_t h = 0; h < H; h++) oracle_attend(&r, o, t, h);
        matvec(r.out + t * c->d, o->w_o, r.o + t * H * c->v_head, c->d, H * c->v_head);
    }
    free(xd);
    return r;
}

/* ---- tolerances ------------------------------------------------------------------------------------ */

/* A float32 dot product over K terms is within K·u (u = FLT_EPSILON/2) of exact, relative to the sum
 * of |terms|; along a path the relative errors of its stages add. Sums of |terms| stay within a small
 * factor of the result's scale for these N(0, 1/K) weights, so each comparison allows FLT_EPSILON times
 * the path's total reduction length, relative to the largest |oracle| element of the array compared.
 * Scores feed a softmax, which turns a logit error δ into a relative weight error of at most 2δ: paths
 * through it are widened by (1 + 2·max|logit|). */
static double path_tol(size_t reduction_length, double max_logit)
{
    return (double)reduction_length * FLT_EPSILON * (1.0 + 2.0 * max_logit);
}

/* stages of one output row: W_DQ (d), W_UQ (Dq'), W_UK (Dc, or Dnope absorbed), the score (Dc+Dr),
 * the weighted sum (N keys), W_UV (Dc), W_O (H·Dv), and the two RMSNorm means (Dq', Dc) */
static size_t out_path(const mla_config *c, size_t N)
{
    return c->d + 2 * c->q_lora_rank + c->kv_lora_rank + c->qk_nope + c->kv_lora_rank + c->qk_rope + N +
           c->kv_lora_rank + c->n_heads * c->v_head + c->kv_lora_rank;
}

static void expect_rows(const char *what, const float *got, const double *want, size_t n, double tol)
{
    kvl_expect_close(what, got, want, n, tol * max_abs(want, n), 0, 1.0 - tol);
}

/* ---- fixtures ----------------------------------------------------------------------------------- */

typedef struct {
    mla_config c;
    mla_weights w;
    float *x;         /* [T][d] */
    oracle o;
    oracle_run want;
    double out_tol;   /* for whole output rows */
} toy;

/* (filled in place: the oracle keeps a pointer to z->c) */
static void toy_setup(toy *z, size_t q_lora_rank, size_t window, size_t T, uint64_t seed)
{
    *z = (toy){.c = toy_config(q_lora_rank, window)};
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ok(mla_weights_init_random(&z->w, &z->c, &rng));
    z->x = normal_f32(&rng, T * z->c.d);
    z->o = oracle_of(&z->c, &z->w);
    z->want = oracle_forward(&z->o, z->x, T);
    z->out_tol = path_tol(out_path(&z->c, T), max_abs(z->want.scores, T * z->c.n_heads * T));
}

static void toy_free(toy *z)
{
    mla_weights_free(&z->w);
    free(z->x);
    free(z->o.block);
    oracle_free(&z->want);
}

/* ---- projections --------------------------------------------------------------------------------- */

static void check_projections(size_t q_lora_rank)
{
    toy z;
    toy_setup(&z, q_lora_rank, 0, TOY_T, 21);
    const size_t H = z.c.n_heads, Dqk = 24, Dw = 40, start = 5, S = TOY_T - start;
    float *q = xmalloc(S * H * Dqk * sizeof *q), *rows = xmalloc(S * Dw * sizeof *rows);
    ok(mla_query(q, &z.c, &z.w, z.x + start * z.c.d, S, start));
    ok(mla_latent(rows, &z.c, &z.w, z.x + start * z.c.d, S, start));
    const double tol_q = path_tol(z.c.d + 2 * q_lora_rank, 0), tol_row = path_tol(z.c.d + z.c.kv_lora_rank, 0);
    expect_rows("query rows 5..39", q, z.want.q + start * H * Dqk, S * H * Dqk, tol_q);
    expect_rows("latent rows 5..39", rows, z.want.rows + start * Dw, S * Dw, tol_row);
    free(q); free(rows);
    toy_free(&z);
}

START_TEST(test_query_and_latent_match_definition)
{
    check_projections(32);
}
END_TEST

START_TEST(test_query_matches_definition_when_q_lora_rank_zero)
{
    check_projections(0);
}
END_TEST

/* ---- absorbed = naive, piece by piece ------------------------------------------------------------ */

/* The last S queries of the toy against all T rows, causal mask written here. */
static void check_scores_and_values(size_t q_lora_rank)
{
    toy z;
    toy_setup(&z, q_lora_rank, 0, TOY_T, 22);
    const size_t T = TOY_T, S = 6, start = T - S, H = z.c.n_heads, Dv = z.c.v_head, Dqk = 24, Dw = 40;
    float *q = xmalloc(S * H * Dqk * sizeof *q), *rows = xmalloc(T * Dw * sizeof *rows);
    float *mask = xmalloc(S * T * sizeof *mask);
    ok(mla_query(q, &z.c, &z.w, z.x + start * z.c.d, S, start));
    ok(mla_latent(rows, &z.c, &z.w, z.x, T, 0));
    for (size_t i = 0; i < S; i++)
        for (size_t j = 0; j < T; j++) mask[i * T + j] = j <= start + i ? 0.0f : -INFINITY;

    /* the oracle on the module's own q and rows, so the comparison isolates the attention */
    oracle_run r = {.T = T, .q = xmalloc(T * H * Dqk * sizeof(double)), .rows = widen(rows, T * Dw),
                    .scores = xmalloc(T * H * T * sizeof(double)), .p = xmalloc(T * H * T * sizeof(double)),
                    .o = xmalloc(T * H * Dv * sizeof(double))};
    for (size_t i = 0; i < S * H * Dqk; i++) r.q[start * H * Dqk + i] = q[i];
    for (size_t t = start; t < T; t++)
        for (size_t h = 0; h < H; h++) oracle_attend(&r, &z.o, t, h);
    const double *want_s = r.scores + start * H * T, *want_p = r.p + start * H * T, *want_o = r.o + start * H * Dv;

    float *naive = xmalloc(S * H * T * sizeof *naive), *absorbed = xmalloc(S * H * T * sizeof *absorbed);
    ok(mla_scores_naive(naive, &z.c, &z.w, q, rows, mask, S, T));
    ok(mla_scores_absorbed(absorbed, &z.c, &z.w, q, rows, mask, S, T));
    /* stages: W_UK (Dc) or the absorption (Dnope), then the Dc+Dr dot */
    const double tol_s = path_tol(z.c.kv_lora_rank + z.c.qk_nope + Dw, 0);
    expect_rows("naive scores", naive, want_s, S * H * T, tol_s);
    expect_rows("absorbed scores", absorbed, want_s, S * H * T, tol_s);
    double *naive_d = widen(naive, S * H * T);
    expect_rows("absorbed scores against naive scores", absorbed, naive_d, S * H * T, 2 * tol_s);

    /* values from the oracle's weights, so both forms sum the same p */
    float *p = xmalloc(S * H * T * sizeof *p), *o_naive = xmalloc(S * H * Dv * sizeof *o_naive);
    float *o_abs = xmalloc(S * H * Dv * sizeof *o_abs);
    for (size_t i = 0; i < S * H * T; i++) p[i] = (float)want_p[i];
    ok(mla_values_naive(o_naive, &z.c, &z.w, p, rows, S, T));
    ok(mla_values_absorbed(o_abs, &z.c, &z.w, p, rows, S, T));
    /* stages: the weights' float rounding, the N-term sum, W_UV (Dc) */
    const double tol_v = path_tol(1 + T + z.c.kv_lora_rank, 0);
    expect_rows("naive values", o_naive, want_o, S * H * Dv, tol_v);
    expect_rows("absorbed values", o_abs, want_o, S * H * Dv, tol_v);

    free(q); free(rows); free(mask); free(naive); free(absorbed); free(naive_d); free(p); free(o_naive); free(o_abs);
    oracle_free(&r);
    toy_free(&z);
}

START_TEST(test_absorbed_scores_and_values_equal_naive)
{
    check_scores_and_values(32);
}
END_TEST

START_TEST(test_absorbed_scores_and_values_equal_naive_when_q_lora_rank_zero)
{
    check_scores_and_values(0);
}
END_TEST

/* ---- whole sequence, prefill, decode against the definition ------------------------------------- */

typedef int (*decode_fn)(float *, const mla_config *, const mla_weights *, mla_cache *, const float *);

/* Prefill the first `prefix` tokens in one chunk, then decode the rest one by one with `decode`;
 * out[T][d]. */
static void run_prefix_then_decode(float *out, const toy *z, size_t T, size_t prefix, decode_fn decode,
                                   kv_store store)
{
    mla_cache cache;
    ok(mla_cache_init(&cache, &z->c, T, store));
    ok(mla_prefill(out, &z->c, &z->w, &cache, z->x, prefix));
    for (size_t t = prefix; t < T; t++) ok(decode(out + t * z->c.d, &z->c, &z->w, &cache, z->x + t * z->c.d));
    ck_assert_uint_eq(cache.ring.len, T);
    mla_cache_free(&cache);
}

static void check_decode_forms(size_t q_lora_rank)
{
    toy z;
    toy_setup(&z, q_lora_rank, 0, TOY_T, 23);
    const size_t n = TOY_T * z.c.d;
    float *naive = xmalloc(n * sizeof *naive), *absorbed = xmalloc(n * sizeof *absorbed);
    run_prefix_then_decode(naive, &z, TOY_T, 0, mla_decode_naive, KV_STORE_F32);
    run_prefix_then_decode(absorbed, &z, TOY_T, 0, mla_decode_absorbed, KV_STORE_F32);
    expect_rows("decode_naive, every token", naive, z.want.out, n, z.out_tol);
    expect_rows("decode_absorbed, every token", absorbed, z.want.out, n, z.out_tol);
    double *naive_d = widen(naive, n);
    expect_rows("decode_absorbed against decode_naive", absorbed, naive_d, n, 2 * z.out_tol);
    free(naive); free(absorbed); free(naive_d);
    toy_free(&z);
}

START_TEST(test_decode_absorbed_matches_decode_naive_and_definition)
{
    check_decode_forms(32);
}
END_TEST

START_TEST(test_decode_absorbed_matches_decode_naive_when_q_lora_rank_zero)
{
    check_decode_forms(0);
}
END_TEST

/* A cache longer than one tile of the CPU backend's attention (cpu/attend_cpu.h), under each backend:
 * the decode steps at N = KVL_ATTEND_TILE − 1 … KVL_ATTEND_TILE + 45 cross the tile boundary, in a
 * float32 and a bf16 ring (the latter against the definition re-run on the bf16-rounded rows). */
static void check_decode_spanning_tiles(void)
{
    toy z;
    const size_t T = KVL_ATTEND_TILE + 45, prefix = KVL_ATTEND_TILE - 2;
    toy_setup(&z, 32, 0, T, 27);
    const size_t d = z.c.d, H = z.c.n_heads, Dw = z.c.kv_lora_rank + z.c.qk_rope, n = (T - prefix) * d;
    float *out = xmalloc(T * d * sizeof *out);
    run_prefix_then_decode(out, &z, T, prefix, mla_decode_absorbed, KV_STORE_F32);
    expect_rows("f32 decode_absorbed across tiles", out + prefix * d, z.want.out + prefix * d, n, z.out_tol);
    oracle_run *r = &z.want;
    for (size_t i = 0; i < T * Dw; i++) r->rows[i] = kvf_bf16_decode(kvf_bf16_encode((float)r->rows[i]));
    for (size_t t = prefix; t < T; t++) {
        for (size_t h = 0; h < H; h++) oracle_attend(r, &z.o, t, h);
        matvec(r->out + t * d, z.o.w_o, r->o + t * H * z.c.v_head, d, H * z.c.v_head);
    }
    run_prefix_then_decode(out, &z, T, prefix, mla_decode_absorbed, KV_STORE_BF16);
    expect_rows("bf16 decode_absorbed across tiles", out + prefix * d, r->out + prefix * d, n, z.out_tol);
    free(out);
    toy_free(&z);
}

START_TEST(test_decode_absorbed_matches_definition_when_cache_spans_tiles)
{
    for (size_t b = 0; kvl_test_backend(b); b++) {
        kvl_backend_use(kvl_test_backend(b));
        check_decode_spanning_tiles();
    }
    kvl_backend_use(NULL);
}
END_TEST

START_TEST(test_forward_matches_definition)
{
    for (size_t qr = 0; qr <= 32; qr += 32) {
        toy z;
        toy_setup(&z, qr, 0, TOY_T, 24);
        float *out = xmalloc(TOY_T * z.c.d * sizeof *out);
        ok(mla_forward(out, &z.c, &z.w, z.x, TOY_T));
        expect_rows(qr ? "forward" : "forward, q_lora_rank 0", out, z.want.out, TOY_T * z.c.d, z.out_tol);
        free(out);
        toy_free(&z);
    }
}
END_TEST

START_TEST(test_prefill_then_decode_matches_forward_when_any_prefix)
{
    static const size_t prefixes[] = {0, 1, 2, 7, 20, 39, 40};
    toy z;
    toy_setup(&z, 32, 0, TOY_T, 25);
    const size_t n = TOY_T * z.c.d;
    float *out = xmalloc(n * sizeof *out);
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        char what[80];
        snprintf(what, sizeof what, "prefill %zu then decode_absorbed", prefixes[i]);
        run_prefix_then_decode(out, &z, TOY_T, prefixes[i], mla_decode_absorbed, KV_STORE_F32);
        expect_rows(what, out, z.want.out, n, z.out_tol);
        snprintf(what, sizeof what, "prefill %zu then decode_naive", prefixes[i]);
        run_prefix_then_decode(out, &z, TOY_T, prefixes[i], mla_decode_naive, KV_STORE_F32);
        expect_rows(what, out, z.want.out, n, z.out_tol);
    }
    free(out);
    toy_free(&z);
}
END_TEST

/* out[T][d] from prefill chunks of the given sizes (summing to T) */
static void run_chunks(float *out, const toy *z, const size_t *sizes, size_t n_chunks, kv_store store)
{
    mla_cache cache;
    size_t T = 0;
    for (size_t i = 0; i < n_chunks; i++) T += sizes[i];
    ok(mla_cache_init(&cache, &z->c, T, store));
    for (size_t i = 0, t = 0; i < n_chunks; t += sizes[i++])
        ok(mla_prefill(out + t * z->c.d, &z->c, &z->w, &cache, z->x + t * z->c.d, sizes[i]));
    mla_cache_free(&cache);
}

static const size_t SPLIT_A[] = {13, 1, 9, 17};         /* edges 13, 14, 23: no multiple of W = 8 */
static const size_t SPLIT_B[] = {3, 5, 3, 11, 1, 1, 16};
static const size_t SPLIT_ONES[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static void check_chunkings(size_t window)
{
    toy z;
    toy_setup(&z, 32, window, TOY_T, 26);
    const size_t n = TOY_T * z.c.d;
    float *out = xmalloc(n * sizeof *out);
    const struct { const char *name; const size_t *sizes; size_t n; } splits[] = {
        {"chunks 13+1+9+17", SPLIT_A, N_OF(SPLIT_A)},
        {"chunks 3+5+3+11+1+1+16", SPLIT_B, N_OF(SPLIT_B)},
        {"40 chunks of 1", SPLIT_ONES, N_OF(SPLIT_ONES)},
        {"one chunk of 40", (const size_t[]){TOY_T}, 1},
    };
    for (size_t i = 0; i < N_OF(splits); i++) {
        char what[96];
        snprintf(what, sizeof what, "%s, W = %zu", splits[i].name, window);
        run_chunks(out, &z, splits[i].sizes, splits[i].n, KV_STORE_F32);
        expect_rows(what, out, z.want.out, n, z.out_tol);
    }
    ok(mla_forward(out, &z.c, &z.w, z.x, TOY_T));
    expect_rows("forward", out, z.want.out, n, z.out_tol);
    free(out);
    toy_free(&z);
}

START_TEST(test_chunked_prefill_matches_forward_when_any_split)
{
    check_chunkings(0);
}
END_TEST

/* MLA behind a window of 8: the ring of ref/swa holds 8 rows, the forward applies the banded mask. */
START_TEST(test_chunked_prefill_matches_banded_forward_when_windowed)
{
    check_chunkings(TOY_W);
}
END_TEST

/* Chunks longer than a query block of mla_attend_naive (ref/mla.h; kvl_attend_chunk_head's blocks):
 * 6·KVL_QUERY_BLOCK + 31 tokens as 10, then one chunk whose blocks straddle the first chunk's end and whose last is partial, then as one chunk;
 * causal and behind the window of 8, on one thread and on two (the heads split between them: the
 * chunk's work is past KVL_SPLIT_MIN_MACS), the products on the CPU backend, which splits them too. */
START_TEST(test_prefill_matches_definition_when_chunk_spans_query_blocks)
{
    const size_t T = 6 * KVL_QUERY_BLOCK + 31;
    const size_t split[] = {10, T - 10}, whole[] = {T};
    const int threads = kvl_threads();
    kvl_backend_use(&kvl_backend_cpu);
    for (size_t window = 0; window <= TOY_W; window += TOY_W) {
        toy z;
        toy_setup(&z, 32, window, T, 29);
        const size_t n = T * z.c.d;
        float *out = xmalloc(n * sizeof *out);
        for (int th = 1; th <= 2; th++) {
            char what[96];
            kvl_set_threads(th);
            run_chunks(out, &z, split, N_OF(split), KV_STORE_F32);
            snprintf(what, sizeof what, "chunks 10+%zu, W = %zu, %d thread(s)", T - 10, window, th);
            expect_rows(what, out, z.want.out, n, z.out_tol);
            run_chunks(out, &z, whole, N_OF(whole), KV_STORE_F32);
            snprintf(what, sizeof what, "one chunk of %zu, W = %zu, %d thread(s)", T, window, th);
            expect_rows(what, out, z.want.out, n, z.out_tol);
        }
        kvl_set_threads(threads);
        free(out);
        toy_free(&z);
    }
}
END_TEST

START_TEST(test_decode_matches_banded_forward_when_windowed)
{
    toy z;
    toy_setup(&z, 32, TOY_W, TOY_T, 27);
    const size_t n = TOY_T * z.c.d;
    float *out = xmalloc(n * sizeof *out);
    static const size_t prefixes[] = {0, 5, 8, 19};
    for (size_t i = 0; i < N_OF(prefixes); i++) {
        char what[80];
        snprintf(what, sizeof what, "W 8, prefill %zu then decode_absorbed", prefixes[i]);
        run_prefix_then_decode(out, &z, TOY_T, prefixes[i], mla_decode_absorbed, KV_STORE_F32);
        expect_rows(what, out, z.want.out, n, z.out_tol);
        snprintf(what, sizeof what, "W 8, prefill %zu then decode_naive", prefixes[i]);
        run_prefix_then_decode(out, &z, TOY_T, prefixes[i], mla_decode_naive, KV_STORE_F32);
        expect_rows(what, out, z.want.out, n, z.out_tol);
    }
    free(out);
    toy_free(&z);
}
END_TEST

START_TEST(test_single_token_matches_definition_when_T_is_1)
{
    for (size_t qr = 0; qr <= 32; qr += 32) {
        toy z;
        toy_setup(&z, qr, 0, 1, 28);
        float out[64];
        ok(mla_forward(out, &z.c, &z.w, z.x, 1));
        expect_rows("forward T = 1", out, z.want.out, z.c.d, z.out_tol);
        run_prefix_then_decode(out, &z, 1, 1, mla_decode_absorbed, KV_STORE_F32);
        expect_rows("prefill T = 1", out, z.want.out, z.c.d, z.out_tol);
        run_prefix_then_decode(out, &z, 1, 0, mla_decode_absorbed, KV_STORE_F32);
        expect_rows("decode_absorbed T = 1", out, z.want.out, z.c.d, z.out_tol);
        run_prefix_then_decode(out, &z, 1, 0, mla_decode_naive, KV_STORE_F32);
        expect_rows("decode_naive T = 1", out, z.want.out, z.c.d, z.out_tol);
        toy_free(&z);
    }
}
END_TEST

/* ---- cache bytes ----------------------------------------------------------------------------------- */

START_TEST(test_cache_bytes_equal_576_b_per_token_at_v3_geometry)
{
    kvl_model m;
    ok(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v3.json")));
    mla_config c;
    ok(mla_config_from_model(&c, &m));
    ck_assert_uint_eq(c.kv_lora_rank + c.qk_rope, 576);
    /* (Dnope + Dr)^-1/2 · m² with DeepSeek-V3's m: 192^-1/2 · 1.368888^2 */
    ck_assert_msg(fabs(c.softmax_scale - 0.1352338) < 5e-8, "V3 softmax scale %.9f", c.softmax_scale);
    const size_t T = 37;
    float *rows = xmalloc(T * 576 * sizeof *rows);
    kvl_rng rng;
    kvl_rng_seed(&rng, 29);
    kvl_rng_normal_f32(&rng, rows, T * 576, 1.0);
    const struct { kv_store store; size_t b; } kinds[] = {{KV_STORE_F32, 4}, {KV_STORE_BF16, 2}};
    for (size_t k = 0; k < N_OF(kinds); k++) {
        mla_cache cache;
        ok(mla_cache_init(&cache, &c, 4096, kinds[k].store));
        ck_assert_uint_eq(mla_cache_bytes_used(&cache), 0);
        for (size_t t = 1; t <= T; t++) {
            ok(mla_cache_append(&cache, &c, rows + (t - 1) * 576, 1));
            ck_assert_uint_eq(mla_cache_bytes_used(&cache), t * 576 * kinds[k].b);
        }
        mla_cache_free(&cache);
    }
    free(rows);
    kvl_model_free(&m);
}
END_TEST

START_TEST(test_cache_bytes_equal_latent_plus_rope_per_token_at_toy_size)
{
    static const size_t windows[] = {0, TOY_W};
    const struct { kv_store store; size_t b; } kinds[] = {{KV_STORE_F32, 4}, {KV_STORE_BF16, 2}};
    for (size_t wi = 0; wi < N_OF(windows); wi++) {
        toy z;
        toy_setup(&z, 32, windows[wi], TOY_T, 30);
        const size_t per_token = (z.c.kv_lora_rank + z.c.qk_rope);
        float out[64 * 7];
        for (size_t k = 0; k < N_OF(kinds); k++) {
            mla_cache cache;
            ok(mla_cache_init(&cache, &z.c, TOY_T, kinds[k].store));
            ok(mla_prefill(out, &z.c, &z.w, &cache, z.x, 7));
            size_t held = windows[wi] && windows[wi] < 7 ? windows[wi] : 7;
            ck_assert_uint_eq(mla_cache_bytes_used(&cache), held * per_token * kinds[k].b);
            for (size_t t = 7; t < TOY_T; t++) {
                ok(mla_decode_absorbed(out, &z.c, &z.w, &cache, z.x + t * z.c.d));
                held = windows[wi] && windows[wi] < t + 1 ? windows[wi] : t + 1;
                ck_assert_uint_eq(mla_cache_bytes_used(&cache), held * per_token * kinds[k].b);
            }
            mla_cache_free(&cache);
        }
        toy_free(&z);
    }
}
END_TEST

/* ---- bf16 cache ------------------------------------------------------------------------------------- */

/* First-order bound on |out_bf16 − out_f32|[T][d]: every cached value moves by at most u = 2^-9 of
 * itself. Row j's logit then moves by e_j ≤ u·scale·(Σ|q̂||c_j| + Σ|q^R||k_rope_j|) (q̂ = W_UK^hᵀ q^C), a
 * weight by at most p_j(exp(e_j + max e) − 1), ô by Σ_j (|δp_j|(1+u) + p_j u)|c_j|, and the output by
 * |W_O|·|W_UV^h|·|δô|. */
static void bf16_bound(double *bound, const toy *z)
{
    const mla_config *c = &z->c;
    const size_t T = z->want.T, H = c->n_heads, Dn = c->qk_nope, Dr = c->qk_rope, Dc = c->kv_lora_rank;
    const size_t Dqk = Dn + Dr, Dw = Dc + Dr, Dv = c->v_head;
    const double u = BF16_UNIT_ROUNDOFF;
    double *d_o = xmalloc(H * Dv * sizeof *d_o), *q_hat = xmalloc(Dc * sizeof *q_hat), *e = xmalloc(T * sizeof *e);
    double *d_ohat = xmalloc(Dc * sizeof *d_ohat);
    for (size_t t = 0; t < T; t++) {
        for (size_t h = 0; h < H; h++) {
            const double *q = z->want.q + (t * H + h) * Dqk, *p = z->want.p + (t * H + h) * T;
            const double *uk = z->o.w_ukv + h * (Dn + Dv) * Dc, *uv = uk + Dn * Dc;
            for (size_t k = 0; k < Dc; k++) {
                q_hat[k] = 0;
                for (size_t n = 0; n < Dn; n++) q_hat[k] += q[n] * uk[n * Dc + k];
            }
            double e_max = 0;
            for (size_t j = 0; j <= t; j++) {
                const double *row = z->want.rows + j * Dw;
                double a = 0;
                for (size_t k = 0; k < Dc; k++) a += fabs(q_hat[k] * row[k]);
                for (size_t k = 0; k < Dr; k++) a += fabs(q[Dn + k] * row[Dc + k]);
                e[j] = u * c->softmax_scale * a;
                e_max = fmax(e_max, e[j]);
            }
            for (size_t k = 0; k < Dc; k++) d_ohat[k] = 0;
            for (size_t j = 0; j <= t; j++) {
                const double dp = p[j] * expm1(e[j] + e_max);
                for (size_t k = 0; k < Dc; k++) d_ohat[k] += (dp * (1 + u) + p[j] * u) * fabs(z->want.rows[j * Dw + k]);
            }
            for (size_t v = 0; v < Dv; v++) {
                d_o[h * Dv + v] = 0;
                for (size_t k = 0; k < Dc; k++) d_o[h * Dv + v] += fabs(uv[v * Dc + k]) * d_ohat[k];
            }
        }
        for (size_t i = 0; i < c->d; i++) {
            bound[t * c->d + i] = 0;
            for (size_t k = 0; k < H * Dv; k++) bound[t * c->d + i] += fabs(z->o.w_o[i * H * Dv + k]) * d_o[k];
        }
    }
    free(d_o); free(q_hat); free(e); free(d_ohat);
}

START_TEST(test_bf16_cache_within_derived_bound_of_f32)
{
    toy z;
    toy_setup(&z, 32, 0, TOY_T, 31);
    const size_t n = TOY_T * z.c.d;
    float *f32 = xmalloc(n * sizeof *f32), *bf16 = xmalloc(n * sizeof *bf16);
    double *bound = xmalloc(n * sizeof *bound);
    run_prefix_then_decode(f32, &z, TOY_T, 10, mla_decode_absorbed, KV_STORE_F32);
    run_prefix_then_decode(bf16, &z, TOY_T, 10, mla_decode_absorbed, KV_STORE_BF16);
    bf16_bound(bound, &z);
    /* both runs also carry their float32 error against the definition */
    const double f32_slack = 2 * z.out_tol * max_abs(z.want.out, n);
    double worst = 0, worst_ratio = 0, scale = max_abs(z.want.out, n);
    for (size_t i = 0; i < n; i++) {
        const double err = fabs((double)bf16[i] - (double)f32[i]), allowed = bound[i] + f32_slack;
        ck_assert_msg(err <= allowed, "bf16 cache, element %zu: |bf16 - f32| = %.3g above the bound %.3g", i, err,
                      allowed);
        worst = fmax(worst, err);
        worst_ratio = fmax(worst_ratio, err / allowed);
    }
    printf("bf16 MLA cache: max |out_bf16 - out_f32| = %.3g (%.3g of max |out|), at most %.0f%% of its bound\n",
           worst, worst / scale, 100 * worst_ratio);
    ck_assert_msg(worst > 0, "a bf16 cache that changes nothing was not rounded");
    free(f32); free(bf16); free(bound);
    toy_free(&z);
}
END_TEST

/* A bf16 cache computes exactly the attention over bf16-rounded rows: the definition re-run on the
 * rounded rows matches it to float32 tolerance (a cache that truncated, or skipped the rounding of the
 * token's own row, would be 2^-9 away). */
START_TEST(test_bf16_cache_equals_definition_over_rounded_rows)
{
    toy z;
    toy_setup(&z, 32, 0, TOY_T, 34);
    const size_t T = TOY_T, H = z.c.n_heads, Dw = z.c.kv_lora_rank + z.c.qk_rope, n = T * z.c.d;
    oracle_run *r = &z.want;
    for (size_t i = 0; i < T * Dw; i++) r->rows[i] = kvf_bf16_decode(kvf_bf16_encode((float)r->rows[i]));
    for (size_t t = 0; t < T; t++) {
        for (size_t h = 0; h < H; h++) oracle_attend(r, &z.o, t, h);
        matvec(r->out + t * z.c.d, z.o.w_o, r->o + t * H * z.c.v_head, z.c.d, H * z.c.v_head);
    }
    float *out = xmalloc(n * sizeof *out);
    run_prefix_then_decode(out, &z, T, 0, mla_decode_absorbed, KV_STORE_BF16);
    expect_rows("bf16 decode_absorbed against the definition on rounded rows", out, r->out, n, z.out_tol);
    run_chunks(out, &z, SPLIT_A, N_OF(SPLIT_A), KV_STORE_BF16);
    expect_rows("bf16 chunks 13+1+9+17 against the definition on rounded rows", out, r->out, n, z.out_tol);
    free(out);
    toy_free(&z);
}
END_TEST

/* A chunk's own rows pass through the storage before its queries read them, so a bf16 chunked prefill
 * reads exactly the rows a token-by-token decode reads back from the cache. */
START_TEST(test_bf16_chunked_prefill_matches_bf16_decode)
{
    toy z;
    toy_setup(&z, 32, 0, TOY_T, 32);
    const size_t n = TOY_T * z.c.d;
    float *chunked = xmalloc(n * sizeof *chunked), *stepped = xmalloc(n * sizeof *stepped);
    run_chunks(chunked, &z, SPLIT_A, N_OF(SPLIT_A), KV_STORE_BF16);
    run_prefix_then_decode(stepped, &z, TOY_T, 0, mla_decode_naive, KV_STORE_BF16);
    double *stepped_d = widen(stepped, n);
    expect_rows("bf16 chunks 13+1+9+17 against bf16 decode", chunked, stepped_d, n, 2 * z.out_tol);
    free(chunked); free(stepped); free(stepped_d);
    toy_free(&z);
}
END_TEST

/* ---- the numpy absorption check, in double ---------------------------------------------------------- */

enum { WT_D = 64, WT_NH = 4, WT_DH = 16, WT_DC = 32, WT_T = 10 };

typedef struct {
    double scores_naive[WT_NH][WT_T], scores_abs[WT_NH][WT_T];
    double out_naive[WT_NH][WT_DH], out_abs[WT_NH][WT_DH];
} writeup_toy;

/* rng.standard_normal(n) / sqrt(fan), as the numpy check draws each array */
static void draw(kvl_rng *rng, double *x, size_t n, double fan)
{
    kvl_rng_normal_f64(rng, x, n, 1.0);
    for (size_t i = 0; i < n; i++) x[i] /= sqrt(fan);
}

static void writeup_toy_run(writeup_toy *r)
{
    static double W_DKV[WT_DC][WT_D], W_UK[WT_NH][WT_DH][WT_DC], W_UV[WT_NH][WT_DH][WT_DC], W_Q[WT_NH][WT_DH][WT_D];
    static double Hs[WT_T][WT_D], h_t[WT_D], C[WT_T][WT_DC];
    kvl_rng rng;
    kvl_rng_seed(&rng, 0);
    draw(&rng, &W_DKV[0][0], sizeof W_DKV / sizeof(double), WT_D);
    draw(&rng, &W_UK[0][0][0], sizeof W_UK / sizeof(double), WT_DC);
    draw(&rng, &W_UV[0][0][0], sizeof W_UV / sizeof(double), WT_DC);
    draw(&rng, &W_Q[0][0][0], sizeof W_Q / sizeof(double), WT_D);
    draw(&rng, &Hs[0][0], sizeof Hs / sizeof(double), 1);
    draw(&rng, h_t, WT_D, 1);
    for (int t = 0; t < WT_T; t++) matvec(C[t], &W_DKV[0][0], Hs[t], WT_DC, WT_D);
    for (int h = 0; h < WT_NH; h++) {
        double q[WT_DH], q_abs[WT_DC] = {0}, o_lat[WT_DC] = {0}, p[WT_T], mx = -INFINITY, sum = 0;
        matvec(q, &W_Q[h][0][0], h_t, WT_DH, WT_D);
        for (int t = 0; t < WT_T; t++) {   /* naive: K = W_UK c per cached token */
            double k[WT_DH];
            matvec(k, &W_UK[h][0][0], C[t], WT_DH, WT_DC);
            r->scores_naive[h][t] = 0;
            for (int i = 0; i < WT_DH; i++) r->scores_naive[h][t] += q[i] * k[i];
            mx = fmax(mx, r->scores_naive[h][t]);
        }
        for (int t = 0; t < WT_T; t++) sum += p[t] = exp(r->scores_naive[h][t] - mx);
        for (int i = 0; i < WT_DH; i++) r->out_naive[h][i] = 0;
        for (int t = 0; t < WT_T; t++) {
            double v[WT_DH];
            p[t] /= sum;
            matvec(v, &W_UV[h][0][0], C[t], WT_DH, WT_DC);
            for (int i = 0; i < WT_DH; i++) r->out_naive[h][i] += p[t] * v[i];
        }
        for (int c = 0; c < WT_DC; c++)   /* absorbed: q̂ = W_UKᵀ q, scores against C, W_UV after */
            for (int i = 0; i < WT_DH; i++) q_abs[c] += W_UK[h][i][c] * q[i];
        matvec(r->scores_abs[h], &C[0][0], q_abs, WT_T, WT_DC);
        for (int t = 0; t < WT_T; t++)
            for (int c = 0; c < WT_DC; c++) o_lat[c] += p[t] * C[t][c];
        matvec(r->out_abs[h], &W_UV[h][0][0], o_lat, WT_DH, WT_DC);
    }
}

static double max_diff(const double *a, const double *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(a[i] - b[i]));
    return m;
}

/* values[n] of block `name` in tests/data/mla_toy_numpy.txt */
static void read_numpy_block(double *values, size_t n, const char *name)
{
    FILE *f = fopen(kvl_path("tests/data/mla_toy_numpy.txt"), "r");
    ck_assert_msg(f != NULL, "cannot open tests/data/mla_toy_numpy.txt (set KVL_ROOT)");
    char line[256], block[64];
    size_t count = 0, got = 0;
    while (fgets(line, sizeof line, f) && got < n) {
        if (line[0] == '#') continue;
        if (sscanf(line, "%63s %zu", block, &count) == 2 && strcmp(block, name) == 0) {
            ck_assert_uint_eq(count, n);
            for (; got < n && fgets(line, sizeof line, f); got++) values[got] = strtod(line, NULL);
        }
    }
    fclose(f);
    ck_assert_msg(got == n, "block %s: %zu of %zu values", name, got, n);
}

START_TEST(test_writeup_toy_absorbed_equals_naive_in_double)
{
    writeup_toy r;
    writeup_toy_run(&r);
    const double ds = max_diff(&r.scores_naive[0][0], &r.scores_abs[0][0], WT_NH * WT_T);
    const double dout = max_diff(&r.out_naive[0][0], &r.out_abs[0][0], WT_NH * WT_DH);
    printf("lineage toy: max |score diff| %.3g, max |output diff| %.3g; cached floats per token, naive K+V: %d"
           "  absorbed latent: %d\n", ds, dout, 2 * WT_NH * WT_DH, WT_DC);
    ck_assert_msg(ds < TOY_CHECK_MAX_DIFF && dout < TOY_CHECK_MAX_DIFF, "diffs %.3g, %.3g", ds, dout);

    /* the same numbers numpy computed: the draws and the algebra match, up to summation order */
    double want_s[WT_NH * WT_T], want_o[WT_NH * WT_DH], want_abs[WT_NH * WT_DH], cached[2];
    read_numpy_block(want_s, WT_NH * WT_T, "scores_naive");
    read_numpy_block(want_o, WT_NH * WT_DH, "out_naive");
    read_numpy_block(want_abs, WT_NH * WT_DH, "out_absorbed");
    read_numpy_block(cached, 2, "cached");
    const double tol = TOY_CHECK_MAX_DIFF;
    kvl_expect_close_f64("lineage toy scores vs numpy", &r.scores_naive[0][0], want_s, WT_NH * WT_T, tol, 0, 0);
    kvl_expect_close_f64("lineage toy naive output vs numpy", &r.out_naive[0][0], want_o, WT_NH * WT_DH, tol, 0, 0);
    kvl_expect_close_f64("lineage toy absorbed output vs numpy", &r.out_abs[0][0], want_abs, WT_NH * WT_DH, tol, 0, 0);
    ck_assert(cached[0] == 2 * WT_NH * WT_DH && cached[0] == 128);
    ck_assert(cached[1] == WT_DC && cached[1] == 32);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------------------- */

START_TEST(test_bad_config_and_full_cache_are_errors_and_empty_input_is_not)
{
    toy z;
    toy_setup(&z, 32, 0, 4, 33);
    mla_config bad = z.c;
    bad.kv_lora_rank = 0;
    float out[64 * 4];
    ck_assert_int_eq(mla_forward(out, &bad, &z.w, z.x, 4), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "kv_lora_rank") != NULL, "message: %s", kvl_error());
    bad = z.c;
    bad.qk_rope = 6;  /* rope table is for 8 */
    ck_assert_int_eq(mla_forward(out, &bad, &z.w, z.x, 4), KVL_EINVAL);

    mla_cache cache;
    ok(mla_cache_init(&cache, &z.c, 3, KV_STORE_F32));
    ck_assert_int_eq(mla_prefill(out, &z.c, &z.w, &cache, z.x, 4), KVL_EINVAL);
    ck_assert_uint_eq(cache.ring.len, 0);
    ok(mla_prefill(out, &z.c, &z.w, &cache, z.x, 0));   /* an empty chunk is a no-op */
    ck_assert_uint_eq(cache.ring.len, 0);
    ok(mla_forward(out, &z.c, &z.w, z.x, 0));
    ok(mla_prefill(out, &z.c, &z.w, &cache, z.x, 3));
    ck_assert_int_eq(mla_decode_absorbed(out, &z.c, &z.w, &cache, z.x + 3 * z.c.d), KVL_EINVAL);
    ck_assert_int_eq(mla_decode_naive(out, &z.c, &z.w, &cache, z.x + 3 * z.c.d), KVL_EINVAL);
    ck_assert_uint_eq(cache.ring.len, 3);
    mla_cache_free(&cache);

    kvl_model m;
    ok(kvl_model_load(&m, kvl_path("ref/configs/deepseek-llm-67b.json")));
    mla_config c;
    ck_assert_int_eq(mla_config_from_model(&c, &m), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "deepseek-llm-67b.json") != NULL, "message: %s", kvl_error());
    kvl_model_free(&m);
    toy_free(&z);
}
END_TEST

/* ---- the chapter program --------------------------------------------------------------------------- */

START_TEST(test_mla_cost_program_derives_the_chapter_figures)
{
    static char out[65536], err[4096];
    int rc = kvl_run("mla_cost --contexts 64,96 --repeats 1", NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "mla_cost exited %d: %s", rc, err);
    static const char *const figures[] = {"1,152 B/layer", "81,920 B/layer", "98,304 B/layer", "312,320 B/token",
                                          "70,272 B/token", "2.25 groups",
                                          "cached floats per token, naive K+V: 128  absorbed latent: 32"};
    for (size_t i = 0; i < N_OF(figures); i++)
        ck_assert_msg(strstr(out, figures[i]) != NULL, "mla_cost output lacks \"%s\":\n%s", figures[i], out);
    const char *line = strstr(out, "max |score diff| :");
    ck_assert_msg(line != NULL, "no toy score line:\n%s", out);
    ck_assert(strtod(line + strlen("max |score diff| :"), NULL) < TOY_CHECK_MAX_DIFF);
    line = strstr(out, "max |output diff|:");
    ck_assert_msg(line != NULL, "no toy output line:\n%s", out);
    ck_assert(strtod(line + strlen("max |output diff|:"), NULL) < TOY_CHECK_MAX_DIFF);
}
END_TEST

/* The V2 paper's proportions (Dc = 4 Dh, Dr = Dh/2) are claimed of a config only where they hold:
 * V3's hold them; a copy with half the latent does not, and its groups are (256 + 64) / 256. */
START_TEST(test_mla_cost_claims_the_papers_proportions_only_where_they_hold)
{
    static char out[65536], err[4096];
    const char *claim = "with Dc = 4 Dh and Dr = Dh/2).";
    int rc = kvl_run("mla_cost --contexts 64 --repeats 1 --naive-budget 0.01", NULL, out, sizeof out, err,
                     sizeof err);
    ck_assert_msg(rc == 0 && strstr(out, claim), "V3: mla_cost exited %d or lacks \"%s\":\n%s", rc, claim, out);
    rc = kvl_run("(cp \"$KVL_ROOT/ref/configs/deepseek-v3.json\" /tmp/kvl-mla-dc256.json && "
                 "sed -i 's/\"kv_lora_rank\": 512/\"kv_lora_rank\": 256/' /tmp/kvl-mla-dc256.json && "
                 "mla_cost --config /tmp/kvl-mla-dc256.json --contexts 64 --repeats 1 --naive-budget 0.01; "
                 "s=$?; rm -f /tmp/kvl-mla-dc256.json; exit $s)",
                 NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "mla_cost on the Dc 256 copy exited %d: %s", rc, err);
    ck_assert_msg(!strstr(out, claim) && strstr(out, "1.25 groups") && strstr(out, "here Dc = 256 and Dr = 64"),
                  "the Dc 256 copy is said to keep the paper's proportions, or its groups are not 1.25:\n%s",
                  out);
}
END_TEST

/* The per-token work mla_cost prints and counts is the definition's, at V3's widths and at a toy's. */
START_TEST(test_mla_cost_counts_a_cached_token_by_the_definition)
{
    static const size_t widths[][4] = {{512, 128, 64, 128}, {32, 16, 8, 16}, {256, 128, 64, 128}}; /* Dc Dnope Dr Dv */
    for (size_t i = 0; i < N_OF(widths); i++) {
        const mla_config c = {.kv_lora_rank = widths[i][0], .qk_nope = widths[i][1], .qk_rope = widths[i][2],
                              .v_head = widths[i][3]};
        ck_assert_double_eq(mla_absorbed_flop_per_token(&c), oracle_mla_absorbed_flop_per_token(widths[i][0], widths[i][2]));
        ck_assert_double_eq(mla_naive_flop_per_token(&c),
                            oracle_mla_naive_flop_per_token(widths[i][0], widths[i][1], widths[i][2], widths[i][3]));
    }
    kvl_model m;
    ok(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v3.json")));
    char want[160];
    snprintf(want, sizeof want, "2 Dc = %s flop per token per head",
             KVL_GROUPED(oracle_mla_absorbed_flop_per_token(m.kv_lora_rank, m.qk_rope_head_dim)));
    kvl_model_free(&m);
    const char *const lines[] = {want};
    kvl_expect_prints("mla_cost --contexts 64 --repeats 1", lines, 1, "The absorbed form");
}
END_TEST

START_TEST(test_mla_cost_program_rejects_bad_arguments)
{
    static char out[16384], err[4096];
    ck_assert_int_eq(kvl_run("mla_cost --help", NULL, out, sizeof out, err, sizeof err), 0);
    ck_assert_msg(strstr(out, "usage") != NULL, "--help: %s", out);
    static const char *const bad[] = {"mla_cost --bogus", "mla_cost --contexts 0", "mla_cost --contexts 4K,x",
                                      "mla_cost --repeats 0", "mla_cost --contexts"};
    for (size_t i = 0; i < N_OF(bad); i++) {
        ck_assert_int_eq(kvl_run(bad[i], NULL, out, sizeof out, err, sizeof err), 2);
        const char *nl = strchr(err, '\n');
        ck_assert_msg(nl && nl[1] == '\0', "%s: stderr should be one line, got \"%s\"", bad[i], err);
    }
}
END_TEST

/* nb_02's latent against MHA at V3's heads: 2·H·Dnope values per layer, over Dc and over Dc + Dr. */
START_TEST(test_notebook_compares_the_latent_with_mha_by_the_definition)
{
    kvl_model m;
    ok(kvl_model_load(&m, kvl_path("ref/configs/deepseek-v3.json")));
    const double mha = 2.0 * (double)m.n_heads * (double)m.qk_nope_head_dim, Dc = (double)m.kv_lora_rank;
    char a[200];
    snprintf(a, sizeof a, "%s values: %.0f x the latent alone, %.1f x with the RoPE key", KVL_GROUPED(mha), mha / Dc,
             mha / (Dc + (double)m.qk_rope_head_dim));
    kvl_model_free(&m);
    const char *const want[] = {a};
    kvl_expect_prints("nb_02", want, 1, "MHA with H heads");
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch02_mla");
    TCase *pieces = tcase_create("pieces");
    tcase_add_test(pieces, test_query_and_latent_match_definition);
    tcase_add_test(pieces, test_query_matches_definition_when_q_lora_rank_zero);
    tcase_add_test(pieces, test_absorbed_scores_and_values_equal_naive);
    tcase_add_test(pieces, test_absorbed_scores_and_values_equal_naive_when_q_lora_rank_zero);
    suite_add_tcase(s, pieces);

    TCase *paths = tcase_create("paths");
    tcase_add_test(paths, test_forward_matches_definition);
    tcase_add_test(paths, test_decode_absorbed_matches_decode_naive_and_definition);
    tcase_add_test(paths, test_decode_absorbed_matches_decode_naive_when_q_lora_rank_zero);
    tcase_add_test(paths, test_decode_absorbed_matches_definition_when_cache_spans_tiles);
    tcase_add_test(paths, test_prefill_then_decode_matches_forward_when_any_prefix);
    tcase_add_test(paths, test_chunked_prefill_matches_forward_when_any_split);
    tcase_add_test(paths, test_chunked_prefill_matches_banded_forward_when_windowed);
    tcase_add_test(paths, test_decode_matches_banded_forward_when_windowed);
    tcase_add_test(paths, test_prefill_matches_definition_when_chunk_spans_query_blocks);
    tcase_add_test(paths, test_single_token_matches_definition_when_T_is_1);
    suite_add_tcase(s, paths);

    TCase *cache = tcase_create("cache");
    tcase_add_test(cache, test_cache_bytes_equal_576_b_per_token_at_v3_geometry);
    tcase_add_test(cache, test_cache_bytes_equal_latent_plus_rope_per_token_at_toy_size);
    tcase_add_test(cache, test_bf16_cache_within_derived_bound_of_f32);
    tcase_add_test(cache, test_bf16_chunked_prefill_matches_bf16_decode);
    tcase_add_test(cache, test_bf16_cache_equals_definition_over_rounded_rows);
    suite_add_tcase(s, cache);

    TCase *toy_tc = tcase_create("writeup_toy");
    tcase_add_test(toy_tc, test_writeup_toy_absorbed_equals_naive_in_double);
    suite_add_tcase(s, toy_tc);

    TCase *errors = tcase_create("errors");
    tcase_add_test(errors, test_bad_config_and_full_cache_are_errors_and_empty_input_is_not);
    suite_add_tcase(s, errors);

    TCase *program = tcase_create("program");
    tcase_add_test(program, test_mla_cost_program_derives_the_chapter_figures);
    tcase_add_test(program, test_mla_cost_claims_the_papers_proportions_only_where_they_hold);
    tcase_add_test(program, test_mla_cost_counts_a_cached_token_by_the_definition);
    tcase_add_test(program, test_notebook_compares_the_latent_with_mha_by_the_definition);
    tcase_add_test(program, test_mla_cost_program_rejects_bad_arguments);
    suite_add_tcase(s, program);
    return s;
}
