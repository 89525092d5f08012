/* libFuzzer target: the safetensors reader, kvl_st_parse, on arbitrary bytes
 * (tests/fuzz/safetensors_property.h says what it must do). Seeds: tests/fuzz/corpus/safetensors/,
 * small well-formed files in every dtype and a sharded pair (tests/fuzz/gen_corpus.py).
 *
 *   make fuzz                          builds it with clang -fsanitize=fuzzer,address,undefined and runs it
 *   build/fuzz/fuzz_safetensors FILE   replays one input */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/safetensors_property.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *fault = fuzz_st_fault(data, size);
    if (fault) {
        fprintf(stderr, "fuzz_safetensors: %s (kvl_error: %s)\n", fault, kvl_error());
        abort();
    }
    return 0;
}
