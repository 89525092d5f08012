/* The bench's arithmetic, apart from any measurement so that the tests can prove it on numbers of
 * their own (tests/test_bench_kvbench.c): a step's bound over its phases, the ratio of a step timed in
 * pairs with its ceiling, the spread of those ratios and the verdict they give,
 * the ratio of a peer's time to a C step's timed around it, and how far one figure moved over runs. */
#include "bench.h"
#include "timing.h"

#include <math.h>

kvb_bound kvb_bound_at(const kvb_step *s, const double gflops[KVB_SGEMM_SHAPES], double scan_gbps)
{
    kvb_bound b = {0, 0, 0};
    for (size_t i = 0; i < KVB_PHASES; i++) {
        const kvb_phase *p = &s->phase[i];
        const double compute = p->flop * 1e-9 / gflops[p->shape], memory = p->bytes * 1e-9 / scan_gbps;
        const double t = compute >= memory ? compute : memory;
        b.seconds += t;
        b.compute_s += compute >= memory ? t : 0;
        const double target = compute >= memory ? s->compute_target : s->memory_target;
        b.allowed_s += target > 0 ? t / target : INFINITY; /* no target: any time is allowed */
    }
    return b;
}

kvb_quartiles kvb_quartiles_of(double *x, size_t n)
{
    kvl_median(x, n); /* sorts */
    kvb_quartiles q;
    double *at[3] = {&q.q1, &q.median, &q.q3};
    for (int k = 0; k < 3; k++) {
        const double pos = (double)(n - 1) * 0.25 * (k + 1);
        const size_t i = (size_t)pos;
        const double f = pos - (double)i;
        *at[k] = i + 1 < n ? x[i] + f * (x[i + 1] - x[i]) : x[i];
    }
    return q;
}

int kvb_unsteady(kvb_quartiles q)
{
    return q.q3 - q.q1 > KVB_UNSTEADY_SPREAD * q.median;
}

double kvb_pair_ratio(double bound_s, double t_s, double sample_rate, double stored_rate)
{
    return bound_s * stored_rate / sample_rate / t_s;
}

double kvb_paired_speedup(double bound1_s, double ratio1, double bound2_s, double ratio2)
{
    return (bound1_s / ratio1) / (bound2_s / ratio2);
}

double kvb_peer_ratio(double peer_s, double c_before_s, double c_after_s)
{
    return peer_s / (0.5 * (c_before_s + c_after_s));
}

const char *kvb_verdict(const kvb_row *row, const kvb_row_more *more)
{
    if (!(row->ceiling > 0) || !(row->target > 0)) return "-";
    const double ratio = row->rate / row->ceiling;
    if (more && more->spread_hi > 0 && kvb_unsteady((kvb_quartiles){more->spread_lo, ratio, more->spread_hi}))
        return "UNSTEADY";
    return ratio >= row->target ? "PASS" : "BELOW";
}

double kvb_recheck_moved(const double *r, size_t n)
{
    double moved = n ? 0.0 : NAN;
    for (size_t i = 0; i < n; i++)
        if (fabs(r[i] - 1.0) > moved) moved = fabs(r[i] - 1.0);
    return moved;
}

/* The printed ratios are multiples of 2·half_unit, so a move short of the limit is at least 2·half_unit
 * short of it: comparing with half of that to spare keeps a printed 0.900 (10.0%) out however the
 * subtraction rounds. */
int kvb_run_qualifies(double moved, double half_unit)
{
    return moved < KVB_RECHECK_MOVED - half_unit;
}

const char *kvb_runs_verdict(const double *ratio, const int *qualifies, size_t n, double half_unit)
{
    double x[16];
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof x / sizeof x[0]; i++)
        if (qualifies[i]) x[k++] = ratio[i];
    if (k < KVB_STEADY_RUNS) return "-";
    return kvb_runs_spread(x, k, half_unit) <= KVB_RUNS_SPREAD ? "STEADY" : "SPREAD";
}

double kvb_runs_spread(double *x, size_t n, double half_unit)
{
    const double median = kvl_median(x, n);
    double worst = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double moved = fabs(x[i] - median) - 2 * half_unit;
        const double d = moved <= 0.0 ? 0.0 : median > 0.0 ? moved / median : INFINITY;
        if (d > worst) worst = d;
    }
    return worst;
}
