/* Element codecs, float32 ↔ E4M3, E5M2, E2M1, E8M0 and bf16 (formats.md §1, §2, §3 last part).
 *
 * Encoders work on the float32 bits, without branches on the value:
 *  - a result in the target's normal range is rounded by adding the rounding bias to the bits the
 *    shift drops: half a target ulp minus one, plus the lowest kept bit, so a tie carries only when
 *    the kept part is odd (ties to even); a carry out of the mantissa moves to the next binade,
 *    which is the right code;
 *  - a result below the target's smallest normal is rounded by one float32 addition of 2^p, where
 *    2^p's ulp equals the target's subnormal spacing: the FPU's own round-to-nearest-even does the
 *    rounding and the low bits of the sum are the code. |x| < min normal ≪ 2^p, so nothing else is
 *    rounded away, and a value that rounds up to the smallest normal gives that normal's code.
 * Both candidates are computed and one is selected bitwise, so the bulk loops vectorise.
 * Decoders assemble the float32 bits of normal codes directly and compute subnormal codes as
 * M × (spacing), an exact product of normal numbers. */
#include "element.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

enum {
    F32_ABS = 0x7FFFFFFFu,
    F32_INF = 0x7F800000u,
    F32_QNAN = 0x7FC00000u,
};

static inline uint32_t float_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline float bits_float(uint32_t b)
{
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
}

static inline uint32_t min_u32(uint32_t a, uint32_t b)
{
    return a < b ? a : b;
}

/* `first` where `cond` holds, else `second`, with both evaluated: a ?: around a float operation is
 * turned into a branch (under the default -ftrapping-math the compiler may not speculate it), which
 * stops the bulk loops from vectorising. */
static inline uint32_t select_u32(int cond, uint32_t first, uint32_t second)
{
    uint32_t mask = 0u - (uint32_t)(cond != 0);
    return (first & mask) | (second & ~mask);
}

/* Magnitude code (exponent and mantissa fields, no sign) of the float32 magnitude bits `a`, rounded
 * to nearest even, for a format with `m` mantissa bits and exponent bias `bias`. Finite inputs past
 * the format's range give codes past its largest; inf and NaN give large codes. Callers clamp. */
static inline uint32_t magnitude_code(uint32_t a, unsigned m, unsigned bias)
{
    const unsigned drop = 23u - m;
    const uint32_t min_normal = (128u - bias) << 23;
    const uint32_t rebias = (127u - bias) << m;
    uint32_t normal = ((a + (1u << (drop - 1u)) - 1u + ((a >> drop) & 1u)) >> drop) - rebias;
    const float spacing_ulp = bits_float((151u - bias - m) << 23); /* 2^(24 − bias − m) */
    uint32_t subnormal = float_bits(bits_float(a) + spacing_ulp) - float_bits(spacing_ulp);
    return select_u32(a < min_normal, subnormal, normal);
}

/* E4M3: 1.4.3, bias 7. `overflow` is the code a finite value past 448 (and inf) becomes: the NaN
 * code 0x7F for the plain cast, 448's code 0x7E for the saturating one. */
static inline uint8_t e4m3_from_bits(uint32_t b, uint32_t overflow)
{
    uint32_t a = b & F32_ABS;
    uint32_t code = min_u32(magnitude_code(a, 3, 7), overflow);
    code = select_u32(a > F32_INF, 0x7Fu, code);
    return (uint8_t)(((b >> 24) & 0x80u) | code);
}

/* E5M2: 1.5.2, bias 15. `overflow` is 0x7C (inf) for the plain cast, 0x7B (57344) saturating. */
static inline uint8_t e5m2_from_bits(uint32_t b, uint32_t overflow)
{
    uint32_t a = b & F32_ABS;
    uint32_t code = min_u32(magnitude_code(a, 2, 15), overflow);
    code = select_u32(a > F32_INF, 0x7Eu, code);
    return (uint8_t)(((b >> 24) & 0x80u) | code);
}

/* E2M1: 1.2.1, bias 1; overflow and inf clamp to 6 in both casts. NaN has no code: +NaN gives
 * 0x8 and −NaN 0x0, as ml_dtypes does (the sign bit flipped over a zero). */
static inline uint8_t e2m1_from_bits(uint32_t b)
{
    uint32_t a = b & F32_ABS;
    uint32_t sign = (b >> 28) & 0x8u;
    uint32_t code = sign | min_u32(magnitude_code(a, 1, 1), 0x7u);
    return (uint8_t)select_u32(a > F32_INF, sign ^ 0x8u, code);
}

/* bf16: the top half of float32, rounded to nearest even in place. `overflow` is 0x7F80 (inf) for the
 * plain cast, 0x7F7F (the largest finite) saturating. NaN becomes the quiet NaN with its sign. */
static inline uint16_t bf16_from_bits(uint32_t b, uint32_t overflow)
{
    uint32_t a = b & F32_ABS;
    uint32_t code = min_u32((a + 0x7FFFu + ((a >> 16) & 1u)) >> 16, overflow);
    code = select_u32(a > F32_INF, 0x7FC0u, code);
    return (uint16_t)(((b >> 16) & 0x8000u) | code);
}

/* Normal codes: the fields shifted into float32 place with the bias difference added; subnormal
 * codes (E = 0): M × 2^(1 − bias − m). */
static inline float e4m3_to_float(uint8_t code)
{
    uint32_t mag = code & 0x7Fu;
    uint32_t normal = (mag << 20) + (120u << 23);
    uint32_t subnormal = float_bits((float)mag * 0x1p-9f);
    uint32_t bits = select_u32(mag < 0x08u, subnormal, normal);
    bits = select_u32(mag == 0x7Fu, F32_QNAN, bits);
    return bits_float(((uint32_t)(code & 0x80u) << 24) | bits);
}

static inline float e5m2_to_float(uint8_t code)
{
    uint32_t mag = code & 0x7Fu;
    uint32_t normal = (mag << 21) + (112u << 23);
    uint32_t subnormal = float_bits((float)mag * 0x1p-16f);
    uint32_t bits = select_u32(mag < 0x04u, subnormal, normal);
    bits = select_u32(mag == 0x7Cu, F32_INF, bits);
    bits = select_u32(mag > 0x7Cu, F32_QNAN, bits);
    return bits_float(((uint32_t)(code & 0x80u) << 24) | bits);
}

/* E2M1 magnitudes of codes 0..7 (formats.md §1), then their negatives. */
static const float e2m1_values[16] = {
    0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
    -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f,
};

float kvf_e4m3_decode(uint8_t code) { return e4m3_to_float(code); }
uint8_t kvf_e4m3_encode(float x) { return e4m3_from_bits(float_bits(x), 0x7Fu); }
uint8_t kvf_e4m3_encode_sat(float x) { return e4m3_from_bits(float_bits(x), 0x7Eu); }

float kvf_e5m2_decode(uint8_t code) { return e5m2_to_float(code); }
uint8_t kvf_e5m2_encode(float x) { return e5m2_from_bits(float_bits(x), 0x7Cu); }
uint8_t kvf_e5m2_encode_sat(float x) { return e5m2_from_bits(float_bits(x), 0x7Bu); }

float kvf_e2m1_decode(uint8_t code) { return e2m1_values[code & 0xFu]; }
uint8_t kvf_e2m1_encode(float x) { return e2m1_from_bits(float_bits(x)); }
uint8_t kvf_e2m1_encode_sat(float x) { return e2m1_from_bits(float_bits(x)); }

float kvf_bf16_decode(uint16_t code) { return bits_float((uint32_t)code << 16); }
uint16_t kvf_bf16_encode(float x) { return bf16_from_bits(float_bits(x), 0x7F80u); }
uint16_t kvf_bf16_encode_sat(float x) { return bf16_from_bits(float_bits(x), 0x7F7Fu); }

/* E8M0 shares float32's bias, so code c is float32 exponent field c; c = 0 (2^-127) is the float32
 * subnormal 0x00400000. */
float kvf_e8m0_decode(uint8_t code)
{
    if (code == 0xFFu) return bits_float(F32_QNAN);
    if (code == 0x00u) return bits_float(0x00400000u);
    return bits_float((uint32_t)code << 23);
}

/* Round toward +inf: the float32 exponent, plus one if any mantissa bit is set. A float32
 * subnormal lies in (0, 2^-126): above 2^-127 it rounds up to 2^-126, else to 2^-127. */
uint8_t kvf_e8m0_encode(float x)
{
    if (!(x > 0.0f)) return 0xFFu;
    uint32_t b = float_bits(x);
    if (b < 0x00800000u) return b > 0x00400000u ? 0x01u : 0x00u;
    uint32_t code = (b >> 23) + ((b & 0x007FFFFFu) != 0u);
    return (uint8_t)min_u32(code, 0xFEu);
}

/* Nearest in the linear domain: within [2^e, 2^(e+1)) the midpoint is 1.5·2^e, i.e. mantissa bit 22;
 * a tie rounds up. Below 2^-127 the nearest code is 2^-127 (there is no zero). Past 2^127 the
 * nearest is 2^128, which does not exist: NaN, as ml_dtypes' astype. */
uint8_t kvf_e8m0_encode_nearest(float x)
{
    if (!(x > 0.0f)) return 0xFFu;
    uint32_t b = float_bits(x);
    if (b < 0x00800000u) return b >= 0x00600000u ? 0x01u : 0x00u;
    uint32_t code = (b >> 23) + ((b >> 22) & 1u);
    return (uint8_t)(code > 0xFEu ? 0xFFu : code);
}

/* Bulk casts. `omp simd` asks the compiler to vectorise the loop (it needs no OpenMP runtime). */

/* codes[n] ← x[n] */
void kvf_e4m3_encode_n(uint8_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = e4m3_from_bits(float_bits(x[i]), 0x7Fu);
}

/* codes[n] ← x[n] */
void kvf_e4m3_encode_sat_n(uint8_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = e4m3_from_bits(float_bits(x[i]), 0x7Eu);
}

/* x[n] ← codes[n] */
void kvf_e4m3_decode_n(float *x, const uint8_t *codes, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = e4m3_to_float(codes[i]);
}

/* codes[n] ← x[n] */
void kvf_e5m2_encode_n(uint8_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = e5m2_from_bits(float_bits(x[i]), 0x7Cu);
}

/* codes[n] ← x[n] */
void kvf_e5m2_encode_sat_n(uint8_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = e5m2_from_bits(float_bits(x[i]), 0x7Bu);
}

/* x[n] ← codes[n] */
void kvf_e5m2_decode_n(float *x, const uint8_t *codes, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = e5m2_to_float(codes[i]);
}

/* packed[(n+1)/2] ← x[n]: element 2j in the low nibble of byte j, 2j+1 in the high nibble; for odd n
 * the last high nibble is 0 (+0). */
void kvf_e2m1_encode_n(uint8_t *packed, const float *x, size_t n)
{
    size_t pairs = n / 2;
#pragma omp simd
    for (size_t j = 0; j < pairs; j++) {
        uint32_t lo = e2m1_from_bits(float_bits(x[2 * j]));
        uint32_t hi = e2m1_from_bits(float_bits(x[2 * j + 1]));
        packed[j] = (uint8_t)(lo | (hi << 4));
    }
    if (n % 2) packed[pairs] = e2m1_from_bits(float_bits(x[n - 1]));
}

/* x[n] ← packed[(n+1)/2], nibble order as kvf_e2m1_encode_n. */
void kvf_e2m1_decode_n(float *x, const uint8_t *packed, size_t n)
{
    size_t pairs = n / 2;
    for (size_t j = 0; j < pairs; j++) {
        x[2 * j] = e2m1_values[packed[j] & 0xFu];
        x[2 * j + 1] = e2m1_values[packed[j] >> 4];
    }
    if (n % 2) x[n - 1] = e2m1_values[packed[pairs] & 0xFu];
}

/* codes[n] ← x[n] */
void kvf_bf16_encode_n(uint16_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = bf16_from_bits(float_bits(x[i]), 0x7F80u);
}

/* codes[n] ← x[n] */
void kvf_bf16_encode_sat_n(uint16_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = bf16_from_bits(float_bits(x[i]), 0x7F7Fu);
}

/* x[n] ← codes[n] */
void kvf_bf16_decode_n(float *x, const uint16_t *codes, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = bits_float((uint32_t)codes[i] << 16);
}

/* Format facts, indexed by kvf_element. */
static const struct {
    const char *name, *alias;
    unsigned bits;
    double max;
} element_facts[KVF_N_ELEMENT] = {
    [KVF_E4M3] = {"float8_e4m3fn", "e4m3", 8, 448.0},
    [KVF_E5M2] = {"float8_e5m2", "e5m2", 8, 57344.0},
    [KVF_E2M1] = {"float4_e2m1fn", "e2m1", 4, 6.0},
    [KVF_E8M0] = {"float8_e8m0fnu", "e8m0", 8, 0x1p127},
    [KVF_BF16] = {"bfloat16", "bf16", 16, 0x1.FEp127},
};

int kvf_element_from_name(const char *name, kvf_element *out)
{
    for (int f = 0; name && f < KVF_N_ELEMENT; f++) {
        if (strcmp(name, element_facts[f].name) == 0 || strcmp(name, element_facts[f].alias) == 0) {
            *out = (kvf_element)f;
            return 0;
        }
    }
    return -1;
}

static int element_known(kvf_element f)
{
    return (unsigned)f < KVF_N_ELEMENT;
}

const char *kvf_element_name(kvf_element f)
{
    return element_known(f) ? element_facts[f].name : NULL;
}

unsigned kvf_element_bits(kvf_element f)
{
    return element_known(f) ? element_facts[f].bits : 0u;
}

double kvf_element_max(kvf_element f)
{
    return element_known(f) ? element_facts[f].max : NAN;
}

float kvf_decode(kvf_element f, uint32_t code)
{
    switch (f) {
    case KVF_E4M3: return kvf_e4m3_decode((uint8_t)code);
    case KVF_E5M2: return kvf_e5m2_decode((uint8_t)code);
    case KVF_E2M1: return kvf_e2m1_decode((uint8_t)code);
    case KVF_E8M0: return kvf_e8m0_decode((uint8_t)code);
    case KVF_BF16: return kvf_bf16_decode((uint16_t)code);
    default: return NAN;
    }
}

uint32_t kvf_encode(kvf_element f, float x)
{
    switch (f) {
    case KVF_E4M3: return kvf_e4m3_encode(x);
    case KVF_E5M2: return kvf_e5m2_encode(x);
    case KVF_E2M1: return kvf_e2m1_encode(x);
    case KVF_E8M0: return kvf_e8m0_encode_nearest(x);
    case KVF_BF16: return kvf_bf16_encode(x);
    default: return UINT32_MAX;
    }
}

uint32_t kvf_encode_sat(kvf_element f, float x)
{
    switch (f) {
    case KVF_E4M3: return kvf_e4m3_encode_sat(x);
    case KVF_E5M2: return kvf_e5m2_encode_sat(x);
    case KVF_E2M1: return kvf_e2m1_encode_sat(x);
    case KVF_E8M0: return kvf_e8m0_encode(x);
    case KVF_BF16: return kvf_bf16_encode_sat(x);
    default: return UINT32_MAX;
    }
}
