/* DeepSeek KV rows (rows.h): byte maps, sizes from the formats, pack and unpack. */
#include "rows.h"

#include <string.h>

#include "element.h"

_Static_assert(KVF_V32_BLOCK == KVF_FP8_UE8M0_BLOCK, "V3.2 rows use act_quant's block of 128");
_Static_assert(KVF_V4_INDEX_BLOCK == KVF_MXFP4_RCEIL_BLOCK, "V4 indexer keys use MXFP4 blocks of 32");
_Static_assert(KVF_V41_MAIN_BLOCK == KVF_FP4_V41_BLOCK, "V4.1 FP4 rows use blocks of 16");

typedef enum { SCALE_FP32, SCALE_E8M0, SCALE_E4M3 } scale_format;

/* A row as formats: `quant` values of `elem` in blocks of `block`, one `scale` per block (the scale
 * bytes reserved in multiples of `scale_slot`), then `raw` bf16 values. */
typedef struct {
    const char *name;
    kvf_element elem;
    size_t quant, block;
    scale_format scale;
    size_t scale_slot;
    size_t raw;
} row_format;

static const row_format ROW_FORMATS[KVF_N_ROW] = {
    [KVF_ROW_V32_MAIN]   = {"v32-main", KVF_E4M3, KVF_V32_NOPE, KVF_V32_BLOCK, SCALE_FP32, 1, KVF_V32_ROPE},
    [KVF_ROW_V32_INDEX]  = {"v32-index", KVF_E4M3, KVF_INDEX_DIM, KVF_V32_BLOCK, SCALE_FP32, 1, 0},
    [KVF_ROW_V4_MAIN]    = {"v4-main", KVF_E4M3, KVF_V4_NOPE, KVF_V4_BLOCK, SCALE_E8M0, KVF_V4_SCALE_SLOT,
                            KVF_V4_ROPE},
    [KVF_ROW_V4_INDEX]   = {"v4-index", KVF_E2M1, KVF_INDEX_DIM, KVF_V4_INDEX_BLOCK, SCALE_E8M0, 1, 0},
    [KVF_ROW_V41_MAIN]   = {"v41-main", KVF_E2M1, KVF_V41_DIM, KVF_V41_MAIN_BLOCK, SCALE_E4M3, 1, 0},
    [KVF_ROW_V41_WINDOW] = {"v41-window", KVF_E4M3, KVF_V41_DIM, KVF_V41_WIN_BLOCK, SCALE_E8M0, 1, 0},
};

static const row_format *row_format_of(kvf_row layout)
{
    return (unsigned)layout < KVF_N_ROW ? &ROW_FORMATS[layout] : NULL;
}

int kvf_row_from_name(const char *name, kvf_row *out)
{
    for (int r = 0; r < KVF_N_ROW; r++) {
        if (name && strcmp(name, ROW_FORMATS[r].name) == 0) {
            *out = (kvf_row)r;
            return KVF_OK;
        }
    }
    return KVF_ELAYOUT;
}

const char *kvf_row_name(kvf_row layout)
{
    const row_format *f = row_format_of(layout);
    return f ? f->name : NULL;
}

static size_t scale_bits(scale_format s)
{
    switch (s) {
    case SCALE_FP32: return 8 * sizeof(float);
    case SCALE_E8M0: return kvf_element_bits(KVF_E8M0);
    case SCALE_E4M3: return kvf_element_bits(KVF_E4M3);
    }
    return 0;
}

static size_t round_up(size_t n, size_t multiple)
{
    return (n + multiple - 1) / multiple * multiple;
}

size_t kvf_row_bytes(kvf_row layout)
{
    const row_format *f = row_format_of(layout);
    if (!f) return 0;
    size_t code_bytes = f->quant * kvf_element_bits(f->elem) / 8;
    size_t scale_bytes = f->quant / f->block * scale_bits(f->scale) / 8;
    size_t raw_bytes = f->raw * kvf_element_bits(KVF_BF16) / 8;
    return code_bytes + round_up(scale_bytes, f->scale_slot) + raw_bytes;
}

size_t kvf_row_values(kvf_row layout)
{
    const row_format *f = row_format_of(layout);
    return f ? f->quant + f->raw : 0;
}

/* ---- byte maps, read off the packed structs ------------------------------------------------------ */

#define STR_(x) #x
#define STR(x) STR_(x)
#define MEMBER_SIZE(T, member) sizeof(((T *)0)->member)
#define FIELD(T, member, format) { #member, offsetof(T, member), MEMBER_SIZE(T, member), format }

static const kvf_row_field V32_MAIN_FIELDS[] = {
    FIELD(kvf_row_v32_main, nope, "float8_e4m3fn, latent dims"),
    FIELD(kvf_row_v32_main, scale, "float32 LE power of two, one per " STR(KVF_V32_BLOCK) " dims"),
    FIELD(kvf_row_v32_main, rope, "bfloat16 LE, RoPE dims"),
};
static const kvf_row_field V32_INDEX_FIELDS[] = {
    FIELD(kvf_row_v32_index, codes, "float8_e4m3fn"),
    FIELD(kvf_row_v32_index, scale, "float32 LE power of two, one per " STR(KVF_V32_BLOCK) " dims"),
};
static const kvf_row_field V4_MAIN_FIELDS[] = {
    FIELD(kvf_row_v4_main, nope, "float8_e4m3fn, NoPE dims"),
    FIELD(kvf_row_v4_main, rope, "bfloat16 LE, RoPE dims"),
    FIELD(kvf_row_v4_main, scale, "float8_e8m0fnu, one per " STR(KVF_V4_BLOCK) " dims"),
    FIELD(kvf_row_v4_main, pad, "zero"),
};
static const kvf_row_field V4_INDEX_FIELDS[] = {
    FIELD(kvf_row_v4_index, codes, "float4_e2m1fn x2, element 2j in the low nibble"),
    FIELD(kvf_row_v4_index, scale, "float8_e8m0fnu, one per " STR(KVF_V4_INDEX_BLOCK) " dims"),
};
static const kvf_row_field V41_MAIN_FIELDS[] = {
    FIELD(kvf_row_v41_main, codes, "float4_e2m1fn x2, element 2j in the low nibble"),
    FIELD(kvf_row_v41_main, scale, "float8_e4m3fn, one per " STR(KVF_V41_MAIN_BLOCK) " dims"),
};
static const kvf_row_field V41_WINDOW_FIELDS[] = {
    FIELD(kvf_row_v41_window, codes, "float8_e4m3fn"),
    FIELD(kvf_row_v41_window, scale, "float8_e8m0fnu, one per " STR(KVF_V41_WIN_BLOCK) " dims"),
};

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

const kvf_row_field *kvf_row_fields(kvf_row layout, size_t *n_fields)
{
    static const struct { const kvf_row_field *fields; size_t n; } MAPS[KVF_N_ROW] = {
        [KVF_ROW_V32_MAIN]   = {V32_MAIN_FIELDS, N_OF(V32_MAIN_FIELDS)},
        [KVF_ROW_V32_INDEX]  = {V32_INDEX_FIELDS, N_OF(V32_INDEX_FIELDS)},
        [KVF_ROW_V4_MAIN]    = {V4_MAIN_FIELDS, N_OF(V4_MAIN_FIELDS)},
        [KVF_ROW_V4_INDEX]   = {V4_INDEX_FIELDS, N_OF(V4_INDEX_FIELDS)},
        [KVF_ROW_V41_MAIN]   = {V41_MAIN_FIELDS, N_OF(V41_MAIN_FIELDS)},
        [KVF_ROW_V41_WINDOW] = {V41_WINDOW_FIELDS, N_OF(V41_WINDOW_FIELDS)},
    };
    if ((unsigned)layout >= KVF_N_ROW) {
        *n_fields = 0;
        return NULL;
    }
    *n_fields = MAPS[layout].n;
    return MAPS[layout].fields;
}

/* ---- little-endian fields ------------------------------------------------------------------------ */

/* scales[n] → bytes[4n], each FP32 little-endian. */
static void store_f32_le(uint8_t *bytes, const float *scales, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &scales[i], sizeof u);
        for (int b = 0; b < 4; b++) bytes[4 * i + b] = (uint8_t)(u >> (8 * b));
    }
}

/* bytes[4n] → scales[n]. */
static void load_f32_le(float *scales, const uint8_t *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t u = 0;
        for (int b = 0; b < 4; b++) u |= (uint32_t)bytes[4 * i + b] << (8 * b);
        memcpy(&scales[i], &u, sizeof u);
    }
}

/* x[n] → bytes[2n], bf16 (RNE) little-endian. */
static void store_bf16_le(uint8_t *bytes, const float *x, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint16_t h = kvf_bf16_encode(x[i]);
        bytes[2 * i] = (uint8_t)h;
        bytes[2 * i + 1] = (uint8_t)(h >> 8);
    }
}

/* bytes[2n] → x[n]. */
static void load_bf16_le(float *x, const uint8_t *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) x[i] = kvf_bf16_decode((uint16_t)(bytes[2 * i] | bytes[2 * i + 1] << 8));
}

/* ---- one pack and one unpack per layout ---------------------------------------------------------- */

#define AT(T, member) offsetof(T, member)

/* values[576] → row[656]. */
static int pack_v32_main(uint8_t *row, const float *values)
{
    float scales[KVF_V32_NOPE / KVF_V32_BLOCK];
    int err = kvf_quant_fp8_ue8m0(row + AT(kvf_row_v32_main, nope), scales, values, KVF_V32_NOPE);
    if (err != KVF_OK) return err;
    store_f32_le(row + AT(kvf_row_v32_main, scale), scales, KVF_V32_NOPE / KVF_V32_BLOCK);
    store_bf16_le(row + AT(kvf_row_v32_main, rope), values + KVF_V32_NOPE, KVF_V32_ROPE);
    return KVF_OK;
}

/* row[656] → values[576]. */
static int unpack_v32_main(float *values, const uint8_t *row)
{
    float scales[KVF_V32_NOPE / KVF_V32_BLOCK];
    load_f32_le(scales, row + AT(kvf_row_v32_main, scale), KVF_V32_NOPE / KVF_V32_BLOCK);
    load_bf16_le(values + KVF_V32_NOPE, row + AT(kvf_row_v32_main, rope), KVF_V32_ROPE);
    return kvf_dequant_fp8_ue8m0(values, row + AT(kvf_row_v32_main, nope), scales, KVF_V32_NOPE);
}

/* values[128] → row[132]. */
static int pack_v32_index(uint8_t *row, const float *values)
{
    float scales[KVF_INDEX_DIM / KVF_V32_BLOCK];
    int err = kvf_quant_fp8_ue8m0(row + AT(kvf_row_v32_index, codes), scales, values, KVF_INDEX_DIM);
    if (err != KVF_OK) return err;
    store_f32_le(row + AT(kvf_row_v32_index, scale), scales, KVF_INDEX_DIM / KVF_V32_BLOCK);
    return KVF_OK;
}

/* row[132] → values[128]. */
static int unpack_v32_index(float *values, const uint8_t *row)
{
    float scales[KVF_INDEX_DIM / KVF_V32_BLOCK];
    load_f32_le(scales, row + AT(kvf_row_v32_index, scale), KVF_INDEX_DIM / KVF_V32_BLOCK);
    return kvf_dequant_fp8_ue8m0(values, row + AT(kvf_row_v32_index, codes), scales, KVF_INDEX_DIM);
}

/* values[512] → row[584]. */
static int pack_v4_main(uint8_t *row, const float *values)
{
    int err = kvf_quant_fp8_e8m0_rceil(row + AT(kvf_row_v4_main, nope), row + AT(kvf_row_v4_main, scale),
                                       values, KVF_V4_NOPE, KVF_V4_BLOCK);
    if (err != KVF_OK) return err;
    store_bf16_le(row + AT(kvf_row_v4_main, rope), values + KVF_V4_NOPE, KVF_V4_ROPE);
    memset(row + AT(kvf_row_v4_main, pad), 0, MEMBER_SIZE(kvf_row_v4_main, pad));
    return KVF_OK;
}

/* row[584] → values[512]. */
static int unpack_v4_main(float *values, const uint8_t *row)
{
    load_bf16_le(values + KVF_V4_NOPE, row + AT(kvf_row_v4_main, rope), KVF_V4_ROPE);
    return kvf_dequant_fp8_e8m0(values, row + AT(kvf_row_v4_main, nope), row + AT(kvf_row_v4_main, scale),
                                KVF_V4_NOPE, KVF_V4_BLOCK);
}

/* values[128] → row[68]. */
static int pack_v4_index(uint8_t *row, const float *values)
{
    return kvf_quant_mxfp4_rceil(row + AT(kvf_row_v4_index, codes), row + AT(kvf_row_v4_index, scale),
                                 values, KVF_INDEX_DIM);
}

/* row[68] → values[128]. */
static int unpack_v4_index(float *values, const uint8_t *row)
{
    return kvf_dequant_mxfp4(values, row + AT(kvf_row_v4_index, codes), row + AT(kvf_row_v4_index, scale),
                             KVF_INDEX_DIM);
}

/* values[512] → row[288]. */
static int pack_v41_main(uint8_t *row, const float *values)
{
    return kvf_quant_fp4_v41(row + AT(kvf_row_v41_main, codes), row + AT(kvf_row_v41_main, scale), values,
                             KVF_V41_DIM);
}

/* row[288] → values[512]. */
static int unpack_v41_main(float *values, const uint8_t *row)
{
    return kvf_dequant_fp4_v41(values, row + AT(kvf_row_v41_main, codes), row + AT(kvf_row_v41_main, scale),
                               KVF_V41_DIM);
}

/* values[512] → row[528]. */
static int pack_v41_window(uint8_t *row, const float *values)
{
    return kvf_quant_fp8_e8m0_rceil(row + AT(kvf_row_v41_window, codes), row + AT(kvf_row_v41_window, scale),
                                    values, KVF_V41_DIM, KVF_V41_WIN_BLOCK);
}

/* row[528] → values[512]. */
static int unpack_v41_window(float *values, const uint8_t *row)
{
    return kvf_dequant_fp8_e8m0(values, row + AT(kvf_row_v41_window, codes),
                                row + AT(kvf_row_v41_window, scale), KVF_V41_DIM, KVF_V41_WIN_BLOCK);
}

int kvf_row_pack(kvf_row layout, uint8_t *row, const float *values)
{
    int err = kvf_check_finite(values, kvf_row_values(layout));
    if (err != KVF_OK) return err;
    switch (layout) {
    case KVF_ROW_V32_MAIN:   return pack_v32_main(row, values);
    case KVF_ROW_V32_INDEX:  return pack_v32_index(row, values);
    case KVF_ROW_V4_MAIN:    return pack_v4_main(row, values);
    case KVF_ROW_V4_INDEX:   return pack_v4_index(row, values);
    case KVF_ROW_V41_MAIN:   return pack_v41_main(row, values);
    case KVF_ROW_V41_WINDOW: return pack_v41_window(row, values);
    case KVF_N_ROW:          break;
    }
    return KVF_ELAYOUT;
}

int kvf_row_unpack(kvf_row layout, float *values, const uint8_t *row)
{
    switch (layout) {
    case KVF_ROW_V32_MAIN:   return unpack_v32_main(values, row);
    case KVF_ROW_V32_INDEX:  return unpack_v32_index(values, row);
    case KVF_ROW_V4_MAIN:    return unpack_v4_main(values, row);
    case KVF_ROW_V4_INDEX:   return unpack_v4_index(values, row);
    case KVF_ROW_V41_MAIN:   return unpack_v41_main(values, row);
    case KVF_ROW_V41_WINDOW: return unpack_v41_window(values, row);
    case KVF_N_ROW:          break;
    }
    return KVF_ELAYOUT;
}
