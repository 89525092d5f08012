/* The instruction set the hot loops run with, chosen once per process at run time.
 *
 * A source with hot loops is compiled twice from the one file: for baseline x86-64 (SSE2), and with
 * -mavx2 -mfma into a second object, both with -ffp-contract=off (Makefile). Its dispatched functions
 * are written once as KVF_ISA_FN(name), which the two compilations name name_baseline and name_avx2,
 * and the public name calls the one kvf_isa_active() picks (KVF_ISA_DISPATCH). The two compute the
 * same IEEE operations in the same order, so their outputs are bit-identical: contraction off keeps
 * the AVX2 build from fusing a·b + c into one FMA, which rounds once where the baseline rounds twice,
 * and every reduction keeps an order of its own, whatever the vector width.
 *
 * The choice: avx2 where the CPU has AVX2 and FMA (and the build made the second object: x86-64
 * only), baseline otherwise. The environment variable KVL_ISA=baseline|avx2 overrides it at the first
 * call; an unknown name, or avx2 where it cannot run, is reported on stderr and the automatic choice
 * kept. kvf_isa_force() overrides it at any time (the tests run both variants in one process). */
#ifndef KVF_ISA_H
#define KVF_ISA_H

typedef enum { KVF_ISA_BASELINE, KVF_ISA_AVX2, KVF_N_ISA } kvf_isa;

/* The variant every dispatched function runs now. */
kvf_isa kvf_isa_active(void);

/* 1 if `isa` can run here (the CPU has it and the build compiled it), else 0. */
int kvf_isa_available(kvf_isa isa);

/* Makes `isa` the active variant: 0, or -1 (nothing changed) if it is unknown or not available. */
int kvf_isa_force(kvf_isa isa);

/* "baseline", "avx2"; NULL for an unknown value. */
const char *kvf_isa_name(kvf_isa isa);

/* The variant named `name` (as kvf_isa_name): 0, or -1 if the name is unknown. */
int kvf_isa_from_name(const char *name, kvf_isa *out);

/* ---- for the twice-compiled sources ------------------------------------------------------------ */

/* KVF_ISA_BUILD_AVX2 is defined in the AVX2 compilation; KVF_ISA_HAVE_AVX2 in every compilation of a
 * build that links the AVX2 objects. */
#ifdef KVF_ISA_BUILD_AVX2
#define KVF_ISA_FN(name) name##_avx2
#define KVF_ISA_ONCE 0 /* code outside the dispatched functions is compiled in the baseline object only */
#else
#define KVF_ISA_FN(name) name##_baseline
#define KVF_ISA_ONCE 1
#endif

#ifdef KVF_ISA_HAVE_AVX2
#define KVF_ISA_CALL(name, args) (kvf_isa_active() == KVF_ISA_AVX2 ? name##_avx2 args : name##_baseline args)
#else
#define KVF_ISA_CALL(name, args) (name##_baseline args)
#endif

/* The public function `name` (return type ret, parameter list params, those parameters' names args)
 * calling the active variant; place it where KVF_ISA_ONCE holds. */
#define KVF_ISA_DISPATCH(ret, name, params, args) \
    ret name##_baseline params;                   \
    ret name##_avx2 params;                       \
    ret name params { return KVF_ISA_CALL(name, args); }
#define KVF_ISA_DISPATCH_VOID(name, params, args) \
    void name##_baseline params;                  \
    void name##_avx2 params;                      \
    void name params { KVF_ISA_CALL(name, args); }

#endif
