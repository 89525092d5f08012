/* GGUF, the file format llama.cpp, Ollama and LM Studio keep models in: its header and key-value
 * metadata (versions 2 and 3, little-endian), and the kvl_model they describe.
 *
 * A file is "GGUF", a uint32 version, a uint64 tensor count, a uint64 key-value count, then each pair:
 * a string key, a uint32 value type and the value. A string is a uint64 byte count and the bytes; an
 * array is a uint32 element type, a uint64 element count and the elements (no arrays of arrays). The
 * tensor descriptions and the tensor data follow the metadata; nothing here reads them.
 *
 * Every length and count is checked against the bytes left before anything is read or allocated, so
 * any input is refused or read within its own size. */
#ifndef KVL_GGUF_H
#define KVL_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

typedef enum {
    KVL_GGUF_U8, KVL_GGUF_I8, KVL_GGUF_U16, KVL_GGUF_I16, KVL_GGUF_U32, KVL_GGUF_I32, KVL_GGUF_F32,
    KVL_GGUF_BOOL, KVL_GGUF_STRING, KVL_GGUF_ARRAY, KVL_GGUF_U64, KVL_GGUF_I64, KVL_GGUF_F64,
    KVL_GGUF_N_TYPES
} kvl_gguf_type;

/* A string in the file: bytes[len], not NUL-terminated, pointing into the bytes that were parsed. */
typedef struct {
    const char *bytes;
    size_t len;
} kvl_gguf_str;

typedef struct {
    kvl_gguf_str key;
    kvl_gguf_type type;
    kvl_gguf_type elem;      /* an array's element type */
    uint64_t count;          /* an array's element count */
    union {
        uint64_t u;          /* U8 .. U64, and BOOL (0 or 1) */
        int64_t i;           /* I8 .. I64 */
        double f;            /* F32, F64 */
        kvl_gguf_str s;      /* STRING */
    } v;
} kvl_gguf_kv;

typedef struct {
    const char *origin;      /* the file, for messages */
    uint32_t version;
    uint64_t n_tensors;
    size_t n_kv;
    kvl_gguf_kv *kv;         /* [n_kv], in file order, no key twice */
} kvl_gguf;

/* Largest metadata read from a file: a tokenizer's vocabulary is a few MiB. */
#define KVL_GGUF_MAX_META ((size_t)1 << 26)

/* Parse the header and metadata in bytes[len], the first len bytes of a file of file_size bytes
 * (file_size >= len: the file may go on with its tensors). KVL_OK, g->kv pointing into bytes; or
 * KVL_EPARSE (bad magic, version, type; truncated; past KVL_GGUF_MAX_META), KVL_EINVAL (a key twice),
 * KVL_ENOMEM, with kvl_error() one line starting "ORIGIN: " and *g empty. */
int kvl_gguf_parse(kvl_gguf *g, const uint8_t *bytes, size_t len, uint64_t file_size, const char *origin);
void kvl_gguf_free(kvl_gguf *g);

/* The pair with this key, or NULL. */
const kvl_gguf_kv *kvl_gguf_find(const kvl_gguf *g, const char *key);
const char *kvl_gguf_type_name(kvl_gguf_type t);   /* "uint32", "string", "array", ...; "?" if unknown */

/* 1 when the file at path begins with the GGUF magic (a file that cannot be read: 0). */
int kvl_gguf_file(const char *path);

/* The model the metadata describes, and the cache llama.cpp keeps for it (16-bit, its default):
 * architecture "deepseek2" (MLA; whole K and V when the file was converted without the MLA split)
 * or "llama" (MHA/GQA/MQA). Anything else, a key of the wrong type, two keys that disagree, is
 * refused (KVL_EINVAL) naming the file, the key and the value. */
int kvl_model_from_gguf(kvl_model *m, const kvl_gguf *g);
/* kvl_model_load for a GGUF file: reads the metadata only. */
int kvl_model_load_gguf(kvl_model *m, const char *path);

#endif
