/* OpenBLAS's kernel set (ref/core/blas_core.h): the core a CPU merits follows the widest instruction set
 * it reports, a core narrower than that is replaced and an equal or unknown one kept, a user's
 * OPENBLAS_CORETYPE is never changed, and in this very process (which links the products, so checked
 * its core before main) OpenBLAS runs kernels as wide as the CPU's. */
#include "common.h"

#include "blas_core.h"
#include "linalg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const kvl_cpu_features SSE_ONLY = {KVL_CPU_INTEL, 0, 0, 0};
static const kvl_cpu_features INTEL_AVX2 = {KVL_CPU_INTEL, 1, 0, 0};
static const kvl_cpu_features AMD_AVX2 = {KVL_CPU_AMD, 1, 0, 0};
static const kvl_cpu_features OTHER_AVX2 = {KVL_CPU_OTHER, 1, 0, 0};
static const kvl_cpu_features INTEL_AVX512 = {KVL_CPU_INTEL, 1, 1, 0};
static const kvl_cpu_features AMD_AVX512_BF16 = {KVL_CPU_AMD, 1, 1, 1};

static void expect_core(const char *got, const char *want, const char *what)
{
    if (!want) ck_assert_msg(got == NULL, "%s: %s, not NULL", what, got);
    else ck_assert_msg(got && strcmp(got, want) == 0, "%s: %s, not %s", what, got ? got : "NULL", want);
}

START_TEST(test_the_core_a_cpu_merits_follows_its_widest_instruction_set)
{
    expect_core(kvl_blas_core_for(SSE_ONLY), NULL, "SSE only");
    expect_core(kvl_blas_core_for(INTEL_AVX2), "Haswell", "Intel AVX2");
    expect_core(kvl_blas_core_for(OTHER_AVX2), "Haswell", "another vendor's AVX2");
    expect_core(kvl_blas_core_for(AMD_AVX2), "Zen", "AMD AVX2");
    expect_core(kvl_blas_core_for(INTEL_AVX512), "SkylakeX", "Intel AVX-512");
    expect_core(kvl_blas_core_for(AMD_AVX512_BF16), "Cooperlake", "AMD AVX-512 with BF16");
    ck_assert_int_eq(kvl_blas_core_width("prescott"), KVL_CORE_SSE);
    ck_assert_int_eq(kvl_blas_core_width("Sandybridge"), KVL_CORE_AVX);
    ck_assert_int_eq(kvl_blas_core_width("ZEN"), KVL_CORE_AVX2);
    ck_assert_int_eq(kvl_blas_core_width("SapphireRapids"), KVL_CORE_AVX512);
    ck_assert_int_eq(kvl_blas_core_width("Neoversen2"), KVL_CORE_UNKNOWN);
    ck_assert_int_eq(kvl_blas_core_width(NULL), KVL_CORE_UNKNOWN);
}
END_TEST

START_TEST(test_a_narrower_core_is_replaced_and_an_equal_or_unknown_one_kept)
{
    expect_core(kvl_blas_core_better("Prescott", INTEL_AVX512), "SkylakeX", "Prescott on AVX-512");
    expect_core(kvl_blas_core_better("Sandybridge", AMD_AVX2), "Zen", "Sandybridge on AMD AVX2");
    expect_core(kvl_blas_core_better("Zen", AMD_AVX512_BF16), "Cooperlake", "Zen on AVX-512 with BF16");
    expect_core(kvl_blas_core_better("Haswell", AMD_AVX2), NULL, "Haswell on AMD AVX2 (as wide)");
    expect_core(kvl_blas_core_better("SkylakeX", AMD_AVX512_BF16), NULL, "SkylakeX on BF16 (as wide)");
    expect_core(kvl_blas_core_better("SapphireRapids", AMD_AVX512_BF16), NULL, "SapphireRapids (as wide)");
    expect_core(kvl_blas_core_better("Prescott", SSE_ONLY), NULL, "Prescott on SSE only");
    expect_core(kvl_blas_core_better("SomeFutureCore", INTEL_AVX512), NULL, "an unknown core");
    expect_core(kvl_blas_core_better(NULL, INTEL_AVX512), NULL, "no core name");
}
END_TEST

START_TEST(test_a_coretype_the_user_set_is_never_changed)
{
    const char *before = getenv("OPENBLAS_CORETYPE");
    char saved[64] = "";
    if (before) snprintf(saved, sizeof saved, "%s", before);
    ck_assert_int_eq(setenv("OPENBLAS_CORETYPE", "Nehalem", 1), 0);
    char arg0[] = "/nonexistent/kvlineage-would-not-start", *argv[] = {arg0, NULL};
    kvl_blas_core_mend(argv); /* would replace this process, or fail saying so, if it judged */
    ck_assert_str_eq(getenv("OPENBLAS_CORETYPE"), "Nehalem");
    if (before) setenv("OPENBLAS_CORETYPE", saved, 1);
    else unsetenv("OPENBLAS_CORETYPE");
}
END_TEST

START_TEST(test_openblas_runs_kernels_as_wide_as_this_cpu_merits)
{
    float c = 0, a = 2, b = 3;
    ck_assert_int_eq(kvl_matmul_abt_f32(&c, &a, &b, 1, 1, 1), 0);
    ck_assert(c == 6);
    const char *user = getenv("OPENBLAS_CORETYPE"), *running = kvl_blas_core();
    if (user && !kvl_blas_core_detected()) {
        printf("OPENBLAS_CORETYPE=%s was set before this suite started: OpenBLAS runs %s, its width not judged\n",
               user, running);
        return;
    }
    const char *merited = kvl_blas_core_for(kvl_cpu_features_here());
    if (!merited || kvl_blas_core_width(running) == KVL_CORE_UNKNOWN) {
        printf("OpenBLAS runs %s on a CPU below AVX2 or a core this suite does not know: not judged\n", running);
        return;
    }
    ck_assert_msg(kvl_blas_core_width(running) >= kvl_blas_core_width(merited),
                  "OpenBLAS runs %s where this CPU merits %s", running, merited);
    if (kvl_blas_core_detected())
        ck_assert_msg(kvl_blas_core_width(kvl_blas_core_detected()) < kvl_blas_core_width(running),
                      "restarted from %s to %s, which is no wider", kvl_blas_core_detected(), running);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_blas_core");
    TCase *tc = tcase_create("blas_core");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_the_core_a_cpu_merits_follows_its_widest_instruction_set);
    tcase_add_test(tc, test_a_narrower_core_is_replaced_and_an_equal_or_unknown_one_kept);
    tcase_add_test(tc, test_a_coretype_the_user_set_is_never_changed);
    tcase_add_test(tc, test_openblas_runs_kernels_as_wide_as_this_cpu_merits);
    suite_add_tcase(s, tc);
    return s;
}
