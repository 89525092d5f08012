/* The course's exercises: chapters/NN_name/exercises.md and the solutions.md beside it.
 *
 * A chapter folder that holds exercises.md asks at least four exercises ("### Exercise N: title")
 * and two conceptual questions ("### Question N: title"), each kind numbered from 1 in order. Its
 * solutions.md answers every one under the same heading, and nothing else under such a heading.
 * An exercise's answer holds at least one machine check, a ```check block of shell lines followed
 * at once by an ```expect block of substrings, one a line; a question's answer holds none. Each
 * check runs as the student would: `sh -e` from the repository root, $KVL_BIN first on PATH,
 * $EXERCISE_TMP a fresh empty folder (removed after), under a time limit; it must exit 0 and print
 * every expected substring on stdout. A chapter whose exercises are added later is picked up by
 * name, without an edit here. */
#include "common.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CHAPTERS 16
#define MAX_ITEMS 32
#define MIN_EXERCISES 4
#define MIN_QUESTIONS 2
#define OUT_CAP (1 << 20)
/* A check is a few program runs at course sizes, a second or two each; the limit leaves room for
 * a loaded machine, and is scaled by Check's multiplier as the sanitizer build sets it. */
#define CHECK_LIMIT_S 60

static char out[OUT_CAP], err[OUT_CAP];

/* chapters/NN_name folders that hold an exercises.md, sorted */
static size_t list_chapters(char names[][64])
{
    const size_t n = kvl_list_chapters(names, MAX_CHAPTERS, "exercises.md");
    ck_assert_msg(n >= 4, "exercises in %zu chapters, expected at least 4 (set KVL_ROOT)", n);
    return n;
}

static char *chapter_file(const char *chapter, const char *file)
{
    char rel[160];
    snprintf(rel, sizeof rel, "chapters/%s/%s", chapter, file);
    char *text = kvl_read_text(kvl_path(rel));
    ck_assert_msg(text != NULL, "%s is missing", rel);
    return text;
}

/* ---- headings ----------------------------------------------------------------------------- */

typedef struct {
    char heading[192]; /* the whole line, "### Exercise 1: title" */
    int is_exercise;
} item;

/* If line (len bytes) is "### Exercise N: title" or "### Question N: title", its kind
 * (1 exercise, 0 question) and N; else -1. */
static int parse_heading(const char *line, size_t len, int *number)
{
    static const char *const kinds[] = {"### Question ", "### Exercise "};
    for (int k = 0; k < 2; k++) {
        size_t klen = strlen(kinds[k]);
        if (len <= klen || strncmp(line, kinds[k], klen)) continue;
        char *end;
        long n = strtol(line + klen, &end, 10);
        if (end == line + klen || (size_t)(end - line) + 2 >= len || end[0] != ':' ||
            end[1] != ' ' || n < 1 || n > INT_MAX)
            return -1;
        *number = (int)n;
        return k;
    }
    return -1;
}

/* The exercise and question headings of a page, in order; each kind numbered 1, 2, ... */
static size_t list_items(item *items, const char *text, const char *where)
{
    size_t n = 0;
    int count[2] = {0, 0};
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        int number, kind = parse_heading(line, len, &number);
        if (kind < 0 && !strncmp(line, "### ", 4) &&
            (!strncmp(line + 4, "Exercise", 8) || !strncmp(line + 4, "Question", 8)))
            ck_abort_msg("%s: \"%.*s\" is not \"### Exercise N: title\" or \"### Question N: "
                         "title\"", where, (int)len, line);
        if (kind >= 0) {
            ck_assert_msg(number == count[kind] + 1, "%s: \"%.*s\" should be number %d", where,
                          (int)len, line, count[kind] + 1);
            count[kind]++;
            ck_assert_msg(n < MAX_ITEMS && len < sizeof items[0].heading,
                          "%s: too many or too long headings", where);
            snprintf(items[n].heading, sizeof items[n].heading, "%.*s", (int)len, line);
            items[n++].is_exercise = kind;
        }
        line = end ? end + 1 : line + len;
    }
    return n;
}

/* The text under `heading` up to the next "### " heading, as a copy the caller frees; NULL if
 * the page has no line equal to heading. */
static char *section(const char *text, const char *heading)
{
    size_t hlen = strlen(heading);
    for (const char *p = text; (p = strstr(p, heading)) != NULL; p += hlen) {
        if ((p != text && p[-1] != '\n') || (p[hlen] != '\n' && p[hlen] != '\0')) continue;
        const char *body = p + hlen, *next = strstr(body, "\n### ");
        size_t len = next ? (size_t)(next - body) : strlen(body);
        char *s = malloc(len + 1);
        ck_assert(s != NULL);
        memcpy(s, body, len);
        s[len] = '\0';
        return s;
    }
    return NULL;
}

/* ---- check blocks ------------------------------------------------------------------------- */

/* The next fenced block with info string `info` that starts a line at or after *at: its body
 * (without fences) in [*body, *body + *len), *at moved past its closing fence. 0 if none. */
static int next_block(const char **at, const char *info, const char **body, size_t *len)
{
    char open[32];
    snprintf(open, sizeof open, "```%s\n", info);
    const char *p = *at;
    while ((p = strstr(p, open)) != NULL && p != *at && p[-1] != '\n') p++;
    if (!p) return 0;
    *body = p + strlen(open);
    const char *close = strstr(*body, "```");
    ck_assert_msg(close != NULL && (close == *body || close[-1] == '\n'),
                  "a ```%s block is not closed", info);
    *len = (size_t)(close - *body);
    *at = close + 3;
    return 1;
}

static int check_limit_s(void)
{
    const char *m = getenv("CK_TIMEOUT_MULTIPLIER");
    double x = m ? atof(m) : 1.0;
    return (int)(CHECK_LIMIT_S * (x > 1.0 ? x : 1.0));
}

/* Run one check's shell lines and return its exit status; stdout in out, stderr in err. */
static int run_check(const char *script, size_t len)
{
    char dir[] = "/tmp/kvl_exercise_XXXXXX";
    ck_assert(mkdtemp(dir) != NULL);
    char script_path[64], tmp_path[64];
    snprintf(script_path, sizeof script_path, "%s/check.sh", dir);
    snprintf(tmp_path, sizeof tmp_path, "%s/tmp", dir);
    FILE *f = fopen(script_path, "w");
    ck_assert(f != NULL && fwrite(script, 1, len, f) == len && fclose(f) == 0);

    char root[PATH_MAX], bin[PATH_MAX];
    const char *kvl_bin = getenv("KVL_BIN");
    ck_assert_msg(realpath(kvl_path("."), root) != NULL,
                  "cannot resolve the repository root (set KVL_ROOT)");
    ck_assert_msg(realpath(kvl_bin && *kvl_bin ? kvl_bin : kvl_path("build/bin"), bin) != NULL,
                  "cannot find the programs (set KVL_BIN)");
    char cmd[3 * PATH_MAX + 256];
    snprintf(cmd, sizeof cmd,
             "mkdir '%s' && cd '%s' && PATH='%s':\"$PATH\" EXERCISE_TMP='%s' timeout %d sh -e '%s'",
             tmp_path, root, bin, tmp_path, check_limit_s(), script_path);
    int rc = kvl_run(cmd, "", out, OUT_CAP, err, OUT_CAP);

    char rm[96];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    ck_assert(system(rm) == 0);
    return rc;
}

/* Every line of an expect block appears in out. */
static void expect_all(const char *expect, size_t len, const char *where)
{
    size_t lines = 0;
    for (const char *line = expect; line < expect + len;) {
        const char *end = memchr(line, '\n', (size_t)(expect + len - line));
        size_t n = end ? (size_t)(end - line) : (size_t)(expect + len - line);
        char want[512];
        snprintf(want, sizeof want, "%.*s", (int)n, line);
        if (n) {
            ck_assert_msg(strstr(out, want) != NULL,
                          "%s: the check's output lacks \"%s\"; it printed, from the start:\n%.2000s", where, want, out);
            lines++;
        }
        line = end ? end + 1 : expect + len;
    }
    ck_assert_msg(lines > 0, "%s: an empty ```expect block", where);
}

/* Run every check of one solution section; returns how many it holds. */
static size_t run_checks(const char *body, const char *where)
{
    size_t n = 0;
    const char *at = body, *script, *expect;
    size_t slen, elen;
    while (next_block(&at, "check", &script, &slen)) {
        ck_assert_msg(!strncmp(at, "\n```expect\n", 11),
                      "%s: check %zu is not followed by an ```expect block", where, n + 1);
        ck_assert(next_block(&at, "expect", &expect, &elen));
        int rc = run_check(script, slen);
        ck_assert_msg(rc != 124, "%s: check %zu ran past %d s", where, n + 1, check_limit_s());
        ck_assert_msg(rc == 0, "%s: check %zu exited %d:\n%s", where, n + 1, rc, err);
        expect_all(expect, elen, where);
        n++;
    }
    return n;
}

/* ---- the tests ---------------------------------------------------------------------------- */

/* Each test takes one chapter per iteration, so that one chapter's failure does not hide
 * another's and each has the whole per-test time limit. Chapter number i of the sorted list; 0
 * past its end. */
static int chapter_at(int i, char name[64])
{
    static char names[MAX_CHAPTERS][64];
    size_t n = list_chapters(names);
    if ((size_t)i >= n) return 0;
    memcpy(name, names[i], 64);
    return 1;
}

START_TEST(test_every_chapter_asks_four_exercises_and_two_questions)
{
    char name[64], where[128];
    if (!chapter_at(_i, name)) return;
    static item items[MAX_ITEMS];
    snprintf(where, sizeof where, "chapters/%s/exercises.md", name);
    char *text = chapter_file(name, "exercises.md");
    size_t k = list_items(items, text, where), exercises = 0;
    for (size_t j = 0; j < k; j++) exercises += (size_t)items[j].is_exercise;
    ck_assert_msg(exercises >= MIN_EXERCISES, "%s asks %zu exercises, fewer than %d", where,
                  exercises, MIN_EXERCISES);
    ck_assert_msg(k - exercises >= MIN_QUESTIONS, "%s asks %zu questions, fewer than %d", where,
                  k - exercises, MIN_QUESTIONS);
    free(text);
}
END_TEST

START_TEST(test_every_exercise_and_question_has_a_solution)
{
    char name[64], asked_in[128], where[128];
    if (!chapter_at(_i, name)) return;
    static item asked[MAX_ITEMS], answered[MAX_ITEMS];
    snprintf(asked_in, sizeof asked_in, "chapters/%s/exercises.md", name);
    snprintf(where, sizeof where, "chapters/%s/solutions.md", name);
    char *exercises = chapter_file(name, "exercises.md");
    char *solutions = chapter_file(name, "solutions.md");
    size_t k = list_items(asked, exercises, asked_in), m = list_items(answered, solutions, where);
    for (size_t j = 0; j < k; j++) {
        char *body = section(solutions, asked[j].heading);
        ck_assert_msg(body != NULL, "%s has no section \"%s\"", where, asked[j].heading);
        const char *at = body, *block;
        size_t len;
        int checked = next_block(&at, "check", &block, &len);
        ck_assert_msg(!asked[j].is_exercise || checked, "%s, \"%s\": no ```check block", where,
                      asked[j].heading);
        ck_assert_msg(asked[j].is_exercise || !checked,
                      "%s, \"%s\": a question has no ```check block", where, asked[j].heading);
        free(body);
    }
    ck_assert_msg(m == k, "%s answers %zu exercises and questions, %s asks %zu", where, m,
                  asked_in, k);
    free(exercises);
    free(solutions);
}
END_TEST

START_TEST(test_every_exercise_has_a_solution_that_checks)
{
    char name[64], asked_in[128];
    if (!chapter_at(_i, name)) return;
    static item asked[MAX_ITEMS];
    snprintf(asked_in, sizeof asked_in, "chapters/%s/exercises.md", name);
    char *exercises = chapter_file(name, "exercises.md");
    char *solutions = chapter_file(name, "solutions.md");
    size_t k = list_items(asked, exercises, asked_in);
    for (size_t j = 0; j < k; j++) {
        if (!asked[j].is_exercise) continue;
        char *body = section(solutions, asked[j].heading), where[256];
        ck_assert_msg(body != NULL, "chapters/%s/solutions.md has no section \"%s\"", name,
                      asked[j].heading);
        snprintf(where, sizeof where, "chapters/%s, \"%s\"", name, asked[j].heading + 4);
        ck_assert_msg(run_checks(body, where) > 0, "%s: no ```check block", where);
        free(body);
    }
    free(exercises);
    free(solutions);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_exercises");
    TCase *text = tcase_create("text");
    tcase_add_loop_test(text, test_every_chapter_asks_four_exercises_and_two_questions, 0,
                        MAX_CHAPTERS);
    tcase_add_loop_test(text, test_every_exercise_and_question_has_a_solution, 0, MAX_CHAPTERS);
    suite_add_tcase(s, text);
    TCase *run = tcase_create("run");
    tcase_add_loop_test(run, test_every_exercise_has_a_solution_that_checks, 0, MAX_CHAPTERS);
    suite_add_tcase(s, run);
    return s;
}
