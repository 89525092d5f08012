/* Progress lines on stderr; see progress.h. A thread rather than a signal timer, so that nothing
 * the run itself waits on (a write, an OpenMP barrier) is ever interrupted. */
#include "progress.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "timing.h"

static struct {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_t thread;
    const char *program;
    char stage[256];
    double start, every;
    int running, stop;
} run = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int wanted(void)
{
    const char *e = getenv("KVL_PROGRESS");
    if (e && strcmp(e, "1") == 0) return 1;
    if (e && strcmp(e, "0") == 0) return 0;
    return isatty(STDERR_FILENO);
}

/* KVL_PROGRESS_SECONDS when it is a number in (0, 3600], else 2. */
static double interval(void)
{
    const char *e = getenv("KVL_PROGRESS_SECONDS");
    if (!e || !*e) return 2.0;
    char *end;
    const double s = strtod(e, &end);
    return *end == '\0' && s > 0 && s <= 3600 ? s : 2.0;
}

static struct timespec after(double seconds)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);   /* the clock pthread_cond_timedwait measures by default */
    const long long ns = t.tv_nsec + (long long)(seconds * 1e9);
    t.tv_sec += (time_t)(ns / 1000000000LL);
    t.tv_nsec = (long)(ns % 1000000000LL);
    return t;
}

static void *report(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&run.lock);
    while (!run.stop) {
        const struct timespec when = after(run.every);
        while (!run.stop && pthread_cond_timedwait(&run.wake, &run.lock, &when) == 0) {}
        if (run.stop) break;
        fprintf(stderr, "%s: %s (%.0f s)\n", run.program, run.stage, kvl_seconds() - run.start);
    }
    pthread_mutex_unlock(&run.lock);
    return NULL;
}

void kvl_progress_start(const char *program)
{
    run.program = program;
    run.start = kvl_seconds();
    run.every = interval();
    snprintf(run.stage, sizeof run.stage, "starting");
    run.stop = 0;
    run.running = wanted() && pthread_cond_init(&run.wake, NULL) == 0 &&
                  pthread_create(&run.thread, NULL, report, NULL) == 0;
}

void kvl_progress(const char *fmt, ...)
{
    if (!run.running) return;
    pthread_mutex_lock(&run.lock);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(run.stage, sizeof run.stage, fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&run.lock);
}

void kvl_progress_stop(void)
{
    if (!run.running) return;
    pthread_mutex_lock(&run.lock);
    run.stop = 1;
    pthread_cond_signal(&run.wake);
    pthread_mutex_unlock(&run.lock);
    pthread_join(run.thread, NULL);
    pthread_cond_destroy(&run.wake);
    run.running = 0;
}
