#include "blas_core.h"
#include "environment.h"

#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#define CORETYPE_VAR "OPENBLAS_CORETYPE"
#define DETECTED_VAR "KVL_BLAS_CORE_DETECTED"

#if defined(__x86_64__)
static kvl_cpu_vendor vendor_here(void)
{
    unsigned eax, ebx, ecx, edx;
    if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return KVL_CPU_OTHER;
    char name[13];
    memcpy(name, &ebx, 4);
    memcpy(name + 4, &edx, 4);
    memcpy(name + 8, &ecx, 4);
    name[12] = '\0';
    if (!strcmp(name, "GenuineIntel")) return KVL_CPU_INTEL;
    if (!strcmp(name, "AuthenticAMD") || !strcmp(name, "HygonGenuine")) return KVL_CPU_AMD;
    return KVL_CPU_OTHER;
}

kvl_cpu_features kvl_cpu_features_here(void)
{
    __builtin_cpu_init();
    kvl_cpu_features f = {vendor_here(), 0, 0, 0};
    f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
               __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
    f.avx512_bf16 = f.avx512 && __builtin_cpu_supports("avx512bf16");
    return f;
}
#else
kvl_cpu_features kvl_cpu_features_here(void) { return (kvl_cpu_features){KVL_CPU_OTHER, 0, 0, 0}; }
#endif

const char *kvl_blas_core_for(kvl_cpu_features cpu)
{
    if (cpu.avx512_bf16) return "Cooperlake";
    if (cpu.avx512) return "SkylakeX";
    if (cpu.avx2_fma) return cpu.vendor == KVL_CPU_AMD ? "Zen" : "Haswell";
    return NULL;
}

/* OpenBLAS's x86-64 cores (driver/others/dynamic.c's corename table) by the widest vectors their
 * kernels use. */
static const struct {
    const char *name;
    kvl_core_width width;
} core_widths[] = {
    {"Prescott", KVL_CORE_SSE},    {"Core2", KVL_CORE_SSE},        {"Penryn", KVL_CORE_SSE},
    {"Dunnington", KVL_CORE_SSE},  {"Nehalem", KVL_CORE_SSE},      {"Atom", KVL_CORE_SSE},
    {"Opteron", KVL_CORE_SSE},     {"Opteron_SSE3", KVL_CORE_SSE}, {"Barcelona", KVL_CORE_SSE},
    {"Nano", KVL_CORE_SSE},        {"Bobcat", KVL_CORE_SSE},       {"Sandybridge", KVL_CORE_AVX},
    {"Bulldozer", KVL_CORE_AVX},   {"Piledriver", KVL_CORE_AVX},   {"Steamroller", KVL_CORE_AVX},
    {"Excavator", KVL_CORE_AVX2},  {"Haswell", KVL_CORE_AVX2},     {"Zen", KVL_CORE_AVX2},
    {"SkylakeX", KVL_CORE_AVX512}, {"Cooperlake", KVL_CORE_AVX512}, {"SapphireRapids", KVL_CORE_AVX512},
};

kvl_core_width kvl_blas_core_width(const char *name)
{
    if (!name) return KVL_CORE_UNKNOWN;
    for (size_t i = 0; i < sizeof core_widths / sizeof core_widths[0]; i++)
        if (!strcasecmp(name, core_widths[i].name)) return core_widths[i].width;
    return KVL_CORE_UNKNOWN;
}

const char *kvl_blas_core_better(const char *running, kvl_cpu_features cpu)
{
    const char *merited = kvl_blas_core_for(cpu);
    const kvl_core_width now = kvl_blas_core_width(running);
    if (!merited || now == KVL_CORE_UNKNOWN) return NULL;
    return kvl_blas_core_width(merited) > now ? merited : NULL;
}

void kvl_blas_core_mend(char **argv)
{
    /* A refused environment is no longer whole (environment.h): a restart would run without it. */
    if (getenv(CORETYPE_VAR) || !argv || !argv[0] || kvl_environment_refusal()) return;
    const char *running = openblas_get_corename();
    const char *better = kvl_blas_core_better(running, kvl_cpu_features_here());
    if (!better) return;
    if (setenv(CORETYPE_VAR, better, 1) != 0 || setenv(DETECTED_VAR, running, 1) != 0) return;
    execv("/proc/self/exe", argv);
    fprintf(stderr, "kvlineage: OpenBLAS runs its %s kernels where the CPU runs %s's; restarting with %s=%s "
                    "failed (%s), so the products run on %s's\n",
            running, better, CORETYPE_VAR, better, strerror(errno), running);
    unsetenv(CORETYPE_VAR);
    unsetenv(DETECTED_VAR);
}

const char *kvl_blas_core(void) { return openblas_get_corename(); }

const char *kvl_blas_core_detected(void) { return getenv(DETECTED_VAR); }
