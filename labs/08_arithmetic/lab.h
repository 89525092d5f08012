/* Chapter 8's labs: the functions labs/08_arithmetic/<lab>.c define, each graded by grade.c against
 * ref/kvtable.h's footprint of the same config. Their contracts are written above the stubs. */
#ifndef KVL_LAB_08_H
#define KVL_LAB_08_H

#include <stddef.h>

#include "config.h"

/* Bytes of one row of each kind a model's cache layout stores; 0 for a kind it does not store. */
typedef struct {
    size_t main_row;     /* one cached entry of the main attention */
    size_t index_key;    /* one indexer key */
    size_t window_row;   /* one window row (V4, V4.1) */
} kv_rows;

/* One copy of the per-token cache. */
typedef struct {
    size_t cache_layers;       /* layers that write a per-token cache */
    double entries_per_token;  /* Σ over them of 1/M */
    double bytes_per_token;    /* Σ over them of (main row + index key) / M */
    double bytes_per_entry;    /* bytes_per_token / entries_per_token */
} kv_account;

kv_rows cache_rows(const kvl_model *m);

kv_account per_token(const kvl_model *m, const kv_rows *r);

double held_gib(const kvl_model *m, const kv_rows *r, double bytes_per_token, double T);

#endif
