/* draw_cost: the plumbing of chapter 1's notebook (notebooks_c/01_mha.c), kept out of its teaching
 * cells: weighing live caches, running ref/mha on a toy layer, widening its float arrays to the
 * notebook's double, checking a built result against it, and the figure of what one token caches
 * per layer. */
#ifndef KVL_NB_DRAW_COST_H
#define KVL_NB_DRAW_COST_H

#include <stddef.h>

#include "mha.h"
#include "svg.h"

/* dst[n] = src[n] */
void cost_widen(double *dst, const float *src, size_t n);

/* max |built − ref| over n values of double, printed and held to `tolerance` relative to max
 * |ref| as nbc_report does (draw_compare.h, whose nbc_max_diff reads float). */
int cost_check(const char *what, const double *built, const double *ref, size_t n,
               double tolerance);

/* Bytes one layer's bf16 cache of config c holds per token: append n zero rows to an mha_cache,
 * weigh it (mha_cache_bytes_used), divide. */
int cost_live_bytes_per_token(size_t *out, const mha_config *c, size_t n);

/* The toy stack of ref/model (d 64, H 4, Dh 16, SwiGLU width 32, random weights) with Hkv KV heads:
 * *live = the bytes its bf16 caches hold after T tokens, the first T/2 prefilled and the rest
 * decoded one at a time. */
enum { COST_TOY_LAYERS = 4, COST_TOY_HEAD_DIM = 16 };
int cost_toy_stack_bytes(size_t *live, size_t n_kv_heads, size_t T);

/* ref/mha's fast path on a random layer: weights drawn from `seed`, tokens x[n + 1][d] drawn
 * after them, n tokens prefilled into a float32 cache, token n decoded; rows[n + 1][2·Hkv·Dh] is
 * then the cache as its ring holds it, out[d] the decode output. */
typedef struct {
    mha_config c;
    mha_weights w;
    float *x, *rows, *out;
} cost_gqa_run;

int cost_gqa_run_ref(cost_gqa_run *r, size_t d, size_t H, size_t Hkv, size_t Dh, size_t n,
                     unsigned seed);
void cost_gqa_run_free(cost_gqa_run *r);

/* The per-layer cache of one token for each of n variants with kv_heads[i] KV heads (names[i],
 * each kv_heads[i] dividing H), every KV head a K box and a V box of head_bytes each, drawn to
 * one scale of bytes (MHA's H pairs fill the width), with a line from each of the H query heads
 * to the KV head it reads. `model` names the geometry in the title. */
void cost_draw_token_cache(svg_doc *s, const char *model, const char *const *names,
                           const size_t *kv_heads, size_t n, size_t H, size_t head_bytes);

#endif
