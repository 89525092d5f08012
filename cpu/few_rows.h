/* A few query rows (a GQA group's G = 8) against a tile of n keys and values, register-blocked:
 *
 *   S[G][n]   = scale · Q[G][Dk] · K[n][Dk]ᵀ
 *   acc[G][Dv] += P[G][n] · V[n][Dv]
 *
 * the two products of one tile of ref/core/attend.h's online softmax. A BLAS call this thin packs its
 * operands for every tile and uses each packed value only G times, so on the 67B's shape (8 rows, 128
 * wide) packing took more time than the multiply-adds. These kernels read K and V where they lie (rows
 * ld apart in the cache), float32 or bf16, and keep a block of partial sums in registers:
 *   AVX2+FMA  scores 4 query rows × 3 keys, Dk in steps of 8 (12 sums, then horizontal reductions);
 *             values 4 query rows × 24 value columns, the keys in order (12 sums held over the tile)
 *   AVX-512   scores of blocks of 8 query rows (G a multiple of 8, Dk of 32) with the rows in the lanes:
 *             each vector 4 rows × 4 columns, a key's 4 columns broadcast by one load to both vectors of
 *             the block, 8 keys at a time (16 sums), each score summing 4 lanes at the end; other G,
 *             8 query rows × 2 keys, Dk in steps of 16 (16 sums, one reduction tree of 16 lanes a score);
 *             values 8 rows × 48 columns (24 sums in the 32 registers): each key and value is loaded,
 *             and widened, once for all 8 rows
 * A bf16 value is widened in a register as it is loaded (bf16 → float32 is exact: the code in the high
 * half of the word), so no float copy of a bf16 tile is written. Over bf16 rows with widths multiples
 * of 32 the AVX-512 kernels read a pair of columns per word: 32 codes as one vector, the even columns
 * widened by a shift and the odd ones by a mask (two instructions for 32 values, where widening 16 at a
 * time spends four), the queries de-interleaved and the values' sums held as even and odd halves,
 * interleaved as they are stored. The queries are packed once a step (kvl_few_pack_q) so that one
 * address reaches every row's run of columns (read Dk apart, the eight rows took eight registers and
 * the scores spilled), and the rows sit in the lanes, so the scores' reductions all but vanish.
 * Over bf16 those blocks widen their keys 32 columns at a time into a buffer of 1 KiB first, since a
 * broadcast of 4 codes would need a widening instruction for every two multiply-adds.
 *
 * The AVX-512 kernels run where formats/isa.h's choice is avx512 and Dk and Dv are multiples of 16, the
 * AVX2+FMA ones where it is avx2 or wider and they are multiples of 8 (KVL_ISA=baseline turns both off,
 * and attention then takes its BLAS path); the plain loops
 * (the _plain twins, also what runs anywhere else) are the same sums in another order: the two agree to
 * float32 rounding. Every value of K and V is read; a NaN or infinity propagates as in any dot product. */
#ifndef KVL_FEW_ROWS_H
#define KVL_FEW_ROWS_H

#include <stddef.h>
#include <stdint.h>

/* One tile of a group: key j at k + j·ldk (Dk values), value j at v + j·ldv (Dv values), float32 or
 * bf16 codes (formats/element.h), n keys. */
typedef struct {
    const void *k, *v;
    size_t ldk, ldv; /* elements from one row to the next */
    size_t n, Dk, Dv;
    int bf16; /* 0: float32, 1: bf16 codes */
    /* The next_n keys and values (same strides and widths) the caller reads after this tile's, or none
     * (next_n = 0): kvl_few_scores pulls the first of them into cache as it nears the tile's end. */
    const void *next_k, *next_v;
    size_t next_n;
} kvl_few_tile;

/* 1 where kvl_few_scores and kvl_few_values run SIMD kernels (AVX2+FMA or wider) for this tile's widths. */
int kvl_few_simd(const kvl_few_tile *t);

/* qp[G·Dk] = q[G][Dk] in the order kvl_few_scores reads it for tiles of t's widths and store: each run of
 * W columns (W the kernels' vector width, 4 for AVX-512's blocks of 8 rows in the lanes; W = Dk for the
 * plain loops, so there qp is q) with the G rows' runs side by side, qp[c·G + r·W + i] = q[r][c + i], and
 * over bf16 pairs (widths multiples of 32 under AVX-512) each run of 32 as its 16 even columns, then its
 * 16 odd ones. A step packs its queries once: one base address then reaches every row, where rows Dk
 * apart took a register each (and spilled). */
void kvl_few_pack_q(float *qp, const float *q, size_t G, const kvl_few_tile *t);

/* s[G][n] (rows n apart) = scale · q[G][Dk] · Kᵀ, with q packed by kvl_few_pack_q for tiles like t (and
 * the same formats/isa.h choice). Pulls the tile's keys and values into cache a few keys ahead of the
 * scores (the values for kvl_few_values after it), and past the tile's end the next ones. */
void kvl_few_scores(float *s, const float *qp, size_t G, const kvl_few_tile *t, float scale);

/* acc[G][Dv] += p[G][n] · V. */
void kvl_few_values(float *acc, const float *p, size_t G, const kvl_few_tile *t);

/* The plain-loop twins: one float sum per output, in key (values) or column (scores) order; q as it is. */
void kvl_few_scores_plain(float *s, const float *q, size_t G, const kvl_few_tile *t, float scale);
void kvl_few_values_plain(float *acc, const float *p, size_t G, const kvl_few_tile *t);

#endif
