#!/usr/bin/env python3
"""Every field a config.json of the model types kvlineage reads may hold, with the code that defines it:
tests/data/config_fields.tsv, one "writer<TAB>field" a line. tests/test_core_config_fields.c holds the loader's
field table (ref/core/config_fields.c) to this list, so that a field the writers define and the table lacks
fails the suite.

Writers:
  base           transformers' PretrainedConfig.to_dict() (every model type), plus the older keys every class
                 still accepts and converts (LEGACY_BASE)
  v2 v3 v32 v4   transformers' DeepseekV2Config ... DeepseekV4Config: to_dict() keys, attribute_map aliases,
                 and the legacy keywords their __post_init__ pops (V4: compress_ratios, compress_rate_csa,
                 compress_rate_hca, num_hash_layers, qk_rope_head_dim; V3.2: num_experts)
  llama mistral mixtral qwen2 qwen3 gemma falcon   the same for those classes (Falcon: n_embed)
  hub            the keys DeepSeek's own Hugging Face configs (configuration_deepseek.py, V2 and V3) add
  ds3 ds32 ds4 ds41   the inference code's ModelArgs: DeepSeek-V3 inference/model.py (V2 and V3),
                 DeepSeek-V3.2-Exp inference/model.py, the V4-Flash and V4.1-Flash inference configs
  kvlineage      this project's own keys

  pip install transformers   # 5.25 wrote the committed list
  python3 tests/gen_config_fields.py
"""
import os

import transformers

CLASSES = {"v2": "DeepseekV2Config", "v3": "DeepseekV3Config", "v32": "DeepseekV32Config", "v4": "DeepseekV4Config",
           "llama": "LlamaConfig", "mistral": "MistralConfig", "mixtral": "MixtralConfig", "qwen2": "Qwen2Config",
           "qwen3": "Qwen3Config", "gemma": "GemmaConfig", "falcon": "FalconConfig"}
LEGACY = {"v4": ["compress_ratios", "compress_rate_csa", "compress_rate_hca", "num_hash_layers", "qk_rope_head_dim"],
          "v32": ["num_experts"], "falcon": ["n_embed"]}
# older keys every class still reads: the rotary settings before rope_parameters, the dtype before dtype, and
# what a quantizer stores on any config
LEGACY_BASE = ["rope_scaling", "rope_theta", "torch_dtype", "quantization_config"]
HUB = ["ep_size", "moe_layer_freq", "aux_loss_alpha", "seq_aux", "scoring_func", "topk_method",
       "num_nextn_predict_layers", "auto_map", "quantization_config", "torch_dtype"]
DS3 = ["max_batch_size", "max_seq_len", "dtype", "vocab_size", "dim", "inter_dim", "moe_inter_dim", "n_layers",
       "n_dense_layers", "n_heads", "n_routed_experts", "n_shared_experts", "n_activated_experts", "n_expert_groups",
       "n_limited_groups", "score_func", "route_scale", "q_lora_rank", "kv_lora_rank", "qk_nope_head_dim",
       "qk_rope_head_dim", "v_head_dim", "original_seq_len", "rope_theta", "rope_factor", "beta_fast", "beta_slow",
       "mscale"]
DS32 = DS3 + ["scale_fmt", "index_n_heads", "index_head_dim", "index_topk"]
DS4 = ["max_batch_size", "max_seq_len", "dtype", "scale_fmt", "expert_dtype", "vocab_size", "dim", "moe_inter_dim",
       "n_layers", "n_hash_layers", "n_mtp_layers", "n_heads", "n_routed_experts", "n_shared_experts",
       "n_activated_experts", "score_func", "route_scale", "swiglu_limit", "q_lora_rank", "head_dim", "rope_head_dim",
       "norm_eps", "o_groups", "o_lora_rank", "window_size", "compress_ratios", "compress_rope_theta",
       "original_seq_len", "rope_theta", "rope_factor", "beta_fast", "beta_slow", "index_n_heads", "index_head_dim",
       "index_topk", "hc_mult", "hc_sinkhorn_iters", "hc_eps"]
DS41_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "ref", "configs", "deepseek-v4.1-flash.json")


def main():
    import json
    rows = set()
    base = transformers.PretrainedConfig().to_dict().keys()
    rows |= {("base", k) for k in base} | {("base", k) for k in LEGACY_BASE}
    for w, name in CLASSES.items():
        cls = getattr(transformers, name)
        rows |= {(w, k) for k in cls().to_dict() if k not in base}
        rows |= {(w, k) for k in getattr(cls, "attribute_map", {})}
        rows |= {(w, k) for k in LEGACY.get(w, [])}
    rows |= {("hub", k) for k in HUB} | {("ds3", k) for k in DS3} | {("ds32", k) for k in DS32}
    rows |= {("ds4", k) for k in DS4}
    with open(DS41_CONFIG) as f:
        rows |= {("ds41", k) for k in json.load(f) if not k.startswith("_")}
    rows |= {("kvlineage", "_kvlineage"), ("kvlineage", "_source")}
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "config_fields.tsv")
    with open(out, "w") as f:
        f.write(f"# written by tests/gen_config_fields.py from transformers {transformers.__version__}\n")
        for w, k in sorted(rows):
            f.write(f"{w}\t{k}\n")


if __name__ == "__main__":
    main()
