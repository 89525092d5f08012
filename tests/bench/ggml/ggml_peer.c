/* ggml_peer: llama.cpp's decode attention as a peer of the C step. ggml runs DeepSeek's MLA decode as
 * ggml_flash_attn_ext over the 576-wide latent rows of a 16-bit (f16) cache, the values a view of each
 * row's first 512 columns; the 67B's GQA as the same call over per-head f16 K and V. This program times
 * that call at both shapes, 1 query over T = 32K cached tokens:
 *
 *   V3 MLA   128 heads over one kv head, keys 576 wide, values their first 512 columns
 *   67B GQA  64 heads over 8 kv heads, keys and values 128 wide
 *
 * on 1 and 2 threads, against the C step (kvl_attend, the backend a program chooses) over the same
 * values as float32 rows, and over the same rows as bf16 (the C side's 16-bit cache: the same bytes a
 * row). Before it is timed, ggml's output is checked against the C step's over the same values (their
 * cosine, KVB_GGML_COSINE_GAP); one further off is printed as DIFFERS and has no target. Each row is a
 * peer row (bench.h): ggml's time over the C step's timed just before and just after it, KVB_PEER_ROUNDS
 * rounds, median and quartiles. `kvbench peer` runs this program where `make bench-ggml` built it, and
 * passes its rows on (lines that start "| " are the Markdown table's).
 *
 * ggml is built from the llama.cpp tree inside the llama-cpp-python source distribution (Makefile,
 * bench-ggml), for this CPU (GGML_NATIVE), with its OpenMP threads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attend.h"
#include "backend_cpu.h"
#include "bench.h"
#include "config.h"
#include "element.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "mla.h"
#include "rng.h"
#include "status.h"
#include "threads.h"
#include "timing.h"

#define PEER_T 32768

/* ggml's CPU flash attention rounds the query to f16 for its products with f16 keys and accumulates the
 * weighted values in an f16 sum, rounded at each of the T keys: over T = 32K keys those roundings (2^-12
 * of the sum each, as a random walk) come to √T · 2^-12 = 0.044 of it, and so of the output. Its output
 * is compared with the C step's by their cosine: a relative rms error up to 0.044 leaves 1 − cos ≤
 * 0.044²/2 = 1e-3, while values from the wrong columns read 1 − cos near 1 and a scale off by 2 about 1e-2.
 * The largest difference is no test here: the outputs are averages over 32K random values, small beside
 * the f16 sum's rounding. */
#define KVB_GGML_COSINE_GAP 1e-3

/* One shape: Hq query heads over Hkv kv heads, keys Dk wide, values Dv; mla: the values are the keys'
 * first Dv columns (one row a token), else each kv head has its own key and value. */
typedef struct {
    const char *step;
    size_t Hq, Hkv, Dk, Dv;
    int mla;
    float scale;
} shape;

/* A shape's inputs and both sides' steps. The cache holds f16 codes in ggml's layout: k[Hkv][T][Dk]
 * (and v[Hkv][T][Dv] for GQA). The C rows hold the same values: f32[T][stride], row t the kv heads' keys
 * then (GQA) their values, as ref/core/attend.h reads them; bf16 the same rows rounded to bf16. */
typedef struct {
    shape sh;
    size_t T, stride;
    float *q, *f32, *o_c, *o_g;
    uint16_t *bf16;
    kvl_row_tiles view;
    kvl_attend_rows rows;
    struct ggml_context *ctx;
    struct ggml_cgraph *graph;
    struct ggml_tensor *out;
    int threads;
} peer;

static void run_c(void *ctx)
{
    peer *p = ctx;
    (void)kvl_attend(p->o_c, p->q, p->sh.Hq, &p->view, &p->rows, p->sh.scale, NULL, NULL);
}

static void run_ggml(void *ctx)
{
    peer *p = ctx;
    (void)ggml_graph_compute_with_ctx(p->ctx, p->graph, p->threads);
}

/* ggml's tensors for p's shape, the cache filled with f16 codes of values uniform in [−1, 1), and the
 * C rows from the same codes; 1 when out of memory. */
static int peer_init(peer *p, const shape *sh, size_t T, kvl_rng *rng)
{
    *p = (peer){.sh = *sh, .T = T, .stride = sh->mla ? sh->Dk : sh->Hkv * (sh->Dk + sh->Dv), .threads = 1};
    const size_t kv_bytes = sh->Hkv * T * (sh->Dk + (sh->mla ? 0 : sh->Dv)) * sizeof(ggml_fp16_t);
    p->ctx = ggml_init((struct ggml_init_params){.mem_size = kv_bytes + sh->Hq * (sh->Dk + sh->Dv) * sizeof(float) +
                                                             ((size_t)64 << 20),
                                                 .mem_buffer = NULL, .no_alloc = false});
    p->q = kvb_random_floats(sh->Hq * sh->Dk, rng);
    p->f32 = malloc(T * p->stride * sizeof *p->f32);
    p->bf16 = malloc(T * p->stride * sizeof *p->bf16);
    p->o_c = malloc(sh->Hq * sh->Dv * sizeof *p->o_c);
    if (!p->ctx || !p->q || !p->f32 || !p->bf16 || !p->o_c) return 1;
    struct ggml_tensor *q = ggml_new_tensor_3d(p->ctx, GGML_TYPE_F32, (int64_t)sh->Dk, 1, (int64_t)sh->Hq);
    struct ggml_tensor *k = ggml_new_tensor_3d(p->ctx, GGML_TYPE_F16, (int64_t)sh->Dk, (int64_t)T, (int64_t)sh->Hkv);
    struct ggml_tensor *v = sh->mla ? ggml_view_3d(p->ctx, k, (int64_t)sh->Dv, (int64_t)T, (int64_t)sh->Hkv, k->nb[1],
                                                   k->nb[2], 0)
                                    : ggml_new_tensor_3d(p->ctx, GGML_TYPE_F16, (int64_t)sh->Dv, (int64_t)T,
                                                         (int64_t)sh->Hkv);
    memcpy(q->data, p->q, sh->Hq * sh->Dk * sizeof(float));
    float *row = malloc((sh->Dk > sh->Dv ? sh->Dk : sh->Dv) * sizeof *row);
    if (!row) return 1;
    for (size_t h = 0; h < sh->Hkv; h++)
        for (size_t t = 0; t < T; t++) {
            ggml_fp16_t *kc = (ggml_fp16_t *)k->data + (h * T + t) * sh->Dk;
            kvl_rng_uniform_f32(rng, row, sh->Dk, -1.0, 1.0);
            ggml_fp32_to_fp16_row(row, kc, (int64_t)sh->Dk);
            ggml_fp16_to_fp32_row(kc, p->f32 + t * p->stride + h * sh->Dk, (int64_t)sh->Dk);
            if (sh->mla) continue;
            ggml_fp16_t *vc = (ggml_fp16_t *)v->data + (h * T + t) * sh->Dv;
            kvl_rng_uniform_f32(rng, row, sh->Dv, -1.0, 1.0);
            ggml_fp32_to_fp16_row(row, vc, (int64_t)sh->Dv);
            ggml_fp16_to_fp32_row(vc, p->f32 + t * p->stride + sh->Hkv * sh->Dk + h * sh->Dv, (int64_t)sh->Dv);
        }
    free(row);
    kvf_bf16_encode_n(p->bf16, p->f32, T * p->stride);
    p->out = ggml_flash_attn_ext(p->ctx, q, k, v, NULL, sh->scale, 0.0f, 0.0f);
    p->graph = ggml_new_graph(p->ctx);
    ggml_build_forward_expand(p->graph, p->out);
    p->o_g = p->out->data; /* [Hq][Dv]: ggml's result is [Dv][Hq][1 query] */
    p->rows = (kvl_attend_rows){.N = T, .stride = p->stride, .k_off = 0, .Dk = sh->Dk,
                                .v_off = sh->mla ? 0 : sh->Hkv * sh->Dk, .Dv = sh->Dv, .groups = sh->Hkv};
    return 0;
}

static void peer_free(peer *p)
{
    if (p->ctx) ggml_free(p->ctx);
    free(p->q);
    free(p->f32);
    free(p->bf16);
    free(p->o_c);
}

/* 1 − the cosine of ggml's output and the C step's, after one run of each over the same values (C over
 * f32); NaN where either is all zeros or not finite. */
static double cosine_gap(peer *p)
{
    p->view = kvl_row_tiles_f32(p->f32, p->T, p->stride);
    run_c(p);
    run_ggml(p);
    double gc = 0, gg = 0, cc = 0;
    for (size_t i = 0; i < p->sh.Hq * p->sh.Dv; i++) {
        gc += (double)p->o_g[i] * p->o_c[i];
        gg += (double)p->o_g[i] * p->o_g[i];
        cc += (double)p->o_c[i] * p->o_c[i];
    }
    return gg > 0 && cc > 0 ? 1.0 - gc / sqrt(gg * cc) : NAN;
}

/* KVB_PEER_ROUNDS rounds of C, ggml, C (each the median of a few runs after a warm-up): the ratios of
 * ggml's time to the C time around it (kvb_peer_ratio); *c_s the median C time. */
static kvb_quartiles time_rounds(peer *p, double *c_s)
{
    double ratio[KVB_PEER_ROUNDS], c[KVB_PEER_ROUNDS];
    for (int r = 0; r < KVB_PEER_ROUNDS; r++) {
        const double before = kvb_median_seconds(run_c, p), g = kvb_median_seconds(run_ggml, p),
                     after = kvb_median_seconds(run_c, p);
        ratio[r] = kvb_peer_ratio(g, before, after);
        c[r] = 0.5 * (before + after);
    }
    *c_s = kvl_median(c, KVB_PEER_ROUNDS);
    return kvb_quartiles_of(ratio, KVB_PEER_ROUNDS);
}

/* One shape's rows: for each thread count, ggml against the C step over f32 and over bf16. */
static int peer_rows(const shape *sh, kvl_rng *rng)
{
    peer p;
    int rc = peer_init(&p, sh, PEER_T, rng);
    if (rc) {
        printf("peer: ggml %s: out of memory; its rows are skipped\n", sh->step);
        peer_free(&p);
        return 0;
    }
    const double gap = cosine_gap(&p);
    const int same = gap <= KVB_GGML_COSINE_GAP;
    for (int threads = 1; threads <= 2; threads++) {
        p.threads = threads;
        kvb_set_threads(threads);
        for (int bf16 = 0; bf16 <= 1; bf16++) {
            p.view = bf16 ? kvl_row_tiles_bf16(p.bf16, p.T, p.stride) : kvl_row_tiles_f32(p.f32, p.T, p.stride);
            kvb_progress("peer: ggml %s %dT against C over %s", sh->step, threads, bf16 ? "bf16" : "f32");
            double c_s;
            const kvb_quartiles r = time_rounds(&p, &c_s);
            char what[160];
            snprintf(what, sizeof what, "%s %zuK ggml f16/C %s %dT (%s: 1 - cos %.0e)", sh->step, p.T / 1024,
                     bf16 ? "bf16" : "f32", threads, same ? "same" : "DIFFERS", gap);
            const double mib = (double)(p.T * p.stride * (bf16 ? 2 : 4)) / KVB_MIB;
            kvb_print_peer_row("peer", what, mib, c_s, r, same ? KVB_PEER_TARGET : 0);
        }
    }
    peer_free(&p);
    return 0;
}

int main(void)
{
    kvl_model v3 = {0}, m67 = {0};
    mla_config c;
    if (kvb_load_config(&v3, "deepseek-v3.json") || kvb_load_config(&m67, "deepseek-llm-67b.json")) return 1;
    if (mla_config_from_model(&c, &v3) != KVL_OK) {
        fprintf(stderr, "ggml_peer: %s\n", kvl_error());
        return 1;
    }
    kvl_backend_choose();
    kvb_markdown = stdout;
    const size_t Dw = c.kv_lora_rank + c.qk_rope, Dh = m67.head_dim;
    const shape shapes[] = {
        {"V3 MLA absorbed", c.n_heads, 1, Dw, c.kv_lora_rank, 1, (float)c.softmax_scale},
        {"67B GQA", m67.n_heads, m67.n_kv_heads, Dh, Dh, 0, (float)(1.0 / sqrt((double)Dh))},
    };
    kvl_rng rng;
    kvl_rng_seed(&rng, 17);
    int rc = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0] && rc == 0; s++) rc = peer_rows(&shapes[s], &rng);
    kvl_model_free(&v3);
    kvl_model_free(&m67);
    return rc;
}
