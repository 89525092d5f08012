/* What every chapter program does alike: find the source tree, read its command line one strict
 * way, refuse a bad one, and fail when its output could not be written. */
#ifndef KVL_PROGRAM_H
#define KVL_PROGRAM_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The project root the programs read configs from:
 * $KVL_ROOT if set and not empty, else the source tree they were built from. */
const char *kvl_root_dir(void);

/* The lineage's configs, every .json file of ref/configs under kvl_root_dir(): *paths[*n], each
 * allocated, in the directory's order (the programs sort what they load by date); free with
 * kvl_config_files_free. KVL_EIO naming the directory (set KVL_ROOT) or KVL_ENOMEM. */
int kvl_config_files(char ***paths, size_t *n);
void kvl_config_files_free(char **paths, size_t n);

/* Print, for a program's --help, which configs it reads: the model_type values whose transformers
 * reading ref/core/config.h holds to, and the DeepSeek inference spelling of a file without one. */
void kvl_usage_model_types(FILE *f);

/* Print, for the --help of a program that runs a module's steps, which backend runs them
 * (ref/core/backend.h): the CPU backend, or the definitions under KVL_BACKEND=ref. */
void kvl_usage_backend(FILE *f);

/* Print "PROGRAM: MSG: ARG (try --help)" (": ARG" only when arg is not NULL) as one line on
 * stderr and return 2, the exit status of a bad command line. MSG and ARG are quoted as kvl_shown
 * quotes (ref/core/status.h): control bytes as \xHH, an empty ARG as "". */
int kvl_bad_usage(const char *program, const char *msg, const char *arg);

/* 0 when the file a flag names may be written under ref/core/file_io.h's rule (and is not an input
 * named so far with kvl_file_input); else 2 after "PROGRAM: FLAG PATH: why" on stderr. From here
 * on every file the program opens counts as an input of the run, which the write then refuses to
 * replace; so call it while reading the command line, before the first line of output. */
int kvl_check_output(const char *program, const char *flag, const char *path);

/* A command-line count: plain decimal digits (no sign, no space) for a value in [lo, hi] → *out, 0;
 * else -1 and *out untouched. */
int kvl_parse_size(size_t *out, const char *s, size_t lo, size_t hi);

/* A command-line number: decimal digits with an optional point and exponent ("0.25", "2",
 * "1e-3"; no sign, no space, no inf or nan) for a value in [lo, hi] → *out, 0; else -1 and *out
 * untouched. */
int kvl_parse_real(double *out, const char *s, double lo, double hi);

/* The --seed S of a program that draws its weights or inputs: S an integer in [0, 2^32) (as
 * kvl_parse_size reads one) → *seed, 0; else 2 after kvl_bad_usage's line "PROGRAM: --seed must be
 * an integer in [0, 2^32): S (try --help)". */
int kvl_parse_seed(uint64_t *seed, const char *program, const char *value);

/* ---- the command line
 * ------------------------------------------------------------------------------ Every program
 * reads it alike: "--name VALUE" or "--name" for each flag it takes, each at most once; --help
 * or -h; positional arguments only where the program takes them. Anything else is refused with
 * one line naming the argument. */

typedef struct {
    const char *name;   /* "--tokens" */
    int takes_value;    /* 1: the next argument is its value */
} kvl_flag;

typedef struct {
    const char *program;               /* for messages */
    const kvl_flag *flags;
    size_t n_flags;                    /* at most 64 */
    int positional;                    /* 1: arguments not starting with '-' are the program's */
    int argc;
    char **argv;
    int next;                          /* argv index read next */
    unsigned long long seen;           /* bit k: flags[k] given */
} kvl_args;

enum {
    KVL_ARGS_END = -1,         /* nothing left */
    KVL_ARGS_HELP = -2,        /* --help or -h: the caller prints its usage to stdout, exits 0 */
    KVL_ARGS_BAD = -3,         /* refused, one line printed; the caller exits 2 */
    KVL_ARGS_POSITIONAL = -4,  /* a positional argument, in *value (only when positional is set) */
};

/* The reader of argv[1..argc) for `program` taking flags[n_flags]. */
kvl_args kvl_args_start(const char *program, int argc, char **argv, const kvl_flag *flags,
                        size_t n_flags, int positional);

/* The next argument: the index in flags of a flag (*value = its value, or NULL for one that
 * takes none), or one of KVL_ARGS_*. KVL_ARGS_BAD for an unknown flag, a stray argument, a flag
 * without its value or given twice, after "PROGRAM: ... (try --help)" on stderr; from the first
 * call, also for an environment refused at start-up (ref/core/environment.h), after its line. */
int kvl_args_next(kvl_args *a, const char **value);

/* ---- the end of a run ------------------------------------------------------------------------ */

/* The exit status of a program whose run returned `status`: status, except that a run that
 * succeeded but whose stdout could not be written (a full disk, a closed pipe) gives 1 after one
 * line on stderr. stdout is flushed, not closed, and the function is inline: kvfmt's main is
 * also a function that its fuzz target, built from kvfmt.c, formats/ and ref/core's rng.c,
 * environment.c and status.c alone, calls again and again. */
static inline int kvl_exit_status(const char *program, int status)
{
    if (fflush(stdout) == 0 && !ferror(stdout)) return status;
    const int why = errno;
    if (status == 0)
        fprintf(stderr, "%s: cannot write the output: %s\n", program,
                why ? strerror(why) : "write error");
    return status ? status : 1;
}

#endif
