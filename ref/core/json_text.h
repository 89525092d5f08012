/* Strict JSON, checked before cJSON reads it: cJSON accepts text that RFC 8259 does not (a number
 * with a leading zero, raw control bytes and invalid UTF-8 inside strings), and keeps the first of
 * two equal keys where the author may have meant the second.
 *
 * kvl_json_text_check accepts exactly one RFC 8259 JSON text: a value with only blanks (space, tab,
 * CR, LF) around it; strings of valid UTF-8 (no overlong form, no encoded surrogate, nothing above
 * U+10FFFF) with no raw byte below 0x20, escapes only \" \\ \/ \b \f \n \r \t and \uXXXX, a
 * surrogate escape only as a high-low pair; numbers -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
 * Two refusals go beyond the RFC: the escape \u0000, which no C string holds, and nesting deeper than
 * KVL_JSON_MAX_DEPTH, below cJSON's own limit (1000), so text that passes here is text cJSON parses. */
#ifndef KVL_JSON_TEXT_H
#define KVL_JSON_TEXT_H

#include <cjson/cJSON.h>
#include <stddef.h>

#define KVL_JSON_MAX_DEPTH 512

/* KVL_OK, or KVL_EPARSE "ORIGIN: WHAT at line L, column C" (both from 1, the column in bytes) at the
 * first byte that is not strict JSON. text[len] need not be NUL-terminated; a NUL byte is refused. */
int kvl_json_text_check(const char *text, size_t len, const char *origin);

/* *dup = a key that obj, which must be an object, holds twice (objects below it are not searched),
 * NULL if none; the keys are sorted, so n log n. KVL_ENOMEM "ORIGIN: out of memory ...". */
int kvl_json_repeated_key(const char **dup, const cJSON *obj, const char *origin);

#endif
