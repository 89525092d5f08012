/* A model's parameters counted from its config's shapes, and the bytes they take at a precision
 * (chapter 9). Attention is counted from the sizes tables the ref/ modules cut their weights by
 * (mha.h, mla.h, dsa.h, v4.h, v41.h), so the count is of the tensors this project computes with; the
 * rest from the config's vocabulary and feed-forward fields (config.h, kvl_ffn):
 *
 *   embedding V·d; head V·d unless tied; final norm d;
 *   per layer: attention; two RMSNorm gains 2d; a dense FFN 3·d·I (SwiGLU: gate, up, down; 2·d·I for
 *   Falcon's MLP, kvl_ffn.ffn_matrices) in the first n_dense_layers, else n_routed + n_shared experts of
 *   3·d·I_moe each and a router of n_routed·d
 *   weights and n_routed biases (V3's e_score_correction_bias; V2's router has none, a difference of
 *   160 a layer that this count keeps);
 *   an MTP module: one more layer shaped as the last, its projection 2d·d and two norm gains 2d, the
 *   embedding and head shared (DeepSeek-V3's README_WEIGHTS).
 *
 * plus attention's biases where the config has them (kvl_model.attention_bias: q, k, v and o of MHA, or
 * MLA's q_a_proj, kv_a_proj_with_mqa and o_proj, as transformers' modeling files build them).
 *
 * Not counted, where a config has them: V4/V4.1's hyper-connection mixers (hc_mult), V4.1's Engram
 * tables, DSpark layers and vision tower, Falcon's linear biases and LayerNorm shifts. */
#ifndef KVL_PARAMS_H
#define KVL_PARAMS_H

#include <stdint.h>

#include "config.h"

typedef struct {
    uint64_t embedding, head, norms;
    uint64_t attention;            /* every backbone layer's attention weights */
    uint64_t dense_ffn;            /* the dense FFN layers */
    uint64_t routed_experts, shared_experts, routers;
    uint64_t backbone;             /* all of the above */
    uint64_t mtp;                  /* the MTP modules' own parameters */
    uint64_t active;               /* one token's share of the backbone: embedding row aside, everything
                                    * but the routed experts it is not routed to */
} kvl_params;

/* p = the parameter count of m. KVL_EINVAL naming the file when its attention cannot be shaped. */
int kvl_params_of(kvl_params *p, const kvl_model *m);

/* Bytes of the backbone and MTP weights when the linear weights of attention and FFN are stored as
 * `linear` and the routed and shared experts as `experts`; embedding, head, norms and routers stay
 * bf16. FP8: 1 byte a weight and one scale per 128 × 128 block (4 bytes, or 1 when scale_e8m0),
 * counted as one per 16,384 weights, exact where both dims of a matrix are multiples of 128; FP4:
 * MXFP4, half a byte a weight and one E8M0 byte per 32. */
double kvl_params_bytes(const kvl_params *p, kvl_weight_format linear, kvl_weight_format experts, int scale_e8m0);

#endif
