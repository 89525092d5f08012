/* libFuzzer target: the GGUF reader, kvl_gguf_parse, and the model it describes, kvl_model_from_gguf,
 * on arbitrary bytes (tests/fuzz/gguf_property.h says what they must do). Seeds: tests/fuzz/corpus/gguf/,
 * the metadata-only files of tests/data/gguf/ (tests/gen_gguf.py).
 *
 *   make fuzz                   builds it with clang -fsanitize=fuzzer,address,undefined and runs it
 *   build/fuzz/fuzz_gguf FILE   replays one input */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/gguf_property.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *fault = fuzz_gguf_fault(data, size);
    if (fault) {
        fprintf(stderr, "fuzz_gguf: %s (kvl_error: %s)\n", fault, kvl_error());
        abort();
    }
    return 0;
}
