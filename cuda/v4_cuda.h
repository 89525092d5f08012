/* DeepSeek-V4 attention on the GPU: the twins of ref/v4.h's attention core (v4_attend) and of
 * ref/v4_indexer.h's scores over compressed entries, both forms (kernels in v4_cuda.cuh, dsa_cuda.cuh and
 * attend_cuda.cuh; the picks between them are kvl_topk_cuda's, cuda/topk_cuda.h).
 *
 *   v4_attend_cuda            every query over its window rows and then its compressed rows (HCA every
 *                             visible entry, CSA its picks, none for a window-only layer) with the head's
 *                             sink in the denominator, the trailing Dr channels of the output rotated back
 *                             at the query's position; rows as float32 or the 584-byte V4 main row (E4M3
 *                             with an E8M0 scale per 64, bf16 RoPE channels), decoded inside the kernel
 *   v4_output_cuda            the grouped output projection: the G group products W_OA^r as one batched
 *                             cuBLAS call (cublasSgemmStridedBatched), then W_OB
 *   v4_index_scores_cuda      the f32 indexer: Σ_j w_j·ReLU(q_j·K_i) over the visible entries
 *   v4_index_scores_fp4_cuda  the deployed one: keys as 68-byte MXFP4 rows (E2M1, E8M0 per 32), decoded
 *                             inside the kernel; queries already in the fp4 path's view (v4_index_rotate,
 *                             v4_index_round_mxfp4)
 * Arrays are device buffers. Outputs match the ref to float rounding (tests/cuda/test_cuda_v4.c).
 * Functions return KVL_OK, KVL_EINVAL (kvl_error() names the problem), KVL_ENOMEM or KVL_ECUDA. */
#ifndef KVL_V4_CUDA_H
#define KVL_V4_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "device.h"
#include "v4.h"

typedef enum {
    V4_CUDA_F32,  /* rows of Dh float32 */
    V4_CUDA_MAIN, /* 584-byte V4 main rows (formats/rows.h KVF_ROW_V4_MAIN): Dh 512, Dr 64 only */
} v4_cuda_store;

/* Bytes of one row of Dh values in the store: 4·Dh or 584. */
size_t v4_cuda_row_bytes(v4_cuda_store s, size_t Dh);

/* o[S][H][Dh] = v4_attend's output (un-rotated) for q[S][H][Dh] at positions start … start + S − 1, with
 * the window rows win (positions win_first … start + S − 1) and the compressed rows entries[N], both in
 * `store`; sel[S][K] the CSA picks (NULL otherwise); sinks[H] the heads' sink logits (v4_weights.sinks on
 * the device). work holds the temporaries. KVL_EINVAL as v4_attend (a pick outside −1 … N − 1, fewer
 * entries than an HCA query sees, win_first after start). */
int v4_attend_cuda(float *o, const v4_config *c, const float *sinks, const float *q, const void *win, size_t win_first,
                   const void *entries, size_t N, const int32_t *sel, size_t S, size_t start, v4_cuda_store store,
                   kvl_workspace *work);

/* out[S][d] = v4_output's grouped projection of o[S][H][Dh] (already un-rotated): u_r = W_OA^r concat of
 * group r's heads for the G groups at once, one strided-batched cuBLAS product, then out = W_OB u. w_oa
 * [G·Do][(H/G)·Dh] and w_ob [d][G·Do] are v4_weights' on the device; work holds u[S][G·Do]. */
int v4_output_cuda(float *out, const v4_config *c, const float *w_oa, const float *w_ob, const float *o, size_t S,
                   kvl_workspace *work);

/* I[S][N] = v4_index_scores for queries q_idx[S][HI][DI], w_idx[S][HI] at positions start … over the
 * entries keys[N][DI] (float32), or key_rows[N][68] (MXFP4; DI 128 only). */
int v4_index_scores_cuda(float *I, const v4_indexer_config *c, const float *q_idx, const float *w_idx,
                         const float *keys, size_t S, size_t N, size_t start);
int v4_index_scores_fp4_cuda(float *I, const v4_indexer_config *c, const float *q_idx, const float *w_idx,
                             const uint8_t *key_rows, size_t S, size_t N, size_t start);

#ifdef __cplusplus
}
#endif

#endif
