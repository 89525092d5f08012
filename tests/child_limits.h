/* A call run in a forked child under one resource limit, for the tests that a reader allocates no
 * more than its file allows (RLIMIT_AS) and that a writer leaves nothing behind when the file-size
 * limit stops it (RLIMIT_FSIZE, SIGXFSZ ignored so that write fails with EFBIG instead). */
#ifndef KVL_TESTS_CHILD_LIMITS_H
#define KVL_TESTS_CHILD_LIMITS_H

#include <dirent.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

/* fn(arg)'s value (0 to 255) from a child under the limit `resource` = bytes, −1 if the child died. */
static inline int kvl_run_limited(int resource, rlim_t bytes, int (*fn)(const void *), const void *arg)
{
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        struct rlimit lim = {bytes, bytes};
        signal(SIGXFSZ, SIG_IGN);
        _exit(setrlimit(resource, &lim) == 0 ? fn(arg) & 0xff : 255);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
}

/* The number of entries of dir other than "." and "..", −1 if it cannot be read. */
static inline int kvl_dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

#endif
