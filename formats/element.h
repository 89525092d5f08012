/* Element formats: exact decode (code → float) and two encodes per format.
 *
 *   format          bits s.e.m  bias  max finite      specials
 *   float8_e4m3fn   1.4.3       7     448   (0x7E)    no inf; NaN = 0x7F, 0xFF
 *   float8_e5m2     1.5.2       15    57344 (0x7B)    ±inf 0x7C/0xFC; NaN S.11111.{01,10,11}
 *   float4_e2m1fn   1.2.1       1     6     (0x7)     none: all 16 codes are numbers; code in the low nibble
 *   float8_e8m0fnu  0.8.0       127   2^127 (0xFE)    unsigned, no zero; NaN = 0xFF; used only as a scale
 *   bfloat16        1.8.7       127   IEEE-like       IEEE inf and NaN
 *
 * kvf_<f>_encode is the plain cast: round to nearest, ties to even, on the exact float32 value,
 * subnormals kept (never flushed); a finite value that rounds past the largest finite gives NaN
 * (E4M3) or ±inf (E5M2, bf16), as numpy's astype with ml_dtypes does.
 * kvf_<f>_encode_sat is CUDA's __NV_SATFINITE: the same rounding, but overflow and ±inf clamp to
 * ±max finite (the cast DeepSeek's kernels use). NaN stays NaN with its sign kept (E4M3 0x7F/0xFF,
 * E5M2 0x7E/0xFE). E2M1 has no NaN: both encodes give 0x8 (−0) for +NaN and 0x0 for −NaN, as
 * ml_dtypes does; block quantisers reject NaN before it gets here.
 * E8M0 scale *selection* from a block maximum lives in scale.h, apart from any cast. */
#ifndef KVF_ELEMENT_H
#define KVF_ELEMENT_H

#include <stddef.h>
#include <stdint.h>

typedef enum { KVF_E4M3, KVF_E5M2, KVF_E2M1, KVF_E8M0, KVF_BF16, KVF_N_ELEMENT } kvf_element;

/* Accepts the ml_dtypes names (float8_e4m3fn, float8_e5m2, float4_e2m1fn, float8_e8m0fnu,
 * bfloat16) and the short aliases (e4m3, e5m2, e2m1, e8m0, bf16). Returns 0, or -1 if unknown. */
int kvf_element_from_name(const char *name, kvf_element *out);
const char *kvf_element_name(kvf_element f);   /* the ml_dtypes name */
unsigned kvf_element_bits(kvf_element f);      /* 8, 8, 4, 8, 16 */
double kvf_element_max(kvf_element f);         /* largest finite value */

float   kvf_e4m3_decode(uint8_t code);
uint8_t kvf_e4m3_encode(float x);
uint8_t kvf_e4m3_encode_sat(float x);

float   kvf_e5m2_decode(uint8_t code);
uint8_t kvf_e5m2_encode(float x);
uint8_t kvf_e5m2_encode_sat(float x);

float   kvf_e2m1_decode(uint8_t code);          /* uses the low nibble only */
uint8_t kvf_e2m1_encode(float x);
uint8_t kvf_e2m1_encode_sat(float x);

float    kvf_bf16_decode(uint16_t code);
uint16_t kvf_bf16_encode(float x);
uint16_t kvf_bf16_encode_sat(float x);

/* E8M0 code c means 2^(c − 127); 0xFF is NaN. */
float   kvf_e8m0_decode(uint8_t code);
/* Generic casts of a positive value to a power of two, each naming its rounding:
 *   _encode      round toward +inf, saturating at 2^127 (CUDA's __nv_fp8_e8m0 constructor);
 *                zero, negatives, NaN → 0xFF.
 *   _encode_nearest  nearest in the linear domain with a tie (1.5·2^k) rounding up, as ml_dtypes;
 *                zero, negatives, NaN, inf and values ≥ 1.5·2^127 → 0xFF. Float32 subnormals in
 *                (2^-127, 1.5·2^-127) give the nearer 2^-127 (0x00); ml_dtypes gives 0x01 there. */
uint8_t kvf_e8m0_encode(float x);
uint8_t kvf_e8m0_encode_nearest(float x);

/* The same casts selected by format; codes widen to uint32_t. E8M0's _sat form is kvf_e8m0_encode;
 * its plain form is kvf_e8m0_encode_nearest (ml_dtypes' astype, like every other plain form here).
 * An unknown format decodes to NaN and encodes to UINT32_MAX; kvf_element_name gives NULL. */
float    kvf_decode(kvf_element f, uint32_t code);
uint32_t kvf_encode(kvf_element f, float x);
uint32_t kvf_encode_sat(kvf_element f, float x);

/* Bulk casts, the same rules as the scalar ones element by element, vectorised for the CPU they run
 * on (isa.h: AVX-512, AVX2+FMA or baseline x86-64, the same bits in each).
 * Shapes: x[n] floats; codes[n]; for E2M1 packed[(n+1)/2] bytes, element 2j in the LOW nibble of
 * byte j and element 2j+1 in the HIGH nibble (odd n: the last high nibble is written as 0).
 * E2M1's plain and saturating casts coincide, so it has one encoder. */
void kvf_e4m3_encode_n(uint8_t *codes, const float *x, size_t n);
void kvf_e4m3_encode_sat_n(uint8_t *codes, const float *x, size_t n);
void kvf_e4m3_decode_n(float *x, const uint8_t *codes, size_t n);

void kvf_e5m2_encode_n(uint8_t *codes, const float *x, size_t n);
void kvf_e5m2_encode_sat_n(uint8_t *codes, const float *x, size_t n);
void kvf_e5m2_decode_n(float *x, const uint8_t *codes, size_t n);

void kvf_e2m1_encode_n(uint8_t *packed, const float *x, size_t n);
void kvf_e2m1_decode_n(float *x, const uint8_t *packed, size_t n);

void kvf_bf16_encode_n(uint16_t *codes, const float *x, size_t n);
void kvf_bf16_encode_sat_n(uint16_t *codes, const float *x, size_t n);
void kvf_bf16_decode_n(float *x, const uint16_t *codes, size_t n);

#endif
