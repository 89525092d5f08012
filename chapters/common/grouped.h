/* Numbers as the chapter programs and notebooks print them: thousands separators, trailing zeros
 * dropped. */
#ifndef KVL_GROUPED_H
#define KVL_GROUPED_H

#include <stddef.h>

/* v rounded to at most `decimals` places (0..9), the integer part grouped by commas, trailing
 * zeros and a bare point dropped, "-" only in front of a nonzero text: 1234567 → "1,234,567",
 * 1234.25 with 2 → "1,234.25", -0.001 with 2 → "0". Written into buf (cap bytes, always
 * terminated); returns buf. */
const char *kvl_grouped(char *buf, size_t cap, double v, int decimals);

/* kvl_grouped with the trailing zeros kept, as %.*f writes them: 3040 with 2 → "3,040.00", -0.001
 * with 2 → "0.00". For columns of fixed decimals. */
const char *kvl_grouped_fixed(char *buf, size_t cap, double v, int decimals);

/* kvl_grouped(v, 0) in a buffer that lives to the end of the enclosing block, for printf
 * arguments. */
#define KVL_GROUPED(v) kvl_grouped((char[48]){0}, 48, (double)(v), 0)

/* kvl_grouped(v, decimals) the same way: 3040.00 with 2 → "3,040", 1102.2 → "1,102.2". */
#define KVL_GROUPED_AT(v, decimals) kvl_grouped((char[48]){0}, 48, (double)(v), (decimals))

/* kvl_grouped_fixed(v, decimals) the same way, for printf's %*.Nf columns: 1102.2 with 2 →
 * "1,102.20". */
#define KVL_FIXED(v, decimals) kvl_grouped_fixed((char[48]){0}, 48, (double)(v), (decimals))

#endif
