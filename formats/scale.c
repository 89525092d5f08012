/* E8M0 scale selection from a block maximum (OCP MX v1.0, section 6.3; torchao mx_formats). Every rule works on
 * the float32 bits of amax, so log2 is never evaluated in floating point: floor(log2 a) of a normal a is its
 * exponent, the ceiling adds one when a mantissa bit is set.
 * Below the smallest normal, 2^-126, every rule gives code 0: log2 amax < −126 and emax ≥ 2 put the
 * floor, ceil and even k under −127, and amax / max < 2^-127 does the same for rceil; the clamp
 * lifts them all to −127. A zero amax falls there too (OCP MX v1.0, section 6.3, reads log2 0 as log2 2^-126).
 * A negative amax is not an absolute maximum and gives 0xFF, like NaN and inf. */
#include "scale.h"

#include "element_inline.h"

enum { MIN_K = -127, MAX_K = 127, SCALE_NAN = 0xFF, SMALLEST_SCALE = 0x00 };

/* Mantissa width m of the block element (E4M3 3, E5M2 2, E2M1 1). */
static unsigned element_mbits(kvf_element elem)
{
    return elem == KVF_E4M3 ? 3u : elem == KVF_E5M2 ? 2u : 1u;
}

int kvf_element_emax(kvf_element elem)
{
    switch (elem) {
    case KVF_E4M3: return 8;
    case KVF_E5M2: return 15;
    case KVF_E2M1: return 2;
    default: return -1;
    }
}

/* Whether amax can be scaled for elem: a finite, non-negative maximum of a block-element format. */
static int scalable(float amax, kvf_element elem)
{
    return kvf_element_emax(elem) >= 0 && amax >= 0.0f && amax <= 0x1.FFFFFEp127f;
}

static int below_normal(float amax)
{
    return amax < 0x1p-126f;
}

static uint8_t code_of(int k)
{
    if (k < MIN_K) k = MIN_K;
    return k > MAX_K ? SCALE_NAN : (uint8_t)(k + 127);
}

/* floor and ceil of log2 of the normal float32 with bits b */
static int floor_log2_bits(uint32_t b)
{
    return (int)(b >> 23) - 127;
}

static int ceil_log2_bits(uint32_t b)
{
    return floor_log2_bits(b) + ((b & 0x007FFFFFu) != 0u);
}

uint8_t kvf_scale_ocp_floor(float amax, kvf_element elem)
{
    if (!scalable(amax, elem)) return SCALE_NAN;
    if (below_normal(amax)) return SMALLEST_SCALE;
    return code_of(floor_log2_bits(float_bits(amax)) - kvf_element_emax(elem));
}

uint8_t kvf_scale_ceil(float amax, kvf_element elem)
{
    if (!scalable(amax, elem)) return SCALE_NAN;
    if (below_normal(amax)) return SMALLEST_SCALE;
    return code_of(ceil_log2_bits(float_bits(amax)) - kvf_element_emax(elem));
}

/* round_m adds half an element ulp to the bits (torchao EVEN); whether a tie goes up or to even
 * makes no difference to the exponent, because the only tie that changes it sits above an all-ones
 * mantissa, which is odd. A carry past the largest float32 binade is 2^128, kept exact (torchao's
 * float arithmetic makes it inf and so NaN). */
uint8_t kvf_scale_even(float amax, kvf_element elem)
{
    if (!scalable(amax, elem)) return SCALE_NAN;
    if (below_normal(amax)) return SMALLEST_SCALE;
    uint32_t rounded = float_bits(amax) + (1u << (22u - element_mbits(elem)));
    return code_of(floor_log2_bits(rounded) - kvf_element_emax(elem));
}

/* t = fl32(amax · fl32(1/max)) as DeepSeek's act_quant computes it; ceil(log2 t) from t's bits:
 * the exponent, plus one if any mantissa bit is set. For a normal t this is exactly
 * ceil(log2(amax / max)) for max 448, 6 and 57344: the product scales with amax's exponent, so one
 * binade of amax holds every case, and tests/test_ch05_formats_scale.c checks a full one. A subnormal t
 * (amax below max·2^-126) has lost bits, so its ceiling is taken from amax against max·2^-127, exact
 * in float32: −126 above it, else −127 after the clamp. (DeepSeek's fast_log2_ceil gives −126 to
 * every nonzero subnormal t; its recipes floor amax far above this range.) */
uint8_t kvf_scale_rceil(float amax, kvf_element elem)
{
    if (!scalable(amax, elem)) return SCALE_NAN;
    if (below_normal(amax)) return SMALLEST_SCALE;
    const float max = (float)kvf_element_max(elem);
    uint32_t t = float_bits(amax * (1.0f / max));
    if (t < 0x00800000u) return code_of(amax > max * 0x1p-127f ? -126 : MIN_K);
    return code_of((int)(t >> 23) - 127 + ((t & 0x007FFFFFu) != 0u));
}
