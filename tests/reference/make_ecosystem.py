#!/usr/bin/env python3
"""Checkpoints as the ecosystem writes them: tiny random DeepSeek attention layers whose config.json was
written by transformers' own save_pretrained (or, for DeepSeek's inference spelling, as DeepSeek's
inference configs are written), each with the transformers module's output, so that tests/test_ecosystem.c
can hold the C loader and kvlayer to what the code that wrote each file computes.

For each case it writes tests/reference/ecosystem/<case>/:
  config.json          transformers' DeepseekV3Config / V32Config / V4Config(...).save_pretrained(dir), or the
                       hand-written inference spelling (case v3_deepseek_flat)
  model.safetensors    layer 0's attention weights in bfloat16 under the checkpoint names (layers 0-2 for V4),
                       "x" [T][d] the hidden states, "out" [T][d] the module's output (V4: "out.N" per layer);
                       metadata: the torch and transformers versions, the seed, the referee, what the case tests
  x_f64.safetensors    (v3_rope_parameters only) the same "x" stored as float64, numpy's default

  v3_rope_parameters   transformers 5 spelling: rope_parameters {rope_theta 50000, yarn, ...}, no top-level
                       rope_theta or rope_scaling
  v3_no_interleave     rope_interleave false: transformers rotates the pairs (i, i + Dr/2)
  v3_mscale_differs    mscale 0.707 beside mscale_all_dim 1: cos and sin carry m(0.707)/m(1)
  v3_yarn_no_mscale    YaRN with no mscale keys: cos and sin carry m(factor, 1), the softmax scale none
  v3_deepseek_flat     DeepSeek's inference spelling (dim, rope_factor, original_seq_len, no mscale): the
                       inference code's YaRN, the softmax scale times m(factor, 1)^2 and plain cos and sin;
                       the referee is transformers' module with mscale = mscale_all_dim = 1, which computes
                       the same; weights under the inference names (layers.0.attn.*)
  v32_yarn_no_mscale   V3.2 with YaRN and no mscale keys: the factor on cos and sin reaches the indexer too
  v4_layer_types       V4 by transformers 5: layer_types and compress_rates (CSA at ratio 2, HCA at ratio 4,
                       which DeepSeek's compress_ratios spelling would read as CSA), nested rope_parameters
  v3_norm_eps          rms_norm_eps 1e-2: transformers' latent norms (q_a_layernorm, kv_a_layernorm) keep their
                       own 1e-6
  v4_saved_sharded     a whole DeepseekV4ForCausalLM (layers as v4_layer_types, a smaller MoE and hc_mult 2)
                       saved by save_pretrained in bfloat16 over two shards and model.safetensors.index.json, under
                       the names transformers 5 writes (model.layers.N.attn.wq_a.weight, ..., attn.norm.weight);
                       io.safetensors holds "x" and each attention layer's output "out.N" in float64
  v3_saved_sharded     a whole two-layer DeepseekV3ForCausalLM (one dense MLP, one small MoE) saved the same way, its
                       attention under model.layers.N.self_attn.; YaRN in rope_parameters, mscale = mscale_all_dim
  v32_saved_sharded    the same for DeepseekV32ForCausalLM, plain rope; the indexer keeps 5 of the 16 tokens, each
                       layer drawn with a clear top-k margin
  v4_flash             config.json only: ref/configs/deepseek-v4-flash.json (the published file) loaded into
                       DeepseekV4Config and saved again, as a transformers 5 user's checkpoint carries it

  pip install torch transformers safetensors
  python3 tests/reference/make_ecosystem.py [case ...]   (cases: v3, v32, v4 (each a group), v3_norm_eps,
                                                          v4_saved_sharded, v3_saved_sharded, v32_saved_sharded;
                                                          none: all)
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_v3
from transformers.models.deepseek_v32 import modeling_deepseek_v32 as hf_v32
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf_v4

import make_reference as mr

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ecosystem")
SEED = 20261201
MOE = {"vocab_size": 32, "moe_intermediate_size": 32, "n_routed_experts": 4, "num_experts_per_tok": 2}
MLA = {"hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
       "q_lora_rank": 32, "kv_lora_rank": 24, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 12,
       "rms_norm_eps": 1e-6, "max_position_embeddings": 8192, "attention_bias": False, "intermediate_size": 64,
       "first_k_dense_replace": 1, **MOE}
YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0, "original_max_position_embeddings": 2048}
# the inference code's names for transformers' leaves (ref/weights_load.h)
DS_NAMES = {"q_a_proj": "wq_a", "q_a_layernorm": "q_norm", "q_b_proj": "wq_b", "kv_a_proj_with_mqa": "wkv_a",
            "kv_a_layernorm": "kv_norm", "kv_b_proj": "wkv_b", "o_proj": "wo"}


def save(case, config_text, tensors, x, outs, referee, what, extra_files=()):
    folder = os.path.join(HERE, case)
    os.makedirs(folder, exist_ok=True)
    if config_text is not None:   # otherwise save_pretrained wrote config.json
        with open(os.path.join(folder, "config.json"), "w") as f:
            f.write(config_text)
    tensors = dict(tensors, x=x.to(torch.float32).contiguous())
    tensors.update({k: v[0].to(torch.float32).contiguous() for k, v in outs.items()})
    meta = {"torch_version": torch.__version__, "transformers_version": transformers.__version__,
            "seed": str(SEED), "referee": referee, "case": what, "tokens": str(x.shape[0])}
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(folder, "model.safetensors"), metadata=meta)
    for name, t in extra_files:
        save_file({"x": t.contiguous()}, os.path.join(folder, name), metadata=meta)


def v3_config(rope, **extra):
    cfg = transformers.DeepseekV3Config(**dict(MLA, **extra), rope_parameters=rope)
    cfg._attn_implementation = "eager"
    return cfg


def v3_case(gen, case, cfg, what, names=None, config_text=None, extra_f64=False):
    module = hf_v3.DeepseekV3Attention(cfg, 0).double()
    mr.randomise(module, gen)
    tensors = mr.store(module, fp8=False)
    if names:
        tensors = {names(k): v for k, v in tensors.items()}
    x = torch.randn(1, mr.T, cfg.hidden_size, generator=gen, dtype=torch.float64).to(torch.float32).double()
    out = mr.run(module, hf_v3.DeepseekV3RotaryEmbedding(cfg), x)
    folder = os.path.join(HERE, case)
    if config_text is None:
        cfg.save_pretrained(folder)
    extra = [("x_f64.safetensors", x[0])] if extra_f64 else []
    save(case, config_text, tensors, x[0], {"out": out}, "transformers DeepseekV3Attention", what, extra)


def ds_name(hf_name):
    leaf = hf_name[len(mr.PREFIX):]
    module, rest = leaf.split(".", 1)
    return "layers.0.attn." + DS_NAMES[module] + "." + rest


def make_v3(gen):
    v3_case(gen, "v3_rope_parameters", v3_config(dict(YARN, rope_theta=50000.0, mscale=1.0, mscale_all_dim=1.0)),
            "rope_parameters with rope_theta 50000 and no top-level rope_theta", extra_f64=True)
    v3_case(gen, "v3_no_interleave", v3_config(dict(YARN, mscale=1.0, mscale_all_dim=1.0), rope_interleave=False),
            "rope_interleave false: pairs (i, i + Dr/2)")
    v3_case(gen, "v3_mscale_differs", v3_config(dict(YARN, mscale=0.707, mscale_all_dim=1.0)),
            "mscale 0.707 beside mscale_all_dim 1.0")
    v3_case(gen, "v3_yarn_no_mscale", v3_config(dict(YARN)), "YaRN with no mscale keys (transformers' convention)")
    flat = {"dim": 64, "n_layers": 1, "n_heads": 4, "q_lora_rank": 32, "kv_lora_rank": 24, "qk_nope_head_dim": 16,
            "qk_rope_head_dim": 8, "v_head_dim": 12, "norm_eps": 1e-6, "rope_theta": 10000.0, "rope_factor": 4.0,
            "original_seq_len": 2048, "beta_fast": 32, "beta_slow": 1}
    v3_case(gen, "v3_deepseek_flat", v3_config(dict(YARN, mscale=1.0, mscale_all_dim=1.0)),
            "DeepSeek's inference spelling with no mscale (its default 1.0); inference names",
            names=ds_name, config_text=json.dumps(flat, indent=2) + "\n")


def make_v32(gen):
    cfg = transformers.DeepseekV32Config(**MLA, rope_parameters=dict(YARN), index_n_heads=2, index_head_dim=16,
                                         index_topk=5)
    cfg._attn_implementation = "eager"
    rotary = hf_v32.DeepseekV32RotaryEmbedding(cfg)
    for _ in range(100):
        module = hf_v32.DeepseekV32Attention(cfg, 0).double()
        mr.randomise(module, gen)
        tensors = mr.store(module, fp8=False)
        x = torch.randn(1, mr.T, cfg.hidden_size, generator=gen, dtype=torch.float64).to(torch.float32).double()
        if mr.topk_margin(module, rotary, x, cfg.index_topk) > 1e-3:
            break
    else:
        raise SystemExit("no draw with a clear top-k margin")
    out = mr.run(module, rotary, x)
    case = "v32_yarn_no_mscale"
    cfg.save_pretrained(os.path.join(HERE, case))
    save(case, None, tensors, x[0], {"out": out}, "transformers DeepseekV32Attention",
         "V3.2, YaRN with no mscale keys: the factor on cos and sin in the indexer too")


def make_v4(gen):
    dims = {k: v for k, v in mr.V4_DIMS.items() if k not in ("compress_ratios", "rope_scaling", "qk_rope_head_dim")}
    types = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
    rates = {"compressed_sparse_attention": 2, "heavily_compressed_attention": 4}
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "beta_fast": 32,
               "beta_slow": 1}
    cfg = transformers.DeepseekV4Config(**dims, layer_types=types, qk_rope_head_dim=8, compress_rates=rates,
                                        rope_parameters=scaling, num_nextn_predict_layers=0, **MOE)
    cfg._attn_implementation = "eager"
    rotary = hf_v4.DeepseekV4RotaryEmbedding(cfg)
    keep = ("sinks", "position_bias", "norm")
    for _ in range(100):
        layers = [hf_v4.DeepseekV4Attention(cfg, i).double() for i in range(3)]
        tensors = {}
        for i, module in enumerate(layers):
            mr.randomise(module, gen)
            tensors.update(mr.store(module, fp8=False, prefix=f"model.layers.{i}.self_attn.", keep_f32=keep))
        x = torch.randn(1, mr.V4_T, cfg.hidden_size, generator=gen, dtype=torch.float64).to(torch.float32).double()
        if mr.v4_topk_margin(layers[1], rotary, x, cfg.index_topk, 2) > 1e-3:
            break
    else:
        raise SystemExit("no draw with a clear top-k margin")
    outs = {f"out.{i}": mr.run_v4(module, rotary, x) for i, module in enumerate(layers)}
    case = "v4_layer_types"
    cfg.save_pretrained(os.path.join(HERE, case))
    save(case, None, tensors, x[0], outs, "transformers DeepseekV4Attention",
         "V4 by transformers 5: layer_types, compress_rates CSA 2 and HCA 4, nested rope_parameters")


def make_v4_flash():
    with open(os.path.join(os.path.dirname(HERE), "..", "..", "ref", "configs", "deepseek-v4-flash.json")) as f:
        published = {k: v for k, v in json.load(f).items() if not k.startswith("_")}
    transformers.DeepseekV4Config(**published).save_pretrained(os.path.join(HERE, "v4_flash"))


def make_v3_norm_eps(gen):
    v3_case(gen, "v3_norm_eps", v3_config(dict(YARN, mscale=1.0, mscale_all_dim=1.0), rms_norm_eps=1e-2),
            "rms_norm_eps 1e-2: the latent norms keep their own 1e-6")


def bf16_rounded(module):
    """The module's parameters rounded to bfloat16, as a bfloat16 save_pretrained stores them, in float64."""
    for p in module.parameters():
        p.data = p.data.to(torch.bfloat16).to(torch.float64)


def make_v4_saved_sharded(gen):
    """A whole DeepseekV4ForCausalLM saved by save_pretrained in bfloat16 over two shards and an index: the
    names transformers 5 writes (its conversion mapping reversed), each attention layer's output beside."""
    dims = {k: v for k, v in mr.V4_DIMS.items() if k not in ("compress_ratios", "rope_scaling", "qk_rope_head_dim")}
    types = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
    rates = {"compressed_sparse_attention": 2, "heavily_compressed_attention": 4}
    scaling = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096, "beta_fast": 32,
               "beta_slow": 1}
    small_moe = {"vocab_size": 16, "moe_intermediate_size": 8, "n_routed_experts": 2, "num_experts_per_tok": 1,
                 "hc_mult": 2}
    cfg = transformers.DeepseekV4Config(**dims, layer_types=types, qk_rope_head_dim=8, compress_rates=rates,
                                        rope_parameters=scaling, num_nextn_predict_layers=0, **small_moe)
    cfg._attn_implementation = "eager"
    rotary = hf_v4.DeepseekV4RotaryEmbedding(cfg)
    model = hf_v4.DeepseekV4ForCausalLM(cfg)
    for _ in range(100):
        layers = [hf_v4.DeepseekV4Attention(cfg, i).double() for i in range(3)]
        for module in layers:
            mr.randomise(module, gen)
            bf16_rounded(module)
        x = torch.randn(1, mr.V4_T, cfg.hidden_size, generator=gen, dtype=torch.float64).to(torch.float32).double()
        if mr.v4_topk_margin(layers[1], rotary, x, cfg.index_topk, 2) > 1e-3:
            break
    else:
        raise SystemExit("no draw with a clear top-k margin")
    for i, module in enumerate(layers):
        model.model.layers[i].self_attn.load_state_dict(module.state_dict())
    case = "v4_saved_sharded"
    folder = os.path.join(HERE, case)
    model.to(torch.bfloat16).save_pretrained(folder, max_shard_size="100KB")
    shards = sorted(f for f in os.listdir(folder) if f.startswith("model-"))
    if len(shards) != 2:
        raise SystemExit(f"{case}: {len(shards)} shards, want 2")
    outs = {f"out.{i}": mr.run_v4(module, rotary, x)[0].contiguous() for i, module in enumerate(layers)}
    meta = {"torch_version": torch.__version__, "transformers_version": transformers.__version__, "seed": str(SEED),
            "referee": "transformers DeepseekV4Attention, float64", "tokens": str(x.shape[1]),
            "case": "V4 saved whole by transformers 5's save_pretrained: bfloat16, two shards and an index"}
    save_file({"x": x[0].to(torch.float32).contiguous(), **outs}, os.path.join(folder, "io.safetensors"), metadata=meta)


# Whole MLA models: two layers (one dense MLP, one MoE), a MoE and vocabulary small enough that the two shards
# hold little beside the attention.
MLA_WHOLE = dict(MLA, num_hidden_layers=2, intermediate_size=16, vocab_size=16, moe_intermediate_size=8,
                 n_routed_experts=2, num_experts_per_tok=1, n_group=1, topk_group=1)


def drawn_layer(gen, build, rotary, x, margin):
    """A module from build() with random weights rounded to bfloat16 and, given margin, a clear top-k on x."""
    for _ in range(100):
        module = build()
        mr.randomise(module, gen)
        bf16_rounded(module)
        if margin is None or margin(module, rotary, x) > 1e-3:
            return module
    raise SystemExit("no draw with a clear top-k margin")


def save_whole(gen, case, cfg, hf, cls, margin, what):
    """cfg's whole model (hf's `cls`ForCausalLM) saved by save_pretrained in bfloat16 over two shards and an index,
    under transformers' names (model.layers.N.self_attn.*); io.safetensors holds "x" and each layer's attention
    output "out.N" in float64 from the module on the stored weights. Given margin, each layer is drawn until
    margin(module, rotary, x) > 1e-3: a top-k that no rounding can flip."""
    cfg._attn_implementation = "eager"
    rotary = getattr(hf, cls + "RotaryEmbedding")(cfg)
    model = getattr(hf, cls + "ForCausalLM")(cfg)
    x = torch.randn(1, mr.T, cfg.hidden_size, generator=gen, dtype=torch.float64).to(torch.float32).double()
    layers = [drawn_layer(gen, lambda: getattr(hf, cls + "Attention")(cfg, i).double(), rotary, x, margin)
              for i in range(cfg.num_hidden_layers)]
    for i, module in enumerate(layers):
        model.model.layers[i].self_attn.load_state_dict(module.state_dict())
    folder = os.path.join(HERE, case)
    model.to(torch.bfloat16).save_pretrained(folder, max_shard_size="50KB")
    shards = sorted(f for f in os.listdir(folder) if f.startswith("model-"))
    if len(shards) != 2:
        raise SystemExit(f"{case}: {len(shards)} shards, want 2")
    outs = {f"out.{i}": mr.run(module, rotary, x)[0].contiguous() for i, module in enumerate(layers)}
    meta = {"torch_version": torch.__version__, "transformers_version": transformers.__version__, "seed": str(SEED),
            "referee": f"transformers {cls}Attention, float64", "tokens": str(x.shape[1]), "case": what}
    save_file({"x": x[0].to(torch.float32).contiguous(), **outs}, os.path.join(folder, "io.safetensors"), metadata=meta)


def make_v3_saved_sharded(gen):
    """A whole DeepseekV3ForCausalLM with YaRN in transformers 5's rope_parameters (mscale = mscale_all_dim, as
    DeepSeek-V3 ships it: the softmax scale carries m(4, 1)^2)."""
    cfg = transformers.DeepseekV3Config(**MLA_WHOLE, rope_parameters=dict(YARN, mscale=1.0, mscale_all_dim=1.0))
    save_whole(gen, "v3_saved_sharded", cfg, hf_v3, "DeepseekV3", None,
               "V3 saved whole by transformers 5's save_pretrained: bfloat16, two shards and an index, YaRN")


def make_v32_saved_sharded(gen):
    """A whole DeepseekV32ForCausalLM with plain rope: the indexer keeps 5 of the 16 tokens, so its choice shows
    from token 5 on."""
    cfg = transformers.DeepseekV32Config(**MLA_WHOLE, rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                                         index_n_heads=2, index_head_dim=16, index_topk=5)
    save_whole(gen, "v32_saved_sharded", cfg, hf_v32, "DeepseekV32",
               lambda module, rotary, x: mr.topk_margin(module, rotary, x, cfg.index_topk),
               "V3.2 saved whole by transformers 5's save_pretrained: bfloat16, two shards and an index, top-5 of 16")


CASES = {"v3": make_v3, "v32": make_v32, "v4": make_v4, "v3_norm_eps": make_v3_norm_eps,
         "v4_saved_sharded": make_v4_saved_sharded, "v3_saved_sharded": make_v3_saved_sharded,
         "v32_saved_sharded": make_v32_saved_sharded}


def main(names):
    """Every case, or those named (each draws from its own generator seeded with SEED after the first four)."""
    torch.manual_seed(SEED)
    if names:
        for name in names:
            CASES[name](torch.Generator().manual_seed(SEED))
        return
    gen = torch.Generator().manual_seed(SEED)
    make_v3(gen)
    make_v32(gen)
    make_v4(gen)
    make_v4_flash()
    for name in ("v3_norm_eps", "v4_saved_sharded", "v3_saved_sharded", "v32_saved_sharded"):
        CASES[name](torch.Generator().manual_seed(SEED))


if __name__ == "__main__":
    main(sys.argv[1:])
