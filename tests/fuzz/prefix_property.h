/* What the prefix-cache reader must do with any bytes, checked by tests/fuzz/fuzz_prefix.c on every input
 * the fuzzer makes and by tests/test_reliability_fuzz.c on every saved seed and regression.
 *
 * Input: a whole file (ref/prefix_file.h), tried as it is and with its checksum recomputed (else almost every
 * mutation stops at the checksum). prefix_file_parse either refuses it or returns sections that lie
 * inside it, in order, without gaps; then v41_prefix_restore into a cache of the chapter 7 toy stack
 * (tests/ch07_toy.h) either refuses it, leaving the cache as it was, or fills it: len = the file's tokens,
 * every KV source holding ⌊len/M⌋ entries and keys whose rows decode to finite values, every window empty
 * from len. Seeds (tests/fuzz/corpus/prefix/): files v41_prefix_save wrote for that toy after 7 and 20
 * tokens (test_ch07_replay_persist checks that they still load). */
#ifndef KVL_TESTS_FUZZ_PREFIX_PROPERTY_H
#define KVL_TESTS_FUZZ_PREFIX_PROPERTY_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ch07_toy.h"
#include "v41_stack.h"
#include "prefix_cache.h"
#include "prefix_file.h"
#include "status.h"

#define FUZZ_PREFIX_MAX_TOKENS 64

static inline uint64_t fuzz_prefix_cache_hash(const v41_cache *c)
{
    uint64_t h = prefix_fnv1a(PREFIX_FNV_BASIS, &c->len, sizeof c->len);
    for (size_t l = 0; l < c->n_layers; l++) {
        const v4_rows *r[] = {&c->window[l], &c->entries[l], &c->keys[l]};
        for (size_t i = 0; i < 3; i++)
            if (r[i]->bytes) {
                h = prefix_fnv1a(h, &r[i]->len, sizeof r[i]->len);
                h = prefix_fnv1a(h, r[i]->bytes, r[i]->slots * r[i]->row_bytes);
            }
        if (c->state[l].a) h = prefix_fnv1a(h, c->state[l].a, v41_compressor_state_bytes(&c->state[l]));
    }
    return h;
}

/* NULL if data[size] was handled as the header says, else what went wrong. */
static inline const char *fuzz_prefix_fault_one(const uint8_t *data, size_t size)
{
    prefix_file f;
    if (prefix_file_parse(&f, data, size, "fuzz") != KVL_OK) return NULL;
    const char *fault = NULL;
    size_t end = PREFIX_HEADER_BYTES + PREFIX_ENTRY_BYTES * f.n;
    for (size_t i = 0; i < f.n && !fault; i++) {
        const prefix_section *s = &f.sections[i];
        if ((size_t)(s->bytes - f.buf) != end) fault = "a section does not start where the previous one ended";
        end += s->rows * s->row_bytes;
    }
    if (!fault && end + 8 != f.size) fault = "the sections do not end at the checksum";
    kvl_model m;
    v41_stack_config s = {0};
    v41_cache c = {0};
    if (fault || ch07_toy_model(&m) != KVL_OK) {
        prefix_file_free(&f);
        return fault ? fault : "the toy config does not load";
    }
    if (v41_stack_config_from_model(&s, &m) != KVL_OK || v41_cache_init(&c, &s, FUZZ_PREFIX_MAX_TOKENS, V41_CACHE_F32) != KVL_OK)
        fault = "the toy stack does not build";
    const uint64_t before = fault ? 0 : fuzz_prefix_cache_hash(&c);
    if (!fault && v41_prefix_restore(&c, &s, &f, "fuzz") != KVL_OK) {
        if (fuzz_prefix_cache_hash(&c) != before) fault = "a refused file changed the cache";
    } else if (!fault) {
        if (c.len != f.tokens) fault = "the cache's length is not the file's";
        for (size_t l = 0; l < s.n_layers && !fault; l++) {
            if (v4_rows_held(&c.window[l]) != 0 || c.window[l].len != c.len) fault = "a window is not empty at len";
            if (s.layers[l].kind != KVL_LAYER_FULL || fault) continue;
            const size_t N = c.len / s.layers[l].ratio, w = c.entries[l].width, wk = c.keys[l].width;
            float *e = malloc((N ? N : 1) * (w > wk ? w : wk) * sizeof *e);
            if (c.entries[l].len != N || c.keys[l].len != N) fault = "a source holds the wrong number of entries";
            if (!fault && N && v4_rows_read(e, &c.entries[l], 0, N) != KVL_OK) fault = "entries do not read back";
            for (size_t i = 0; i < N * w && !fault; i++)
                if (!isfinite(e[i])) fault = "an entry decodes to a NaN or infinity";
            free(e);
        }
    }
    if (c.window) v41_cache_free(&c);
    v41_stack_config_free(&s);
    kvl_model_free(&m);
    prefix_file_free(&f);
    return fault;
}

/* The input as it is, and again with its checksum made right, so that mutations reach the checks behind it. */
static inline const char *fuzz_prefix_fault(const uint8_t *data, size_t size)
{
    const char *fault = fuzz_prefix_fault_one(data, size);
    if (fault || size < PREFIX_HEADER_BYTES + 8) return fault;
    uint8_t *fixed = malloc(size);
    if (!fixed) return NULL;
    memcpy(fixed, data, size);
    const uint64_t h = prefix_fnv1a(PREFIX_FNV_BASIS, fixed, size - 8);
    for (int i = 0; i < 8; i++) fixed[size - 8 + i] = (uint8_t)(h >> (8 * i));
    fault = fuzz_prefix_fault_one(fixed, size);
    free(fixed);
    return fault;
}

#endif
