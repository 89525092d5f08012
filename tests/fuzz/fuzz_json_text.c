/* libFuzzer target: the strict JSON text check, kvl_json_text_check, on arbitrary bytes
 * (tests/fuzz/json_text_property.h says what it must do). Seeds: tests/fuzz/corpus/json_text/, JSON
 * of every kind of value, escape and UTF-8 length, a config and a shard index (tests/fuzz/gen_corpus.py).
 *
 *   make fuzz                      builds it with clang -fsanitize=fuzzer,address,undefined and runs it
 *   build/fuzz/fuzz_json_text FILE replays one input */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/json_text_property.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *fault = fuzz_json_text_fault(data, size);
    if (fault) {
        fprintf(stderr, "fuzz_json_text: %s (kvl_error: %s)\n", fault, kvl_error());
        abort();
    }
    return 0;
}
