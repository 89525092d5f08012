/* The chapter programs' root directory and usage error. */
#include "program.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef KVL_SOURCE_DIR
#define KVL_SOURCE_DIR "."
#endif

const char *kvl_root_dir(void)
{
    const char *r = getenv("KVL_ROOT");
    return r && *r ? r : KVL_SOURCE_DIR;
}

int kvl_bad_usage(const char *program, const char *msg, const char *arg)
{
    fprintf(stderr, "%s: %s%s%s (try --help)\n", program, msg, arg ? ": " : "", arg ? arg : "");
    return 2;
}

int kvl_parse_size(size_t *out, const char *s, size_t lo, size_t hi)
{
    if (!isdigit((unsigned char)s[0])) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = (size_t)v;
    return 0;
}
