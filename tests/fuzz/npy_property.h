/* What kvl_npy_parse must do with any bytes at all, checked by tests/fuzz/fuzz_npy.c on every input the
 * fuzzer makes and by tests/test_reliability_fuzz.c on every saved one.
 *
 * Either KVL_OK, and then the data after the header is exactly rows × cols elements of 4 or 8 bytes,
 * read as they lie (float32) or each rounded once (float64); or KVL_EPARSE, KVL_EINVAL or KVL_ENOMEM with
 * *data NULL and one line of text in kvl_error() that starts with the origin. */
#ifndef KVL_TESTS_FUZZ_NPY_PROPERTY_H
#define KVL_TESTS_FUZZ_NPY_PROPERTY_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "npy.h"
#include "status.h"

#define FUZZ_NPY_ORIGIN "fuzz.npy"

/* NULL when a parse of data[size] that succeeded is consistent, else what is wrong. */
static inline const char *fuzz_npy_read_fault(const float *x, size_t rows, size_t cols, const uint8_t *data, size_t size)
{
    size_t pre = data[6] == 1 ? 10 : 12, hlen = data[8] | (size_t)data[9] << 8;
    if (pre == 12) hlen |= (size_t)data[10] << 16 | (size_t)data[11] << 24;
    const uint8_t *raw = data + pre + hlen;
    size_t body = size - pre - hlen, n = rows * cols;
    if (body != 4 * n && body != 8 * n) return "the data is not rows x cols elements";
    if (!x) return "no array";
    if (body == 4 * n) return memcmp(x, raw, body) == 0 ? NULL : "float32 data not read bit for bit";
    for (size_t i = 0; i < n; i++) {
        double v;
        memcpy(&v, raw + 8 * i, 8);
        float want = (float)v;
        if (memcmp(&x[i], &want, 4) != 0 && !(v != v && x[i] != x[i])) return "float64 data not rounded once";
    }
    return NULL;
}

/* NULL when parsing data[size] behaves, else what went wrong. */
static inline const char *fuzz_npy_fault(const uint8_t *data, size_t size)
{
    float *x = (float *)data;   /* anything but NULL, to see that a failure clears it */
    size_t rows = 0, cols = 0;
    kvl_clear_error();
    int rc = kvl_npy_parse(&x, &rows, &cols, data, size, FUZZ_NPY_ORIGIN);
    if (rc == KVL_OK) {
        const char *fault = fuzz_npy_read_fault(x, rows, cols, data, size);
        free(x);
        return fault;
    }
    if (rc != KVL_EINVAL && rc != KVL_EPARSE && rc != KVL_ENOMEM) return "an unexpected status code";
    if (x) return "a failed parse left *data set";
    const char *msg = kvl_error();
    if (strncmp(msg, FUZZ_NPY_ORIGIN ": ", sizeof FUZZ_NPY_ORIGIN + 1) != 0) return "message does not name the file";
    if (strlen(msg) <= sizeof FUZZ_NPY_ORIGIN + 1) return "empty message";
    for (const char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20) return "message is not one line of text";
    return NULL;
}

#endif
