/* NumPy .npy files of float32 matrices: read and write, for the programs' hidden states in and out.
 *
 * The format [numpy.lib.format]: the magic "\x93NUMPY", a major and minor version byte (1.0, 2.0 or
 * 3.0), the header length (2 bytes little-endian in version 1.0, 4 in 2.0 and 3.0), then a Python dict
 * literal padded with spaces and ended by '\n' so that the data starts on a multiple of 64 bytes, then
 * the data. Read here: a dict of exactly the keys 'descr', 'fortran_order' and 'shape' (any order,
 * either quote, an optional trailing comma, spaces between tokens), with 'descr' '<f4' (or '<f8',
 * rounded to float32 once), 'fortran_order' False, and a 'shape' tuple of one or two decimal sizes
 * without leading zeros; anything else is refused, naming the file and the field. The data's length is
 * checked against the shape before anything is allocated. Written: version 1.0, '<f4', C order, whole
 * or not at all (ref/core/file_io.h). */
#ifndef KVL_NPY_H
#define KVL_NPY_H

#include <stddef.h>
#include <stdint.h>

/* *data = a new float32 array [rows][cols] (a 1-D file reads as one row); the caller frees it.
 * KVL_EIO, KVL_EPARSE, KVL_EINVAL, KVL_ENOMEM, with a message naming path and what was wrong. */
int kvl_npy_read(float **data, size_t *rows, size_t *cols, const char *path);

/* The same from the bytes[n] of a whole file; origin names it in messages. */
int kvl_npy_parse(float **data, size_t *rows, size_t *cols, const uint8_t *bytes, size_t n, const char *origin);

/* Write data[rows][cols] as a 2-D '<f4' array. KVL_EIO naming path and the error; on failure path
 * is left as it was. */
int kvl_npy_write(const char *path, const float *data, size_t rows, size_t cols);

#endif
