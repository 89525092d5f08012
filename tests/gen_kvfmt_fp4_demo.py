#!/usr/bin/env python3
"""Reference numbers for `kvfmt fp4-demo` (read by tests/test_ch05_kvfmt.c).

The numpy check of V4.1's FP4 (chapters/05_formats/README.md), recomputed here in numpy alone for
seeds 0-19: a 512-channel latent from default_rng(seed).standard_normal, scaled in float64 to L2 norm
sqrt(512); blocks of 16 channels; each block's scale is amax / 6 rounded to the nearest E4M3 value
(ml_dtypes' cast); each element becomes the nearest E2M1 magnitude (0, .5, 1, 1.5, 2, 3, 4, 6) of
|x| / scale with the sign of x. Seed 0 gives the check's 3.861 and 0.0912.

Writes tests/data/kvfmt_fp4_demo.txt, one line per seed:
    <seed> <max |latent| rounded to 3 places> <relative L2 error rounded to 4 places>
each number printed as numpy prints np.float64(v).round(k) (so 3.32, not 3.320).
Run from the project root:  python3 tests/gen_kvfmt_fp4_demo.py
"""
import os

import ml_dtypes
import numpy as np

SEEDS = range(20)
DIM, BLOCK = 512, 16
E2M1_MAGNITUDES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "kvfmt_fp4_demo.txt")


def fp4_roundtrip(latent):
    blocks = latent.reshape(DIM // BLOCK, BLOCK)
    amax = np.abs(blocks).max(axis=1, keepdims=True)
    scale = (amax / 6.0).astype(ml_dtypes.float8_e4m3fn).astype(np.float64)
    ratio = np.abs(blocks) / scale
    nearest = E2M1_MAGNITUDES[np.abs(ratio[..., None] - E2M1_MAGNITUDES).argmin(axis=-1)]
    return (np.sign(blocks) * nearest * scale).reshape(DIM)


def demo_line(seed):
    latent = np.random.default_rng(seed).standard_normal(DIM)
    latent = latent * (np.sqrt(DIM) / np.linalg.norm(latent))
    err = fp4_roundtrip(latent) - latent
    peak = np.abs(latent).max().round(3)
    rel = (np.linalg.norm(err) / np.linalg.norm(latent)).round(4)
    return f"{seed} {peak} {rel}"


def main():
    with open(OUT, "w") as f:
        for seed in SEEDS:
            f.write(demo_line(seed) + "\n")


if __name__ == "__main__":
    main()
