/* How a fuzz input becomes a kvfmt run, shared by tests/fuzz/fuzz_kvfmt.c (which calls kvfmt's main
 * in-process) and tests/test_reliability_fuzz.c (which runs the program on saved inputs).
 *
 * The first line is the command line after "kvfmt": words split at blanks, at most FUZZ_KVFMT_MAX_ARGS
 * of them (the rest dropped); a NUL byte ends a word, as it would in a real argv. Everything after
 * the first newline is stdin, byte for byte. What kvfmt must do with it: exit 0, or exit 2 with one
 * line on stderr; never crash, hang or leak. */
#ifndef KVL_TESTS_FUZZ_KVFMT_INPUT_H
#define KVL_TESTS_FUZZ_KVFMT_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_KVFMT_MAX_ARGS 12

typedef struct {
    int argc;
    char *argv[FUZZ_KVFMT_MAX_ARGS + 2];  /* argv[0] = "kvfmt", then the words, then NULL */
    char *line;                           /* the first line, cut into the words */
    uint8_t *in;                          /* stdin: in_len bytes (a copy, so that it may be written) */
    size_t in_len;
} fuzz_kvfmt_call;

/* 0, or -1 when out of memory. */
static inline int fuzz_kvfmt_split(fuzz_kvfmt_call *c, const uint8_t *data, size_t size)
{
    const uint8_t *nl = memchr(data, '\n', size);
    const size_t line_len = nl ? (size_t)(nl - data) : size;
    c->in_len = nl ? size - line_len - 1 : 0;
    c->line = malloc(line_len + 1);
    c->in = malloc(c->in_len ? c->in_len : 1);
    if (!c->line || !c->in) {
        free(c->line);
        free(c->in);
        return -1;
    }
    memcpy(c->line, data, line_len);
    c->line[line_len] = '\0';
    if (c->in_len) memcpy(c->in, nl + 1, c->in_len);
    static char name[] = "kvfmt";
    c->argc = 0;
    c->argv[c->argc++] = name;
    for (char *p = c->line; *p && c->argc <= FUZZ_KVFMT_MAX_ARGS;) {
        p += strspn(p, " \t\r");
        if (!*p) break;
        c->argv[c->argc++] = p;
        p += strcspn(p, " \t\r");
        if (*p) *p++ = '\0';
    }
    c->argv[c->argc] = NULL;
    return 0;
}

static inline void fuzz_kvfmt_free(fuzz_kvfmt_call *c)
{
    free(c->line);
    free(c->in);
}

#endif
