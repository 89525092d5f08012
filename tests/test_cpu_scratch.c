/* cpu/scratch: a thread's scratch block per slot, kept from one call to the next while it is large
 * enough, grown when it is not, its own on every thread, and freed when a thread ends (the sanitizer
 * build's leak check fails otherwise). */
#include "common.h"
#include "scratch.h"

#include <omp.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

START_TEST(test_a_block_large_enough_is_kept_and_aligned)
{
    char *a = kvl_scratch(KVL_SCRATCH_ATTEND, 1000);
    ck_assert_ptr_nonnull(a);
    ck_assert_uint_eq((uintptr_t)a % KVL_SCRATCH_ALIGN, 0);
    memset(a, 7, 1000);
    ck_assert_ptr_eq(kvl_scratch(KVL_SCRATCH_ATTEND, 500), a);
    ck_assert_ptr_eq(kvl_scratch(KVL_SCRATCH_ATTEND, 1000), a);
    ck_assert_int_eq(a[999], 7);
}
END_TEST

/* A larger request gets a block of at least that size (every byte written: the address sanitizer checks
 * the bounds), and the block is kept again afterwards. */
START_TEST(test_a_larger_request_grows_the_block)
{
    const size_t big = (size_t)3 << 20;
    (void)kvl_scratch(KVL_SCRATCH_ATTEND, 64);
    char *b = kvl_scratch(KVL_SCRATCH_ATTEND, big);
    ck_assert_ptr_nonnull(b);
    ck_assert_uint_eq((uintptr_t)b % KVL_SCRATCH_ALIGN, 0);
    memset(b, 1, big);
    ck_assert_ptr_eq(kvl_scratch(KVL_SCRATCH_ATTEND, big - 1), b);
}
END_TEST

START_TEST(test_slots_are_separate_blocks)
{
    char *a = kvl_scratch(KVL_SCRATCH_ATTEND, 4096), *s = kvl_scratch(KVL_SCRATCH_INDEX_SCAN, 4096);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_nonnull(s);
    ck_assert_msg(a + 4096 <= s || s + 4096 <= a, "slots overlap: %p, %p", (void *)a, (void *)s);
}
END_TEST

/* Two threads at once: each its own block, each block intact after both wrote theirs. */
START_TEST(test_each_thread_has_its_own_block)
{
    enum { BYTES = 1 << 16 };
    char *got[2] = {NULL, NULL};
    int intact[2] = {0, 0};
#pragma omp parallel num_threads(2)
    {
        const int t = omp_get_thread_num();
        char *b = kvl_scratch(KVL_SCRATCH_INDEX_SCAN, BYTES);
        if (b && t < 2) {
            memset(b, 'a' + t, BYTES);
            got[t] = b;
        }
#pragma omp barrier
        if (b && t < 2) {
            intact[t] = 1;
            for (size_t i = 0; i < BYTES; i++) intact[t] &= b[i] == 'a' + t;
        }
    }
    ck_assert_ptr_nonnull(got[0]);
    if (omp_get_max_threads() > 1 || got[1]) {
        ck_assert_ptr_nonnull(got[1]);
        ck_assert_ptr_ne(got[0], got[1]);
        ck_assert_int_eq(intact[1], 1);
    }
    ck_assert_int_eq(intact[0], 1);
}
END_TEST

static void *take_blocks(void *arg)
{
    (void)arg;
    char *a = kvl_scratch(KVL_SCRATCH_ATTEND, 1 << 20), *s = kvl_scratch(KVL_SCRATCH_INDEX_SCAN, 1 << 12);
    if (a) a[0] = 1;
    if (s) s[0] = 1;
    return a && s ? arg : (void *)1;
}

/* A thread that took blocks and ended: its blocks are freed (in the sanitizer build a block left behind
 * is reported as a leak when the suite exits). */
START_TEST(test_a_thread_that_ends_frees_its_blocks)
{
    for (int i = 0; i < 3; i++) {
        pthread_t th;
        void *rc = (void *)1;
        ck_assert_int_eq(pthread_create(&th, NULL, take_blocks, NULL), 0);
        ck_assert_int_eq(pthread_join(th, &rc), 0);
        ck_assert_ptr_null(rc);
    }
}
END_TEST

START_TEST(test_no_slot_or_an_impossible_size_gives_null_and_keeps_the_block)
{
    char *a = kvl_scratch(KVL_SCRATCH_ATTEND, 100);
    ck_assert_ptr_nonnull(a);
    ck_assert_ptr_null(kvl_scratch(KVL_SCRATCH_SLOTS, 10));
    ck_assert_ptr_null(kvl_scratch(KVL_SCRATCH_ATTEND, SIZE_MAX));
    ck_assert_ptr_eq(kvl_scratch(KVL_SCRATCH_ATTEND, 100), a);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("cpu_scratch");
    TCase *tc = tcase_create("scratch");
    tcase_add_test(tc, test_a_block_large_enough_is_kept_and_aligned);
    tcase_add_test(tc, test_a_larger_request_grows_the_block);
    tcase_add_test(tc, test_slots_are_separate_blocks);
    tcase_add_test(tc, test_each_thread_has_its_own_block);
    tcase_add_test(tc, test_a_thread_that_ends_frees_its_blocks);
    tcase_add_test(tc, test_no_slot_or_an_impossible_size_gives_null_and_keeps_the_block);
    suite_add_tcase(s, tc);
    return s;
}
