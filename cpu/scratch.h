/* Scratch memory a step reuses from one call to the next on the same thread.
 *
 * A decode step needs the same working buffers every token: attention's per-part softmax state, the
 * indexer's tiles of products. Allocated and freed per call, a few hundred KiB of them go back to the
 * system at every free (glibc returns the top of its heap past an adaptive threshold, and maps large
 * blocks afresh), so the next token faults every page in again, and on two threads each return of
 * memory also interrupts the other core (tests/bench/README.md, "Design measurements", has a run).
 *
 * kvl_scratch(slot, bytes) is the calling thread's block for `slot`, at least `bytes` long and aligned to
 * KVL_SCRATCH_ALIGN, kept until the thread ends. A call that has to grow the block does not keep its
 * contents. One user per slot: while a function works in a slot's block it calls nothing that takes
 * the same slot. NULL when out of memory (the block held before is kept). */
#ifndef KVL_SCRATCH_H
#define KVL_SCRATCH_H

#include <stddef.h>

#define KVL_SCRATCH_ALIGN 64

typedef enum {
    KVL_SCRATCH_ATTEND,      /* cpu/attend_cpu.c: the state of every part of one step */
    KVL_SCRATCH_INDEX_SCAN,  /* cpu/index_scan_cpu.c: every part's products and decoded keys */
    KVL_SCRATCH_CHUNK,       /* cpu/attend_chunk_cpu.c: one block of a prefill chunk's queries */
    KVL_SCRATCH_SLOTS
} kvl_scratch_slot;

void *kvl_scratch(kvl_scratch_slot slot, size_t bytes);

/* n rounded up to a multiple of KVL_SCRATCH_ALIGN (the caller checks n + KVL_SCRATCH_ALIGN does not wrap),
 * so that consecutive pieces carved from a block stay aligned. */
size_t kvl_scratch_round(size_t n);

#endif
