"""The numpy peer of kvbench's MLA absorbed decode: one token's attention over T cached rows, written as
a reader of the lineage write-up writes it (its absorbed form: q_abs @ C.T, softmax, p @ C), in numpy's default
float64, or in float32 (the C step's own precision, so that the ratio measures the code around the
products). kvbench runs it in the same run, at the same sizes, and prints the ratio.

    python3 peer_mla.py float64|float32 n_h d_c d_r scale repeats T...

prints one line per T: "T median_seconds min_seconds max_seconds products_seconds" (after one warm-up
run), the last the median time of its two matrix products alone (q_abs @ C.T and p @ C, no softmax): what
numpy's own BLAS needs in that precision; in float64, the bound on how much faster any float32 code can
be than this peer short of a faster matrix product.
"""
import sys
import time

import numpy as np


def decode_absorbed(q_abs, C, d_c, scale):
    scores = (q_abs @ C.T) * scale                      # (n_h, T): the keys are the whole rows [c_kv | k_rope]
    p = np.exp(scores - scores.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    return p @ C[:, :d_c]                               # (n_h, d_c): the values are the latents


def products_only(q_abs, C, d_c):
    scores = q_abs @ C.T
    return scores @ C[:, :d_c]


def sorted_seconds(run, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    times.sort()
    return times


def main():
    dtype = np.dtype(sys.argv[1])
    n_h, d_c, d_r = (int(a) for a in sys.argv[2:5])
    scale, repeats = dtype.type(sys.argv[5]), int(sys.argv[6])
    rng = np.random.default_rng(0)
    q_abs = rng.standard_normal((n_h, d_c + d_r)).astype(dtype)
    for T in (int(a) for a in sys.argv[7:]):
        C = rng.uniform(-1.0, 1.0, (T, d_c + d_r)).astype(dtype)
        decode_absorbed(q_abs, C, d_c, scale)
        times = sorted_seconds(lambda: decode_absorbed(q_abs, C, d_c, scale), repeats)
        products = sorted_seconds(lambda: products_only(q_abs, C, d_c), repeats)
        print(T, times[len(times) // 2], times[0], times[-1], products[len(products) // 2], flush=True)


if __name__ == "__main__":
    main()
