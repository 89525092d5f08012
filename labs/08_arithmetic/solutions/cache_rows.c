/* Lab solution: the bytes of the rows a model's cache stores (the contract is above the stub,
 * labs/08_arithmetic/cache_rows.c). */
#include "lab.h"

#include "element.h"
#include "rows.h"

/* every value in bf16 */
static kv_rows bf16_rows(const kvl_model *m)
{
    const size_t b = kvf_element_bits(KVF_BF16) / 8;
    switch (m->generation) {
    case KVL_GEN_MHA:
        return (kv_rows){m->n_kv_heads * (m->head_dim + m->v_head_dim) * b, 0, 0};
    case KVL_GEN_MLA:
        return (kv_rows){(m->kv_lora_rank + m->qk_rope_head_dim) * b, 0, 0};
    case KVL_GEN_DSA:
        return (kv_rows){(m->kv_lora_rank + m->qk_rope_head_dim) * b, m->index_head_dim * b, 0};
    default: /* V4, V4.1: one shared entry of head_dim values, in the cache and in the window */
        return (kv_rows){m->head_dim * b, m->index_head_dim * b, m->head_dim * b};
    }
}

kv_rows cache_rows(const kvl_model *m)
{
    switch (m->kv_cache) {
    case KVL_CACHE_V32_FP8:
        return (kv_rows){kvf_row_bytes(KVF_ROW_V32_MAIN),
                         m->generation == KVL_GEN_DSA ? kvf_row_bytes(KVF_ROW_V32_INDEX) : 0, 0};
    case KVL_CACHE_V4_FP8:
        return (kv_rows){kvf_row_bytes(KVF_ROW_V4_MAIN), kvf_row_bytes(KVF_ROW_V4_INDEX),
                         kvf_row_bytes(KVF_ROW_V4_MAIN)};
    case KVL_CACHE_MLA_FP8:   /* latent and RoPE key, one E4M3 byte a value */
        return (kv_rows){(m->kv_lora_rank + m->qk_rope_head_dim) * (kvf_element_bits(KVF_E4M3) / 8),
                         0, 0};
    case KVL_CACHE_V41_FP4:
        return (kv_rows){kvf_row_bytes(KVF_ROW_V41_MAIN), kvf_row_bytes(KVF_ROW_V4_INDEX),
                         kvf_row_bytes(KVF_ROW_V41_WINDOW)};
    default:
        return bf16_rows(m);
    }
}
