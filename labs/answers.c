/* answers: a chapter's predictions checked against the numbers its programs print.
 *
 *     answers [--file ANSWERS] [--key] labs/NN_name       (make answers-NN)
 *
 * labs/NN_name/answers.txt holds the student's predictions, one `name = value` a line (the value
 * may carry thousands commas and a unit after it, or be a code in hex, 0x7e; blank or missing
 * means not answered; a name the key does not hold is refused). labs/NN_name/answers.key says
 * how each expected value is computed, never the value itself: a block per answer,
 *
 *     [ex1.bytes_per_token]
 *     run: kvtable --format csv "$T/v3-dc256.json"
 *     pick: csv bytes/token
 *     tolerance: exact
 *
 * `run` is `sh -e -c` from the repository root with $KVL_BIN first on PATH and $T a fresh folder
 * shared by the chapter's runs ([setup] blocks run first, in order, for their effect there); `pick`
 * takes the number from the run's stdout: `csv COLUMN` (the first data row's field), `csv COLUMN
 * row N`, `after TEXT` (the first number after TEXT), `line TEXT number N` (the N-th number on the
 * first line holding TEXT), or nothing (the first number); `tolerance` is `exact`, `rel P%` or `abs
 * A`. Identical runs run once.
 *
 * Every expected value is computed before the first line is printed: a key or an answers file that
 * cannot be read as meant (a name in one and not the other, a value that is not a number, a run
 * that fails, a pick that finds nothing) is refused with one line on stderr naming the file, line
 * and text, exit 2. Otherwise one line per answer (right, WRONG with the tolerance, or not
 * answered), a count, and exit 0 when every answer is right, 1 otherwise. --key prints the expected
 * values instead, as an answers file (for an instructor; the worked values are in the chapter's
 * solutions.md too). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "file_io.h"
#include "program.h"
#include "status.h"

#define MAX_ENTRIES 128
#define FILE_CAP (1 << 20)
#define OUT_CAP (1 << 22)

typedef enum { TOL_EXACT, TOL_REL, TOL_ABS } tol_kind;

typedef struct {
    char name[64];
    const char *run, *pick, *tolerance; /* into the key's text */
    int line;                           /* of its [name] in the key */
    tol_kind tol;
    double tol_amount;
    double expected;
    char expected_text[64]; /* as the program printed it */
    int answered;
    double given;
    const char *given_text; /* into the answers' text */
} entry;

typedef struct {
    const char *chapter; /* labs/NN_name */
    char key_path[512], answers_path[512];
    char *key_text, *answers_text;
    entry e[MAX_ENTRIES];
    size_t n;
    const char *setup[MAX_ENTRIES];
    size_t n_setup;
    char tmp[64];
} check;

static int refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int refuse(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("answers: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

/* ---- numbers -------------------------------------------------------------------------------- */

/* The number at s: a code in hex (0x7e), or [-]digits with optional thousands commas (groups of
 * exactly three), an optional fraction and exponent. *end past it; 0 when s does not start one. */
static int read_number(const char *s, double *v, const char **end)
{
    char digits[96];
    size_t n = 0;
    const char *p = s;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X') && isxdigit((unsigned char)p[2])) {
        *v = (double)strtoull(p, (char **)end, 16);
        return 1;
    }
    if (*p == '-' || *p == '+') digits[n++] = *p++;
    if (!isdigit((unsigned char)*p)) return 0;
    while (isdigit((unsigned char)*p) && n < 64) {
        digits[n++] = *p++;
        if (*p == ',' && isdigit((unsigned char)p[1]) && isdigit((unsigned char)p[2]) &&
            isdigit((unsigned char)p[3]) && !isdigit((unsigned char)p[4]))
            p++;
    }
    if (*p == '.' && isdigit((unsigned char)p[1])) {
        digits[n++] = *p++;
        while (isdigit((unsigned char)*p) && n < 80) digits[n++] = *p++;
    }
    if ((*p == 'e' || *p == 'E') &&
        (isdigit((unsigned char)p[1]) ||
         ((p[1] == '-' || p[1] == '+') && isdigit((unsigned char)p[2])))) {
        digits[n++] = *p++;
        if (*p == '-' || *p == '+') digits[n++] = *p++;
        while (isdigit((unsigned char)*p) && n < 94) digits[n++] = *p++;
    }
    digits[n] = 0;
    *v = strtod(digits, NULL);
    *end = p;
    return 1;
}

/* The first number in text[0, len): *v and its text in printed, returning the end of it; NULL when
 * there is none. A digit run inside a word ("sm_90", "E4M3") is not a number. */
static const char *first_number(const char *text, size_t len, double *v, char *printed, size_t cap)
{
    for (size_t i = 0; i < len; i++) {
        const char *end;
        if (i && (isalnum((unsigned char)text[i - 1]) || text[i - 1] == '_' || text[i - 1] == '.'))
            continue;
        if (text[i] == '+' || (text[i] == '-' && i + 1 < len && text[i + 1] == '-')) continue;
        if (read_number(text + i, v, &end) && end <= text + len) {
            snprintf(printed, cap, "%.*s", (int)(end - (text + i)), text + i);
            return end;
        }
    }
    return NULL;
}

/* A student's value: a number, then nothing or a unit (letters, %, ×, /, ·, spaces). */
static int read_given(const char *s, double *v)
{
    const char *end;
    if (!read_number(s, v, &end)) return 0;
    for (const unsigned char *p = (const unsigned char *)end; *p; p++)
        if (!(isalpha(*p) || *p == ' ' || *p == '%' || *p == '/' || *p >= 0x80)) return 0;
    return 1;
}

/* ---- CSV ------------------------------------------------------------------------------------- */

/* Field `col` (from 0) of the CSV line at line, quotes removed, into out; 0 past the last field. */
static int csv_field(const char *line, size_t col, char *out, size_t cap)
{
    size_t k = 0, n = 0;
    int quoted = 0;
    for (const char *p = line; *p && *p != '\n'; p++) {
        if (*p == '"')
            quoted = !quoted;
        else if (*p == ',' && !quoted) {
            if (k++ == col) break;
        } else if (k == col && n + 1 < cap)
            out[n++] = *p;
    }
    out[n] = 0;
    return k >= col;
}

/* The start of line `row` (0 the header) of text, or NULL. */
static const char *csv_line(const char *text, size_t row)
{
    for (; row && text; row--) {
        text = strchr(text, '\n');
        if (text) text++;
    }
    return text && *text ? text : NULL;
}

static int pick_csv(const char *out, const char *spec, double *v, char *printed, size_t cap)
{
    char column[96];
    size_t row = 1;
    const char *row_at = strstr(spec, " row ");
    const size_t len = row_at ? (size_t)(row_at - spec) : strlen(spec);
    if (len >= sizeof column) return 0;
    memcpy(column, spec, len);
    column[len] = 0;
    if (row_at && sscanf(row_at + 5, "%zu", &row) != 1) return 0;
    char field[128];
    for (size_t c = 0; csv_field(out, c, field, sizeof field); c++) {
        if (strcmp(field, column)) continue;
        const char *line = csv_line(out, row);
        if (!line || !csv_field(line, c, field, sizeof field)) return 0;
        return first_number(field, strlen(field), v, printed, cap) != NULL;
    }
    return 0;
}

/* "TEXT number N": the N-th number (from 1) of the first line holding TEXT */
static int pick_line(const char *out, const char *spec, double *v, char *printed, size_t cap)
{
    const char *num = strstr(spec, " number ");
    size_t n;
    char text[128];
    if (!num || sscanf(num + 8, "%zu", &n) != 1 || n == 0 || (size_t)(num - spec) >= sizeof text)
        return 0;
    snprintf(text, sizeof text, "%.*s", (int)(num - spec), spec);
    const char *at = strstr(out, text);
    if (!at) return 0;
    while (at > out && at[-1] != '\n') at--;
    const char *end = strchr(at, '\n');
    if (!end) end = at + strlen(at);
    for (const char *p = at; (p = first_number(p, (size_t)(end - p), v, printed, cap)) != NULL;)
        if (--n == 0) return 1;
    return 0;
}

/* The number `pick` names in a run's stdout. */
static int pick_number(const char *out, const char *pick, double *v, char *printed, size_t cap)
{
    if (!pick) return first_number(out, strlen(out), v, printed, cap) != NULL;
    if (!strncmp(pick, "csv ", 4)) return pick_csv(out, pick + 4, v, printed, cap);
    if (!strncmp(pick, "after ", 6)) {
        const char *at = strstr(out, pick + 6);
        if (!at) return 0;
        at += strlen(pick + 6);
        return first_number(at, strlen(at), v, printed, cap) != NULL;
    }
    if (!strncmp(pick, "line ", 5)) return pick_line(out, pick + 5, v, printed, cap);
    return 0;
}

/* ---- the key --------------------------------------------------------------------------------- */

static char *trim(char *s)
{
    while (*s == ' ' || *s == '\t') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) *--e = 0;
    return s;
}

static int read_tolerance(entry *e, const char *t)
{
    char extra;
    if (!strcmp(t, "exact")) return e->tol = TOL_EXACT, 1;
    if (sscanf(t, "rel %lf%%%c", &e->tol_amount, &extra) == 1 && e->tol_amount >= 0 &&
        t[strlen(t) - 1] == '%')
        return e->tol = TOL_REL, 1;
    if (sscanf(t, "abs %lf%c", &e->tol_amount, &extra) == 1 && e->tol_amount >= 0)
        return e->tol = TOL_ABS, 1;
    return 0;
}

/* One `field: value` line of the block being read (e: NULL for [setup]) */
static int key_field(check *c, entry *e, const char *field, char *value, int line)
{
    if (!strcmp(field, "run")) {
        if (e)
            e->run = value;
        else
            c->setup[c->n_setup - 1] = value;
        return 0;
    }
    if (e && !strcmp(field, "pick")) {
        if (strncmp(value, "csv ", 4) && strncmp(value, "after ", 6) && strncmp(value, "line ", 5))
            return refuse(
                "%s:%d: pick \"%s\": expected csv COLUMN [row N], after TEXT or line TEXT number N",
                c->key_path, line, value);
        e->pick = value;
        return 0;
    }
    if (e && !strcmp(field, "tolerance")) {
        if (!read_tolerance(e, value))
            return refuse("%s:%d: tolerance \"%s\": expected exact, rel P%% or abs A", c->key_path,
                          line, value);
        e->tolerance = value;
        return 0;
    }
    return refuse("%s:%d: unknown field \"%s\"", c->key_path, line, field);
}

static int read_key(check *c)
{
    entry *e = NULL;
    int line = 0, in_block = 0;
    for (char *s = c->key_text, *next; s; s = next) {
        next = strchr(s, '\n');
        if (next) *next++ = 0;
        line++;
        char *t = trim(s);
        if (!*t || *t == '#') continue;
        if (*t == '[') {
            char *close = strchr(t, ']');
            if (!close || close[1] || close == t + 1)
                return refuse("%s:%d: \"%s\": expected [name]", c->key_path, line, t);
            *close = 0;
            in_block = 1;
            if (!strcmp(t + 1, "setup")) {
                e = NULL;
                c->setup[c->n_setup++] = NULL;
                continue;
            }
            if (c->n == MAX_ENTRIES || strlen(t + 1) >= sizeof c->e[0].name)
                return refuse("%s:%d: too many answers, or a name too long", c->key_path, line);
            e = &c->e[c->n++];
            snprintf(e->name, sizeof e->name, "%s", t + 1);
            e->line = line;
            continue;
        }
        char *colon = strchr(t, ':');
        if (!in_block || !colon)
            return refuse("%s:%d: \"%s\": expected [name] or field: value", c->key_path, line, t);
        *colon = 0;
        const int rc = key_field(c, e, trim(t), trim(colon + 1), line);
        if (rc) return rc;
    }
    for (size_t i = 0; i < c->n; i++) {
        const entry *x = &c->e[i];
        if (!x->run || !x->tolerance)
            return refuse("%s:%d: [%s] needs run and tolerance", c->key_path, x->line, x->name);
        for (size_t j = 0; j < i; j++)
            if (!strcmp(c->e[j].name, x->name))
                return refuse("%s:%d: [%s] given twice", c->key_path, x->line, x->name);
    }
    for (size_t i = 0; i < c->n_setup; i++)
        if (!c->setup[i]) return refuse("%s: a [setup] block without run", c->key_path);
    return c->n ? 0 : refuse("%s: no answers", c->key_path);
}

/* ---- the student's answers ------------------------------------------------------------------- */

static entry *find(check *c, const char *name)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->e[i].name, name)) return &c->e[i];
    return NULL;
}

static int read_answers(check *c)
{
    int line = 0;
    for (char *s = c->answers_text, *next; s; s = next) {
        next = strchr(s, '\n');
        if (next) *next++ = 0;
        line++;
        char *t = trim(s);
        if (!*t || *t == '#') continue;
        char *eq = strchr(t, '=');
        if (!eq) return refuse("%s:%d: \"%s\": expected name = value", c->answers_path, line, t);
        *eq = 0;
        const char *name = trim(t);
        char *value = trim(eq + 1);
        entry *e = find(c, name);
        if (!e)
            return refuse("%s:%d: \"%s\" is not one of this chapter's answers", c->answers_path,
                          line, name);
        if (e->given_text) return refuse("%s:%d: \"%s\" given twice", c->answers_path, line, name);
        e->given_text = value;
        if (!*value) continue;
        if (!read_given(value, &e->given))
            return refuse(
                "%s:%d: %s = \"%s\": not a number (write 1,234 or 1234 or 4.77, a unit after it "
                "is fine)",
                c->answers_path, line, name, value);
        e->answered = 1;
    }
    for (size_t i = 0; i < c->n; i++)
        if (!c->e[i].given_text) c->e[i].given_text = "";
    return 0;
}

/* ---- the runs -------------------------------------------------------------------------------- */

/* stdout of `sh -e -c run` from the root, in out (cap bytes, terminated); 0, or 2 after a
 * refusal. */
static int run_shell(const check *c, const char *run, char *out, size_t cap)
{
    int fd[2];
    if (pipe(fd)) return refuse("pipe: %s", strerror(errno));
    const pid_t pid = fork();
    if (pid < 0) return refuse("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        execl("/bin/sh", "sh", "-e", "-c", run, (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t got;
    while ((got = read(fd[0], out + n, cap - 1 - n)) > 0) n += (size_t)got;
    close(fd[0]);
    out[n] = 0;
    int status;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status))
        return refuse("%s: run \"%s\" failed (exit %d); its message is above", c->key_path, run,
                      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
    return 0;
}

/* The stdout of every distinct run, kept so that answers sharing a run run it once. */
typedef struct {
    const char *run;
    char *out;
} run_output;

static const char *output_of(check *c, const char *run, run_output *done, size_t *n_done, int *rc)
{
    static char out[OUT_CAP];
    for (size_t i = 0; i < *n_done; i++)
        if (!strcmp(done[i].run, run)) return done[i].out;
    if ((*rc = run_shell(c, run, out, sizeof out)) != 0) return NULL;
    char *copy = strdup(out);
    if (!copy) {
        *rc = refuse("out of memory");
        return NULL;
    }
    done[(*n_done)++] = (run_output){run, copy};
    return copy;
}

static int compute_expected(check *c)
{
    static char out[OUT_CAP];
    static run_output done[MAX_ENTRIES];
    size_t n_done = 0;
    int rc = 0;
    for (size_t i = 0; i < c->n_setup && !rc; i++) rc = run_shell(c, c->setup[i], out, sizeof out);
    for (size_t i = 0; i < c->n && !rc; i++) {
        entry *e = &c->e[i];
        const char *text = output_of(c, e->run, done, &n_done, &rc);
        if (text &&
            !pick_number(text, e->pick, &e->expected, e->expected_text, sizeof e->expected_text))
            rc = refuse("%s:%d: [%s]: pick \"%s\" finds no number in the output of \"%s\"",
                        c->key_path, e->line, e->name, e->pick ? e->pick : "(the first number)",
                        e->run);
    }
    for (size_t i = 0; i < n_done; i++) free(done[i].out);
    return rc;
}

/* A temporary $T, and build/bin first on PATH, for the runs. */
static int prepare_environment(check *c)
{
    snprintf(c->tmp, sizeof c->tmp, "/tmp/kvl-answers-XXXXXX");
    if (!mkdtemp(c->tmp)) return refuse("mkdtemp: %s", strerror(errno));
    setenv("T", c->tmp, 1);
    const char *bin = getenv("KVL_BIN"), *path = getenv("PATH");
    char with_bin[8192];
    snprintf(with_bin, sizeof with_bin, "%s/build/bin:%s", kvl_root_dir(),
             path ? path : "/usr/bin:/bin");
    if (bin && *bin)
        snprintf(with_bin, sizeof with_bin, "%s:%s", bin, path ? path : "/usr/bin:/bin");
    setenv("PATH", with_bin, 1);
    return 0;
}

static void remove_tree(const char *dir)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "answers: could not remove %s\n", dir);
}

/* ---- the verdict ----------------------------------------------------------------------------- */

static int right(const entry *e)
{
    const double diff = fabs(e->given - e->expected);
    switch (e->tol) {
    case TOL_EXACT: return e->given == e->expected;
    case TOL_REL: return diff <= e->tol_amount / 100 * fabs(e->expected);
    case TOL_ABS: return diff <= e->tol_amount;
    }
    return 0;
}

static int print_verdict(const check *c)
{
    size_t n_right = 0, n_wrong = 0, blank = 0;
    printf("%s, against the programs:\n", c->answers_path);
    for (size_t i = 0; i < c->n; i++) {
        const entry *e = &c->e[i];
        const char *verdict = !e->answered ? "not answered" : right(e) ? "right" : "WRONG";
        printf("  %-34s %-16s %s", e->name, e->given_text, verdict);
        if (e->answered && !right(e)) printf(" (tolerance: %s)", e->tolerance);
        putchar('\n');
        n_right += e->answered && right(e);
        n_wrong += e->answered && !right(e);
        blank += !e->answered;
    }
    printf("%zu right, %zu wrong, %zu not answered, of %zu\n", n_right, n_wrong, blank, c->n);
    return n_right == c->n ? 0 : 1;
}

static void print_key(const check *c)
{
    printf("# the expected values of %s, as its programs print them\n", c->chapter);
    for (size_t i = 0; i < c->n; i++) printf("%s = %s\n", c->e[i].name, c->e[i].expected_text);
}

/* ---- main ------------------------------------------------------------------------------------ */

static int usage(FILE *f)
{
    fprintf(
        f,
        "usage: answers [--file ANSWERS] [--key] labs/NN_name\n"
        "Checks a chapter's predictions (labs/NN_name/answers.txt, or ANSWERS) against the values\n"
        "its programs print, computed as labs/NN_name/answers.key says. --key prints those "
        "values.\n");
    return f == stdout ? 0 : 2;
}

static int load(char **text, const char *path)
{
    size_t size;
    if (kvl_file_read_all(text, &size, path, FILE_CAP) != 0) return refuse("%s", kvl_error());
    if (strlen(*text) != size) return refuse("%s: holds a NUL byte", path);
    return 0;
}

int main(int argc, char **argv)
{
    static check c;
    const char *answers = NULL;
    int key_only = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(stdout);
        if (!strcmp(argv[i], "--key"))
            key_only = 1;
        else if (!strcmp(argv[i], "--file") && i + 1 < argc)
            answers = argv[++i];
        else if (argv[i][0] != '-' && !c.chapter)
            c.chapter = argv[i];
        else
            return usage(stderr);
    }
    if (!c.chapter) return usage(stderr);
    if (chdir(kvl_root_dir()))
        return refuse("%s: %s (set KVL_ROOT)", kvl_root_dir(), strerror(errno));
    snprintf(c.key_path, sizeof c.key_path, "%s/answers.key", c.chapter);
    snprintf(c.answers_path, sizeof c.answers_path, "%s", answers ? answers : "");
    if (!answers) snprintf(c.answers_path, sizeof c.answers_path, "%s/answers.txt", c.chapter);
    int rc = load(&c.key_text, c.key_path);
    if (!rc) rc = read_key(&c);
    if (!rc && !key_only) rc = load(&c.answers_text, c.answers_path);
    if (!rc && !key_only) rc = read_answers(&c);
    if (!rc) rc = prepare_environment(&c);
    if (!rc) {
        rc = compute_expected(&c);
        remove_tree(c.tmp);
    }
    if (!rc) {
        if (key_only)
            print_key(&c);
        else
            rc = print_verdict(&c);
    }
    free(c.key_text);
    free(c.answers_text);
    return kvl_exit_status("answers", rc);
}
