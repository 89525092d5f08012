/* Reliability of the programs that read a fixed config under the project root (v4_cache reads
 * ref/configs/deepseek-v4-flash.json, v41_cache ref/configs/deepseek-v4.1-flash.json): a missing, empty,
 * truncated or non-object file, or the other generation's config in its place, is answered with exit
 * status 2, one line on stderr that starts with the program's name and names the file and the defect,
 * and nothing on stdout. Each bad file sits in a temporary root handed over as KVL_ROOT. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define CAP (1 << 16)

static char out[CAP], err[CAP];

static const struct {
    const char *program, *config, *other;   /* other: the other generation's config, the wrong one */
} CACHE_PROGRAMS[] = {
    {"v4_cache", "ref/configs/deepseek-v4-flash.json", "ref/configs/deepseek-v4.1-flash.json"},
    {"v41_cache", "ref/configs/deepseek-v4.1-flash.json", "ref/configs/deepseek-v4-flash.json"},
};

/* root[64]: a new temporary root holding ref/configs/; path[128]: where `relative` goes in it */
static void make_root(char *root, char *path, const char *relative)
{
    snprintf(root, 64, "/tmp/kvl_root_XXXXXX");
    ck_assert(mkdtemp(root) != NULL);
    char dir[128];
    snprintf(dir, sizeof dir, "%s/ref", root);
    ck_assert(mkdir(dir, 0700) == 0);
    snprintf(dir, sizeof dir, "%s/ref/configs", root);
    ck_assert(mkdir(dir, 0700) == 0);
    snprintf(path, 128, "%s/%s", root, relative);
}

static void remove_root(const char *root, const char *path)
{
    char dir[128];
    unlink(path);
    snprintf(dir, sizeof dir, "%s/ref/configs", root);
    rmdir(dir);
    snprintf(dir, sizeof dir, "%s/ref", root);
    rmdir(dir);
    rmdir(root);
}

/* Program i, its config replaced by text[len] (or absent when text is NULL), exits 2 with one line on
 * stderr that starts "PROGRAM: ", names the file and contains `names`, and prints nothing. */
static void expect_refused(size_t i, const char *text, size_t len, const char *names)
{
    char root[64], path[128], cmd[256];
    make_root(root, path, CACHE_PROGRAMS[i].config);
    if (text) {
        FILE *f = fopen(path, "wb");
        ck_assert(f != NULL);
        ck_assert(fwrite(text, 1, len, f) == len);
        ck_assert(fclose(f) == 0);
    }
    snprintf(cmd, sizeof cmd, "KVL_ROOT='%s' %s", root, CACHE_PROGRAMS[i].program);
    const int rc = kvl_run(cmd, "", out, CAP, err, CAP);
    remove_root(root, path);
    const size_t word = strlen(CACHE_PROGRAMS[i].program);
    size_t lines = 0;
    for (const char *p = err; *p; p++) lines += *p == '\n';
    ck_assert_msg(rc == 2, "%s: exit %d, want 2 (stderr: %s)", cmd, rc, err);
    ck_assert_msg(out[0] == '\0', "%s: printed to stdout: %.200s", cmd, out);
    ck_assert_msg(lines == 1 && !strncmp(err, CACHE_PROGRAMS[i].program, word) && err[word] == ':',
                  "%s: stderr is not one line starting with the program's name: %s", cmd, err);
    ck_assert_msg(strstr(err, path) != NULL, "%s: stderr does not name the file %s: %s", cmd, path, err);
    ck_assert_msg(strstr(err, names) != NULL, "%s: stderr does not say \"%s\": %s", cmd, names, err);
}

#define N_PROGRAMS (sizeof CACHE_PROGRAMS / sizeof CACHE_PROGRAMS[0])

START_TEST(test_a_missing_config_is_refused_with_the_reason)
{
    for (size_t i = 0; i < N_PROGRAMS; i++) expect_refused(i, NULL, 0, "No such file");
}
END_TEST

START_TEST(test_an_empty_or_truncated_config_is_refused)
{
    for (size_t i = 0; i < N_PROGRAMS; i++) {
        expect_refused(i, "", 0, "empty file");
        char *text = kvl_read_text(kvl_path(CACHE_PROGRAMS[i].config));
        ck_assert(text != NULL);
        expect_refused(i, text, strlen(text) / 2, "not valid JSON");
        free(text);
    }
}
END_TEST

START_TEST(test_a_json_array_in_place_of_the_config_is_refused)
{
    static const char text[] = "[{\"hidden_size\": 4096}]\n";
    for (size_t i = 0; i < N_PROGRAMS; i++) expect_refused(i, text, sizeof text - 1, "object");
}
END_TEST

START_TEST(test_the_other_generations_config_is_refused_by_name)
{
    for (size_t i = 0; i < N_PROGRAMS; i++) {
        char *text = kvl_read_text(kvl_path(CACHE_PROGRAMS[i].other));
        ck_assert(text != NULL);
        expect_refused(i, text, strlen(text), i == 0 ? "not a V4 config" : "not a V4.1 config");
        free(text);
    }
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reliability_cache_programs");
    TCase *tc = tcase_create("fixed_configs");
    tcase_add_test(tc, test_a_missing_config_is_refused_with_the_reason);
    tcase_add_test(tc, test_an_empty_or_truncated_config_is_refused);
    tcase_add_test(tc, test_a_json_array_in_place_of_the_config_is_refused);
    tcase_add_test(tc, test_the_other_generations_config_is_refused_by_name);
    suite_add_tcase(s, tc);
    return s;
}
