/* The course cites only what a reader of the repository can open.
 *
 * The files checked are the repository's text sources, found by walking its source folders (a test
 * cannot count on git in every clone): README.md and Makefile at the top, and under chapters/, ref/,
 * formats/, cuda/, notebooks_c/ and tests/ every Markdown, C, CUDA, Python and shell file, and the
 * .ipynb and .json files under chapters/. Hidden folders and __pycache__ are skipped. The rules:
 *
 *   - A relative Markdown link [text](target) names a file or folder of the repository, counted from
 *     the linking file's folder; an #anchor is dropped, and http:, https: and mailto: targets are not
 *     files.
 *   - Every other name of a Markdown document (a word ending in .md, in backticks or not) resolves from
 *     the file's folder or from the repository root, and a bare name (no folder) may also be a file that a
 *     chapter folder holds (README.md, as every chapter has); the text of a Markdown link is checked as
 *     its link.
 *     Not names: a word right after a printf '%' (a format string), an absolute path, a path under build/
 *     (what make writes), and a placeholder: a path part of two or three capitals, optionally followed by
 *     _name (NN_name, DIR, OUT).
 *   - The section sign (U+00A7) appears nowhere. The course's own pages are cited by file and section
 *     title (chapters/06_v4/README.md, "Where the sources disagree"), a public document's sections by the
 *     document's name and the word "section" (OCP MX v1.0, section 6.3), so no bare section number can
 *     point into a document the reader does not have.
 *   - No file names four documents the repository does not hold (NAMES below, with .md appended here so
 *     that this file does not spell them), nor a claim handle of the form c<chapter>-<name> (a 'c'
 *     starting a word, a chapter number, a hyphen and a letter or digit), which no page here defines.
 *   - Every mark of chapters/DISAGREEMENTS.md (✔ ✘ ⚠ ≈) that a chapter text uses is defined there, in
 *     a row of its marks table ("| ✔ | ..."), and every chapter's "Where the sources disagree" section
 *     links that page.
 *   - Every row of the table on chapters/DISAGREEMENTS.md ends in one of those marks, and every command
 *     it names (`build/bin/PROGRAM ...`, `build/tests/SUITE`) is a program the build makes (in $KVL_BIN,
 *     else build/bin) or a suite in tests/.
 *   - chapters/SOURCES.md exists and every chapter text links it.
 *   - No text under chapters/ or notebooks_c/ but chapters/SOURCES.md and chapters/DISAGREEMENTS.md
 *     names a secondary write-up ("write-up", "walkthrough", in any case): the reader cannot open one,
 *     so a chapter states the claim itself.
 * A failing test lists every offending place on stderr, file:line first, then fails once. */
#include "common.h"

#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_FILES 1024
#define PATH_CAP 512

typedef struct {
    char path[PATH_CAP]; /* relative to the root: "ref/mla.h" */
} source;

static source files[MAX_FILES];
static size_t n_files;
static size_t n_bad; /* offending places found by the running test */

static const char *const NAMES[] = {"generations", "formats", "figures", "DESIGN"};
#define SECTION_SIGN "\xc2\xa7" /* U+00A7 in UTF-8 */
static const char *const MARKS[] = {"✔", "✘", "⚠", "≈"};

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

static int is_text_source(const char *rel, const char *name)
{
    static const char *const exts[] = {".md", ".c", ".h", ".cu", ".cuh", ".py", ".sh"};
    if (strcmp(name, "Makefile") == 0) return 1;
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (ends_with(name, exts[i])) return 1;
    return strncmp(rel, "chapters/", 9) == 0 && (ends_with(name, ".ipynb") || ends_with(name, ".json"));
}

static void walk(const char *rel)
{
    DIR *d = opendir(kvl_path(rel));
    ck_assert_msg(d != NULL, "cannot list %s (set KVL_ROOT)", rel);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strcmp(e->d_name, "__pycache__") == 0) continue;
        char child[PATH_CAP];
        snprintf(child, sizeof child, "%s/%s", rel, e->d_name);
        struct stat st;
        if (stat(kvl_path(child), &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            walk(child);
        } else if (S_ISREG(st.st_mode) && is_text_source(child, e->d_name)) {
            ck_assert_msg(n_files < MAX_FILES, "more than %d source files", MAX_FILES);
            snprintf(files[n_files++].path, PATH_CAP, "%s", child);
        }
    }
    closedir(d);
}

static void list_sources(void)
{
    static const char *const top[] = {"README.md", "Makefile"};
    static const char *const folders[] = {"chapters", "ref", "formats", "cuda", "notebooks_c", "tests"};
    n_files = 0;
    n_bad = 0;
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++)
        snprintf(files[n_files++].path, PATH_CAP, "%s", top[i]);
    for (size_t i = 0; i < sizeof folders / sizeof folders[0]; i++) walk(folders[i]);
    ck_assert_msg(n_files > 100, "found only %zu source files", n_files);
}

static char *read_source(const char *rel)
{
    char *text = kvl_read_text(kvl_path(rel));
    ck_assert_msg(text != NULL, "cannot read %s", rel);
    return text;
}

static size_t line_of(const char *text, const char *at)
{
    size_t line = 1;
    for (const char *p = text; p < at; p++) line += *p == '\n';
    return line;
}

/* One offending place, "file:line: what", on stderr; the test fails after listing them all. */
static void offence(const char *file, const char *text, const char *at, const char *what, int len, const char *word)
{
    fprintf(stderr, "%s:%zu: %s: %.*s\n", file, line_of(text, at), what, len, word);
    n_bad++;
}

static void expect_no_offence(const char *rule)
{
    ck_assert_msg(n_bad == 0, "%zu places (listed on stderr) %s", n_bad, rule);
}

/* Whether some chapters/NN_name folder holds a file called name[len]. */
static int in_a_chapter(const char *name, size_t len)
{
    DIR *d = opendir(kvl_path("chapters"));
    ck_assert_msg(d != NULL, "cannot list chapters (set KVL_ROOT)");
    int found = 0;
    struct dirent *e;
    while (!found && (e = readdir(d))) {
        char rel[PATH_CAP];
        snprintf(rel, sizeof rel, "chapters/%.200s/%.*s", e->d_name, (int)len, name);
        found = isdigit((unsigned char)e->d_name[0]) && access(kvl_path(rel), F_OK) == 0;
    }
    closedir(d);
    return found;
}

/* Whether target[len] names a file or folder, from the folder of `from` or (when root_too) the root or,
 * for a bare name, a chapter folder. */
static int resolves(const char *from, const char *target, size_t len, int root_too)
{
    char rel[PATH_CAP * 2];
    const char *slash = strrchr(from, '/');
    int dir = slash ? (int)(slash - from) : 0;
    snprintf(rel, sizeof rel, "%.*s%s%.*s", dir, from, dir ? "/" : "", (int)len, target);
    if (access(kvl_path(rel), F_OK) == 0) return 1;
    snprintf(rel, sizeof rel, "%.*s", (int)len, target);
    if (!root_too) return 0;
    return access(kvl_path(rel), F_OK) == 0 || (!memchr(target, '/', len) && in_a_chapter(target, len));
}

static int is_path_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '.' || c == '/' || c == '-';
}

/* A path part of two or three capitals, optionally followed by _name: NN_name, DIR, OUT. */
static int is_placeholder(const char *word, size_t len)
{
    const char *part = word, *end = word + len;
    while (part < end) {
        const char *stop = part;
        while (stop < end && *stop != '/' && *stop != '.') stop++;
        size_t caps = 0;
        while (part + caps < stop && isupper((unsigned char)part[caps])) caps++;
        if (caps >= 2 && caps <= 3 && (part + caps == stop || part[caps] == '_')) return 1;
        part = stop + 1;
    }
    return 0;
}

/* ---- documents ------------------------------------------------------------------------------------- */

START_TEST(test_no_markdown_link_points_at_a_missing_file)
{
    list_sources();
    size_t checked = 0;
    for (size_t i = 0; i < n_files; i++) {
        if (!ends_with(files[i].path, ".md")) continue;
        char *text = read_source(files[i].path);
        for (const char *p = strstr(text, "]("); p; p = strstr(p + 2, "](")) {
            const char *target = p + 2, *end = strpbrk(target, ")# \n");
            if (!end || end == target) continue;
            if (!strncmp(target, "http:", 5) || !strncmp(target, "https:", 6) || !strncmp(target, "mailto:", 7))
                continue;
            if (!resolves(files[i].path, target, (size_t)(end - target), 0))
                offence(files[i].path, text, p, "links a file the repository lacks", (int)(end - target), target);
            checked++;
        }
        free(text);
    }
    ck_assert_msg(checked >= 10, "only %zu relative links found", checked);
    expect_no_offence("link a file the repository lacks");
}
END_TEST

START_TEST(test_no_file_cites_a_missing_document)
{
    list_sources();
    size_t checked = 0;
    for (size_t i = 0; i < n_files; i++) {
        char *text = read_source(files[i].path);
        for (const char *p = strstr(text, ".md"); p; p = strstr(p + 3, ".md")) {
            if (is_path_char(p[3]) && p[3] != '.' && p[3] != '/') continue; /* .mdx, .md5 */
            const char *start = p;
            while (start > text && is_path_char(start[-1])) start--;
            size_t len = (size_t)(p + 3 - start);
            if (start == p || p[-1] == '/') continue;                           /* ".md" alone */
            if (p[3] == ']' && p[4] == '(') continue; /* a link's text: the link itself is checked above */
            if (start > text && start[-1] == '%') continue;                     /* "%s/README.md" */
            if (*start == '/' || !strncmp(start, "build/", 6) || is_placeholder(start, len)) continue;
            if (!resolves(files[i].path, start, len, 1))
                offence(files[i].path, text, start, "names a document the repository lacks", (int)len, start);
            checked++;
        }
        free(text);
    }
    ck_assert_msg(checked >= 10, "only %zu document names found", checked);
    expect_no_offence("name a document the repository lacks");
}
END_TEST

START_TEST(test_no_file_uses_a_section_sign)
{
    list_sources();
    for (size_t i = 0; i < n_files; i++) {
        char *text = read_source(files[i].path);
        for (const char *p = strstr(text, SECTION_SIGN); p; p = strstr(p + 1, SECTION_SIGN))
            offence(files[i].path, text, p, "section sign", 24, p);
        free(text);
    }
    expect_no_offence("use the section sign: cite a section by its title, or a public document's by its name and \"section N\"");
}
END_TEST

START_TEST(test_no_file_names_an_absent_document_or_a_claim_handle)
{
    list_sources();
    for (size_t i = 0; i < n_files; i++) {
        char *text = read_source(files[i].path);
        for (size_t k = 0; k < sizeof NAMES / sizeof NAMES[0]; k++) {
            char name[32];
            snprintf(name, sizeof name, "%s.md", NAMES[k]);
            for (const char *p = strstr(text, name); p; p = strstr(p + 1, name))
                offence(files[i].path, text, p, "names a document the repository does not hold", (int)strlen(name), p);
        }
        for (const char *p = text; *p; p++) {
            if (*p != 'c' || (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_'))) continue;
            const char *q = p + 1;
            while (isdigit((unsigned char)*q)) q++;
            if (q > p + 1 && *q == '-' && isalnum((unsigned char)q[1]))
                offence(files[i].path, text, p, "a claim handle no page of the repository defines", 12, p);
        }
        free(text);
    }
    expect_no_offence("name an absent document or a claim handle");
}
END_TEST

/* The secondary write-ups the course was built from are not in the repository: a chapter states each
 * claim itself (what, the number, its primary source) and only the sources and disagreements pages
 * name who else makes it. Words that name such a document, matched in any case. */
static const char *const SECONDARY[] = {"write-up", "walkthrough"};

static int states_its_claims_itself(const char *rel)
{
    return (!strncmp(rel, "chapters/", 9) || !strncmp(rel, "notebooks_c/", 12)) &&
           strcmp(rel, "chapters/SOURCES.md") != 0 && strcmp(rel, "chapters/DISAGREEMENTS.md") != 0;
}

START_TEST(test_no_course_text_leans_on_a_write_up_the_reader_cannot_open)
{
    list_sources();
    size_t checked = 0;
    for (size_t i = 0; i < n_files; i++) {
        if (!states_its_claims_itself(files[i].path)) continue;
        char *text = read_source(files[i].path);
        for (char *q = text; *q; q++) *q = (char)tolower((unsigned char)*q);
        for (size_t k = 0; k < sizeof SECONDARY / sizeof SECONDARY[0]; k++)
            for (const char *p = strstr(text, SECONDARY[k]); p; p = strstr(p + 1, SECONDARY[k]))
                offence(files[i].path, text, p, "names a secondary write-up", (int)strcspn(p, "\n"), p);
        checked++;
        free(text);
    }
    ck_assert_msg(checked >= 50, "only %zu course files checked", checked);
    expect_no_offence("name a secondary write-up outside chapters/SOURCES.md and chapters/DISAGREEMENTS.md: "
                      "state the claim, its number and its primary source instead");
}
END_TEST

/* ---- the sources and disagreements pages ------------------------------------------------------------ */

/* chapters/NN_name/README.md texts, by folder name */
static size_t list_chapter_texts(char names[][64], size_t cap)
{
    DIR *d = opendir(kvl_path("chapters"));
    ck_assert_msg(d != NULL, "cannot list chapters (set KVL_ROOT)");
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < cap) {
        char rel[128];
        snprintf(rel, sizeof rel, "chapters/%.63s/README.md", e->d_name);
        if (isdigit((unsigned char)e->d_name[0]) && access(kvl_path(rel), R_OK) == 0)
            snprintf(names[n++], 64, "%.63s", e->d_name);
    }
    closedir(d);
    ck_assert_msg(n >= 6, "found %zu chapter texts", n);
    return n;
}

START_TEST(test_every_mark_a_chapter_uses_is_defined)
{
    char *page = read_source("chapters/DISAGREEMENTS.md");
    char names[16][64];
    size_t n = list_chapter_texts(names, 16);
    for (size_t i = 0; i < n; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "chapters/%s/README.md", names[i]);
        char *text = read_source(rel);
        for (size_t k = 0; k < sizeof MARKS / sizeof MARKS[0]; k++) {
            if (!strstr(text, MARKS[k])) continue;
            char row[32];
            snprintf(row, sizeof row, "\n| %s |", MARKS[k]);
            ck_assert_msg(strstr(page, row) != NULL, "%s uses %s, which chapters/DISAGREEMENTS.md does not define", rel,
                          MARKS[k]);
        }
        free(text);
    }
    free(page);
}
END_TEST

START_TEST(test_every_disagreements_section_links_the_table)
{
    char names[16][64];
    size_t n = list_chapter_texts(names, 16);
    for (size_t i = 0; i < n; i++) {
        char rel[128];
        snprintf(rel, sizeof rel, "chapters/%s/README.md", names[i]);
        char *text = read_source(rel);
        const char *section = strstr(text, "\n## Where the sources disagree\n");
        ck_assert_msg(section != NULL, "%s has no \"Where the sources disagree\" section", rel);
        const char *next = strstr(section + 1, "\n## ");
        const char *link = strstr(section, "](../DISAGREEMENTS" ".md");
        ck_assert_msg(link && (!next || link < next), "%s: \"Where the sources disagree\" does not link "
                      "chapters/DISAGREEMENTS.md", rel);
        ck_assert_msg(strstr(text, "](../SOURCES" ".md") != NULL, "%s does not link chapters/SOURCES.md", rel);
        free(text);
    }
}
END_TEST

/* The rows of the table under "## The table", one NUL-terminated line each, in place. */
static size_t table_rows(char *page, char *rows[], size_t cap)
{
    char *p = strstr(page, "\n## The table\n");
    ck_assert_msg(p != NULL, "chapters/DISAGREEMENTS.md has no \"## The table\" section");
    char *end = strstr(p + 1, "\n## ");
    if (end) *end = '\0';
    size_t n = 0;
    for (char *line = strtok(p, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] != '|' || !strncmp(line, "| ch.", 5) || !strncmp(line, "|---", 4)) continue;
        ck_assert_msg(n < cap, "more than %zu rows", cap);
        rows[n++] = line;
    }
    return n;
}

START_TEST(test_every_table_row_ends_in_a_defined_mark)
{
    char *page = read_source("chapters/DISAGREEMENTS.md");
    char *rows[256];
    size_t n = table_rows(page, rows, 256);
    ck_assert_msg(n >= 20, "only %zu rows in the table", n);
    for (size_t i = 0; i < n; i++) {
        int marked = 0;
        for (size_t k = 0; k < sizeof MARKS / sizeof MARKS[0]; k++) {
            char tail[32];
            snprintf(tail, sizeof tail, "| %s |", MARKS[k]);
            marked |= ends_with(rows[i], tail);
        }
        ck_assert_msg(marked, "chapters/DISAGREEMENTS.md row %zu has no mark: %.80s", i + 1, rows[i]);
    }
    free(page);
}
END_TEST

START_TEST(test_every_command_the_table_names_exists)
{
    char *page = read_source("chapters/DISAGREEMENTS.md");
    char *rows[256];
    size_t n = table_rows(page, rows, 256), checked = 0;
    const char *bin = getenv("KVL_BIN");
    for (size_t i = 0; i < n; i++) {
        for (const char *p = strstr(rows[i], "`build/"); p; p = strstr(p + 1, "`build/")) {
            const char *name = p + 1;
            size_t len = strcspn(name, " `");
            char rel[PATH_CAP], path[PATH_CAP * 2];
            snprintf(rel, sizeof rel, "%.*s", (int)len, name);
            if (!strncmp(name, "build/bin/", 10)) {
                if (bin && *bin)
                    snprintf(path, sizeof path, "%s/%s", bin, rel + 10);
                else
                    snprintf(path, sizeof path, "%s", kvl_path(rel));
                ck_assert_msg(access(path, X_OK) == 0, "chapters/DISAGREEMENTS.md names %.*s, which the build does not make",
                              (int)len, name);
            } else {
                ck_assert_msg(!strncmp(name, "build/tests/", 12), "chapters/DISAGREEMENTS.md names %.*s", (int)len, name);
                snprintf(path, sizeof path, "tests/%s.c", rel + 12);
                ck_assert_msg(access(kvl_path(path), R_OK) == 0, "chapters/DISAGREEMENTS.md names %s, but %s does not exist",
                              rel, path);
            }
            checked++;
        }
    }
    ck_assert_msg(checked >= n, "only %zu commands for %zu rows", checked, n);
    free(page);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_citations");
    TCase *docs = tcase_create("documents");
    tcase_add_test(docs, test_no_markdown_link_points_at_a_missing_file);
    tcase_add_test(docs, test_no_file_cites_a_missing_document);
    tcase_add_test(docs, test_no_file_uses_a_section_sign);
    tcase_add_test(docs, test_no_file_names_an_absent_document_or_a_claim_handle);
    tcase_add_test(docs, test_no_course_text_leans_on_a_write_up_the_reader_cannot_open);
    suite_add_tcase(s, docs);
    TCase *pages = tcase_create("pages");
    tcase_add_test(pages, test_every_mark_a_chapter_uses_is_defined);
    tcase_add_test(pages, test_every_disagreements_section_links_the_table);
    tcase_add_test(pages, test_every_table_row_ends_in_a_defined_mark);
    tcase_add_test(pages, test_every_command_the_table_names_exists);
    suite_add_tcase(s, pages);
    return s;
}
