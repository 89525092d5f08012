/* Attention of Hq query rows against N cached rows, tile by tile with an online softmax: the decode
 * step of every generation written as matrix products. (At the end, kvl_attend_chunk_head: the
 * prefill's masked attention of a chunk for one head, a block of queries at a time, which MHA's and MLA's
 * naive prefill run.)
 *
 *   s_hj = scale · q_h · k_j^g                 k_j^g = rows[j][k_off + g·Dk … k_off + (g+1)·Dk)
 *   o_h  = Σ_j softmax_j(s_h + σ_h) · v_j^g    v_j^g = rows[j][v_off + g·Dv … v_off + (g+1)·Dv)
 *
 * with g = h / (Hq / groups): the query rows come in `groups` equal groups, each reading its own key
 * and value columns (GQA's [K_0 … K_{G−1} | V_0 … V_{G−1}] row); one group is MQA (MLA).
 *
 * σ_h is the sink logit of head h (ref/core/softmax.h): it joins the
 * denominator only. The plain entry points have no sink (σ = −∞).
 *
 * Every row is visible and their order does not matter (softmax is permutation invariant), so a
 * ring is read in slot order, in place. Keys and values are column ranges of the same rows: MLA's
 * key is the whole [c_kv | k_rope] row and its value the first Dc columns (the ranges overlap); a
 * GQA group's key and value are two Dh-wide ranges of the [K | V] row.
 *
 * The tiled form, for each tile of KVL_ATTEND_TILE rows (fewer for the few- and many-row kernels) and each group
 * of Gq = Hq/groups query rows (Milakov & Gimelshein's online softmax, the rescaling FlashAttention and
 * FlashMLA run):
 *   S[Gq][n]  = scale · Q_g[Gq][Dk] · K_tile^g[n][Dk]ᵀ                       one sgemm
 *   m'_h      = max(m_h, max_j S_hj);        α_h = exp(m_h − m'_h)
 *   P_hj      = exp(S_hj − m'_h);            l_h ← α_h·l_h + Σ_j P_hj
 *   acc_h     ← α_h·acc_h;  acc_g[Gq][Dv] += P[Gq][n] · V_tile^g[n][Dv]       one sgemm
 * and o_h = acc_h / l_h at the end (l_h counts the sink's exp(σ_h − m_h) too). It is the same
 * function as the _loop twin, which scores every row, runs kvl_softmax on the whole score row and
 * sums the weighted values; the two differ by float rounding only.
 *
 * The rows are read a tile at a time through a view (ref/core/row_tiles.h): float32 rows in place;
 * bf16 rows (swa_ring's SWA_STORE_BF16) or any packed store (FP8, FP4 rows) decoded one tile at a time
 * into a float tile that stays in cache: once for every group, or, where there are several groups and
 * the view reads column ranges (bf16), each group's key and value columns on their own (a GQA tile of
 * whole rows is 2 MiB, a group's columns 256 KiB). A whole cache is never decoded at once, and each
 * thread's part decodes its own tiles. A group of few query rows (GQA's 8, KVL_FEW_ROWS below) over
 * float32 or bf16 rows skips both the BLAS calls and the float tile: its two products run in the
 * register-blocked kernels of ref/core/few_rows.h, which read K and V in place and widen bf16 in
 * registers. A group of many (MLA's 128 heads) takes ref/core/many_rows.h's kernels instead of BLAS where
 * the CPU runs AVX-512 and the group and Dv are multiples of 16: each group's queries are scaled and
 * packed once per step, not once per tile, the scores and weights are held key-major (S_gᵀ[n][Gq], a
 * head per column, with each head's maximum and sum taken down its column), and K and V are read from
 * the tile where they lie.
 *
 * A score of −∞ gets weight 0; a head whose every score (and sink) is −∞ gets o_h = 0, as
 * kvl_softmax gives; a NaN score makes the head's output NaN.
 *
 * Threads: one token's products are too thin to split well inside BLAS (a GQA group has eight query
 * rows), so the step splits its rows instead, as FlashDecoding and FlashMLA split the KV sequence:
 * P contiguous parts, each a tile loop with its own m, l and acc on its own OpenMP thread calling
 * single-threaded BLAS (linalg.h's kvl_run_parts), then the parts merged in order,
 *   m = max_p m_p,   l = Σ_p e^{m_p − m} l_p,   acc = Σ_p e^{m_p − m} acc_p,
 * each thread merging and finishing its share of the heads.
 * P is the number of threads (kvl_threads, OMP_NUM_THREADS), at most N / KVL_ATTEND_PART_ROWS; one
 * thread is the single loop above. Results differ between thread counts by float rounding only.
 * A step of few rows and one group of many heads through the many-row kernels (V4's 128-row window:
 * N·stride ≤ Hq·(Dk + Dv)) splits its heads instead, blocks of 16 at least two to a part, each part the
 * whole single loop over every row for its heads: the queries are packed and the accumulators zeroed
 * once in all, nothing is merged, and every thread count gives the one-thread output bit for bit.
 * Called inside an OpenMP parallel region, the step runs as one part. */
#ifndef KVL_ATTEND_H
#define KVL_ATTEND_H

#include <stddef.h>
#include <stdint.h>

#include "row_tiles.h"

/* Rows per tile: 256 rows of 576 floats (MLA's row) is 576 KiB, inside a 1 MiB L2 with the score
 * tile beside it. */
#define KVL_ATTEND_TILE 256

/* Fewest rows a part gets: a V4 window of 128 rows still splits in two; below that the fork costs
 * more than it saves. */
#define KVL_ATTEND_PART_ROWS 64

/* A group of at most this many query rows (GQA's 8) is read by the register-blocked kernels of
 * ref/core/few_rows.h instead of BLAS, where the CPU runs them (AVX2+FMA, widths multiples of 8) and the
 * rows are float32 or bf16: their products skip the packing a BLAS call this thin spends most of its time
 * in, and bf16 rows are widened in registers instead of into a float tile. */
#define KVL_FEW_ROWS 16

/* The few-row kernels' tile holds at most this many bytes of cached rows (KVL_ATTEND_TILE rows at
 * most): 32 GQA rows of 2,048 floats, 64 in bf16. Each of the 8 groups sweeps the tile's rows for its
 * own 512 bytes of each, and the hardware prefetcher, following one group through a row's page, brings
 * in lines of the next groups; a tile this small keeps them in L2 until those groups run, where a tile
 * of 256 whole rows (2 MiB) does not. On the 67B's step at 32K on a Xeon with a 2 MiB L2 the float32
 * step took 33 ms instead of 48, bf16 29 instead of 33; 128 KiB and 512 KiB tiles read no faster. */
#define KVL_FEW_TILE_BYTES (256u * 1024u)

/* Rows per tile for the many-row kernels (ref/core/many_rows.h). MLA's step keeps its packed queries
 * (295 KiB), scores, accumulators (256 KiB) and tile in L2 from one tile to the next; at 256 rows they
 * came to 1.3 MiB, and this Xeon's L2, 2 MiB by its count, reads at half speed from 2 MiB of data. V3's
 * step at 32K on one thread took 57.3 ms in tiles of 128 rows, 57.9 in tiles of 256 (six runs each,
 * alternated). */
#define KVL_MANY_TILE 128

/* Where keys and values sit in the cached rows. */
typedef struct {
    size_t N;       /* rows */
    size_t stride;  /* elements from one row to the next */
    size_t k_off;   /* first key column of group 0 */
    size_t Dk;      /* key width, also the query width */
    size_t v_off;   /* first value column of group 0 */
    size_t Dv;      /* value width */
    size_t groups;  /* groups of query rows, each with its own keys and values; at least 1 */
} kvl_attend_rows;

/* o[Hq][Dv] = attention of q[Hq][Dk] over rows[N][stride] (float32), tiled (above). KVL_EINVAL for
 * a NULL array, Dk, Dv or groups of 0, Hq not a multiple of groups, a group's columns past the
 * stride, a scale that is not finite and positive, or a size past the BLAS integer; KVL_ENOMEM.
 * N = 0 gives o = 0. */
int kvl_attend_f32(float *o, const float *q, size_t Hq, const float *rows, const kvl_attend_rows *r, float scale);

/* The same over bf16 rows[N][stride]. */
int kvl_attend_bf16(float *o, const float *q, size_t Hq, const uint16_t *rows, const kvl_attend_rows *r,
                    float scale);

/* The same with a sink logit sigma[Hq] per head (finite or −∞; anything else is KVL_EINVAL). */
int kvl_attend_sink_f32(float *o, const float *q, size_t Hq, const float *rows, const kvl_attend_rows *r,
                        float scale, const float *sigma);
int kvl_attend_sink_bf16(float *o, const float *q, size_t Hq, const uint16_t *rows, const kvl_attend_rows *r,
                         float scale, const float *sigma);

/* The same over the first r->N rows of a view (rows->width = r->stride; rows->N ≥ r->N), with sinks
 * sigma[Hq] (NULL: none). KVL_EINVAL also for a view that does not fit r, or a tile it cannot read. */
int kvl_attend_tiles(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows, const kvl_attend_rows *r,
                     float scale, const float *sigma);

/* What a caller does to the heads of o once they are final, on the thread that finished them:
 * run(o + h0·Dv, h1 − h0, Dv, ctx) for each part's heads [h0, h1), every head exactly once. A step on
 * two threads leaves each thread's heads in its own core's cache, and a pass over all of o on one thread
 * afterwards pulls half of them across: V4's rotation of its 64 outputs back took 8 µs that way after a
 * 128-row window step of 76, and 4 done by each thread on its own heads. */
typedef struct {
    void (*run)(float *o, size_t heads, size_t Dv, void *ctx);
    void *ctx;
} kvl_attend_then;

/* kvl_attend_tiles, then `then` (NULL: nothing; a then without run is KVL_EINVAL) on every head of o. */
int kvl_attend_tiles_then(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows, const kvl_attend_rows *r,
                          float scale, const float *sigma, const kvl_attend_then *then);

/* One head's masked attention over a chunk of S queries, a block of KVL_QUERY_BLOCK queries at a time
 * (the prefill's form: a chunk against every key it sees, its own included, under a mask):
 *   o_i = softmax_j(scale · q_i · k_jᵀ + mask_ij) · v_j        i < S, j < N
 * with q_i at q + i·ldq (Dk wide), o_i at o + i·ldo (Dv wide), k[N][Dk] and v[N][Dv] packed. Each block
 * asks `mask` for its rows of the mask and the number n of leading keys any of its queries sees, and
 * scores those n only: two products and a row softmax in float (kvl_softmax_exp_f32's exponentials). The
 * keys every query of a block has masked (the causal future) are never scored, and the scores held are
 * [KVL_QUERY_BLOCK][N], not [S][N]. A row masked whole gives o_i = 0 and a NaN score a NaN row, as
 * kvl_softmax_f32. */
#define KVL_QUERY_BLOCK 64

/* Returns n, the number of leading key rows any of queries first … first + b − 1 of the chunk sees
 * (every later row is masked for all of them), and when n ≤ N fills mask[b][n] (additive: 0 or
 * −INFINITY); when n > N it writes nothing and the chunk fails. Called from several threads at once when
 * the caller splits its heads among them. */
typedef size_t (*kvl_block_mask)(float *mask, size_t first, size_t b, size_t N, const void *ctx);

typedef struct {
    size_t S, N;          /* queries, key rows */
    size_t Dk, Dv;        /* key (and query) width, value width */
    size_t ldq, ldo;      /* elements from one query row to the next, and from one output row to the next */
    float scale;
    kvl_block_mask mask;
    const void *mask_ctx;
} kvl_chunk_head;

/* The scratch floats kvl_attend_chunk_head needs for a chunk of this shape. */
size_t kvl_chunk_head_floats(const kvl_chunk_head *c);

/* o rows of one head (above), using scratch[kvl_chunk_head_floats(c)]. KVL_EINVAL for a block mask wider
 * than N or a size past the BLAS integer. */
int kvl_attend_chunk_head(float *o, const float *q, const float *k, const float *v, const kvl_chunk_head *c,
                          float *scratch);

/* The definition, float32 rows, plain loops: per head, every score, kvl_softmax_sink_f32 on the row
 * (sigma NULL: kvl_softmax_f32), then Σ_j p_j v_j. The test oracle's twin; same errors. */
int kvl_attend_f32_loop(float *o, const float *q, size_t Hq, const float *rows, const kvl_attend_rows *r,
                        float scale, const float *sigma);

#endif
