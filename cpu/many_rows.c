#include "many_rows.h"

#include <stdint.h>

#include "isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define KVL_MANY_X86 1
#include <immintrin.h>
#endif

/* qs written in order, q read down its columns (a column's G lines stay in L1 for the next 15). */
static void pack_q_plain(float *qs, const float *q, size_t G, size_t Dk, float scale)
{
    for (size_t i = 0; i < Dk; i++)
        for (size_t r = 0; r < G; r++) qs[i * G + r] = scale * q[r * Dk + i];
}

/* ---- the plain loops --------------------------------------------------------------------------- */

void kvl_many_scores_plain(float *st, const float *qs, size_t G, const kvl_many_tile *t)
{
    for (size_t j = 0; j < t->n; j++)
        for (size_t r = 0; r < G; r++) {
            float dot = 0.0f;
            for (size_t i = 0; i < t->Dk; i++) dot += qs[i * G + r] * t->k[j * t->ldk + i];
            st[j * G + r] = dot;
        }
}

void kvl_many_values_plain(float *acc, const float *pt, size_t G, const kvl_many_tile *t)
{
    for (size_t r = 0; r < G; r++)
        for (size_t i = 0; i < t->Dv; i++) {
            float sum = acc[r * t->Dv + i];
            for (size_t j = 0; j < t->n; j++) sum += pt[j * G + r] * t->v[j * t->ldv + i];
            acc[r * t->Dv + i] = sum;
        }
}

/* ---- AVX-512 ------------------------------------------------------------------------------------- */

#ifdef KVL_MANY_X86
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define INLINE_AVX512 AVX512 static inline __attribute__((always_inline))

/* Broadcast operands per block, and vectors of 16 outputs. */
#define OPERANDS 6
#define VECTORS 4
#define BLOCK_WIDTH (16 * VECTORS)

/* The values sweep the keys this many at a time: a strip of 64 value columns over 128 keys is 32 KiB,
 * which stays in L1 while every block of heads reads it (over all 256 keys of a tile it did not, and the
 * product ran 6% slower). */
#define VALUES_KEYS 128

/* One block: C[t][0 … 16·mv) (+)= Σ_{s<K} A[s·lda + 0 … 16·mv) · B[s·bk + t·bn] for t < nr, C rows ldc
 * apart. A block that prefetches asks for the line at pf + s·pf_step bytes at step s: one sweep over
 * the rows it is to pull into cache, spread evenly over its K steps. */
typedef struct {
    float *C;
    size_t ldc;
    const float *A;
    size_t lda;
    const float *B;
    size_t bk, bn; /* elements between operands from one step to the next, and between a step's operands */
    size_t K;
    const char *pf;
    size_t pf_step;
} block;

/* The prefetch is one instruction in every step, compiled only into the blocks that make it. A test in
 * every step with a loop over the rows at every 16th, and a loop of 16 steps inside a loop of sweeps,
 * each ran the scores 7 - 8% slower in L2 than steps with no prefetch in them; so did prefetching a
 * block's lines one a step until they were all asked for (the V3 step 57.8 → 62 ms at 32K).
 *
 * The steps go two at a time: a step's 24 multiply-adds take 12 cycles of the two FMA ports, and the
 * loop's own count, pointer and branch, issued beside them, took some of those ports' cycles. In L2 the
 * values ran at 162 → 169 GFLOP/s so, the scores 179 → 182, and V3's step at 32K 60.3 → 57.9 ms. */
INLINE_AVX512 void block_kernel(const block *b, size_t mv, size_t nr, size_t bk, size_t bn, int add, int prefetch)
{
    const char *pf = b->pf;
    __m512 c[OPERANDS][VECTORS];
#pragma GCC unroll 6
    for (size_t t = 0; t < nr; t++)
#pragma GCC unroll 4
        for (size_t v = 0; v < mv; v++)
            c[t][v] = add ? _mm512_loadu_ps(b->C + t * b->ldc + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 2
    for (size_t s = 0; s < b->K; s++) {
        __m512 a[VECTORS];
#pragma GCC unroll 4
        for (size_t v = 0; v < mv; v++) a[v] = _mm512_loadu_ps(b->A + s * b->lda + 16 * v);
        if (prefetch) {
            _mm_prefetch(pf, _MM_HINT_T0);
            pf += b->pf_step;
        }
#pragma GCC unroll 6
        for (size_t t = 0; t < nr; t++) {
            const __m512 x = _mm512_set1_ps(b->B[s * bk + t * bn]);
#pragma GCC unroll 4
            for (size_t v = 0; v < mv; v++) c[t][v] = _mm512_fmadd_ps(a[v], x, c[t][v]);
        }
    }
#pragma GCC unroll 6
    for (size_t t = 0; t < nr; t++)
#pragma GCC unroll 4
        for (size_t v = 0; v < mv; v++) _mm512_storeu_ps(b->C + t * b->ldc + 16 * v, c[t][v]);
}

/* The block kernel compiled for each shape, 1 … 4 vectors by 1 … 6 operands, so that every loop in it
 * has a constant count, and for each product, so that one stride is the constant 1: the scores' operands
 * are keys (one step along a row, rows b->bn apart) and overwrite C, with or without the sweep ahead;
 * the values' are weights (a step's six side by side, steps b->bk apart) and add to it. */
#define BLOCK_CASE(mv, nr, ...)                                                                                \
    case 8 * (mv) + (nr): block_kernel(b, mv, nr, __VA_ARGS__); return;
#define BLOCK_ROW(mv, ...)                                                                                     \
    BLOCK_CASE(mv, 1, __VA_ARGS__) BLOCK_CASE(mv, 2, __VA_ARGS__) BLOCK_CASE(mv, 3, __VA_ARGS__)               \
    BLOCK_CASE(mv, 4, __VA_ARGS__) BLOCK_CASE(mv, 5, __VA_ARGS__) BLOCK_CASE(mv, 6, __VA_ARGS__)
#define BLOCK_RUN(name, ...)                                                                                   \
    AVX512 static void name(const block *b, size_t mv, size_t nr)                                              \
    {                                                                                                          \
        switch (8 * mv + nr) {                                                                                 \
            BLOCK_ROW(1, __VA_ARGS__)                                                                          \
            BLOCK_ROW(2, __VA_ARGS__)                                                                          \
            BLOCK_ROW(3, __VA_ARGS__)                                                                          \
            BLOCK_ROW(4, __VA_ARGS__)                                                                          \
        }                                                                                                      \
    }
BLOCK_RUN(block_keys, 1, b->bn, 0, 0)
BLOCK_RUN(block_keys_ahead, 1, b->bn, 0, 1)
BLOCK_RUN(block_weights, b->bk, 1, 1, 0)

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* Operands for the next block when `left` remain: as few blocks of at most 6 as they need, as even as
 * they go (128 heads: 18 blocks of 6, then 4 of 5), so that no last block is left with one or two. A
 * 64-column block over the last 2 of 128 heads has 8 sums, too few chains to keep both FMA ports busy:
 * the values ran 6% slower for it in L2. */
static size_t next_operands(size_t left)
{
    const size_t blocks = (left + OPERANDS - 1) / OPERANDS;
    return (left + blocks - 1) / blocks;
}

/* Keys j0 … j0 + nr − 1 against every head, 64 heads a block. The first block pulls in these keys'
 * share of t->ahead, a step's share of that at a time: rounded down, so that the sweep ends inside it,
 * and at most a line, so that it skips no line it passes. */
AVX512 static void scores_keys(float *st, const float *qs, size_t G, const kvl_many_tile *t, size_t j0, size_t nr)
{
    block b = {.ldc = G, .lda = G, .B = t->k + j0 * t->ldk, .bk = 1, .bn = t->ldk, .K = t->Dk};
    const size_t from = j0 * t->ahead_bytes / t->n, to = (j0 + nr) * t->ahead_bytes / t->n;
    if (to > from && t->Dk) {
        b.pf = (const char *)t->ahead + from;
        b.pf_step = min_size(64, (to - from) / t->Dk);
    }
    for (size_t h = 0; h < G; h += BLOCK_WIDTH) {
        b.C = st + j0 * G + h;
        b.A = qs + h;
        const size_t mv = min_size(VECTORS, (G - h) / 16);
        if (h == 0 && b.pf)
            block_keys_ahead(&b, mv, nr);
        else
            block_keys(&b, mv, nr);
    }
}

AVX512 static void scores_avx512(float *st, const float *qs, size_t G, const kvl_many_tile *t)
{
    for (size_t j = 0, nr; j < t->n; j += nr) scores_keys(st, qs, G, t, j, nr = next_operands(t->n - j));
}

AVX512 static void values_avx512(float *acc, const float *pt, size_t G, const kvl_many_tile *t)
{
    block b = {.ldc = t->Dv, .lda = t->ldv, .bk = G, .bn = 1};
    for (size_t c = 0; c < t->Dv; c += BLOCK_WIDTH) {
        const size_t mv = min_size(VECTORS, (t->Dv - c) / 16);
        for (size_t j = 0; j < t->n; j += VALUES_KEYS) {
            b.A = t->v + j * t->ldv + c;
            b.K = min_size(VALUES_KEYS, t->n - j);
            for (size_t h = 0, nr; h < G; h += nr) {
                b.C = acc + h * t->Dv + c;
                b.B = pt + j * G + h;
                block_weights(&b, mv, nr = next_operands(G - h));
            }
        }
    }
}

/* pack_q_plain 16 query rows at a time, each column's 16 values gathered into one vector: writing down
 * the columns of qs a float at a time had stored lines scattered a row apart (MLA's 128 × 576 took 123
 * µs so; V4's 64 × 512, 50 µs, a third of its 128-row window step). G a multiple of 16. */
AVX512 static void pack_q_avx512(float *qs, const float *q, size_t G, size_t Dk, float scale)
{
    const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                            _mm512_set1_epi32((int)Dk));
    const __m512 s = _mm512_set1_ps(scale);
    for (size_t r0 = 0; r0 < G; r0 += 16)
        for (size_t i = 0; i < Dk; i++)
            _mm512_storeu_ps(qs + i * G + r0, _mm512_mul_ps(s, _mm512_i32gather_ps(rows, q + r0 * Dk + i, 4)));
}
#endif

/* ---- dispatch ------------------------------------------------------------------------------------- */

void kvl_many_pack_q(float *qs, const float *q, size_t G, size_t Dk, float scale)
{
#ifdef KVL_MANY_X86
    if (kvf_isa_active() >= KVF_ISA_AVX512 && G % 16 == 0 && Dk <= INT32_MAX / 16) {
        pack_q_avx512(qs, q, G, Dk, scale);
        return;
    }
#endif
    pack_q_plain(qs, q, G, Dk, scale);
}

int kvl_many_simd(size_t G, size_t Dv)
{
#ifdef KVL_MANY_X86
    return kvf_isa_active() >= KVF_ISA_AVX512 && G && G % 16 == 0 && Dv % 16 == 0;
#else
    (void)G;
    (void)Dv;
    return 0;
#endif
}

void kvl_many_scores(float *st, const float *qs, size_t G, const kvl_many_tile *t)
{
#ifdef KVL_MANY_X86
    if (kvl_many_simd(G, t->Dv)) {
        scores_avx512(st, qs, G, t);
        return;
    }
#endif
    kvl_many_scores_plain(st, qs, G, t);
}

void kvl_many_values(float *acc, const float *pt, size_t G, const kvl_many_tile *t)
{
#ifdef KVL_MANY_X86
    if (kvl_many_simd(G, t->Dv)) {
        values_avx512(acc, pt, G, t);
        return;
    }
#endif
    kvl_many_values_plain(acc, pt, G, t);
}
