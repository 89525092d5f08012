#include "status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[512];

const char *kvl_error(void) { return last_error; }

void kvl_clear_error(void) { last_error[0] = '\0'; }

char *kvl_escape_controls(char *out, size_t cap, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        int control = c < 0x20 || c == 0x7f;
        if (o + (control ? 4 : 1) >= cap) break;
        if (!control) {
            out[o++] = (char)c;
            continue;
        }
        out[o++] = '\\';
        out[o++] = 'x';
        out[o++] = hex[c >> 4];
        out[o++] = hex[c & 15];
    }
    out[o] = '\0';
    return out;
}

char *kvl_shown(char *out, size_t cap, const char *s)
{
    return kvl_escape_controls(out, cap, *s ? s : "\"\"");
}

int kvl_fail(int code, const char *fmt, ...)
{
    /* Format into a scratch buffer first: callers may pass kvl_error() itself as an argument to
     * prefix context onto an inner message. */
    char message[sizeof last_error];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    kvl_escape_controls(last_error, sizeof last_error, message);
    return code;
}
