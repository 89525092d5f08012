#!/usr/bin/env python3
"""Golden vectors for formats/element: float32 inputs cast by ml_dtypes.

Writes tests/data/formats_golden.txt (read by tests/test_ch05_formats_element.c). Run from the
project root:  python3 tests/gen_formats_golden.py

One line per case:  <format> <input float32 bits> <astype code> <saturating code>
  astype     numpy's astype(<ml_dtypes type>) of the float32 input: the plain cast.
  saturating astype of np.clip(x, -max, max), for the formats whose plain cast can overflow
             (e4m3, e5m2, bf16), else "-". ml_dtypes exposes no saturating cast to Python (its C++
             conversion has a saturate template flag, unbound), so the column is built this way:
             max is exact in float32 and rounding is monotonic, so clip-then-round equals
             round-then-clamp for finite inputs; clip maps +-inf to +-max (CUDA's __NV_SATFINITE)
             and lets NaN through.
Inputs per format: +-0, +-inf, NaNs with several payloads, float32 subnormals and extremes, every
code value, every midpoint between neighbouring codes (including the overflow midpoint above the
largest finite) with its float32 neighbours, and log-uniform random values of both signs from
below the smallest subnormal to beyond the largest finite.
"""
import os
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np

SEED = 20240805
N_RANDOM = 2000
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "formats_golden.txt")

SMALL = {  # short name -> (ml_dtypes type, hex digits of a code, saturating column?)
    "e4m3": (ml_dtypes.float8_e4m3fn, 2, True),
    "e5m2": (ml_dtypes.float8_e5m2, 2, True),
    "e2m1": (ml_dtypes.float4_e2m1fn, 1, False),
}


def f32_bits(values):
    return [int(b) for b in np.asarray(values, dtype=np.float32).view(np.uint32)]


def bits_f32(bits):
    return np.asarray(bits, dtype=np.uint32).view(np.float32)


def with_neighbours(values):
    v = np.asarray(values, dtype=np.float32)
    return np.concatenate([v, np.nextafter(v, np.float32(np.inf)), np.nextafter(v, np.float32(-np.inf))])


def both_signs(bits):
    return bits + [b ^ 0x80000000 for b in bits]


def specials():
    nans = [0x7FC00000, 0x7FC00001, 0x7F800001, 0x7FFFFFFF, 0x7FA00000]
    subnormals = [0x00000001, 0x00000002, 0x00001234, 0x003FFFFF, 0x00400000, 0x00400001,
                  0x00500000, 0x005FFFFF, 0x00600000, 0x00600001, 0x007FFFFF]
    extremes = [0x00000000, 0x7F800000, 0x00800000, 0x00800001, 0x7F7FFFFF, 0x7F7FFFFE]
    return both_signs(nans + subnormals + extremes)


def log_uniform(rng, lo_log2, hi_log2, n):
    mags = np.exp2(rng.uniform(lo_log2, hi_log2, n)).astype(np.float32)
    signs = np.where(rng.random(n) < 0.5, -1.0, 1.0).astype(np.float32)
    return mags * signs


def small_format_inputs(dtype, rng):
    codes = np.arange(256 if np.dtype(dtype).itemsize == 1 else 16, dtype=np.uint8)
    if dtype is ml_dtypes.float4_e2m1fn:
        codes = codes[:16]
    values = codes.view(dtype).astype(np.float64)
    finite = np.unique(np.abs(values[np.isfinite(values)]))
    top_step = finite[-1] - finite[-2]
    rungs = np.append(finite, finite[-1] + top_step)  # the code that would follow the largest
    mids = (rungs[:-1] + rungs[1:]) / 2
    min_sub, fmax = finite[1], finite[-1]
    structured = np.concatenate([with_neighbours(rungs), with_neighbours(mids),
                                 np.array([2 * fmax, 1e10, 1e30, min_sub / 4, 1e-30], np.float32)])
    lo, hi = np.log2(min_sub) - 3, np.log2(fmax) + 3
    return (both_signs(f32_bits(structured)) + f32_bits(log_uniform(rng, lo, hi, N_RANDOM))
            + specials())


def e8m0_inputs(rng):
    k = np.arange(-149, 128, dtype=np.float64)
    structured = np.concatenate([with_neighbours(np.exp2(k)), with_neighbours(1.5 * np.exp2(k))])
    # Random values stay normal so that the only float32 subnormals are the fixed ones in specials().
    randoms = np.abs(log_uniform(rng, -126, 128, N_RANDOM))
    return (f32_bits(structured) + f32_bits([-1.0, -1.5, -(2.0 ** -127), -3e38]) + f32_bits(randoms)
            + specials())


def bf16_inputs(rng):
    bits = []
    for e in range(255):
        for mant in (0x00, 0x7F, 2 * int(rng.integers(0, 64)), 2 * int(rng.integers(0, 64)) + 1):
            code = (e << 7) | mant | (0x8000 if rng.random() < 0.5 else 0)
            tie = (code << 16) | 0x8000
            bits += [code << 16, tie, tie - 1, tie + 1]
    randoms = [int(b) for b in rng.integers(0, 2**32, N_RANDOM, dtype=np.uint64)]
    return bits + randoms + f32_bits(log_uniform(rng, -140, 128, N_RANDOM)) + specials()


def unique(bits):
    return list(dict.fromkeys(bits))


def cast_codes(bits, dtype):
    with np.errstate(invalid="ignore"):  # NaN and overflow inputs are the point
        out = bits_f32(bits).astype(dtype)
    return [int(c) for c in out.view(np.uint16 if out.dtype.itemsize == 2 else np.uint8)]


def clipped_codes(bits, dtype):
    fmax = np.float32(ml_dtypes.finfo(dtype).max)
    return cast_codes(f32_bits(np.clip(bits_f32(bits), -fmax, fmax)), dtype)


def e8m0_linear_nearest(b):
    """The ml_dtypes rule done exactly on the positive float32 with bits b: the nearest of 2^(c-127),
    c = 0..254, a tie (1.5*2^e) rounding up; past 1.5*2^127 it is code 255, the NaN."""
    x = Fraction(float(bits_f32([b])[0]))
    if x < Fraction(2) ** -127:
        return 0
    e = x.numerator.bit_length() - x.denominator.bit_length()  # floor(log2 x) or one above it
    if Fraction(2) ** e > x:
        e -= 1
    return e + 127 + (x >= Fraction(3, 2) * Fraction(2) ** e)


def e8m0_quirks(bits, codes):
    """Inputs where ml_dtypes' astype is not the nearest power of two: all must sit in the float32
    subnormals (2^-127, 1.5*2^-127), where ml_dtypes gives 2^-126."""
    quirks = []
    for b, c in zip(bits, codes):
        x = float(bits_f32([b])[0])
        if not (x > 0) or x >= 2.0**128:
            continue
        want = e8m0_linear_nearest(b)
        if want != c:
            assert 0x00400000 < b < 0x00600000 and c == 0x01 and want == 0x00, hex(b)
            quirks.append(b)
    return quirks


def main():
    rng = np.random.default_rng(SEED)
    rows = []
    for name, (dtype, width, has_sat) in SMALL.items():
        bits = unique(small_format_inputs(dtype, rng))
        plain = cast_codes(bits, dtype)
        sat = clipped_codes(bits, dtype) if has_sat else [None] * len(bits)
        rows += [(name, b, p, s, width) for b, p, s in zip(bits, plain, sat)]
    bits = unique(e8m0_inputs(rng))
    e8m0 = cast_codes(bits, ml_dtypes.float8_e8m0fnu)
    quirks = e8m0_quirks(bits, e8m0)
    rows += [("e8m0", b, c, None, 2) for b, c in zip(bits, e8m0)]
    bits = unique(bf16_inputs(rng))
    rows += [("bf16", b, p, s, 4) for b, p, s in
             zip(bits, cast_codes(bits, ml_dtypes.bfloat16), clipped_codes(bits, ml_dtypes.bfloat16))]

    with open(OUT, "w") as f:
        f.write("# formats golden vectors: float32 -> element codes by ml_dtypes (see tests/gen_formats_golden.py)\n")
        f.write(f"# ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}, seed {SEED}\n")
        f.write("# regenerate from the project root: python3 tests/gen_formats_golden.py\n")
        f.write("# columns: format input_f32_bits astype_code saturating_code(astype of clip(x,-max,max), or -)\n")
        f.write("# e8m0-quirk " + " ".join(f"{b:08x}" for b in quirks) + "\n")
        f.write(f"# rows {len(rows)}\n")
        for name, b, p, s, width in rows:
            sat = "-" if s is None else f"{s:0{width}x}"
            f.write(f"{name} {b:08x} {p:0{width}x} {sat}\n")
    print(f"{OUT}: {len(rows)} rows, e8m0 quirks {[hex(b) for b in quirks]}", file=sys.stderr)


if __name__ == "__main__":
    main()
