#include "weights_load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "status.h"
#include "weight_read.h"

/* One tensor to read: destination, leaf under each naming (NULL: the same), and shape. */
typedef struct {
    float *dst;
    const char *hf, *ds;
    size_t n_dims, shape[2];
} field;

/* Where a checkpoint's names come from: transformers' modules, DeepSeek's inference code, or transformers 5's
 * save_pretrained of V4, which writes the inference leaves under model.layers.N.attn. (its conversion
 * mapping reversed: the attention's kv_norm back to norm). */
typedef enum { NAMES_HF, NAMES_DS, NAMES_HF5_V4 } naming;

/* The layer's prefix and naming: the first whose probe leaf is present (`probe_hf5`, NULL: not tried). */
static int layer_prefix(char *prefix, size_t cap, naming *n, const kvl_st_checkpoint *c, size_t layer,
                        const char *probe_hf, const char *probe_ds, const char *probe_hf5)
{
    static const char *const form[] = {"model.layers.%zu.self_attn.", "layers.%zu.attn.", "model.layers.%zu.attn."};
    const char *probe[] = {probe_hf, probe_ds, probe_hf5};
    for (*n = NAMES_HF; *n <= NAMES_HF5_V4; (*n)++) {
        if (!probe[*n]) continue;
        char name[256];
        snprintf(prefix, cap, form[*n], layer);
        snprintf(name, sizeof name, "%s%s", prefix, probe[*n]);
        if (kvl_st_checkpoint_find(c, name, NULL)) return KVL_OK;
    }
    char third[128] = "";
    if (probe_hf5) snprintf(third, sizeof third, " nor model.layers.%zu.attn.%s", layer, probe_hf5);
    return kvl_fail(KVL_EINVAL, "%s: layer %zu: neither model.layers.%zu.self_attn.%s nor layers.%zu.attn.%s%s is present",
                    c->n_files ? c->files[0].origin : "checkpoint", layer, layer, probe_hf, layer, probe_ds, third);
}

/* KVL_EINVAL naming the tensor when the projection `name` (ending in ".weight") has a ".bias" beside it: the
 * modules compute without biases, so a checkpoint holding one (transformers writes them only under
 * attention_bias true, which kvlayer refuses) would otherwise run as if it were zero. */
static int expect_no_bias(const kvl_st_checkpoint *c, const char *name)
{
    size_t n = strlen(name);
    if (n < 7 || strcmp(name + n - 7, ".weight") != 0) return KVL_OK;
    char bias[256];
    snprintf(bias, sizeof bias, "%.*s.bias", (int)(n - 7), name);
    const kvl_st_file *in;
    if (!kvl_st_checkpoint_find(c, bias, &in)) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "%s: tensor \"%.64s\" is present, but the attention projections here carry no bias "
                    "(config attention_bias false or absent)", in->origin, bias);
}

static int read_fields(const field *f, size_t n, const kvl_st_checkpoint *c, const char *prefix, int hf)
{
    for (size_t i = 0; i < n; i++) {
        if (!f[i].dst) continue;
        char name[256];
        snprintf(name, sizeof name, "%s%s", prefix, hf || !f[i].ds ? f[i].hf : f[i].ds);
        if (f[i].n_dims == 2) KVL_TRY(expect_no_bias(c, name));
        KVL_TRY(kvl_read_weight(f[i].dst, c, name, f[i].n_dims, f[i].shape));
    }
    return KVL_OK;
}

static int read_mla(mla_weights *w, const mla_config *m, const kvl_st_checkpoint *c, const char *prefix, int hf)
{
    size_t Dq = m->q_lora_rank, H = m->n_heads, Dqk = m->qk_nope + m->qk_rope;
    const field f[] = {
        {w->w_dq, "q_a_proj.weight", "wq_a.weight", 2, {Dq, m->d}},
        {w->q_norm, "q_a_layernorm.weight", "q_norm.weight", 1, {Dq, 0}},
        {w->w_uq, "q_b_proj.weight", "wq_b.weight", 2, {H * Dqk, Dq}},
        {w->w_q, "q_proj.weight", "wq.weight", 2, {H * Dqk, m->d}},
        {w->w_dkv, "kv_a_proj_with_mqa.weight", "wkv_a.weight", 2, {m->kv_lora_rank + m->qk_rope, m->d}},
        {w->kv_norm, "kv_a_layernorm.weight", "kv_norm.weight", 1, {m->kv_lora_rank, 0}},
        {w->w_ukv, "kv_b_proj.weight", "wkv_b.weight", 2, {H * (m->qk_nope + m->v_head), m->kv_lora_rank}},
        {w->w_o, "o_proj.weight", "wo.weight", 2, {m->d, H * m->v_head}},
    };
    return read_fields(f, sizeof f / sizeof f[0], c, prefix, hf);
}

/* Rows first + k·stride + j, j < Dr, k < count, of w [..][cols]: one rotary group per k, rearranged
 * from pairs (j, j + Dr/2) to (2j, 2j + 1) when `half_split`, then multiplied by `factor`. Rotation
 * is linear and acts on pairs, so rotating these rows' outputs equals rotating the checkpoint's in
 * its own pairing with cos and sin times `factor`. */
static int fold_rotary_rows(float *w, size_t cols, size_t first, size_t stride, size_t count, size_t Dr,
                            int half_split, float factor)
{
    float *group = malloc(Dr * cols * sizeof *group);
    if (!group) return kvl_fail(KVL_ENOMEM, "out of memory folding %zu rotary rows", Dr);
    for (size_t k = 0; k < count; k++) {
        float *rows = w + (first + k * stride) * cols;
        memcpy(group, rows, Dr * cols * sizeof *group);
        for (size_t j = 0; j < Dr; j++) {
            size_t from = half_split ? (j % 2 ? Dr / 2 : 0) + j / 2 : j;
            for (size_t i = 0; i < cols; i++) rows[j * cols + i] = group[from * cols + i] * factor;
        }
    }
    free(group);
    return KVL_OK;
}

/* The query's and the key's rotary rows, q^R of every head in W_UQ (or W_Q) and k̃ in W_DKV. */
static int fold_mla_rotary(mla_weights *w, const mla_config *m, const kvl_rope_config *rope)
{
    const int half_split = !rope->interleaved;
    const float factor = (float)rope->attention_factor;
    if (!half_split && factor == 1.0f) return KVL_OK;
    const size_t Dqk = m->qk_nope + m->qk_rope;
    float *wq = m->q_lora_rank ? w->w_uq : w->w_q;
    size_t q_cols = m->q_lora_rank ? m->q_lora_rank : m->d;
    KVL_TRY(fold_rotary_rows(wq, q_cols, m->qk_nope, Dqk, m->n_heads, m->qk_rope, half_split, factor));
    return fold_rotary_rows(w->w_dkv, m->d, m->kv_lora_rank, 0, 1, m->qk_rope, half_split, factor);
}

int mla_weights_load(mla_weights *w, const mla_config *cfg, const kvl_rope_config *rope, const kvl_st_checkpoint *c,
                     size_t layer)
{
    char prefix[96];
    KVL_TRY(mla_weights_alloc(w, cfg));
    naming n;
    int rc = layer_prefix(prefix, sizeof prefix, &n, c, layer, "kv_a_proj_with_mqa.weight", "wkv_a.weight", NULL);
    if (rc == KVL_OK) rc = read_mla(w, cfg, c, prefix, n == NAMES_HF);
    if (rc == KVL_OK) rc = fold_mla_rotary(w, cfg, rope);
    if (rc != KVL_OK) mla_weights_free(w);
    return rc;
}

/* The indexer rotates the leading Dr channels of its queries and of its LayerNorm-ed key in pairs
 * (j, j + Dr/2) in both codes; transformers' factor on cos and sin folds into those rows of W_IQ and
 * into the LayerNorm's gain and bias there. */
static int fold_indexer_rotary(dsa_weights *w, const dsa_config *cfg, const kvl_rope_config *rope)
{
    const float factor = (float)rope->attention_factor;
    if (factor == 1.0f) return KVL_OK;
    const size_t Dr = cfg->mla.qk_rope, DI = cfg->index_head_dim;
    KVL_TRY(fold_rotary_rows(w->w_iq, cfg->mla.q_lora_rank, 0, DI, cfg->index_n_heads, Dr, 0, factor));
    KVL_TRY(fold_rotary_rows(w->k_norm, 1, 0, 0, 1, Dr, 0, factor));
    return fold_rotary_rows(w->k_bias, 1, 0, 0, 1, Dr, 0, factor);
}

int dsa_weights_load(dsa_weights *w, const dsa_config *cfg, const kvl_rope_config *rope, const kvl_st_checkpoint *c,
                     size_t layer)
{
    char prefix[96];
    KVL_TRY(dsa_weights_alloc(w, cfg));
    size_t HI = cfg->index_n_heads, DI = cfg->index_head_dim, d = cfg->mla.d;
    const field f[] = {
        {w->w_iq, "indexer.wq_b.weight", NULL, 2, {HI * DI, cfg->mla.q_lora_rank}},
        {w->w_ik, "indexer.wk.weight", NULL, 2, {DI, d}},
        {w->k_norm, "indexer.k_norm.weight", NULL, 1, {DI, 0}},
        {w->k_bias, "indexer.k_norm.bias", NULL, 1, {DI, 0}},
        {w->w_iw, "indexer.weights_proj.weight", NULL, 2, {HI, d}},
    };
    naming n;
    int rc = layer_prefix(prefix, sizeof prefix, &n, c, layer, "kv_a_proj_with_mqa.weight", "wkv_a.weight", NULL);
    if (rc == KVL_OK) rc = read_mla(&w->mla, &cfg->mla, c, prefix, n == NAMES_HF);
    if (rc == KVL_OK) rc = read_fields(f, sizeof f / sizeof f[0], c, prefix, 1);
    if (rc == KVL_OK) rc = fold_mla_rotary(&w->mla, &cfg->mla, rope);
    if (rc == KVL_OK) rc = fold_indexer_rotary(w, cfg, rope);
    if (rc != KVL_OK) dsa_weights_free(w);
    return rc;
}

/* The four tensors of a V4 compressor of width `width` under `hf` / `ds` (each ending in '.'). */
static int read_v4_compressor(const v4_compressor_weights *w, const v4_compressor_config *cc, size_t d,
                              const kvl_st_checkpoint *c, const char *prefix, int hf, const char *hf_at,
                              const char *ds_at)
{
    size_t wide = (1 + cc->overlap) * cc->width;
    char leaf[4][96], alt[4][96];
    static const char *const hf_leaf[4] = {"kv_proj.weight", "gate_proj.weight", "position_bias", "kv_norm.weight"};
    static const char *const ds_leaf[4] = {"wkv.weight", "wgate.weight", "ape", "norm.weight"};
    for (int i = 0; i < 4; i++) {
        snprintf(leaf[i], sizeof leaf[i], "%s%s", hf_at, hf_leaf[i]);
        snprintf(alt[i], sizeof alt[i], "%s%s", ds_at, ds_leaf[i]);
    }
    const field f[] = {
        {w->w_kv, leaf[0], alt[0], 2, {wide, d}},
        {w->w_gate, leaf[1], alt[1], 2, {wide, d}},
        {w->ape, leaf[2], alt[2], 2, {cc->ratio, wide}},
        {w->norm, leaf[3], alt[3], 1, {cc->width, 0}},
    };
    return read_fields(f, sizeof f / sizeof f[0], c, prefix, hf);
}

static int read_v4(v4_weights *w, const v4_config *v, const kvl_st_checkpoint *c, const char *prefix, naming n)
{
    const int hf = n == NAMES_HF;
    size_t H = v->n_heads, Dh = v->head_dim, GDo = v->o_groups * v->o_lora_rank;
    const field f[] = {
        {w->w_dq, "q_a_proj.weight", "wq_a.weight", 2, {v->q_lora_rank, v->d}},
        {w->q_norm, "q_a_norm.weight", "q_norm.weight", 1, {v->q_lora_rank, 0}},
        {w->w_uq, "q_b_proj.weight", "wq_b.weight", 2, {H * Dh, v->q_lora_rank}},
        {w->w_kv, "kv_proj.weight", "wkv.weight", 2, {Dh, v->d}},
        {w->kv_norm, "kv_norm.weight", n == NAMES_HF5_V4 ? "norm.weight" : "kv_norm.weight", 1, {Dh, 0}},
        {w->sinks, "sinks", "attn_sink", 1, {H, 0}},
        {w->w_oa, "o_a_proj.weight", "wo_a.weight", 2, {GDo, H / v->o_groups * Dh}},
        {w->w_ob, "o_b_proj.weight", "wo_b.weight", 2, {v->d, GDo}},
    };
    KVL_TRY(read_fields(f, sizeof f / sizeof f[0], c, prefix, hf));
    if (v->kind == KVL_LAYER_WINDOW) return KVL_OK;
    KVL_TRY(read_v4_compressor(&w->compressor, &v->compressor, v->d, c, prefix, hf, "compressor.", "compressor."));
    if (v->kind != KVL_LAYER_CSA) return KVL_OK;
    const v4_indexer_config *ic = &v->indexer;
    const field g[] = {
        {w->indexer.w_iq, "compressor.indexer.q_b_proj.weight", "indexer.wq_b.weight", 2, {ic->n_heads * ic->head_dim, ic->q_lora_rank}},
        {w->indexer.w_iw, "compressor.indexer.scorer.weights_proj.weight", "indexer.weights_proj.weight", 2, {ic->n_heads, v->d}},
    };
    KVL_TRY(read_fields(g, sizeof g / sizeof g[0], c, prefix, hf));
    return read_v4_compressor(&w->indexer.compressor, &ic->compressor, v->d, c, prefix, hf, "compressor.indexer.",
                              "indexer.compressor.");
}

int v4_weights_load(v4_weights *w, const v4_config *cfg, const kvl_st_checkpoint *c, size_t layer)
{
    char prefix[96];
    KVL_TRY(v4_weights_alloc(w, cfg));
    naming n;
    int rc = layer_prefix(prefix, sizeof prefix, &n, c, layer, "kv_proj.weight", "wkv.weight", "wkv.weight");
    if (rc == KVL_OK) rc = read_v4(w, cfg, c, prefix, n);
    if (rc != KVL_OK) v4_weights_free(w);
    return rc;
}

static int read_v41(v41_weights *w, const v41_config *v, const kvl_st_checkpoint *c, const char *prefix)
{
    const v4_config *k = &v->core;
    size_t H = k->n_heads, Dh = k->head_dim, GDo = k->o_groups * k->o_lora_rank, DI = v->indexer.head_dim;
    int full = v->kind == KVL_LAYER_FULL, scores = full || v->kind == KVL_LAYER_REINDEX;
    const field f[] = {
        {w->core.w_dq, "wq_a.weight", NULL, 2, {k->q_lora_rank, k->d}},
        {w->core.q_norm, "q_norm.weight", NULL, 1, {k->q_lora_rank, 0}},
        {w->core.w_uq, "wq_b.weight", NULL, 2, {H * Dh, k->q_lora_rank}},
        {w->core.w_kv, "wkv.weight", NULL, 2, {Dh, k->d}},
        {w->core.kv_norm, "kv_norm.weight", NULL, 1, {Dh, 0}},
        {w->core.sinks, "attn_sink", NULL, 1, {H, 0}},
        {w->core.w_oa, "wo_a", NULL, 2, {GDo, H / k->o_groups * Dh}},
        {w->core.w_ob, "wo_b.weight", NULL, 2, {k->d, GDo}},
        {full ? w->compressor.w_c : NULL, "compressor.wkv.weight", NULL, 2, {Dh, k->d}},
        {full ? w->compressor.w_z : NULL, "compressor.wgate.weight", NULL, 2, {Dh, k->d}},
        {full ? w->compressor.norm : NULL, "compressor.norm.weight", NULL, 1, {Dh, 0}},
        {full ? w->w_ik : NULL, "indexer.wk.weight", NULL, 2, {DI, Dh}},
        {full ? w->ik_norm : NULL, "indexer.k_norm.weight", NULL, 1, {DI, 0}},
        {scores ? w->w_iq : NULL, "indexer.wq_b.weight", NULL, 2, {v->indexer.n_heads * DI, k->q_lora_rank}},
        {scores ? w->w_iw : NULL, "indexer.weights_proj.weight", NULL, 2, {v->indexer.n_heads, k->d}},
    };
    return read_fields(f, sizeof f / sizeof f[0], c, prefix, 1);
}

int v41_weights_load(v41_weights *w, const v41_config *cfg, const kvl_st_checkpoint *c, size_t layer)
{
    /* v41.h allocates only through its random initialiser; every field it draws is overwritten here. */
    kvl_rng rng;
    kvl_rng_seed(&rng, 0);
    KVL_TRY(v41_weights_init_random(w, cfg, &rng));
    char prefix[96];
    snprintf(prefix, sizeof prefix, "layers.%zu.attn.", layer);
    int rc = read_v41(w, cfg, c, prefix);
    if (rc != KVL_OK) v41_weights_free(w);
    return rc;
}
