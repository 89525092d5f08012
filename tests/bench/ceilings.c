/* Ceilings: what this machine's memory system gives one thread, the yardstick every other group
 * is read against. memcpy of KVB_STREAM_BYTES counts the bytes copied (it reads them and writes
 * them once each). */
#include <stdlib.h>
#include <string.h>

#include "bench.h"

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
} copy_job;

static void run_copy(void *ctx)
{
    copy_job *j = ctx;
    memcpy(j->dst, j->src, j->bytes);
}

double kvb_memcpy_seconds(void *dst, const void *src, size_t bytes)
{
    copy_job j = {dst, src, bytes};
    return kvb_median_seconds(run_copy, &j);
}

int kvb_group_ceilings(void)
{
    size_t bytes = KVB_STREAM_BYTES;
    char *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst) {
        free(src);
        free(dst);
        return 1;
    }
    memset(src, 1, bytes);
    double s = kvb_memcpy_seconds(dst, src, bytes);
    kvb_print_row(&(kvb_row){"ceilings", "memcpy", (double)bytes / KVB_MIB, s, kvb_gbps(bytes, s), "GB/s", 0, 0});
    free(src);
    free(dst);
    return 0;
}
