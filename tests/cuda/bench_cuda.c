/* bench_cuda: the GPU's own ceilings, then every benchmarked kernel against them, as one table.
 *
 *   bench_cuda            full sizes (make cuda-check on a GPU; well under a minute on an H200)
 *   bench_cuda --smoke    tiny sizes, one repetition: the table's plumbing, run on the emulator by
 *                         tests/cuda/test_cuda_bench.c (its speeds mean nothing)
 *   bench_cuda --probe    exit 0 if a CUDA device is present, 1 if there is none (saying so), 2 if the
 *                         CUDA runtime fails (a driver that does not match it: one line on stderr)
 *
 * The ceilings are measured and printed first, then the table's header, then each row as soon as it is
 * measured (stdout is line-buffered, so a later failure or a time limit loses nothing printed); a row or
 * group of rows that fails prints FAILED with the error and the rest still run.
 * Ceilings: a device-to-device cudaMemcpy (bytes read plus written per second) and a bf16 GEMM through
 * cuBLAS on random matrices. Each row: the bytes a kernel must move (inputs read once, outputs written once)
 * and the floating-point operations it must do, its time (kvl_cuda_time: the median of the repetitions,
 * each timed alone with CUDA events after warm-up calls and with L2 flushed; the ceilings alike),
 * GB/s and TFLOP/s, and their fractions of the ceilings, each to four significant figures. Targets
 * (full sizes only): the quantisers move at least 70% of the copy bandwidth, the absorbed MLA attention
 * on tensor cores at batch 64 and 64 heads at least 65%; V3.2's fp8 indexer scan at least 60% of it, with
 * the top-k over its scores taking at most a quarter of its time, and the sparse FP8 decode over the
 * picked rows at batch 64 at least 25% of the GEMM's TFLOP/s; V4's fp4 indexer scan over compressed
 * entries at least 25% of the GEMM's TFLOP/s (~2,300 flop per byte). V4's rows use V4-Flash's layers
 * (ref/configs/deepseek-v4-flash.json, found under $KVL_ROOT); V4.1's rows time its candidate pool and the
 * attention core of a Full layer of V4.1-Flash over 528-byte window rows and 288-byte entries, and its
 * indexer's float32 scores over every entry (a Full layer) against those over the candidate pool only (a
 * Reindex layer) at the same N, 1M tokens' entries at full sizes. The causal encoder–decoder's rows time a
 * prefill of the whole stack, the early-exit prefill (v41_ced_prefill_cuda) and a bounded replay of the last W
 * tokens on a V4.1-Flash-shaped stack over the deployed rows (tests/ch07_flash.h), and a line gives the early
 * exit's tokens/s over the full prefill's.
 * Exit status: 0, 1 if a target is missed, 2 if a row failed or on an error. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "block.h"
#include "block_cuda.h"
#include "v41_ced.h"
#include "v41_ced_cuda.h"
#include "ceilings_cuda.h"
#include "ch07_flash.h"
#include "ch07_toy.h"
#include "v41.h"
#include "v41_cuda.h"
#include "v41_indexer_cuda.h"
#include "v41_stack.h"
#include "v41_stack_cuda.h"
#include "device.h"
#include "dsa.h"
#include "dsa_cuda.h"
#include "mha.h"
#include "mha_cuda.h"
#include "mla.h"
#include "mla_cuda.h"
#include "rng.h"
#include "rows.h"
#include "rows_cuda.h"
#include "status.h"
#include "kv_ring_cuda.h"
#include "topk_cuda.h"
#include "v4.h"
#include "v4_cuda.h"

/* Expected ≈ 85% (cuda/block_cuda.cuh, kvl_quant_wide_kernel): 5.03 B per E4M3 value (4.53 E2M1) and
 * ~15 instructions per value, which H200's 33.5 T lane instructions/s issue at 2.7x a ~4 TB/s copy; the
 * bytes bound it, and 4:1 reads to writes cost DRAM about what the copy's 1:1 do. */
#define QUANT_TARGET 0.70
#define MLA_TARGET 0.65
#define INDEX_TARGET 0.60 /* the dsa indexer row (tensor cores) expects ≈ 60%: kvl_index_mma_kernel's header */
#define SPARSE_GEMM_TARGET 0.25 /* of the GEMM's TFLOP/s, not of the copy; expected ≈ 27% (kvl_sparse_mma_kernel's
                                 * header: unpipelined fill, decode and mma.sync, one block per SM) */
/* The top-k's time over the indexer's, at most. Expected ≈ 0.2 (cuda/topk_cuda.cuh, the rounds over
 * slices): B 64 rows of 65,536 with K 2048 in slices of 8192 are 55 M key-passes of ~25 instructions,
 * ~50 µs on H200's 33.5 T lane instructions/s as the rounds fill 132, 128 and 64 SMs; the indexer at its
 * target moves 570 MB at 60% of a ~4 TB/s copy, ~240 µs. */
#define TOPK_SHARE 0.25
/* V4's fp4 indexer at the bench's chunk, 64 queries over 16,400 entries, is 2·64·64·128 = 1.05 M flop per
 * entry against its 68-byte key and 64 four-byte scores: 17.2 GFLOP over 7.4 MB, 2,300 flop per byte,
 * ~11x an H200's bf16 ridge (~200): a GEMM [S·HI × 128]·[128 × N] with a per-head epilogue, not a copy.
 * Target: 25% of the GEMM's TFLOP/s, what that product on tensor cores with the FP4 keys decoded in
 * registers reaches. Expected today ≈ 3%: FP32 cores peak at 67 TFLOP/s, ~8% of the GEMM's rate, and the
 * scores kernel's two shared loads per FMA keep it near a third of that. */
#define V4_INDEX_GEMM_TARGET 0.25

typedef struct {
    int smoke;
    size_t copy_bytes, gemm_n, quant_n, pack_rows;
    size_t mla_B, mla_H, mla_N, mha_B, mha_d, mha_H, mha_Hkv, mha_N;
    int reps;
    size_t dsa_B, dsa_N, dsa_HI, dsa_K, dsa_H;
    size_t v4_S, v4_start; /* queries of one chunk and the position of its first */
    size_t pool_N, pool_B, pool_P; /* V4.1's candidate pool: entries, block size, blocks kept */
    size_t reindex_N;              /* V4.1's index scores, Full and over the pool: entries */
    size_t v41_ced_T;                  /* V4.1's causal encoder–decoder: prompt tokens */
} sizes;

static const sizes FULL = {0, (size_t)1 << 30, 8192, (size_t)1 << 28, (size_t)1 << 18,
                           64, 64, 4096, 16, 2048, 16, 2, 4096, 20, 64, 65536, 64, 2048, 128, 64, 65536,
                           65536, 8, 2048, 262144, 512};
static const sizes SMOKE = {1, (size_t)1 << 20, 64, (size_t)1 << 12, 16, 2, 4, 40, 2, 32, 4, 2, 20, 1, 2, 300, 4, 16, 4,
                            2, 520, 300, 8, 4, 600, 5};

typedef struct {
    char name[40], shape[48];
    double bytes, flops, ms, target, gemm_target; /* targets: fractions of the copy's GB/s, of the GEMM's TFLOP/s */
} row;

#define MAX_ROWS 32

typedef struct {
    row rows[MAX_ROWS];
    size_t n;
    int smoke, below, failed; /* rows below their target (0 in smoke runs) and rows or groups that failed */
    double copy_gbps, gemm_tflops;
    double topk_share; /* the DSA top-k's time over its indexer's */
    double v41_ced_full_ms, v41_ced_early_ms; /* V4.1's prefill, every layer and with the early exit */
    size_t v41_ced_layers, v41_ced_of;        /* layers that attend in the early exit, of all */
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

static double percent(double part, double whole) { return whole > 0 ? 100.0 * part / whole : 0.0; }

static void print_header(void)
{
    printf("| %-34s | %-24s | %10s | %9s | %8s | %7s | %7s | %7s | %-12s |\n", "kernel", "shape", "MB", "ms", "GB/s",
           "of copy", "TFLOP/s", "of GEMM", "target");
}

/* One line for a row or group that failed, with the error; the count makes the exit status 2. */
static void print_failed(table *t, const char *name)
{
    t->failed++;
    printf("| %-34s | FAILED: %s\n", name, kvl_error());
}

/* Print row r of t, judging its target (only at full sizes). */
static void print_row(table *t, const row *r)
{
    const double gbps = r->bytes / (r->ms * 1e6), tflops = r->flops / (r->ms * 1e9);
    const double frac = gbps / t->copy_gbps;
    const double want = r->gemm_target > 0 ? r->gemm_target : r->target;
    const double got = r->gemm_target > 0 ? tflops / t->gemm_tflops : frac;
    char target[16] = "-";
    if (want > 0 && t->smoke) snprintf(target, sizeof target, ">=%.0f%% n/a", 100 * want);
    else if (want > 0) {
        const int ok = got >= want;
        t->below += !ok;
        snprintf(target, sizeof target, ">=%.0f%% %s", 100 * want, ok ? "ok" : "BELOW");
    }
    printf("| %-34s | %-24s | %10.4g | %9.4g | %8.4g | %6.4g%% | %7.4g | %6.4g%% | %-12s |\n", r->name, r->shape,
           r->bytes / 1e6, r->ms, gbps, 100 * frac, tflops, percent(tflops, t->gemm_tflops), target);
}

/* Time row r (kvl_cuda_time) and print it, or print that it failed; returns the timing's status. */
static int time_row(table *t, row *r, int (*run)(void *), void *arg, int reps)
{
    const int rc = kvl_cuda_time(&r->ms, run, arg, reps);
    if (rc == KVL_OK) print_row(t, r);
    else print_failed(t, r->name);
    return rc;
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
        rc = time_row(t, r, run_quant, &j, s->reps);
    }
    if (rc == KVL_OK) {
        quant_job j = {KVF_RECIPE_MXFP4, codes, scales, x, n};
        const double bytes = (4 + out_bytes(KVF_RECIPE_MXFP4)) * (double)n;
        row *r = add_row(t, "quant mxfp4 + finiteness pass", shape, bytes, 0, 0);
        rc = time_row(t, r, run_quant_checked, &j, s->reps);
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
        rc = time_row(t, r, run_pack, &j, s->reps);
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

static int bench_mla(table *t, const sizes *s, kv_cuda_store store, mla_attend_fn fn, const char *name, double target)
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
        const double bytes = (double)B * N * kv_cuda_row_bytes(store, W) + (double)B * H * (W + 512) * 4;
        row *r = add_row(t, name, shape, bytes, (double)B * H * N * 2 * (W + 512), target);
        rc = time_row(t, r, run_mla, &j, s->reps);
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
    if (rc == KVL_OK) rc = mha_cache_init_cuda(&cache, &c, N + KVL_CUDA_WARMUP + s->reps, KV_STORE_BF16, B);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&rows, chunk * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&x, B * d * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&out, B * d * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(rows, host, chunk * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(x, host, (B * d < chunk ? B * d : chunk) * sizeof(float));
    for (size_t p = 0; p < N && rc == KVL_OK; p += 64)
        rc = kv_ring_append_cuda(&cache.ring, rows, N - p < 64 ? N - p : 64);
    char shape[48];
    snprintf(shape, sizeof shape, "B %zu H %zu/%zu Dh %zu N %zu", B, H, Hkv, Dh, N);
    mha_job j = {out, x, &c, &dw, &cache};
    if (rc == KVL_OK) {
        const double weights = (2.0 * H * Dh * d + 2.0 * Hkv * Dh * d) * 4, kv = (double)B * N * width * 2;
        const double flops = 2.0 * B * (2.0 * H * Dh * d + 2.0 * Hkv * Dh * d) + 4.0 * B * H * N * Dh;
        row *r = add_row(t, "mha decode step (GQA, bf16)", shape, weights + kv, flops, 0);
        rc = time_row(t, r, run_mha, &j, s->reps);
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

/* ---- DSA: V3.2's fp8 indexer over every key, its top-k, the sparse FP8 decode over the picks ------------- */

typedef struct {
    const dsa_config *c;
    float *I, *q_idx, *w_idx, *q_hat, *o_hat;
    const uint8_t *keys;
    int32_t *sel;
    size_t B, N;
    mla_cache_cuda *cache;
} dsa_job;

/* one decode step's query per sequence, at the newest position N − 1, over all N keys */
static int run_index(void *arg)
{
    const dsa_job *j = arg;
    return dsa_index_scores_fp8_cuda(j->I, j->c, j->q_idx, j->w_idx, j->keys, j->B, 1, j->N, j->N - 1);
}

/* the same on its float twin */
static int run_index_float(void *arg)
{
    const dsa_job *j = arg;
    return dsa_index_scores_fp8_float_cuda(j->I, j->c, j->q_idx, j->w_idx, j->keys, j->B, 1, j->N, j->N - 1);
}

static int run_topk(void *arg)
{
    const dsa_job *j = arg;
    return kvl_topk_cuda(j->sel, j->I, j->B, j->N, j->c->index_topk);
}

/* over the top-k's selection, checked once before the timing (the check reads a flag back to the host) */
static int run_sparse(void *arg)
{
    const dsa_job *j = arg;
    return dsa_attend_gather_absorbed_checked_cuda(j->o_hat, j->c, j->q_hat, j->sel, j->cache);
}

/* the same on the float twin (no check: the selection is the one run_sparse's row checked) */
static int run_sparse_float(void *arg)
{
    const dsa_job *j = arg;
    return dsa_attend_gather_absorbed_float_cuda(j->o_hat, j->c, j->q_hat, j->sel, j->cache);
}

/* keys[B·N][132] (device): 4096 packed random index rows, repeated */
static int fill_index_keys(uint8_t *keys, size_t rows, const float *host, size_t host_floats)
{
    const size_t R = 4096, rb = kvf_row_bytes(KVF_ROW_V32_INDEX);
    uint8_t *packed = malloc(R * rb), *chunk = NULL;
    if (!packed || host_floats < R * KVF_INDEX_DIM) {
        free(packed);
        return kvl_fail(KVL_ENOMEM, "bench: out of memory for the index keys");
    }
    int rc = KVL_OK;
    for (size_t r = 0; r < R && rc == KVL_OK; r++)
        if (kvf_row_pack(KVF_ROW_V32_INDEX, packed + r * rb, host + r * KVF_INDEX_DIM) != KVF_OK)
            rc = kvl_fail(KVL_EINVAL, "bench: cannot pack index row %zu", r);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&chunk, R * rb);
    if (rc == KVL_OK) rc = kvl_cuda_upload(chunk, packed, R * rb);
    for (size_t r = 0; r < rows && rc == KVL_OK; r += R)
        rc = kvl_cuda_copy(keys + r * rb, chunk, (rows - r < R ? rows - r : R) * rb);
    kvl_cuda_free(chunk);
    free(packed);
    return rc;
}

static int bench_dsa(table *t, const sizes *s)
{
    const size_t B = s->dsa_B, N = s->dsa_N, HI = s->dsa_HI, DI = KVF_INDEX_DIM, K = s->dsa_K, H = s->dsa_H, W = 576;
    dsa_config c = {.index_n_heads = HI, .index_head_dim = DI, .index_topk = K, .index_norm_eps = DSA_INDEX_NORM_EPS};
    int rc = mla_config_v3(&c.mla, H);
    const size_t chunk = B * 64 * W, n_host = chunk > 4096 * DI ? chunk : 4096 * DI;
    float *host = malloc(n_host * sizeof *host), *chunk_dev = NULL, *I = NULL, *q_idx = NULL, *w_idx = NULL;
    float *q_hat = NULL, *o_hat = NULL;
    uint8_t *keys = NULL;
    int32_t *sel = NULL;
    mla_cache_cuda cache = {0};
    if (!host) return kvl_fail(KVL_ENOMEM, "bench: out of memory");
    kvl_rng rng;
    kvl_rng_seed(&rng, 5);
    kvl_rng_normal_f32(&rng, host, n_host, 1.0);
    if (rc == KVL_OK) rc = dsa_config_check(&c);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&keys, B * N * kvf_row_bytes(KVF_ROW_V32_INDEX));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&I, B * N * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&q_idx, B * HI * DI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&w_idx, B * HI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&sel, B * K * sizeof(int32_t));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&q_hat, B * H * W * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&o_hat, B * H * 512 * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&chunk_dev, chunk * sizeof(float));
    if (rc == KVL_OK) rc = fill_index_keys(keys, B * N, host, n_host);
    if (rc == KVL_OK) rc = kvl_cuda_upload(q_idx, host, B * HI * DI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(w_idx, host + 1, B * HI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(q_hat, host, (B * H * W < n_host ? B * H * W : n_host) * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(chunk_dev, host, chunk * sizeof(float));
    if (rc == KVL_OK) rc = mla_cache_init_cuda(&cache, &c.mla, N, KV_CUDA_V32_MAIN, B);
    if (rc == KVL_OK) rc = fill_mla_cache(&cache, &c.mla, N, chunk_dev);
    dsa_job j = {&c, I, q_idx, w_idx, q_hat, o_hat, keys, sel, B, N, &cache};
    char shape[48];
    row *index = NULL, *topk = NULL;
    snprintf(shape, sizeof shape, "B %zu HI %zu N %zu", B, HI, N);
    const double index_bytes = (double)B * N * (kvf_row_bytes(KVF_ROW_V32_INDEX) + 4) + (double)B * HI * (DI + 1) * 4;
    if (rc == KVL_OK) { /* the target's row, on tensor cores */
        index = add_row(t, "dsa indexer fp8, tensor cores", shape, index_bytes, 2.0 * B * N * HI * DI, INDEX_TARGET);
        rc = time_row(t, index, run_index, &j, s->reps);
    }
    if (rc == KVL_OK) { /* its float twin */
        row *r = add_row(t, "dsa indexer fp8, float kernel", shape, index_bytes, 2.0 * B * N * HI * DI, 0);
        rc = time_row(t, r, run_index_float, &j, s->reps);
    }
    if (rc == KVL_OK) {
        snprintf(shape, sizeof shape, "B %zu N %zu K %zu", B, N, K);
        topk = add_row(t, "dsa top-k (radix select)", shape, (double)B * (N + K) * 4, 0, 0);
        rc = time_row(t, topk, run_topk, &j, s->reps);
    }
    snprintf(shape, sizeof shape, "B %zu H %zu K %zu", B, H, K);
    const double sparse_bytes = (double)B * K * (kvf_row_bytes(KVF_ROW_V32_MAIN) + 4) + (double)B * H * (W + 512) * 4;
    const double sparse_flops = (double)B * H * K * 2 * (W + 512);
    if (rc == KVL_OK) { /* the target's row: 64 heads share each gathered row, products on tensor cores */
        row *r = add_row(t, "dsa sparse fp8, tensor cores", shape, sparse_bytes, sparse_flops, 0);
        r->gemm_target = SPARSE_GEMM_TARGET;
        rc = dsa_attend_gather_absorbed_cuda(o_hat, &c, q_hat, sel, &cache);
        if (rc == KVL_OK) rc = time_row(t, r, run_sparse, &j, s->reps);
    }
    if (rc == KVL_OK) { /* its float twin, one block per head: every row gathered and decoded once per head */
        row *r = add_row(t, "dsa sparse fp8, float kernel", shape, sparse_bytes, sparse_flops, 0);
        rc = time_row(t, r, run_sparse_float, &j, s->reps);
    }
    if (rc == KVL_OK) t->topk_share = topk->ms / index->ms;
    mla_cache_free_cuda(&cache);
    kvl_cuda_free(keys), kvl_cuda_free(I), kvl_cuda_free(q_idx), kvl_cuda_free(w_idx), kvl_cuda_free(sel);
    kvl_cuda_free(q_hat), kvl_cuda_free(o_hat), kvl_cuda_free(chunk_dev);
    free(host);
    return rc;
}

/* ---- V4: the attention core of an HCA and a CSA layer over 584-byte rows, the fp4 indexer ---------------- */

typedef struct {
    const v4_config *c;
    float *o, *I;
    const float *sinks, *q, *q_idx, *w_idx;
    const void *win, *entries;
    const uint8_t *keys;
    const int32_t *sel;
    size_t N, S, start;
    kvl_workspace *work;
} v4_job;

static int run_v4_attend(void *arg)
{
    const v4_job *j = arg;
    return v4_attend_cuda(j->o, j->c, j->sinks, j->q, j->win, j->start + 1 - j->c->window, j->entries, j->N, j->sel,
                          j->S, j->start, V4_CUDA_MAIN, j->work);
}

static int run_v4_index(void *arg)
{
    const v4_job *j = arg;
    return v4_index_scores_fp4_cuda(j->I, &j->c->indexer, j->q_idx, j->w_idx, j->keys, j->S, j->N, j->start);
}

/* layer `layer` of V4-Flash; at smoke sizes with 8 heads, 8 index heads, a window of 8 and 4 picks */
static int v4_flash_layer(v4_config *c, size_t layer, const sizes *s)
{
    const char *root = getenv("KVL_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/ref/configs/deepseek-v4-flash.json", root ? root : ".");
    kvl_model m;
    int rc = kvl_model_load(&m, path);
    if (rc != KVL_OK) return rc;
    rc = v4_config_from_model(c, &m, layer);
    kvl_model_free(&m);
    if (rc != KVL_OK || !s->smoke) return rc;
    c->n_heads = c->indexer.n_heads = c->window = 8;
    c->indexer.topk = 4;
    return v4_config_check(c);
}

/* dst[n][row bytes of layout]: 64 packed random rows of 512 values from host, repeated */
static int fill_rows(uint8_t *dst, kvf_row layout, size_t n, const float *host)
{
    const size_t R = 64, rb = kvf_row_bytes(layout);
    uint8_t *packed = malloc(R * rb);
    if (!packed) return kvl_fail(KVL_ENOMEM, "bench: out of memory");
    int rc = KVL_OK;
    for (size_t r = 0; r < R && rc == KVL_OK; r++)
        if (kvf_row_pack(layout, packed + r * rb, host + r * 512) != KVF_OK)
            rc = kvl_fail(KVL_EINVAL, "bench: cannot pack %s row %zu", kvf_row_name(layout), r);
    for (size_t r = 0; r < n && rc == KVL_OK; r += R)
        rc = kvl_cuda_upload(dst + r * rb, packed, (n - r < R ? n - r : R) * rb);
    free(packed);
    return rc;
}

/* one layer's attention: S queries at start over the window and the compressed rows */
static int bench_v4_attend(table *t, const sizes *s, size_t layer, const char *name, const float *host, size_t n_host)
{
    v4_config c;
    int rc = v4_flash_layer(&c, layer, s);
    if (rc != KVL_OK) return rc;
    const size_t S = s->v4_S, start = s->v4_start, H = c.n_heads, Dh = c.head_dim, W = c.window;
    const size_t N = (start + S) / c.compressor.ratio, rb = kvf_row_bytes(KVF_ROW_V4_MAIN);
    const size_t K = c.kind == KVL_LAYER_CSA ? c.indexer.topk : 0, nk = W + (K ? K : N);
    float *o = NULL, *q = NULL, *sinks = NULL;
    uint8_t *win = NULL, *entries = NULL;
    int32_t *sel = NULL, *host_sel = malloc((S * K + 1) * sizeof *host_sel);
    kvl_workspace work = {0};
    if (!host_sel) return kvl_fail(KVL_ENOMEM, "bench: out of memory");
    for (size_t i = 0; i < S * K; i++) host_sel[i] = (int32_t)((i * 7919) % N); /* spread over every entry */
    if (rc == KVL_OK && n_host < S * H * Dh) rc = kvl_fail(KVL_EINVAL, "bench: too few random values");
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&o, S * H * Dh * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&q, S * H * Dh * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&sinks, H * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&win, (W + S) * rb);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&entries, N * rb);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&sel, (S * K + 1) * sizeof *sel);
    if (rc == KVL_OK) rc = kvl_cuda_upload(q, host, S * H * Dh * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(sinks, host, H * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(sel, host_sel, (S * K + 1) * sizeof *sel);
    if (rc == KVL_OK) rc = fill_rows(win, KVF_ROW_V4_MAIN, W + S, host);
    if (rc == KVL_OK) rc = fill_rows(entries, KVF_ROW_V4_MAIN, N, host);
    v4_job j = {&c, o, NULL, sinks, q, NULL, NULL, win, entries, NULL, K ? sel : NULL, N, S, start, &work};
    if (rc == KVL_OK) {
        char shape[48];
        snprintf(shape, sizeof shape, "S %zu H %zu keys %zu", S, H, nk);
        const double bytes = (double)(W + S + (K ? (S * K < N ? S * K : N) : N)) * rb + 2.0 * S * H * Dh * 4;
        row *r = add_row(t, name, shape, bytes, 4.0 * S * H * nk * Dh, 0);
        rc = time_row(t, r, run_v4_attend, &j, s->reps);
    }
    kvl_workspace_free(&work);
    kvl_cuda_free(o), kvl_cuda_free(q), kvl_cuda_free(sinks), kvl_cuda_free(win), kvl_cuda_free(entries);
    kvl_cuda_free(sel);
    free(host_sel);
    return rc;
}

/* the CSA layer's fp4 indexer: S queries over every entry of start + S positions */
static int bench_v4_index(table *t, const sizes *s, const float *host, size_t n_host)
{
    v4_config c;
    int rc = v4_flash_layer(&c, 2, s);
    if (rc != KVL_OK) return rc;
    const v4_indexer_config *ic = &c.indexer;
    const size_t S = s->v4_S, start = s->v4_start, HI = ic->n_heads, DI = ic->head_dim;
    const size_t N = (start + S) / ic->compressor.ratio, rb = kvf_row_bytes(KVF_ROW_V4_INDEX), R = 64;
    float *I = NULL, *q_idx = NULL, *w_idx = NULL;
    uint8_t *keys = NULL, packed[64 * sizeof(kvf_row_v4_index)];
    for (size_t r = 0; r < R && rc == KVL_OK; r++)
        if (kvf_row_pack(KVF_ROW_V4_INDEX, packed + r * rb, host + r * DI) != KVF_OK)
            rc = kvl_fail(KVL_EINVAL, "bench: cannot pack V4 index row %zu", r);
    if (rc == KVL_OK && n_host < S * HI * DI) rc = kvl_fail(KVL_EINVAL, "bench: too few random values");
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&I, S * N * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&q_idx, S * HI * DI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&w_idx, S * HI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&keys, N * rb);
    if (rc == KVL_OK) rc = kvl_cuda_upload(q_idx, host, S * HI * DI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(w_idx, host + 1, S * HI * sizeof(float));
    for (size_t r = 0; r < N && rc == KVL_OK; r += R)
        rc = kvl_cuda_upload(keys + r * rb, packed, (N - r < R ? N - r : R) * rb);
    v4_job j = {&c, NULL, I, NULL, NULL, q_idx, w_idx, NULL, NULL, keys, NULL, N, S, start, NULL};
    if (rc == KVL_OK) {
        char shape[48];
        snprintf(shape, sizeof shape, "S %zu HI %zu N %zu", S, HI, N);
        const double bytes = (double)N * rb + (double)S * N * 4 + (double)S * HI * (DI + 1) * 4;
        row *r = add_row(t, "v4 indexer scores, fp4 keys", shape, bytes, 2.0 * S * N * HI * DI, 0);
        r->gemm_target = V4_INDEX_GEMM_TARGET;
        rc = time_row(t, r, run_v4_index, &j, s->reps);
    }
    kvl_cuda_free(I), kvl_cuda_free(q_idx), kvl_cuda_free(w_idx), kvl_cuda_free(keys);
    return rc;
}

static int bench_v4(table *t, const sizes *s)
{
    const size_t n_host = s->v4_S * 64 * 512 + 64 * 512;
    float *host = malloc(n_host * sizeof *host);
    if (!host) return kvl_fail(KVL_ENOMEM, "bench: out of memory");
    kvl_rng rng;
    kvl_rng_seed(&rng, 6);
    kvl_rng_normal_f32(&rng, host, n_host, 1.0);
    int rc = bench_v4_attend(t, s, 3, "v4 attend, HCA, 584-byte rows", host, n_host);
    if (rc == KVL_OK) rc = bench_v4_attend(t, s, 2, "v4 attend, CSA, 584-byte rows", host, n_host);
    if (rc == KVL_OK) rc = bench_v4_index(t, s, host, n_host);
    free(host);
    return rc;
}

/* ---- V4.1: the candidate pool over a candidate source's scores; the attention core over native rows --------- */

typedef struct {
    uint8_t *pool;
    const float *I;
    size_t S, N, B, P;
    kvl_workspace *work;
} pool_job;

/* queries at N − S … N − 1 of a ratio-1 source: each sees every entry up to its own */
static int run_pool(void *arg)
{
    const pool_job *j = arg;
    return v41_candidate_pool_cuda(j->pool, j->I, j->S, j->N, j->N - j->S, 1, j->B, j->P, j->work);
}

/* V4.1's attention core over native rows: S queries at start over 528-byte window rows and K picked 288-byte
 * entries of a Full layer (V4.1-Flash layer 2; at smoke sizes 8 heads, a window of 8 and 4 picks) */
typedef struct {
    const v41_config *c;
    float *o;
    const float *sinks, *q;
    const void *win, *entries;
    const int32_t *sel;
    size_t N, S, start;
    kvl_workspace *work;
} v41_job;

static int run_v41_attend(void *arg)
{
    const v41_job *j = arg;
    return v41_attend_cuda(j->o, j->c, j->sinks, j->q, j->win, j->start + 1 - j->c->core.window, j->entries, j->N,
                            j->sel, j->S, j->start, V41_CUDA_NATIVE, j->work);
}

static int v41_flash_layer(v41_config *c, size_t layer, const sizes *s)
{
    const char *root = getenv("KVL_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/ref/configs/deepseek-v4.1-flash.json", root ? root : ".");
    kvl_model m;
    int rc = kvl_model_load(&m, path);
    if (rc != KVL_OK) return rc;
    rc = v41_config_from_model(c, &m, layer);
    kvl_model_free(&m);
    if (rc != KVL_OK || !s->smoke) return rc;
    c->core.n_heads = c->indexer.n_heads = c->core.window = 8;
    c->indexer.topk = 4;
    return v41_config_check(c);
}

static int bench_v41_attend(table *t, const sizes *s, const float *host, size_t n_host)
{
    v41_config c;
    int rc = v41_flash_layer(&c, 2, s);
    if (rc != KVL_OK) return rc;
    const size_t S = s->v4_S, start = s->v4_start, H = c.core.n_heads, Dh = c.core.head_dim, W = c.core.window;
    const size_t N = (start + S) / c.ratio, K = c.indexer.topk, nk = W + K;
    const size_t wb = kvf_row_bytes(KVF_ROW_V41_WINDOW), eb = kvf_row_bytes(KVF_ROW_V41_MAIN);
    float *o = NULL, *q = NULL, *sinks = NULL;
    uint8_t *win = NULL, *entries = NULL;
    int32_t *sel = NULL, *host_sel = malloc(S * K * sizeof *host_sel);
    kvl_workspace work = {0};
    if (!host_sel) return kvl_fail(KVL_ENOMEM, "bench: out of memory");
    for (size_t i = 0; i < S * K; i++) host_sel[i] = (int32_t)((i * 7919) % N); /* spread over every entry */
    if (n_host < S * H * Dh) rc = kvl_fail(KVL_EINVAL, "bench: too few random values");
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&o, S * H * Dh * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&q, S * H * Dh * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&sinks, H * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&win, (W + S) * wb);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&entries, N * eb);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&sel, S * K * sizeof *sel);
    if (rc == KVL_OK) rc = kvl_cuda_upload(q, host, S * H * Dh * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(sinks, host, H * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(sel, host_sel, S * K * sizeof *sel);
    if (rc == KVL_OK) rc = fill_rows(win, KVF_ROW_V41_WINDOW, W + S, host);
    if (rc == KVL_OK) rc = fill_rows(entries, KVF_ROW_V41_MAIN, N, host);
    v41_job j = {&c, o, sinks, q, win, entries, sel, N, S, start, &work};
    if (rc == KVL_OK) {
        char shape[48];
        snprintf(shape, sizeof shape, "S %zu H %zu keys %zu", S, H, nk);
        const double bytes = (double)(W + S) * wb + (double)(S * K < N ? S * K : N) * eb + 2.0 * S * H * Dh * 4;
        row *r = add_row(t, "v41 attend, Full, 528/288-B rows", shape, bytes, 4.0 * S * H * nk * Dh, 0);
        rc = time_row(t, r, run_v41_attend, &j, s->reps);
    }
    kvl_workspace_free(&work);
    kvl_cuda_free(o), kvl_cuda_free(q), kvl_cuda_free(sinks), kvl_cuda_free(win), kvl_cuda_free(entries);
    kvl_cuda_free(sel);
    free(host_sel);
    return rc;
}

/* V4.1-Flash layer 2's indexer over float32 keys: S queries at N·M − S … N·M − 1, scored over every visible
 * entry (Full) or over the candidate pool (Reindex: blocks of pool_B, pool_P of them, taken from the Full
 * scores as the candidate source's) */
typedef struct {
    const v41_indexer_config *c;
    float *I;
    const float *q_idx, *w_idx, *keys;
    const uint8_t *pool;
    size_t S, N, start;
    kvl_workspace *work;
} reindex_job;

static int run_index_all(void *arg)
{
    const reindex_job *j = arg;
    return v41_index_scores_all_cuda(j->I, j->c, j->q_idx, j->w_idx, j->keys, j->S, j->N, j->start);
}

static int run_index_pool(void *arg)
{
    const reindex_job *j = arg;
    return v41_index_scores_pool_cuda(j->I, j->c, j->q_idx, j->w_idx, j->keys, j->pool, j->S, j->N, j->work);
}

/* entries the queries of j see (Full) and the pool holds (pool[S][N] on the device, read back) */
static int reindex_counts(double *seen, double *pooled, const reindex_job *j)
{
    uint8_t *host = malloc(j->S * j->N);
    if (!host) return kvl_fail(KVL_ENOMEM, "bench: out of memory");
    const int rc = kvl_cuda_download(host, j->pool, j->S * j->N);
    *seen = *pooled = 0;
    for (size_t q = 0; q < j->S; q++) {
        const size_t n = (j->start + q + 1) / j->c->ratio;
        *seen += (double)(n < j->N ? n : j->N);
    }
    for (size_t i = 0; i < j->S * j->N; i++) *pooled += host[i] != 0;
    free(host);
    return rc;
}

/* the rows: keys read per query, one score written per entry, the queries; the pool's list (its mask read
 * twice, each listed entry written and read) */
static int bench_v41_reindex(table *t, const sizes *s, const float *host, size_t n_host)
{
    v41_config c;
    int rc = v41_flash_layer(&c, 2, s);
    if (rc != KVL_OK) return rc;
    const v41_indexer_config *ic = &c.indexer;
    const size_t S = s->v4_S, N = s->reindex_N, HI = ic->n_heads, DI = ic->head_dim, R = 64;
    float *I = NULL, *q_idx = NULL, *w_idx = NULL, *keys = NULL;
    uint8_t *pool = NULL;
    kvl_workspace work = {0};
    if (n_host < S * HI * DI + R * DI) rc = kvl_fail(KVL_EINVAL, "bench: too few random values");
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&I, S * N * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&q_idx, S * HI * DI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&w_idx, S * HI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&keys, N * DI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&pool, S * N);
    if (rc == KVL_OK) rc = kvl_cuda_upload(q_idx, host, S * HI * DI * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(w_idx, host + 1, S * HI * sizeof(float));
    for (size_t r = 0; r < N && rc == KVL_OK; r += R)
        rc = kvl_cuda_upload(keys + r * DI, host + S * HI * DI, (N - r < R ? N - r : R) * DI * sizeof(float));
    reindex_job j = {ic, I, q_idx, w_idx, keys, pool, S, N, N * ic->ratio - S, &work};
    char shape[48];
    snprintf(shape, sizeof shape, "S %zu HI %zu N %zu P*B %zu", S, HI, N, s->pool_P * s->pool_B);
    const double qw = (double)S * HI * (DI + 1) * 4, key = DI * 4.0, flop = 2.0 * HI * DI;
    double seen = 0, pooled = 0;
    /* the scores once, untimed, for the pool whose counts give both rows' bytes */
    if (rc == KVL_OK) rc = run_index_all(&j);
    if (rc == KVL_OK) rc = v41_candidate_pool_cuda(pool, I, S, N, j.start, ic->ratio, s->pool_B, s->pool_P, &work);
    if (rc == KVL_OK) rc = reindex_counts(&seen, &pooled, &j);
    if (rc == KVL_OK) {
        row *r = add_row(t, "v41 index scores, Full, f32 keys", shape, seen * key + (double)S * N * 4 + qw, seen * flop,
                         0);
        rc = time_row(t, r, run_index_all, &j, s->reps);
    }
    if (rc == KVL_OK) {
        const double list = 2.0 * S * N + 2.0 * pooled * 4;
        row *r = add_row(t, "v41 index scores, Reindex, pool", shape, pooled * key + (double)S * N * 4 + qw + list,
                         pooled * flop, 0);
        rc = time_row(t, r, run_index_pool, &j, s->reps);
    }
    kvl_workspace_free(&work);
    kvl_cuda_free(I), kvl_cuda_free(q_idx), kvl_cuda_free(w_idx), kvl_cuda_free(keys), kvl_cuda_free(pool);
    return rc;
}

static int bench_v41(table *t, const sizes *s)
{
    const size_t S = s->v4_S, N = s->pool_N;
    float *host = malloc(S * N * sizeof *host), *I = NULL;
    uint8_t *pool = NULL;
    kvl_workspace work = {0};
    if (!host) return kvl_fail(KVL_ENOMEM, "bench: out of memory");
    kvl_rng rng;
    kvl_rng_seed(&rng, 7);
    kvl_rng_normal_f32(&rng, host, S * N, 1.0);
    int rc = kvl_cuda_alloc((void **)&I, S * N * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&pool, S * N);
    if (rc == KVL_OK) rc = kvl_cuda_upload(I, host, S * N * sizeof(float));
    pool_job j = {pool, I, S, N, s->pool_B, s->pool_P, &work};
    if (rc == KVL_OK) {
        char shape[48];
        snprintf(shape, sizeof shape, "S %zu N %zu B %zu P %zu", S, N, s->pool_B, s->pool_P);
        row *r = add_row(t, "v41 candidate pool", shape, (double)S * N * 5, 0, 0);
        rc = time_row(t, r, run_pool, &j, s->reps);
    }
    kvl_workspace_free(&work);
    kvl_cuda_free(I), kvl_cuda_free(pool);
    free(host);
    if (rc != KVL_OK) return rc;
    const size_t n_host = s->v4_S * 64 * 512 + 64 * 512;
    host = malloc(n_host * sizeof *host);
    if (!host) return kvl_fail(KVL_ENOMEM, "bench: out of memory");
    kvl_rng_normal_f32(&rng, host, n_host, 1.0);
    rc = bench_v41_attend(t, s, host, n_host);
    if (rc == KVL_OK) rc = bench_v41_reindex(t, s, host, n_host);
    free(host);
    return rc;
}

/* ---- V4.1's causal encoder–decoder: the early-exit prefill against the full one, and a replay step ---------- */

/* The stack: V4.1-Flash's layer map and entry widths at a small model width (tests/ch07_flash.h), or at smoke
 * sizes the chapter 7 toy narrowed for the emulator (tests/ch07_toy.h). */
typedef struct {
    const v41_stack_config *s;
    const v41_stack_weights *w;
    v41_cache_cuda *c;
    float *h;
    const float *x;
    size_t T, from;
} v41_ced_job;

static int run_full_prefill(void *arg)
{
    const v41_ced_job *j = arg;
    v41_cache_reset_cuda(j->c);
    return v41_stack_prefill_cuda(j->h, NULL, j->s, j->w, j->c, j->x, j->T);
}

static int run_early_prefill(void *arg)
{
    const v41_ced_job *j = arg;
    v41_cache_reset_cuda(j->c);
    return v41_ced_prefill_cuda(j->h, j->s, j->w, j->c, j->x, j->T);
}

/* every layer replayed from `from` over the prompt's x (the same work at every repetition) */
static int run_replay(void *arg)
{
    const v41_ced_job *j = arg;
    const size_t n = j->T - j->from;
    const int rc = kvl_cuda_copy(j->h, j->x + j->from * j->s->d, n * j->s->d * sizeof(float));
    return rc == KVL_OK ? v41_stack_replay_layers_cuda(j->h, NULL, j->s, j->w, j->c, 0, j->s->n_layers, j->from) : rc;
}

static int v41_ced_stack(kvl_model *m, const sizes *s)
{
    if (s->smoke) return ch07_toy_narrow_model(m);
    const char *root = getenv("KVL_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/ref/configs/deepseek-v4.1-flash.json", root ? root : ".");
    return ch07_flash_small(m, path);
}

/* Rows: weights read once, two flops per weight per token (the products; the attention's own work is not
 * counted), so the rows' TFLOP/s compare as tokens/s do. */
static int bench_v41_ced_rows(table *t, const sizes *s, v41_ced_job *j, const v41_ced_work *full, const v41_ced_work *early)
{
    const size_t T = j->T, W = j->s->layers[0].core.window, L = j->s->n_layers;
    char shape[48];
    snprintf(shape, sizeof shape, "L %zu T %zu", L, T);
    row *r = add_row(t, "v41 prefill, every layer", shape, 4.0 * full->params, 2.0 * full->params * T, 0);
    int rc = time_row(t, r, run_full_prefill, j, s->reps);
    t->v41_ced_full_ms = r->ms;
    snprintf(shape, sizeof shape, "L %zu of %zu T %zu", early->layers, L, T);
    r = add_row(t, "v41 prefill, early exit (CED)", shape, 4.0 * early->params, 2.0 * early->params * T, 0);
    if (rc == KVL_OK) rc = time_row(t, r, run_early_prefill, j, s->reps);
    t->v41_ced_early_ms = r->ms;
    if (rc == KVL_OK) rc = run_full_prefill(j); /* the prompt cached, for the replays */
    j->from = v41_ced_bounded_replay_start(T, W);
    snprintf(shape, sizeof shape, "L %zu from %zu of %zu", L, j->from, T);
    r = add_row(t, "v41 replay step, last W tokens", shape, 4.0 * full->params, 2.0 * full->params * (T - j->from), 0);
    if (rc == KVL_OK) rc = time_row(t, r, run_replay, j, s->reps);
    return rc;
}

static int bench_v41_ced(table *t, const sizes *s)
{
    kvl_model m;
    v41_stack_config sc;
    v41_stack_weights hw = {0}, dw = {0};
    v41_cache_cuda c = {0};
    float *x = NULL, *h = NULL, *host = NULL;
    int rc = v41_ced_stack(&m, s);
    if (rc != KVL_OK) return rc;
    rc = v41_stack_config_from_model(&sc, &m);
    kvl_model_free(&m);
    if (rc != KVL_OK) return rc;
    const size_t T = s->v41_ced_T, d = sc.d;
    kvl_rng rng;
    kvl_rng_seed(&rng, 11);
    rc = v41_stack_weights_init_random(&hw, &sc, &rng);
    host = malloc(T * d * sizeof *host);
    if (rc == KVL_OK && !host) rc = kvl_fail(KVL_ENOMEM, "bench: out of memory");
    if (rc == KVL_OK) kvl_rng_normal_f32(&rng, host, T * d, 1.0);
    if (rc == KVL_OK) rc = v41_stack_weights_to_cuda(&dw, &hw, &sc);
    if (rc == KVL_OK) rc = v41_cache_init_cuda(&c, &sc, T, s->smoke ? V41_CUDA_F32 : V41_CUDA_NATIVE);
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&x, T * d * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_alloc((void **)&h, T * d * sizeof(float));
    if (rc == KVL_OK) rc = kvl_cuda_upload(x, host, T * d * sizeof(float));
    v41_ced_work full, early;
    v41_ced_prefill_work(&full, &early, &sc);
    v41_ced_job j = {&sc, &dw, &c, h, x, T, 0};
    if (rc == KVL_OK) rc = bench_v41_ced_rows(t, s, &j, &full, &early);
    t->v41_ced_layers = early.layers, t->v41_ced_of = full.layers;
    v41_cache_free_cuda(&c);
    v41_stack_weights_free_cuda(&dw);
    v41_stack_weights_free(&hw);
    v41_stack_config_free(&sc);
    kvl_cuda_free(x), kvl_cuda_free(h);
    free(host);
    return rc;
}

/* The groups of rows, in the order the table prints them. */
typedef struct {
    const char *name;
    int (*run)(table *t, const sizes *s);
} group;

/* The pipelined tensor-core kernel. Target 65% of the copy bandwidth; expected from cuda/mla_cuda.cuh's
 * arithmetic (bound by shared-memory bandwidth, 13,056 bytes per row): a ceiling of ~70% over bf16 rows
 * and ~40% over FP8 rows, ~50% and ~30% at the share of it eight warps sustain. FlashMLA's dense decode:
 * ~3,000 GB/s, 90% of an H800's. */
static int bench_mla_bf16_mma(table *t, const sizes *s)
{
    return bench_mla(t, s, KV_CUDA_BF16, mla_attend_absorbed_mma_cuda, "mla absorbed, bf16, tensor cores", MLA_TARGET);
}

static int bench_mla_fp8_mma(table *t, const sizes *s)
{
    return bench_mla(t, s, KV_CUDA_V32_MAIN, mla_attend_absorbed_mma_cuda, "mla absorbed, fp8, tensor cores",
                     MLA_TARGET);
}

static int bench_mla_bf16_float(table *t, const sizes *s)
{
    return bench_mla(t, s, KV_CUDA_BF16, mla_attend_absorbed_cuda, "mla absorbed, bf16, float kernel", 0);
}

static const group GROUPS[] = {
    {"quantisers", bench_quantisers}, {"row pack", bench_rows},       {"mla, bf16, tensor cores", bench_mla_bf16_mma},
    {"mla, fp8, tensor cores", bench_mla_fp8_mma}, {"mla, bf16, float", bench_mla_bf16_float},
    {"mha", bench_mha},               {"dsa", bench_dsa},             {"v4", bench_v4},
    {"v41", bench_v41},              {"v41 encoder-decoder", bench_v41_ced},
};

/* 0 with a device, 1 (saying so) without one, 2 (one line on stderr) when the runtime fails */
static int probe(void)
{
    const int n = kvl_cuda_device_count();
    if (n > 0) return 0;
    if (n == 0) {
        printf("bench_cuda: no CUDA device\n");
        return 1;
    }
    fprintf(stderr, "bench_cuda: %s\n", kvl_error());
    return 2;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    const int smoke = argc > 1 && strcmp(argv[1], "--smoke") == 0;
    if (argc > 1 && strcmp(argv[1], "--probe") == 0) return probe();
    const int found = probe();
    if (found != 0) return found == 1 ? 2 : found;
    const sizes *s = smoke ? &SMOKE : &FULL;
    table t = {.smoke = smoke};
    const char *gemm_what = "";
    int rc = kvl_cuda_copy_ceiling(&t.copy_gbps, s->copy_bytes, s->reps);
    if (rc == KVL_OK) rc = kvl_cuda_gemm_ceiling(&t.gemm_tflops, &gemm_what, s->gemm_n, s->reps);
    if (rc != KVL_OK) {
        fprintf(stderr, "bench_cuda: the ceilings: %s\n", kvl_error());
        return 2;
    }
    printf("bench_cuda on %s%s: copy %.4g GB/s (device-to-device, %zu MiB), %s %.4g TFLOP/s (n %zu)\n",
           kvl_cuda_device_name(), smoke ? " (smoke sizes: the speeds mean nothing)" : "", t.copy_gbps,
           s->copy_bytes >> 20, gemm_what, t.gemm_tflops, s->gemm_n);
    print_header();
    for (size_t g = 0; g < sizeof GROUPS / sizeof GROUPS[0]; g++) {
        const int failed = t.failed;
        if (GROUPS[g].run(&t, s) != KVL_OK && t.failed == failed) print_failed(&t, GROUPS[g].name);
    }
    if (t.topk_share > 0) {
        const int topk_ok = t.topk_share <= TOPK_SHARE;
        printf("bench_cuda: the dsa top-k takes %.4g of its indexer's time (target <=%.4g%s)\n", t.topk_share,
               TOPK_SHARE, smoke ? ", n/a at smoke sizes" : topk_ok ? ", ok" : ", BELOW");
        t.below += !smoke && !topk_ok;
    }
    if (t.v41_ced_full_ms > 0 && t.v41_ced_early_ms > 0)
        printf("bench_cuda: the v41 early-exit prefill (%zu of %zu layers attend) runs %.4gx the full prefill's "
               "tokens/s\n", t.v41_ced_layers, t.v41_ced_of, t.v41_ced_full_ms / t.v41_ced_early_ms);
    if (!smoke) printf("bench_cuda: %d row%s below target\n", t.below, t.below == 1 ? "" : "s");
    if (t.failed) printf("bench_cuda: %d row%s or groups failed\n", t.failed, t.failed == 1 ? "" : "s");
    return t.failed ? 2 : t.below ? 1 : 0;
}
