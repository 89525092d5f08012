/* ref/core/attend: the tiled attention (matrix products over tiles of rows, online softmax) and its
 * plain-loop twin against the definition written here in double: per head, every score, softmax
 * (with the sink in the denominator), the weighted sum of values. Sizes where the tiles straddle:
 * N = 1, N below one tile, exactly one tile, and several tiles with a ragged last one; keys and values
 * that overlap in the row (MLA's c_kv inside [c_kv | k_rope]) and that are separate ranges, one group
 * or several, each with its own K and V columns (GQA's [K | V] row). */
#include "attend.h"
#include "common.h"
#include "element.h"
#include "isa.h"
#include "linalg.h"
#include "many_rows.h"
#include "rng.h"
#include "softmax.h"
#include "status.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define U_F32 (FLT_EPSILON / 2)

/* Each score is a Dk-term dot product of values in [−1, 1], scaled: its rounding error is at most
 * γ_Dk·Dk·scale ≈ Dk²·scale·u. A weight exp(s − m)/l carries that twice (s and m), the exponential's
 * own error (KVL_EXP_F32_ULP, in the weight and again in l) and γ_N from the sum l; the output
 * Σ_j p_j v_j (|v| ≤ 1, Σ p ≤ 1) adds γ_N more. Plus a few roundings of the final scaling. */
static double attend_atol(size_t Dk, size_t N, double scale)
{
    return (2.0 * (double)(Dk * Dk) * scale + 4.0 * KVL_EXP_F32_ULP + 2.0 * (double)N + 8.0) * U_F32;
}

#define MIN_COS 0.99999

typedef struct {
    size_t Hq, N;
    kvl_attend_rows r;
    float scale;
} shape;

/* MLA-like: one group, stride 70, keys [3, 43), values [5, 29) inside them. GQA-like: Hq/3 groups of
 * three query rows, stride 3 + G·(DK + DV) + 3, group g's keys at 3 + g·DK, its values after every
 * group's keys (the [K | V] row), with a column to spare at each end. */
#define DK 40
#define DV 24
#define STRIDE 70
static shape mla_like(size_t Hq, size_t N) { return (shape){Hq, N, {N, STRIDE, 3, DK, 5, DV, 1}, 0.158f}; }
static shape gqa_like(size_t Hq, size_t N)
{
    const size_t G = Hq / 3;
    return (shape){Hq, N, {N, 3 + G * (DK + DV) + 3, 3, DK, 3 + G * DK, DV, G}, 0.158f};
}

static const size_t N_STRADDLE[] = {1, 100, KVL_ATTEND_TILE, KVL_ATTEND_TILE + 1, 3 * KVL_ATTEND_TILE - 37};
#define N_CASES (sizeof N_STRADDLE / sizeof N_STRADDLE[0])

/* want[Hq][Dv]: the definition in double over rows[N][stride] (float32 values), query row h reading
 * group h / (Hq/groups)'s columns. */
static void oracle(double *want, const float *q, size_t Hq, const float *rows, const kvl_attend_rows *r,
                   double scale, const float *sigma)
{
    double *p = malloc((r->N ? r->N : 1) * sizeof *p);
    ck_assert(p != NULL);
    for (size_t h = 0; h < Hq; h++) {
        const size_t g = h / (Hq / r->groups), k_off = r->k_off + g * r->Dk, v_off = r->v_off + g * r->Dv;
        for (size_t j = 0; j < r->N; j++) {
            double dot = 0.0;
            for (size_t i = 0; i < r->Dk; i++) dot += (double)q[h * r->Dk + i] * rows[j * r->stride + k_off + i];
            p[j] = dot * scale;
        }
        if (sigma) kvl_softmax_sink_f64(p, r->N, sigma[h]);
        else kvl_softmax_f64(p, r->N);
        for (size_t i = 0; i < r->Dv; i++) {
            double acc = 0.0;
            for (size_t j = 0; j < r->N; j++) acc += p[j] * rows[j * r->stride + v_off + i];
            want[h * r->Dv + i] = acc;
        }
    }
    free(p);
}

/* n floats in [−1, 1) */
static float *signed_floats(kvl_rng *rng, size_t n) { return kvl_uniform_floats(rng, n, -1.0, 1.0); }

/* The tiled form, its loop twin and (rows rounded to bf16) the bf16 form against the oracle. */
static void check_shape(const shape *sh, const float *sigma, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    const kvl_attend_rows *r = &sh->r;
    float *q = signed_floats(&rng, sh->Hq * r->Dk), *rows = signed_floats(&rng, sh->N * r->stride);
    uint16_t *codes = malloc((sh->N * r->stride + 1) * sizeof *codes);
    float *got = malloc(sh->Hq * r->Dv * sizeof *got);
    double *want = malloc(sh->Hq * r->Dv * sizeof *want);
    ck_assert(codes && got && want);
    const double atol = attend_atol(r->Dk, sh->N, sh->scale);
    char what[160];
    oracle(want, q, sh->Hq, rows, r, sh->scale, sigma);

    ck_assert_int_eq(sigma ? kvl_attend_sink_f32(got, q, sh->Hq, rows, r, sh->scale, sigma)
                           : kvl_attend_f32(got, q, sh->Hq, rows, r, sh->scale), KVL_OK);
    snprintf(what, sizeof what, "tiled, Hq %zu, N %zu, v_off %zu%s", sh->Hq, sh->N, r->v_off, sigma ? ", sinks" : "");
    kvl_expect_close(what, got, want, sh->Hq * r->Dv, atol, 0.0, MIN_COS);

    ck_assert_int_eq(kvl_attend_f32_loop(got, q, sh->Hq, rows, r, sh->scale, sigma), KVL_OK);
    snprintf(what, sizeof what, "loop, Hq %zu, N %zu, v_off %zu%s", sh->Hq, sh->N, r->v_off, sigma ? ", sinks" : "");
    kvl_expect_close(what, got, want, sh->Hq * r->Dv, atol, 0.0, MIN_COS);

    kvf_bf16_encode_n(codes, rows, sh->N * r->stride);
    kvf_bf16_decode_n(rows, codes, sh->N * r->stride);
    oracle(want, q, sh->Hq, rows, r, sh->scale, sigma);
    ck_assert_int_eq(sigma ? kvl_attend_sink_bf16(got, q, sh->Hq, codes, r, sh->scale, sigma)
                           : kvl_attend_bf16(got, q, sh->Hq, codes, r, sh->scale), KVL_OK);
    snprintf(what, sizeof what, "bf16 tiled, Hq %zu, N %zu, v_off %zu%s", sh->Hq, sh->N, r->v_off,
             sigma ? ", sinks" : "");
    kvl_expect_close(what, got, want, sh->Hq * r->Dv, atol, 0.0, MIN_COS);
    free(q);
    free(rows);
    free(codes);
    free(got);
    free(want);
}

START_TEST(test_tiled_attention_matches_definition_when_tiles_straddle)
{
    for (size_t i = 0; i < N_CASES; i++) {
        shape a = mla_like(8, N_STRADDLE[i]), b = gqa_like(3, N_STRADDLE[i]), c = gqa_like(9, N_STRADDLE[i]);
        check_shape(&a, NULL, 100 + i);
        check_shape(&b, NULL, 200 + i);
        check_shape(&c, NULL, 250 + i);
    }
}
END_TEST

START_TEST(test_tiled_attention_with_sinks_matches_definition)
{
    const float sigma[5] = {0.5f, -INFINITY, 3.0f, -2.0f, 8.0f}; /* 8 outweighs every score: a sink that dominates */
    for (size_t i = 0; i < N_CASES; i++) {
        shape a = mla_like(5, N_STRADDLE[i]);
        check_shape(&a, sigma, 300 + i);
    }
}
END_TEST

/* The rows split into one part per thread (attend.h): 1, 2 and 3 parts, parts that straddle tiles,
 * a sink only part 0 carries, against the same definition, at sizes past KVL_SPLIT_MIN_MACS. */
START_TEST(test_rows_split_across_threads_match_definition)
{
    enum { HQ = 96 };
    float sigma[HQ];
    for (size_t h = 0; h < HQ; h++) sigma[h] = h % 5 == 1 ? -INFINITY : (float)h / 8.0f - 4.0f;
    const size_t N[] = {11 * KVL_ATTEND_TILE + 1, 12 * KVL_ATTEND_TILE - 37};
    const int threads = kvl_threads();
    for (int t = 1; t <= 3; t++) {
        kvl_set_threads(t);
        for (size_t i = 0; i < sizeof N / sizeof N[0]; i++) {
            shape a = mla_like(HQ, N[i]), b = gqa_like(HQ, N[i]);
            ck_assert_uint_eq(kvl_parts(N[i], KVL_ATTEND_PART_ROWS, (double)(N[i] * HQ * (DK + DV))), (size_t)t);
            check_shape(&a, sigma, 400 + 10 * (uint64_t)t + i);
            check_shape(&b, NULL, 500 + 10 * (uint64_t)t + i);
        }
    }
    kvl_set_threads(threads);
}
END_TEST

/* check_shape in every instruction set the CPU runs and on 1, 2 and 3 threads, each thread count a part
 * per thread (seeds seed + 1 … seed + 3). */
static void check_every_isa_and_thread_count(const shape *sh, const float *sigma, uint64_t seed)
{
    const int threads = kvl_threads();
    const kvf_isa active = kvf_isa_active();
    const double macs = (double)sh->N * (double)sh->Hq * (double)(sh->r.Dk + sh->r.Dv);
    for (int isa = 0; isa < KVF_N_ISA; isa++) {
        if (kvf_isa_force((kvf_isa)isa) != 0) continue;
        for (int t = 1; t <= 3; t++) {
            kvl_set_threads(t);
            ck_assert_uint_eq(kvl_parts(sh->N, KVL_ATTEND_PART_ROWS, macs), (size_t)t);
            check_shape(sh, sigma, seed + (uint64_t)t);
        }
    }
    ck_assert_int_eq(kvf_isa_force(active), 0);
    kvl_set_threads(threads);
}

/* GQA at DeepSeek LLM 67B's group shape (8 query rows per group, 128-wide keys and values, the
 * [K_0 … K_3 | V_0 … V_3] row), through the few-row kernels where the CPU runs them: tiles that end past
 * the kernels' 3-key and 24-column blocks, float32 and bf16 rows, split over 1, 2 and 3 threads:
 * both paths a group of eight takes, the few-row kernels (avx2, avx512) and the BLAS products (baseline). */
START_TEST(test_gqa_groups_of_eight_match_definition_in_every_thread_count_and_isa)
{
    enum { GROUPS = 4, GQ = 8, DH = 128 };
    const size_t N = 5 * KVL_ATTEND_TILE - 37;
    const shape sh = {GROUPS * GQ, N, {N, 2 * GROUPS * DH, 0, DH, GROUPS * DH, DH, GROUPS}, 0.0884f};
    check_every_isa_and_thread_count(&sh, NULL, 700);
}
END_TEST

/* Groups of many query rows with widths of sixteen take the many-row kernels where the CPU runs them
 * (avx512) and BLAS elsewhere: one group of 80 (the 64-head block and a 16-head edge) with sinks, some
 * −∞, and two groups of 32; key widths of 72 (no multiple of the vector), float32 and bf16 rows, tiles
 * that end past the 6-key block, over 1, 2 and 3 threads. */
#define WIDE_DK 72
#define WIDE_DV 48
static shape mla_wide(size_t Hq, size_t N) { return (shape){Hq, N, {N, 80, 3, WIDE_DK, 5, WIDE_DV, 1}, 0.118f}; }

START_TEST(test_many_query_rows_match_definition_in_every_thread_count_and_isa)
{
    const size_t N = 5 * KVL_ATTEND_TILE - 37;
    float sigma[80];
    for (size_t h = 0; h < 80; h++) sigma[h] = h % 7 == 2 ? -INFINITY : (float)h / 10.0f - 4.0f;
    const shape one = mla_wide(80, N);
    const shape two = {64, N, {N, 3 + 2 * (WIDE_DK + WIDE_DV) + 3, 3, WIDE_DK, 3 + 2 * WIDE_DK, WIDE_DV, 2}, 0.118f};
    check_every_isa_and_thread_count(&one, sigma, 800);
    check_every_isa_and_thread_count(&two, NULL, 810);
}
END_TEST

/* A step whose rows hold no more values than its queries and accumulators splits its heads across the
 * threads instead of its rows (attend.h): V4's window (64 heads over 128 rows of 512, keys and values the
 * same columns) and 96 heads over 100 rows, with sinks, some −∞, on 1, 2 and 3 threads in every
 * instruction set, against the definition; and where the many-row kernels run, every thread count gives
 * the one-thread output bit for bit, as only a split of the heads does (each head's sums are those of
 * one thread; a split of the rows merges partial sums). */
START_TEST(test_heads_split_across_threads_match_definition_and_one_thread)
{
    enum { D = 512, MOST = 96 };
    float sigma[MOST];
    for (size_t h = 0; h < MOST; h++) sigma[h] = h % 7 == 3 ? -INFINITY : (float)h / 16.0f - 3.0f;
    const shape sh[] = {{64, 128, {128, D, 0, D, 0, D, 1}, 0.044f}, {96, 100, {100, D, 0, D, 0, D, 1}, 0.044f}};
    const int threads = kvl_threads();
    const kvf_isa active = kvf_isa_active();
    for (size_t c = 0; c < sizeof sh / sizeof sh[0]; c++) {
        kvl_rng rng;
        kvl_rng_seed(&rng, 900 + c);
        float *q = signed_floats(&rng, sh[c].Hq * D), *rows = signed_floats(&rng, sh[c].N * D);
        float *one = malloc(sh[c].Hq * D * sizeof *one), *got = malloc(sh[c].Hq * D * sizeof *got);
        ck_assert(one && got);
        for (int isa = 0; isa < KVF_N_ISA; isa++) {
            if (kvf_isa_force((kvf_isa)isa) != 0) continue;
            for (int t = 1; t <= 3; t++) {
                kvl_set_threads(t);
                check_shape(&sh[c], sigma, 910 + 10 * c + (uint64_t)t);
                ck_assert_int_eq(kvl_attend_sink_f32(got, q, sh[c].Hq, rows, &sh[c].r, sh[c].scale, sigma), KVL_OK);
                if (t == 1) memcpy(one, got, sh[c].Hq * D * sizeof *one);
                else if (kvl_many_simd(16, D))
                    ck_assert_msg(memcmp(one, got, sh[c].Hq * D * sizeof *one) == 0,
                                  "%zu heads, %s, %d threads: not the one-thread output", sh[c].Hq,
                                  kvf_isa_name((kvf_isa)isa), t);
            }
        }
        free(q);
        free(rows);
        free(one);
        free(got);
    }
    ck_assert_int_eq(kvf_isa_force(active), 0);
    kvl_set_threads(threads);
}
END_TEST

/* What a `then` saw: the output it was handed (base, Dv), the finished output it should find there, and
 * how many times each head came. It doubles the heads it is given. */
typedef struct {
    const float *base, *finished;
    size_t Dv;
    int seen[96], wrong;
} then_record;

static void double_heads(float *o, size_t heads, size_t Dv, void *ctx)
{
    then_record *t = ctx;
    const size_t h0 = (size_t)(o - t->base) / Dv;
    if (Dv != t->Dv || memcmp(o, t->finished + h0 * Dv, heads * Dv * sizeof *o) != 0)
        __atomic_store_n(&t->wrong, 1, __ATOMIC_RELAXED);
    for (size_t h = h0; h < h0 + heads; h++) __atomic_fetch_add(&t->seen[h], 1, __ATOMIC_RELAXED);
    for (size_t i = 0; i < heads * Dv; i++) o[i] *= 2.0f;
}

/* kvl_attend_tiles_then hands every head to its `then` exactly once, finished (the bits kvl_attend_tiles
 * gives), and keeps what `then` wrote: a split of the heads (V4's window), of the rows (one group of 96
 * heads over 1,409 rows) and of GQA's groups, on 1, 2 and 3 threads; a then without its function is
 * refused. */
START_TEST(test_then_runs_once_on_every_finished_head_in_every_split)
{
    const size_t N = 11 * KVL_ATTEND_TILE + 1;
    const shape sh[] = {{64, 128, {128, 512, 0, 512, 0, 512, 1}, 0.044f}, mla_like(96, N), gqa_like(96, N)};
    const int threads = kvl_threads();
    for (size_t c = 0; c < sizeof sh / sizeof sh[0]; c++) {
        kvl_rng rng;
        kvl_rng_seed(&rng, 950 + c);
        const kvl_attend_rows *r = &sh[c].r;
        float *q = signed_floats(&rng, sh[c].Hq * r->Dk), *rows = signed_floats(&rng, sh[c].N * r->stride);
        float *plain = malloc(sh[c].Hq * r->Dv * sizeof *plain), *got = malloc(sh[c].Hq * r->Dv * sizeof *got);
        ck_assert(plain && got);
        const kvl_row_tiles view = kvl_row_tiles_f32(rows, sh[c].N, r->stride);
        for (int t = 1; t <= 3; t++) {
            kvl_set_threads(t);
            ck_assert_int_eq(kvl_attend_tiles(plain, q, sh[c].Hq, &view, r, sh[c].scale, NULL), KVL_OK);
            then_record rec = {got, plain, r->Dv, {0}, 0};
            const kvl_attend_then then = {double_heads, &rec};
            ck_assert_int_eq(kvl_attend_tiles_then(got, q, sh[c].Hq, &view, r, sh[c].scale, NULL, &then), KVL_OK);
            ck_assert_msg(!rec.wrong, "shape %zu, %d threads: a head handed over before it was finished", c, t);
            for (size_t h = 0; h < sh[c].Hq; h++)
                ck_assert_msg(rec.seen[h] == 1, "shape %zu, %d threads: head %zu handed over %d times", c, t, h,
                              rec.seen[h]);
            for (size_t i = 0; i < sh[c].Hq * r->Dv; i++) ck_assert_float_eq(got[i], 2.0f * plain[i]);
        }
        const kvl_attend_then none = {NULL, NULL};
        ck_assert_int_eq(kvl_attend_tiles_then(got, q, sh[c].Hq, &view, r, sh[c].scale, NULL, &none), KVL_EINVAL);
        free(q);
        free(rows);
        free(plain);
        free(got);
    }
    kvl_set_threads(threads);
}
END_TEST

/* Every score of the first tile and a half −∞ (a key of −∞ against a query of 1): those rows weigh 0 and
 * the heads' maxima start in the second tile, in every instruction set, as the definition gives. */
START_TEST(test_tiles_of_minus_infinity_weigh_nothing_in_every_isa)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 11);
    const shape sh = mla_wide(32, 3 * KVL_ATTEND_TILE + 5);
    const kvl_attend_rows *r = &sh.r;
    float *q = signed_floats(&rng, sh.Hq * WIDE_DK), *rows = signed_floats(&rng, sh.N * r->stride);
    for (size_t h = 0; h < sh.Hq; h++) q[h * WIDE_DK] = 1.0f;
    for (size_t j = 0; j < KVL_ATTEND_TILE + KVL_ATTEND_TILE / 2; j++) rows[j * r->stride + r->k_off] = -INFINITY;
    float got[32 * WIDE_DV];
    double want[32 * WIDE_DV];
    oracle(want, q, sh.Hq, rows, r, sh.scale, NULL);
    const kvf_isa active = kvf_isa_active();
    for (int isa = 0; isa < KVF_N_ISA; isa++) {
        if (kvf_isa_force((kvf_isa)isa) != 0) continue;
        ck_assert_int_eq(kvl_attend_f32(got, q, sh.Hq, rows, r, sh.scale), KVL_OK);
        kvl_expect_close(kvf_isa_name((kvf_isa)isa), got, want, sh.Hq * WIDE_DV,
                         attend_atol(WIDE_DK, sh.N, sh.scale), 0.0, MIN_COS);
    }
    ck_assert_int_eq(kvf_isa_force(active), 0);
    free(q);
    free(rows);
}
END_TEST

/* Keys whose norm grows along the rows: every tile holds a new running maximum, so every tile
 * rescales what the earlier ones summed. */
START_TEST(test_later_tile_with_larger_scores_rescales_earlier_tiles)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 7);
    shape sh = mla_like(4, 4 * KVL_ATTEND_TILE + 5);
    const kvl_attend_rows *r = &sh.r;
    float *q = signed_floats(&rng, sh.Hq * DK), *rows = signed_floats(&rng, sh.N * STRIDE);
    for (size_t h = 0; h < sh.Hq; h++) q[h * DK] = 1.0f;
    for (size_t j = 0; j < sh.N; j++) rows[j * STRIDE + r->k_off] = 8.0f * (float)j / (float)sh.N;
    float got[4 * DV];
    double want[4 * DV];
    oracle(want, q, sh.Hq, rows, r, sh.scale, NULL);
    ck_assert_int_eq(kvl_attend_f32(got, q, sh.Hq, rows, r, sh.scale), KVL_OK);
    kvl_expect_close("rising scores", got, want, sh.Hq * DV, attend_atol(DK, sh.N, sh.scale) + 8 * 8 * U_F32, 0.0,
                     MIN_COS);
    free(q);
    free(rows);
}
END_TEST

START_TEST(test_nan_score_makes_every_head_nan_and_no_rows_give_zero)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, 9);
    shape sh = gqa_like(6, 2 * KVL_ATTEND_TILE + 3);
    float *q = signed_floats(&rng, sh.Hq * DK), *rows = signed_floats(&rng, sh.N * sh.r.stride);
    rows[(KVL_ATTEND_TILE + 2) * sh.r.stride + sh.r.k_off + 1] = NAN; /* group 0's key in the second tile */
    rows[(KVL_ATTEND_TILE + 3) * sh.r.stride + sh.r.k_off + DK] = NAN; /* group 1's */
    float got[6 * DV];
    ck_assert_int_eq(kvl_attend_f32(got, q, sh.Hq, rows, &sh.r, sh.scale), KVL_OK);
    for (size_t i = 0; i < sh.Hq * DV; i++) ck_assert_msg(isnan(got[i]), "element %zu is %g, not NaN", i, got[i]);
    sh.r.N = 0;
    ck_assert_int_eq(kvl_attend_f32(got, q, sh.Hq, rows, &sh.r, sh.scale), KVL_OK);
    for (size_t i = 0; i < sh.Hq * DV; i++) ck_assert_msg(got[i] == 0.0f, "element %zu is %g, not 0", i, got[i]);
    free(q);
    free(rows);
}
END_TEST

/* A chunk's mask as a kvl_block_mask: the rows of table[S][N] a block asks for, its first seen[block]
 * columns (the table masks every later column of the block's rows). */
typedef struct {
    const float *table;
    const size_t *seen;
    size_t N;
} table_mask;

static size_t mask_from_table(float *mask, size_t first, size_t b, size_t N, const void *ctx)
{
    const table_mask *t = ctx;
    const size_t n = t->seen[first / KVL_QUERY_BLOCK];
    if (n > N) return n;
    for (size_t i = 0; i < b; i++) memcpy(mask + i * n, t->table + (first + i) * t->N, n * sizeof *mask);
    return n;
}

/* kvl_attend_chunk_head against the definition in double: 2·KVL_QUERY_BLOCK + 7 queries (the last block
 * partial) over 3 tiles' worth of keys less 37, query and output rows inside wider rows, under a mask
 * that hides a random third of the keys, every key past 400 in the middle block (which its mask
 * function reports, so the block scores 400 keys) and every key in query 3 (its output is 0); then a
 * NaN key makes every row NaN, as kvl_softmax_f32 over the masked scores; and a block mask wider than
 * the keys is an error. */
START_TEST(test_chunk_head_matches_definition_and_masked_rows_give_zero)
{
    enum { S = 2 * KVL_QUERY_BLOCK + 7, N = 3 * KVL_ATTEND_TILE - 37, LDQ = DK + 5, LDO = DV + 3 };
    const size_t seen[3] = {N, 400, N};
    kvl_rng rng;
    kvl_rng_seed(&rng, 12);
    float *q = signed_floats(&rng, S * LDQ), *k = signed_floats(&rng, N * DK), *v = signed_floats(&rng, N * DV);
    float *table = signed_floats(&rng, S * N), *got = malloc(S * LDO * sizeof *got);
    double *want = malloc(S * DV * sizeof *want), *p = malloc(N * sizeof *p);
    ck_assert(got && want && p);
    for (size_t i = 0; i < S; i++)
        for (size_t j = 0; j < N; j++) {
            float *m = table + i * N + j;
            *m = *m < -1.0f / 3 || i == 3 || j >= seen[i / KVL_QUERY_BLOCK] ? -INFINITY : 0.0f;
        }
    const table_mask tm = {table, seen, N};
    const kvl_chunk_head c = {.S = S, .N = N, .Dk = DK, .Dv = DV, .ldq = LDQ, .ldo = LDO, .scale = 0.158f,
                              .mask = mask_from_table, .mask_ctx = &tm};
    float *scratch = malloc(kvl_chunk_head_floats(&c) * sizeof *scratch);
    ck_assert(scratch);
    for (size_t r = 0; r < S; r++) {
        for (size_t j = 0; j < N; j++) {
            double dot = 0.0;
            for (size_t i = 0; i < DK; i++) dot += (double)q[r * LDQ + i] * k[j * DK + i];
            p[j] = dot * c.scale + table[r * N + j];
        }
        kvl_softmax_f64(p, N);
        for (size_t i = 0; i < DV; i++) {
            double acc = 0.0;
            for (size_t j = 0; j < N; j++) acc += p[j] * v[j * DV + i];
            want[r * DV + i] = acc;
        }
    }
    ck_assert_int_eq(kvl_attend_chunk_head(got, q, k, v, &c, scratch), KVL_OK);
    for (size_t r = 0; r < S; r++) memmove(got + r * DV, got + r * LDO, DV * sizeof *got);
    kvl_expect_close("chunk head", got, want, S * DV, attend_atol(DK, N, c.scale), 0.0, MIN_COS);
    for (size_t i = 0; i < DV; i++) ck_assert_msg(got[3 * DV + i] == 0.0f, "masked row: %g", got[3 * DV + i]);

    k[50 * DK + 1] = NAN; /* an additive mask cannot hide it: NaN + (−∞) is NaN, in every row */
    ck_assert_int_eq(kvl_attend_chunk_head(got, q, k, v, &c, scratch), KVL_OK);
    for (size_t r = 0; r < S; r++)
        for (size_t i = 0; i < DV; i++) ck_assert_msg(isnan(got[r * LDO + i]), "row %zu is %g, not NaN", r, got[r * LDO + i]);

    kvl_chunk_head short_keys = c;
    short_keys.N = 500; /* the first block still reports 731 */
    ck_assert_int_eq(kvl_attend_chunk_head(got, q, k, v, &short_keys, scratch), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "queries 0 … 63 sees 731 of 500 keys"));
    free(q); free(k); free(v); free(table); free(got); free(want); free(p); free(scratch);
}
END_TEST

START_TEST(test_bad_layout_scale_sinks_and_null_arrays_are_errors)
{
    float q[DK] = {0}, rows[2 * STRIDE] = {0}, o[DV];
    const kvl_attend_rows ok = {2, STRIDE, 3, DK, 5, DV, 1};
    kvl_attend_rows past_k = ok, past_v = ok, no_v = ok, no_groups = ok, two = ok;
    past_k.k_off = STRIDE - DK + 1;
    past_v.v_off = STRIDE - DV + 1;
    no_v.Dv = 0;
    no_groups.groups = 0;
    two.groups = 2; /* two groups' keys, 3 + 2·40 columns, pass the stride of 70 */
    ck_assert_int_eq(kvl_attend_f32(o, q, 1, rows, &ok, 0.1f), KVL_OK);
    ck_assert_int_eq(kvl_attend_f32(o, q, 1, rows, &past_k, 0.1f), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "key columns"));
    ck_assert_int_eq(kvl_attend_f32(o, q, 1, rows, &past_v, 0.1f), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "value columns"));
    ck_assert_int_eq(kvl_attend_f32(o, q, 1, rows, &no_v, 0.1f), KVL_EINVAL);
    ck_assert_int_eq(kvl_attend_f32(o, q, 1, rows, &no_groups, 0.1f), KVL_EINVAL);
    ck_assert_int_eq(kvl_attend_f32(o, q, 1, rows, &two, 0.1f), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "do not split"));
    ck_assert_int_eq(kvl_attend_f32(o, q, 2, rows, &two, 0.1f), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "key columns"));
    ck_assert_int_eq(kvl_attend_f32(o, q, 1, rows, &ok, 0.0f), KVL_EINVAL);
    ck_assert_int_eq(kvl_attend_f32(o, q, 1, rows, &ok, NAN), KVL_EINVAL);
    ck_assert_int_eq(kvl_attend_f32(o, q, 1, NULL, &ok, 0.1f), KVL_EINVAL);
    ck_assert_int_eq(kvl_attend_sink_f32(o, q, 1, rows, &ok, 0.1f, NULL), KVL_EINVAL);
    const float nan_sink[1] = {NAN}, inf_sink[1] = {INFINITY};
    ck_assert_int_eq(kvl_attend_sink_f32(o, q, 1, rows, &ok, 0.1f, nan_sink), KVL_EINVAL);
    ck_assert_int_eq(kvl_attend_sink_f32(o, q, 1, rows, &ok, 0.1f, inf_sink), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "sink 0"));
    ck_assert_int_eq(kvl_attend_f32_loop(o, NULL, 1, rows, &ok, 0.1f, NULL), KVL_EINVAL);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("core_attend");
    TCase *tc = tcase_create("attend");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_tiled_attention_matches_definition_when_tiles_straddle);
    tcase_add_test(tc, test_tiled_attention_with_sinks_matches_definition);
    tcase_add_test(tc, test_rows_split_across_threads_match_definition);
    tcase_add_test(tc, test_gqa_groups_of_eight_match_definition_in_every_thread_count_and_isa);
    tcase_add_test(tc, test_many_query_rows_match_definition_in_every_thread_count_and_isa);
    tcase_add_test(tc, test_heads_split_across_threads_match_definition_and_one_thread);
    tcase_add_test(tc, test_then_runs_once_on_every_finished_head_in_every_split);
    tcase_add_test(tc, test_tiles_of_minus_infinity_weigh_nothing_in_every_isa);
    tcase_add_test(tc, test_later_tile_with_larger_scores_rescales_earlier_tiles);
    tcase_add_test(tc, test_nan_score_makes_every_head_nan_and_no_rows_give_zero);
    tcase_add_test(tc, test_chunk_head_matches_definition_and_masked_rows_give_zero);
    tcase_add_test(tc, test_bad_layout_scale_sinks_and_null_arrays_are_errors);
    suite_add_tcase(s, tc);
    return s;
}
