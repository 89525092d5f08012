/* What every chapter program does alike: find the source tree, refuse a bad command line. */
#ifndef KVL_PROGRAM_H
#define KVL_PROGRAM_H

#include <stddef.h>

/* The project root the programs read configs from: $KVL_ROOT if set and not empty, else the source tree
 * they were built from. */
const char *kvl_root_dir(void);

/* Print "PROGRAM: MSG: ARG (try --help)" (": ARG" only when arg is not NULL) as one line on stderr and
 * return 2, the exit status of a bad command line. */
int kvl_bad_usage(const char *program, const char *msg, const char *arg);

/* A command-line count: plain decimal digits (no sign, no space) for a value in [lo, hi] → *out, 0;
 * else -1 and *out untouched. */
int kvl_parse_size(size_t *out, const char *s, size_t lo, size_t hi);

#endif
