/* What kvl_st_parse must do with any bytes at all, checked by tests/fuzz/fuzz_safetensors.c on every
 * input the fuzzer makes and by tests/test_reliability_fuzz.c on every saved one.
 *
 * Either KVL_OK, and then every tensor lies inside the input, its byte count is its dtype's bits times
 * its element count over 8, the tensors tile the data buffer (their bytes add up to all of it), each
 * is found by its name, and every float tensor decodes (every byte read, under the sanitizers); or
 * KVL_EPARSE, KVL_EINVAL or KVL_ENOMEM with nothing left allocated and one line of text in kvl_error()
 * that starts with the origin. */
#ifndef KVL_TESTS_FUZZ_SAFETENSORS_PROPERTY_H
#define KVL_TESTS_FUZZ_SAFETENSORS_PROPERTY_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors.h"
#include "status.h"

#define FUZZ_ST_ORIGIN "fuzz.safetensors"

/* NULL when every tensor of a parsed file f of data[size] is consistent, else what is wrong. */
static inline const char *fuzz_st_file_fault(const kvl_st_file *f, const uint8_t *data, size_t size)
{
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | data[i];
    size_t covered = 0;
    for (size_t i = 0; i < f->n_tensors; i++) {
        const kvl_st_tensor *t = &f->tensors[i];
        if (t->data < data + 8 + hlen || t->n_bytes > (size_t)(data + size - t->data)) return "a tensor lies outside the data";
        if (t->n_elements * kvl_st_dtype_bits(t->dtype) != 8 * t->n_bytes) return "bytes disagree with dtype and shape";
        if (kvl_st_find(f, t->name) != t) return "a tensor is not found by its name";
        covered += t->n_bytes;
        if (kvl_st_dtype_bits(t->dtype) > 16 || t->dtype == KVL_ST_I8 || t->dtype == KVL_ST_U8) continue;
        float *out = malloc(t->n_elements * sizeof *out + 1);
        if (!out) return NULL;
        int rc = kvl_st_read_f32(out, t, f->origin);
        free(out);
        if (rc != KVL_OK) return "a float tensor did not decode";
    }
    if (covered != size - 8 - hlen) return "the tensors do not tile the data buffer";
    return NULL;
}

/* NULL when parsing data[size] behaves, else what went wrong. */
static inline const char *fuzz_st_fault(const uint8_t *data, size_t size)
{
    kvl_st_file f;
    kvl_clear_error();
    int rc = kvl_st_parse(&f, data, size, FUZZ_ST_ORIGIN);
    if (rc == KVL_OK) {
        const char *fault = fuzz_st_file_fault(&f, data, size);
        kvl_st_close(&f);
        return fault;
    }
    if (rc != KVL_EINVAL && rc != KVL_EPARSE && rc != KVL_ENOMEM) return "an unexpected status code";
    if (f.tensors || f.meta || f.origin) return "a failed parse left memory allocated";
    const char *msg = kvl_error();
    if (strncmp(msg, FUZZ_ST_ORIGIN ": ", sizeof FUZZ_ST_ORIGIN + 1) != 0) return "message does not name the file";
    if (strlen(msg) <= sizeof FUZZ_ST_ORIGIN + 1) return "empty message";
    for (const char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20) return "message is not one line of text";
    return NULL;
}

#endif
