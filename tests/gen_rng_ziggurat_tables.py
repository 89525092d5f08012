"""Write ref/core/rng_ziggurat_tables.h: the 256-layer normal ziggurat tables of numpy's Generator.

    python3 tests/gen_rng_ziggurat_tables.py            # rewrites ref/core/rng_ziggurat_tables.h

The tables are read back from numpy itself, so kvl_rng_normal draws numpy's standard_normal bit for
bit. They cannot be recomputed here instead: numpy's were made once by the float64 recipe

    x_255 = r,  x_i = f^-1(f(x_{i+1}) + v / x_{i+1}),  x_0 = 0,  f(x) = exp(-x^2/2)

with r = 3.6541528853610087963519472518 and v = 0.0049286732339746519, and the libm of that day
rounded exp(-x_38^2/2) one ulp away from glibc's. That single ulp reaches f_38 and every x below
layer 38, so neither glibc nor a long-double evaluation reproduces the published tables.

How the values are read. A PCG64 output is the XSL-RR of the state after one step, and a state whose
high half is zero outputs its low half unchanged. Choosing the state after the first step (s1) and
the increment so that the state after the second step is s2 lets us pick numpy's next two 64-bit
words. standard_normal splits its first word as idx = bits 0-7, sign = bit 8, rabs = bits 9-60;
it returns rabs * w[idx] at once when rabs < k[idx], otherwise it draws a uniform u (the second
word) and, for idx >= 1, accepts the wedge point when (f[idx-1] - f[idx]) * u + f[idx] <
exp(-x^2/2). Watching how far the state moved tells which branch ran, so:
  w[i]  = the value returned for rabs = 1 (for i = 1, where k = 0, through the wedge with u = 0);
  k[i]  = the smallest rabs that leaves the fast path (binary search over 52 bits);
  f[i]  = the one double near exp(-x_i^2/2) whose wedge thresholds over u match numpy's at several
          rabs (f[0] = f(0) = 1 by definition);
  r     = the tail value returned when u = 0 (r + 0).
"""
import math
import os
import sys

import numpy as np

MULT = 0x2360ED051FC65DA44385DF649FCCF645  # PCG64's 128-bit LCG multiplier
MASK128 = (1 << 128) - 1
MULT_INV = pow(MULT, -1, 1 << 128)
TWO52 = 1 << 52
TWO53 = 1 << 53
LAYERS = 256


class SteeredPCG64:
    """numpy's Generator whose next two 64-bit words are chosen by the caller."""

    def __init__(self):
        self.gen = np.random.Generator(np.random.PCG64(0))

    def set_next_words(self, first, second):
        s1, s2 = first, second  # states after step 1 and 2; high half 0 so output = low half
        inc = (s2 - s1 * MULT) & MASK128
        s0 = ((s1 - inc) * MULT_INV) & MASK128
        self.gen.bit_generator.state = {
            "bit_generator": "PCG64",
            "state": {"state": s0, "inc": inc},
            "has_uint32": 0,
            "uinteger": 0,
        }
        return s1, s2

    def normal(self, first, second):
        """Return (value, words used: 1, 2, or 3 meaning 'more than 2')."""
        s1, s2 = self.set_next_words(first, second)
        value = float(self.gen.standard_normal())
        after = self.gen.bit_generator.state["state"]["state"]
        return value, 1 if after == s1 else 2 if after == s2 else 3


def normal_word(idx, rabs, negative=False):
    return idx | (int(negative) << 8) | (rabs << 9)


def uniform_word(k):
    """The 64-bit word whose next_double is k * 2^-53."""
    return k << 11


def smallest_true(pred, lo, hi):
    """Smallest n in [lo, hi] with pred(n) true, for pred monotone false..true; hi if none earlier."""
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def read_w(rng, i):
    value, used = rng.normal(normal_word(i, 1), uniform_word(0))
    assert used == (2 if i == 1 else 1), (i, used)
    return value


def read_k(rng, i):
    return smallest_true(lambda rabs: rng.normal(normal_word(i, rabs), uniform_word(0))[1] != 1, 0, TWO52 - 1)


def wedge_threshold(accepts):
    """Smallest u index k (u = k * 2^-53) whose wedge point is rejected; accepts is monotone."""
    return smallest_true(lambda k: not accepts(k), 0, TWO53)


def read_f(rng, i, w, k, f_prev):
    x_top = w[i] * TWO52
    guess = math.exp(-0.5 * x_top * x_top)
    candidates = [guess]
    for _ in range(2):
        candidates = [math.nextafter(candidates[0], 0.0)] + candidates + [math.nextafter(candidates[-1], 2.0)]
    probes = sorted({TWO52 - 1, TWO52 - 2, TWO52 - (1 << 8), TWO52 - (1 << 20), (k[i] + TWO52) // 2})
    alive = list(candidates)
    for rabs in probes:
        if rabs < k[i]:
            continue
        x = float(rabs) * w[i]
        e = math.exp(-0.5 * x * x)
        seen = wedge_threshold(lambda u: rng.normal(normal_word(i, rabs), uniform_word(u))[1] == 2)
        alive = [c for c in alive
                 if wedge_threshold(lambda u: (f_prev - c) * (u * 2.0**-53) + c < e) == seen]
    if len(alive) != 1:
        sys.exit(f"layer {i}: {len(alive)} candidates for f match numpy's wedge thresholds")
    return alive[0]


def read_r(rng):
    rabs = (TWO52 - 1) & ~0x100  # bit 8 of rabs picks the tail's sign; keep it positive
    value, used = rng.normal(normal_word(0, rabs), uniform_word(0))
    assert used == 3, used  # tail: two uniforms, the second one unsteered but almost surely accepted
    return value


def read_tables():
    rng = SteeredPCG64()
    w = [read_w(rng, i) for i in range(LAYERS)]
    k = [read_k(rng, i) for i in range(LAYERS)]
    f = [1.0]
    for i in range(1, LAYERS):
        f.append(read_f(rng, i, w, k, f[i - 1]))
    return k, w, f, read_r(rng)


def float64_recipe_mismatches(k, w, f, r):
    """Entries where the float64 recipe on this machine's libm differs from numpy's tables."""
    v = 0.0049286732339746519
    x = [0.0] * LAYERS
    x[LAYERS - 1] = r
    for i in range(LAYERS - 2, 0, -1):
        x[i] = math.sqrt(-2.0 * math.log(math.exp(-0.5 * x[i + 1] * x[i + 1]) + v / x[i + 1]))
    bad = [f"w[{i}]" for i in range(1, LAYERS) if x[i] / TWO52 != w[i]]
    bad += [f"f[{i}]" for i in range(1, LAYERS) if math.exp(-0.5 * x[i] * x[i]) != f[i]]
    return bad


def rows(items, per_row):
    return ",\n".join("    " + ", ".join(items[i:i + per_row]) for i in range(0, len(items), per_row))


def header(k, w, f, r):
    inv_r = 1.0 / r
    assert inv_r == 0.27366123732975827203338247596  # numpy's ziggurat_nor_inv_r literal
    return f"""\
/* Generated by tests/gen_rng_ziggurat_tables.py from numpy {np.__version__}; do not edit.
 *
 * numpy Generator's 256-layer ziggurat for the standard normal (Marsaglia & Tsang 2000, with the
 * 52-bit layout of random_standard_normal), read back from numpy itself; the script's docstring says
 * how, and why a recomputation cannot match numpy to the bit. Layer i spans [x_(i-1), x_i] with
 * x_0 = 0 < x_1 < ... < x_255 = r; every layer and the base strip (rectangle plus tail) have area
 * v = 0.0049286732339746519 under f(x) = exp(-x^2/2).
 *   zig_k[i]  i >= 1: round(2^52 * x_(i-1) / x_i), the fast-path bound on rabs (zig_k[1] = 0);
 *             i = 0: round(2^52 * r f(r) / v), the rectangle's share of the base strip
 *   zig_w[i]  i >= 1: x_i / 2^52, so rabs * zig_w[i] lies in [0, x_i); i = 0: (v / f(r)) / 2^52
 *   zig_f[i]  f(x_i), zig_f[0] = 1
 * Included by rng.c only. */
#ifndef KVL_RNG_ZIGGURAT_TABLES_H
#define KVL_RNG_ZIGGURAT_TABLES_H

#include <stdint.h>

#define ZIG_LAYERS {LAYERS}

static const double zig_r = {r.hex()};      /* {r!r}, where the tail starts */
static const double zig_inv_r = {inv_r.hex()};  /* 1/r rounded once */

static const uint64_t zig_k[ZIG_LAYERS] = {{
{rows([f"0x{v:013X}u" for v in k], 4)}}};

static const double zig_w[ZIG_LAYERS] = {{
{rows([v.hex() for v in w], 3)}}};

static const double zig_f[ZIG_LAYERS] = {{
{rows([v.hex() for v in f], 3)}}};

#endif
"""


def main():
    k, w, f, r = read_tables()
    assert r == 3.6541528853610087963519472518
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.path.join(root, "ref", "core", "rng_ziggurat_tables.h")
    with open(path, "w") as out:
        out.write(header(k, w, f, r))
    bad = float64_recipe_mismatches(k, w, f, r)
    print(f"wrote {path}; float64 recipe on this libm differs at {len(bad)} entries: {' '.join(bad[:6])}"
          + (" ..." if len(bad) > 6 else ""))


if __name__ == "__main__":
    main()
