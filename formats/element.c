/* Element codecs, float32 ↔ E4M3, E5M2, E2M1, E8M0 and bf16 (rounding as ml_dtypes and CUDA cuda_fp8.h;
 * chapters/05_formats/README.md).
 * The E4M3, E5M2, E2M1 and bf16 casts are the branch-free ones of element_inline.h. */
#include "element.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "element_inline.h"
#include "isa.h"

/* E2M1 magnitudes of codes 0..7 (OCP MX v1.0, section 5), then their negatives. */
#define E2M1_MAGNITUDE(m) \
    ((m) == 0 ? 0.0f : (m) == 1 ? 0.5f : (m) == 2 ? 1.0f : (m) == 3 ? 1.5f : (m) == 4 ? 2.0f : (m) == 5 ? 3.0f \
                                                                      : (m) == 6 ? 4.0f : 6.0f)
#define E2M1_VALUE(c) (((c) & 8) ? -E2M1_MAGNITUDE((c) & 7) : E2M1_MAGNITUDE((c) & 7))

/* The two values of every packed byte: element 2j from the low nibble, 2j+1 from the high one. A byte
 * decodes as one 8-byte copy, twice as fast as two nibble lookups (whose interleaved stores keep the
 * loop from vectorising): MXFP4 and NVFP4 dequantise through it. */
#define E2M1_PAIR(b) {E2M1_VALUE((b) & 15), E2M1_VALUE((b) >> 4)}
#define E2M1_PAIRS16(h)                                                                                      \
    E2M1_PAIR(16 * (h) + 0), E2M1_PAIR(16 * (h) + 1), E2M1_PAIR(16 * (h) + 2), E2M1_PAIR(16 * (h) + 3),     \
        E2M1_PAIR(16 * (h) + 4), E2M1_PAIR(16 * (h) + 5), E2M1_PAIR(16 * (h) + 6), E2M1_PAIR(16 * (h) + 7), \
        E2M1_PAIR(16 * (h) + 8), E2M1_PAIR(16 * (h) + 9), E2M1_PAIR(16 * (h) + 10), E2M1_PAIR(16 * (h) + 11), \
        E2M1_PAIR(16 * (h) + 12), E2M1_PAIR(16 * (h) + 13), E2M1_PAIR(16 * (h) + 14), E2M1_PAIR(16 * (h) + 15)
#if KVF_ISA_ONCE /* one table, kvf_e2m1_pairs (element_inline.h), for every variant */
const float kvf_e2m1_pairs[256][2] = {
    E2M1_PAIRS16(0),  E2M1_PAIRS16(1),  E2M1_PAIRS16(2),  E2M1_PAIRS16(3),  E2M1_PAIRS16(4),  E2M1_PAIRS16(5),
    E2M1_PAIRS16(6),  E2M1_PAIRS16(7),  E2M1_PAIRS16(8),  E2M1_PAIRS16(9),  E2M1_PAIRS16(10), E2M1_PAIRS16(11),
    E2M1_PAIRS16(12), E2M1_PAIRS16(13), E2M1_PAIRS16(14), E2M1_PAIRS16(15),
};
#endif

/* Bulk casts, compiled once per instruction set (isa.h). `omp simd` asks the compiler to vectorise the
 * loop (it needs no OpenMP runtime). */

/* codes[n] ← x[n] */
void KVF_ISA_FN(kvf_e4m3_encode_n)(uint8_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = e4m3_from_bits(float_bits(x[i]), 0x7Fu);
}

/* codes[n] ← x[n] */
void KVF_ISA_FN(kvf_e4m3_encode_sat_n)(uint8_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = e4m3_sat_code(x[i]);
}

/* x[n] ← codes[n] */
void KVF_ISA_FN(kvf_e4m3_decode_n)(float *x, const uint8_t *codes, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = e4m3_to_float(codes[i]);
}

/* codes[n] ← x[n] */
void KVF_ISA_FN(kvf_e5m2_encode_n)(uint8_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = e5m2_from_bits(float_bits(x[i]), 0x7Cu);
}

/* codes[n] ← x[n] */
void KVF_ISA_FN(kvf_e5m2_encode_sat_n)(uint8_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = e5m2_from_bits(float_bits(x[i]), 0x7Bu);
}

/* x[n] ← codes[n] */
void KVF_ISA_FN(kvf_e5m2_decode_n)(float *x, const uint8_t *codes, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = e5m2_to_float(codes[i]);
}

/* packed[(n+1)/2] ← x[n]: element 2j in the low nibble of byte j, 2j+1 in the high nibble; for odd n
 * the last high nibble is 0 (+0). */
void KVF_ISA_FN(kvf_e2m1_encode_n)(uint8_t *packed, const float *x, size_t n)
{
    size_t pairs = n / 2;
#pragma omp simd
    for (size_t j = 0; j < pairs; j++) packed[j] = e2m1_pair(x[2 * j], x[2 * j + 1]);
    if (n % 2) packed[pairs] = e2m1_code(x[n - 1]);
}

/* x[n] ← packed[(n+1)/2], nibble order as kvf_e2m1_encode_n. */
void KVF_ISA_FN(kvf_e2m1_decode_n)(float *x, const uint8_t *packed, size_t n)
{
    size_t pairs = n / 2;
    for (size_t j = 0; j < pairs; j++) memcpy(x + 2 * j, kvf_e2m1_pairs[packed[j]], sizeof kvf_e2m1_pairs[0]);
    if (n % 2) x[n - 1] = kvf_e2m1_pairs[packed[pairs] & 0xFu][0];
}

/* codes[n] ← x[n] */
void KVF_ISA_FN(kvf_bf16_encode_n)(uint16_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = bf16_from_bits(float_bits(x[i]), 0x7F80u);
}

/* codes[n] ← x[n] */
void KVF_ISA_FN(kvf_bf16_encode_sat_n)(uint16_t *codes, const float *x, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) codes[i] = bf16_from_bits(float_bits(x[i]), 0x7F7Fu);
}

/* x[n] ← codes[n] */
void KVF_ISA_FN(kvf_bf16_decode_n)(float *x, const uint16_t *codes, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++) x[i] = bits_float((uint32_t)codes[i] << 16);
}

#if KVF_ISA_ONCE

/* The public bulk casts call the active variant. */
KVF_ISA_DISPATCH_VOID(kvf_e4m3_encode_n, (uint8_t *codes, const float *x, size_t n), (codes, x, n))
KVF_ISA_DISPATCH_VOID(kvf_e4m3_encode_sat_n, (uint8_t *codes, const float *x, size_t n), (codes, x, n))
KVF_ISA_DISPATCH_VOID(kvf_e4m3_decode_n, (float *x, const uint8_t *codes, size_t n), (x, codes, n))
KVF_ISA_DISPATCH_VOID(kvf_e5m2_encode_n, (uint8_t *codes, const float *x, size_t n), (codes, x, n))
KVF_ISA_DISPATCH_VOID(kvf_e5m2_encode_sat_n, (uint8_t *codes, const float *x, size_t n), (codes, x, n))
KVF_ISA_DISPATCH_VOID(kvf_e5m2_decode_n, (float *x, const uint8_t *codes, size_t n), (x, codes, n))
KVF_ISA_DISPATCH_VOID(kvf_e2m1_encode_n, (uint8_t *packed, const float *x, size_t n), (packed, x, n))
KVF_ISA_DISPATCH_VOID(kvf_e2m1_decode_n, (float *x, const uint8_t *packed, size_t n), (x, packed, n))
KVF_ISA_DISPATCH_VOID(kvf_bf16_encode_n, (uint16_t *codes, const float *x, size_t n), (codes, x, n))
KVF_ISA_DISPATCH_VOID(kvf_bf16_encode_sat_n, (uint16_t *codes, const float *x, size_t n), (codes, x, n))
KVF_ISA_DISPATCH_VOID(kvf_bf16_decode_n, (float *x, const uint16_t *codes, size_t n), (x, codes, n))

float kvf_e4m3_decode(uint8_t code) { return e4m3_to_float(code); }
uint8_t kvf_e4m3_encode(float x) { return e4m3_from_bits(float_bits(x), 0x7Fu); }
uint8_t kvf_e4m3_encode_sat(float x) { return e4m3_sat_code(x); }

float kvf_e5m2_decode(uint8_t code) { return e5m2_to_float(code); }
uint8_t kvf_e5m2_encode(float x) { return e5m2_from_bits(float_bits(x), 0x7Cu); }
uint8_t kvf_e5m2_encode_sat(float x) { return e5m2_from_bits(float_bits(x), 0x7Bu); }

float kvf_e2m1_decode(uint8_t code) { return kvf_e2m1_pairs[code & 0xFu][0]; }
uint8_t kvf_e2m1_encode(float x) { return e2m1_code(x); }
uint8_t kvf_e2m1_encode_sat(float x) { return e2m1_code(x); }

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
    return (uint8_t)min_code(code, 0xFEu);
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

/* Format facts, indexed by kvf_element. */
static const struct {
    const char *name, *alias;
    unsigned bits;
    double max;
} element_facts[KVF_N_ELEMENT] = {
    [KVF_E4M3] = {"float8_e4m3fn", "e4m3", 8, E4M3_MAX},
    [KVF_E5M2] = {"float8_e5m2", "e5m2", 8, 57344.0},
    [KVF_E2M1] = {"float4_e2m1fn", "e2m1", 4, E2M1_MAX},
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

#endif /* KVF_ISA_ONCE */
