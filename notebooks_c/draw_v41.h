/* draw_v41: the plumbing of notebook 07 (notebooks_c/07_v41.c), kept out of its cells so that a
 * cell reads like the rule above it: reading the layer lists of a V4.1 config, comparing a layer
 * map built in the notebook with ref/core/config's, and the figure of the layer map with its
 * sources. */
#ifndef KVL_NB_DRAW_V41_H
#define KVL_NB_DRAW_V41_H

#include <stddef.h>

#include "config.h"

enum { NB07_MAX_LAYERS = 64 };

/* What a V4.1 config says about its layers: n_layers, compress_ratios (the first n_layers: the MTP
 * layers after them are not backbone layers), and the two source lists as membership flags. */
typedef struct {
    size_t n_layers;
    size_t ratio[NB07_MAX_LAYERS];
    unsigned char kv[NB07_MAX_LAYERS];   /* 1: listed in kv_source_layers */
    unsigned char ix[NB07_MAX_LAYERS];   /* 1: listed in index_source_layers */
} nb07_lists;

/* Read the lists of the config file at path. KVL_EIO, or KVL_EINVAL naming the field. */
int nb07_read_lists(nb07_lists *t, const char *path);

/* Print how many of the L layers of `built` differ from `ref` in mode, ratio, KV source or index
 * source, and hold that to 0: KVL_OK, or a failure naming the first layer that differs. */
int nb07_check_map(const kvl_layer *built, const kvl_layer *ref, size_t L);

/* The figure "layer_modes": a grid of the L layers of `map` against the four modes (window-only,
 * Full, Reindex, Reuse), each layer's mode filled. KVL_EINVAL if L is above NB07_MAX_LAYERS. */
int nb07_draw_modes(const kvl_layer *map, size_t L);

/* The figure "layer_sources": one box per layer (its mode as colour, its ratio inside), an arrow
 * from every layer that reads another's entries into that KV source (above) and from every layer
 * that uses another's top-k into that index source (below), and the encoder–decoder split after
 * layer E − 1. */
int nb07_draw_sources(const char *model, const kvl_layer *map, size_t L, size_t E);

/* The figure "replay_error": err[n] the next token's relative error after replay from start[n]
 * of a P-token prompt, as bars on a log axis; the last bar, dark, is bounded replay. n ≤
 * NB07_MAX_BARS. */
enum { NB07_MAX_BARS = 16 };
int nb07_draw_replay(const double *err, const size_t *start, size_t n, size_t P);

#endif
