/* The safetensors reader and writer: what is written reads back bit for bit in every dtype (float64
 * rounded to the nearest float32), each kind of malformed, truncated or lying file is refused with a
 * message naming the file, tensor and field, a header of many tensors is checked in n log n, a FIFO is
 * refused without blocking, a failed write leaves nothing behind, and a sharded checkpoint finds every
 * tensor in the shard its index names.
 *
 * Oracles: the element values are written here from their definitions (F16 and BF16 bit patterns
 * with known values, E4M3 and E2M1 through the value formula), not read back through the module. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "child_limits.h"
#include "common.h"
#include "safetensors.h"
#include "status.h"

/* A fresh directory under /tmp for one test's files; removed by rm_dir. */
static void make_dir(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/kvl_st_XXXXXX");
    ck_assert(mkdtemp(dir) != NULL);
}

static void rm_dir(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* (−1)^s 2^(e−7)(1 + m/8), subnormal 2^−6 m/8; 0x7F/0xFF NaN (float8_e4m3fn). */
static double e4m3_value(uint8_t c)
{
    int s = c >> 7, e = (c >> 3) & 15, m = c & 7;
    if ((c & 0x7f) == 0x7f) return NAN;
    double v = e ? ldexp(1 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}

/* float4_e2m1fn magnitudes by the low three bits; bit 3 the sign. */
static double e2m1_value(uint8_t c)
{
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (c & 8) ? -mag[c & 7] : mag[c & 7];
}

START_TEST(test_every_dtype_round_trips_through_a_file)
{
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/a.safetensors", dir);

    const float f32[6] = {1.5f, -2.0f, 0.0f, 3.25e-5f, 1e30f, -7.0f};
    /* F16: 1, −2, 2^−24 (smallest subnormal), 65504 (largest), +inf; BF16: 1, −2, 2^−133, 3.0 */
    const uint16_t f16[5] = {0x3C00, 0xC000, 0x0001, 0x7BFF, 0x7C00};
    const double f16_want[5] = {1, -2, ldexp(1, -24), 65504, INFINITY};
    const uint16_t bf16[4] = {0x3F80, 0xC000, 0x0001, 0x4040};
    const double bf16_want[4] = {1, -2, ldexp(1, -133), 3};
    uint8_t e4m3[2][3][7], e2m1[8], e8m0[3] = {127, 0, 254};
    for (size_t i = 0; i < sizeof e4m3; i++) ((uint8_t *)e4m3)[i] = (uint8_t)(i * 37 + 1) == 0x7f ? 0 : (uint8_t)(i * 37 + 1);
    for (size_t i = 0; i < 8; i++) e2m1[i] = (uint8_t)(i * 0x31);
    const kvl_st_entry e[] = {
        {"w.f32", KVL_ST_F32, 2, {2, 3}, f32},       {"w.f16", KVL_ST_F16, 1, {5}, f16},
        {"w.bf16", KVL_ST_BF16, 2, {2, 2}, bf16},    {"w.e4m3", KVL_ST_F8_E4M3, 3, {2, 3, 7}, e4m3},
        {"w.f4", KVL_ST_F4, 2, {4, 4}, e2m1},        {"w.scale", KVL_ST_F8_E8M0, 1, {3}, e8m0},
        {"scalar", KVL_ST_F32, 0, {0}, f32},         {"empty", KVL_ST_BF16, 2, {0, 4}, NULL},
    };
    const char *meta[] = {"format", "pt", "note", "round trip"};
    ck_assert_msg(kvl_st_write(path, e, 8, meta, 2) == KVL_OK, "%s", kvl_error());

    kvl_st_file f;
    ck_assert_msg(kvl_st_open(&f, path) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(f.n_tensors, 8);
    ck_assert_str_eq(kvl_st_metadata(&f, "note"), "round trip");
    ck_assert_ptr_null(kvl_st_metadata(&f, "absent"));
    ck_assert_ptr_null(kvl_st_find(&f, "w.absent"));
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | ((const uint8_t *)f.map)[i];
    ck_assert_uint_eq(hlen % 8, 0);

    float got[64];
    const kvl_st_tensor *t = kvl_st_find(&f, "w.f32");
    ck_assert(t && t->dtype == KVL_ST_F32 && t->n_dims == 2 && t->shape[1] == 3 && t->n_bytes == 24);
    ck_assert_int_eq(kvl_st_read_f32(got, t, f.origin), KVL_OK);
    ck_assert_mem_eq(got, f32, sizeof f32);

    t = kvl_st_find(&f, "w.f16");
    ck_assert_int_eq(kvl_st_read_f32(got, t, f.origin), KVL_OK);
    for (int i = 0; i < 5; i++) ck_assert_msg((double)got[i] == f16_want[i], "f16[%d] = %g", i, got[i]);

    t = kvl_st_find(&f, "w.bf16");
    ck_assert_int_eq(kvl_st_read_f32(got, t, f.origin), KVL_OK);
    for (int i = 0; i < 4; i++) ck_assert_msg((double)got[i] == bf16_want[i], "bf16[%d] = %g", i, got[i]);

    t = kvl_st_find(&f, "w.e4m3");
    ck_assert(t && t->n_elements == 42 && t->n_bytes == 42);
    ck_assert_int_eq(kvl_st_read_f32(got, t, f.origin), KVL_OK);
    for (int i = 0; i < 42; i++) ck_assert_msg((double)got[i] == e4m3_value(((uint8_t *)e4m3)[i]), "e4m3[%d]", i);

    t = kvl_st_find(&f, "w.f4");
    ck_assert(t && t->n_elements == 16 && t->n_bytes == 8);
    ck_assert_int_eq(kvl_st_read_f32(got, t, f.origin), KVL_OK);
    for (int i = 0; i < 16; i++) {
        uint8_t code = (uint8_t)(i % 2 ? e2m1[i / 2] >> 4 : e2m1[i / 2] & 15);
        ck_assert_msg((double)got[i] == e2m1_value(code), "f4[%d] (low nibble first)", i);
    }

    t = kvl_st_find(&f, "w.scale");
    ck_assert_int_eq(kvl_st_read_f32(got, t, f.origin), KVL_OK);
    ck_assert(got[0] == 1.0f && got[1] == ldexpf(1, -127) && got[2] == ldexpf(1, 127));

    t = kvl_st_find(&f, "scalar");
    ck_assert(t && t->n_dims == 0 && t->n_elements == 1 && t->n_bytes == 4);
    t = kvl_st_find(&f, "empty");
    ck_assert(t && t->n_elements == 0 && t->n_bytes == 0);
    kvl_st_close(&f);
    rm_dir(dir);
}
END_TEST

START_TEST(test_integer_tensors_are_not_read_as_floats)
{
    int8_t b[4] = {1, 2, 3, 4};
    kvl_st_tensor t = {.name = "packed", .dtype = KVL_ST_I8, .n_dims = 1, .shape = {4}, .n_elements = 4, .n_bytes = 4,
                       .data = (const uint8_t *)b};
    float out[4];
    ck_assert_int_eq(kvl_st_read_f32(out, &t, "x.safetensors"), KVL_EINVAL);
    ck_assert_msg(strstr(kvl_error(), "x.safetensors: tensor \"packed\": dtype I8") != NULL, "%s", kvl_error());
}
END_TEST

/* ---- malformed files: built byte by byte ---------------------------------------------------------- */

/* bytes = le64(strlen(header)) ‖ header ‖ data_len bytes; returns the length. */
static size_t build(uint8_t *bytes, size_t cap, const char *header, size_t data_len)
{
    size_t h = strlen(header), n = 8 + h + data_len;
    ck_assert(n <= cap);
    for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)((uint64_t)h >> (8 * i));
    memcpy(bytes + 8, header, h);
    memset(bytes + 8 + h, 0x3c, data_len);
    return n;
}

/* Parsing bytes[n] fails with code, and the message holds every one of the pieces. */
static void expect_refused(const uint8_t *bytes, size_t n, int code, const char *piece1, const char *piece2)
{
    kvl_st_file f;
    int rc = kvl_st_parse(&f, bytes, n, "bad.safetensors");
    ck_assert_msg(rc == code, "status %d, want %d (%s)", rc, code, kvl_error());
    ck_assert_ptr_null(f.tensors);
    ck_assert_msg(strncmp(kvl_error(), "bad.safetensors: ", 17) == 0, "%s", kvl_error());
    ck_assert_msg(strstr(kvl_error(), piece1) != NULL, "'%s' lacks '%s'", kvl_error(), piece1);
    ck_assert_msg(!piece2 || strstr(kvl_error(), piece2) != NULL, "'%s' lacks '%s'", kvl_error(), piece2);
    kvl_st_close(&f);
}

static void expect_header_refused(const char *header, size_t data_len, int code, const char *piece1,
                                  const char *piece2)
{
    uint8_t bytes[1024];
    size_t n = build(bytes, sizeof bytes, header, data_len);
    expect_refused(bytes, n, code, piece1, piece2);
}

#define ENTRY(name, dtype, shape, b, e) "\"" name "\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":[" b "," e "]}"

START_TEST(test_a_well_formed_header_is_accepted)
{
    uint8_t bytes[256];
    size_t n = build(bytes, sizeof bytes, "{" ENTRY("b", "BF16", "[2,3]", "8", "20") "," ENTRY("a", "F32", "[2]", "0", "8") "}  ", 20);
    kvl_st_file f;
    ck_assert_msg(kvl_st_parse(&f, bytes, n, "good.safetensors") == KVL_OK, "%s", kvl_error());
    ck_assert_str_eq(f.tensors[0].name, "a");
    ck_assert_ptr_eq(kvl_st_find(&f, "b")->data, bytes + n - 12);
    kvl_st_close(&f);
}
END_TEST

START_TEST(test_short_and_truncated_files_are_refused)
{
    uint8_t bytes[256] = {0};
    expect_refused(bytes, 5, KVL_EPARSE, "5 bytes, too short", NULL);
    size_t n = build(bytes, sizeof bytes, "{" ENTRY("a", "F32", "[4]", "0", "16") "}", 16);
    expect_refused(bytes, 20, KVL_EPARSE, "header length", "runs past the end of the file (20 bytes)");
    expect_refused(bytes, n - 1, KVL_EINVAL, "tensor \"a\": data_offsets [0, 16] lie outside the 15 data bytes", NULL);
    bytes[7] = 0x80;
    expect_refused(bytes, n, KVL_EPARSE, "runs past the end", NULL);
}
END_TEST

START_TEST(test_malformed_header_json_is_refused_with_its_position)
{
    expect_header_refused("{\"a\": {\"dtype\": ", 0, KVL_EPARSE, "header JSON: the text ends where a value was expected",
                          "at line 1, column 17");
    expect_header_refused("[1, 2]", 0, KVL_EPARSE, "does not start with '{'", NULL);
    expect_header_refused("", 0, KVL_EPARSE, "does not start with '{'", NULL);
    expect_header_refused("{}  x", 0, KVL_EPARSE, "header JSON: text after the JSON value at line 1, column 5", NULL);
    expect_header_refused("{\"a\": 1, \"a\": 2}", 0, KVL_EINVAL, "names \"a\" twice", NULL);
}
END_TEST

/* What cJSON alone accepts: a raw NUL or invalid UTF-8 in a name, a leading zero, a raw newline. */
START_TEST(test_a_header_that_is_not_strict_json_is_refused_at_its_line_and_column)
{
    uint8_t bytes[256];
    size_t n = build(bytes, sizeof bytes, "{" ENTRY("aXb", "U8", "[4]", "0", "4") "}", 4);
    bytes[8 + 3] = 0;
    expect_refused(bytes, n, KVL_EPARSE, "a raw control byte 0x00 inside a string at line 1, column 4", NULL);
    bytes[8 + 3] = 0xc0;
    expect_refused(bytes, n, KVL_EPARSE, "byte 0xc0 that is not valid UTF-8 inside a string at line 1, column 4", NULL);
    expect_header_refused("{" ENTRY("w", "U8", "[04]", "0", "4") "}", 4, KVL_EPARSE,
                          "a number with a leading zero at line 1, column 29", NULL);
    expect_header_refused("{\n  " ENTRY("a\nb", "U8", "[4]", "0", "4") "}", 4, KVL_EPARSE,
                          "a raw control byte 0x0a inside a string at line 2, column 5", NULL);
}
END_TEST

/* A header of 100 000 tensors (5.5 MB): comparing every pair of names, 5·10^9 string comparisons,
 * takes minutes; sorted, a fraction of a second. Refused in the same time when the last repeats the first. */
START_TEST(test_a_header_of_100000_tensors_is_checked_for_repeated_names_in_n_log_n)
{
    enum { N = 100000, ENTRY_CAP = 64 };
    char *header = malloc((size_t)N * ENTRY_CAP + 16);
    ck_assert(header != NULL);
    size_t len = 0;
    header[len++] = '{';
    for (int i = 0; i < N; i++)
        len += (size_t)snprintf(header + len, ENTRY_CAP, "%s\"t%06d\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}",
                                i ? "," : "", i);
    uint8_t *bytes = malloc(8 + len + 16);
    ck_assert(bytes != NULL);
    for (int pass = 0; pass < 2; pass++) {
        size_t h = len;
        memcpy(bytes + 8, header, len);
        if (pass) h += (size_t)snprintf((char *)bytes + 8 + h, 16, ",\"t000000\":3");
        bytes[8 + h++] = '}';
        for (int i = 0; i < 8; i++) bytes[i] = (uint8_t)((uint64_t)h >> (8 * i));
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        kvl_st_file f;
        int rc = kvl_st_parse(&f, bytes, 8 + h, "many.safetensors");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (pass) ck_assert_msg(rc == KVL_EINVAL && strstr(kvl_error(), "names \"t000000\" twice"), "%s", kvl_error());
        else ck_assert_msg(rc == KVL_OK && f.n_tensors == N, "%s", kvl_error());
        ck_assert_msg(seconds < 10, "%d tensors took %.1f s", N, seconds);
        kvl_st_close(&f);
    }
    free(bytes);
    free(header);
}
END_TEST

START_TEST(test_each_bad_field_is_named_with_its_tensor)
{
    expect_header_refused("{\"w\": 3}", 0, KVL_EINVAL, "tensor \"w\"", "must be an object");
    expect_header_refused("{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, KVL_EINVAL, "tensor \"w\"", "dtype missing");
    expect_header_refused("{" ENTRY("w", "F7", "[1]", "0", "4") "}", 4, KVL_EINVAL, "tensor \"w\"", "dtype \"F7\"");
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4, KVL_EINVAL, "tensor \"w\"", "shape missing");
    expect_header_refused("{" ENTRY("w", "F32", "[2,-1]", "0", "4") "}", 4, KVL_EINVAL, "tensor \"w\"", "shape[1] is not");
    expect_header_refused("{" ENTRY("w", "F32", "[1.5]", "0", "4") "}", 4, KVL_EINVAL, "tensor \"w\"", "shape[0] is not");
    expect_header_refused("{" ENTRY("w", "F32", "[1,1,1,1,1,1,1,1,1]", "0", "4") "}", 4, KVL_EINVAL, "shape has 9 dims",
                          NULL);
    expect_header_refused("{" ENTRY("w", "F32", "[4294967296,4294967296]", "0", "4") "}", 4, KVL_EINVAL,
                          "tensor \"w\"", "shape overflows");
    expect_header_refused("{" ENTRY("w", "F4", "[3]", "0", "2") "}", 2, KVL_EINVAL, "not a whole number of bytes of F4",
                          NULL);
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, KVL_EINVAL, "tensor \"w\"",
                          "data_offsets must be");
    expect_header_refused("{\"w\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, KVL_EINVAL,
                          "tensor \"w\"", "a field appears twice");
    expect_header_refused("{\"__metadata__\":{\"k\":1}}", 0, KVL_EINVAL, "__metadata__.k must be a string", NULL);
    expect_header_refused("{\"__metadata__\":[]}", 0, KVL_EINVAL, "__metadata__ must be an object", NULL);
    expect_header_refused("{\"a\\nb\":{}}", 0, KVL_EINVAL, "control byte", NULL);
}
END_TEST

START_TEST(test_offsets_that_lie_are_refused)
{
    /* a span that disagrees with dtype × shape */
    expect_header_refused("{" ENTRY("w", "BF16", "[4]", "0", "4") "}", 4, KVL_EINVAL,
                          "tensor \"w\": data_offsets span 4 bytes, its dtype and shape need 8", NULL);
    /* reversed, and past the data */
    expect_header_refused("{" ENTRY("w", "U8", "[0]", "4", "0") "}", 4, KVL_EINVAL, "[4, 0] lie outside", NULL);
    expect_header_refused("{" ENTRY("w", "U8", "[8]", "0", "8") "}", 4, KVL_EINVAL, "[0, 8] lie outside the 4 data", NULL);
    /* overlap, gap, bytes left over */
    expect_header_refused("{" ENTRY("a", "F32", "[2]", "0", "8") "," ENTRY("b", "F32", "[1]", "4", "8") "}", 8, KVL_EINVAL,
                          "begin at 4, where the previous tensor ends at 8", NULL);
    expect_header_refused("{" ENTRY("a", "F32", "[1]", "0", "4") "," ENTRY("b", "F32", "[1]", "8", "12") "}", 12,
                          KVL_EINVAL, "tensor \"b\": data_offsets begin at 8, where a gap opens", NULL);
    expect_header_refused("{" ENTRY("a", "F32", "[1]", "0", "4") "}", 12, KVL_EINVAL, "cover 4 of the 12 data bytes", NULL);
}
END_TEST

START_TEST(test_missing_and_non_regular_files_are_named)
{
    kvl_st_file f;
    ck_assert_int_eq(kvl_st_open(&f, "/nonexistent/w.safetensors"), KVL_EIO);
    ck_assert(strstr(kvl_error(), "/nonexistent/w.safetensors: cannot open") != NULL);
    ck_assert_int_eq(kvl_st_open(&f, "/tmp"), KVL_EIO);
    ck_assert(strstr(kvl_error(), "/tmp: not a regular file") != NULL);
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/empty.safetensors", dir);
    FILE *fp = fopen(path, "wb");
    ck_assert(fp && fclose(fp) == 0);
    ck_assert_int_eq(kvl_st_open(&f, path), KVL_EPARSE);
    ck_assert(strstr(kvl_error(), "empty.safetensors: 0 bytes") != NULL);
    rm_dir(dir);
}
END_TEST

/* A FIFO as a file, as a directory's model.safetensors, and as its index: each refused, none opened. */
START_TEST(test_a_fifo_is_refused_without_blocking)
{
    char dir[64], fifo[128];
    make_dir(dir, sizeof dir);
    snprintf(fifo, sizeof fifo, "%s/model.safetensors", dir);
    ck_assert(mkfifo(fifo, 0600) == 0);
    alarm(20);   /* a reader that opens the FIFO blocks: fail as a signal, not at Check's limit */
    kvl_st_file f;
    ck_assert_int_eq(kvl_st_open(&f, fifo), KVL_EIO);
    ck_assert_msg(strstr(kvl_error(), "model.safetensors: not a regular file") != NULL, "%s", kvl_error());
    kvl_st_checkpoint c;
    ck_assert_int_eq(kvl_st_checkpoint_open(&c, dir), KVL_EIO);
    ck_assert_msg(strstr(kvl_error(), "model.safetensors: not a regular file") != NULL, "%s", kvl_error());
    snprintf(fifo, sizeof fifo, "%s/model.safetensors.index.json", dir);
    ck_assert(mkfifo(fifo, 0600) == 0);
    ck_assert_int_eq(kvl_st_checkpoint_open(&c, dir), KVL_EIO);
    ck_assert_msg(strstr(kvl_error(), "index.json: not a regular file") != NULL, "%s", kvl_error());
    alarm(0);
    rm_dir(dir);
}
END_TEST

/* arg: an output path. 40 000 bytes of tensor under a 4096-byte file-size limit. */
static int write_over_the_limit(const void *arg)
{
    static float x[10000];
    kvl_st_entry e = {"x", KVL_ST_F32, 1, {10000}, x};
    int rc = kvl_st_write(arg, &e, 1, NULL, 0);
    return rc == KVL_EIO && strstr(kvl_error(), arg) && strstr(kvl_error(), "File too large") ? 0 : 1;
}

START_TEST(test_a_write_that_fails_leaves_the_old_file_and_no_temporary)
{
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/out.safetensors", dir);
    ck_assert_int_eq(kvl_run_limited(RLIMIT_FSIZE, 4096, write_over_the_limit, path), 0);
    ck_assert_int_eq(kvl_dir_entries(dir), 0);
    const float old[2] = {7, 8};
    kvl_st_entry e = {"old", KVL_ST_F32, 1, {2}, old};
    ck_assert_msg(kvl_st_write(path, &e, 1, NULL, 0) == KVL_OK, "%s", kvl_error());
    ck_assert_int_eq(kvl_run_limited(RLIMIT_FSIZE, 4096, write_over_the_limit, path), 0);
    ck_assert_int_eq(kvl_dir_entries(dir), 1);
    kvl_st_file f;
    ck_assert_msg(kvl_st_open(&f, path) == KVL_OK, "%s", kvl_error());
    ck_assert(f.n_tensors == 1 && kvl_st_find(&f, "old") != NULL);
    kvl_st_close(&f);
    rm_dir(dir);
}
END_TEST

/* float64 → float32 rounds to nearest, ties to even: 1 + 2^−24 lies halfway between 1 and 1 + 2^−23,
 * 1 + 3·2^−24 between 1 + 2^−23 and 1 + 2^−22; 2^−150 between 0 and the least subnormal. */
START_TEST(test_float64_tensors_read_rounded_to_the_nearest_float32)
{
    const double x[8] = {1 + ldexp(1, -24), 1 + ldexp(1, -24) + ldexp(1, -40), 1 + 3 * ldexp(1, -24), -0.0,
                         ldexp(1, -150), 3 * ldexp(1, -151), 1e300, 1.0 / 3.0};
    const float want[8] = {1, 1 + ldexpf(1, -23), 1 + ldexpf(1, -22), -0.0f, 0, ldexpf(1, -149), INFINITY,
                           0x1.555556p-2f};
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    kvl_st_entry e = {"x", KVL_ST_F64, 2, {2, 4}, x};
    ck_assert_msg(kvl_st_write(path, &e, 1, NULL, 0) == KVL_OK, "%s", kvl_error());
    kvl_st_file f;
    ck_assert_msg(kvl_st_open(&f, path) == KVL_OK, "%s", kvl_error());
    const kvl_st_tensor *t = kvl_st_find(&f, "x");
    ck_assert(t && t->dtype == KVL_ST_F64 && t->n_elements == 8 && t->n_bytes == 64);
    float got[8];
    ck_assert_msg(kvl_st_read_f32(got, t, f.origin) == KVL_OK, "%s", kvl_error());
    ck_assert_mem_eq(got, want, sizeof want);
    kvl_st_close(&f);
    rm_dir(dir);
}
END_TEST

START_TEST(test_the_writer_refuses_bad_entries)
{
    const float x[2] = {1, 2};
    kvl_st_entry twice[2] = {{"a", KVL_ST_F32, 1, {2}, x}, {"a", KVL_ST_F32, 1, {1}, x}};
    ck_assert_int_eq(kvl_st_write("/tmp/kvl_never.safetensors", twice, 2, NULL, 0), KVL_EINVAL);
    ck_assert(strstr(kvl_error(), "tensor \"a\" given twice") != NULL);
    kvl_st_entry odd = {"f4", KVL_ST_F4, 1, {3}, x};
    ck_assert_int_eq(kvl_st_write("/tmp/kvl_never.safetensors", &odd, 1, NULL, 0), KVL_EINVAL);
    kvl_st_entry reserved = {"__metadata__", KVL_ST_F32, 1, {1}, x};
    ck_assert_int_eq(kvl_st_write("/tmp/kvl_never.safetensors", &reserved, 1, NULL, 0), KVL_EINVAL);
    ck_assert(access("/tmp/kvl_never.safetensors", F_OK) != 0);
}
END_TEST

/* ---- sharded checkpoints ------------------------------------------------------------------------- */

static void write_text(const char *dir, const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "w");
    ck_assert(fp && fputs(text, fp) >= 0 && fclose(fp) == 0);
}

/* Two shards: a.weight and a.scale in the first, b.weight in the second. */
static void write_shards(const char *dir)
{
    static const float a[4] = {1, 2, 3, 4}, b[2] = {5, 6}, s[1] = {0.5f};
    char path[256];
    kvl_st_entry first[2] = {{"a.weight", KVL_ST_F32, 2, {2, 2}, a}, {"a.scale", KVL_ST_F32, 1, {1}, s}};
    kvl_st_entry second[1] = {{"b.weight", KVL_ST_F32, 1, {2}, b}};
    snprintf(path, sizeof path, "%s/model-00001-of-00002.safetensors", dir);
    ck_assert_msg(kvl_st_write(path, first, 2, NULL, 0) == KVL_OK, "%s", kvl_error());
    snprintf(path, sizeof path, "%s/model-00002-of-00002.safetensors", dir);
    ck_assert_msg(kvl_st_write(path, second, 1, NULL, 0) == KVL_OK, "%s", kvl_error());
}

#define INDEX_OK                                                                                                   \
    "{\"metadata\": {\"total_size\": 28}, \"weight_map\": {\"a.weight\": \"model-00001-of-00002.safetensors\", " \
    "\"b.weight\": \"model-00002-of-00002.safetensors\", \"a.scale\": \"model-00001-of-00002.safetensors\"}}"

START_TEST(test_a_sharded_checkpoint_finds_each_tensor_in_its_shard)
{
    char dir[64];
    make_dir(dir, sizeof dir);
    write_shards(dir);
    write_text(dir, "model.safetensors.index.json", INDEX_OK);
    kvl_st_checkpoint c;
    ck_assert_msg(kvl_st_checkpoint_open(&c, dir) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(c.n_files, 2);
    const kvl_st_file *in;
    const kvl_st_tensor *t = kvl_st_checkpoint_find(&c, "b.weight", &in);
    ck_assert(t && strstr(in->origin, "model-00002-of-00002") != NULL);
    float got[2];
    ck_assert_int_eq(kvl_st_read_f32(got, t, in->origin), KVL_OK);
    ck_assert(got[0] == 5 && got[1] == 6);
    ck_assert(kvl_st_checkpoint_find(&c, "a.scale", NULL) != NULL);
    ck_assert_ptr_null(kvl_st_checkpoint_find(&c, "c.weight", NULL));
    kvl_st_checkpoint_close(&c);

    char single[128];
    snprintf(single, sizeof single, "%s/model-00002-of-00002.safetensors", dir);
    ck_assert_msg(kvl_st_checkpoint_open(&c, single) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(c.n_files, 1);
    kvl_st_checkpoint_close(&c);
    rm_dir(dir);
}
END_TEST

/* A directory with model.safetensors beside an index is read through the single file, as transformers'
 * from_pretrained reads it: its b.weight, not the shard's. */
START_TEST(test_a_single_file_beside_an_index_is_read_as_transformers_reads_it)
{
    char dir[64], path[128];
    make_dir(dir, sizeof dir);
    write_shards(dir);
    write_text(dir, "model.safetensors.index.json", INDEX_OK);
    static const float b[2] = {7, 8};
    kvl_st_entry single[1] = {{"b.weight", KVL_ST_F32, 1, {2}, b}};
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    ck_assert_msg(kvl_st_write(path, single, 1, NULL, 0) == KVL_OK, "%s", kvl_error());
    kvl_st_checkpoint c;
    ck_assert_msg(kvl_st_checkpoint_open(&c, dir) == KVL_OK, "%s", kvl_error());
    ck_assert_uint_eq(c.n_files, 1);
    const kvl_st_file *in;
    const kvl_st_tensor *t = kvl_st_checkpoint_find(&c, "b.weight", &in);
    float got[2];
    ck_assert(t && kvl_st_read_f32(got, t, in->origin) == KVL_OK);
    ck_assert(got[0] == 7 && got[1] == 8);
    ck_assert_ptr_null(kvl_st_checkpoint_find(&c, "a.weight", NULL));
    kvl_st_checkpoint_close(&c);
    rm_dir(dir);
}
END_TEST

static void expect_index_refused(const char *dir, const char *index, int code, const char *piece)
{
    write_text(dir, "model.safetensors.index.json", index);
    kvl_st_checkpoint c;
    int rc = kvl_st_checkpoint_open(&c, dir);
    ck_assert_msg(rc == code, "status %d, want %d (%s)", rc, code, kvl_error());
    ck_assert_msg(strstr(kvl_error(), piece) != NULL, "'%s' lacks '%s'", kvl_error(), piece);
    ck_assert_ptr_null(c.files);
}

START_TEST(test_an_index_that_lies_is_refused)
{
    char dir[64];
    make_dir(dir, sizeof dir);
    write_shards(dir);
    expect_index_refused(dir, "{\"weight_map\": {\"b.weight\": \"model-00001-of-00002.safetensors\"}}", KVL_EINVAL,
                         "model.safetensors.index.json: weight_map.b.weight: tensor not in the shard "
                         "model-00001-of-00002.safetensors");
    expect_index_refused(dir, "{\"weight_map\": {\"b.weight\": \"model-00003-of-00002.safetensors\"}}", KVL_EIO,
                         "model-00003-of-00002.safetensors: cannot open");
    expect_index_refused(dir, "{\"weight_map\": {\"b.weight\": \"../model.safetensors\"}}", KVL_EINVAL,
                         "weight_map.b.weight must name a file in the index's directory");
    expect_index_refused(dir, "{\"metadata\": {}}", KVL_EINVAL, "weight_map missing");
    expect_index_refused(dir, "{\"weight_map\": ", KVL_EPARSE, "the text ends where a value was expected at line 1, column 16");
    expect_index_refused(dir, "[]", KVL_EPARSE, "not a JSON object");
    expect_index_refused(dir, INDEX_OK " {}", KVL_EPARSE, "index.json: text after the JSON value at line 1, column 193");
    expect_index_refused(dir, "{\"weight_map\": {\"b.weight\": \"model-00002-of-00002.safetensors\", "
                         "\"b.weight\": \"model-00001-of-00002.safetensors\"}}", KVL_EINVAL,
                         "index.json: weight_map names \"b.weight\" twice");
    expect_index_refused(dir, "{\"weight_map\": {}, \"weight_map\": {}}", KVL_EINVAL, "names \"weight_map\" twice");
    expect_index_refused(dir, "{\"metadata\": {\"total_size\": 028}, \"weight_map\": {}}", KVL_EPARSE,
                         "a number with a leading zero at line 1, column 29");
    rm_dir(dir);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_safetensors");
    TCase *rt = tcase_create("round_trip");
    tcase_add_test(rt, test_every_dtype_round_trips_through_a_file);
    tcase_add_test(rt, test_integer_tensors_are_not_read_as_floats);
    tcase_add_test(rt, test_a_well_formed_header_is_accepted);
    tcase_add_test(rt, test_float64_tensors_read_rounded_to_the_nearest_float32);
    suite_add_tcase(s, rt);
    TCase *bad = tcase_create("malformed");
    tcase_add_test(bad, test_short_and_truncated_files_are_refused);
    tcase_add_test(bad, test_malformed_header_json_is_refused_with_its_position);
    tcase_add_test(bad, test_a_header_that_is_not_strict_json_is_refused_at_its_line_and_column);
    tcase_add_test(bad, test_a_header_of_100000_tensors_is_checked_for_repeated_names_in_n_log_n);
    tcase_add_test(bad, test_each_bad_field_is_named_with_its_tensor);
    tcase_add_test(bad, test_offsets_that_lie_are_refused);
    tcase_add_test(bad, test_missing_and_non_regular_files_are_named);
    tcase_add_test(bad, test_a_fifo_is_refused_without_blocking);
    tcase_add_test(bad, test_a_write_that_fails_leaves_the_old_file_and_no_temporary);
    tcase_add_test(bad, test_the_writer_refuses_bad_entries);
    suite_add_tcase(s, bad);
    TCase *sh = tcase_create("sharded");
    tcase_add_test(sh, test_a_sharded_checkpoint_finds_each_tensor_in_its_shard);
    tcase_add_test(sh, test_a_single_file_beside_an_index_is_read_as_transformers_reads_it);
    tcase_add_test(sh, test_an_index_that_lies_is_refused);
    suite_add_tcase(s, sh);
    return s;
}
