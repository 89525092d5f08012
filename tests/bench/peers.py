"""kvbench's peers: the decode steps and the element casts that kvbench times in C, written the way a
reader of the lineage writes them in numpy, torch and ml_dtypes, so that the bench can print peer time
over C time in the same run. One process, driven over stdin and stdout a line at a time, so that the
C side can time its own step just before and just after each of the peer's runs (a slow spell then
moves both):

    hello                       -> "peers numpy=1 torch=0|1 ml_dtypes=0|1"
    attend DIR groups G Dk Dv v_base scale T width f32|bf16
        the step kvbench's ring step runs (kv_ring_attend): q[groups·G][Dk] (DIR/q.f32), a cache of T
        rows of `width` elements (DIR/rows.bin, float32 or bf16 bits), group g's keys the columns
        g·Dk … and its values v_base + g·Dv …; the C step's output[groups·G][Dv] (DIR/out.f32). Each
        peer runs once and is checked against the C output: -> "variants NAME:ERR ...", ERR the largest
        |peer − C| over the largest |C| (the float32 agreement the row reports).
    cast FORMAT DIR n           -> x[n] float32 (DIR/x.f32), C's codes one a byte (DIR/codes.u8) and C's
        decoded codes (DIR/y.f32); ml_dtypes' astype both ways: -> "variants encode:MISMATCHES
        decode:MISMATCHES" (values whose code or decoded value differs from C's; 0 is the same thing)
    quant SCHEME DIR n S_GLOBAL -> x[n] float32 (DIR/x.f32), C's packed E2M1 codes (DIR/codes.u8, n/2
        bytes) and scales (DIR/scales.u8, a byte a block) of mxfp4 or nvfp4 (S_GLOBAL, a hex float, its
        tensor scale); the block quantiser written in numpy around ml_dtypes' astype: -> "variants
        quantise:MISMATCHES" (blocks whose scale or codes differ from C's)
    time NAME repeats           -> "seconds MEDIAN" of `repeats` runs of the variant (warm: its check ran it)
    quit

The peer keeps its cache in the layout its library wants ((group, T, d) for GQA), laid out when it
loads, as a server would store it; a bf16 cache stays bf16 and torch widens it to float32 on every
step, the cost the C step's bf16 rows are read against. Threads: one (torch.set_num_threads(1); the
environment kvbench starts this with pins numpy's BLAS to one).
"""
import os
import sys
import time

try:
    import numpy as np
except ImportError:
    sys.exit(0)  # kvbench reads the silence and prints the one line that skips the peers

try:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
except ImportError:
    torch = None
try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None


def np_attend(q, K, V, scale):
    """q (g, G, Dk), K (g, T, Dk), V (g, T, Dv) -> (g, G, Dv): softmax(scale · q K^T) V per group."""
    s = np.matmul(q, K.transpose(0, 2, 1))
    s *= scale
    s -= s.max(-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(-1, keepdims=True)
    return np.matmul(s, V)


def torch_mm(q, K, V, scale):
    s = torch.matmul(q, K.transpose(1, 2))
    s.mul_(scale)
    return torch.matmul(torch.softmax(s, -1), V)


def torch_sdpa(q, K, V, scale):
    return F.scaled_dot_product_attention(q, K, V, scale=scale)


def grouped(rows, groups, Dk, Dv, v_base):
    """(T, width) rows -> K (g, T, Dk), V (g, T, Dv): views for one group (MLA: V is K's first Dv
    columns), contiguous per-group copies for several (GQA)."""
    T = rows.shape[0]
    if groups == 1:
        return rows[None, :, :Dk], rows[None, :, v_base:v_base + Dv]
    K = rows[:, :groups * Dk].reshape(T, groups, Dk).swapaxes(0, 1)
    V = rows[:, v_base:v_base + groups * Dv].reshape(T, groups, Dv).swapaxes(0, 1)
    if isinstance(K, np.ndarray):
        return np.ascontiguousarray(K), np.ascontiguousarray(V)
    return K.contiguous(), V.contiguous()


def widen_bf16(bits):
    """bf16 bits (uint16) -> float32: the bits are the float's upper half."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def attend_variants(d, groups, G, Dk, Dv, v_base, scale, T, width, store):
    q = np.fromfile(os.path.join(d, "q.f32"), np.float32).reshape(groups, G, Dk)
    raw = np.fromfile(os.path.join(d, "rows.bin"), np.uint16 if store == "bf16" else np.float32)
    raw = raw.reshape(T, width)
    rows = widen_bf16(raw) if store == "bf16" else raw
    s32 = np.float32(scale)
    runs = {}
    if store == "f32":
        K, V = grouped(rows, groups, Dk, Dv, v_base)
        runs["numpy f32"] = lambda: np_attend(q, K, V, s32)
        if groups == 1:
            q64, K64, V64 = (a.astype(np.float64) for a in (q, K, V))
            runs["numpy f64"] = lambda: np_attend(q64, K64, V64, np.float64(scale))
        if torch:
            tq, tK, tV = (torch.from_numpy(a) for a in (q, K, V))
            runs["torch mm"] = lambda: torch_mm(tq, tK, tV, scale)
            runs["torch SDPA"] = lambda: torch_sdpa(tq, tK, tV, scale)
    elif torch:
        tq = torch.from_numpy(q)
        bits = torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16)
        if groups == 1:
            def widened():
                w = bits.float()
                return w[None, :, :Dk], w[None, :, v_base:v_base + Dv]
        else:
            K16, V16 = grouped(bits, groups, Dk, Dv, v_base)

            def widened():
                return K16.float(), V16.float()
        runs["torch mm widening"] = lambda: torch_mm(tq, *widened(), scale)
        runs["torch SDPA widening"] = lambda: torch_sdpa(tq, *widened(), scale)
    out = np.fromfile(os.path.join(d, "out.f32"), np.float32).reshape(groups, G, Dv).astype(np.float64)
    top = np.abs(out).max()
    errs = {}
    for name, run in runs.items():
        got = run()
        got = got.numpy() if torch and isinstance(got, torch.Tensor) else got
        errs[name] = np.abs(got.astype(np.float64) - out).max() / top
    return runs, errs


CASTS = {"e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "e2m1": "float4_e2m1fn"}


def cast_variants(fmt, d, n):
    dtype = getattr(ml_dtypes, CASTS[fmt])
    x = np.fromfile(os.path.join(d, "x.f32"), np.float32, n)
    c_codes = np.fromfile(os.path.join(d, "codes.u8"), np.uint8, n)
    c_decoded = np.fromfile(os.path.join(d, "y.f32"), np.float32, n)
    codes = c_codes.view(dtype)
    runs = {"encode": lambda: x.astype(dtype), "decode": lambda: codes.astype(np.float32)}
    same_code = runs["encode"]().view(np.uint8) == c_codes
    decoded = runs["decode"]()
    same_value = (decoded == c_decoded) | (np.isnan(decoded) & np.isnan(c_decoded))
    return runs, {"encode": int(n - same_code.sum()), "decode": int(n - same_value.sum())}


def pack_e2m1(q):
    """q (blocks, k) float32 quotients within ±6 -> (blocks, k/2) bytes, element 2j in the low nibble."""
    c = q.astype(ml_dtypes.float4_e2m1fn).view(np.uint8)
    return c[:, 0::2] | (c[:, 1::2] << 4)


def quant_mxfp4(x):
    """OCP MX v1.0: 32-value blocks, scale 2^(floor(log2 amax) - 2) as E8M0, amax 0 taken as 2^-126."""
    b = x.reshape(-1, 32)
    amax = np.maximum(np.abs(b).max(1), np.float32(2.0**-126))
    e = np.clip(np.frexp(amax)[1] - 3, -127, 127)
    q = np.clip(b / np.ldexp(np.float32(1), e)[:, None], -6, 6)
    return pack_e2m1(q), (e + 127).astype(np.uint8)


def quant_nvfp4(x, s_global):
    """NVFP4: 16-value blocks, scale e4m3(amax / 6 / s_global) clamped to [2^-6, 448]."""
    b = x.reshape(-1, 16)
    s = np.clip(np.abs(b).max(1) / np.float32(6) / s_global, np.float32(2.0**-6), np.float32(448))
    scale = s.astype(ml_dtypes.float8_e4m3fn)
    q = np.clip(b / (s_global * scale.astype(np.float32))[:, None], -6, 6)
    return pack_e2m1(q), scale.view(np.uint8)


QUANTS = {"mxfp4": 32, "nvfp4": 16}


def quant_variants(scheme, d, n, s_global):
    block = QUANTS[scheme]
    x = np.fromfile(os.path.join(d, "x.f32"), np.float32, n)
    c_codes = np.fromfile(os.path.join(d, "codes.u8"), np.uint8, n // 2).reshape(-1, block // 2)
    c_scales = np.fromfile(os.path.join(d, "scales.u8"), np.uint8, n // block)
    s_global = np.float32(s_global)
    run = (lambda: quant_mxfp4(x)) if scheme == "mxfp4" else (lambda: quant_nvfp4(x, s_global))
    codes, scales = run()
    bad = (codes != c_codes).any(1) | (scales != c_scales)
    return {"quantise": run}, {"quantise": int(bad.sum())}


def median_seconds(run, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 2]


def reply(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main():
    runs = {}
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        if w[0] == "hello":
            reply(f"peers numpy=1 torch={int(torch is not None)} ml_dtypes={int(ml_dtypes is not None)}")
        elif w[0] == "attend":
            g, G, Dk, Dv, vb = (int(a) for a in w[2:7])
            runs, errs = attend_variants(w[1], g, G, Dk, Dv, vb, float(w[7]), int(w[8]), int(w[9]), w[10])
            reply("variants " + " ".join(f"{k.replace(' ', '_')}:{v:.3g}" for k, v in errs.items()))
        elif w[0] == "cast":
            runs, errs = cast_variants(w[1], w[2], int(w[3]))
            reply("variants " + " ".join(f"{k}:{v}" for k, v in errs.items()))
        elif w[0] == "quant":
            runs, errs = quant_variants(w[1], w[2], int(w[3]), float.fromhex(w[4]))
            reply("variants " + " ".join(f"{k}:{v}" for k, v in errs.items()))
        elif w[0] == "time":
            reply(f"seconds {median_seconds(runs[w[1].replace('_', ' ')], int(w[2])):.9g}")
        elif w[0] == "quit":
            break
        else:
            reply(f"error unknown command {w[0]!r}")


if __name__ == "__main__":
    main()
