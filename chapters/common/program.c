/* The chapter programs' root directory, command line and exit status. */
#include "program.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu.h"
#include "config.h"
#include "environment.h"
#include "file_io.h"
#include "status.h"

#ifndef KVL_SOURCE_DIR
#define KVL_SOURCE_DIR "."
#endif

const char *kvl_root_dir(void)
{
    const char *r = getenv("KVL_ROOT");
    return r && *r ? r : KVL_SOURCE_DIR;
}

void kvl_usage_backend(FILE *f)
{
    fprintf(f, "\nThe steps run on the CPU backend (cpu/: tiles, threads, SIMD);\n"
               "KVL_BACKEND=ref runs the definitions in ref/ instead: the same numbers to float\n"
               "rounding, slower.\n");
}

int kvl_bad_usage(const char *program, const char *msg, const char *arg)
{
    char m[512], a[512];
    fprintf(stderr, "%s: %s%s%s (try --help)\n", program, kvl_escape_controls(m, sizeof m, msg),
            arg ? ": " : "", arg ? kvl_shown(a, sizeof a, arg) : "");
    return 2;
}

int kvl_check_output(const char *program, const char *flag, const char *path)
{
    kvl_file_track_inputs();
    if (kvl_file_out_check(path) == KVL_OK) return 0;
    fprintf(stderr, "%s: %s %s\n", program, flag, kvl_error());
    return 2;
}

int kvl_parse_size(size_t *out, const char *s, size_t lo, size_t hi)
{
    if (!isdigit((unsigned char)s[0])) return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v < lo || v > hi) return -1;
    *out = (size_t)v;
    return 0;
}

int kvl_parse_seed(uint64_t *seed, const char *program, const char *value)
{
    size_t n;
    if (kvl_parse_size(&n, value, 0, UINT32_MAX))
        return kvl_bad_usage(program, "--seed must be an integer in [0, 2^32)", value);
    *seed = n;
    return 0;
}

int kvl_parse_real(double *out, const char *s, double lo, double hi)
{
    if (!isdigit((unsigned char)s[0]) && !(s[0] == '.' && isdigit((unsigned char)s[1]))) return -1;
    if (strpbrk(s, "xXpP")) return -1;   /* hex floats */
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || !(v >= lo && v <= hi)) return -1;
    *out = v;
    return 0;
}

kvl_args kvl_args_start(const char *program, int argc, char **argv, const kvl_flag *flags,
                        size_t n_flags, int positional)
{
    return (kvl_args){.program = program,
                      .flags = flags,
                      .n_flags = n_flags,
                      .positional = positional,
                      .argc = argc,
                      .argv = argv,
                      .next = 1};
}

static int find_flag(const kvl_args *a, const char *arg)
{
    for (size_t k = 0; k < a->n_flags; k++)
        if (!strcmp(arg, a->flags[k].name)) return (int)k;
    return -1;
}

int kvl_args_next(kvl_args *a, const char **value)
{
    *value = NULL;
    if (a->next == 1 && kvl_environment_check(a->program)) {
        a->next = a->argc;
        return KVL_ARGS_BAD;
    }
    if (a->next == 1) kvl_backend_choose();
    if (a->next >= a->argc) return KVL_ARGS_END;
    const char *arg = a->argv[a->next++];
    if (!strcmp(arg, "--help") || !strcmp(arg, "-h")) return KVL_ARGS_HELP;
    if (arg[0] != '-' && a->positional) {
        *value = arg;
        return KVL_ARGS_POSITIONAL;
    }
    const int k = arg[0] == '-' ? find_flag(a, arg) : -1;
    if (k < 0) {
        kvl_bad_usage(a->program, arg[0] == '-' ? "unknown flag" : "unexpected argument", arg);
        return KVL_ARGS_BAD;
    }
    char msg[96];
    if (a->seen >> k & 1) {
        snprintf(msg, sizeof msg, "%s given twice", arg);
        kvl_bad_usage(a->program, msg, NULL);
        return KVL_ARGS_BAD;
    }
    a->seen |= 1ull << k;
    if (!a->flags[k].takes_value) return k;
    if (a->next >= a->argc) {
        snprintf(msg, sizeof msg, "%s needs a value", arg);
        kvl_bad_usage(a->program, msg, NULL);
        return KVL_ARGS_BAD;
    }
    *value = a->argv[a->next++];
    return k;
}

static int is_json(const char *name)
{
    const size_t n = strlen(name);
    return n > 5 && strcmp(name + n - 5, ".json") == 0;
}

int kvl_config_files(char ***paths, size_t *n)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/ref/configs", kvl_root_dir());
    *paths = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return kvl_fail(KVL_EIO, "%s: cannot open the config directory (set KVL_ROOT)", dir);
    int rc = KVL_OK;
    for (struct dirent *e; rc == KVL_OK && (e = readdir(d));) {
        if (!is_json(e->d_name)) continue;
        const size_t len = strlen(dir) + strlen(e->d_name) + 2;
        char **grown = realloc(*paths, (*n + 1) * sizeof **paths);
        if (grown) *paths = grown;
        if (!grown || !((*paths)[*n] = malloc(len)))
            rc = kvl_fail(KVL_ENOMEM, "%s: out of memory", dir);
        else snprintf((*paths)[(*n)++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (rc != KVL_OK) kvl_config_files_free(*paths, *n);
    return rc;
}

void kvl_config_files_free(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++) free(paths[i]);
    free(paths);
}

void kvl_usage_model_types(FILE *f)
{
    char types[256];
    kvl_model_types(types, sizeof types);
    fprintf(f, "A config.json is read as transformers' configuration class for its model_type\n"
               "reads it, for\n");
    size_t col = 0;
    for (char *t = strtok(types, " "); t; t = strtok(NULL, " ")) {   /* wrapped at 96 columns */
        if (col && col + 1 + strlen(t) > 96) {
            fputc('\n', f);
            col = 0;
        }
        col += (size_t)fprintf(f, "%s%s", col ? " " : "  ", t);
    }
    fprintf(f, "\nAny other model_type is refused. A file without model_type is read in\n"
               "DeepSeek's inference spelling (dim, n_layers, ...) or as a plain Llama-shaped file.\n");
}
