#!/bin/sh
# make cuda-check on a machine with a GPU: every tests/cuda suite on the GPU, again under
# compute-sanitizer's memcheck, racecheck and synccheck where that tool exists, then the benchmark's
# table. Without a GPU it says so and succeeds (make test has run the same suites on the emulator).
# usage: check_gpu.sh BENCH TEST...
bench=$1
shift
if ! "$bench" --probe; then
    echo "cuda-check: no CUDA device here, nothing run on a GPU (the suites ran on the emulator in make test)"
    exit 0
fi
failed=0
for t in "$@"; do
    echo "== $(basename "$t") (GPU)"
    "$t" || failed=$((failed + 1))
done
sanitizer=$(command -v compute-sanitizer || true)
[ -z "$sanitizer" ] && [ -n "${CUDA_HOME:-}" ] && [ -x "$CUDA_HOME/bin/compute-sanitizer" ] && sanitizer=$CUDA_HOME/bin/compute-sanitizer
if [ -n "$sanitizer" ]; then
    for tool in memcheck racecheck synccheck; do
        for t in "$@"; do
            echo "== $(basename "$t") (compute-sanitizer --tool $tool)"
            CK_FORK=no "$sanitizer" --tool "$tool" --error-exitcode 3 "$t" > "$t.$tool.log" 2>&1 \
                || { failed=$((failed + 1)); tail -n 30 "$t.$tool.log"; }
        done
    done
else
    echo "cuda-check: compute-sanitizer not found, memcheck, racecheck and synccheck skipped"
fi
echo "== bench_cuda"
"$bench"
status=$?
[ $status -eq 1 ] && echo "cuda-check: a kernel is below its target (see the table)"
[ $status -ge 2 ] && failed=$((failed + 1))
echo "== cuda-check: $# suites on the GPU, $failed failed runs"
[ $failed -eq 0 ] && [ $status -eq 0 ]
