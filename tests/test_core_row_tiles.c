/* ref/core/row_tiles: views that read rows a tile at a time. Float32 rows are read in place; bf16 rows
 * are decoded into the reader's scratch, whole or a column range. */
#include "common.h"
#include "element.h"
#include "row_tiles.h"
#include "status.h"

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

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_row_tiles");
    TCase *tc = tcase_create("row_tiles");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_f32_rows_are_read_in_place_and_bf16_rows_decoded);
    tcase_add_test(tc, test_bf16_column_read_gives_the_tile_columns);
    suite_add_tcase(s, tc);
    return s;
}
