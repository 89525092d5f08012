#include "json_text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"

typedef struct {
    const unsigned char *start, *p, *end;
    const char *origin;
} scan;

static int fail_at(const scan *s, const unsigned char *at, const char *what)
{
    size_t line = 1;
    const unsigned char *line_start = s->start;
    for (const unsigned char *q = s->start; q < at; q++)
        if (*q == '\n') {
            line++;
            line_start = q + 1;
        }
    return kvl_fail(KVL_EPARSE, "%s: %s at line %zu, column %zu", s->origin, what, line,
                    (size_t)(at - line_start) + 1);
}

/* "unexpected end of the text", or the byte at p shown as 'c' or 0xHH. */
static int fail_unexpected(const scan *s, const char *wanted)
{
    char what[96];
    if (s->p == s->end) snprintf(what, sizeof what, "the text ends where %s was expected", wanted);
    else if (*s->p > 0x20 && *s->p < 0x7f) snprintf(what, sizeof what, "'%c' where %s was expected", *s->p, wanted);
    else snprintf(what, sizeof what, "byte 0x%02x where %s was expected", *s->p, wanted);
    return fail_at(s, s->p, what);
}

static void skip_blanks(scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r')) s->p++;
}

/* Length of the valid UTF-8 sequence at p (1 to 4), 0 if it is not one. RFC 3629's table: the second
 * byte's range depends on the first; every later byte is 80..BF. */
static size_t utf8_length(const unsigned char *p, const unsigned char *end)
{
    unsigned c = p[0], lo = 0x80, hi = 0xbf;
    size_t n;
    if (c < 0x80) return 1;
    if (c < 0xc2) return 0;
    if (c < 0xe0) n = 2;
    else if (c < 0xf0) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c < 0xf5) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return 0;
    if ((size_t)(end - p) < n || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < n; i++)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    return n;
}

/* The four hex digits at p as a code unit, or -1. */
static long hex4(const unsigned char *p, const unsigned char *end)
{
    if (end - p < 4) return -1;
    long v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i];
        int d = c >= '0' && c <= '9' ? (int)(c - '0') : c >= 'a' && c <= 'f' ? (int)(c - 'a' + 10)
              : c >= 'A' && c <= 'F' ? (int)(c - 'A' + 10) : -1;
        if (d < 0) return -1;
        v = v << 4 | d;
    }
    return v;
}

/* s->p at the 'u' of a \u escape; leaves it after the escape (and its low half, for a surrogate). */
static int unicode_escape(scan *s, const unsigned char *backslash)
{
    long u = hex4(s->p + 1, s->end);
    if (u < 0) return fail_at(s, backslash, "\\u not followed by four hex digits");
    if (u == 0) return fail_at(s, backslash, "the escape \\u0000 (no C string holds it)");
    if (u >= 0xdc00 && u <= 0xdfff) return fail_at(s, backslash, "a low surrogate escape without its high half");
    s->p += 5;
    if (u < 0xd800 || u > 0xdbff) return KVL_OK;
    long low = s->end - s->p >= 2 && s->p[0] == '\\' && s->p[1] == 'u' ? hex4(s->p + 2, s->end) : -1;
    if (low < 0xdc00 || low > 0xdfff) return fail_at(s, backslash, "a high surrogate escape without its low half");
    s->p += 6;
    return KVL_OK;
}

static int string(scan *s)
{
    const unsigned char *open = s->p++;
    while (s->p < s->end && *s->p != '"') {
        unsigned c = *s->p;
        if (c < 0x20) {
            char what[64];
            snprintf(what, sizeof what, "a raw control byte 0x%02x inside a string", c);
            return fail_at(s, s->p, what);
        }
        if (c == '\\') {
            const unsigned char *backslash = s->p++;
            if (s->p == s->end) break;
            if (*s->p == 'u') KVL_TRY(unicode_escape(s, backslash));
            else if (*s->p && strchr("\"\\/bfnrt", *s->p)) s->p++;
            else return fail_at(s, backslash, "an escape that JSON does not have");
            continue;
        }
        size_t n = utf8_length(s->p, s->end);
        if (n == 0) {
            char what[64];
            snprintf(what, sizeof what, "byte 0x%02x that is not valid UTF-8 inside a string", c);
            return fail_at(s, s->p, what);
        }
        s->p += n;
    }
    if (s->p == s->end) return fail_at(s, open, "a string that is never closed");
    s->p++;
    return KVL_OK;
}

static int digits(scan *s, const char *wanted)
{
    if (s->p == s->end || *s->p < '0' || *s->p > '9') return fail_unexpected(s, wanted);
    while (s->p < s->end && *s->p >= '0' && *s->p <= '9') s->p++;
    return KVL_OK;
}

static int number(scan *s)
{
    const unsigned char *first = s->p;
    if (*s->p == '-') s->p++;
    if (s->p < s->end && *s->p == '0') {
        s->p++;
        if (s->p < s->end && *s->p >= '0' && *s->p <= '9') return fail_at(s, first, "a number with a leading zero");
    } else
        KVL_TRY(digits(s, "a digit"));
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        KVL_TRY(digits(s, "a digit after the decimal point"));
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-')) s->p++;
        KVL_TRY(digits(s, "a digit in the exponent"));
    }
    return KVL_OK;
}

static int literal(scan *s)
{
    static const char *const words[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(words[i]);
        if ((size_t)(s->end - s->p) >= n && memcmp(s->p, words[i], n) == 0) {
            s->p += n;
            return KVL_OK;
        }
    }
    return fail_unexpected(s, "a value");
}

static int value(scan *s, int depth);

/* s->p at '[' or '{'; the members up to the closing bracket. */
static int container(scan *s, int depth)
{
    if (depth >= KVL_JSON_MAX_DEPTH) {
        char what[48];
        snprintf(what, sizeof what, "nesting deeper than %d levels", KVL_JSON_MAX_DEPTH);
        return fail_at(s, s->p, what);
    }
    int object = *s->p == '{';
    unsigned char close = object ? '}' : ']';
    s->p++;
    skip_blanks(s);
    if (s->p < s->end && *s->p == close) {
        s->p++;
        return KVL_OK;
    }
    for (;;) {
        if (object) {
            if (s->p == s->end || *s->p != '"') return fail_unexpected(s, "a key (a string)");
            KVL_TRY(string(s));
            skip_blanks(s);
            if (s->p == s->end || *s->p != ':') return fail_unexpected(s, "':'");
            s->p++;
            skip_blanks(s);
        }
        KVL_TRY(value(s, depth + 1));
        skip_blanks(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            return KVL_OK;
        }
        if (s->p == s->end || *s->p != ',') return fail_unexpected(s, object ? "',' or '}'" : "',' or ']'");
        s->p++;
        skip_blanks(s);
    }
}

static int value(scan *s, int depth)
{
    if (s->p == s->end) return fail_unexpected(s, "a value");
    unsigned c = *s->p;
    if (c == '{' || c == '[') return container(s, depth);
    if (c == '"') return string(s);
    if (c == '-' || (c >= '0' && c <= '9')) return number(s);
    return literal(s);
}

int kvl_json_text_check(const char *text, size_t len, const char *origin)
{
    scan s = {(const unsigned char *)text, (const unsigned char *)text, (const unsigned char *)text + len, origin};
    skip_blanks(&s);
    KVL_TRY(value(&s, 0));
    skip_blanks(&s);
    if (s.p != s.end) return fail_at(&s, s.p, "text after the JSON value");
    return KVL_OK;
}

static int by_key(const void *a, const void *b)
{
    return strcmp((*(const cJSON *const *)a)->string, (*(const cJSON *const *)b)->string);
}

int kvl_json_repeated_key(const char **dup, const cJSON *obj, const char *origin)
{
    *dup = NULL;
    size_t n = 0;
    for (const cJSON *c = obj->child; c; c = c->next) n++;
    if (n < 2) return KVL_OK;
    const cJSON **keys = malloc(n * sizeof *keys);
    if (!keys) return kvl_fail(KVL_ENOMEM, "%s: out of memory checking %zu keys for repeats", origin, n);
    size_t i = 0;
    for (const cJSON *c = obj->child; c; c = c->next) keys[i++] = c;
    qsort(keys, n, sizeof *keys, by_key);
    for (i = 1; i < n && !*dup; i++)
        if (strcmp(keys[i - 1]->string, keys[i]->string) == 0) *dup = keys[i]->string;
    free(keys);
    return KVL_OK;
}
