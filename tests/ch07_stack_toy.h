/* The chapter 7 toy stack (tests/ch07_toy.h) with seeded weights and inputs, and a prompt prefilled in two
 * chunks, shared by the replay suites. */
#ifndef KVL_TESTS_CH07_STACK_TOY_H
#define KVL_TESTS_CH07_STACK_TOY_H

#include <stdint.h>
#include <stdlib.h>

#include <check.h>

#include "ch07_toy.h"
#include "v41_stack.h"
#include "rng.h"
#include "status.h"

typedef struct {
    kvl_model m;
    v41_stack_config s;
    v41_stack_weights w;
    size_t d, W, L, E, T;   /* width, window, layers, encoder layers, tokens of input drawn */
    float *x;               /* [T][d] */
} ch07_stack_toy;

/* The stack of the model already in t->m (the toy, or a variant of it): weights, then x[T][d] ~ N(0, 1), from
 * one generator seeded with `seed`. */
static inline void ch07_stack_toy_make_from_model(ch07_stack_toy *t, uint64_t seed, size_t T)
{
    ck_assert_msg(v41_stack_config_from_model(&t->s, &t->m) == KVL_OK, "%s", kvl_error());
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    ck_assert_msg(v41_stack_weights_init_random(&t->w, &t->s, &rng) == KVL_OK, "%s", kvl_error());
    t->d = t->s.d;
    t->W = t->s.layers[0].core.window;
    t->L = t->s.n_layers;
    t->E = t->s.n_encoder;
    t->T = T;
    t->x = malloc(T * t->d * sizeof *t->x);
    ck_assert_ptr_nonnull(t->x);
    kvl_rng_normal_f32(&rng, t->x, T * t->d, 1.0);
}

/* The toy's stack, as ch07_stack_toy_make_from_model. */
static inline void ch07_stack_toy_make(ch07_stack_toy *t, uint64_t seed, size_t T)
{
    ck_assert_msg(ch07_toy_model(&t->m) == KVL_OK, "%s", kvl_error());
    ch07_stack_toy_make_from_model(t, seed, T);
}

static inline void ch07_stack_toy_free(ch07_stack_toy *t)
{
    free(t->x);
    v41_stack_weights_free(&t->w);
    v41_stack_config_free(&t->s);
    kvl_model_free(&t->m);
}

/* c ← a float32 cache for T tokens holding x[0 … P) prefilled in the chunks [0, split) and [split, P) (split
 * 0: one chunk), so that a replay from split runs the very products of the chunk it stands in for; out[P][d]
 * receives the output when not NULL. */
static inline void ch07_stack_toy_prefill(v41_cache *c, float *out, const ch07_stack_toy *t, size_t P, size_t split)
{
    ck_assert_msg(v41_cache_init(c, &t->s, t->T, V41_CACHE_F32) == KVL_OK, "%s", kvl_error());
    float *o = out ? out : malloc(P * t->d * sizeof *o);
    ck_assert_ptr_nonnull(o);
    if (split) ck_assert_msg(v41_stack_prefill(o, NULL, &t->s, &t->w, c, t->x, split) == KVL_OK, "%s", kvl_error());
    ck_assert_msg(v41_stack_prefill(o + split * t->d, NULL, &t->s, &t->w, c, t->x + split * t->d, P - split) == KVL_OK,
                  "%s", kvl_error());
    if (!out) free(o);
}

#endif
