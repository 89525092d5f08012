/* The context lists the chapter programs take on their command line: --contexts 1K,32K,128K. */
#ifndef KVL_CONTEXTS_H
#define KVL_CONTEXTS_H

#include <stddef.h>

/* "4K,8K,100" → contexts[0..*n) = {4096, 8192, 100}: comma-separated token counts from 1 to
 * max_tokens, each plain decimal digits with an optional K (×1024), at most max_n of them.
 * KVL_OK, else KVL_EINVAL with a one-line message in kvl_error() that starts "--contexts: " and
 * quotes the list; *n and contexts are then unspecified. */
int kvl_parse_contexts(size_t *contexts, size_t *n, size_t max_n, size_t max_tokens,
                       const char *list);

#endif
