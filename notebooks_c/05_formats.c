// %% [markdown]
// # Chapter 5 · The formats a cache is made of: E4M3 … NVFP4, and DeepSeek's rows
//
// V3.2 stores its cache in FP8, V4 in FP8 with a bf16 exception, V4.1 in FP4. This notebook decodes the
// element formats code by code (`formats/element.h`), prices the block-scaled schemes in bits per
// element (`formats/block.h`), shows why a fractional scale beats a power of two, reproduces the
// write-up's FP4 check digit for digit, and packs one vector into each of DeepSeek's KV rows
// (`formats/rows.h`). Everything here runs on `formats/`, which depends on nothing but libc and libm.
//
// Cells that compute define an `NB_CELL` function; the last cell runs them. `build/bin/nb_05 --step`
// walks it cell by cell.

// %%
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "element.h"
#include "nb.h"
#include "rng.h"
#include "rows.h"
#include "scale.h"
#include "svg.h"

// %% [markdown]
// ## FP8: E4M3 and E5M2
//
// E4M3 spends 4 bits on the exponent and 3 on the mantissa; E5M2 5 and 2. E4M3 drops the infinities
// and keeps a single NaN pattern, so the all-ones exponent is an ordinary binade up to 448. The FP8
// paper counts that as going "from 17 to 18 binades"; measured as log2(max / smallest subnormal), the
// cell finds 16.9 for an IEEE-style E4M3 (largest value 240, the last code below the all-ones
// exponent) and 17.8 for the real one: the paper rounds up.

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
    printf("E4M3: %zu positive finite non-zero codes, max %g (code 0x7e), smallest subnormal 2^%.0f, NaN 0x7f and 0xff\n",
           finite, max, log2(min_sub));
    printf("      binades log2(max / smallest subnormal): %.2f; with IEEE-style infinities (max %g): %.2f\n",
           log2(max / min_sub), ieee_max, log2(ieee_max / min_sub));
    printf("E5M2: max %g, smallest subnormal 2^%.0f, +inf code 0x7c\n", kvf_element_max(KVF_E5M2),
           log2(kvf_e5m2_decode(0x01)));
    printf("E8M0 (scales only): code 0x00 = 2^%.0f ... code 0xfe = 2^%.0f, 0xff NaN; no zero, no sign\n",
           log2(kvf_e8m0_decode(0x00)), log2(kvf_e8m0_decode(0xfe)));
    return nb_expect(finite == 126 && isnan(kvf_e4m3_decode(0x7f)), "E4M3 table: %zu finite codes", finite);
}

// %% [markdown]
// ## E2M1: eight magnitudes
//
// The FP4 element has a sign, two exponent bits and one mantissa bit: sixteen codes, all of them
// numbers (no infinity, no NaN). The magnitudes are 0, 0.5, 1, 1.5, 2, 3, 4, 6, spaced 0.5, then 1,
// then 2. Everything about FP4 accuracy is how well a block's values land on this ladder, and that is
// the scale's job. The cast rounds to nearest with ties to even, so the midpoints (0.25, 0.75, …, 5)
// go to the rung with an even code.

// %%
NB_CELL(cell_e2m1)
{
    float mags[8];
    printf("code  value     code  value\n");
    for (unsigned c = 0; c < 8; c++) {
        mags[c] = kvf_e2m1_decode((uint8_t)c);
        printf(" 0x%x  %5g      0x%x  %5g\n", c, (double)mags[c], c | 8, (double)kvf_e2m1_decode((uint8_t)(c | 8)));
    }
    printf("midpoints round to:");
    for (unsigned c = 0; c < 7; c++) {
        float mid = 0.5f * (mags[c] + mags[c + 1]);
        printf(" %g->%g", (double)mid, (double)kvf_e2m1_decode(kvf_e2m1_encode(mid)));
    }
    printf("\n");
    const double left = 60, right = 900, y = 110, unit = (right - left) / 6;
    svg_doc s;
    svg_begin(&s, 960, 190);
    svg_title(&s, 20, 28, 17, "E2M1: the eight magnitudes of an FP4 element");
    svg_text(&s, 20, 50, 13, "start",
             "rungs 0.5 apart up to 2, then 1, then 2; grey ticks: rounding midpoints (ties go to the even code)");
    svg_line(&s, left, y, right, y, "#222", 1.5);
    for (unsigned c = 0; c < 8; c++) {
        double x = left + unit * mags[c];
        svg_rect(&s, x - 5, y - 5, 10, 10, "#1f4e8c");
        svg_text(&s, x, y + 28, 14, "middle", "%g", (double)mags[c]);
        svg_text(&s, x, y - 14, 11, "middle", "0x%x", c);
        if (c < 7) {
            double m = left + unit * 0.5 * (mags[c] + mags[c + 1]);
            svg_line(&s, m, y - 8, m, y + 8, "#999", 1);
        }
    }
    svg_text(&s, left, y + 58, 12, "start", "the negative half mirrors it: codes 0x8-0xf (0x8 is -0)");
    svg_end(&s);
    return nb_figure("fp4_ladder", &s);
}

// %% [markdown]
// ## Block scales, in bits per element
//
// Four bits cannot cover a useful range alone, so a block of k elements shares one scale. OCP's MX
// formats use k 32 and an E8M0 scale (a pure power of two); NVIDIA's NVFP4 uses k 16 and an E4M3 scale
// (plus a per-tensor FP32 scale, ignored here). Bits per element = element bits + scale bits / k, and
// DeepSeek's rows land on the same figures: the V4/V4.1 index key is MXFP4, the V4.1 main row NVFP4
// without its tensor scale.

// %%
NB_CELL(cell_bits)
{
    const double e2m1 = kvf_element_bits(KVF_E2M1), e8 = kvf_element_bits(KVF_E8M0), e4m3 = kvf_element_bits(KVF_E4M3);
    printf("MXFP4: %g + %g/%d = %.2f bits per element\n", e2m1, e8, KVF_MX_BLOCK, e2m1 + e8 / KVF_MX_BLOCK);
    printf("NVFP4: %g + %g/%d = %.2f bits per element (the FP32 tensor scale not counted)\n", e2m1, e4m3,
           KVF_NVFP4_BLOCK, e2m1 + e4m3 / KVF_NVFP4_BLOCK);
    printf("\n%-11s %6s %7s %14s\n", "row", "values", "bytes", "bits/value");
    for (kvf_row r = 0; r < KVF_N_ROW; r++)
        printf("%-11s %6zu %7zu %14.3f\n", kvf_row_name(r), kvf_row_values(r), kvf_row_bytes(r),
               8.0 * (double)kvf_row_bytes(r) / (double)kvf_row_values(r));
    return KVL_OK;
}

// %% [markdown]
// ## Why a fractional scale beats a power of two
//
// The NVFP4 paper's example: a block whose largest magnitude is 3 + δ wants the scale (3 + δ)/6, just
// above 0.5. E8M0 must round it up to 1 (rounding down would push the maximum past 6), so the block
// lands on the ladder at its own values, at most 3: the rungs 4 and 6 go unused, and only
// log2(3/0.5) = 2.58 of the ladder's log2(6/0.5) = 3.58 binades do any work. An E4M3 scale can sit at
// 0.5 and put the maximum on 6. The cell quantises one block of 16 normals scaled to a maximum of 3.1
// both ways.

// %%
/* Levels of the ladder the block uses, and the relative L2 error, for x̂[16] against x[16]. */
static void block_report(const char *what, double scale, const float *x, const float *xq, size_t n)
{
    unsigned used = 0;
    double e = 0, t = 0;
    for (size_t i = 0; i < n; i++) {
        used |= 1u << (kvf_e2m1_encode(fabsf(xq[i]) / (float)scale) & 7);
        e += ((double)xq[i] - x[i]) * ((double)xq[i] - x[i]);
        t += (double)x[i] * x[i];
    }
    printf("%-22s scale %-8g rungs used:", what, scale);
    for (unsigned c = 0; c < 8; c++)
        if (used >> c & 1) printf(" %g", (double)kvf_e2m1_decode((uint8_t)c));
    printf("   relative L2 error %.4f\n", sqrt(e / t));
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
    for (size_t i = 0; i < N; i++) xq[i] = kvf_e2m1_decode(kvf_e2m1_encode_sat((float)(x[i] / pow2))) * (float)pow2;
    block_report("E8M0 (power of two)", pow2, x, xq, N);
    uint8_t codes[N / 2], scale;
    int err = kvf_quant_fp4_v41(codes, &scale, x, N);
    if (!err) err = kvf_dequant_fp4_v41(xq, codes, &scale, N);
    if (err) return kvl_fail(KVL_EINVAL, "fp4 quantiser: %s", kvf_strerror(err));
    block_report("E4M3 (fractional)", kvf_e4m3_decode(scale), x, xq, N);
    printf("binades in use: log2(3/0.5) = %.3f against log2(6/0.5) = %.3f\n", log2(3 / 0.5), log2(6 / 0.5));
    return KVL_OK;
}

// %% [markdown]
// ## The range V4.1 drops, and why it can
//
// With an E4M3 block scale an FP4 value reaches 448 × 6 = 2688; NVFP4's FP32 tensor scale exists to
// map a tensor's real maximum onto that ceiling. V4.1's cache drops it: its 512-channel latent is
// RMS-normalised, so its L2 norm is at most about √512 (with norm weights near 1; RoPE is a rotation
// and keeps the norm), and no channel can exceed that. The report's observed channel maximum, about
// 10, and largest trained norm weight, about 1, are its figures, quoted.

// %%
NB_CELL(cell_headroom)
{
    const double ceiling = kvf_element_max(KVF_E4M3) * kvf_element_max(KVF_E2M1), bound = sqrt((double)KVF_V41_DIM);
    printf("E4M3 scale max x E2M1 max = %g x %g = %g\n", kvf_element_max(KVF_E4M3), kvf_element_max(KVF_E2M1), ceiling);
    printf("a normalised %d-channel latent: |x_i| <= ||x|| = sqrt(%d) = %.3f; headroom %.0fx\n", KVF_V41_DIM, KVF_V41_DIM,
           bound, ceiling / bound);
    return KVL_OK;
}

// %% [markdown]
// ## The lineage write-up's FP4 check, digit for digit
//
// The lineage write-up draws a standard-normal 512-vector with `default_rng(0)`, scales it to L2 norm √512,
// quantises it in blocks of 16 with an E4M3 scale mapping each block's maximum onto 6 and nearest E2M1
// elements, and prints the largest magnitude and the relative error. `formats/`'s V4.1 FP4
// (`kvf_quant_fp4_v41`) is that recipe with the kernel's details (round-to-nearest-even everywhere, a
// saturating scale, an amax floor); the generator is numpy's. The lines print as numpy prints them.

// %%
enum { DIM = KVF_V41_DIM };

/* latent[DIM] ~ default_rng(seed).standard_normal(DIM), scaled in double to L2 norm √DIM; x̂ its V4.1
 * FP4 round trip; *amax and *rel = ‖x̂ − latent‖ / ‖latent‖ */
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

/* v rounded to `decimals` places as numpy's round prints it: shortest text, "4.0" for a whole number */
static const char *numpy_round(double v, int decimals)
{
    static char buf[2][40];
    static unsigned next;
    char *s = buf[next++ % 2];
    const double p = pow(10, decimals), r = rint(v * p) / p;
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(s, 40, "%.*g", digits, r);
        if (strtod(s, NULL) == r) break;
    }
    if (!strchr(s, '.') && !strchr(s, 'e')) strcat(s, ".0");
    return s;
}

static double seed0_latent[DIM];
static float seed0_xq[DIM];

NB_CELL(cell_fp4_check)
{
    double amax, rel;
    int rc = fp4_check(seed0_latent, seed0_xq, &amax, &rel, 0);
    if (rc != KVL_OK) return rc;
    printf("max |latent|       : %s\n", numpy_round(amax, 3));
    printf("rel L2 error       : %s\n", numpy_round(rel, 4));
    printf("bytes per 512-ch entry: fp16 %u  fp8 %u  fp4+E4M3/16 %zu\n", DIM * kvf_element_bits(KVF_BF16) / 8,
           DIM * kvf_element_bits(KVF_E4M3) / 8, kvf_row_bytes(KVF_ROW_V41_MAIN));
    return nb_expect(!strcmp(numpy_round(amax, 3), "3.861") && !strcmp(numpy_round(rel, 4), "0.0912"),
                     "seed 0 gives %s and %s, not the lineage write-up's 3.861 and 0.0912", numpy_round(amax, 3),
                     numpy_round(rel, 4));
}

// %% [markdown]
// A Gaussian latent peaks near 4, far inside the 22.6 bound, and the error is about 9%: the price of
// eight magnitudes per block, and the reason the format needs quantisation-aware training and the
// window cache stays in FP8. The lineage write-up's own caveat applies: this is the order of magnitude, not
// the model's number. Twenty seeds against numpy's results for the same recipe
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
        same += !strcmp(numpy_round(amax, 3), want_max) && !strcmp(numpy_round(rel, 4), want_rel);
        lo = fmin(lo, rel), hi = fmax(hi, rel), sum += rel, n++;
    }
    fclose(f);
    if (rc != KVL_OK) return rc;
    printf("seeds 0..%u: relative error %.4f to %.4f, mean %.4f; %u of %u seeds print numpy's digits\n", n - 1, lo, hi,
           sum / n, same, n);
    return nb_expect(n > 0 && same == n, "%u of %u seeds differ from numpy", n - same, n);
}

// %% [markdown]
// The error of each of the 512 channels for seed 0, x̂ − x. Blocks whose maximum is large have coarse
// rungs, so the errors spread up to half a rung of the largest blocks.

// %%
NB_CELL(cell_error_histogram)
{
    double err[DIM], worst = 0;
    for (size_t i = 0; i < DIM; i++) {
        err[i] = (double)seed0_xq[i] - seed0_latent[i];
        worst = fmax(worst, fabs(err[i]));
    }
    const double edge = ceil(worst * 10) / 10;   /* the axis: the largest error, up to the next 0.1 */
    printf("largest error of the 512: %.4f\n", worst);
    svg_doc s;
    svg_histogram(&s, "V4.1 FP4 round-trip error per channel (seed 0, 512 channels)", err, DIM, 40, -edge, edge,
                  "quantised minus original value");
    return nb_figure("fp4_error", &s);
}

// %% [markdown]
// ## DeepSeek's KV rows
//
// One 512-value vector (V4's and V4.1's width; V3.2's row takes 576) packed into each row layout and
// unpacked again. The rows differ in what they keep exact: V3.2 and V4 keep the 64 RoPE channels in
// bf16, V4.1 quantises everything after RoPE.

// %%
NB_CELL(cell_rows)
{
    float x[576], y[576];
    kvl_rng rng;
    kvl_rng_seed(&rng, 6);
    kvl_rng_normal_f32(&rng, x, 576, 1.0);
    printf("%-11s %6s %6s   %s\n", "row", "bytes", "values", "relative L2 error of the round trip (N(0,1) values)");
    for (kvf_row r = 0; r < KVF_N_ROW; r++) {
        uint8_t row[1024];
        const size_t n = kvf_row_values(r);
        int err = kvf_row_pack(r, row, x);
        if (!err) err = kvf_row_unpack(r, y, row);
        if (err) return kvl_fail(KVL_EINVAL, "%s: %s", kvf_row_name(r), kvf_strerror(err));
        double e = 0, t = 0;
        for (size_t i = 0; i < n; i++) e += ((double)y[i] - x[i]) * ((double)y[i] - x[i]), t += (double)x[i] * x[i];
        printf("%-11s %6zu %6zu   %.4f\n", kvf_row_name(r), kvf_row_bytes(r), n, sqrt(e / t));
    }
    return KVL_OK;
}

// %% [markdown]
// What the hardware multiplies is quoted, not measured here: the NVFP4 paper lists block-scaled matmul
// throughput over bf16 as 2× for MXFP8 and MXFP6 and 4× for MXFP4 and NVFP4 on GB200 (6× on GB300).
// A cache does not need it: V4.1 dequantises its FP4 rows before attention; only the indexer's
// query-key product multiplies in FP4.

// %%
int main(int argc, char **argv)
{
    static const nb_cell cells[] = {NB_RUN(cell_fp8),       NB_RUN(cell_e2m1),           NB_RUN(cell_bits),
                                    NB_RUN(cell_scale_choice), NB_RUN(cell_headroom),    NB_RUN(cell_fp4_check),
                                    NB_RUN(cell_fp4_seeds), NB_RUN(cell_error_histogram), NB_RUN(cell_rows)};
    return nb_main(argc, argv, __FILE__, cells, sizeof cells / sizeof cells[0]);
}
