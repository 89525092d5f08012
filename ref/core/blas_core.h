/* Which of OpenBLAS's kernel sets the products run on.
 *
 * A DYNAMIC_ARCH OpenBLAS (Debian's, among others) carries kernels for many CPUs and picks one set, its
 * "core", as it loads, from the CPU's family and model. A model newer than the library is missing from
 * its table, and then it may fall back to its oldest 64-bit set: Debian 12's OpenBLAS 0.3.21 runs
 * Prescott's SSE3 kernels on a 5th-generation Xeon that has AVX-512, and every product runs at a
 * quarter of the machine's speed with nothing said. The one documented way to choose the core is the
 * environment variable OPENBLAS_CORETYPE, which OpenBLAS reads once, as it loads: too early for the
 * program to set it for itself (the C library's own start-up restores the environment it was given).
 *
 * So every program here that links the products checks, before main, the core OpenBLAS chose against the
 * widest instruction set the CPU runs (ref/core/linalg.c). Where OpenBLAS's core is narrower and the
 * variable is unset, the program starts itself again (execv of /proc/self/exe, same arguments, nothing
 * yet printed) with OPENBLAS_CORETYPE set to the core the CPU merits, and KVL_BLAS_CORE_DETECTED set to
 * the one OpenBLAS had chosen, for the record. The choice is the one OpenBLAS itself makes from features
 * where it knows no model: AVX-512 with BF16 Cooperlake, AVX-512 SkylakeX, AVX2 with FMA Haswell (Zen on
 * AMD and Hygon). Where OpenBLAS chose as wide a core, where the variable is already set (a user's choice
 * is never changed), or off x86-64, nothing happens; an OpenBLAS built for one CPU only ignores the
 * variable, and the one restart is then for nothing (kvbench's first line says so). */
#ifndef KVL_BLAS_CORE_H
#define KVL_BLAS_CORE_H

typedef enum { KVL_CPU_OTHER, KVL_CPU_INTEL, KVL_CPU_AMD } kvl_cpu_vendor;

/* What the choice reads of a CPU: its vendor and the instruction-set extensions the OS enables. */
typedef struct {
    kvl_cpu_vendor vendor;
    int avx2_fma, avx512, avx512_bf16; /* avx512: F, CD, BW, DQ and VL, the set OpenBLAS's kernels use */
} kvl_cpu_features;

/* The widths a core's kernels are written for, narrowest first; UNKNOWN for a name not listed. */
typedef enum { KVL_CORE_UNKNOWN, KVL_CORE_SSE, KVL_CORE_AVX, KVL_CORE_AVX2, KVL_CORE_AVX512 } kvl_core_width;

/* This CPU's features (all zero off x86-64). */
kvl_cpu_features kvl_cpu_features_here(void);

/* The OpenBLAS core `cpu` merits ("Cooperlake", "SkylakeX", "Haswell", "Zen"), or NULL: any will do. */
const char *kvl_blas_core_for(kvl_cpu_features cpu);

/* The width of OpenBLAS's core `name` (as openblas_get_corename() spells it, any case). */
kvl_core_width kvl_blas_core_width(const char *name);

/* The core to restart with when OpenBLAS chose `running` on `cpu`: kvl_blas_core_for(cpu) if that is
 * wider than `running`, else NULL (also when `running`'s width is unknown: nothing is judged). */
const char *kvl_blas_core_better(const char *running, kvl_cpu_features cpu);

/* Restarts the process as the header says, if it should; returns if it should not, or if execv fails
 * (saying so on stderr). argv: main's. Runs before main, from ref/core/linalg.c. */
void kvl_blas_core_mend(char **argv);

/* The core OpenBLAS runs (openblas_get_corename()). */
const char *kvl_blas_core(void);

/* The core OpenBLAS's own detection chose, if this process was restarted to replace it, else NULL. */
const char *kvl_blas_core_detected(void);

#endif
