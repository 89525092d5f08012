#include "serving.h"

#include <math.h>
#include <string.h>

#include "dsa.h"
#include "mla.h"
#include "status.h"

int kvl_deployment_check(const kvl_deployment *d, const kvl_model *m)
{
    if (d->gpus == 0) return kvl_fail(KVL_EINVAL, "deployment: gpus = 0: a node needs at least one GPU");
    if (d->page == 0) return kvl_fail(KVL_EINVAL, "deployment: page = 0: a page holds at least one entry");
    if (d->tp == 0) return kvl_fail(KVL_EINVAL, "deployment: tp = 0: at least one rank attends");
    if (d->gpus % d->tp)
        return kvl_fail(KVL_EINVAL, "deployment: tp = %zu does not divide gpus = %zu", d->tp, d->gpus);
    if (m->n_heads % d->tp)
        return kvl_fail(KVL_EINVAL, "deployment: tp = %zu does not divide n_heads = %zu of %s", d->tp, m->n_heads,
                        m->path);
    return KVL_OK;
}

size_t kvl_rank_kv_heads(size_t n_kv_heads, size_t tp)
{
    size_t h = (n_kv_heads + tp - 1) / tp;
    return h ? h : 1;
}

size_t kvl_paged_entries(size_t T, size_t M, size_t page)
{
    size_t entries = (T + M - 1) / M;
    return (entries + page - 1) / page * page;
}

/* One entry of `layer` on a rank: its main row, and its index key where it stores one. */
static size_t layer_entry_bytes(const kvl_model *m, const kvl_rank_cache *r, size_t layer)
{
    int keyed = r->index_key_bytes && kvl_layer_stores_index_key(m, layer);
    return r->main_row_bytes + (keyed ? r->index_key_bytes : 0);
}

int kvl_rank_cache_of(kvl_rank_cache *r, const kvl_model *m, const kvl_kv_footprint *f, const kvl_deployment *d)
{
    int rc = kvl_deployment_check(d, m);
    if (rc != KVL_OK) return rc;
    *r = (kvl_rank_cache){.main_row_bytes = f->main_row_bytes, .index_key_bytes = f->index_key_bytes,
                          .window_bytes_per_sequence = f->window_bytes_per_sequence,
                          .bounded_tokens = f->bounded_tokens,
                          .groups_per_node = d->dp_attention ? d->gpus : d->gpus / d->tp};
    if (m->generation == KVL_GEN_MHA || (m->kv_whole_heads && m->kv_cache == KVL_CACHE_BF16)) {
        /* main_row_bytes = Hkv · (Dk + Dv) · element bytes: a rank keeps its share of the heads */
        r->kv_heads = d->dp_attention ? m->n_kv_heads : kvl_rank_kv_heads(m->n_kv_heads, d->tp);
        r->main_row_bytes = f->main_row_bytes / m->n_kv_heads * r->kv_heads;
    }
    for (size_t i = 0; i < m->n_layers; i++) {
        const kvl_layer_kind k = m->layers[i].kind;
        r->kind_layers[k]++;
        if (!kvl_layer_writes_cache(m, i)) continue;
        const double b = (double)layer_entry_bytes(m, r, i) / (double)m->layers[i].compress_ratio;
        r->bytes_per_token += b;
        r->kind_bytes[k] += b;
    }
    r->draft_bytes_per_token = (double)(d->draft_layers * layer_entry_bytes(m, r, m->n_layers - 1));
    r->bytes_per_token += r->draft_bytes_per_token;
    return KVL_OK;
}

double kvl_rank_sequence_bytes(const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d, size_t T)
{
    double bytes = (double)r->window_bytes_per_sequence;
    size_t held = r->bounded_tokens && T > r->bounded_tokens ? r->bounded_tokens : T;
    for (size_t i = 0; i < m->n_layers; i++)
        if (kvl_layer_writes_cache(m, i))
            bytes += (double)kvl_paged_entries(held, m->layers[i].compress_ratio, d->page) *
                     (double)layer_entry_bytes(m, r, i);
    /* an MTP layer is shaped as the last backbone layer: one entry per token */
    return bytes + (double)d->draft_layers * (double)kvl_paged_entries(held, 1, d->page) *
                       (double)layer_entry_bytes(m, r, m->n_layers - 1);
}

double kvl_rank_window_bytes(const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d)
{
    return r->bounded_tokens ? kvl_rank_sequence_bytes(m, r, d, r->bounded_tokens)
                             : (double)r->window_bytes_per_sequence;
}

int kvl_fit_of(kvl_fit *out, const kvl_model *m, const kvl_rank_cache *r, const kvl_deployment *d, double budget,
               size_t T)
{
    if (!(budget >= (double)r->window_bytes_per_sequence) || !(budget > 0))
        return kvl_fail(KVL_EINVAL, "deployment: budget = %.0f bytes is below one sequence's window rows "
                        "(%zu bytes per GPU) of %s", budget, r->window_bytes_per_sequence, m->path);
    double g = (double)r->groups_per_node;
    out->sequence_bytes = kvl_rank_sequence_bytes(m, r, d, T);
    out->tokens_per_gpu = kvl_engine_pool_tokens(d, budget, r->bytes_per_token);
    out->tokens_per_node = out->tokens_per_gpu * g;
    out->sequences_per_gpu = out->sequence_bytes > 0 ? floor(budget / out->sequence_bytes) : 0;
    out->sequences_per_node = out->sequences_per_gpu * g;
    return KVL_OK;
}

static uint64_t share(uint64_t n, size_t k) { return n / k + (n % k != 0); }

double kvl_rank_weight_bytes(const kvl_params *p, const kvl_deployment *d, kvl_weight_format linear,
                             kvl_weight_format experts, int scale_e8m0)
{
    kvl_params r = {
        .embedding = share(p->embedding, d->tp),
        .head = share(p->head, d->tp),
        .norms = p->norms,
        .attention = d->dp_attention ? p->attention : share(p->attention, d->tp),
        .dense_ffn = share(p->dense_ffn, d->tp),
        .routed_experts = share(p->routed_experts, d->gpus),
        .shared_experts = share(p->shared_experts, d->gpus),
        .routers = p->routers,
    };
    return kvl_params_bytes(&r, linear, experts, scale_e8m0);
}

/* ---- engines ---------------------------------------------------------------------------------- */

static const char *const ENGINE_NAMES[] = {"plain", "vllm", "sglang"};
static const char *const GPU_NAMES[] = {"h100", "h200", "b200"};

const char *kvl_engine_name(kvl_engine e) { return ENGINE_NAMES[e]; }
const char *kvl_gpu_name(kvl_gpu g) { return GPU_NAMES[g]; }

static int index_of(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], name)) return i;
    return -1;
}

int kvl_engine_from_name(const char *name, kvl_engine *out)
{
    int i = index_of(ENGINE_NAMES, 3, name);
    if (i < 0) return KVL_EINVAL;
    *out = (kvl_engine)i;
    return KVL_OK;
}

int kvl_gpu_from_name(const char *name, kvl_gpu *out)
{
    int i = index_of(GPU_NAMES, 3, name);
    if (i < 0) return KVL_EINVAL;
    *out = (kvl_gpu)i;
    return KVL_OK;
}

/* nvidia-smi's memory.total of H100 SXM 80 GB, H200 141 GB and B200 192 GB, MiB (serving.h) */
double kvl_gpu_memory_mib(kvl_gpu g)
{
    static const double mib[] = {81559, 143771, 183359};
    return mib[g];
}

int kvl_gpu_sm_major(kvl_gpu g) { return g == KVL_GPU_B200 ? 10 : 9; }

/* SGLang's default for a DSA model's cache: fp8_e4m3 from SM 100, bf16 below
 * (ServerArgs._set_default_nsa_kv_cache_dtype); vLLM's "auto": the model's dtype, bf16. */
static kvl_cache_layout engine_default_layout(kvl_engine e, const kvl_model *m, int sm)
{
    if (e == KVL_ENGINE_SGLANG && m->generation == KVL_GEN_DSA && sm >= 10) return KVL_CACHE_V32_FP8;
    return KVL_CACHE_BF16;
}

int kvl_engine_cache_layout(kvl_cache_layout *out, kvl_engine e, const kvl_model *m, int sm, int asked)
{
    if (e == KVL_ENGINE_PLAIN) {
        *out = asked < 0 ? m->kv_cache : (kvl_cache_layout)asked;
        return KVL_OK;
    }
    const kvl_generation g = m->generation;
    if (g != KVL_GEN_MHA && g != KVL_GEN_MLA && g != KVL_GEN_DSA)
        return kvl_fail(KVL_EINVAL, "%s: --engine %s prices MHA, MLA and DSA models, not a %s model", m->path,
                        kvl_engine_name(e), kvl_generation_name(g));
    *out = asked < 0 ? engine_default_layout(e, m, sm) : (kvl_cache_layout)asked;
    /* the FP8 row each engine stores: dense for MLA, V3.2's sparse format for DSA, none for MHA here */
    const kvl_cache_layout fp8 = g == KVL_GEN_MLA ? KVL_CACHE_MLA_FP8 : KVL_CACHE_V32_FP8;
    if (*out == KVL_CACHE_BF16 || (g != KVL_GEN_MHA && *out == fp8)) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "%s: --engine %s does not store a %s model's cache as %s%s%s", m->path,
                    kvl_engine_name(e), kvl_generation_name(g), kvl_cache_layout_name(*out),
                    g == KVL_GEN_MHA ? "" : ": its FP8 row is ", g == KVL_GEN_MHA ? "" : kvl_cache_layout_name(fp8));
}

size_t kvl_engine_page(kvl_engine e, const kvl_model *m, int sm)
{
    const int mha = m->generation == KVL_GEN_MHA, dsa = m->generation == KVL_GEN_DSA;
    if (e == KVL_ENGINE_SGLANG) return dsa || (!mha && sm >= 10) ? 64 : 1;
    if (e == KVL_ENGINE_VLLM) return mha ? 16 : !dsa && sm >= 10 ? 128 : 64;
    return 0;
}

/* SGLang's chunked_prefill_size and decode CUDA graph max_bs for a capacity (MiB) of 60 GiB or more
 * (ServerArgs._handle_gpu_memory_settings; kvl_engine_budget_of refuses less): 8,192 and 512 below
 * 160 GiB (256 at tp < 4), 16,384 and 512 above. */
static void sglang_chunk_and_graph(double capacity_mib, size_t tp, double *chunk, double *max_bs)
{
    *chunk = capacity_mib < 160 * 1024 ? 8192 : 16384;
    *max_bs = capacity_mib < 160 * 1024 && tp < 4 ? 256 : 512;
}

/* Token counts SGLang captures prefill graphs at, up to max_tokens
 * (ServerArgs._generate_prefill_cuda_graph_batch_sizes): 4..32 by 4, 48..256 by 16, 288..512 by 32,
 * 576..1,024 by 64, 1,280..4,096 by 256, then by 512. */
static double sglang_prefill_graph_sizes(double max_tokens)
{
    static const double from[] = {4, 48, 288, 576, 1280, 4608}, to[] = {32, 256, 512, 1024, 4096, 1e18},
                        step[] = {4, 16, 32, 64, 256, 512};
    double n = 0;
    for (int i = 0; i < 6; i++) {
        const double last = fmin(to[i], max_tokens);
        if (last >= from[i]) n += floor((last - from[i]) / step[i]) + 1;
    }
    return n;
}

/* ServerArgs.reserve_for_graph_mb: the decode graphs, DP attention's padding, and the prefill graph:
 * 1,536 MiB for an MLA backend, else 8 MiB a captured size up to the chunk */
static double sglang_graph_mib(double max_bs, double chunk, int dp_attention, size_t dp, int mla)
{
    double mib = max_bs * 2;
    if (dp_attention) mib += max_bs * (double)dp * (3 + (max_bs > 300 ? 1.5 : 0));
    return mib + (mla ? 1.5 * 1024 : 8 * sglang_prefill_graph_sizes(chunk));
}

double kvl_sglang_reserved_mib(double capacity_mib, size_t tp, int dp_attention, size_t dp, int mla)
{
    double chunk, max_bs;
    sglang_chunk_and_graph(capacity_mib, tp, &chunk, &max_bs);
    double mib = 512 + 1.5 * fmax(chunk, 2048) + (double)tp / 8 * 1024 +
                 sglang_graph_mib(max_bs, chunk, dp_attention, dp, mla);
    return capacity_mib > 60 * 1024 ? fmax(mib, 10 * 1024) : mib;
}

double kvl_sglang_mem_fraction(double capacity_mib, double reserved_mib)
{
    return round((capacity_mib - reserved_mib) / capacity_mib * 1000) / 1000;
}

#define VLLM_GPU_MEMORY_UTILIZATION 0.9   /* vllm/config/cache.py CacheConfig's default */
#define MIB 1048576.0

int kvl_engine_budget_of(kvl_engine_budget *out, const kvl_deployment *d, double capacity_mib, double weights,
                         double activation_peak, double activations, int mla)
{
    const double capacity = capacity_mib * MIB;
    *out = (kvl_engine_budget){0};
    if (d->engine == KVL_ENGINE_SGLANG && capacity_mib < 60 * 1024)
        return kvl_fail(KVL_EINVAL, "--engine sglang: %.0f MiB: below 60 GiB SGLang takes smaller chunks and "
                        "graphs, which this project does not price", capacity_mib);
    if (d->engine == KVL_ENGINE_SGLANG) {
        out->reserved_mib = kvl_sglang_reserved_mib(capacity_mib, d->gpus, d->dp_attention, d->gpus, mla);
        out->fraction = kvl_sglang_mem_fraction(capacity_mib, out->reserved_mib);
        out->cache_bytes = capacity * out->fraction - weights;
    } else if (d->engine == KVL_ENGINE_VLLM) {
        out->fraction = VLLM_GPU_MEMORY_UTILIZATION;
        out->cache_bytes = capacity * out->fraction - weights - activation_peak;
    } else {
        out->fraction = 1 - activations;
        out->cache_bytes = capacity * out->fraction - weights;
    }
    if (out->cache_bytes > 0) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "--engine %s: %.0f MiB at fraction %.3f leave no cache beside %.0f MiB of weights%s",
                    kvl_engine_name(d->engine), capacity_mib, out->fraction, weights / MIB,
                    d->engine == KVL_ENGINE_VLLM ? " and the profiled peak" : "");
}

double kvl_engine_pool_tokens(const kvl_deployment *d, double budget, double bytes_per_token)
{
    if (!(bytes_per_token > 0)) return 0;
    double tokens = floor(budget / bytes_per_token);
    return d->engine == KVL_ENGINE_PLAIN ? tokens : floor(tokens / (double)d->page) * (double)d->page;
}

/* The fused q_a / kv_a projection of an MLA/DSA model: d · (Dq' + Dc + Dr) weights a layer (V2-Lite,
 * without q_a, d · (Dc + Dr)). */
static uint64_t fused_a_projection(const kvl_model *m)
{
    if (m->generation != KVL_GEN_MLA && m->generation != KVL_GEN_DSA) return 0;
    return (uint64_t)m->n_layers * m->d * (m->q_lora_rank + m->kv_lora_rank + m->qk_rope_head_dim);
}

/* A DSA model's indexers, every layer's: the weights ref/dsa.h sizes past MLA's (w_iq, w_ik, the key's
 * LayerNorm, w_iw). kvl_params_of already sized them for this model, so neither size can fail here. */
static uint64_t dsa_indexers(const kvl_model *m)
{
    dsa_config c;
    size_t all = 0, mla = 0;
    if (m->generation != KVL_GEN_DSA || dsa_config_from_model(&c, m) != KVL_OK ||
        dsa_weights_size(&all, &c) != KVL_OK || mla_weights_size(&mla, &c.mla) != KVL_OK)
        return 0;
    return (uint64_t)m->n_layers * (all - mla);
}

/* The attention weights both engines keep whole on every rank: the fused projection and the indexers. */
static uint64_t whole_attention(const kvl_model *m) { return fused_a_projection(m) + dsa_indexers(m); }

/* The MTP modules as parameters: n layers shaped as the last (MoE layers), and the rest of their own
 * count (projections 2d·d, norms) in norms, kept whole on every rank. */
static kvl_params mtp_module(const kvl_params *p, const kvl_model *m)
{
    const uint64_t n = m->ffn.n_mtp_layers, moe_layers = m->n_layers - m->ffn.n_dense_layers;
    kvl_params l = {.attention = p->attention / m->n_layers * n,
                    .routed_experts = moe_layers ? p->routed_experts / moe_layers * n : 0,
                    .shared_experts = moe_layers ? p->shared_experts / moe_layers * n : 0,
                    .routers = moe_layers ? p->routers / moe_layers * n : 0};
    const uint64_t layers = l.attention + l.routed_experts + l.shared_experts + l.routers;
    l.norms = p->mtp > layers ? p->mtp - layers : 0;
    return l;
}

/* One rank's share of p as d->engine lays it out: the plain split, but the `fused` weights of the
 * attention count (whole_attention) whole, and under DP attention SGLang's embedding, or everything but
 * the routed experts on vLLM's tp-1 ranks, whole. */
static kvl_params engine_share(const kvl_params *p, uint64_t fused, const kvl_deployment *d)
{
    kvl_params r = {
        .embedding = share(p->embedding, d->tp),
        .head = share(p->head, d->tp),
        .norms = p->norms,
        .attention = d->dp_attention ? p->attention : share(p->attention - fused, d->tp) + fused,
        .dense_ffn = share(p->dense_ffn, d->tp),
        .routed_experts = share(p->routed_experts, d->gpus),
        .shared_experts = share(p->shared_experts, d->gpus),
        .routers = p->routers,
    };
    if (d->dp_attention && d->engine == KVL_ENGINE_SGLANG) r.embedding = p->embedding;
    if (d->dp_attention && d->engine == KVL_ENGINE_VLLM) {
        /* tp 1: only FusedMoE's expert parallelism over dp spreads anything, the routed experts */
        r.embedding = p->embedding, r.head = p->head, r.dense_ffn = p->dense_ffn;
        r.shared_experts = p->shared_experts;
    }
    return r;
}

double kvl_engine_weight_bytes(const kvl_params *p, const kvl_model *m, const kvl_deployment *d,
                               kvl_weight_format linear, kvl_weight_format experts, int scale_e8m0)
{
    const kvl_params laid_out = engine_share(p, whole_attention(m), d);
    const double bytes = d->engine == KVL_ENGINE_PLAIN ? kvl_rank_weight_bytes(p, d, linear, experts, scale_e8m0)
                                                       : kvl_params_bytes(&laid_out, linear, experts, scale_e8m0);
    if (!d->draft_layers) return bytes;
    const kvl_params mtp = mtp_module(p, m);
    if (d->engine == KVL_ENGINE_PLAIN) return bytes + kvl_rank_weight_bytes(&mtp, d, linear, experts, scale_e8m0);
    const kvl_params r = engine_share(&mtp, whole_attention(m) / m->n_layers * d->draft_layers, d);
    return bytes + kvl_params_bytes(&r, linear, experts, scale_e8m0);
}
