#include "rng.h"

#include <math.h>

#include "rng_ziggurat_tables.h"

__extension__ typedef unsigned __int128 u128;

/* ---- SeedSequence (numpy bit_generator.pyx), pool of 4 words ------------------------------------ */

enum { POOL = 4 };

#define HASH_INIT_A 0x43b0d7e5u
#define HASH_MULT_A 0x931e8875u
#define HASH_INIT_B 0x8b51f9ddu
#define HASH_MULT_B 0x58f38dedu
#define MIX_MULT_L 0xca01f9ddu
#define MIX_MULT_R 0x4973f715u

/* One step of the running hash; the multiplier *k advances with every call. */
static uint32_t hashmix(uint32_t value, uint32_t *k)
{
    value ^= *k;
    *k *= HASH_MULT_A;
    value *= *k;
    return value ^ (value >> 16);
}

static uint32_t mix(uint32_t x, uint32_t y)
{
    const uint32_t m = MIX_MULT_L * x - MIX_MULT_R * y;
    return m ^ (m >> 16);
}

/* pool[POOL] from the seed. numpy splits the integer into 32-bit words, low word first, and hashes
 * a missing pool word as 0, so [lo] and [lo, hi = 0] mix to the same pool; a uint64 never needs the
 * extra mixing numpy applies to entropy longer than the pool. */
static void seed_pool(uint32_t pool[POOL], uint64_t seed)
{
    const uint32_t entropy[POOL] = {(uint32_t)seed, (uint32_t)(seed >> 32), 0, 0};
    uint32_t k = HASH_INIT_A;
    for (size_t i = 0; i < POOL; i++) pool[i] = hashmix(entropy[i], &k);
    for (size_t src = 0; src < POOL; src++)
        for (size_t dst = 0; dst < POOL; dst++)
            if (src != dst) pool[dst] = mix(pool[dst], hashmix(pool[src], &k));
}

/* out[n] = generate_state(n, uint32): the pool read cyclically through a second running hash. */
static void seed_words(uint32_t *out, size_t n, const uint32_t pool[POOL])
{
    uint32_t k = HASH_INIT_B;
    for (size_t i = 0; i < n; i++) {
        uint32_t w = pool[i % POOL] ^ k;
        k *= HASH_MULT_B;
        w *= k;
        out[i] = w ^ (w >> 16);
    }
}

/* ---- PCG64 (XSL-RR 128/64) ---------------------------------------------------------------------- */

#define PCG_MULT (((u128)0x2360ed051fc65da4u << 64) | 0x4385df649fccf645u)

static u128 join(uint64_t hi, uint64_t lo) { return ((u128)hi << 64) | lo; }

static void set_state(kvl_rng *rng, u128 state)
{
    rng->state_hi = (uint64_t)(state >> 64);
    rng->state_lo = (uint64_t)state;
}

static void pcg_step(kvl_rng *rng)
{
    set_state(rng, join(rng->state_hi, rng->state_lo) * PCG_MULT + join(rng->inc_hi, rng->inc_lo));
}

static uint64_t rotr64(uint64_t v, unsigned r) { return (v >> r) | (v << ((64 - r) & 63)); }

/* pcg64_srandom_r: the increment is 2·initseq + 1; initstate is added between two steps. */
static void pcg_init(kvl_rng *rng, u128 initstate, u128 initseq)
{
    const u128 inc = (initseq << 1) | 1u;
    rng->inc_hi = (uint64_t)(inc >> 64);
    rng->inc_lo = (uint64_t)inc;
    set_state(rng, 0);
    pcg_step(rng);
    set_state(rng, join(rng->state_hi, rng->state_lo) + initstate);
    pcg_step(rng);
}

void kvl_rng_seed(kvl_rng *rng, uint64_t seed)
{
    uint32_t pool[POOL], w[8];
    seed_pool(pool, seed);
    seed_words(w, 8, pool);
    uint64_t v[4]; /* generate_state(4, uint64): word pairs, low word first */
    for (size_t i = 0; i < 4; i++) v[i] = (uint64_t)w[2 * i] | (uint64_t)w[2 * i + 1] << 32;
    pcg_init(rng, join(v[0], v[1]), join(v[2], v[3]));
}

uint64_t kvl_rng_next_u64(kvl_rng *rng)
{
    pcg_step(rng);
    return rotr64(rng->state_hi ^ rng->state_lo, (unsigned)(rng->state_hi >> 58));
}

double kvl_rng_random(kvl_rng *rng)
{
    return (double)(kvl_rng_next_u64(rng) >> 11) * (1.0 / 9007199254740992.0);
}

/* ---- standard normal: numpy's ziggurat ---------------------------------------------------------- */

/* Beyond r (Marsaglia's tail method): x = r + ξ with ξ exponential of rate r, kept when a second
 * exponential η satisfies 2η > ξ². 1 − u keeps log away from 0. numpy takes the tail's sign from
 * bit 8 of rabs, not from the word's sign bit; the expressions keep numpy's order of operations. */
static double normal_tail(kvl_rng *rng, uint64_t rabs)
{
    for (;;) {
        const double xx = -zig_inv_r * log(1.0 - kvl_rng_random(rng));
        const double yy = -log(1.0 - kvl_rng_random(rng));
        if (yy + yy > xx * xx) return (rabs >> 8) & 1 ? -(zig_r + xx) : zig_r + xx;
    }
}

/* The wedge of layer ≥ 1 between its rectangle and the curve: keep x when a uniform height in
 * [f(x_layer), f(x_(layer−1))) falls under f(x). */
static int wedge_keeps(kvl_rng *rng, unsigned layer, double x)
{
    return (zig_f[layer - 1] - zig_f[layer]) * kvl_rng_random(rng) + zig_f[layer] < exp(-0.5 * x * x);
}

/* One 64-bit word: bits 0–7 layer, bit 8 sign, bits 9–60 the 52-bit magnitude rabs. */
double kvl_rng_normal(kvl_rng *rng)
{
    for (;;) {
        const uint64_t bits = kvl_rng_next_u64(rng);
        const unsigned layer = (unsigned)(bits & 0xff);
        const uint64_t rabs = (bits >> 9) & ((UINT64_C(1) << 52) - 1);
        const double x = (bits >> 8) & 1 ? -((double)rabs * zig_w[layer]) : (double)rabs * zig_w[layer];
        if (rabs < zig_k[layer]) return x; /* inside the layer's rectangle: about 99% of draws */
        if (layer == 0) return normal_tail(rng, rabs);
        if (wedge_keeps(rng, layer, x)) return x;
    }
}

void kvl_rng_normal_f64(kvl_rng *rng, double *out, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) out[i] = scale * kvl_rng_normal(rng);
}

void kvl_rng_normal_f32(kvl_rng *rng, float *out, size_t n, double scale)
{
    for (size_t i = 0; i < n; i++) out[i] = (float)(scale * kvl_rng_normal(rng));
}

void kvl_rng_uniform_f32(kvl_rng *rng, float *out, size_t n, double lo, double hi)
{
    const double range = hi - lo;
    for (size_t i = 0; i < n; i++) out[i] = (float)(lo + range * kvl_rng_random(rng));
}
