/* libFuzzer target: the .npy reader, kvl_npy_parse, on arbitrary bytes
 * (tests/fuzz/npy_property.h says what it must do). Seeds: tests/fuzz/corpus/npy/, small files as numpy
 * writes them in each version and dtype, and a few it refuses (tests/fuzz/gen_corpus.py).
 *
 *   make fuzz                builds it with clang -fsanitize=fuzzer,address,undefined and runs it
 *   build/fuzz/fuzz_npy FILE replays one input */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/npy_property.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *fault = fuzz_npy_fault(data, size);
    if (fault) {
        fprintf(stderr, "fuzz_npy: %s (kvl_error: %s)\n", fault, kvl_error());
        abort();
    }
    return 0;
}
