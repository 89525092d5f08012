/* draw_gpu: notebook 10's plumbing: device copies of host arrays, the emulator's report of a fault,
 * and the figure of an mma fragment. */
#ifndef KVL_NB_DRAW_GPU_H
#define KVL_NB_DRAW_GPU_H

#include <stddef.h>

/* A device buffer holding host[bytes] (NULL: zeros), or NULL with kvl_error() set. */
void *nb10_device(const void *host, size_t bytes);
/* host[bytes] ← dev; KVL_OK or KVL_ECUDA. */
int nb10_fetch(void *host, const void *dev, size_t bytes);
/* Free every buffer nb10_device made. */
void nb10_free_all(void);

/* Run the emulator's threads in forward order and keep its reports off stderr (a cell prints them);
 * the order makes the planted mistakes' reports the same on every run. */
void nb10_emulator_setup(void);
/* The emulator's report in kvl_error() ("emulator fault in kernel …"), or all of it. */
const char *nb10_report(void);

/* reg[16][16]: which register a[0 … 3] of its lane holds A's element (r, c); draws mma_fragment_a.
 */
int nb10_draw_fragment(const unsigned char *reg);

#endif
