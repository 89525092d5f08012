/* The environment variables the programs and their libraries read, checked before anything reads them.
 *
 * libgomp and OpenBLAS read theirs in their own initialisers, before main: libgomp prints a warning of
 * its own for a value it cannot parse and goes on with its default, and a thread count far beyond the
 * machine (OMP_NUM_THREADS=100000) overflows its stack at the first parallel region. So the check runs
 * earlier still, from the executable's .preinit_array, which the dynamic loader calls before any shared
 * library's initialiser (where there is none, an ordinary constructor, later than theirs). There:
 *   - a value that is not valid is remembered, and the variable removed so that no library sees it;
 *     the program's start (kvl_environment_check) refuses it in one line and exits 2;
 *   - a thread count above the processors this process may run on is lowered to that number, and one
 *     line on stderr says so;
 *   - KVL_ISA empty means unset; a known variant the CPU lacks is said and replaced at its first use
 *     (formats/isa.h).
 * Read: OMP_NUM_THREADS (positive counts joined by commas, one per nesting level), OPENBLAS_NUM_THREADS
 * (a positive count), OMP_PROC_BIND (true, false, or primary, master, close and spread joined by
 * commas), OMP_DYNAMIC (true or false), KVL_ISA (baseline, avx2 or avx512), KVL_BACKEND (ref or cpu,
 * ref/core/backend.h; empty means unset). */
#ifndef KVL_ENVIRONMENT_H
#define KVL_ENVIRONMENT_H

/* "NAME=VALUE: why" for the first variable refused at start-up (the value's control bytes written as
 * \xHH), or NULL if none was. */
const char *kvl_environment_refusal(void);

/* 0 if the environment was sound; else "PROGRAM: NAME=VALUE: why" as one line on stderr and 2, the
 * exit status. Every program calls it before it prints anything. */
int kvl_environment_check(const char *program);

#endif
