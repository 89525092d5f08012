/* A checkpoint's attention weights into a module's weights struct (one layer at a time).
 *
 * The namings real checkpoints use are read; which one a file uses is decided per layer by the first
 * tensor present, and each tensor is then looked up under that naming only:
 *   Hugging Face        model.layers.N.self_attn.<leaf>   (transformers' modeling_deepseek_v3/_v32, and
 *                                                          what transformers 5's save_pretrained writes for them)
 *   DeepSeek inference  layers.N.attn.<leaf>              (the inference code's model.py)
 *   transformers 5 V4   model.layers.N.attn.<inference leaf>, except kv_norm [Dh] as norm.weight: what
 *                       save_pretrained writes for DeepseekV4, its conversion mapping (conversion_mapping.py,
 *                       "deepseek_v4") reversed, the rename .norm. → .kv_norm. included
 * A projection's <name>.bias beside its <name>.weight is refused naming it: the modules add no bias
 * (transformers writes them only under attention_bias true, which kvlayer refuses).
 *
 *   field (ref/mla.h, ref/dsa.h)   Hugging Face leaf                  inference leaf
 *   w_dq    [Dq'][d]               q_a_proj.weight                    wq_a.weight
 *   q_norm  [Dq']                  q_a_layernorm.weight               q_norm.weight
 *   w_uq    [H·(Dnope+Dr)][Dq']    q_b_proj.weight                    wq_b.weight
 *   w_q     [H·(Dnope+Dr)][d]      q_proj.weight  (Dq' = 0)           wq.weight
 *   w_dkv   [Dc+Dr][d]             kv_a_proj_with_mqa.weight          wkv_a.weight
 *   kv_norm [Dc]                   kv_a_layernorm.weight              kv_norm.weight
 *   w_ukv   [H·(Dnope+Dv)][Dc]     kv_b_proj.weight                   wkv_b.weight
 *   w_o     [d][H·Dv]              o_proj.weight                      wo.weight
 *   w_iq    [HI·DI][Dq']           indexer.wq_b.weight                (the same leaves)
 *   w_ik    [DI][d]                indexer.wk.weight
 *   k_norm  [DI], k_bias [DI]      indexer.k_norm.weight, .bias
 *   w_iw    [HI][d]                indexer.weights_proj.weight
 *
 * V4 (ref/v4.h, transformers' modeling_deepseek_v4, the V4 inference model.py; the transformers 5 save
 * takes the inference column, attn.norm.weight for kv_norm):
 *   w_dq [Dq'][d]          q_a_proj.weight                    wq_a.weight
 *   q_norm [Dq']           q_a_norm.weight                    q_norm.weight
 *   w_uq [H·Dh][Dq']       q_b_proj.weight                    wq_b.weight
 *   w_kv [Dh][d]           kv_proj.weight                     wkv.weight
 *   kv_norm [Dh]           kv_norm.weight                     kv_norm.weight
 *   sinks [H]              sinks                              attn_sink
 *   w_oa [G·Do][(H/G)·Dh]  o_a_proj.weight                    wo_a.weight
 *   w_ob [d][G·Do]         o_b_proj.weight                    wo_b.weight
 *   compressor (CSA, HCA): W_C, W_Z [(1+ov)·Dh][d], B [M][(1+ov)·Dh], gain [Dh]
 *                          compressor.{kv_proj.weight, gate_proj.weight, position_bias, kv_norm.weight}
 *                                                             compressor.{wkv.weight, wgate.weight, ape, norm.weight}
 *   indexer (CSA): w_iq [HI·DI][Dq'], w_iw [HI][d], its compressor at width DI
 *                          compressor.indexer.{q_b_proj.weight, scorer.weights_proj.weight, kv_proj.weight, ...}
 *                                                             indexer.{wq_b.weight, weights_proj.weight,
 *                                                             compressor.wkv.weight, ...}
 *
 * V4.1 (ref/v41.h) has no transformers class; the inference/model.py published with DeepSeek-V4.1-Flash names, under
 * layers.N.attn.: V4's core names above except wo_a, a bare parameter there ("wo_a", no ".weight"); a KV
 * source's compressor.{wkv.weight, wgate.weight (M > 1), norm.weight} and indexer.{wk.weight [DI][Dh],
 * k_norm.weight}; an index source's indexer.{wq_b.weight, weights_proj.weight}.
 * The layouts are the modules' own: both codes keep [c_kv | k_rope] in that order and, by default, the
 * rotary channels interleaved (transformers' rope_interleave true); only a checkpoint whose config
 * says otherwise has rows rearranged (mla_weights_load). An FP8
 * weight is dequantised through its block scales (ref/core/weight_read.h). */
#ifndef KVL_WEIGHTS_LOAD_H
#define KVL_WEIGHTS_LOAD_H

#include <stddef.h>

#include "v41.h"
#include "dsa.h"
#include "mla.h"
#include "v4.h"
#include "safetensors.h"

/* w ← layer `layer` of c, allocated for cfg (mla_weights_alloc). KVL_EINVAL naming the file and tensor
 * when one is missing or of another shape; on failure *w is empty.
 * `rope` is how the checkpoint's own code rotates (the model's kvl_model.rope): where transformers
 * multiplies cos and sin by an attention factor, or pairs the rotary channels (i, i + Dr/2)
 * (rope_interleave false), the difference is folded into the rows that make q^R and k_rope (and the
 * indexer's rotary rows and key-norm gain and bias for the factor), so the modules, which pair
 * (2i, 2i+1) with no factor, compute what that code computes. */
int mla_weights_load(mla_weights *w, const mla_config *cfg, const kvl_rope_config *rope, const kvl_st_checkpoint *c,
                     size_t layer);
int dsa_weights_load(dsa_weights *w, const dsa_config *cfg, const kvl_rope_config *rope, const kvl_st_checkpoint *c,
                     size_t layer);
int v4_weights_load(v4_weights *w, const v4_config *cfg, const kvl_st_checkpoint *c, size_t layer);
/* The inference naming only. */
int v41_weights_load(v41_weights *w, const v41_config *cfg, const kvl_st_checkpoint *c, size_t layer);

#endif
