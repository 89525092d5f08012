"""Write tests/data/gguf/*.gguf: GGUF files of the lineage's models, metadata only (no tensors), with the
keys llama.cpp's convert_hf_to_gguf.py writes for each, read from the configs in ref/configs/.

    pip install gguf && python3 tests/gen_gguf.py

    deepseek-v3-mla.gguf   deepseek2, the MLA conversion (DeepseekV2Model today): one KV head,
                           key_length = kv_lora_rank + qk_rope_head_dim, value_length = kv_lora_rank,
                           key_length_mla / value_length_mla the per-head widths
    deepseek-v3-kv.gguf    deepseek2, the conversion before the MLA split: key_length = qk_nope + qk_rope,
                           value_length = v_head_dim, head_count_kv = the heads (no _mla keys)
    deepseek-v2.gguf       deepseek2, the MLA conversion
    deepseek-llm-67b.gguf  llama, GQA with 8 KV heads

The files are committed; the tests read them without the gguf package.
"""
import json
import os

import gguf

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "gguf")


def config(name):
    with open(os.path.join(ROOT, "ref", "configs", name + ".json")) as f:
        return json.load(f)


def write(path, arch, fill):
    w = gguf.GGUFWriter(path, arch)
    fill(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.close()


def deepseek2(c, name, mla):
    """DeepSeek's inference spelling (dim, n_layers, ...) as DeepseekV2Model writes its HF twin."""
    def fill(w):
        w.add_name(name)
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        w.add_block_count(c["n_layers"])
        w.add_context_length(c["original_seq_len"] * c["rope_factor"])
        w.add_embedding_length(c["dim"])
        w.add_feed_forward_length(c["inter_dim"])
        w.add_head_count(c["n_heads"])
        w.add_head_count_kv(1 if mla else c["n_heads"])
        w.add_rope_freq_base(c["rope_theta"])
        w.add_layer_norm_rms_eps(1e-6)
        w.add_vocab_size(c["vocab_size"])
        w.add_leading_dense_block_count(c["n_dense_layers"])
        w.add_q_lora_rank(c["q_lora_rank"])
        w.add_kv_lora_rank(c["kv_lora_rank"])
        if mla:
            w.add_key_length(c["kv_lora_rank"] + c["qk_rope_head_dim"])
            w.add_value_length(c["kv_lora_rank"])
            w.add_key_length_mla(c["qk_nope_head_dim"] + c["qk_rope_head_dim"])
            w.add_value_length_mla(c["v_head_dim"])
        else:
            w.add_key_length(c["qk_nope_head_dim"] + c["qk_rope_head_dim"])
            w.add_value_length(c["v_head_dim"])
        w.add_expert_feed_forward_length(c["moe_inter_dim"])
        w.add_expert_count(c["n_routed_experts"])
        w.add_expert_used_count(c["n_activated_experts"])
        w.add_expert_shared_count(c["n_shared_experts"])
        w.add_expert_weights_scale(c["route_scale"])
        w.add_rope_dimension_count(c["qk_rope_head_dim"])
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(c["rope_factor"])
        w.add_rope_scaling_orig_ctx_len(c["original_seq_len"])
        w.add_rope_scaling_yarn_log_mul(0.1 * c["mscale"])
    return fill


def llama(c, name):
    def fill(w):
        w.add_name(name)
        w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)
        w.add_block_count(c["num_hidden_layers"])
        w.add_context_length(c["max_position_embeddings"])
        w.add_embedding_length(c["hidden_size"])
        w.add_feed_forward_length(c["intermediate_size"])
        w.add_head_count(c["num_attention_heads"])
        w.add_head_count_kv(c["num_key_value_heads"])
        w.add_rope_freq_base(c["rope_theta"])
        w.add_layer_norm_rms_eps(c["rms_norm_eps"])
        w.add_vocab_size(c["vocab_size"])
        w.add_rope_dimension_count(c["hidden_size"] // c["num_attention_heads"])
    return fill


def main():
    os.makedirs(OUT, exist_ok=True)
    v3, v2, llm = config("deepseek-v3"), config("deepseek-v2"), config("deepseek-llm-67b")
    files = {
        "deepseek-v3-mla": ("deepseek2", deepseek2(v3, "DeepSeek-V3 GGUF MLA", True)),
        "deepseek-v3-kv": ("deepseek2", deepseek2(v3, "DeepSeek-V3 GGUF K+V", False)),
        "deepseek-v2": ("deepseek2", deepseek2(v2, "DeepSeek-V2 GGUF", True)),
        "deepseek-llm-67b": ("llama", llama(llm, "DeepSeek LLM 67B GGUF")),
    }
    for stem, (arch, fill) in files.items():
        path = os.path.join(OUT, stem + ".gguf")
        write(path, arch, fill)
        print(path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
