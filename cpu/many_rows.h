/* Many query rows (an MQA group: MLA's 128 heads) against a tile of n keys and values, with the heads in
 * the vector lanes:
 *
 *   Sᵀ[n][G]    = K[n][Dk] · Qsᵀ[Dk][G]          Qsᵀ = (scale · Q)ᵀ, packed once per step
 *   acc[G][Dv] += Pᵀ[n][G]ᵀ · V[n][Dv]
 *
 * the two products of one tile of ref/core/attend.h's online softmax, with the scores and weights held
 * key-major (Sᵀ, Pᵀ) so that a head's softmax runs down a column. A BLAS call packs Q, K, S and V for
 * every tile; these kernels pack only Q, once, and read K, V and Pᵀ where they lie. Both products are one
 * kernel per instruction set, a block of W outputs by 6 broadcast operands:
 *   scores  W heads (a column of Qsᵀ) × 6 keys, each key's value broadcast, Dk in order;
 *   values  W value columns (a row of V) × 6 heads, each weight of Pᵀ broadcast, the keys in order;
 *   AVX-512       W = 64, four vectors of 16: 24 sums; a step loads 4 vectors, broadcasts 6 for 24 FMAs
 *   AVX2 and FMA  W = 16, two vectors of 8: 12 sums, which with the 2 loaded vectors and the broadcast
 *                 fill AVX2's 16 registers; a step loads 2 vectors, broadcasts 6 for 12 FMAs
 * the sums' chains of fused multiply-adds hide the FMA's latency, and two load ports keep up with each
 * step's loads. Blocks at the edges take fewer vectors (heads, columns: multiples of 16); keys or heads
 * that are not a multiple of 6 are shared out evenly (128 heads: 18 blocks of 6, then 4 of 5). While the
 * first block of heads is scored, the rows the tile names as ahead of it are asked for (MLA's rows are
 * 2,304 bytes apart, which the hardware prefetcher follows poorly).
 *
 * The kernels run where formats/isa.h's choice is avx2 or avx512 (KVL_ISA=avx2 picks the AVX2 ones on a
 * CPU with AVX-512) and G and Dv are multiples of 16 (kvl_many_simd); elsewhere attention keeps its BLAS
 * path. The _plain twins are the same sums, one float each, in the
 * same order over Dk and over the keys; the two agree to float32 rounding (the kernels fuse each
 * multiply-add). The rows are float32; a cache of another format is decoded into a float tile first. */
#ifndef KVL_MANY_ROWS_H
#define KVL_MANY_ROWS_H

#include <stddef.h>

/* How far ahead of the keys being scored attention has the scores pull in rows read in place. */
#define KVL_MANY_AHEAD 48

/* One tile of a group: key j at k + j·ldk (Dk values), value j at v + j·ldv (Dv values), n keys; and
 * ahead_bytes readable bytes at `ahead` that the scores pull into cache as they go, keys j … j + m − 1
 * the bytes from j·ahead_bytes/n to (j + m)·ahead_bytes/n (0 bytes: nothing). Attention points it at
 * the rows KVL_MANY_AHEAD keys on for rows read in place, and at the stored rows of the next tile for
 * a tile it decodes. */
typedef struct {
    const float *k, *v;
    size_t ldk, ldv;
    size_t n, Dk, Dv;
    const void *ahead;
    size_t ahead_bytes;
} kvl_many_tile;

/* 1 where kvl_many_scores and kvl_many_values run their AVX2 or AVX-512 kernels for G query rows of
 * widths Dk, Dv (any Dk; G and Dv multiples of 16). */
int kvl_many_simd(size_t G, size_t Dv);

/* qs[Dk][G] = scale · q[G][Dk]ᵀ: the query block both kernels read, packed once per step. */
void kvl_many_pack_q(float *qs, const float *q, size_t G, size_t Dk, float scale);

/* st[n][G] = K · qs (key j's scores at st + j·G). */
void kvl_many_scores(float *st, const float *qs, size_t G, const kvl_many_tile *t);

/* acc[G][Dv] += ptᵀ · V, pt[n][G] the weights key-major. */
void kvl_many_values(float *acc, const float *pt, size_t G, const kvl_many_tile *t);

/* The plain-loop twins: one float sum per output, over Dk (scores) or the keys (values) in order. */
void kvl_many_scores_plain(float *st, const float *qs, size_t G, const kvl_many_tile *t);
void kvl_many_values_plain(float *acc, const float *pt, size_t G, const kvl_many_tile *t);

#endif
