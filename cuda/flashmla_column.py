"""FlashMLA beside our kernels: its dense MLA decode (bf16 cache) and sparse FP8 decode (V3.2's 656-byte
rows) at bench_cuda's shapes, timed as bench_cuda times (the median of 20 calls, each alone between CUDA
events after 3 warm-up calls, with L2 flushed before each), and our time over theirs from bench_cuda's
table.

usage: python3 cuda/flashmla_column.py WHEEL TABLE
  WHEEL  the sgl-flash-mla wheel (SM90 kernels, PyTorch's stable ABI), unpacked into a temporary folder
  TABLE  bench_cuda's output, whose rows give our times
Where the wheel cannot run (no torch, no GPU, not SM90, a torch it will not load into) it prints why and
exits 0: the column is then absent, nothing has failed. Exit 2 on bad arguments or a failed timing.

Call signatures: flash_mla/flash_mla_interface.py of the wheel (flash_mla_with_kvcache, use_legacy=True
for the SM90 kernels and the V3.2 format, which the wheel detects from the 656 bytes per token)."""
import os
import sys
import tempfile
import zipfile

WARMUP, REPS = 3, 20
# bench_cuda's FULL sizes (tests/cuda/bench_cuda.c): its rows and the shapes they run
ROWS = {
    "dense": ("mla absorbed, bf16, tensor cores", dict(B=64, H=64, N=4096)),
    "sparse": ("dsa sparse fp8, tensor cores", dict(B=64, H=128, N=65536, K=2048)),
}
PAGE = 64  # tokens per page of FlashMLA's cache


def skip(why):
    print(f"flashmla: column skipped: {why}")
    sys.exit(0)


def our_ms(table_path, name):
    """Milliseconds of row `name` in bench_cuda's table, or None where it is missing or failed."""
    with open(table_path) as f:
        for line in f:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) >= 4 and cells[0] == name:
                try:
                    return float(cells[3])
                except ValueError:
                    return None
    return None


def median_ms(torch, run):
    flush = torch.empty(2 * torch.cuda.get_device_properties(0).L2_cache_size, dtype=torch.uint8, device="cuda")
    for _ in range(WARMUP):
        run()
    times = []
    for _ in range(REPS):
        flush.zero_()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    times.sort()
    return (times[(REPS - 1) // 2] + times[REPS // 2]) / 2


def dense(torch, fm, B, H, N):
    """V3's absorbed decode over a paged bf16 cache of 576-wide rows, N per sequence."""
    pages = N // PAGE
    q = torch.randn(B, 1, H, 576, dtype=torch.bfloat16, device="cuda")
    cache = torch.randn(B * pages, PAGE, 1, 576, dtype=torch.bfloat16, device="cuda")
    table = torch.arange(B * pages, dtype=torch.int32, device="cuda").view(B, pages)
    lens = torch.full((B,), N, dtype=torch.int32, device="cuda")
    meta, _ = fm.get_mla_metadata()
    return lambda: fm.flash_mla_with_kvcache(q, cache, table, lens, 512, meta, use_legacy=True)


def v32_rows(torch, n):
    """n V3.2 main rows of 656 bytes: E4M3 codes, four float32 scales, 64 bf16 RoPE values."""
    nope = torch.randn(n, 512, device="cuda").to(torch.float8_e4m3fn).view(torch.uint8)
    scale = torch.ones(n, 4, dtype=torch.float32, device="cuda").view(torch.uint8)
    rope = torch.randn(n, 64, device="cuda").to(torch.bfloat16).view(torch.uint8)
    return torch.cat([nope, scale, rope], dim=1)


def sparse(torch, fm, B, H, N, K):
    """V3.2's sparse decode: each sequence's K picks among its own N rows of 656 bytes."""
    q = torch.randn(B, 1, H, 576, dtype=torch.bfloat16, device="cuda")
    cache = v32_rows(torch, B * N).view(B * N // PAGE, PAGE, 1, 656)
    base = torch.arange(B, dtype=torch.int32, device="cuda").view(B, 1, 1) * N
    picks = torch.randint(0, N, (B, 1, K), dtype=torch.int32, device="cuda") + base
    meta, _ = fm.get_mla_metadata()
    return lambda: fm.flash_mla_with_kvcache(q, cache, None, None, 512, meta, indices=picks, use_legacy=True)


def load(wheel):
    try:
        import torch
    except ImportError as e:
        skip(f"torch does not import ({e})")
    if not torch.cuda.is_available():
        skip("torch sees no CUDA device")
    if torch.cuda.get_device_capability(0) != (9, 0):
        skip(f"the wheel's kernels are SM90, this is sm_{''.join(map(str, torch.cuda.get_device_capability(0)))}")
    folder = tempfile.mkdtemp(prefix="flashmla-")
    zipfile.ZipFile(wheel).extractall(folder)
    sys.path.insert(0, folder)
    try:
        import flash_mla
    except Exception as e:  # the wheel's loader raises whatever dlopen or torch's registry gives
        skip(f"the wheel does not load into torch {torch.__version__}: {e}")
    return torch, flash_mla


def main(argv):
    if len(argv) != 3 or not os.path.isfile(argv[1]) or not os.path.isfile(argv[2]):
        print("usage: flashmla_column.py WHEEL TABLE", file=sys.stderr)
        return 2
    torch, fm = load(argv[1])
    print(f"| {'kernel (FlashMLA ' + fm.__version__ + ')':<34} | {'shape':<24} | {'theirs ms':>9} | {'ours ms':>9} | "
          f"{'ours/theirs':>11} |")
    make = {"dense": dense, "sparse": sparse}
    failed = 0
    for key, (name, shape) in ROWS.items():
        desc = " ".join(f"{k} {v}" for k, v in shape.items())
        try:
            theirs = median_ms(torch, make[key](torch, fm, **shape))
        except Exception as e:  # one failed kernel leaves the other's line
            print(f"| {key + ' decode':<34} | FAILED: {e}", flush=True)
            failed += 1
            continue
        ours = our_ms(argv[2], name)
        ratio = f"{ours / theirs:11.3f}" if ours else f"{'n/a':>11}"
        print(f"| {key + ' decode':<34} | {desc:<24} | {theirs:9.4g} | {ours if ours else 'n/a':>9} | {ratio} |",
              flush=True)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
