/* Attention of Hq query rows against N cached rows: the decode step of every generation.
 *
 *   s_hj = scale · q_h · k_j^g                 k_j^g = rows[j][k_off + g·Dk … k_off + (g+1)·Dk)
 *   o_h  = Σ_j softmax_j(s_h + σ_h) · v_j^g    v_j^g = rows[j][v_off + g·Dv … v_off + (g+1)·Dv)
 *
 * with g = h / (Hq / groups): the query rows come in `groups` equal groups, each reading its own key
 * and value columns (GQA's [K_0 … K_{G−1} | V_0 … V_{G−1}] row); one group is MQA (MLA). Keys and
 * values are column ranges of the same rows: MLA's key is the whole [c_kv | k_rope] row and its value
 * the first Dc columns (the ranges overlap).
 *
 * σ_h is the sink logit of head h (ref/core/softmax.h): it joins the denominator only; NULL sinks are
 * σ = −∞, plain softmax. A score of −∞ gets weight 0; a head whose every score (and sink) is −∞ gets
 * o_h = 0, as kvl_softmax_f32 gives; a NaN score makes the head's output NaN.
 *
 * Every row is visible and their order does not matter (softmax is permutation invariant), so a ring
 * is read in slot order, in place. The rows are read through a view (ref/core/row_tiles.h): float32
 * rows in place, bf16 or packed rows (FP8, FP4) decoded as they are read.
 *
 * kvl_attend_ref is the definition: row by row, every head's score and one step of the online softmax
 * (kvl_online_step, ref/core/softmax.h). kvl_attend runs the backend a program chose
 * (ref/core/backend.h): this definition, or cpu/attend_cpu.h's tiles, threads and SIMD kernels, which
 * tests/test_cpu_attend.c holds to it. */
#ifndef KVL_ATTEND_H
#define KVL_ATTEND_H

#include <stddef.h>
#include <stdint.h>

#include "row_tiles.h"

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

/* What a caller does to the heads of o once they are final: run(o + h0·Dv, h1 − h0, Dv, ctx) over
 * ranges [h0, h1) that cover every head exactly once (V4 rotates its outputs back). A backend that
 * splits the heads among threads runs each range on the thread that finished it. */
typedef struct {
    void (*run)(float *o, size_t heads, size_t Dv, void *ctx);
    void *ctx;
} kvl_attend_then;

/* o[Hq][Dv] = attention of q[Hq][Dk] over the first r->N rows of the view `rows` (rows->width =
 * r->stride, rows->N ≥ r->N; NULL when r->N = 0), with sinks sigma[Hq] (NULL: none), then `then` on
 * every head (NULL: nothing). Runs the backend in use. N = 0 gives o = 0 (or the heads' sinks alone:
 * also 0). KVL_EINVAL for a NULL array, Dk, Dv or groups of 0, Hq not a multiple of groups, a group's
 * columns past the stride, a view that does not fit r, a scale that is not finite and positive, a sink
 * that is neither finite nor −∞, a then without its function, a size past the BLAS integer, or a tile
 * the view cannot read; KVL_ENOMEM. */
int kvl_attend(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows, const kvl_attend_rows *r,
               float scale, const float *sigma, const kvl_attend_then *then);

/* kvl_attend's argument checks alone: KVL_OK, or the error kvl_attend returns before any backend runs. */
int kvl_attend_check(const char *fn, const float *o, const float *q, size_t Hq, const kvl_row_tiles *rows,
                     const kvl_attend_rows *r, float scale, const float *sigma, const kvl_attend_then *then);

/* The definition (above), for arguments kvl_attend_check passed: plain loops, each row read once. */
int kvl_attend_ref(float *o, const float *q, size_t Hq, const kvl_row_tiles *rows, const kvl_attend_rows *r,
                   float scale, const float *sigma, const kvl_attend_then *then);

/* One head's masked attention over a chunk of S queries (the prefill's form: a chunk against every key it
 * sees, its own included, under a mask):
 *   o_i = softmax_j(scale · q_i · k_jᵀ + mask_ij) · v_j        i < S, j < N
 * with q_i at q + i·ldq (Dk wide), o_i at o + i·ldo (Dv wide), k[N][Dk] and v[N][Dv] packed. The queries
 * go a block of KVL_QUERY_BLOCK at a time: each block asks the mask for its rows of it and the number
 * n of leading keys any of its queries sees, and scores those n only, so the keys every query of a block
 * has masked (the causal future) are never scored and the scores held are [KVL_QUERY_BLOCK][N], not
 * [S][N]. A row masked whole gives o_i = 0 and a NaN score a NaN row, as kvl_softmax_f32. */
#define KVL_QUERY_BLOCK 64

/* Returns n, the number of leading key rows any of queries first … first + b − 1 of the chunk sees
 * (every later row is masked for all of them), and when n ≤ N fills mask[b][n] (additive: 0 or
 * −INFINITY); when n > N it writes nothing and the chunk fails. Called from several threads at once when
 * a backend splits the blocks among them. */
typedef size_t (*kvl_block_mask)(float *mask, size_t first, size_t b, size_t N, const void *ctx);

/* The same mask where each query sees one run of keys (a band: causal, windowed): returns the same n and,
 * when n ≤ N, fills lo[b] and hi[b]: query first + r sees keys lo[r] … hi[r] − 1 of the n (lo[r] ≤ hi[r]
 * ≤ n), its mask 0 there and −INFINITY elsewhere. */
typedef size_t (*kvl_block_band)(size_t *lo, size_t *hi, size_t first, size_t b, size_t N, const void *ctx);

/* A chunk's mask: `rows` as kvl_block_mask, and `band` the same mask as runs where it is a band (NULL
 * otherwise), both reading ctx. The definition asks for the rows; a backend may ask for the runs
 * instead, which say the same without n floats a query. */
typedef struct {
    kvl_block_mask rows;
    kvl_block_band band;
    const void *ctx;
} kvl_chunk_mask;

typedef struct {
    size_t S, N;          /* queries, key rows */
    size_t Dk, Dv;        /* key (and query) width, value width */
    size_t ldq, ldo;      /* elements from one query row to the next, and from one output row to the next */
    float scale;
    kvl_chunk_mask mask;
} kvl_chunk_head;

/* o rows of one head (above), by the backend in use. KVL_EINVAL for a NULL array or mask rows, a block mask
 * wider than N, or a size past the BLAS integer; KVL_ENOMEM. */
int kvl_attend_chunk_head(float *o, const float *q, const float *k, const float *v, const kvl_chunk_head *c);

/* The definition, for arguments kvl_attend_chunk_head checked: block by block, the scores as one
 * product, each row's masked softmax (kvl_softmax_f32), the weighted values as a second product. */
int kvl_attend_chunk_head_ref(float *o, const float *q, const float *k, const float *v, const kvl_chunk_head *c);

/* The failure of a block whose mask reports n keys of N: KVL_EINVAL, kvl_error() naming the queries. */
int kvl_chunk_mask_too_wide(size_t first, size_t b, size_t n, size_t N);

#endif
