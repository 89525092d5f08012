/* Parameter counts from a config's shapes; see params.h. */
#include "params.h"

#include "block.h"
#include "v41.h"
#include "dsa.h"
#include "mha.h"
#include "mla.h"
#include "status.h"
#include "v4.h"

/* Layer `layer`'s attention weights, from the sizes table of the module that computes it. */
static int attention_params(uint64_t *n, const kvl_model *m, size_t layer)
{
    size_t floats;
    switch (m->generation) {
    case KVL_GEN_MHA: {
        mha_config c;
        KVL_TRY(mha_config_from_model(&c, m, layer));
        *n = mha_weights_size(&c);
        return KVL_OK;
    }
    case KVL_GEN_MLA: {
        mla_config c;
        KVL_TRY(mla_config_from_model(&c, m));
        KVL_TRY(mla_weights_size(&floats, &c));
        *n = floats;
        return KVL_OK;
    }
    case KVL_GEN_DSA: {
        dsa_config c;
        KVL_TRY(dsa_config_from_model(&c, m));
        KVL_TRY(dsa_weights_size(&floats, &c));
        *n = floats;
        return KVL_OK;
    }
    case KVL_GEN_V4: {
        v4_config c;
        KVL_TRY(v4_config_from_model(&c, m, layer));
        *n = v4_weights_count(&c);
        return KVL_OK;
    }
    case KVL_GEN_V41: {
        v41_config c;
        KVL_TRY(v41_config_from_model(&c, m, layer));
        const v41_params p = v41_layer_params(&c);
        *n = p.core + p.compressor + p.index_keys + p.index_query;
        return KVL_OK;
    }
    }
    return kvl_fail(KVL_EINVAL, "%s: no attention to count", m->path);
}

/* One layer's attention biases (config.h, KVL_BIAS_*), as transformers' modeling files size them. */
static uint64_t bias_params(const kvl_model *m)
{
    const uint64_t in = m->generation == KVL_GEN_MHA
                            ? (m->n_heads + 2 * m->n_kv_heads) * m->head_dim
                            : m->q_lora_rank + m->kv_lora_rank + m->qk_rope_head_dim;   /* q_a_proj, kv_a_proj */
    return (m->attention_bias & KVL_BIAS_IN ? in : 0) + (m->attention_bias & KVL_BIAS_OUT ? m->d : 0);
}

/* One layer's FFN: dense, or experts and their router. */
static void ffn_params(kvl_params *p, const kvl_ffn *f, uint64_t d, size_t layer)
{
    if (layer < f->n_dense_layers) {
        p->dense_ffn += f->ffn_matrices * d * f->inter_dim;
        return;
    }
    const uint64_t expert = f->ffn_matrices * d * f->moe_inter_dim;
    p->routed_experts += f->n_routed_experts * expert;
    p->shared_experts += f->n_shared_experts * expert;
    if (f->n_routed_experts) p->routers += f->n_routed_experts * (d + 1);
}

int kvl_params_of(kvl_params *p, const kvl_model *m)
{
    *p = (kvl_params){0};
    const kvl_ffn *f = &m->ffn;
    const uint64_t d = m->d;
    p->embedding = f->vocab_size * d;
    p->head = f->tied_embeddings ? 0 : f->vocab_size * d;
    p->norms = d + 2 * d * m->n_layers;
    for (size_t l = 0; l < m->n_layers; l++) {
        uint64_t a;
        int rc = attention_params(&a, m, l);
        if (rc != KVL_OK) return kvl_fail(rc, "%s: layer %zu: %s", m->path, l, kvl_error());
        p->attention += a + bias_params(m);
        ffn_params(p, f, d, l);
    }
    p->backbone = p->embedding + p->head + p->norms + p->attention + p->dense_ffn + p->routed_experts +
                  p->shared_experts + p->routers;
    const uint64_t routed_active =
        f->n_routed_experts ? p->routed_experts / f->n_routed_experts * f->n_activated_experts : 0;
    p->active = p->backbone - p->embedding - p->routed_experts + routed_active;
    if (f->n_mtp_layers) {
        kvl_params last = {0};
        uint64_t a;
        KVL_TRY(attention_params(&a, m, m->n_layers - 1));
        a += bias_params(m);
        ffn_params(&last, f, d, m->n_layers - 1);
        const uint64_t layer = a + 2 * d + last.dense_ffn + last.routed_experts + last.shared_experts + last.routers;
        p->mtp = f->n_mtp_layers * (layer + 2 * d * d + 2 * d);
    }
    return KVL_OK;
}

/* Bytes of n weights stored as fmt. */
static double stored(double n, kvl_weight_format fmt, int scale_e8m0)
{
    switch (fmt) {
    case KVL_WEIGHTS_BF16: return 2 * n;
    case KVL_WEIGHTS_F32: return 4 * n;
    case KVL_WEIGHTS_FP8: return n + n / (128.0 * 128.0) * (scale_e8m0 ? 1 : 4);
    case KVL_WEIGHTS_FP4: return n / 2 + n / KVF_MX_BLOCK;   /* a block: its codes and one E8M0 byte */
    }
    return 0;
}

double kvl_params_bytes(const kvl_params *p, kvl_weight_format linear, kvl_weight_format experts, int scale_e8m0)
{
    const double kept = (double)(p->embedding + p->head + p->norms + p->routers);
    const double expert_weights = (double)(p->routed_experts + p->shared_experts);
    const double linear_weights = (double)(p->attention + p->dense_ffn);
    return stored(kept, KVL_WEIGHTS_BF16, 0) + stored(linear_weights, linear, scale_e8m0) +
           stored(expert_weights, experts, scale_e8m0);
}
