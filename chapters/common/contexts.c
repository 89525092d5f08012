/* --contexts LIST, shared by mla_cost and dsa_cost. */
#include "contexts.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

#include "status.h"

/* One count at p: digits, then an optional K. KVL_OK with *end after it, else KVL_EINVAL
 * (message set). */
static int parse_count(size_t *out, const char **end, const char *p, size_t max_tokens,
                       const char *list)
{
    if (!isdigit((unsigned char)*p))
        return kvl_fail(KVL_EINVAL, "--contexts: \"%s\" is not a list of token counts", list);
    char *e;
    errno = 0;
    unsigned long long v = strtoull(p, &e, 10);
    if (errno)
        return kvl_fail(KVL_EINVAL, "--contexts: \"%s\" is not a list of token counts", list);
    if (*e == 'K' || *e == 'k') {
        v = v <= max_tokens / 1024 ? v * 1024 : (unsigned long long)max_tokens + 1;
        e++;
    }
    if (v == 0 || v > max_tokens || (*e && *e != ','))
        return kvl_fail(KVL_EINVAL,
                        "--contexts: \"%s\": each context must be 1 to %zu tokens, comma-separated",
                        list, max_tokens);
    *out = (size_t)v;
    *end = e;
    return KVL_OK;
}

int kvl_parse_contexts(size_t *contexts, size_t *n, size_t max_n, size_t max_tokens,
                       const char *list)
{
    *n = 0;
    for (const char *p = list; *p;) {
        if (*n == max_n) return kvl_fail(KVL_EINVAL, "--contexts: at most %zu contexts", max_n);
        const char *end = p;
        int rc = parse_count(&contexts[*n], &end, p, max_tokens, list);
        if (rc != KVL_OK) return rc;
        (*n)++;
        p = *end ? end + 1 : end;
        if (*end && !*p) return kvl_fail(KVL_EINVAL, "--contexts: \"%s\" ends with a comma", list);
    }
    if (*n == 0) return kvl_fail(KVL_EINVAL, "--contexts: empty list");
    return KVL_OK;
}
