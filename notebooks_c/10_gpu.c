// %% [markdown]
// # Chapter 10 · The GPU kernels, from the plain loop to FlashMLA's structure
//
// Every chapter so far priced a cache in bytes. This one reads those bytes on a GPU: a decode step
// streams every cached row of a layer from HBM once, and the kernel that does it is built here in
// four steps, each a kernel of `cuda/decode_steps_cuda.cuh` run in the project's CUDA emulator
// (`cuda/emu/`: every CUDA thread a fiber) against its twin, a plain CPU loop. Each step also has a
// planted mistake, and the cell shows the emulator stopping it.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them.
// `build/bin/nb_10 --step` walks it cell by cell. Device buffers and the figure live in
// `notebooks_c/draw_gpu.c`, the printed comparisons in `notebooks_c/draw_compare.c`.

// %%
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decode_steps_cuda.h"
#include "device.h"
#include "draw_compare.h"
#include "draw_gpu.h"
#include "element.h"
#include "nb.h"
#include "rng.h"
#include "rows.h"

// %% [markdown]
// ## The ceiling
//
// One decode step of one layer reads the sequence's $N$ cached rows once. If $H$ query heads share
// every row (MLA's absorbed form: each head scores the row's 576 values and weights its first
// 512),
//
// $$\text{bytes} = N \cdot b_{\text{row}}, \qquad \text{flops} = 2 H N (576 + 512).$$
//
// NVIDIA's H200 datasheet gives HBM3e at 4.8 TB/s and tensor cores at 1,979 TFLOPS bf16 and
// 3,958 TFLOPS FP8 "with sparsity", so 989 and 1,979 dense. A kernel is bound by the larger of
// bytes / bandwidth and flops / rate; the ridge is the intensity (flop per byte) where they meet.

// %%
NB_CELL(cell_ceiling)
{
    const double hbm = 4.8e12, bf16 = 989e12, fp8 = 1979e12, N = 65536;
    const double row = (double)kvf_row_bytes(KVF_ROW_V32_MAIN);
    const double heads[] = {1, 16, 128};
    printf("V3.2 main row: %.0f B; %s rows: %s B per step, %.3f us at 4.8 TB/s\n", row,
           nb_num(N, 0), nb_num(N * row, 0), N * row / hbm * 1e6);
    printf("ridge: bf16 %.2f flop/B, FP8 %.2f flop/B\n", bf16 / hbm, fp8 / hbm);
    for (int i = 0; i < 3; i++) {
        const double flops = 2 * heads[i] * N * (576 + 512);
        printf("H %3.0f: %7.2f flop/B, bf16 time %.3f us -> %s-bound\n", heads[i],
               flops / (N * row), flops / bf16 * 1e6,
               flops / (N * row) > bf16 / hbm ? "compute" : "memory");
    }
    return nb_expect(row == 656, "the V3.2 row is %.0f bytes, not 656", row);
}

// %% [markdown]
// One head alone (the plain loop below) does about 3.3 flops per byte, two orders of magnitude
// under the ridge: it waits on memory. Sharing a row among the heads of a group is what raises the
// intensity, which is why step 2 gives a block a whole head group, and why FlashMLA, with 128 heads
// on one latent row, is bound by compute at bf16 and close to balanced at the FP8 rate.
//
// ## Step 1: one thread per output
//
// The plain decode loop of one head, with keys $k_j$ and values $v_j$ of width $D$:
//
// $$s_j = \text{scale} \cdot q \cdot k_j, \qquad m = \max_j s_j,$$
//
// $$o_d = \frac{\sum_j e^{s_j - m} v_{jd}}{\sum_j e^{s_j - m}}.$$
//
// `kvl_step1_kernel` gives each output channel $d$ a thread. Scoring every row in every thread
// would repeat the dot products $D$ times, so the block scores each row once into shared memory
// (thread $t$ takes rows $t, t + D, \dots$), waits at a barrier, and then each thread reads all the
// scores. The twin is the loop itself, in double.

// %%
/* o[Dv] = softmax(scale · q·k_j) · v_j over rows j < n; row j's key at k + j·row, its value at v +
 * j·row */
static void twin_attend(float *o, const float *q, const float *k, const float *v, size_t n,
                        size_t Dk, size_t Dv, size_t row, double scale)
{
    double *s = malloc(n * sizeof *s), m = -INFINITY, l = 0;
    for (size_t j = 0; j < n; j++) {
        double dot = 0;
        for (size_t c = 0; c < Dk; c++) dot += (double)q[c] * k[j * row + c];
        m = fmax(m, s[j] = scale * dot);
    }
    for (size_t j = 0; j < n; j++) l += s[j] = exp(s[j] - m);
    for (size_t d = 0; d < Dv; d++) {
        double acc = 0;
        for (size_t j = 0; j < n; j++) acc += s[j] * v[j * row + d];
        o[d] = (float)(acc / l);
    }
    free(s);
}

static float *random_floats(kvl_rng *rng, size_t n)
{
    float *x = malloc(n * sizeof *x);
    kvl_rng_uniform_f32(rng, x, n, -1, 1);
    return x;
}

// %%
enum { S1_N = 300, S1_D = 64 };

NB_CELL(cell_step1)
{
    nb10_emulator_setup();
    kvl_rng rng;
    kvl_rng_seed(&rng, 10);
    float *q = random_floats(&rng, S1_D), *k = random_floats(&rng, S1_N * S1_D);
    float *v = random_floats(&rng, S1_N * S1_D), want[S1_D], got[S1_D];
    twin_attend(want, q, k, v, S1_N, S1_D, S1_D, S1_D, 0.125);
    float *dq = nb10_device(q, sizeof(float) * S1_D),
          *dk = nb10_device(k, sizeof(float) * S1_N * S1_D);
    float *dv = nb10_device(v, sizeof(float) * S1_N * S1_D), *dout = nb10_device(NULL, sizeof got);
    int rc = dq && dk && dv && dout ? KVL_OK : KVL_ECUDA;
    if (rc == KVL_OK)
        rc = kvl_step1_attend_cuda(dout, dq, dk, dv, S1_N, S1_D, 0.125f, KVL_STEP_RIGHT);
    if (rc == KVL_OK) rc = nb10_fetch(got, dout, sizeof got);
    if (rc == KVL_OK) {
        double scale, diff = nbc_max_diff(got, want, S1_D, &scale);
        printf("step 1, %d rows of width %d, one block of %d threads:\n", S1_N, S1_D, S1_D);
        rc = nbc_report("kernel against the loop", diff, scale, 1e-5);
    }
    nb10_free_all();
    free(q), free(k), free(v);
    return rc;
}

// %% [markdown]
// The planted mistake: the barrier between the phases is gone. On a GPU that is a race whose
// outcome depends on timing, and often it even gives the right answer. In the emulator every
// thread runs until it reaches a synchronisation point, so thread 0 reads a score no thread has
// written yet, and shared memory starts poisoned: the launch stops, naming the thread and the
// element.

// %%
NB_CELL(cell_step1_planted)
{
    float zero[S1_N * S1_D] = {0};
    float *d = nb10_device(zero, sizeof zero), *dout = nb10_device(NULL, sizeof(float) * S1_D);
    int rc = d && dout ? kvl_step1_attend_cuda(dout, d, d, d, S1_N, S1_D, 0.125f, KVL_STEP_PLANTED)
                       : KVL_ECUDA;
    printf("%s\n", nb10_report());
    nb10_free_all();
    return nb_expect(rc == KVL_ECUDA && strstr(nb10_report(), "no thread of the block has written"),
                     "the missing barrier went unreported (status %d)", rc);
}

// %% [markdown]
// ## Step 2: a block per head group, split-KV, the combine
//
// A GQA layer gives $G$ query heads one KV head. `kvl_step2_split_kernel` runs a block per KV head
// and per split of the rows, a warp per query head: the block copies a tile of 32 rows of $K$ and
// $V$ into shared memory once, and all $G$ warps read it, so HBM sees each row once per group, not
// once per head. Each warp keeps the online softmax of `ref/core/softmax.h` over its split,
//
// $$m' = \max(m, s), \quad \alpha = e^{m - m'},$$
//
// $$l \leftarrow \alpha l + e^{s - m'}, \quad a \leftarrow \alpha a + e^{s - m'} v,$$
//
// and writes a partial $(m_p, l_p, a_p)$. Splitting the rows gives a short sequence enough blocks
// to fill the GPU's SMs (132 on an H200). `kvl_step2_combine_kernel` then merges the partials of a
// head:
//
// $$m = \max_p m_p, \qquad o = \frac{\sum_p e^{m_p - m} a_p}{\sum_p e^{m_p - m} l_p}.$$

// %%
enum { S2_HKV = 2, S2_G = 4, S2_N = 200, S2_D = 64, S2_SPLIT = 64 };

NB_CELL(cell_step2)
{
    enum { H = S2_HKV * S2_G };
    kvl_rng rng;
    kvl_rng_seed(&rng, 20);
    float *q = random_floats(&rng, H * S2_D), *k = random_floats(&rng, S2_HKV * S2_N * S2_D);
    float *v = random_floats(&rng, S2_HKV * S2_N * S2_D), want[H * S2_D], got[H * S2_D];
    for (size_t h = 0; h < H; h++)
        twin_attend(want + h * S2_D, q + h * S2_D, k + h / S2_G * S2_N * S2_D,
                    v + h / S2_G * S2_N * S2_D, S2_N, S2_D, S2_D, S2_D, 0.125);
    float *dq = nb10_device(q, sizeof(float) * H * S2_D);
    float *dk = nb10_device(k, sizeof(float) * S2_HKV * S2_N * S2_D);
    float *dv = nb10_device(v, sizeof(float) * S2_HKV * S2_N * S2_D),
          *dout = nb10_device(NULL, sizeof got);
    int rc = dq && dk && dv && dout ? KVL_OK : KVL_ECUDA;
    if (rc == KVL_OK)
        rc = kvl_step2_attend_cuda(dout, dq, dk, dv, S2_HKV, S2_G, S2_N, S2_D, S2_SPLIT, 0.125f,
                                   KVL_STEP_RIGHT);
    if (rc == KVL_OK) rc = nb10_fetch(got, dout, sizeof got);
    if (rc == KVL_OK) {
        double scale, diff = nbc_max_diff(got, want, H * S2_D, &scale);
        printf("step 2: %d KV heads x %d query heads, %d rows in %d splits of %d: a grid of %d "
               "blocks\n",
               S2_HKV, S2_G, S2_N, (S2_N + S2_SPLIT - 1) / S2_SPLIT, S2_SPLIT,
               S2_HKV * ((S2_N + S2_SPLIT - 1) / S2_SPLIT));
        printf("rows read from HBM: %s (once per group), not %s (once per head)\n",
               nb_num(S2_HKV * S2_N, 0), nb_num(H * S2_N, 0));
        rc = nbc_report("kernel and combine against the loop", diff, scale, 1e-5);
    }
    nb10_free_all();
    free(q), free(k), free(v);
    return rc;
}

// %% [markdown]
// The planted mistake: the barrier at the top of the tile loop is gone. It keeps the block from
// copying the next tile over the one a slower warp is still reading. The emulator records, for
// every byte of shared memory, who wrote and read it in which barrier interval, and reports the
// write over another thread's read with no barrier between.

// %%
NB_CELL(cell_step2_planted)
{
    static float zero[S2_HKV * S2_N * S2_D];
    float *d = nb10_device(zero, sizeof zero), *dout = nb10_device(NULL, sizeof(float) * 8 * S2_D);
    int rc = d && dout ? kvl_step2_attend_cuda(dout, d, d, d, S2_HKV, S2_G, S2_N, S2_D, S2_SPLIT,
                                               0.125f, KVL_STEP_PLANTED)
                       : KVL_ECUDA;
    printf("%s\n", nb10_report());
    nb10_free_all();
    return nb_expect(rc == KVL_ECUDA && strstr(nb10_report(), "race: "),
                     "the race went unreported (status %d)", rc);
}

// %% [markdown]
// ## Step 3: tensor-core tiles
//
// With 16 or more heads on one row the scores are a matrix product, $S = Q K^\top$, and tensor
// cores do it: `mma.sync.m16n8k16` multiplies a $16 \times 16$ bf16 tile of $A$ by a $16 \times 8$
// tile of $B$ into float sums, one warp together. Each lane holds a fixed piece of each matrix
// (the PTX ISA, "Matrix Fragments for mma.m16n8k16"): with $g = \lfloor l/4 \rfloor$ and
// $t = l \bmod 4$, lane $l$'s register $a_i$ holds $A[g + 8(i \bmod 2)][2t + 8\lfloor i/2 \rfloor]$
// and the element after it. `ldmatrix` loads those registers from shared memory: each lane names
// one 16-byte row of an $8 \times 8$ matrix and receives its pieces. The cell fills
// $A[r][c] = 16r + c$, loads it as step 3 does, and reads back where each element landed.

// %%
NB_CELL(cell_fragments)
{
    uint16_t A[16 * 16], Bt[8 * 16];
    uint32_t a[32 * 4], b[32 * 2];
    float d[32 * 4];
    for (int i = 0; i < 256; i++) A[i] = kvf_bf16_encode((float)i);
    for (int i = 0; i < 128; i++) Bt[i] = kvf_bf16_encode(i / 16 == i % 16 ? 1.0f : 0.0f);
    uint32_t *da = nb10_device(NULL, sizeof a), *db = nb10_device(NULL, sizeof b);
    float *dd = nb10_device(NULL, sizeof d);
    uint16_t *dA = nb10_device(A, sizeof A), *dBt = nb10_device(Bt, sizeof Bt);
    int rc =
        da && db && dd && dA && dBt ? kvl_step3_fragments_cuda(da, db, dd, dA, dBt) : KVL_ECUDA;
    if (rc == KVL_OK) rc = nb10_fetch(a, da, sizeof a);
    nb10_free_all();
    static unsigned char reg[16 * 16];
    size_t off = 0;
    for (unsigned lane = 0; lane < 32 && rc == KVL_OK; lane++)
        for (unsigned i = 0; i < 4; i++) {
            const unsigned lo = (unsigned)kvf_bf16_decode((uint16_t)a[lane * 4 + i]);
            const unsigned g = lane / 4, t = lane % 4,
                           want = 16 * (g + 8 * (i % 2)) + 2 * t + 8 * (i / 2);
            off += lo != want;
            reg[lo] = (unsigned char)i;
            reg[lo + 1] = (unsigned char)i;
            if (lane == 0 || lane == 5 || lane == 31)
                printf("lane %2u a[%u] holds A[%2u][%2u], A[%2u][%2u]\n", lane, i, lo / 16, lo % 16,
                       lo / 16, lo % 16 + 1);
        }
    if (rc == KVL_OK) rc = nb_expect(off == 0, "%zu registers differ from the PTX layout", off);
    return rc == KVL_OK ? nb10_draw_fragment(reg) : rc;
}

// %% [markdown]
// `kvl_step3_scores_kernel` puts 16 heads' queries and 8 keys at a time in shared memory, each row
// padded by 8 bf16 (16 bytes) so that every row `ldmatrix` names starts 16-byte aligned, and runs
// one `mma` per 16 channels. Its twin sums the same bf16 values in double.

// %%
enum { S3_N = 40, S3_DK = 64 };

NB_CELL(cell_step3)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 30);
    float *qf = random_floats(&rng, 16 * S3_DK), *kf = random_floats(&rng, S3_N * S3_DK);
    uint16_t Q[16 * S3_DK], K[S3_N * S3_DK];
    float qr[16 * S3_DK], kr[S3_N * S3_DK], want[16 * S3_N], got[16 * S3_N];
    kvf_bf16_encode_n(Q, qf, 16 * S3_DK), kvf_bf16_decode_n(qr, Q, 16 * S3_DK);
    kvf_bf16_encode_n(K, kf, S3_N * S3_DK), kvf_bf16_decode_n(kr, K, S3_N * S3_DK);
    for (size_t h = 0; h < 16; h++)
        for (size_t j = 0; j < S3_N; j++) {
            double s = 0;
            for (size_t c = 0; c < S3_DK; c++) s += (double)qr[h * S3_DK + c] * kr[j * S3_DK + c];
            want[h * S3_N + j] = (float)s;
        }
    uint16_t *dQ = nb10_device(Q, sizeof Q), *dK = nb10_device(K, sizeof K);
    float *dS = nb10_device(NULL, sizeof got);
    int rc =
        dQ && dK && dS ? kvl_step3_scores_cuda(dS, dQ, dK, S3_N, S3_DK, KVL_STEP_RIGHT) : KVL_ECUDA;
    if (rc == KVL_OK) rc = nb10_fetch(got, dS, sizeof got);
    if (rc == KVL_OK) {
        double scale, diff = nbc_max_diff(got, want, 16 * S3_N, &scale);
        printf("step 3: S[16][%d] = Q K^T over %d channels, %d mma.sync per key tile\n", S3_N,
               S3_DK, S3_DK / 16);
        rc = nbc_report("tensor cores against the double sum", diff, scale, 1e-5);
    }
    if (rc == KVL_OK) {
        rc = kvl_step3_scores_cuda(dS, dQ, dK, S3_N, S3_DK, KVL_STEP_PLANTED);
        printf("planted padding of 4 bf16:\n%s\n", nb10_report());
        rc = nb_expect(rc == KVL_ECUDA && strstr(nb10_report(), "ldmatrix"),
                       "the misaligned ldmatrix went "
                       "unreported (status %d)",
                       rc);
    }
    nb10_free_all();
    free(qf), free(kf);
    return rc;
}

// %% [markdown]
// ## Step 4: cp.async double buffering over FP8 rows
//
// FlashMLA's decode kernel reads V3.2's 656-byte rows (512 E4M3 codes, four FP32 scales, 64 bf16
// RoPE values; its README's FP8 section) and keeps the copy engine busy while the math runs:
// `cp.async` copies global memory into shared memory without passing through registers, and the
// kernel issues tile $t+1$'s copies before it reads tile $t$. `kvl_step4_v32_kernel` does that with
// two buffers of 16 rows: each thread commits its copies as a group, `cp.async.wait_group 1`
// retires every group but the newest (tile $t$ lands, $t+1$ stays in flight), and a barrier makes
// the other threads' copies visible. It decodes a code times its block's scale in registers as it
// reads, the same $m, l, a$ as step 2, a warp per head.

// %%
enum { S4_H = 4, S4_N = 50, S4_DK = 576, S4_DV = 512 };

NB_CELL(cell_step4)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 40);
    float *x = random_floats(&rng, S4_N * S4_DK), *q = random_floats(&rng, S4_H * S4_DK);
    const size_t row = kvf_row_bytes(KVF_ROW_V32_MAIN);
    uint8_t *rows = malloc(S4_N * row);
    float want[S4_H * S4_DV], got[S4_H * S4_DV];
    int rc = KVL_OK;
    for (size_t j = 0; j < S4_N && rc == KVL_OK; j++) {
        rc = kvf_row_pack(KVF_ROW_V32_MAIN, rows + j * row, x + j * S4_DK) ? KVL_EINVAL : KVL_OK;
        if (rc == KVL_OK)
            rc = kvf_row_unpack(KVF_ROW_V32_MAIN, x + j * S4_DK, rows + j * row) ? KVL_EINVAL
                                                                                 : KVL_OK;
    }
    for (size_t h = 0; h < S4_H; h++)
        twin_attend(want + h * S4_DV, q + h * S4_DK, x, x, S4_N, S4_DK, S4_DV, S4_DK, 0.05);
    float *dq = nb10_device(q, sizeof(float) * S4_H * S4_DK), *dout = nb10_device(NULL, sizeof got);
    uint8_t *drows = nb10_device(rows, S4_N * row);
    if (rc == KVL_OK && !(dq && dout && drows)) rc = KVL_ECUDA;
    if (rc == KVL_OK)
        rc = kvl_step4_attend_v32_cuda(dout, dq, drows, S4_H, S4_N, 0.05f, KVL_STEP_RIGHT);
    if (rc == KVL_OK) rc = nb10_fetch(got, dout, sizeof got);
    if (rc == KVL_OK) {
        double scale, diff = nbc_max_diff(got, want, S4_H * S4_DV, &scale);
        printf("step 4: %d heads over %d FP8 rows of %zu B, tiles of 16 in two buffers\n", S4_H,
               S4_N, row);
        rc = nbc_report("kernel against the loop over unpacked rows", diff, scale, 1e-5);
    }
    nb10_free_all();
    free(x), free(q), free(rows);
    return rc;
}

// %% [markdown]
// The planted mistake: `cp.async.wait_group 2` where the loop needs 1. Two groups are in flight
// (tiles $t$ and $t+1$), so the wait retires none, and the warps read a buffer whose copies have
// not landed. A GPU would read stale bytes, often the previous tile's, and the answer would be
// wrong only sometimes; the emulator holds every copy until its wait retires it, and stops the
// read.

// %%
NB_CELL(cell_step4_planted)
{
    static uint8_t rows[S4_N * 656];
    float q[S4_H * S4_DK] = {0};
    float *dq = nb10_device(q, sizeof q), *dout = nb10_device(NULL, sizeof(float) * S4_H * S4_DV);
    uint8_t *drows = nb10_device(rows, sizeof rows);
    int rc = dq && dout && drows
                 ? kvl_step4_attend_v32_cuda(dout, dq, drows, S4_H, S4_N, 0.05f, KVL_STEP_PLANTED)
                 : KVL_ECUDA;
    printf("%s\n", nb10_report());
    nb10_free_all();
    return nb_expect(rc == KVL_ECUDA && strstr(nb10_report(), "has not landed"),
                     "the early read went unreported (status %d)", rc);
}

// %% [markdown]
// ## What FlashMLA adds
//
// The four steps are the skeleton of FlashMLA's decode: a split of each sequence's rows across
// blocks chosen ahead of the launch (its `get_mla_metadata`), a block per (head group, split) with
// 64 heads per block on one latent row, tensor-core products over tiles in shared memory, copies of
// the next tile in flight while the current one is multiplied, FP8 codes times scales decoded on
// the way in, and a combine kernel for the splits. `kvl_mla_flash_kernel` in `cuda/mla_cuda.cuh`
// is this project's version at DeepSeek's widths.

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {
        NB_RUN(cell_ceiling), NB_RUN(cell_step1),         NB_RUN(cell_step1_planted),
        NB_RUN(cell_step2),   NB_RUN(cell_step2_planted), NB_RUN(cell_fragments),
        NB_RUN(cell_step3),   NB_RUN(cell_step4),         NB_RUN(cell_step4_planted)};
    static const char *const figures[] = {"mma_fragment_a", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
