/* Chapter 7's labs: the functions labs/07_v41/<lab>.c define, each graded by grade.c against the
 * project's definition (ref/core/config.h's layer map, ref/v41_ced.h's replay starts). Their
 * contracts are written above the stubs. */
#ifndef KVL_LAB_07_H
#define KVL_LAB_07_H

#include <stddef.h>

#include "config.h"

int layer_sources(kvl_layer *map, const size_t *ratio, size_t L, const size_t *kv, size_t n_kv,
                  const size_t *ix, size_t n_ix);

size_t replay_start(size_t P, size_t n_layers, size_t W, int bounded);

#endif
