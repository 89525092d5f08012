/* What the tests/cuda/ suites share: device buffers that fail the test on error, the loop over the
 * emulator's thread orders, and the skip where no device is present.
 *
 * The same suite source runs on the CPU emulator (make test) and on a GPU (make cuda-check); on a
 * GPU build without a GPU, cuda_suite() returns an empty suite and says why. */
#ifndef KVL_TESTS_CUDA_TEST_H
#define KVL_TESTS_CUDA_TEST_H

#include <math.h>
#include <stdint.h>
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

/* suite_create(name), or an empty suite with a message when no device is present; a CUDA runtime that
 * fails otherwise (a driver older than it) ends the program with status 2, naming the error. */
static inline Suite *cuda_suite(const char *name)
{
    if (kvl_cuda_device_count() < 0) {
        fprintf(stderr, "%s: %s\n", name, kvl_error());
        exit(2);
    }
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

/* uniform on [−1, 1] rounded to a grid of 1/grid (a power of two): inputs whose products and short sums
 * float32 forms exactly */
static inline float test_grid_uniform(test_rng *r, float grid) { return roundf(test_uniform(r) * grid) / grid; }

/* x[n][width]: channel c < prefix of every row times 2^((c / block) mod 3 − 1), so that neighbouring
 * blocks of a block-scaled row get different scales (a reader that takes the wrong block's scale shows) */
static inline void test_vary_blocks(float *x, size_t n, size_t width, size_t prefix, size_t block)
{
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < prefix; c++) x[r * width + c] = ldexpf(x[r * width + c], (int)(c / block % 3) - 1);
}

/* Host arrays of n elements (at least one) that fail the test when memory runs out. */
static inline float *test_floats(size_t n)
{
    float *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert(p != NULL);
    return p;
}

static inline int32_t *test_ints(size_t n)
{
    int32_t *p = malloc((n ? n : 1) * sizeof *p);
    ck_assert(p != NULL);
    return p;
}

/* Picks of a row (K positions, ascending, −1 padded) that differ between two selections are near-ties:
 * each such position's score in I (the ref's scores) is within bound[p] + bound[kth] of the ref's K-th
 * largest pick kth. For selections over scores that agree only to a rounding bound. */
static inline void expect_same_picks_up_to_near_ties(const int32_t *got, const int32_t *want, const float *I,
                                                     const double *bound, size_t K, const char *what)
{
    float kth = INFINITY;
    size_t at = 0;
    for (size_t j = 0; j < K && want[j] >= 0; j++)
        if (I[want[j]] < kth || (I[want[j]] == kth && (size_t)want[j] > at)) kth = I[want[j]], at = (size_t)want[j];
    for (size_t j = 0; j < K; j++) {
        const int32_t p[2] = {got[j], want[j]};
        const int32_t *other[2] = {want, got};
        for (int side = 0; side < 2; side++) {
            if (p[side] < 0) continue;
            int found = 0;
            for (size_t i = 0; i < K; i++) found |= other[side][i] == p[side];
            if (found) continue;
            const double gap = fabs((double)I[p[side]] - (double)kth);
            ck_assert_msg(gap <= bound[p[side]] + bound[at], "%s: position %d picked by one side only, %.9g from the "
                          "K-th score, beyond the bound %.3g", what, (int)p[side], gap, bound[p[side]] + bound[at]);
        }
    }
}

#endif
