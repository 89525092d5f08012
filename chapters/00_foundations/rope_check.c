/* rope_check: what a DeepSeek config's rotary settings compute (chapter 0;
 * chapters/00_foundations/README.md).
 *
 * From an MLA or DSA config (V2, V3, V3.2: the models whose softmax scale carries YaRN's mscale)
 * the program prints
 *   - the score of a query at position p against a key at p − Δ for p from Δ to 10^6: one number,
 *     because a rotation by p·θ_i times the inverse of one by (p − Δ)·θ_i is a rotation by Δ·θ_i;
 *   - the half-split pairing of a permuted vector against the interleaved pairing: the same
 *     rotation, channels (2i, 2i+1) moved to (i, i + Dr/2);
 *   - the frequency table θ_i = base^(−2i/Dr), each pair's wavelength and turns over the original
 *     context, YaRN's ramp and the blended table;
 *   - YaRN's mscale m = 0.1·mscale·ln s + 1, the softmax scale m²/√d_qk, and the share of a bf16
 *     latent cache row the rotary channels take.
 * Every number is computed from the formula here and checked against ref/core/rope.h before the
 * first line is printed; a disagreement exits 1.
 *
 *   rope_check [--config FILE.json] [--delta N]
 *
 * The default config is ref/configs/deepseek-v3.json under $KVL_ROOT, else the source tree. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "grouped.h"
#include "program.h"
#include "rng.h"
#include "rope.h"
#include "status.h"

#define MAX_DELTA 1000000
#define N_POSITIONS 6
/* Scores are formed in double: an angle of 10^6 rad carries about 10^-10 rad of rounding, so the
 * same score at two positions may differ by that much times ‖q‖‖k‖, never by more than 1e-8. */
#define SPREAD_TOL 1e-8
/* θ_i held in float32 by ref/core: one rounding of a double value, about 6e-8 relative. */
#define THETA_RTOL 1e-6

static const char DEFAULT_CONFIG[] = "ref/configs/deepseek-v3.json";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: rope_check [--config FILE.json] [--delta N]\n"
            "The rotary settings of an MLA or DSA config (default %s): the score of a\n"
            "query at position p against a key at p - N for p up to 10^6 (N in 0..%d, default\n"
            "5), the two pairings, the frequency table with YaRN's ramp, the mscale, the softmax\n"
            "scale and the share of a bf16 latent cache row the rotary channels take.\n",
            DEFAULT_CONFIG, MAX_DELTA);
    kvl_usage_model_types(f);
}

/* ---- what is printed, computed first -------------------------------------------------------- */

typedef struct {
    size_t Dr, d_qk, Dc;
    kvl_rope_config rc;
    kvl_rope plain, yarn;           /* ref/core's tables */
    double lo, hi;                  /* the ramp, by the formula */
    double m, scale;                /* mscale and softmax scale, by the formula */
    int64_t p[N_POSITIONS];
    double score[N_POSITIONS], spread, pairing_diff;
} check;

/* corr(n) = Dr·ln(L_orig/(2π n)) / (2 ln base): the pair whose wavelength fits n times in L_orig */
static double corr(const check *c, double n)
{
    return (double)c->Dr * log(c->rc.original_len / (2 * M_PI * n)) / (2 * log(c->rc.theta));
}

/* the ramp of pair i: 0 below lo (keep θ_i), 1 above hi (θ_i/s) */
static double ramp(const check *c, size_t i)
{
    const double r = ((double)i - c->lo) / (c->hi - c->lo);
    return r < 0 ? 0 : r > 1 ? 1 : r;
}

/* θ_i = base^(−2i/Dr), and YaRN's blend θ_i·(1 − γ_i) + (θ_i/s)·γ_i */
static double theta_plain(const check *c, size_t i)
{
    return pow(c->rc.theta, -2.0 * (double)i / (double)c->Dr);
}

static double theta_yarn(const check *c, size_t i)
{
    const double t = theta_plain(c, i), g = c->rc.factor > 1 ? ramp(c, i) : 0;
    return t * (1 - g) + t / c->rc.factor * g;
}

/* q·k of q rotated to position p and k to p − Δ (interleaved, double) */
static double score_at(const double *q, const double *k, const kvl_rope *r, int64_t p,
                       int64_t delta)
{
    double a[KVL_ROPE_MAX_DR], b[KVL_ROPE_MAX_DR], s = 0;
    memcpy(a, q, r->Dr * sizeof *a);
    memcpy(b, k, r->Dr * sizeof *b);
    kvl_rope_rotate_interleaved_f64(a, r, p);
    kvl_rope_rotate_interleaved_f64(b, r, p - delta);
    for (size_t i = 0; i < r->Dr; i++) s += a[i] * b[i];
    return s;
}

static void offset_scores(check *c, size_t delta)
{
    static const int64_t from[N_POSITIONS] = {0, 1000, 4096, 65536, 131072, 1000000};
    double q[KVL_ROPE_MAX_DR], k[KVL_ROPE_MAX_DR];
    kvl_rng rng;
    kvl_rng_seed(&rng, 2021);
    kvl_rng_normal_f64(&rng, q, c->Dr, 1);
    kvl_rng_normal_f64(&rng, k, c->Dr, 1);
    double lo = INFINITY, hi = -INFINITY;
    for (size_t j = 0; j < N_POSITIONS; j++) {
        c->p[j] = from[j] + (int64_t)delta;
        c->score[j] = score_at(q, k, &c->yarn, c->p[j], (int64_t)delta);
        lo = fmin(lo, c->score[j]), hi = fmax(hi, c->score[j]);
    }
    c->spread = hi - lo;
}

/* max |half-split(P x) − P interleaved(x)| with P moving channel 2i to i and 2i+1 to i + Dr/2 */
static double pairing_difference(const check *c, int64_t pos)
{
    double x[KVL_ROPE_MAX_DR], px[KVL_ROPE_MAX_DR];
    kvl_rng rng;
    kvl_rng_seed(&rng, 2019);
    kvl_rng_normal_f64(&rng, x, c->Dr, 1);
    const size_t half = c->Dr / 2;
    for (size_t i = 0; i < half; i++) px[i] = x[2 * i], px[i + half] = x[2 * i + 1];
    kvl_rope_rotate_interleaved_f64(x, &c->yarn, pos);
    kvl_rope_rotate_half_split_f64(px, &c->yarn, pos);
    double d = 0;
    for (size_t i = 0; i < half; i++)
        d = fmax(d, fmax(fabs(px[i] - x[2 * i]), fabs(px[i + half] - x[2 * i + 1])));
    return d;
}

/* The formula's numbers against ref/core's: KVL_OK, or a failure naming the first difference. */
static int agrees_with_ref(const check *c)
{
    double lo = 0, hi = 0;
    if (c->rc.factor > 1) {
        int rc = kvl_yarn_range(&lo, &hi, c->Dr, c->rc.theta, c->rc.original_len, c->rc.beta_fast,
                                c->rc.beta_slow);
        if (rc != KVL_OK) return rc;
        if (lo != c->lo || hi != c->hi)
            return kvl_fail(KVL_EINVAL, "YaRN range %g..%g, ref/core %g..%g", c->lo, c->hi, lo, hi);
    }
    for (size_t i = 0; i < c->Dr / 2; i++) {
        const double want = theta_yarn(c, i), got = c->yarn.theta[i];
        if (fabs(got - want) > THETA_RTOL * want)
            return kvl_fail(KVL_EINVAL, "theta_%zu = %.9g by the formula, %.9g in ref/core", i,
                            want, got);
    }
    const double m = kvl_yarn_mscale(c->rc.factor, c->rc.mscale);
    const double scale = kvl_yarn_softmax_scale(c->d_qk, c->rc.factor, c->rc.mscale);
    if (fabs(m - c->m) > 1e-12 || fabs(scale - c->scale) > 1e-12)
        return kvl_fail(KVL_EINVAL, "mscale %.9g, scale %.9g; ref/core %.9g, %.9g", c->m, c->scale,
                        m, scale);
    if (c->spread > SPREAD_TOL)
        return kvl_fail(KVL_EINVAL, "the score moved by %g between positions", c->spread);
    if (c->pairing_diff != 0)
        return kvl_fail(KVL_EINVAL, "the pairings differ by %g after the permutation",
                        c->pairing_diff);
    return KVL_OK;
}

/* Read the config and compute everything; KVL_EINVAL naming the file for one this program does not
 * read (checked against ref/core afterwards, by agrees_with_ref). */
static int run_check(check *c, const char *path, size_t delta)
{
    kvl_model m;
    int rc = kvl_model_load(&m, path);
    if (rc != KVL_OK) return rc;
    const kvl_generation gen = m.generation;
    c->Dr = m.qk_rope_head_dim, c->d_qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    c->Dc = m.kv_lora_rank, c->rc = m.rope;
    kvl_model_free(&m);
    char shown[512];
    kvl_shown(shown, sizeof shown, path);
    if (gen != KVL_GEN_MLA && gen != KVL_GEN_DSA)
        return kvl_fail(KVL_EINVAL, "%s: generation %s: rope_check reads MLA and DSA configs (V2, "
                        "V3, V3.2), whose softmax scale carries YaRN's mscale", shown,
                        kvl_generation_name(gen));
    if (c->Dr > KVL_ROPE_MAX_DR)
        return kvl_fail(KVL_EINVAL, "%s: qk_rope_head_dim %zu is more than %d", shown, c->Dr,
                        KVL_ROPE_MAX_DR);
    rc = kvl_rope_init(&c->plain, c->Dr, c->rc.theta);
    if (rc == KVL_OK && c->rc.factor > 1) {
        c->lo = fmax(floor(corr(c, c->rc.beta_fast)), 0);
        c->hi = fmin(ceil(corr(c, c->rc.beta_slow)), (double)c->Dr - 1);
        if (c->lo == c->hi) c->hi += 0.001;
        rc = kvl_rope_init_yarn(&c->yarn, c->Dr, c->rc.theta, c->rc.factor, c->rc.original_len,
                                c->rc.beta_fast, c->rc.beta_slow);
    } else if (rc == KVL_OK) {
        c->yarn = c->plain;
    }
    if (rc != KVL_OK) return rc;
    c->m = c->rc.factor > 1 ? 0.1 * c->rc.mscale * log(c->rc.factor) + 1 : 1;
    c->scale = c->m * c->m / sqrt((double)c->d_qk);
    offset_scores(c, delta);
    c->pairing_diff = pairing_difference(c, 100003);
    return KVL_OK;
}

/* ---- printing -------------------------------------------------------------------------------- */

static void print_offsets(const check *c, size_t delta)
{
    printf("Offset invariance: q at position p, k at p - %s, %zu rotary channels, YaRN table\n",
           KVL_GROUPED(delta), c->Dr);
    printf("%12s  %s\n", "p", "q(p) . k(p - delta)");
    for (size_t j = 0; j < N_POSITIONS; j++)
        printf("%12s  %+.12f\n", KVL_GROUPED(c->p[j]), c->score[j]);
    printf("largest difference between the scores: %.1e\n", c->spread);
    printf("Pairing: half-split rotation of the permuted vector minus the permuted interleaved "
           "rotation, max |diff| = %g\n\n",
           c->pairing_diff);
}

static void print_table(const check *c)
{
    const int yarn = c->rc.factor > 1;
    printf("Frequencies: theta_i = base^(-2i/Dr), wavelength 2 pi/theta_i positions; turns over "
           "the original %s positions\n",
           KVL_GROUPED(c->rc.original_len));
    printf("%4s %13s %13s %10s %6s %13s %13s\n", "i", "theta_i", "wavelength", "turns", "ramp",
           "YaRN theta_i", "YaRN wavelen");
    for (size_t i = 0; i < c->Dr / 2; i++) {
        const double t = theta_plain(c, i), ty = theta_yarn(c, i);
        printf("%4zu %13.6e %13s %10.2f %6.3f %13.6e %13s\n", i, t, KVL_FIXED(2 * M_PI / t, 1),
               c->rc.original_len * t / (2 * M_PI), yarn ? ramp(c, i) : 0.0, ty,
               KVL_FIXED(2 * M_PI / ty, 1));
    }
    printf("slowest wavelength = %s positions (pair %zu)\n",
           KVL_GROUPED(2 * M_PI / theta_plain(c, c->Dr / 2 - 1)), c->Dr / 2 - 1);
}

static void print_yarn(const check *c)
{
    const double row = (double)(c->Dc + c->Dr) * 2;
    if (c->rc.factor > 1)
        printf("YaRN: factor s = %g, beta_fast %g, beta_slow %g; ramp lo = %g, hi = %g: pairs "
               "i <= lo keep theta_i, pairs i >= hi take theta_i/s\n",
               c->rc.factor, c->rc.beta_fast, c->rc.beta_slow, c->lo, c->hi);
    else
        printf("YaRN: none (factor 1): the table is plain RoPE\n");
    printf("mscale m = %.6f (0.1 x mscale x ln s + 1, mscale %g, s %g)\n", c->m, c->rc.mscale,
           c->rc.factor);
    printf("softmax scale = %.7f (m^2 / sqrt(d_qk), d_qk = %zu; without YaRN 1/sqrt(d_qk) = "
           "%.7f)\n",
           c->scale, c->d_qk, 1 / sqrt((double)c->d_qk));
    printf("cache row = %s B per layer (bf16 latent: (%zu + %zu) x 2), the rotary key %zu B, a "
           "share of %.1f%%\n",
           KVL_GROUPED(row), c->Dc, c->Dr, 2 * c->Dr, 100.0 * 2 * (double)c->Dr / row);
}

/* ---- main ------------------------------------------------------------------------------------ */

enum { F_CONFIG, F_DELTA };
static const kvl_flag FLAGS[] = {{"--config", 1}, {"--delta", 1}};

int main(int argc, char **argv)
{
    size_t delta = 5;
    const char *config = NULL;
    kvl_args a = kvl_args_start("rope_check", argc, argv, FLAGS, sizeof FLAGS / sizeof *FLAGS, 0);
    const char *v;
    for (int k; (k = kvl_args_next(&a, &v)) != KVL_ARGS_END;) {
        if (k == KVL_ARGS_HELP) { usage(stdout); return kvl_exit_status("rope_check", 0); }
        if (k == KVL_ARGS_BAD) return 2;
        if (k == F_DELTA && kvl_parse_size(&delta, v, 0, MAX_DELTA))
            return kvl_bad_usage("rope_check", "--delta must be an integer in [0, 1000000]", v);
        if (k == F_CONFIG) config = v;
    }
    char path[4096];
    if (config) snprintf(path, sizeof path, "%s", config);
    else snprintf(path, sizeof path, "%s/%s", kvl_root_dir(), DEFAULT_CONFIG);

    static check c;
    int rc = run_check(&c, path, delta);
    if (rc != KVL_OK) {
        fprintf(stderr, "rope_check: %s\n", kvl_error());
        return rc == KVL_ENOMEM ? 1 : 2;
    }
    if (agrees_with_ref(&c) != KVL_OK) {
        fprintf(stderr, "rope_check: the formula and ref/core disagree: %s\n", kvl_error());
        return 1;
    }
    printf("rope_check: %s\n", config ? config : DEFAULT_CONFIG);
    printf("rotary channels Dr = %zu (%zu pairs), base %s, d_qk = %zu\n\n", c.Dr, c.Dr / 2,
           KVL_GROUPED_AT(c.rc.theta, 6), c.d_qk);
    print_offsets(&c, delta);
    print_table(&c);
    print_yarn(&c);
    return kvl_exit_status("rope_check", 0);
}
