/* Status codes and the last error message, shared by every module above formats/.
 *
 * A function whose input can be wrong returns int: KVL_OK (0) or a negative KVL_E* code, and
 * leaves a one-line message in kvl_error() naming what was wrong and where (file, field, value).
 * The message buffer is per thread. */
#ifndef KVL_STATUS_H
#define KVL_STATUS_H

#include <stddef.h>

enum {
    KVL_OK = 0,
    KVL_EINVAL = -1,  /* an argument or a field out of range, or inconsistent with another */
    KVL_EIO = -2,     /* a file could not be opened, read or written */
    KVL_EPARSE = -3,  /* malformed text: JSON, a number, a hex code */
    KVL_ENOMEM = -4,  /* an allocation failed */
};

/* The message of the most recent failure on this thread ("" if none). */
const char *kvl_error(void);

/* Record a printf-style message and return code, so callers write `return kvl_fail(KVL_EINVAL, ...)`.
 * The arguments may include kvl_error() itself, to put context in front of an inner failure. Control
 * bytes in the result (a newline in a quoted path or field) are recorded as \xHH, so the message is
 * one line whatever it quotes; it is cut at 511 bytes, never inside an escape. */
int kvl_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* out[cap] = s with every control byte (below 0x20, and 0x7f) written as \xHH, cut before an escape
 * that would not fit; returns out. What every message quoting a name or value it was given passes
 * that text through, so that the message is one line and prints nothing a terminal would act on. */
char *kvl_escape_controls(char *out, size_t cap, const char *s);

/* A name or value as a message quotes it: kvl_escape_controls into out[cap], and "" for an empty
 * one (which would leave the message reading ": cannot open"). Returns out. */
char *kvl_shown(char *out, size_t cap, const char *s);

/* Forget any previous message. */
void kvl_clear_error(void);

/* Evaluate a call that returns a status and return its code from the calling function unless it is
 * KVL_OK (its message stays in kvl_error()). Variadic, so a C++ template argument's comma is allowed. */
#define KVL_TRY(...)                                   \
    do {                                               \
        const int kvl_try_rc_ = (__VA_ARGS__);         \
        if (kvl_try_rc_ != KVL_OK) return kvl_try_rc_; \
    } while (0)

#endif
