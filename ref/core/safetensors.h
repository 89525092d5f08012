/* Safetensors files: read (memory-mapped, every header field checked against the file before any
 * tensor byte is touched), write, and sharded checkpoints through model.safetensors.index.json.
 *
 * The format [safetensors, "format" in its README]:
 *   bytes 0–7    N, the header length, unsigned 64-bit little-endian
 *   bytes 8…     N bytes of UTF-8 JSON, one object; the writer pads it with spaces to a multiple of 8
 *   then         the data buffer: every tensor's bytes, row-major, little-endian, back to back (F32 is
 *                copied as it lies: the host is little-endian, as every machine this builds for)
 * The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, offsets
 * relative to the data buffer; the optional "__metadata__" maps strings to strings.
 *
 * A file is accepted only if: N fits in the file and below KVL_ST_MAX_HEADER; the header is one strict
 * JSON object (ref/core/json_text.h: valid UTF-8, no raw control byte in a string, no leading zero,
 * nothing after it but blanks), no key twice in any object; each entry has a known dtype, a shape of at most KVL_ST_MAX_DIMS
 * non-negative integers whose element count times the dtype's bits is a whole number of bytes equal
 * to end − begin; and the tensors, sorted by begin, tile the data buffer exactly (no gap, no overlap,
 * nothing left over), as the safetensors library demands. Anything else is refused with KVL_EPARSE
 * or KVL_EINVAL and a message naming the file, the tensor and the field.
 *
 * Packed 4-bit tensors: "F4" (float4_e2m1fn, two per byte) counts elements in its shape, so an odd
 * element count is refused; element 2j is in the LOW nibble of byte j (formats/element.h). DeepSeek's
 * checkpoints also store FP4 as "I8" bytes of two codes each, shape in bytes; that is read as bytes. */
#ifndef KVL_SAFETENSORS_H
#define KVL_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define KVL_ST_MAX_DIMS 8
/* The safetensors library's own header limit (100 MB). */
#define KVL_ST_MAX_HEADER ((uint64_t)100000000)

typedef enum {
    KVL_ST_F32,      /* "F32"      float32 */
    KVL_ST_F64,      /* "F64"      float64, read rounded to float32 */
    KVL_ST_F16,      /* "F16"      IEEE binary16 */
    KVL_ST_BF16,     /* "BF16"     bfloat16 */
    KVL_ST_F8_E4M3,  /* "F8_E4M3"  float8_e4m3fn */
    KVL_ST_F8_E8M0,  /* "F8_E8M0"  float8_e8m0fnu, a power-of-two scale */
    KVL_ST_F4,       /* "F4"       float4_e2m1fn, two per byte */
    KVL_ST_I8,       /* "I8" */
    KVL_ST_U8,       /* "U8" */
    KVL_ST_I32,      /* "I32" */
    KVL_ST_I64,      /* "I64" */
    KVL_ST_N_DTYPE
} kvl_st_dtype;

/* The header's spelling ("BF16"), NULL for an unknown value; bits per element (4, 8, 16, 32, 64). */
const char *kvl_st_dtype_name(kvl_st_dtype t);
unsigned kvl_st_dtype_bits(kvl_st_dtype t);
/* 0 and *out set for a known spelling, −1 otherwise. */
int kvl_st_dtype_from_name(const char *name, kvl_st_dtype *out);

typedef struct {
    char *name;
    kvl_st_dtype dtype;
    size_t n_dims;
    size_t shape[KVL_ST_MAX_DIMS];
    size_t n_elements;       /* product of the shape (1 for a scalar) */
    size_t n_bytes;          /* end − begin */
    const uint8_t *data;     /* into the mapping, n_bytes long */
} kvl_st_tensor;

typedef struct {
    char *origin;            /* the path, for messages */
    void *map;               /* the whole file, read-only; NULL when parsed from the caller's bytes */
    size_t map_bytes;
    kvl_st_tensor *tensors;  /* sorted by name */
    size_t n_tensors;
    char **meta;             /* "__metadata__" as key, value, key, value, … sorted by key */
    size_t n_meta;
} kvl_st_file;

/* Map and check the file at path, a regular file (ref/core/file_io.h). KVL_EIO (cannot open or map, not
 * a regular file), KVL_EPARSE, KVL_EINVAL, KVL_ENOMEM;
 * on failure *f is empty and kvl_st_close is harmless. */
int kvl_st_open(kvl_st_file *f, const char *path);

/* The same checks on bytes[n] the caller keeps alive while f is open; origin names it in messages. */
int kvl_st_parse(kvl_st_file *f, const uint8_t *bytes, size_t n, const char *origin);

void kvl_st_close(kvl_st_file *f);

/* The tensor of that name, or NULL. */
const kvl_st_tensor *kvl_st_find(const kvl_st_file *f, const char *name);

/* The metadata value of key, or NULL. */
const char *kvl_st_metadata(const kvl_st_file *f, const char *key);

/* out[n_elements] = t decoded to float32 (F32; F64 rounded to nearest; F16, BF16, F8_E4M3, F8_E8M0, F4
 * through formats/).
 * KVL_EINVAL, naming origin and the tensor, for an integer dtype. */
int kvl_st_read_f32(float *out, const kvl_st_tensor *t, const char *origin);

/* KVL_EINVAL unless t has exactly the n_dims dims of shape; the message names origin, tensor, both shapes. */
int kvl_st_expect_shape(const kvl_st_tensor *t, const char *origin, size_t n_dims, const size_t *shape);

/* ---- writing ----------------------------------------------------------------------------------- */

typedef struct {
    const char *name;
    kvl_st_dtype dtype;
    size_t n_dims;
    size_t shape[KVL_ST_MAX_DIMS];
    const void *data;        /* the element count's bytes, already in the dtype's layout */
} kvl_st_entry;

/* Write entries[n] (names distinct, not "__metadata__") and meta[2·n_meta] (key, value pairs) to path,
 * data in the order given, whole or not at all (ref/core/file_io.h). KVL_EINVAL (bad entry, named),
 * KVL_EIO naming path and the error, KVL_ENOMEM. */
int kvl_st_write(const char *path, const kvl_st_entry *entries, size_t n, const char *const *meta, size_t n_meta);

/* ---- checkpoints: one file, or a directory with model.safetensors.index.json --------------------- */

typedef struct {
    kvl_st_file *files;      /* the shards, in the order the index first names them */
    size_t n_files;
} kvl_st_checkpoint;

/* path is a .safetensors file, an index .json, or a directory holding model.safetensors or else
 * model.safetensors.index.json: a directory with both is read as transformers' from_pretrained reads
 * it, through the single file (when it is a regular file) and never the index. The index is strict JSON (ref/core/json_text.h) with no key twice. With an
 * index every shard its "weight_map" names is opened and every
 * tensor it lists must be in the shard it names (KVL_EINVAL naming the index, tensor and shard). */
int kvl_st_checkpoint_open(kvl_st_checkpoint *c, const char *path);

void kvl_st_checkpoint_close(kvl_st_checkpoint *c);

/* The tensor of that name in any shard, or NULL; *file (may be NULL) names the shard holding it. */
const kvl_st_tensor *kvl_st_checkpoint_find(const kvl_st_checkpoint *c, const char *name, const kvl_st_file **file);

#endif
