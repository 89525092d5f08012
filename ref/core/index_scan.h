/* The lightning indexer's score, the one scan V3.2 (ref/dsa.h), V4 (ref/v4_indexer.h) and V4.1
 * (ref/v41_indexer.h) share:
 *
 *   I_{i,s} = Σ_j w_{i,j} · ReLU(q_{i,j} · k_s)        q[S][HI][DI], w[S][HI], k[N][DI]
 *
 * Query i sees the first n_i = min(N, ⌊(start + i + 1)/M⌋) keys and gets −∞ for the rest: M = 1 is
 * V3.2's token-level causality (key s ≤ position start + i), M > 1 a compressed source whose entry s
 * is complete once position (s + 1)·M − 1 has been read. The head sum runs in float32, head by head in
 * j order.
 *
 * Keys are read through a kvl_row_tiles view (ref/core/row_tiles.h), so a cache that stores them packed
 * (FP8, MXFP4) is decoded as it is read, never as a whole.
 *
 * kvl_index_scores and kvl_index_scores_listed check their arguments and run the backend a program chose
 * (ref/core/backend.h); the _ref functions are the definition, key by key in plain loops, and
 * cpu/index_scan_cpu.h's the backend's products.
 *
 * Letters: S queries, N keys, HI index heads, DI index head width, M compression ratio. */
#ifndef KVL_INDEX_SCAN_H
#define KVL_INDEX_SCAN_H

#include <stddef.h>
#include <stdint.h>

#include "row_tiles.h"

/* I[S][k->N] for queries q[S][HI][DI], head weights w[S][HI], the i-th at position start + i, over keys
 * of a source with ratio M (above). KVL_EINVAL for a NULL array, HI, DI or M of 0, or a size past the
 * BLAS integer; KVL_ENOMEM; the tile's status if a key cannot be read. S = 0 or N = 0 writes nothing. */
int kvl_index_scores(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t S, size_t HI,
                     size_t start, size_t M);

/* I[k->N] for one query q[HI][DI], w[HI]: the scores of the listed keys at[n] (each < k->N, in any
 * order) at their places, −∞ at every other entry: a candidate pool's scan. Same errors,
 * and KVL_EINVAL for a listed key past N. */
int kvl_index_scores_listed(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t HI,
                            const int32_t *at, size_t n);

/* The checks of the two (KVL_OK, or the error they return before any backend runs). */
int kvl_index_scores_check(const char *fn, const float *I, const float *q, const float *w, const kvl_row_tiles *k,
                           size_t HI, size_t M);
int kvl_index_scores_listed_check(const char *fn, const float *I, const float *q, const float *w,
                                  const kvl_row_tiles *k, size_t HI, const int32_t *at, size_t n);

/* The definitions, for arguments the checks passed. */
int kvl_index_scores_ref(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t S, size_t HI,
                         size_t start, size_t M);
int kvl_index_scores_listed_ref(float *I, const float *q, const float *w, const kvl_row_tiles *k, size_t HI,
                                const int32_t *at, size_t n);

#endif
