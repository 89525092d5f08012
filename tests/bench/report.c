/* The table: timing of repeated runs, one row per measurement on stdout and in the Markdown file,
 * progress on stderr. */
#include <stdarg.h>
#include <stdio.h>

#include "bench.h"
#include "timing.h"

FILE *kvb_markdown;
const char *kvb_out_dir;

kvb_time kvb_time_runs(void (*run)(void *ctx), void *ctx, int repeats)
{
    double t[KVB_MOST_REPEATS];
    const int least = repeats < 1 ? 1 : repeats > KVB_MOST_REPEATS ? KVB_MOST_REPEATS : repeats;
    const double warm_from = kvl_seconds();
    for (int w = 0; w == 0 || (w < KVB_MOST_REPEATS && kvl_seconds() - warm_from < KVB_WARM_SECONDS); w++) run(ctx);
    int n = 0;
    for (double timed = 0.0; n < least || (timed < KVB_TIMED_SECONDS && n < KVB_MOST_REPEATS); n++) {
        double start = kvl_seconds();
        run(ctx);
        t[n] = kvl_seconds() - start;
        timed += t[n];
    }
    kvb_time out = {0, t[0], t[0]};
    for (int r = 1; r < n; r++) {
        if (t[r] < out.min) out.min = t[r];
        if (t[r] > out.max) out.max = t[r];
    }
    out.median = kvl_median(t, (size_t)n);
    return out;
}

void kvb_progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("kvbench: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void kvb_print_header(void)
{
    printf("%-9s %-34s %7s %9s %19s %8s %12s %12s %7s %7s  %s\n", "group", "what", "MiB", "ms", "(min - max)", "GFLOP",
           "rate", "ceiling", "ratio", "target", "verdict");
    if (kvb_markdown)
        fprintf(kvb_markdown, "| group | what | MiB | ms | min - max | GFLOP | rate | ceiling | ratio | target "
                              "| verdict |\n|---|---|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
}

static const char *verdict(const kvb_row *row)
{
    if (!(row->ceiling > 0) || !(row->target > 0)) return "-";
    return row->rate / row->ceiling >= row->target ? "PASS" : "BELOW";
}

void kvb_print_row(const kvb_row *row)
{
    char range[32] = "-", gflop[16] = "-", ceiling[24] = "-", ratio[16] = "-", target[16] = "-";
    if (row->max_s > 0) snprintf(range, sizeof range, "(%.2f - %.2f)", row->min_s * 1e3, row->max_s * 1e3);
    if (row->gflop > 0) snprintf(gflop, sizeof gflop, "%.3f", row->gflop);
    if (row->ceiling > 0) {
        snprintf(ceiling, sizeof ceiling, "%.2f %s", row->ceiling, row->unit);
        snprintf(ratio, sizeof ratio, "%.3f", row->rate / row->ceiling);
    }
    if (row->target > 0) snprintf(target, sizeof target, "%.3f", row->target);
    printf("%-9s %-34s %7.1f %9.2f %19s %8s %7.2f %-4s %12s %7s %7s  %s\n", row->group, row->what, row->mib,
           row->seconds * 1e3, range, gflop, row->rate, row->unit, ceiling, ratio, target, verdict(row));
    fflush(stdout);
    if (kvb_markdown)
        fprintf(kvb_markdown, "| %s | %s | %.1f | %.2f | %s | %s | %.2f %s | %s | %s | %s | %s |\n", row->group,
                row->what, row->mib, row->seconds * 1e3, range, gflop, row->rate, row->unit, ceiling, ratio, target,
                verdict(row));
}

/* A step's bound: seconds, the part of them its compute-bound phases take, and the seconds its
 * targets allow (each phase's bound over its target), on a machine whose sgemm runs at rate[shape]
 * GFLOP/s and whose scan reads `scan` GB/s. */
typedef struct {
    double seconds, compute_s, allowed_s;
} step_bound;

static step_bound bound_at(const kvb_step *s, const double rate[KVB_SGEMM_SHAPES], double scan)
{
    step_bound b = {0, 0, 0};
    for (size_t i = 0; i < KVB_PHASES; i++) {
        const kvb_phase *p = &s->phase[i];
        const double compute = p->flop * 1e-9 / rate[p->shape], memory = p->bytes * 1e-9 / scan;
        const double t = compute >= memory ? compute : memory;
        b.seconds += t;
        b.compute_s += compute >= memory ? t : 0;
        b.allowed_s += t / (compute >= memory ? s->compute_target : s->memory_target);
    }
    return b;
}

/* The bound on `threads` threads at the measured rates; with ideal_2x, on 2 threads with the 1-thread sgemm
 * rates doubled. */
static step_bound bound_on(const kvb_step *s, int threads, int ideal_2x)
{
    const kvb_ceiling_set *c = kvb_ceilings();
    double rate[KVB_SGEMM_SHAPES];
    for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++)
        rate[k] = ideal_2x ? 2 * c->sgemm_gflops[k][0] : c->sgemm_gflops[k][threads > 1];
    return bound_at(s, rate, c->scan_gbps[ideal_2x || threads > 1]);
}

static double step_flop(const kvb_step *s)
{
    double f = 0;
    for (size_t i = 0; i < KVB_PHASES; i++) f += s->phase[i].flop;
    return f;
}

static double step_bytes(const kvb_step *s)
{
    double b = 0;
    for (size_t i = 0; i < KVB_PHASES; i++) b += s->phase[i].bytes;
    return b;
}

void kvb_print_step(const kvb_step *s, const char *what, kvb_time t, int threads)
{
    const step_bound b = bound_on(s, threads, 0);
    const double flop = step_flop(s);
    kvb_print_row(&(kvb_row){s->group, what, step_bytes(s) / KVB_MIB, t.median, flop * 1e-9 / t.median, "GF/s",
                             flop * 1e-9 / b.seconds, b.seconds / b.allowed_s, t.min, t.max, flop * 1e-9});
}

static kvb_time time_once(void (*run)(void *ctx), void *ctx)
{
    const double start = kvl_seconds();
    run(ctx);
    const double t = kvl_seconds() - start;
    return (kvb_time){t, t, t};
}

kvb_time kvb_time_step(const kvb_step *s)
{
    char what[128];
    kvb_time t[2];
    const step_bound one = bound_on(s, 1, 0);
    const int compute = 2 * one.compute_s >= one.seconds;
    for (int th = 0; th < 1 + compute; th++) {
        kvb_progress("%s: %s %zuK, %d thread(s)", s->group, s->step, s->T / 1024, th + 1);
        kvb_set_threads(th + 1);
        t[th] = s->repeats == KVB_COLD ? time_once(s->run, s->ctx)
                                       : kvb_time_runs(s->run, s->ctx, s->repeats ? s->repeats : KVB_REPEATS);
        snprintf(what, sizeof what, "%s %zuK %dT", s->step, s->T / 1024, th + 1);
        kvb_print_step(s, what, t[th], th + 1);
    }
    kvb_set_threads(1);
    if (compute) {
        snprintf(what, sizeof what, "%s %zuK 2T/1T", s->step, s->T / 1024);
        kvb_print_row(&(kvb_row){s->group, what, step_bytes(s) / KVB_MIB, t[1].median, t[0].median / t[1].median, "x",
                                 one.seconds / bound_on(s, 1, 1).seconds, KVB_SCALING_TARGET, 0, 0, 0});
    }
    return t[0];
}
