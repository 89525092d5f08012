/* Reliability of kvfmt's inputs: the numbers it quantises, the codes it decodes and the rows it packs
 * and unpacks. A value no quantiser takes (NaN, ±inf, a number past float32) or a malformed row, code
 * or stdin is refused with exit status 2 and one line on stderr naming the line, value or argument;
 * every finite value, however extreme (±0, subnormals, ±max finite, both in one block), quantises to
 * finite values no farther from the input than zero is; arbitrary bytes unpack to defined values.
 *
 * The oracle for a quantiser: with 0 representable and round-to-nearest (or saturation toward zero),
 * a dequantised x̂ never lies farther from x than 0 does: |x̂ − x| ≤ |x|, so x̂ is of x's sign or zero,
 * and exactly ±0 when x is. It holds whatever scale the block's rule picked, the top of float32
 * included, where the round-up (ceil) rules saturate the elements whose decode would pass FLT_MAX
 * (formats/block.h): no finite input decodes to ±inf. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "timing.h"
#include "rows.h"

#define CAP (1 << 20)

static char out[CAP], err[CAP];

static size_t count_lines(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* Run `kvfmt args` with stdin = input[len] (any bytes, NUL included); the exit status. */
static int kvfmt_bytes(const char *args, const char *input, size_t len)
{
    char path[] = "/tmp/kvl_rel_in_XXXXXX", cmd[512];
    int fd = mkstemp(path);
    ck_assert(fd >= 0);
    ck_assert(write(fd, input, len) == (ssize_t)len);
    close(fd);
    /* the inner redirection replaces the stdin kvl_run gives the subshell */
    snprintf(cmd, sizeof cmd, "(kvfmt %s < %s)", args, path);
    int rc = kvl_run(cmd, NULL, out, CAP, err, CAP);
    unlink(path);
    return rc;
}

static int kvfmt(const char *args, const char *input)
{
    return kvfmt_bytes(args, input, strlen(input));
}

/* The last call exited 2 with nothing on stdout and one stderr line containing `names`. */
static void expect_refused(const char *what, int rc, const char *names)
{
    ck_assert_msg(rc == 2, "%s: exit %d, want 2 (stderr: %s)", what, rc, err);
    ck_assert_msg(out[0] == '\0', "%s: printed to stdout: %.200s", what, out);
    ck_assert_msg(count_lines(err) == 1 && strncmp(err, "kvfmt", 5) == 0, "%s: stderr is not one line: %s", what, err);
    ck_assert_msg(strstr(err, names) != NULL, "%s: stderr does not name \"%s\": %s", what, names, err);
}

/* n lines of text, line i (from 0) being value(i); caller frees. */
static char *lines_of(size_t n, const char *(*value)(size_t i))
{
    char *s = malloc(n * 48 + 1), *p = s;
    ck_assert(s != NULL);
    for (size_t i = 0; i < n; i++) p += sprintf(p, "%s\n", value(i));
    return s;
}

static const char *SCHEMES[] = {"mxfp4", "mxfp8", "nvfp4", "nvfp4-noglobal", "fp8-128"};
static const size_t SCHEME_BLOCK[] = {32, 32, 16, 16, 128};
enum { N_SCHEMES = sizeof SCHEMES / sizeof SCHEMES[0] };

/* Half of bf16's smallest subnormal 2^-133: nearer zero than that, a bf16 value is ±0. */
#define BF16_HALF_MIN_SUBNORMAL 0x1p-134

/* |x̂ − x| ≤ |x| (so x̂ is finite), and ±0 kept */
static int within_zero_of(double xq, double x)
{
    return fabs(xq - x) <= fabs(x) && (x != 0 || signbit(xq) == signbit(x));
}

/* ---- values no quantiser takes ---------------------------------------------------------------------- */

static const char *bad_value;
static size_t bad_at;
static const char *one_bad(size_t i) { return i == bad_at ? bad_value : "1"; }

START_TEST(test_quantisers_refuse_nan_and_inf_naming_line_and_value)
{
    static const struct { const char *text, *names; } bad[] = {
        {"nan", "is NaN"}, {"-nan", "is NaN"}, {"inf", "is infinite"}, {"-infinity", "is infinite"},
        {"1e39", "1e+39, is infinite in float32"}, {"-3.5e38", "is infinite in float32"},
    };
    for (size_t s = 0; s < N_SCHEMES; s++)
        for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
            const size_t n = 2 * SCHEME_BLOCK[s];
            bad_value = bad[b].text;
            bad_at = n - 3;   /* in the second block */
            char *input = lines_of(n, one_bad), args[64], line[64];
            snprintf(args, sizeof args, "quant --scheme %s", SCHEMES[s]);
            snprintf(line, sizeof line, "stdin line %zu: value %zu (from 0)", bad_at + 1, bad_at);
            int rc = kvfmt(args, input);
            expect_refused(args, rc, line);
            expect_refused(args, rc, bad[b].names);
            free(input);
        }
}
END_TEST

START_TEST(test_row_pack_refuses_nan_and_inf_naming_line_and_value)
{
    for (int r = 0; r < KVF_N_ROW; r++) {
        const size_t n = kvf_row_values((kvf_row)r);
        char args[64];
        snprintf(args, sizeof args, "row --layout %s --pack", kvf_row_name((kvf_row)r));
        bad_value = "nan";
        bad_at = n - 1;   /* the last value: a RoPE dim of the rows that keep them in bf16 */
        char *input = lines_of(n, one_bad);
        expect_refused(args, kvfmt(args, input), "is NaN");
        free(input);
        bad_value = "-inf";
        bad_at = 0;
        input = lines_of(n, one_bad);
        expect_refused(args, kvfmt(args, input), "stdin line 1: value 0 (from 0), -inf, is infinite");
        free(input);
    }
}
END_TEST

/* ---- extreme finite values ---------------------------------------------------------------------------- */

/* Checks every "i input code dequantised error" line of `kvfmt quant` output against the oracle;
 * returns the lines checked. */
static size_t check_quant_lines(const char *what, const char *text)
{
    size_t checked = 0;
    for (const char *p = text; *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
        size_t i;
        char input[64], code[16], deq[64], error[64];
        if (sscanf(p, "%zu %63s %15s %63s %63s", &i, input, code, deq, error) != 5) continue;
        double x = strtod(input, NULL), xq = strtod(deq, NULL);
        ck_assert_msg(within_zero_of(xq, x), "%s: value %zu: %s dequantised to %s", what, i, input, deq);
        checked++;
    }
    return checked;
}

/* Block patterns of finite extremes, value i of each. */
static const char *all_zero(size_t i) { (void)i; return "0"; }
static const char *all_negative_zero(size_t i) { (void)i; return "-0"; }
static const char *subnormals(size_t i)
{
    static const char *const v[] = {"0x1p-149", "-0x1p-149", "0x1.fffffcp-127", "-0x1p-130", "0x1p-126"};
    return v[i % 5];
}
static const char *max_finite(size_t i) { return i % 2 ? "-3.4028234663852886e38" : "3.4028234663852886e38"; }
static const char *max_with_tiny(size_t i)
{
    static const char *const v[] = {"3.4028234663852886e38", "0x1p-149", "-1", "-0", "1e-30", "65504", "-448.5"};
    return v[i % 7];
}

START_TEST(test_quantisers_keep_zero_subnormal_and_max_finite_values_within_zero_of_the_input)
{
    const char *(*const patterns[])(size_t) = {all_zero, all_negative_zero, subnormals, max_finite, max_with_tiny};
    static const char *const names[] = {"all zero", "all -0", "subnormals", "max finite", "max finite with tiny"};
    for (size_t s = 0; s < N_SCHEMES; s++)
        for (size_t k = 0; k < sizeof patterns / sizeof patterns[0]; k++) {
            const size_t n = 2 * SCHEME_BLOCK[s];
            char *input = lines_of(n, patterns[k]), args[64], what[96];
            snprintf(args, sizeof args, "quant --scheme %s", SCHEMES[s]);
            snprintf(what, sizeof what, "%s on %s", SCHEMES[s], names[k]);
            int rc = kvfmt(args, input);
            ck_assert_msg(rc == 0, "%s: exit %d (stderr: %s)", what, rc, err);
            ck_assert_msg(check_quant_lines(what, out) == n, "%s: not every value printed:\n%s", what, out);
            free(input);
        }
}
END_TEST

/* Packed and unpacked, the quantised dims of every row keep the oracle; the bf16 dims (RoPE of
 * v32-main and v4-main) round to nearest even as ml_dtypes' astype does, so values past bf16's
 * largest finite 0x1.fep127 by half an ulp or more become ±inf, and the rest stay within 2^-8. */
START_TEST(test_rows_keep_extreme_finite_values_finite_in_their_quantised_dims)
{
    const char *(*const patterns[])(size_t) = {all_negative_zero, subnormals, max_finite, max_with_tiny};
    for (int r = 0; r < KVF_N_ROW; r++)
        for (size_t k = 0; k < sizeof patterns / sizeof patterns[0]; k++) {
            const kvf_row layout = (kvf_row)r;
            const size_t n = kvf_row_values(layout);
            const size_t quantised = layout == KVF_ROW_V32_MAIN ? KVF_V32_NOPE
                                     : layout == KVF_ROW_V4_MAIN  ? KVF_V4_NOPE
                                                                  : n;
            char *values = lines_of(n, patterns[k]), args[64];
            snprintf(args, sizeof args, "row --layout %s --pack", kvf_row_name(layout));
            ck_assert_msg(kvfmt(args, values) == 0, "%s: %s", args, err);
            size_t hex_len = strlen(out);
            char *both = malloc(hex_len + strlen(values) + 1);
            ck_assert(both != NULL);
            memcpy(both, out, hex_len);
            strcpy(both + hex_len, values);
            snprintf(args, sizeof args, "row --layout %s --unpack", kvf_row_name(layout));
            ck_assert_msg(kvfmt(args, both) == 0, "%s: %s", args, err);
            size_t checked = 0;
            for (const char *p = out; (p = strchr(p, '\n')) != NULL;) {
                p++;
                size_t i;
                char value[64], original[64];
                if (sscanf(p, "%zu %63s %63s", &i, value, original) != 3) continue;
                double x = strtod(original, NULL), xq = strtod(value, NULL);
                if (i < quantised)
                    ck_assert_msg(within_zero_of(xq, x), "%s value %zu: %s unpacked as %s",
                                  kvf_row_name(layout), i, original, value);
                else if (fabs(x) >= 0x1.ffp127)   /* bf16 max finite plus half an ulp */
                    ck_assert_msg(isinf(xq) && signbit(xq) == signbit(x), "%s bf16 value %zu: %s unpacked as %s",
                                  kvf_row_name(layout), i, original, value);
                else
                    ck_assert_msg(fabs(xq - x) <= fmax(ldexp(fabs(x), -8), BF16_HALF_MIN_SUBNORMAL) &&
                                      signbit(xq) == signbit(x),
                                  "%s bf16 value %zu: %s unpacked as %s", kvf_row_name(layout), i, original, value);
                checked++;
            }
            ck_assert_msg(checked == n, "%s: %zu of %zu values checked", kvf_row_name(layout), checked, n);
            free(both);
            free(values);
        }
}
END_TEST

/* ---- codes and rows -------------------------------------------------------------------------------- */

START_TEST(test_decode_refuses_codes_out_of_range_and_accepts_the_largest)
{
    static const struct { const char *format, *too_big, *largest; } f[] = {
        {"e2m1", "16", "0xf"}, {"e4m3", "0x100", "255"}, {"e5m2", "256", "0xff"}, {"e8m0", "0x100", "0xFF"},
        {"bf16", "65536", "0xffff"},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        char args[96];
        snprintf(args, sizeof args, "decode --format %s %s", f[i].format, f[i].too_big);
        expect_refused(args, kvfmt(args, ""), "out of range");
        snprintf(args, sizeof args, "decode --format %s 18446744073709551617", f[i].format);
        expect_refused(args, kvfmt(args, ""), "out of range");
        snprintf(args, sizeof args, "decode --format %s %s", f[i].format, f[i].largest);
        ck_assert_msg(kvfmt(args, "") == 0 && count_lines(out) == 1, "%s: %s", args, err);
    }
    static const char *const not_codes[] = {"-1", "0x", "0x1g", "1.0", "+1", "0b101", "''", "' 7'", "0x-1"};
    for (size_t i = 0; i < sizeof not_codes / sizeof not_codes[0]; i++) {
        char args[96];
        snprintf(args, sizeof args, "decode --format e4m3 -- %s", not_codes[i]);
        expect_refused(args, kvfmt(args, ""), "is not a code");
    }
}
END_TEST

START_TEST(test_row_unpack_refuses_rows_of_the_wrong_length_for_every_layout)
{
    for (int r = 0; r < KVF_N_ROW; r++) {
        const size_t bytes = kvf_row_bytes((kvf_row)r);
        char args[64], names[96];
        snprintf(args, sizeof args, "row --layout %s --unpack", kvf_row_name((kvf_row)r));
        char *hex = malloc(2 * bytes + 8);
        ck_assert(hex != NULL);
        const size_t lengths[] = {bytes - 1, bytes + 1, 1};
        for (size_t k = 0; k < 3; k++) {
            memset(hex, 'a', 2 * lengths[k]);
            strcpy(hex + 2 * lengths[k], "\n");
            snprintf(names, sizeof names, "%zu bytes of hex; a %s row is %zu bytes", lengths[k],
                     kvf_row_name((kvf_row)r), bytes);
            expect_refused(args, kvfmt(args, hex), names);
        }
        memset(hex, '0', 2 * bytes + 1);
        strcpy(hex + 2 * bytes + 1, "\n");
        expect_refused(args, kvfmt(args, hex), "an odd count");
        expect_refused(args, kvfmt(args, "\n\n"), "no hex line");
        free(hex);
    }
}
END_TEST

START_TEST(test_row_pack_and_unpack_refuse_the_wrong_count_of_values)
{
    for (int r = 0; r < KVF_N_ROW; r++) {
        const size_t n = kvf_row_values((kvf_row)r), bytes = kvf_row_bytes((kvf_row)r);
        char args[64], names[96];
        snprintf(args, sizeof args, "row --layout %s --pack", kvf_row_name((kvf_row)r));
        const size_t counts[] = {n - 1, n + 1};
        for (size_t k = 0; k < 2; k++) {
            char *values = lines_of(counts[k], all_zero);
            snprintf(names, sizeof names, "stdin has %zu values; a %s row takes %zu", counts[k],
                     kvf_row_name((kvf_row)r), n);
            expect_refused(args, kvfmt(args, values), names);
            free(values);
        }
        /* a valid row followed by one original too few */
        char *both = malloc(2 * bytes + n * 48 + 2);
        ck_assert(both != NULL);
        memset(both, '0', 2 * bytes);
        both[2 * bytes] = '\n';
        char *values = lines_of(n - 1, all_zero);
        strcpy(both + 2 * bytes + 1, values);
        snprintf(args, sizeof args, "row --layout %s --unpack", kvf_row_name((kvf_row)r));
        snprintf(names, sizeof names, "after the hex line stdin has %zu values", n - 1);
        expect_refused(args, kvfmt(args, both), names);
        free(values);
        free(both);
    }
}
END_TEST

/* Any bytes are a row: every layout unpacks all-0x00 and all-0x77 rows to one printed value per dim, and
 * refuses all-0xff rows, whose E8M0 scale of 0xff or FP32 scale with NaN bits decodes its block to NaN
 * (OCP MX v1.0 says so of 0xff), naming the field. */
START_TEST(test_arbitrary_bytes_unpack_to_defined_values_for_every_layout)
{
    for (int r = 0; r < KVF_N_ROW; r++) {
        const size_t bytes = kvf_row_bytes((kvf_row)r), n = kvf_row_values((kvf_row)r);
        char args[64];
        snprintf(args, sizeof args, "row --layout %s --unpack", kvf_row_name((kvf_row)r));
        char *hex = malloc(2 * bytes + 2);
        ck_assert(hex != NULL);
        const char fill[] = {'f', '0', '7'};
        for (size_t k = 0; k < sizeof fill; k++) {
            memset(hex, fill[k], 2 * bytes);
            strcpy(hex + 2 * bytes, "\n");
            int rc = kvfmt(args, hex);
            if (fill[k] == 'f') {
                expect_refused(args, rc, "decodes to NaN");
                continue;
            }
            ck_assert_msg(rc == 0 && count_lines(out) == n + 1, "%s on 0x%c%c bytes: exit %d, %zu lines (%s)", args,
                          fill[k], fill[k], rc, count_lines(out), err);
        }
        free(hex);
    }
}
END_TEST

/* ---- stdin that is not text ------------------------------------------------------------------------ */

START_TEST(test_a_nul_byte_on_stdin_is_refused_with_its_line)
{
    static const char values[] = "1\n2\n3\0" "4\n";
    expect_refused("encode", kvfmt_bytes("encode --format e4m3", values, sizeof values - 1),
                   "stdin line 3: a NUL byte");
    expect_refused("quant", kvfmt_bytes("quant --scheme mxfp4", values, sizeof values - 1), "stdin line 3: a NUL byte");
    expect_refused("pack", kvfmt_bytes("row --layout v4-index --pack", values, sizeof values - 1),
                   "stdin line 3: a NUL byte");
    static const char hex[] = "0000\0" "00\n";
    expect_refused("unpack", kvfmt_bytes("row --layout v4-index --unpack", hex, sizeof hex - 1),
                   "stdin line 1: a NUL byte");
}
END_TEST

/* An endless stdin (zeros, or an endless hex line or list of values) is refused within seconds, read no
 * further than a row and its values can take: exit 2, one line, nothing on stdout. */
START_TEST(test_row_pack_and_unpack_refuse_an_endless_stdin_at_once)
{
    static const char *const streams[] = {"cat /dev/zero", "yes 00", "yes 0"};
    for (int r = 0; r < KVF_N_ROW; r++)
        for (size_t i = 0; i < sizeof streams / sizeof *streams; i++)
            for (int pack = 0; pack < 2; pack++) {
                char cmd[160];
                /* in parentheses: kvl_run's redirection of stdin would replace the pipe */
                snprintf(cmd, sizeof cmd, "(%s | timeout 20 kvfmt row --layout %s --%s)", streams[i],
                         kvf_row_name((kvf_row)r), pack ? "pack" : "unpack");
                const double t0 = kvl_seconds();
                const int rc = kvl_run(cmd, NULL, out, CAP, err, CAP);
                ck_assert_msg(kvl_seconds() - t0 < 10, "%s: refused after %.1f s", cmd, kvl_seconds() - t0);
                expect_refused(cmd, rc, "stdin");
            }
}
END_TEST

/* The longest way of writing a row's input is still read whole: the hex with a blank after every digit
 * pair, then every original value at float64's 17 digits with a negative exponent, each line ended by
 * CR LF. */
START_TEST(test_row_unpack_reads_a_row_written_at_its_longest)
{
    for (int r = 0; r < KVF_N_ROW; r++) {
        const size_t bytes = kvf_row_bytes((kvf_row)r), n = kvf_row_values((kvf_row)r);
        char *input = malloc(3 * bytes + 2 + n * 32 + 1), *p = input, args[64];
        ck_assert(input != NULL);
        for (size_t b = 0; b < bytes; b++) p += sprintf(p, "00 ");
        p += sprintf(p, "\r\n");
        for (size_t i = 0; i < n; i++) p += sprintf(p, "%.16e\r\n", -1.2345678901234567e-300);
        snprintf(args, sizeof args, "row --layout %s --unpack", kvf_row_name((kvf_row)r));
        const int rc = kvfmt(args, input);
        ck_assert_msg(rc == 0 && count_lines(out) == n + 2, "%s on %zu bytes: exit %d, %zu lines (%s)", args,
                      strlen(input), rc, count_lines(out), err);
        free(input);
    }
}
END_TEST

START_TEST(test_control_characters_on_stdin_are_escaped_in_the_message)
{
    expect_refused("encode", kvfmt("encode --format e4m3", "1\n\033[2J\n"), "stdin line 2: '\\x1b[2J' is not a number");
    expect_refused("unpack", kvfmt("row --layout v4-index --unpack", "00\a00\n"),
                   "stdin line 1, column 3: '\\x07' is not a hex digit");
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reliability_kvfmt");
    TCase *values = tcase_create("values");
    tcase_add_test(values, test_quantisers_refuse_nan_and_inf_naming_line_and_value);
    tcase_add_test(values, test_row_pack_refuses_nan_and_inf_naming_line_and_value);
    tcase_add_test(values, test_quantisers_keep_zero_subnormal_and_max_finite_values_within_zero_of_the_input);
    tcase_add_test(values, test_rows_keep_extreme_finite_values_finite_in_their_quantised_dims);
    suite_add_tcase(s, values);
    TCase *codes = tcase_create("codes_and_rows");
    tcase_add_test(codes, test_decode_refuses_codes_out_of_range_and_accepts_the_largest);
    tcase_add_test(codes, test_row_unpack_refuses_rows_of_the_wrong_length_for_every_layout);
    tcase_add_test(codes, test_row_pack_and_unpack_refuse_the_wrong_count_of_values);
    tcase_add_test(codes, test_arbitrary_bytes_unpack_to_defined_values_for_every_layout);
    suite_add_tcase(s, codes);
    TCase *text = tcase_create("stdin");
    tcase_add_test(text, test_a_nul_byte_on_stdin_is_refused_with_its_line);
    tcase_add_test(text, test_control_characters_on_stdin_are_escaped_in_the_message);
    tcase_add_test(text, test_row_pack_and_unpack_refuse_an_endless_stdin_at_once);
    tcase_add_test(text, test_row_unpack_reads_a_row_written_at_its_longest);
    suite_add_tcase(s, text);
    return s;
}
