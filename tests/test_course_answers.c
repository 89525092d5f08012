/* The predictions checker (labs/answers.c, make answers-NN) and each chapter's answers.key.
 *
 * For every labs/NN_name/answers.key: every exercise of the chapter's exercises.md has at least one
 * answer line (exN.name), the committed answers.txt holds each name once with no value filled in,
 * every expected value the key computes appears, as the program prints it, in the worked solution of
 * its exercise in solutions.md (so a key that picks the wrong column or line fails here), the
 * expected values are graded right, and each of them moved past its tolerance is graded WRONG (and
 * moved half the tolerance, right). The checker refuses a value it cannot read as a number, a name
 * its key lacks, and a key it cannot follow, with exit 2, one line naming file and line, and nothing
 * on stdout. */
#include "common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CHAPTERS 16
#define MAX_ANSWERS 128
#define OUT_CAP (1 << 18)

static char out[OUT_CAP], err[OUT_CAP];

typedef struct {
    char name[64];
    char printed[64];   /* the expected value as --key prints it */
    double value;
    char tolerance[32];
} answer;

static const char *checker(void)
{
    static char path[4096];
    const char *bin = getenv("KVL_BIN");
    snprintf(path, sizeof path, "%s/../labs/answers", bin && *bin ? bin : kvl_path("build/bin"));
    return path;
}

/* labs/NN_name folders holding answers.key, as NN_name */
static size_t list_keyed(char names[][64])
{
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "(cd '%s/labs' && ls -d [0-9][0-9]_*/answers.key)", kvl_path("."));
    ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 0);
    size_t n = 0;
    for (char *line = strtok(out, "\n"); line && n < MAX_CHAPTERS; line = strtok(NULL, "\n"))
        snprintf(names[n++], 64, "%.*s", (int)strcspn(line, "/"), line);
    ck_assert_msg(n >= 1, "no labs/NN_name/answers.key");
    return n;
}

/* A number as the checker reads it: digits, thousands commas, a fraction. */
static double number(const char *s)
{
    char digits[64];
    size_t n = 0;
    for (; *s && n + 1 < sizeof digits; s++)
        if (*s != ',') digits[n++] = *s;
    digits[n] = 0;
    return strtod(digits, NULL);
}

/* The tolerance of each answer, read from the key's blocks in order. */
static void read_tolerances(const char *chapter, answer *a, size_t n)
{
    char rel[128];
    snprintf(rel, sizeof rel, "labs/%s/answers.key", chapter);
    char *key = kvl_read_text(kvl_path(rel));
    ck_assert_msg(key != NULL, "%s is missing", rel);
    for (size_t i = 0; i < n; i++) {
        char head[80];
        snprintf(head, sizeof head, "[%s]", a[i].name);
        const char *at = strstr(key, head), *tol = at ? strstr(at, "tolerance: ") : NULL;
        ck_assert_msg(tol != NULL, "%s: no tolerance for %s", rel, a[i].name);
        snprintf(a[i].tolerance, sizeof a[i].tolerance, "%.*s", (int)strcspn(tol + 11, "\n"), tol + 11);
    }
    free(key);
}

/* The key's expected values (answers --key), in order. */
static size_t expected_values(const char *chapter, answer *a)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' --key labs/%s", checker(), chapter);
    const int rc = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(rc == 0, "%s exits %d:\n%s", cmd, rc, err);
    size_t n = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#') continue;
        ck_assert_msg(n < MAX_ANSWERS, "labs/%s: too many answers", chapter);
        char *eq = strstr(line, " = ");
        ck_assert_msg(eq != NULL, "answers --key printed \"%s\"", line);
        snprintf(a[n].name, sizeof a[n].name, "%.*s", (int)(eq - line), line);
        snprintf(a[n].printed, sizeof a[n].printed, "%s", eq + 3);
        a[n].value = number(eq + 3);
        n++;
    }
    read_tolerances(chapter, a, n);
    return n;
}

/* Grade the answers file holding `text`; the exit status, the verdict in out. */
static int grade_text(const char *chapter, const char *text)
{
    char path[] = "/tmp/kvl-answers-test-XXXXXX";
    const int fd = mkstemp(path);
    ck_assert(fd >= 0);
    ck_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    close(fd);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' --file %s labs/%s", checker(), path, chapter);
    const int rc = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    unlink(path);
    return rc;
}

/* The section of solutions.md for exercise k: from "### Exercise k:" to the next heading. */
static char *solution_section(const char *solutions, int k)
{
    char head[48];
    snprintf(head, sizeof head, "### Exercise %d:", k);
    const char *at = strstr(solutions, head);
    if (!at) return NULL;
    const char *end = strstr(at + 1, "\n### ");
    const size_t len = end ? (size_t)(end - at) : strlen(at);
    char *s = malloc(len + 1);
    ck_assert(s != NULL);
    memcpy(s, at, len);
    s[len] = 0;
    return s;
}

static char *chapter_file(const char *chapter, const char *file)
{
    char rel[160];
    snprintf(rel, sizeof rel, "chapters/%s/%s", chapter, file);
    char *text = kvl_read_text(kvl_path(rel));
    ck_assert_msg(text != NULL, "%s is missing", rel);
    return text;
}

START_TEST(every_exercise_has_answers_and_every_answer_a_blank_line)
{
    char names[MAX_CHAPTERS][64];
    const size_t n = list_keyed(names);
    for (size_t c = 0; c < n; c++) {
        static answer a[MAX_ANSWERS];
        const size_t m = expected_values(names[c], a);
        char rel[128];
        snprintf(rel, sizeof rel, "labs/%s/answers.txt", names[c]);
        char *blank = kvl_read_text(kvl_path(rel)), *exercises = chapter_file(names[c], "exercises.md");
        ck_assert_msg(blank != NULL, "%s is missing", rel);
        for (size_t i = 0; i < m; i++) {
            char line[80];
            snprintf(line, sizeof line, "\n%.63s =\n", a[i].name);
            ck_assert_msg(strstr(blank, line), "%s: no blank line \"%s =\"", rel, a[i].name);
        }
        for (int k = 1;; k++) {
            char head[48], prefix[16];
            snprintf(head, sizeof head, "### Exercise %d:", k);
            if (!strstr(exercises, head)) break;
            snprintf(prefix, sizeof prefix, "ex%d.", k);
            int found = 0;
            for (size_t i = 0; i < m; i++) found |= !strncmp(a[i].name, prefix, strlen(prefix));
            ck_assert_msg(found, "labs/%s: exercise %d has no answer line (%s...)", names[c], k, prefix);
        }
        ck_assert_int_eq(grade_text(names[c], blank), 1);
        char count[64];
        snprintf(count, sizeof count, "0 right, 0 wrong, %zu not answered", m);
        ck_assert_msg(strstr(out, count), "%s as committed is not all blank:\n%s", rel, out);
        free(blank);
        free(exercises);
    }
}
END_TEST

START_TEST(every_expected_value_is_in_its_worked_solution)
{
    char names[MAX_CHAPTERS][64];
    const size_t n = list_keyed(names);
    for (size_t c = 0; c < n; c++) {
        static answer a[MAX_ANSWERS];
        const size_t m = expected_values(names[c], a);
        char *solutions = chapter_file(names[c], "solutions.md");
        for (size_t i = 0; i < m; i++) {
            int k;
            ck_assert_msg(sscanf(a[i].name, "ex%d.", &k) == 1, "labs/%s: answer %s is not named exN.something",
                          names[c], a[i].name);
            char *section = solution_section(solutions, k);
            ck_assert_msg(section != NULL, "chapters/%s/solutions.md has no Exercise %d", names[c], k);
            ck_assert_msg(strstr(section, a[i].printed),
                          "labs/%s: %s's expected value %s is not in the worked solution of exercise %d",
                          names[c], a[i].name, a[i].printed, k);
            free(section);
        }
        free(solutions);
    }
}
END_TEST

/* v moved by `times` tolerances (0.5: inside it, 2: past it) */
static double moved(const answer *a, double times)
{
    double amount;
    if (!strcmp(a->tolerance, "exact")) return times < 1 ? a->value : a->value + (a->value ? fabs(a->value) : 1);
    if (sscanf(a->tolerance, "rel %lf%%", &amount) == 1)
        return a->value ? a->value * (1 + times * amount / 100) : times < 1 ? 0 : 1;
    ck_assert_msg(sscanf(a->tolerance, "abs %lf", &amount) == 1, "tolerance \"%s\"", a->tolerance);
    return a->value + times * amount;
}

static void grade_moved(const char *chapter, const answer *a, size_t m, double times, const char *count)
{
    static char text[1 << 14];
    size_t len = 0;
    for (size_t i = 0; i < m; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s = %.17g\n", a[i].name, moved(&a[i], times));
    const int rc = grade_text(chapter, text);
    ck_assert_msg(strstr(out, count) && rc == (times < 1 ? 0 : 1),
                  "labs/%s: values moved by %g tolerances: expected \"%s\", exit %d:\n%s%s", chapter, times, count,
                  rc, out, err);
}

START_TEST(right_within_the_tolerance_and_wrong_past_it)
{
    char names[MAX_CHAPTERS][64];
    const size_t n = list_keyed(names);
    for (size_t c = 0; c < n; c++) {
        static answer a[MAX_ANSWERS];
        const size_t m = expected_values(names[c], a);
        char right[64], wrong[64];
        snprintf(right, sizeof right, "%zu right, 0 wrong, 0 not answered", m);
        snprintf(wrong, sizeof wrong, "0 right, %zu wrong, 0 not answered", m);
        grade_moved(names[c], a, m, 0, right);
        grade_moved(names[c], a, m, 0.5, right);
        grade_moved(names[c], a, m, 2, wrong);
    }
}
END_TEST

/* the checker's refusals, on the first chapter's key */
START_TEST(what_it_cannot_read_is_refused)
{
    char names[MAX_CHAPTERS][64];
    list_keyed(names);
    static answer a[MAX_ANSWERS];
    expected_values(names[0], a);
    static const struct {
        const char *line, *names, *at;
    } bad[] = {
        {"%s = abc\n", "\"abc\": not a number", ":1: "},
        {"%s = 12 34\n", "\"12 34\": not a number", ":1: "},
        {"%s = 1,23\n", "\"1,23\": not a number", ":1: "},
        {"no_such_answer = 3\n", "\"no_such_answer\" is not one of this chapter's answers", ":1: "},
        {"%s\n", "expected name = value", ":1: "},
        {"%s = 1\n%s = 1\n", "given twice", ":2: "},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char text[256];
        snprintf(text, sizeof text, bad[i].line, a[0].name, a[0].name);
        const int rc = grade_text(names[0], text);
        ck_assert_msg(rc == 2 && out[0] == 0 && strstr(err, bad[i].names) && strstr(err, bad[i].at),
                      "answers file \"%s\": exit %d, stdout \"%s\", stderr \"%s\"", text, rc, out, err);
    }
}
END_TEST

START_TEST(a_key_it_cannot_follow_is_refused)
{
    static const struct {
        const char *key, *names;
    } bad[] = {
        {"[a]\nrun: echo 1\n", "[a] needs run and tolerance"},
        {"[a]\nrun: echo 1\ntolerance: near\n", "tolerance \"near\""},
        {"[a]\nrun: echo 1\npick: column 3\ntolerance: exact\n", "pick \"column 3\""},
        {"[a]\nrun: exit 3\ntolerance: exact\n", "failed (exit 3)"},
        {"[a]\nrun: echo none\ntolerance: exact\n", "finds no number"},
        {"[a]\nrun: echo 1\ntolerance: exact\n[a]\nrun: echo 2\ntolerance: exact\n", "[a] given twice"},
        {"run: echo 1\n", "expected [name] or field: value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char dir[] = "/tmp/kvl-key-XXXXXX", cmd[8192];
        ck_assert(mkdtemp(dir) != NULL);
        snprintf(cmd, sizeof cmd, "(printf '%%s' '%s' > %s/answers.key && : > %s/answers.txt && '%s' %s)", bad[i].key,
                 dir, dir, checker(), dir);
        const int rc = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
        ck_assert_msg(rc == 2 && out[0] == 0 && strstr(err, bad[i].names) && strstr(err, "answers.key"),
                      "key \"%s\": exit %d, stdout \"%s\", stderr \"%s\"", bad[i].key, rc, out, err);
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_answers");
    TCase *tc = tcase_create("answers");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, every_exercise_has_answers_and_every_answer_a_blank_line);
    tcase_add_test(tc, every_expected_value_is_in_its_worked_solution);
    tcase_add_test(tc, right_within_the_tolerance_and_wrong_past_it);
    tcase_add_test(tc, what_it_cannot_read_is_refused);
    tcase_add_test(tc, a_key_it_cannot_follow_is_refused);
    suite_add_tcase(s, tc);
    return s;
}
