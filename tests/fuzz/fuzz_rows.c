/* libFuzzer target: kvf_row_pack and kvf_row_unpack of every layout on arbitrary bytes and floats
 * (tests/fuzz/rows_property.h says what they must do and how an input is read). Seeds:
 * tests/fuzz/corpus/rows/, rows the library packed from seeded values and the same values as floats.
 *
 *   make fuzz                     builds it with clang -fsanitize=fuzzer,address,undefined and runs it
 *   build/fuzz/fuzz_rows FILE     replays one input */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/rows_property.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *fault = fuzz_rows_fault(data, size);
    if (fault) {
        fprintf(stderr, "fuzz_rows: layout %d: %s\n", size ? data[0] & 7 : -1, fault);
        abort();
    }
    return 0;
}
