/* Chapter 5, formats: the E8M0 scale rules of formats/scale.h against their defining formulas.
 *
 * Oracles use log2 in double. That is exact enough to take floor and ceil of: log2 of a power of two
 * is exact, and a float32 (or a float32 over max, whose significand has at most 3 bits) that is not a
 * power of two lies at least ~2^-25 away from one in log2, far beyond double's error of a few 2^-52.
 * Codes are compared exactly. */
#include "common.h"
#include "scale.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* ck_assert_msg reports every pass to the parent process; loops over millions of cases only
 * report failures. */
#define EXPECT(cond, ...)                                     \
    do {                                                      \
        if (!(cond)) ck_abort_msg(__VA_ARGS__);               \
    } while (0)

static float bits_f32(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

static uint64_t next_u64(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545F4914F6CDD1DULL;
}

/* The block elements: emax (exponent of the largest binade), mantissa bits, largest finite. */
static const struct {
    kvf_element f;
    int emax;
    int mbits;
    double max;
} ELEM[] = {
    {KVF_E4M3, 8, 3, 448.0},
    {KVF_E5M2, 15, 2, 57344.0},
    {KVF_E2M1, 2, 1, 6.0},
};
enum { N_ELEM = sizeof ELEM / sizeof ELEM[0] };

/* scale.h: k clamped below at −127; above 127 (and for NaN or inf amax) the code is 0xFF. */
static uint8_t code_of(double k)
{
    if (k < -127) k = -127;
    return k > 127 ? 0xFF : (uint8_t)(k + 127);
}

/* OCP MX v1.0, section 6.3, takes log2 of a zero amax as log2 of the smallest normal, 2^-126. */
static double log2_amax(float amax)
{
    return log2(amax > 0 ? (double)amax : 0x1p-126);
}

static uint8_t oracle_floor(float amax, int e) { return code_of(floor(log2_amax(amax)) - ELEM[e].emax); }
static uint8_t oracle_ceil(float amax, int e) { return code_of(ceil(log2_amax(amax)) - ELEM[e].emax); }

/* round_m: amax rounded to nearest even at the element's mantissa width, in double (no overflow). */
static uint8_t oracle_even(float amax, int e)
{
    double a = amax > 0 ? (double)amax : 0x1p-126;
    int b = (int)floor(log2(a));
    double rounded = ldexp(nearbyint(ldexp(a, ELEM[e].mbits - b)), b - ELEM[e].mbits);
    return code_of(floor(log2(rounded)) - ELEM[e].emax);
}

static uint8_t oracle_rceil(float amax, int e)
{
    if (amax == 0) return code_of(-INFINITY);
    return code_of(ceil(log2((double)amax / ELEM[e].max)));
}

/* amax values: every power of two of float32 (subnormals included), max·2^j and the even rule's
 * rounding edge (2 − 2^-(m+1))·2^j, each with its float32 neighbours; zero; the largest float;
 * random bit patterns and log-uniform values. Calls check(amax) on each. */
static void for_each_amax(int e, void (*check)(float, int))
{
    const double edge = 2.0 - ldexp(1.0, -ELEM[e].mbits - 1);
    for (int j = -149; j <= 127; j++) {
        const float bases[] = {ldexpf(1.0f, j), (float)ldexp(ELEM[e].max, j), (float)ldexp(edge, j),
                               (float)ldexp(1.5, j)};
        for (size_t b = 0; b < sizeof bases / sizeof bases[0]; b++) {
            float x = bases[b];
            if (!(x > 0) || isinf(x)) continue;
            check(x, e);
            check(nextafterf(x, 0), e);
            check(nextafterf(x, INFINITY), e);
        }
    }
    const float fixed[] = {0.0f, FLT_MAX, FLT_MIN, 0x1p-149f, 1e-4f, 6 * 0x1p-126f, 6 * 0x1p-9f, 511.9f, 7.99f};
    for (size_t k = 0; k < sizeof fixed / sizeof fixed[0]; k++) check(fixed[k], e);
    uint64_t seed = 0x5CA1EULL + (uint64_t)e;
    for (int k = 0; k < 100000; k++) {
        float x = bits_f32((uint32_t)next_u64(&seed) & 0x7FFFFFFFu);
        if (isfinite(x)) check(x, e);
        check((float)exp2(-149.0 + 277.0 * (double)(next_u64(&seed) >> 11) * 0x1p-53), e);
    }
}

static void check_floor(float a, int e)
{
    EXPECT(kvf_scale_ocp_floor(a, ELEM[e].f) == oracle_floor(a, e), "floor %a elem %d → %u, oracle %u",
                  (double)a, e, kvf_scale_ocp_floor(a, ELEM[e].f), oracle_floor(a, e));
}

static void check_ceil(float a, int e)
{
    EXPECT(kvf_scale_ceil(a, ELEM[e].f) == oracle_ceil(a, e), "ceil %a elem %d → %u, oracle %u", (double)a, e,
                  kvf_scale_ceil(a, ELEM[e].f), oracle_ceil(a, e));
}

static void check_even(float a, int e)
{
    EXPECT(kvf_scale_even(a, ELEM[e].f) == oracle_even(a, e), "even %a elem %d → %u, oracle %u", (double)a, e,
                  kvf_scale_even(a, ELEM[e].f), oracle_even(a, e));
}

static void check_rceil(float a, int e)
{
    EXPECT(kvf_scale_rceil(a, ELEM[e].f) == oracle_rceil(a, e), "rceil %a elem %d → %u, oracle %u", (double)a,
                  e, kvf_scale_rceil(a, ELEM[e].f), oracle_rceil(a, e));
}

START_TEST(test_ocp_floor_equals_floor_log2_amax_minus_emax)
{
    for (int e = 0; e < N_ELEM; e++) for_each_amax(e, check_floor);
}
END_TEST

START_TEST(test_ceil_equals_ceil_log2_amax_minus_emax)
{
    for (int e = 0; e < N_ELEM; e++) for_each_amax(e, check_ceil);
}
END_TEST

START_TEST(test_even_equals_floor_log2_of_amax_rounded_to_the_element_mantissa)
{
    for (int e = 0; e < N_ELEM; e++) for_each_amax(e, check_even);
    /* E4M3 (m = 3): 1.9375·2^j rounds to 2^(j+1); the float below it stays in its binade */
    ck_assert_uint_eq(kvf_scale_even(1.9375f, KVF_E4M3), 127 + 1 - 8);
    ck_assert_uint_eq(kvf_scale_even(nextafterf(1.9375f, 0), KVF_E4M3), 127 - 8);
    /* rounding past the largest float32 binade is 2^128, kept exact rather than inf */
    ck_assert_uint_eq(kvf_scale_even(FLT_MAX, KVF_E4M3), 127 + 128 - 8);
}
END_TEST

START_TEST(test_rceil_equals_ceil_log2_amax_over_max)
{
    for (int e = 0; e < N_ELEM; e++) for_each_amax(e, check_rceil);
}
END_TEST

/* fl32(amax · fl32(1/max)) scales exactly with amax's exponent while it stays normal, so one binade
 * of amax covers every normal t: all 2^23 float32 in [1, 2), for each element's max. */
START_TEST(test_rceil_bit_trick_equals_exact_ceil_over_a_full_binade)
{
    for (int e = 0; e < N_ELEM; e++)
        for (uint32_t b = 0x3F800000u; b < 0x40000000u; b++) {
            float a = bits_f32(b);
            int want = (int)ceil(log2((double)a / ELEM[e].max));
            EXPECT(kvf_scale_rceil(a, ELEM[e].f) == want + 127, "rceil %a max %g → %u, exact %d", (double)a,
                          ELEM[e].max, kvf_scale_rceil(a, ELEM[e].f), want);
        }
}
END_TEST

/* rceil's point: amax / scale never exceeds max (and is the smallest such power), so no element
 * saturates; the floor rule leaves amax / scale anywhere in [2^emax, 2^(emax+1)), above max up to
 * 511.9 for E4M3 and 7.99 for E2M1. */
START_TEST(test_rceil_never_overflows_where_floor_can)
{
    uint64_t seed = 0x0F10ULL;
    for (int e = 0; e < N_ELEM; e++)
        for (int k = 0; k < 200000; k++) {
            float a = (float)exp2(-100.0 + 220.0 * (double)(next_u64(&seed) >> 11) * 0x1p-53);
            double scale = ldexp(1.0, kvf_scale_rceil(a, ELEM[e].f) - 127);
            EXPECT((double)a / scale <= ELEM[e].max, "rceil %a: amax/scale %g > %g", (double)a,
                          (double)a / scale, ELEM[e].max);
            EXPECT((double)a / scale > ELEM[e].max / 2, "rceil %a is not the smallest scale", (double)a);
        }
    ck_assert_uint_eq(kvf_scale_ocp_floor(511.9f, KVF_E4M3), 127);   /* scale 1: 511.9 > 448 saturates */
    ck_assert_uint_eq(kvf_scale_ocp_floor(7.99f, KVF_E2M1), 127);    /* scale 1: 7.99 > 6 saturates */
    ck_assert_uint_eq(kvf_scale_rceil(511.9f, KVF_E4M3), 128);
    ck_assert_uint_eq(kvf_scale_rceil(7.99f, KVF_E2M1), 128);
}
END_TEST

/* k clamps at −127 (code 0) for tiny and zero amax, and stays ≤ 127 for the largest finite amax. */
START_TEST(test_scales_clamp_at_minus_127_and_stay_below_128)
{
    uint8_t (*const rules[])(float, kvf_element) = {kvf_scale_ocp_floor, kvf_scale_ceil, kvf_scale_even,
                                                     kvf_scale_rceil};
    const float tiny[] = {0.0f, 0x1p-149f, 0x1p-130f, FLT_MIN};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++)
        for (int e = 0; e < N_ELEM; e++) {
            for (size_t k = 0; k < sizeof tiny / sizeof tiny[0]; k++)
                EXPECT(rules[r](tiny[k], ELEM[e].f) == 0x00, "rule %zu elem %d amax %a", r, e, (double)tiny[k]);
            EXPECT(rules[r](FLT_MAX, ELEM[e].f) < 0xFF, "rule %zu elem %d FLT_MAX", r, e);
        }
    /* the largest k each rule reaches: 127 − emax, 128 − emax, 128 − emax, and ceil(log2(FLT_MAX/max)) */
    ck_assert_uint_eq(kvf_scale_ocp_floor(FLT_MAX, KVF_E2M1), 127 + 127 - 2);
    ck_assert_uint_eq(kvf_scale_ceil(FLT_MAX, KVF_E2M1), 127 + 128 - 2);
    ck_assert_uint_eq(kvf_scale_rceil(FLT_MAX, KVF_E2M1), 127 + 126);
    ck_assert_uint_eq(kvf_scale_rceil(FLT_MAX, KVF_E4M3), 127 + 120);
    /* the edge of the clamp: the last amax whose k is −127 and the first above it */
    ck_assert_uint_eq(kvf_scale_ocp_floor(0x1p-119f, KVF_E4M3), 0x00);
    ck_assert_uint_eq(kvf_scale_ocp_floor(0x1p-118f, KVF_E4M3), 0x01);
    ck_assert_uint_eq(kvf_scale_rceil(448 * 0x1p-127f, KVF_E4M3), 0x00);
    ck_assert_uint_eq(kvf_scale_rceil(nextafterf(448 * 0x1p-127f, 1), KVF_E4M3), 0x01);
}
END_TEST

START_TEST(test_nan_inf_negative_or_non_element_give_nan_scale)
{
    uint8_t (*const rules[])(float, kvf_element) = {kvf_scale_ocp_floor, kvf_scale_ceil, kvf_scale_even,
                                                     kvf_scale_rceil};
    const float bad[] = {NAN, -NAN, INFINITY, -INFINITY, -1.0f, -0x1p-149f};
    for (size_t r = 0; r < sizeof rules / sizeof rules[0]; r++) {
        for (int e = 0; e < N_ELEM; e++)
            for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
                EXPECT(rules[r](bad[k], ELEM[e].f) == 0xFF, "rule %zu elem %d amax %a", r, e, (double)bad[k]);
        ck_assert_uint_eq(rules[r](1.0f, KVF_E8M0), 0xFF);
        ck_assert_uint_eq(rules[r](1.0f, KVF_BF16), 0xFF);
        ck_assert_uint_eq(rules[r](-0.0f, KVF_E4M3), 0x00);   /* −0 is a zero amax */
    }
}
END_TEST

START_TEST(test_emax_is_the_exponent_of_the_largest_binade)
{
    for (int e = 0; e < N_ELEM; e++) {
        ck_assert_int_eq(kvf_element_emax(ELEM[e].f), ELEM[e].emax);
        ck_assert(ldexp(1.0, ELEM[e].emax) <= kvf_element_max(ELEM[e].f));
        ck_assert(ldexp(1.0, ELEM[e].emax + 1) > kvf_element_max(ELEM[e].f));
    }
    ck_assert_int_eq(kvf_element_emax(KVF_E8M0), -1);
    ck_assert_int_eq(kvf_element_emax(KVF_BF16), -1);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("ch05_formats_scale");
    TCase *rules = tcase_create("rules");
    tcase_add_test(rules, test_ocp_floor_equals_floor_log2_amax_minus_emax);
    tcase_add_test(rules, test_ceil_equals_ceil_log2_amax_minus_emax);
    tcase_add_test(rules, test_even_equals_floor_log2_of_amax_rounded_to_the_element_mantissa);
    tcase_add_test(rules, test_rceil_equals_ceil_log2_amax_over_max);
    tcase_add_test(rules, test_rceil_bit_trick_equals_exact_ceil_over_a_full_binade);
    tcase_add_test(rules, test_rceil_never_overflows_where_floor_can);
    suite_add_tcase(s, rules);
    TCase *edges = tcase_create("edges");
    tcase_add_test(edges, test_scales_clamp_at_minus_127_and_stay_below_128);
    tcase_add_test(edges, test_nan_inf_negative_or_non_element_give_nan_scale);
    tcase_add_test(edges, test_emax_is_the_exponent_of_the_largest_binade);
    suite_add_tcase(s, edges);
    return s;
}
