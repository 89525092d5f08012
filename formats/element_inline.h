/* Element casts on float32 bits, inline: one definition for element.c's public and bulk casts and for
 * block.c's quantiser loops, so that both vectorise. Internal to formats/; element.h is the interface.
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
 * Both candidates are computed and one is selected bitwise, so loops over them vectorise.
 * Decoders assemble the float32 bits of normal codes directly and compute subnormal codes as
 * M × (spacing), an exact product of normal numbers. */
#ifndef KVF_ELEMENT_INLINE_H
#define KVF_ELEMENT_INLINE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* Largest finite magnitudes of the block elements (kvf_element_max reports these). */
#define E4M3_MAX 448.0f
#define E2M1_MAX 6.0f

/* float32 fields: the sign bit, the magnitude bits, +inf, the quiet NaN */
#define F32_SIGN 0x80000000u
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

/* a < b for magnitude bits and codes, which stay below 2^31: there a signed compare agrees with an
 * unsigned one, and SSE2 compares signed 32-bit lanes in one instruction, unsigned ones in three. */
static inline int below(uint32_t a, uint32_t b)
{
    return (int32_t)a < (int32_t)b;
}

static inline uint32_t min_code(uint32_t a, uint32_t b)
{
    return below(a, b) ? a : b;
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
    return select_u32(below(a, min_normal), subnormal, normal);
}

/* The encoders below assemble sign and magnitude code at the top of a 32-bit word and shift the code
 * down once at the end: a vectorised loop then narrows its 32-bit lanes to the code's width once,
 * where fields combined at the bottom are narrowed one by one. */

/* E4M3: 1.4.3, bias 7. `overflow` is the code a finite value past 448 (and inf) becomes: the NaN
 * code 0x7F for the plain cast, 448's code 0x7E for the saturating one. */
static inline uint8_t e4m3_from_bits(uint32_t b, uint32_t overflow)
{
    uint32_t a = b & F32_ABS;
    uint32_t code = min_code(magnitude_code(a, 3, 7), overflow);
    code = select_u32(below(F32_INF, a), 0x7Fu, code);
    return (uint8_t)(((b & F32_SIGN) | (code << 24)) >> 24);
}

/* E5M2: 1.5.2, bias 15. `overflow` is 0x7C (inf) for the plain cast, 0x7B (57344) saturating. */
static inline uint8_t e5m2_from_bits(uint32_t b, uint32_t overflow)
{
    uint32_t a = b & F32_ABS;
    uint32_t code = min_code(magnitude_code(a, 2, 15), overflow);
    code = select_u32(below(F32_INF, a), 0x7Eu, code);
    return (uint8_t)(((b & F32_SIGN) | (code << 24)) >> 24);
}

/* E2M1: 1.2.1, bias 1; overflow and inf clamp to 6 in both casts. NaN has no code: +NaN gives
 * 0x8 and −NaN 0x0, as ml_dtypes does (the sign bit flipped over a zero). */
static inline uint8_t e2m1_from_bits(uint32_t b)
{
    uint32_t a = b & F32_ABS;
    uint32_t sign = b & F32_SIGN;
    uint32_t code = sign | (min_code(magnitude_code(a, 1, 1), 0x7u) << 28);
    code = select_u32(below(F32_INF, a), sign ^ F32_SIGN, code);
    return (uint8_t)(code >> 28);
}

/* bf16: the top half of float32, rounded to nearest even in place. `overflow` is 0x7F80 (inf) for the
 * plain cast, 0x7F7F (the largest finite) saturating. NaN becomes the quiet NaN with its sign. */
static inline uint16_t bf16_from_bits(uint32_t b, uint32_t overflow)
{
    uint32_t a = b & F32_ABS;
    uint32_t code = min_code((a + 0x7FFFu + ((a >> 16) & 1u)) >> 16, overflow);
    code = select_u32(below(F32_INF, a), 0x7FC0u, code);
    return (uint16_t)(((b & F32_SIGN) | (code << 16)) >> 16);
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

/* The saturating casts the block schemes use (kvf_e4m3_encode_sat, kvf_e2m1_encode_sat). */
static inline uint8_t e4m3_sat_code(float x)
{
    return e4m3_from_bits(float_bits(x), 0x7Eu);
}

static inline uint8_t e2m1_code(float x)
{
    return e2m1_from_bits(float_bits(x));
}

/* Two E2M1 codes in one byte: the first (element 2j) in the low nibble, the second in the high one. */
static inline uint8_t e2m1_nibbles(uint8_t first, uint8_t second)
{
    return (uint8_t)(first | (second << 4));
}

/* The E2M1 codes of two values, packed as e2m1_nibbles. */
static inline uint8_t e2m1_pair(float first, float second)
{
    return e2m1_nibbles(e2m1_code(first), e2m1_code(second));
}

/* The two values of every packed E2M1 byte, element 2j (low nibble) then 2j+1 (element.c). */
extern const float kvf_e2m1_pairs[256][2];

/* The variants of the bulk decoders (element.c, isa.h): a dequantiser in block.c calls its own
 * variant's directly, once per block, rather than through the dispatch. */
void kvf_e4m3_decode_n_baseline(float *x, const uint8_t *codes, size_t n);
void kvf_e4m3_decode_n_avx2(float *x, const uint8_t *codes, size_t n);
void kvf_e4m3_decode_n_avx512(float *x, const uint8_t *codes, size_t n);

#endif
