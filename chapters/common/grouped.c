/* Thousands separators for the programs' text (chapters/, notebooks_c/). */
#include "grouped.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* raw: the digits of |v| at `decimals` places, trailing zeros and a bare point removed */
static void plain_digits(char *raw, size_t cap, double v, int decimals)
{
    snprintf(raw, cap, "%.*f", decimals, fabs(v));
    char *dot = strchr(raw, '.');
    if (!dot) return;
    char *end = raw + strlen(raw) - 1;
    while (end > dot && *end == '0') *end-- = '\0';
    if (end == dot) *end = '\0';
}

const char *kvl_grouped(char *buf, size_t cap, double v, int decimals)
{
    if (cap == 0) return buf;
    char raw[400];
    plain_digits(raw, sizeof raw, v, decimals < 0 ? 0 : decimals > 9 ? 9 : decimals);
    const char *dot = strchr(raw, '.');
    const size_t int_len = dot ? (size_t)(dot - raw) : strlen(raw);
    size_t o = 0;
    if (v < 0 && strcmp(raw, "0") != 0 && o + 1 < cap) buf[o++] = '-';
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
