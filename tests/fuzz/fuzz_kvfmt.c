/* libFuzzer target: kvfmt's whole reading of its input (options, numbers, codes, hex rows) through its
 * own main, compiled from chapters/05_formats/kvfmt.c with -Dmain=kvfmt_main; tests/fuzz/kvfmt_input.h
 * says how an input becomes a command line and stdin, and what kvfmt must do with it. Seeds:
 * tests/fuzz/corpus/kvfmt/, one per command and error class.
 *
 *   make fuzz                      builds it with clang -fsanitize=fuzzer,address,undefined and runs it
 *                                  with -close_fd_mask=3 (kvfmt's output is not the point)
 *   build/fuzz/fuzz_kvfmt FILE     replays one input */
#include <stdio.h>
#include <stdlib.h>

#include "fuzz/kvfmt_input.h"

int kvfmt_main(int argc, char **argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_kvfmt_call c;
    if (fuzz_kvfmt_split(&c, data, size) != 0) return 0;
    FILE *in = c.in_len ? fmemopen(c.in, c.in_len, "r") : fopen("/dev/null", "r");
    if (!in) {
        fuzz_kvfmt_free(&c);
        return 0;
    }
    FILE *saved = stdin;
    stdin = in;
    int status = kvfmt_main(c.argc, c.argv);
    stdin = saved;
    fclose(in);
    fuzz_kvfmt_free(&c);
    if (status != 0 && status != 2) {
        fprintf(stderr, "fuzz_kvfmt: kvfmt returned %d, not 0 or 2\n", status);
        abort();
    }
    return 0;
}
