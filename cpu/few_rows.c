#include "few_rows.h"

#include "element.h"
#include "isa.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define KVL_FEW_X86 1
#include <immintrin.h>
#endif

/* ---- the plain loops --------------------------------------------------------------------------- */

static float value_at(const kvl_few_tile *t, const void *base, size_t ld, size_t j, size_t i)
{
    return t->bf16 ? kvf_bf16_decode(((const uint16_t *)base)[j * ld + i]) : ((const float *)base)[j * ld + i];
}

void kvl_few_scores_plain(float *s, const float *q, size_t G, const kvl_few_tile *t, float scale)
{
    for (size_t r = 0; r < G; r++)
        for (size_t j = 0; j < t->n; j++) {
            float dot = 0.0f;
            for (size_t i = 0; i < t->Dk; i++) dot += q[r * t->Dk + i] * value_at(t, t->k, t->ldk, j, i);
            s[r * t->n + j] = scale * dot;
        }
}

void kvl_few_values_plain(float *acc, const float *p, size_t G, const kvl_few_tile *t)
{
    for (size_t r = 0; r < G; r++)
        for (size_t j = 0; j < t->n; j++)
            for (size_t i = 0; i < t->Dv; i++) acc[r * t->Dv + i] += p[r * t->n + j] * value_at(t, t->v, t->ldv, j, i);
}

/* ---- AVX2 + FMA ----------------------------------------------------------------------------------- */

#ifdef KVL_FEW_X86
#define AVX2 __attribute__((target("avx2,fma")))
#define INLINE_AVX2 AVX2 static inline __attribute__((always_inline))

/* Keys this far ahead are asked for while a key is scored: the group's 512 bytes of a 4 KiB or 8 KiB row
 * are a short run per page, which the hardware prefetcher does not follow. Past the tile's end they are
 * the tile's next keys (kvl_few_tile's next_k), so that a group's first keys are not left to miss every
 * cache: on the 67B's step at 32K, one thread, f32 27.2 → 24.3 ms and bf16 18.9 → 17.1 (8 keys ahead
 * within the tile only before; 8, 12 and 16 with the next keys measured alike). Pulling in the next tile's
 * whole rows instead, in order, an even share with each block of keys (as the many-row kernels do), was far
 * slower: 23.4 → 34.0 ms f32 and 15.9 → 23.6 bf16, with the L2 hint alike. */
#define AHEAD 12

/* Each pass of the values over a tile reads a strip of 24 columns from every value row. The rows
 * are 4 or 8 KiB apart, so they share a few L1 sets and the strip fetched for the scores has left L1
 * by then: a pass asks for the strip this many keys ahead itself (on the 67B's step, 4 measured 15%
 * faster than none and the best of 2 to 16). */
#define VALUES_AHEAD 4

INLINE_AVX2 __m256 load8(const void *base, size_t at, int bf16)
{
    if (!bf16) return _mm256_loadu_ps((const float *)base + at);
    const __m128i codes = _mm_loadu_si128((const __m128i *)((const uint16_t *)base + at));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(codes), 16));
}

/* [Σa0, Σa1, …, Σa7]: the eight sums of eight vectors */
INLINE_AVX2 __m256 sum8(const __m256 a[8])
{
    const __m256 s01 = _mm256_hadd_ps(a[0], a[1]), s23 = _mm256_hadd_ps(a[2], a[3]);
    const __m256 s45 = _mm256_hadd_ps(a[4], a[5]), s67 = _mm256_hadd_ps(a[6], a[7]);
    const __m256 lo = _mm256_hadd_ps(s01, s23), hi = _mm256_hadd_ps(s45, s67);
    return _mm256_add_ps(_mm256_permute2f128_ps(lo, hi, 0x20), _mm256_permute2f128_ps(lo, hi, 0x31));
}

/* s[R][J] (rows lds apart) = scale · q[R][Dk] · K[J][Dk]ᵀ, keys from j0, q packed in runs of 8 columns
 * (kvl_few_pack_q: row r's run at q + 8·r, runs ldq apart); R·J ≤ 12 (twelve sums and three keys in
 * registers: twelve chains hide the FMA's latency, and q is read from L1 by the FMA). */
INLINE_AVX2 void scores_block_avx2(float *s, size_t lds, const float *q, size_t ldq, const kvl_few_tile *t,
                                   size_t j0, size_t R, size_t J, float scale, int bf16)
{
    __m256 a[16], k[3];
#pragma GCC unroll 16
    for (size_t i = 0; i < 16; i++) a[i] = _mm256_setzero_ps();
    for (size_t c = 0; c < t->Dk; c += 8, q += ldq) {
#pragma GCC unroll 3
        for (size_t j = 0; j < J; j++) k[j] = load8(t->k, (j0 + j) * t->ldk + c, bf16);
#pragma GCC unroll 4
        for (size_t r = 0; r < R; r++) {
            const __m256 qr = _mm256_loadu_ps(q + 8 * r);
#pragma GCC unroll 3
            for (size_t j = 0; j < J; j++) a[r * J + j] = _mm256_fmadd_ps(qr, k[j], a[r * J + j]);
        }
    }
    float out[16];
    const __m256 sc = _mm256_set1_ps(scale);
    _mm256_storeu_ps(out, _mm256_mul_ps(sc, sum8(a)));
    if (R * J > 8) _mm256_storeu_ps(out + 8, _mm256_mul_ps(sc, sum8(a + 8)));
    for (size_t r = 0; r < R; r++)
        for (size_t j = 0; j < J; j++) s[r * lds + j0 + j] = out[r * J + j];
}

INLINE_AVX2 void fetch_next(const kvl_few_tile *t, size_t j, size_t elt)
{
    const char *k = (const char *)t->next_k + j * t->ldk * elt, *v = (const char *)t->next_v + j * t->ldv * elt;
    for (size_t b = 0; b < t->Dk * elt; b += 64) __builtin_prefetch(k + b);
    for (size_t b = 0; b < t->Dv * elt; b += 64) __builtin_prefetch(v + b);
}

/* The key and value rows of key j into cache (the group's columns only). */
INLINE_AVX2 void fetch_key(const kvl_few_tile *t, size_t j, size_t elt)
{
    const char *k = (const char *)t->k + j * t->ldk * elt, *v = (const char *)t->v + j * t->ldv * elt;
    for (size_t b = 0; b < t->Dk * elt; b += 64) __builtin_prefetch(k + b);
    for (size_t b = 0; b < t->Dv * elt; b += 64) __builtin_prefetch(v + b);
}

/* Keys j + AHEAD … j + AHEAD + keys − 1 into cache, past the tile's end the next ones: what a block of keys
 * from j asks for before it is scored. */
INLINE_AVX2 void fetch_ahead(const kvl_few_tile *t, size_t j, size_t keys, size_t elt)
{
    for (size_t f = j + AHEAD; f < j + AHEAD + keys; f++) {
        if (f < t->n) fetch_key(t, f, elt);
        else if (f - t->n < t->next_n) fetch_next(t, f - t->n, elt);
    }
}

/* acc[R][8·C] (rows Dv apart, from column c0) += p[R][n] · V[n][c0 … c0 + 8·C); R·C ≤ 12 (twelve
 * chains, as the scores). */
INLINE_AVX2 void values_block_avx2(float *acc, const float *p, const kvl_few_tile *t, size_t c0, size_t R,
                                   size_t C, int bf16)
{
    __m256 a[12], v[3];
#pragma GCC unroll 4
    for (size_t r = 0; r < R; r++)
#pragma GCC unroll 3
        for (size_t c = 0; c < C; c++) a[r * C + c] = _mm256_loadu_ps(acc + r * t->Dv + c0 + 8 * c);
    const size_t elt = bf16 ? sizeof(uint16_t) : sizeof(float);
    for (size_t j = 0; j < t->n; j++) {
        if (j + VALUES_AHEAD < t->n) {
            const char *ahead = (const char *)t->v + ((j + VALUES_AHEAD) * t->ldv + c0) * elt;
            __builtin_prefetch(ahead);
            __builtin_prefetch(ahead + 8 * C * elt - 1);
        }
#pragma GCC unroll 3
        for (size_t c = 0; c < C; c++) v[c] = load8(t->v, j * t->ldv + c0 + 8 * c, bf16);
#pragma GCC unroll 4
        for (size_t r = 0; r < R; r++) {
            const __m256 w = _mm256_broadcast_ss(p + r * t->n + j);
#pragma GCC unroll 3
            for (size_t c = 0; c < C; c++) a[r * C + c] = _mm256_fmadd_ps(w, v[c], a[r * C + c]);
        }
    }
#pragma GCC unroll 4
    for (size_t r = 0; r < R; r++)
#pragma GCC unroll 3
        for (size_t c = 0; c < C; c++) _mm256_storeu_ps(acc + r * t->Dv + c0 + 8 * c, a[r * C + c]);
}

/* ---- AVX-512 ------------------------------------------------------------------------------------- */

/* The same two products in 512-bit vectors, a block of eight query rows at a time (few_rows.h). */
#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define INLINE_AVX512 AVX512 static inline __attribute__((always_inline))

/* v held in a register: the empty asm hides its value, so gcc cannot fold its load into each instruction
 * that uses it, as it otherwise does: a query row's vector was loaded once per key it meets (the scores'
 * FMAs all took a 64-byte memory operand, and these loads, not the FMAs, set their pace) and a word of
 * bf16 codes twice. On the 67B's shape in L2 the bf16 scores took 26 ns a key instead of 33, float32
 * 31 instead of 36; the products and their order are the same. */
#define IN_REGISTER(v) __asm__("" : "+v"(v))

INLINE_AVX512 __m512 load16(const void *base, size_t at, int bf16)
{
    if (!bf16) return _mm512_loadu_ps((const float *)base + at);
    const __m256i codes = _mm256_loadu_si256((const __m256i *)((const uint16_t *)base + at));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(codes), 16));
}

/* [Σa0, Σa1, …, Σa15]: the sixteen sums of sixteen vectors, by halving: each step adds pairs of
 * vectors' halves (within 128-bit lanes, then across them), so 16 sums cost 15 additions and 30
 * shuffles, not 16 separate reductions. */
INLINE_AVX512 __m512 sum16(const __m512 a[16])
{
    __m512 b[8], c[4], d[2];
#pragma GCC unroll 8
    for (size_t m = 0; m < 8; m++) /* lane i of b[m]: a[2m] (even i) and a[2m+1] (odd i), half summed */
        b[m] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * m], a[2 * m + 1]), _mm512_unpackhi_ps(a[2 * m], a[2 * m + 1]));
#pragma GCC unroll 4
    for (size_t m = 0; m < 4; m++) { /* each 128-bit lane of c[m]: a[4m … 4m+3], partly summed */
        const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(b[2 * m]), _mm512_castps_pd(b[2 * m + 1]));
        const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(b[2 * m]), _mm512_castps_pd(b[2 * m + 1]));
        c[m] = _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi));
    }
#pragma GCC unroll 2
    for (size_t m = 0; m < 2; m++) /* lanes of d[m]: c[2m] (lanes 0, 1) and c[2m+1] (2, 3), half summed */
        d[m] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * m], c[2 * m + 1], 0x44),
                             _mm512_shuffle_f32x4(c[2 * m], c[2 * m + 1], 0xEE));
    return _mm512_add_ps(_mm512_shuffle_f32x4(d[0], d[1], 0x88), _mm512_shuffle_f32x4(d[0], d[1], 0xDD));
}

/* s[r][j0 + j] (rows lds apart) = scale · Σ a[2r + j], for r < R ≤ 8 and j < J ≤ 2: a block's scores. */
INLINE_AVX512 void store_scores16(float *s, size_t lds, size_t j0, size_t R, size_t J, const __m512 a[16],
                                  float scale)
{
    float out[16];
    _mm512_storeu_ps(out, _mm512_mul_ps(_mm512_set1_ps(scale), sum16(a)));
    for (size_t r = 0; r < R; r++)
        for (size_t j = 0; j < J; j++) s[r * lds + j0 + j] = out[2 * r + j];
}

/* s[R][J] (rows lds apart) = scale · q[R][Dk] · K[J][Dk]ᵀ, keys from j0, q packed in runs of 16 columns
 * (row r's at q + 16·r, runs ldq apart); R ≤ 8, J ≤ 2 (sixteen sums; each query row's 16 values are
 * loaded once a step for both keys). */
INLINE_AVX512 void scores_block_avx512(float *s, size_t lds, const float *q, size_t ldq, const kvl_few_tile *t,
                                       size_t j0, size_t R, size_t J, float scale, int bf16)
{
    __m512 a[16], k[2];
#pragma GCC unroll 16
    for (size_t i = 0; i < 16; i++) a[i] = _mm512_setzero_ps();
    for (size_t c = 0; c < t->Dk; c += 16, q += ldq) {
#pragma GCC unroll 2
        for (size_t j = 0; j < J; j++) k[j] = load16(t->k, (j0 + j) * t->ldk + c, bf16);
#pragma GCC unroll 8
        for (size_t r = 0; r < R; r++) {
            __m512 qr = _mm512_loadu_ps(q + 16 * r);
            IN_REGISTER(qr);
#pragma GCC unroll 2
            for (size_t j = 0; j < J; j++) a[2 * r + j] = _mm512_fmadd_ps(qr, k[j], a[2 * r + j]);
        }
    }
    store_scores16(s, lds, j0, R, J, a, scale);
}

/* acc[R][16·C] (rows Dv apart, from column c0) += p[R][n] · V[n][c0 … c0 + 16·C); R·C ≤ 24. */
INLINE_AVX512 void values_block_avx512(float *acc, const float *p, const kvl_few_tile *t, size_t c0, size_t R,
                                       size_t C, int bf16)
{
    __m512 a[24], v[3];
#pragma GCC unroll 8
    for (size_t r = 0; r < R; r++)
#pragma GCC unroll 3
        for (size_t c = 0; c < C; c++) a[r * C + c] = _mm512_loadu_ps(acc + r * t->Dv + c0 + 16 * c);
    const size_t elt = bf16 ? sizeof(uint16_t) : sizeof(float);
    for (size_t j = 0; j < t->n; j++) {
        if (j + VALUES_AHEAD < t->n) {
            const char *ahead = (const char *)t->v + ((j + VALUES_AHEAD) * t->ldv + c0) * elt;
            for (size_t b = 0; b < 16 * C * elt; b += 64) __builtin_prefetch(ahead + b);
        }
#pragma GCC unroll 3
        for (size_t c = 0; c < C; c++) v[c] = load16(t->v, j * t->ldv + c0 + 16 * c, bf16);
#pragma GCC unroll 8
        for (size_t r = 0; r < R; r++) {
            const __m512 w = _mm512_set1_ps(p[r * t->n + j]);
#pragma GCC unroll 3
            for (size_t c = 0; c < C; c++) a[r * C + c] = _mm512_fmadd_ps(w, v[c], a[r * C + c]);
        }
    }
#pragma GCC unroll 8
    for (size_t r = 0; r < R; r++)
#pragma GCC unroll 3
        for (size_t c = 0; c < C; c++) _mm512_storeu_ps(acc + r * t->Dv + c0 + 16 * c, a[r * C + c]);
}

/* bf16 rows a pair of columns at a time: 32 codes loaded as one vector of 16 words, the even columns
 * widened by a shift (the code to the high half) and the odd ones by a mask (already there), two
 * instructions for 32 values where load16 spends four. The queries are read de-interleaved (each run of
 * 32 packed as its 16 even columns, then its 16 odd ones), the accumulators held de-interleaved and
 * interleaved again as they are stored. */
INLINE_AVX512 void load_pairs(__m512 *even, __m512 *odd, const uint16_t *codes)
{
    __m512i w = _mm512_loadu_si512(codes);
    IN_REGISTER(w);
    *even = _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
    *odd = _mm512_castsi512_ps(_mm512_and_si512(w, _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* scores_block_avx512 over bf16 rows in pairs, q packed in de-interleaved runs of 32 (row r's at
 * q + 32·r, runs ldq apart); Dk a multiple of 32. */
INLINE_AVX512 void scores_block_avx512p(float *s, size_t lds, const float *q, size_t ldq, const kvl_few_tile *t,
                                        size_t j0, size_t R, size_t J, float scale, int bf16)
{
    (void)bf16;
    __m512 a[16], ke[2], ko[2];
#pragma GCC unroll 16
    for (size_t i = 0; i < 16; i++) a[i] = _mm512_setzero_ps();
    for (size_t c = 0; c < t->Dk; c += 32, q += ldq) {
#pragma GCC unroll 2
        for (size_t j = 0; j < J; j++) load_pairs(&ke[j], &ko[j], (const uint16_t *)t->k + (j0 + j) * t->ldk + c);
#pragma GCC unroll 8
        for (size_t r = 0; r < R; r++) {
            __m512 qe = _mm512_loadu_ps(q + 32 * r), qo = _mm512_loadu_ps(q + 32 * r + 16);
            IN_REGISTER(qe);
            IN_REGISTER(qo);
#pragma GCC unroll 2
            for (size_t j = 0; j < J; j++)
                a[2 * r + j] = _mm512_fmadd_ps(qo, ko[j], _mm512_fmadd_ps(qe, ke[j], a[2 * r + j]));
        }
    }
    store_scores16(s, lds, j0, R, J, a, scale);
}

/* values_block_avx512 over bf16 rows in pairs: acc[R][32] (from column c0) += p · V[n][c0 … c0 + 32), the
 * run held as its even and odd halves (16 sums for 8 rows); C is 1, one run. */
INLINE_AVX512 void values_block_avx512p(float *acc, const float *p, const kvl_few_tile *t, size_t c0, size_t R,
                                        size_t C, int bf16)
{
    (void)C;
    (void)bf16;
    const __m512i evens = _mm512_set_epi32(30, 28, 26, 24, 22, 20, 18, 16, 14, 12, 10, 8, 6, 4, 2, 0);
    const __m512i odds = _mm512_set_epi32(31, 29, 27, 25, 23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
    const __m512i lows = _mm512_set_epi32(23, 7, 22, 6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
    const __m512i highs = _mm512_set_epi32(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8);
    __m512 ae[8], ao[8];
#pragma GCC unroll 8
    for (size_t r = 0; r < R; r++) {
        const float *x = acc + r * t->Dv + c0;
        const __m512 lo = _mm512_loadu_ps(x), hi = _mm512_loadu_ps(x + 16);
        ae[r] = _mm512_permutex2var_ps(lo, evens, hi);
        ao[r] = _mm512_permutex2var_ps(lo, odds, hi);
    }
    const uint16_t *v = (const uint16_t *)t->v + c0;
    for (size_t j = 0; j < t->n; j++) {
        if (j + VALUES_AHEAD < t->n) __builtin_prefetch(v + (j + VALUES_AHEAD) * t->ldv);
        __m512 ve, vo;
        load_pairs(&ve, &vo, v + j * t->ldv);
#pragma GCC unroll 8
        for (size_t r = 0; r < R; r++) {
            const __m512 w = _mm512_set1_ps(p[r * t->n + j]);
            ae[r] = _mm512_fmadd_ps(w, ve, ae[r]);
            ao[r] = _mm512_fmadd_ps(w, vo, ao[r]);
        }
    }
#pragma GCC unroll 8
    for (size_t r = 0; r < R; r++) {
        float *x = acc + r * t->Dv + c0;
        _mm512_storeu_ps(x, _mm512_permutex2var_ps(ae[r], lows, ao[r]));
        _mm512_storeu_ps(x + 16, _mm512_permutex2var_ps(ae[r], highs, ao[r]));
    }
}

/* ---- the loops around the blocks ---------------------------------------------------------------- */

/* One instruction set's loops around its two block kernels (scores_block_ISA, values_block_ISA), and the
 * four functions the dispatch calls (scores_ISA_f32, scores_ISA_bf16, values_ISA_f32, values_ISA_bf16):
 * query rows ROWS at a time, then one; keys KEYS at a time, then one, the first rows' pass asking for the
 * keys AHEAD ahead; value columns COLS at a time, then WIDTH (one vector), the queries packed in runs of
 * WIDTH columns. */
#define FEW_LOOPS(ISA, ATTR, INLINE, ROWS, KEYS, COLS, WIDTH)                                                     \
    INLINE void scores_rows_##ISA(float *s, const float *q, size_t G, size_t r0, size_t R, const kvl_few_tile *t, \
                                  float scale, int bf16)                                                          \
    {                                                                                                             \
        const size_t n = t->n, elt = bf16 ? sizeof(uint16_t) : sizeof(float), ldq = G * WIDTH;                   \
        float *sr = s + r0 * n;                                                                                   \
        const float *qr = q + r0 * WIDTH;                                                                         \
        size_t j = 0;                                                                                             \
        for (; j + KEYS <= n; j += KEYS) {                                                                        \
            if (r0 == 0) fetch_ahead(t, j, KEYS, elt);                                                            \
            if (R == ROWS) scores_block_##ISA(sr, n, qr, ldq, t, j, ROWS, KEYS, scale, bf16);                         \
            else scores_block_##ISA(sr, n, qr, ldq, t, j, 1, KEYS, scale, bf16);                                      \
        }                                                                                                         \
        for (; j < n; j++) {                                                                                      \
            if (R == ROWS) scores_block_##ISA(sr, n, qr, ldq, t, j, ROWS, 1, scale, bf16);                            \
            else scores_block_##ISA(sr, n, qr, ldq, t, j, 1, 1, scale, bf16);                                         \
        }                                                                                                         \
    }                                                                                                             \
    INLINE void scores_all_##ISA(float *s, const float *q, size_t G, const kvl_few_tile *t, float scale,          \
                                 int bf16)                                                                        \
    {                                                                                                             \
        size_t r = 0;                                                                                             \
        for (; r + ROWS <= G; r += ROWS) scores_rows_##ISA(s, q, G, r, ROWS, t, scale, bf16);                     \
        for (; r < G; r++) scores_rows_##ISA(s, q, G, r, 1, t, scale, bf16);                                      \
    }                                                                                                             \
    INLINE void values_rows_##ISA(float *acc, const float *p, size_t r0, size_t R, const kvl_few_tile *t,         \
                                  int bf16)                                                                       \
    {                                                                                                             \
        float *ar = acc + r0 * t->Dv;                                                                             \
        const float *pr = p + r0 * t->n;                                                                          \
        size_t c = 0;                                                                                             \
        for (; c + COLS <= t->Dv; c += COLS) {                                                                    \
            if (R == ROWS) values_block_##ISA(ar, pr, t, c, ROWS, COLS / WIDTH, bf16);                            \
            else values_block_##ISA(ar, pr, t, c, 1, COLS / WIDTH, bf16);                                         \
        }                                                                                                         \
        for (; c < t->Dv; c += WIDTH) {                                                                           \
            if (R == ROWS) values_block_##ISA(ar, pr, t, c, ROWS, 1, bf16);                                       \
            else values_block_##ISA(ar, pr, t, c, 1, 1, bf16);                                                    \
        }                                                                                                         \
    }                                                                                                             \
    INLINE void values_all_##ISA(float *acc, const float *p, size_t G, const kvl_few_tile *t, int bf16)           \
    {                                                                                                             \
        size_t r = 0;                                                                                             \
        for (; r + ROWS <= G; r += ROWS) values_rows_##ISA(acc, p, r, ROWS, t, bf16);                             \
        for (; r < G; r++) values_rows_##ISA(acc, p, r, 1, t, bf16);                                              \
    }

/* The two functions the dispatch calls for one instruction set's loops and one store (KIND f32 or bf16,
 * BF16 0 or 1): scores_ISA_KIND and values_ISA_KIND. */
#define FEW_ENTRIES(ISA, ATTR, KIND, BF16)                                                                        \
    ATTR static void scores_##ISA##_##KIND(float *s, const float *q, size_t G, const kvl_few_tile *t,             \
                                           float scale)                                                           \
    {                                                                                                             \
        scores_all_##ISA(s, q, G, t, scale, BF16);                                                                \
    }                                                                                                             \
    ATTR static void values_##ISA##_##KIND(float *acc, const float *p, size_t G, const kvl_few_tile *t)           \
    {                                                                                                             \
        values_all_##ISA(acc, p, G, t, BF16);                                                                     \
    }

/* The functions the six lines below define (the index grep finds them by):
 *   avx2     4 rows × 3 keys, 24 columns   scores_rows_avx2, scores_all_avx2, values_rows_avx2,
 *                                          values_all_avx2; scores_avx2_f32, values_avx2_f32,
 *                                          scores_avx2_bf16, values_avx2_bf16
 *   avx512   8 rows × 2 keys, 48 columns   scores_rows_avx512, scores_all_avx512, values_rows_avx512,
 *                                          values_all_avx512; scores_avx512_f32, values_avx512_f32,
 *                                          scores_avx512_bf16, values_avx512_bf16
 *   avx512p  bf16 column pairs, 32 wide    scores_rows_avx512p, scores_all_avx512p,
 *                                          values_rows_avx512p, values_all_avx512p;
 *                                          scores_avx512p_bf16, values_avx512p_bf16 */
FEW_LOOPS(avx2, AVX2, INLINE_AVX2, 4, 3, 24, 8)
FEW_ENTRIES(avx2, AVX2, f32, 0)
FEW_ENTRIES(avx2, AVX2, bf16, 1)
FEW_LOOPS(avx512, AVX512, INLINE_AVX512, 8, 2, 48, 16)
FEW_ENTRIES(avx512, AVX512, f32, 0)
FEW_ENTRIES(avx512, AVX512, bf16, 1)
FEW_LOOPS(avx512p, AVX512, INLINE_AVX512, 8, 2, 32, 32)
FEW_ENTRIES(avx512p, AVX512, bf16, 1)

/* ---- AVX-512, the query rows in the lanes ------------------------------------------------------- */

/* The scores of a block of 8 query rows with the rows in the vector lanes. Each vector holds 4 rows × 4
 * columns (lane 4·i + e: row i of the 4, column c + e); a key's 4 columns are broadcast to every row's lanes
 * by one load and met by both vectors of the block's rows. A score then sums 4 lanes, once for 8 keys, where
 * the kernels above sum 16 for every pair of keys: on the 67B's shape those sums were a quarter of the scores'
 * instructions, and the scores are bound by their vector operations, not their loads (few_rows.h has the
 * times). Over bf16 rows a block first widens its keys' next 32 columns into a buffer of 1 KiB (as
 * load_pairs: the 16 even columns, then the 16 odd ones), and the queries are packed in that order. */

/* a[2j + h] += the 32 columns from q (8 runs of 4, ldq apart; run m's two vectors rows 0 - 3 and 4 - 7) times
 * key j's 32 columns at k + j·ld, for j < J. */
INLINE_AVX512 void quad_products(__m512 a[16], const float *q, size_t ldq, const float *k, size_t ld, size_t J)
{
    for (size_t c = 0; c < 32; c += 4, q += ldq) {
        __m512 q0 = _mm512_loadu_ps(q), q1 = _mm512_loadu_ps(q + 16);
        IN_REGISTER(q0);
        IN_REGISTER(q1);
#pragma GCC unroll 8
        for (size_t j = 0; j < J; j++) {
            const __m512 b = _mm512_broadcast_f32x4(_mm_loadu_ps(k + j * ld + c));
            a[2 * j] = _mm512_fmadd_ps(q0, b, a[2 * j]);
            a[2 * j + 1] = _mm512_fmadd_ps(q1, b, a[2 * j + 1]);
        }
    }
}

/* w[J][32] = the 32 bf16 codes at codes + j·ld widened, each key's 16 even columns, then its 16 odd ones. */
INLINE_AVX512 void widen_keys(float *w, const uint16_t *codes, size_t ld, size_t J)
{
#pragma GCC unroll 8
    for (size_t j = 0; j < J; j++) {
        __m512 even, odd;
        load_pairs(&even, &odd, codes + j * ld);
        _mm512_store_ps(w + 32 * j, even);
        _mm512_store_ps(w + 32 * j + 16, odd);
    }
}

/* Per 128-bit lane: [x0 + x1, x2 + x3, y0 + y1, y2 + y3]. */
INLINE_AVX512 __m512 pair_sums(__m512 x, __m512 y)
{
    return _mm512_add_ps(_mm512_shuffle_ps(x, y, 0x88), _mm512_shuffle_ps(x, y, 0xDD));
}

/* s[i][j0 + j] (rows lds apart) = scale · Σ_e a[2j + i/4][4·(i mod 4) + e] for the 8 rows i and the J ≤ 8
 * keys j. Two rounds of pair_sums leave u[2h + m] holding in its 128-bit lane i the scores of row 4h + i
 * against keys 4m … 4m + 3; a permute then puts two rows' 8 keys in each half of a vector. */
INLINE_AVX512 void store_quads(float *s, size_t lds, size_t j0, size_t J, const __m512 a[16], float scale)
{
    const __m512i rows01 = _mm512_set_epi32(23, 22, 21, 20, 7, 6, 5, 4, 19, 18, 17, 16, 3, 2, 1, 0);
    const __m512i rows23 = _mm512_set_epi32(31, 30, 29, 28, 15, 14, 13, 12, 27, 26, 25, 24, 11, 10, 9, 8);
    const __mmask8 keys = (__mmask8)((1u << J) - 1);
    const __m512 sc = _mm512_set1_ps(scale);
#pragma GCC unroll 2
    for (size_t h = 0; h < 2; h++) {
        __m512 t[4];
#pragma GCC unroll 4
        for (size_t m = 0; m < 4; m++) t[m] = pair_sums(a[4 * m + h], a[4 * m + 2 + h]);
        const __m512 u0 = _mm512_mul_ps(sc, pair_sums(t[0], t[1])), u1 = _mm512_mul_ps(sc, pair_sums(t[2], t[3]));
        const __m512 v01 = _mm512_permutex2var_ps(u0, rows01, u1), v23 = _mm512_permutex2var_ps(u0, rows23, u1);
        float *row = s + 4 * h * lds + j0;
        _mm256_mask_storeu_ps(row, keys, _mm512_castps512_ps256(v01));
        _mm256_mask_storeu_ps(row + lds, keys, _mm512_extractf32x8_ps(v01, 1));
        _mm256_mask_storeu_ps(row + 2 * lds, keys, _mm512_castps512_ps256(v23));
        _mm256_mask_storeu_ps(row + 3 * lds, keys, _mm512_extractf32x8_ps(v23, 1));
    }
}

/* s[8][J] (rows lds apart, from key j0) = scale · q[8][Dk] · K[J][Dk]ᵀ, q packed in runs of 4 columns (the
 * block's run at q, runs ldq apart), J ≤ 8; Dk a multiple of 32. */
INLINE_AVX512 void scores_block_quads(float *s, size_t lds, const float *q, size_t ldq, const kvl_few_tile *t,
                                      size_t j0, size_t J, float scale, int bf16)
{
    __m512 a[16];
#pragma GCC unroll 16
    for (size_t i = 0; i < 16; i++) a[i] = _mm512_setzero_ps();
    for (size_t c = 0; c < t->Dk; c += 32, q += 8 * ldq) {
        if (bf16) {
            float w[8 * 32] __attribute__((aligned(64)));
            widen_keys(w, (const uint16_t *)t->k + j0 * t->ldk + c, t->ldk, J);
            quad_products(a, q, ldq, w, 32, J);
        } else {
            quad_products(a, q, ldq, (const float *)t->k + j0 * t->ldk + c, t->ldk, J);
        }
    }
    store_quads(s, lds, j0, J, a, scale);
}

/* The scores of a tile: the query rows 8 at a time (G a multiple of 8), the keys 8 at a time, then one; the
 * first rows' blocks ask for the keys AHEAD on. */
INLINE_AVX512 void scores_all_quads(float *s, const float *q, size_t G, const kvl_few_tile *t, float scale, int bf16)
{
    const size_t n = t->n, elt = bf16 ? sizeof(uint16_t) : sizeof(float), ldq = 4 * G;
    for (size_t r0 = 0; r0 < G; r0 += 8) {
        size_t j = 0;
        for (; j + 8 <= n; j += 8) {
            if (r0 == 0) fetch_ahead(t, j, 8, elt);
            scores_block_quads(s + r0 * n, n, q + 4 * r0, ldq, t, j, 8, scale, bf16);
        }
        for (; j < n; j++) scores_block_quads(s + r0 * n, n, q + 4 * r0, ldq, t, j, 1, scale, bf16);
    }
}

AVX512 static void scores_quads_f32(float *s, const float *q, size_t G, const kvl_few_tile *t, float scale)
{
    scores_all_quads(s, q, G, t, scale, 0);
}

AVX512 static void scores_quads_bf16(float *s, const float *q, size_t G, const kvl_few_tile *t, float scale)
{
    scores_all_quads(s, q, G, t, scale, 1);
}


#endif

/* ---- dispatch ------------------------------------------------------------------------------------- */

/* The kernels a tile of these widths and this store runs through (the scores' also by G, the query rows). */
typedef enum { FEW_PLAIN, FEW_AVX2, FEW_AVX512, FEW_PAIRS, FEW_QUADS } few_kernels;

static few_kernels values_kernels(const kvl_few_tile *t)
{
#ifdef KVL_FEW_X86
    const kvf_isa isa = kvf_isa_active();
    if (isa >= KVF_ISA_AVX512 && t->Dk % 16 == 0 && t->Dv % 16 == 0)
        return t->bf16 && t->Dk % 32 == 0 && t->Dv % 32 == 0 ? FEW_PAIRS : FEW_AVX512;
    if (isa >= KVF_ISA_AVX2 && t->Dk % 8 == 0 && t->Dv % 8 == 0) return FEW_AVX2;
#else
    (void)t;
#endif
    return FEW_PLAIN;
}

/* The scores take the values' kernels, but for blocks of 8 rows over keys of whole runs of 32 under
 * AVX-512, which have the rows in the lanes. */
static few_kernels scores_kernels(const kvl_few_tile *t, size_t G)
{
    const few_kernels k = values_kernels(t);
    return (k == FEW_AVX512 || k == FEW_PAIRS) && G % 8 == 0 && t->Dk % 32 == 0 ? FEW_QUADS : k;
}

/* The width of the runs of query columns kernels k read (kvl_few_pack_q). */
static size_t run_width(few_kernels k, size_t Dk)
{
    switch (k) {
    case FEW_QUADS: return 4;
    case FEW_AVX2: return 8;
    case FEW_AVX512: return 16;
    case FEW_PAIRS: return 32;
    default: return Dk;
    }
}

/* The column of a row packed for bf16 keys read in pairs at position i: each run of 32 columns as its 16
 * even ones, then its 16 odd ones. */
static size_t paired_column(size_t i)
{
    const size_t run = i - i % 32, at = i % 32;
    return run + (at < 16 ? 2 * at : 2 * (at - 16) + 1);
}

int kvl_few_simd(const kvl_few_tile *t) { return values_kernels(t) != FEW_PLAIN; }

void kvl_few_pack_q(float *qp, const float *q, size_t G, const kvl_few_tile *t)
{
    const few_kernels k = scores_kernels(t, G);
    const size_t W = run_width(k, t->Dk);
    const int pairs = k == FEW_PAIRS || (k == FEW_QUADS && t->bf16);
    for (size_t c = 0; c < t->Dk; c += W)
        for (size_t r = 0; r < G; r++)
            for (size_t i = 0; i < W; i++)
                qp[c * G + r * W + i] = q[r * t->Dk + (pairs ? paired_column(c + i) : c + i)];
}

void kvl_few_scores(float *s, const float *qp, size_t G, const kvl_few_tile *t, float scale)
{
    switch (scores_kernels(t, G)) {
#ifdef KVL_FEW_X86
    case FEW_QUADS:
        if (t->bf16) scores_quads_bf16(s, qp, G, t, scale);
        else scores_quads_f32(s, qp, G, t, scale);
        return;
    case FEW_PAIRS: scores_avx512p_bf16(s, qp, G, t, scale); return;
    case FEW_AVX512:
        if (t->bf16) scores_avx512_bf16(s, qp, G, t, scale);
        else scores_avx512_f32(s, qp, G, t, scale);
        return;
    case FEW_AVX2:
        if (t->bf16) scores_avx2_bf16(s, qp, G, t, scale);
        else scores_avx2_f32(s, qp, G, t, scale);
        return;
#endif
    default: kvl_few_scores_plain(s, qp, G, t, scale);
    }
}

void kvl_few_values(float *acc, const float *p, size_t G, const kvl_few_tile *t)
{
    switch (values_kernels(t)) {
#ifdef KVL_FEW_X86
    case FEW_PAIRS: values_avx512p_bf16(acc, p, G, t); return;
    case FEW_AVX512:
        if (t->bf16) values_avx512_bf16(acc, p, G, t);
        else values_avx512_f32(acc, p, G, t);
        return;
    case FEW_AVX2:
        if (t->bf16) values_avx2_bf16(acc, p, G, t);
        else values_avx2_f32(acc, p, G, t);
        return;
#endif
    default: kvl_few_values_plain(acc, p, G, t);
    }
}
