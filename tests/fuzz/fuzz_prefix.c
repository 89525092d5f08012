/* libFuzzer target: the prefix-cache file reader and the V4.1 restore on arbitrary bytes
 * (tests/fuzz/prefix_property.h says what they must do). Seeds: tests/fuzz/corpus/prefix/.
 *
 *   make fuzz                       builds it with clang -fsanitize=fuzzer,address,undefined and runs it
 *   build/fuzz/fuzz_prefix FILE     replays one input */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/prefix_property.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *fault = fuzz_prefix_fault(data, size);
    if (fault) {
        fprintf(stderr, "fuzz_prefix: %s\n", fault);
        abort();
    }
    return 0;
}
