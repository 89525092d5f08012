/* What kvl_json_text_check must do with any bytes at all, checked by tests/fuzz/fuzz_json_text.c on
 * every input the fuzzer makes and by tests/test_reliability_fuzz.c on every saved one.
 *
 * Either KVL_OK, and then cJSON parses the same bytes (the check is never looser than the parser the
 * project reads JSON with); or KVL_EPARSE with one line of text in kvl_error() that starts with the
 * origin and ends "at line L, column C", a place inside the input or just past its end. */
#ifndef KVL_TESTS_FUZZ_JSON_TEXT_PROPERTY_H
#define KVL_TESTS_FUZZ_JSON_TEXT_PROPERTY_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "json_text.h"
#include "status.h"

#define FUZZ_JSON_ORIGIN "fuzz.json"

/* NULL when "at line L, column C" ending msg names a byte of data[size] or the end, else what is wrong. */
static inline const char *fuzz_json_place_fault(const char *msg, const uint8_t *data, size_t size)
{
    const char *at = strstr(msg, " at line ");
    unsigned long line, column;
    int used = 0;
    if (!at || sscanf(at, " at line %lu, column %lu%n", &line, &column, &used) != 2 || at[used] != '\0')
        return "message does not end with its line and column";
    size_t start = 0, l = 1;
    for (size_t i = 0; i < size && l < line; i++)
        if (data[i] == '\n') l++, start = i + 1;
    if (line < 1 || l != line) return "the line is past the input";
    if (column < 1 || start + column - 1 > size) return "the column is past the input";
    return NULL;
}

/* NULL when checking data[size] behaves, else what went wrong. */
static inline const char *fuzz_json_text_fault(const uint8_t *data, size_t size)
{
    kvl_clear_error();
    int rc = kvl_json_text_check((const char *)data, size, FUZZ_JSON_ORIGIN);
    if (rc == KVL_OK) {
        cJSON *root = cJSON_ParseWithLength((const char *)data, size);
        cJSON_Delete(root);
        return root ? NULL : "accepted text that cJSON refuses";
    }
    if (rc != KVL_EPARSE) return "an unexpected status code";
    const char *msg = kvl_error();
    if (strncmp(msg, FUZZ_JSON_ORIGIN ": ", sizeof FUZZ_JSON_ORIGIN + 1) != 0) return "message does not name the origin";
    for (const char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20) return "message is not one line of text";
    return fuzz_json_place_fault(msg, data, size);
}

#endif
