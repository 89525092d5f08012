#include "v4_indexer.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "hadamard.h"
#include "index_scan.h"
#include "linalg.h"
#include "status.h"
#include "topk.h"
#include "v4_rope.h"

int v4_indexer_config_check(const v4_indexer_config *c)
{
    if (!c) return kvl_fail(KVL_EINVAL, "v4 indexer: config is NULL");
    const struct { const char *name; size_t v; } widths[] = {
        {"d", c->d}, {"q_lora_rank", c->q_lora_rank}, {"index_n_heads", c->n_heads},
        {"index_head_dim", c->head_dim}, {"index_topk", c->topk},
    };
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        if (widths[i].v == 0) return kvl_fail(KVL_EINVAL, "v4 indexer: field %s must be positive, got 0", widths[i].name);
    int rc = v4_compressor_config_check(&c->compressor);
    if (rc != KVL_OK) return kvl_fail(rc, "v4 indexer: %s", kvl_error());
    if (c->compressor.width != c->head_dim || c->compressor.d != c->d)
        return kvl_fail(KVL_EINVAL, "v4 indexer: its compressor must map width %zu to index_head_dim %zu, got %zu to %zu",
                        c->d, c->head_dim, c->compressor.d, c->compressor.width);
    if (c->n_heads > SIZE_MAX / sizeof(float) / c->head_dim / (c->q_lora_rank > c->d ? c->q_lora_rank : c->d))
        return kvl_fail(KVL_EINVAL, "v4 indexer: %zu heads of %zu overflow", c->n_heads, c->head_dim);
    return KVL_OK;
}

void v4_indexer_weight_table(v4_weight *t, v4_indexer_weights *w, const v4_indexer_config *c)
{
    t[0] = (v4_weight){&w->w_iq, c->n_heads * c->head_dim, c->q_lora_rank, V4_DRAW_MATRIX};
    t[1] = (v4_weight){&w->w_iw, c->n_heads, c->d, V4_DRAW_MATRIX};
    v4_compressor_weight_table(t + 2, &w->compressor, &c->compressor);
}

static int check_call(const char *fn, const v4_indexer_config *c)
{
    int rc = v4_indexer_config_check(c);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: %s", fn, kvl_error());
    return KVL_OK;
}

int v4_index_query(float *q_idx, float *w_idx, const v4_indexer_config *c, const v4_indexer_weights *w,
                   const float *cq, const float *x, size_t S, int64_t pos0)
{
    KVL_TRY(check_call(__func__, c));
    if (S == 0) return KVL_OK;
    if (!q_idx || !w_idx || !cq || !x || !w || !w->w_iq || !w->w_iw)
        return kvl_fail(KVL_EINVAL, "%s: NULL weights or array", __func__);
    const size_t HI = c->n_heads, DI = c->head_dim;
    KVL_TRY(kvl_matmul_abt_f32(q_idx, cq, w->w_iq, S, HI * DI, c->q_lora_rank));
    v4_rotate_heads(q_idx, S, HI, DI, &c->compressor.rope, pos0);
    KVL_TRY(kvl_matmul_abt_f32(w_idx, x, w->w_iw, S, HI, c->d));
    const float scale = (float)(1.0 / (sqrt((double)HI) * sqrt((double)DI)));
    for (size_t i = 0; i < S * HI; i++) w_idx[i] *= scale;
    return KVL_OK;
}

int v4_index_scores(float *I, const v4_indexer_config *c, const float *q_idx, const float *w_idx,
                    const float *keys, size_t S, size_t N, size_t start)
{
    KVL_TRY(check_call(__func__, c));
    if (!keys) return kvl_fail(KVL_EINVAL, "%s: NULL keys", __func__);
    const kvl_row_tiles k = kvl_row_tiles_f32(keys, N, c->head_dim);
    return kvl_index_scores(I, q_idx, w_idx, &k, S, c->n_heads, start, c->compressor.ratio);
}

int v4_index_select(int32_t *sel, const v4_indexer_config *c, const float *I, size_t S, size_t N)
{
    KVL_TRY(check_call(__func__, c));
    const size_t K = c->topk;
    if (S && !sel) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    if (N == 0) {
        for (size_t i = 0; i < S * K; i++) sel[i] = -1;
        return KVL_OK;
    }
    return kvl_topk(sel, I, S, N, K);
}

int v4_index_rotate(float *v, const v4_indexer_config *c, size_t n)
{
    KVL_TRY(check_call(__func__, c));
    int rc = kvl_hadamard_rotate_rows_f32(v, n, c->head_dim);
    if (rc != KVL_OK) return kvl_fail(rc, "%s: index_head_dim: %s", __func__, kvl_error());
    return KVL_OK;
}

int v4_index_round_mxfp4(float *v, const v4_indexer_config *c, size_t n)
{
    KVL_TRY(check_call(__func__, c));
    const size_t DI = c->head_dim;
    if (DI % KVF_MXFP4_RCEIL_BLOCK)
        return kvl_fail(KVL_EINVAL, "%s: index_head_dim %zu is not a multiple of the MXFP4 block %d", __func__, DI,
                        KVF_MXFP4_RCEIL_BLOCK);
    if (n && !v) return kvl_fail(KVL_EINVAL, "%s: NULL array", __func__);
    int err = kvf_check_finite(v, n * DI);
    if (err != KVF_OK) return kvl_fail(KVL_EINVAL, "%s: %s", __func__, kvf_strerror(err));
    uint8_t *codes = malloc(DI / 2 + DI / KVF_MXFP4_RCEIL_BLOCK);
    if (!codes) return kvl_fail(KVL_ENOMEM, "%s: out of memory", __func__);
    uint8_t *scales = codes + DI / 2;
    for (size_t r = 0; r < n; r++) {
        kvf_quant_mxfp4_rceil(codes, scales, v + r * DI, DI);
        kvf_dequant_mxfp4(v + r * DI, codes, scales, DI);
    }
    free(codes);
    return KVL_OK;
}
