/* The V4.1 indexer and its hierarchical candidate pool (DeepSeek-V4.1 report, section 2.3.1;
 * DeepSeek-V4.1-Flash inference/model.py; tests/test_ch07_v41.c).
 *
 * Index keys are written only by KV-source layers, from the compressor's pre-rotary latent L_i
 * (ref/v41_compressor.h), never from the rotated or quantised main entry:
 *   K^I_i = RMSNorm(W_IK L_i)  [DI]   W_IK [DI][Dh], gain;   K^I_i[DI−Dr …] ← RoPE(·, iM)
 * Every index source (Full and Reindex layers) has its own queries:
 *   q^I_{t,j} = (W_IQ c^Q_t)_j  [HI][DI], trailing Dr channels rotated at t;   w_t = W_IW x_t · (HI·DI)^−½
 *   S^I_{t,i} = Σ_j w_{t,j} ReLU(q^I_{t,j}·K^I_i)   for the entries i < n_t = ⌊(t+1)/M⌋ it scores
 * A Full layer scores all n_t visible entries (v41_index_scores_all); a Reindex layer after the candidate
 * source scores only the candidate pool P_t (v41_index_scores_pool). Unscored entries are −∞. Each
 * function adds the number of scores it evaluated to *scored: the per-query indexer work.
 *
 * Candidate pool (v41_candidate_pool, run on the candidate source's scores): cut entries 0 … n_t − 1 into
 * blocks of B; block score = max over its entries (−∞ pads the last block); the block holding n_t − 1 scores
 * +∞ (newest, maybe partial); keep the top min(P, #blocks) blocks of finite or +∞ score (ref/core/topk.h's
 * order); P_t = their entries, at most P·B.
 *
 * The deployed path rounds keys and queries to MXFP4 (E8M0 scale per 32, rounded up; no Hadamard rotation in
 * V4.1's inference code, unlike V3.2's and V4's): v41_index_round_mxfp4.
 *
 * Letters: S chunk, t query position, d width, Dq' query latent, HI/DI index heads/width, Dr rotary, M ratio,
 * N entries, K index_topk, B candidate_block_size, P candidate_topk_blocks. */
#ifndef KVL_CSA2_INDEXER_H
#define KVL_CSA2_INDEXER_H

#include <stddef.h>
#include <stdint.h>

#include "index_scan.h"
#include "rope.h"

typedef struct {
    size_t d, q_lora_rank;        /* d, Dq' */
    size_t width;                 /* Dh: the latent the keys are projected from */
    size_t n_heads, head_dim;     /* HI, DI */
    size_t topk;                  /* K */
    size_t ratio;                 /* M of the source whose entries are scored */
    double norm_eps;
    kvl_rope rope;                /* the layer's table; Dr ≤ DI */
    int64_t rope_offset;          /* Δ */
} v41_indexer_config;

int v41_indexer_config_check(const v41_indexer_config *c);

/* keys[n][DI] = RMSNorm(W_IK L[n][Dh]) with gain ik_norm, entry i (global index first + i) rotated at
 * (first + i)·M + Δ. */
int v41_index_keys(float *keys, const v41_indexer_config *c, const float *w_ik, const float *ik_norm,
                    const float *L, size_t n, size_t first);

/* q_idx[S][HI][DI] from cq[S][Dq'] (rotated at pos0 + i), w_idx[S][HI] = W_IW x · (HI·DI)^−½. */
int v41_index_query(float *q_idx, float *w_idx, const v41_indexer_config *c, const float *w_iq,
                     const float *w_iw, const float *cq, const float *x, size_t S, int64_t pos0);

/* I[S][N] over the N = keys->N entries (ref/core/index_scan.h, read a tile at a time): every visible entry
 * i < ⌊(start+s+1)/M⌋ scored, the rest −∞; *scored += scores evaluated. */
int v41_index_scores_all(float *I, uint64_t *scored, const v41_indexer_config *c, const float *q_idx,
                          const float *w_idx, const kvl_row_tiles *keys, size_t S, size_t start);

/* I[S][N]: only the pool entries (pool[s][i] ≠ 0) scored, the rest −∞; *scored += scores evaluated. */
int v41_index_scores_pool(float *I, uint64_t *scored, const v41_indexer_config *c, const float *q_idx,
                           const float *w_idx, const kvl_row_tiles *keys, const uint8_t *pool, size_t S);

/* sel[S][K] = top-K of each row of I[S][N] (ascending, −1 padding). */
int v41_index_select(int32_t *sel, const v41_indexer_config *c, const float *I, size_t S, size_t N);

/* pool[S][N] ∈ {0, 1} from the candidate source's scores I[S][N] for queries at start … start + S − 1. */
int v41_candidate_pool(uint8_t *pool, const float *I, size_t S, size_t N, size_t start, size_t M,
                        size_t block, size_t n_blocks);

/* v[n][DI] ← MXFP4 round trip (E2M1, E8M0 per 32 rounded up). KVL_EINVAL unless DI is a multiple of 32, or
 * for a non-finite value (v unchanged). */
int v41_index_round_mxfp4(float *v, size_t n, size_t DI);

#endif
