/* Chapter 10's decode kernels, from the plain loop to FlashMLA's structure, one step at a time (their
 * kernels: decode_steps_cuda.cuh). Each step is checked against a CPU loop of ref/ (tests/cuda/
 * test_cuda_steps.c) and has a planted mistake, one kernel variant the emulator must stop with its
 * report: kvl_error() names it after the call returns KVL_ECUDA. All buffers are device buffers
 * (kvl_cuda_alloc); the calls return KVL_OK, KVL_EINVAL (kvl_error() names the argument) or KVL_ECUDA. */
#ifndef KVL_DECODE_STEPS_CUDA_H
#define KVL_DECODE_STEPS_CUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Which kernel a step launches: the right one, or the one with the step's planted mistake. */
typedef enum { KVL_STEP_RIGHT = 0, KVL_STEP_PLANTED = 1 } kvl_step_kernel;

#define KVL_STEP1_MAX_ROWS 1024 /* step 1's scores of one head live in shared memory */
#define KVL_STEP1_MAX_D 1024    /* one thread per output channel, one block */
#define KVL_STEP2_MAX_D 128     /* a lane holds D / 32 channels of its head, at most four */
#define KVL_STEP2_MAX_G 8       /* a warp per query head of the group */
#define KVL_STEP3_MAX_DK 128    /* a warp's tiles of Q and K in shared memory */
#define KVL_STEP4_MAX_H 8       /* a warp per head over V3.2's 656-byte rows */

/* Step 1, one thread per output. o[D] = softmax(s) · V, s_j = scale · q·k_j, for one head over rows
 * k[n][D], v[n][D]; n in 1 … KVL_STEP1_MAX_ROWS, D in 1 … KVL_STEP1_MAX_D. The block's threads first
 * score the rows into shared memory (thread t scores rows t, t + D, …), then thread d reads every score
 * for its channel. Planted: the barrier between the two phases is gone. */
int kvl_step1_attend_cuda(float *o, const float *q, const float *k, const float *v, size_t n, size_t D,
                          float scale, kvl_step_kernel which);

/* Step 2, a block per KV head and split, then the combine. o[H][D] for queries q[H][D] of H = Hkv·G
 * heads over k[Hkv][n][D], v[Hkv][n][D] (query head h reads KV head h / G); D a multiple of 32 up to
 * KVL_STEP2_MAX_D, G up to KVL_STEP2_MAX_G, n ≥ 1, split ≥ 1 rows per split. Each block stages tiles of
 * its KV head's rows in shared memory once for all G heads and writes each head's partial softmax
 * (m, l, acc[D]); a second kernel merges the ⌈n / split⌉ partials of each head. Planted: the barrier
 * that keeps a tile from being overwritten while another warp still reads it is gone. */
int kvl_step2_attend_cuda(float *o, const float *q, const float *k, const float *v, size_t Hkv, size_t G,
                          size_t n, size_t D, size_t split, float scale, kvl_step_kernel which);

/* Step 3, tensor-core tiles. S[16][n] = Q[16][Dk] · K[n][Dk]ᵀ with Q and K in bf16 (uint16_t bits) and
 * float sums, one warp of mma.sync m16n8k16, fragments loaded by ldmatrix; Dk a multiple of 16 up to
 * KVL_STEP3_MAX_DK, n ≥ 1. Planted: the shared tiles' rows padded by 4 elements instead of 8, so that
 * ldmatrix's row addresses are not 16-byte aligned. */
int kvl_step3_scores_cuda(float *S, const uint16_t *Q, const uint16_t *K, size_t n, size_t Dk,
                          kvl_step_kernel which);

/* What one mma.sync m16n8k16 holds per lane: A[16][16] and Bt[8][16] (B = Btᵀ, B[k][n] = Bt[n][k]) in
 * bf16 loaded by ldmatrix as step 3 loads them; a[32][4] and b[32][2] are the registers lane l received,
 * two bf16 each (lower element in the low half), d[32][4] the floats of A·B each lane holds. */
int kvl_step3_fragments_cuda(uint32_t *a, uint32_t *b, float *d, const uint16_t *A, const uint16_t *Bt);

/* Step 4, cp.async double buffering over FP8 rows. o[H][512] = softmax(s) · x[·][0, 512), s_j = scale ·
 * q_h·x_j, for queries q[H][576] over n ≥ 1 V3.2 main rows (formats/rows.h: 656 bytes each, E4M3 codes
 * with FP32 scales per 128, then 64 bf16), decoded in registers; H in 1 … KVL_STEP4_MAX_H. Tiles of rows
 * are copied with cp.async into two shared buffers, the next while the current is read. Planted: the
 * wait retires one group too few, so the current tile is read before it has landed. */
int kvl_step4_attend_v32_cuda(float *o, const float *q, const uint8_t *rows, size_t H, size_t n, float scale,
                              kvl_step_kernel which);

#ifdef __cplusplus
}
#endif

#endif
