/* What the programs' command-line reader must do with any argument vector at all, checked by
 * tests/fuzz/fuzz_args.c on every input the fuzzer makes and by tests/test_reliability_fuzz.c on every
 * saved one. Every program reads its arguments with these functions (chapters/common/program.h,
 * contexts.h), so this is each program's option parsing.
 *
 * The input's bytes, split at NUL, are the arguments after argv[0], at most FUZZ_ARGS_MAX of them; its
 * first byte picks whether positional arguments are taken. Then:
 *  - kvl_args_next returns each flag at most once, a value exactly when the flag takes one (the argument
 *    after it), a positional argument only when they are taken and only one not starting with '-', and
 *    stops after at most one call per argument;
 *  - every argument is read by kvl_parse_size, kvl_parse_real and kvl_parse_contexts, and each agrees with
 *    its definition written out here: plain decimal digits in [lo, hi]; decimal digits with an optional
 *    point and exponent, finite, in [lo, hi]; comma-separated counts of digits with an optional K (×1024),
 *    each 1..max, at most max_n. */
#ifndef KVL_TESTS_FUZZ_ARGS_PROPERTY_H
#define KVL_TESTS_FUZZ_ARGS_PROPERTY_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "contexts.h"
#include "program.h"
#include "status.h"

#define FUZZ_ARGS_MAX 64
#define FUZZ_SIZE_LO 2
#define FUZZ_SIZE_HI 65536
#define FUZZ_CONTEXTS_MAX_N 8
#define FUZZ_CONTEXTS_MAX 1048576

static const kvl_flag FUZZ_FLAGS[] = {{"--tokens", 1}, {"--contexts", 1}, {"--no-timing", 0}, {"--seed", 1}};
#define FUZZ_N_FLAGS (sizeof FUZZ_FLAGS / sizeof *FUZZ_FLAGS)

static inline int fuzz_digit(char c) { return c >= '0' && c <= '9'; }

/* Digits at *p → their value, saturated at SIZE_MAX; *p moved past them. */
static inline size_t fuzz_digits(const char **p)
{
    size_t v = 0;
    for (; fuzz_digit(**p); (*p)++) v = v > (SIZE_MAX - 9) / 10 ? SIZE_MAX : v * 10 + (size_t)(**p - '0');
    return v;
}

/* The definition of a count: 1 and the value when s is digits alone in [lo, hi], else 0. */
static inline int fuzz_size_defined(size_t *v, const char *s, size_t lo, size_t hi)
{
    const char *p = s;
    *v = fuzz_digits(&p);
    return p != s && !*p && *v >= lo && *v <= hi;
}

/* 1 when s has the shape of a number: digits [. digits] or . digits, then an optional e[±]digits. */
static inline int fuzz_real_shaped(const char *s)
{
    const char *p = s;
    size_t whole = 0, frac = 0;
    for (; fuzz_digit(*p); p++) whole++;
    if (*p == '.')
        for (p++; fuzz_digit(*p); p++) frac++;
    if (whole + frac == 0) return 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!fuzz_digit(*p)) return 0;
        while (fuzz_digit(*p)) p++;
    }
    return *p == '\0';
}

/* The definition of a context list: 1 with the counts when it is count(,count)* within the limits. */
static inline int fuzz_contexts_defined(size_t *c, size_t *n, const char *s)
{
    *n = 0;
    for (const char *p = s;;) {
        const char *start = p;
        size_t v = fuzz_digits(&p);
        if (p == start) return 0;
        if (*p == 'K' || *p == 'k') v = v > SIZE_MAX / 1024 ? SIZE_MAX : v * 1024, p++;
        if (v == 0 || v > FUZZ_CONTEXTS_MAX || *n == FUZZ_CONTEXTS_MAX_N) return 0;
        c[(*n)++] = v;
        if (*p == '\0') return 1;
        if (*p++ != ',') return 0;
    }
}

/* NULL when the three value readers agree with their definitions on s, else what is wrong. */
static inline const char *fuzz_values_fault(const char *s)
{
    size_t got = 7, want;
    const int ok = kvl_parse_size(&got, s, FUZZ_SIZE_LO, FUZZ_SIZE_HI) == 0;
    if (ok != fuzz_size_defined(&want, s, FUZZ_SIZE_LO, FUZZ_SIZE_HI)) return "kvl_parse_size: accepts what it should not, or not what it should";
    if (ok ? got != want : got != 7) return "kvl_parse_size: a wrong value, or *out changed on a refusal";
    double r = -1;
    if (kvl_parse_real(&r, s, 0.5, 1e6) == 0) {
        if (!fuzz_real_shaped(s)) return "kvl_parse_real: accepts what is not a decimal number";
        if (!isfinite(r) || r < 0.5 || r > 1e6) return "kvl_parse_real: a value outside [lo, hi]";
        if (r != strtod(s, NULL)) return "kvl_parse_real: not the value the text spells";
    } else if (r != -1) {
        return "kvl_parse_real: *out changed on a refusal";
    }
    size_t c[FUZZ_CONTEXTS_MAX_N + 1], n, cw[FUZZ_CONTEXTS_MAX_N], nw;
    const int ck = kvl_parse_contexts(c, &n, FUZZ_CONTEXTS_MAX_N, FUZZ_CONTEXTS_MAX, s) == KVL_OK;
    if (ck != fuzz_contexts_defined(cw, &nw, s)) return "kvl_parse_contexts: accepts what it should not, or not what it should";
    if (ck && (n != nw || memcmp(c, cw, n * sizeof *c))) return "kvl_parse_contexts: wrong counts";
    if (!ck && (!*kvl_error() || strchr(kvl_error(), '\n'))) return "kvl_parse_contexts: a refusal without a one-line message";
    return NULL;
}

/* NULL when reading the arguments in data[size] behaves, else what went wrong. */
static inline const char *fuzz_args_fault(const uint8_t *data, size_t size)
{
    if (size == 0) return NULL;
    const int positional = data[0] & 1;
    char *text = malloc(size);   /* data[1..size) and a final NUL */
    if (!text) return NULL;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    char *argv[FUZZ_ARGS_MAX + 1] = {"fuzz"};
    int argc = 1;
    for (char *p = text; argc <= FUZZ_ARGS_MAX && p < text + size - 1; p += strlen(p) + 1) argv[argc++] = p;
    const char *fault = NULL;
    kvl_args a = kvl_args_start("fuzz", argc, argv, FUZZ_FLAGS, FUZZ_N_FLAGS, positional);
    unsigned seen = 0;
    for (int calls = 0; !fault; calls++) {
        const char *value;
        const int at = a.next, k = kvl_args_next(&a, &value);
        if (k == KVL_ARGS_END) {
            if (at < argc) fault = "kvl_args_next ends before the last argument";
            break;
        }
        if (calls == argc) fault = "kvl_args_next does not stop";
        else if (k == KVL_ARGS_HELP || k == KVL_ARGS_BAD) break;
        else if (k == KVL_ARGS_POSITIONAL)
            fault = positional && value == argv[at] && value[0] != '-' ? NULL : "a positional argument where none is";
        else if (k < 0 || k >= (int)FUZZ_N_FLAGS || seen >> k & 1) fault = "a flag returned twice, or one not in the table";
        else if (strcmp(argv[at], FUZZ_FLAGS[k].name)) fault = "a flag other than the argument given";
        else if (FUZZ_FLAGS[k].takes_value ? value != argv[at + 1] : value != NULL) fault = "a flag's value is not the next argument";
        else seen |= 1u << k;
    }
    for (int i = 1; !fault && i < argc; i++) fault = fuzz_values_fault(argv[i]);
    free(text);
    return fault;
}

#endif
