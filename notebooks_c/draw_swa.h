/* draw_swa: the plumbing of notebook 03 (notebooks_c/03_swa.c): its figures and its
 * config look-up, kept out of the cells so that a cell reads like the formula above it (its
 * comparisons with ref/ print through draw_compare.h). */
#ifndef KVL_NB_DRAW_SWA_H
#define KVL_NB_DRAW_SWA_H

#include <stddef.h>

/* A slot that holds no position yet. */
#define NB03_EMPTY ((size_t)-1)

/* The window figure "window_band": cells[T][T] of 0 (future), 1 (past, outside), 2 (visible). */
int nb03_draw_band(const unsigned char *cells, size_t T, size_t W);

/* The ring figure "ring_buffer": held[steps][W] the position in each slot after step t
 * (NB03_EMPTY for none), written[t] the slot step t wrote. */
int nb03_draw_ring(const size_t *held, const size_t *written, size_t steps, size_t W);

/* The reach figure "reach": cells[layers + 1][T] of shade 0 … 4 (row 0 the input). */
int nb03_draw_reach(const unsigned char *cells, size_t layers, size_t T, size_t W);

/* *out = max_position_embeddings of the config file at path (kvl_model does not keep it). */
int nb03_context_of(double *out, const char *path);

#endif
