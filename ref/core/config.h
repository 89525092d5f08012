/* kvl_model: one model's config.json, read and validated.
 *
 * Reads every spelling real files use: the Hugging Face config.json (hidden_size, num_hidden_layers,
 * rope_scaling{...}), what transformers 5's save_pretrained writes (rope_parameters{...}, V4's
 * layer_types and compress_rates), and DeepSeek's inference config (dim, n_layers, rope_factor, ...).
 * Each field means what the code that writes that spelling computes with it; where the project does
 * not compute that (a rope type other than default and yarn, rope_interleave false on V4) the file is
 * refused naming the field, and one setting given in two places with two values is refused.
 *
 * Who wrote the file decides what its fields mean:
 *   - a model_type: transformers' configuration class for it, one of kvl_model_types() (its class
 *     defaults where a field is absent, its attribute_map aliases, its window rule: Mistral slides every
 *     layer, Qwen2/3 only under use_sliding_window from max_window_layers on, Llama and Gemma never;
 *     Falcon's KV heads from multi_query and new_decoder_architecture). Any other model_type is refused
 *     naming it, with the reason where the project knows one (alternating windows, layers without
 *     attention). A field of another generation than the type's (index_topk under deepseek_v3) is refused.
 *   - no model_type: DeepSeek's inference ModelArgs, or a hand-written Llama-shaped file; the attention
 *     generation is recognised from the fields present: kv_source_layers → V4.1 (CSA2), compress_ratios /
 *     compress_rates / layer_types of V4's kinds → V4, index_topk → V3.2 (DSA), kv_lora_rank → V2/V3
 *     (MLA), otherwise MHA/GQA/MQA.
 * Which fields each writer defines, and whether the loader reads, ignores or holds each at its default, is
 * the table of ref/core/config_fields.h, with the rule applied to keys outside it.
 *
 * An optional "_kvlineage" object carries what no published config states: a display "name", a
 * release "date", a one-line "mechanism", "headline" (true for the generations the V4.1-Flash model
 * card's chart shows), and "kv_cache", the deployed cache layout (default by
 * generation: bf16 for MHA and MLA, the FP8 rows for V3.2 and V4, the FP4 rows for V4.1).
 * "_source" is free text naming where the file came from; it is not read. */
#ifndef KVL_CONFIG_H
#define KVL_CONFIG_H

#include <stddef.h>

typedef enum { KVL_GEN_MHA, KVL_GEN_MLA, KVL_GEN_DSA, KVL_GEN_V4, KVL_GEN_V41 } kvl_generation;

/* How a layer attends (chapters 1 to 7 teach each kind). */
typedef enum {
    KVL_LAYER_DENSE,    /* full causal attention over its own cache (MHA/GQA/MQA, MLA) */
    KVL_LAYER_SPARSE,   /* V3.2: MLA over the top-k its own lightning indexer picks */
    KVL_LAYER_WINDOW,   /* V4/V4.1 compress ratio 0: the W-row window only */
    KVL_LAYER_CSA,      /* V4 (ratio 4 in V4-Flash): window + top-k of its own overlapped compressed entries */
    KVL_LAYER_HCA,      /* V4 (ratio 128 in V4-Flash): window + every visible compressed entry */
    KVL_LAYER_FULL,     /* V4.1 KV source: own compressor, index keys, indexer and top-k */
    KVL_LAYER_REINDEX,  /* V4.1: the latest source's entries, re-scored by its own index queries */
    KVL_LAYER_REUSE,    /* V4.1: the latest source's entries and the latest indexer's top-k */
} kvl_layer_kind;

/* Biases of attention's projections: those into it (q, k and v; MLA's q_a_proj and kv_a_proj_with_mqa),
 * and the output projection. */
enum { KVL_BIAS_IN = 1, KVL_BIAS_OUT = 2 };

/* The cache type llama.cpp keeps for a model read from a GGUF file (its -ctk / -ctv; f16 unless told
 * otherwise): f16 two bytes a value, as bf16; q8_0 and q4_0 ggml blocks of 32 values, a 2-byte scale and
 * 32 or 16 bytes of codes (34 or 18 bytes). NONE: a config.json's model, priced by kv_cache alone. */
typedef enum { KVL_LLAMA_NONE, KVL_LLAMA_F16, KVL_LLAMA_Q8_0, KVL_LLAMA_Q4_0 } kvl_llama_cache;

/* The deployed KV cache layout, which fixes the bytes of one entry (formats/rows.h). */
typedef enum { KVL_CACHE_BF16, KVL_CACHE_V32_FP8, KVL_CACHE_V4_FP8, KVL_CACHE_V41_FP4, KVL_CACHE_MLA_FP8 } kvl_cache_layout;

typedef struct {
    kvl_layer_kind kind;
    size_t compress_ratio;  /* M: tokens per compressed entry; 1 for dense/sparse layers; 0 for window-only */
    int kv_source;          /* layer whose global cache this layer reads (itself if it writes one); -1: none */
    int index_source;       /* layer whose top-k this layer uses (itself if it runs an indexer); -1: none */
} kvl_layer;

/* One rotary table's settings, with the meaning of the code that wrote the file (config.c, "rotary
 * settings"): a layer built from them computes what that code computes. */
typedef struct {
    double theta;           /* rope_theta */
    double factor;          /* YaRN factor; 1 = no YaRN */
    double original_len;    /* original_max_position_embeddings / original_seq_len */
    double beta_fast, beta_slow;
    double mscale;          /* m = 0.1·mscale·ln(factor) + 1 multiplies the softmax scale twice: DeepSeek's
                             * mscale, transformers' mscale_all_dim; 0: no such factor */
    double attention_factor;  /* transformers' factor on cos and sin (the rotary q and k channels): its
                               * attention_factor, or derived from mscale and mscale_all_dim; 1 in
                               * DeepSeek's inference code */
    int interleaved;        /* 1: pairs (2i, 2i+1), DeepSeek's layout (rope_interleave true); 0: (i, i + Dr/2) */
} kvl_rope_config;

/* Where a config keeps its rotary settings, which fixes what its YaRN fields mean. */
typedef enum {
    KVL_ROPE_PLAIN,        /* no YaRN field: plain RoPE at rope_theta */
    KVL_ROPE_SCALING,      /* transformers: a "rope_scaling" object beside rope_theta */
    KVL_ROPE_PARAMETERS,   /* transformers 5: a "rope_parameters" object (V4: one per rope kind) */
    KVL_ROPE_FLAT,         /* DeepSeek's inference code: rope_factor, original_seq_len, mscale, ... */
} kvl_rope_spelling;

/* How a checkpoint stores a group of weights. */
typedef enum {
    KVL_WEIGHTS_BF16,       /* 2 bytes a weight (bf16 or float16) */
    KVL_WEIGHTS_F32,        /* 4 bytes a weight */
    KVL_WEIGHTS_FP8,        /* E4M3, one scale per 128 × 128 block (dtype "fp8", quantization_config fp8) */
    KVL_WEIGHTS_FP4,        /* MXFP4: E2M1, one E8M0 scale per 32 (expert_dtype "fp4") */
} kvl_weight_format;

/* What the parameter count reads besides attention: the vocabulary, the feed-forward networks, the
 * residual copies and the checkpoint's precision. Every count is 0 where the config does not state it. */
typedef struct {
    size_t vocab_size;
    int tied_embeddings;                   /* tie_word_embeddings: the head is the embedding */
    size_t inter_dim;                      /* a dense FFN's width (intermediate_size / inter_dim) */
    size_t ffn_matrices;                   /* matrices of d·width in one FFN: 3 gated (SwiGLU, GeGLU), 2 Falcon's MLP */
    size_t moe_inter_dim;                  /* one expert's width (moe_intermediate_size / moe_inter_dim) */
    size_t n_dense_layers;                 /* leading layers with a dense FFN (first_k_dense_replace) */
    size_t n_routed_experts, n_shared_experts;
    size_t n_activated_experts;            /* routed experts a token uses (num_experts_per_tok) */
    size_t n_mtp_layers;                   /* num_nextn_predict_layers / n_mtp_layers */
    size_t hc_mult;                        /* hyper-connection copies of the residual (V4, V4.1) */
    kvl_weight_format linear, experts;     /* as the checkpoint ships them */
    int scale_e8m0;                        /* FP8 block scales are E8M0 (1 byte), else float32 */
    unsigned ggml_file_type;               /* a GGUF file's general.file_type when its weights are ggml's
                                            * quantised blocks, which no format above prices; 0: none */
} kvl_ffn;

typedef struct {
    char path[512];         /* the file it came from, for messages */
    char name[96], date[16], mechanism[160];
    int headline;           /* one of the generations the V4.1-Flash model card charts */
    kvl_generation generation;
    kvl_cache_layout kv_cache;
    kvl_llama_cache llama_cache;  /* a GGUF file's: the bf16 layout's values in llama.cpp's cache type */
    int kv_whole_heads;     /* the cache holds K (n_kv_heads x head_dim) and V (n_kv_heads x v_head_dim) of every
                             * layer whatever the generation: llama.cpp's cache for a deepseek2 GGUF converted
                             * without the MLA split */

    size_t d;               /* model width */
    size_t n_layers;        /* backbone layers (MTP / DSpark layers are not counted) */
    size_t n_heads, n_kv_heads, head_dim;
    size_t q_lora_rank;     /* Dq'; 0 = query projected directly (V2-Lite) */
    size_t kv_lora_rank;    /* Dc (MLA, DSA) */
    size_t qk_nope_head_dim, qk_rope_head_dim, v_head_dim;  /* qk_rope_head_dim is Dr for every generation */
    size_t window;          /* W; 0 = no window */
    size_t index_n_heads, index_head_dim, index_topk;
    size_t o_groups, o_lora_rank;
    size_t candidate_source_layer, candidate_topk_blocks, candidate_block_size;  /* V4.1 */
    double norm_eps;
    unsigned attention_bias;  /* KVL_BIAS_*: which attention projections carry biases, as the type's modeling file
                               * builds them (attention_bias; Qwen2's q, k and v always; V4's never) */
    kvl_rope_spelling rope_spelling;
    kvl_rope_config rope;           /* queries and keys of MLA/DSA; ratio-0 layers of V4/V4.1 */
    kvl_rope_config compress_rope;  /* V4/V4.1 layers with a compressor (theta = compress_rope_theta) */
    kvl_ffn ffn;

    kvl_layer *layers;      /* [n_layers] */
} kvl_model;

/* Read and validate `path`. On failure returns KVL_E* with kvl_error() naming the file, the field
 * and the value, and leaves *m empty (nothing to free). */
int  kvl_model_load(kvl_model *m, const char *path);
/* The same from JSON text already in memory; `origin` names it in messages. */
int  kvl_model_parse(kvl_model *m, const char *json, size_t len, const char *origin);
void kvl_model_free(kvl_model *m);

const char *kvl_generation_name(kvl_generation g);   /* "MHA", "MLA", "DSA", "V4", "V4.1" */
/* The attention as a reader names it: for the MHA generation by its KV heads, "MHA" (as many as
 * query heads), "MQA" (one) or "GQA-8" (eight); for the others the generation's name. Written into
 * buf (cap bytes, always terminated); returns buf. */
const char *kvl_attention_name(const kvl_model *m, char *buf, size_t cap);
const char *kvl_layer_kind_name(kvl_layer_kind k);   /* "dense", "sparse", "window", "CSA", ... */
const char *kvl_cache_layout_name(kvl_cache_layout c);  /* "bf16", "v32-fp8", "v4-fp8", "v41-fp4", "mla-fp8" */
/* The model_type values this project reads, each with the meaning of transformers' configuration class for
 * it, as "llama, mistral, ..." (a file without model_type is read in DeepSeek's inference spelling or as a
 * plain Llama-shaped file). Any other model_type is refused naming it. */
void kvl_model_types(char *out, size_t cap);

/* One line on how the rotary settings were read, e.g. "rotary: YaRN factor 4 from rope_parameters, as
 * transformers computes it: cos and sin x 1.13863, softmax scale x 1" (under 192 bytes). */
void kvl_rope_describe(char *out, size_t cap, const kvl_model *m);

/* The lineage's order, for qsort: by _kvlineage.date, then by name. */
int kvl_model_date_order(const kvl_model *a, const kvl_model *b);

/* A layer writes a global (per-token) cache: it is its own KV source and not window-only. */
int kvl_layer_writes_cache(const kvl_model *m, size_t layer);

#endif
