/* Decode attention's definition in double, and the cases the attention suites share: the oracle of
 * tests/test_core_attend.c (ref/core/attend.h's definition) and tests/test_cpu_attend.c (the CPU
 * backend). Per head: every score, softmax (with the sink in the denominator), the weighted sum of
 * values, over rows whose keys and values overlap (MLA's c_kv inside [c_kv | k_rope]) or are separate
 * ranges, in one group or several, each with its own K and V columns (GQA's [K | V] row). */
#ifndef KVL_TESTS_ORACLE_ATTEND_ROWS_H
#define KVL_TESTS_ORACLE_ATTEND_ROWS_H

#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "attend.h"
#include "backend.h"
#include "common.h"
#include "element.h"
#include "rng.h"
#include "softmax.h"
#include "softmax_cpu.h"
#include <string.h>
#include "status.h"

#define U_F32 (FLT_EPSILON / 2)

/* Each score is a Dk-term dot product of values in [−1, 1], scaled: its rounding error is at most
 * γ_Dk·Dk·scale ≈ Dk²·scale·u. A weight exp(s − m)/l carries that twice (s and m), the exponential's
 * own error (KVL_EXP_F32_ULP, in the weight and again in l) and γ_N from the sum l; the output
 * Σ_j p_j v_j (|v| ≤ 1, Σ p ≤ 1) adds γ_N more. Plus a few roundings of the final scaling. */
static inline double attend_atol(size_t Dk, size_t N, double scale)
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
static inline shape mla_like(size_t Hq, size_t N) { return (shape){Hq, N, {N, STRIDE, 3, DK, 5, DV, 1}, 0.158f}; }
static inline shape gqa_like(size_t Hq, size_t N)
{
    const size_t G = Hq / 3;
    return (shape){Hq, N, {N, 3 + G * (DK + DV) + 3, 3, DK, 3 + G * DK, DV, G}, 0.158f};
}

/* want[Hq][Dv]: the definition in double over rows[N][stride] (float32 values), query row h reading
 * group h / (Hq/groups)'s columns. */
static inline void oracle(double *want, const float *q, size_t Hq, const float *rows, const kvl_attend_rows *r,
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
static inline float *signed_floats(kvl_rng *rng, size_t n) { return kvl_uniform_floats(rng, n, -1.0, 1.0); }

/* o[Hq][Dv] by the backend in use over float32 rows[N][stride] (NULL: none) or their bf16 codes. */
static inline int attend_f32(float *o, const float *q, size_t Hq, const float *rows, const kvl_attend_rows *r,
                             float scale, const float *sigma)
{
    const kvl_row_tiles view = kvl_row_tiles_f32(rows, r->N, r->stride);
    return kvl_attend(o, q, Hq, rows ? &view : NULL, r, scale, sigma, NULL);
}

static inline int attend_bf16(float *o, const float *q, size_t Hq, const uint16_t *codes, const kvl_attend_rows *r,
                              float scale, const float *sigma)
{
    const kvl_row_tiles view = kvl_row_tiles_bf16(codes, r->N, r->stride);
    return kvl_attend(o, q, Hq, &view, r, scale, sigma, NULL);
}

/* The backend in use against the oracle over float32 rows, then over the same rows rounded to bf16 (read
 * as bf16 codes); where the backend is not the definition, its output also against kvl_attend_ref's. */
static inline void check_shape(const shape *sh, const float *sigma, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    const kvl_attend_rows *r = &sh->r;
    const size_t n_out = sh->Hq * r->Dv;
    float *q = signed_floats(&rng, sh->Hq * r->Dk), *rows = signed_floats(&rng, sh->N * r->stride);
    uint16_t *codes = malloc((sh->N * r->stride + 1) * sizeof *codes);
    float *got = malloc(n_out * sizeof *got), *def = malloc(n_out * sizeof *def);
    double *want = malloc(n_out * sizeof *want), *def_d = malloc(n_out * sizeof *def_d);
    ck_assert(codes && got && def && want && def_d);
    const double atol = attend_atol(r->Dk, sh->N, sh->scale);
    const char *backend = kvl_backend_in_use()->name;
    char what[160];
    for (int bf16 = 0; bf16 <= 1; bf16++) {
        if (bf16) {
            kvf_bf16_encode_n(codes, rows, sh->N * r->stride);
            kvf_bf16_decode_n(rows, codes, sh->N * r->stride);
        }
        oracle(want, q, sh->Hq, rows, r, sh->scale, sigma);
        ck_assert_int_eq(bf16 ? attend_bf16(got, q, sh->Hq, codes, r, sh->scale, sigma)
                              : attend_f32(got, q, sh->Hq, rows, r, sh->scale, sigma), KVL_OK);
        snprintf(what, sizeof what, "%s, %s rows, Hq %zu, N %zu, v_off %zu%s", backend, bf16 ? "bf16" : "f32", sh->Hq,
                 sh->N, r->v_off, sigma ? ", sinks" : "");
        kvl_expect_close(what, got, want, n_out, atol, 0.0, MIN_COS);
        if (kvl_backend_in_use() == &kvl_backend_ref) continue;
        const kvl_row_tiles view = bf16 ? kvl_row_tiles_bf16(codes, sh->N, r->stride)
                                        : kvl_row_tiles_f32(rows, sh->N, r->stride);
        ck_assert_int_eq(kvl_attend_ref(def, q, sh->Hq, &view, r, sh->scale, sigma, NULL), KVL_OK);
        for (size_t i = 0; i < n_out; i++) def_d[i] = def[i];
        snprintf(what, sizeof what, "%s against the definition, %s rows, Hq %zu, N %zu", backend,
                 bf16 ? "bf16" : "f32", sh->Hq, sh->N);
        kvl_expect_close(what, got, def_d, n_out, 2.0 * atol, 0.0, MIN_COS);
    }
    free(q);
    free(rows);
    free(codes);
    free(got);
    free(def);
    free(want);
    free(def_d);
}

/* A chunk's mask as a kvl_block_mask: the rows of table[S][N] a block asks for, its first seen[block]
 * columns (the table masks every later column of the block's rows). */
typedef struct {
    const float *table;
    const size_t *seen;
    size_t N;
} table_mask;

static inline size_t mask_from_table(float *mask, size_t first, size_t b, size_t N, const void *ctx)
{
    const table_mask *t = ctx;
    const size_t n = t->seen[first / KVL_QUERY_BLOCK];
    if (n > N) return n;
    for (size_t i = 0; i < b; i++) memcpy(mask + i * n, t->table + (first + i) * t->N, n * sizeof *mask);
    return n;
}

/* kvl_attend_chunk_head, by the backend in use, against the definition in double: 5·KVL_QUERY_BLOCK + 7 queries (six
 * blocks, the last partial: more than one of the CPU backend's groups of four) over 731 keys, query and
 * output rows inside wider rows, under a mask that hides a random third of the keys, every key past 400
 * in the second block, past 250 in the fourth and past 600 in the sixth (which its mask function reports,
 * so those blocks score only those keys) and every key in query 3 (its output is 0); then a
 * NaN key makes every row NaN, as kvl_softmax_f32 over the masked scores; and a block mask wider than
 * the keys is an error. */
static inline void check_chunk_head(void)
{
    enum { S = 5 * KVL_QUERY_BLOCK + 7, N = 731, LDQ = DK + 5, LDO = DV + 3 };
    const size_t seen[6] = {N, 400, N, 250, N, 600};
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
                              .mask = {.rows = mask_from_table, .ctx = &tm}};
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
    ck_assert_int_eq(kvl_attend_chunk_head(got, q, k, v, &c), KVL_OK);
    for (size_t r = 0; r < S; r++) memmove(got + r * DV, got + r * LDO, DV * sizeof *got);
    kvl_expect_close("chunk head", got, want, S * DV, attend_atol(DK, N, c.scale), 0.0, MIN_COS);
    for (size_t i = 0; i < DV; i++) ck_assert_msg(got[3 * DV + i] == 0.0f, "masked row: %g", got[3 * DV + i]);

    k[50 * DK + 1] = NAN; /* an additive mask cannot hide it: NaN + (−∞) is NaN, in every row */
    ck_assert_int_eq(kvl_attend_chunk_head(got, q, k, v, &c), KVL_OK);
    for (size_t r = 0; r < S; r++)
        for (size_t i = 0; i < DV; i++) ck_assert_msg(isnan(got[r * LDO + i]), "row %zu is %g, not NaN", r, got[r * LDO + i]);

    kvl_chunk_head short_keys = c;
    short_keys.N = 500; /* the first block still reports 731 */
    ck_assert_int_eq(kvl_attend_chunk_head(got, q, k, v, &short_keys), KVL_EINVAL);
    ck_assert_ptr_nonnull(strstr(kvl_error(), "queries 0 … 63 sees 731 of 500 keys"));
    free(q); free(k); free(v); free(table); free(got); free(want); free(p);
}

#endif
