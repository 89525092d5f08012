/* The CPU backend's decode attention: ref/core/attend.h's function, tile by tile, split over threads,
 * with SIMD kernels for the two shapes the lineage runs most. It returns what kvl_attend_ref returns to
 * float rounding (tests/test_cpu_attend.c).
 *
 * For each tile of rows and each group of Gq = Hq/groups query rows, the online softmax of
 * ref/core/softmax.h a tile at a time instead of a row at a time:
 *   S[Gq][n]  = scale · Q_g[Gq][Dk] · K_tile^g[n][Dk]ᵀ                       one sgemm
 *   m'_h      = max(m_h, max_j S_hj);        α_h = exp(m_h − m'_h)
 *   P_hj      = exp(S_hj − m'_h);            l_h ← α_h·l_h + Σ_j P_hj
 *   acc_h     ← α_h·acc_h;  acc_g[Gq][Dv] += P[Gq][n] · V_tile^g[n][Dv]       one sgemm
 * and o_h = acc_h / l_h at the end (l_h counts the sink's exp(σ_h − m_h) too).
 *
 * Tiles: float32 rows are read in place; bf16 or packed rows are decoded one tile at a time into a float
 * tile that stays in cache: once for every group, or, where there are several groups and the view reads
 * column ranges (bf16), each group's key and value columns on their own. A whole cache is never decoded
 * at once, and each thread's part decodes its own tiles.
 *
 * Kernels: a group of few query rows (GQA's 8, KVL_FEW_ROWS) over float32 or bf16 rows skips both the
 * BLAS calls and the float tile: its two products run in the register-blocked kernels of cpu/few_rows.h,
 * which read K and V in place and widen bf16 in registers. A group of many (MLA's 128 heads) takes
 * cpu/many_rows.h's kernels instead of BLAS where the CPU runs AVX2 and FMA and the group and Dv are
 * multiples of 16: each group's queries are scaled and packed once per step, not once per tile, the
 * scores and weights are held key-major (S_gᵀ[n][Gq], a head per column), and K and V are read from the
 * tile where they lie.
 *
 * Threads: one token's products are too thin to split well inside BLAS (a GQA group has eight query
 * rows), so the step splits its rows instead, as FlashDecoding and FlashMLA split the KV sequence:
 * P contiguous parts, each a tile loop with its own m, l and acc on its own OpenMP thread calling
 * single-threaded BLAS (ref/core/linalg.h's kvl_run_parts), then the parts merged in order,
 *   m = max_p m_p,   l = Σ_p e^{m_p − m} l_p,   acc = Σ_p e^{m_p − m} acc_p,
 * each thread merging and finishing its share of the heads. P is the number of threads, at most
 * N / KVL_ATTEND_PART_ROWS; one thread is the single loop above. Results differ between thread counts
 * by float rounding only. A step of few rows and one group of many heads through the many-row kernels
 * (V4's 128-row window: N·stride ≤ Hq·(Dk + Dv)) splits its heads instead, blocks of 16 at least two to
 * a part, each part the whole single loop over every row for its heads: nothing is merged, and every
 * thread count gives the one-thread output bit for bit. Called inside an OpenMP parallel region, the
 * step runs as one part. Each part's state lives in its thread's scratch (cpu/scratch.h).
 *
 * The sizes below were chosen by measurement; tests/bench/README.md ("Design measurements") keeps the
 * runs behind them. */
#ifndef KVL_ATTEND_CPU_H
#define KVL_ATTEND_CPU_H

#include <stddef.h>

#include "attend.h"

/* Rows per tile: 256 rows of 576 floats (MLA's row) is 576 KiB, inside a 1 MiB L2 with the score
 * tile beside it. */
#define KVL_ATTEND_TILE 256

/* Fewest rows a part gets: a V4 window of 128 rows still splits in two; below that the fork costs
 * more than it saves. */
#define KVL_ATTEND_PART_ROWS 64

/* A group of at most this many query rows (GQA's 8) is read by the register-blocked kernels of
 * cpu/few_rows.h instead of BLAS, where the CPU runs them (AVX2+FMA, widths multiples of 8) and the rows
 * are float32 or bf16: their products skip the packing a BLAS call this thin spends most of its time in,
 * and bf16 rows are widened in registers instead of into a float tile. */
#define KVL_FEW_ROWS 16

/* The few-row kernels' tile holds at most this many bytes of cached rows (KVL_ATTEND_TILE rows at
 * most): 32 GQA rows of 2,048 floats, 64 in bf16. Each of the 8 groups sweeps the tile's rows for its
 * own 512 bytes of each, and the hardware prefetcher, following one group through a row's page, brings
 * in lines of the next groups; a tile this small keeps them in L2 until those groups run, where a tile
 * of 256 whole rows (2 MiB) does not. */
#define KVL_FEW_TILE_BYTES (256u * 1024u)

/* Rows per tile for the many-row kernels (cpu/many_rows.h): MLA's step keeps its packed queries
 * (295 KiB), scores, accumulators (256 KiB) and tile in L2 from one tile to the next, where at 256 rows
 * they come to 1.3 MiB, past what a 2 MiB L2 reads at full speed. */
#define KVL_MANY_TILE 128

/* kvl_attend_ref's result (ref/core/attend.h), for arguments kvl_attend_check passed. */
int kvl_attend_cpu(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows, const kvl_attend_rows *r,
                   float scale, const float *sigma, const kvl_attend_then *then);

/* kvl_attend_chunk_head_ref's result (ref/core/attend.h) for arguments kvl_attend_chunk_head checked:
 * the definition's query blocks in groups of four, each group's products single-threaded BLAS over the
 * keys all its blocks see and then each block's own, the groups split among the threads, each row's
 * masked softmax in float (cpu/softmax_cpu.h); a band's mask read as each query's run of keys
 * (kvl_block_band), not written out. Every thread count gives the same bits. */
int kvl_attend_chunk_head_cpu(float *o, const float *q, const float *k, const float *v, const kvl_chunk_head *c);

#endif
