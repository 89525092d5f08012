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
    printf("%-9s %-34s %7s %9s %19s %8s %12s %12s %7s %13s %7s %6s %6s  %s\n", "group", "what", "MiB", "ms",
           "(min - max)", "GFLOP", "rate", "ceiling", "ratio", "(q1 - q3)", "target", "FMA", "roof", "verdict");
    if (kvb_markdown)
        fprintf(kvb_markdown, "%s\n%s\n", KVB_MARKDOWN_HEADER, KVB_MARKDOWN_RULE);
}

void kvb_print_row(const kvb_row *row) { kvb_print_row_more(row, NULL); }

void kvb_print_row_more(const kvb_row *row, const kvb_row_more *more)
{
    char range[32] = "-", gflop[16] = "-", ceiling[24] = "-", ratio[16] = "-", target[16] = "-", spread[32] = "-";
    char fma[16] = "-", roof[16] = "-";
    const kvb_row_more none = {0, 0, 0, 0}, *m = more ? more : &none;
    if (row->max_s > 0) snprintf(range, sizeof range, "(%.2f - %.2f)", row->min_s * 1e3, row->max_s * 1e3);
    if (row->gflop > 0) snprintf(gflop, sizeof gflop, "%.3f", row->gflop);
    if (row->ceiling > 0) {
        snprintf(ceiling, sizeof ceiling, "%.2f %s", row->ceiling, row->unit);
        snprintf(ratio, sizeof ratio, "%.3f", row->rate / row->ceiling);
    }
    if (m->spread_hi > 0) snprintf(spread, sizeof spread, "(%.3f - %.3f)", m->spread_lo, m->spread_hi);
    if (row->target > 0) snprintf(target, sizeof target, "%.3f", row->target);
    if (m->fma_share > 0) snprintf(fma, sizeof fma, "%.3f", m->fma_share);
    if (m->roofline > 0) snprintf(roof, sizeof roof, "%.3f", m->roofline);
    const char *v = kvb_verdict(row, more);
    printf("%-9s %-34s %7.1f %9.2f %19s %8s %7.2f %-4s %12s %7s %13s %7s %6s %6s  %s\n", row->group, row->what,
           row->mib, row->seconds * 1e3, range, gflop, row->rate, row->unit, ceiling, ratio, spread, target, fma, roof,
           v);
    fflush(stdout);
    if (kvb_markdown)
        fprintf(kvb_markdown, "| %s | %s | %.1f | %.2f | %s | %s | %.2f %s | %s | %s | %s | %s | %s | %s | %s |\n",
                row->group, row->what, row->mib, row->seconds * 1e3, range, gflop, row->rate, row->unit, ceiling, ratio,
                spread, target, fma, roof, v);
}

/* The bound on `threads` threads at the measured rates; with ideal_2x, on 2 threads with the 1-thread sgemm
 * rates doubled. */
static kvb_bound bound_on(const kvb_step *s, int threads, int ideal_2x)
{
    const kvb_ceiling_set *c = kvb_ceilings();
    double rate[KVB_SGEMM_SHAPES];
    for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++)
        rate[k] = ideal_2x ? 2 * c->sgemm_gflops[k][0] : c->sgemm_gflops[k][threads > 1];
    return kvb_bound_at(s, rate, c->scan_gbps[ideal_2x || threads > 1]);
}

/* The bound with every phase's flop over an FMA peak of `fma` GFLOP/s and its bytes over the scan on
 * `threads` threads times `speed` (a pair's sample over the stored ceiling; 1 for the stored scan):
 * no kernel beats it. */
static double roofline_at(const kvb_step *s, int threads, double fma, double speed)
{
    double peak[KVB_SGEMM_SHAPES];
    for (size_t k = 0; k < KVB_SGEMM_SHAPES; k++) peak[k] = fma;
    return kvb_bound_at(s, peak, kvb_ceilings()->scan_gbps[threads > 1] * speed).seconds;
}

/* The ceiling of the phase with the largest bound on `threads` threads: the one a slow spell moves most. */
static kvb_bounding bounding_of(const kvb_step *s, int threads)
{
    const kvb_ceiling_set *c = kvb_ceilings();
    kvb_bounding most = {KVB_BOUND_SCAN, KVB_SGEMM_MLA};
    double largest = -1;
    for (size_t i = 0; i < KVB_PHASES; i++) {
        const kvb_phase *p = &s->phase[i];
        const double compute = p->flop * 1e-9 / c->sgemm_gflops[p->shape][threads > 1];
        const double memory = p->bytes * 1e-9 / c->scan_gbps[threads > 1];
        const double t = compute >= memory ? compute : memory;
        if (t > largest) {
            largest = t;
            most = (kvb_bounding){compute < memory ? KVB_BOUND_SCAN : KVB_BOUND_SGEMM, p->shape};
        }
    }
    return most;
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

void kvb_print_step(const kvb_step *s, const char *what, kvb_time t, int threads, const kvb_paired *pairs)
{
    const kvb_bound b = bound_on(s, threads, 0);
    const double flop = step_flop(s), rate = flop * 1e-9 / t.median, fma = kvb_ceilings()->fma_gflops[threads > 1];
    const int compute = 2 * b.compute_s >= b.seconds;
    kvb_row row = {s->group, what, step_bytes(s) / KVB_MIB, t.median, rate, "GF/s", flop * 1e-9 / b.seconds,
                   b.seconds / b.allowed_s, t.min, t.max, flop * 1e-9};
    kvb_row_more more = {0, 0, rate / fma, roofline_at(s, threads, fma, 1) / t.median};
    if (pairs) {
        row.ceiling = rate / pairs->ratio.median;
        more = (kvb_row_more){pairs->ratio.q1, pairs->ratio.q3, pairs->fma.median, pairs->roof.median};
    }
    if (!compute) more.fma_share = 0;
    kvb_print_row_more(&row, &more);
}

kvb_paired kvb_time_paired(void (*run)(void *ctx), void *ctx, int repeats, kvb_bounding bounding, int threads,
                           double bound_s, const kvb_step *step)
{
    const int cold = repeats == KVB_COLD;
    const int least = cold ? 1 : repeats > 0 && repeats < KVB_MOST_PAIRS ? repeats : KVB_REPEATS;
    int warm = 0;
    const double warm_from = kvl_seconds();
    if (!cold)
        for (; warm == 0 || (warm < KVB_MOST_REPEATS && kvl_seconds() - warm_from < KVB_WARM_SECONDS); warm++)
            run(ctx);
    const double run_s = warm ? (kvl_seconds() - warm_from) / warm : 0;
    double stored, t[KVB_MOST_PAIRS], ratio[KVB_MOST_PAIRS], fma[KVB_MOST_PAIRS], roof[KVB_MOST_PAIRS];
    const double sample_from = kvl_seconds();
    kvb_sample_ceiling(bounding, threads, &stored); /* its first run warms it */
    const double sample_s = kvl_seconds() - sample_from;
    const double runs_per_sample = run_s > 0 ? sample_s / run_s : 1;
    const int batch = runs_per_sample < 1 ? 1 : runs_per_sample > 256 ? 256 : (int)runs_per_sample;
    int n = 0;
    for (double timed = 0; n < least || (!cold && timed < KVB_TIMED_SECONDS && n < KVB_MOST_PAIRS); n++) {
        const double peak = step ? kvb_sample_fma(threads) : 0;
        const double sample = kvb_sample_ceiling(bounding, threads, &stored);
        const double start = kvl_seconds();
        for (int r = 0; r < batch; r++) run(ctx);
        const double took = kvl_seconds() - start;
        t[n] = took / batch;
        timed += took;
        ratio[n] = sample > 0 ? kvb_pair_ratio(bound_s, t[n], sample, stored) : bound_s / t[n];
        if (step) {
            fma[n] = step_flop(step) * 1e-9 / t[n] / peak;
            roof[n] = roofline_at(step, threads, peak, sample > 0 ? sample / stored : 1) / t[n];
        }
    }
    kvb_paired out = {{0, t[0], t[0]}, kvb_quartiles_of(ratio, (size_t)n), {0, 0, 0}, {0, 0, 0}};
    if (step) out.fma = kvb_quartiles_of(fma, (size_t)n), out.roof = kvb_quartiles_of(roof, (size_t)n);
    for (int r = 1; r < n; r++) {
        if (t[r] < out.t.min) out.t.min = t[r];
        if (t[r] > out.t.max) out.t.max = t[r];
    }
    out.t.median = kvl_median(t, (size_t)n);
    return out;
}

kvb_time kvb_stream_row(const char *group, const char *what, void (*run)(void *ctx), void *ctx, double bytes,
                        kvb_bound_kind kind, int threads, int repeats, double target)
{
    const kvb_ceiling_set *c = kvb_ceilings();
    const int th = threads > 1;
    const double ceiling = kind == KVB_BOUND_COPY ? c->copy_gbps[th] : kind == KVB_BOUND_GATHER ? c->gather_gbps
                                                                                              : c->scan_gbps[th];
    kvb_set_threads(threads);
    const kvb_paired p = kvb_time_paired(run, ctx, repeats, (kvb_bounding){kind, KVB_SGEMM_MLA}, threads,
                                         bytes * 1e-9 / ceiling, NULL);
    kvb_set_threads(1);
    const double rate = bytes * 1e-9 / p.t.median;
    kvb_print_row_more(&(kvb_row){group, what, bytes / KVB_MIB, p.t.median, rate, "GB/s", rate / p.ratio.median,
                                  target, p.t.min, p.t.max, 0},
                       &(kvb_row_more){p.ratio.q1, p.ratio.q3, 0, 0});
    return p.t;
}

/* The row of a 1-thread step's rate over the FMA peak against s->fma_target: its pairs' median share,
 * judged with their quartiles as the step's own ratio is. */
static void print_fma_target(const kvb_step *s, const char *what, kvb_paired p)
{
    char name[160];
    snprintf(name, sizeof name, "%s of the FMA peak", what);
    kvb_print_row_more(&(kvb_row){s->group, name, step_bytes(s) / KVB_MIB, p.t.median, p.fma.median, "x", 1.0,
                                  s->fma_target, 0, 0, 0},
                       &(kvb_row_more){p.fma.q1, p.fma.q3, 0, 0});
}

kvb_time kvb_time_step(const kvb_step *s)
{
    char what[128];
    kvb_time t[2];
    double bound_s[2], ratio[2];
    const kvb_bound one = bound_on(s, 1, 0);
    const int compute = 2 * one.compute_s >= one.seconds;
    for (int th = 0; th < 1 + compute; th++) {
        kvb_progress("%s: %s %zuK, %d thread(s)", s->group, s->step, s->T / 1024, th + 1);
        kvb_set_threads(th + 1);
        bound_s[th] = bound_on(s, th + 1, 0).seconds;
        const kvb_paired p = kvb_time_paired(s->run, s->ctx, s->repeats, bounding_of(s, th + 1), th + 1,
                                             bound_s[th], s);
        t[th] = p.t;
        ratio[th] = p.ratio.median;
        snprintf(what, sizeof what, "%s %zuK %dT", s->step, s->T / 1024, th + 1);
        kvb_print_step(s, what, t[th], th + 1, &p);
        if (th == 0 && compute && s->fma_target > 0) print_fma_target(s, what, p);
    }
    kvb_set_threads(1);
    if (compute) {
        snprintf(what, sizeof what, "%s %zuK 2T/1T", s->step, s->T / 1024);
        kvb_print_row(&(kvb_row){s->group, what, step_bytes(s) / KVB_MIB, t[1].median,
                                 kvb_paired_speedup(bound_s[0], ratio[0], bound_s[1], ratio[1]), "x",
                                 one.seconds / bound_on(s, 1, 1).seconds, KVB_SCALING_TARGET, 0, 0, 0});
    }
    return t[0];
}
