/* Chapter 10's decode kernels (cuda/decode_steps_cuda.h) against their CPU twins, in every thread order
 * the emulator has: steps 1, 2 and 4 against ref/core's online softmax over the same rows (step 4's rows
 * unpacked by formats/), step 3's tensor-core scores against a double sum of the same bf16 values, and
 * the fragments of one mma.sync against the PTX layout primitives.cuh states. Each step's planted
 * mistake is stopped by the emulator with the report that names it, and bad sizes are refused by name. */
#include "cuda_test.h"
#include "decode_steps_cuda.h"
#include "element.h"
#include "rows.h"
#include "softmax.h"

/* float sums in another order than the twin's, over at most a few hundred terms of magnitude ≤ 1 */
#define SUM_ORDER_TOL 2e-5

/* o[H][Dv] = softmax(scale · q_h·k_j) · v_j over rows j < n of head h's KV head h / G: the twin, with
 * k at k + kv·kv_stride + j·row (Dk values) and v alike, the online softmax of ref/core/softmax.h */
static void twin_attend(float *o, const float *q, const float *k, const float *v, size_t H, size_t G, size_t n,
                        size_t Dk, size_t Dv, size_t row, size_t kv_stride, float scale)
{
    for (size_t h = 0; h < H; h++) {
        kvl_online st;
        float *acc = o + h * Dv;
        kvl_online_start(&st, acc, Dv, -INFINITY);
        for (size_t j = 0; j < n; j++) {
            const float *kj = k + h / G * kv_stride + j * row, *vj = v + h / G * kv_stride + j * row;
            double s = 0;
            for (size_t c = 0; c < Dk; c++) s += (double)q[h * Dk + c] * kj[c];
            kvl_online_step(&st, acc, (float)(s * scale), vj, Dv);
        }
        kvl_online_finish(acc, &st, acc, Dv);
    }
}

static float *random_floats(test_rng *r, size_t n)
{
    float *x = test_floats(n);
    for (size_t i = 0; i < n; i++) x[i] = test_uniform(r);
    return x;
}

static void expect_close(const float *got, const float *want, size_t n, double tol, const char *what)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(fabs((double)got[i] - want[i]) <= tol, "%s: element %zu is %.9g, the twin's %.9g", what, i,
                      (double)got[i], (double)want[i]);
}

/* the planted kernel's call fails with KVL_ECUDA and a report holding `says` */
static void expect_caught(int rc, const char *says, const char *what)
{
    ck_assert_msg(rc == KVL_ECUDA, "%s: the planted kernel returned %d, not KVL_ECUDA", what, rc);
    ck_assert_msg(strstr(kvl_error(), says) != NULL, "%s: the report does not say \"%s\": %s", what, says, kvl_error());
}

START_TEST(step1_one_thread_per_output_is_the_online_softmax)
{
    enum { N = 77, D = 48 };
    test_rng r = {0x10};
    float *q = random_floats(&r, D), *k = random_floats(&r, N * D), *v = random_floats(&r, N * D);
    float want[D], got[D];
    twin_attend(want, q, k, v, 1, 1, N, D, D, D, 0, 0.125f);
    float *dq = dev_upload(q, sizeof(float) * D), *dk = dev_upload(k, sizeof(float) * N * D),
          *dv = dev_upload(v, sizeof(float) * N * D), *dout = dev_upload(NULL, sizeof got);
    FOR_EACH_ORDER(order) {
        CUDA_OK(kvl_step1_attend_cuda(dout, dq, dk, dv, N, D, 0.125f, KVL_STEP_RIGHT));
        dev_download(got, dout, sizeof got);
        expect_close(got, want, D, SUM_ORDER_TOL, order);
    }
    kvl_cuda_quiet_faults(1);
    FOR_EACH_ORDER(order)
    expect_caught(kvl_step1_attend_cuda(dout, dq, dk, dv, N, D, 0.125f, KVL_STEP_PLANTED), "which no thread of the "
                  "block has written", order);
    kvl_cuda_quiet_faults(0);
    kvl_cuda_free(dq), kvl_cuda_free(dk), kvl_cuda_free(dv), kvl_cuda_free(dout);
    free(q), free(k), free(v);
}
END_TEST

START_TEST(step2_split_kv_and_its_combine_are_the_online_softmax)
{
    enum { HKV = 2, G = 3, N = 150, D = 64 };
    /* splits of one row, of 40 (ragged: 150 = 3·40 + 30, tiles of 32 and 8), of all rows in one */
    static const size_t splits[] = {1, 40, 150, 1000};
    test_rng r = {0x20};
    float *q = random_floats(&r, HKV * G * D), *k = random_floats(&r, HKV * N * D), *v = random_floats(&r, HKV * N * D);
    float want[HKV * G * D], got[HKV * G * D];
    twin_attend(want, q, k, v, HKV * G, G, N, D, D, D, N * D, 0.2f);
    float *dq = dev_upload(q, sizeof(float) * HKV * G * D), *dk = dev_upload(k, sizeof(float) * HKV * N * D),
          *dv = dev_upload(v, sizeof(float) * HKV * N * D), *dout = dev_upload(NULL, sizeof got);
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++)
        FOR_EACH_ORDER(order) {
            CUDA_OK(kvl_step2_attend_cuda(dout, dq, dk, dv, HKV, G, N, D, splits[i], 0.2f, KVL_STEP_RIGHT));
            dev_download(got, dout, sizeof got);
            expect_close(got, want, HKV * G * D, SUM_ORDER_TOL, order);
        }
    kvl_cuda_quiet_faults(1);
    FOR_EACH_ORDER(order)
    expect_caught(kvl_step2_attend_cuda(dout, dq, dk, dv, HKV, G, N, D, 150, 0.2f, KVL_STEP_PLANTED), "race: ", order);
    kvl_cuda_quiet_faults(0);
    kvl_cuda_free(dq), kvl_cuda_free(dk), kvl_cuda_free(dv), kvl_cuda_free(dout);
    free(q), free(k), free(v);
}
END_TEST

static uint16_t *random_bf16(test_rng *r, size_t n)
{
    uint16_t *x = malloc(n * sizeof *x);
    ck_assert(x != NULL);
    for (size_t i = 0; i < n; i++) x[i] = kvf_bf16_encode(test_uniform(r));
    return x;
}

START_TEST(step3_tensor_core_scores_are_the_bf16_products)
{
    enum { N = 21, DK = 48 }; /* 21 keys: two whole tiles of 8 and a ragged one */
    test_rng r = {0x30};
    uint16_t *Q = random_bf16(&r, 16 * DK), *K = random_bf16(&r, N * DK);
    float got[16 * N];
    uint16_t *dQ = dev_upload(Q, 2 * 16 * DK), *dK = dev_upload(K, 2 * N * DK);
    float *dS = dev_upload(NULL, sizeof got);
    FOR_EACH_ORDER(order) {
        CUDA_OK(kvl_step3_scores_cuda(dS, dQ, dK, N, DK, KVL_STEP_RIGHT));
        dev_download(got, dS, sizeof got);
        for (size_t h = 0; h < 16; h++)
            for (size_t j = 0; j < N; j++) {
                double s = 0, mag = 0;
                for (size_t c = 0; c < DK; c++) {
                    const double p = (double)kvf_bf16_decode(Q[h * DK + c]) * kvf_bf16_decode(K[j * DK + c]);
                    s += p, mag += fabs(p);
                }
                ck_assert_msg(fabs(got[h * N + j] - s) <= 1e-6 * mag + 1e-30, "%s: S[%zu][%zu] is %.9g, not %.9g", order,
                              h, j, (double)got[h * N + j], s);
            }
    }
    kvl_cuda_quiet_faults(1);
    expect_caught(kvl_step3_scores_cuda(dS, dQ, dK, N, DK, KVL_STEP_PLANTED), "ldmatrix", "planted padding");
    kvl_cuda_quiet_faults(0);
    kvl_cuda_free(dQ), kvl_cuda_free(dK), kvl_cuda_free(dS);
    free(Q), free(K);
}
END_TEST

/* The fragment layout of PTX's mma.m16n8k16 (primitives.cuh), with g = lane / 4 and t = lane % 4:
 * a[i] holds A[g + 8(i % 2)][2t + 8(i / 2)] and the column after it, b[i] B[2t + 8i][g] and the row after,
 * d[i] (A·B)[g + 8(i / 2)][2t + i % 2]. A[r][c] = 16r + c and Bt[n][k] = 1 if k == n else 0 make each
 * element name its place. */
START_TEST(step3_fragments_hold_the_ptx_layout)
{
    uint16_t A[16 * 16], Bt[8 * 16];
    for (int i = 0; i < 16 * 16; i++) A[i] = kvf_bf16_encode((float)i);
    for (int i = 0; i < 8 * 16; i++) Bt[i] = kvf_bf16_encode(i / 16 == i % 16 ? 1.0f : 0.0f);
    uint32_t a[32 * 4], b[32 * 2];
    float d[32 * 4];
    uint32_t *da = dev_upload(NULL, sizeof a), *db = dev_upload(NULL, sizeof b);
    float *dd = dev_upload(NULL, sizeof d);
    uint16_t *dA = dev_upload(A, sizeof A), *dBt = dev_upload(Bt, sizeof Bt);
    CUDA_OK(kvl_step3_fragments_cuda(da, db, dd, dA, dBt));
    dev_download(a, da, sizeof a), dev_download(b, db, sizeof b), dev_download(d, dd, sizeof d);
    for (unsigned lane = 0; lane < 32; lane++) {
        const unsigned g = lane / 4, t = lane % 4;
        for (unsigned i = 0; i < 4; i++) {
            const unsigned row = g + 8 * (i % 2), col = 2 * t + 8 * (i / 2);
            ck_assert_uint_eq(a[lane * 4 + i], A[row * 16 + col] | (uint32_t)A[row * 16 + col + 1] << 16);
            /* (A·B)[r][n] = A[r][n] with B the first 8 columns of the identity */
            ck_assert_float_eq(d[lane * 4 + i], (float)(16 * (g + 8 * (i / 2)) + 2 * t + i % 2));
        }
        for (unsigned i = 0; i < 2; i++) {
            const unsigned k0 = 2 * t + 8 * i;
            ck_assert_uint_eq(b[lane * 2 + i], Bt[g * 16 + k0] | (uint32_t)Bt[g * 16 + k0 + 1] << 16);
        }
    }
    kvl_cuda_free(da), kvl_cuda_free(db), kvl_cuda_free(dd), kvl_cuda_free(dA), kvl_cuda_free(dBt);
}
END_TEST

START_TEST(step4_double_buffered_fp8_rows_are_the_online_softmax)
{
    enum { H = 3, N = 37, DK = 576, DV = 512, ROW = 656 }; /* 37 rows: tiles of 16, 16 and 5 */
    test_rng r = {0x40};
    float *x = random_floats(&r, N * DK), *q = random_floats(&r, H * DK);
    test_vary_blocks(x, N, DK, DV, 128);
    uint8_t *rows = malloc((size_t)N * ROW);
    ck_assert(rows != NULL);
    for (size_t j = 0; j < N; j++) ck_assert_int_eq(kvf_row_pack(KVF_ROW_V32_MAIN, rows + j * ROW, x + j * DK), KVF_OK);
    for (size_t j = 0; j < N; j++) ck_assert_int_eq(kvf_row_unpack(KVF_ROW_V32_MAIN, x + j * DK, rows + j * ROW), KVF_OK);
    float want[H * DV], got[H * DV];
    twin_attend(want, q, x, x, H, H, N, DK, DV, DK, 0, 0.05f);
    float *dq = dev_upload(q, sizeof(float) * H * DK), *dout = dev_upload(NULL, sizeof got);
    uint8_t *drows = dev_upload(rows, (size_t)N * ROW);
    FOR_EACH_ORDER(order) {
        CUDA_OK(kvl_step4_attend_v32_cuda(dout, dq, drows, H, N, 0.05f, KVL_STEP_RIGHT));
        dev_download(got, dout, sizeof got);
        expect_close(got, want, H * DV, SUM_ORDER_TOL, order);
    }
    kvl_cuda_quiet_faults(1);
    FOR_EACH_ORDER(order)
    expect_caught(kvl_step4_attend_v32_cuda(dout, dq, drows, H, N, 0.05f, KVL_STEP_PLANTED), "has not landed", order);
    kvl_cuda_quiet_faults(0);
    kvl_cuda_free(dq), kvl_cuda_free(dout), kvl_cuda_free(drows);
    free(x), free(q), free(rows);
}
END_TEST

START_TEST(sizes_the_kernels_cannot_take_are_refused_by_name)
{
    float *d = dev_upload(NULL, 64);
    ck_assert_int_eq(kvl_step1_attend_cuda(d, d, d, d, 0, 4, 1.0f, KVL_STEP_RIGHT), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "n is 0"));
    ck_assert_int_eq(kvl_step1_attend_cuda(d, d, d, d, 1, KVL_STEP1_MAX_D + 1, 1.0f, KVL_STEP_RIGHT), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "D is 1025"));
    ck_assert_int_eq(kvl_step2_attend_cuda(d, d, d, d, 1, 1, 4, 48, 2, 1.0f, KVL_STEP_RIGHT), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "not a multiple of 32"));
    ck_assert_int_eq(kvl_step2_attend_cuda(d, d, d, d, 1, KVL_STEP2_MAX_G + 1, 4, 32, 2, 1.0f, KVL_STEP_RIGHT), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "G is 9"));
    ck_assert_int_eq(kvl_step3_scores_cuda(d, NULL, NULL, 4, 24, KVL_STEP_RIGHT), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "Dk is 24, not a multiple of 16"));
    ck_assert_int_eq(kvl_step4_attend_v32_cuda(d, d, NULL, KVL_STEP4_MAX_H + 1, 4, 1.0f, KVL_STEP_RIGHT), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "H is 9"));
    kvl_cuda_free(d);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = cuda_suite("cuda_steps");
    if (!cuda_present()) return s;
    TCase *c = tcase_create("steps");
    tcase_set_timeout(c, 120);
    tcase_add_test(c, step1_one_thread_per_output_is_the_online_softmax);
    tcase_add_test(c, step2_split_kv_and_its_combine_are_the_online_softmax);
    tcase_add_test(c, step3_tensor_core_scores_are_the_bf16_products);
    tcase_add_test(c, step3_fragments_hold_the_ptx_layout);
    tcase_add_test(c, step4_double_buffered_fp8_rows_are_the_online_softmax);
    tcase_add_test(c, sizes_the_kernels_cannot_take_are_refused_by_name);
    suite_add_tcase(s, c);
    return s;
}
