/* draw_serving: the figure of notebook 09 (notebooks_c/09_serving.c), kept out of its cells: one
 * GPU's memory as a bar per model, split into its weights, the share kept for activations and
 * the cache, with the sequences of the context the cache holds; and serving's chart of sequences
 * per node. */
#ifndef KVL_NB_DRAW_SERVING_H
#define KVL_NB_DRAW_SERVING_H

#include <stddef.h>

typedef struct {
    const char *name;
    double weights, activations, cache;   /* bytes of one GPU */
    double sequences;                     /* of the context, in that cache, per node */
} nb09_gpu;

/* The figure "gpu_memory": g[n], every bar to one scale, under a title naming the deployment. */
int nb09_draw_gpu(const nb09_gpu *g, size_t n, const char *deployment);

/* The figure "sequences_per_node": sequences of `context` tokens per node under tensor-parallel
 * (tp[n]) and data-parallel attention (dp[n]), as `serving --svg` draws it for the deployment it
 * names. */
int nb09_draw_sequences(const char *const *labels, const double *tp, const double *dp, size_t n,
                        size_t context, const char *deployment);

#endif
