/* cpu/few_rows: a few query rows against a tile of keys and values, register-blocked, against the
 * two products written here in double, in every instruction set formats/isa.h can choose here. Shapes:
 * GQA's (8 query rows, 128 wide, keys 2,048 values apart in the [K | V] row), V4's 16 rows, and ragged
 * ones (3, 5 and 11 rows, past the 4- and 8-row blocks; 1, 7, 37 and 255 keys, past the 3- and 8-key blocks;
 * 40 and 24 wide, past the AVX2 kernels' 24 columns; 48 and 80, past the AVX-512 kernels' 48), float32
 * and bf16 rows. */
#include "common.h"
#include "element.h"
#include "few_rows.h"
#include "isa.h"
#include "rng.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>

#define U_F32 (FLT_EPSILON / 2)

/* A Dk-term dot product of values in [−1, 1] is off by at most γ_Dk·Σ|q_i k_i| ≤ Dk²·u, then scaled
 * (one more rounding of a value at most Dk·scale). */
static double scores_atol(size_t Dk, double scale) { return ((double)(Dk * Dk) + 1.0) * scale * U_F32; }

/* acc + Σ_j p_j v_j with |acc|, |v| ≤ 1 and p in [0, 1]: n + 1 terms, each sum off by γ_{n+1}. */
static double values_atol(size_t n) { return (double)((n + 1) * (n + 1)) * U_F32; }

typedef struct {
    size_t G, n, Dk, Dv, ld;
} few_shape;

static const few_shape SHAPES[] = {
    {8, 256, 128, 128, 2048}, {8, 255, 128, 128, 2048}, {8, 7, 128, 128, 2048}, {8, 1, 128, 128, 2048},
    {3, 100, 128, 128, 1024}, {5, 33, 40, 24, 70},      {1, 2, 8, 8, 20},         {16, 64, 128, 128, 4096},
    {11, 37, 48, 80, 200},
};

/* Inputs for one shape: q[G][Dk], p[G][n] in [0, 1], acc[G][Dv], rows[n][ld] with the keys at column 3
 * and the values at column 3 + Dk, as float32 and as bf16 codes (the float rows then hold the codes'
 * values, so one oracle serves both). */
typedef struct {
    few_shape sh;
    float *q, *p, *acc, *rows;
    uint16_t *codes;
} few_inputs;

static few_inputs inputs(const few_shape *sh, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    few_inputs in = {*sh,
                     kvl_uniform_floats(&rng, sh->G * sh->Dk, -1, 1),
                     kvl_uniform_floats(&rng, sh->G * sh->n, 0, 1),
                     kvl_uniform_floats(&rng, sh->G * sh->Dv, -1, 1),
                     kvl_uniform_floats(&rng, sh->n * sh->ld, -1, 1),
                     NULL};
    in.codes = malloc(sh->n * sh->ld * sizeof *in.codes);
    ck_assert(in.codes != NULL);
    kvf_bf16_encode_n(in.codes, in.rows, sh->n * sh->ld);
    kvf_bf16_decode_n(in.rows, in.codes, sh->n * sh->ld);
    return in;
}

static void free_inputs(few_inputs *in)
{
    free(in->q);
    free(in->p);
    free(in->acc);
    free(in->rows);
    free(in->codes);
}

static kvl_few_tile tile_of(const few_inputs *in, int bf16)
{
    const few_shape *sh = &in->sh;
    const void *k = bf16 ? (const void *)(in->codes + 3) : (const void *)(in->rows + 3);
    const void *v = bf16 ? (const void *)(in->codes + 3 + sh->Dk) : (const void *)(in->rows + 3 + sh->Dk);
    return (kvl_few_tile){
        .k = k, .v = v, .ldk = sh->ld, .ldv = sh->ld, .n = sh->n, .Dk = sh->Dk, .Dv = sh->Dv, .bf16 = bf16};
}

/* The definitions: s = scale·q·kᵀ and acc + p·v, in double over the float rows. */
static void oracle_scores(double *s, const few_inputs *in, double scale)
{
    const few_shape *sh = &in->sh;
    for (size_t r = 0; r < sh->G; r++)
        for (size_t j = 0; j < sh->n; j++) {
            double dot = 0.0;
            for (size_t i = 0; i < sh->Dk; i++) dot += (double)in->q[r * sh->Dk + i] * in->rows[j * sh->ld + 3 + i];
            s[r * sh->n + j] = scale * dot;
        }
}

static void oracle_values(double *acc, const few_inputs *in)
{
    const few_shape *sh = &in->sh;
    for (size_t r = 0; r < sh->G; r++)
        for (size_t i = 0; i < sh->Dv; i++) {
            double sum = in->acc[r * sh->Dv + i];
            for (size_t j = 0; j < sh->n; j++)
                sum += (double)in->p[r * sh->n + j] * in->rows[j * sh->ld + 3 + sh->Dk + i];
            acc[r * sh->Dv + i] = sum;
        }
}

typedef void (*scores_fn)(float *, const float *, size_t, const kvl_few_tile *, float);
typedef void (*values_fn)(float *, const float *, size_t, const kvl_few_tile *);

/* The dispatched scores as a step runs them: the queries packed first (kvl_few_pack_q). */
static void packed_scores(float *s, const float *q, size_t G, const kvl_few_tile *t, float scale)
{
    float *qp = malloc(G * t->Dk * sizeof *qp);
    ck_assert(qp != NULL);
    kvl_few_pack_q(qp, q, G, t);
    kvl_few_scores(s, qp, G, t, scale);
    free(qp);
}

/* One kernel pair on one shape and store against the definitions. */
static void check_kernels(const char *name, scores_fn scores, values_fn values, const few_inputs *in, int bf16)
{
    const few_shape *sh = &in->sh;
    const float scale = 0.088f;
    const kvl_few_tile t = tile_of(in, bf16);
    float *s = malloc(sh->G * sh->n * sizeof *s), *acc = malloc(sh->G * sh->Dv * sizeof *acc);
    double *want_s = malloc(sh->G * sh->n * sizeof *want_s), *want_acc = malloc(sh->G * sh->Dv * sizeof *want_acc);
    ck_assert(s && acc && want_s && want_acc);
    char what[128];
    oracle_scores(want_s, in, scale);
    scores(s, in->q, sh->G, &t, scale);
    snprintf(what, sizeof what, "%s scores, %s, G %zu, n %zu, Dk %zu", name, bf16 ? "bf16" : "f32", sh->G, sh->n,
             sh->Dk);
    kvl_expect_close(what, s, want_s, sh->G * sh->n, scores_atol(sh->Dk, scale), 0.0, 0.0);
    oracle_values(want_acc, in);
    for (size_t i = 0; i < sh->G * sh->Dv; i++) acc[i] = in->acc[i];
    values(acc, in->p, sh->G, &t);
    snprintf(what, sizeof what, "%s values, %s, G %zu, n %zu, Dv %zu", name, bf16 ? "bf16" : "f32", sh->G, sh->n,
             sh->Dv);
    kvl_expect_close(what, acc, want_acc, sh->G * sh->Dv, values_atol(sh->n), 0.0, 0.0);
    free(s);
    free(acc);
    free(want_s);
    free(want_acc);
}

START_TEST(test_few_row_kernels_match_definition_at_gqa_and_ragged_shapes)
{
    for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) {
        few_inputs in = inputs(&SHAPES[i], 40 + i);
        for (int bf16 = 0; bf16 < 2; bf16++) {
            for (kvf_isa isa = KVF_ISA_BASELINE; isa < KVF_N_ISA; isa++) {
                if (kvf_isa_force(isa) != 0) continue;
                char name[64];
                snprintf(name, sizeof name, "dispatched (%s)", kvf_isa_name(isa));
                check_kernels(name, packed_scores, kvl_few_values, &in, bf16);
            }
            check_kernels("plain", kvl_few_scores_plain, kvl_few_values_plain, &in, bf16);
        }
        free_inputs(&in);
    }
    kvl_force_widest_isa();
}
END_TEST

/* The active variant's kernels against the plain twins on one shape: float32 rounding apart only, within
 * twice the definition's bound of each other. */
static void expect_simd_near_plain(const few_shape *sh, uint64_t seed)
{
    const float scale = 0.088f;
    few_inputs in = inputs(sh, seed);
    float *s = malloc(sh->G * sh->n * sizeof *s), *acc = malloc(sh->G * sh->Dv * sizeof *acc);
    double *ref_s = malloc(sh->G * sh->n * sizeof *ref_s), *ref_acc = malloc(sh->G * sh->Dv * sizeof *ref_acc);
    ck_assert(s && acc && ref_s && ref_acc);
    for (int bf16 = 0; bf16 < 2; bf16++) {
        const kvl_few_tile t = tile_of(&in, bf16);
        ck_assert(kvl_few_simd(&t));
        kvl_few_scores_plain(s, in.q, sh->G, &t, scale);
        for (size_t e = 0; e < sh->G * sh->n; e++) ref_s[e] = s[e];
        packed_scores(s, in.q, sh->G, &t, scale);
        kvl_expect_close("simd scores against plain", s, ref_s, sh->G * sh->n, 2 * scores_atol(sh->Dk, scale), 0.0,
                         0.0);
        for (size_t e = 0; e < sh->G * sh->Dv; e++) acc[e] = in.acc[e];
        kvl_few_values_plain(acc, in.p, sh->G, &t);
        for (size_t e = 0; e < sh->G * sh->Dv; e++) {
            ref_acc[e] = acc[e];
            acc[e] = in.acc[e];
        }
        kvl_few_values(acc, in.p, sh->G, &t);
        kvl_expect_close("simd values against plain", acc, ref_acc, sh->G * sh->Dv, 2 * values_atol(sh->n), 0.0, 0.0);
    }
    free(s);
    free(acc);
    free(ref_s);
    free(ref_acc);
    free_inputs(&in);
}

/* Every SIMD variant the CPU runs (AVX2, AVX-512) against the plain twins. */
START_TEST(test_simd_kernels_agree_with_plain_twins)
{
    for (kvf_isa isa = KVF_ISA_AVX2; isa < KVF_N_ISA; isa++) {
        if (kvf_isa_force(isa) != 0) {
            fprintf(stderr, "test_simd_kernels_agree_with_plain_twins: %s skipped, this CPU lacks it\n",
                    kvf_isa_name(isa));
            continue;
        }
        for (size_t i = 0; i < sizeof SHAPES / sizeof SHAPES[0]; i++) expect_simd_near_plain(&SHAPES[i], 60 + i);
    }
    kvl_force_widest_isa();
}
END_TEST

/* Widths that are not multiples of 8 are the plain loops' (the SIMD kernels step 8 columns). */
START_TEST(test_widths_off_the_vector_run_the_plain_loops)
{
    const kvl_few_tile odd_k = {.Dk = 36, .Dv = 128}, odd_v = {.Dk = 128, .Dv = 20};
    ck_assert(!kvl_few_simd(&odd_k));
    ck_assert(!kvl_few_simd(&odd_v));
    const few_shape sh = {3, 9, 36, 20, 64};
    few_inputs in = inputs(&sh, 80);
    check_kernels("dispatched, odd widths", packed_scores, kvl_few_values, &in, 1);
    free_inputs(&in);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("cpu_few_rows");
    TCase *tc = tcase_create("few_rows");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_few_row_kernels_match_definition_at_gqa_and_ragged_shapes);
    tcase_add_test(tc, test_simd_kernels_agree_with_plain_twins);
    tcase_add_test(tc, test_widths_off_the_vector_run_the_plain_loops);
    suite_add_tcase(s, tc);
    return s;
}
