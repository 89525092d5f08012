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

static int engine_v4_rank(kvl_rank_cache *r, const kvl_model *m, const kvl_deployment *d);

/* V4 and V4.1 under vLLM or SGLang: priced by the engine's own pools, not by the rules of this
 * project */
static int engine_v4(const kvl_model *m, const kvl_deployment *d)
{
    return d->engine != KVL_ENGINE_PLAIN && (m->generation == KVL_GEN_V4 || m->generation == KVL_GEN_V41);
}

int kvl_rank_cache_of(kvl_rank_cache *r, const kvl_model *m, const kvl_kv_footprint *f, const kvl_deployment *d)
{
    int rc = kvl_deployment_check(d, m);
    if (rc != KVL_OK) return rc;
    *r = (kvl_rank_cache){.main_row_bytes = f->main_row_bytes, .index_key_bytes = f->index_key_bytes,
                          .window_bytes_per_sequence = f->window_bytes_per_sequence,
                          .bounded_tokens = f->bounded_tokens,
                          .groups_per_node = d->dp_attention ? d->gpus : d->gpus / d->tp,
                          .cache = m->kv_cache};
    if (engine_v4(m, d)) return engine_v4_rank(r, m, d);
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
    /* an engine's V4 pool: whole blocks of tokens at its per-token bytes, and its window blocks */
    if (engine_v4(m, d))
        return (double)kvl_paged_entries(T, 1, d->page) * r->bytes_per_token + (double)r->window_bytes_per_sequence;
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
    if (!(budget > r->pool_fixed_bytes))
        return kvl_fail(KVL_EINVAL, "deployment: budget = %.0f bytes leaves nothing beside the %.0f bytes the "
                        "engine sets aside before its pool (state rows, window slots) for %s", budget,
                        r->pool_fixed_bytes, m->path);
    budget -= r->pool_fixed_bytes;
    if (!(budget >= (double)r->window_bytes_per_sequence) || !(budget > 0))
        return kvl_fail(KVL_EINVAL, "deployment: budget = %.0f bytes is below one sequence's window rows "
                        "(%zu bytes per GPU) of %s", budget, r->window_bytes_per_sequence, m->path);
    double g = (double)r->groups_per_node;
    out->sequence_bytes = kvl_rank_sequence_bytes(m, r, d, T);
    out->tokens_per_gpu = kvl_engine_pool_tokens(d, budget, r->bytes_per_token);
    out->tokens_per_node = out->tokens_per_gpu * g;
    out->sequences_per_gpu = out->sequence_bytes > 0 ? floor(budget / out->sequence_bytes) : 0;
    if (r->running && out->sequences_per_gpu > (double)r->running) out->sequences_per_gpu = (double)r->running;
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

/* Tokens of one block of an engine's V4 pool: vLLM's V4 FlashMLA kernel takes blocks of 256
 * (DeepseekV4FlashMLASparseBackend.get_supported_kernel_block_sizes), SGLang sets page_size 256 for
 * its dsv4 backend (apply_deepseek_v4_defaults). */
#define V4_BLOCK_TOKENS 256

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

/* The compress ratios an engine's pools take: V4's 0, 4 and 128 (vLLM's CompressorStateCache and
 * SGLang's get_compress_state_ring_size take no other), V4.1's 0, 1 and 2 (vLLM's
 * DeepseekV4Attention refuses any other). KVL_EINVAL naming the layer otherwise. */
static int engine_ratios_check(const kvl_model *m, kvl_engine e)
{
    const int v41 = m->generation == KVL_GEN_V41;
    const size_t a = v41 ? 1 : 4, b = v41 ? 2 : 128;
    for (size_t i = 0; i < m->n_layers; i++) {
        const size_t M = m->layers[i].compress_ratio;
        if (M != 0 && M != a && M != b)
            return kvl_fail(KVL_EINVAL, "%s: --engine %s: layer %zu compresses %zu tokens an entry; the engine's "
                            "%s pools take ratios 0, %zu and %zu", m->path, kvl_engine_name(e), i, M,
                            kvl_generation_name(m->generation), a, b);
    }
    return KVL_OK;
}

/* The records an engine stores a V4 or V4.1 model in on SM major `sm`. Both engines store V4's rows
 * one way, FP8 with UE8M0 scales (v4-fp8). vLLM 0.34.0 stores V4.1's entries in that same 584-byte
 * record below SM 100, and from SM 100 mega attention's: 288-byte NVFP4 compressed entries beside
 * 528-byte MXFP8 window rows (vllm/models/deepseek_v41/attention.py, DeepseekV4Attention.__init__:
 * the V4.1 records only where _use_v41_mxfp8_kv_record, SM 10x; an unspecific --kv-cache-dtype
 * resolves to the layer's packed_kv_cache_dtype, nvfp4_ds_mla for DeepseekV4MegaAttnAttention),
 * v41-fp4's main and window rows. SGLang stores V4's record but under DP attention on SM 100,
 * where its rank takes V4.1's own (sglang_v41_layouts). */
static kvl_cache_layout engine_v4_row(kvl_engine e, const kvl_model *m, int sm)
{
    const int mega = e == KVL_ENGINE_VLLM && m->generation == KVL_GEN_V41 && sm >= 10;
    return mega ? KVL_CACHE_V41_FP4 : KVL_CACHE_V4_FP8;
}

static int engine_v4_layout(kvl_cache_layout *out, kvl_engine e, const kvl_model *m, int sm, int asked)
{
    if (engine_ratios_check(m, e) != KVL_OK) return KVL_EINVAL;
    const kvl_cache_layout row = engine_v4_row(e, m, sm);
    *out = asked < 0 ? row : (kvl_cache_layout)asked;
    if (*out == row) return KVL_OK;
    const int sglang_v41 = e == KVL_ENGINE_SGLANG && m->generation == KVL_GEN_V41;
    return kvl_fail(KVL_EINVAL, "%s: --engine %s does not store a %s model's cache as %s on SM %d: its row is %s%s",
                    m->path, kvl_engine_name(e), kvl_generation_name(m->generation), kvl_cache_layout_name(*out),
                    sm * 10, kvl_cache_layout_name(row),
                    sglang_v41 ? ", and v41-fp4 under DP attention on SM 100, by its own choice" : "");
}

int kvl_engine_cache_layout(kvl_cache_layout *out, kvl_engine e, const kvl_model *m, int sm, int asked)
{
    if (e == KVL_ENGINE_PLAIN) {
        *out = asked < 0 ? m->kv_cache : (kvl_cache_layout)asked;
        return KVL_OK;
    }
    const kvl_generation g = m->generation;
    if (g == KVL_GEN_V4 || g == KVL_GEN_V41) return engine_v4_layout(out, e, m, sm, asked);
    *out = asked < 0 ? engine_default_layout(e, m, sm) : (kvl_cache_layout)asked;
    /* the FP8 row each engine stores: dense for MLA, V3.2's sparse format for DSA, none for MHA here */
    const kvl_cache_layout fp8 = g == KVL_GEN_MLA ? KVL_CACHE_MLA_FP8 : KVL_CACHE_V32_FP8;
    if (*out == KVL_CACHE_BF16 || (g != KVL_GEN_MHA && *out == fp8)) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "%s: --engine %s does not store a %s model's cache as %s%s%s", m->path,
                    kvl_engine_name(e), kvl_generation_name(g), kvl_cache_layout_name(*out),
                    g == KVL_GEN_MHA ? "" : ": its FP8 row is ", g == KVL_GEN_MHA ? "" : kvl_cache_layout_name(fp8));
}

static size_t vllm_v41_block_tokens(int sm);

size_t kvl_engine_page(kvl_engine e, const kvl_model *m, int sm)
{
    const int mha = m->generation == KVL_GEN_MHA, dsa = m->generation == KVL_GEN_DSA;
    if (e == KVL_ENGINE_VLLM && m->generation == KVL_GEN_V41) return vllm_v41_block_tokens(sm);
    if (e != KVL_ENGINE_PLAIN && m->generation >= KVL_GEN_V4) return V4_BLOCK_TOKENS;
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

kvl_sglang_prefill_graph kvl_sglang_prefill_graph_of(const kvl_model *m)
{
    if (m->generation == KVL_GEN_V4 || m->generation == KVL_GEN_V41) return KVL_SGLANG_PREFILL_GRAPH_NONE;
    return m->generation == KVL_GEN_MHA ? KVL_SGLANG_PREFILL_GRAPH_SIZES : KVL_SGLANG_PREFILL_GRAPH_MLA;
}

/* reserve_for_graph_mb: the decode graphs, DP attention's padding, and the prefill graph g */
static double sglang_graph_mib(double max_bs, double chunk, int dp_attention, size_t dp, kvl_sglang_prefill_graph g)
{
    static const double mla_prefill_mib = 1.5 * 1024;
    double mib = max_bs * 2;
    if (dp_attention) mib += max_bs * (double)dp * (3 + (max_bs > 300 ? 1.5 : 0));
    if (g == KVL_SGLANG_PREFILL_GRAPH_SIZES) mib += 8 * sglang_prefill_graph_sizes(chunk);
    if (g == KVL_SGLANG_PREFILL_GRAPH_MLA) mib += mla_prefill_mib;
    return mib;
}

double kvl_sglang_reserved_mib(double capacity_mib, size_t tp, int dp_attention, size_t dp,
                               kvl_sglang_prefill_graph g)
{
    double chunk, max_bs;
    sglang_chunk_and_graph(capacity_mib, tp, &chunk, &max_bs);
    double mib = 512 + 1.5 * fmax(chunk, 2048) + (double)tp / 8 * 1024 +
                 sglang_graph_mib(max_bs, chunk, dp_attention, dp, g);
    return capacity_mib > 60 * 1024 ? fmax(mib, 10 * 1024) : mib;
}

double kvl_sglang_mem_fraction(double capacity_mib, double reserved_mib)
{
    return round((capacity_mib - reserved_mib) / capacity_mib * 1000) / 1000;
}

#define VLLM_GPU_MEMORY_UTILIZATION 0.9   /* vllm/config/cache.py CacheConfig's default */
#define MIB 1048576.0

int kvl_engine_budget_of(kvl_engine_budget *out, const kvl_deployment *d, double capacity_mib, double weights,
                         double activation_peak, double activations, kvl_sglang_prefill_graph g)
{
    const double capacity = capacity_mib * MIB;
    *out = (kvl_engine_budget){0};
    if (d->engine == KVL_ENGINE_SGLANG && capacity_mib < 60 * 1024)
        return kvl_fail(KVL_EINVAL, "--engine sglang: %.0f MiB: below 60 GiB SGLang takes smaller chunks and "
                        "graphs, which this project does not price", capacity_mib);
    if (d->engine == KVL_ENGINE_SGLANG) {
        out->reserved_mib = kvl_sglang_reserved_mib(capacity_mib, d->gpus, d->dp_attention, d->gpus, g);
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
 * without q_a, d · (Dc + Dr)); V4's wq_a and wkv, d · (Dq' + Dh) (vLLM's fused_wqa_wkv with
 * disable_tp, SGLang's ReplicatedLinear wq_a and wkv). */
static uint64_t fused_a_projection(const kvl_model *m)
{
    if (m->generation == KVL_GEN_V4 || m->generation == KVL_GEN_V41)
        return (uint64_t)m->n_layers * m->d * (m->q_lora_rank + m->head_dim);
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

/* ---- V4 under the engines --------------------------------------------------------------------- */

#define V4_PAGE_ALIGN 576     /* FlashMLA's page alignment, bytes (vLLM's alignment=576, SGLang's pads) */
#define V4_STATE_BYTES 4      /* compressor states in float32 (CompressorStateCache, SGLang's default) */
#define SGLANG_V4_SWA_RATIO 0.1       /* swa_full_tokens_ratio as SGLang sets it for V4 */
#define SGLANG_V4_RUNNING 256         /* max_running_requests as SGLang sets it for V4 and V4.1 */
/* get_compress_state_ring_size: the C4 and C128 state rings, doubled under speculation */
static size_t sglang_v4_ring(size_t ratio, int speculative) { return (ratio == 4 ? 8 : 128) << (speculative != 0); }

static size_t round_up(size_t n, size_t k) { return (n + k - 1) / k * k; }
static size_t cdiv(size_t n, size_t k) { return (n + k - 1) / k; }

size_t kvl_v4_engine_row_bytes(const kvl_model *m)
{
    const size_t nope = m->head_dim - m->qk_rope_head_dim;
    return nope + 2 * m->qk_rope_head_dim + nope / 64 + 1;
}

size_t kvl_v4_engine_index_key_bytes(const kvl_model *m) { return m->index_head_dim + m->index_head_dim / 128 * 4; }

/* V4.1's own records, both engines' from SM 100: the window's MXFP8 (head_dim E4M3 bytes and a UE8M0
 * scale per 32: 528 B) and the compressed entry's FP4 (E2M1 pairs and an E4M3 scale per 16: 288 B) */
static size_t v41_engine_window_bytes(const kvl_model *m) { return m->head_dim + m->head_dim / 32; }
static size_t v41_engine_compressed_bytes(const kvl_model *m) { return m->head_dim / 2 + m->head_dim / 16; }

/* One of SGLang's DSV4 paged layouts (KVLayout, kernels/ops/attention/dsv4/kv_layout.py, SGLang 0.5.23): bytes a
 * token, and the alignment a page of tokens is padded to (page_bytes). */
typedef struct {
    size_t bytes, align;
} sglang_kv_layout;

/* KVLayout.page_bytes(n) / n: one token's share of a padded page of n tokens */
static double sglang_token_bytes(sglang_kv_layout l, size_t n)
{
    return (double)round_up(n * l.bytes, l.align) / (double)n;
}

/* KVLayout.V4: V4's 584-byte record, pages padded to 576 B */
static sglang_kv_layout sglang_v4_layout(const kvl_model *m)
{
    return (sglang_kv_layout){kvl_v4_engine_row_bytes(m), V4_PAGE_ALIGN};
}


/* Layers compressing 4 and 128 tokens an entry (CSA, HCA). */
static void v4_ratio_layers(const kvl_model *m, size_t *c4, size_t *c128)
{
    *c4 = *c128 = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        *c4 += m->layers[i].compress_ratio == 4;
        *c128 += m->layers[i].compress_ratio == 128;
    }
}

/* One of vLLM's buckets of cache layers that need the same token slots: up to four page sizes,
 * the layers of each, the tokens a block covers and what a sequence holds: every token's blocks
 * (full), the blocks its last `window` tokens span, or one block (ring). */
typedef struct {
    size_t page[4], layers[4];
    int sizes;
    size_t block_tokens, window;
    int full, ring;
} vllm_bucket;

/* n layers of `bytes` a block, padded to `align` bytes (FlashMLA's 576); equal pages share a size */
static void bucket_add(vllm_bucket *b, size_t bytes, size_t n, size_t align)
{
    if (!n) return;
    const size_t page = round_up(bytes, align);
    for (int i = 0; i < b->sizes; i++)
        if (b->page[i] == page) {
            b->layers[i] += n;
            return;
        }
    b->page[b->sizes] = page;
    b->layers[b->sizes++] = n;
}

static size_t bucket_max_layers(const vllm_bucket *b)
{
    size_t n = 0;
    for (int i = 0; i < b->sizes; i++) n = b->layers[i] > n ? b->layers[i] : n;
    return n;
}

/* every page size holds as many layers: the bucket repeats one layer of each */
static int bucket_balanced(const vllm_bucket *b)
{
    for (int i = 1; i < b->sizes; i++)
        if (b->layers[i] != b->layers[0]) return 0;
    return b->sizes > 0;
}

/* kv_cache_planning._approximate_gcd: the d >= lower that pads the counts least, ties to the larger */
static size_t approximate_gcd(const size_t *x, int n, size_t lower)
{
    size_t max = 0, best = lower ? lower : 1, best_pad = (size_t)-1;
    for (int i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    for (size_t d = best; d <= max; d++) {
        size_t pad = 0;
        for (int i = 0; i < n; i++) pad += (d - x[i] % d) % d;
        if (pad < best_pad || (pad == best_pad && d > best)) best_pad = pad, best = d;
    }
    return best;
}

/* V4's four buckets in vLLM: the compressed layers (CSA main rows and index keys, HCA main rows,
 * 256-token blocks); every layer's window (DeepseekV4SWACache, 64-token blocks of whole rows, window W),
 * an MTP draft layer's too (DeepseekV4Attention gives the layer past the backbone ratio 1: window only);
 * the CSA compressors' states (main and indexer, 4-token blocks, window 8); the HCA compressors'
 * states (8-token blocks, window 128). A compressor state row holds kv and score, twice over for
 * the overlapping CSA: 2 · coff · head_dim float32 values. */
static int vllm_v4_buckets(vllm_bucket *b, const kvl_model *m, size_t draft_layers)
{
    size_t c4, c128;
    v4_ratio_layers(m, &c4, &c128);
    const size_t row = kvl_v4_engine_row_bytes(m), key = kvl_v4_engine_index_key_bytes(m);
    const size_t head = m->head_dim, index_head = m->index_head_dim;
    b[0] = (vllm_bucket){.block_tokens = V4_BLOCK_TOKENS, .full = 1};
    bucket_add(&b[0], V4_BLOCK_TOKENS / 4 * row, c4, V4_PAGE_ALIGN);
    bucket_add(&b[0], V4_BLOCK_TOKENS / 4 * key, c4, V4_PAGE_ALIGN);
    bucket_add(&b[0], V4_BLOCK_TOKENS / 128 * row, c128, V4_PAGE_ALIGN);
    b[1] = (vllm_bucket){.block_tokens = 64, .window = m->window};
    bucket_add(&b[1], 64 * row, m->n_layers + draft_layers, V4_PAGE_ALIGN);
    b[2] = (vllm_bucket){.block_tokens = 4, .window = 2 * 4};
    bucket_add(&b[2], 4 * 2 * 2 * head * V4_STATE_BYTES, c4, V4_PAGE_ALIGN);
    bucket_add(&b[2], 4 * 2 * 2 * index_head * V4_STATE_BYTES, c4, V4_PAGE_ALIGN);
    b[3] = (vllm_bucket){.block_tokens = 8, .window = 128};
    bucket_add(&b[3], 8 * 2 * head * V4_STATE_BYTES, c128, V4_PAGE_ALIGN);
    return 4;
}

/* vLLM 0.34.0's V4.1 records and blocks on one GPU generation, each from the spec that declares it:
 *  - block_tokens: the cache block, in tokens, of every compressed layer and index key
 *    (MLAAttentionSpec block_size = CacheConfig.block_size). Platform.update_block_size_for_backend
 *    (vllm/platforms/interface.py) keeps the default 64 where every backend takes it, else the
 *    least common kernel block: the V4.1 FlashMLA backend's and the V4.1 indexer's are 64 tokens on
 *    SM 90 and 128 from SM 100 (DeepseekV4SparseMLABackend and DeepseekV41IndexerBackend
 *    .get_supported_kernel_block_sizes), mega attention's 128 (FlashMLAMegaAttnBackend), the window
 *    cache's any multiple of 32, the compressor's any: 64 on Hopper, 128 on SM 100. A ratio-M source
 *    keeps block_tokens / M records a block (AttentionSpec.num_states with tokens_per_state = M).
 *  - compressed, window: one record's bytes (DeepseekV4Attention.__init__, compressed_bytes_per_token
 *    and swa_bytes_per_token; vllm/models/deepseek_v41/attention.py): V4's 584 on Hopper; on SM 100
 *    the NVFP4 compressed record, 512 e2m1 values in 256 B and an E4M3 scale per 16, 288 B, and the
 *    MXFP8 window record, 512 E4M3 values and a UE8M0 scale per 32, 528 B.
 *  - align: every page rounded up to it (kv_page_alignment, and DeepseekV4IndexerCache
 *    .get_kv_cache_spec's page_alignment): 576 on Hopper, 512 on SM 100.
 *  - stride_align: the block rounded up to the lcm of every spec's block_stride_alignment
 *    (vllm/v1/core/kv_cache_planning.py, _get_kv_cache_bytes_per_block): none on Hopper; on SM 100
 *    the window's lcm(528, 288) (FlashMLA reads both records as rows of one cache) and the index
 *    keys' 256 (DeepGEMM's paged sparse logits, on by default on SM 100 for a model with candidate
 *    blocks: _indexer_sparse_logits_supported, vllm/model_executor/models/config.py, with the
 *    DeepGEMM and DeepSelect kernels the wheel ships). */
typedef struct {
    size_t block_tokens, compressed, window, align, stride_align;
} vllm_v41_records;

#define V41_WINDOW_BLOCK 32   /* DeepseekV4Attention's DeepseekV4SWACache block_size */
#define V41_RING_ROWS 8       /* CompressorStateCache: drafts + bonus + previous row, a power of two >= 8 */
#define V41_SPARSE_LOGITS_STRIDE 256   /* DeepseekV4IndexerCache's block_stride_alignment with sparse logits */

static size_t gcd(size_t a, size_t b) { return b ? gcd(b, a % b) : a; }
static size_t lcm(size_t a, size_t b) { return a / gcd(a, b) * b; }

static size_t vllm_v41_block_tokens(int sm) { return sm >= 10 ? 128 : 64; }

/* The records vLLM stores for m in the layout engine_v4_row gave it: v41-fp4 on SM 100 only. */
static vllm_v41_records vllm_v41_records_of(const kvl_model *m)
{
    if (m->kv_cache != KVL_CACHE_V41_FP4)
        return (vllm_v41_records){.block_tokens = vllm_v41_block_tokens(9), .compressed = kvl_v4_engine_row_bytes(m),
                                  .window = kvl_v4_engine_row_bytes(m), .align = V4_PAGE_ALIGN, .stride_align = 1};
    const size_t compressed = v41_engine_compressed_bytes(m), window = v41_engine_window_bytes(m);
    return (vllm_v41_records){.block_tokens = vllm_v41_block_tokens(10), .compressed = compressed, .window = window,
                              .align = 512,
                              .stride_align = lcm(lcm(window, compressed), V41_SPARSE_LOGITS_STRIDE)};
}

/* V4.1's KV sources (layers writing their own compressed entries) of ratio M, and those of them
 * that own index keys: the sources that are index sources too (DeepseekV4Attention builds the
 * indexer's key cache only there). */
static void v41_sources(const kvl_model *m, size_t M, size_t *sources, size_t *keyed)
{
    *sources = *keyed = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        const kvl_layer *l = &m->layers[i];
        if (!kvl_layer_writes_cache(m, i) || l->compress_ratio != M) continue;
        (*sources)++;
        *keyed += l->index_source == (int)i;
    }
}

/* V4.1's buckets in vLLM 0.34.0 (r: vllm_v41_records_of). One bucket of every source's compressed
 * records and index keys: MLAAttentionSpecs of one block size, all FullAttentionSpecs to
 * UniformTypeKVCacheSpecs.is_uniform_type (vllm/v1/kv_cache_interface.py) whatever their
 * tokens_per_state, a ratio-M source's page block_tokens / M records (keys of 132 B, FP8: the
 * indexer's "auto" dtype, dsa_indexer_uses_fp4) padded to align. Every backbone layer's window
 * (DeepseekV4SWACache's SlidingWindowMLASpec, 32-token blocks of window records, pages padded to
 * align). The ratio-2 sources' compressor states (CompressorStateCache's CircularBufferSpec: rings
 * of 8 rows of kv and score, 2 · head_dim float32, no alignment;
 * vllm/models/deepseek_v41/compressor.py). */
static int vllm_v41_buckets(vllm_bucket *b, const kvl_model *m, size_t *stride_align)
{
    const vllm_v41_records r = vllm_v41_records_of(m);
    const size_t key = kvl_v4_engine_index_key_bytes(m);
    *stride_align = r.stride_align;
    b[0] = (vllm_bucket){.block_tokens = r.block_tokens, .full = 1};
    for (size_t M = 2; M >= 1; M--) {
        size_t sources, keyed;
        v41_sources(m, M, &sources, &keyed);
        bucket_add(&b[0], r.block_tokens / M * r.compressed, sources, r.align);
        bucket_add(&b[0], r.block_tokens / M * key, keyed, r.align);
    }
    b[1] = (vllm_bucket){.block_tokens = V41_WINDOW_BLOCK, .window = m->window};
    bucket_add(&b[1], V41_WINDOW_BLOCK * r.window, m->n_layers, r.align);
    size_t ratio2, keyed2;
    v41_sources(m, 2, &ratio2, &keyed2);
    b[2] = (vllm_bucket){.block_tokens = V41_RING_ROWS, .ring = 1};
    bucket_add(&b[2], V41_RING_ROWS * 2 * m->head_dim * V4_STATE_BYTES, ratio2, 1);
    return b[2].sizes ? 3 : 2;
}

static size_t bucket_all_layers(const vllm_bucket *b)
{
    size_t n = 0;
    for (int i = 0; i < b->sizes; i++) n += b->layers[i];
    return n;
}

/* The pages of the widest of `groups` groups a bucket splits into (widest_group_bytes). */
static size_t bucket_widest(const vllm_bucket *b, size_t groups)
{
    size_t bytes = 0;
    for (int k = 0; k < b->sizes; k++) bytes += cdiv(b->layers[k], groups) * b->page[k];
    return bytes;
}

/* A bucket _get_packed_kv_cache_groups may split down to one layer a group (is_state_bucket): a
 * ring, or a window when no bucket fixes a repeat count. */
static int bucket_is_state(const vllm_bucket *b, size_t repeats) { return b->ring || (!repeats && b->window); }

/* _get_packed_kv_cache_groups (vllm/v1/core/kv_cache_planning.py, vLLM 0.34.0; its split of
 * balanced buckets read first at 4253bd44): balanced buckets split into groups of the same
 * repeats, at least as many as the largest balanced bucket of several page sizes holds; the
 * others stay whole; then a state bucket takes as many groups as it needs to fit the block the
 * others already need (anchor: every bucket at its fixed split, a state bucket at one layer a
 * group), its first page a layer. bucket_split is the first rule, bucket_groups both. */
static size_t bucket_split(const vllm_bucket *b, size_t repeats)
{
    return repeats && bucket_balanced(b) ? cdiv(bucket_max_layers(b), repeats) : 1;
}

static size_t bucket_groups(const vllm_bucket *b, size_t repeats, size_t anchor)
{
    const size_t groups = bucket_split(b, repeats);
    if (!bucket_is_state(b, repeats)) return groups;
    const size_t per_block = anchor / b->page[0] ? anchor / b->page[0] : 1;
    const size_t needed = cdiv(bucket_all_layers(b), per_block);
    return needed > groups ? needed : groups;
}

/* _approximate_gcd's repeats over the balanced buckets, at least the largest balanced bucket of
 * several page sizes; 0 when there is none (nothing splits by repeats). */
static size_t packed_repeats(const vllm_bucket *b, int n)
{
    size_t floor_repeats = 0, counts[4];
    int balanced = 0;
    for (int i = 0; i < n; i++) {
        if (!bucket_balanced(&b[i])) continue;
        counts[balanced++] = bucket_max_layers(&b[i]);
        if (b[i].sizes > 1 && bucket_max_layers(&b[i]) > floor_repeats) floor_repeats = bucket_max_layers(&b[i]);
    }
    return floor_repeats ? approximate_gcd(counts, balanced, floor_repeats) : 0;
}

void kvl_vllm_v4_blocks_of(kvl_vllm_v4_blocks *out, const kvl_model *m, size_t draft_layers)
{
    vllm_bucket b[4];
    size_t stride_align = 1;
    const int n = m->generation == KVL_GEN_V41 ? vllm_v41_buckets(b, m, &stride_align)
                                               : vllm_v4_buckets(b, m, draft_layers);
    const size_t repeats = packed_repeats(b, n);
    size_t anchor = 0;
    for (int i = 0; i < n; i++) {
        const size_t fixed = bucket_is_state(&b[i], repeats) ? bucket_all_layers(&b[i]) : bucket_split(&b[i], repeats);
        if (b[i].sizes && bucket_widest(&b[i], fixed) > anchor) anchor = bucket_widest(&b[i], fixed);
    }
    *out = (kvl_vllm_v4_blocks){.repeats = repeats};
    for (int i = 0; i < n; i++) {
        if (!b[i].sizes) continue;
        const size_t groups = bucket_groups(&b[i], repeats, anchor), widest = bucket_widest(&b[i], groups);
        /* _get_kv_cache_bytes_per_block: the widest group sets every block's bytes */
        if (widest > out->block_bytes) out->block_bytes = widest;
        /* a full group draws a block every block_tokens tokens; a window group holds the blocks its
         * last W tokens span at decode; a ring one block (CircularBufferSpec.max_num_blocks_per_req) */
        if (b[i].full) {
            out->compressed_bytes += widest;
            out->token_blocks += (double)groups / (double)b[i].block_tokens;
        }
        if (b[i].window) out->window_blocks += groups * (cdiv(b[i].window - 1, b[i].block_tokens) + 1);
        if (b[i].ring) out->window_blocks += groups;
    }
    /* the block rounded up to every spec's block stride alignment */
    out->block_bytes = round_up(out->block_bytes, stride_align);
}

/* SGLang's V4 pool per full token, its parts per layer kind (DSV4PoolConfigurator, SGLang 0.5.23):
 * the window slot of every layer at swa_full_tokens_ratio; a CSA layer's C4 compressor states (main
 * and indexer, ring / page of the window slots: _get_bytes_per_swa_token), its slot and index key
 * over 4; an HCA layer's slot over 128 (_compressed_bytes_per_full_token). Slots are padded pages'
 * shares: 585 B at 256 and 64 tokens, 864 at 2 for V4-Flash. */
typedef struct {
    double window, csa, hca;
} sglang_v4_token;

static sglang_v4_token sglang_v4_token_bytes(const kvl_model *m, int speculative)
{
    const sglang_kv_layout v4 = sglang_v4_layout(m);
    const double key = (double)kvl_v4_engine_index_key_bytes(m);
    const double states = 2.0 * 2 * (double)(m->head_dim + m->index_head_dim) * V4_STATE_BYTES;
    const double ring = (double)sglang_v4_ring(4, speculative) / V4_BLOCK_TOKENS;
    const double swa = SGLANG_V4_SWA_RATIO;
    return (sglang_v4_token){
        .window = swa * sglang_token_bytes(v4, V4_BLOCK_TOKENS),
        .csa = swa * ring * states + (sglang_token_bytes(v4, V4_BLOCK_TOKENS / 4) + key) / 4,
        .hca = sglang_token_bytes(v4, V4_BLOCK_TOKENS / 128) / 128,
    };
}

double kvl_sglang_v4_bytes_per_token(const kvl_model *m, int speculative)
{
    size_t c4, c128;
    v4_ratio_layers(m, &c4, &c128);
    const sglang_v4_token t = sglang_v4_token_bytes(m, speculative);
    const double bytes = t.window * (double)m->n_layers + t.csa * (double)c4 + t.hca * (double)c128;
    /* a draft worker's pools: the bytes inflated by (target + draft) / target, one draft layer */
    return speculative ? bytes * ((double)(m->n_layers + 1) / (double)m->n_layers) : bytes;
}

double kvl_sglang_v4_state_bytes(const kvl_model *m, size_t running, int speculative)
{
    size_t c4, c128;
    v4_ratio_layers(m, &c4, &c128);
    if (!c128) return 0;
    /* _get_c128_state_fixed_bytes: a ring of raw (kv, score) rows per request slot (running + 1), one
     * ring and a null row more, in rows of 128 */
    const size_t ring = sglang_v4_ring(128, speculative);
    const size_t rows = round_up((running + 1) * ring + ring + 1, 128);
    return (double)rows * 2 * (double)m->head_dim * V4_STATE_BYTES * (double)c128;
}

/* vLLM's pool: blocks of the widest group, the blocks the full groups draw a token, the window
 * groups' blocks a sequence. V4: each layer kind's share of a block, the window groups' surplus (if
 * they set the block) on the window layers; V4.1: every per-token block is its sources'. */
static void vllm_v4_rank(kvl_rank_cache *r, const kvl_model *m, size_t draft_layers)
{
    kvl_vllm_v4_blocks v;
    kvl_vllm_v4_blocks_of(&v, m, draft_layers);
    r->bytes_per_token = (double)v.block_bytes * v.token_blocks;
    r->window_bytes_per_sequence = v.window_blocks * v.block_bytes;
    if (m->generation == KVL_GEN_V41) {
        r->main_row_bytes = vllm_v41_records_of(m).compressed;
        r->kind_bytes[KVL_LAYER_FULL] = r->bytes_per_token;
        return;
    }
    const double per_token = 1.0 / V4_BLOCK_TOKENS;
    r->kind_bytes[KVL_LAYER_CSA] = (double)r->kind_layers[KVL_LAYER_CSA] *
                                   (double)(round_up(V4_BLOCK_TOKENS / 4 * r->main_row_bytes, V4_PAGE_ALIGN) +
                                            round_up(V4_BLOCK_TOKENS / 4 * r->index_key_bytes, V4_PAGE_ALIGN)) *
                                   per_token;
    r->kind_bytes[KVL_LAYER_HCA] = (double)r->kind_layers[KVL_LAYER_HCA] *
                                   (double)round_up(V4_BLOCK_TOKENS / 128 * r->main_row_bytes, V4_PAGE_ALIGN) *
                                   per_token;
    r->kind_bytes[KVL_LAYER_WINDOW] = (double)(v.block_bytes - v.compressed_bytes) * per_token;
}

/* A worker's max_running_requests (apply_deepseek_v4_defaults sets 256 for V4 and V4.1): the
 * node's over the DP-attention ranks, at least 1 */
static size_t sglang_v4_running(const kvl_deployment *d)
{
    const size_t running = SGLANG_V4_RUNNING / (d->dp_attention ? d->gpus : 1);
    return running ? running : 1;
}

/* SGLang's pool: full tokens at bytes_per_full_token, its C128 state rows set aside first; each
 * layer kind's share of a full token. */
static void sglang_v4_rank(kvl_rank_cache *r, const kvl_model *m, const kvl_deployment *d)
{
    const int spec = d->draft_layers > 0;
    r->bytes_per_token = kvl_sglang_v4_bytes_per_token(m, spec);
    r->running = sglang_v4_running(d);
    r->pool_fixed_bytes = kvl_sglang_v4_state_bytes(m, r->running, spec);
    const sglang_v4_token t = sglang_v4_token_bytes(m, spec);
    for (int k = 0; k < KVL_N_LAYER_KINDS; k++) r->kind_bytes[k] = t.window * (double)r->kind_layers[k];
    r->kind_bytes[KVL_LAYER_CSA] += (double)r->kind_layers[KVL_LAYER_CSA] * t.csa;
    r->kind_bytes[KVL_LAYER_HCA] += (double)r->kind_layers[KVL_LAYER_HCA] * t.hca;
    /* the draft's share: what the inflation by (L + 1) / L adds */
    r->draft_bytes_per_token = spec ? r->bytes_per_token / (double)(m->n_layers + 1) : 0;
}

/* ---- V4.1 under SGLang (SGLang 0.5.23) -------------------------------------------------------- */

#define SGLANG_SWA_EVICTION_INTERVAL 128   /* SGLANG_SWA_EVICTION_INTERVAL's default (environ.py) */

/* select_dsv4_kv_layout: V4's layout (FP8 nope, bf16 RoPE, 8 scale bytes: 584 B, pages to 576 B)
 * for every pool, unless the attention backend is flashmla_mega, which _default_dsv4_attention_backend
 * picks on SM 100 for V4.1's fp8_e4m3 cache when attention is not tensor-parallel: then the window
 * pool is V41 (head_dim E4M3 bytes and a UE8M0 scale per 32, 528 B, pages to 512 B) and the ratio-1
 * and ratio-2 pools V41_FP4 (E2M1 pairs and an E4M3 scale per 16, 288 B, pages to 256 B:
 * resolve_compressed_kv_layout). */
static int sglang_v41_layouts(sglang_kv_layout *window, sglang_kv_layout *compressed, const kvl_model *m,
                              const kvl_deployment *d)
{
    const int mega = d->sm >= 10 && d->dp_attention;
    *window = mega ? (sglang_kv_layout){v41_engine_window_bytes(m), 512} : sglang_v4_layout(m);
    *compressed = mega ? (sglang_kv_layout){v41_engine_compressed_bytes(m), 256} : *window;
    return mega;
}

/* get_dsv4_indexer_bytes_per_token with use_fp4_indexer: the ratio-1 and ratio-2 index pools are
 * built FP4 whatever the cache dtype, E2M1 pairs and a scale byte per 32 (68 B for 128 dims) */
static size_t sglang_v41_index_key_bytes(const kvl_model *m) { return m->index_head_dim / 2 + m->index_head_dim / 32; }

/* The window slots DSV4PoolConfigurator reserves in cap mode (_resolve_swa_cap_tokens: V4.1 leaves
 * swa_full_tokens_ratio unset, V4's override sets it to 0.1): compute_swa_request_cap, each request
 * its window, an eviction interval of one token and a page trailing, a page of decode, two prefill
 * chunks in flight (the overlap schedule) and a page; then 4 radix prefix tails a request
 * (_resolve_swa_prefix_tails) of a window and a page each, all page-aligned. The chunk is a DP
 * rank's share (_handle_data_parallelism). */
static size_t sglang_v41_window_slots(const kvl_model *m, const kvl_deployment *d)
{
    double chunk, max_bs;
    sglang_chunk_and_graph(d->capacity_mib, d->tp, &chunk, &max_bs);
    const size_t rank_chunk = (size_t)chunk / (d->dp_attention ? d->gpus : 1);
    const size_t W = m->window, page = d->page, running = sglang_v4_running(d);
    const size_t request = W + SGLANG_SWA_EVICTION_INTERVAL + page + page;
    const size_t cap = request * running + 2 * rank_chunk + page;
    return round_up(cap + 4 * running * (W + page), page);
}

/* _get_c2_state_fixed_bytes: each ratio-2 source's pending pairs, a ring of 2 rows per request slot
 * (running + 1), one ring and a null row more, rows rounded up to 2, each (kv, score) in float32 */
static double sglang_v41_pair_state_bytes(const kvl_model *m, size_t running, size_t ratio2_sources)
{
    const size_t rows = round_up((running + 1) * 2 + 2 + 1, 2);
    return (double)rows * 2 * (double)m->head_dim * V4_STATE_BYTES * (double)ratio2_sources;
}

/* _get_low_ratio_kv_padding_bytes at whole pages of full tokens: each ratio-M source reserves a page
 * of its compressed slots, and its index pool page / M slots and one index page more (64 slots,
 * 128 from SM 100 with DeepGEMM's paged sparse MQA logits: dsv41_index_page_size) */
static double sglang_v41_padding_bytes(size_t M, size_t sources, double slot_bytes, size_t key, const kvl_deployment *d)
{
    const size_t index_page = d->sm >= 10 ? 128 : 64;
    return (double)sources * ((double)d->page * slot_bytes + (double)((d->page / M + index_page) * key));
}

/* SGLang's V4.1 pool (DSV4PoolConfigurator, model_executor/pool_configurator.py): a full token
 * costs each ratio-M KV source its compressed slot and index key over M
 * (_compressed_bytes_per_full_token); the window slots of every backbone layer, the pair states and
 * the padding are set aside first. The window is in the fixed pool, so a sequence adds nothing
 * beyond its full tokens. */
static void sglang_v41_rank(kvl_rank_cache *r, const kvl_model *m, const kvl_deployment *d)
{
    sglang_kv_layout window, compressed;
    if (sglang_v41_layouts(&window, &compressed, m, d)) r->cache = KVL_CACHE_V41_FP4;
    const size_t key = sglang_v41_index_key_bytes(m);
    r->main_row_bytes = compressed.bytes;
    r->index_key_bytes = key;
    r->running = sglang_v4_running(d);
    r->pool_fixed_bytes = (double)sglang_v41_window_slots(m, d) * sglang_token_bytes(window, d->page) *
                          (double)m->n_layers;
    for (size_t M = 1; M <= 2; M++) {
        size_t sources, keyed;
        v41_sources(m, M, &sources, &keyed);
        const double slot = sglang_token_bytes(compressed, d->page / M);
        r->bytes_per_token += (double)sources * (slot + (double)key) / (double)M;
        r->pool_fixed_bytes += sglang_v41_padding_bytes(M, sources, slot, key, d);
    }
    size_t ratio2, keyed2;
    v41_sources(m, 2, &ratio2, &keyed2);
    r->pool_fixed_bytes += sglang_v41_pair_state_bytes(m, r->running, ratio2);
    r->kind_bytes[KVL_LAYER_FULL] = r->bytes_per_token;
}

/* What SGLang's V4.1 pool takes: no MTP draft (SGLang drafts V4.1 with DSpark only), and the GPU's
 * memory, which sets the prefill chunk its window cap counts. KVL_EINVAL naming each. */
static int sglang_v41_check(const kvl_model *m, const kvl_deployment *d)
{
    if (d->draft_layers)
        return kvl_fail(KVL_EINVAL, "%s: --engine sglang drafts V4.1 with DSpark only "
                        "(validate_deepseek_v41_features, SGLang 0.5.23), not with MTP layers: its draft is "
                        "not priced", m->path);
    if (d->capacity_mib > 0) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "%s: --engine sglang sizes V4.1's window pool by its prefill chunk, which "
                    "needs the GPU's memory", m->path);
}

/* Whether vLLM 0.34.0 picks mega attention for m at attention tp `tp` on SM 100:
 * DeepseekV4MegaAttnAttention.is_available_for (vllm/models/deepseek_v41/nvidia/flash_mla_mega_attn.py),
 * which _select_dsv4_attn_cls (nvidia/model.py) asks there before falling back to FlashMLA: tp
 * divides the heads and the o_groups, and a rank keeps WV_GROUP_SIZE (8) heads a wo_a group. */
static int vllm_v41_mega_attention(const kvl_model *m, size_t tp)
{
    if (m->n_heads % tp || m->o_groups % tp) return 0;
    const size_t heads = m->n_heads / tp, groups = m->o_groups / tp;
    return groups && heads % 8 == 0 && heads / groups == 8;
}

/* What vLLM's V4.1 pool takes: no MTP draft (vLLM drafts V4.1 with DSpark), the layout
 * engine_v4_row gives (v4-fp8 below SM 100, v41-fp4 from SM 100), and on SM 100 a split under
 * which mega attention serves (a tp-1 rank under data-parallel attention). KVL_EINVAL naming each. */
static int vllm_v41_check(const kvl_model *m, const kvl_deployment *d)
{
    if (d->draft_layers)
        return kvl_fail(KVL_EINVAL, "%s: --engine vllm drafts V4.1 with DSpark (vllm/models/deepseek_v41/nvidia/"
                        "dspark.py), not with MTP layers: its draft is not priced", m->path);
    if (m->kv_cache == KVL_CACHE_V4_FP8) return KVL_OK;
    if (m->kv_cache != KVL_CACHE_V41_FP4)
        return kvl_fail(KVL_EINVAL, "%s: --engine vllm does not store V4.1 as %s: v4-fp8 below SM 100, v41-fp4 from "
                        "SM 100", m->path, kvl_cache_layout_name(m->kv_cache));
    const size_t tp = d->dp_attention ? 1 : d->tp;
    if (vllm_v41_mega_attention(m, tp)) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "deployment: tp = %zu: DeepseekV4MegaAttnAttention.is_available_for declines %zu heads "
                    "in %zu o_groups of %s (vllm/models/deepseek_v41/nvidia/flash_mla_mega_attn.py, vLLM 0.34.0), "
                    "and the FlashMLA pool _select_dsv4_attn_cls falls back to on SM 100 is not priced", tp,
                    m->n_heads, m->o_groups, m->path);
}

static int engine_v4_rank(kvl_rank_cache *r, const kvl_model *m, const kvl_deployment *d)
{
    const int v41 = m->generation == KVL_GEN_V41, sglang = d->engine == KVL_ENGINE_SGLANG;
    if (engine_ratios_check(m, d->engine) != KVL_OK) return KVL_EINVAL;
    if (v41 && sglang && sglang_v41_check(m, d) != KVL_OK) return KVL_EINVAL;
    if (v41 && !sglang && vllm_v41_check(m, d) != KVL_OK) return KVL_EINVAL;
    const size_t page = v41 && !sglang ? vllm_v41_records_of(m).block_tokens : V4_BLOCK_TOKENS;
    if (d->page != page)
        return kvl_fail(KVL_EINVAL, "deployment: page = %zu: --engine %s pages %s in blocks of %zu tokens", d->page,
                        kvl_engine_name(d->engine), m->path, page);
    r->main_row_bytes = kvl_v4_engine_row_bytes(m);
    r->index_key_bytes = kvl_v4_engine_index_key_bytes(m);
    r->window_bytes_per_sequence = 0;
    for (size_t i = 0; i < m->n_layers; i++) r->kind_layers[m->layers[i].kind]++;
    if (d->engine == KVL_ENGINE_VLLM) vllm_v4_rank(r, m, d->draft_layers);
    else if (v41) sglang_v41_rank(r, m, d);
    else sglang_v4_rank(r, m, d);
    return KVL_OK;
}
