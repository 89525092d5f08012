/* Worked solution: the fragments of mma.m16n8k16 (the contract is in ../fragment_map.c). Lane l is
 * thread t = l mod 4 of group g = ⌊l / 4⌋: A's registers step through its four 8 × 8 quarters, rows
 * first; B's two through its upper and lower halves; C's four through its two row halves. */
#include "lab.h"

void fragment_map(char matrix, unsigned lane, unsigned i, unsigned *row, unsigned *col)
{
    const unsigned g = lane / 4, t = lane % 4;
    if (matrix == 'A') {
        *row = g + 8 * (i % 2);
        *col = 2 * t + 8 * (i / 2);
    } else if (matrix == 'B') {
        *row = 2 * t + 8 * i;
        *col = g;
    } else {
        *row = g + 8 * (i / 2);
        *col = 2 * t + i % 2;
    }
}
