#include "scratch.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    void *p;
    size_t bytes;
} block;

static _Thread_local block held[KVL_SCRATCH_SLOTS];

/* A thread's blocks are freed when it ends: a key whose destructor runs at thread exit, its value set to
 * the thread's `held` on the thread's first call. The main thread's are never freed (still reachable at
 * exit through its thread-local storage). */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void free_held(void *blocks)
{
    block *b = blocks;
    for (size_t s = 0; s < KVL_SCRATCH_SLOTS; s++) {
        free(b[s].p);
        b[s] = (block){NULL, 0};
    }
}

static void make_exit_key(void) { (void)pthread_key_create(&exit_key, free_held); }

size_t kvl_scratch_round(size_t n) { return (n + KVL_SCRATCH_ALIGN - 1) / KVL_SCRATCH_ALIGN * KVL_SCRATCH_ALIGN; }

void *kvl_scratch(kvl_scratch_slot slot, size_t bytes)
{
    if ((size_t)slot >= KVL_SCRATCH_SLOTS || bytes > SIZE_MAX - KVL_SCRATCH_ALIGN) return NULL;
    block *b = &held[slot];
    if (b->p && b->bytes >= bytes) return b->p;
    (void)pthread_once(&exit_key_once, make_exit_key);
    if (!pthread_getspecific(exit_key)) (void)pthread_setspecific(exit_key, held);
    const size_t size = kvl_scratch_round(bytes ? bytes : 1);
    void *p = aligned_alloc(KVL_SCRATCH_ALIGN, size);
    if (!p) return NULL;
    free(b->p);
    *b = (block){p, size};
    return p;
}
