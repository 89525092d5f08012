/* draw_mla: the plumbing of chapter 2's notebook (notebooks_c/02_mla.c), kept out of its
 * teaching cells: reading numpy's committed results, printing a double as Python does, running
 * ref/mla's two decode forms on the chapter's toy layer, and the figure of absorption. */
#ifndef KVL_NB_DRAW_MLA_H
#define KVL_NB_DRAW_MLA_H

#include <stddef.h>

#include "mla.h"
#include "svg.h"

/* Python's repr of a double: the shortest text that reads back as the same number (4 rotating
 * buffers, so up to 4 may appear in one printf). */
const char *mlanb_repr(double v);

/* values[n] of block `name` in tests/data/mla_toy_numpy.txt. KVL_EIO, KVL_EPARSE. */
int mlanb_numpy_block(double *values, size_t n, const char *name);

/* ref/mla on the chapter's toy layer (d 64, H 4, Dq' 32, Dc 32, Dnope 16, Dr 8, Dv 16, YaRN
 * factor 40): weights drawn from `seed`, tokens x[T][d] after them; tokens 0 … T − 2 prefilled
 * into two float32 caches and token T − 1 decoded by each form. rows[T][Dc+Dr] is the cache as
 * its ring then holds it, q[H][Dnope+Dr] the query of token T − 1 (mla_query), y_naive[d] and
 * y_absorbed[d] the outputs, cache_bytes what the absorbed form's cache holds. */
typedef struct {
    mla_config c;
    mla_weights w;
    float *x, *rows, *q, *y_naive, *y_absorbed;
    size_t T, cache_bytes;
} mlanb_run;

int mlanb_run_ref(mlanb_run *r, size_t T, unsigned seed);
void mlanb_run_free(mlanb_run *r);

/* Absorption as two orders of the same products, for one head at widths Dnope, Dc and Dv: the
 * score q^Cᵀ(W_UK c_j) against (q^Cᵀ W_UK) c_j and the value Σ_j p_j (W_UV c_j) against W_UV
 * (Σ_j p_j c_j), every matrix drawn to its shape and the part computed once per step or once per
 * token marked. */
void mlanb_draw_absorption(svg_doc *s, size_t Dnope, size_t Dc, size_t Dv);

#endif
