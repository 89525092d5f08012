/* One rule for every path a program writes (ref/core/file_io.h), proved on every program that writes
 * a file (WRITERS) for every kind of path (CLASSES), each pair in a fresh work directory:
 *  - a name that does not exist yet: created, exit 0; its bytes are what every other class that
 *    writes must deliver;
 *  - a symbolic link to a regular file: the file it names gets those bytes, the link stays a link;
 *  - a FIFO with a reader, by its name or through a link: the reader receives those bytes; a link
 *    to /proc/self/fd/1: they arrive on stdout (checked for a text output);
 *  - a null device: exit 0, still that character device afterwards;
 *  - a full device: a non-zero exit, one line on stderr naming the path, nothing left beside it;
 *  - a directory or a link to nothing: exit 2, one line on stderr naming the path, nothing on stdout;
 *  - one of the run's inputs by another spelling or by a hard link: exit 2 the same way, the input
 *    unchanged byte for byte.
 * Devices are nodes made with mknod in the work directory (the kernel's null and full devices), so
 * that a program that replaced them would replace only a copy; where mknod is not allowed, /dev/null
 * and /dev/full themselves. Every program with an output flag in its FLAGS table must be in WRITERS. */
#define _GNU_SOURCE   /* F_SETPIPE_SZ */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common.h"
#include "config.h"
#include "npy.h"
#include "status.h"

#define CAP (1 << 20)
#define FIFO_BYTES (1 << 20)   /* the FIFO's buffer: larger than any output here, so no reader thread */

static char out[CAP], err[CAP];

/* A program that writes a file. Its command line is `command` with @D the work directory, @R the
 * project root and @O the path under test, less the `suffix` the program appends to it; a new file
 * is `written` inside the work directory. */
typedef struct {
    const char *name;
    const char *command;
    const char *written;
    const char *suffix;
    const char *input;       /* a file of the work directory the run reads, or NULL */
    int prints_before;       /* it prints before it writes (a notebook's later figure) */
} writer;

static const writer WRITERS[] = {
    {"kvlayer",
     "kvlayer --config @D/config.json --weights @D/weights.safetensors --layer 0 --input @D/x.npy "
     "--output @O",
     "out", "", "config.json", 0},
    {"kvlayer", /* the weights as the input written over */
     "kvlayer --config @D/config.json --weights @D/weights.safetensors --layer 0 --input @D/x.npy "
     "--output @O",
     "out", "", "weights.safetensors", 0},
    {"kvtable", "kvtable --svg @O @D/config.json", "out", "", "config.json", 0},
    {"serving", "serving --svg @O @D/config.json", "out", "", "config.json", 0},
    {"nb_01", "nb_01 --figures @D/figs", "figs/token_cache.svg", "", NULL, 1},
    {"nb_03", "nb_03 --figures @D/figs", "figs/window_band.svg", "", NULL, 1},
    {"nb_08", "nb_08 --figures @D/figs", "figs/bytes_per_token.svg", "", NULL, 1},
    {"nb_ipynb", "nb_ipynb @R/notebooks_c/01_mha.c @D/stream.ipynb @O", "nb.ipynb", ".ipynb",
     "stream.ipynb", 0},
};
#define N_WRITERS (sizeof WRITERS / sizeof *WRITERS)

typedef enum {
    C_NEW, C_LINK_TO_FILE, C_FIFO, C_LINK_TO_FIFO, C_LINK_TO_STDOUT, C_NULL, C_FULL, C_DIRECTORY, C_DANGLING_LINK,
    C_INPUT_SPELLED_AGAIN, C_INPUT_HARD_LINK, N_CLASSES
} path_class;

static const char *const CLASS_NAMES[N_CLASSES] = {
    "a new file", "a link to a file", "a FIFO with a reader", "a link to a FIFO with a reader",
    "a link to /proc/self/fd/1", "a null device", "a full device", "a directory", "a link to nothing",
    "an input spelled another way", "a hard link to an input"};

/* ---- the work directory ---------------------------------------------------------------------- */

static void copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *o = fopen(to, "wb");
    ck_assert_msg(in && o, "cannot copy %s to %s", from, to);
    char buf[1 << 16];
    for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;) ck_assert(fwrite(buf, 1, n, o) == n);
    fclose(in);
    ck_assert(fclose(o) == 0);
}

/* x[3][d] for the reference V3 layer, d from its config. */
static void write_hidden_states(const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/config.json", dir);
    kvl_model m;
    ck_assert_msg(kvl_model_load(&m, path) == KVL_OK, "%s", kvl_error());
    const size_t T = 3, d = m.d;
    kvl_model_free(&m);
    kvl_rng rng;
    kvl_rng_seed(&rng, 7);
    float *x = kvl_uniform_floats(&rng, T * d, -1, 1);
    snprintf(path, sizeof path, "%s/x.npy", dir);
    ck_assert_msg(kvl_npy_write(path, x, T, d) == KVL_OK, "%s", kvl_error());
    free(x);
}

/* The files w reads, in dir. */
static void set_up(const writer *w, const char *dir)
{
    char path[512];
    snprintf(path, sizeof path, "%s/figs", dir);
    ck_assert(mkdir(path, 0777) == 0);
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (!strcmp(w->name, "kvlayer")) {
        copy_file(kvl_path("tests/reference/deepseek_v3_tiny.json"), path);
        snprintf(path, sizeof path, "%s/weights.safetensors", dir);
        copy_file(kvl_path("tests/reference/deepseek_v3_tiny.safetensors"), path);
        write_hidden_states(dir);
    } else if (!strcmp(w->name, "nb_ipynb")) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "{ nb_01 --cells > %s/stream.ipynb; }", dir);
        ck_assert_msg(kvl_run(cmd, NULL, out, CAP, err, CAP) == 0, "%s: %s", cmd, err);
    } else {
        copy_file(kvl_path("ref/configs/deepseek-v3.json"), path);
    }
}

static void remove_dir(const char *dir)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* The command line of w in dir writing to path. */
static void command_line(char *cmd, size_t cap, const writer *w, const char *dir, const char *path)
{
    size_t n = 0;
    for (const char *p = w->command; *p && n + 1 < cap; p++) {
        const char *put = p[0] != '@'  ? NULL
                          : p[1] == 'D' ? dir
                          : p[1] == 'R' ? kvl_path(".")
                          : p[1] == 'O' ? path
                                        : NULL;
        if (!put) {
            cmd[n++] = *p;
            continue;
        }
        const int drop = put == path ? (int)strlen(w->suffix) : 0;
        n += (size_t)snprintf(cmd + n, cap - n, "%.*s", (int)strlen(put) - drop, put);
        ck_assert(n < cap);
        p++;
    }
    cmd[n] = '\0';
}

/* The bytes of the file at path, *n their count, then a NUL, in memory the caller frees. */
static char *file_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot read %s", path);
    char *b = malloc(CAP);
    ck_assert(b != NULL);
    *n = fread(b, 1, CAP - 1, f);
    b[*n] = '\0';
    fclose(f);
    return b;
}

/* At path, a character device like the kernel's `name` (major 1, `minor`), or else a link to the
 * kernel's own. */
static void device(const char *path, const char *name, unsigned minor)
{
    if (mknod(path, S_IFCHR | 0666, makedev(1, minor)) == 0) return;
    char kernel[64];
    snprintf(kernel, sizeof kernel, "/dev/%s", name);
    ck_assert(symlink(kernel, path) == 0);
}

/* ---- one run --------------------------------------------------------------------------------- */

typedef struct {
    char dir[64];
    char path[512];     /* the path handed to the program */
    char input[512];    /* the input it may not write over, when the class names one */
    char target[512];   /* the regular file a link names */
    int fifo;           /* the reader's end, or -1 */
    struct stat node;   /* the device (or the link to it) before the run */
} trial;

/* Make the path of class c for w in t->dir. 0 when the class does not apply to w (no input). */
static int prepare(trial *t, const writer *w, path_class c)
{
    snprintf(t->dir, sizeof t->dir, "/tmp/kvl_outputs_XXXXXX");
    ck_assert(mkdtemp(t->dir) != NULL);
    set_up(w, t->dir);
    t->fifo = -1;
    char fifo[512];
    snprintf(t->path, sizeof t->path, "%s/%s", t->dir, w->written);
    snprintf(t->target, sizeof t->target, "%s/target", t->dir);
    snprintf(fifo, sizeof fifo, "%s/fifo", t->dir);
    if (w->input) snprintf(t->input, sizeof t->input, "%s/%s", t->dir, w->input);
    switch (c) {
    case C_NEW: return 1;
    case C_LINK_TO_FILE: {
        FILE *f = fopen(t->target, "w");
        ck_assert(f && fputs("the old bytes\n", f) >= 0 && fclose(f) == 0);
        ck_assert(symlink(t->target, t->path) == 0);
        return 1;
    }
    case C_FIFO:
    case C_LINK_TO_FIFO:
        ck_assert(mkfifo(c == C_FIFO ? t->path : fifo, 0666) == 0);
        if (c == C_LINK_TO_FIFO) ck_assert(symlink(fifo, t->path) == 0);
        t->fifo = open(c == C_FIFO ? t->path : fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        ck_assert(t->fifo >= 0);
        ck_assert(fcntl(t->fifo, F_SETPIPE_SZ, FIFO_BYTES) >= 0);
        return 1;
    case C_NULL:
    case C_FULL:
        device(t->path, c == C_NULL ? "null" : "full", c == C_NULL ? 3 : 7);
        ck_assert(lstat(t->path, &t->node) == 0);
        return 1;
    case C_LINK_TO_STDOUT:
        ck_assert(symlink("/proc/self/fd/1", t->path) == 0);
        return 1;
    case C_DIRECTORY:
        ck_assert(mkdir(t->path, 0777) == 0);
        return 1;
    case C_DANGLING_LINK:
        ck_assert(symlink(t->target, t->path) == 0);
        return 1;
    case C_INPUT_SPELLED_AGAIN:
        if (!w->input) return 0;
        snprintf(t->path, sizeof t->path, "%s/figs/../%s", t->dir, w->input);
        return 1;
    case C_INPUT_HARD_LINK:
        if (!w->input) return 0;
        snprintf(t->path, sizeof t->path, "%s/hard%s", t->dir, w->suffix);
        ck_assert(link(t->input, t->path) == 0);
        return 1;
    default: return 0;
    }
}

static size_t lines_of(const char *s)
{
    size_t n = 0;
    for (; *s; s++) n += *s == '\n';
    return n;
}

/* No "<name>.tmp.<pid>" left in dir or figs/. */
static void expect_no_temporary(const char *dir, const char *what)
{
    char sub[600];
    snprintf(sub, sizeof sub, "%s/figs", dir);
    const char *const dirs[] = {dir, sub};
    for (size_t i = 0; i < 2; i++) {
        DIR *d = opendir(dirs[i]);
        ck_assert(d != NULL);
        for (struct dirent *e; (e = readdir(d));)
            ck_assert_msg(!strstr(e->d_name, ".tmp."), "%s: %s/%s left behind", what, dirs[i], e->d_name);
        closedir(d);
    }
}

/* Run w on class c; `want` the bytes of a new file (NULL while they are being found), returned
 * for C_NEW. */
static char *try_class(const writer *w, path_class c, const char *want, size_t want_n, size_t *got_n)
{
    trial t;
    if (!prepare(&t, w, c)) {
        remove_dir(t.dir);
        return NULL;
    }
    size_t input_n = 0;
    char *input_before = w->input ? file_bytes(t.input, &input_n) : NULL;
    char cmd[2048], what[256];
    command_line(cmd, sizeof cmd, w, t.dir, t.path);
    snprintf(what, sizeof what, "%s, the output %s", w->name, CLASS_NAMES[c]);
    const int rc = kvl_run(cmd, NULL, out, CAP, err, CAP);
    char *got = NULL;
    size_t n = 0;
    struct stat st, lst;
    switch (c) {
    case C_NEW:
        ck_assert_msg(rc == 0, "%s: exit %d: %s", what, rc, err);
        got = file_bytes(t.path, &n);
        ck_assert_msg(n > 0, "%s: nothing written", what);
        *got_n = n;
        break;
    case C_LINK_TO_FILE:
        ck_assert_msg(rc == 0, "%s: exit %d: %s", what, rc, err);
        ck_assert_msg(lstat(t.path, &lst) == 0 && S_ISLNK(lst.st_mode), "%s: the link was replaced", what);
        got = file_bytes(t.target, &n);
        break;
    case C_FIFO:
    case C_LINK_TO_FIFO: {
        ck_assert_msg(rc == 0, "%s: exit %d: %s", what, rc, err);
        got = malloc(CAP);
        ck_assert(got != NULL);
        for (ssize_t k; (k = read(t.fifo, got + n, CAP - 1 - n)) > 0;) n += (size_t)k;
        ck_assert_msg(lstat(t.path, &lst) == 0 && (c == C_FIFO ? S_ISFIFO(lst.st_mode) : S_ISLNK(lst.st_mode)),
                      "%s: the path was replaced", what);
        break;
    }
    case C_NULL:
    case C_FULL:
        ck_assert_msg(lstat(t.path, &lst) == 0 && lst.st_ino == t.node.st_ino && lst.st_mode == t.node.st_mode &&
                          stat(t.path, &st) == 0 && S_ISCHR(st.st_mode),
                      "%s: the device was replaced", what);
        if (c == C_NULL) {
            ck_assert_msg(rc == 0, "%s: exit %d: %s", what, rc, err);
            break;
        }
        ck_assert_msg(rc != 0, "%s: exit 0 with nothing written", what);
        ck_assert_msg(lines_of(err) == 1 && strstr(err, t.path) && strstr(err, "No space left"),
                      "%s: stderr is not one line naming the path and the full device: %s", what, err);
        ck_assert_msg(w->prints_before || !*out, "%s: printed %.200s", what, out);
        expect_no_temporary(t.dir, what);
        break;
    case C_LINK_TO_STDOUT:   /* a text output arrives among the lines the program prints */
        ck_assert_msg(rc == 0, "%s: exit %d: %s", what, rc, err);
        ck_assert_msg(lstat(t.path, &lst) == 0 && S_ISLNK(lst.st_mode), "%s: the link was replaced", what);
        ck_assert_msg(memchr(want, 0, want_n) || strstr(out, want), "%s: the bytes are not on stdout", what);
        break;
    default:   /* refused before any output */
        ck_assert_msg(rc == 2, "%s: exit %d, want 2 (stderr: %s)", what, rc, err);
        ck_assert_msg(lines_of(err) == 1 && strstr(err, t.path) && strncmp(err, w->name, strlen(w->name)) == 0,
                      "%s: stderr is not one line naming the program and %s: %s", what, t.path, err);
        ck_assert_msg(!*out, "%s: printed %.200s", what, out);
        ck_assert_msg(c != C_DANGLING_LINK || access(t.target, F_OK) != 0, "%s: created %s", what, t.target);
        expect_no_temporary(t.dir, what);
    }
    if (input_before) {
        size_t after_n;
        char *after = file_bytes(t.input, &after_n);
        ck_assert_msg(after_n == input_n && !memcmp(after, input_before, input_n), "%s: the input %s changed",
                      what, t.input);
        free(after);
    }
    if (got && want)
        ck_assert_msg(n == want_n && !memcmp(got, want, n), "%s: %zu bytes arrived, not the %zu of a new file",
                      what, n, want_n);
    if (t.fifo >= 0) close(t.fifo);
    free(input_before);
    remove_dir(t.dir);
    if (c == C_NEW) return got;
    free(got);
    return NULL;
}

/* ---- the tests ------------------------------------------------------------------------------- */

START_TEST(test_every_program_writes_every_kind_of_path_by_the_one_rule)
{
    for (size_t i = 0; i < N_WRITERS; i++) {
        size_t want_n = 0;
        char *want = try_class(&WRITERS[i], C_NEW, NULL, 0, &want_n);
        for (int c = C_NEW + 1; c < N_CLASSES; c++) try_class(&WRITERS[i], (path_class)c, want, want_n, &want_n);
        free(want);
    }
}
END_TEST

/* Every chapter program whose flags name a file or folder to write (a flag of its FLAGS table that
 * is --output, --svg, --out or --figures) is one of WRITERS, so a new writer joins the table. */
START_TEST(test_every_program_with_an_output_flag_is_in_the_table)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && grep -l -E '\\{\"--(output|svg|out|figures)\", *1\\}' chapters/*/*.c", kvl_path("."));
    ck_assert_msg(kvl_run(cmd, NULL, out, CAP, err, CAP) == 0, "%s: %s", cmd, err);
    size_t found = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"), found++) {
        char name[256];
        const char *base = strrchr(line, '/') + 1;
        snprintf(name, sizeof name, "%.*s", (int)(strcspn(base, ".")), base);
        int listed = 0;
        for (size_t i = 0; i < N_WRITERS; i++) listed |= !strcmp(WRITERS[i].name, name);
        ck_assert_msg(listed, "%s writes a file but is not in this suite's WRITERS", line);
    }
    ck_assert_msg(found >= 3, "only %zu programs with an output flag found", found);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reliability_outputs");
    TCase *tc = tcase_create("outputs");
    tcase_set_timeout(tc, KVL_TEST_TIMEOUT);
    tcase_add_test(tc, test_every_program_writes_every_kind_of_path_by_the_one_rule);
    tcase_add_test(tc, test_every_program_with_an_output_flag_is_in_the_table);
    suite_add_tcase(s, tc);
    return s;
}
