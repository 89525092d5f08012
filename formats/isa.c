/* The choice of instruction set (isa.h): made once, on the first call, from the CPU and KVL_ISA. */
#include "isa.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const isa_names[KVF_N_ISA] = {
    [KVF_ISA_BASELINE] = "baseline", [KVF_ISA_AVX2] = "avx2", [KVF_ISA_AVX512] = "avx512"};


const char *kvf_isa_name(kvf_isa isa)
{
    return (unsigned)isa < KVF_N_ISA ? isa_names[isa] : NULL;
}

int kvf_isa_from_name(const char *name, kvf_isa *out)
{
    for (int i = 0; name && i < KVF_N_ISA; i++) {
        if (strcmp(name, isa_names[i]) == 0) {
            *out = (kvf_isa)i;
            return 0;
        }
    }
    return -1;
}

#ifdef KVF_ISA_HAVE_X86 /* an x86-64 build (Makefile) */
/* What the CPU lacks where a variant cannot run, for KVL_ISA's message. */
static const char *const isa_needs[KVF_N_ISA] = {
    [KVF_ISA_AVX2] = "the CPU lacks AVX2 or FMA", [KVF_ISA_AVX512] = "the CPU lacks AVX-512 F, BW, VL or DQ"};

/* AVX2 and FMA in the CPU, and the OS saving the 256-bit registers (libgcc's check includes it). */
static int cpu_has_avx2_fma(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* The AVX-512 subsets the AVX-512 build's flags name, and the OS saving the 512-bit and mask registers
 * (libgcc again); cpu_has_avx2_fma initialises libgcc's reading of the CPU. */
static int cpu_has_avx512(void)
{
    return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
}
#endif

int kvf_isa_available(kvf_isa isa)
{
    switch (isa) {
    case KVF_ISA_BASELINE: return 1;
#ifdef KVF_ISA_HAVE_X86
    case KVF_ISA_AVX2: return cpu_has_avx2_fma();
    case KVF_ISA_AVX512: return cpu_has_avx512();
#endif
    default: return 0;
    }
}

/* Read on every dispatched call; −1 until the first call chooses, then written only by kvf_isa_force. */
static _Atomic int active = -1;
static pthread_once_t chosen = PTHREAD_ONCE_INIT;

static kvf_isa automatic(void)
{
    for (int isa = KVF_N_ISA - 1; isa > KVF_ISA_BASELINE; isa--)
        if (kvf_isa_available((kvf_isa)isa)) return (kvf_isa)isa;
    return KVF_ISA_BASELINE;
}

/* KVL_ISA's variant if it names one that can run here, else the automatic choice (saying why). */
static kvf_isa from_environment(void)
{
    const char *env = getenv("KVL_ISA");
    const kvf_isa fallback = automatic();
    kvf_isa isa;
    if (!env || !*env) return fallback;
    if (kvf_isa_from_name(env, &isa) != 0) {
        fprintf(stderr, "KVL_ISA=%s: unknown instruction set (baseline, avx2 or avx512); using %s\n", env,
                kvf_isa_name(fallback));
        return fallback;
    }
    if (!kvf_isa_available(isa)) {
        fprintf(stderr, "KVL_ISA=%s: not available here (%s); using %s\n", env,
#ifdef KVF_ISA_HAVE_X86
                isa_needs[isa],
#else
                "this build has only the baseline",
#endif
                kvf_isa_name(fallback));
        return fallback;
    }
    return isa;
}

static void choose(void)
{
    atomic_store_explicit(&active, (int)from_environment(), memory_order_relaxed);
}

kvf_isa kvf_isa_active(void)
{
    int isa = atomic_load_explicit(&active, memory_order_relaxed);
    if (isa < 0) {
        pthread_once(&chosen, choose);
        isa = atomic_load_explicit(&active, memory_order_relaxed);
    }
    return (kvf_isa)isa;
}

int kvf_isa_force(kvf_isa isa)
{
    if (!kvf_isa_available(isa)) return -1;
    pthread_once(&chosen, choose); /* a later first call must not overwrite the forced choice */
    atomic_store_explicit(&active, (int)isa, memory_order_relaxed);
    return 0;
}
