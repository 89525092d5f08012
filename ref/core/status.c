#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[512];

const char *kvl_error(void) { return last_error; }

void kvl_clear_error(void) { last_error[0] = '\0'; }

int kvl_fail(int code, const char *fmt, ...)
{
    /* Format into a scratch buffer first: callers may pass kvl_error() itself as an argument to
     * prefix context onto an inner message. */
    char message[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    memcpy(last_error, message, sizeof last_error);
    return code;
}
