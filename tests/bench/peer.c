/* The peer process: python3 running tests/bench/peers.py, started once per group and driven a line at a
 * time (peers.py says the protocol), so that a C step can be timed just before and just after each of
 * the peer's runs. The peer runs on one thread: its BLAS and OpenMP pinned to one, and without the
 * OpenBLAS core-type and L2-size overrides this machine's environment may carry (they are for the C
 * side's OpenBLAS and slow numpy's). Files go to a private folder under /tmp, each removed as soon as
 * the command that reads it has replied (a cache of hundreds of MiB), the folder by kvb_peer_stop. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "timing.h"

struct kvb_peer {
    pid_t pid;
    FILE *to, *from;
    char dir[64];
    int made;       /* dir was created */
    char libs[160]; /* the hello reply */
};

static void child(int in, int out)
{
    dup2(in, STDIN_FILENO);
    dup2(out, STDOUT_FILENO);
    setenv("OPENBLAS_NUM_THREADS", "1", 1);
    setenv("OMP_NUM_THREADS", "1", 1);
    setenv("MKL_NUM_THREADS", "1", 1);
    unsetenv("OPENBLAS_CORETYPE");
    unsetenv("OPENBLAS_L2_SIZE");
    execlp("python3", "python3", KVL_SOURCE_DIR "/tests/bench/peers.py", (char *)NULL);
    _exit(127);
}

static int spawn(kvb_peer *p)
{
    int down[2], up[2];
    if (pipe(down) != 0) return 1;
    if (pipe(up) != 0) {
        close(down[0]);
        close(down[1]);
        return 1;
    }
    p->pid = fork();
    if (p->pid == 0) {
        close(down[1]);
        close(up[0]);
        child(down[0], up[1]);
    }
    close(down[0]);
    close(up[1]);
    p->to = p->pid > 0 ? fdopen(down[1], "w") : NULL;
    p->from = p->pid > 0 ? fdopen(up[0], "r") : NULL;
    if (!p->to) close(down[1]);
    if (!p->from) close(up[0]);
    return !p->to || !p->from;
}

kvb_peer *kvb_peer_start(const char *group)
{
    kvb_peer *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    signal(SIGPIPE, SIG_IGN); /* a peer that dies is read as EOF, not as the end of kvbench */
    snprintf(p->dir, sizeof p->dir, "/tmp/kvbench-peer-XXXXXX");
    char reply[128];
    p->made = mkdtemp(p->dir) != NULL;
    if (!p->made || spawn(p) || kvb_peer_ask(p, reply, sizeof reply, "hello") ||
        strncmp(reply, "peers ", 6) != 0) {
        printf("%s: python3 with numpy did not start tests/bench/peers.py; the peers are skipped\n", group);
        kvb_peer_stop(p);
        return NULL;
    }
    snprintf(p->libs, sizeof p->libs, "%s ", reply);
    return p;
}

int kvb_peer_has(const kvb_peer *p, const char *lib)
{
    char want[64];
    snprintf(want, sizeof want, " %s=1 ", lib);
    return strstr(p->libs, want) != NULL;
}

static void remove_files(const kvb_peer *p)
{
    static const char *const NAMES[] = {"q.f32", "rows.bin", "out.f32", "x.f32", "codes.u8", "y.f32"};
    char path[128];
    for (size_t i = 0; i < sizeof NAMES / sizeof NAMES[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", p->dir, NAMES[i]);
        unlink(path);
    }
}

int kvb_peer_ask(kvb_peer *p, char *reply, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->to, fmt, ap);
    va_end(ap);
    fputc('\n', p->to);
    const int gone = fflush(p->to) != 0 || !fgets(reply, (int)cap, p->from);
    remove_files(p); /* a command has read its files by the time it replies */
    if (gone) return 1;
    reply[strcspn(reply, "\n")] = 0;
    return 0;
}

double kvb_peer_seconds(kvb_peer *p, const char *variant, int repeats)
{
    char reply[128];
    double s;
    if (kvb_peer_ask(p, reply, sizeof reply, "time %s %d", variant, repeats) ||
        sscanf(reply, "seconds %lf", &s) != 1)
        return -1;
    return s;
}

const char *kvb_peer_dir(const kvb_peer *p)
{
    return p->dir;
}

int kvb_peer_write(const kvb_peer *p, const char *name, const void *data, size_t bytes)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", p->dir, name);
    FILE *f = fopen(path, "wb");
    int rc = !f || fwrite(data, 1, bytes, f) != bytes;
    if (f && fclose(f) != 0) rc = 1;
    if (rc) fprintf(stderr, "kvbench: cannot write %s for the peer\n", path);
    return rc;
}

void kvb_peer_stop(kvb_peer *p)
{
    if (!p) return;
    if (p->to) {
        fputs("quit\n", p->to);
        fclose(p->to);
    }
    if (p->from) fclose(p->from);
    if (p->pid > 0) waitpid(p->pid, NULL, 0);
    if (p->made) {
        remove_files(p);
        rmdir(p->dir);
    }
    free(p);
}

/* The median of KVB_PEER_BATCH runs of run(ctx), seconds. */
static double c_seconds(void (*run)(void *ctx), void *ctx)
{
    double t[KVB_PEER_BATCH];
    for (int i = 0; i < KVB_PEER_BATCH; i++) {
        const double start = kvl_seconds();
        run(ctx);
        t[i] = kvl_seconds() - start;
    }
    return kvl_median(t, KVB_PEER_BATCH);
}

kvb_quartiles kvb_time_against_peer(kvb_peer *p, const char *variant, void (*run)(void *ctx), void *ctx,
                                    double *c_median, double *peer_median)
{
    double ratio[KVB_PEER_ROUNDS], peer[KVB_PEER_ROUNDS], c[KVB_PEER_ROUNDS + 1];
    run(ctx); /* warm: the pages of its output, the first tile's packing buffers */
    c[0] = c_seconds(run, ctx);
    for (int r = 0; r < KVB_PEER_ROUNDS; r++) {
        peer[r] = kvb_peer_seconds(p, variant, KVB_PEER_BATCH);
        c[r + 1] = c_seconds(run, ctx);
        if (peer[r] < 0) return (kvb_quartiles){0, 0, 0};
        ratio[r] = kvb_peer_ratio(peer[r], c[r], c[r + 1]);
    }
    *c_median = kvl_median(c, KVB_PEER_ROUNDS + 1);
    *peer_median = kvl_median(peer, KVB_PEER_ROUNDS);
    return kvb_quartiles_of(ratio, KVB_PEER_ROUNDS);
}

void kvb_print_peer_row(const char *group, const char *what, double mib, double c_s, kvb_quartiles ratio,
                        double target)
{
    kvb_print_row_more(&(kvb_row){group, what, mib, c_s, ratio.median, "x", 1.0, target, 0, 0, 0},
                       &(kvb_row_more){ratio.q1, ratio.q3, 0, 0});
}
