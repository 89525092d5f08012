/* The labs (labs/NN_name/): a grader a wrong answer cannot pass.
 *
 * Every chapter with exercises has a labs folder of at least two labs. Each lab is three files that
 * agree: the student's stub labs/NN_name/<lab>.c with its contract above it, the worked solution
 * labs/NN_name/solutions/<lab>.c, and its prototype in labs/NN_name/lab.h. Then, proven by running the
 * graders:
 *   - the worked solutions pass (make labs);
 *   - the stubs as the repository holds them (git's HEAD where there is one, so that a student's own
 *     work does not change what this proves) compile warning-free and fail, each lab naming its first
 *     differing element;
 *   - each mutant in labs/NN_name/solutions/mutants.txt (a small mistake: an operator, a constant, an
 *     off-by-one), applied to the solution, fails the grader naming that lab; every lab has at least
 *     three.
 * Graders are compiled with build/labs/cc.sh, which make writes with the build's own flags. */
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CHAPTERS 16
#define MAX_LABS 8
#define MIN_LABS 2
#define MIN_MUTANTS 3
#define OUT_CAP (1 << 16)
/* A grader is compiled from a few files and runs in well under a second; the limit leaves room for
 * the sanitizer build and a loaded machine (Check's multiplier scales it). */
#define CHAPTER_LIMIT_S 240

static char out[OUT_CAP], err[OUT_CAP];

typedef struct {
    char dir[96];               /* labs/NN_name */
    char labs[MAX_LABS][64];    /* lab names, the stubs' files without .c */
    size_t n_labs;
} chapter;

static const char *build_dir(void)
{
    static char dir[4096];
    const char *bin = getenv("KVL_BIN");
    snprintf(dir, sizeof dir, "%s/..", bin && *bin ? bin : kvl_path("build/bin"));
    return dir;
}

/* The lab folders, each with its labs: the .c files beside grade.c. */
static size_t list_lab_chapters(chapter *ch)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cd '%s' && for d in labs/[0-9][0-9]_*/; do echo \"$d\"; done", kvl_path("."));
    ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 0);
    size_t n = 0;
    for (char *line = strtok(out, "\n"); line && n < MAX_CHAPTERS; line = strtok(NULL, "\n")) {
        chapter *c = &ch[n++];
        memset(c, 0, sizeof *c);
        snprintf(c->dir, sizeof c->dir, "%.*s", (int)strlen(line) - 1, line);
    }
    for (size_t i = 0; i < n; i++) {
        chapter *c = &ch[i];
        snprintf(cmd, sizeof cmd, "cd '%s/%s' && ls *.c", kvl_path("."), c->dir);
        ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 0);
        for (char *f = strtok(out, "\n"); f; f = strtok(NULL, "\n")) {
            if (!strcmp(f, "grade.c")) continue;
            ck_assert_msg(c->n_labs < MAX_LABS, "%s: more than %d labs", c->dir, MAX_LABS);
            snprintf(c->labs[c->n_labs++], sizeof c->labs[0], "%.*s", (int)strlen(f) - 2, f);
        }
    }
    return n;
}

static char *lab_file(const chapter *c, const char *rel)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", c->dir, rel);
    char *text = kvl_read_text(kvl_path(path));
    ck_assert_msg(text != NULL, "%s is missing", path);
    return text;
}

START_TEST(every_chapter_has_labs)
{
    char names[MAX_CHAPTERS][64];
    const size_t n = kvl_list_chapters(names, MAX_CHAPTERS, "exercises.md");
    static chapter ch[MAX_CHAPTERS];
    const size_t m = list_lab_chapters(ch);
    for (size_t i = 0; i < n; i++) {
        const chapter *found = NULL;
        for (size_t j = 0; j < m; j++)
            if (!strcmp(ch[j].dir + strlen("labs/"), names[i])) found = &ch[j];
        ck_assert_msg(found, "chapters/%s has exercises but no labs/%s", names[i], names[i]);
        ck_assert_msg(found->n_labs >= MIN_LABS, "labs/%s has %zu labs, expected at least %d", names[i],
                      found->n_labs, MIN_LABS);
    }
}
END_TEST

/* stub, solution and prototype agree, and the stub carries its contract */
START_TEST(each_lab_is_a_stub_a_solution_and_a_prototype)
{
    static chapter ch[MAX_CHAPTERS];
    const size_t n = list_lab_chapters(ch);
    for (size_t i = 0; i < n; i++) {
        char *header = lab_file(&ch[i], "lab.h");
        for (size_t k = 0; k < ch[i].n_labs; k++) {
            const char *lab = ch[i].labs[k];
            char rel[128], call[80];
            snprintf(rel, sizeof rel, "%s.c", lab);
            char *stub = lab_file(&ch[i], rel);
            snprintf(rel, sizeof rel, "solutions/%s.c", lab);
            free(lab_file(&ch[i], rel));
            snprintf(call, sizeof call, " %s(", lab);
            ck_assert_msg(strstr(header, call), "%s/lab.h declares no function %s", ch[i].dir, lab);
            ck_assert_msg(!strncmp(stub, "/* Lab: ", 8) && strstr(stub, "chapter ") && strstr(stub, "grader"),
                          "%s/%s.c: the stub opens with its contract (\"/* Lab: ...\"), naming the chapter "
                          "and what the grader checks", ch[i].dir, lab);
            free(stub);
        }
        free(header);
    }
}
END_TEST

START_TEST(the_worked_solutions_pass)
{
    static chapter ch[MAX_CHAPTERS];
    const size_t n = list_lab_chapters(ch);
    for (size_t i = 0; i < n; i++) {
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "'%s/labs/%s/grade_solution'", build_dir(), ch[i].dir + strlen("labs/"));
        const int rc = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: the worked solutions fail their grader (exit %d):\n%s%s", ch[i].dir, rc, out,
                      err);
        for (size_t k = 0; k < ch[i].n_labs; k++) {
            char right[96];
            snprintf(right, sizeof right, "%s: right", ch[i].labs[k]);
            ck_assert_msg(strstr(out, right), "%s: the grader never graded %s:\n%s", ch[i].dir, ch[i].labs[k],
                          out);
        }
    }
}
END_TEST

/* Compile the grader of chapter c from `sources` (in the repository root's terms or absolute) into
 * dir/grade and run it; its exit status, its output in out. */
static int grade(const chapter *c, const char *dir, const char *sources)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "('%s/labs/cc.sh' '%s/grade' %s/grade.c labs/grade.c -I%s %s 2>&1)", build_dir(), dir,
             c->dir, c->dir, sources);
    const int built = kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
    ck_assert_msg(built == 0, "%s: the grader does not compile with %s (exit %d):\n%s%s", c->dir, sources, built,
                  out, err);
    snprintf(cmd, sizeof cmd, "'%s/grade'", dir);
    return kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
}

static void make_temp(char *dir, size_t cap)
{
    snprintf(dir, cap, "/tmp/kvl-labs-XXXXXX");
    ck_assert_msg(mkdtemp(dir) != NULL, "mkdtemp failed");
}

static void remove_temp(const char *dir)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
}

/* The stubs as committed: git's HEAD where the tree is a repository, else the files. */
START_TEST(the_stubs_fail_naming_their_first_wrong_element)
{
    static chapter ch[MAX_CHAPTERS];
    const size_t n = list_lab_chapters(ch);
    for (size_t i = 0; i < n; i++) {
        char dir[64], cmd[8192], sources[2048] = "";
        make_temp(dir, sizeof dir);
        for (size_t k = 0; k < ch[i].n_labs; k++) {
            const char *lab = ch[i].labs[k];
            snprintf(cmd, sizeof cmd,
                     "(cd '%s' && { git show 'HEAD:%s/%s.c' 2>/dev/null || cat '%s/%s.c'; } > '%s/%s.c')",
                     kvl_path("."), ch[i].dir, lab, ch[i].dir, lab, dir, lab);
            ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 0);
            snprintf(sources + strlen(sources), sizeof sources - strlen(sources), " '%s/%s.c'", dir, lab);
        }
        const int rc = grade(&ch[i], dir, sources);
        ck_assert_msg(rc == 1, "%s: the stubs' grader exits %d, expected 1:\n%s", ch[i].dir, rc, out);
        for (size_t k = 0; k < ch[i].n_labs; k++) {
            char wrong[96];
            snprintf(wrong, sizeof wrong, "%s: WRONG", ch[i].labs[k]);
            const char *at = strstr(out, wrong);
            ck_assert_msg(at && strstr(at, "first difference at ") && strstr(at, "expected ") &&
                              strstr(at, "hint: "),
                          "%s: the stub %s is not graded wrong with its first difference and a hint:\n%s",
                          ch[i].dir, ch[i].labs[k], out);
        }
        remove_temp(dir);
    }
}
END_TEST

typedef struct {
    char file[64];
    char *from, *to;   /* into the mutants text */
} mutant;

/* The blocks of mutants.txt: [file] / from: ... / to: ... */
static size_t read_mutants(char *text, mutant *m, size_t max, const char *where)
{
    size_t n = 0;
    mutant *cur = NULL;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = 0;
        if (line[0] == '#' || !line[0]) continue;
        if (line[0] == '[') {
            ck_assert_msg(n < max, "%s: more than %zu mutants", where, max);
            cur = &m[n++];
            memset(cur, 0, sizeof *cur);
            snprintf(cur->file, sizeof cur->file, "%.*s", (int)strcspn(line + 1, "]"), line + 1);
        } else if (cur && !strncmp(line, "from: ", 6))
            cur->from = line + 6;
        else if (cur && !strncmp(line, "to: ", 4))
            cur->to = line + 4;
        else
            ck_abort_msg("%s: \"%s\": expected [file], from: or to:", where, line);
    }
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(m[i].from && m[i].to && strcmp(m[i].from, m[i].to),
                      "%s: mutant %zu of %s needs from and a different to", where, i + 1, m[i].file);
    return n;
}

/* Copy the chapter's solutions into dir with mutant m applied to its file. */
static void write_mutant(const chapter *c, const mutant *m, const char *dir)
{
    char cmd[8192], rel[128];
    snprintf(cmd, sizeof cmd, "cp '%s/%s/solutions/'*.c '%s/'", kvl_path("."), c->dir, dir);
    ck_assert_int_eq(kvl_run(cmd, NULL, out, sizeof out, err, sizeof err), 0);
    snprintf(rel, sizeof rel, "solutions/%s", m->file);
    char *text = lab_file(c, rel);
    const char *at = strstr(text, m->from);
    ck_assert_msg(at && !strstr(at + 1, m->from), "%s/%s: the mutant's text \"%s\" must occur exactly once",
                  c->dir, rel, m->from);
    char path[8192];
    snprintf(path, sizeof path, "%s/%s", dir, m->file);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fprintf(f, "%.*s%s%s", (int)(at - text), text, m->to, at + strlen(m->from));
    ck_assert_int_eq(fclose(f), 0);
    free(text);
}

START_TEST(every_mutant_of_a_solution_fails_its_lab)
{
    static chapter ch[MAX_CHAPTERS];
    const size_t n = list_lab_chapters(ch);
    for (size_t i = 0; i < n; i++) {
        char *text = lab_file(&ch[i], "solutions/mutants.txt");
        static mutant m[64];
        char where[128];
        snprintf(where, sizeof where, "%s/solutions/mutants.txt", ch[i].dir);
        const size_t n_mut = read_mutants(text, m, 64, where);
        for (size_t k = 0; k < ch[i].n_labs; k++) {
            char file[80];
            size_t count = 0;
            snprintf(file, sizeof file, "%s.c", ch[i].labs[k]);
            for (size_t j = 0; j < n_mut; j++) count += !strcmp(m[j].file, file);
            ck_assert_msg(count >= MIN_MUTANTS, "%s: %zu mutants of %s, expected at least %d", where, count, file,
                          MIN_MUTANTS);
        }
        for (size_t j = 0; j < n_mut; j++) {
            char dir[64], lab[64], wrong[96], stopped[96];
            make_temp(dir, sizeof dir);
            write_mutant(&ch[i], &m[j], dir);
            char sources[128];
            snprintf(sources, sizeof sources, "'%s/'*.c", dir);
            const int rc = grade(&ch[i], dir, sources);
            snprintf(lab, sizeof lab, "%.*s", (int)strlen(m[j].file) - 2, m[j].file);
            snprintf(wrong, sizeof wrong, "%s: WRONG", lab);
            snprintf(stopped, sizeof stopped, "%s: STOPPED", lab);
            ck_assert_msg(rc == 1 && (strstr(out, wrong) || strstr(out, stopped)),
                          "%s: the grader passes a mutant of %s (\"%s\" → \"%s\"):\n%s", ch[i].dir, m[j].file,
                          m[j].from, m[j].to, out);
            remove_temp(dir);
        }
        free(text);
    }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_labs");
    TCase *tc = tcase_create("labs");
    tcase_set_timeout(tc, CHAPTER_LIMIT_S * MAX_CHAPTERS);
    tcase_add_test(tc, every_chapter_has_labs);
    tcase_add_test(tc, each_lab_is_a_stub_a_solution_and_a_prototype);
    tcase_add_test(tc, the_worked_solutions_pass);
    tcase_add_test(tc, the_stubs_fail_naming_their_first_wrong_element);
    tcase_add_test(tc, every_mutant_of_a_solution_fails_its_lab);
    suite_add_tcase(s, tc);
    return s;
}
