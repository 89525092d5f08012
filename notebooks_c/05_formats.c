// %% [markdown]
// # Chapter 5 · The formats a cache is made of: E4M3 … NVFP4, and DeepSeek's rows
//
// V3.2 stores its cache in FP8, V4 in FP8 with a bf16 exception, V4.1 in FP4. This notebook decodes
// the element formats code by code (`formats/element.h`), then writes the two encoders the cache
// needs, E4M3 and E2M1, and one MXFP4 block in a few lines of C each and checks them bit for bit
// against `formats/`. It prices the block-scaled schemes in bits per element (`formats/block.h`),
// shows why a fractional scale beats a power of two, reproduces a numpy check of V4.1's FP4 cache
// digit for digit, and packs one vector into each of DeepSeek's KV rows (`formats/rows.h`).
// Everything here runs on `formats/`, which depends on nothing but libc and libm.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them.
// `build/bin/nb_05 --step` walks it cell by cell; `make nb-05` rebuilds it after an edit and walks
// it again.

// %%
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "draw_formats.h"
#include "element.h"
#include "nb.h"
#include "rng.h"
#include "rows.h"
#include "scale.h"
#include "svg.h"

// %% [markdown]
// ## FP8: E4M3 and E5M2
//
// A code holds a sign $s$, an exponent field $e$ and a mantissa field $m$. With $E$ exponent bits,
// $M$ mantissa bits and bias $b$ it means
//
// $$x = (-1)^s \, 2^{e-b} \left(1 + \frac{m}{2^M}\right) \quad (e > 0),$$
//
// $$x = (-1)^s \, 2^{1-b} \, \frac{m}{2^M} \quad (e = 0,\ \text{subnormal}).$$
//
// E4M3 spends 4 bits on the exponent and 3 on the mantissa ($b = 7$); E5M2 5 and 2 ($b = 15$). E4M3
// drops the infinities and keeps a single NaN pattern, so the all-ones exponent is an ordinary
// binade up to $448 = 1.75 \cdot 2^8$. The FP8 paper counts that as going "from 17 to 18 binades";
// measured as $\log_2(\max / \text{smallest subnormal})$, the cell finds 16.9 for an IEEE-style
// E4M3 (largest value 240, the last code below the all-ones exponent) and 17.8 for the real one:
// the paper rounds up.

// %%
NB_CELL(cell_fp8)
{
    size_t finite = 0;
    double min_sub = INFINITY;
    for (unsigned c = 1; c < 0x80; c++) {
        float v = kvf_e4m3_decode((uint8_t)c);
        if (isfinite(v)) finite++, min_sub = fmin(min_sub, v);
    }
    const double max = kvf_element_max(KVF_E4M3), ieee_max = kvf_e4m3_decode(0x77);
    printf(
        "E4M3: %zu positive finite non-zero codes, max %g (code 0x7e), smallest subnormal 2^%.0f, "
        "NaN 0x7f and 0xff\n",
        finite, max, log2(min_sub));
    printf(
        "      binades log2(max / smallest subnormal): %.2f; with IEEE-style infinities (max %g): %.2f\n",
        log2(max / min_sub), ieee_max, log2(ieee_max / min_sub));
    printf("E5M2: max %s, smallest subnormal 2^%.0f, +inf code 0x7c\n",
           nb_num(kvf_element_max(KVF_E5M2), 6),
           log2(kvf_e5m2_decode(0x01)));
    printf(
        "E8M0 (scales only): code 0x00 = 2^%.0f ... code 0xfe = 2^%.0f, 0xff NaN; no zero, no sign\n",
        log2(kvf_e8m0_decode(0x00)), log2(kvf_e8m0_decode(0xfe)));
    return nb_expect(finite == 126 && isnan(kvf_e4m3_decode(0x7f)), "E4M3 table: %zu finite codes",
                     finite);
}

// %% [markdown]
// ## E2M1: eight magnitudes
//
// The FP4 element has a sign, two exponent bits and one mantissa bit ($b = 1$): sixteen codes, all
// of them numbers (no infinity, no NaN). The magnitudes are 0, 0.5, 1, 1.5, 2, 3, 4, 6, spaced 0.5,
// then 1, then 2. Everything about FP4 accuracy is how well a block's values land on this ladder,
// and that is the scale's job.

// %%
static float e2m1_mags[8];

NB_CELL(cell_e2m1)
{
    printf("code  value     code  value\n");
    for (unsigned c = 0; c < 8; c++) {
        e2m1_mags[c] = kvf_e2m1_decode((uint8_t)c);
        printf(" 0x%x  %5g      0x%x  %5g\n", c, (double)e2m1_mags[c], c | 8,
               (double)kvf_e2m1_decode((uint8_t)(c | 8)));
    }
    return dfmt_ladder_figure(e2m1_mags);
}

// %% [markdown]
// ## Encoding, written out: round to nearest even, then saturate
//
// To encode $x$, find its binade, $k = \max(\lfloor \log_2 |x| \rfloor,\ 1 - b)$ (the subnormals
// share the smallest normal binade's step), so the step between neighbouring codes there is $q =
// 2^{k-M}$. Round $|x|/q$ to the nearest integer, a tie going to the even one:
//
// $$\hat{x} = q \cdot \operatorname{rne}(|x| / q), \qquad q = 2^{k - M}.$$
//
// A value that rounds up into the next binade is still right: $\hat{x} = 2^{k+1}$ is a code there.
// Above the largest finite value the format decides. E4M3's plain cast (numpy with ml_dtypes) gives
// NaN, its saturating cast (CUDA's `__NV_SATFINITE`, what DeepSeek's kernels use) gives $\pm 448$;
// E2M1 has no NaN and always saturates at $\pm 6$. The code is then the fields of $\hat{x}$: $e =
// 0$ and $m = \hat{x} / 2^{1-b-M}$ below $2^{1-b}$, else $e = \lfloor \log_2 \hat{x} \rfloor + b$
// and $m = \hat{x} / 2^{e-b-M} - 2^M$. NaN is not an input here: the block quantisers refuse it
// first.

// %%
typedef struct {
    int exp_bits, mant_bits, bias;
    double max;   /* largest finite value */
    int nan;      /* the NaN code of the positive half, -1 if the format has none */
} minifloat;

static const minifloat E4M3 = {4, 3, 7, 448, 0x7f}, E2M1 = {2, 1, 1, 6, -1};

/* the exponent and mantissa fields of a representable magnitude v */
static unsigned fields_of(double v, const minifloat *f)
{
    const int k_min = 1 - f->bias;
    if (v < ldexp(1, k_min)) return (unsigned)(v / ldexp(1, k_min - f->mant_bits));
    const int k = ilogb(v);
    const unsigned m = (unsigned)(v / ldexp(1, k - f->mant_bits)) - (1u << f->mant_bits);
    return (unsigned)(k + f->bias) << f->mant_bits | m;
}

static unsigned encode(float x, const minifloat *f, int saturate)
{
    const unsigned sign = signbit(x) ? 1u << (f->exp_bits + f->mant_bits) : 0;
    const double a = fabs((double)x);
    int k = a > 0 ? ilogb(a) : 0;   /* ⌊log2 a⌋ */
    if (k < 1 - f->bias) k = 1 - f->bias;
    const double q = ldexp(1, k - f->mant_bits);
    double v = q * rint(a / q);   /* rint: round to nearest, ties to even */
    if (!(v <= f->max)) {         /* past the largest finite value, or infinite */
        if (f->nan >= 0 && !saturate) return sign | (unsigned)f->nan;
        v = f->max;
    }
    return sign | fields_of(v, f);
}

static uint8_t e4m3_encode(float x) { return (uint8_t)encode(x, &E4M3, 0); }
static uint8_t e4m3_encode_sat(float x) { return (uint8_t)encode(x, &E4M3, 1); }
static uint8_t e2m1_encode(float x) { return (uint8_t)encode(x, &E2M1, 1); }

// %% [markdown]
// Checked against `formats/` on the same values: every code's value, every midpoint between
// neighbours and the floats just either side of it, values past the top, $\pm\infty$, and random
// magnitudes across each format's range, with both signs. A midpoint is where ties-to-even shows:
// 1.75 lies halfway between 1.5 (code 0x3) and 2 (code 0x4) and goes to 2.

// %%
enum { N_PROBES = 1 << 16 };

/* probes of `decode`'s format on which mine(x) and theirs(x) give different codes */
static size_t codes_differ(uint8_t (*mine)(float), uint8_t (*theirs)(float),
                           float (*decode)(uint8_t), unsigned n_codes, size_t *n)
{
    static float x[N_PROBES];
    size_t differ = 0;
    *n = dfmt_probes(x, N_PROBES, decode, n_codes, 7);
    for (size_t i = 0; i < *n; i++) differ += mine(x[i]) != theirs(x[i]);
    return differ;
}

NB_CELL(cell_encoders)
{
    size_t n1, n2, n3;
    const size_t d1 = codes_differ(e4m3_encode, kvf_e4m3_encode, kvf_e4m3_decode, 0x80, &n1);
    const size_t d2 =
        codes_differ(e4m3_encode_sat, kvf_e4m3_encode_sat, kvf_e4m3_decode, 0x80, &n2);
    const size_t d3 = codes_differ(e2m1_encode, kvf_e2m1_encode, kvf_e2m1_decode, 8, &n3);
    printf("E4M3 plain cast:      %zu of %s probes differ from formats/\n", d1,
           nb_num((double)n1, 0));
    printf("E4M3 saturating cast: %zu of %s probes differ\n", d2, nb_num((double)n2, 0));
    printf("E2M1:                 %zu of %s probes differ\n", d3, nb_num((double)n3, 0));
    printf("E4M3: 464 -> 0x%02x (448), 480 -> 0x%02x (NaN), saturating 480 -> 0x%02x (448)\n",
           e4m3_encode(464), e4m3_encode(480), e4m3_encode_sat(480));
    printf("midpoints round to:");
    for (unsigned c = 0; c < 7; c++) {
        const float mid = 0.5f * (e2m1_mags[c] + e2m1_mags[c + 1]);
        printf(" %g->%g", (double)mid, (double)kvf_e2m1_decode(e2m1_encode(mid)));
    }
    printf("\n");
    return nb_expect(d1 + d2 + d3 == 0, "the encoders differ from formats/ on %zu probes",
                     d1 + d2 + d3);
}

// %% [markdown]
// ## Block scales, in bits per element
//
// Four bits cannot cover a useful range alone, so a block of $k$ elements shares one scale. OCP's
// MX formats use $k = 32$ and an E8M0 scale (a pure power of two); NVIDIA's NVFP4 uses $k = 16$ and
// an E4M3 scale (plus a per-tensor FP32 scale, ignored here). Bits per element:
//
// $$\text{bits} = \text{element bits} + \frac{\text{scale bits}}{k},$$
//
// and DeepSeek's rows land on the same figures: the V4/V4.1 index key is MXFP4, the V4.1 main row
// NVFP4 without its tensor scale.

// %%
NB_CELL(cell_bits)
{
    const double e2m1 = kvf_element_bits(KVF_E2M1), e8 = kvf_element_bits(KVF_E8M0),
                 e4m3 = kvf_element_bits(KVF_E4M3);
    printf("MXFP4: %g + %g/%d = %.2f bits per element\n", e2m1, e8, KVF_MX_BLOCK,
           e2m1 + e8 / KVF_MX_BLOCK);
    printf("NVFP4: %g + %g/%d = %.2f bits per element (the FP32 tensor scale not counted)\n", e2m1,
           e4m3, KVF_NVFP4_BLOCK, e2m1 + e4m3 / KVF_NVFP4_BLOCK);
    printf("\n%-11s %6s %7s %14s\n", "row", "values", "bytes", "bits/value");
    for (kvf_row r = 0; r < KVF_N_ROW; r++)
        printf("%-11s %6zu %7zu %14.3f\n", kvf_row_name(r), kvf_row_values(r), kvf_row_bytes(r),
               8.0 * (double)kvf_row_bytes(r) / (double)kvf_row_values(r));
    return KVL_OK;
}

// %% [markdown]
// ## One MXFP4 block, written out
//
// OCP MX v1.0 (section 6.3) picks the shared scale from the block's largest magnitude: the power of
// two that puts it in E2M1's top binade ($\lfloor \log_2 6 \rfloor = 2$),
//
// $$s = 2^{\,\lfloor \log_2 \max_i |x_i| \rfloor - 2},$$
//
// $$q_i = \operatorname{e2m1}(x_i / s),$$
//
// $$\hat{x}_i = s \cdot \operatorname{decode}(q_i).$$
//
// The scale is stored as its E8M0 code $\log_2 s + 127$. The quotients reach up to $8 - \epsilon$,
// so the largest elements saturate at 6: the floor rule trades that clipping for using the whole
// ladder. A zero block takes $\max |x_i| = 2^{-126}$. The codes pack two to a byte, element $2j$ in
// the low nibble. The cell quantises 2,048 random blocks across a wide range of magnitudes and
// compares codes, scales and decoded values with `formats/`'s `kvf_quant_mxfp4`.

// %%
enum { MX = KVF_MX_BLOCK };

/* x[32] → packed[16] E2M1 codes and one E8M0 scale code */
static void mxfp4_block(uint8_t *packed, uint8_t *scale, const float *x)
{
    float amax = 0;
    for (int i = 0; i < MX; i++) amax = fmaxf(amax, fabsf(x[i]));
    int k = ilogbf(amax > 0 ? amax : 0x1p-126f) - 2;
    k = k < -127 ? -127 : k > 127 ? 127 : k;
    *scale = (uint8_t)(k + 127);
    memset(packed, 0, MX / 2);
    for (int i = 0; i < MX; i++)
        packed[i / 2] |= (uint8_t)(e2m1_encode(ldexpf(x[i], -k)) << (4 * (i % 2)));
}

static void mxfp4_decode(float *y, const uint8_t *packed, uint8_t scale)
{
    for (int i = 0; i < MX; i++)
        y[i] = ldexpf(kvf_e2m1_decode(packed[i / 2] >> (4 * (i % 2))), scale - 127);
}

// %%
enum { N_BLOCKS = 2048 };

NB_CELL(cell_mxfp4_block)
{
    static float x[N_BLOCKS * MX], mine[N_BLOCKS * MX], theirs[N_BLOCKS * MX];
    static uint8_t my_codes[N_BLOCKS * MX / 2], codes[N_BLOCKS * MX / 2], my_scales[N_BLOCKS],
        scales[N_BLOCKS];
    kvl_rng rng;
    kvl_rng_seed(&rng, 8);
    kvl_rng_normal_f32(&rng, x, N_BLOCKS * MX, 1.0);
    for (size_t b = 0; b < N_BLOCKS; b++)   /* block b spans magnitudes near 2^(b mod 41 - 20) */
        for (size_t i = 0; i < MX; i++) x[b * MX + i] = ldexpf(x[b * MX + i], (int)(b % 41) - 20);
    for (size_t b = 0; b < N_BLOCKS; b++) {
        mxfp4_block(my_codes + b * MX / 2, my_scales + b, x + b * MX);
        mxfp4_decode(mine + b * MX, my_codes + b * MX / 2, my_scales[b]);
    }
    int err = kvf_quant_mxfp4(codes, scales, x, N_BLOCKS * MX);
    if (!err) err = kvf_dequant_mxfp4(theirs, codes, scales, N_BLOCKS * MX);
    if (err) return kvl_fail(KVL_EINVAL, "mxfp4: %s", kvf_strerror(err));
    const int same =
        !memcmp(my_codes, codes, sizeof codes) && !memcmp(my_scales, scales, sizeof scales);
    const double diff = dfmt_rel_l2(mine, theirs, N_BLOCKS * MX);
    printf(
        "%s blocks of %d: codes and scales %s formats/'s; decoded values differ by %g (relative L2)\n",
        nb_num(N_BLOCKS, 0), MX, same ? "equal to" : "DIFFER from", diff);
    const size_t b = 20;   /* N(0,1) values at their own scale: the block drawn below */
    printf("block %zu: scale code 0x%02x = 2^%d, round-trip error %.4f (relative L2)\n", b,
           my_scales[b], my_scales[b] - 127, dfmt_rel_l2(mine + b * MX, x + b * MX, MX));
    const dfmt_examples ex = {-3.5f, 3, kvf_e8m0_decode(my_scales[b]),
                              e4m3_encode(-3.5f), e2m1_encode(3), my_scales[b]};
    int rc = nb_expect(same && diff == 0, "the block differs from formats/ (decoded values by %g)",
                       diff);
    return rc == KVL_OK ? dfmt_layouts_figure(&ex, my_codes + b * MX / 2, my_scales[b]) : rc;
}

// %% [markdown]
// ## Why a fractional scale beats a power of two
//
// The NVFP4 paper's example: a block whose largest magnitude is $3 + \delta$ wants the scale $(3 +
// \delta)/6$, just above 0.5. E8M0 must round it up to 1 (rounding down would push the maximum past
// 6), so the block lands on the ladder at its own values, at most 3: the rungs 4 and 6 go unused,
// and only $\log_2(3/0.5) = 2.58$ of the ladder's $\log_2(6/0.5) = 3.58$ binades do any work. An
// E4M3 scale can sit at 0.5 and put the maximum on 6. The cell quantises one block of 16 normals
// scaled to a maximum of 3.1 both ways.

// %%
/* Levels of the ladder the block uses, and the relative L2 error, for x̂[16] against x[16]. */
static void block_report(const char *what, double scale, const float *x, const float *xq, size_t n)
{
    unsigned used = 0;
    for (size_t i = 0; i < n; i++) used |= 1u << (e2m1_encode(fabsf(xq[i]) / (float)scale) & 7);
    printf("%-22s scale %-8g rungs used:", what, scale);
    for (unsigned c = 0; c < 8; c++)
        if (used >> c & 1) printf(" %g", (double)kvf_e2m1_decode((uint8_t)c));
    printf("   relative L2 error %.4f\n", dfmt_rel_l2(xq, x, n));
}

NB_CELL(cell_scale_choice)
{
    enum { N = KVF_FP4_V41_BLOCK };
    float x[N], xq[N];
    double amax = 0;
    kvl_rng rng;
    kvl_rng_seed(&rng, 5);
    kvl_rng_normal_f32(&rng, x, N, 1.0);
    for (size_t i = 0; i < N; i++) amax = fmax(amax, fabs((double)x[i]));
    for (size_t i = 0; i < N; i++) x[i] = (float)(x[i] * 3.1 / amax);
    /* E8M0: the round-up rule DeepSeek's kernels use for power-of-two scales */
    const double pow2 = kvf_e8m0_decode(kvf_scale_rceil(3.1f, KVF_E2M1));
    for (size_t i = 0; i < N; i++)
        xq[i] = kvf_e2m1_decode(e2m1_encode((float)(x[i] / pow2))) * (float)pow2;
    block_report("E8M0 (power of two)", pow2, x, xq, N);
    uint8_t codes[N / 2], scale;
    int err = kvf_quant_fp4_v41(codes, &scale, x, N);
    if (!err) err = kvf_dequant_fp4_v41(xq, codes, &scale, N);
    if (err) return kvl_fail(KVL_EINVAL, "fp4 quantiser: %s", kvf_strerror(err));
    block_report("E4M3 (fractional)", kvf_e4m3_decode(scale), x, xq, N);
    printf("binades in use: log2(3/0.5) = %.3f against log2(6/0.5) = %.3f\n", log2(3 / 0.5),
           log2(6 / 0.5));
    return KVL_OK;
}

// %% [markdown]
// ## The range V4.1 drops, and why it can
//
// With an E4M3 block scale an FP4 value reaches $448 \times 6 = 2688$; NVFP4's FP32 tensor scale
// exists to map a tensor's real maximum onto that ceiling. V4.1's cache drops it: its 512-channel
// latent is RMS-normalised, so its L2 norm is at most about $\sqrt{512}$ (with norm weights near 1;
// RoPE is a rotation and keeps the norm), and no channel can exceed that: $|x_i| \le \lVert x
// \rVert$. The report's observed channel maximum, about 10, and largest trained norm weight, about
// 1, are its figures, quoted.

// %%
NB_CELL(cell_headroom)
{
    const double ceiling = kvf_element_max(KVF_E4M3) * kvf_element_max(KVF_E2M1),
                 bound = sqrt((double)KVF_V41_DIM);
    printf("E4M3 scale max x E2M1 max = %s x %s = %s\n", nb_num(kvf_element_max(KVF_E4M3), 6),
           nb_num(kvf_element_max(KVF_E2M1), 6), nb_num(ceiling, 6));
    printf("a normalised %d-channel latent: |x_i| <= ||x|| = sqrt(%d) = %.3f; headroom %.0fx\n",
           KVF_V41_DIM, KVF_V41_DIM, bound, ceiling / bound);
    return KVL_OK;
}

// %% [markdown]
// ## A numpy check of V4.1's FP4, digit for digit
//
// V4.1 stores its 512-wide compressed entry in FP4 (the DeepSeek-V4.1 report, section 2.4.4). A
// small numpy check shows what that costs: it draws a standard-normal 512-vector with
// `default_rng(0)`, scales it to L2 norm $\sqrt{512}$, quantises it in blocks of 16 with an E4M3
// scale mapping each block's maximum onto 6,
//
// $$s = \operatorname{e4m3}\left(\max_i |x_i| / 6\right),$$
//
// $$\hat{x}_i = s \cdot \operatorname{e2m1}(x_i / s),$$
//
// and prints the largest magnitude and the relative error $\lVert \hat{x} - x \rVert / \lVert x
// \rVert$. `formats/`'s V4.1 FP4 (`kvf_quant_fp4_v41`) is that recipe with the kernel's details
// (round-to-nearest-even everywhere, a saturating scale, an amax floor); the generator is numpy's.
// The lines print as numpy prints them.

// %%
enum { DIM = KVF_V41_DIM };

/* latent[DIM] ~ default_rng(seed).standard_normal(DIM), scaled in double to L2 norm √DIM; x̂ its
 * V4.1 FP4 round trip; *amax and *rel = ‖x̂ − latent‖ / ‖latent‖ */
static int fp4_check(double *latent, float *xq, double *amax, double *rel, uint64_t seed)
{
    kvl_rng rng;
    kvl_rng_seed(&rng, seed);
    kvl_rng_normal_f64(&rng, latent, DIM, 1.0);
    double norm = 0, e = 0;
    for (size_t i = 0; i < DIM; i++) norm += latent[i] * latent[i];
    const double factor = sqrt((double)DIM) / sqrt(norm);
    float x[DIM];
    uint8_t codes[DIM / 2], scales[DIM / KVF_FP4_V41_BLOCK];
    *amax = 0;
    for (size_t i = 0; i < DIM; i++) {
        latent[i] *= factor;
        x[i] = (float)latent[i];
        *amax = fmax(*amax, fabs(latent[i]));
    }
    int err = kvf_quant_fp4_v41(codes, scales, x, DIM);
    if (!err) err = kvf_dequant_fp4_v41(xq, codes, scales, DIM);
    if (err) return kvl_fail(KVL_EINVAL, "fp4 quantiser: %s", kvf_strerror(err));
    norm = 0;
    for (size_t i = 0; i < DIM; i++) {
        e += ((double)xq[i] - latent[i]) * ((double)xq[i] - latent[i]);
        norm += latent[i] * latent[i];
    }
    *rel = sqrt(e) / sqrt(norm);
    return KVL_OK;
}

// %%
static double seed0_latent[DIM];
static float seed0_xq[DIM];

NB_CELL(cell_fp4_check)
{
    double amax, rel;
    int rc = fp4_check(seed0_latent, seed0_xq, &amax, &rel, 0);
    if (rc != KVL_OK) return rc;
    printf("max |latent|       : %s\n", dfmt_numpy_round(amax, 3));
    printf("rel L2 error       : %s\n", dfmt_numpy_round(rel, 4));
    printf("bytes per 512-ch entry: fp16 %s  fp8 %u  fp4+E4M3/16 %zu\n",
           nb_num(DIM * kvf_element_bits(KVF_BF16) / 8, 0), DIM * kvf_element_bits(KVF_E4M3) / 8,
           kvf_row_bytes(KVF_ROW_V41_MAIN));
    return nb_expect(!strcmp(dfmt_numpy_round(amax, 3), "3.861") &&
                         !strcmp(dfmt_numpy_round(rel, 4), "0.0912"),
                     "seed 0 gives %s and %s, not the numpy check's 3.861 and 0.0912",
                     dfmt_numpy_round(amax, 3), dfmt_numpy_round(rel, 4));
}

// %% [markdown]
// A Gaussian latent peaks near 4, far inside the 22.6 bound, and the error is about 9%: the price
// of eight magnitudes per block, and the reason the format needs quantisation-aware training and
// the window cache stays in FP8. A Gaussian draw is not a trained latent: this is the order of
// magnitude, not the model's number. Twenty seeds against numpy's results for the same recipe
// (`tests/data/kvfmt_fp4_demo.txt`, written by `tests/gen_kvfmt_fp4_demo.py`):

// %%
NB_CELL(cell_fp4_seeds)
{
    FILE *f = fopen(nb_path("tests/data/kvfmt_fp4_demo.txt"), "r");
    if (!f) return kvl_fail(KVL_EIO, "cannot open tests/data/kvfmt_fp4_demo.txt");
    double lo = INFINITY, hi = 0, sum = 0, latent[DIM];
    float xq[DIM];
    unsigned seed, n = 0, same = 0;
    char want_max[32], want_rel[32];
    int rc = KVL_OK;
    while (rc == KVL_OK && fscanf(f, "%u %31s %31s", &seed, want_max, want_rel) == 3) {
        double amax, rel;
        rc = fp4_check(latent, xq, &amax, &rel, seed);
        same += !strcmp(dfmt_numpy_round(amax, 3), want_max) &&
                !strcmp(dfmt_numpy_round(rel, 4), want_rel);
        lo = fmin(lo, rel), hi = fmax(hi, rel), sum += rel, n++;
    }
    fclose(f);
    if (rc != KVL_OK) return rc;
    printf(
        "seeds 0..%u: relative error %.4f to %.4f, mean %.4f; %u of %u seeds print numpy's digits\n",
        n - 1, lo, hi, sum / n, same, n);
    return nb_expect(n > 0 && same == n, "%u of %u seeds differ from numpy", n - same, n);
}

// %% [markdown]
// The error of each of the 512 channels for seed 0, $\hat{x}_i - x_i$. Blocks whose maximum is
// large have coarse rungs, so the errors spread up to half a rung of the largest blocks.

// %%
NB_CELL(cell_error_histogram)
{
    double err[DIM], worst = 0;
    for (size_t i = 0; i < DIM; i++) {
        err[i] = (double)seed0_xq[i] - seed0_latent[i];
        worst = fmax(worst, fabs(err[i]));
    }
    const double edge = ceil(worst * 10) / 10; /* the axis: the largest error, up to the next 0.1 */
    printf("largest error of the 512: %.4f\n", worst);
    svg_doc s;
    svg_histogram(&s, "V4.1 FP4 round-trip error per channel (seed 0, 512 channels)", err, DIM, 40,
                  -edge, edge, "quantised minus original value");
    return nb_figure("fp4_error", &s);
}

// %% [markdown]
// ## DeepSeek's KV rows
//
// One 512-value vector (V4's and V4.1's width; V3.2's row takes 576) packed into each row layout
// and unpacked again. The rows differ in what they keep exact: V3.2 and V4 keep the 64 RoPE
// channels in bf16, V4.1 quantises everything after RoPE.

// %%
NB_CELL(cell_rows)
{
    float x[576], y[576];
    kvl_rng rng;
    kvl_rng_seed(&rng, 6);
    kvl_rng_normal_f32(&rng, x, 576, 1.0);
    printf("%-11s %6s %6s   %s\n", "row", "bytes", "values",
           "relative L2 error of the round trip (N(0,1) values)");
    for (kvf_row r = 0; r < KVF_N_ROW; r++) {
        uint8_t row[1024];
        const size_t n = kvf_row_values(r);
        int err = kvf_row_pack(r, row, x);
        if (!err) err = kvf_row_unpack(r, y, row);
        if (err) return kvl_fail(KVL_EINVAL, "%s: %s", kvf_row_name(r), kvf_strerror(err));
        printf("%-11s %6zu %6zu   %.4f\n", kvf_row_name(r), kvf_row_bytes(r), n,
               dfmt_rel_l2(y, x, n));
    }
    return KVL_OK;
}

// %% [markdown]
// What the hardware multiplies is quoted, not measured here: the NVFP4 paper lists block-scaled
// matmul throughput over bf16 as 2× for MXFP8 and MXFP6 and 4× for MXFP4 and NVFP4 on GB200 (6× on
// GB300). A cache does not need it: V4.1 dequantises its FP4 rows before attention; only the
// indexer's query-key product multiplies in FP4.

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_fp8),         NB_RUN(cell_e2m1),
                                    NB_RUN(cell_encoders),    NB_RUN(cell_bits),
                                    NB_RUN(cell_mxfp4_block), NB_RUN(cell_scale_choice),
                                    NB_RUN(cell_headroom),    NB_RUN(cell_fp4_check),
                                    NB_RUN(cell_fp4_seeds),   NB_RUN(cell_error_histogram),
                                    NB_RUN(cell_rows)};
    static const char *const figures[] = {"fp4_error", "fp4_ladder", "bit_layouts", NULL};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0], figures);
}
