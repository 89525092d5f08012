/* Chapter 5's labs: the functions labs/05_formats/<lab>.c define, each graded by grade.c against
 * formats/element.h and formats/block.h. Their contracts are written above the stubs. */
#ifndef KVL_LAB_05_H
#define KVL_LAB_05_H

#include <stddef.h>
#include <stdint.h>

uint8_t e4m3_encode_sat(float x);

uint8_t e2m1_encode(float x);

void mxfp4_quant(uint8_t *codes, uint8_t *scales, const float *x, size_t n);

#endif
