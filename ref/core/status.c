#include "status.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char last_error[512];

const char *kvl_error(void) { return last_error; }

void kvl_clear_error(void) { last_error[0] = '\0'; }

int kvl_fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return code;
}
