/* The environment, checked before the libraries read it (environment.h). */
#define _GNU_SOURCE   /* sched_getaffinity */
#include "environment.h"

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "isa.h"
#include "status.h"

static char refusal[256];
static char note[256];   /* the thread counts lowered, said once the whole environment is checked */

const char *kvl_environment_refusal(void) { return refusal[0] ? refusal : NULL; }

int kvl_environment_check(const char *program)
{
    if (!refusal[0]) return 0;
    fprintf(stderr, "%s: %s\n", program, refusal);
    return 2;
}

/* The processors this process may run on: its affinity mask, which is what libgomp counts. */
static size_t processors(void)
{
#ifdef CPU_COUNT
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return (size_t)CPU_COUNT(&set);
#endif
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (size_t)n : 1;
}

/* The environment the process was started with. Edited in place, never reallocated: before the C
 * library's own initialiser, which comes after the .preinit_array, its setenv is not to be used, and that
 * initialiser points environ at this array again. */
static char **env;

/* The entry "name=..." of env, or NULL. */
static char **entry(const char *name)
{
    const size_t n = strlen(name);
    for (char **e = env; e && *e; e++)
        if (!strncmp(*e, name, n) && (*e)[n] == '=') return e;
    return NULL;
}

static const char *value_of(const char *name)
{
    char **e = entry(name);
    return e ? *e + strlen(name) + 1 : NULL;
}

/* Remembers the first refusal, and removes the variable so that no library reads the value. */
static void refuse(const char *name, const char *value, const char *why)
{
    char shown[128];
    if (!refusal[0]) snprintf(refusal, sizeof refusal, "%s=%s: %s", name, kvl_shown(shown, sizeof shown, value), why);
    for (char **e = entry(name); e && *e; e++) e[0] = e[1];
}

/* s as positive decimal counts, joined by commas where `list`, each above `most` written as `most`:
 * into capped[cap] (s itself where none was), 0; -1 where s is not such counts, or not shorter than cap
 * (no count grows when lowered, so then nothing is cut). */
static int thread_counts(char *capped, size_t cap, const char *s, int list, size_t most)
{
    if (strlen(s) >= cap) return -1;
    size_t o = 0;
    for (const char *p = s;; p++) {
        const char *digits = p;
        size_t v = 0;
        for (; *p >= '0' && *p <= '9'; p++) v = v > most ? v : 10 * v + (size_t)(*p - '0');
        if (p == digits || v == 0) return -1;
        o += (size_t)(v > most ? snprintf(capped + o, cap - o, "%zu", most)
                               : snprintf(capped + o, cap - o, "%.*s", (int)(p - digits), digits));
        if (*p == '\0') return 0;
        if (*p != ',' || !list) return -1;
        capped[o++] = ',';
    }
}

/* `line` holds "name=counts" lowered, for the rest of the process's life. */
static void check_thread_counts(const char *name, int list, size_t most, char *line, size_t cap)
{
    const char *value = value_of(name);
    const size_t n = strlen(name) + 1;
    if (!value) return;
    snprintf(line, cap, "%s=", name);
    char *capped = line + n;
    if (thread_counts(capped, cap - n, value, list, most) != 0) {
        refuse(name, value, list ? "not a thread count (a positive whole number, or several joined by commas)"
                                 : "not a thread count (a positive whole number)");
        return;
    }
    if (!strcmp(capped, value)) return;
    const size_t o = strlen(note);
    snprintf(note + o, sizeof note - o, "%s%s=%s is more than the %zu processor%s here; using %s",
             o ? "; " : "", name, value, most, most == 1 ? "" : "s", capped);
    *entry(name) = line;
}

/* 1 if s[0..n) is one of words[] (NULL-terminated), in any case. */
static int one_of(const char *s, size_t n, const char *const *words)
{
    for (; *words; words++)
        if (strlen(*words) == n && !strncasecmp(s, *words, n)) return 1;
    return 0;
}

static void check_proc_bind(void)
{
    static const char *const alone[] = {"true", "false", NULL};
    static const char *const policies[] = {"primary", "master", "close", "spread", NULL};
    const char *value = value_of("OMP_PROC_BIND");
    if (!value || one_of(value, strlen(value), alone)) return;
    for (const char *p = value;; p++) {
        const size_t n = strcspn(p, ",");
        if (!one_of(p, n, policies)) break;
        if (!p[n]) return;
        p += n;
    }
    refuse("OMP_PROC_BIND", value, "not a binding (true, false, or primary, master, close and spread joined by commas)");
}

static void check_dynamic(void)
{
    static const char *const truth[] = {"true", "false", NULL};
    const char *value = value_of("OMP_DYNAMIC");
    if (value && !one_of(value, strlen(value), truth)) refuse("OMP_DYNAMIC", value, "neither true nor false");
}

static void check_isa(void)
{
    const char *value = value_of("KVL_ISA");
    kvf_isa isa;
    if (value && *value && kvf_isa_from_name(value, &isa) != 0)
        refuse("KVL_ISA", value, "unknown instruction set (baseline, avx2 or avx512)");
}

static void check_backend(void)
{
    static const char *const backends[] = {"ref", "cpu", NULL};
    const char *value = value_of("KVL_BACKEND");
    if (value && *value && !one_of(value, strlen(value), backends))
        refuse("KVL_BACKEND", value, "unknown backend (ref or cpu)");
}

/* environment: the process's, edited in place; program: argv[0], for the note (NULL where unknown). */
static void inspect(char **environment, const char *program)
{
    static char omp_line[160], openblas_line[160];
    env = environment;
    const size_t most = processors();
    check_thread_counts("OMP_NUM_THREADS", 1, most, omp_line, sizeof omp_line);
    check_thread_counts("OPENBLAS_NUM_THREADS", 0, most, openblas_line, sizeof openblas_line);
    check_proc_bind();
    check_dynamic();
    check_isa();
    check_backend();
    /* Said here, not at the program's start: a program that restarts itself before main (blas_core.h)
     * starts again with the lowered counts, and would have nothing left to say. Written, not printed:
     * stdio is the C library's, whose initialiser has not run. */
    if (note[0] && !refusal[0]) {
        const char *slash = program ? strrchr(program, '/') : NULL;
        char line[sizeof note + 64];
        const int n = snprintf(line, sizeof line, "%s: %s\n", slash ? slash + 1 : program ? program : "kvlineage", note);
        if (n > 0 && write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) return;
    }
}

#ifdef __ELF__
/* The loader calls the executable's .preinit_array before any shared library's initialiser, with main's
 * arguments and environment. */
static void before_libraries(int argc, char **argv, char **envp)
{
    inspect(envp, argc > 0 && argv ? argv[0] : NULL);
}
__attribute__((section(".preinit_array"), used)) static void (*preinit_entry)(int, char **, char **) =
    before_libraries;
#else
extern char **environ;
__attribute__((constructor)) static void before_main(void) { inspect(environ, NULL); }
#endif
