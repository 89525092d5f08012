/* cpu/many_rows: many query rows against a tile of keys and values, heads in the vector lanes,
 * against the two products written here in double, in every instruction set formats/isa.h can choose
 * here. Shapes: MLA's (128 heads, 576-wide keys, the first 512 columns the values), and ragged ones: 16,
 * 48 and 80 heads (one, three and five vectors, past the 64-head block), 1, 5, 7 and 255 keys (past the
 * 6-key block), 16 and 80 value columns, 37-wide keys, and rows a stride apart wider than they are. */
#include "common.h"
#include "isa.h"
#include "many_rows.h"
#include "rng.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>

#define U_F32 (FLT_EPSILON / 2)

/* A Dk-term dot product of scaled queries (|scale·q| ≤ scale, one rounding each) and keys in [−1, 1]: off
 * by at most (Dk + 1)·u·Σ|qs_i k_i| ≤ (Dk + 1)·Dk·scale·u. */
static double scores_atol(size_t Dk, double scale) { return (double)((Dk + 1) * Dk) * scale * U_F32; }

/* acc + Σ_j p_j v_j with |acc|, |v| ≤ 1 and p in [0, 1]: n + 1 terms, each sum off by γ_{n+1}. */
static double values_atol(size_t n) { return (double)((n + 1) * (n + 1)) * U_F32; }

typedef struct {
    size_t G, n, Dk, Dv, ld;
} many_shape;

static const many_shape SHAPES[] = {
    {128, 256, 576, 512, 576}, {128, 251, 576, 512, 576}, {16, 7, 64, 16, 70},  {48, 5, 37, 80, 120},
    {80, 255, 48, 48, 100},    {64, 1, 16, 64, 64},      {112, 13, 96, 32, 96},
};

/* One shape's inputs: q[G][Dk] in [−1, 1], pt[n][G] in [0, 1], acc[G][Dv] in [−1, 1], and n + 9 rows of
 * ld (keys from column 0, values from column 2; the 9 past the tile are what the scores may prefetch). */
typedef struct {
    many_shape sh;
    float *q, *pt, *acc, *rows;
} many_inputs;

static many_inputs inputs(const many_shape *sh, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    return (many_inputs){*sh, kvl_uniform_floats(&rng, sh->G * sh->Dk, -1, 1),
                         kvl_uniform_floats(&rng, sh->n * sh->G, 0, 1), kvl_uniform_floats(&rng, sh->G * sh->Dv, -1, 1),
                         kvl_uniform_floats(&rng, (sh->n + 9) * sh->ld, -1, 1)};
}

static void free_inputs(many_inputs *in)
{
    free(in->q);
    free(in->pt);
    free(in->acc);
    free(in->rows);
}

static kvl_many_tile tile_of(const many_inputs *in)
{
    const many_shape *sh = &in->sh;
    return (kvl_many_tile){in->rows, in->rows + 2, sh->ld, sh->ld, sh->n, sh->Dk, sh->Dv,
                           in->rows + sh->n * sh->ld, 9 * sh->ld * sizeof(float)};
}

/* The definitions, in double: st[j][r] = scale·q_r·k_j and acc + ptᵀ·v. */
static void oracle_scores(double *st, const many_inputs *in, double scale)
{
    const many_shape *sh = &in->sh;
    for (size_t j = 0; j < sh->n; j++)
        for (size_t r = 0; r < sh->G; r++) {
            double dot = 0.0;
            for (size_t i = 0; i < sh->Dk; i++) dot += (double)in->q[r * sh->Dk + i] * in->rows[j * sh->ld + i];
            st[j * sh->G + r] = scale * dot;
        }
}

static void oracle_values(double *acc, const many_inputs *in)
{
    const many_shape *sh = &in->sh;
    for (size_t r = 0; r < sh->G; r++)
        for (size_t i = 0; i < sh->Dv; i++) {
            double sum = in->acc[r * sh->Dv + i];
            for (size_t j = 0; j < sh->n; j++) sum += (double)in->pt[j * sh->G + r] * in->rows[j * sh->ld + 2 + i];
            acc[r * sh->Dv + i] = sum;
        }
}

typedef void (*scores_fn)(float *, const float *, size_t, const kvl_many_tile *);
typedef void (*values_fn)(float *, const float *, size_t, const kvl_many_tile *);

static void check_kernels(const char *name, scores_fn scores, values_fn values, const many_inputs *in)
{
    const many_shape *sh = &in->sh;
    const float scale = 0.0417f;
    const kvl_many_tile t = tile_of(in);
    float *qs = malloc(sh->Dk * sh->G * sizeof *qs), *st = malloc(sh->n * sh->G * sizeof *st);
    float *acc = malloc(sh->G * sh->Dv * sizeof *acc);
    double *want_st = malloc(sh->n * sh->G * sizeof *want_st), *want_acc = malloc(sh->G * sh->Dv * sizeof *want_acc);
    ck_assert(qs && st && acc && want_st && want_acc);
    char what[128];
    kvl_many_pack_q(qs, in->q, sh->G, sh->Dk, scale);
    oracle_scores(want_st, in, scale);
    scores(st, qs, sh->G, &t);
    snprintf(what, sizeof what, "%s scores, G %zu, n %zu, Dk %zu", name, sh->G, sh->n, sh->Dk);
    kvl_expect_close(what, st, want_st, sh->n * sh->G, scores_atol(sh->Dk, scale), 0.0, 0.0);
    oracle_values(want_acc, in);
    for (size_t i = 0; i < sh->G * sh->Dv; i++) acc[i] = in->acc[i];
    values(acc, in->pt, sh->G, &t);
    snprintf(what, sizeof what, "%s values, G %zu, n %zu, Dv %zu", name, sh->G, sh->n, sh->Dv);
    kvl_expect_close(what, acc, want_acc, sh->G * sh->Dv, values_atol(sh->n), 0.0, 0.0);
    free(qs);
    free(st);
    free(acc);
    free(want_st);
    free(want_acc);
}

START_TEST(test_many_row_kernels_match_definition_at_mla_and_ragged_shapes)
{
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        many_inputs in = inputs(&SHAPES[i], 70 + i);
        for (kvf_isa isa = KVF_ISA_BASELINE; isa < KVF_N_ISA; isa++) {
            if (kvf_isa_force(isa) != 0) continue;
            char name[64];
            snprintf(name, sizeof name, "dispatched (%s)", kvf_isa_name(isa));
            check_kernels(name, kvl_many_scores, kvl_many_values, &in);
        }
        check_kernels("plain", kvl_many_scores_plain, kvl_many_values_plain, &in);
        free_inputs(&in);
    }
    kvl_force_widest_isa();
}
END_TEST

/* The kernels run where the CPU has AVX2 and FMA (or AVX-512) and the group and value widths are
 * multiples of 16, and nowhere else (attention then keeps BLAS). */
START_TEST(test_many_row_kernels_run_for_avx2_and_avx512_at_widths_of_sixteen)
{
    for (kvf_isa isa = KVF_ISA_BASELINE; isa < KVF_N_ISA; isa++) {
        if (kvf_isa_force(isa) != 0) continue;
        const int simd = isa >= KVF_ISA_AVX2;
        ck_assert_int_eq(kvl_many_simd(128, 512), simd);
        ck_assert_int_eq(kvl_many_simd(16, 16), simd);
        ck_assert_int_eq(kvl_many_simd(24, 512), 0);
        ck_assert_int_eq(kvl_many_simd(128, 40), 0);
        ck_assert_int_eq(kvl_many_simd(0, 512), 0);
    }
    kvl_force_widest_isa();
}
END_TEST

/* Special values pass through as in any dot product, and stay where they belong: an infinite key value
 * makes its key's scores non-finite and no other key's, and (read as a value) its value column infinite
 * for every head; a NaN weight makes its head's values NaN and no other head's. */
START_TEST(test_many_row_kernels_keep_special_values_in_their_key_and_head)
{
    const many_shape sh = {32, 12, 32, 32, 40};
    many_inputs in = inputs(&sh, 90);
    in.rows[5 * sh.ld + 7] = INFINITY; /* key 5's column 7, which is value 5's column 5 */
    in.pt[3 * sh.G + 20] = NAN;        /* head 20's weight of key 3 */
    const kvl_many_tile t = tile_of(&in);
    float qs[32 * 32], st[12 * 32];
    kvl_many_pack_q(qs, in.q, sh.G, sh.Dk, 1.0f);
    kvl_many_scores(st, qs, sh.G, &t);
    for (size_t j = 0; j < sh.n; j++)
        for (size_t r = 0; r < sh.G; r++)
            ck_assert_msg(!isfinite(st[j * sh.G + r]) == (j == 5), "key %zu head %zu: %g", j, r,
                          (double)st[j * sh.G + r]);
    kvl_many_values(in.acc, in.pt, sh.G, &t);
    for (size_t r = 0; r < sh.G; r++)
        for (size_t i = 0; i < sh.Dv; i++) {
            const float a = in.acc[r * sh.Dv + i];
            if (r == 20) ck_assert_msg(isnan(a), "head 20 column %zu: %g", i, (double)a);
            else if (i == 5) ck_assert_msg(isinf(a), "head %zu column 5: %g", r, (double)a);
            else ck_assert_msg(isfinite(a), "head %zu column %zu: %g", r, i, (double)a);
        }
    free_inputs(&in);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("cpu_many_rows");
    TCase *tc = tcase_create("many_rows");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_many_row_kernels_match_definition_at_mla_and_ragged_shapes);
    tcase_add_test(tc, test_many_row_kernels_run_for_avx2_and_avx512_at_widths_of_sixteen);
    tcase_add_test(tc, test_many_row_kernels_keep_special_values_in_their_key_and_head);
    suite_add_tcase(s, tc);
    return s;
}
