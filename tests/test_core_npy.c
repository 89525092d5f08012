/* The .npy reader and writer: what is written reads back bit for bit (and as numpy writes it: the
 * header padded to 64 bytes), float64 files round once to float32, 1-D files read as one row, and
 * every malformed file is refused naming the file and the field. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "npy.h"
#include "status.h"

/* Write magic, version 1.0, the header text padded to 64 bytes, then data[n] raw bytes. */
static void write_npy(const char *path, const char *dict, const void *data, size_t n)
{
    size_t len = strlen(dict), pad = (64 - (10 + len + 1) % 64) % 64, h = len + pad + 1;
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)h, (uint8_t)(h >> 8)};
    fwrite(pre, 1, 10, f);
    fputs(dict, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    if (n) fwrite(data, 1, n, f);
    ck_assert(fclose(f) == 0);
}

static void temp_path(char *path, size_t cap)
{
    snprintf(path, cap, "/tmp/kvl_npy_XXXXXX");
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    close(fd);
}

START_TEST(test_a_written_matrix_reads_back_bit_for_bit)
{
    char path[64];
    temp_path(path, sizeof path);
    float x[3][5];
    for (int i = 0; i < 15; i++) ((float *)x)[i] = (float)(i * 0.37 - 2.1);
    ((float *)x)[7] = -0.0f;
    ck_assert(kvl_npy_write(path, &x[0][0], 3, 5) == KVL_OK);
    FILE *f = fopen(path, "rb");
    fseek(f, 0, SEEK_END);
    ck_assert_int_eq(ftell(f), 128 + 60);   /* header to the 64-byte boundary, then the data */
    fclose(f);
    float *got;
    size_t rows, cols;
    ck_assert_msg(kvl_npy_read(&got, &rows, &cols, path) == KVL_OK, "%s", kvl_error());
    ck_assert(rows == 3 && cols == 5);
    ck_assert_mem_eq(got, x, sizeof x);
    free(got);
    unlink(path);
}
END_TEST

START_TEST(test_float64_and_1d_files_read_as_float32_rows)
{
    char path[64];
    temp_path(path, sizeof path);
    const double v[4] = {1.0 / 3.0, -2.5, 1e300, 0};
    write_npy(path, "{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", v, sizeof v);
    float *got;
    size_t rows, cols;
    ck_assert_msg(kvl_npy_read(&got, &rows, &cols, path) == KVL_OK, "%s", kvl_error());
    ck_assert(rows == 1 && cols == 4);
    ck_assert(got[0] == (float)(1.0 / 3.0) && got[1] == -2.5f && isinf(got[2]) && got[3] == 0);
    free(got);
    unlink(path);
}
END_TEST

static void expect_refused(const char *dict, size_t data_bytes, const char *piece)
{
    char path[64];
    temp_path(path, sizeof path);
    static const uint8_t zeros[256];
    write_npy(path, dict, zeros, data_bytes);
    float *got;
    size_t rows, cols;
    int rc = kvl_npy_read(&got, &rows, &cols, path);
    ck_assert_msg(rc != KVL_OK, "%s accepted", dict);
    ck_assert_ptr_null(got);
    ck_assert_msg(strncmp(kvl_error(), path, strlen(path)) == 0 && strstr(kvl_error(), piece), "'%s' lacks '%s'",
                  kvl_error(), piece);
    unlink(path);
}

START_TEST(test_malformed_files_are_refused_naming_the_field)
{
    expect_refused("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 8, "'descr' is '<i4'");
    expect_refused("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "'descr' is '>f4'");
    expect_refused("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, "'fortran_order' must be False");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 2), }", 32, "one or two sizes");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 4, "a scalar");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8, "one or two sizes");
    expect_refused("{'descr': '<f4', 'fortran_order': False, }", 8, "lacks 'shape'");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 20, "less data than its shape says");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 28, "more data than its shape says");
    float *got;
    size_t rows, cols;
    ck_assert_int_eq(kvl_npy_read(&got, &rows, &cols, "/nonexistent/x.npy"), KVL_EIO);
    ck_assert(strstr(kvl_error(), "/nonexistent/x.npy: cannot open") != NULL);
    ck_assert_int_eq(kvl_npy_read(&got, &rows, &cols, kvl_path("Makefile")), KVL_EPARSE);
    ck_assert(strstr(kvl_error(), "not a .npy file") != NULL);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_npy");
    TCase *tc = tcase_create("npy");
    tcase_add_test(tc, test_a_written_matrix_reads_back_bit_for_bit);
    tcase_add_test(tc, test_float64_and_1d_files_read_as_float32_rows);
    tcase_add_test(tc, test_malformed_files_are_refused_naming_the_field);
    suite_add_tcase(s, tc);
    return s;
}
