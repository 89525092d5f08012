/* Every folder map is honest: a folder's README.md lists each source file the folder holds, and every
 * file or folder it lists exists.
 *
 * A map entry is a Markdown list item that starts with the name it describes, linked or in backticks:
 * "- [attend.h](attend.h): what it holds", "- `attend.h`: ...", or "- [bench/](bench/README.md): ..."
 * for a folder; the name is counted from the README's folder. Source files are the folder's own (not
 * its subfolders') files ending in .c, .h, .cu, .cuh, .cc, .py, .sh, .js or .css. Prose elsewhere in
 * the README may name any file; only the entries are the map.
 *
 * The folders are listed here by name (MAPS); each must have its README. */
#include "common.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NAME_CAP 256

static const char *const MAPS[] = {"formats",     "ref",  "ref/core", "cpu",   "cuda", "cuda/emu", "chapters/common",
                                   "chapters/tools", "notebooks_c", "site", "tests", "labs"};
#define N_MAPS (sizeof MAPS / sizeof MAPS[0])

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), k = strlen(tail);
    return n >= k && strcmp(s + n - k, tail) == 0;
}

static int is_source(const char *name)
{
    static const char *const exts[] = {".c", ".h", ".cu", ".cuh", ".cc", ".py", ".sh", ".js", ".css"};
    for (size_t i = 0; i < sizeof exts / sizeof exts[0]; i++)
        if (ends_with(name, exts[i])) return 1;
    return 0;
}

/* The README of MAPS[i]. */
static char *map_text(size_t i)
{
    char rel[NAME_CAP];
    snprintf(rel, sizeof rel, "%s/README.md", MAPS[i]);
    char *text = kvl_read_text(kvl_path(rel));
    ck_assert_msg(text != NULL, "%s is missing (set KVL_ROOT)", rel);
    return text;
}

/* The name entry `line` (a line of a map) describes, into name[cap]; 0 when the line is no entry. */
static int entry_name(char *name, size_t cap, const char *line)
{
    if (strncmp(line, "- ", 2) != 0) return 0;
    const char *p = line + 2, *end;
    if (*p == '[') end = strchr(++p, ']');
    else if (*p == '`') end = strchr(++p, '`');
    else end = p + strcspn(p, ": \n");
    if (!end || end == p || (size_t)(end - p) >= cap || memchr(p, '\n', (size_t)(end - p))) return 0;
    snprintf(name, cap, "%.*s", (int)(end - p), p);
    return 1;
}

/* The line after `line`, or NULL after the last. */
static const char *next_line(const char *line)
{
    const char *nl = strchr(line, '\n');
    return nl ? nl + 1 : NULL;
}

/* Whether the map text lists `name` as an entry. */
static int lists(const char *text, const char *name)
{
    char entry[NAME_CAP];
    for (const char *line = text; line; line = next_line(line))
        if (entry_name(entry, sizeof entry, line) && strcmp(entry, name) == 0) return 1;
    return 0;
}

START_TEST(test_every_source_file_is_listed_in_its_folder_map)
{
    size_t missing = 0, checked = 0;
    for (size_t i = 0; i < N_MAPS; i++) {
        char *text = map_text(i);
        DIR *d = opendir(kvl_path(MAPS[i]));
        ck_assert_msg(d != NULL, "cannot list %s", MAPS[i]);
        for (struct dirent *e; (e = readdir(d));) {
            char rel[NAME_CAP * 2];
            struct stat st;
            snprintf(rel, sizeof rel, "%s/%s", MAPS[i], e->d_name);
            if (e->d_name[0] == '.' || !is_source(e->d_name) || stat(kvl_path(rel), &st) || !S_ISREG(st.st_mode))
                continue;
            checked++;
            if (!lists(text, e->d_name)) {
                fprintf(stderr, "%s/README.md: no entry for %s\n", MAPS[i], e->d_name);
                missing++;
            }
        }
        closedir(d);
        free(text);
    }
    ck_assert_msg(checked > 100, "found only %zu source files in the mapped folders", checked);
    ck_assert_msg(missing == 0, "%zu source files (listed on stderr) are not in their folder's README map", missing);
}
END_TEST

START_TEST(test_every_entry_of_a_folder_map_exists)
{
    size_t absent = 0, entries = 0;
    for (size_t i = 0; i < N_MAPS; i++) {
        char *text = map_text(i);
        char name[NAME_CAP], rel[NAME_CAP * 2];
        for (const char *line = text; line; line = next_line(line)) {
            if (!entry_name(name, sizeof name, line)) continue;
            entries++;
            snprintf(rel, sizeof rel, "%s/%s", MAPS[i], name);
            if (access(kvl_path(rel), F_OK) != 0) {
                fprintf(stderr, "%s/README.md lists %s, which does not exist\n", MAPS[i], name);
                absent++;
            }
        }
        free(text);
    }
    ck_assert_msg(entries > 100, "found only %zu map entries", entries);
    ck_assert_msg(absent == 0, "%zu map entries (listed on stderr) name files that do not exist", absent);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("course_folder_maps");
    TCase *maps = tcase_create("maps");
    tcase_add_test(maps, test_every_source_file_is_listed_in_its_folder_map);
    tcase_add_test(maps, test_every_entry_of_a_folder_map_exists);
    suite_add_tcase(s, maps);
    return s;
}
