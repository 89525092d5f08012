/* Thousands separators for the programs' text (chapters/, notebooks_c/). */
#include "grouped.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* raw: the digits of |v| at `decimals` places; where `trim`, trailing zeros and a bare point
 * removed */
static void plain_digits(char *raw, size_t cap, double v, int decimals, int trim)
{
    snprintf(raw, cap, "%.*f", decimals, fabs(v));
    char *dot = strchr(raw, '.');
    if (!trim) return;
    if (!dot) return;
    char *end = raw + strlen(raw) - 1;
    while (end > dot && *end == '0') *end-- = '\0';
    if (end == dot) *end = '\0';
}

static const char *group(char *buf, size_t cap, double v, int decimals, int trim)
{
    if (cap == 0) return buf;
    char raw[400];
    plain_digits(raw, sizeof raw, v, decimals < 0 ? 0 : decimals > 9 ? 9 : decimals, trim);
    const char *dot = strchr(raw, '.');
    const size_t int_len = dot ? (size_t)(dot - raw) : strlen(raw);
    size_t o = 0;
    if (v < 0 && strspn(raw, "0.") != strlen(raw) && o + 1 < cap) buf[o++] = '-';
    for (size_t i = 0; raw[i] && o + 1 < cap; i++) {
        if (i < int_len && i > 0 && (int_len - i) % 3 == 0) {
            buf[o++] = ',';
            if (o + 1 == cap) break;
        }
        buf[o++] = raw[i];
    }
    buf[o] = '\0';
    return buf;
}

const char *kvl_grouped(char *buf, size_t cap, double v, int decimals)
{
    return group(buf, cap, v, decimals, 1);
}

const char *kvl_grouped_fixed(char *buf, size_t cap, double v, int decimals)
{
    return group(buf, cap, v, decimals, 0);
}
