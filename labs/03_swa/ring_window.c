/* Lab: what a ring of W slots holds after T appends, read back in position order (chapter 3, "What
 * it computes": the `decode:` line).
 *
 *   slots[W][D]   the ring's rows in slot order: the row of position p was written to slot p mod W,
 * each new position overwriting the oldest, for positions 0 … T − 1; a slot never written holds
 * whatever it held out[n][D]     out: the rows the ring holds, oldest first: positions T − n … T −
 * 1 returns       n = min(T, W), the positions held (0 when T = 0)
 *
 * The ring holds exactly the newest query's window: the positions t − W < j ≤ t for t = T − 1.
 *
 * The grader (make lab-03) fills ref/kv_ring.h's ring (float32 rows, so nothing is rounded) chunk
 * by chunk, chunks longer than W among them, and after every chunk checks n against kv_ring_held
 * and every element of out against kv_ring_read of the held positions, exactly (a row is copied,
 * never computed): W = 1, 4, 7 and 16, T from 0 past several laps of the ring, below W and not a
 * multiple of it. */
#include "lab.h"

size_t ring_window(float *out, const float *slots, size_t W, size_t D, size_t T)
{
    (void)out, (void)slots, (void)W, (void)D, (void)T;
    return 0;
}
