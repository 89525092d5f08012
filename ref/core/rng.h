/* The project's random numbers: numpy's np.random.default_rng(seed), bit for bit.
 *
 * Every demo and test that draws weights or inputs uses this generator, so a C run reproduces the
 * numbers of a numpy check digit for digit. It follows numpy's Generator exactly:
 *   seeding   SeedSequence(seed) with a pool of four 32-bit words (the seed enters as 32-bit words,
 *             low word first), whose generate_state(4, uint64) gives PCG64 its initial state
 *             (words 0, 1: high, low) and stream (words 2, 3);
 *   bits      PCG64: a 128-bit LCG, state ← state·0x2360ed051fc65da44385df649fccf645 + inc, then
 *             XSL-RR of the new state (high ^ low, rotated right by the top 6 bits);
 *   random    (u64 >> 11) · 2^-53, in [0, 1);
 *   normal    numpy's 256-layer ziggurat (random_standard_normal), tables in rng_ziggurat_tables.h,
 *             not the legacy RandomState polar method.
 * Each draw consumes whole 64-bit words from one stream, so any interleaving of random() and
 * normal() calls matches the same interleaving of rng.random() and rng.standard_normal().
 *
 * A kvl_rng is plain state, no globals: generators are independent and each may be used by one
 * thread at a time. */
#ifndef KVL_RNG_H
#define KVL_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t state_hi, state_lo; /* 128-bit LCG state */
    uint64_t inc_hi, inc_lo;     /* 128-bit increment, odd; selects the stream */
} kvl_rng;

/* rng ← np.random.default_rng(seed) */
void kvl_rng_seed(kvl_rng *rng, uint64_t seed);

/* rng.bit_generator.random_raw(): the next 64 raw bits */
uint64_t kvl_rng_next_u64(kvl_rng *rng);

/* rng.random(): uniform on [0, 1) with 53 random bits */
double kvl_rng_random(kvl_rng *rng);

/* rng.standard_normal() */
double kvl_rng_normal(kvl_rng *rng);

/* out[n] = scale · rng.standard_normal(n): numpy's draw order, which is the C order of a shaped
 * array, so out viewed as [A][B] equals scale * rng.standard_normal((A, B)). */
void kvl_rng_normal_f64(kvl_rng *rng, double *out, size_t n, double scale);

/* out[n] = float32(scale · normal): each draw is scaled in double, then rounded once to float,
 * as (scale * rng.standard_normal(n)).astype(np.float32). */
void kvl_rng_normal_f32(kvl_rng *rng, float *out, size_t n, double scale);

/* out[n] = float32(lo + (hi − lo) · random()), as rng.uniform(lo, hi, n).astype(np.float32).
 * The double lies in [lo, hi); rounding to float may land on hi. */
void kvl_rng_uniform_f32(kvl_rng *rng, float *out, size_t n, double lo, double hi);

#endif
