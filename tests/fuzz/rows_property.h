/* What kvf_row_pack and kvf_row_unpack must do with any input, checked by tests/fuzz/fuzz_rows.c on
 * every input the fuzzer makes and by tests/test_reliability_fuzz.c on every saved regression.
 *
 * Input: byte 0 picks the layout (its low 3 bits; 6 and 7 are not layouts), the rest is both a row
 * (its first kvf_row_bytes bytes, zero-filled when short) and the values to pack (float32 little-endian
 * from byte 1, zero-filled). Properties:
 *   - an unknown layout is refused by both calls (KVF_ELAYOUT) and has 0 bytes and 0 values;
 *   - any bytes unpack (KVF_OK), whatever values they decode to;
 *   - pack refuses NaN anywhere (KVF_ENAN, before inf) and ±inf (KVF_EINF), leaving the row untouched;
 *   - a finite row packs, and unpacks to values no farther from the input than zero (|x̂ − x| ≤ |x|)
 *     in its quantised dims, and to bf16's nearest (within 2^-8 relative, 2^-134 absolute, ±inf past
 *     bf16's range) in its RoPE dims. A quantised dim never decodes to ±inf, not even for |x| near
 *     FLT_MAX, where the round-up scales saturate their elements (formats/block.h). */
#ifndef KVL_TESTS_FUZZ_ROWS_PROPERTY_H
#define KVL_TESTS_FUZZ_ROWS_PROPERTY_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "rows.h"

#define FUZZ_ROW_MAX_BYTES 656    /* v32-main, the largest row */
#define FUZZ_ROW_MAX_VALUES 576
#define FUZZ_BF16_PAST_MAX 0x1.ffp127         /* bf16's largest finite plus half an ulp */
#define FUZZ_BF16_HALF_MIN_SUBNORMAL 0x1p-134

/* Dims of a row that are quantised (the rest are bf16). */
static inline size_t fuzz_row_quantised(kvf_row layout)
{
    return layout == KVF_ROW_V32_MAIN  ? KVF_V32_NOPE
           : layout == KVF_ROW_V4_MAIN ? KVF_V4_NOPE
                                       : kvf_row_values(layout);
}

/* One unpacked value xq of the input x in dim i of layout: NULL, or what is wrong. */
static inline const char *fuzz_row_value_fault(kvf_row layout, size_t i, double x, double xq)
{
    if (i < fuzz_row_quantised(layout)) {
        if (isinf(xq)) return "a quantised dim overflowed";
        if (!(fabs(xq - x) <= fabs(x))) return "a quantised dim lies farther from its input than zero";
        return x == 0 && signbit(xq) != signbit(x) ? "a quantised zero lost its sign" : NULL;
    }
    if (fabs(x) >= FUZZ_BF16_PAST_MAX)
        return isinf(xq) && signbit(xq) == signbit(x) ? NULL : "bf16 past its range is not inf";
    if (!(fabs(xq - x) <= fmax(ldexp(fabs(x), -8), FUZZ_BF16_HALF_MIN_SUBNORMAL)))
        return "a bf16 dim is not its nearest";
    return signbit(xq) == signbit(x) ? NULL : "a bf16 dim lost its sign";
}

/* NULL when the row calls behave on data[size], else what went wrong. */
static inline const char *fuzz_rows_fault(const uint8_t *data, size_t size)
{
    if (size == 0) return NULL;
    const kvf_row layout = (kvf_row)(data[0] & 7);
    uint8_t bytes[FUZZ_ROW_MAX_BYTES] = {0}, row[FUZZ_ROW_MAX_BYTES], before[FUZZ_ROW_MAX_BYTES];
    float values[FUZZ_ROW_MAX_VALUES] = {0}, back[FUZZ_ROW_MAX_VALUES];
    memcpy(bytes, data + 1, size - 1 < sizeof bytes ? size - 1 : sizeof bytes);
    memcpy(values, data + 1, size - 1 < sizeof values ? size - 1 : sizeof values);

    if ((unsigned)layout >= KVF_N_ROW) {
        if (kvf_row_bytes(layout) || kvf_row_values(layout) || kvf_row_name(layout))
            return "an unknown layout has a size";
        if (kvf_row_pack(layout, row, values) != KVF_ELAYOUT) return "pack took an unknown layout";
        if (kvf_row_unpack(layout, back, bytes) != KVF_ELAYOUT) return "unpack took an unknown layout";
        return NULL;
    }
    const size_t n = kvf_row_values(layout), nbytes = kvf_row_bytes(layout);
    if (kvf_row_unpack(layout, back, bytes) != KVF_OK) return "unpack refused bytes";

    int has_nan = 0, has_inf = 0;
    for (size_t i = 0; i < n; i++) has_nan |= isnan(values[i]), has_inf |= isinf(values[i]);
    memset(row, 0xA5, sizeof row);
    memcpy(before, row, sizeof row);
    int rc = kvf_row_pack(layout, row, values);
    if (has_nan || has_inf) {
        if (rc != (has_nan ? KVF_ENAN : KVF_EINF)) return "pack did not refuse a non-finite value as it should";
        return memcmp(row, before, sizeof row) ? "a refused pack wrote the row" : NULL;
    }
    if (rc != KVF_OK) return "pack refused a finite row";
    if (memcmp(row + nbytes, before + nbytes, sizeof row - nbytes)) return "pack wrote past the row";
    if (kvf_row_unpack(layout, back, row) != KVF_OK) return "unpack refused a packed row";
    for (size_t i = 0; i < n; i++) {
        const char *fault = fuzz_row_value_fault(layout, i, values[i], back[i]);
        if (fault) return fault;
    }
    return NULL;
}

#endif
