/* V4's partial rotary embedding: the trailing Dr channels of every D-wide head, interleaved pairs
 * (DeepSeek-V4-Flash inference/model.py: the trailing 64 of 512, not the leading ones the transformers
 * docstring names). Queries, window rows, compressed entries and index keys are rotated at their position; the
 * attention output is rotated back at the query's, so that every contribution depends on key position − query
 * position only.
 * Shapes: x[S][H][D], row i at rotary position pos0 + i, every head of a row at the row's position. */
#ifndef KVL_V4_ROPE_H
#define KVL_V4_ROPE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "rope.h"

/* x[S][H][D] ← channels D − r->Dr … D − 1 of each head rotated at pos0 + i (ref/core/rope.h, float32). */
void v4_rotate_heads(float *x, size_t S, size_t H, size_t D, const kvl_rope *r, int64_t pos0);

/* The inverse: rotated by −(pos0 + i). */
void v4_unrotate_heads(float *x, size_t S, size_t H, size_t D, const kvl_rope *r, int64_t pos0);

/* r ← the rotary table of a V4 or V4.1 layer of `kind`: a window-only layer (compress ratio 0) rotates at
 * plain rope_theta, every layer with a compressor (CSA, HCA; Full, Reindex, Reuse) at the compress rope,
 * compress_rope_theta with its YaRN (rope_parameters.compress in transformers 5), both m->qk_rope_head_dim
 * wide (ref/core/config.h's m->rope and m->compress_rope). kvl_rope_init's status. */
int v4_layer_rope(kvl_rope *r, const kvl_model *m, kvl_layer_kind kind);

#endif
