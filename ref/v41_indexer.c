#include "v41_indexer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "index_scan.h"
#include "linalg.h"
#include "norm.h"
#include "status.h"
#include "topk.h"

int v41_indexer_config_check(const v41_indexer_config *c)
{
    if (!c) return kvl_fail(KVL_EINVAL, "v41 indexer: config is NULL");
    if (!c->d || !c->q_lora_rank || !c->width || !c->n_heads || !c->head_dim || !c->topk || !c->ratio)
        return kvl_fail(KVL_EINVAL, "v41 indexer: d, q_lora_rank, width, index heads, index_head_dim, index_topk "
                        "and ratio must be positive");
    if (c->rope.Dr < 2 || c->rope.Dr > c->head_dim)
        return kvl_fail(KVL_EINVAL, "v41 indexer: rotary width %zu does not fit index_head_dim %zu", c->rope.Dr,
                        c->head_dim);
    return KVL_OK;
}

int v41_index_keys(float *keys, const v41_indexer_config *c, const float *w_ik, const float *ik_norm,
                    const float *L, size_t n, size_t first)
{
    KVL_TRY(v41_indexer_config_check(c));
    if (n == 0) return KVL_OK;
    const size_t DI = c->head_dim, Dr = c->rope.Dr;
    KVL_TRY(kvl_matmul_abt_f32(keys, L, w_ik, n, DI, c->width));
    kvl_rmsnorm_f32(keys, keys, ik_norm, n, DI, c->norm_eps);
    for (size_t i = 0; i < n; i++)
        kvl_rope_rotate_interleaved(keys + i * DI + DI - Dr, &c->rope, (int64_t)((first + i) * c->ratio) + c->rope_offset);
    return KVL_OK;
}

int v41_index_query(float *q_idx, float *w_idx, const v41_indexer_config *c, const float *w_iq,
                     const float *w_iw, const float *cq, const float *x, size_t S, int64_t pos0)
{
    KVL_TRY(v41_indexer_config_check(c));
    if (S == 0) return KVL_OK;
    const size_t HI = c->n_heads, DI = c->head_dim;
    KVL_TRY(kvl_matmul_abt_f32(q_idx, cq, w_iq, S, HI * DI, c->q_lora_rank));
    kvl_rope_rotate_heads_interleaved(q_idx, S, HI * DI, DI - c->rope.Dr, HI, DI, &c->rope, pos0);
    KVL_TRY(kvl_matmul_abt_f32(w_idx, x, w_iw, S, HI, c->d));
    const float scale = (float)(1.0 / sqrt((double)(HI * DI)));
    for (size_t i = 0; i < S * HI; i++) w_idx[i] *= scale;
    return KVL_OK;
}

int v41_index_scores_all(float *I, uint64_t *scored, const v41_indexer_config *c, const float *q_idx,
                          const float *w_idx, const kvl_row_tiles *keys, size_t S, size_t start)
{
    KVL_TRY(v41_indexer_config_check(c));
    if (!scored || !keys) return kvl_fail(KVL_EINVAL, "v41_index_scores_all: NULL count or keys");
    KVL_TRY(kvl_index_scores(I, q_idx, w_idx, keys, S, c->n_heads, start, c->ratio));
    for (size_t s = 0; s < S; s++) {
        const size_t n_t = (start + s + 1) / c->ratio;
        *scored += n_t < keys->N ? n_t : keys->N;
    }
    return KVL_OK;
}

/* at[n] ← the entries i with pool[i] ≠ 0, ascending. A pool is a few thousand blocks of up to a million
 * entries, mostly zeros: it is read eight entries at a time and a word of zeros passed over whole (a
 * byte at a time it took a millisecond at 1M, a quarter of the scan of the pool's keys). */
static size_t pool_list(int32_t *at, const uint8_t *pool, size_t N)
{
    size_t n = 0;
    for (size_t i = 0; i < N; i += 8) {
        const size_t end = N - i < 8 ? N : i + 8;
        uint64_t word = 1;
        if (end - i == 8) memcpy(&word, pool + i, sizeof word);
        if (!word) continue;
        for (size_t j = i; j < end; j++)
            if (pool[j]) at[n++] = (int32_t)j;
    }
    return n;
}

int v41_index_scores_pool(float *I, uint64_t *scored, const v41_indexer_config *c, const float *q_idx,
                           const float *w_idx, const kvl_row_tiles *keys, const uint8_t *pool, size_t S)
{
    KVL_TRY(v41_indexer_config_check(c));
    if (!scored || !keys || (S && !pool))
        return kvl_fail(KVL_EINVAL, "v41_index_scores_pool: NULL count, keys or pool");
    const size_t N = keys->N, HI = c->n_heads, DI = c->head_dim;
    if (N > INT32_MAX) return kvl_fail(KVL_EINVAL, "v41_index_scores_pool: %zu entries exceed a pick's int32", N);
    int32_t *at = malloc((N ? N : 1) * sizeof *at);
    int rc = at ? KVL_OK : kvl_fail(KVL_ENOMEM, "v41_index_scores_pool: out of memory");
    for (size_t s = 0; s < S && rc == KVL_OK; s++) {
        const size_t n = pool_list(at, pool + s * N, N);
        rc = kvl_index_scores_listed(I + s * N, q_idx + s * HI * DI, w_idx + s * HI, keys, HI, at, n);
        *scored += n;
    }
    free(at);
    return rc;
}

int v41_index_select(int32_t *sel, const v41_indexer_config *c, const float *I, size_t S, size_t N)
{
    KVL_TRY(v41_indexer_config_check(c));
    if (N == 0) {
        for (size_t i = 0; i < S * c->topk; i++) sel[i] = -1;
        return KVL_OK;
    }
    return kvl_topk(sel, I, S, N, c->topk);
}

/* pool[N] for one query that sees n_t entries; bscore[n_blocks_max] and pick[P] are scratch. */
static int pool_row(uint8_t *pool, const float *I, size_t N, size_t n_t, size_t B, size_t P, float *bscore,
                    int32_t *pick)
{
    memset(pool, 0, N);
    if (n_t == 0) return KVL_OK;
    const size_t nb = (n_t + B - 1) / B;
    for (size_t b = 0; b < nb; b++) {
        float m = -INFINITY;
        for (size_t i = b * B; i < (b + 1) * B && i < n_t; i++) m = fmaxf(m, I[i]);
        bscore[b] = m;
    }
    bscore[(n_t - 1) / B] = INFINITY;
    KVL_TRY(kvl_topk(pick, bscore, 1, nb, P));
    for (size_t k = 0; k < P && pick[k] >= 0; k++)
        for (size_t i = (size_t)pick[k] * B; i < ((size_t)pick[k] + 1) * B && i < n_t; i++) pool[i] = 1;
    return KVL_OK;
}

int v41_candidate_pool(uint8_t *pool, const float *I, size_t S, size_t N, size_t start, size_t M,
                        size_t block, size_t n_blocks)
{
    if (M == 0 || block == 0 || n_blocks == 0)
        return kvl_fail(KVL_EINVAL, "v41_candidate_pool: ratio, block size and block count must be positive");
    const size_t nb_max = N / block + 1;
    float *bscore = malloc(nb_max * sizeof *bscore);
    int32_t *pick = malloc(n_blocks * sizeof *pick);
    int rc = bscore && pick ? KVL_OK : kvl_fail(KVL_ENOMEM, "v41_candidate_pool: out of memory");
    for (size_t s = 0; s < S && rc == KVL_OK; s++) {
        const size_t n_t = (start + s + 1) / M;
        rc = pool_row(pool + s * N, I + s * N, N, n_t < N ? n_t : N, block, n_blocks, bscore, pick);
    }
    free(bscore);
    free(pick);
    return rc;
}

int v41_index_round_mxfp4(float *v, size_t n, size_t DI)
{
    if (DI % 32) return kvl_fail(KVL_EINVAL, "v41_index_round_mxfp4: index_head_dim %zu is not a multiple of 32", DI);
    int err = kvf_check_finite(v, n * DI);
    if (err != KVF_OK) return kvl_fail(KVL_EINVAL, "v41_index_round_mxfp4: %s", kvf_strerror(err));
    uint8_t codes[16], scales[1];
    for (size_t i = 0; i < n * DI; i += 32) {
        err = kvf_quant_mxfp4_rceil(codes, scales, v + i, 32);
        if (err == KVF_OK) err = kvf_dequant_mxfp4(v + i, codes, scales, 32);
        if (err != KVF_OK) return kvl_fail(KVL_EINVAL, "v41_index_round_mxfp4: %s", kvf_strerror(err));
    }
    return KVL_OK;
}
