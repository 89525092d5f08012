/* The .npy reader and writer: what is written reads back bit for bit (and as numpy writes it: the
 * header padded to 64 bytes), float64 files round once to float32, 1-D files read as one row; every
 * malformed file is refused naming the file and the field, in one line, before anything is allocated
 * for its data; a FIFO is refused without blocking; a write that fails leaves nothing behind. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "child_limits.h"
#include "common.h"
#include "npy.h"
#include "status.h"

/* Write magic, version major.0, the header text padded to 64 bytes, then data[n] raw bytes. */
static void write_npy_version(const char *path, unsigned major, const char *dict, const void *data, size_t n)
{
    size_t pre_len = major == 1 ? 10 : 12, len = strlen(dict), pad = (64 - (pre_len + len + 1) % 64) % 64;
    size_t h = len + pad + 1;
    FILE *f = fopen(path, "wb");
    ck_assert(f != NULL);
    uint8_t pre[12] = {0x93, 'N', 'U', 'M', 'P', 'Y', (uint8_t)major, 0, (uint8_t)h, (uint8_t)(h >> 8), 0, 0};
    fwrite(pre, 1, pre_len, f);
    fputs(dict, f);
    for (size_t i = 0; i < pad; i++) fputc(' ', f);
    fputc('\n', f);
    if (n) fwrite(data, 1, n, f);
    ck_assert(fclose(f) == 0);
}

static void write_npy(const char *path, const char *dict, const void *data, size_t n)
{
    write_npy_version(path, 1, dict, data, n);
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

/* A version-major file of dict and data_bytes zero bytes is refused, one line naming it, with piece. */
static void expect_version_refused(unsigned major, const char *dict, size_t data_bytes, const char *piece)
{
    char path[64];
    temp_path(path, sizeof path);
    static const uint8_t zeros[256];
    write_npy_version(path, major, dict, zeros, data_bytes);
    float *got;
    size_t rows, cols;
    int rc = kvl_npy_read(&got, &rows, &cols, path);
    ck_assert_msg(rc != KVL_OK, "%s accepted", dict);
    ck_assert_ptr_null(got);
    ck_assert_msg(strncmp(kvl_error(), path, strlen(path)) == 0 && strstr(kvl_error(), piece), "'%s' lacks '%s'",
                  kvl_error(), piece);
    ck_assert_ptr_null(strchr(kvl_error(), '\n'));
    unlink(path);
}

static void expect_refused(const char *dict, size_t data_bytes, const char *piece)
{
    expect_version_refused(1, dict, data_bytes, piece);
}

START_TEST(test_malformed_files_are_refused_naming_the_field)
{
    expect_refused("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 8, "'descr' is '<i4'");
    expect_refused("{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8, "'descr' is '>f4'");
    expect_refused("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }", 16, "'fortran_order' must be False");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2, 2), }", 32,
                   "'shape' is (2, 2, 2), it must be one or two sizes");
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

/* A version-major file of dict and data[n] reads as rows × cols. */
static void expect_read(unsigned major, const char *dict, const float *data, size_t n, size_t rows, size_t cols)
{
    char path[64];
    temp_path(path, sizeof path);
    write_npy_version(path, major, dict, data, n * sizeof *data);
    float *got;
    size_t r, c;
    ck_assert_msg(kvl_npy_read(&got, &r, &c, path) == KVL_OK, "%s: %s", dict, kvl_error());
    ck_assert_msg(r == rows && c == cols, "%s: %zu x %zu", dict, r, c);
    ck_assert_mem_eq(got, data, n * sizeof *data);
    free(got);
    unlink(path);
}

START_TEST(test_every_spelling_of_the_three_keys_numpy_can_read_is_accepted)
{
    const float x[6] = {1, 2, 3, 4, 5, 6};
    expect_read(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", x, 6, 2, 3);
    expect_read(1, "{\"shape\": (3, 2), \"descr\": \"<f4\", \"fortran_order\": False}", x, 6, 3, 2);
    expect_read(1, "  {'fortran_order':False,'shape':(6,),'descr':'<f4'}", x, 6, 1, 6);
    expect_read(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 6,), }", x, 6, 1, 6);
    expect_read(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 6), }", x, 0, 0, 6);
}
END_TEST

START_TEST(test_a_header_that_is_not_exactly_the_three_keys_with_literal_values_is_refused)
{
    expect_version_refused(9, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 8, ".npy version 9.0");
    expect_refused("{'descr': '<f4', 'fortran_order': Falsey, 'shape': (2,), }", 8,
                   "'fortran_order' is Falsey, not False or True");
    expect_refused("{'descr': '<f4', 'fortran_order': false, 'shape': (2,), }", 8, "'fortran_order' is false, not False");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 8, "header key 'x' is not");
    expect_refused("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 8,
                   "'descr' appears twice");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2)}", 8, "(2) without a comma");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (02,)}", 8, "'shape' is (02,), it must be one");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2 3)}", 8, "'shape' is (2 3), a malformed tuple");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} x", 8, "only spaces after the dict");
    expect_refused("{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}", 8, "',' or '}' expected at byte 16");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': [2]}", 8, "'shape' is [2], not a tuple");
    expect_refused("{'descr': '<\nf4', 'fortran_order': False, 'shape': (2,)}", 8, "'descr' is not a short quoted");
    expect_refused("{'descr': '<f\t4', 'fortran_order': False, 'shape': (2,)}", 8, "'descr' is '<f\\x094'");
    expect_refused("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }\n", 8, "only spaces after the dict");
}
END_TEST

/* The file at arg claims 2·10^9 float64 elements in 130 bytes: refused as short, in a child whose
 * address space (4 GiB) cannot hold the 16 GB the claim would take. */
static int read_short_file(const void *arg)
{
    float *got;
    size_t rows, cols;
    int rc = kvl_npy_read(&got, &rows, &cols, arg);
    return rc == KVL_EINVAL && strstr(kvl_error(), "less data than its shape says") ? 0 : 1;
}

START_TEST(test_a_shape_larger_than_the_file_is_refused_before_anything_is_allocated)
{
    char path[64];
    temp_path(path, sizeof path);
    static const uint8_t zeros[2];
    write_npy(path, "{'descr': '<f8', 'fortran_order': False, 'shape': (2000000000,), }", zeros, sizeof zeros);
    struct stat st;
    ck_assert(stat(path, &st) == 0 && st.st_size == 130);
#if defined(__SANITIZE_ADDRESS__)
    /* the sanitizer's shadow memory needs more address space than any useful limit */
    ck_assert_msg(read_short_file(path) == 0, "%s", kvl_error());
#else
    ck_assert_int_eq(kvl_run_limited(RLIMIT_AS, (rlim_t)4 << 30, read_short_file, path), 0);
#endif
    unlink(path);
}
END_TEST

START_TEST(test_a_fifo_is_refused_without_blocking)
{
    char dir[64], fifo[96];
    snprintf(dir, sizeof dir, "/tmp/kvl_npy_XXXXXX");
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(fifo, sizeof fifo, "%s/in.npy", dir);
    ck_assert(mkfifo(fifo, 0600) == 0);
    float *got;
    size_t rows, cols;
    alarm(20);   /* a reader that opens the FIFO blocks: fail as a signal, not at Check's limit */
    ck_assert_int_eq(kvl_npy_read(&got, &rows, &cols, fifo), KVL_EIO);
    alarm(0);
    ck_assert_msg(strstr(kvl_error(), "in.npy: not a regular file") != NULL, "%s", kvl_error());
    unlink(fifo);
    rmdir(dir);
}
END_TEST

/* arg: an output path. A 40 000-byte matrix written under a 4096-byte file-size limit. */
static int write_over_the_limit(const void *arg)
{
    static float x[100][100];
    int rc = kvl_npy_write(arg, &x[0][0], 100, 100);
    return rc == KVL_EIO && strstr(kvl_error(), arg) && strstr(kvl_error(), "File too large") ? 0 : 1;
}

START_TEST(test_a_write_that_fails_leaves_the_old_file_and_no_temporary)
{
    char dir[64], path[96];
    snprintf(dir, sizeof dir, "/tmp/kvl_npy_XXXXXX");
    ck_assert(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/out.npy", dir);
    ck_assert_int_eq(kvl_run_limited(RLIMIT_FSIZE, 4096, write_over_the_limit, path), 0);
    ck_assert_int_eq(kvl_dir_entries(dir), 0);

    const float old[2] = {7, 8};
    ck_assert(kvl_npy_write(path, old, 1, 2) == KVL_OK);
    ck_assert_int_eq(kvl_run_limited(RLIMIT_FSIZE, 4096, write_over_the_limit, path), 0);
    ck_assert_int_eq(kvl_dir_entries(dir), 1);
    float *got;
    size_t rows, cols;
    ck_assert_msg(kvl_npy_read(&got, &rows, &cols, path) == KVL_OK, "%s", kvl_error());
    ck_assert(rows == 1 && cols == 2 && got[0] == 7 && got[1] == 8);
    free(got);

    char missing[128];
    snprintf(missing, sizeof missing, "%s/no/out.npy", dir);
    ck_assert_int_eq(kvl_npy_write(missing, old, 1, 2), KVL_EIO);
    ck_assert_msg(strstr(kvl_error(), "no/out.npy: cannot create: No such file") != NULL, "%s", kvl_error());
    unlink(path);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_npy");
    TCase *tc = tcase_create("npy");
    tcase_add_test(tc, test_a_written_matrix_reads_back_bit_for_bit);
    tcase_add_test(tc, test_float64_and_1d_files_read_as_float32_rows);
    tcase_add_test(tc, test_malformed_files_are_refused_naming_the_field);
    tcase_add_test(tc, test_every_spelling_of_the_three_keys_numpy_can_read_is_accepted);
    tcase_add_test(tc, test_a_header_that_is_not_exactly_the_three_keys_with_literal_values_is_refused);
    tcase_add_test(tc, test_a_shape_larger_than_the_file_is_refused_before_anything_is_allocated);
    tcase_add_test(tc, test_a_fifo_is_refused_without_blocking);
    tcase_add_test(tc, test_a_write_that_fails_leaves_the_old_file_and_no_temporary);
    suite_add_tcase(s, tc);
    return s;
}
