/* The CPU backend (ref/core/backend.h): the kernels of ref/core tiled, split over OpenMP threads and
 * vectorised for the instruction sets the CPU runs (formats/isa.h):
 *
 *   matmul_abt, matmul_ab, matvec   cpu/linalg_cpu.h      products split by blocks of rows
 *   attend                          cpu/attend_cpu.h      tiles, online softmax per tile, parts merged;
 *                                                         cpu/few_rows.h and cpu/many_rows.h kernels
 *   index_scores, _listed           cpu/index_scan_cpu.h  key tiles as products, weighed per ISA
 *
 * with per-thread scratch (cpu/scratch.h). tests/test_cpu_*.c hold each to its definition. */
#ifndef KVL_BACKEND_CPU_H
#define KVL_BACKEND_CPU_H

#include "backend.h"

extern const kvl_backend kvl_backend_cpu;

/* The backend a program runs, chosen from the environment before its first step: the CPU backend, or
 * the definitions where KVL_BACKEND=ref (ref/core/environment.h refuses any other value before main).
 * Returns the backend now in use. */
const kvl_backend *kvl_backend_choose(void);

#endif
