/* Prefix caching: what a V4 or V4.1 server persists for a prompt prefix, and what it rebuilds on a hit
 * (DeepSeek-V4 report, section 3.5, Zero SWA Caching; DeepSeek-V4.1 report, section 3.2, bounded replay;
 * the file format is ref/prefix_file.h).
 *
 * Persisted, per layer that writes a global cache: the compressed entries and index keys as the cache
 * stores them (native rows or float32) and the compressor tails, so the next token continues the blocks
 * exactly. Not persisted: window rows. They are bounded per sequence but exist in every layer, and are
 * rebuilt on a hit by replay (ref/v41_ced.h for V4.1, model_replay for V4). The V4 layout that also stores
 * them is kept as v4_prefix_save_with_window, so the saving can be measured from files.
 *
 *   section   rows                        row bytes                 first
 *   entries   N = ⌊P/M⌋ entries           288 / 584 / 4·Dh          0
 *   keys      N index keys                68 / 4·DI                 0
 *   tail      V4.1: [2][M] values, gates  4·Dh                      tokens the compressor has seen
 *   kvtail    V4: [2][(1+ov)M] kv, gates  4·(1+ov)·Dh               likewise
 *   ixtail    V4 CSA: the indexer's       4·(1+ov)·DI               likewise
 *   window    V4 with window: ≤ W rows    584 / 4·Dh                oldest position held
 *
 * A loader fills a fresh cache only when everything checks: the model fingerprint (layers, widths,
 * ratios, window, cache format), each section's store, row size, count and start against the cache, and
 * every row decodes to finite values; otherwise the cache is left as it was and the message names the
 * file and the section. After a load, len = P and every window is empty from P (or holds the saved rows). */
#ifndef KVL_PREFIX_CACHE_H
#define KVL_PREFIX_CACHE_H

#include <stdint.h>

#include "v41_stack.h"
#include "model.h"
#include "prefix_file.h"

/* The fingerprint the files carry: a hash of the stack's shape and the cache format. */
uint64_t v41_prefix_fingerprint(const v41_stack_config *s, v41_cache_format fmt);
uint64_t v4_prefix_fingerprint(const model_config *c, v4_cache_format fmt);

/* V4.1: global KV only (entries, index keys, tails of every KV source). */
int v41_prefix_save(const char *path, const v41_stack_config *s, const v41_cache *c);
/* *c (initialised for s, any state) ← the file; on failure *c is unchanged. */
int v41_prefix_load(v41_cache *c, const v41_stack_config *s, const char *path);
/* The same from a file already read and checked (`name` for messages). */
int v41_prefix_restore(v41_cache *c, const v41_stack_config *s, const prefix_file *f, const char *name);

/* V4 stack (model_cache_init_v4): global KV only (Zero SWA Caching), or global KV and window rows. */
int v4_prefix_save(const char *path, const model_config *mc, const model_cache *cache);
int v4_prefix_save_with_window(const char *path, const model_config *mc, const model_cache *cache);
/* *cache (initialised for mc by model_cache_init_v4) ← the file, window rows included when it has them. */
int v4_prefix_load(model_cache *cache, const model_config *mc, const char *path);

#endif
