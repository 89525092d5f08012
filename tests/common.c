#include "common.h"

#include "backend_cpu.h"
#include "isa.h"

#include <ctype.h>
#include <dirent.h>
#include <glob.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void)
{
    char timeout[16];
    snprintf(timeout, sizeof timeout, "%d", KVL_TEST_TIMEOUT);
    setenv("CK_DEFAULT_TIMEOUT", timeout, 0);
    SRunner *sr = srunner_create(kvl_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

static int same_special(double g, double w)
{
    if (isnan(w)) return isnan(g);
    if (isinf(w)) return isinf(g) && signbit(g) == signbit(w);
    return isfinite(g);
}

static void expect_close(const char *what, const float *gf, const double *gd, const double *want,
                         size_t n, double atol, double rtol, double min_cos)
{
    size_t worst = n, bad = 0;
    double worst_excess = 0, dot = 0, gg = 0, ww = 0;
    for (size_t i = 0; i < n; i++) {
        double g = gf ? (double)gf[i] : gd[i], w = want[i];
        if (!same_special(g, w)) {
            ck_abort_msg("%s: element %zu is %.9g, oracle %.9g (NaN/inf positions differ)", what, i, g, w);
        }
        if (!isfinite(w)) continue;
        double err = fabs(g - w), allowed = atol + rtol * fabs(w);
        if (err > allowed) {
            bad++;
            if (worst == n || err - allowed > worst_excess) { worst = i; worst_excess = err - allowed; }
        }
        dot += g * w; gg += g * g; ww += w * w;
    }
    if (bad) {
        double g = gf ? (double)gf[worst] : gd[worst];
        ck_abort_msg("%s: %zu of %zu elements outside atol %.3g + rtol %.3g; worst [%zu] got %.9g want %.9g err %.3g",
                     what, bad, n, atol, rtol, worst, g, want[worst], fabs(g - want[worst]));
    }
    if (min_cos > 0 && (gg > 0 || ww > 0)) {
        double c = dot / (sqrt(gg) * sqrt(ww));
        ck_assert_msg(c >= min_cos, "%s: cosine %.12f below %.12f", what, c, min_cos);
    }
}

void kvl_expect_close(const char *what, const float *got, const double *want, size_t n,
                      double atol, double rtol, double min_cos)
{
    expect_close(what, got, NULL, want, n, atol, rtol, min_cos);
}

void kvl_expect_close_f64(const char *what, const double *got, const double *want, size_t n,
                          double atol, double rtol, double min_cos)
{
    expect_close(what, NULL, got, want, n, atol, rtol, min_cos);
}

const char *kvl_path(const char *relative)
{
    static _Thread_local char buf[4096];
    const char *root = getenv("KVL_ROOT");
    snprintf(buf, sizeof buf, "%s/%s", root && *root ? root : ".", relative);
    return buf;
}

float *kvl_uniform_floats(kvl_rng *rng, size_t n, double lo, double hi)
{
    float *x = malloc((n ? n : 1) * sizeof *x);
    ck_assert(x != NULL);
    kvl_rng_uniform_f32(rng, x, n, lo, hi);
    return x;
}

void kvl_force_widest_isa(void)
{
    for (int isa = KVF_N_ISA - 1; isa >= 0; isa--)
        if (kvf_isa_force((kvf_isa)isa) == 0) return;
}

char *kvl_read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc(n > 0 ? (size_t)n + 1 : 1);
    ck_assert(s != NULL);
    size_t got = n > 0 ? fread(s, 1, (size_t)n, f) : 0;
    s[got] = '\0';
    fclose(f);
    return s;
}

static void slurp(FILE *f, char *buf, size_t cap)
{
    size_t n = cap ? fread(buf, 1, cap - 1, f) : 0;
    if (cap) buf[n] = '\0';
    char sink[4096];
    while (fread(sink, 1, sizeof sink, f) > 0) {}
}

int kvl_run(const char *cmdline, const char *input, char *out, size_t out_cap, char *err, size_t err_cap)
{
    char in_path[] = "/tmp/kvl_in_XXXXXX", out_path[] = "/tmp/kvl_out_XXXXXX", err_path[] = "/tmp/kvl_err_XXXXXX";
    int fi = mkstemp(in_path), fo = mkstemp(out_path), fe = mkstemp(err_path);
    ck_assert_msg(fi >= 0 && fo >= 0 && fe >= 0, "kvl_run: cannot create temporary files");
    if (input) ck_assert(write(fi, input, strlen(input)) == (ssize_t)strlen(input));
    close(fi); close(fo); close(fe);

    const char *bin = getenv("KVL_BIN");
    size_t len = strlen(cmdline) + 4 * 4096;
    char *sh = malloc(len);
    ck_assert(sh != NULL);
    snprintf(sh, len, "PATH='%s':\"$PATH\"; %s <%s >%s 2>%s", bin && *bin ? bin : "build/bin", cmdline,
             in_path, out_path, err_path);
    int status = system(sh);
    free(sh);

    FILE *f = fopen(out_path, "r");
    if (f) { slurp(f, out, out_cap); fclose(f); }
    f = fopen(err_path, "r");
    if (f) { slurp(f, err, err_cap); fclose(f); }
    unlink(in_path); unlink(out_path); unlink(err_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static int by_chapter_name(const void *a, const void *b)
{
    return strcmp(a, b);
}

size_t kvl_list_chapters(char names[][64], size_t max, const char *holding)
{
    DIR *d = opendir(kvl_path("chapters"));
    ck_assert_msg(d != NULL, "cannot list chapters (set KVL_ROOT)");
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d)) && n < max;) {
        const char *s = e->d_name;
        char rel[160];
        snprintf(rel, sizeof rel, "chapters/%.63s/%s", s, holding);
        if (isdigit((unsigned char)s[0]) && isdigit((unsigned char)s[1]) && s[2] == '_' && access(kvl_path(rel), R_OK) == 0)
            snprintf(names[n++], 64, "%.63s", s);
    }
    closedir(d);
    qsort(names, n, 64, by_chapter_name);
    return n;
}

void kvl_expect_refused(const char *cmdline, const char *names, const char **line)
{
    static char out[1 << 16], err[1 << 16];
    const int rc = kvl_run(cmdline, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 2, "%s exited %d, not 2: %.500s", cmdline, rc, err);
    ck_assert_msg(out[0] == '\0', "%s printed on stdout: %.200s", cmdline, out);
    const char *nl = strchr(err, '\n');
    ck_assert_msg(nl && nl[1] == '\0', "%s: not one line on stderr: %.500s", cmdline, err);
    ck_assert_msg(strstr(err, names) != NULL, "%s: \"%s\" does not name \"%s\"", cmdline, err, names);
    if (line) *line = err;
}

void kvl_expect_accepted(const char *cmdline, const char *stage, int seconds)
{
    static char out[1 << 16], err[1 << 16], sh[4096];
    snprintf(sh, sizeof sh, "KVL_PROGRESS=1 KVL_PROGRESS_SECONDS=0.1 timeout %d %s", seconds, cmdline);
    const int rc = kvl_run(sh, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0 || rc == 124, "%s exited %d: %.500s", cmdline, rc, err);
    ck_assert_msg(strstr(err, stage) != NULL, "%s did not reach \"%s\" in %d s: %.500s", cmdline, stage, seconds,
                  err);
}

void kvl_expect_prints(const char *cmdline, const char *const *want, size_t n, const char *near)
{
    static char out[1 << 20], err[1 << 16];
    const int rc = kvl_run(cmdline, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "%s exited %d: %.500s", cmdline, rc, err);
    for (size_t i = 0; i < n; i++) {
        const char *at = near ? strstr(out, near) : out;
        ck_assert_msg(strstr(out, want[i]) != NULL, "%s does not print \"%s\"; it printed: %.400s", cmdline, want[i],
                      at ? at : out);
    }
}

size_t kvl_list_programs(char names[][32], size_t max)
{
    size_t n = 0;
    glob_t g;
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s/chapters/*/*.c", kvl_path("."));
    ck_assert(glob(pattern, 0, NULL, &g) == 0);
    for (size_t i = 0; i < g.gl_pathc && n < max; i++) {
        if (strstr(g.gl_pathv[i], "/chapters/common/")) continue;
        const char *base = strrchr(g.gl_pathv[i], '/') + 1;
        snprintf(names[n++], 32, "%.*s", (int)(strlen(base) - 2), base);
    }
    globfree(&g);
    snprintf(pattern, sizeof pattern, "%s/notebooks_c/[0-9][0-9]_*.c", kvl_path("."));
    ck_assert(glob(pattern, 0, NULL, &g) == 0);
    for (size_t i = 0; i < g.gl_pathc && n < max; i++)
        snprintf(names[n++], 32, "nb_%.2s", strrchr(g.gl_pathv[i], '/') + 1);
    globfree(&g);
    ck_assert(n + 2 <= max);
    snprintf(names[n++], 32, "nb_ipynb");
    snprintf(names[n++], 32, "kvbench");
    ck_assert_uint_ge(n, 14);
    return n;
}

const kvl_backend *kvl_test_backend(size_t i)
{
    static const kvl_backend *const all[] = {&kvl_backend_ref, &kvl_backend_cpu};
    return i < sizeof all / sizeof *all ? all[i] : NULL;
}
