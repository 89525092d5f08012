/* cpu/attend_cpu: the CPU backend's decode attention (tiles, online softmax per tile, parts merged,
 * the few- and many-row kernels) against the definition in double (tests/oracle_attend_rows.h) and
 * against ref/core/attend.h's kvl_attend_ref. Every test runs the CPU backend (the fixture). Sizes where
 * the tiles straddle: N = 1, N below one tile, exactly one tile, and several tiles with a ragged last
 * one; one group or several; every instruction set the CPU runs; one, two and three threads. */
#include "attend_cpu.h"
#include "backend_cpu.h"
#include "isa.h"
#include "linalg.h"
#include "threads.h"
#include "many_rows.h"
#include "oracle_attend_rows.h"
#include "swa.h"

#include <string.h>

static const size_t N_STRADDLE[] = {1, 100, KVL_ATTEND_TILE, KVL_ATTEND_TILE + 1, 3 * KVL_ATTEND_TILE - 37};
#define N_CASES (sizeof N_STRADDLE / sizeof N_STRADDLE[0])

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

/* The rows split into one part per thread (cpu/attend_cpu.h): 1, 2 and 3 parts, parts that straddle tiles,
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
 * (avx2, avx512) and BLAS elsewhere: one group of 80 (the 64-head block and a 16-head edge) with
 * sinks, some −∞, and two groups of 32; key widths of 72 (no multiple of the vector), float32 and bf16
 * rows, tiles that end past the 6-key block, over 1, 2 and 3 threads. */
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
 * threads instead of its rows (cpu/attend_cpu.h): V4's window (64 heads over 128 rows of 512, keys and values the
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
                ck_assert_int_eq(attend_f32(got, q, sh[c].Hq, rows, &sh[c].r, sh[c].scale, sigma), KVL_OK);
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

/* kvl_attend hands every head to its `then` exactly once, finished (the bits it gives without one), and keeps what `then` wrote: a split of the heads (V4's window), of the rows (one group of 96
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
            ck_assert_int_eq(kvl_attend(plain, q, sh[c].Hq, &view, r, sh[c].scale, NULL, NULL), KVL_OK);
            then_record rec = {got, plain, r->Dv, {0}, 0};
            const kvl_attend_then then = {double_heads, &rec};
            ck_assert_int_eq(kvl_attend(got, q, sh[c].Hq, &view, r, sh[c].scale, NULL, &then), KVL_OK);
            ck_assert_msg(!rec.wrong, "shape %zu, %d threads: a head handed over before it was finished", c, t);
            for (size_t h = 0; h < sh[c].Hq; h++)
                ck_assert_msg(rec.seen[h] == 1, "shape %zu, %d threads: head %zu handed over %d times", c, t, h,
                              rec.seen[h]);
            for (size_t i = 0; i < sh[c].Hq * r->Dv; i++) ck_assert_float_eq(got[i], 2.0f * plain[i]);
        }
        const kvl_attend_then none = {NULL, NULL};
        ck_assert_int_eq(kvl_attend(got, q, sh[c].Hq, &view, r, sh[c].scale, NULL, &none), KVL_EINVAL);
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
        ck_assert_int_eq(attend_f32(got, q, sh.Hq, rows, r, sh.scale, NULL), KVL_OK);
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
    ck_assert_int_eq(attend_f32(got, q, sh.Hq, rows, r, sh.scale, NULL), KVL_OK);
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
    ck_assert_int_eq(attend_f32(got, q, sh.Hq, rows, &sh.r, sh.scale, NULL), KVL_OK);
    for (size_t i = 0; i < sh.Hq * DV; i++) ck_assert_msg(isnan(got[i]), "element %zu is %g, not NaN", i, got[i]);
    sh.r.N = 0;
    ck_assert_int_eq(attend_f32(got, q, sh.Hq, rows, &sh.r, sh.scale, NULL), KVL_OK);
    for (size_t i = 0; i < sh.Hq * DV; i++) ck_assert_msg(got[i] == 0.0f, "element %zu is %g, not 0", i, got[i]);
    free(q);
    free(rows);
}
END_TEST

/* The chunk's query blocks split over 1, 2 and 3 threads: each against the definition in double. */
START_TEST(test_chunk_head_blocks_split_across_threads_match_definition)
{
    const int threads = kvl_threads();
    for (int t = 1; t <= 3; t++) {
        kvl_set_threads(t);
        check_chunk_head();
    }
    kvl_set_threads(threads);
}
END_TEST

/* ---- the chunk under swa's band, which the CPU backend reads as runs of keys --------------------- */

/* The chunk's S queries at positions span.start + i over the N = start + S − key_start keys from
 * span.key_start, under span's banded causal mask, by the backend in use, against the definition in
 * double (swa_visible decides each pair); rows are wider than their keys and values. */
static void check_band_chunk(swa_span span, size_t S, uint64_t seed)
{
    enum { LDQ = DK + 3, LDO = DV + 5 };
    const size_t N = span.start + S - span.key_start;
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    float *q = signed_floats(&rng, S * LDQ), *k = signed_floats(&rng, N * DK), *v = signed_floats(&rng, N * DV);
    float *got = malloc(S * LDO * sizeof *got);
    double *want = calloc(S * DV, sizeof *want), *p = malloc(N * sizeof *p);
    ck_assert(got && want && p);
    const kvl_chunk_head c = {.S = S, .N = N, .Dk = DK, .Dv = DV, .ldq = LDQ, .ldo = LDO, .scale = 0.158f,
                              .mask = swa_chunk_mask(&span)};
    for (size_t r = 0; r < S; r++) {
        for (size_t j = 0; j < N; j++) {
            double dot = 0.0;
            for (size_t i = 0; i < DK; i++) dot += (double)q[r * LDQ + i] * k[j * DK + i];
            p[j] = swa_visible(span.start + r, span.key_start + j, span.window) ? dot * c.scale : -INFINITY;
        }
        kvl_softmax_f64(p, N);
        for (size_t j = 0; j < N; j++)
            for (size_t i = 0; i < DV; i++) want[r * DV + i] += p[j] * v[j * DV + i];
    }
    ck_assert_int_eq(kvl_attend_chunk_head(got, q, k, v, &c), KVL_OK);
    for (size_t r = 0; r < S; r++) memmove(got + r * DV, got + r * LDO, DV * sizeof *got);
    kvl_expect_close("band chunk", got, want, S * DV, attend_atol(DK, N, c.scale), 0.0, MIN_COS);
    free(q); free(k); free(v); free(got); free(want); free(p);
}

/* Causal from position 0, a chunk after cached keys (queries from 300, keys from 100), and the same under
 * a window of 150 that hides the oldest keys from the later queries: on 1, 2 and 3 threads, over five
 * groups of four blocks (the last partial), so that every part of three takes groups from both ends. */
START_TEST(test_chunk_head_band_read_from_span_matches_definition)
{
    const swa_span spans[] = {{0, 0, 0}, {300, 100, 0}, {300, 100, 150}};
    const size_t S = 17 * KVL_QUERY_BLOCK + 13;
    const int threads = kvl_threads();
    for (int t = 1; t <= 3; t++) {
        kvl_set_threads(t);
        for (size_t i = 0; i < sizeof spans / sizeof spans[0]; i++) check_band_chunk(spans[i], S, 40 + i);
    }
    kvl_set_threads(threads);
}
END_TEST

/* A NaN in the last key: the definition scores it in the last block only (the keys every earlier block
 * sees stop before it), where adding the mask's −∞ to it still gives NaN, so exactly the last block's
 * rows are NaN; the band read from the span must keep that. */
START_TEST(test_chunk_head_band_masked_nan_poisons_the_rows_the_definition_poisons)
{
    enum { S = 5 * KVL_QUERY_BLOCK + 9 };
    const swa_span span = {0, 0, 0};
    kvl_rng rng;
    kvl_rng_seed(&rng, 77);
    float *q = signed_floats(&rng, S * DK), *k = signed_floats(&rng, S * DK), *v = signed_floats(&rng, S * DV);
    float *got = malloc(S * DV * sizeof *got), *want = malloc(S * DV * sizeof *want);
    ck_assert(got && want);
    k[(S - 1) * DK + 7] = NAN;
    const kvl_chunk_head c = {.S = S, .N = S, .Dk = DK, .Dv = DV, .ldq = DK, .ldo = DV, .scale = 0.158f,
                              .mask = swa_chunk_mask(&span)};
    ck_assert_int_eq(kvl_attend_chunk_head(got, q, k, v, &c), KVL_OK);
    ck_assert_int_eq(kvl_attend_chunk_head_ref(want, q, k, v, &c), KVL_OK);
    for (size_t r = 0; r < S; r++)
        for (size_t i = 0; i < DV; i++)
            ck_assert_msg(!isnan(got[r * DV + i]) == !isnan(want[r * DV + i]), "row %zu: %g, the definition %g", r,
                          got[r * DV + i], want[r * DV + i]);
    ck_assert(isnan(got[(S - 1) * DV]) && !isnan(got[0]));
    free(q); free(k); free(v); free(got); free(want);
}
END_TEST

static void use_cpu(void) { kvl_backend_use(&kvl_backend_cpu); }

Suite *kvl_suite(void)
{
    Suite *s = suite_create("cpu_attend");
    TCase *tc = tcase_create("attend");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_checked_fixture(tc, use_cpu, NULL);
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
    tcase_add_test(tc, test_chunk_head_blocks_split_across_threads_match_definition);
    tcase_add_test(tc, test_chunk_head_band_read_from_span_matches_definition);
    tcase_add_test(tc, test_chunk_head_band_masked_nan_poisons_the_rows_the_definition_poisons);
    suite_add_tcase(s, tc);
    return s;
}
