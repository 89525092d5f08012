// %% [markdown]
// # Chapter 0 · Foundations: rotary positions, YaRN, RMSNorm and the online softmax
//
// The later chapters take four pieces for granted: the rotary position embedding (RoPE) that
// every DeepSeek key and query carries, YaRN's stretch of it to long contexts with the softmax
// scale it changes, the RMSNorm in front of every cached latent and compressed entry, and the
// online softmax that every tiled kernel of the project runs. This notebook builds each in plain
// C in its cells and checks it against the function of `ref/core` the project uses.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them.
// `build/bin/nb_00 --step` walks it cell by cell. The charts are drawn in
// `notebooks_c/draw_foundations.c`, the printed comparisons in `notebooks_c/draw_compare.c`.

// %%
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "draw_compare.h"
#include "draw_foundations.h"
#include "nb.h"
#include "norm.h"
#include "rng.h"
#include "rope.h"
#include "softmax.h"

// %% [markdown]
// ## Rotating pairs of channels
//
// RoPE (Su et al., RoFormer) writes a token's position into its query and key by rotating them.
// The $D$ rotary channels are taken as $D/2$ pairs; pair $i$ turns through the angle
// $p\,\theta_i$ at position $p$, with
//
// $$\theta_i = b^{-2i/D}, \quad i = 0 \dots D/2 - 1,$$
//
// $b$ the base (`rope_theta`, 10,000 for DeepSeek-V3). A pair $(a, c)$ becomes
//
// $$a' = a\,\mathrm{cos}\,\varphi - c\,\mathrm{sin}\,\varphi, \quad \varphi = p\,\theta_i,$$
//
// $$c' = a\,\mathrm{sin}\,\varphi + c\,\mathrm{cos}\,\varphi .$$
//
// Pair 0 turns one radian per position, a full turn every $2\pi$ positions; the last pair of
// V3's 64 channels turns once every 47,117 positions. Nothing is learned: the rotation is a
// fixed function of the position. The cell builds the table and the interleaved rotation
// (pair $i$ = channels $2i, 2i+1$) and checks them against `kvl_rope_freqs` and
// `kvl_rope_rotate_interleaved_f64`.

// %%
enum { DR = 64 };
static const double BASE = 10000;

/* theta[D/2] = base^(−2i/D) */
static void rope_table(double *theta, size_t D, double base)
{
    for (size_t i = 0; i < D / 2; i++) theta[i] = pow(base, -2.0 * (double)i / (double)D);
}

/* x[D] rotated to position p, pair i = channels (2i, 2i+1) */
static void rotate_interleaved(double *x, const double *theta, size_t D, double p)
{
    for (size_t i = 0; i < D / 2; i++) {
        const double c = cos(p * theta[i]), s = sin(p * theta[i]), a = x[2 * i], b = x[2 * i + 1];
        x[2 * i] = a * c - b * s;
        x[2 * i + 1] = a * s + b * c;
    }
}

/* θ_i of ref's table (float32) in double, so both rotations turn by the same angles */
static void table_of(double *theta, const kvl_rope *r)
{
    for (size_t i = 0; i < r->Dr / 2; i++) theta[i] = r->theta[i];
}

// %%
NB_CELL(cell_rotate)
{
    double theta[DR / 2], mine[DR], ref_x[DR], table_diff = 0;
    kvl_rope r;
    int rc = kvl_rope_init(&r, DR, BASE);
    if (rc != KVL_OK) return rc;
    rope_table(theta, DR, BASE);
    for (size_t i = 0; i < DR / 2; i++)
        table_diff = fmax(table_diff, fabs(theta[i] - r.theta[i]) / theta[i]);
    printf("theta_0 = %g, theta_1 = %.6f, theta_31 = %.6e: a turn every %s positions\n",
           theta[0], theta[1], theta[31], nb_num(2 * M_PI / theta[31], 0));
    /* ref holds θ_i in float32: one rounding, 6e-8 relative */
    rc = nbc_report("the table against kvl_rope_freqs", table_diff, 1, 1e-6);
    table_of(theta, &r);
    kvl_rng rng;
    kvl_rng_seed(&rng, 1);
    static const int64_t positions[] = {7, 4096, 1000000};
    for (size_t k = 0; k < 3 && rc == KVL_OK; k++) {
        kvl_rng_normal_f64(&rng, mine, DR, 1);
        memcpy(ref_x, mine, sizeof mine);
        rotate_interleaved(mine, theta, DR, (double)positions[k]);
        kvl_rope_rotate_interleaved_f64(ref_x, &r, positions[k]);
        double diff = 0, scale = 0;
        for (size_t i = 0; i < DR; i++)
            diff = fmax(diff, fabs(mine[i] - ref_x[i])), scale = fmax(scale, fabs(ref_x[i]));
        char what[80];
        snprintf(what, sizeof what, "rotation at p = %s against ref", nb_num(positions[k], 0));
        /* the same double angle; ref fuses one multiply-add, which moves the last bit */
        rc = nbc_report(what, diff, scale, 1e-14);
    }
    return rc;
}

// %% [markdown]
// ## Why only the offset matters
//
// Write pair $i$ of a vector as one complex number $z = a + \mathrm{i}\,c$. The rotation
// multiplies it by $e^{\mathrm{i} p \theta_i}$, and the dot product of two vectors is the real
// part of $\sum_i q_i \bar{k}_i$. For a query at $p$ and a key at $j$:
//
// $$q(p) \cdot k(j) = \mathrm{Re} \sum_i q_i\, \bar{k}_i\, e^{\mathrm{i}(p - j)\theta_i} .$$
//
// The positions enter only as $p - j$: the score of a query and a key depends on how far apart
// they are, not on where they stand. That is the property RoPE was built for, and what lets a
// cache keep keys already rotated (each key's rotation is fixed at its own position, whatever
// query reads it later). The cell scores one query and one key at offset $\Delta$ for $\Delta =
// 0 \dots 64$, once with the query at $p = \Delta$ and once at $p = 10^6 + \Delta$: the two
// curves are one.

// %%
enum { OFFSETS = 65 };

/* q·k of q rotated to position p and k to p − delta */
static double score_at(const double *q, const double *k, const double *theta, double p,
                       double delta)
{
    double a[DR], b[DR], s = 0;
    memcpy(a, q, sizeof a);
    memcpy(b, k, sizeof b);
    rotate_interleaved(a, theta, DR, p);
    rotate_interleaved(b, theta, DR, p - delta);
    for (size_t i = 0; i < DR; i++) s += a[i] * b[i];
    return s;
}

NB_CELL(cell_offset)
{
    double theta[DR], q[DR], k[DR], x[OFFSETS], near[OFFSETS], far[OFFSETS], diff = 0;
    double lo = 0, hi = 0;
    rope_table(theta, DR, BASE);
    kvl_rng rng;
    kvl_rng_seed(&rng, 2);
    kvl_rng_normal_f64(&rng, q, DR, 1);
    kvl_rng_normal_f64(&rng, k, DR, 1);
    for (size_t d = 0; d < OFFSETS; d++) {
        x[d] = (double)d;
        near[d] = score_at(q, k, theta, x[d], x[d]);
        far[d] = score_at(q, k, theta, 1e6 + x[d], x[d]);
        diff = fmax(diff, fabs(near[d] - far[d]));
        lo = fmin(lo, near[d]), hi = fmax(hi, near[d]);
    }
    static const double ps[] = {5, 1005, 65541, 1000005};
    printf("offset 5:");
    for (size_t j = 0; j < 4; j++)
        printf("  p = %s: %+.6f", nb_num(ps[j], 0), score_at(q, k, theta, ps[j], 5));
    printf("\n");
    /* angles up to 10^6 rad carry 10^-10 rad of rounding */
    int rc = nbc_report("scores at p = delta against p = 10^6 + delta", diff, 1, 1e-8);
    const nb00_series series[] = {{near, "#1f4e8c", "query at p = delta", 0},
                                  {far, "#f4a261", "query at p = 10^6 + delta", 1}};
    const nb00_chart chart = {"rope_offset", "The RoPE score depends on the offset only",
                              "one query and one key, 64 channels, base 10,000",
                              "offset delta = p - j", "q(p) . k(j)", x, OFFSETS,
                              4 * floor(lo / 4), 4 * ceil(hi / 4), 0,
                              NULL, NULL, 0, NAN, NULL};
    return rc == KVL_OK ? nb00_draw_chart(&chart, series, 2) : rc;
}

// %% [markdown]
// ## Two pairings of the same rotation
//
// Which channels form a pair is a convention, and the lineage uses both:
//
// - interleaved, pair $i$ = channels $(2i, 2i+1)$: RoFormer's own layout, DeepSeek's inference
//   code for MLA's rotary key and query (V2, V3, V3.2's attention, V4, V4.1);
// - half-split, pair $i$ = channels $(i, i + D/2)$: Hugging Face's `rotate_half` (Llama and the
//   models ported to transformers), gpt-oss, and V3.2's indexer.
//
// They are the same function up to a permutation $P$ of the channels that moves channel $2i$ to
// $i$ and $2i+1$ to $i + D/2$:
//
// $$\mathrm{half}(P x) = P\, \mathrm{interleaved}(x).$$
//
// A checkpoint's weights fix which one it was trained with, so a port that rotates with the
// other pairing turns the wrong channels together and the scores are wrong, silently; that is
// why `ref/core/rope.h` names the pairing in every function. The cell builds the half-split
// rotation, checks it against `kvl_rope_rotate_half_split_f64`, and checks the permutation
// identity.

// %%
/* x[D] rotated to position p, pair i = channels (i, i + D/2) */
static void rotate_half_split(double *x, const double *theta, size_t D, double p)
{
    const size_t h = D / 2;
    for (size_t i = 0; i < h; i++) {
        const double c = cos(p * theta[i]), s = sin(p * theta[i]), a = x[i], b = x[i + h];
        x[i] = a * c - b * s;
        x[i + h] = a * s + b * c;
    }
}

/* y = P x: channel 2i to i, 2i+1 to i + D/2 */
static void permute(double *y, const double *x, size_t D)
{
    for (size_t i = 0; i < D / 2; i++) y[i] = x[2 * i], y[i + D / 2] = x[2 * i + 1];
}

NB_CELL(cell_pairing)
{
    double theta[DR / 2], x[DR], px[DR], by_ref[DR], inter[DR], mine_diff = 0, perm_diff = 0;
    kvl_rope r;
    int rc = kvl_rope_init(&r, DR, BASE);
    if (rc != KVL_OK) return rc;
    table_of(theta, &r);
    kvl_rng rng;
    kvl_rng_seed(&rng, 3);
    kvl_rng_normal_f64(&rng, x, DR, 1);
    permute(px, x, DR);
    memcpy(by_ref, px, sizeof px);
    rotate_half_split(px, theta, DR, 100003);
    kvl_rope_rotate_half_split_f64(by_ref, &r, 100003);
    rotate_interleaved(x, theta, DR, 100003);
    permute(inter, x, DR);
    for (size_t i = 0; i < DR; i++) {
        mine_diff = fmax(mine_diff, fabs(px[i] - by_ref[i]));
        perm_diff = fmax(perm_diff, fabs(px[i] - inter[i]));
    }
    /* ref fuses one multiply-add: the last bit may move */
    rc = nbc_report("half-split rotation against kvl_rope_rotate_half_split_f64", mine_diff, 1,
                    1e-14);
    return rc == KVL_OK ? nbc_report("half(P x) against P interleaved(x)", perm_diff, 1, 0) : rc;
}

// %% [markdown]
// ## Long contexts: YaRN
//
// A model trained on $L$ positions has seen each pair turn through the angles $0 \dots L\theta_i$
// only. Pairs that turn many times over $L$ have seen every angle; the slowest pairs have not
// completed one turn, and a longer context shows them angles they never saw. YaRN (Peng et al.)
// stretches the slow pairs and leaves the fast ones alone. It counts the turns of pair $i$ over
// the original context, $r_i = L\theta_i / 2\pi$, and the pair index at which that count equals
// $n$,
//
// $$\mathrm{corr}(n) = \frac{D\, \mathrm{ln}(L / 2\pi n)}{2\, \mathrm{ln}\, b}.$$
//
// Pairs below $\mathrm{lo} = \lfloor \mathrm{corr}(\beta_{\mathrm{fast}}) \rfloor$ turn more than
// $\beta_{\mathrm{fast}}$ times and keep $\theta_i$; pairs above $\mathrm{hi} = \lceil
// \mathrm{corr}(\beta_{\mathrm{slow}}) \rceil$ turn less than $\beta_{\mathrm{slow}}$ times and
// are interpolated, $\theta_i / s$ with $s$ the scaling factor; in between a linear ramp blends
// the two:
//
// $$\gamma_i = \mathrm{clamp}\Big(\frac{i - \mathrm{lo}}{\mathrm{hi} - \mathrm{lo}}, 0, 1\Big),$$
//
// $$\theta'_i = (1 - \gamma_i)\,\theta_i + \gamma_i\, \theta_i / s .$$
//
// V3's config: $s = 40$, $L = 4{,}096$, $\beta_{\mathrm{fast}} = 32$, $\beta_{\mathrm{slow}} =
// 1$, so $40 \times 4{,}096 = 163{,}840$ positions. The cell reads those from
// `ref/configs/deepseek-v3.json`, builds the ramp and the table, and checks them against
// `kvl_yarn_range` and `kvl_yarn_freqs`; the chart shows each pair's wavelength
// $2\pi/\theta_i$ before and after.

// %%
typedef struct {
    double base, s, L, beta_fast, beta_slow, mscale;
    size_t D, d_qk;
} yarn_settings;

/* the pair index whose wavelength fits n times into L */
static double corr(const yarn_settings *y, double n)
{
    return (double)y->D * log(y->L / (2 * M_PI * n)) / (2 * log(y->base));
}

/* theta'[D/2] and the ramp's ends */
static void yarn_table(double *theta, double *lo, double *hi, const yarn_settings *y)
{
    *lo = fmax(floor(corr(y, y->beta_fast)), 0);
    *hi = fmin(ceil(corr(y, y->beta_slow)), (double)y->D - 1);
    if (*hi == *lo) *hi += 0.001; /* DeepSeek's guard against a zero-width ramp */
    rope_table(theta, y->D, y->base);
    for (size_t i = 0; i < y->D / 2; i++) {
        const double g = fmin(fmax(((double)i - *lo) / (*hi - *lo), 0), 1);
        theta[i] = (1 - g) * theta[i] + g * theta[i] / y->s;
    }
}

/* V3's rotary settings, read from its config */
static int v3_settings(yarn_settings *y)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path("ref/configs/deepseek-v3.json"));
    if (rc != KVL_OK) return rc;
    *y = (yarn_settings){m.rope.theta,     m.rope.factor,    m.rope.original_len,
                         m.rope.beta_fast, m.rope.beta_slow, m.rope.mscale,
                         m.qk_rope_head_dim, m.qk_nope_head_dim + m.qk_rope_head_dim};
    kvl_model_free(&m);
    return KVL_OK;
}

// %%
NB_CELL(cell_yarn)
{
    yarn_settings y;
    int rc = v3_settings(&y);
    if (rc != KVL_OK) return rc;
    double theta[DR / 2], plain[DR / 2], lo, hi, ref_lo, ref_hi, diff = 0;
    float ref_theta[DR / 2];
    yarn_table(theta, &lo, &hi, &y);
    rope_table(plain, y.D, y.base);
    rc = kvl_yarn_range(&ref_lo, &ref_hi, y.D, y.base, y.L, y.beta_fast, y.beta_slow);
    if (rc == KVL_OK)
        rc = kvl_yarn_freqs(ref_theta, y.D, y.base, y.s, y.L, y.beta_fast, y.beta_slow);
    if (rc != KVL_OK) return rc;
    printf("V3: D = %zu, base %s, s = %g, L = %s, beta_fast %g, beta_slow %g\n", y.D,
           nb_num(y.base, 0), y.s, nb_num(y.L, 0), y.beta_fast, y.beta_slow);
    printf("corr(beta_fast) = %.3f -> lo = %g; corr(beta_slow) = %.3f -> hi = %g "
           "(kvl_yarn_range: %g, %g)\n",
           corr(&y, y.beta_fast), lo, corr(&y, y.beta_slow), hi, ref_lo, ref_hi);
    printf("%4s %12s %12s %14s\n", "pair", "turns in L", "wavelength", "YaRN wavelength");
    static const size_t show[] = {0, 10, 11, 16, 22, 23, 31};
    for (size_t k = 0; k < sizeof show / sizeof show[0]; k++) {
        const size_t i = show[k];
        printf("%4zu %12.2f %12s %14s\n", i, y.L * plain[i] / (2 * M_PI),
               nb_num(2 * M_PI / plain[i], 1), nb_num(2 * M_PI / theta[i], 1));
    }
    for (size_t i = 0; i < y.D / 2; i++)
        diff = fmax(diff, fabs(theta[i] - ref_theta[i]) / theta[i]);
    /* ref blends in float32, as DeepSeek's precompute_freqs_cis: a few roundings */
    rc = nb_expect(lo == ref_lo && hi == ref_hi, "ramp %g..%g, ref %g..%g", lo, hi, ref_lo, ref_hi);
    if (rc == KVL_OK) rc = nbc_report("YaRN table against kvl_yarn_freqs", diff, 1, 1e-6);
    double x[DR / 2], before[DR / 2], after[DR / 2];
    for (size_t i = 0; i < y.D / 2; i++) {
        x[i] = (double)i;
        before[i] = log10(2 * M_PI / plain[i]);
        after[i] = log10(2 * M_PI / theta[i]);
    }
    const double marks[] = {lo, hi};
    static const char *const mark_labels[] = {"lo: ramp starts", "hi: ramp ends, theta/s"};
    const nb00_series series[] = {{after, "#f4a261", "YaRN, s = 40", 0},
                                  {before, "#1f4e8c", "plain RoPE", 1}};
    const nb00_chart chart = {"yarn_frequencies", "YaRN stretches only the slow pairs",
                              "DeepSeek-V3: 64 rotary channels, base 10,000, s = 40, L = 4,096",
                              "pair i", "wavelength 2 pi/theta_i (positions)", x, y.D / 2, 0, 7,
                              1, marks, mark_labels, 2, log10(y.L), "original context L = 4,096"};
    return rc == KVL_OK ? nb00_draw_chart(&chart, series, 2) : rc;
}

// %% [markdown]
// Stretching the slow pairs flattens the softmax: more keys look alike to a query. YaRN
// compensates with a temperature, which DeepSeek writes as a factor on the softmax scale,
//
// $$m = 0.1\, \mu\, \mathrm{ln}\, s + 1,$$
//
// with $\mu$ the config's `mscale` (transformers' `mscale_all_dim`; 1 for V3). The YaRN paper's
// $\sqrt{1/t} = 0.1\,\mathrm{ln}\, s + 1$ multiplies both $q$ and $k$, so the score gains $m^2$,
// and DeepSeek puts the square into the scale:
//
// $$\mathrm{scale} = \frac{m^2}{\sqrt{d_{qk}}}, \quad d_{qk} = D_{\mathrm{nope}} + D_r = 192 .$$
//
// (V4 and V4.1 use $D_h^{-1/2}$ with no $m$.)

// %%
NB_CELL(cell_mscale)
{
    yarn_settings y;
    int rc = v3_settings(&y);
    if (rc != KVL_OK) return rc;
    const double m = 0.1 * y.mscale * log(y.s) + 1, scale = m * m / sqrt((double)y.d_qk);
    const double ref_m = kvl_yarn_mscale(y.s, y.mscale);
    const double ref_scale = kvl_yarn_softmax_scale(y.d_qk, y.s, y.mscale);
    printf("m = 0.1 x %g x ln %g + 1 = %.6f (kvl_yarn_mscale %.6f)\n", y.mscale, y.s, m, ref_m);
    printf("scale = m^2 / sqrt(%zu) = %.7f (kvl_yarn_softmax_scale %.7f); 1/sqrt(%zu) = %.7f, "
           "so %.3fx\n",
           y.d_qk, scale, ref_scale, y.d_qk, 1 / sqrt((double)y.d_qk), m * m);
    return nb_expect(fabs(m - ref_m) < 1e-12 && fabs(scale - ref_scale) < 1e-12,
                     "mscale or scale differ from ref/core");
}

// %% [markdown]
// ## The softmax scale
//
// A score is a dot product of $d$ terms. With the channels of $q$ and $k$ independent, of mean 0
// and variance 1, $q \cdot k$ has variance $d$: at $d = 192$ scores of $\pm 14$ are ordinary, and
// a softmax over them puts nearly all the weight on one key. Dividing by $\sqrt{d}$ gives the
// scores variance 1 whatever the head width (Vaswani et al.). The cell measures the spread over
// 4,000 random pairs at three widths.

// %%
NB_CELL(cell_scale)
{
    enum { PAIRS = 4000 };
    static const size_t widths[] = {16, 64, 192};
    kvl_rng rng;
    kvl_rng_seed(&rng, 4);
    int rc = KVL_OK;
    for (size_t w = 0; w < 3 && rc == KVL_OK; w++) {
        const size_t d = widths[w];
        double q[192], k[192], sum2 = 0;
        for (size_t n = 0; n < PAIRS; n++) {
            kvl_rng_normal_f64(&rng, q, d, 1);
            kvl_rng_normal_f64(&rng, k, d, 1);
            double s = 0;
            for (size_t i = 0; i < d; i++) s += q[i] * k[i];
            sum2 += s * s;
        }
        const double sd = sqrt(sum2 / PAIRS);
        printf("d = %3zu: std of q.k = %5.2f (sqrt d = %5.2f); of q.k/sqrt d = %.2f\n", d, sd,
               sqrt((double)d), sd / sqrt((double)d));
        /* 4,000 samples: the estimate of a unit spread is within a few percent */
        rc = nb_expect(fabs(sd / sqrt((double)d) - 1) < 0.1, "spread %g at d = %zu", sd, d);
    }
    return rc;
}

// %% [markdown]
// ## RMSNorm
//
// RMSNorm (Zhang & Sennrich) scales a vector to unit root mean square and multiplies by a learned
// gain $g$:
//
// $$\mathrm{RMSNorm}(v) = g \odot \frac{v}{\sqrt{\frac{1}{n}\sum_i v_i^2 + \epsilon}} .$$
//
// Unlike LayerNorm it subtracts no mean and adds no bias; the paper found the re-centring
// dispensable and the norm cheaper. Its output does not depend on the input's scale,
// $\mathrm{RMSNorm}(c\,v) = \mathrm{RMSNorm}(v)$ for $c > 0$ (up to $\epsilon$). That is why the
// lineage puts it in front of what it caches: MLA's latent $c_{kv}$ (chapter 2), V4's compressed
// entries (chapter 6) and V4.1's (chapter 7) leave an RMSNorm with a known size whatever the
// token's residual stream held, so the scores keep their range and a quantised cache (chapter 5)
// knows its bound: with $g = 1$ the squares sum to $n$, so no channel exceeds $\sqrt{n}$. The
// cell checks the formula against `kvl_rmsnorm_f64` and the scale invariance.

// %%
/* y[n] = g ⊙ v / sqrt(mean(v²) + eps) */
static void rmsnorm(double *y, const double *v, const double *g, size_t n, double eps)
{
    double ms = 0;
    for (size_t i = 0; i < n; i++) ms += v[i] * v[i];
    const double r = 1 / sqrt(ms / (double)n + eps);
    for (size_t i = 0; i < n; i++) y[i] = g[i] * v[i] * r;
}

NB_CELL(cell_rmsnorm)
{
    enum { N = 512 };
    double v[N], g[N], big[N], mine[N], by_ref[N], scaled[N], ones[N], unit[N];
    kvl_rng rng;
    kvl_rng_seed(&rng, 5);
    kvl_rng_normal_f64(&rng, v, N, 3);
    kvl_rng_normal_f64(&rng, g, N, 1);
    for (size_t i = 0; i < N; i++) big[i] = 1000 * v[i], ones[i] = 1;
    rmsnorm(mine, v, g, N, 1e-6);
    kvl_rmsnorm_f64(by_ref, v, g, 1, N, 1e-6);
    rmsnorm(scaled, big, g, N, 1e-6);
    rmsnorm(unit, v, ones, N, 1e-6);
    double d_ref = 0, d_scale = 0, peak = 0, ss = 0;
    for (size_t i = 0; i < N; i++) {
        d_ref = fmax(d_ref, fabs(mine[i] - by_ref[i]));
        d_scale = fmax(d_scale, fabs(mine[i] - scaled[i]));
        peak = fmax(peak, fabs(unit[i]));
        ss += unit[i] * unit[i];
    }
    printf("n = %d, g = 1: sum of squares %.3f, largest channel %.3f <= sqrt(n) = %.3f\n", N, ss,
           peak, sqrt(N));
    int rc = nbc_report("RMSNorm against kvl_rmsnorm_f64", d_ref, 1, 1e-12);
    /* eps/mean(v²) ≈ 1e-7 moves the output by that much relative */
    if (rc == KVL_OK) rc = nbc_report("RMSNorm(1,000 v) against RMSNorm(v)", d_scale, 1, 1e-6);
    return rc;
}

// %% [markdown]
// ## The online softmax
//
// Attention's output for one query is $o = \sum_j p_j v_j$ with $p = \mathrm{softmax}(s)$. Read
// in one pass, the softmax needs the largest score before the first exponential (so that no
// $e^{s}$ overflows) and the sum of all of them before the first weight. A kernel that streams
// the keys tile by tile has neither. The online softmax (Milakov & Gimelshein; the rescaling
// FlashAttention runs) keeps three running quantities, the largest score so far $m$, the sum
// $\ell$ of $e^{s_j - m}$, and the unnormalised output $a = \sum_j e^{s_j - m} v_j$, and folds
// each new score $s$ with value $v$ in:
//
// $$m' = \mathrm{max}(m, s), \quad \alpha = e^{m - m'},$$
//
// $$\ell' = \alpha\,\ell + e^{s - m'}, \quad a' = \alpha\, a + e^{s - m'}\, v .$$
//
// When the maximum rises, $\alpha < 1$ rescales everything summed so far to the new maximum. At
// the end $o = a / \ell$, exactly the one-pass result up to rounding. It starts from $m =
// -\infty$, $\ell = 0$, $a = 0$. Two partial states over disjoint keys combine the same way,
// which is how split-K decoding merges its pieces:
//
// $$m = \mathrm{max}(m_1, m_2), \quad \ell = \ell_1 e^{m_1 - m} + \ell_2 e^{m_2 - m},$$
//
// $$a = a_1 e^{m_1 - m} + a_2 e^{m_2 - m} .$$
//
// The cell runs 1,000 keys (scores up to 300, where $e^{s}$ is far past float's range) in tiles
// of 64, checks the result against a one-pass softmax and against
// `ref/core`'s `kvl_online_start`, `kvl_online_step` and `kvl_online_finish`, and combines the
// two halves of the keys.

// %%
enum { KEYS = 1000, DV = 16, TILE = 64 };

typedef struct {
    double m, l, a[DV];
} online;

static void online_start(online *st)
{
    st->m = -INFINITY, st->l = 0;
    memset(st->a, 0, sizeof st->a);
}

/* fold in score s with value v[DV] */
static void online_step(online *st, double s, const float *v)
{
    const double m = fmax(st->m, s), alpha = exp(st->m - m), p = exp(s - m);
    st->l = alpha * st->l + p;
    for (size_t i = 0; i < DV; i++) st->a[i] = alpha * st->a[i] + p * v[i];
    st->m = m;
}

/* x ← x combined with y (disjoint keys); an empty side (m = −∞) adds nothing */
static void online_combine(online *x, const online *y)
{
    const double m = fmax(x->m, y->m);
    const double ex = x->m == -INFINITY ? 0 : exp(x->m - m);
    const double ey = y->m == -INFINITY ? 0 : exp(y->m - m);
    x->l = x->l * ex + y->l * ey;
    for (size_t i = 0; i < DV; i++) x->a[i] = x->a[i] * ex + y->a[i] * ey;
    x->m = m;
}

/* o[DV] = softmax(s) · V in one pass, max first */
static void one_pass(double *o, const double *s, const float *V, size_t n)
{
    double p[KEYS];
    memcpy(p, s, n * sizeof *p);
    kvl_softmax_f64(p, n);
    for (size_t i = 0; i < DV; i++) {
        o[i] = 0;
        for (size_t j = 0; j < n; j++) o[i] += p[j] * V[j * DV + i];
    }
}

static double max_rel(const double *a, const double *b, size_t n)
{
    double d = 0, scale = 0;
    for (size_t i = 0; i < n; i++) d = fmax(d, fabs(a[i] - b[i])), scale = fmax(scale, fabs(b[i]));
    return d / scale;
}

// %%
NB_CELL(cell_online)
{
    static double s[KEYS];
    static float V[KEYS * DV], sf[KEYS];
    kvl_rng rng;
    kvl_rng_seed(&rng, 6);
    kvl_rng_uniform_f32(&rng, sf, KEYS, 0, 300);
    kvl_rng_uniform_f32(&rng, V, KEYS * DV, -1, 1);
    for (size_t j = 0; j < KEYS; j++) s[j] = sf[j];
    double want[DV], tiled[DV], halves[DV], by_ref[DV];
    one_pass(want, s, V, KEYS);
    online st, first, second;
    online_start(&st);
    for (size_t t0 = 0; t0 < KEYS; t0 += TILE) /* a tile at a time, as a kernel reads them */
        for (size_t j = t0; j < t0 + TILE && j < KEYS; j++) online_step(&st, s[j], V + j * DV);
    for (size_t i = 0; i < DV; i++) tiled[i] = st.a[i] / st.l;
    online_start(&first), online_start(&second);
    for (size_t j = 0; j < KEYS; j++)
        online_step(j < KEYS / 2 ? &first : &second, s[j], V + j * DV);
    online_combine(&first, &second);
    for (size_t i = 0; i < DV; i++) halves[i] = first.a[i] / first.l;
    kvl_online ref;
    float acc[DV], o[DV];
    kvl_online_start(&ref, acc, DV, -INFINITY);
    for (size_t j = 0; j < KEYS; j++) kvl_online_step(&ref, acc, sf[j], V + j * DV, DV);
    kvl_online_finish(o, &ref, acc, DV);
    for (size_t i = 0; i < DV; i++) by_ref[i] = o[i];
    printf("%s keys, scores in [0, 300), tiles of %d: running max %.3f, l = %.4f\n",
           nb_num(KEYS, 0), TILE, st.m, st.l);
    /* double sums in another order */
    int rc = nbc_report("tiled online softmax against one pass", max_rel(tiled, want, DV), 1,
                        1e-12);
    if (rc == KVL_OK)
        rc = nbc_report("two halves combined against one pass", max_rel(halves, want, DV), 1,
                        1e-12);
    /* ref accumulates a in float32 over 1,000 rows */
    if (rc == KVL_OK)
        rc = nbc_report("kvl_online_* against one pass", max_rel(by_ref, want, DV), 1, 1e-5);
    return rc;
}

// %% [markdown]
// ## What the rotary channels cost
//
// A rotated key cannot be absorbed into a weight matrix: the rotation between $W$ and the cached
// vector depends on the key's position, so MLA (chapter 2) caches the rotary part of its key
// apart from the latent, already rotated, one $D_r = 64$ vector shared by all heads. The cell
// prices V3's bf16 row from its config.

// %%
NB_CELL(cell_cache_row)
{
    kvl_model m;
    int rc = kvl_model_load(&m, nb_path("ref/configs/deepseek-v3.json"));
    if (rc != KVL_OK) return rc;
    const size_t Dc = m.kv_lora_rank, Dr = m.qk_rope_head_dim, row = (Dc + Dr) * 2;
    printf("V3 row: (Dc %zu + Dr %zu) x 2 B = %s B per layer, of which RoPE %zu B (%.1f%%); "
           "x %zu layers = %s B per token\n",
           Dc, Dr, nb_num((double)row, 0), Dr * 2, 100.0 * (double)(2 * Dr) / (double)row,
           m.n_layers, nb_num((double)(row * m.n_layers), 0));
    kvl_model_free(&m);
    return nb_expect(row == 1152, "V3's row is %zu B, chapter 2 prices 1,152", row);
}

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_rotate), NB_RUN(cell_offset),
                                    NB_RUN(cell_pairing), NB_RUN(cell_yarn),
                                    NB_RUN(cell_mscale), NB_RUN(cell_scale),
                                    NB_RUN(cell_rmsnorm), NB_RUN(cell_online),
                                    NB_RUN(cell_cache_row)};
    static const char *const figures[] = {"rope_offset", "yarn_frequencies", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
