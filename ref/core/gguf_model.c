/* GGUF metadata → kvl_model, with the meaning llama.cpp gives each key (src/llama-model.cpp, its
 * hparams loading; gguf-py/gguf/constants.py for the names) and the cache it keeps for the file
 * (src/llama-kv-cache.cpp):
 *
 *   deepseek2, MLA conversion (attention.key_length_mla and value_length_mla written, kv_b split into
 *     k_b and v_b): one KV head whose key is the latent and the RoPE key, key_length = kv_lora_rank +
 *     rope.dimension_count, value_length = kv_lora_rank; llama.cpp stores that key only (V is its
 *     first kv_lora_rank values): the MLA latent, as the config.json prices it.
 *   deepseek2, older conversion (no _mla keys): head_count_kv heads of key_length (NoPE + RoPE) and
 *     value_length values, cached whole: head_count_kv x (key_length + value_length) per layer.
 *   llama: head_count_kv heads of key_length = value_length (default embedding_length / head_count).
 *
 * llama.cpp reads each key as one type (a uint32 key written as int32 fails its load), so does this. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "status.h"

#define MAX_DIM ((uint64_t)1 << 24)
#define MAX_LAYERS 4096

typedef struct {
    const kvl_gguf *g;
    const char *arch;      /* "deepseek2" or "llama": the prefix of the model's keys */
} meta;

/* "ARCH.suffix"; the general. and tokenizer. keys are named whole. */
static const char *key_of(const meta *r, const char *suffix, char *buf, size_t cap)
{
    if (strncmp(suffix, "general.", 8) == 0 || strncmp(suffix, "tokenizer.", 10) == 0) return suffix;
    snprintf(buf, cap, "%s.%s", r->arch, suffix);
    return buf;
}

static int wrong_type(const meta *r, const char *key, const kvl_gguf_kv *kv, kvl_gguf_type want)
{
    if (kv->type == KVL_GGUF_ARRAY)
        return kvl_fail(KVL_EINVAL, "%s: key \"%s\" must be a %s, got an array of %llu %s", r->g->origin, key,
                        kvl_gguf_type_name(want), (unsigned long long)kv->count, kvl_gguf_type_name(kv->elem));
    return kvl_fail(KVL_EINVAL, "%s: key \"%s\" must be a %s, got a %s", r->g->origin, key, kvl_gguf_type_name(want),
                    kvl_gguf_type_name(kv->type));
}

/* The pair under ARCH.suffix of type t; NULL with *rc = KVL_OK when absent and optional. */
static const kvl_gguf_kv *lookup(const meta *r, const char *suffix, kvl_gguf_type t, int required, int *rc,
                                 char *key, size_t cap)
{
    const char *k = key_of(r, suffix, key, cap);
    if (k != key) snprintf(key, cap, "%s", k);
    const kvl_gguf_kv *kv = kvl_gguf_find(r->g, key);
    *rc = KVL_OK;
    if (!kv && required) *rc = kvl_fail(KVL_EINVAL, "%s: missing key \"%s\" (architecture %s)", r->g->origin, key, r->arch);
    else if (kv && kv->type != t) *rc = wrong_type(r, key, kv, t);
    return *rc == KVL_OK ? kv : NULL;
}

/* A uint32 key in [lo, hi]; absent: dflt, or an error when required. */
static int get_u32(const meta *r, const char *suffix, int required, uint64_t lo, uint64_t hi, size_t dflt, size_t *out)
{
    char key[128];
    int rc;
    const kvl_gguf_kv *kv = lookup(r, suffix, KVL_GGUF_U32, required, &rc, key, sizeof key);
    if (rc != KVL_OK) return rc;
    if (!kv) { *out = dflt; return KVL_OK; }
    if (kv->v.u < lo || kv->v.u > hi)
        return kvl_fail(KVL_EINVAL, "%s: key \"%s\" must be in [%llu, %llu], got %llu", r->g->origin, key,
                        (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)kv->v.u);
    *out = (size_t)kv->v.u;
    return KVL_OK;
}

/* A float32 key, finite and in (lo, hi]; absent: dflt, or an error when required. */
static int get_f32(const meta *r, const char *suffix, int required, double lo, double hi, double dflt, double *out)
{
    char key[128];
    int rc;
    const kvl_gguf_kv *kv = lookup(r, suffix, KVL_GGUF_F32, required, &rc, key, sizeof key);
    if (rc != KVL_OK) return rc;
    if (!kv) { *out = dflt; return KVL_OK; }
    if (!(kv->v.f > lo && kv->v.f <= hi))
        return kvl_fail(KVL_EINVAL, "%s: key \"%s\" must be above %g and at most %g, got %g", r->g->origin, key, lo,
                        hi, kv->v.f);
    *out = kv->v.f;
    return KVL_OK;
}

/* A string key, NUL-terminated into out[cap] (longer, or holding a NUL: refused); absent: "". */
static int get_str(const meta *r, const char *suffix, int required, char *out, size_t cap)
{
    char key[128];
    int rc;
    const kvl_gguf_kv *kv = lookup(r, suffix, KVL_GGUF_STRING, required, &rc, key, sizeof key);
    out[0] = '\0';
    if (rc != KVL_OK || !kv) return rc;
    const kvl_gguf_str s = kv->v.s;
    if (s.len >= cap || memchr(s.bytes, '\0', s.len))
        return kvl_fail(KVL_EINVAL, "%s: key \"%s\": a string of %zu bytes%s (at most %zu, no NUL)", r->g->origin, key,
                        s.len, memchr(s.bytes, '\0', s.len) ? " holding a NUL" : "", cap - 1);
    memcpy(out, s.bytes, s.len);
    out[s.len] = '\0';
    return KVL_OK;
}

/* Key ARCH.a (va) against key b (vb; ARCH.b unless a general. or tokenizer. key): va must `must` vb. */
static int disagree(const meta *r, const char *a, size_t va, const char *must, const char *b, size_t vb)
{
    char kb[128];
    return kvl_fail(KVL_EINVAL, "%s: keys \"%s.%s\" and \"%s\" disagree: %zu must %s %zu", r->g->origin, r->arch, a,
                    key_of(r, b, kb, sizeof kb), va, must, vb);
}

/* ---- what every architecture states ------------------------------------------------------------ */

/* general.name, where given, is the name shown: cut to fit, a control byte shown as '?'. */
static int read_name(const meta *r, kvl_model *m)
{
    char key[32];
    int rc;
    const kvl_gguf_kv *kv = lookup(r, "general.name", KVL_GGUF_STRING, 0, &rc, key, sizeof key);
    if (rc != KVL_OK || !kv || !kv->v.s.len) return rc;
    const size_t n = kv->v.s.len < sizeof m->name - 1 ? kv->v.s.len : sizeof m->name - 1;
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)kv->v.s.bytes[i];
        m->name[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
    }
    m->name[n] = '\0';
    return KVL_OK;
}

static int read_common(const meta *r, kvl_model *m)
{
    size_t ctx;
    KVL_TRY(get_u32(r, "block_count", 1, 1, MAX_LAYERS, 0, &m->n_layers));
    KVL_TRY(get_u32(r, "context_length", 1, 1, UINT32_MAX, 0, &ctx));   /* llama.cpp requires it */
    KVL_TRY(get_u32(r, "embedding_length", 1, 1, MAX_DIM, 0, &m->d));
    KVL_TRY(get_u32(r, "attention.head_count", 1, 1, MAX_DIM, 0, &m->n_heads));
    KVL_TRY(get_u32(r, "attention.head_count_kv", 0, 1, m->n_heads, m->n_heads, &m->n_kv_heads));
    if (m->n_heads % m->n_kv_heads)
        return disagree(r, "attention.head_count_kv", m->n_kv_heads, "divide", "attention.head_count", m->n_heads);
    KVL_TRY(get_f32(r, "attention.layer_norm_rms_epsilon", 1, 0, 1, 0, &m->norm_eps));
    return read_name(r, m);
}

/* rope.freq_base and the YaRN keys, as llama.cpp reads them (types none and yarn; linear scaling and
 * a factor without a type are not what kvl_rope_config holds). */
static int read_rope(const meta *r, kvl_model *m)
{
    kvl_rope_config *p = &m->rope;
    char type[16];
    *p = (kvl_rope_config){.factor = 1, .beta_fast = 32, .beta_slow = 1, .attention_factor = 1, .interleaved = 1};
    KVL_TRY(get_f32(r, "rope.freq_base", 0, 0, 1e300, 10000, &p->theta));
    KVL_TRY(get_str(r, "rope.scaling.type", 0, type, sizeof type));
    double factor;
    KVL_TRY(get_f32(r, "rope.scaling.factor", 0, 0, 1e6, 1, &factor));
    m->rope_spelling = KVL_ROPE_PLAIN;
    if (!type[0] || strcmp(type, "none") == 0) {
        if (factor == 1) return KVL_OK;
        return kvl_fail(KVL_EINVAL, "%s: key \"%s.rope.scaling.factor\" is %g but \"%s.rope.scaling.type\" is %s",
                        r->g->origin, r->arch, factor, r->arch, type[0] ? "none" : "absent");
    }
    if (strcmp(type, "yarn") != 0)
        return kvl_fail(KVL_EINVAL, "%s: key \"%s.rope.scaling.type\" is \"%s\"; none and yarn are read", r->g->origin,
                        r->arch, type);
    size_t original;
    double log_mul;
    KVL_TRY(get_u32(r, "rope.scaling.original_context_length", 1, 1, UINT32_MAX, 0, &original));
    KVL_TRY(get_f32(r, "rope.scaling.yarn_beta_fast", 0, 0, 1e6, 32, &p->beta_fast));
    KVL_TRY(get_f32(r, "rope.scaling.yarn_beta_slow", 0, 0, 1e6, 1, &p->beta_slow));
    KVL_TRY(get_f32(r, "rope.scaling.yarn_log_multiplier", 0, 0, 1e6, 0, &log_mul));
    p->factor = factor;
    p->original_len = (double)original;
    p->mscale = log_mul / 0.1;   /* llama.cpp's yarn_log_multiplier is 0.1 x mscale_all_dim */
    m->rope_spelling = KVL_ROPE_FLAT;   /* DeepSeek's meaning: mscale twice on the softmax scale, cos and sin x 1 */
    return KVL_OK;
}

/* The tokenizer's vocabulary and the vocab_size key, where given, are one count. */
static int read_vocab(const meta *r, kvl_model *m)
{
    const kvl_gguf_kv *tokens = kvl_gguf_find(r->g, "tokenizer.ggml.tokens");
    if (tokens && (tokens->type != KVL_GGUF_ARRAY || tokens->elem != KVL_GGUF_STRING))
        return kvl_fail(KVL_EINVAL, "%s: key \"tokenizer.ggml.tokens\" must be an array of strings, got a %s of %s",
                        r->g->origin, kvl_gguf_type_name(tokens->type),
                        kvl_gguf_type_name(tokens->type == KVL_GGUF_ARRAY ? tokens->elem : tokens->type));
    const size_t listed = tokens ? (size_t)tokens->count : 0;
    KVL_TRY(get_u32(r, "vocab_size", 0, 1, MAX_DIM, listed, &m->ffn.vocab_size));
    if (tokens && listed != m->ffn.vocab_size)
        return disagree(r, "vocab_size", m->ffn.vocab_size, "equal the length of", "tokenizer.ggml.tokens", listed);
    return KVL_OK;
}

/* general.file_type: f32, f16 and bf16 weights map to a kvl_weight_format; ggml's quantised types are
 * kept as a number, which a program that prices weights refuses. */
static int read_file_type(const meta *r, kvl_ffn *f)
{
    size_t t;
    KVL_TRY(get_u32(r, "general.file_type", 0, 0, UINT32_MAX, 1, &t));
    f->linear = f->experts = t == 0 ? KVL_WEIGHTS_F32 : KVL_WEIGHTS_BF16;
    f->ggml_file_type = t == 0 || t == 1 || t == 32 ? 0 : (unsigned)t;   /* ALL_F32, MOSTLY_F16, MOSTLY_BF16 */
    return KVL_OK;
}

static int read_experts(const meta *r, kvl_ffn *f, size_t n_layers)
{
    KVL_TRY(get_u32(r, "expert_count", 0, 0, MAX_DIM, 0, &f->n_routed_experts));
    KVL_TRY(get_u32(r, "expert_used_count", 0, 0, f->n_routed_experts, 0, &f->n_activated_experts));
    if (f->n_routed_experts && !f->n_activated_experts)
        return kvl_fail(KVL_EINVAL, "%s: key \"%s.expert_count\" is %zu but \"%s.expert_used_count\" is 0 or absent",
                        r->g->origin, r->arch, f->n_routed_experts, r->arch);
    if (f->n_dense_layers > n_layers)
        return disagree(r, "leading_dense_block_count", f->n_dense_layers, "be at most", "block_count", n_layers);
    return KVL_OK;
}

/* ---- deepseek2 ----------------------------------------------------------------------------------- */

/* The MLA conversion: one KV head of the latent and the RoPE key; per-head widths under _mla. */
static int deepseek2_mla(const meta *r, kvl_model *m, size_t key_length, size_t value_length, size_t key_mla,
                         size_t value_mla)
{
    const size_t Dc = m->kv_lora_rank, Dr = m->qk_rope_head_dim;
    if (m->n_kv_heads != 1)
        return kvl_fail(KVL_EINVAL, "%s: key \"deepseek2.attention.head_count_kv\" is %zu; an MLA conversion "
                        "(attention.key_length_mla given) has one KV head", r->g->origin, m->n_kv_heads);
    if (key_length != Dc + Dr)
        return kvl_fail(KVL_EINVAL, "%s: keys \"deepseek2.attention.key_length\" (%zu) and \"deepseek2.attention."
                        "kv_lora_rank\" + \"deepseek2.rope.dimension_count\" (%zu + %zu = %zu) disagree: an MLA "
                        "conversion's key is the latent and the RoPE key", r->g->origin, key_length, Dc, Dr, Dc + Dr);
    if (value_length != Dc)
        return disagree(r, "attention.value_length", value_length, "equal", "attention.kv_lora_rank", Dc);
    if (key_mla <= Dr)
        return disagree(r, "attention.key_length_mla", key_mla, "exceed", "rope.dimension_count", Dr);
    m->head_dim = key_mla;
    m->v_head_dim = value_mla;
    m->n_kv_heads = m->n_heads;   /* as config.json states an MLA model: the heads the latent expands to */
    return KVL_OK;
}

/* The older conversion: whole heads of key_length and value_length. */
static int deepseek2_whole(const meta *r, kvl_model *m, size_t key_length, size_t value_length)
{
    if (key_length <= m->qk_rope_head_dim)
        return disagree(r, "attention.key_length", key_length, "exceed", "rope.dimension_count", m->qk_rope_head_dim);
    m->head_dim = key_length;
    m->v_head_dim = value_length;
    m->kv_whole_heads = 1;
    return KVL_OK;
}

static int read_deepseek2(const meta *r, kvl_model *m)
{
    kvl_ffn *f = &m->ffn;
    size_t key_length, value_length, key_mla, value_mla;
    m->generation = KVL_GEN_MLA;
    KVL_TRY(get_u32(r, "attention.q_lora_rank", m->n_layers != 27, 0, MAX_DIM, 0, &m->q_lora_rank));  /* 27: V2-Lite */
    KVL_TRY(get_u32(r, "attention.kv_lora_rank", 1, 1, MAX_DIM, 0, &m->kv_lora_rank));
    KVL_TRY(get_u32(r, "rope.dimension_count", 1, 2, MAX_DIM, 0, &m->qk_rope_head_dim));
    if (m->qk_rope_head_dim % 2)
        return kvl_fail(KVL_EINVAL, "%s: key \"deepseek2.rope.dimension_count\" must be even (rotation pairs), got %zu",
                        r->g->origin, m->qk_rope_head_dim);
    KVL_TRY(get_u32(r, "attention.key_length", 1, 1, MAX_DIM, 0, &key_length));
    KVL_TRY(get_u32(r, "attention.value_length", 1, 1, MAX_DIM, 0, &value_length));
    KVL_TRY(get_u32(r, "attention.key_length_mla", 0, 0, MAX_DIM, 0, &key_mla));
    KVL_TRY(get_u32(r, "attention.value_length_mla", 0, 0, MAX_DIM, 0, &value_mla));
    if (!key_mla != !value_mla)   /* llama.cpp asserts both or neither */
        return kvl_fail(KVL_EINVAL, "%s: key \"deepseek2.attention.%s_length_mla\" is given (%zu) without \"deepseek2."
                        "attention.%s_length_mla\"", r->g->origin, key_mla ? "key" : "value",
                        key_mla ? key_mla : value_mla, key_mla ? "value" : "key");
    KVL_TRY(key_mla ? deepseek2_mla(r, m, key_length, value_length, key_mla, value_mla)
                    : deepseek2_whole(r, m, key_length, value_length));
    m->qk_nope_head_dim = m->head_dim - m->qk_rope_head_dim;
    KVL_TRY(get_u32(r, "leading_dense_block_count", 1, 0, MAX_LAYERS, 0, &f->n_dense_layers));
    KVL_TRY(get_u32(r, "feed_forward_length", f->n_dense_layers > 0, 1, MAX_DIM, 0, &f->inter_dim));
    KVL_TRY(get_u32(r, "expert_feed_forward_length", 1, 1, MAX_DIM, 0, &f->moe_inter_dim));
    KVL_TRY(get_u32(r, "expert_shared_count", 1, 0, MAX_DIM, 0, &f->n_shared_experts));
    double scale;
    KVL_TRY(get_f32(r, "expert_weights_scale", 1, 0, 1e6, 0, &scale));   /* required by llama.cpp; not priced */
    return read_experts(r, f, m->n_layers);
}

/* ---- llama --------------------------------------------------------------------------------------- */

static int read_llama(const meta *r, kvl_model *m)
{
    kvl_ffn *f = &m->ffn;
    m->generation = KVL_GEN_MHA;
    const size_t dflt = m->d % m->n_heads ? 0 : m->d / m->n_heads;
    size_t value_length;
    KVL_TRY(get_u32(r, "attention.key_length", !dflt, 2, MAX_DIM, dflt, &m->head_dim));
    KVL_TRY(get_u32(r, "attention.value_length", !dflt, 2, MAX_DIM, dflt, &value_length));
    if (value_length != m->head_dim)
        return disagree(r, "attention.value_length", value_length, "equal", "attention.key_length", m->head_dim);
    KVL_TRY(get_u32(r, "rope.dimension_count", 0, 2, MAX_DIM, m->head_dim, &m->qk_rope_head_dim));
    if (m->qk_rope_head_dim != m->head_dim)   /* a partial rotary llama is not what an MHA kvl_model holds */
        return disagree(r, "rope.dimension_count", m->qk_rope_head_dim, "equal", "attention.key_length", m->head_dim);
    m->v_head_dim = m->head_dim;
    size_t ff;
    KVL_TRY(get_u32(r, "feed_forward_length", 1, 1, MAX_DIM, 0, &ff));
    KVL_TRY(read_experts(r, f, m->n_layers));
    if (f->n_routed_experts) f->moe_inter_dim = ff;   /* Mixtral's experts are llama's FFN, routed */
    else {
        f->inter_dim = ff;
        f->n_dense_layers = m->n_layers;
    }
    return KVL_OK;
}

/* ---- the model ----------------------------------------------------------------------------------- */

static void name_from_path(kvl_model *m, const char *path)
{
    const char *base = strrchr(path, '/');
    snprintf(m->name, sizeof m->name, "%s", base ? base + 1 : path);
    char *dot = strrchr(m->name, '.');
    if (dot && strcmp(dot, ".gguf") == 0) *dot = '\0';
}

static int read_model(const meta *r, kvl_model *m)
{
    KVL_TRY(read_common(r, m));
    KVL_TRY(read_rope(r, m));
    KVL_TRY(strcmp(r->arch, "deepseek2") == 0 ? read_deepseek2(r, m) : read_llama(r, m));
    KVL_TRY(read_vocab(r, m));
    KVL_TRY(read_file_type(r, &m->ffn));
    m->ffn.ffn_matrices = 3;   /* llama.cpp's llama and deepseek2 FFNs are gated: gate, up, down */
    m->layers = calloc(m->n_layers, sizeof *m->layers);
    if (!m->layers) return kvl_fail(KVL_ENOMEM, "%s: out of memory for %zu layers", r->g->origin, m->n_layers);
    for (size_t i = 0; i < m->n_layers; i++) m->layers[i] = (kvl_layer){KVL_LAYER_DENSE, 1, (int)i, -1};
    return KVL_OK;
}

int kvl_model_from_gguf(kvl_model *m, const kvl_gguf *g)
{
    memset(m, 0, sizeof *m);
    snprintf(m->path, sizeof m->path, "%s", g->origin);
    name_from_path(m, g->origin);
    char arch[32];
    meta r = {g, "general"};
    int rc = get_str(&r, "general.architecture", 1, arch, sizeof arch);
    if (rc == KVL_OK && strcmp(arch, "deepseek2") != 0 && strcmp(arch, "llama") != 0)
        rc = kvl_fail(KVL_EINVAL, "%s: key \"general.architecture\" is \"%s\"; deepseek2 and llama are read", g->origin,
                      arch);
    r.arch = arch;
    if (rc == KVL_OK) rc = read_model(&r, m);
    m->kv_cache = KVL_CACHE_BF16;   /* the arrangement of values; llama_cache says how each is stored */
    m->llama_cache = KVL_LLAMA_F16;   /* llama.cpp's default (-ctk, -ctv) */
    if (rc != KVL_OK) kvl_model_free(m);
    return rc;
}
