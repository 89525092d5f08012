/* The instruction set the hot loops run with, chosen once per process at run time.
 *
 * A source with hot loops is compiled three times from the one file: for baseline x86-64 (SSE2), with
 * -mavx2 -mfma, and with AVX-512 (F, BW, VL, DQ) preferring 512-bit vectors, all with -ffp-contract=off
 * (Makefile). Its dispatched functions are written once as KVF_ISA_FN(name), which the three
 * compilations name name_baseline, name_avx2 and name_avx512, and the public name calls the one
 * kvf_isa_active() picks (KVF_ISA_DISPATCH). All three compute the same IEEE operations in the same
 * order, so their outputs are bit-identical: contraction off keeps the vector builds from fusing
 * a·b + c into one FMA, which rounds once where the baseline rounds twice, and every reduction keeps
 * an order of its own, whatever the vector width.
 *
 * The variants are ordered: a CPU that runs one runs every instruction of those before it, so
 * kvf_isa_active() >= KVF_ISA_AVX2 asks "may AVX2 and FMA run". The choice is the widest the CPU has
 * (and the build made: x86-64 only): avx512 where it has AVX-512 F, BW, VL and DQ with the OS saving
 * their registers, else avx2 where it has AVX2 and FMA, else baseline. The environment variable
 * KVL_ISA=baseline|avx2|avx512 overrides it at the first call; an unknown name, or a variant that
 * cannot run here, is reported on stderr and the automatic choice kept (the programs refuse an unknown
 * name before they start: ref/core/environment.h). kvf_isa_force() overrides it
 * at any time (the tests run every variant in one process). */
#ifndef KVF_ISA_H
#define KVF_ISA_H

typedef enum { KVF_ISA_BASELINE, KVF_ISA_AVX2, KVF_ISA_AVX512, KVF_N_ISA } kvf_isa;

/* The variant every dispatched function runs now. */
kvf_isa kvf_isa_active(void);

/* 1 if `isa` can run here (the CPU has it and the build compiled it), else 0. */
int kvf_isa_available(kvf_isa isa);

/* Makes `isa` the active variant: 0, or -1 (nothing changed) if it is unknown or not available. */
int kvf_isa_force(kvf_isa isa);

/* "baseline", "avx2", "avx512"; NULL for an unknown value. */
const char *kvf_isa_name(kvf_isa isa);

/* The variant named `name` (as kvf_isa_name): 0, or -1 if the name is unknown. */
int kvf_isa_from_name(const char *name, kvf_isa *out);

/* ---- for the thrice-compiled sources ---------------------------------------------------------- */

/* KVF_ISA_BUILD_AVX2 or KVF_ISA_BUILD_AVX512 is defined in that variant's compilation; KVF_ISA_HAVE_X86
 * in every compilation of a build that links both vector variants' objects. */
#if defined(KVF_ISA_BUILD_AVX512)
#define KVF_ISA_FN(name) name##_avx512
#define KVF_ISA_ONCE 0 /* code outside the dispatched functions is compiled in the baseline object only */
#elif defined(KVF_ISA_BUILD_AVX2)
#define KVF_ISA_FN(name) name##_avx2
#define KVF_ISA_ONCE 0
#else
#define KVF_ISA_FN(name) name##_baseline
#define KVF_ISA_ONCE 1
#endif

/* The body of a dispatching function: `out` is `return` (or empty, for a void one). */
#ifdef KVF_ISA_HAVE_X86
#define KVF_ISA_CALL(out, name, args)                    \
    switch (kvf_isa_active()) {                          \
    case KVF_ISA_AVX512: out name##_avx512 args; break;  \
    case KVF_ISA_AVX2: out name##_avx2 args; break;      \
    default: out name##_baseline args; break;            \
    }
#else /* one variant; kvf_isa_active still reads KVL_ISA, to say a variant asked for cannot run here */
#define KVF_ISA_CALL(out, name, args) \
    (void)kvf_isa_active();           \
    out name##_baseline args;
#endif

/* The public function `name` (return type ret, parameter list params, those parameters' names args)
 * calling the active variant; place it where KVF_ISA_ONCE holds. */
#define KVF_ISA_DISPATCH(ret, name, params, args) \
    ret name##_baseline params;                   \
    ret name##_avx2 params;                       \
    ret name##_avx512 params;                     \
    ret name params { KVF_ISA_CALL(return, name, args) }
#define KVF_ISA_DISPATCH_VOID(name, params, args) \
    void name##_baseline params;                  \
    void name##_avx2 params;                      \
    void name##_avx512 params;                    \
    void name params { KVF_ISA_CALL(, name, args) }

#endif
