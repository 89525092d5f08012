/* Every saved fuzz input, replayed in the ordinary build (and so under `make sanitize` and
 * `make memcheck` too): the seeds of each target (tests/fuzz/corpus/<target>/) and the inputs that
 * once broke something (tests/fuzz/regressions/<target>/, each kept when its bug was fixed). Each is
 * held to the property its libFuzzer target checks:
 *   config  kvl_model_parse accepts exactly one JSON object with a consistent model, or fails with one
 *           line naming the file (tests/fuzz/config_property.h);
 *   rows    every layout packs and unpacks within its formats' bounds (tests/fuzz/rows_property.h);
 *   prefix  a prefix-cache file loads whole into the toy V4.1 cache or is refused with the cache left
 *           alone (tests/fuzz/prefix_property.h);
 *   safetensors  kvl_st_parse accepts a file whose tensors tile its data, or fails with one line naming
 *           the file (tests/fuzz/safetensors_property.h);
 *   npy     kvl_npy_parse reads exactly the elements its shape says, or fails with one line naming the
 *           file (tests/fuzz/npy_property.h);
 *   gguf    kvl_gguf_parse reads a GGUF header whose every key and string lies inside the input, and the
 *           model it describes is accepted or refused, or it fails; each failure one line naming the
 *           file (tests/fuzz/gguf_property.h);
 *   json_text  kvl_json_text_check accepts only what cJSON parses, and refuses in one line naming a
 *           line and column inside the input (tests/fuzz/json_text_property.h);
 *   args    the programs' command-line reader returns each flag once with its value, and reads counts,
 *           numbers and context lists as their definitions say (tests/fuzz/args_property.h);
 *   kvfmt   the program, run on the input's command line and stdin, exits 0, or 2 with one line on
 *           stderr (tests/fuzz/kvfmt_input.h); a crash, a sanitizer report or a hang fails it. */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "fuzz/args_property.h"
#include "fuzz/config_property.h"
#include "fuzz/gguf_property.h"
#include "fuzz/json_text_property.h"
#include "fuzz/kvfmt_input.h"
#include "fuzz/npy_property.h"
#include "fuzz/prefix_property.h"
#include "fuzz/rows_property.h"
#include "fuzz/safetensors_property.h"

#define SAVED_INPUT_MAX (1 << 20)

typedef const char *(*property)(const char *path, const uint8_t *data, size_t size);

/* Apply `check` to every file of tests/fuzz/<kind>/<target>/; returns how many there were. A missing
 * directory counts as empty. */
static size_t replay_dir(const char *kind, const char *target, property check)
{
    char rel[256];
    snprintf(rel, sizeof rel, "tests/fuzz/%s/%s", kind, target);
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", kvl_path(rel));
    DIR *d = opendir(dir);
    if (!d) return 0;
    static uint8_t data[SAVED_INPUT_MAX];
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        ck_assert_msg(f != NULL, "cannot open %s", path);
        size_t size = fread(data, 1, sizeof data, f);
        fclose(f);
        const char *fault = check(path, data, size);
        ck_assert_msg(fault == NULL, "%s: %s", path, fault);
        n++;
    }
    closedir(d);
    return n;
}

static void replay(const char *target, property check)
{
    size_t seeds = replay_dir("corpus", target, check);
    ck_assert_msg(seeds > 0, "no seeds in tests/fuzz/corpus/%s", target);
    replay_dir("regressions", target, check);
}

static const char *config_check(const char *path, const uint8_t *data, size_t size)
{
    (void)path;
    return fuzz_config_fault(data, size);
}

static const char *rows_check(const char *path, const uint8_t *data, size_t size)
{
    (void)path;
    return fuzz_rows_fault(data, size);
}

static const char *gguf_check(const char *path, const uint8_t *data, size_t size)
{
    (void)path;
    return fuzz_gguf_fault(data, size);
}

static const char *safetensors_check(const char *path, const uint8_t *data, size_t size)
{
    (void)path;
    return fuzz_st_fault(data, size);
}

static const char *npy_check(const char *path, const uint8_t *data, size_t size)
{
    (void)path;
    return fuzz_npy_fault(data, size);
}

static const char *json_text_check(const char *path, const uint8_t *data, size_t size)
{
    (void)path;
    return fuzz_json_text_fault(data, size);
}

static const char *args_check(const char *path, const uint8_t *data, size_t size)
{
    (void)path;
    return fuzz_args_fault(data, size);
}

static const char *prefix_check(const char *path, const uint8_t *data, size_t size)
{
    (void)path;
    return fuzz_prefix_fault(data, size);
}

/* Run kvfmt on the call: stdin from a file holding its bytes, stdout discarded, stderr kept. */
static int run_kvfmt(const fuzz_kvfmt_call *c, char *err, size_t cap)
{
    char in_path[] = "/tmp/kvl_fuzz_in_XXXXXX", err_path[] = "/tmp/kvl_fuzz_err_XXXXXX";
    int in = mkstemp(in_path), errfd = mkstemp(err_path);
    ck_assert(in >= 0 && errfd >= 0);
    ck_assert(write(in, c->in, c->in_len) == (ssize_t)c->in_len);
    lseek(in, 0, SEEK_SET);
    const char *bin = getenv("KVL_BIN");
    char program[4096];
    snprintf(program, sizeof program, "%s/kvfmt", bin && *bin ? bin : "build/bin");
    pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(in, 0);
        dup2(devnull, 1);
        dup2(errfd, 2);
        alarm(60);   /* a hang fails as a signal */
        execv(program, c->argv);
        _exit(127);
    }
    int status;
    ck_assert(waitpid(pid, &status, 0) == pid);
    ssize_t got = pread(errfd, err, cap - 1, 0);
    err[got > 0 ? got : 0] = '\0';
    close(in);
    close(errfd);
    unlink(in_path);
    unlink(err_path);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
}

static const char *kvfmt_check(const char *path, const uint8_t *data, size_t size)
{
    (void)path;
    fuzz_kvfmt_call c;
    ck_assert(fuzz_kvfmt_split(&c, data, size) == 0);
    static char err[1 << 16];
    int status = run_kvfmt(&c, err, sizeof err);
    fuzz_kvfmt_free(&c);
    if (status == 127) return "kvfmt could not be run (is KVL_BIN set?)";
    if (status < 0) return "kvfmt died of a signal";
    if (status != 0 && status != 2) return "kvfmt exited neither 0 nor 2";
    size_t lines = 0;
    for (const char *p = err; *p; p++) lines += *p == '\n';
    if (status == 2 && lines != 1) return "kvfmt refused the input without exactly one line on stderr";
    return NULL;
}

START_TEST(test_every_saved_config_input_parses_to_a_consistent_model_or_fails_in_one_line)
{
    replay("config", config_check);
}
END_TEST

START_TEST(test_every_saved_rows_input_packs_and_unpacks_within_the_formats_bounds)
{
    replay("rows", rows_check);
}
END_TEST

START_TEST(test_every_saved_gguf_input_lies_inside_itself_or_fails_in_one_line)
{
    replay("gguf", gguf_check);
}
END_TEST

START_TEST(test_every_saved_safetensors_input_tiles_its_data_or_fails_in_one_line)
{
    replay("safetensors", safetensors_check);
}
END_TEST

START_TEST(test_every_saved_npy_input_reads_its_shape_or_fails_in_one_line)
{
    replay("npy", npy_check);
}
END_TEST

START_TEST(test_every_saved_json_text_is_parsed_by_cjson_or_refused_at_its_place)
{
    replay("json_text", json_text_check);
}
END_TEST

START_TEST(test_every_saved_prefix_file_loads_whole_or_leaves_the_cache_alone)
{
    replay("prefix", prefix_check);
}
END_TEST

START_TEST(test_every_saved_command_line_is_read_as_the_flag_and_value_definitions_say)
{
    replay("args", args_check);
}
END_TEST

START_TEST(test_every_saved_kvfmt_input_exits_0_or_2_with_one_line)
{
    replay("kvfmt", kvfmt_check);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reliability_fuzz");
    TCase *tc = tcase_create("saved_inputs");
    tcase_add_test(tc, test_every_saved_config_input_parses_to_a_consistent_model_or_fails_in_one_line);
    tcase_add_test(tc, test_every_saved_rows_input_packs_and_unpacks_within_the_formats_bounds);
    tcase_add_test(tc, test_every_saved_kvfmt_input_exits_0_or_2_with_one_line);
    tcase_add_test(tc, test_every_saved_safetensors_input_tiles_its_data_or_fails_in_one_line);
    tcase_add_test(tc, test_every_saved_gguf_input_lies_inside_itself_or_fails_in_one_line);
    tcase_add_test(tc, test_every_saved_prefix_file_loads_whole_or_leaves_the_cache_alone);
    tcase_add_test(tc, test_every_saved_npy_input_reads_its_shape_or_fails_in_one_line);
    tcase_add_test(tc, test_every_saved_json_text_is_parsed_by_cjson_or_refused_at_its_place);
    tcase_add_test(tc, test_every_saved_command_line_is_read_as_the_flag_and_value_definitions_say);
    suite_add_tcase(s, tc);
    return s;
}
