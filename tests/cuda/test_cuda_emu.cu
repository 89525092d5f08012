/* The CPU emulator (cuda/emu/) against the CUDA semantics it stands in for: thread and block indices,
 * shuffles, votes, barriers, shared memory, asynchronous copies, ldmatrix, the warp's matrix product and
 * the conversion intrinsics,
 * in all three thread orders; the cuBLAS subset; and each fault it must catch, provoked on purpose, with
 * its report.
 * Built only for the emulator (a C++ suite; the GPU runs the twins' suites instead). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "attend_cuda.cuh"
#include "primitives.cuh"

extern "C" {
#include "common.h"
}

#define N_ORDERS 3

static const emu::order ORDERS[N_ORDERS] = {emu::FORWARD, emu::REVERSE, emu::RANDOM};

/* ---- kernels that behave ------------------------------------------------------------------------- */

/* out[block][thread] = its linear index, from the builtin variables */
__global__ void index_kernel(unsigned *out)
{
    const unsigned t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    const unsigned b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    out[b * blockDim.x * blockDim.y * blockDim.z + t] = b * 1000 + t;
}

/* out[4][n]: xor (by 9, which leaves a section of 8), up, down and indexed shuffles of in[n] with
 * width w */
__global__ void shuffle_kernel(int *out, const int *in, int w)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x, n = gridDim.x * blockDim.x;
    const int v = in[i];
    out[i] = __shfl_xor_sync(KVL_FULL_MASK, v, 9, w);
    out[n + i] = __shfl_up_sync(KVL_FULL_MASK, v, 2, w);
    out[2 * n + i] = __shfl_down_sync(KVL_FULL_MASK, v, 5, w);
    out[3 * n + i] = __shfl_sync(KVL_FULL_MASK, v, 7, w);
}

/* out[3][n]: ballot, any and all of in[i] != 0 over the warp */
__global__ void vote_kernel(unsigned *out, const int *in)
{
    const unsigned i = blockIdx.x * blockDim.x + threadIdx.x, n = gridDim.x * blockDim.x;
    out[i] = __ballot_sync(KVL_FULL_MASK, in[i] != 0);
    out[n + i] = __any_sync(KVL_FULL_MASK, in[i] != 0);
    out[2 * n + i] = __all_sync(KVL_FULL_MASK, in[i] != 0);
}

/* sum[b], max[b] of the block's x through the block primitives, twice (the scratch reused) */
__global__ void reduce_kernel(float *sum, float *max, const float *x)
{
    KVL_SHARED(float, scratch, 32);
    const float v = x[blockIdx.x * blockDim.x + threadIdx.x];
    const float s = kvl_block_sum(v, scratch);
    const float m = kvl_block_max(v, scratch);
    if (threadIdx.x == 0) {
        sum[blockIdx.x] = s;
        max[blockIdx.x] = m;
    }
}

/* out[b][t] = the sum of the block's x reversed through static and dynamic shared memory */
__global__ void shared_kernel(float *out, const float *x)
{
    KVL_SHARED(float, tile, 128);
    KVL_DYNAMIC_SHARED(float, dyn);
    const unsigned n = blockDim.x, t = threadIdx.x, g = blockIdx.x * n + t;
    tile[t] = x[g];
    dyn[t] = 2.0f * x[g];
    __syncthreads();
    out[g] = tile[n - 1 - t] + dyn[n - 1 - t];
}

/* seq[i] = the position at which thread i of the single block first ran */
__global__ void order_kernel(unsigned *seq, unsigned *counter)
{
    seq[threadIdx.x] = atomicAdd(counter, 1u);
}

/* d[16][8] = A[16][16]·B[16][8] + C through the fragments of kvl_mma_bf16 (one warp) */
__global__ void mma_kernel(float *d, const uint16_t *A, const uint16_t *B, const float *C)
{
    const unsigned l = threadIdx.x, g = l / 4, t = l % 4;
    const uint32_t a[4] = {A[g * 16 + 2 * t] | (uint32_t)A[g * 16 + 2 * t + 1] << 16,
                           A[(g + 8) * 16 + 2 * t] | (uint32_t)A[(g + 8) * 16 + 2 * t + 1] << 16,
                           A[g * 16 + 2 * t + 8] | (uint32_t)A[g * 16 + 2 * t + 9] << 16,
                           A[(g + 8) * 16 + 2 * t + 8] | (uint32_t)A[(g + 8) * 16 + 2 * t + 9] << 16};
    const uint32_t b[2] = {B[(2 * t) * 8 + g] | (uint32_t)B[(2 * t + 1) * 8 + g] << 16,
                           B[(2 * t + 8) * 8 + g] | (uint32_t)B[(2 * t + 9) * 8 + g] << 16};
    const float c[4] = {C[g * 8 + 2 * t], C[g * 8 + 2 * t + 1], C[(g + 8) * 8 + 2 * t], C[(g + 8) * 8 + 2 * t + 1]};
    float r[4];
    kvl_mma_bf16(r, a, b, c);
    d[g * 8 + 2 * t] = r[0];
    d[g * 8 + 2 * t + 1] = r[1];
    d[(g + 8) * 8 + 2 * t] = r[2];
    d[(g + 8) * 8 + 2 * t + 1] = r[3];
}

/* ---- kernels with the classic faults ----------------------------------------------------------------- */

__global__ void early_exit_barrier_kernel(float *out)
{
    if (threadIdx.x == 5) return;
    __syncthreads();
    out[threadIdx.x] = 1.0f;
}

__global__ void divergent_barrier_kernel(float *out)
{
    if (threadIdx.x < 16) {
        __syncthreads();
    } else {
        __syncthreads();
    }
    out[threadIdx.x] = 1.0f;
}

__global__ void shuffle_exited_lane_kernel(float *out)
{
    if (threadIdx.x == 3) return;
    out[threadIdx.x] = __shfl_xor_sync(KVL_FULL_MASK, 1.0f, 1);
}

__global__ void shuffle_without_self_kernel(float *out)
{
    out[threadIdx.x] = __shfl_xor_sync(0x0000FFFFu, 1.0f, 1);
}

__global__ void shuffle_outside_mask_kernel(float *out)
{
    out[threadIdx.x] = __shfl_sync(0x0000FFFFu, 1.0f, 20);
}

__global__ void shuffle_partial_warp_kernel(float *out)
{
    out[threadIdx.x] = __shfl_xor_sync(KVL_FULL_MASK, 1.0f, 1);
}

__global__ void shuffle_against_barrier_kernel(float *out)
{
    float v = 1.0f;
    if (threadIdx.x < 16) v = __shfl_xor_sync(KVL_FULL_MASK, v, 1);
    __syncthreads();
    out[threadIdx.x] = v;
}

__global__ void poisoned_read_kernel(float *out)
{
    KVL_SHARED(float, buf, 64);
    if (threadIdx.x < 32) buf[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = buf[threadIdx.x];
}

/* every thread rewrites its element and reads another's with no barrier between */
__global__ void missing_barrier_kernel(float *out)
{
    KVL_SHARED(float, buf, 64);
    buf[threadIdx.x] = 1.0f;
    __syncthreads();
    buf[threadIdx.x] = 2.0f;
    out[threadIdx.x] = buf[63 - threadIdx.x];
}

/* thread 0 reads what thread 5 overwrites: in forward order the read runs first, a write-after-read
 * race (other orders may run the write first and report the read instead) */
__global__ void overwrite_before_read_kernel(float *out)
{
    KVL_SHARED(float, buf, 64);
    buf[threadIdx.x] = 1.0f;
    __syncthreads();
    if (threadIdx.x == 0) out[0] = buf[5];
    if (threadIdx.x == 5) buf[5] = 2.0f;
}

__global__ void shared_out_of_bounds_kernel(float *out)
{
    KVL_SHARED(float, buf, 64);
    buf[threadIdx.x + 1] = 1.0f;
    out[threadIdx.x] = 0.0f;
}

/* out[256] = in[256] (words), each thread's 16 bytes brought by cp.async as one .cg copy, two .ca of 8 or
 * four .ca of 4 (by t % 3) and handed to the thread 63 − t; zero[256]: the same 16 bytes copied again
 * reading only their first 4·(t % 5) bytes, in a second group that lands after the first is read */
__global__ void cp_async_kernel(uint32_t *out, uint32_t *zero, const uint32_t *in)
{
    KVL_SHARED(uint32_t, buf, 256);
    KVL_SHARED(uint32_t, zbuf, 256);
    const unsigned t = threadIdx.x, mine = 4 * t, theirs = 4 * (63 - t);
    if (t % 3 == 0) kvl_cp_async_cg(buf + mine, in + mine);
    for (unsigned k = 0; t % 3 == 1 && k < 4; k += 2) kvl_cp_async_ca<8>(buf + mine + k, in + mine + k);
    for (unsigned k = 0; t % 3 == 2 && k < 4; k++) kvl_cp_async_ca<4>(buf + mine + k, in + mine + k);
    kvl_cp_async_commit();
    kvl_cp_async_ca<16>(zbuf + mine, in + mine, 4 * (t % 5));
    kvl_cp_async_commit();
    kvl_cp_async_wait<1>();
    __syncthreads();
    for (unsigned k = 0; k < 4; k++) out[mine + k] = buf[theirs + k];
    kvl_cp_async_wait_all();
    __syncthreads();
    for (unsigned k = 0; k < 4; k++) zero[mine + k] = zbuf[theirs + k];
}

/* out[32][14]: what lane l gets from ldmatrix .x1, .x2, .x4, then .x1, .x2, .x4 .trans, of the matrices
 * M_i (i < 4), M_i[r][c] = tile[8i + r][8 + c] of a tile[32][24] holding 100·row + column */
__global__ void ldmatrix_kernel(uint32_t *out)
{
    KVL_SHARED(uint16_t, tile, 32 * 24);
    const unsigned l = threadIdx.x;
    for (unsigned c = 0; c < 24; c++) tile[l * 24 + c] = static_cast<uint16_t>(100 * l + c);
    __syncwarp();
    uint32_t r[14];
    const kvl_smem<uint16_t> row = tile + l * 24 + 8; /* row l % 8 of matrix l / 8 */
    kvl_ldmatrix_x1(r, row);
    kvl_ldmatrix_x2(r + 1, row);
    kvl_ldmatrix_x4(r + 3, row);
    kvl_ldmatrix_x1_trans(r + 7, row);
    kvl_ldmatrix_x2_trans(r + 8, row);
    kvl_ldmatrix_x4_trans(r + 10, row);
    for (unsigned i = 0; i < 14; i++) out[l * 14 + i] = r[i];
}

/* d[16][8] = A[16][16]·B[16][8] + 0 on the tensor cores with both operands row-major in shared memory:
 * A through ldmatrix.x4, B through ldmatrix.x2.trans (the P·V operand), and again with B stored
 * transposed (Bt[8][16], the Q·Kᵀ operand) through ldmatrix.x2; dt[16][8] is the second product */
__global__ void ldmatrix_mma_kernel(float *d, float *dt, const uint16_t *A, const uint16_t *B)
{
    KVL_SHARED(uint16_t, a_s, 16 * 16);
    KVL_SHARED(uint16_t, b_s, 16 * 8);
    KVL_SHARED(uint16_t, bt_s, 8 * 16);
    const unsigned l = threadIdx.x, g = l / 4, t = l % 4;
    for (unsigned e = l; e < 256; e += 32) a_s[e] = A[e];
    for (unsigned e = l; e < 128; e += 32) b_s[e] = B[e], bt_s[(e % 8) * 16 + e / 8] = B[e];
    __syncwarp();
    uint32_t a[4], b[2], bt[2];
    /* matrices 0-3 of A: rows 0-7 and 8-15 of columns 0-7, then of columns 8-15 */
    kvl_ldmatrix_x4(a, a_s + (l % 16) * 16 + 8 * (l / 16));
    kvl_ldmatrix_x2_trans(b, b_s + (l % 16) * 8); /* k rows 0-7, then 8-15 */
    kvl_ldmatrix_x2(bt, bt_s + (l % 8) * 16 + 8 * (l / 8 % 2));
    const float zero[4] = {0, 0, 0, 0};
    float r[4], rt[4];
    kvl_mma_bf16(r, a, b, zero);
    kvl_mma_bf16(rt, a, bt, zero);
    const unsigned at[4] = {g * 8 + 2 * t, g * 8 + 2 * t + 1, (g + 8) * 8 + 2 * t, (g + 8) * 8 + 2 * t + 1};
    for (int i = 0; i < 4; i++) d[at[i]] = r[i], dt[at[i]] = rt[i];
}

/* each thread copies 16 bytes by cp.async and commits them, but reads them after the barrier with no
 * cp.async.wait_group: the bytes may not have landed */
__global__ void missing_wait_kernel(float *out)
{
    KVL_SHARED(float, buf, 256);
    kvl_cp_async_cg(buf + 4 * threadIdx.x, out + 4 * (threadIdx.x % 16));
    kvl_cp_async_commit();
    __syncthreads();
    out[threadIdx.x] = buf[4 * threadIdx.x];
}

/* two groups in flight, wait_group 1 retires only the first, and the second's bytes are read */
__global__ void shallow_wait_kernel(float *out)
{
    KVL_SHARED(float, buf, 512);
    kvl_cp_async_cg(buf + 4 * threadIdx.x, out + 4 * (threadIdx.x % 16));
    kvl_cp_async_commit();
    kvl_cp_async_cg(buf + 256 + 4 * threadIdx.x, out + 4 * (threadIdx.x % 16));
    kvl_cp_async_commit();
    kvl_cp_async_wait<1>();
    out[threadIdx.x] = buf[4 * threadIdx.x] + buf[256 + 4 * threadIdx.x];
}

/* a plain shared store into bytes a cp.async of the same thread is still bringing */
__global__ void store_over_copy_kernel(float *out)
{
    KVL_SHARED(float, buf, 256);
    kvl_cp_async_cg(buf + 4 * threadIdx.x, out + 4 * (threadIdx.x % 16));
    buf[4 * threadIdx.x + 1] = 1.0f;
    kvl_cp_async_wait_all();
    out[threadIdx.x] = buf[4 * threadIdx.x];
}

/* a 16-byte cp.async to a shared address that is only 8-byte aligned */
__global__ void misaligned_copy_kernel(float *out)
{
    KVL_SHARED(float, buf, 256);
    kvl_cp_async_ca<16>(buf + 2 + 4 * (threadIdx.x % 32), out);
    kvl_cp_async_wait_all();
    out[threadIdx.x] = 0.0f;
}

/* a cp.async of 2 bytes, a size the instruction does not have */
__global__ void two_byte_copy_kernel(float *out)
{
    KVL_SHARED(float, buf, 64);
    kvl_cp_async_ca<2>(buf + threadIdx.x, out);
    out[threadIdx.x] = 0.0f;
}

/* ldmatrix rows 8 bytes into 16-byte pieces: the addresses are not 16-byte aligned */
__global__ void misaligned_ldmatrix_kernel(float *out)
{
    KVL_SHARED(uint16_t, tile, 32 * 16);
    for (unsigned c = 0; c < 16; c++) tile[threadIdx.x * 16 + c] = 0;
    __syncwarp();
    uint32_t r[4];
    kvl_ldmatrix_x4(r, tile + threadIdx.x * 16 + 4);
    out[threadIdx.x] = static_cast<float>(r[0]);
}

/* lanes 8-15 give rows past the end of the array in an .x2 (only lanes 0-15 address rows) */
__global__ void ldmatrix_past_the_end_kernel(float *out)
{
    KVL_SHARED(uint16_t, tile, 8 * 8);
    if (threadIdx.x < 8)
        for (unsigned c = 0; c < 8; c++) tile[threadIdx.x * 8 + c] = 0;
    __syncwarp();
    uint32_t r[2];
    kvl_ldmatrix_x2(r, tile + threadIdx.x * 8);
    out[threadIdx.x] = static_cast<float>(r[0]);
}

/* only half a warp runs the ldmatrix, which needs all 32 lanes */
__global__ void half_warp_ldmatrix_kernel(float *out)
{
    KVL_SHARED(uint16_t, tile, 32 * 8);
    for (unsigned c = 0; c < 8; c++) tile[threadIdx.x * 8 + c] = 0;
    __syncwarp();
    uint32_t r[1] = {0};
    if (threadIdx.x < 16) kvl_ldmatrix_x1(r, tile + threadIdx.x * 8);
    out[threadIdx.x] = static_cast<float>(r[0]);
}

/* ---- kernels the GPU refuses to launch, or faults in --------------------------------------------------------- */

/* out[t] = its dynamic shared memory's last float, written by thread t: it touches the whole allocation */
__global__ void dynamic_shared_kernel(float *out)
{
    KVL_DYNAMIC_SHARED(float, dyn);
    (void)dyn;
    out[threadIdx.x] = 1.0f;
}

/* the same in a kernel whose attribute is raised above sm_80's limit */
__global__ void dynamic_shared_sm90_kernel(float *out)
{
    KVL_DYNAMIC_SHARED(float, dyn);
    (void)dyn;
    out[threadIdx.x] = 1.0f;
}

/* 64 KB of static __shared__: ptxas refuses it on every architecture */
__global__ void static_shared_kernel(float *out)
{
    KVL_SHARED(float, big, 16384);
    big[threadIdx.x] = 1.0f;
    out[threadIdx.x] = big[threadIdx.x];
}

/* out[t] = the first word of row t read as T from rows row_bytes apart (the attention kernels' uint4 and
 * uint2 row reads) */
template <typename T> __global__ void row_vector_kernel(float *out, const uint8_t *rows, unsigned row_bytes)
{
    const T v = KVL_GLOBAL_AS(const T, rows + threadIdx.x * static_cast<size_t>(row_bytes))[0];
    unsigned first;
    memcpy(&first, &v, sizeof first);
    out[threadIdx.x] = static_cast<float>(first);
}

/* ---- helpers ---------------------------------------------------------------------------------------------- */

template <typename T> static T *device_copy(const T *host, size_t n)
{
    T *d = NULL;
    ck_assert_int_eq(cudaMalloc(&d, n * sizeof(T)), cudaSuccess);
    if (host) ck_assert_int_eq(cudaMemcpy(d, host, n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    else ck_assert_int_eq(cudaMemset(d, 0, n * sizeof(T)), cudaSuccess);
    return d;
}

template <typename T> static void host_copy(T *host, const T *d, size_t n)
{
    ck_assert_int_eq(cudaMemcpy(host, d, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
}

/* Launch a faulty kernel on `threads` threads in the given order and expect a fault whose report
 * contains `what`. */
static void expect_fault_in(emu::order order, void (*kernel)(float *), unsigned threads, const char *what)
{
    float *out = device_copy<float>(NULL, 64);
    emu::set_quiet(1);
    emu::set_order(order, 7);
    cudaError_t e = kvl_launch("faulty", kernel, dim3(1), dim3(threads), 0, out);
    ck_assert_msg(e == cudaErrorLaunchFailure, "order %d: the fault (%s) went unnoticed", (int)order, what);
    ck_assert_msg(strstr(cudaGetErrorString(e), what) != NULL, "order %d: report \"%s\" lacks \"%s\"", (int)order,
                  cudaGetErrorString(e), what);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorLaunchFailure);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    emu::set_quiet(0);
    cudaFree(out);
}

/* The same fault caught in all three orders. */
static void expect_fault(void (*kernel)(float *), unsigned threads, const char *what)
{
    for (int o = 0; o < N_ORDERS; o++) expect_fault_in(ORDERS[o], kernel, threads, what);
}

/* ---- what the emulator must do right ------------------------------------------------------------------------ */

START_TEST(test_builtin_indices_match_cuda_layout)
{
    const dim3 grid(3, 2, 2), block(4, 3, 2);
    const size_t n = 12 * 24;
    unsigned *d = device_copy<unsigned>(NULL, n), h[12 * 24];
    for (int o = 0; o < N_ORDERS; o++) {
        emu::set_order(ORDERS[o], 1);
        ck_assert_int_eq(KVL_LAUNCH(index_kernel, grid, block, 0, d), cudaSuccess);
        host_copy(h, d, n);
        for (unsigned b = 0; b < 12; b++)
            for (unsigned t = 0; t < 24; t++) ck_assert_uint_eq(h[b * 24 + t], b * 1000 + t);
    }
    cudaFree(d);
}
END_TEST

/* The CUDA rules, written out: width sections; up and down keep their own value past a section's edge;
 * xor may read an earlier section but keeps its own value for a later one. */
static int expect_shuffle(int kind, const int *in, unsigned i, int w)
{
    const int self = (int)(i % 32), base = self & ~(w - 1), warp0 = (int)(i - i % 32);
    int src = self;
    if (kind == 0) src = (self ^ 9) < base + w ? self ^ 9 : self;
    if (kind == 1) src = self - 2 >= base ? self - 2 : self;
    if (kind == 2) src = self + 5 < base + w ? self + 5 : self;
    if (kind == 3) src = base + (7 & (w - 1));
    return in[warp0 + src];
}

START_TEST(test_shuffles_follow_cuda_rules_for_every_width)
{
    enum { N = 64 };
    int in[N], out[4 * N];
    for (int i = 0; i < N; i++) in[i] = 1000 + 37 * i;
    int *din = device_copy(in, N), *dout = device_copy<int>(NULL, 4 * N);
    for (int w = 8; w <= 32; w *= 2)
        for (int o = 0; o < N_ORDERS; o++) {
            emu::set_order(ORDERS[o], 3);
            ck_assert_int_eq(KVL_LAUNCH(shuffle_kernel, dim3(2), dim3(32), 0, dout, din, w), cudaSuccess);
            host_copy(out, dout, 4 * N);
            for (int k = 0; k < 4; k++)
                for (unsigned i = 0; i < N; i++)
                    ck_assert_msg(out[k * N + i] == expect_shuffle(k, in, i, w), "kind %d width %d lane %u", k, w, i);
        }
    cudaFree(din);
    cudaFree(dout);
}
END_TEST

START_TEST(test_votes_see_every_lane)
{
    enum { N = 96 };
    int in[N];
    unsigned out[3 * N];
    for (int i = 0; i < N; i++) in[i] = i < 32 ? (i % 3 == 0) : i < 64 ? 1 : 0;
    int *din = device_copy(in, N);
    unsigned *dout = device_copy<unsigned>(NULL, 3 * N);
    ck_assert_int_eq(KVL_LAUNCH(vote_kernel, dim3(1), dim3(N), 0, dout, din), cudaSuccess);
    host_copy(out, dout, 3 * N);
    for (int i = 0; i < N; i++) {
        unsigned want = 0;
        for (int l = 0; l < 32; l++) want |= (unsigned)(in[i - i % 32 + l] != 0) << l;
        ck_assert_uint_eq(out[i], want);
        ck_assert_uint_eq(out[N + i], want != 0);
        ck_assert_uint_eq(out[2 * N + i], want == 0xFFFFFFFFu);
    }
    cudaFree(din);
    cudaFree(dout);
}
END_TEST

START_TEST(test_block_reductions_equal_serial_sums)
{
    enum { B = 3, T = 256 };
    float x[B * T], sum[B], max[B];
    for (int i = 0; i < B * T; i++) x[i] = (float)((i * 7919) % 1000) / 64.0f - 7.0f; /* exact in float */
    float *dx = device_copy(x, B * T), *ds = device_copy<float>(NULL, B), *dm = device_copy<float>(NULL, B);
    for (int o = 0; o < N_ORDERS; o++) {
        emu::set_order(ORDERS[o], 11);
        ck_assert_int_eq(KVL_LAUNCH(reduce_kernel, dim3(B), dim3(T), 0, ds, dm, dx), cudaSuccess);
        host_copy(sum, ds, B);
        host_copy(max, dm, B);
        for (int b = 0; b < B; b++) {
            double s = 0, m = -INFINITY;
            for (int t = 0; t < T; t++) s += x[b * T + t], m = fmax(m, x[b * T + t]);
            ck_assert_double_eq(sum[b], s); /* multiples of 1/64 below 2^10: every partial sum is exact */
            ck_assert_double_eq(max[b], m);
        }
    }
    cudaFree(dx);
    cudaFree(ds);
    cudaFree(dm);
}
END_TEST

START_TEST(test_shared_memory_is_one_array_per_block)
{
    enum { B = 4, T = 128 };
    float x[B * T], out[B * T];
    for (int i = 0; i < B * T; i++) x[i] = (float)i;
    float *dx = device_copy(x, B * T), *dout = device_copy<float>(NULL, B * T);
    for (int o = 0; o < N_ORDERS; o++) {
        emu::set_order(ORDERS[o], 5);
        ck_assert_int_eq(KVL_LAUNCH(shared_kernel, dim3(B), dim3(T), T * sizeof(float), dout, dx), cudaSuccess);
        host_copy(out, dout, B * T);
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++) ck_assert_float_eq(out[b * T + t], 3.0f * x[b * T + T - 1 - t]);
    }
    cudaFree(dx);
    cudaFree(dout);
}
END_TEST

START_TEST(test_orders_run_threads_forward_reverse_and_shuffled)
{
    enum { T = 64 };
    unsigned seq[T], *dseq = device_copy<unsigned>(NULL, T), *dc = device_copy<unsigned>(NULL, 1);
    int is_forward = 1, is_reverse = 1;
    for (int o = 0; o < N_ORDERS; o++) {
        emu::set_order(ORDERS[o], 99);
        ck_assert_int_eq(cudaMemset(dc, 0, sizeof(unsigned)), cudaSuccess);
        ck_assert_int_eq(KVL_LAUNCH(order_kernel, dim3(1), dim3(T), 0, dseq, dc), cudaSuccess);
        host_copy(seq, dseq, T);
        is_forward = is_reverse = 1;
        for (unsigned t = 0; t < T; t++) {
            is_forward &= seq[t] == t;
            is_reverse &= seq[t] == T - 1 - t;
        }
        ck_assert_int_eq(is_forward, ORDERS[o] == emu::FORWARD);
        ck_assert_int_eq(is_reverse, ORDERS[o] == emu::REVERSE);
    }
    cudaFree(dseq);
    cudaFree(dc);
}
END_TEST

static uint16_t bf16_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return (uint16_t)(u >> 16); /* the inputs below are exact in bf16 */
}

START_TEST(test_mma_equals_matrix_product_in_ptx_fragment_layout)
{
    uint16_t A[16 * 16], B[16 * 8];
    float Af[16 * 16], Bf[16 * 8], C[16 * 8], D[16 * 8];
    for (int i = 0; i < 256; i++) Af[i] = (float)((i * 37) % 17 - 8) / 4.0f, A[i] = bf16_bits(Af[i]);
    for (int i = 0; i < 128; i++) Bf[i] = (float)((i * 11) % 13 - 6) / 2.0f, B[i] = bf16_bits(Bf[i]);
    for (int i = 0; i < 128; i++) C[i] = (float)(i % 5) - 2.0f;
    uint16_t *dA = device_copy(A, 256), *dB = device_copy(B, 128);
    float *dC = device_copy(C, 128), *dD = device_copy<float>(NULL, 128);
    ck_assert_int_eq(KVL_LAUNCH(mma_kernel, dim3(1), dim3(32), 0, dD, dA, dB, dC), cudaSuccess);
    host_copy(D, dD, 128);
    for (int r = 0; r < 16; r++)
        for (int c = 0; c < 8; c++) {
            double want = C[r * 8 + c];
            for (int k = 0; k < 16; k++) want += (double)Af[r * 16 + k] * Bf[k * 8 + c];
            ck_assert_msg(D[r * 8 + c] == (float)want, "D[%d][%d] = %g, want %g", r, c, D[r * 8 + c], want);
        }
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dC);
    cudaFree(dD);
}
END_TEST

START_TEST(test_conversions_give_the_gpu_results_on_nan)
{
    ck_assert_uint_eq(__nv_cvt_float_to_fp8(-NAN, __NV_SATFINITE, __NV_E4M3), 0x7F);
    ck_assert_uint_eq(__nv_cvt_float_to_fp8(NAN, __NV_SATFINITE, __NV_E5M2), 0x7F);
    ck_assert_uint_eq(__nv_cvt_float_to_fp8(-INFINITY, __NV_SATFINITE, __NV_E4M3), 0xFE);
    ck_assert_uint_eq(__nv_cvt_float_to_fp8(INFINITY, __NV_NOSAT, __NV_E5M2), 0x7C);
    ck_assert_uint_eq(__nv_cvt_float2_to_fp8x2(make_float2(1.0f, -2.0f), __NV_SATFINITE, __NV_E4M3), 0xC038);
    ck_assert_uint_eq(__nv_cvt_float2_to_fp4x2(make_float2(NAN, -0.75f), __NV_E2M1, cudaRoundNearest), 0xA7);
    ck_assert_uint_eq(__bfloat16_as_ushort(__float2bfloat16_rn(-NAN)), 0x7FFF);
    ck_assert_uint_eq(__bfloat16_as_ushort(__float2bfloat16_rn(1.00390625f)), 0x3F80); /* tie to even */
}
END_TEST

START_TEST(test_runtime_rejects_host_pointers_and_bad_launches)
{
    float host[4] = {0}, *d = device_copy<float>(NULL, 4);
    ck_assert_int_eq(cudaMemcpy(host, host + 2, sizeof(float), cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaMemcpy(d, host, 5 * sizeof(float), cudaMemcpyHostToDevice), cudaErrorInvalidValue);
    ck_assert_int_eq(cudaFree(host), cudaErrorInvalidDevicePointer);
    emu::set_quiet(1);
    ck_assert_int_eq(KVL_LAUNCH(early_exit_barrier_kernel, dim3(1), dim3(2048), 0, d), cudaErrorInvalidConfiguration);
    emu::set_quiet(0);
    cudaGetLastError();
    cudaFree(d);
}
END_TEST

/* ---- the faults, each caught with its report -------------------------------------------------------------- */

START_TEST(test_fault_barrier_not_reached_by_an_exited_thread)
{
    expect_fault(early_exit_barrier_kernel, 64, "exit");
}
END_TEST

START_TEST(test_fault_threads_wait_at_different_barriers)
{
    expect_fault(divergent_barrier_kernel, 64, "different __syncthreads");
}
END_TEST

START_TEST(test_fault_shuffle_names_an_exited_lane)
{
    expect_fault(shuffle_exited_lane_kernel, 32, "lane 3");
}
END_TEST

START_TEST(test_fault_shuffle_mask_omits_the_caller)
{
    expect_fault(shuffle_without_self_kernel, 32, "does not name its own lane");
}
END_TEST

START_TEST(test_fault_shuffle_reads_a_lane_outside_the_mask)
{
    expect_fault(shuffle_outside_mask_kernel, 16, "not in the mask");
}
END_TEST

START_TEST(test_fault_full_mask_in_a_partial_warp)
{
    expect_fault(shuffle_partial_warp_kernel, 48, "absent");
}
END_TEST

START_TEST(test_fault_shuffle_lanes_wait_for_lanes_at_a_barrier)
{
    expect_fault(shuffle_against_barrier_kernel, 32, "__syncthreads");
}
END_TEST

START_TEST(test_fault_shared_read_before_any_write)
{
    expect_fault(poisoned_read_kernel, 64, "no thread of the block has written");
}
END_TEST

START_TEST(test_fault_shared_read_without_barrier_after_write)
{
    expect_fault(missing_barrier_kernel, 64, "race");
}
END_TEST

START_TEST(test_fault_shared_write_without_barrier_after_read)
{
    expect_fault_in(emu::FORWARD, overwrite_before_read_kernel, 64, "read by");
    expect_fault_in(emu::REVERSE, overwrite_before_read_kernel, 64, "race");
    expect_fault_in(emu::RANDOM, overwrite_before_read_kernel, 64, "race");
}
END_TEST

START_TEST(test_fault_shared_index_out_of_bounds)
{
    expect_fault(shared_out_of_bounds_kernel, 64, "holds 256 bytes");
}
END_TEST

/* ---- what the GPU refuses, refused with its reason ---------------------------------------------------------- */

/* A launch refused with error e, its reason containing `what`; the error is the sticky last one until read. */
static void expect_refused(cudaError_t got, cudaError_t e, const char *what)
{
    ck_assert_msg(got == e, "the launch gave %d (%s), want %d", (int)got, cudaGetErrorString(got), (int)e);
    ck_assert_msg(strstr(cudaGetErrorString(got), what) != NULL, "reason \"%s\" lacks \"%s\"", cudaGetErrorString(got),
                  what);
    ck_assert_int_eq(cudaGetLastError(), e);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}

START_TEST(test_refuses_dynamic_shared_above_48k_without_the_attribute)
{
    float *out = device_copy<float>(NULL, 64);
    emu::set_quiet(1);
    ck_assert_int_eq(KVL_LAUNCH(dynamic_shared_kernel, dim3(1), dim3(64), 48 * 1024, out), cudaSuccess);
    expect_refused(KVL_LAUNCH(dynamic_shared_kernel, dim3(1), dim3(64), 48 * 1024 + 16, out), cudaErrorInvalidValue,
                   "never raised");
    ck_assert_int_eq(cudaFuncSetAttribute(dynamic_shared_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 96 * 1024),
                     cudaSuccess);
    ck_assert_int_eq(KVL_LAUNCH(dynamic_shared_kernel, dim3(1), dim3(64), 96 * 1024, out), cudaSuccess);
    expect_refused(KVL_LAUNCH(dynamic_shared_kernel, dim3(1), dim3(64), 96 * 1024 + 16, out), cudaErrorInvalidValue,
                   "above the 98304 its cudaFuncAttributeMaxDynamicSharedMemorySize allows");
    emu::set_quiet(0);
    cudaFree(out);
}
END_TEST

/* 200 KB fits one block of sm_90 (227 KB) and not of sm_80 (163 KB), through the attribute or the launch */
START_TEST(test_refuses_shared_above_the_modelled_architectures_limit)
{
    const int was = emu::arch(), big = 200 * 1024;
    float *out = device_copy<float>(NULL, 64);
    cudaDeviceProp prop;
    emu::set_quiet(1);
    ck_assert_int_eq(emu::set_arch(70), -1);
    ck_assert_int_eq(emu::set_arch(80), 0);
    ck_assert_int_eq(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    ck_assert_uint_eq(prop.sharedMemPerBlockOptin, 163 * 1024);
    expect_refused(cudaFuncSetAttribute(dynamic_shared_sm90_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big),
                   cudaErrorInvalidValue, "sm_80 allows at most 166912 bytes");
    expect_refused(KVL_LAUNCH(dynamic_shared_sm90_kernel, dim3(1), dim3(64), big, out), cudaErrorInvalidValue,
                   "above the 166912 bytes sm_80 allows");
    ck_assert_int_eq(emu::set_arch(90), 0);
    ck_assert_int_eq(cudaFuncSetAttribute(dynamic_shared_sm90_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, big),
                     cudaSuccess);
    ck_assert_int_eq(KVL_LAUNCH(dynamic_shared_sm90_kernel, dim3(1), dim3(64), big, out), cudaSuccess);
    ck_assert_int_eq(emu::set_arch(80), 0);
    expect_refused(KVL_LAUNCH(dynamic_shared_sm90_kernel, dim3(1), dim3(64), big, out), cudaErrorInvalidValue,
                   "sm_80");
    emu::set_quiet(0);
    emu::set_arch(was);
    cudaFree(out);
}
END_TEST

START_TEST(test_fault_static_shared_above_48k)
{
    expect_fault(static_shared_kernel, 64, "48 KB of static shared memory");
}
END_TEST

/* Rows of 656, 1,152 and 528 bytes keep a 16-byte read of each row aligned; 584 and 132 do not, and 68 and
 * 132 misalign an 8-byte one: the GPU faults on the misaligned read, and so must the emulator. */
START_TEST(test_fault_vector_reads_of_rows_not_aligned_to_their_width)
{
    const unsigned rows = 8;
    uint8_t *d = device_copy<uint8_t>(NULL, rows * 1152);
    float *out = device_copy<float>(NULL, rows);
    emu::set_quiet(1);
    for (unsigned bytes : {656u, 1152u, 528u})
        ck_assert_msg(KVL_LAUNCH(row_vector_kernel<uint4>, dim3(1), dim3(rows), 0, out, d, bytes) == cudaSuccess,
                      "uint4 rows of %u bytes: %s", bytes, emu::last_fault());
    for (unsigned bytes : {584u, 132u}) {
        ck_assert_msg(KVL_LAUNCH(row_vector_kernel<uint4>, dim3(1), dim3(rows), 0, out, d, bytes) ==
                          cudaErrorLaunchFailure, "uint4 rows of %u bytes read unnoticed", bytes);
        ck_assert_msg(strstr(emu::last_fault(), "16 bytes of global memory") && strstr(emu::last_fault(), "misaligned"),
                      "%s", emu::last_fault());
        cudaGetLastError();
    }
    ck_assert_int_eq(KVL_LAUNCH(row_vector_kernel<uint2>, dim3(1), dim3(rows), 0, out, d, 656u), cudaSuccess);
    for (unsigned bytes : {68u, 132u}) {
        ck_assert_msg(KVL_LAUNCH(row_vector_kernel<uint2>, dim3(1), dim3(rows), 0, out, d, bytes) ==
                          cudaErrorLaunchFailure, "uint2 rows of %u bytes read unnoticed", bytes);
        ck_assert_msg(strstr(emu::last_fault(), "8 bytes of global memory"), "%s", emu::last_fault());
        cudaGetLastError();
    }
    emu::set_quiet(0);
    cudaFree(d);
    cudaFree(out);
}
END_TEST

static int launch_line;

/* A twin's launch of a kernel that faults, checked as every twin checks it. */
static int faulty_twin(float *out)
{
    launch_line = __LINE__ + 1;
    CUDA_CHECK(KVL_LAUNCH(poisoned_read_kernel, dim3(1), dim3(64), 0, out));
    return KVL_OK;
}

/* The fault is reported by the launch that ran the kernel (as KVL_CUDA_SYNC=1 makes the GPU do), with its file,
 * line and kernel, not by a later call. */
START_TEST(test_fault_is_reported_at_its_launch_with_file_line_and_kernel)
{
    float *out = device_copy<float>(NULL, 64);
    char where[64];
    emu::set_quiet(1);
    ck_assert_int_eq(faulty_twin(out), KVL_ECUDA);
    snprintf(where, sizeof where, "test_cuda_emu.cu:%d", launch_line);
    ck_assert_msg(strstr(kvl_error(), where) && strstr(kvl_error(), "kernel poisoned_read_kernel"), "%s", kvl_error());
    ck_assert_int_eq(cudaGetLastError(), cudaErrorLaunchFailure);
    ck_assert_int_eq(cudaMemcpy(out, out + 1, sizeof(float), cudaMemcpyDeviceToDevice), cudaSuccess);
    emu::set_quiet(0);
    cudaFree(out);
}
END_TEST

/* ---- decode splits ------------------------------------------------------------------------------------ */

/* On the 132 SMs the emulator reports, 8 blocks per split (B 2 × H 4) fill the device twice with 33 splits:
 * from 33 splits' worth of keys up to a million the split grows and the workspace stays; a cache's own
 * split is kept; every split is whole tiles and the splits cover the keys. */
START_TEST(test_decode_splits_fill_the_sms_and_do_not_grow_with_the_context)
{
    ck_assert_int_eq(kvl_cuda_sm_count(), 132);
    size_t floats = 0;
    for (size_t n = 33 * KVL_MIN_SPLIT; n <= ((size_t)1 << 20); n = n * 3 + 1) {
        const size_t split = kvl_decode_split(0, n, 8), n_splits = kvl_div_up(n, split);
        ck_assert_msg(split % 32 == 0 && n_splits * split >= n && n_splits <= 33, "n %zu: %zu splits of %zu", n, n_splits,
                      split);
        const kvl_attend_shape sh{2, 4, 4, 576, 512, 1, 0, 0, n, split, 33, 0, 1.0f};
        if (floats == 0) floats = kvl_attend_work_floats(sh);
        ck_assert_uint_eq(kvl_attend_work_floats(sh), floats);
    }
    ck_assert_uint_eq(kvl_div_up(100, kvl_decode_split(0, 100, 8)), 2); /* no split below KVL_MIN_SPLIT keys */
    ck_assert_uint_eq(kvl_decode_split(0, 5000, 2 * 132), 5024);     /* the grid fills the SMs: one split */
    ck_assert_uint_eq(kvl_decode_split(7, 5000, 8), 7);
}
END_TEST

/* ---- cuBLAS ---------------------------------------------------------------------------------------- */

/* C_b = α·op(A_b)·op(B_b) + β·C_b column-major, in double, at one batch b */
static double gemm_definition(cublasOperation_t ta, cublasOperation_t tb, int i, int j, int k, const float *A, int lda,
                              const float *B, int ldb, double alpha, double beta, double c)
{
    double acc = 0;
    for (int l = 0; l < k; l++)
        acc += (double)(ta == CUBLAS_OP_N ? A[i + l * lda] : A[l + i * lda]) *
               (double)(tb == CUBLAS_OP_N ? B[l + j * ldb] : B[j + l * ldb]);
    return alpha * acc + beta * c;
}

START_TEST(test_cublas_strided_batched_gemm_equals_the_definition)
{
    /* m 5, n 3, k 7 in 4 batches, padded leading dimensions, every transpose pair, β 0 and β ½ */
    enum { M = 5, N = 3, K = 7, BATCH = 4, LD = 9, STRIDE = LD * LD };
    float *A = new float[BATCH * STRIDE], *B = new float[BATCH * STRIDE], *C = new float[BATCH * STRIDE];
    float *C0 = new float[BATCH * STRIDE];
    for (int i = 0; i < BATCH * STRIDE; i++) {
        A[i] = (float)((i * 37) % 17 - 8) / 8;
        B[i] = (float)((i * 53) % 13 - 6) / 4;
        C0[i] = (float)((i * 11) % 7 - 3);
    }
    cublasHandle_t h;
    ck_assert_int_eq(cublasCreate(&h), CUBLAS_STATUS_SUCCESS);
    const cublasOperation_t ops[2] = {CUBLAS_OP_N, CUBLAS_OP_T};
    const float alpha = 1.5f, betas[2] = {0.0f, 0.5f};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++)
            for (int e = 0; e < 2; e++) {
                memcpy(C, C0, BATCH * STRIDE * sizeof *C);
                ck_assert_int_eq(cublasSgemmStridedBatched(h, ops[a], ops[b], M, N, K, &alpha, A, LD, STRIDE, B, LD,
                                                           STRIDE, &betas[e], C, LD, STRIDE, BATCH),
                                 CUBLAS_STATUS_SUCCESS);
                for (int q = 0; q < BATCH; q++)
                    for (int i = 0; i < M; i++)
                        for (int j = 0; j < N; j++) {
                            const double want = gemm_definition(ops[a], ops[b], i, j, K, A + q * STRIDE, LD,
                                                                B + q * STRIDE, LD, alpha, betas[e],
                                                                C0[q * STRIDE + i + j * LD]);
                            ck_assert_msg(fabs(C[q * STRIDE + i + j * LD] - want) <= 1e-5 * (1 + fabs(want)),
                                          "op %d/%d beta %g batch %d (%d, %d): %g, want %g", a, b, betas[e], q, i, j,
                                          C[q * STRIDE + i + j * LD], want);
                        }
            }
    ck_assert_int_eq(cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, M, N, K, &alpha, A, M - 1, STRIDE, B, LD,
                                               STRIDE, &betas[0], C, LD, STRIDE, BATCH),
                     CUBLAS_STATUS_INVALID_VALUE); /* lda below m */
    ck_assert_int_eq(cublasDestroy(h), CUBLAS_STATUS_SUCCESS);
    delete[] A, delete[] B, delete[] C, delete[] C0;
}
END_TEST

START_TEST(test_cp_async_lands_the_bytes_at_the_wait_and_zero_fills_past_src_size)
{
    uint32_t in[256], out[256], zero[256];
    for (int i = 0; i < 256; i++) in[i] = 0x9E3779B9u * (uint32_t)(i + 1);
    uint32_t *d_in = device_copy(in, 256), *d_out = device_copy<uint32_t>(NULL, 256),
             *d_zero = device_copy<uint32_t>(NULL, 256);
    for (int o = 0; o < N_ORDERS; o++) {
        emu::set_order(ORDERS[o], 11);
        ck_assert_int_eq(KVL_LAUNCH(cp_async_kernel, dim3(1), dim3(64), 0, d_out, d_zero, d_in), cudaSuccess);
        host_copy(out, d_out, 256);
        host_copy(zero, d_zero, 256);
        for (unsigned t = 0; t < 64; t++)
            for (unsigned k = 0; k < 4; k++) {
                const unsigned from = 63 - t, i = 4 * from + k;
                ck_assert_msg(out[4 * t + k] == in[i], "order %d: word %u", o, 4 * t + k);
                ck_assert_msg(zero[4 * t + k] == (k < from % 5 ? in[i] : 0u), "order %d: zero-filled word %u", o,
                              4 * t + k);
            }
    }
    cudaFree(d_in);
    cudaFree(d_out);
    cudaFree(d_zero);
}
END_TEST

START_TEST(test_ldmatrix_hands_out_rows_as_the_ptx_isa_lays_them_out)
{
    uint32_t out[32 * 14];
    uint32_t *d = device_copy<uint32_t>(NULL, 32 * 14);
    for (int o = 0; o < N_ORDERS; o++) {
        emu::set_order(ORDERS[o], 5);
        ck_assert_int_eq(KVL_LAUNCH(ldmatrix_kernel, dim3(1), dim3(32), 0, d), cudaSuccess);
        host_copy(out, d, 32 * 14);
        for (unsigned l = 0; l < 32; l++) {
            const unsigned first[6] = {0, 1, 3, 7, 8, 10}, count[6] = {1, 2, 4, 1, 2, 4};
            for (unsigned v = 0; v < 6; v++)
                for (unsigned i = 0; i < count[v]; i++) {
                    /* M_i[r][c] = 100·(8i + r) + 8 + c; with .trans lane l holds Mᵀ's row l / 4 */
                    const unsigned r = v < 3 ? l / 4 : 2 * (l % 4), c = v < 3 ? 2 * (l % 4) : l / 4;
                    const uint32_t lo = 100 * (8 * i + r) + 8 + c,
                                   hi = v < 3 ? lo + 1 : 100 * (8 * i + r + 1) + 8 + c;
                    ck_assert_msg(out[l * 14 + first[v] + i] == (lo | hi << 16),
                                  "order %d, lane %u, variant %u, matrix %u: 0x%08x, want 0x%08x", o, l, v, i,
                                  out[l * 14 + first[v] + i], lo | hi << 16);
                }
        }
    }
    cudaFree(d);
}
END_TEST

START_TEST(test_ldmatrix_fragments_feed_mma_as_the_matrix_product)
{
    uint16_t A[16 * 16], B[16 * 8];
    float Af[16 * 16], Bf[16 * 8], D[16 * 8], Dt[16 * 8];
    for (int i = 0; i < 256; i++) Af[i] = (float)((i * 29) % 19 - 9) / 4.0f, A[i] = bf16_bits(Af[i]);
    for (int i = 0; i < 128; i++) Bf[i] = (float)((i * 7) % 11 - 5) / 2.0f, B[i] = bf16_bits(Bf[i]);
    uint16_t *dA = device_copy(A, 256), *dB = device_copy(B, 128);
    float *dD = device_copy<float>(NULL, 128), *dDt = device_copy<float>(NULL, 128);
    for (int o = 0; o < N_ORDERS; o++) {
        emu::set_order(ORDERS[o], 3);
        ck_assert_int_eq(KVL_LAUNCH(ldmatrix_mma_kernel, dim3(1), dim3(32), 0, dD, dDt, dA, dB), cudaSuccess);
        host_copy(D, dD, 128);
        host_copy(Dt, dDt, 128);
        for (int r = 0; r < 16; r++)
            for (int c = 0; c < 8; c++) {
                double want = 0.0;
                for (int k = 0; k < 16; k++) want += (double)Af[r * 16 + k] * Bf[k * 8 + c];
                ck_assert_msg(D[r * 8 + c] == (float)want, "order %d: D[%d][%d] = %g, want %g", o, r, c, D[r * 8 + c],
                              want);
                ck_assert_msg(Dt[r * 8 + c] == (float)want, "order %d: from Bt, D[%d][%d] = %g, want %g", o, r, c,
                              Dt[r * 8 + c], want);
            }
    }
    cudaFree(dA);
    cudaFree(dB);
    cudaFree(dD);
    cudaFree(dDt);
}
END_TEST

START_TEST(test_fault_shared_read_of_a_cp_async_with_no_wait_group)
{
    expect_fault(missing_wait_kernel, 64, "no cp.async.wait_group retired it");
}
END_TEST

START_TEST(test_fault_wait_group_leaves_the_newer_group_in_flight)
{
    expect_fault(shallow_wait_kernel, 64, "has not landed");
}
END_TEST

START_TEST(test_fault_store_into_bytes_a_cp_async_is_bringing)
{
    expect_fault(store_over_copy_kernel, 64, "has not landed in yet");
}
END_TEST

START_TEST(test_fault_cp_async_misaligned_or_of_a_size_it_lacks)
{
    expect_fault(misaligned_copy_kernel, 64, "(misaligned)");
    expect_fault(two_byte_copy_kernel, 64, "copies 2 bytes");
}
END_TEST

START_TEST(test_fault_ldmatrix_rows_misaligned_outside_or_from_half_a_warp)
{
    expect_fault(misaligned_ldmatrix_kernel, 32, "not 16-byte aligned");
    expect_fault(ldmatrix_past_the_end_kernel, 32, "of matrix 1 at byte");
    expect_fault(half_warp_ldmatrix_kernel, 32, "ldmatrix.x1");
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("cuda_emu");
    TCase *tc = tcase_create("semantics");
    tcase_add_test(tc, test_builtin_indices_match_cuda_layout);
    tcase_add_test(tc, test_shuffles_follow_cuda_rules_for_every_width);
    tcase_add_test(tc, test_votes_see_every_lane);
    tcase_add_test(tc, test_block_reductions_equal_serial_sums);
    tcase_add_test(tc, test_shared_memory_is_one_array_per_block);
    tcase_add_test(tc, test_orders_run_threads_forward_reverse_and_shuffled);
    tcase_add_test(tc, test_mma_equals_matrix_product_in_ptx_fragment_layout);
    tcase_add_test(tc, test_cp_async_lands_the_bytes_at_the_wait_and_zero_fills_past_src_size);
    tcase_add_test(tc, test_ldmatrix_hands_out_rows_as_the_ptx_isa_lays_them_out);
    tcase_add_test(tc, test_ldmatrix_fragments_feed_mma_as_the_matrix_product);
    tcase_add_test(tc, test_conversions_give_the_gpu_results_on_nan);
    tcase_add_test(tc, test_runtime_rejects_host_pointers_and_bad_launches);
    tcase_add_test(tc, test_cublas_strided_batched_gemm_equals_the_definition);
    tcase_add_test(tc, test_decode_splits_fill_the_sms_and_do_not_grow_with_the_context);
    suite_add_tcase(s, tc);
    TCase *tf = tcase_create("faults");
    tcase_add_test(tf, test_fault_barrier_not_reached_by_an_exited_thread);
    tcase_add_test(tf, test_fault_threads_wait_at_different_barriers);
    tcase_add_test(tf, test_fault_shuffle_names_an_exited_lane);
    tcase_add_test(tf, test_fault_shuffle_mask_omits_the_caller);
    tcase_add_test(tf, test_fault_shuffle_reads_a_lane_outside_the_mask);
    tcase_add_test(tf, test_fault_full_mask_in_a_partial_warp);
    tcase_add_test(tf, test_fault_shuffle_lanes_wait_for_lanes_at_a_barrier);
    tcase_add_test(tf, test_fault_shared_read_before_any_write);
    tcase_add_test(tf, test_fault_shared_read_without_barrier_after_write);
    tcase_add_test(tf, test_fault_shared_write_without_barrier_after_read);
    tcase_add_test(tf, test_fault_shared_index_out_of_bounds);
    tcase_add_test(tf, test_fault_static_shared_above_48k);
    tcase_add_test(tf, test_fault_vector_reads_of_rows_not_aligned_to_their_width);
    tcase_add_test(tf, test_fault_shared_read_of_a_cp_async_with_no_wait_group);
    tcase_add_test(tf, test_fault_wait_group_leaves_the_newer_group_in_flight);
    tcase_add_test(tf, test_fault_store_into_bytes_a_cp_async_is_bringing);
    tcase_add_test(tf, test_fault_cp_async_misaligned_or_of_a_size_it_lacks);
    tcase_add_test(tf, test_fault_ldmatrix_rows_misaligned_outside_or_from_half_a_warp);
    tcase_add_test(tf, test_fault_is_reported_at_its_launch_with_file_line_and_kernel);
    suite_add_tcase(s, tf);
    TCase *tr = tcase_create("refusals");
    tcase_add_test(tr, test_refuses_dynamic_shared_above_48k_without_the_attribute);
    tcase_add_test(tr, test_refuses_shared_above_the_modelled_architectures_limit);
    suite_add_tcase(s, tr);
    return s;
}
