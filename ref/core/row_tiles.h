/* Rows read a tile at a time: the view the indexer's scan and the attention cores take of what a cache
 * holds, so that a store of packed rows (FP8, MXFP4, NVFP4) is decoded one tile at a time as it is
 * read, never as a whole, and float32 rows are read in place.
 *
 * A view is N rows of `width` floats. tile(scratch, view, first, n) gives rows first … first + n − 1 as
 * float32 [n][width]: a pointer into rows that are already float32, or scratch[n][width] filled by
 * decoding. NULL (kvl_error() says why) if they cannot be read. Views are read-only: tiles, of the same
 * rows or of different ones, may be read from several threads at once. */
#ifndef KVL_ROW_TILES_H
#define KVL_ROW_TILES_H

#include <stddef.h>
#include <stdint.h>

typedef struct kvl_row_tiles kvl_row_tiles;

typedef const float *(*kvl_row_tile_fn)(float *scratch, const kvl_row_tiles *r, size_t first, size_t n);

/* Columns c0 … c0 + w − 1 of rows first … first + n − 1 as float32 scratch[n][w]. */
typedef const float *(*kvl_row_cols_fn)(float *scratch, const kvl_row_tiles *r, size_t first, size_t n, size_t c0,
                                        size_t w);

struct kvl_row_tiles {
    size_t N, width;
    kvl_row_tile_fn tile;
    const void *src;   /* what tile reads */
    int in_place;      /* 1: tile never writes scratch, so a reader needs none (float32 rows); 0: it may */
    kvl_row_cols_fn cols; /* NULL, or a read of some columns only, for rows that decode value by value (bf16):
                             a GQA group reads its 2·128 of 2,048 columns and the tile stays in L2 */
    const uint16_t *bf16; /* the codes[N][width] of bf16 rows, for a reader that widens them in registers
                             (cpu/few_rows.h); NULL for any other store */
};

/* rows[N][width] held as float32 (in_place). */
kvl_row_tiles kvl_row_tiles_f32(const float *rows, size_t N, size_t width);

/* rows[N][width] held as bf16 codes (formats/element.h), widened a tile (or a column range) at a time. */
kvl_row_tiles kvl_row_tiles_bf16(const uint16_t *rows, size_t N, size_t width);

/* dst[n][width] ← rows first … first + n − 1, copied when the tile is read in place. KVL_EINVAL for a range
 * past N or a tile that cannot be read. */
int kvl_row_tiles_read(float *dst, const kvl_row_tiles *r, size_t first, size_t n);

#endif
