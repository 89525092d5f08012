/* ref/core/attend: decode attention's definition (kvl_attend_ref: row by row, the online softmax of
 * ref/core/softmax.h) against the definition written again in double (tests/oracle_attend_rows.h), the
 * checks every backend shares, and the prefill's masked chunk of one head (kvl_attend_chunk_head). Every
 * test runs the definitions (ref/core/backend.h's default); tests/test_cpu_attend.c holds the CPU
 * backend to them. */
#include "oracle_attend_rows.h"

#include <string.h>

/* Row counts where an online softmax has a running maximum to move: one row, a few, several hundred. */
static const size_t N_ROWS[] = {1, 7, 100, 517};
#define N_CASES (sizeof N_ROWS / sizeof N_ROWS[0])

START_TEST(test_definition_matches_double_oracle_for_shared_and_grouped_columns)
{
    for (size_t i = 0; i < N_CASES; i++) {
        shape a = mla_like(8, N_ROWS[i]), b = gqa_like(3, N_ROWS[i]), c = gqa_like(9, N_ROWS[i]);
        check_shape(&a, NULL, 100 + i);
        check_shape(&b, NULL, 200 + i);
        check_shape(&c, NULL, 250 + i);
    }
}
END_TEST

START_TEST(test_definition_with_sinks_matches_double_oracle)
{
    const float sigma[5] = {0.5f, -INFINITY, 3.0f, -2.0f, 8.0f}; /* 8 outweighs every score: a sink that dominates */
    for (size_t i = 0; i < N_CASES; i++) {
        shape a = mla_like(5, N_ROWS[i]);
        check_shape(&a, sigma, 300 + i);
    }
}
END_TEST

/* Keys whose score grows along the rows: every row is a new running maximum, so every step rescales
 * what the rows before it summed; and rows of −∞ first, so the maximum starts late. */
START_TEST(test_rising_scores_and_leading_minus_infinity_match_double_oracle)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 7);
    shape sh = mla_like(4, 300);
    const kvl_attend_rows *r = &sh.r;
    float *q = signed_floats(&rng, sh.Hq * DK), *rows = signed_floats(&rng, sh.N * STRIDE);
    for (size_t h = 0; h < sh.Hq; h++) q[h * DK] = 1.0f;
    for (size_t j = 0; j < sh.N; j++) rows[j * STRIDE + r->k_off] = j < 40 ? -INFINITY : 8.0f * (float)j / (float)sh.N;
    float got[4 * DV];
    double want[4 * DV];
    oracle(want, q, sh.Hq, rows, r, sh.scale, NULL);
    ck_assert_int_eq(attend_f32(got, q, sh.Hq, rows, r, sh.scale, NULL), KVL_OK);
    kvl_expect_close("rising scores", got, want, sh.Hq * DV, attend_atol(DK, sh.N, sh.scale) + 8 * 8 * U_F32, 0.0,
                     MIN_COS);
    free(q);
    free(rows);
}
END_TEST

START_TEST(test_nan_score_makes_its_heads_nan_and_no_rows_give_zero)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 9);
    shape sh = gqa_like(6, 90);
    float *q = signed_floats(&rng, sh.Hq * DK), *rows = signed_floats(&rng, sh.N * sh.r.stride);
    rows[40 * sh.r.stride + sh.r.k_off + 1] = NAN; /* group 0's key: its three heads */
    float got[6 * DV];
    ck_assert_int_eq(attend_f32(got, q, sh.Hq, rows, &sh.r, sh.scale, NULL), KVL_OK);
    for (size_t i = 0; i < sh.Hq * DV; i++)
        ck_assert_msg(isnan(got[i]) == (i < 3 * DV), "element %zu is %g", i, got[i]);
    const float sigma[6] = {1, 2, 3, 4, 5, 6};
    sh.r.N = 0;
    ck_assert_int_eq(attend_f32(got, q, sh.Hq, rows, &sh.r, sh.scale, sigma), KVL_OK);
    for (size_t i = 0; i < sh.Hq * DV; i++) ck_assert_msg(got[i] == 0.0f, "element %zu is %g, not 0", i, got[i]);
    free(q);
    free(rows);
}
END_TEST

/* What a `then` saw: how many times each head came, and whether it came finished. */
typedef struct {
    const float *base, *finished;
    size_t Dv;
    int seen[16], wrong;
} then_record;

static void double_heads(float *o, size_t heads, size_t Dv, void *ctx)
{
    then_record *t = ctx;
    const size_t h0 = (size_t)(o - t->base) / Dv;
    if (Dv != t->Dv || memcmp(o, t->finished + h0 * Dv, heads * Dv * sizeof *o) != 0) t->wrong = 1;
    for (size_t h = h0; h < h0 + heads; h++) t->seen[h]++;
    for (size_t i = 0; i < heads * Dv; i++) o[i] *= 2.0f;
}

START_TEST(test_then_runs_once_on_every_finished_head)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 950);
    const shape sh = gqa_like(9, 50);
    const kvl_attend_rows *r = &sh.r;
    float *q = signed_floats(&rng, sh.Hq * DK), *rows = signed_floats(&rng, sh.N * r->stride);
    float plain[9 * DV], got[9 * DV];
    const kvl_row_tiles view = kvl_row_tiles_f32(rows, sh.N, r->stride);
    ck_assert_int_eq(kvl_attend(plain, q, sh.Hq, &view, r, sh.scale, NULL, NULL), KVL_OK);
    then_record rec = {got, plain, DV, {0}, 0};
    const kvl_attend_then then = {double_heads, &rec};
    ck_assert_int_eq(kvl_attend(got, q, sh.Hq, &view, r, sh.scale, NULL, &then), KVL_OK);
    ck_assert(!rec.wrong);
    for (size_t h = 0; h < sh.Hq; h++) ck_assert_int_eq(rec.seen[h], 1);
    for (size_t i = 0; i < sh.Hq * DV; i++) ck_assert_float_eq(got[i], 2.0f * plain[i]);
    free(q);
    free(rows);
}
END_TEST

START_TEST(test_chunk_head_matches_definition_and_masked_rows_give_zero)
{
    check_chunk_head();
}
END_TEST

START_TEST(test_bad_layout_scale_sinks_views_and_null_arrays_are_errors)
{
    float q[DK] = {0}, rows[2 * STRIDE] = {0}, o[DV];
    const kvl_attend_rows ok = {2, STRIDE, 3, DK, 5, DV, 1};
    kvl_attend_rows past_k = ok, past_v = ok, no_v = ok, no_groups = ok, two = ok;
    past_k.k_off = STRIDE - DK + 1;
    past_v.v_off = STRIDE - DV + 1;
    no_v.Dv = 0;
    no_groups.groups = 0;
    two.groups = 2; /* two groups' keys, 3 + 2·40 columns, pass the stride of 70 */
    ck_assert_int_eq(attend_f32(o, q, 1, rows, &ok, 0.1f, NULL), KVL_OK);
    ck_assert_int_eq(attend_f32(o, q, 1, rows, &past_k, 0.1f, NULL), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "key columns"));
    ck_assert_int_eq(attend_f32(o, q, 1, rows, &past_v, 0.1f, NULL), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "value columns"));
    ck_assert_int_eq(attend_f32(o, q, 1, rows, &no_v, 0.1f, NULL), KVL_EINVAL);
    ck_assert_int_eq(attend_f32(o, q, 1, rows, &no_groups, 0.1f, NULL), KVL_EINVAL);
    ck_assert_int_eq(attend_f32(o, q, 1, rows, &two, 0.1f, NULL), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "do not split"));
    ck_assert_int_eq(attend_f32(o, q, 2, rows, &two, 0.1f, NULL), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "key columns"));
    ck_assert_int_eq(attend_f32(o, q, 1, rows, &ok, 0.0f, NULL), KVL_EINVAL);
    ck_assert_int_eq(attend_f32(o, q, 1, rows, &ok, NAN, NULL), KVL_EINVAL);
    ck_assert_int_eq(attend_f32(o, q, 1, NULL, &ok, 0.1f, NULL), KVL_EINVAL);
        const float nan_sink[1] = {NAN}, inf_sink[1] = {INFINITY};
    ck_assert_int_eq(attend_f32(o, q, 1, rows, &ok, 0.1f, nan_sink), KVL_EINVAL);
    ck_assert_int_eq(attend_f32(o, q, 1, rows, &ok, 0.1f, inf_sink), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "sink 0"));
    ck_assert_int_eq(attend_f32(o, NULL, 1, rows, &ok, 0.1f, NULL), KVL_EINVAL);
    const kvl_row_tiles view = kvl_row_tiles_f32(rows, 2, STRIDE), narrow = kvl_row_tiles_f32(rows, 1, STRIDE);
    const kvl_attend_then none = {NULL, NULL};
    ck_assert_int_eq(kvl_attend(o, q, 1, &view, &ok, 0.1f, NULL, &none), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "then without"));
    ck_assert_int_eq(kvl_attend(o, q, 1, &narrow, &ok, 0.1f, NULL, NULL), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "the view holds 1"));
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_attend");
    TCase *tc = tcase_create("attend");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_definition_matches_double_oracle_for_shared_and_grouped_columns);
    tcase_add_test(tc, test_definition_with_sinks_matches_double_oracle);
    tcase_add_test(tc, test_rising_scores_and_leading_minus_infinity_match_double_oracle);
    tcase_add_test(tc, test_nan_score_makes_its_heads_nan_and_no_rows_give_zero);
    tcase_add_test(tc, test_then_runs_once_on_every_finished_head);
    tcase_add_test(tc, test_chunk_head_matches_definition_and_masked_rows_give_zero);
    tcase_add_test(tc, test_bad_layout_scale_sinks_views_and_null_arrays_are_errors);
    suite_add_tcase(s, tc);
    return s;
}
