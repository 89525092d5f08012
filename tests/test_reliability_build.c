/* The build's dependency step, run against stand-ins first on PATH: an apt-get that only notes that it
 * ran, a pkg-config that finds the packages only once that note exists (a fresh machine until apt-get
 * has run), and an id that says root or not. Reading the Makefile installs nothing, make -n included;
 * a build as root installs, then compiles with the flags the packages give, in the same run; a build
 * by anyone else stops before its first compile with the apt-get line. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

#define OUT_CAP (1 << 20)
/* the Debian packages the build needs, as README.md names them */
#define APT_LINE "sudo apt-get install libopenblas-dev libcjson-dev check pkg-config"
/* what the stand-in pkg-config gives for --cflags once "installed": a define no source reads */
#define STUB_CFLAGS "-DKVL_STUB_PKG_CONFIG"

static char out[OUT_CAP], err[OUT_CAP];

typedef struct {
    char dir[64];      /* the stand-ins, and the marker apt-get leaves */
    char build[128];   /* the BUILD the make runs use */
} sandbox;

static void write_script(const sandbox *sb, const char *name, const char *body)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", sb->dir, name);
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    ck_assert(chmod(path, 0755) == 0);
}

/* uid: what the stand-in id -u prints */
static void sandbox_open(sandbox *sb, int uid)
{
    snprintf(sb->dir, sizeof sb->dir, "/tmp/kvl_build_XXXXXX");
    ck_assert(mkdtemp(sb->dir) != NULL);
    snprintf(sb->build, sizeof sb->build, "%s/build", sb->dir);
    char body[512];
    snprintf(body, sizeof body, "echo \"apt-get $*\" >> %s/installed", sb->dir);
    write_script(sb, "apt-get", body);
    snprintf(body, sizeof body,
             "[ -f %s/installed ] || exit 1\n"
             "case \"$*\" in --cflags*) echo '" STUB_CFLAGS "' ;; --libs*) echo '-lopenblas -lcjson -lcheck -lm' ;;\n"
             "  --modversion*) echo 9.9 ;; esac",
             sb->dir);
    write_script(sb, "pkg-config", body);
    snprintf(body, sizeof body, "echo %d", uid);
    write_script(sb, "id", body);
}

static void sandbox_close(const sandbox *sb)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", sb->dir);
    ck_assert(system(cmd) == 0);
}

static int installed(const sandbox *sb)
{
    char path[128];
    snprintf(path, sizeof path, "%s/installed", sb->dir);
    return access(path, F_OK) == 0;
}

/* make ARGS from the project root with the stand-ins first on PATH, outside the make that runs this suite */
static int make_in(const sandbox *sb, const char *args)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL PATH='%s':\"$PATH\" make BUILD=%s %s",
             kvl_path("."), sb->dir, sb->build, args);
    return kvl_run(cmd, NULL, out, sizeof out, err, sizeof err);
}

START_TEST(test_reading_the_makefile_installs_nothing)
{
    static const char *const runs[] = {"help", "-n all"};
    sandbox sb;
    sandbox_open(&sb, 0);
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        const int rc = make_in(&sb, runs[i]);
        ck_assert_msg(rc == 0, "make %s exited %d: %.500s", runs[i], rc, err);
        ck_assert_msg(!installed(&sb), "make %s ran apt-get", runs[i]);
        ck_assert_msg(access(sb.build, F_OK) != 0, "make %s wrote %s", runs[i], sb.build);
    }
    sandbox_close(&sb);
}
END_TEST

START_TEST(test_a_build_as_root_installs_then_compiles_with_the_packages_flags)
{
    sandbox sb;
    sandbox_open(&sb, 0);
    char args[256];
    snprintf(args, sizeof args, "V=1 %s/obj/ref/core/status.o", sb.build);
    const int rc = make_in(&sb, args);
    ck_assert_msg(rc == 0, "make %s exited %d: %.500s", args, rc, err);
    ck_assert_msg(installed(&sb), "make %s compiled without installing", args);
    const char *cc = strstr(out, "ref/core/status.c");
    ck_assert_msg(cc && strstr(out, STUB_CFLAGS) && strstr(out, STUB_CFLAGS) < cc,
                  "the compile did not get pkg-config's flags (" STUB_CFLAGS "): %.800s", out);
    sandbox_close(&sb);
}
END_TEST

START_TEST(test_a_build_without_root_stops_before_compiling_naming_the_apt_get_line)
{
    sandbox sb;
    sandbox_open(&sb, 1000);
    char args[256], obj[160];
    snprintf(args, sizeof args, "-j2 %s/obj/ref/core/status.o", sb.build);
    const int rc = make_in(&sb, args);
    ck_assert_msg(rc != 0, "make %s succeeded without the packages", args);
    ck_assert_msg(strstr(err, APT_LINE) != NULL, "make %s does not name \"" APT_LINE "\": %.500s", args, err);
    ck_assert_msg(!installed(&sb), "make %s ran apt-get without root", args);
    snprintf(obj, sizeof obj, "%s/obj", sb.build);
    ck_assert_msg(access(obj, F_OK) != 0, "make %s compiled without the packages", args);
    sandbox_close(&sb);
}
END_TEST

Suite *kvl_suite(void)
{
    Suite *s = suite_create("reliability_build");
    TCase *tc = tcase_create("dependencies");
    tcase_add_test(tc, test_reading_the_makefile_installs_nothing);
    tcase_add_test(tc, test_a_build_as_root_installs_then_compiles_with_the_packages_flags);
    tcase_add_test(tc, test_a_build_without_root_stops_before_compiling_naming_the_apt_get_line);
    suite_add_tcase(s, tc);
    return s;
}
