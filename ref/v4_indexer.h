/* The V4 CSA indexer: which compressed entries each query reads (DeepSeek-V4 report,
 * section 2.3.1; DeepSeek-V4-Flash inference/model.py; tests/test_ch06_v4.c).
 *
 * V3.2's lightning indexer (ref/dsa.h) moved up one level: it scores compressed entries, not tokens,
 * and builds its keys with its own compressor (ref/v4_compressor.h) at width DI, same ratio M and
 * overlap as the layer's CSA compressor, the same rotary table.
 *
 *   q^I_{t,j} = (W_IQ c^Q_t)_j            [HI][DI]   W_IQ [HI·DI][Dq'], c^Q the layer's query latent
 *   q^I_{t,j}[DI−Dr … DI−1] ← RoPE(·, t)              trailing channels, interleaved, the layer's table
 *   w_{t,j}   = (W_IW x_t)_j · HI^−½ · DI^−½          W_IW [HI][d]  (both factors, as in the code)
 *   K^I_i     = the indexer compressor's entry i        [DI]
 *   I_{t,i}   = Σ_j w_{t,j}·ReLU(q^I_{t,j}·K^I_i)    for i < ⌊(t+1)/M⌋ (causal threshold), −∞ otherwise
 *   S_t       = the K largest legal I_{t,i} (ref/core/topk.h's kvl_topk: larger first, smaller index on ties,
 *               stored ascending, −1 where fewer than K entries are legal)
 * transformers takes top-min(K, N) over all N entries of the chunk and then maps picks ≥ ⌊(t+1)/M⌋ to −1;
 * since illegal entries score −∞ and rank below every legal one, that is the same set.
 *
 * Two forms of the query-key path:
 *   f32  the formula above in float32;
 *   fp4  DeepSeek's deployed one (DeepSeek-V4-Flash inference/model.py): after RoPE, q^I heads and K^I are
 *        rotated by the orthonormal Hadamard matrix H_DI/√DI (ref/core/hadamard.h; q·k unchanged in exact
 *        arithmetic), then rounded to MXFP4: E2M1 elements, one E8M0 scale per 32 channels chosen by rounding
 *        up (formats/block.h kvf_quant_mxfp4_rceil). Keys are stored that way in the 68-byte row; w stays
 *        float32.
 *
 * Letters: T tokens, S chunk, t query position, d width, Dq' query latent, HI index heads, DI index
 * head width, Dr rotary channels, M ratio, N entries, K index_topk. */
#ifndef KVL_V4_INDEXER_H
#define KVL_V4_INDEXER_H

#include <stddef.h>
#include <stdint.h>

#include "v4_compressor.h"

typedef struct {
    size_t d;               /* input width */
    size_t q_lora_rank;     /* Dq' */
    size_t n_heads;         /* HI */
    size_t head_dim;        /* DI */
    size_t topk;            /* K */
    v4_compressor_config compressor;  /* width DI, the layer's ratio, overlap 1, the layer's rope */
} v4_indexer_config;

/* KVL_EINVAL unless d, Dq', HI, DI and K are positive, the compressor checks, its width is DI and its
 * rotary width fits DI; the message names the field. */
int v4_indexer_config_check(const v4_indexer_config *c);

typedef struct {
    float *w_iq;                        /* [HI·DI][Dq'] */
    float *w_iw;                        /* [HI][d] */
    v4_compressor_weights compressor;   /* its own W_C, W_Z [2·DI][d], B [M][2·DI], gain [DI] */
} v4_indexer_weights;

#define V4_INDEXER_N_WEIGHTS (2 + V4_COMPRESSOR_N_WEIGHTS)

/* t[V4_INDEXER_N_WEIGHTS] = the indexer's sizes table for w, in cut and draw order. */
void v4_indexer_weight_table(v4_weight *t, v4_indexer_weights *w, const v4_indexer_config *c);

/* q_idx[S][HI][DI] from cq[S][Dq'] (head j's trailing Dr channels rotated at rotary position pos0 + i)
 * and w_idx[S][HI] = W_IW x · HI^−½·DI^−½ from x[S][d]. */
int v4_index_query(float *q_idx, float *w_idx, const v4_indexer_config *c, const v4_indexer_weights *w,
                   const float *cq, const float *x, size_t S, int64_t pos0);

/* I[S][N] = Σ_j w_idx[i][j]·ReLU(q_idx[i][j]·keys[e]) for the entries e < ⌊(start+i+1)/M⌋ (the query at
 * position start + i), −INFINITY for the others; keys[N][DI]: ref/core/index_scan.h's scan with ratio M,
 * the head sum in float32. */
int v4_index_scores(float *I, const v4_indexer_config *c, const float *q_idx, const float *w_idx,
                    const float *keys, size_t S, size_t N, size_t start);

/* sel[S][K] = the picks of I[S][N]: the K largest legal (finite) scores of each row, larger first and the
 * smaller entry on ties, stored ascending, −1 where fewer are legal (ref/core/topk.h); all −1 when
 * N = 0. */
int v4_index_select(int32_t *sel, const v4_indexer_config *c, const float *I, size_t S, size_t N);

/* v[n][DI] ← H_DI/√DI · v: the rotation the fp4 path applies to query heads and keys before rounding.
 * KVL_EINVAL unless DI is a power of two. */
int v4_index_rotate(float *v, const v4_indexer_config *c, size_t n);

/* v[n][DI] ← the fp4 path's view of n already rotated query heads or keys: MXFP4 with round-up E8M0
 * scales, decoded. KVL_EINVAL unless DI is a multiple of 32, or for a NaN or infinity (v unchanged). */
int v4_index_round_mxfp4(float *v, const v4_indexer_config *c, size_t n);

#endif
