/* What the tests/cuda/ suites share: device buffers that fail the test on error, the loop over the
 * emulator's thread orders, and the skip where no device is present.
 *
 * The same suite source runs on the CPU emulator (make test) and on a GPU (make cuda-check); on a
 * GPU build without a GPU, cuda_suite() returns an empty suite and says why. */
#ifndef KVL_TESTS_CUDA_TEST_H
#define KVL_TESTS_CUDA_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "device.h"
#include "status.h"

/* A device copy of host[bytes] (NULL: zeroed). */
static inline void *dev_upload(const void *host, size_t bytes)
{
    void *d = NULL;
    ck_assert_msg(kvl_cuda_alloc(&d, bytes) == KVL_OK, "%s", kvl_error());
    if (host) ck_assert_msg(kvl_cuda_upload(d, host, bytes) == KVL_OK, "%s", kvl_error());
    else ck_assert_msg(kvl_cuda_fill(d, 0, bytes) == KVL_OK, "%s", kvl_error());
    return d;
}

/* A device buffer of bytes, every byte `byte` (a sentinel that must survive a rejected call). */
static inline void *dev_filled(int byte, size_t bytes)
{
    void *d = NULL;
    ck_assert_msg(kvl_cuda_alloc(&d, bytes) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(kvl_cuda_fill(d, byte, bytes) == KVL_OK, "%s", kvl_error());
    return d;
}

static inline void dev_download(void *host, const void *d, size_t bytes)
{
    ck_assert_msg(kvl_cuda_download(host, d, bytes) == KVL_OK, "%s", kvl_error());
}

/* A twin's call succeeded (KVL_OK / KVF_OK are both 0). */
#define CUDA_OK(call) ck_assert_msg((call) == 0, "%s failed: %s", #call, kvl_error())

/* Run the body once per thread order (three in the emulator, one on a GPU); `order` names it. */
#define FOR_EACH_ORDER(order)                                                              \
    for (size_t order##_k = 0, order##_n = kvl_cuda_n_orders(); order##_k < order##_n; order##_k++) \
        for (const char *order = kvl_cuda_use_order(order##_k); order; order = NULL)

/* suite_create(name), or an empty suite with a message when no device is present. */
static inline Suite *cuda_suite(const char *name)
{
    if (kvl_cuda_device_count() == 0)
        printf("%s: no CUDA device, skipped (the CPU emulator runs this suite in `make test`)\n", name);
    else
        printf("%s on %s\n", name, kvl_cuda_device_name());
    return suite_create(name);
}

static inline int cuda_present(void) { return kvl_cuda_device_count() > 0; }

/* A fixed-seed generator for test inputs (xorshift64*). */
typedef struct {
    uint64_t s;
} test_rng;

static inline uint64_t test_next(test_rng *r)
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545F4914F6CDD1Dull;
}

/* uniform on [−1, 1) */
static inline float test_uniform(test_rng *r) { return (float)((double)(test_next(r) >> 11) * 0x1p-52 - 1.0); }

#endif
