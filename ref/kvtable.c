#include "kvtable.h"

#include "element.h"
#include "rows.h"
#include "status.h"

#include <string.h>

static size_t bf16_bytes(void) { return kvf_element_bits(KVF_BF16) / 8; }

#define GGML_BLOCK 32   /* values in one q8_0 or q4_0 block (ggml's QK8_0, QK4_0) */

/* Bytes of a cache row of n values, in the bf16 layout: 16 bits a value, or llama.cpp's cache type for a
 * GGUF file's model (a q8_0 block: a 2-byte f16 scale and 32 int8; q4_0: the scale and 32 nibbles). A
 * quantised row that does not split into blocks is refused, as llama.cpp refuses it. */
static int row_bytes(const kvl_model *m, size_t n, const char *what, size_t *out)
{
    static const size_t block_bytes[] = {[KVL_LLAMA_Q8_0] = 2 + GGML_BLOCK, [KVL_LLAMA_Q4_0] = 2 + GGML_BLOCK / 2};
    if (m->llama_cache == KVL_LLAMA_NONE || m->llama_cache == KVL_LLAMA_F16) {
        *out = n * bf16_bytes();
        return KVL_OK;
    }
    if (n % GGML_BLOCK)
        return kvl_fail(KVL_EINVAL, "%s: llama.cpp's %s cache stores blocks of %d values; the %s row holds %zu",
                        m->path, kvl_llama_cache_name(m->llama_cache), GGML_BLOCK, what, n);
    *out = n / GGML_BLOCK * block_bytes[m->llama_cache];
    return KVL_OK;
}

/* The bf16 layout's main row: K and V of every KV head (MHA/GQA, and an MLA model cached as whole
 * heads: llama.cpp's older deepseek2 GGUF), or the latent and the shared RoPE key (MLA, DSA). */
static int bf16_main_row(const kvl_model *m, size_t *out)
{
    size_t k, v;
    if (m->generation == KVL_GEN_MHA || m->kv_whole_heads) {
        KVL_TRY(row_bytes(m, m->n_kv_heads * m->head_dim, "K", &k));
        KVL_TRY(row_bytes(m, m->n_kv_heads * m->v_head_dim, "V", &v));
        *out = k + v;
        return KVL_OK;
    }
    return row_bytes(m, m->kv_lora_rank + m->qk_rope_head_dim, "latent", out);
}

/* A row layout holds a fixed number of values; the config must produce exactly that many. */
static int row_fits(const kvl_model *m, kvf_row row, size_t values, const char *what)
{
    if (kvf_row_values(row) == values) return KVL_OK;
    return kvl_fail(KVL_EINVAL, "%s: kv_cache %s: the %s row holds %zu values, but the config gives %s = %zu",
                    m->path, kvl_cache_layout_name(m->kv_cache), kvf_row_name(row), kvf_row_values(row), what,
                    values);
}

/* Main row, index key and window row sizes of the model's cache layout. */
static int entry_parts(kvl_kv_footprint *f, const kvl_model *m)
{
    switch (m->kv_cache) {
    case KVL_CACHE_BF16:
        /* every value in bf16 (or llama.cpp's cache type): K and V of every KV head, the MLA/DSA latent
         * and RoPE key (bf16_main_row), DSA's index key; V4/V4.1's shared entry, its index key and its
         * window row */
        if (m->generation >= KVL_GEN_V4) f->main_row_bytes = m->head_dim * bf16_bytes();
        else if (bf16_main_row(m, &f->main_row_bytes) != KVL_OK) return KVL_EINVAL;
        f->index_key_bytes = m->generation == KVL_GEN_MHA || m->generation == KVL_GEN_MLA ? 0
                                                                                       : m->index_head_dim * bf16_bytes();
        f->window_row_bytes = m->generation == KVL_GEN_V4 || m->generation == KVL_GEN_V41 ? m->head_dim * bf16_bytes() : 0;
        return KVL_OK;
    case KVL_CACHE_V32_FP8:
        if (m->generation != KVL_GEN_DSA && m->generation != KVL_GEN_MLA) break;
        f->main_row_bytes = kvf_row_bytes(KVF_ROW_V32_MAIN);
        f->index_key_bytes = m->generation == KVL_GEN_DSA ? kvf_row_bytes(KVF_ROW_V32_INDEX) : 0;
        f->window_row_bytes = 0;
        if (row_fits(m, KVF_ROW_V32_MAIN, m->kv_lora_rank + m->qk_rope_head_dim, "kv_lora_rank + qk_rope_head_dim"))
            return KVL_EINVAL;
        return m->generation == KVL_GEN_DSA ? row_fits(m, KVF_ROW_V32_INDEX, m->index_head_dim, "index_head_dim")
                                            : KVL_OK;
    case KVL_CACHE_V4_FP8:
        /* V4's record; vLLM on Hopper stores V4.1's entries in it too (ref/serving.h) */
        if (m->generation != KVL_GEN_V4 && m->generation != KVL_GEN_V41) break;
        f->main_row_bytes = kvf_row_bytes(KVF_ROW_V4_MAIN);
        f->index_key_bytes = kvf_row_bytes(KVF_ROW_V4_INDEX);
        f->window_row_bytes = kvf_row_bytes(KVF_ROW_V4_MAIN);   /* the same row serves the window */
        if (row_fits(m, KVF_ROW_V4_MAIN, m->head_dim, "head_dim")) return KVL_EINVAL;
        return row_fits(m, KVF_ROW_V4_INDEX, m->index_head_dim, "index_head_dim");
    case KVL_CACHE_MLA_FP8:
        /* MLA's dense FP8 row: the latent and the RoPE key, every value one E4M3 byte under one
         * per-tensor scale kept beside the cache, not in the row (vLLM's MLAAttentionSpec
         * .real_page_size_bytes for kv_cache_dtype fp8: head_size 576 x 1 byte; SGLang's
         * MLATokenToKVPool in fp8_e4m3) */
        if (m->generation != KVL_GEN_MLA) break;
        f->main_row_bytes = (m->kv_lora_rank + m->qk_rope_head_dim) * kvf_element_bits(KVF_E4M3) / 8;
        f->index_key_bytes = f->window_row_bytes = 0;
        return KVL_OK;
    case KVL_CACHE_V41_FP4:
        if (m->generation != KVL_GEN_V41) break;
        f->main_row_bytes = kvf_row_bytes(KVF_ROW_V41_MAIN);
        f->index_key_bytes = kvf_row_bytes(KVF_ROW_V4_INDEX);   /* V4.1 keeps V4's MXFP4 key */
        f->window_row_bytes = kvf_row_bytes(KVF_ROW_V41_WINDOW);
        if (row_fits(m, KVF_ROW_V41_MAIN, m->head_dim, "head_dim")) return KVL_EINVAL;
        return row_fits(m, KVF_ROW_V4_INDEX, m->index_head_dim, "index_head_dim");
    }
    return kvl_fail(KVL_EINVAL, "%s: kv_cache %s does not apply to a %s model", m->path,
                    kvl_cache_layout_name(m->kv_cache), kvl_generation_name(m->generation));
}

const char *kvl_llama_cache_name(kvl_llama_cache c)
{
    static const char *const names[] = {"none", "f16", "q8_0", "q4_0"};
    return names[c];
}

int kvl_llama_cache_from_name(const char *name, kvl_llama_cache *out)
{
    for (int c = KVL_LLAMA_F16; c <= KVL_LLAMA_Q4_0; c++)
        if (strcmp(name, kvl_llama_cache_name((kvl_llama_cache)c)) == 0) {
            *out = (kvl_llama_cache)c;
            return KVL_OK;
        }
    return KVL_EINVAL;
}

const char *kvl_kv_cache_label(const kvl_model *m)
{
    static const char *const label[][2] = {{"", ""},
                                           {"f16 (llama.cpp)", "f16 K+V (llama.cpp)"},
                                           {"q8_0 (llama.cpp)", "q8_0 K+V (llama.cpp)"},
                                           {"q4_0 (llama.cpp)", "q4_0 K+V (llama.cpp)"}};
    if (m->llama_cache == KVL_LLAMA_NONE || m->kv_cache != KVL_CACHE_BF16) return kvl_cache_layout_name(m->kv_cache);
    return label[m->llama_cache][m->kv_whole_heads != 0];
}

int kvl_layer_stores_index_key(const kvl_model *m, size_t layer)
{
    return m->layers[layer].index_source == (int)layer;
}

int kvl_kv_footprint_of(kvl_kv_footprint *f, const kvl_model *m)
{
    *f = (kvl_kv_footprint){0};
    int rc = entry_parts(f, m);
    if (rc != KVL_OK) return rc;
    /* V4 and V4.1 keep a window branch in every layer, window-only or not */
    f->window_bytes_per_sequence = m->n_layers * m->window * f->window_row_bytes;
    for (size_t i = 0; i < m->n_layers; i++) {
        if (!kvl_layer_writes_cache(m, i)) continue;
        int keyed = f->index_key_bytes && kvl_layer_stores_index_key(m, i);
        double entries = 1.0 / (double)m->layers[i].compress_ratio;
        f->global_layers++;
        f->index_layers += (size_t)keyed;
        f->entries_per_token += entries;
        f->bytes_per_token += entries * (double)(f->main_row_bytes + (keyed ? f->index_key_bytes : 0));
    }
    f->bytes_per_entry = f->entries_per_token > 0 ? f->bytes_per_token / f->entries_per_token : 0;
    if (m->generation == KVL_GEN_MHA) f->bounded_tokens = m->window;   /* the loader's window: every layer's */
    return KVL_OK;
}

double kvl_kv_bytes_held(const kvl_kv_footprint *f, double T)
{
    const double held = f->bounded_tokens && T > (double)f->bounded_tokens ? (double)f->bounded_tokens : T;
    return held * f->bytes_per_token + (double)f->window_bytes_per_sequence;
}
