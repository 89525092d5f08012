#include "serving.h"

#include <math.h>

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
    return bytes;
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
    out->tokens_per_gpu = r->bytes_per_token > 0 ? floor(budget / r->bytes_per_token) : 0;
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
