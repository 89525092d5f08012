/* Chapter 10's decode kernels (decode_steps_cuda.h), each a step toward the structure of FlashMLA's
 * decode kernel, small enough to read in one sitting; the production versions are attend_cuda.cuh's and
 * mla_cuda.cuh's. Every kernel is a template on Planted: true compiles the step's planted mistake, which
 * the emulator (cuda/emu/) stops with a report.
 *
 * Build: included by cuda/decode_steps_cuda.cu (make cuda for nvcc, make test for the emulator).
 * Kernels (one line per version):
 *   kvl_step1_kernel<P>          one block, one thread per output channel: the scores of every row into
 *                                shared memory first (each row scored once), a barrier, then each thread
 *                                the whole softmax and its channel of the weighted sum
 *   kvl_step2_split_kernel<P>    a block per (KV head, split), a warp per query head of the group: tiles
 *                                of K and V staged once in shared memory for all the group's heads, each
 *                                warp's online softmax over them, a partial (m, l, acc) per split
 *   kvl_step2_combine_kernel     a block per head: the partials merged by kvl_softmax_merge
 *   kvl_step3_scores_kernel<P>   one warp: Q and K tiles in shared memory, fragments by ldmatrix, the
 *                                scores by mma.sync m16n8k16 (bf16 in, float sums)
 *   kvl_step3_fragments_kernel   one warp: the fragments of one mma, written out per lane
 *   kvl_step4_v32_kernel<P>      a warp per head over V3.2's FP8 rows: tiles copied by cp.async into
 *                                two buffers (the next in flight while the current is read), codes times
 *                                scales decoded in registers, the online softmax of step 2 */
#ifndef KVL_DECODE_STEPS_CUDA_CUH
#define KVL_DECODE_STEPS_CUDA_CUH

#include "attend_cuda.cuh"
#include "decode_steps_cuda.h"

/* ---- step 1: one thread per output ------------------------------------------------------------------ */

template <bool Planted>
static __global__ void kvl_step1_kernel(float *o, const float *q, const float *k, const float *v, unsigned n,
                                        unsigned D, float scale)
{
    KVL_SHARED(float, s, KVL_STEP1_MAX_ROWS);
    for (unsigned j = threadIdx.x; j < n; j += blockDim.x) {
        float dot = 0.0f;
        for (unsigned c = 0; c < D; c++) dot += q[c] * k[static_cast<size_t>(j) * D + c];
        s[j] = dot * scale;
    }
    /* every score is written by some thread and read by every thread */
    if (!Planted) __syncthreads();
    const unsigned d = threadIdx.x;
    float m = -INFINITY, l = 0.0f, acc = 0.0f;
    for (unsigned j = 0; j < n; j++) m = fmaxf(m, s[j]);
    for (unsigned j = 0; j < n; j++) {
        const float p = expf(s[j] - m);
        l += p;
        acc += p * v[static_cast<size_t>(j) * D + d];
    }
    o[d] = acc / l;
}

/* ---- step 2: a block per head group, split-KV, the combine ------------------------------------------- */

#define KVL_STEP2_TILE 32 /* rows of K and V a block stages at a time */

struct kvl_step2_shape {
    unsigned G, n, D, split, n_splits; /* heads per group, rows, width, rows per split, splits */
    float scale;
};

/* Grid (Hkv, n_splits), 32·G threads. part_o[H][n_splits][D], part_m and part_l [H][n_splits]. */
template <bool Planted>
static __global__ void kvl_step2_split_kernel(float *part_o, float *part_m, float *part_l, const float *q,
                                              const float *k, const float *v, kvl_step2_shape p)
{
    KVL_SHARED(float, kt, KVL_STEP2_TILE * KVL_STEP2_MAX_D);
    KVL_SHARED(float, vt, KVL_STEP2_TILE * KVL_STEP2_MAX_D);
    const unsigned lane = threadIdx.x % KVL_WARP, per_lane = p.D / KVL_WARP;
    const size_t h = blockIdx.x * static_cast<size_t>(p.G) + threadIdx.x / KVL_WARP;
    const size_t first = blockIdx.y * static_cast<size_t>(p.split);
    const size_t last = first + p.split < p.n ? first + p.split : p.n;
    const float *kg = k + blockIdx.x * static_cast<size_t>(p.n) * p.D, *vg = v + blockIdx.x * static_cast<size_t>(p.n) * p.D;
    float qr[KVL_STEP2_MAX_D / KVL_WARP], acc[KVL_STEP2_MAX_D / KVL_WARP];
    for (unsigned i = 0; i < per_lane; i++) qr[i] = q[h * p.D + lane + KVL_WARP * i], acc[i] = 0.0f;
    kvl_softmax_part run = kvl_softmax_empty();
    for (size_t t0 = first; t0 < last; t0 += KVL_STEP2_TILE) {
        const size_t rows = last - t0 < KVL_STEP2_TILE ? last - t0 : KVL_STEP2_TILE;
        /* every warp is done with the last tile before it is overwritten */
        if (!Planted) __syncthreads();
        for (size_t e = threadIdx.x; e < rows * p.D; e += blockDim.x) {
            kt[e] = kg[t0 * p.D + e];
            vt[e] = vg[t0 * p.D + e];
        }
        __syncthreads();
        for (size_t r = 0; r < rows; r++) {
            float dot = 0.0f;
            for (unsigned i = 0; i < per_lane; i++) dot += qr[i] * kt[r * p.D + lane + KVL_WARP * i];
            const float s = kvl_warp_sum<float>(dot) * p.scale, m = fmaxf(run.m, s);
            const float f = expf(run.m - m), w = expf(s - m);
            run = kvl_softmax_part{m, run.l * f + w};
            for (unsigned i = 0; i < per_lane; i++) acc[i] = acc[i] * f + w * vt[r * p.D + lane + KVL_WARP * i];
        }
    }
    const size_t part = h * p.n_splits + blockIdx.y;
    for (unsigned i = 0; i < per_lane; i++) part_o[part * p.D + lane + KVL_WARP * i] = acc[i];
    if (lane == 0) part_m[part] = run.m, part_l[part] = run.l;
}

/* Grid H, D threads: o[h][d] = Σ_s f_s·acc_s[d] / Σ_s f_s·l_s, f_s = exp(m_s − max_s m_s). */
static __global__ void kvl_step2_combine_kernel(float *o, const float *part_o, const float *part_m,
                                                const float *part_l, unsigned n_splits)
{
    const size_t h = blockIdx.x, D = blockDim.x, d = threadIdx.x;
    kvl_softmax_part run = kvl_softmax_empty();
    float acc = 0.0f;
    for (size_t s = 0; s < n_splits; s++) {
        float fa, fb;
        run = kvl_softmax_merge(run, kvl_softmax_part{part_m[h * n_splits + s], part_l[h * n_splits + s]}, &fa, &fb);
        acc = acc * fa + part_o[(h * n_splits + s) * D + d] * fb;
    }
    o[h * D + d] = acc / run.l;
}

/* ---- step 3: tensor-core tiles ---------------------------------------------------------------------- */

/* A tile row of Dk bf16 padded by 8 elements (16 bytes), so that every row starts 16-byte aligned as
 * ldmatrix requires; the planted padding of 4 breaks that for every odd row. */
template <bool Planted> __host__ __device__ constexpr unsigned kvl_step3_stride(unsigned Dk)
{
    return Dk + (Planted ? 4u : 8u);
}

/* The lane's row of A's four 8×8 matrices at column k0: lanes 8i … 8i + 7 address matrix i, A's rows
 * 0-7 and 8-15 at columns k0 (i = 0, 1) and k0 + 8 (i = 2, 3): the order of mma's a[0] … a[3]. */
__device__ __forceinline__ unsigned kvl_step3_a_row(unsigned lane) { return lane % 16; }
__device__ __forceinline__ unsigned kvl_step3_a_col(unsigned lane, unsigned k0) { return k0 + 8 * (lane / 16); }
/* B's two 8×8 matrices from K's rows (B[k][n] = K[n][k]): lanes 0-7 at column k0, 8-15 at k0 + 8. */
__device__ __forceinline__ unsigned kvl_step3_b_row(unsigned lane) { return lane % 8; }
__device__ __forceinline__ unsigned kvl_step3_b_col(unsigned lane, unsigned k0) { return k0 + 8 * (lane / 8 % 2); }

/* One warp. S[16][n] = Q[16][Dk]·K[n][Dk]ᵀ; keys in tiles of 8 (rows past n are zeros). */
template <bool Planted>
static __global__ void kvl_step3_scores_kernel(float *S, const uint16_t *Q, const uint16_t *K, unsigned n, unsigned Dk)
{
    KVL_SHARED(uint16_t, qs, 16 * (KVL_STEP3_MAX_DK + 8));
    KVL_SHARED(uint16_t, ks, 8 * (KVL_STEP3_MAX_DK + 8));
    const unsigned lane = threadIdx.x, stride = kvl_step3_stride<Planted>(Dk), g = lane / 4, t = lane % 4;
    for (unsigned e = lane; e < 16 * Dk; e += KVL_WARP) qs[e / Dk * stride + e % Dk] = Q[e];
    for (unsigned n0 = 0; n0 < n; n0 += 8) {
        for (unsigned e = lane; e < 8 * Dk; e += KVL_WARP) {
            const unsigned r = e / Dk;
            ks[r * stride + e % Dk] = n0 + r < n ? K[static_cast<size_t>(n0 + r) * Dk + e % Dk] : uint16_t{0};
        }
        __syncwarp(); /* the tiles are written by every lane and read by every lane */
        float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (unsigned k0 = 0; k0 < Dk; k0 += 16) {
            uint32_t a[4], b[2];
            kvl_ldmatrix_x4(a, qs + kvl_step3_a_row(lane) * stride + kvl_step3_a_col(lane, k0));
            kvl_ldmatrix_x2(b, ks + kvl_step3_b_row(lane) * stride + kvl_step3_b_col(lane, k0));
            kvl_mma_bf16(c, a, b, c);
        }
        /* c[0], c[1] = S[g][n0 + 2t, +1]; c[2], c[3] = S[g + 8][n0 + 2t, +1] */
        for (unsigned i = 0; i < 4; i++) {
            const unsigned row = g + 8 * (i / 2), col = n0 + 2 * t + i % 2;
            if (col < n) S[static_cast<size_t>(row) * n + col] = c[i];
        }
        __syncwarp(); /* every lane is done with ks before the next tile overwrites it */
    }
}

/* One warp: a[32][4], b[32][2] as ldmatrix hands them to step 3's mma, d[32][4] the product's fragment. */
static __global__ void kvl_step3_fragments_kernel(uint32_t *a_out, uint32_t *b_out, float *d_out, const uint16_t *A,
                                                  const uint16_t *Bt)
{
    KVL_SHARED(uint16_t, as, 16 * 24);
    KVL_SHARED(uint16_t, bs, 8 * 24);
    const unsigned lane = threadIdx.x, stride = kvl_step3_stride<false>(16);
    for (unsigned e = lane; e < 16 * 16; e += KVL_WARP) as[e / 16 * stride + e % 16] = A[e];
    for (unsigned e = lane; e < 8 * 16; e += KVL_WARP) bs[e / 16 * stride + e % 16] = Bt[e];
    __syncwarp();
    uint32_t a[4], b[2];
    const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    float d[4];
    kvl_ldmatrix_x4(a, as + kvl_step3_a_row(lane) * stride + kvl_step3_a_col(lane, 0));
    kvl_ldmatrix_x2(b, bs + kvl_step3_b_row(lane) * stride + kvl_step3_b_col(lane, 0));
    kvl_mma_bf16(d, a, b, zero);
    for (unsigned i = 0; i < 4; i++) a_out[lane * 4 + i] = a[i], d_out[lane * 4 + i] = d[i];
    for (unsigned i = 0; i < 2; i++) b_out[lane * 2 + i] = b[i];
}

/* ---- step 4: cp.async double buffering, FP8 rows decoded in registers --------------------------------- */

#define KVL_STEP4_TILE 16                                /* rows per tile */
#define KVL_STEP4_ROW 656                                /* sizeof(kvf_row_v32_main) */
#define KVL_STEP4_CHUNKS (KVL_STEP4_ROW / 16)            /* a row is 41 copies of 16 bytes */
#define KVL_STEP4_DK (KVF_V32_NOPE + KVF_V32_ROPE)       /* 576 channels scored */
static_assert(KVL_STEP4_ROW == sizeof(kvf_row_v32_main) && KVL_STEP4_ROW % 16 == 0, "rows are whole 16-byte copies");

/* Copy rows [t0, t0 + rows) into buf: each thread issues every blockDim.x-th 16-byte copy. */
__device__ __forceinline__ void kvl_step4_stage(kvl_smem<uint8_t> buf, const uint8_t *rows, size_t t0, unsigned n_rows)
{
    for (unsigned c = threadIdx.x; c < n_rows * KVL_STEP4_CHUNKS; c += blockDim.x)
        kvl_cp_async_cg(buf + 16 * c, rows + t0 * KVL_STEP4_ROW + 16 * c);
    kvl_cp_async_commit();
}

/* Channel c of row r of a staged tile: an E4M3 code times its block's FP32 scale, or a bf16 (both read
 * from shared memory as bytes the row's own layout places, little-endian as the GPU is). */
__device__ __forceinline__ float kvl_step4_value(kvl_smem<uint8_t> buf, unsigned r, unsigned c)
{
    const unsigned row = r * KVL_STEP4_ROW;
    if (c < KVF_V32_NOPE) {
        const float scale = KVL_SMEM_AS(float, buf)[(row + offsetof(kvf_row_v32_main, scale)) / 4 + c / KVF_V32_BLOCK];
        return kvl_e4m3_decode(buf[row + c]) * scale;
    }
    return kvl_bf16_decode(KVL_SMEM_AS(uint16_t, buf)[(row + offsetof(kvf_row_v32_main, rope)) / 2 + c - KVF_V32_NOPE]);
}

/* One block of 32·H threads, a warp per head; q[H][576], o[H][512]. */
template <bool Planted>
static __global__ void kvl_step4_v32_kernel(float *o, const float *q, const uint8_t *rows, unsigned n, float scale)
{
    KVL_SHARED(uint8_t, tiles, 2 * KVL_STEP4_TILE * KVL_STEP4_ROW);
    const unsigned lane = threadIdx.x % KVL_WARP, h = threadIdx.x / KVL_WARP;
    const unsigned n_tiles = (n + KVL_STEP4_TILE - 1) / KVL_STEP4_TILE;
    float qr[KVL_STEP4_DK / KVL_WARP], acc[KVF_V32_NOPE / KVL_WARP];
    for (unsigned i = 0; i < KVL_STEP4_DK / KVL_WARP; i++) qr[i] = q[h * KVL_STEP4_DK + lane + KVL_WARP * i];
    for (unsigned i = 0; i < KVF_V32_NOPE / KVL_WARP; i++) acc[i] = 0.0f;
    kvl_softmax_part run = kvl_softmax_empty();
    kvl_step4_stage(tiles, rows, 0, n < KVL_STEP4_TILE ? n : KVL_STEP4_TILE);
    for (unsigned t = 0; t < n_tiles; t++) {
        const unsigned t0 = t * KVL_STEP4_TILE, n_rows = n - t0 < KVL_STEP4_TILE ? n - t0 : KVL_STEP4_TILE;
        const kvl_smem<uint8_t> cur = tiles + (t % 2) * KVL_STEP4_TILE * KVL_STEP4_ROW;
        /* the next tile in flight (an empty group after the last) while this one is read */
        const unsigned next = t0 + KVL_STEP4_TILE;
        kvl_step4_stage(tiles + (1 - t % 2) * KVL_STEP4_TILE * KVL_STEP4_ROW, rows, next,
                        next < n ? (n - next < KVL_STEP4_TILE ? n - next : KVL_STEP4_TILE) : 0);
        /* this thread's copies of tile t landed (only the newest group may stay in flight); the
         * barrier then makes every thread's copies visible to every thread */
        if (Planted) kvl_cp_async_wait<2>();
        else kvl_cp_async_wait<1>();
        __syncthreads();
        for (unsigned r = 0; r < n_rows; r++) {
            float dot = 0.0f;
            for (unsigned i = 0; i < KVL_STEP4_DK / KVL_WARP; i++) dot += qr[i] * kvl_step4_value(cur, r, lane + KVL_WARP * i);
            const float s = kvl_warp_sum<float>(dot) * scale, m = fmaxf(run.m, s);
            const float f = expf(run.m - m), w = expf(s - m);
            run = kvl_softmax_part{m, run.l * f + w};
            for (unsigned i = 0; i < KVF_V32_NOPE / KVL_WARP; i++)
                acc[i] = acc[i] * f + w * kvl_step4_value(cur, r, lane + KVL_WARP * i);
        }
        __syncthreads(); /* every warp is done with this buffer before tile t + 2 is copied into it */
    }
    for (unsigned i = 0; i < KVF_V32_NOPE / KVL_WARP; i++) o[h * KVF_V32_NOPE + lane + KVL_WARP * i] = acc[i] / run.l;
}

#endif
