/* kvbench: the benchmark program that `make bench` builds from every tests/bench/ *.c and runs.
 *
 * A group is one function, int kvb_group_<name>(void), in a file of its own: it measures its kernels
 * and prints one table row per measurement with kvb_print_row, each beside a ceiling of this machine
 * measured in the same run (ceilings.c). To add a group, declare it below and add a line to the
 * group table in kvbench.c.
 *
 * Every figure is the median of KVB_REPEATS timed runs, or of as many more as KVB_TIMED_SECONDS holds
 * (at most KVB_MOST_REPEATS), after untimed warm-up runs for KVB_WARM_SECONDS (at least one, which also
 * faults the pages in; at most KVB_MOST_REPEATS), on the calling thread only, except rows marked 2T, which run on two threads
 * (kvb_set_threads). A step of a millisecond or two is so timed in its steady state, as a decode loop
 * runs it: on the README's VM the first tens of milliseconds of two-thread work after a quiet spell ran
 * up to twice as slow, and five runs of a short step all fell inside that. A step's row (kvb_time_step) is
 * timed in pairs instead: each run (or batch of runs, for a step shorter than a sample) just after a
 * short run of the ceiling that bounds it, its ratio the median of the pairs' ratios, so that a spell
 * that slows the machine slows both; the quartiles of those ratios are printed beside it, and a row
 * whose quartiles spread too far is UNSTEADY rather than PASS or BELOW. Rows report: a BELOW or
 * UNSTEADY verdict does not fail the program; a group returns non-zero only when it could not run (out
 * of memory, a config that does not load). */
#ifndef KVB_BENCH_H
#define KVB_BENCH_H

#include <stddef.h>
#include <stdio.h>

#include "config.h"
#include "rng.h"
#include "v4.h"

#define KVB_REPEATS 5
#define KVB_MOST_REPEATS 64
#define KVB_WARM_SECONDS 0.05
#define KVB_TIMED_SECONDS 0.1
#define KVB_MIB ((size_t)1 << 20)
/* The working set of the streaming groups and the ceilings' samples: twice the largest cache the CPU
 * reports (a cloud host's shared L3 can hold 480 MiB, which a 256 MiB stream run twice would find
 * warm), in whole multiples of 64 MiB, at least 256 MiB, so rates are DRAM rates. */
size_t kvb_stream_bytes(void);

/* Median seconds of KVB_REPEATS or more calls of run(ctx), after the warm-up (above). */
double kvb_median_seconds(void (*run)(void *ctx), void *ctx);

/* The median, fastest and slowest of `repeats` or more calls of run(ctx) (above), after the warm-up. */
typedef struct {
    double median, min, max;
} kvb_time;
kvb_time kvb_time_runs(void (*run)(void *ctx), void *ctx, int repeats);

/* One row of the table. rate and ceiling share `unit`; ceiling 0 means the row is a ceiling itself,
 * target 0 means there is no target. The verdict is PASS when rate / ceiling >= target, else BELOW. */
typedef struct {
    const char *group, *what;
    double mib;        /* size of the data processed, MiB */
    double seconds;    /* median time */
    double rate;       /* e.g. GB/s of the data processed */
    const char *unit;
    double ceiling;    /* the ceiling's rate, same unit */
    double target;     /* minimum rate / ceiling */
    double min_s, max_s; /* fastest and slowest run; 0: not reported */
    double gflop;      /* floating-point work counted, 10^9 operations; 0: not counted */
} kvb_row;

/* What a step's row adds (kvb_print_step); zero: not reported. */
typedef struct {
    double spread_lo, spread_hi; /* quartiles of the ratio over the pairs it was timed in */
    double fma_share;            /* rate / the FMA peak on the row's threads, for a compute-bound step */
    double roofline;             /* the step's FMA roofline bound / its median time */
} kvb_row_more;

/* A ratio timed in pairs (kvb_time_step) whose quartiles lie further apart than this fraction of its
 * median is UNSTEADY rather than PASS or BELOW: the machine changed speed during its runs, and no
 * verdict about the code can be read from them. */
#define KVB_UNSTEADY_SPREAD 0.2

/* stats.c: the quartiles of x[n], n >= 1, linear between order statistics (sorts x). */
typedef struct {
    double q1, median, q3;
} kvb_quartiles;
kvb_quartiles kvb_quartiles_of(double *x, size_t n);

/* 1 when a ratio's quartiles spread too far to judge it (KVB_UNSTEADY_SPREAD). */
int kvb_unsteady(kvb_quartiles q);

/* The verdict of a row: "-" (no target), "UNSTEADY" (more's spread too wide), "PASS" or "BELOW". */
const char *kvb_verdict(const kvb_row *row, const kvb_row_more *more);

/* One pair's ratio: a step bounded by bound_s seconds at the stored ceiling rates took t_s, and the
 * ceiling that bounds it ran at sample_rate just before, where the stored ceiling reads stored_rate.
 * The bound at the sample's speed is bound_s · stored_rate / sample_rate, so that a slow spell that
 * slows both leaves the ratio where it was. */
double kvb_pair_ratio(double bound_s, double t_s, double sample_rate, double stored_rate);

/* The 2-thread speedup from the two rows' pairs: each thread count's time at its ceiling's stored speed,
 * its bound over its median pair ratio (bound1_s and ratio1 on one thread, bound2_s and ratio2 on two). */
double kvb_paired_speedup(double bound1_s, double ratio1, double bound2_s, double ratio2);

void kvb_print_header(void);
/* One row on stdout, and in the Markdown table when kvb_markdown is open. */
void kvb_print_row(const kvb_row *row);
/* The same with a step's columns (more NULL: none). */
void kvb_print_row_more(const kvb_row *row, const kvb_row_more *more);

/* Where the results go besides stdout: the Markdown table (NULL: none) and the folder of the figures
 * (NULL: none). kvbench.c opens them. */
extern FILE *kvb_markdown;
extern const char *kvb_out_dir;

/* Progress on stderr: "kvbench: <what>" on one line. */
void kvb_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* GB/s (10^9 bytes per second) of `bytes` processed in `seconds`. */
double kvb_gbps(size_t bytes, double seconds);

/* This machine's ceilings, measured on the first call (ceilings.c) and kept for the run, each the
 * fastest of its runs in three rounds a few seconds apart:
 *   scan     read-only sum over kvb_stream_bytes(), GB/s of bytes read, on 1 and on 2 threads
 *   copy     memcpy of kvb_stream_bytes(), GB/s of bytes copied, on 1 and on 2 threads
 *   gather   rows of KVB_GATHER_ROW bytes at random from kvb_stream_bytes(), GB/s of bytes gathered
 *   sgemm    the products of one decode tile at each skinny shape the steps run (ceilings.c): MLA's
 *            (128 query rows over 576-wide rows), GQA's (8 groups of 8), V4's (64 heads over 512-wide
 *            rows) and the lightning indexer's (64 or 32 index heads over 128-wide keys), GFLOP/s, on 1
 *            and on 2 threads
 *   fma      the floating-point peak: independent chains of the widest fused multiply-adds the CPU
 *            runs (fma_peak.c), GFLOP/s, on 1 and on 2 threads */
#define KVB_GATHER_ROW 656
typedef enum {
    KVB_SGEMM_MLA,
    KVB_SGEMM_GQA,
    KVB_SGEMM_V4,
    KVB_SGEMM_INDEX_H64,
    KVB_SGEMM_INDEX_H32,
    KVB_SGEMM_SHAPES
} kvb_sgemm_shape;
typedef struct {
    double scan_gbps[2], copy_gbps[2], gather_gbps;
    double sgemm_gflops[KVB_SGEMM_SHAPES][2];
    double fma_gflops[2];
} kvb_ceiling_set;
const kvb_ceiling_set *kvb_ceilings(void);

/* fma_peak.c: the vectors the peak runs in ("AVX2+FMA", else "SSE"), the flop of one timed run on
 * `threads` threads, and `repeats` or more timed runs of it (kvb_time_runs). */
const char *kvb_fma_isa(void);
double kvb_fma_gflop(int threads);
kvb_time kvb_time_fma(int threads, int repeats);
/* The rate of one short run of the same chains on `threads` threads, GFLOP/s: the peak as a step's
 * run beside it sees it. */
double kvb_sample_fma(int threads);

/* The ceiling that bounds a row, run once and briefly beside it (ceilings.c): the sgemm at `shape` over
 * an eighth of the ceiling's rows, or the read scan or the copy over 64 MiB, each sample the next window
 * of 64 MiB of kvb_stream_bytes() (so that no sample finds the last-level cache holding its bytes from
 * the one before), on `threads` threads. Returns the sample's rate, GF/s or GB/s, and
 * in *stored the stored ceiling's (kvb_ceilings); 0 when its buffers do not fit. */
typedef enum { KVB_BOUND_SGEMM, KVB_BOUND_SCAN, KVB_BOUND_COPY, KVB_BOUND_GATHER } kvb_bound_kind;
typedef struct {
    kvb_bound_kind kind;
    kvb_sgemm_shape shape; /* KVB_BOUND_SGEMM's */
} kvb_bounding;
double kvb_sample_ceiling(kvb_bounding b, int threads, double *stored);

/* A row timed in pairs with its ceiling: its times, and the quartiles of the pairs' ratios; for a
 * step, also of its rate over the FMA peak and of its FMA roofline over its time (zero otherwise). */
typedef struct {
    kvb_time t;
    kvb_quartiles ratio, fma, roof;
} kvb_paired;

/* run(ctx) timed on the threads the caller set, in `repeats` or more pairs (KVB_COLD: one, no warm-up;
 * more while they fill KVB_TIMED_SECONDS, at most KVB_MOST_PAIRS), each run just after a sample of
 * `bounding` on `threads` threads; bound_s is the run's time at the stored ceiling, so that a pair's
 * ratio is kvb_pair_ratio(bound_s, its time, its sample, the stored rate). A run shorter than a sample
 * is timed in batches as long as one, so that both see the same spell. With a step (else NULL), each
 * pair also samples the FMA peak (kvb_sample_fma), read against the step's flop and its roofline. */
#define KVB_MOST_PAIRS 15
typedef struct kvb_step kvb_step;
kvb_paired kvb_time_paired(void (*run)(void *ctx), void *ctx, int repeats, kvb_bounding bounding, int threads,
                           double bound_s, const kvb_step *step);

/* run(ctx), a kernel that streams `bytes` bound by `kind` (the scan, the copy or, on one thread, the
 * random gather), timed in pairs with that ceiling's sample on `threads` threads (`repeats` as
 * kvb_time_paired) and printed as a GB/s row of `group` named `what`, against the ceiling with `target`
 * (0: none); its times. */
kvb_time kvb_stream_row(const char *group, const char *what, void (*run)(void *ctx), void *ctx, double bytes,
                        kvb_bound_kind kind, int threads, int repeats, double target);

/* The indexer's shape with n_heads index heads; MLA's (a higher ceiling) when no shape has that many. */
kvb_sgemm_shape kvb_index_shape(size_t n_heads);

/* The thread count for what follows (kvl_set_threads: OpenMP's; OpenBLAS stays on one). */
void kvb_set_threads(int n);

/* One phase of a step: `flop` over `bytes` read from memory (the cache's bytes as stored, the weights,
 * whatever it writes and reads back), its products at `shape`. Its bound on t threads is the larger of
 * flop / (the sgemm rate at its shape on t threads) and bytes / (the scan bandwidth on t threads):
 * compute-bound when the first is larger. */
typedef struct {
    double flop, bytes;
    kvb_sgemm_shape shape;
} kvb_phase;
#define KVB_PHASES 3

/* A step of the attention, timed by kvb_time_step: run(ctx) does its phases in turn. Its rows are
 * labelled "<step> <T/1024>K <n>T" in `group`, the rate is the phases' flop over the time, and the
 * ceiling is that flop over the step's bound: the sum of its phases' bounds. Beside it, its roofline:
 * the same sum with every phase's flop over the FMA peak instead of the sgemm at its shape. A whole
 * decode step is a chain (the projections give the query, the query the scores, the scores the
 * weighted rows, those the output projection), each phase waiting on the one before, so the bound of a
 * step that streams weights and then computes over its cache is the sum of the two, not the larger.
 * Each phase is allowed its bound / its target (compute_target when it is compute-bound,
 * memory_target when it is memory-bound; a target of 0 allows any time); the row's target is the bound
 * over the time allowed, 0 (none) when a phase has no target. A step
 * is compute-bound when its compute-bound phases take at least half its bound. */
/* The targets, each a minimum of rate / the ceiling that bounds the row. */
#define KVB_COMPUTE_TARGET 0.8 /* compute-bound steps over float32 or bf16 rows, against the sgemm */
#define KVB_NATIVE_TARGET 0.6  /* compute-bound steps over FP8/FP4 rows dequantised as they are read */
#define KVB_MEMORY_TARGET 0.75 /* streaming kernels, against the scan (or the copy, for a write stream) */
#define KVB_GATHER_TARGET 0.8  /* top-k row gathers, against the random gather */
#define KVB_SCALING_TARGET 0.8 /* a compute-bound step on 2 threads: 0.8 of its ideal speedup */
/* Targets on a 1-thread step's rate over the FMA peak (its FMA column), each a row of its own. */
#define KVB_MLA_DECODE_FMA_TARGET 0.85 /* V3's MLA decode over float32 at 32K, on AVX2 and AVX-512 alike */
#define KVB_PREFILL_FMA_TARGET 0.75    /* V3's MLA 4K prefill chunk over float32 */
/* kvb_step.repeats for a step of a minute: one timed run and no warm-up (its buffers are mapped afresh in
 * every run, so a warm-up would change nothing but the time the group takes). */
#define KVB_COLD (-1)
struct kvb_step {
    const char *group, *step; /* step names the kernel and the cache's store: "V3 MLA absorbed bf16" */
    size_t T;                 /* context, tokens */
    void (*run)(void *ctx);
    void *ctx;
    kvb_phase phase[KVB_PHASES]; /* in the order run does them; unused ones zero */
    double compute_target, memory_target;
    double fma_target;        /* the 1-thread rate over the FMA peak, in a row of its own; 0: none */
    int repeats;              /* timed runs; 0: KVB_REPEATS; KVB_COLD: one */
};

/* Times the step on 1 thread, and on 2 when it is compute-bound, each run paired with a sample of the
 * ceiling of its largest phase taken just before it (kvb_time_paired), the row's ratio the median of
 * the pairs' ratios with their quartiles as its spread, printing a row each and the 2T/1T speedup
 * against its ideal (the 1-thread bound over the bound with every sgemm rate doubled: 2 for a
 * step of compute-bound phases only; target KVB_SCALING_TARGET of it); returns the 1-thread time.
 * The speedup is read from the pairs too: each thread count's time at its ceiling's stored speed (its
 * bound over its median ratio), so that a neighbour on the second core, which slows the two-thread
 * ceiling's samples as it slows the step, moves neither. */
kvb_time kvb_time_step(const kvb_step *s);

/* One row of a step run on `threads` threads that took t (kvb_time_step's row); pairs: its pairs'
 * figures, NULL for a step timed alone (read against the stored ceilings). */
void kvb_print_step(const kvb_step *s, const char *what, kvb_time t, int threads, const kvb_paired *pairs);

/* stats.c: the step's bound on a machine whose products at each shape run at gflops[shape] GFLOP/s and
 * whose scan reads scan_gbps GB/s (the sgemm roofline at the measured sgemm rates, the FMA roofline
 * with the FMA peak at every shape): seconds, its phases' bounds summed, each the larger of its flop
 * over its rate and its bytes over the scan; the part of them its compute-bound phases take; and the
 * seconds its targets allow (each phase's bound over its target). */
typedef struct {
    double seconds, compute_s, allowed_s;
} kvb_bound;
kvb_bound kvb_bound_at(const kvb_step *s, const double gflops[KVB_SGEMM_SHAPES], double scan_gbps);

/* inputs.c: x[n] uniform in [−1, 1) from rng (NULL when out of memory); m = ref/configs/<name> of the source
 * tree, 1 with the loader's message on stderr when it does not load. */
float *kvb_random_floats(size_t n, kvl_rng *rng);
int kvb_load_config(kvl_model *m, const char *name);
/* c = the first layer of `kind` in m as a V4 layer config; 1 if there is none or it does not convert. */
int kvb_v4_layer(v4_config *c, const kvl_model *m, kvl_layer_kind kind);

/* peer.c: the peer process, python3 running tests/bench/peers.py (its protocol), on one thread. Start:
 * NULL, with one line on stdout naming `group` and saying the peers are skipped, where python3 or its
 * numpy is missing. has: 1 when the peer imported `lib` ("torch", "ml_dtypes"). ask: one command line
 * out, one reply line back into reply[cap]; 1 when the peer is gone. seconds: the median of `repeats`
 * runs of a variant the last command loaded, -1 on failure. write: `bytes` of data as the file `name`
 * in the peer's folder (dir), where the commands read their inputs; 1 with a message when it cannot. */
typedef struct kvb_peer kvb_peer;
kvb_peer *kvb_peer_start(const char *group);
int kvb_peer_has(const kvb_peer *p, const char *lib);
int kvb_peer_ask(kvb_peer *p, char *reply, size_t cap, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
double kvb_peer_seconds(kvb_peer *p, const char *variant, int repeats);
const char *kvb_peer_dir(const kvb_peer *p);
int kvb_peer_write(const kvb_peer *p, const char *name, const void *data, size_t bytes);
void kvb_peer_stop(kvb_peer *p);

/* A peer's variant against the C step run(ctx), interleaved: the C step timed (the median of
 * KVB_PEER_BATCH runs) before the first of KVB_PEER_ROUNDS peer runs (each the peer's median of
 * KVB_PEER_BATCH) and after every one, each round's ratio the peer's time over the mean of the C times
 * just before and just after it (kvb_peer_ratio), so that a slow spell moves both. Returns the
 * quartiles of the rounds' ratios (all zero when the peer failed), in *c_median the median C time and
 * in *peer_median the peer's.
 * print: its row, peer/C with its spread, read against `target` (0: none). */
#define KVB_PEER_BATCH 3
#define KVB_PEER_ROUNDS 5
kvb_quartiles kvb_time_against_peer(kvb_peer *p, const char *variant, void (*run)(void *ctx), void *ctx,
                                    double *c_median, double *peer_median);
void kvb_print_peer_row(const char *group, const char *what, double mib, double c_s, kvb_quartiles ratio,
                        double target);
/* stats.c: one round's ratio, peer time over the C time at the round's middle (the mean of the C times
 * just before and just after the peer's run): >= 1 when C is faster. */
double kvb_peer_ratio(double peer_s, double c_before_s, double c_after_s);
/* The peer targets, each a minimum of peer time / C time on one thread. */
#define KVB_PEER_TARGET 1.0      /* a decode step against every peer at equal precision */
#define KVB_PEER_BF16_TARGET 1.3 /* a bf16-cache step against torch widening the cache every step */
#define KVB_PEER_CAST_TARGET 8.0 /* an element encoder, or a block quantiser, against ml_dtypes' astype */
/* The largest |peer - C| over the largest |C| of a step's output that is still the same float32
 * computation: T-term sums in a different order differ by far less. */
#define KVB_PEER_TOLERANCE 1e-4

/* The runs of one kvbench over the same code, compared (spread.c). A run qualifies when each of its
 * `recheck` ceilings moved less than KVB_RECHECK_MOVED from its first measurement, as printed (a run
 * without recheck rows does not: nothing says its machine held still). A row is STEADY when its ratio
 * in every qualifying run lies within KVB_RUNS_SPREAD of its median over them, else SPREAD, and is
 * judged only where at least KVB_STEADY_RUNS runs qualify. */
#define KVB_RUNS_SPREAD 0.10
#define KVB_RECHECK_MOVED 0.10
#define KVB_STEADY_RUNS 3
/* stats.c: how far x[n] (n >= 1, printed to the nearest half_unit · 2) proves its values lie from their
 * median: the largest |x_i − median| less the 2·half_unit that the rounding of x_i and of the median can
 * account for, over the median (0 when no distance is left, +∞ when some is and the median is 0; sorts x). */
double kvb_runs_spread(double *x, size_t n, double half_unit);
/* stats.c: the largest move of a run's recheck ceilings, max |r_i − 1| over their ratios to the first
 * measurement r[n]; NAN for n = 0. */
double kvb_recheck_moved(const double *r, size_t n);
/* stats.c: 1 when a run whose recheck ceilings moved `moved` (kvb_recheck_moved of ratios printed to the
 * nearest 2·half_unit) qualifies: moved less than KVB_RECHECK_MOVED as printed; 0 for NAN. */
int kvb_run_qualifies(double moved, double half_unit);
/* stats.c: a row's verdict over n ≤ 16 runs, ratio[n] its ratio in each (printed to the nearest
 * 2·half_unit) and qualifies[n] whether each run qualifies: "STEADY" when the qualifying runs' ratios all
 * lie within KVB_RUNS_SPREAD of their median (kvb_runs_spread), "SPREAD" when one does not, "-" when
 * fewer than KVB_STEADY_RUNS runs qualify. */
const char *kvb_runs_verdict(const double *ratio, const int *qualifies, size_t n, double half_unit);
/* spread.c: kvbench --spread RUN.md ...: reads the tables of kvbench --out's runs and prints, for each
 * row, its ratios, their median, its largest spread and the verdict; returns the exit status (0, or 2
 * with the file, line and field on stderr and nothing on stdout when a table cannot be read). */
int kvb_spread_main(int n, char *const *paths);

/* The Markdown table's header and rule, as kvb_print_header writes them and kvb_spread_main reads them. */
#define KVB_MARKDOWN_HEADER                                                                                   \
    "| group | what | MiB | ms | min - max | GFLOP | rate | ceiling | ratio | q1 - q3 | target | FMA | roof | " \
    "verdict |"
#define KVB_MARKDOWN_RULE "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|"

/* The groups, in the order kvbench.c runs them. */
int kvb_group_ceilings(void);   /* ceilings.c */
int kvb_group_formats(void);    /* bench_formats.c */
int kvb_group_decode(void);     /* bench_decode.c */
int kvb_group_peer(void);       /* bench_decode.c, with peers.py */
int kvb_group_v41(void);        /* bench_v41.c */
int kvb_group_native(void);     /* bench_native.c */
int kvb_group_prefill(void);    /* bench_prefill.c */
int kvb_group_recheck(void);    /* ceilings.c */

#endif
