/* draw_dsa: the plumbing of notebook 04 (notebooks_c/04_dsa.c): the row maps it prints and the
 * figures it draws, kept out of the cells so that a cell reads like the formula above it (its
 * comparisons with ref/ print through draw_compare.h). */
#ifndef KVL_NB_DRAW_DSA_H
#define KVL_NB_DRAW_DSA_H

#include <stddef.h>
#include <stdint.h>

#include "rows.h"

/* Print a deployed row's byte map: its name and size, then each field's byte range and format. */
void nb04_print_row_map(kvf_row layout);

/* The selection figure "topk_selection": cells[T][T] of 0 (future), 1 (cached, not picked), 2
 * (picked). */
int nb04_draw_selection(const unsigned char *cells, size_t T, size_t K);

/* One query's path through DSA, for the figure "indexer_flow": the query's position t (it scores
 * the keys 0 … t, N = t + 1 of them), its picks[K] as kvl_topk lists them, and the widths the
 * shapes name. */
typedef struct {
    size_t t, K, d, HI, DI, H, Dc, Dr, Dv;
    const int32_t *picks;
} nb04_flow;

/* Draw the flow: the indexer over every key, the top-k, the sparse attention over the picked
 * rows. */
int nb04_draw_flow(const nb04_flow *f);

#endif
