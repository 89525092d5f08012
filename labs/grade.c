/* Comparison and verdicts for the lab graders (grade.h). */
#include "grade.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "grouped.h"
#include "program.h"
#include "status.h"

/* A lab gets this long to finish all its cases; the largest take milliseconds. */
#define LAB_SECONDS 60
#define CASE_CAP 256

/* The lab and case being checked, where the parent can read them after a child crashed: shared
 * memory when grade_main runs the labs, else (a grader calling a lab directly) these buffers. */
typedef struct {
    char lab[64], case_[CASE_CAP];
} progress;
static progress local;
static progress *now = &local;

void grade_begin(lab_grade *g, const char *lab, const char *hint)
{
    *g = (lab_grade){.lab = lab, .hint = hint, .case_ = ""};
    snprintf(now->lab, sizeof now->lab, "%s", lab);
}

void grade_case(lab_grade *g, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(now->case_, sizeof now->case_, fmt, ap);
    va_end(ap);
    g->case_ = now->case_;
    g->cases++;
}

static size_t shape_count(const grade_shape *s)
{
    size_t n = 1;
    for (size_t k = 0; k < s->rank; k++) n *= s->dims[k];
    return n;
}

/* "o[3][17]": element i of the shape, in C order */
static const char *element_name(const grade_shape *s, size_t i)
{
    static char text[128];
    size_t idx[4], len = (size_t)snprintf(text, sizeof text, "%s", s->name);
    for (size_t k = s->rank; k-- > 0;) {
        idx[k] = i % s->dims[k];
        i /= s->dims[k];
    }
    for (size_t k = 0; k < s->rank && len < sizeof text; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, "[%zu]", idx[k]);
    return text;
}

static int report(lab_grade *g, const char *where, const char *want, const char *got,
                  const char *tol)
{
    g->wrong = 1;
    printf("%s: WRONG in case \"%s\"\n", g->lab, g->case_);
    printf("  first difference at %s: expected %s, got %s\n", where, want, got);
    if (tol) printf("  tolerance: %s\n", tol);
    printf("  hint: %s\n", g->hint);
    return 1;
}

static int close_enough(float got, double want, double atol, double rtol)
{
    if (isnan(want)) return isnan(got);
    if (isinf(want)) return (double)got == want;
    return isfinite(got) && fabs((double)got - want) <= atol + rtol * fabs(want);
}

int grade_f32(lab_grade *g, const grade_shape *s, const float *got, const double *want, double atol,
              double rtol)
{
    if (g->wrong) return 1;
    const size_t n = shape_count(s);
    for (size_t i = 0; i < n; i++) {
        if (close_enough(got[i], want[i], atol, rtol)) continue;
        char w[40], o[40], tol[96];
        snprintf(w, sizeof w, "%.9g", want[i]);
        snprintf(o, sizeof o, "%.9g", (double)got[i]);
        snprintf(tol, sizeof tol, "|got − expected| ≤ %g + %g·|expected|", atol, rtol);
        return report(g, element_name(s, i), w, o, tol);
    }
    g->elements += n;
    return 0;
}

int grade_u8(lab_grade *g, const grade_shape *s, const uint8_t *got, const uint8_t *want)
{
    if (g->wrong) return 1;
    const size_t n = shape_count(s);
    for (size_t i = 0; i < n; i++) {
        if (got[i] == want[i]) continue;
        char w[8], o[8];
        snprintf(w, sizeof w, "0x%02x", want[i]);
        snprintf(o, sizeof o, "0x%02x", got[i]);
        return report(g, element_name(s, i), w, o, "exact");
    }
    g->elements += n;
    return 0;
}

int grade_i64(lab_grade *g, const grade_shape *s, const int64_t *got, const int64_t *want)
{
    if (g->wrong) return 1;
    const size_t n = shape_count(s);
    for (size_t i = 0; i < n; i++) {
        if (got[i] == want[i]) continue;
        char w[32], o[32];
        snprintf(w, sizeof w, "%" PRId64, want[i]);
        snprintf(o, sizeof o, "%" PRId64, got[i]);
        return report(g, element_name(s, i), w, o, "exact");
    }
    g->elements += n;
    return 0;
}

int grade_value(lab_grade *g, const char *name, int64_t got, int64_t want)
{
    const grade_shape s = {name, {1}, 0};
    return grade_i64(g, &s, &got, &want);
}

int grade_real(lab_grade *g, const char *name, double got, double want, double atol, double rtol)
{
    if (g->wrong) return 1;
    if (!isfinite(got) || fabs(got - want) > atol + rtol * fabs(want)) {
        char w[40], o[40], tol[96];
        snprintf(w, sizeof w, "%.17g", want);
        snprintf(o, sizeof o, "%.17g", got);
        snprintf(tol, sizeof tol, "|got − expected| ≤ %g + %g·|expected|", atol, rtol);
        return report(g, name, w, o, tol);
    }
    g->elements++;
    return 0;
}

int grade_whole(lab_grade *g, const char *name, double got, double want)
{
    const int whole = isfinite(got) && fabs(got) < 0x1p62 && got == floor(got);
    return grade_value(g, name, whole ? (int64_t)got : INT64_MIN, (int64_t)want);
}

int grade_end(lab_grade *g)
{
    if (!g->wrong)
        printf("%s: right (%zu cases, %s elements)\n", g->lab, g->cases, KVL_GROUPED(g->elements));
    return g->wrong;
}

/* One lab in a child: its exit status, or its crash reported. 1 unless it was right. */
static int run_child(grade_fn lab)
{
    fflush(stdout);
    *now = (progress){"a lab", ""};
    const pid_t pid = fork();
    if (pid < 0) {
        perror("grader: fork");
        return 1;
    }
    if (pid == 0) {
        alarm(LAB_SECONDS);
        const int wrong = lab();
        fflush(stdout);
        _exit(wrong ? 1 : 0);
    }
    int status;
    if (waitpid(pid, &status, 0) < 0) {
        perror("grader: waitpid");
        return 1;
    }
    if (WIFEXITED(status)) return WEXITSTATUS(status) != 0;
    const int sig = WTERMSIG(status);
    if (sig == SIGALRM)
        printf("%s: STOPPED by the time limit (%d s) in case \"%s\"\n", now->lab, LAB_SECONDS,
               now->case_);
    else
        printf("%s: STOPPED by %s in case \"%s\": an index past its array, or a NULL pointer?\n",
               now->lab, strsignal(sig), now->case_);
    return 1;
}

int grade_main(const grade_fn *labs, size_t n)
{
    void *shared =
        mmap(NULL, sizeof *now, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shared != MAP_FAILED) now = shared;
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += (size_t)run_child(labs[i]);
    printf("%zu of %zu labs right\n", n - wrong, n);
    return wrong ? 1 : 0;
}

void grade_require(int status)
{
    if (status == KVL_OK) return;
    fprintf(stderr, "grader: %s (is KVL_ROOT the repository root?)\n", kvl_error());
    exit(1);
}

static int by_path(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void grade_configs(char ***paths, size_t *n)
{
    grade_require(kvl_config_files(paths, n));
    qsort(*paths, *n, sizeof **paths, by_path);
}

void *grade_alloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "grader: out of memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}
