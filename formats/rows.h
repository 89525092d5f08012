/* DeepSeek KV rows: one token's cache entry, byte for byte (FlashMLA README and tests/quant.py for the
 * V3.2 and V4 rows; the DeepSeek-V4.1 report, section 2.4.4, for V4.1's).
 *
 *   layout      values in                  bytes  fields in byte order (scale t covers one block)
 *   v32-main    576: 512 latent, 64 RoPE   656    nope E4M3[512] | scale FP32[4] per 128 | rope bf16[64]
 *   v32-index   128 (RoPE half first)      132    codes E4M3[128] | scale FP32[1] per 128
 *   v4-main     512: 448 NoPE, 64 RoPE     584    nope E4M3[448] | rope bf16[64] | scale E8M0[7] per 64
 *                                                 | pad[1]
 *   v4-index    128                        68     codes E2M1×2[64] | scale E8M0[4] per 32
 *   v41-main    512, RoPE dims included    288    codes E2M1×2[256] | scale E4M3[32] per 16
 *   v41-window  512, RoPE dims included    528    codes E4M3[512] | scale E8M0[16] per 32
 *
 * The input vector is [quantised dims | RoPE dims]: for v32-main values 0–511 are quantised and 512–575
 * kept as bf16 (RNE); for v4-main 0–447 and 448–511. Every other row quantises all its values.
 *
 * Byte and nibble order: codes in dimension order, one E4M3 per byte; E2M1 two per byte with element 2j
 * in the LOW nibble of byte j; scales in block order (scale t covers dims block·t .. block·t + block−1);
 * FP32 scales and bf16 values are little-endian whatever the host; the v4-main pad byte is written 0
 * (FlashMLA reserves 8 scale bytes per token and leaves the 8th uninitialised).
 *
 * Scale recipes are DeepSeek's inference code's (block.h has each rule and its source):
 *   v32-main, v32-index   kvf_quant_fp8_ue8m0         FP32 power of two, amax ≥ 1e-4, round up vs 448
 *   v4-main               kvf_quant_fp8_e8m0_rceil    block 64, E8M0, amax ≥ 1e-4, round up vs 448
 *   v41-window            kvf_quant_fp8_e8m0_rceil    block 32, the same rule
 *   v4-index              kvf_quant_mxfp4_rceil       E8M0, amax ≥ 6·2^-126, round up vs 6
 *   v41-main              kvf_quant_fp4_v41           E4M3 scale = e4m3(max(amax, 6·2^-9) / 6)
 *
 * In the paged caches the index rows are not contiguous: a page holds B tokens' value bytes, then their
 * B scale parts (DeepGEMM); 132 and 68 are per-token counts. The v41 byte order (values, then scales)
 * is inferred: no kernel source fixes it. */
#ifndef KVF_ROWS_H
#define KVF_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "block.h"

typedef enum {
    KVF_ROW_V32_MAIN,
    KVF_ROW_V32_INDEX,
    KVF_ROW_V4_MAIN,
    KVF_ROW_V4_INDEX,
    KVF_ROW_V41_MAIN,
    KVF_ROW_V41_WINDOW,
    KVF_N_ROW
} kvf_row;

/* Dimensions and blocks of each row (V3.2 / V4 / V4.1 configs and inference code). */
#define KVF_V32_NOPE       512   /* kv_lora_rank */
#define KVF_V32_ROPE       64    /* qk_rope_head_dim */
#define KVF_V32_BLOCK      128
#define KVF_INDEX_DIM      128   /* index_head_dim */
#define KVF_V4_NOPE        448   /* head_dim 512 − rope 64 */
#define KVF_V4_ROPE        64
#define KVF_V4_BLOCK       64
#define KVF_V4_SCALE_SLOT  8     /* scale bytes FlashMLA reserves per token */
#define KVF_V4_INDEX_BLOCK 32
#define KVF_V41_DIM        512
#define KVF_V41_MAIN_BLOCK 16
#define KVF_V41_WIN_BLOCK  32

/* The packed rows. Every member is a byte array, so the layout is the same on every host; multi-byte
 * members are little-endian, as the header comment says. */
typedef struct __attribute__((packed)) {
    uint8_t nope[KVF_V32_NOPE];                          /* E4M3, dims 0–511 */
    uint8_t scale[KVF_V32_NOPE / KVF_V32_BLOCK][4];      /* FP32 LE, powers of two */
    uint8_t rope[KVF_V32_ROPE][2];                       /* bf16 LE, dims 512–575 */
} kvf_row_v32_main;
_Static_assert(sizeof(kvf_row_v32_main) == 656, "V3.2 main row is 656 bytes (FlashMLA README)");

typedef struct __attribute__((packed)) {
    uint8_t codes[KVF_INDEX_DIM];                        /* E4M3 */
    uint8_t scale[KVF_INDEX_DIM / KVF_V32_BLOCK][4];     /* FP32 LE, power of two */
} kvf_row_v32_index;
_Static_assert(sizeof(kvf_row_v32_index) == 132, "V3.2 indexer key is 132 bytes");

typedef struct __attribute__((packed)) {
    uint8_t nope[KVF_V4_NOPE];                           /* E4M3, dims 0–447 */
    uint8_t rope[KVF_V4_ROPE][2];                        /* bf16 LE, dims 448–511 */
    uint8_t scale[KVF_V4_NOPE / KVF_V4_BLOCK];           /* E8M0 */
    uint8_t pad[KVF_V4_SCALE_SLOT - KVF_V4_NOPE / KVF_V4_BLOCK];   /* 0 */
} kvf_row_v4_main;
_Static_assert(sizeof(kvf_row_v4_main) == 584, "V4 main row is 584 bytes (FlashMLA sparse_decode.h)");

typedef struct __attribute__((packed)) {
    uint8_t codes[KVF_INDEX_DIM / 2];                    /* E2M1 pairs, element 2j low nibble */
    uint8_t scale[KVF_INDEX_DIM / KVF_V4_INDEX_BLOCK];   /* E8M0 */
} kvf_row_v4_index;
_Static_assert(sizeof(kvf_row_v4_index) == 68, "V4 indexer key is 68 bytes");

typedef struct __attribute__((packed)) {
    uint8_t codes[KVF_V41_DIM / 2];                      /* E2M1 pairs, element 2j low nibble */
    uint8_t scale[KVF_V41_DIM / KVF_V41_MAIN_BLOCK];     /* E4M3 */
} kvf_row_v41_main;
_Static_assert(sizeof(kvf_row_v41_main) == 288, "V4.1 FP4 main row is 288 bytes");

typedef struct __attribute__((packed)) {
    uint8_t codes[KVF_V41_DIM];                          /* E4M3 */
    uint8_t scale[KVF_V41_DIM / KVF_V41_WIN_BLOCK];      /* E8M0 */
} kvf_row_v41_window;
_Static_assert(sizeof(kvf_row_v41_window) == 528, "V4.1 FP8 window row is 528 bytes");

/* One field of a row's byte map. */
typedef struct {
    const char *name;     /* the struct member: nope, rope, codes, scale, pad */
    size_t offset, size;  /* bytes */
    const char *format;   /* what the bytes hold, in words */
} kvf_row_field;

/* "v32-main", "v32-index", "v4-main", "v4-index", "v41-main", "v41-window" → KVF_OK, or KVF_ELAYOUT. */
int kvf_row_from_name(const char *name, kvf_row *out);
const char *kvf_row_name(kvf_row layout);      /* NULL for an unknown layout */

/* Bytes of one row, from the formats: element bits × quantised values + scale bytes (rounded up to
 * the scale slot) + 2 × bf16 values. 656, 132, 584, 68, 288, 528; 0 for an unknown layout. */
size_t kvf_row_bytes(kvf_row layout);
/* Values one row holds: 576, 128, 512, 128, 512, 512; 0 for an unknown layout. */
size_t kvf_row_values(kvf_row layout);

/* The byte map, fields in byte order, tiling [0, kvf_row_bytes); NULL and *n_fields = 0 if unknown. */
const kvf_row_field *kvf_row_fields(kvf_row layout, size_t *n_fields);

/* values[kvf_row_values] → row[kvf_row_bytes]. KVF_ENAN / KVF_EINF for a non-finite value anywhere
 * in the row (the row is then left untouched), KVF_ELAYOUT for an unknown layout. */
int kvf_row_pack(kvf_row layout, uint8_t *row, const float *values);
/* row[kvf_row_bytes] → values[kvf_row_values]: element × scale, bf16 widened. */
int kvf_row_unpack(kvf_row layout, float *values, const uint8_t *row);

#endif
