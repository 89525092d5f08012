/* bench_cuda: the GPU's own ceilings, then every benchmarked kernel against them, as one table.
 *
 *   bench_cuda            full sizes (make cuda-check on a GPU; well under a minute on an H200)
 *   bench_cuda --smoke    tiny sizes, one repetition: the table's plumbing, run on the emulator by
 *                         tests/cuda/test_cuda_bench.c (its speeds mean nothing)
 *   bench_cuda --probe    exit 0 if a CUDA device is present, else say so and exit 2
 *
 * Ceilings: a device-to-device cudaMemcpy (bytes read plus written per second) and a bf16 GEMM through
 * cuBLAS. Each row: the bytes a kernel must move (inputs read once, outputs written once) and the
 * floating-point operations it must do, its time (CUDA events, one warm-up, mean of the repetitions),
 * GB/s and TFLOP/s, and their fractions of the ceilings, each to four significant figures. Targets
 * (full sizes only): the quantisers move at least 70% of the copy bandwidth, the absorbed MLA attention
 * on tensor cores at batch 64 and 64 heads at least 65%.
 * Exit status: 0, 1 if a target is missed, 2 on an error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "block_cuda.h"
#include "ceilings_cuda.h"
#include "device.h"
#include "mha.h"
#include "mha_cuda.h"
#include "mla.h"
#include "mla_cuda.h"
#include "rng.h"
#include "rows.h"
#include "rows_cuda.h"
#include "status.h"
#include "swa_cuda.h"

#define QUANT_TARGET 0.70
#define MLA_TARGET 0.65

typedef struct {
    int smoke;
    size_t copy_bytes, gemm_n, quant_n, pack_rows;
    size_t mla_B, mla_H, mla_N, mha_B, mha_d, mha_H, mha_Hkv, mha_N;
    int reps;
} sizes;

static const sizes FULL = {0, (size_t)1 << 30, 8192, (size_t)1 << 28, (size_t)1 << 18,
                           64, 64, 4096, 16, 2048, 16, 2, 4096, 20};
static const sizes SMOKE = {1, (size_t)1 << 20, 64, (size_t)1 << 12, 16, 2, 4, 40, 2, 32, 4, 2, 20, 1};

typedef struct {
    char name[40], shape[48];
    double bytes, flops, ms, target;
} row;

#define MAX_ROWS 16

typedef struct {
    row rows[MAX_ROWS];
    size_t n;
    double copy_gbps, gemm_tflops;
} table;

static row *add_row(table *t, const char *name, const char *shape, double bytes, double flops, double target)
{
    row *r = &t->rows[t->n++];
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->shape, sizeof r->shape, "%s", shape);
    r->bytes = bytes;
    r->flops = flops;
    r->target = target;
    return r;
}

/* ---- quantisers ------------------------------------------------------------------------------------- */

typedef struct {
    kvf_recipe_cuda recipe;
    uint8_t *codes, *scales;
    const float *x;
    size_t n;
} quant_job;

static int run_quant(void *arg)
{
    const quant_job *j = arg;
    const float s_global = j->recipe == KVF_RECIPE_NVFP4 ? 1e-3f : 0.0f;
    return kvf_quant_finite_cuda(j->recipe, j->codes, j->scales, j->x, j->n, s_global);
}

static int run_quant_checked(void *arg)
{
    const quant_job *j = arg;
    return kvf_quant_mxfp4_cuda(j->codes, j->scales, j->x, j->n);
}

/* code and scale bytes per value of each recipe */
static double out_bytes(kvf_recipe_cuda r)
{
    switch (r) {
    case KVF_RECIPE_MXFP8_E4M3: return 1 + 1.0 / 32;
    case KVF_RECIPE_MXFP4: return 0.5 + 1.0 / 32;
    case KVF_RECIPE_NVFP4: return 0.5 + 1.0 / 16;
    case KVF_RECIPE_FP4_V41: return 0.5 + 1.0 / 16;
    case KVF_RECIPE_FP8_UE8M0: return 1 + 4.0 / 128;
    case KVF_RECIPE_FP8_E8M0_RCEIL_64: return 1 + 1.0 / 64;
    case KVF_RECIPE_FP8_E8M0_RCEIL_32: return 1 + 1.0 / 32;
    case KVF_RECIPE_MXFP4_RCEIL: return 0.5 + 1.0 / 32;
    case KVF_N_RECIPE_CUDA: break;
    }
    return 0;
}

static int bench_quantisers(table *t, const sizes *s)
{
    const size_t n = s->quant_n;
    float *x = NULL, *host = malloc(n * sizeof *host);
    uint8_t *codes = NULL, *scales = NULL;
    if (!host) return kvl_fail(KVL_ENOMEM, "bench: out of memory for %zu floats", n);
    kvl_rng rng;
    kvl_rng_seed(&rng, 1);
    kvl_rng_normal_f32(&rng, host, n, 1.0);
    int rc = kvl_cuda_alloc((void **)&x, n * sizeof *x);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&codes, n);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&scales, n / 8);
    if (rc == KVL_OK) rc = kvl_cuda_upload(x, host, n * sizeof *x);
    const kvf_recipe_cuda recipes[] = {KVF_RECIPE_MXFP8_E4M3, KVF_RECIPE_MXFP4, KVF_RECIPE_NVFP4, KVF_RECIPE_FP4_V41,
                                       KVF_RECIPE_FP8_E8M0_RCEIL_64};
    char name[40], shape[48];
    snprintf(shape, sizeof shape, "n %zu", n);
    for (size_t k = 0; k < sizeof recipes / sizeof recipes[0] && rc == KVL_OK; k++) {
        quant_job j = {recipes[k], codes, scales, x, n};
        snprintf(name, sizeof name, "quant %s", kvf_recipe_cuda_name(recipes[k]));
        row *r = add_row(t, name, shape, (4 + out_bytes(recipes[k])) * (double)n, 0, QUANT_TARGET);
        rc = kvl_cuda_time(&r->ms, run_quant, &j, s->reps);
    }
    if (rc == KVL_OK) {
        quant_job j = {KVF_RECIPE_MXFP4, codes, scales, x, n};
        const double bytes = (4 + out_bytes(KVF_RECIPE_MXFP4)) * (double)n;
        row *r = add_row(t, "quant mxfp4 + finiteness pass", shape, bytes, 0, 0);
        rc = kvl_cuda_time(&r->ms, run_quant_checked, &j, s->reps);
    }
    kvl_cuda_free(x);
    kvl_cuda_free(codes);
    kvl_cuda_free(scales);
    free(host);
    return rc;
}

/* ---- DeepSeek V3.2 rows --------------------------------------------------------------------------------- */

typedef struct {
    uint8_t *rows;
    const float *values;
    size_t n;
} pack_job;

static int run_pack(void *arg)
{
    const pack_job *j = arg;
    return kvf_row_pack_cuda(KVF_ROW_V32_MAIN, j->rows, j->values, j->n);
}

static int bench_rows(table *t, const sizes *s)
{
    const size_t R = s->pack_rows, V = kvf_row_values(KVF_ROW_V32_MAIN), B = kvf_row_bytes(KVF_ROW_V32_MAIN);
    float *values = NULL, *host = malloc(R * V * sizeof *host);
    uint8_t *rows = NULL;
    if (!host) return kvl_fail(KVL_ENOMEM, "bench: out of memory for %zu rows", R);
    kvl_rng rng;
    kvl_rng_seed(&rng, 2);
    kvl_rng_normal_f32(&rng, host, R * V, 1.0);
    int rc = kvl_cuda_alloc((void **)&values, R * V * sizeof *values);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&rows, R * B);
    if (rc == KVL_OK) rc = kvl_cuda_upload(values, host, R * V * sizeof *values);
    char shape[48];
    snprintf(shape, sizeof shape, "%zu rows", R);
    pack_job j = {rows, values, R};
    if (rc == KVL_OK) {
        row *r = add_row(t, "v32-main row pack (checked)", shape, (double)R * (V * 4 + B), 0, 0);
        rc = kvl_cuda_time(&r->ms, run_pack, &j, s->reps);
    }
    kvl_cuda_free(values);
    kvl_cuda_free(rows);
    free(host);
    return rc;
}

/* ---- MLA: the absorbed attention over a cache of synthetic rows ------------------------------------------ */

typedef int (*mla_attend_fn)(float *, const float *, const mla_config *, mla_cache_cuda *);

typedef struct {
    mla_attend_fn fn;
    float *o_hat;
    const float *q_hat;
    const mla_config *c;
    mla_cache_cuda *cache;
} mla_job;

static int run_mla(void *arg)
{
    const mla_job *j = arg;
    return j->fn(j->o_hat, j->q_hat, j->c, j->cache);
}

/* DeepSeek-V3's attention dims (Dc 512, Dr 64, Dnope 128, Dv 128) with H heads */
static int mla_config_v3(mla_config *c, size_t H)
{
    *c = (mla_config){.d = 7168, .n_heads = H, .q_lora_rank = 1536, .kv_lora_rank = 512, .qk_nope = 128,
                      .qk_rope = 64, .v_head = 128, .norm_eps = 1e-6, .softmax_scale = 1.0 / sqrt(192.0)};
    return kvl_rope_init(&c->rope, 64, 1e4);
}

/* Fill every sequence of the cache with N rows, 64 positions at a time from one random block
 * chunk_dev[B][64][Dc+Dr]. */
static int fill_mla_cache(mla_cache_cuda *cache, const mla_config *c, size_t N, const float *chunk_dev)
{
    int rc = KVL_OK;
    for (size_t t = 0; t < N && rc == KVL_OK; t += 64)
        rc = mla_cache_append_cuda(cache, c, chunk_dev, N - t < 64 ? N - t : 64);
    return rc;
}

static int bench_mla(table *t, const sizes *s, swa_cuda_store store, mla_attend_fn fn, const char *name, double target)
{
    mla_config c;
    int rc = mla_config_v3(&c, s->mla_H);
    const size_t B = s->mla_B, H = s->mla_H, N = s->mla_N, W = 576, chunk = B * 64 * W;
    float *host = malloc(chunk * sizeof *host), *chunk_dev = NULL, *q_hat = NULL, *o_hat = NULL;
    if (!host) return kvl_fail(KVL_ENOMEM, "bench: out of memory");
    kvl_rng rng;
    kvl_rng_seed(&rng, 3);
    kvl_rng_normal_f32(&rng, host, chunk, 1.0);
    mla_cache_cuda cache = {0};
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&chunk_dev, chunk * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&q_hat, B * H * W * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&o_hat, B * H * 512 * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(chunk_dev, host, chunk * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(q_hat, host, (B * H * W < chunk ? B * H * W : chunk) * sizeof(float));
    if (rc == KVL_OK) rc = mla_cache_init_cuda(&cache, &c, N, store, B);
    if (rc == KVL_OK) rc = fill_mla_cache(&cache, &c, N, chunk_dev);
    char shape[48];
    snprintf(shape, sizeof shape, "B %zu H %zu N %zu", B, H, N);
    mla_job j = {fn, o_hat, q_hat, &c, &cache};
    if (rc == KVL_OK) {
        const double bytes = (double)B * N * swa_cuda_row_bytes(store, W) + (double)B * H * (W + 512) * 4;
        row *r = add_row(t, name, shape, bytes, (double)B * H * N * 2 * (W + 512), target);
        rc = kvl_cuda_time(&r->ms, run_mla, &j, s->reps);
    }
    mla_cache_free_cuda(&cache);
    kvl_cuda_free(chunk_dev);
    kvl_cuda_free(q_hat);
    kvl_cuda_free(o_hat);
    free(host);
    return rc;
}

/* ---- MHA: a whole GQA decode step over a bf16 cache ------------------------------------------------------ */

typedef struct {
    float *out;
    const float *x;
    const mha_config *c;
    const mha_weights *w;
    mha_cache_cuda *cache;
} mha_job;

static int run_mha(void *arg)
{
    const mha_job *j = arg;
    return mha_decode_cuda(j->out, j->c, j->w, j->cache, j->x);
}

static int bench_mha(table *t, const sizes *s)
{
    const size_t B = s->mha_B, d = s->mha_d, H = s->mha_H, Hkv = s->mha_Hkv, N = s->mha_N, Dh = d / H;
    mha_config c;
    mha_weights w = {0}, dw = {0};
    mha_cache_cuda cache = {0};
    float *x = NULL, *out = NULL, *rows = NULL, *host = NULL;
    kvl_rng rng;
    kvl_rng_seed(&rng, 4);
    int rc = mha_config_init(&c, d, H, Hkv, Dh, 0, 1e4);
    if (rc == KVL_OK) rc = mha_weights_init_random(&w, &c, &rng);
    if (rc == KVL_OK) rc = mha_weights_to_cuda(&dw, &w, &c);
    const size_t width = 2 * Hkv * Dh, chunk = B * 64 * width;
    if (rc == KVL_OK && !(host = malloc(chunk * sizeof *host))) rc = kvl_fail(KVL_ENOMEM, "bench: out of memory");
    if (rc == KVL_OK) kvl_rng_normal_f32(&rng, host, chunk, 1.0);
    if (rc == KVL_OK) rc = mha_cache_init_cuda(&cache, &c, N + s->reps + 1, SWA_STORE_BF16, B);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&rows, chunk * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&x, B * d * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&out, B * d * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(rows, host, chunk * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(x, host, (B * d < chunk ? B * d : chunk) * sizeof(float));
    for (size_t p = 0; p < N && rc == KVL_OK; p += 64)
        rc = swa_ring_append_cuda(&cache.ring, rows, N - p < 64 ? N - p : 64);
    char shape[48];
    snprintf(shape, sizeof shape, "B %zu H %zu/%zu Dh %zu N %zu", B, H, Hkv, Dh, N);
    mha_job j = {out, x, &c, &dw, &cache};
    if (rc == KVL_OK) {
        const double weights = (2.0 * H * Dh * d + 2.0 * Hkv * Dh * d) * 4, kv = (double)B * N * width * 2;
        const double flops = 2.0 * B * (2.0 * H * Dh * d + 2.0 * Hkv * Dh * d) + 4.0 * B * H * N * Dh;
        row *r = add_row(t, "mha decode step (GQA, bf16)", shape, weights + kv, flops, 0);
        rc = kvl_cuda_time(&r->ms, run_mha, &j, s->reps);
    }
    mha_cache_free_cuda(&cache);
    mha_weights_free_cuda(&dw);
    mha_weights_free(&w);
    kvl_cuda_free(x);
    kvl_cuda_free(out);
    kvl_cuda_free(rows);
    free(host);
    return rc;
}

/* ---- the table ---------------------------------------------------------------------------------------- */

static double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

/* Print every row; returns the number of rows below their target (0 in smoke runs). */
static int print_table(const table *t, int smoke)
{
    int below = 0;
    printf("| %-34s | %-24s | %10s | %9s | %8s | %7s | %7s | %7s | %-12s |\n", "kernel", "shape", "MB", "ms", "GB/s",
           "of copy", "TFLOP/s", "of GEMM", "target");
    for (size_t i = 0; i < t->n; i++) {
        const row *r = &t->rows[i];
        const double gbps = r->bytes / (r->ms * 1e6), tflops = r->flops / (r->ms * 1e9);
        const double frac = gbps / t->copy_gbps;
        char target[16] = "-";
        if (r->target > 0 && smoke) snprintf(target, sizeof target, ">=%.0f%% n/a", 100 * r->target);
        else if (r->target > 0) {
            const int ok = frac >= r->target;
            below += !ok;
            snprintf(target, sizeof target, ">=%.0f%% %s", 100 * r->target, ok ? "ok" : "BELOW");
        }
        printf("| %-34s | %-24s | %10.4g | %9.4g | %8.4g | %6.4g%% | %7.4g | %6.4g%% | %-12s |\n", r->name, r->shape,
               r->bytes / 1e6, r->ms, gbps, 100 * frac, tflops, percent(tflops, t->gemm_tflops), target);
    }
    return below;
}

int main(int argc, char **argv)
{
    const int smoke = argc > 1 && strcmp(argv[1], "--smoke") == 0;
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) {
        if (kvl_cuda_device_count() > 0) return 0;
        printf("bench_cuda: no CUDA device\n");
        return 2;
    }
    if (kvl_cuda_device_count() == 0) {
        printf("bench_cuda: no CUDA device, nothing measured\n");
        return 2;
    }
    const sizes *s = smoke ? &SMOKE : &FULL;
    table t = {0};
    const char *gemm_what = "";
    int rc = kvl_cuda_copy_ceiling(&t.copy_gbps, s->copy_bytes, 5);
    if (rc == KVL_OK) rc = kvl_cuda_gemm_ceiling(&t.gemm_tflops, &gemm_what, s->gemm_n, 5);
    if (rc == KVL_OK) rc = bench_quantisers(&t, s);
    if (rc == KVL_OK) rc = bench_rows(&t, s);
    if (rc == KVL_OK)
        rc = bench_mla(&t, s, SWA_CUDA_BF16, mla_attend_absorbed_mma_cuda, "mla absorbed, bf16, tensor cores",
                       MLA_TARGET);
    if (rc == KVL_OK)
        rc = bench_mla(&t, s, SWA_CUDA_V32_MAIN, mla_attend_absorbed_mma_cuda, "mla absorbed, fp8, tensor cores",
                       MLA_TARGET);
    if (rc == KVL_OK)
        rc = bench_mla(&t, s, SWA_CUDA_BF16, mla_attend_absorbed_cuda, "mla absorbed, bf16, float kernel", 0);
    if (rc == KVL_OK) rc = bench_mha(&t, s);
    if (rc != KVL_OK) {
        fprintf(stderr, "bench_cuda: %s\n", kvl_error());
        return 2;
    }
    printf("bench_cuda on %s%s: copy %.4g GB/s (device-to-device, %zu MiB), %s %.4g TFLOP/s (n %zu)\n",
           kvl_cuda_device_name(), smoke ? " (smoke sizes: the speeds mean nothing)" : "", t.copy_gbps,
           s->copy_bytes >> 20, gemm_what, t.gemm_tflops, s->gemm_n);
    const int below = print_table(&t, smoke);
    if (!smoke) printf("bench_cuda: %d row%s below target\n", below, below == 1 ? "" : "s");
    return below ? 1 : 0;
}
