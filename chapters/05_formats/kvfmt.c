/* kvfmt: a calculator for chapter 5's number formats, block schemes and DeepSeek KV rows, built
 * on formats/ (element.h, block.h, rows.h). One function per command; the commands share one
 * argument parser and one reader of numbers.
 *
 *   kvfmt encode   --format F [--saturate] [VALUE...]   cast values (else one per line on stdin)
 *   kvfmt decode   --format F CODE...                   the value of each code
 *   kvfmt table    --format F                           every code with its value and class
 *   kvfmt quant    --scheme S                           block-quantise the floats on stdin
 *   kvfmt row      --layout L [--pack | --unpack]       a KV row's byte map, or pack / unpack a row
 *   kvfmt fp4-demo [--seed S]                           a numpy check of V4.1's FP4, redone
 *
 * Numbers are read as strtod reads them (decimal, hex float such as 0x1.8p+3, inf, nan) and
 * rounded once to float32, the type the library converts; errors are measured against the number
 * as written. The value of a code prints exactly (the shortest text that reads back as the same
 * double); other float32 results print as the shortest text that reads back as the same float32.
 * Exit status: 0; 2 for bad input, with one line on stderr naming what and where; 1 out of
 * memory. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "element.h"
#include "environment.h"
#include "grouped.h"
#include "program.h"
#include "rng.h"
#include "rows.h"

#define EXIT_BAD_INPUT 2
#define TOKEN_MAX 64        /* longest number or code accepted: a double's digits and then some */
#define ECHO_MAX 40         /* characters of an offending token quoted back in a message */
#define VALUE_TEXT_MAX 64   /* characters of a row's value on stdin, with the blanks around it */
#define STDIN_UNBOUNDED (SIZE_MAX - 1) /* encode and quant read stdin to its end */

/* ---- messages -------------------------------------------------------------------------------- */

static char msg_prefix[32] = "kvfmt";   /* "kvfmt <command>", set once in main */

static int bad_input(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad_input(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: ", msg_prefix);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return EXIT_BAD_INPUT;
}

static void *grow(void *p, size_t count, size_t size)
{
    void *q = count ? realloc(p, count * size) : p;
    if (count && !q) {
        fprintf(stderr, "%s: out of memory\n", msg_prefix);
        exit(EXIT_FAILURE);
    }
    return q;
}

/* ---- number text ----------------------------------------------------------------------------- */

typedef struct { char s[48]; } text;

static int nonfinite_text(text *t, double v)
{
    if (isnan(v)) snprintf(t->s, sizeof t->s, "nan");
    else if (isinf(v)) snprintf(t->s, sizeof t->s, v > 0 ? "inf" : "-inf");
    return !isfinite(v);
}

static int reads_back_f32(const char *s, double v)
{
    return strtof(s, NULL) == (float)v;
}

static int reads_back_f64(const char *s, double v)
{
    return strtod(s, NULL) == v;
}

/* t with its integer digits grouped by thousands, as the course prints quantities: 57344 → 57,344,
 * -1234.5 → -1,234.5; an exponent form or a nan or inf unchanged. Only for printing: the text no
 * longer reads back with strtod. */
static text grouped_text(text t)
{
    if (strpbrk(t.s, "eEn")) return t;
    const int negative = t.s[0] == '-';
    const char *digits = t.s + negative;
    const size_t int_len = strcspn(digits, ".");
    if (int_len < 4) return t;
    char whole[40];
    kvl_grouped(whole, sizeof whole, floor(fabs(strtod(digits, NULL))), 0);
    text g;
    snprintf(g.s, sizeof g.s, "%s%s%s", negative ? "-" : "", whole, digits + int_len);
    return g;
}

/* The shortest %g text of a finite or special v that `reads_back` as v, at most max_digits
 * significant digits, and at least the digits of its integer part below 10^17 (480, not
 * 4.8e+02). */
static text shortest_text(double v, int max_digits, int (*reads_back)(const char *s, double v))
{
    text t;
    if (nonfinite_text(&t, v)) return t;
    int p = 1;
    for (; p < max_digits; p++) {
        snprintf(t.s, sizeof t.s, "%.*g", p, v);
        if (reads_back(t.s, v)) break;
    }
    int int_digits = fabs(v) >= 1 && fabs(v) < 1e17 ? (int)floor(log10(fabs(v))) + 1 : 0;
    snprintf(t.s, sizeof t.s, "%.*g", p > int_digits ? p : int_digits, v);
    return grouped_text(t);
}

/* 9 significant digits tell every float32 apart, 17 every double. */
static text f32_text(float v)
{
    return shortest_text(v, 9, reads_back_f32);
}

static text f64_text(double v)
{
    return shortest_text(v, 17, reads_back_f64);
}

/* An error or ratio to six digits; "n/a" where it is undefined (an infinity or NaN on either
 * side). */
static text err_text(double v)
{
    text t;
    if (isfinite(v)) snprintf(t.s, sizeof t.s, "%.6g", v);
    else snprintf(t.s, sizeof t.s, "n/a");
    return grouped_text(t);
}

/* A code in hex with as many digits as the format has nibbles: 0x7 (E2M1), 0x7e, 0x43c0 (bf16). */
static text code_text(kvf_element f, uint32_t code)
{
    text t;
    unsigned bits = kvf_element_bits(f);
    int digits = bits <= 4 ? 1 : bits <= 8 ? 2 : 4;
    snprintf(t.s, sizeof t.s, "0x%0*x", digits, (unsigned)code);
    return t;
}

/* An offending token for a message, cut to ECHO_MAX characters; control bytes are written \xNN, so
 * that the message stays one line and prints nothing the terminal would act on. */
static text echo(const char *s, size_t len)
{
    text t;
    size_t o = 0, i = 0;
    for (; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int control = c < 0x20 || c == 0x7f;
        if (o + (control ? 4 : 1) > ECHO_MAX) break;
        if (control) o += (size_t)snprintf(t.s + o, sizeof t.s - o, "\\x%02x", c);
        else t.s[o++] = (char)c;
    }
    snprintf(t.s + o, sizeof t.s - o, "%s", i < len ? "..." : "");
    return t;
}

/* ---- parsing numbers and codes --------------------------------------------------------------- */

/* s[len] → *out as strtod reads it, the whole token or nothing: 0, or -1 if it is not a number. */
static int parse_number(const char *s, size_t len, double *out)
{
    char buf[TOKEN_MAX];
    if (len == 0 || len >= sizeof buf) return -1;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end;
    *out = strtod(buf,
                  &end); /* ERANGE is fine: overflow reads as ±inf, underflow as 0 or a subnormal */
    return end == buf + len ? 0 : -1;
}

/* "0x7e" (hex) or "126" (decimal) → *code: 0, -1 if it is not a code, -2 if above max. */
static int parse_code(const char *s, uint32_t max, uint32_t *code)
{
    int hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
    const char *digits = hex ? s + 2 : s;
    size_t n = strspn(digits, hex ? "0123456789abcdefABCDEF" : "0123456789");
    if (n == 0 || digits[n] != '\0') return -1;
    errno = 0;
    unsigned long long v = strtoull(digits, NULL, hex ? 16 : 10);
    if (errno == ERANGE || v > max) return -2;
    *code = (uint32_t)v;
    return 0;
}

/* Numbers with the stdin line (or argv index) each came from, for messages. */
typedef struct {
    double *x;
    size_t *line;
    size_t n, cap;
} numbers;

static void numbers_push(numbers *v, double x, size_t line)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? 2 * v->cap : 256;
        v->x = grow(v->x, v->cap, sizeof *v->x);
        v->line = grow(v->line, v->cap, sizeof *v->line);
    }
    v->x[v->n] = x;
    v->line[v->n++] = line;
}

static void numbers_free(numbers *v)
{
    free(v->x);
    free(v->line);
}

/* float32 copies of v's numbers: out[v->n], caller frees. */
static float *numbers_f32(const numbers *v)
{
    float *out = grow(NULL, v->n ? v->n : 1, sizeof *out);
    for (size_t i = 0; i < v->n; i++) out[i] = (float)v->x[i];
    return out;
}

/* stdin as text, NUL-terminated (caller frees), read to its end or to `most` bytes and one more,
 * or NULL and *status = 2 as soon as a chunk holds a NUL byte (binary data, at which the text
 * would otherwise silently end) or that one more byte: an endless stream is refused, not read.
 * `holds` names what the most is for, in the message. */
static char *read_stdin_text(int *status, size_t most, const char *holds)
{
    size_t n = 0, cap = 4096, line = 1;
    char *buf = grow(NULL, cap, 1);
    for (size_t got; n <= most;) {
        const size_t room = cap - n - 1 < most + 1 - n ? cap - n - 1 : most + 1 - n;
        if ((got = fread(buf + n, 1, room, stdin)) == 0) break;
        const char *nul = memchr(buf + n, '\0', got);
        for (const char *c = buf + n; c < (nul ? nul : buf + n + got); c++) line += *c == '\n';
        n += got;
        if (nul || n > most) {
            free(buf);
            *status = nul ? bad_input("stdin line %zu: a NUL byte; stdin must be text", line)
                          : bad_input("stdin holds more than the %zu bytes %s can take", most,
                                      holds);
            return NULL;
        }
        if (cap - n - 1 == 0) buf = grow(buf, cap *= 2, 1);
    }
    buf[n] = '\0';
    return buf;
}

/* Whitespace-separated numbers of `txt`, whose first line is stdin line `line` → appended to v.
 * 0, or exit status 2 naming the first token that is not a number. */
static int numbers_from_text(numbers *v, const char *txt, size_t line)
{
    const char *p = txt;
    while (*p) {
        if (*p == '\n') { line++; p++; continue; }
        if (strchr(" \t\r\f\v", *p)) { p++; continue; }
        size_t len = strcspn(p, " \t\r\f\v\n");
        double x;
        if (parse_number(p, len, &x) != 0)
            return bad_input("stdin line %zu: '%s' is not a number", line, echo(p, len).s);
        numbers_push(v, x, line);
        p += len;
    }
    return 0;
}

/* most, holds: as read_stdin_text. */
static int numbers_from_stdin(numbers *v, size_t most, const char *holds)
{
    int status = 0;
    char *txt = read_stdin_text(&status, most, holds);
    if (!txt) return status;
    status = numbers_from_text(v, txt, 1);
    free(txt);
    return status;
}

/* 0 if every number is finite in float32, else exit status 2 naming the first that is not. */
static int require_finite(const numbers *v, const char *who)
{
    for (size_t i = 0; i < v->n; i++) {
        float x = (float)v->x[i];
        if (isnan(x))
            return bad_input(
                "stdin line %zu: value %zu (from 0) is NaN; %s takes finite values only",
                v->line[i], i, who);
        if (isinf(x))
            return bad_input(
                "stdin line %zu: value %zu (from 0), %s, is infinite in float32; %s takes finite values only",
                v->line[i], i, f64_text(v->x[i]).s, who);
    }
    return 0;
}

/* ---- arguments ------------------------------------------------------------------------------- */

enum {
    OPT_FORMAT = 1u << 0,
    OPT_SATURATE = 1u << 1,
    OPT_SCHEME = 1u << 2,
    OPT_LAYOUT = 1u << 3,
    OPT_PACK = 1u << 4,
    OPT_UNPACK = 1u << 5,
    OPT_SEED = 1u << 6,
    OPT_HELP = 1u << 7,
};

static const struct {
    const char *name;
    unsigned bit;
    int takes_value;
} OPTION_SPECS[] = {
    {"--format", OPT_FORMAT, 1}, {"--saturate", OPT_SATURATE, 0}, {"--scheme", OPT_SCHEME, 1},
    {"--layout", OPT_LAYOUT, 1}, {"--pack", OPT_PACK, 0},         {"--unpack", OPT_UNPACK, 0},
    {"--seed", OPT_SEED, 1},     {"--help", OPT_HELP, 0},
};
enum { N_OPTIONS = sizeof OPTION_SPECS / sizeof OPTION_SPECS[0] };

typedef struct {
    unsigned given;                 /* OPT_* bits seen */
    const char
        *value[N_OPTIONS]; /* the value of each option that takes one, by OPTION_SPECS index */
    int value_at[N_OPTIONS];        /* its argv index */
    const char **args;              /* positional arguments, in order */
    int *args_at;                   /* their argv indices */
    size_t n_args;
} options;

static int option_index(unsigned bit)
{
    for (int k = 0; k < N_OPTIONS; k++)
        if (OPTION_SPECS[k].bit == bit) return k;
    return 0;
}

static const char *opt_value(const options *o, unsigned bit)
{
    return o->value[option_index(bit)];
}

static int opt_at(const options *o, unsigned bit)
{
    return o->value_at[option_index(bit)];
}

/* argv[i] = "--name" or "--name=value" → the OPTION_SPECS index, or -1 if unknown. */
static int find_option(const char *arg)
{
    size_t len = strcspn(arg, "=");
    for (int k = 0; k < N_OPTIONS; k++)
        if (strlen(OPTION_SPECS[k].name) == len && strncmp(arg, OPTION_SPECS[k].name, len) == 0)
            return k;
    return strcmp(arg, "-h") == 0 ? option_index(OPT_HELP) : -1;
}

/* One option at argv[*i]; advances *i past its value. 0, or exit status 2. */
static int take_option(options *o, int argc, char **argv, int *i, unsigned allowed)
{
    const char *arg = argv[*i];
    int k = find_option(arg);
    if (k < 0) return bad_input("unknown option '%s' (argument %d)", echo(arg, strlen(arg)).s, *i);
    const char *name = OPTION_SPECS[k].name;
    if (!(OPTION_SPECS[k].bit & allowed))
        return bad_input("option %s does not apply here (argument %d)", name, *i);
    if (o->given & OPTION_SPECS[k].bit)
        return bad_input("option %s given twice (argument %d)", name, *i);
    o->given |= OPTION_SPECS[k].bit;
    const char *eq = strchr(arg, '=');
    if (!OPTION_SPECS[k].takes_value) {
        return eq ? bad_input("option %s takes no value (argument %d)", name, *i) : 0;
    }
    if (!eq && *i + 1 >= argc) return bad_input("option %s needs a value (argument %d)", name, *i);
    o->value[k] = eq ? eq + 1 : argv[++*i];
    o->value_at[k] = *i;
    return 0;
}

/* argv[first..argc) → o: options from `allowed`, and positional arguments if takes_args.
 * A token starting with "--" is an option (so "-1.5" is a value); "--" ends the options. */
static int parse_options(options *o, int argc, char **argv, int first, unsigned allowed,
                         int takes_args)
{
    *o = (options){0};
    o->args = grow(NULL, (size_t)argc, sizeof *o->args);
    o->args_at = grow(NULL, (size_t)argc, sizeof *o->args_at);
    int only_args = 0;
    for (int i = first; i < argc; i++) {
        const char *arg = argv[i];
        if (!only_args && strcmp(arg, "--") == 0) { only_args = 1; continue; }
        if (!only_args && (strncmp(arg, "--", 2) == 0 || strcmp(arg, "-h") == 0)) {
            int status = take_option(o, argc, argv, &i, allowed | OPT_HELP);
            if (status) return status;
            continue;
        }
        if (!takes_args)
            return bad_input("unexpected argument '%s' (argument %d)", echo(arg, strlen(arg)).s, i);
        o->args[o->n_args] = arg;
        o->args_at[o->n_args++] = i;
    }
    return 0;
}

static void options_free(options *o)
{
    free(o->args);
    free(o->args_at);
}

/* The value of a required option, or NULL after a message naming it. */
static const char *required(const options *o, unsigned bit)
{
    const char *v = opt_value(o, bit);
    if (!v) bad_input("%s is required", OPTION_SPECS[option_index(bit)].name);
    return v;
}

static int parse_format(const options *o, kvf_element *f)
{
    const char *name = required(o, OPT_FORMAT);
    if (!name) return EXIT_BAD_INPUT;
    if (kvf_element_from_name(name, f) == 0) return 0;
    return bad_input(
        "unknown format '%s' (argument %d); formats: float8_e4m3fn float8_e5m2 float4_e2m1fn "
        "float8_e8m0fnu bfloat16, or e4m3 e5m2 e2m1 e8m0 bf16",
        echo(name, strlen(name)).s, opt_at(o, OPT_FORMAT));
}

/* ---- encode, decode, table ------------------------------------------------------------------- */

typedef uint32_t (*cast_fn)(kvf_element f, float x);

/* How the selected E8M0 cast rounds (element.h); "" for every other format. */
static const char *e8m0_rounding(kvf_element f, cast_fn cast)
{
    if (f != KVF_E8M0) return "";
    return cast == kvf_encode_sat
               ? "  rounding up (toward +inf), saturating at 2^127, as CUDA's __nv_fp8_e8m0"
               : "  rounding to nearest, a tie (1.5*2^k) up, as ml_dtypes' astype";
}

/* One line: code, decoded value, the input (and its float32 if that differs), error, relative
 * error. */
static void print_encoded(kvf_element f, cast_fn cast, double input)
{
    float x = (float)input;
    uint32_t code = cast(f, x);
    double y = kvf_decode(f, code);
    double err = y - input;
    double rel = err == 0 ? 0 : err / fabs(input);
    printf("%s  %s  input %s", code_text(f, code).s, f64_text(y).s, f64_text(input).s);
    if ((double)x != input && !isnan(input)) printf(" (float32 %s)", f64_text(x).s);
    printf("  error %s  rel %s%s\n", err_text(err).s, err_text(rel).s, e8m0_rounding(f, cast));
}

static int cmd_encode(const options *o)
{
    kvf_element f;
    int status = parse_format(o, &f);
    if (status) return status;
    numbers v = {0};
    for (size_t i = 0; i < o->n_args && !status; i++) {
        double x;
        if (parse_number(o->args[i], strlen(o->args[i]), &x) == 0)
            numbers_push(&v, x, (size_t)o->args_at[i]);
        else
            status = bad_input("'%s' (argument %d) is not a number",
                               echo(o->args[i], strlen(o->args[i])).s, o->args_at[i]);
    }
    if (!status && o->n_args == 0) status = numbers_from_stdin(&v, STDIN_UNBOUNDED, "");
    if (!status && v.n == 0)
        status = bad_input("no values given, neither as arguments nor on stdin");
    cast_fn cast = o->given & OPT_SATURATE ? kvf_encode_sat : kvf_encode;
    for (size_t i = 0; i < v.n && !status; i++) print_encoded(f, cast, v.x[i]);
    numbers_free(&v);
    return status;
}

/* Mantissa bits of each format (element.h's table): the exponent field above them is 0 for zeros
 * and subnormals. */
static unsigned mantissa_bits(kvf_element f)
{
    switch (f) {
    case KVF_E4M3: return 3;
    case KVF_E5M2: return 2;
    case KVF_E2M1: return 1;
    case KVF_BF16: return 7;
    default: return 0;
    }
}

/* zero, subnormal, normal, inf or nan. E8M0 has no sign, zero or subnormal: every number is
 * normal. */
static const char *code_class(kvf_element f, uint32_t code)
{
    float v = kvf_decode(f, code);
    if (isnan(v)) return "nan";
    if (isinf(v)) return "inf";
    if (v == 0.0f) return "zero";
    if (f == KVF_E8M0) return "normal";
    uint32_t magnitude = code & ((1u << (kvf_element_bits(f) - 1)) - 1);
    return magnitude >> mantissa_bits(f) == 0 ? "subnormal" : "normal";
}

static uint32_t max_code(kvf_element f)
{
    return (uint32_t)((1ull << kvf_element_bits(f)) - 1);
}

static void print_decoded(kvf_element f, uint32_t code)
{
    printf("%s  %s  %s\n", code_text(f, code).s, f64_text(kvf_decode(f, code)).s,
           code_class(f, code));
}

static int cmd_decode(const options *o)
{
    kvf_element f;
    int status = parse_format(o, &f);
    if (status) return status;
    if (o->n_args == 0)
        return bad_input("no codes given; write them after the options, as 0x7e or 126");
    uint32_t *codes = grow(NULL, o->n_args, sizeof *codes);
    for (size_t i = 0; i < o->n_args && !status; i++) {
        const char *s = o->args[i];
        int r = parse_code(s, max_code(f), &codes[i]);
        if (r == -1)
            status = bad_input("'%s' (argument %d) is not a code; write 0x7e or 126",
                               echo(s, strlen(s)).s, o->args_at[i]);
        else if (r == -2)
            status = bad_input("code %s (argument %d) is out of range for %s (%s..%s)",
                               echo(s, strlen(s)).s, o->args_at[i], kvf_element_name(f),
                               code_text(f, 0).s, code_text(f, max_code(f)).s);
    }
    for (size_t i = 0; i < o->n_args && !status; i++) print_decoded(f, codes[i]);
    free(codes);
    return status;
}

static int cmd_table(const options *o)
{
    kvf_element f;
    int status = parse_format(o, &f);
    if (status) return status;
    printf("code  value  class  (%s)\n", kvf_element_name(f));
    for (uint32_t c = 0; c <= max_code(f); c++) print_decoded(f, c);
    return 0;
}

/* ---- error summaries ------------------------------------------------------------------------- */

/* ||a||_2 of a[n], summed in double in index order. */
static double l2_norm(const double *a, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++) s += a[i] * a[i];
    return sqrt(s);
}

/* x̂[n] against x[n]: ||x̂ − x|| / ||x|| and max |x̂ − x|, in double. */
static void error_summary(double *rel_l2, double *max_abs, const float *xq, const double *x,
                          size_t n)
{
    double *err = grow(NULL, n ? n : 1, sizeof *err);
    *max_abs = 0;
    for (size_t i = 0; i < n; i++) {
        err[i] = (double)xq[i] - x[i];
        *max_abs = fmax(*max_abs, fabs(err[i]));
    }
    *rel_l2 = l2_norm(err, n) / l2_norm(x, n);
    free(err);
}

static void print_error_summary(const float *xq, const double *x, size_t n)
{
    double rel_l2, max_abs;
    error_summary(&rel_l2, &max_abs, xq, x, n);
    printf("rel L2 error %s  max abs error %s\n", err_text(rel_l2).s, err_text(max_abs).s);
}

/* ---- quant ----------------------------------------------------------------------------------- */

typedef enum {
    SCHEME_MXFP4,
    SCHEME_MXFP8,
    SCHEME_NVFP4,
    SCHEME_NVFP4_NOGLOBAL,
    SCHEME_FP8_128
} scheme_id;
typedef enum { SCALE_E8M0, SCALE_E4M3, SCALE_FP32 } scale_kind;

typedef struct {
    const char *name;
    scheme_id id;
    size_t block;
    kvf_element elem;
    scale_kind scale;
    const char *about;
} scheme;

static const scheme SCHEMES[] = {
    {"mxfp4", SCHEME_MXFP4, KVF_MX_BLOCK, KVF_E2M1, SCALE_E8M0,
     "OCP MXFP4: E2M1 elements, one E8M0 scale 2^(floor(log2 amax) - 2) per 32"},
    {"mxfp8", SCHEME_MXFP8, KVF_MX_BLOCK, KVF_E4M3, SCALE_E8M0,
     "OCP MXFP8: E4M3 elements, one E8M0 scale 2^(floor(log2 amax) - 8) per 32"},
    {"nvfp4", SCHEME_NVFP4, KVF_NVFP4_BLOCK, KVF_E2M1, SCALE_E4M3,
     "NVFP4: E2M1 elements, one E4M3 scale per 16 under the FP32 tensor scale amax/(448*6)"},
    {"nvfp4-noglobal", SCHEME_NVFP4_NOGLOBAL, KVF_FP4_V41_BLOCK, KVF_E2M1, SCALE_E4M3,
     "DeepSeek V4.1 FP4: E2M1 elements, one E4M3 scale e4m3(amax/6) per 16, no tensor scale"},
    {"fp8-128", SCHEME_FP8_128, KVF_FP8_UE8M0_BLOCK, KVF_E4M3, SCALE_FP32,
     "DeepSeek V3.2 FP8: E4M3 elements, one FP32 scale 2^ceil(log2(amax/448)) per 128"},
};
enum { N_SCHEMES = sizeof SCHEMES / sizeof SCHEMES[0] };

/* One quantised vector of n values: the library's outputs and the dequantised values. */
typedef struct {
    uint8_t *codes;       /* [n] E4M3, or [n/2] E2M1 pairs with element 2j in the low nibble */
    uint8_t *scale_code;  /* [n/block] E8M0 or E4M3 codes */
    float *scale_f32;     /* [n/block] FP32 scales (fp8-128) */
    float s_global;       /* NVFP4's tensor scale */
    float *xq;            /* [n] dequantised */
} quantised;

static void quantised_alloc(quantised *q, size_t n, size_t block)
{
    q->codes = grow(NULL, n, 1);
    q->scale_code = grow(NULL, n / block, 1);
    q->scale_f32 = grow(NULL, n / block, sizeof(float));
    q->xq = grow(NULL, n, sizeof(float));
    q->s_global = 1.0f;
}

static void quantised_free(quantised *q)
{
    free(q->codes);
    free(q->scale_code);
    free(q->scale_f32);
    free(q->xq);
}

/* max |x_i| over x[n] */
static float amax_of(const float *x, size_t n)
{
    float m = 0;
    for (size_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
    return m;
}

/* x[n] → q through the scheme's quantiser and its dequantiser; a KVF_* code. */
static int quantise(quantised *q, const scheme *s, const float *x, size_t n)
{
    int err = KVF_OK;
    switch (s->id) {
    case SCHEME_MXFP4:
        err = kvf_quant_mxfp4(q->codes, q->scale_code, x, n);
        return err ? err : kvf_dequant_mxfp4(q->xq, q->codes, q->scale_code, n);
    case SCHEME_MXFP8:
        err = kvf_quant_mxfp8_e4m3(q->codes, q->scale_code, x, n);
        return err ? err : kvf_dequant_mxfp8_e4m3(q->xq, q->codes, q->scale_code, n);
    case SCHEME_NVFP4:
        q->s_global = kvf_nvfp4_global_scale(amax_of(x, n));
        err = kvf_quant_nvfp4(q->codes, q->scale_code, x, n, q->s_global);
        return err ? err : kvf_dequant_nvfp4(q->xq, q->codes, q->scale_code, n, q->s_global);
    case SCHEME_NVFP4_NOGLOBAL:
        err = kvf_quant_fp4_v41(q->codes, q->scale_code, x, n);
        return err ? err : kvf_dequant_fp4_v41(q->xq, q->codes, q->scale_code, n);
    case SCHEME_FP8_128:
        err = kvf_quant_fp8_ue8m0(q->codes, q->scale_f32, x, n);
        return err ? err : kvf_dequant_fp8_ue8m0(q->xq, q->codes, q->scale_f32, n);
    }
    return KVF_ELAYOUT;
}

/* The element code of value i: codes[i] for E4M3, else the nibble i of the E2M1 pairs
 * codes[n/2]. */
static uint32_t element_code(const quantised *q, const scheme *s, size_t i)
{
    if (s->elem != KVF_E2M1) return q->codes[i];
    return i % 2 ? q->codes[i / 2] >> 4 : q->codes[i / 2] & 0x0Fu;
}

/* Scale b of q: the code and its value, or the FP32 value. */
static void print_block_scale(const quantised *q, const scheme *s, size_t b)
{
    printf("block %zu  scale ", b);
    if (s->scale == SCALE_FP32) {
        printf("%s (float32)\n", f64_text(q->scale_f32[b]).s);
        return;
    }
    kvf_element sf = s->scale == SCALE_E8M0 ? KVF_E8M0 : KVF_E4M3;
    float v = kvf_decode(sf, q->scale_code[b]);
    printf("%s = %s", code_text(sf, q->scale_code[b]).s, f64_text(v).s);
    if (s->id == SCHEME_NVFP4) printf(", times the tensor scale: %s", f32_text(v * q->s_global).s);
    printf("\n");
}

/* v->x[n] as typed, q from it: each block's scale, then per value its code, x̂ and error. */
static void print_quantised(const quantised *q, const scheme *s, const numbers *v)
{
    size_t blocks = v->n / s->block;
    printf("%s: %s; %zu values, %zu block%s\n", s->name, s->about, v->n, blocks,
           blocks == 1 ? "" : "s");
    if (s->id == SCHEME_NVFP4) printf("tensor scale %s (float32)\n", f32_text(q->s_global).s);
    for (size_t i = 0; i < v->n; i++) {
        if (i % s->block == 0) {
            print_block_scale(q, s, i / s->block);
            printf("%8s  %-24s %-6s  %-16s %s\n", "i", "input", "code", "dequantised", "error");
        }
        printf("%8zu  %-24s %-6s  %-16s %s\n", i, f64_text(v->x[i]).s,
               code_text(s->elem, element_code(q, s, i)).s, f32_text(q->xq[i]).s,
               err_text((double)q->xq[i] - v->x[i]).s);
    }
    print_error_summary(q->xq, v->x, v->n);
}

static const scheme *find_scheme(const char *name)
{
    for (int k = 0; k < N_SCHEMES; k++)
        if (strcmp(name, SCHEMES[k].name) == 0) return &SCHEMES[k];
    return NULL;
}

static int check_quant_input(const numbers *v, const scheme *s)
{
    if (v->n == 0)
        return bad_input("no values on stdin; %s needs a multiple of %zu", s->name, s->block);
    if (v->n % s->block)
        return bad_input("stdin has %zu values, not a multiple of the %s block (%zu)", v->n,
                         s->name, s->block);
    return require_finite(v, s->name);
}

static int cmd_quant(const options *o)
{
    const char *name = required(o, OPT_SCHEME);
    if (!name) return EXIT_BAD_INPUT;
    const scheme *s = find_scheme(name);
    if (!s)
        return bad_input(
            "unknown scheme '%s' (argument %d); schemes: mxfp4 mxfp8 nvfp4 nvfp4-noglobal fp8-128",
            echo(name, strlen(name)).s, opt_at(o, OPT_SCHEME));
    numbers v = {0};
    int status = numbers_from_stdin(&v, STDIN_UNBOUNDED, "");
    if (!status) status = check_quant_input(&v, s);
    if (!status) {
        float *x = numbers_f32(&v);
        quantised q;
        quantised_alloc(&q, v.n, s->block);
        int err = quantise(&q, s, x, v.n);
        if (err) status = bad_input("%s", kvf_strerror(err));
        else print_quantised(&q, s, &v);
        quantised_free(&q);
        free(x);
    }
    numbers_free(&v);
    return status;
}

/* ---- row ------------------------------------------------------------------------------------- */

static void print_row_map(kvf_row r)
{
    size_t n_fields;
    const kvf_row_field *fields = kvf_row_fields(r, &n_fields);
    printf("%s: %zu bytes, %zu values\n", kvf_row_name(r), kvf_row_bytes(r), kvf_row_values(r));
    printf("%-6s %6s %6s  %s\n", "field", "offset", "size", "format");
    for (size_t k = 0; k < n_fields; k++)
        printf("%-6s %6zu %6zu  %s\n", fields[k].name, fields[k].offset, fields[k].size,
               fields[k].format);
}

/* bytes[n] as one line of hex, byte 0 first. */
static void print_hex(const uint8_t *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) printf("%02x", bytes[i]);
    printf("\n");
}

/* stdin: the row's values[kvf_row_values] → one hex line of row[kvf_row_bytes]. */
static int row_pack(kvf_row r)
{
    numbers v = {0};
    char holds[64];
    snprintf(holds, sizeof holds, "a %s row's %zu values", kvf_row_name(r), kvf_row_values(r));
    int status = numbers_from_stdin(&v, kvf_row_values(r) * VALUE_TEXT_MAX, holds);
    if (!status && v.n != kvf_row_values(r))
        status = bad_input("stdin has %zu values; a %s row takes %zu", v.n, kvf_row_name(r),
                           kvf_row_values(r));
    if (!status) status = require_finite(&v, kvf_row_name(r));
    if (!status) {
        float *x = numbers_f32(&v);
        uint8_t *row = grow(NULL, kvf_row_bytes(r), 1);
        int err = kvf_row_pack(r, row, x);
        if (err) status = bad_input("%s", kvf_strerror(err));
        else print_hex(row, kvf_row_bytes(r));
        free(row);
        free(x);
    }
    numbers_free(&v);
    return status;
}

static int hex_digit(int c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* The hex line s[len] (stdin line `line`; blanks between digits allowed) → row[want]: 0, or exit
 * status 2 for a character that is not a hex digit, an odd digit count or the wrong byte count. */
static int parse_hex_row(uint8_t *row, size_t want, const char *s, size_t len, size_t line,
                         const char *layout)
{
    size_t digits = 0;
    for (size_t i = 0; i < len; i++) {
        if (strchr(" \t\r", s[i])) continue;
        int d = hex_digit((unsigned char)s[i]);
        if (d < 0)
            return bad_input("stdin line %zu, column %zu: '%s' is not a hex digit", line, i + 1,
                             echo(s + i, 1).s);
        if (digits / 2 < want)
            row[digits / 2] = (uint8_t)(digits % 2 ? row[digits / 2] << 4 | d : d);
        digits++;
    }
    if (digits % 2) return bad_input("stdin line %zu: %zu hex digits, an odd count", line, digits);
    if (digits / 2 != want)
        return bad_input("stdin line %zu: %zu bytes of hex; a %s row is %zu bytes", line,
                         digits / 2, layout, want);
    return 0;
}

/* values[n] from a row, with originals->x[n] and the errors when originals->n = n (else just
 * values). */
static void print_unpacked(const float *values, size_t n, const numbers *originals)
{
    if (originals->n == 0) {
        printf("%6s  %s\n", "i", "value");
        for (size_t i = 0; i < n; i++) printf("%6zu  %s\n", i, f32_text(values[i]).s);
        return;
    }
    printf("%6s  %-16s %-24s %s\n", "i", "value", "original", "error");
    for (size_t i = 0; i < n; i++)
        printf("%6zu  %-16s %-24s %s\n", i, f32_text(values[i]).s, f64_text(originals->x[i]).s,
               err_text((double)values[i] - originals->x[i]).s);
    print_error_summary(values, originals->x, n);
}

/* The first line of p that is not blank; *line counts the lines passed. */
static const char *skip_blank_lines(const char *p, size_t *line)
{
    while (*p && strspn(p, " \t\r") == strcspn(p, "\n")) {
        p += strcspn(p, "\n");
        if (*p) {
            p++;
            ++*line;
        }
    }
    return p;
}

/* The field that makes value i of a row NaN: the bf16 field ("rope") past the quantised
 * elements, else the element's own code or, when that is not NaN, the scale of its block. The
 * quantised elements are the first field: E2M1 pairs (no NaN code) or E4M3. */
static const char *nan_field(kvf_row r, const uint8_t *row, size_t i)
{
    size_t n;
    const kvf_row_field *f = kvf_row_fields(r, &n);
    const int pairs = strstr(f[0].format, " x2") != NULL;
    if (i >= f[0].size * (pairs ? 2 : 1)) return "rope";
    if (!pairs && isnan(kvf_decode(KVF_E4M3, row[f[0].offset + i]))) return f[0].name;
    return "scale";
}

/* 0, or exit status 2 naming the first value of the unpacked row that is NaN and its field. An
 * infinity stays: a bf16 RoPE value packed past bf16's range unpacks to one, as ml_dtypes casts
 * it. */
static int require_no_nan(kvf_row r, const uint8_t *row, const float *values, size_t line)
{
    for (size_t i = 0; i < kvf_row_values(r); i++)
        if (isnan(values[i]))
            return bad_input(
                "stdin line %zu: value %zu (from 0) of the %s row decodes to NaN: its field '%s' holds a "
                "NaN",
                line, i, kvf_row_name(r), nan_field(r, row, i));
    return 0;
}

/* stdin: one line of hex (the packed row), then optionally the row's original values; read no
 * further than they can take: the hex digits with a blank after each pair and a line end, and the
 * values. */
static int row_unpack(kvf_row r)
{
    int status = 0;
    char holds[96];
    snprintf(holds, sizeof holds, "a %s row's hex line and %zu values", kvf_row_name(r),
             kvf_row_values(r));
    const size_t most = 3 * kvf_row_bytes(r) + 2 + kvf_row_values(r) * VALUE_TEXT_MAX;
    char *txt = read_stdin_text(&status, most, holds);
    if (!txt) return status;
    size_t line = 1;
    const char *p = skip_blank_lines(txt, &line);
    size_t len = strcspn(p, "\n");
    uint8_t *row = grow(NULL, kvf_row_bytes(r), 1);
    numbers originals = {0};
    status =
        len ? parse_hex_row(row, kvf_row_bytes(r), p, len, line, kvf_row_name(r))
            : bad_input("stdin holds no hex line; expected one line of hex bytes, byte 0 first");
    if (!status && p[len]) status = numbers_from_text(&originals, p + len + 1, line + 1);
    if (!status && originals.n && originals.n != kvf_row_values(r))
        status = bad_input("after the hex line stdin has %zu values; a %s row holds %zu",
                           originals.n, kvf_row_name(r), kvf_row_values(r));
    if (!status) {
        float *values = grow(NULL, kvf_row_values(r), sizeof *values);
        int err = kvf_row_unpack(r, values, row);
        if (err) status = bad_input("%s", kvf_strerror(err));
        else status = require_no_nan(r, row, values, line);
        if (!status) print_unpacked(values, kvf_row_values(r), &originals);
        free(values);
    }
    numbers_free(&originals);
    free(row);
    free(txt);
    return status;
}

static int cmd_row(const options *o)
{
    const char *name = required(o, OPT_LAYOUT);
    if (!name) return EXIT_BAD_INPUT;
    kvf_row r;
    if (kvf_row_from_name(name, &r) != KVF_OK)
        return bad_input(
            "unknown layout '%s' (argument %d); layouts: v32-main v32-index v4-main v4-index "
            "v41-main v41-window",
            echo(name, strlen(name)).s, opt_at(o, OPT_LAYOUT));
    if ((o->given & OPT_PACK) && (o->given & OPT_UNPACK))
        return bad_input("give --pack or --unpack, not both");
    if (o->given & OPT_PACK) return row_pack(r);
    if (o->given & OPT_UNPACK) return row_unpack(r);
    print_row_map(r);
    return 0;
}

/* ---- fp4-demo -------------------------------------------------------------------------------- */

/* v rounded to `decimals` places and printed as numpy prints np.float64(v).round(decimals):
 * rint(v·10^d)/10^d, shortest text, "4.0" for a whole number. */
static text numpy_round_text(double v, int decimals)
{
    double p = pow(10.0, decimals);
    text t = f64_text(rint(v * p) / p);
    if (!strpbrk(t.s, ".eni")) strncat(t.s, ".0", sizeof t.s - strlen(t.s) - 1);
    return t;
}

static int parse_seed(const options *o, uint64_t *seed)
{
    const char *s = opt_value(o, OPT_SEED);
    *seed = 0;
    if (!s) return 0;
    char *end;
    errno = 0;
    unsigned long long v =
        strtoull(s, &end, 10); /* digits only: strtoull alone takes a sign and spaces */
    if (!isdigit((unsigned char)*s) || *end || errno == ERANGE)
        return bad_input("seed '%s' (argument %d) is not a whole number in [0, 2^64)",
                         echo(s, strlen(s)).s, opt_at(o, OPT_SEED));
    *seed = v;
    return 0;
}

/* A numpy check of V4.1's FP4 cache (chapters/05_formats/README.md): a standard-normal
 * latent[512] from default_rng(seed), scaled in double to L2 norm sqrt(512), quantised with the
 * library's V4.1 FP4 (block 16, E4M3 scale of amax/6, E2M1 nearest even) and compared in double
 * with the latent. */
static int cmd_fp4_demo(const options *o)
{
    uint64_t seed;
    int status = parse_seed(o, &seed);
    if (status) return status;
    enum { DIM = KVF_V41_DIM };
    double latent[DIM];
    float x[DIM], xq[DIM];
    uint8_t codes[DIM / 2], scales[DIM / KVF_FP4_V41_BLOCK];
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    kvl_rng_normal_f64(&rng, latent, DIM, 1.0);
    double factor =
        sqrt((double)DIM) / l2_norm(latent, DIM); /* numpy: latent *= sqrt(512) / norm(latent) */
    double amax = 0;
    for (size_t i = 0; i < DIM; i++) {
        latent[i] *= factor;
        x[i] = (float)latent[i];
        amax = fmax(amax, fabs(latent[i]));
    }
    int err = kvf_quant_fp4_v41(codes, scales, x, DIM);
    if (!err) err = kvf_dequant_fp4_v41(xq, codes, scales, DIM);
    if (err) {
        fprintf(stderr, "%s: %s\n", msg_prefix, kvf_strerror(err));
        return EXIT_FAILURE;
    }
    double rel_l2, max_abs;
    error_summary(&rel_l2, &max_abs, xq, latent, DIM);
    printf("seed %llu: latent[%d] ~ standard normal, scaled to L2 norm sqrt(%d)\n",
           (unsigned long long)seed, DIM, DIM);
    printf("V4.1 FP4: E2M1 elements, one E4M3 scale per %d channels mapping the block max onto 6\n",
           KVF_FP4_V41_BLOCK);
    printf("max |latent|       %s\n", numpy_round_text(amax, 3).s);
    printf("relative L2 error  %s\n", numpy_round_text(rel_l2, 4).s);
    /* fp16 and bf16 are both 16 bits wide */
    printf("bytes per %d-channel entry: fp16 %s  fp8 %u  fp4+E4M3/%d %zu\n", DIM,
           KVL_GROUPED(DIM * kvf_element_bits(KVF_BF16) / 8), DIM * kvf_element_bits(KVF_E4M3) / 8,
           KVF_FP4_V41_BLOCK, kvf_row_bytes(KVF_ROW_V41_MAIN));
    return 0;
}

/* ---- commands -------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    unsigned allowed;     /* OPT_* bits the command accepts */
    int takes_args;       /* whether it takes positional arguments */
    int (*run)(const options *o);
    const char *help;
} command;

static const command COMMANDS[] = {
    {"encode", OPT_FORMAT | OPT_SATURATE, 1, cmd_encode,
     "usage: kvfmt encode --format F [--saturate] [VALUE...]\n"
     "Casts each VALUE (else each number on stdin) to format F and prints one line per value:\n"
     "the code in hex, its value, the input, the error (value - input) and the relative error.\n"
     "Values read as strtod reads them (1.5, 0x1.8p+3, inf, nan), rounded once to float32.\n"
     "The cast rounds to nearest, ties to even. Without --saturate, overflow gives NaN (E4M3) or\n"
     "inf (E5M2, bf16) as ml_dtypes' astype; with --saturate it clamps to the largest finite value,\n"
     "as CUDA's __NV_SATFINITE. E8M0 (scales only): plain = nearest with a tie (1.5*2^k) rounding up;\n"
     "--saturate = round up toward +inf, saturating at 2^127. E2M1 clamps to 6 either way.\n"
     "F: float8_e4m3fn float8_e5m2 float4_e2m1fn float8_e8m0fnu bfloat16, or e4m3 e5m2 e2m1 e8m0 bf16.\n"},
    {"decode", OPT_FORMAT, 1, cmd_decode,
     "usage: kvfmt decode --format F CODE...\n"
     "Prints each CODE (hex as 0x7e, or decimal) with its value and class in format F.\n"},
    {"table", OPT_FORMAT, 0, cmd_table,
     "usage: kvfmt table --format F\n"
     "Prints every code of format F with its value and class (zero, subnormal, normal, inf, nan).\n"},
    {"quant", OPT_SCHEME, 0, cmd_quant,
     "usage: kvfmt quant --scheme mxfp4|mxfp8|nvfp4|nvfp4-noglobal|fp8-128\n"
     "Quantises the whitespace-separated floats on stdin (a multiple of the block) and prints each\n"
     "block's scale, each value's code, dequantised value and error, then the relative L2 error and\n"
     "the largest absolute error.\n"
     "  mxfp4           OCP MXFP4: E2M1, E8M0 scale per 32 (floor rule)\n"
     "  mxfp8           OCP MXFP8: E4M3, E8M0 scale per 32 (floor rule)\n"
     "  nvfp4           NVFP4: E2M1, E4M3 scale per 16, FP32 tensor scale amax/(448*6)\n"
     "  nvfp4-noglobal  DeepSeek V4.1 FP4: E2M1, E4M3 scale e4m3(amax/6) per 16, no tensor scale\n"
     "  fp8-128         DeepSeek V3.2 FP8: E4M3, FP32 power-of-two scale per 128\n"},
    {"row", OPT_LAYOUT | OPT_PACK | OPT_UNPACK, 0, cmd_row,
     "usage: kvfmt row --layout L [--pack | --unpack]\n"
     "L: v32-main v32-index v4-main v4-index v41-main v41-window.\n"
     "Prints the row's byte map (field, offset, size, format). --pack reads the row's values from\n"
     "stdin (576 for v32-main, 128 for the index keys, 512 for the others) and prints the packed row\n"
     "as one line of hex, byte 0 first. --unpack reads that line and prints the values; when the\n"
     "original values follow the hex line on stdin, it prints each one's round-trip error too.\n"},
    {"fp4-demo", OPT_SEED, 0, cmd_fp4_demo,
     "usage: kvfmt fp4-demo [--seed S]\n"
     "The V4.1 FP4 check: a 512-channel latent from numpy's default_rng(S).standard_normal (S = 0 by\n"
     "default), scaled to L2 norm sqrt(512), quantised in blocks of 16 with an E4M3 scale that maps\n"
     "the block max onto 6 and nearest E2M1 elements. Prints max |latent|, the relative L2 error and\n"
     "the bytes of one entry at 16, 8 and 4 bits.\n"},
};
enum { N_COMMANDS = sizeof COMMANDS / sizeof COMMANDS[0] };

static void usage(void)
{
    printf("usage: kvfmt COMMAND [OPTIONS]\n"
           "A calculator for element formats, block schemes and DeepSeek KV rows.\n"
           "  encode    --format F [--saturate] [VALUE...]   cast values to a format\n"
           "  decode    --format F CODE...                   the value of each code\n"
           "  table     --format F                           every code, value and class\n"
           "  quant     --scheme S                           block-quantise floats from stdin\n"
           "  row       --layout L [--pack | --unpack]       a KV row's byte map, pack, unpack\n"
           "  fp4-demo  [--seed S]                           the V4.1 FP4 error check\n"
           "kvfmt COMMAND --help describes one command. Bad input exits with status 2.\n");
}

static const command *find_command(const char *name)
{
    for (int k = 0; k < N_COMMANDS; k++)
        if (strcmp(name, COMMANDS[k].name) == 0) return &COMMANDS[k];
    return NULL;
}

int main(int argc, char **argv)
{
    if (kvl_environment_check("kvfmt")) return 2;
    if (argc < 2)
        return bad_input(
            "no command given; commands: encode decode table quant row fp4-demo (kvfmt --help)");
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        usage();
        return kvl_exit_status("kvfmt", 0);
    }
    const command *c = find_command(argv[1]);
    if (!c)
        return bad_input(
            "unknown command '%s' (argument 1); commands: encode decode table quant row fp4-demo",
            echo(argv[1], strlen(argv[1])).s);
    snprintf(msg_prefix, sizeof msg_prefix, "kvfmt %s", c->name);
    options o;
    int status = parse_options(&o, argc, argv, 2, c->allowed, c->takes_args);
    if (!status && (o.given & OPT_HELP)) fputs(c->help, stdout);
    else if (!status) status = c->run(&o);
    options_free(&o);
    return kvl_exit_status(msg_prefix, status);
}
