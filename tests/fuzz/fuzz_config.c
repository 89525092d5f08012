/* libFuzzer target: the config loader, kvl_model_parse, on arbitrary bytes (tests/fuzz/config_property.h
 * says what it must do). Seeds: tests/fuzz/corpus/config/, the real configs and toy ones.
 *
 *   make fuzz                       builds it with clang -fsanitize=fuzzer,address,undefined and runs it
 *   build/fuzz/fuzz_config FILE     replays one input */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/config_property.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *fault = fuzz_config_fault(data, size);
    if (fault) {
        fprintf(stderr, "fuzz_config: %s (kvl_error: %s)\n", fault, kvl_error());
        abort();
    }
    return 0;
}
