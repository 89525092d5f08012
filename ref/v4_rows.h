/* The rows a V4 cache holds: one vector per position, stored as float32 or as DeepSeek's deployed
 * bytes (formats/rows.h), in S slots with the row of position p in slot p mod S
 * (ref/swa.h's ring rule). The window is S = W slots; compressed entries and index keys get one slot
 * per entry the cache may hold, so they never wrap.
 *
 *   store   values per row                 bytes per row   what it is
 *   f32     any width                      4·width         exact, for equivalence tests
 *   main    512 = 448 NoPE + 64 RoPE       584             V4 main row: E4M3 with an E8M0 scale per 64,
 *                                                          the 64 RoPE channels as bf16 (window rows and
 *                                                          compressed entries alike)
 *   index   128                            68              V4 index key: MXFP4, E8M0 scale per 32
 *   v41-main   512                         288             V4.1 entry: E2M1, E4M3 scale per 16
 *   v41-window 512                         528             V4.1 window row: E4M3, E8M0 scale per 32
 *
 * ref/swa.h's ring stores element by element (f32, bf16); these rows are quantised as whole rows with
 * per-block scales, so they get their own small store with the same slot rule.
 *
 * A run of rows starts at position `first` (0, or where a replay restarts the window) and holds
 * positions max(first, len − S) … len − 1. Shapes: rows[n][width] in position order. */
#ifndef KVL_V4_ROWS_H
#define KVL_V4_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "row_tiles.h"

/* V4_ROWS_V41_MAIN and V4_ROWS_V41_WINDOW serve V4.1 (ref/v41_stack.h): 288-byte FP4 entries (E2M1, E4M3
 * scale per 16, no tensor scale) and 528-byte FP8 window rows (E4M3, E8M0 scale per 32), all 512 values
 * quantised, RoPE channels included (formats/rows.h). */
typedef enum { V4_ROWS_F32, V4_ROWS_MAIN, V4_ROWS_INDEX, V4_ROWS_V41_MAIN, V4_ROWS_V41_WINDOW } v4_rows_store;

/* "f32", "v4-main", "v4-index", "v41-main", "v41-window" */
const char *v4_rows_store_name(v4_rows_store s);

typedef struct {
    v4_rows_store store;
    size_t width;      /* values per row */
    size_t row_bytes;  /* 4·width, 584, 68, 288 or 528 */
    size_t slots;      /* S */
    size_t first;      /* the position this run of rows started at */
    size_t len;        /* the next position to append */
    uint8_t *bytes;    /* [S][row_bytes], slot order */
} v4_rows;

/* An empty store of `slots` rows of `width` values starting at position 0. KVL_EINVAL for a zero width
 * or slot count, a width the packed row does not hold (main, v41-main, v41-window 512, index 128), or an overflow;
 * KVL_ENOMEM. On failure *r is empty and v4_rows_free is harmless. */
int v4_rows_init(v4_rows *r, v4_rows_store store, size_t width, size_t slots);
void v4_rows_free(v4_rows *r);

/* Forget every row; the next one appended is at position pos (first = len = pos). */
void v4_rows_restart(v4_rows *r, size_t pos);

/* x[n][width] ← the values the store gives back for x: packed and unpacked (f32: unchanged). A chunk
 * reads its own rows through this, so every query sees what the cache holds. KVL_EINVAL for a NaN or
 * infinity in a packed store (x then unchanged). */
int v4_rows_round(float *x, const v4_rows *r, size_t n);

/* Append x[n][width] at positions len … len + n − 1 (only the last min(n, S) are kept). KVL_EINVAL for a
 * NaN or infinity in a packed store, nothing written. */
int v4_rows_append(v4_rows *r, const float *x, size_t n);

/* out[n][width] = the rows of positions first … first + n − 1, decoded. KVL_EINVAL unless all are held. */
int v4_rows_read(float *out, const v4_rows *r, size_t first, size_t n);

/* The rows of positions 0 … len − 1 as a view read a tile at a time (ref/core/row_tiles.h; N = len),
 * packed rows decoded as they are read, float32 rows read in place. For a store that holds them all
 * (entries and index keys, which never wrap); a tile outside what is held reads as NULL. */
kvl_row_tiles v4_rows_tiles(const v4_rows *r);

/* Positions held: max(first, len − S) … len − 1. */
size_t v4_rows_oldest(const v4_rows *r);
size_t v4_rows_held(const v4_rows *r);

/* out[held][row_bytes] = the held rows as stored, in position order from v4_rows_oldest (for a file). */
void v4_rows_export(uint8_t *out, const v4_rows *r);

/* Restart at position `first` and take in[n][row_bytes], rows as stored (n ≤ slots). KVL_EINVAL, nothing
 * changed, unless every row decodes to finite values. */
int v4_rows_import(v4_rows *r, const uint8_t *in, size_t first, size_t n);

/* Bytes of the rows held now: held · row_bytes. */
size_t v4_rows_bytes_used(const v4_rows *r);

#endif
