/* draw_v4: what notebooks_c/06_v4.c needs around its teaching cells: the largest difference of two
 * arrays, and the chapter's figures (the layer map, the measured CSA pooling, and the compression
 * windows of CSA, HCA and the window branch). Prefix dv4_. */
#ifndef KVL_NB_DRAW_V4_H
#define KVL_NB_DRAW_V4_H

#include <stddef.h>

/* The figure "layer_map": kind[L] of each layer, 0 window-only, 1 CSA, 2 HCA (at most 64
 * layers). */
int dv4_layer_map_figure(const unsigned char *kind, size_t L);

/* The figure "csa_pooling": moved[n][T] (1 where changing token j moves entry i) of a CSA
 * compressor with ratio M, its first eight entries drawn, each token coloured by the block it
 * belongs to. */
int dv4_pooling_figure(const unsigned char *moved, size_t n, size_t T, size_t M);

/* The figure "compression_windows": over tokens 0 … T−1, the entries of a CSA compressor (ratio
 * m_csa, overlap 1) and an HCA one (ratio m_hca), which of them query t can read, and its window
 * of W. */
int dv4_windows_figure(size_t T, size_t m_csa, size_t m_hca, size_t W, size_t t);

#endif
