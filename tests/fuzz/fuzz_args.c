/* libFuzzer target: the programs' command-line reader (chapters/common/program.h, contexts.h) on
 * arbitrary argument vectors (tests/fuzz/args_property.h says what it must do). Seeds:
 * tests/fuzz/corpus/args/, command lines of the chapter programs (tests/fuzz/gen_corpus.py).
 *
 *   make fuzz                 builds it with clang -fsanitize=fuzzer,address,undefined and runs it
 *   build/fuzz/fuzz_args FILE replays one input */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/args_property.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *fault = fuzz_args_fault(data, size);
    if (fault) {
        fprintf(stderr, "fuzz_args: %s (kvl_error: %s)\n", fault, kvl_error());
        abort();
    }
    return 0;
}
