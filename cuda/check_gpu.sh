#!/bin/sh
# make cuda-check: the first minutes on a GPU machine, in the order that keeps the most if they run out.
#   1. build with every core: the nvcc objects, the GPU suites and bench_cuda; where pkg-config cannot find
#      OpenBLAS, cJSON and Check, from the copies `make gpu-bundle` put in build-gpu-deps/ on a machine
#      that has them (KVL_CUDA_BUNDLE=1 uses them anyway);
#   2. bench_cuda's table, first, each row printed as it is measured, then FlashMLA's times at its shapes
#      where build-gpu-deps/ holds the sgl-flash-mla wheel and it loads (cuda/flashmla_column.py);
#   3. every GPU suite with CK_FORK=no (CUDA in a forked child is undefined), each under a time limit;
#   4. the same suites under compute-sanitizer's memcheck, where a probe run shows it works on this device.
# No device: it says so and succeeds (make test ran the suites on the emulator); a CUDA runtime that
# fails otherwise (a driver older than it) fails the check. The whole run keeps within KVL_CUDA_BUDGET
# seconds (default 450), each binary within KVL_CUDA_LIMIT (default 90); a stage the budget cannot hold is
# skipped, saying so.
# KVL_CUDA_REHEARSE=1 runs the same sequence on the emulator's binaries (bench_cuda_emu at smoke sizes,
# the emulator's builds of the same suites, the suites run again without compute-sanitizer standing in for
# memcheck), on a machine without a GPU.
# usage: BUILD=dir [NVCC=nvcc] sh cuda/check_gpu.sh; exit status 0, 1 if a kernel misses its target,
# 2 if anything failed.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
build=${BUILD:-build}
rehearse=${KVL_CUDA_REHEARSE:-0}
budget=${KVL_CUDA_BUDGET:-450}
limit=${KVL_CUDA_LIMIT:-90}
bundle=$root/build-gpu-deps
jobs=$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
start=$(date +%s)

say() { printf 'cuda-check: %s\n' "$*"; }
left() { echo $((budget - ($(date +%s) - start))); }

# bounded CMD...: CMD under the per-binary limit or what is left of the budget; 124 when it ran out,
# 125 (saying so) when nothing is left to run it in
bounded() {
    t=$(left)
    [ "$t" -gt "$limit" ] && t=$limit
    if [ "$t" -lt 10 ]; then
        say "$(basename "$1"): not run, the ${budget}s budget is spent"
        return 125
    fi
    timeout -k 5 "$t" "$@"
}

# The dependencies from the bundle: its shared libraries unpacked (xz, through python3's lzma, which
# every python3 has) and its deps.mk made the build's, newer than the Makefile so make keeps it.
use_bundle() {
    if [ ! -f "$bundle/deps.mk" ]; then
        say "pkg-config finds no OpenBLAS, cJSON and Check here, and there is no build-gpu-deps/: run make gpu-bundle where the Debian packages are and carry build-gpu-deps"
        exit 2
    fi
    for x in "$bundle"/lib/*.xz; do
        [ -e "${x%.xz}" ] && continue
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            "$x" "${x%.xz}" || { say "cannot unpack $x"; exit 2; }
    done
    mkdir -p "$build"
    cp "$bundle/deps.mk" "$build/deps.mk" && touch "$build/deps.mk"
    say "OpenBLAS, cJSON and Check from build-gpu-deps/"
}

if [ "$rehearse" = 1 ]; then
    say "rehearsal on the CPU emulator: the GPU sequence with the emulator's binaries"
    targets=cuda-rehearse-bins
    bench=$build/bin/bench_cuda_emu
    bench_args=--smoke
    tests=$build/tests
else
    if ! command -v "${NVCC:-nvcc}" >/dev/null 2>&1; then
        say "nvcc not found, nothing built or run"
        exit 0
    fi
    targets=cuda-check-bins
    bench=$build/bin/bench_cuda
    bench_args=
    tests=$build/gpu-tests
fi

# ---- 1. build
if [ "${KVL_CUDA_BUNDLE:-0}" = 1 ] || ! { command -v pkg-config >/dev/null 2>&1 && pkg-config --exists openblas libcjson check; }; then
    use_bundle
fi
say "building with $jobs jobs"
mkdir -p "$build"
if ! timeout "$(left)" make --no-print-directory BUILD="$build" -j"$jobs" $targets > "$build/cuda-check-build.log" 2>&1; then
    tail -n 40 "$build/cuda-check-build.log"
    say "the build failed or ran out of time (log: $build/cuda-check-build.log)"
    exit 2
fi
say "built in $(($(date +%s) - start))s"
if [ "$rehearse" != 1 ]; then
    # another nvcc may allocate registers differently: reported here, a gate only where make cuda runs in CI
    make --no-print-directory BUILD="$build" cuda > "$build/cuda-check-budgets.log" 2>&1 \
        && say "every kernel within cuda/budgets.txt" \
        || { grep -i -e over -e budget "$build/cuda-check-budgets.log" | tail -n 20; say "kernels over cuda/budgets.txt with this nvcc (above), not counted"; }
fi
suites=$(ls "$tests"/test_cuda_* 2>/dev/null | grep -v -e '/test_cuda_emu$' -e '/test_cuda_bench$')
case $build in /*) bin=$build/bin ;; *) bin=$root/$build/bin ;; esac
export KVL_ROOT="$root" KVL_BIN="$bin" CK_FORK=no

"$bench" --probe
case $? in
0) ;;
1) say "no CUDA device here, nothing run on a GPU (the suites ran on the emulator in make test)"; exit 0 ;;
*)
    # without the kernel driver the runtime reports an insufficient driver: that is a machine without a GPU
    if [ "$rehearse" != 1 ] && [ ! -e /proc/driver/nvidia/version ]; then
        say "no NVIDIA driver here, nothing run on a GPU (the suites ran on the emulator in make test)"
        exit 0
    fi
    say "the CUDA runtime fails on this machine (above): not a machine without a GPU"
    exit 2
    ;;
esac

# ---- 2. the table, kept for the FlashMLA column
say "bench_cuda"
{ bounded "$bench" $bench_args; echo $? > "$build/bench_cuda.status"; } | tee "$build/bench_cuda.txt"
table=$(cat "$build/bench_cuda.status")
case $table in
0) ;;
1) say "a kernel is below its target (see the table)" ;;
124) say "bench_cuda ran out of time: the rows above are what it measured" ;;
*) say "bench_cuda failed (status $table): the rows above are what it measured" ;;
esac

wheel=$(ls "$bundle"/sgl_flash_mla-*.whl 2>/dev/null | head -n 1)
if [ -n "$wheel" ]; then
    say "FlashMLA beside our kernels ($(basename "$wheel"))"
    bounded python3 cuda/flashmla_column.py "$wheel" "$build/bench_cuda.txt" || say "the FlashMLA column failed (above), not counted"
else
    say "no sgl-flash-mla wheel in build-gpu-deps/, FlashMLA column skipped"
fi

# ---- 3. the suites
failed=0
ran=0
for t in $suites; do
    echo "== $(basename "$t") (GPU)"
    bounded "$t"
    rc=$?
    ran=$((ran + 1))
    [ $rc -eq 124 ] && say "$(basename "$t") ran out of time"
    [ $rc -ne 0 ] && failed=$((failed + 1))
done

# ---- 4. memcheck
sanitizer=$(command -v compute-sanitizer || true)
[ -z "$sanitizer" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/compute-sanitizer" ] && sanitizer=$CUDA_HOME/bin/compute-sanitizer
memcheck="$sanitizer --tool memcheck --error-exitcode 3"
if [ "$rehearse" = 1 ]; then
    say "rehearsal: the suites run again without compute-sanitizer, standing in for memcheck"
    sanitizer=rehearsal
    memcheck=
fi
mem_failed=0
mem_skipped=
mkdir -p "$build/memcheck-gpu"
if [ -z "$sanitizer" ]; then
    mem_skipped="compute-sanitizer not found"
elif ! bounded $memcheck "$bench" --probe > "$build/memcheck-gpu/probe.log" 2>&1; then
    mem_skipped="compute-sanitizer does not run on this device: $(tail -n 1 "$build/memcheck-gpu/probe.log")"
else
    for t in $suites; do
        n=$(basename "$t")
        echo "== $n (compute-sanitizer memcheck)"
        bounded $memcheck "$t" > "$build/memcheck-gpu/$n.log" 2>&1
        rc=$?
        if [ $rc -eq 124 ] || [ $rc -eq 125 ]; then
            say "$n: memcheck did not finish in its time (log: $build/memcheck-gpu/$n.log), not counted"
        elif [ $rc -ne 0 ]; then
            mem_failed=$((mem_failed + 1))
            tail -n 30 "$build/memcheck-gpu/$n.log"
        fi
    done
fi
[ -n "$mem_skipped" ] && say "$mem_skipped; memcheck skipped"

echo "== cuda-check: table status $table, $ran suites on the GPU with $failed failed, memcheck ${mem_skipped:+skipped}${mem_skipped:-$mem_failed failed}, $(($(date +%s) - start))s"
[ $failed -eq 0 ] && [ $mem_failed -eq 0 ] && [ $table -le 1 ] || exit 2
exit $table
