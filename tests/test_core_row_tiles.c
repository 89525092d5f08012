/* ref/core/row_tiles: views that read rows a tile at a time. Float32 rows are read in place; bf16 rows
 * are decoded into the reader's scratch, whole or a column range; a gather of picks (−1 skipped, order kept) gives each row as
 * reading it alone does, also when a long gather of packed rows splits over threads. */
#include "common.h"
#include "element.h"
#include "linalg.h"
#include "rng.h"
#include "row_tiles.h"
#include "status.h"

#include <stdlib.h>
#include <string.h>

START_TEST(test_f32_rows_are_read_in_place_and_bf16_rows_decoded)
{
    enum { N = 40, WIDTH = 24 };
    float rows[N * WIDTH], scratch[3 * WIDTH], got[3 * WIDTH];
    uint16_t codes[N * WIDTH];
    for (size_t i = 0; i < N * WIDTH; i++) {
        rows[i] = (float)i * 0.25f - 7.0f;
        codes[i] = kvf_bf16_encode(rows[i]);
    }
    const kvl_row_tiles f32 = kvl_row_tiles_f32(rows, N, WIDTH), bf16 = kvl_row_tiles_bf16(codes, N, WIDTH);
    ck_assert_int_eq(f32.in_place, 1);
    ck_assert_int_eq(bf16.in_place, 0);
    ck_assert_ptr_eq(f32.tile(scratch, &f32, 5, 3), rows + 5 * WIDTH);
    ck_assert_ptr_eq(bf16.tile(scratch, &bf16, 5, 3), scratch);
    for (size_t i = 0; i < 3 * WIDTH; i++) ck_assert_float_eq(scratch[i], kvf_bf16_decode(codes[5 * WIDTH + i]));
    ck_assert_int_eq(kvl_row_tiles_read(got, &f32, 5, 3), KVL_OK);
    ck_assert_mem_eq(got, rows + 5 * WIDTH, sizeof got);
    ck_assert_int_eq(kvl_row_tiles_read(got, &f32, N - 2, 3), KVL_EINVAL);
}
END_TEST

/* A GQA group's read: some columns of some rows, the same values a whole tile gives there; float32
 * rows, read in place, have no column read. */
START_TEST(test_bf16_column_read_gives_the_tile_columns)
{
    enum { N = 40, WIDTH = 24, FIRST = 5, ROWS = 30, C0 = 7, W = 9 };
    float rows[N * WIDTH], tile[ROWS * WIDTH], cols[ROWS * W];
    uint16_t codes[N * WIDTH];
    for (size_t i = 0; i < N * WIDTH; i++) codes[i] = kvf_bf16_encode((float)i * 0.37f - 100.0f);
    const kvl_row_tiles f32 = kvl_row_tiles_f32(rows, N, WIDTH), bf16 = kvl_row_tiles_bf16(codes, N, WIDTH);
    ck_assert_ptr_null(f32.cols);
    ck_assert_ptr_eq(bf16.cols(cols, &bf16, FIRST, ROWS, C0, W), cols);
    ck_assert_ptr_eq(bf16.tile(tile, &bf16, FIRST, ROWS), tile);
    for (size_t i = 0; i < ROWS; i++)
        ck_assert_mem_eq(cols + i * W, tile + i * WIDTH + C0, W * sizeof *cols);
}
END_TEST

START_TEST(test_gather_keeps_pick_order_skips_minus_one_and_splits_over_threads)
{
    /* 2,048 picks of 512-wide bf16 rows decode past the split threshold: two threads share them. */
    const size_t N = 3000, WIDTH = 512, K = 2048;
    float *values = malloc(N * WIDTH * sizeof *values), *dst = malloc(K * WIDTH * sizeof *dst);
    float *one = malloc(WIDTH * sizeof *one);
    uint16_t *codes = malloc(N * WIDTH * sizeof *codes);
    int32_t *at = malloc(K * sizeof *at);
    kvl_rng rng;
    kvl_rng_seed(&rng, 83);
    kvl_rng_uniform_f32(&rng, values, N * WIDTH, -2.0, 2.0);
    for (size_t i = 0; i < N * WIDTH; i++) codes[i] = kvf_bf16_encode(values[i]);
    size_t valid = 0;
    for (size_t k = 0; k < K; k++) {
        at[k] = k % 7 == 3 ? -1 : (int32_t)(kvl_rng_next_u64(&rng) % N);
        valid += at[k] >= 0;
    }
    const kvl_row_tiles view = kvl_row_tiles_bf16(codes, N, WIDTH);
    const int threads = kvl_threads();
    kvl_set_threads(2);
    size_t got = 0;
    ck_assert_int_eq(kvl_row_tiles_gather(dst, &got, &view, at, K), KVL_OK);
    kvl_set_threads(threads);
    ck_assert_uint_eq(got, valid);
    for (size_t k = 0, j = 0; k < K; k++) {
        if (at[k] < 0) continue;
        ck_assert_int_eq(kvl_row_tiles_read(one, &view, (size_t)at[k], 1), KVL_OK);
        ck_assert_mem_eq(dst + j++ * WIDTH, one, WIDTH * sizeof *one);
    }
    at[K - 1] = (int32_t)N;
    ck_assert_int_eq(kvl_row_tiles_gather(dst, &got, &view, at, K), KVL_EINVAL);
    ck_assert_uint_eq(got, 0);
    ck_assert_msg(strstr(kvl_error(), "3000") != NULL, "message names the pick: %s", kvl_error());
    free(values); free(dst); free(one); free(codes); free(at);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_row_tiles");
    TCase *tc = tcase_create("row_tiles");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_f32_rows_are_read_in_place_and_bf16_rows_decoded);
    tcase_add_test(tc, test_bf16_column_read_gives_the_tile_columns);
    tcase_add_test(tc, test_gather_keeps_pick_order_skips_minus_one_and_splits_over_threads);
    suite_add_tcase(s, tc);
    return s;
}
