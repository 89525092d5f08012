/* E8M0 scale selection: the power of two a block scheme divides by, chosen from the block's
 * absolute maximum amax. Kept apart from any cast (element.h): each rule is named for who uses it.
 * Every rule returns the E8M0 code k + 127 of the scale 2^k, with k clamped to [−127, 127];
 * k > 127, amax NaN or amax inf give 0xFF (NaN), as torchao does.
 *
 *   rule             k                                         used by
 *   ocp_floor        floor(log2 amax) − emax_elem              OCP MX v1.0 section 6.3, torchao FLOOR, microxcaling
 *   ceil             ceil(log2 amax)  − emax_elem              torchao CEIL
 *   even             floor(log2 round_m(amax)) − emax_elem     torchao EVEN (amax first rounded to the
 *                                                              element's mantissa width)
 *   rceil (ue8m0)    ceil(log2(amax / max_elem))               DeepSeek fast_round_scale, FlashMLA,
 *                                                              DeepGEMM ceil_to_ue8m0, cvt.rp.ue8m0
 *
 * emax_elem is the exponent of the element's largest binade (E4M3 8, E5M2 15, E2M1 2). The floor rule
 * can leave |x / 2^k| above max_elem (elements then saturate); rceil never does. rceil computes
 * ceil(log2 t) from the bits of t = fl32(amax · fl32(1 / max_elem)) as DeepSeek's kernels do.
 * amax = 0: the log of zero is taken as log2(2^-126) (OCP); DeepSeek's recipes floor amax first. */
#ifndef KVF_SCALE_H
#define KVF_SCALE_H

#include <stdint.h>

#include "element.h"

int     kvf_element_emax(kvf_element elem);   /* 8, 15, 2; -1 for formats that are not block elements */

uint8_t kvf_scale_ocp_floor(float amax, kvf_element elem);
uint8_t kvf_scale_ceil(float amax, kvf_element elem);
uint8_t kvf_scale_even(float amax, kvf_element elem);
uint8_t kvf_scale_rceil(float amax, kvf_element elem);

#endif
