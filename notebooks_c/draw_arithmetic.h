/* draw_arithmetic: the plumbing of notebook 08 (notebooks_c/08_arithmetic.c), kept out of its
 * cells so that a cell reads like the arithmetic above it: loading every config with its
 * ref/kvtable footprint, writing a factor, checking the built table against ref/kvtable's, and
 * the figure of the lineage. */
#ifndef KVL_NB_DRAW_ARITHMETIC_H
#define KVL_NB_DRAW_ARITHMETIC_H

#include <stddef.h>

#include "config.h"
#include "kvtable.h"

enum { NB08_MAX_MODELS = 16 };

typedef struct {
    kvl_model m;
    kvl_kv_footprint kv;   /* ref/kvtable's figures */
} nb08_generation;

/* g[*n]: every .json config under ref/configs with its footprint, by release date. */
int nb08_load_all(nb08_generation *g, size_t *n);
void nb08_free_all(nb08_generation *g, size_t n);

/* "3.56x", or "1/4.74" for a factor below 1, in buf[cap]. */
const char *nb08_factor_text(char *buf, size_t cap, double f);

/* Print the largest |built − ref| of `what` over n configs and its ratio to the largest |ref|,
 * and hold the ratio to `tolerance` (draw_compare's nbc_report): KVL_OK, or a failure naming
 * `what`, with the config that differs most printed. */
int nb08_check(const char *what, const double *built, const double *ref, const char *const *names,
               size_t n, double tolerance);

/* The figure "bytes_per_token": every config's bytes per token on a log axis, the generations the
 * V4.1-Flash model card charts dark. */
int nb08_draw_bytes(const nb08_generation *g, size_t n);

/* One model of the lineage figure: its cache as a box `layers` wide and `bytes_per_layer` (bytes
 * per token in one cache layer) tall, so that its area is its bytes per token; `step` names what
 * the step into this model changed (NULL for the first). */
typedef struct {
    const char *name, *step;
    double layers, bytes_per_layer;
} nb08_box;

/* The figure "lineage": box[n] stacked top to bottom, one area scale for all, and between two boxes
 * the step's factors: fewer cache layers (the width) and fewer bytes per layer (the height). */
int nb08_draw_lineage(const nb08_box *box, size_t n);

#endif
