#include "dsa.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "block.h"
#include "hadamard.h"
#include "index_scan.h"
#include "linalg.h"
#include "norm.h"
#include "rows.h"
#include "softmax.h"
#include "status.h"
#include "topk.h"

/* ---- config --------------------------------------------------------------------------------------- */

int dsa_config_check(const dsa_config *c)
{
    if (!c) return kvl_fail(KVL_EINVAL, "dsa: config is NULL");
    KVL_TRY(mla_config_check(&c->mla));
    if (c->mla.window) return kvl_fail(KVL_EINVAL, "dsa: config field window must be 0, got %zu", c->mla.window);
    if (c->mla.q_lora_rank == 0)
        return kvl_fail(KVL_EINVAL, "dsa: config field q_lora_rank must be positive (the indexer reads c^Q), got 0");
    const struct { const char *name; size_t v; } widths[] = {
        {"index_n_heads", c->index_n_heads}, {"index_head_dim", c->index_head_dim}, {"index_topk", c->index_topk},
    };
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (widths[i].v == 0) return kvl_fail(KVL_EINVAL, "dsa: config field %s must be positive, got 0", widths[i].name);
    if (c->index_head_dim < c->mla.qk_rope)
        return kvl_fail(KVL_EINVAL, "dsa: config field index_head_dim (%zu) is narrower than the rotary part (%zu)",
                        c->index_head_dim, c->mla.qk_rope);
    if (!(c->index_norm_eps >= 0.0) || !isfinite(c->index_norm_eps))
        return kvl_fail(KVL_EINVAL, "dsa: config field index_norm_eps must be finite and non-negative, got %g",
                        c->index_norm_eps);
    return KVL_OK;
}

int dsa_config_from_model(dsa_config *c, const kvl_model *m)
{
    if (m->generation != KVL_GEN_DSA)
        return kvl_fail(KVL_EINVAL, "%s: attention is %s, not DSA (no index_topk)", m->path,
                        kvl_generation_name(m->generation));
    *c = (dsa_config){.index_n_heads = m->index_n_heads, .index_head_dim = m->index_head_dim,
                      .index_topk = m->index_topk, .index_norm_eps = DSA_INDEX_NORM_EPS};
    KVL_TRY(mla_config_from_model(&c->mla, m));
    int rc = dsa_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", m->path, kvl_error());
    return KVL_OK;
}

/* ---- small helpers -------------------------------------------------------------------------------- */

static size_t row_width(const dsa_config *c) { return c->mla.kv_lora_rank + c->mla.qk_rope; }
static size_t qk_width(const dsa_config *c) { return c->mla.qk_nope + c->mla.qk_rope; }

/* *pp (a pointer of any element type) = malloc of a·b elements of `size` bytes (at least one), with
 * the product checked; the address is stored through memcpy, so any pointer type may receive it. */
static int alloc_n(void *pp, size_t a, size_t b, size_t size, const char *fn)
{
    void *p = NULL;
    memcpy(pp, &p, sizeof p);
    if (b && a > SIZE_MAX / size / b) return kvl_fail(KVL_EINVAL, "%s: buffer of %zu x %zu overflows", fn, a, b);
    const size_t n = a * b;
    p = malloc((n ? n : 1) * size);
    if (!p) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu x %zu elements", fn, a, b);
    memcpy(pp, &p, sizeof p);
    return KVL_OK;
}

static int alloc_floats(float **p, size_t a, size_t b, const char *fn) { return alloc_n(p, a, b, sizeof **p, fn); }

static int check_call(const char *fn, const dsa_config *c, const dsa_weights *w, const void *a, const void *b)
{
    int rc = dsa_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    if (!w || !w->block || !a || !b) return kvl_fail(KVL_EINVAL, "%s: NULL weights or array", fn);
    return KVL_OK;
}

/* out[S][d] = W_O o[S][H·Dv] */
static int project_out(float *out, const dsa_config *c, const dsa_weights *w, const float *o, size_t S)
{
    return kvl_matmul_abt_f32(out, o, w->mla.w_o, S, c->mla.d, c->mla.n_heads * c->mla.v_head);
}

/* ---- weights -------------------------------------------------------------------------------------- */

enum { N_INDEX_WEIGHTS = 5 };
typedef enum { DRAW_MATRIX, DRAW_GAIN, DRAW_BIAS } draw_kind;

typedef struct {
    float **field;
    size_t rows, cols;
    draw_kind kind;
} weight_entry;

/* The indexer's sizes table, in the order the block is cut (after MLA's) and drawn. */
static void weight_table(weight_entry t[N_INDEX_WEIGHTS], dsa_weights *w, const dsa_config *c)
{
    const size_t HI = c->index_n_heads, DI = c->index_head_dim, d = c->mla.d;
    t[0] = (weight_entry){&w->w_iq, HI * DI, c->mla.q_lora_rank, DRAW_MATRIX};
    t[1] = (weight_entry){&w->w_ik, DI, d, DRAW_MATRIX};
    t[2] = (weight_entry){&w->k_norm, 1, DI, DRAW_GAIN};
    t[3] = (weight_entry){&w->k_bias, 1, DI, DRAW_BIAS};
    t[4] = (weight_entry){&w->w_iw, HI, d, DRAW_MATRIX};
}

int dsa_weights_size(size_t *n_floats, const dsa_config *c)
{
    *n_floats = 0;
    int rc = dsa_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "dsa_weights_size: %s", kvl_error());
    size_t total;
    KVL_TRY(mla_weights_size(&total, &c->mla));
    dsa_weights scratch;
    weight_entry t[N_INDEX_WEIGHTS];
    weight_table(t, &scratch, c);
    for (size_t i = 0; i < N_INDEX_WEIGHTS; i++) {
        if (t[i].rows > (SIZE_MAX / sizeof(float) - total) / t[i].cols)
            return kvl_fail(KVL_EINVAL, "dsa_weights_size: weight %zu of %zu x %zu overflows", i, t[i].rows,
                            t[i].cols);
        total += t[i].rows * t[i].cols;
    }
    *n_floats = total;
    return KVL_OK;
}

int dsa_weights_alloc(dsa_weights *w, const dsa_config *c)
{
    memset(w, 0, sizeof *w);
    size_t total, n_mla;
    int rc = dsa_weights_size(&total, c);
    if (rc == KVL_OK) rc = mla_weights_size(&n_mla, &c->mla);
    if (rc != KVL_OK) return kvl_fail(rc, "dsa_weights_alloc: %s", kvl_error());
    weight_entry t[N_INDEX_WEIGHTS];
    weight_table(t, w, c);
    float *block = calloc(total, sizeof *block);
    if (!block) return kvl_fail(KVL_ENOMEM, "dsa_weights_alloc: out of memory for %zu floats", total);
    mla_weights_cut(&w->mla, &c->mla, block);
    size_t off = n_mla;
    for (size_t i = 0; i < N_INDEX_WEIGHTS; i++) {
        *t[i].field = block + off;
        off += t[i].rows * t[i].cols;
    }
    w->block = block;
    w->n_floats = total;
    return KVL_OK;
}

int dsa_weights_init_random(dsa_weights *w, const dsa_config *c, kvl_rng *rng)
{
    KVL_TRY(dsa_weights_alloc(w, c));
    mla_weights_draw(&w->mla, &c->mla, rng);
    weight_entry t[N_INDEX_WEIGHTS];
    weight_table(t, w, c);
    for (size_t i = 0; i < N_INDEX_WEIGHTS; i++) {
        const size_t n = t[i].rows * t[i].cols;
        if (t[i].kind == DRAW_GAIN) kvl_rng_uniform_f32(rng, *t[i].field, n, 0.5, 1.5);
        else if (t[i].kind == DRAW_BIAS) kvl_rng_uniform_f32(rng, *t[i].field, n, -0.5, 0.5);
        else kvl_rng_normal_f32(rng, *t[i].field, n, 1.0 / sqrt((double)t[i].cols));
    }
    return KVL_OK;
}

void dsa_weights_free(dsa_weights *w)
{
    free(w->block);
    memset(w, 0, sizeof *w);
}

/* ---- the indexer, piece by piece ------------------------------------------------------------------ */

int dsa_index_query(float *q_idx, float *w_idx, const dsa_config *c, const dsa_weights *w, const float *x,
                    size_t S, size_t start)
{
    KVL_TRY(check_call(__func__, c, w, q_idx, x));
    if (!w_idx) return kvl_fail(KVL_EINVAL, "%s: NULL head weights", __func__);
    const size_t HI = c->index_n_heads, DI = c->index_head_dim;
    float *cq;
    KVL_TRY(alloc_floats(&cq, S, c->mla.q_lora_rank, __func__));
    int rc = mla_query_latent(cq, &c->mla, &w->mla, x, S);
    if (rc == KVL_OK) rc = kvl_matmul_abt_f32(q_idx, cq, w->w_iq, S, HI * DI, c->mla.q_lora_rank);
    free(cq);
    KVL_TRY(rc);
    kvl_rope_rotate_heads_half_split(q_idx, S, HI * DI, 0, HI, DI, &c->mla.rope, (int64_t)start);
    KVL_TRY(kvl_matmul_abt_f32(w_idx, x, w->w_iw, S, HI, c->mla.d));
    /* HI^−½ on the head weights, DI^−½ for the dot products (DeepSeek-V3.2 inference/model.py: weights_proj ·
     * n_heads^−½ · softmax_scale) */
    const float scale = (float)(1.0 / sqrt((double)HI * (double)DI));
    for (size_t i = 0; i < S * HI; i++) w_idx[i] *= scale;
    return KVL_OK;
}

int dsa_index_key(float *k_idx, const dsa_config *c, const dsa_weights *w, const float *x, size_t S, size_t start)
{
    KVL_TRY(check_call(__func__, c, w, k_idx, x));
    const size_t DI = c->index_head_dim;
    KVL_TRY(kvl_matmul_abt_f32(k_idx, x, w->w_ik, S, DI, c->mla.d));
    kvl_layernorm_f32(k_idx, k_idx, w->k_norm, w->k_bias, S, DI, c->index_norm_eps);
    kvl_rope_rotate_rows_half_split(k_idx, S, DI, 0, &c->mla.rope, (int64_t)start);
    return KVL_OK;
}

int dsa_index_scores(float *I, const dsa_config *c, const float *q_idx, const float *w_idx, const float *k_idx,
                     size_t S, size_t N, size_t start)
{
    int rc = dsa_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", __func__, kvl_error());
    if (!k_idx) return kvl_fail(KVL_EINVAL, "%s: NULL keys", __func__);
    const kvl_row_tiles k = kvl_row_tiles_f32(k_idx, N, c->index_head_dim);
    return kvl_index_scores(I, q_idx, w_idx, &k, S, c->index_n_heads, start, 1);
}

int dsa_index_quantise(float *v, const dsa_config *c, size_t n)
{
    KVL_TRY(dsa_config_check(c));
    const size_t DI = c->index_head_dim;
    if (!kvl_hadamard_size_ok(DI) || DI % KVF_FP8_UE8M0_BLOCK != 0)
        return kvl_fail(KVL_EINVAL, "dsa_index_quantise: index_head_dim %zu must be a power of two and a multiple of %d",
                        DI, KVF_FP8_UE8M0_BLOCK);
    if (n && !v) return kvl_fail(KVL_EINVAL, "dsa_index_quantise: NULL array");
    const int finite = kvf_check_finite(v, n * DI);
    if (finite != KVF_OK) return kvl_fail(KVL_EINVAL, "dsa_index_quantise: %s", kvf_strerror(finite));
    uint8_t *codes;
    float *scales = NULL;
    KVL_TRY(alloc_n(&codes, 1, DI, 1, __func__));
    int rc = alloc_floats(&scales, 1, DI / KVF_FP8_UE8M0_BLOCK, __func__);
    if (rc == KVL_OK) rc = kvl_hadamard_rotate_rows_f32(v, n, DI);
    for (size_t r = 0; r < n && rc == KVL_OK; r++) {
        const int q = kvf_quant_fp8_ue8m0(codes, scales, v + r * DI, DI);
        if (q != KVF_OK) rc = kvl_fail(KVL_EINVAL, "dsa_index_quantise: vector %zu: %s", r, kvf_strerror(q));
        else kvf_dequant_fp8_ue8m0(v + r * DI, codes, scales, DI);
    }
    free(codes);
    free(scales);
    return rc;
}

/* ---- the indexer over a whole sequence -------------------------------------------------------------- */

typedef struct {
    float *q_idx, *w_idx, *k_idx; /* [T][HI][DI], [T][HI], [T][DI] */
} index_inputs;

static void index_inputs_free(index_inputs *in)
{
    free(in->q_idx);
    free(in->w_idx);
    free(in->k_idx);
}

static int index_inputs_build(index_inputs *in, const dsa_config *c, const dsa_weights *w, const float *x, size_t T)
{
    memset(in, 0, sizeof *in);
    const size_t HI = c->index_n_heads, DI = c->index_head_dim;
    KVL_TRY(alloc_floats(&in->q_idx, T * HI, DI, "dsa_indexer"));
    KVL_TRY(alloc_floats(&in->w_idx, T, HI, "dsa_indexer"));
    KVL_TRY(alloc_floats(&in->k_idx, T, DI, "dsa_indexer"));
    KVL_TRY(dsa_index_query(in->q_idx, in->w_idx, c, w, x, T, 0));
    return dsa_index_key(in->k_idx, c, w, x, T, 0);
}

int dsa_indexer_f32(float *I, const dsa_config *c, const dsa_weights *w, const float *x, size_t T)
{
    KVL_TRY(check_call(__func__, c, w, I, x));
    index_inputs in;
    int rc = index_inputs_build(&in, c, w, x, T);
    if (rc == KVL_OK) rc = dsa_index_scores(I, c, in.q_idx, in.w_idx, in.k_idx, T, T, 0);
    index_inputs_free(&in);
    return rc;
}

int dsa_indexer_fp8(float *I, const dsa_config *c, const dsa_weights *w, const float *x, size_t T)
{
    KVL_TRY(check_call(__func__, c, w, I, x));
    index_inputs in;
    int rc = index_inputs_build(&in, c, w, x, T);
    if (rc == KVL_OK) rc = dsa_index_quantise(in.q_idx, c, T * c->index_n_heads);
    if (rc == KVL_OK) rc = dsa_index_quantise(in.k_idx, c, T);
    if (rc == KVL_OK) rc = dsa_index_scores(I, c, in.q_idx, in.w_idx, in.k_idx, T, T, 0);
    index_inputs_free(&in);
    return rc;
}

/* |a ∩ b| for two ascending, −1-padded rows of K positions */
static size_t common_picks(const int32_t *a, const int32_t *b, size_t K)
{
    size_t i = 0, j = 0, n = 0;
    while (i < K && j < K && a[i] >= 0 && b[j] >= 0) {
        if (a[i] == b[j]) n++, i++, j++;
        else if (a[i] < b[j]) i++;
        else j++;
    }
    return n;
}

int dsa_index_recall(double *recall, const dsa_config *c, const dsa_weights *w, const float *x, size_t T)
{
    KVL_TRY(check_call(__func__, c, w, recall, x));
    const size_t K = c->index_topk;
    float *I = NULL;
    int32_t *ref = NULL, *got = NULL;
    int rc = alloc_floats(&I, T, T, __func__);
    if (rc == KVL_OK) rc = alloc_n(&ref, T, K, sizeof *ref, __func__);
    if (rc == KVL_OK) rc = alloc_n(&got, T, K, sizeof *got, __func__);
    if (rc == KVL_OK) rc = dsa_indexer_f32(I, c, w, x, T);
    if (rc == KVL_OK) rc = kvl_topk(ref, I, T, T, K);
    if (rc == KVL_OK) rc = dsa_indexer_fp8(I, c, w, x, T);
    if (rc == KVL_OK) rc = kvl_topk(got, I, T, T, K);
    if (rc == KVL_OK) {
        size_t hit = 0, all = 0;
        for (size_t t = 0; t < T; t++) {
            hit += common_picks(ref + t * K, got + t * K, K);
            for (size_t k = 0; k < K && ref[t * K + k] >= 0; k++) all++;
        }
        *recall = all ? (double)hit / (double)all : 1.0;
    }
    free(I);
    free(ref);
    free(got);
    return rc;
}

/* ---- the sparse attention ------------------------------------------------------------------------- */

static int check_selection(const char *fn, const int32_t *sel, size_t S, size_t N, size_t K)
{
    if (S && !sel) return kvl_fail(KVL_EINVAL, "%s: NULL selection", fn);
    for (size_t i = 0; i < S * K; i++)
        if (sel[i] < -1 || (sel[i] >= 0 && (size_t)sel[i] >= N))
            return kvl_fail(KVL_EINVAL, "%s: query %zu selects position %d, outside -1 .. %zu", fn, i / K, (int)sel[i],
                            N ? N - 1 : 0);
    return KVL_OK;
}

/* mask[S][N] = 0 at the positions in sel[S][K] (each < N), −INFINITY elsewhere */
static void fill_mask(float *mask, const int32_t *sel, size_t S, size_t N, size_t K)
{
    for (size_t i = 0; i < S * N; i++) mask[i] = -INFINITY;
    for (size_t i = 0; i < S; i++)
        for (size_t k = 0; k < K; k++)
            if (sel[i * K + k] >= 0) mask[i * N + (size_t)sel[i * K + k]] = 0.0f;
}

int dsa_index_mask(float *mask, const int32_t *sel, size_t S, size_t N, size_t K)
{
    KVL_TRY(check_selection(__func__, sel, S, N, K));
    if (S && N && !mask) return kvl_fail(KVL_EINVAL, "%s: NULL mask", __func__);
    fill_mask(mask, sel, S, N, K);
    return KVL_OK;
}

/* The selection as a kvl_block_mask for mla_attend_naive, a block of queries at a time: the rows up to
 * the block's furthest pick. */
typedef struct {
    const int32_t *sel; /* [S][K], checked */
    size_t K;
} picks_mask;

static size_t mask_picks(float *mask, size_t first, size_t b, size_t N, const void *ctx)
{
    const picks_mask *p = ctx;
    const int32_t *sel = p->sel + first * p->K;
    size_t n = 0;
    for (size_t i = 0; i < b * p->K; i++)
        if (sel[i] >= 0 && (size_t)sel[i] >= n) n = (size_t)sel[i] + 1;
    if (n > N) return n;
    fill_mask(mask, sel, b, n, p->K);
    return n;
}

int dsa_attend_masked_naive(float *o, const dsa_config *c, const dsa_weights *w, const float *q, const float *rows,
                            const int32_t *sel, size_t S, size_t N)
{
    KVL_TRY(check_call(__func__, c, w, q, rows));
    if (!o) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    KVL_TRY(check_selection(__func__, sel, S, N, c->index_topk));
    const picks_mask mask = {.sel = sel, .K = c->index_topk};
    return mla_attend_naive(o, &c->mla, &w->mla, q, rows, S, N, (kvl_chunk_mask){.rows = mask_picks, .ctx = &mask});
}

/* The whole [S][H][N] scores of the absorbed form under the selection mask, softmax, values. */
int dsa_attend_masked_absorbed(float *o, const dsa_config *c, const dsa_weights *w, const float *q,
                               const float *rows, const int32_t *sel, size_t S, size_t N)
{
    KVL_TRY(check_call(__func__, c, w, q, rows));
    if (!o) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    const size_t H = c->mla.n_heads;
    float *mask = NULL, *s = NULL;
    int rc = alloc_floats(&mask, S, N, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&s, S * H, N, __func__);
    if (rc == KVL_OK) rc = dsa_index_mask(mask, sel, S, N, c->index_topk);
    if (rc == KVL_OK) rc = mla_scores_absorbed(s, &c->mla, &w->mla, q, rows, mask, S, N);
    if (rc == KVL_OK) {
        for (size_t r = 0; r < S * H; r++) kvl_softmax_f32(s + r * N, N);
        rc = mla_values_absorbed(o, &c->mla, &w->mla, s, rows, S, N);
    }
    free(mask);
    free(s);
    return rc;
}

/* o[H][Dv] for one query q[H][Dnope+Dr] over its gathered rows g[n][Dc+Dr], absorbed, no mask;
 * scores[H][n] is scratch. n = 0 gives o = 0. */
static int attend_gathered(float *o, const dsa_config *c, const dsa_weights *w, const float *q, const float *g,
                           size_t n, float *scores)
{
    const size_t H = c->mla.n_heads;
    if (n == 0) {
        memset(o, 0, H * c->mla.v_head * sizeof *o);
        return KVL_OK;
    }
    KVL_TRY(mla_scores_absorbed(scores, &c->mla, &w->mla, q, g, NULL, 1, n));
    for (size_t h = 0; h < H; h++) kvl_softmax_f32(scores + h * n, n);
    return mla_values_absorbed(o, &c->mla, &w->mla, scores, g, 1, n);
}

/* g[*n][Dw] = the rows sel[0 … K − 1] names (−1 skipped), in order, for query i; a position named twice is
 * KVL_EINVAL (the selection is a set: the masked form reads each position once). taken[N] is scratch, all 0
 * on entry and on return. */
static int gather_rows(float *g, size_t *n, unsigned char *taken, const float *rows, size_t Dw, const int32_t *sel,
                       size_t K, size_t i)
{
    int rc = KVL_OK;
    *n = 0;
    for (size_t k = 0; k < K && rc == KVL_OK; k++) {
        if (sel[k] < 0) continue;
        if (taken[sel[k]])
            rc = kvl_fail(KVL_EINVAL, "dsa_attend_gather: query %zu selects position %d twice", i, (int)sel[k]);
        else memcpy(g + (*n)++ * Dw, rows + (size_t)sel[k] * Dw, Dw * sizeof *g);
        taken[sel[k]] = 1;
    }
    for (size_t k = 0; k < K; k++)
        if (sel[k] >= 0) taken[sel[k]] = 0;
    return rc;
}

int dsa_attend_gather(float *o, const dsa_config *c, const dsa_weights *w, const float *q, const float *rows,
                      const int32_t *sel, size_t S, size_t N)
{
    KVL_TRY(check_call(__func__, c, w, q, rows));
    if (!o) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    const size_t K = c->index_topk, H = c->mla.n_heads, Dw = row_width(c), Dqk = qk_width(c), Dv = c->mla.v_head;
    KVL_TRY(check_selection(__func__, sel, S, N, K));
    const size_t n_max = K < N ? K : N;   /* a query reads at most min(K, N) distinct rows */
    float *g = NULL, *scores = NULL;
    unsigned char *taken = NULL;          /* taken[N]: the rows this query has gathered */
    int rc = alloc_floats(&g, n_max, Dw, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&scores, H, n_max, __func__);
    if (rc == KVL_OK) rc = alloc_n(&taken, N, 1, 1, __func__);
    if (rc == KVL_OK) memset(taken, 0, N);
    for (size_t i = 0; i < S && rc == KVL_OK; i++) {
        size_t n;
        rc = gather_rows(g, &n, taken, rows, Dw, sel + i * K, K, i);
        if (rc == KVL_OK) rc = attend_gathered(o + i * H * Dv, c, w, q + i * H * Dqk, g, n, scores);
    }
    free(g);
    free(scores);
    free(taken);
    return rc;
}

/* ---- whole sequence ----------------------------------------------------------------------------------- */

int dsa_forward(float *out, int32_t *sel, const dsa_config *c, const dsa_weights *w, const float *x, size_t T)
{
    KVL_TRY(check_call(__func__, c, w, out, x));
    const size_t H = c->mla.n_heads, K = c->index_topk;
    float *q = NULL, *rows = NULL, *I = NULL, *o = NULL;
    int32_t *s = NULL;
    int rc = alloc_floats(&q, T * H, qk_width(c), __func__);
    if (rc == KVL_OK) rc = alloc_floats(&rows, T, row_width(c), __func__);
    if (rc == KVL_OK) rc = alloc_floats(&I, T, T, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&o, T * H, c->mla.v_head, __func__);
    if (rc == KVL_OK) rc = alloc_n(&s, T, K, sizeof *s, __func__);
    if (rc == KVL_OK) rc = mla_query(q, &c->mla, &w->mla, x, T, 0);
    if (rc == KVL_OK) rc = mla_latent(rows, &c->mla, &w->mla, x, T, 0);
    if (rc == KVL_OK) rc = dsa_indexer_f32(I, c, w, x, T);
    if (rc == KVL_OK) rc = kvl_topk(s, I, T, T, K);
    if (rc == KVL_OK) rc = dsa_attend_masked_naive(o, c, w, q, rows, s, T, T);
    if (rc == KVL_OK) rc = project_out(out, c, w, o, T);
    if (rc == KVL_OK && sel) memcpy(sel, s, T * K * sizeof *sel);
    free(q);
    free(rows);
    free(I);
    free(o);
    free(s);
    return rc;
}

/* ---- the cache ---------------------------------------------------------------------------------------- */

const char *dsa_cache_format_name(dsa_cache_format f) { return f == DSA_CACHE_V32 ? "v32" : "f32"; }

static size_t main_row_bytes(void) { return kvf_row_bytes(KVF_ROW_V32_MAIN); }
static size_t index_row_bytes(void) { return kvf_row_bytes(KVF_ROW_V32_INDEX); }

static int init_v32(dsa_cache *cache, const dsa_config *c, size_t max_tokens)
{
    if (c->mla.kv_lora_rank != KVF_V32_NOPE || c->mla.qk_rope != KVF_V32_ROPE || c->index_head_dim != KVF_INDEX_DIM)
        return kvl_fail(KVL_EINVAL,
                        "dsa_cache_init: the v32 rows hold Dc %d, Dr %d and DI %d; the config has %zu, %zu and %zu",
                        KVF_V32_NOPE, KVF_V32_ROPE, KVF_INDEX_DIM, c->mla.kv_lora_rank, c->mla.qk_rope,
                        c->index_head_dim);
    KVL_TRY(alloc_n(&cache->main_rows, max_tokens, main_row_bytes(), 1, "dsa_cache_init"));
    return alloc_n(&cache->index_rows, max_tokens, index_row_bytes(), 1, "dsa_cache_init");
}

static int init_f32(dsa_cache *cache, const dsa_config *c, size_t max_tokens)
{
    KVL_TRY(mla_cache_init(&cache->latent, &c->mla, max_tokens, KV_STORE_F32));
    return kv_ring_init(&cache->index_keys, 0, max_tokens, c->index_head_dim, KV_STORE_F32);
}

int dsa_cache_init(dsa_cache *cache, const dsa_config *c, size_t max_tokens, dsa_cache_format fmt)
{
    memset(cache, 0, sizeof *cache);
    int rc = dsa_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "dsa_cache_init: %s", kvl_error());
    if (max_tokens == 0) return kvl_fail(KVL_EINVAL, "dsa_cache_init: max_tokens must be positive");
    if (fmt != DSA_CACHE_F32 && fmt != DSA_CACHE_V32)
        return kvl_fail(KVL_EINVAL, "dsa_cache_init: unknown cache format %d", (int)fmt);
    rc = fmt == DSA_CACHE_V32 ? init_v32(cache, c, max_tokens) : init_f32(cache, c, max_tokens);
    if (rc != KVL_OK) {
        dsa_cache_free(cache);
        return rc;
    }
    cache->fmt = fmt;
    cache->max_tokens = max_tokens;
    return KVL_OK;
}

size_t dsa_cache_bytes_used(const dsa_cache *cache)
{
    if (cache->fmt == DSA_CACHE_V32) return cache->len * (main_row_bytes() + index_row_bytes());
    return mla_cache_bytes_used(&cache->latent) + kv_ring_bytes_used(&cache->index_keys);
}

void dsa_cache_free(dsa_cache *cache)
{
    mla_cache_free(&cache->latent);
    kv_ring_free(&cache->index_keys);
    free(cache->main_rows);
    free(cache->index_rows);
    memset(cache, 0, sizeof *cache);
}

/* rows[n][Dc+Dr] and keys[n][DI] of positions first … first + n − 1, as the cache gives them back */
static int read_held(float *rows, float *keys, const dsa_cache *cache, const dsa_config *c, size_t first, size_t n)
{
    if (cache->fmt == DSA_CACHE_F32) {
        if (rows) KVL_TRY(kv_ring_read(rows, &cache->latent.ring, first, n));
        return keys ? kv_ring_read(keys, &cache->index_keys, first, n) : KVL_OK;
    }
    for (size_t i = 0; i < n; i++) {
        const size_t p = first + i;
        if (rows) kvf_row_unpack(KVF_ROW_V32_MAIN, rows + i * row_width(c), cache->main_rows + p * main_row_bytes());
        if (keys)
            kvf_row_unpack(KVF_ROW_V32_INDEX, keys + i * c->index_head_dim, cache->index_rows + p * index_row_bytes());
    }
    return KVL_OK;
}

/* The V32 cache stores the fresh rows[S][Dc+Dr] and keys[S][DI] of positions start … in their slots
 * (not yet held: len moves on commit) and replaces them with what the bytes decode to; the key is
 * rotated by H_DI/√DI first, as deployed. The F32 cache keeps them as they are. */
static int store_fresh(float *rows, float *keys, dsa_cache *cache, const dsa_config *c, size_t start, size_t S)
{
    if (cache->fmt == DSA_CACHE_F32) return KVL_OK;
    const size_t Dw = row_width(c), DI = c->index_head_dim;
    KVL_TRY(kvl_hadamard_rotate_rows_f32(keys, S, DI));
    for (size_t i = 0; i < S; i++) {
        uint8_t *row = cache->main_rows + (start + i) * main_row_bytes();
        uint8_t *key = cache->index_rows + (start + i) * index_row_bytes();
        int rc = kvf_row_pack(KVF_ROW_V32_MAIN, row, rows + i * Dw);
        if (rc == KVF_OK) rc = kvf_row_pack(KVF_ROW_V32_INDEX, key, keys + i * DI);
        if (rc != KVF_OK) return kvl_fail(KVL_EINVAL, "dsa: cannot store position %zu: %s", start + i, kvf_strerror(rc));
        kvf_row_unpack(KVF_ROW_V32_MAIN, rows + i * Dw, row);
        kvf_row_unpack(KVF_ROW_V32_INDEX, keys + i * DI, key);
    }
    return KVL_OK;
}

/* q_idx[S·HI][DI] in the form the cache's keys are stored in: as computed for F32, rotated and
 * quantised like the stored keys for V32 (the deployed fp8 indexer) */
static int match_stored_keys(float *q_idx, const dsa_cache *cache, const dsa_config *c, size_t S)
{
    if (cache->fmt == DSA_CACHE_F32) return KVL_OK;
    return dsa_index_quantise(q_idx, c, S * c->index_n_heads);
}

static int commit(dsa_cache *cache, const dsa_config *c, const float *rows, const float *keys, size_t S)
{
    if (cache->fmt == DSA_CACHE_F32) {
        KVL_TRY(mla_cache_append(&cache->latent, &c->mla, rows, S));
        KVL_TRY(kv_ring_append(&cache->index_keys, keys, S));
    }
    cache->len += S;
    return KVL_OK;
}

/* ---- incremental ---------------------------------------------------------------------------------- */

/* A chunk at start … start + S − 1 (N = start + S) up to its selections: keys[S][DI] and fresh[S][Dc+Dr]
 * are the chunk's own index keys and rows as the cache stores them. */
typedef struct {
    size_t start, S, N;
    float *fresh, *keys, *q, *q_idx, *w_idx, *I, *o;
    int32_t *sel;
} chunk;

static void chunk_free(chunk *k)
{
    free(k->fresh);
    free(k->keys);
    free(k->q);
    free(k->q_idx);
    free(k->w_idx);
    free(k->I);
    free(k->o);
    free(k->sel);
}

static int check_cache(const char *fn, const dsa_config *c, const dsa_cache *cache, size_t S)
{
    if (!cache || (!cache->latent.ring.rows && !cache->main_rows))
        return kvl_fail(KVL_EINVAL, "%s: cache is NULL or not initialised", fn);
    if (cache->fmt == DSA_CACHE_F32 &&
        (cache->latent.ring.width != row_width(c) || cache->index_keys.width != c->index_head_dim))
        return kvl_fail(KVL_EINVAL, "%s: cache rows hold %zu + %zu values, the config's Dc+Dr and DI are %zu + %zu", fn,
                        cache->latent.ring.width, cache->index_keys.width, row_width(c), c->index_head_dim);
    if (cache->fmt == DSA_CACHE_V32 &&
        (c->mla.kv_lora_rank != KVF_V32_NOPE || c->mla.qk_rope != KVF_V32_ROPE || c->index_head_dim != KVF_INDEX_DIM))
        return kvl_fail(KVL_EINVAL, "%s: a v32 cache needs Dc %d, Dr %d, DI %d", fn, KVF_V32_NOPE, KVF_V32_ROPE,
                        KVF_INDEX_DIM);
    if (S > cache->max_tokens - cache->len)
        return kvl_fail(KVL_EINVAL, "%s: %zu tokens after %zu exceed the cache's %zu positions", fn, S, cache->len,
                        cache->max_tokens);
    return KVL_OK;
}

static int chunk_alloc(chunk *k, const dsa_config *c, size_t S, const char *fn)
{
    const size_t H = c->mla.n_heads, HI = c->index_n_heads, DI = c->index_head_dim;
    KVL_TRY(alloc_floats(&k->fresh, S, row_width(c), fn));
    KVL_TRY(alloc_floats(&k->keys, S, DI, fn));
    KVL_TRY(alloc_floats(&k->q, S * H, qk_width(c), fn));
    KVL_TRY(alloc_floats(&k->q_idx, S * HI, DI, fn));
    KVL_TRY(alloc_floats(&k->w_idx, S, HI, fn));
    KVL_TRY(alloc_floats(&k->I, S, k->N, fn));
    KVL_TRY(alloc_floats(&k->o, S * H, c->mla.v_head, fn));
    return alloc_n(&k->sel, S, c->index_topk, sizeof *k->sel, fn);
}

/* What a chunk reads through a row view (ref/core/row_tiles.h): held positions as the cache gives them
 * back, the chunk's own (k; NULL for none) from its fresh keys or rows; sel a list of positions, or NULL
 * for positions 0, 1, … */
typedef struct {
    const dsa_cache *cache;
    const dsa_config *c;
    const chunk *k;
    const int32_t *sel;
} chunk_view;

/* The index keys a chunk's queries score, a tile at a time. */
static const float *chunk_key_tile(float *scratch, const kvl_row_tiles *keys, size_t first, size_t n)
{
    const chunk_view *ck = keys->src;
    const size_t DI = keys->width, start = ck->k->start;
    const size_t held = first >= start ? 0 : first + n <= start ? n : start - first;
    if (held && read_held(NULL, scratch, ck->cache, ck->c, first, held) != KVL_OK) return NULL;
    memcpy(scratch + held * DI, ck->k->keys + (first + held - start) * DI, (n - held) * DI * sizeof *scratch);
    return scratch;
}

/* Everything up to the selections, the chunk's keys written before any query is scored. */
static int chunk_select(chunk *k, const dsa_config *c, const dsa_weights *w, dsa_cache *cache, const float *x,
                        size_t S, const char *fn)
{
    memset(k, 0, sizeof *k);
    KVL_TRY(check_call(fn, c, w, x, cache));
    KVL_TRY(check_cache(fn, c, cache, S));
    k->start = cache->len;
    k->S = S;
    k->N = k->start + S;
    KVL_TRY(chunk_alloc(k, c, S, fn));
    KVL_TRY(mla_latent(k->fresh, &c->mla, &w->mla, x, S, k->start));
    KVL_TRY(dsa_index_key(k->keys, c, w, x, S, k->start));
    KVL_TRY(store_fresh(k->fresh, k->keys, cache, c, k->start, S));
    KVL_TRY(mla_query(k->q, &c->mla, &w->mla, x, S, k->start));
    KVL_TRY(dsa_index_query(k->q_idx, k->w_idx, c, w, x, S, k->start));
    KVL_TRY(match_stored_keys(k->q_idx, cache, c, S));
    const chunk_view ck = {cache, c, k, NULL};
    const kvl_row_tiles keys = {.N = k->N, .width = c->index_head_dim, .tile = chunk_key_tile, .src = &ck};
    KVL_TRY(kvl_index_scores(k->I, k->q_idx, k->w_idx, &keys, S, c->index_n_heads, k->start, 1));
    return kvl_topk(k->sel, k->I, S, k->N, c->index_topk);
}

/* rows[N][Dc+Dr]: the held rows, then the chunk's */
static int chunk_rows(float *rows, const chunk *k, const dsa_cache *cache, const dsa_config *c)
{
    KVL_TRY(read_held(rows, NULL, cache, c, 0, k->start));
    memcpy(rows + k->start * row_width(c), k->fresh, k->S * row_width(c) * sizeof *rows);
    return KVL_OK;
}

/* out, sel and the cache append, once the chunk's attention o is done */
static int chunk_finish(float *out, int32_t *sel, chunk *k, const dsa_config *c, const dsa_weights *w,
                        dsa_cache *cache)
{
    KVL_TRY(project_out(out, c, w, k->o, k->S));
    if (sel) memcpy(sel, k->sel, k->S * c->index_topk * sizeof *sel);
    return commit(cache, c, k->fresh, k->keys, k->S);
}

typedef int (*attend_fn)(float *, const dsa_config *, const dsa_weights *, const float *, const float *,
                         const int32_t *, size_t, size_t);

static int run_masked(float *out, int32_t *sel, const dsa_config *c, const dsa_weights *w, dsa_cache *cache,
                      const float *x, size_t S, attend_fn attend, const char *fn)
{
    if (!out) return kvl_fail(KVL_EINVAL, "%s: NULL output", fn);
    chunk k;
    float *rows = NULL;
    int rc = chunk_select(&k, c, w, cache, x, S, fn);
    if (rc == KVL_OK) rc = alloc_floats(&rows, k.N, row_width(c), fn);
    if (rc == KVL_OK) rc = chunk_rows(rows, &k, cache, c);
    if (rc == KVL_OK) rc = attend(k.o, c, w, k.q, rows, k.sel, S, k.N);
    if (rc == KVL_OK) rc = chunk_finish(out, sel, &k, c, w, cache);
    free(rows);
    chunk_free(&k);
    return rc;
}

int dsa_prefill(float *out, int32_t *sel, const dsa_config *c, const dsa_weights *w, dsa_cache *cache,
                const float *x, size_t S)
{
    return run_masked(out, sel, c, w, cache, x, S, dsa_attend_masked_naive, __func__);
}

int dsa_decode_masked(float *out, int32_t *sel, const dsa_config *c, const dsa_weights *w, dsa_cache *cache,
                      const float *x_t)
{
    return run_masked(out, sel, c, w, cache, x_t, 1, dsa_attend_masked_absorbed, __func__);
}

/* The rows one query picked, sel[0 … n) (−1 ends the list), read where they are by the thread whose part
 * of the attention reads them (a V32 row decoded a pick at a time). */
static const float *picked_tile(float *scratch, const kvl_row_tiles *v, size_t first, size_t n)
{
    const chunk_view *pr = v->src;
    const size_t Dw = v->width, held = pr->k ? pr->k->start : pr->cache->len;
    for (size_t i = 0; i < n; i++) {
        const size_t p = (size_t)pr->sel[first + i];
        float *dst = scratch + i * Dw;
        if (p >= held) memcpy(dst, pr->k->fresh + (p - held) * Dw, Dw * sizeof *dst);
        else if (read_held(dst, NULL, pr->cache, pr->c, p, 1) != KVL_OK) return NULL;
    }
    return scratch;
}

/* ô[H][Dc] for q̂[H][Dc+Dr] over the picked rows: MQA over whole rows (keys) and their c_kv (values). */
static int attend_picked(float *o_hat, const dsa_config *c, const float *q_hat, const chunk_view *pr)
{
    size_t n = 0;
    while (n < c->index_topk && pr->sel[n] >= 0) n++;
    const size_t Dw = row_width(c);
    const kvl_row_tiles rows = {.N = n, .width = Dw, .tile = picked_tile, .src = pr};
    const kvl_attend_rows r = {.N = n, .stride = Dw, .k_off = 0, .Dk = Dw, .v_off = 0, .Dv = c->mla.kv_lora_rank,
                               .groups = 1};
    return kvl_attend(o_hat, q_hat, c->mla.n_heads, &rows, &r, (float)c->mla.softmax_scale, NULL, NULL);
}

int dsa_attend_picks(float *o_hat, const dsa_config *c, const float *q_hat, const dsa_cache *cache,
                     const int32_t *sel)
{
    int rc = dsa_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", __func__, kvl_error());
    if (!o_hat || !q_hat || !sel) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    KVL_TRY(check_cache(__func__, c, cache, 0));
    for (size_t k = 0; k < c->index_topk && sel[k] != -1; k++)
        if (sel[k] < -1 || (size_t)sel[k] >= cache->len)
            return kvl_fail(KVL_EINVAL, "%s: pick %zu is position %d, the cache holds 0 … %zu", __func__, k,
                            (int)sel[k], cache->len ? cache->len - 1 : 0);
    const chunk_view pr = {cache, c, NULL, sel};
    return attend_picked(o_hat, c, q_hat, &pr);
}

int dsa_decode_gather(float *out, int32_t *sel, const dsa_config *c, const dsa_weights *w, dsa_cache *cache,
                      const float *x_t)
{
    if (!out) return kvl_fail(KVL_EINVAL, "%s: NULL output", __func__);
    chunk k;
    float *q_hat = NULL, *o_hat = NULL;
    int rc = chunk_select(&k, c, w, cache, x_t, 1, __func__);
    if (rc == KVL_OK) rc = alloc_floats(&q_hat, c->mla.n_heads, row_width(c), __func__);
    if (rc == KVL_OK) rc = alloc_floats(&o_hat, c->mla.n_heads, c->mla.kv_lora_rank, __func__);
    if (rc == KVL_OK) rc = mla_absorb_query(q_hat, &c->mla, &w->mla, k.q, 1);
    const chunk_view pr = {cache, c, &k, k.sel};
    if (rc == KVL_OK) rc = attend_picked(o_hat, c, q_hat, &pr);
    if (rc == KVL_OK) rc = mla_expand_output(k.o, &c->mla, &w->mla, o_hat, 1);
    if (rc == KVL_OK) rc = chunk_finish(out, sel, &k, c, w, cache);
    free(q_hat);
    free(o_hat);
    chunk_free(&k);
    return rc;
}
