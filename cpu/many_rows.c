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

/* ---- the blocks both instruction sets share --------------------------------------------------- */

#ifdef KVL_MANY_X86
#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE_AVX2 AVX2 static inline __attribute__((always_inline))
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define INLINE_AVX512 AVX512 static inline __attribute__((always_inline))

/* Broadcast operands per block. */
#define OPERANDS 6

/* The values sweep the keys this many at a time: a strip of 64 value columns over 128 keys is 32 KiB,
 * which stays in L1 while every block of heads reads it (over all 256 keys of a tile it did not, and the
 * product ran 6% slower). */
#define VALUES_KEYS 128

/* One block: C[t][0 … W·mv) (+)= Σ_{s<K} A[s·lda + 0 … W·mv) · B[s·bk + t·bn] for t < nr, C rows ldc
 * apart, W the lanes of a vector. A block that prefetches asks for the line at pf + s·pf_step bytes at
 * step s: one sweep over the rows it is to pull into cache, spread evenly over its K steps. */
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

/* ---- AVX-512 ------------------------------------------------------------------------------------- */

/* The prefetch is one instruction in every step, compiled only into the blocks that make it. A test in
 * every step with a loop over the rows at every 16th, and a loop of 16 steps inside a loop of sweeps,
 * each ran the scores 7 - 8% slower in L2 than steps with no prefetch in them; so did prefetching a
 * block's lines one a step until they were all asked for (the V3 step 57.8 → 62 ms at 32K).
 *
 * The steps go two at a time: a step's 24 multiply-adds take 12 cycles of the two FMA ports, and the
 * loop's own count, pointer and branch, issued beside them, took some of those ports' cycles. In L2 the
 * values ran at 162 → 169 GFLOP/s so, the scores 179 → 182, and V3's step at 32K 60.3 → 57.9 ms. */
INLINE_AVX512 void block_kernel_avx512(const block *b, size_t mv, size_t nr, size_t bk, size_t bn, int add,
                                       int prefetch)
{
    const char *pf = b->pf;
    __m512 c[OPERANDS][4];
#pragma GCC unroll 6
    for (size_t t = 0; t < nr; t++)
#pragma GCC unroll 4
        for (size_t v = 0; v < mv; v++)
            c[t][v] = add ? _mm512_loadu_ps(b->C + t * b->ldc + 16 * v) : _mm512_setzero_ps();
#pragma GCC unroll 2
    for (size_t s = 0; s < b->K; s++) {
        __m512 a[4];
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

/* ---- AVX2 + FMA ----------------------------------------------------------------------------------- */

/* The same block in 256-bit vectors, for CPUs without AVX-512 (first-generation EPYC, most laptops):
 * 2 vectors (16 outputs) by 6 operands, 12 sums, the 2 loaded vectors and a broadcast in the 16
 * registers AVX2 has; each step loads 2 vectors and broadcasts 6 values for 12 FMAs. The step's
 * pointers are kept in registers and moved on, not recomputed from b's fields: with only 12 FMAs a step,
 * the loads of those fields and the products of step and stride took the issue slots the FMAs needed
 * (both products ran at about 0.7 of the rate they run at now, in L2 on one thread). */
INLINE_AVX2 void block_kernel_avx2(const block *b, size_t mv, size_t nr, size_t bk, size_t bn, int add,
                                   int prefetch)
{
    const char *pf = b->pf;
    const float *A = b->A, *B[OPERANDS];
    const size_t lda = b->lda, K = b->K;
    __m256 c[OPERANDS][2];
#pragma GCC unroll 6
    for (size_t t = 0; t < nr; t++) {
        B[t] = b->B + t * bn;
#pragma GCC unroll 2
        for (size_t v = 0; v < mv; v++)
            c[t][v] = add ? _mm256_loadu_ps(b->C + t * b->ldc + 8 * v) : _mm256_setzero_ps();
    }
#pragma GCC unroll 2
    for (size_t s = 0; s < K; s++, A += lda) {
        __m256 a[2];
#pragma GCC unroll 2
        for (size_t v = 0; v < mv; v++) a[v] = _mm256_loadu_ps(A + 8 * v);
        if (prefetch) {
            _mm_prefetch(pf, _MM_HINT_T0);
            pf += b->pf_step;
        }
#pragma GCC unroll 6
        for (size_t t = 0; t < nr; t++) {
            const __m256 x = _mm256_broadcast_ss(B[t] + s * bk);
#pragma GCC unroll 2
            for (size_t v = 0; v < mv; v++) c[t][v] = _mm256_fmadd_ps(a[v], x, c[t][v]);
        }
    }
#pragma GCC unroll 6
    for (size_t t = 0; t < nr; t++)
#pragma GCC unroll 2
        for (size_t v = 0; v < mv; v++) _mm256_storeu_ps(b->C + t * b->ldc + 8 * v, c[t][v]);
}

/* pack_q_avx512 8 query rows at a time. G a multiple of 8. */
AVX2 static void pack_q_avx2(float *qs, const float *q, size_t G, size_t Dk, float scale)
{
    const __m256i rows =
        _mm256_mullo_epi32(_mm256_set_epi32(7, 6, 5, 4, 3, 2, 1, 0), _mm256_set1_epi32((int)Dk));
    const __m256 s = _mm256_set1_ps(scale);
    for (size_t r0 = 0; r0 < G; r0 += 8)
        for (size_t i = 0; i < Dk; i++)
            _mm256_storeu_ps(qs + i * G + r0, _mm256_mul_ps(s, _mm256_i32gather_ps(q + r0 * Dk + i, rows, 4)));
}

/* ---- the loops over a tile, for each instruction set ------------------------------------------- */

/* The block kernel compiled for each shape, 1 … VECTORS vectors by 1 … 6 operands, so that every loop in
 * it has a constant count, and for each product, so that one stride is the constant 1: the scores'
 * operands are keys (one step along a row, rows b->bn apart) and overwrite C, with or without the sweep
 * ahead; the values' are weights (a step's six side by side, steps b->bk apart) and add to it. */
#define BLOCK_CASE(ISA, mv, nr, ...)                                                                           \
    case 8 * (mv) + (nr): block_kernel_##ISA(b, mv, nr, __VA_ARGS__); return;
#define BLOCK_ROW(ISA, mv, ...)                                                                                \
    BLOCK_CASE(ISA, mv, 1, __VA_ARGS__) BLOCK_CASE(ISA, mv, 2, __VA_ARGS__) BLOCK_CASE(ISA, mv, 3, __VA_ARGS__) \
    BLOCK_CASE(ISA, mv, 4, __VA_ARGS__) BLOCK_CASE(ISA, mv, 5, __VA_ARGS__) BLOCK_CASE(ISA, mv, 6, __VA_ARGS__)
#define BLOCK_ROWS_2(ISA, ...) BLOCK_ROW(ISA, 1, __VA_ARGS__) BLOCK_ROW(ISA, 2, __VA_ARGS__)
#define BLOCK_ROWS_4(ISA, ...)                                                                                 \
    BLOCK_ROWS_2(ISA, __VA_ARGS__) BLOCK_ROW(ISA, 3, __VA_ARGS__) BLOCK_ROW(ISA, 4, __VA_ARGS__)
#define BLOCK_RUN(ISA, ATTR, VECTORS, name, ...)                                                               \
    ATTR static void name##_##ISA(const block *b, size_t mv, size_t nr)                                        \
    {                                                                                                          \
        switch (8 * mv + nr) {                                                                                 \
            BLOCK_ROWS_##VECTORS(ISA, __VA_ARGS__)                                                             \
        }                                                                                                      \
    }

/* One instruction set's scores and values over a tile, from its block kernel with VECTORS vectors of
 * LANES floats (many_rows.h):
 *   scores_keys_ISA: keys j0 … j0 + nr − 1 against every head, LANES·VECTORS heads a block. The first
 *     block pulls in these keys' share of t->ahead, a step's share of that at a time: rounded down, so
 *     that the sweep ends inside it, and at most a line, so that it skips no line it passes.
 *   scores_ISA, values_ISA: the two products over the tile. */
#define MANY_LOOPS(ISA, ATTR, LANES, VECTORS)                                                                  \
    BLOCK_RUN(ISA, ATTR, VECTORS, block_keys, 1, b->bn, 0, 0)                                                  \
    BLOCK_RUN(ISA, ATTR, VECTORS, block_keys_ahead, 1, b->bn, 0, 1)                                            \
    BLOCK_RUN(ISA, ATTR, VECTORS, block_weights, b->bk, 1, 1, 0)                                               \
    ATTR static void scores_keys_##ISA(float *st, const float *qs, size_t G, const kvl_many_tile *t, size_t j0, \
                                       size_t nr)                                                              \
    {                                                                                                          \
        block b = {.ldc = G, .lda = G, .B = t->k + j0 * t->ldk, .bk = 1, .bn = t->ldk, .K = t->Dk};           \
        const size_t from = j0 * t->ahead_bytes / t->n, to = (j0 + nr) * t->ahead_bytes / t->n;               \
        if (to > from && t->Dk) {                                                                              \
            b.pf = (const char *)t->ahead + from;                                                              \
            b.pf_step = min_size(64, (to - from) / t->Dk);                                                     \
        }                                                                                                      \
        for (size_t h = 0; h < G; h += (LANES) * (VECTORS)) {                                                  \
            b.C = st + j0 * G + h;                                                                             \
            b.A = qs + h;                                                                                      \
            const size_t mv = min_size(VECTORS, (G - h) / (LANES));                                            \
            if (h == 0 && b.pf)                                                                                \
                block_keys_ahead_##ISA(&b, mv, nr);                                                            \
            else                                                                                               \
                block_keys_##ISA(&b, mv, nr);                                                                  \
        }                                                                                                      \
    }                                                                                                          \
    ATTR static void scores_##ISA(float *st, const float *qs, size_t G, const kvl_many_tile *t)               \
    {                                                                                                          \
        for (size_t j = 0, nr; j < t->n; j += nr) scores_keys_##ISA(st, qs, G, t, j, nr = next_operands(t->n - j)); \
    }                                                                                                          \
    ATTR static void values_##ISA(float *acc, const float *pt, size_t G, const kvl_many_tile *t)              \
    {                                                                                                          \
        block b = {.ldc = t->Dv, .lda = t->ldv, .bk = G, .bn = 1};                                             \
        for (size_t c = 0; c < t->Dv; c += (LANES) * (VECTORS)) {                                              \
            const size_t mv = min_size(VECTORS, (t->Dv - c) / (LANES));                                        \
            for (size_t j = 0; j < t->n; j += VALUES_KEYS) {                                                   \
                b.A = t->v + j * t->ldv + c;                                                                   \
                b.K = min_size(VALUES_KEYS, t->n - j);                                                         \
                for (size_t h = 0, nr; h < G; h += nr) {                                                       \
                    b.C = acc + h * t->Dv + c;                                                                 \
                    b.B = pt + j * G + h;                                                                      \
                    block_weights_##ISA(&b, mv, nr = next_operands(G - h));                                    \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }

/* The functions the two lines below define (the index grep finds them by):
 *   avx512  4 vectors of 16 × 6 operands   block_keys_avx512, block_keys_ahead_avx512,
 *                                          block_weights_avx512, scores_keys_avx512, scores_avx512,
 *                                          values_avx512
 *   avx2    2 vectors of 8 × 6 operands    block_keys_avx2, block_keys_ahead_avx2, block_weights_avx2,
 *                                          scores_keys_avx2, scores_avx2, values_avx2 */
MANY_LOOPS(avx512, AVX512, 16, 4)
MANY_LOOPS(avx2, AVX2, 8, 2)
#endif

/* ---- dispatch ------------------------------------------------------------------------------------- */

/* The kernels' instruction set for a group of G rows and value width Dv: the widest the CPU runs of
 * AVX-512 and AVX2 (formats/isa.h; KVL_ISA=avx2 picks AVX2 on a CPU with both), or baseline for the
 * plain loops. */
static kvf_isa many_isa(size_t G, size_t Dv)
{
#ifdef KVL_MANY_X86
    const kvf_isa isa = kvf_isa_active();
    if (isa >= KVF_ISA_AVX2 && G && G % 16 == 0 && Dv % 16 == 0) return isa;
#else
    (void)G;
    (void)Dv;
#endif
    return KVF_ISA_BASELINE;
}

void kvl_many_pack_q(float *qs, const float *q, size_t G, size_t Dk, float scale)
{
#ifdef KVL_MANY_X86
    const kvf_isa isa = G % 16 == 0 && Dk <= INT32_MAX / 16 ? kvf_isa_active() : KVF_ISA_BASELINE;
    if (isa == KVF_ISA_AVX512) {
        pack_q_avx512(qs, q, G, Dk, scale);
        return;
    }
    if (isa == KVF_ISA_AVX2) {
        pack_q_avx2(qs, q, G, Dk, scale);
        return;
    }
#endif
    pack_q_plain(qs, q, G, Dk, scale);
}

int kvl_many_simd(size_t G, size_t Dv) { return many_isa(G, Dv) != KVF_ISA_BASELINE; }

void kvl_many_scores(float *st, const float *qs, size_t G, const kvl_many_tile *t)
{
    switch (many_isa(G, t->Dv)) {
#ifdef KVL_MANY_X86
    case KVF_ISA_AVX512: scores_avx512(st, qs, G, t); return;
    case KVF_ISA_AVX2: scores_avx2(st, qs, G, t); return;
#endif
    default: kvl_many_scores_plain(st, qs, G, t); return;
    }
}

void kvl_many_values(float *acc, const float *pt, size_t G, const kvl_many_tile *t)
{
    switch (many_isa(G, t->Dv)) {
#ifdef KVL_MANY_X86
    case KVF_ISA_AVX512: values_avx512(acc, pt, G, t); return;
    case KVF_ISA_AVX2: values_avx2(acc, pt, G, t); return;
#endif
    default: kvl_many_values_plain(acc, pt, G, t); return;
    }
}
