#!/usr/bin/env python3
"""The outside referee: tiny random DeepSeek attention layers built with the Hugging Face classes, run
on random inputs, written as safetensors files that the C tests read with no Python at test time.

For each generation it writes, next to this script:
  <name>.json          the config, in the Hugging Face spelling the C loader (ref/core/config.c) reads
  <name>.safetensors   layer 0's attention weights under transformers' names
                       (model.layers.0.self_attn.*), "x" [T][d] the hidden states, "out" [T][d] the
                       module's output at positions 0 … T−1 under a causal mask; metadata: the
                       torch and transformers versions, the seed, the config text, the referee

  deepseek_v3_tiny     DeepseekV3Attention (MLA, YaRN), weights stored as DeepSeek ships V3:
                       float8_e4m3fn with one float32 weight_scale_inv per 128×128 block
  deepseek_v32_tiny    DeepseekV32Attention (MLA + lightning indexer + top-k), weights in bfloat16
  deepseek_v4_tiny     DeepseekV4Attention, three layers of one model: window-only (ratio 0), CSA
                       (ratio 4, indexer top-2) and HCA (ratio 8 here, 128 in V4-Flash); weights in
                       bfloat16 (float32 where the module keeps them so: sinks, position biases,
                       norms); "out.N" is layer N's output on the same x

  deepseek_v41_tiny    V4.1 has no transformers class: a six-layer stack (window, Full M 2, Reuse, Full
                       M 1 = the candidate source, Reuse, Reindex over the candidate pool) written here
                       in torch from the DeepSeek-V4.1-Flash inference/model.py formulas as
                       chapters/07_v41/README.md states them, h ← h + Attn(RMSNorm(h)); weights under the inference names
                       (layers.N.attn.*, layers.N.attn_norm.weight) in bfloat16, "out" the stack's output

Every module runs in float64 on weights exactly as stored (dequantised or widened), so the reference is
the stored model's output to float64 rounding. Every top-k (V3.2's, V4's CSA indexer, V4.1's indexers
and candidate blocks) is drawn with a margin over 10^−3 between its K-th and (K+1)-th score: no ties,
which torch.topk and ref/core/topk.h break differently, and no choice float32 rounding in C could flip.

  pip install torch transformers safetensors
  python3 tests/reference/make_reference.py

Rerunning it with the same versions rewrites the same tensors; only the order of the metadata keys in
the header may change (safetensors writes them from a hash map).
"""
import json
import math
import os

import torch
import transformers
from safetensors.torch import save_file
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_v3
from transformers.models.deepseek_v32 import modeling_deepseek_v32 as hf_v32
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf_v4

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261130
T = 16
BLOCK = 128
PREFIX = "model.layers.0.self_attn."

# Shared by both tiny configs: YaRN with its correction ramp inside the rotary pairs (lo 1, hi 3 for
# Dr 8, base 10^4, original length 2048), mscale = mscale_all_dim so that the cos/sin carry no factor.
MLA_DIMS = {
    "hidden_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 4,
    "q_lora_rank": 32, "kv_lora_rank": 24, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 12,
    "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "max_position_embeddings": 8192,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048,
                     "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
}
DSA_DIMS = dict(MLA_DIMS, index_n_heads=2, index_head_dim=16, index_topk=5)
# V4: 24 tokens over a window of 8 give CSA 6 entries (top-2 of them) and HCA 3. The compress rope's
# YaRN ramp lies inside the 4 rotary pairs (lo 1, hi 3 for base 160000, original length 4096).
V4_T = 24
V4_DIMS = {
    "hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32,
    "q_lora_rank": 32, "qk_rope_head_dim": 8, "o_groups": 2, "o_lora_rank": 16, "sliding_window": 8,
    "index_n_heads": 2, "index_head_dim": 16, "index_topk": 2, "compress_ratios": [0, 4, 8],
    "compress_rope_theta": 160000.0, "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "max_position_embeddings": 16384,
    "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096,
                     "beta_fast": 32, "beta_slow": 1},
}


def hf_config(cls, dims):
    extra = {k: v for k, v in dims.items() if k not in ("rope_scaling",)}
    scaling = dict(dims["rope_scaling"], rope_type="yarn")
    scaling.pop("type")
    cfg = cls(**extra, rope_scaling=scaling, attention_bias=False, vocab_size=32, intermediate_size=64,
              moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2, first_k_dense_replace=1)
    cfg._attn_implementation = "eager"
    return cfg


def randomise(module, gen):
    """Matrices N(0, 1/fan_in), norm gains U[0.5, 1.5), LayerNorm biases U[−0.5, 0.5): a dropped gain shows."""
    for name, p in module.named_parameters():
        if p.dim() == 2:
            p.data = torch.randn(p.shape, generator=gen, dtype=torch.float64) / p.shape[1] ** 0.5
        elif name.endswith("bias"):
            p.data = torch.rand(p.shape, generator=gen, dtype=torch.float64) - 0.5
        else:
            p.data = torch.rand(p.shape, generator=gen, dtype=torch.float64) + 0.5


def fp8_blocks(w):
    """w [R][C] → (E4M3 codes, float32 scale_inv [⌈R/128⌉][⌈C/128⌉]): scale = amax/448 per block."""
    R, C = w.shape
    br, bc = -(-R // BLOCK), -(-C // BLOCK)
    scale = torch.empty(br, bc, dtype=torch.float32)
    q = torch.empty(R, C, dtype=torch.float8_e4m3fn)
    for i in range(br):
        for j in range(bc):
            blk = w[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK]
            s = (blk.abs().max() / 448.0).to(torch.float32)
            scale[i, j] = s
            q[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK] = (blk / s.double()).to(torch.float8_e4m3fn)
    return q, scale


def dequant(q, scale):
    w = q.to(torch.float64)
    for i in range(scale.shape[0]):
        for j in range(scale.shape[1]):
            w[i * BLOCK:(i + 1) * BLOCK, j * BLOCK:(j + 1) * BLOCK] *= scale[i, j].double()
    return w


def store(module, fp8, prefix=PREFIX, keep_f32=()):
    """The tensors to write, and the module's parameters set to exactly what they hold."""
    tensors = {}
    for name, p in module.named_parameters():
        if fp8 and p.dim() == 2:
            q, s = fp8_blocks(p.data)
            tensors[prefix + name] = q
            tensors[prefix + name.replace(".weight", ".weight_scale_inv")] = s
            p.data = dequant(q, s)
        else:
            stored = p.data.to(torch.float32 if any(k in name for k in keep_f32) else torch.bfloat16)
            tensors[prefix + name] = stored
            p.data = stored.to(torch.float64)
    return tensors


def run(module, rotary, x):
    pos = torch.arange(T).unsqueeze(0)
    cos, sin = rotary(x, pos)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)[None, None]
    with torch.no_grad():
        return module(x, position_embeddings=(cos, sin), attention_mask=mask, position_ids=pos)[0]


@torch.no_grad()
def topk_margin(module, rotary, x, k):
    """Smallest gap, over queries with more than k visible keys, between the k-th and (k+1)-th index
    score. ReLU makes exact ties (at 0) common; torch.topk breaks them in no stated order, ref/core/topk.h
    by the smaller position, so the files are drawn without any."""
    pos = torch.arange(T).unsqueeze(0)
    cos, sin = rotary(x, pos)
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)[None]
    seen = {}
    hook = module.indexer.register_forward_hook(lambda m, a, o: seen.update(args=a))
    run(module, rotary, x)
    hook.remove()
    hidden, q_resid = seen["args"][0], seen["args"][1]
    ix = module.indexer
    q = ix.wq_b(q_resid).view(1, T, ix.n_heads, ix.head_dim)
    q_rot, q_pass = torch.split(q, [ix.qk_rope_head_dim, ix.head_dim - ix.qk_rope_head_dim], dim=-1)
    kk = ix.k_norm(ix.wk(hidden)).unsqueeze(2)
    k_rot, k_pass = torch.split(kk, [ix.qk_rope_head_dim, ix.head_dim - ix.qk_rope_head_dim], dim=-1)
    q_rot, k_rot = hf_v32.apply_rotary_pos_emb(q_rot, k_rot, cos, sin, unsqueeze_dim=2)
    q = torch.cat([q_rot, q_pass], -1)
    kk = torch.cat([k_rot, k_pass], -1).squeeze(2)
    scores = torch.relu(torch.matmul(q, kk.transpose(-1, -2).unsqueeze(1)) * ix.softmax_scale)
    w = ix.weights_proj(hidden) * ix.n_heads ** -0.5
    index = torch.matmul(w.unsqueeze(-2), scores).squeeze(-2) + mask
    top = index[0].sort(dim=-1, descending=True).values
    gaps = [top[t, k - 1] - top[t, k] for t in range(k, T)]
    return min(float(g) for g in gaps)


def write(name, dims, tensors, x, outs, referee):
    """outs: {tensor name: output [1][T][d]}; referee: what computed them."""
    config_text = json.dumps(dims, indent=1) + "\n"
    with open(os.path.join(HERE, name + ".json"), "w") as f:
        f.write(config_text)
    tensors = dict(tensors, x=x.to(torch.float32).contiguous())
    tensors.update({k: v[0].to(torch.float32).contiguous() for k, v in outs.items()})
    meta = {"torch_version": torch.__version__, "transformers_version": transformers.__version__,
            "seed": str(SEED), "config": config_text, "tokens": str(x.shape[0]), "referee": referee}
    save_file({k: v.contiguous() for k, v in tensors.items()}, os.path.join(HERE, name + ".safetensors"), metadata=meta)


def make_v3(gen):
    cfg = hf_config(transformers.DeepseekV3Config, MLA_DIMS)
    module = hf_v3.DeepseekV3Attention(cfg, 0).double()
    randomise(module, gen)
    tensors = store(module, fp8=True)
    x = torch.randn(1, T, cfg.hidden_size, generator=gen, dtype=torch.float64).to(torch.float32).double()
    out = run(module, hf_v3.DeepseekV3RotaryEmbedding(cfg), x)
    write("deepseek_v3_tiny", MLA_DIMS, tensors, x[0], {"out": out}, "transformers DeepseekV3Attention")


def make_v32(gen):
    cfg = hf_config(transformers.DeepseekV32Config, DSA_DIMS)
    rotary = hf_v32.DeepseekV32RotaryEmbedding(cfg)
    for _ in range(100):
        module = hf_v32.DeepseekV32Attention(cfg, 0).double()
        randomise(module, gen)
        tensors = store(module, fp8=False)
        x = torch.randn(1, T, cfg.hidden_size, generator=gen, dtype=torch.float64).to(torch.float32).double()
        if topk_margin(module, rotary, x, cfg.index_topk) > 1e-3:
            break
    else:
        raise SystemExit("no draw with a clear top-k margin")
    out = run(module, rotary, x)
    write("deepseek_v32_tiny", DSA_DIMS, tensors, x[0], {"out": out}, "transformers DeepseekV32Attention")


def v4_config():
    dims = {k: v for k, v in V4_DIMS.items() if k not in ("compress_ratios", "rope_scaling", "qk_rope_head_dim")}
    scaling = dict(V4_DIMS["rope_scaling"], rope_type="yarn")
    scaling.pop("type")
    types = ["sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
    cfg = transformers.DeepseekV4Config(
        **dims, layer_types=types, qk_rope_head_dim=V4_DIMS["qk_rope_head_dim"],
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 8}, rope_parameters=scaling,
        vocab_size=32, moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2, num_nextn_predict_layers=0)
    cfg._attn_implementation = "eager"
    return cfg


def run_v4(module, rotary, x):
    pos = torch.arange(V4_T).unsqueeze(0)
    pe = {kind: rotary(x, pos, layer_type=kind) for kind in ("main", "compress")}
    t = torch.arange(V4_T)
    visible = (t[None, :] <= t[:, None]) & (t[None, :] > t[:, None] - V4_DIMS["sliding_window"])
    mask = torch.zeros(V4_T, V4_T, dtype=torch.float64).masked_fill(~visible, float("-inf"))[None, None]
    with torch.no_grad():
        return module(x, position_embeddings=pe, position_ids=pos, attention_mask=mask)[0]


@torch.no_grad()
def v4_topk_margin(module, rotary, x, k, ratio):
    """As topk_margin, for the CSA indexer's scores over the entries each query may see."""
    seen = {}
    hook = module.compressor.indexer.scorer.register_forward_hook(lambda m, a, o: seen.update(scores=o))
    run_v4(module, rotary, x)
    hook.remove()
    scores = seen["scores"][0]
    gaps = []
    for t in range(V4_T):
        visible = (t + 1) // ratio
        if visible > k:
            top = scores[t, :visible].sort(descending=True).values
            gaps.append(float(top[k - 1] - top[k]))
    return min(gaps)


def make_v4(gen):
    cfg = v4_config()
    rotary = hf_v4.DeepseekV4RotaryEmbedding(cfg)
    keep = ("sinks", "position_bias", "norm")
    for _ in range(100):
        layers = [hf_v4.DeepseekV4Attention(cfg, i).double() for i in range(3)]
        tensors = {}
        for i, module in enumerate(layers):
            randomise(module, gen)
            tensors.update(store(module, fp8=False, prefix=f"model.layers.{i}.self_attn.", keep_f32=keep))
        x = torch.randn(1, V4_T, cfg.hidden_size, generator=gen, dtype=torch.float64).to(torch.float32).double()
        if v4_topk_margin(layers[1], rotary, x, cfg.index_topk, 4) > 1e-3:
            break
    else:
        raise SystemExit("no draw with a clear top-k margin")
    outs = {f"out.{i}": run_v4(module, rotary, x) for i, module in enumerate(layers)}
    write("deepseek_v4_tiny", V4_DIMS, tensors, x[0], outs, "transformers DeepseekV4Attention")


# ---- V4.1: the inference code's formulas (chapters/07_v41/README.md), float64, no quantisation (the float32 cache) --

V41_T = 24
V41_DIMS = {
    "dim": 64, "n_layers": 6, "n_heads": 4, "q_lora_rank": 32, "head_dim": 32, "rope_head_dim": 8, "o_groups": 2,
    "o_lora_rank": 16, "window_size": 8, "compress_ratios": [0, 2, 2, 1, 1, 1], "kv_source_layers": [1, 3],
    "index_source_layers": [1, 3, 5], "candidate_source_layer": 3, "candidate_topk_blocks": 2,
    "candidate_block_size": 4, "index_n_heads": 4, "index_head_dim": 16, "index_topk": 4, "norm_eps": 1e-6,
    "rope_theta": 10000.0, "compress_rope_theta": 160000.0, "rope_factor": 4, "original_seq_len": 64,
    "beta_fast": 32, "beta_slow": 1,
}


def v41_theta(ratio):
    """θ_i of the layer: plain (ratio 0) or the compress rope with YaRN (ref/core/rope.h: the correction range
    lo = max(⌊corr(β_fast)⌋, 0), hi = min(⌈corr(β_slow)⌉, Dr − 1), the ramp between)."""
    c = V41_DIMS
    Dr = c["rope_head_dim"]
    i = torch.arange(Dr // 2, dtype=torch.float64)
    if ratio == 0:
        return c["rope_theta"] ** (-2 * i / Dr)
    base, factor, L = c["compress_rope_theta"], c["rope_factor"], c["original_seq_len"]
    theta = base ** (-2 * i / Dr)
    corr = lambda n: Dr * math.log(L / (2 * math.pi * n)) / (2 * math.log(base))  # noqa: E731
    lo, hi = max(math.floor(corr(c["beta_fast"])), 0), min(math.ceil(corr(c["beta_slow"])), Dr - 1)
    hi = hi + 0.001 if lo == hi else hi
    ramp = ((i - lo) / (hi - lo)).clamp(0, 1)
    return theta * (1 - ramp) + theta / factor * ramp


def rope_tail(x, pos, theta, inverse=False):
    """Rotate the trailing 2·len(theta) channels of x[..., D] in interleaved pairs at positions pos."""
    Dr = 2 * theta.shape[0]
    ang = pos.to(torch.float64)[:, None] * theta[None, :]
    ang = ang.view(ang.shape[0], *([1] * (x.dim() - 2)), -1)
    c, s = ang.cos(), ang.sin() * (-1 if inverse else 1)
    out = x.clone()
    a, b = x[..., -Dr::2], x[..., -Dr + 1::2]
    out[..., -Dr::2], out[..., -Dr + 1::2] = a * c - b * s, a * s + b * c
    return out


def rmsnorm(x, g, eps):
    return x / (x.pow(2).mean(-1, keepdim=True) + eps).sqrt() * g


def top(scores, k):
    """Indices of the k largest (larger first, the smaller index on ties), as ref/core/topk.h's top-k."""
    order = sorted(range(scores.shape[0]), key=lambda i: (-float(scores[i]), i))
    return order[:k]


class V41Stack:
    """The weights of every layer (name → float64 tensor) and the gaps every selection left."""

    def __init__(self, gen):
        c = V41_DIMS
        d, H, Dh, Dq, G, Do = c["dim"], c["n_heads"], c["head_dim"], c["q_lora_rank"], c["o_groups"], c["o_lora_rank"]
        HI, DI = c["index_n_heads"], c["index_head_dim"]
        self.w, self.gaps = {}, []

        def mat(name, rows, cols):
            self.w[name] = torch.randn(rows, cols, generator=gen, dtype=torch.float64) / cols ** 0.5

        def gain(name, n):
            self.w[name] = torch.rand(n, generator=gen, dtype=torch.float64) + 0.5

        for l, ratio in enumerate(c["compress_ratios"]):
            a = f"layers.{l}.attn."
            gain(f"layers.{l}.attn_norm.weight", d)
            mat(a + "wq_a.weight", Dq, d); gain(a + "q_norm.weight", Dq); mat(a + "wq_b.weight", H * Dh, Dq)
            mat(a + "wkv.weight", Dh, d); gain(a + "kv_norm.weight", Dh)
            self.w[a + "attn_sink"] = torch.randn(H, generator=gen, dtype=torch.float64)
            mat(a + "wo_a", G * Do, H // G * Dh); mat(a + "wo_b.weight", d, G * Do)
            if l in c["kv_source_layers"]:
                mat(a + "compressor.wkv.weight", Dh, d)
                if ratio > 1:
                    mat(a + "compressor.wgate.weight", Dh, d)
                gain(a + "compressor.norm.weight", Dh); mat(a + "indexer.wk.weight", DI, Dh)
                gain(a + "indexer.k_norm.weight", DI)
            if l in c["index_source_layers"]:
                mat(a + "indexer.wq_b.weight", HI * DI, Dq); mat(a + "indexer.weights_proj.weight", HI, d)
        self.w = {k: v.to(torch.bfloat16).to(torch.float64) for k, v in self.w.items()}

    def gap(self, scores, k):
        """Record the gap between the k-th and (k+1)-th finite score of a row (no tie may decide)."""
        finite = scores[torch.isfinite(scores)].sort(descending=True).values
        if finite.shape[0] > k:
            self.gaps.append(float(finite[k - 1] - finite[k]))

    def compress(self, l, n, ratio, theta):
        """(main entries Z [N][Dh], index keys [N][DI]) of KV source l on its normed input n[T][d]."""
        c, w, a = V41_DIMS, self.w, f"layers.{l}.attn."
        eps, N = c["norm_eps"], n.shape[0] // ratio
        kv = n[:N * ratio] @ w[a + "compressor.wkv.weight"].T
        if ratio > 1:
            z = (n[:N * ratio] @ w[a + "compressor.wgate.weight"].T).view(N, ratio, -1)
            kv = (kv.view(N, ratio, -1) * z.softmax(dim=1)).sum(1)
        lat = rmsnorm(kv, w[a + "compressor.norm.weight"], eps)
        pos = torch.arange(N) * ratio
        keys = rope_tail(rmsnorm(lat @ w[a + "indexer.wk.weight"].T, w[a + "indexer.k_norm.weight"], eps), pos, theta)
        return rope_tail(lat, pos, theta), keys

    def index_scores(self, l, n, cq, keys, ratio, theta):
        """S^I[T][N]: Σ_j w_j ReLU(q^I_j·K^I_i) for the visible entries i < ⌊(t+1)/M⌋, −∞ elsewhere."""
        c, w, a = V41_DIMS, self.w, f"layers.{l}.attn."
        HI, DI, T = c["index_n_heads"], c["index_head_dim"], n.shape[0]
        q = rope_tail((cq @ w[a + "indexer.wq_b.weight"].T).view(T, HI, DI), torch.arange(T), theta)
        wt = (n @ w[a + "indexer.weights_proj.weight"].T) * (HI * DI) ** -0.5
        S = (wt[:, :, None] * torch.relu(torch.einsum("thd,nd->thn", q, keys))).sum(1)
        visible = torch.arange(keys.shape[0])[None, :] < ((torch.arange(T) + 1) // ratio)[:, None]
        return S.masked_fill(~visible, float("-inf"))

    def pool(self, S, ratio):
        """P_t: the entries of the top candidate_topk_blocks blocks of candidate_block_size (block score =
        max over its entries; the block holding n_t − 1 forced in)."""
        c, T = V41_DIMS, S.shape[0]
        B, P = c["candidate_block_size"], c["candidate_topk_blocks"]
        mask = torch.zeros_like(S, dtype=torch.bool)
        for t in range(T):
            n_t = (t + 1) // ratio
            blocks = [S[t, b * B:min((b + 1) * B, n_t)].max() for b in range(-(-n_t // B))]
            if not blocks:
                continue
            blocks[-1] = torch.tensor(float("inf"), dtype=torch.float64)
            scores = torch.stack(blocks)
            self.gap(scores[:-1], P - 1)
            for b in top(scores, min(P, len(blocks))):
                mask[t, b * B:min((b + 1) * B, n_t)] = True
        return mask

    def select(self, S):
        """I_t: top-min(K, N) of each row, −1 for picks past the visible entries (−∞ scores)."""
        K = V41_DIMS["index_topk"]
        sel = []
        for t in range(S.shape[0]):
            self.gap(S[t], K)
            picks = top(S[t], min(K, S.shape[1]))
            sel.append(sorted(i for i in picks if math.isfinite(float(S[t, i]))))
        return sel

    def attend(self, l, n, cq, win, entries, sel, theta):
        c, w, a = V41_DIMS, self.w, f"layers.{l}.attn."
        T, H, Dh, W, G = n.shape[0], c["n_heads"], c["head_dim"], c["window_size"], c["o_groups"]
        q = rope_tail((cq @ w[a + "wq_b.weight"].T).view(T, H, Dh), torch.arange(T), theta)
        o = torch.zeros(T, H, Dh, dtype=torch.float64)
        for t in range(T):
            rows = [win[j] for j in range(max(0, t - W + 1), t + 1)] + ([entries[i] for i in sel[t]] if sel else [])
            k = torch.stack(rows)
            logits = (q[t] @ k.T) / Dh ** 0.5
            full = torch.cat([logits, w[a + "attn_sink"][:, None]], 1).softmax(-1)[:, :-1]
            o[t] = full @ k
        o = rope_tail(o, torch.arange(T), theta, inverse=True).reshape(T, G, -1)
        u = torch.einsum("tgd,grd->tgr", o, w[a + "wo_a"].view(G, c["o_lora_rank"], -1)).reshape(T, -1)
        return u @ w[a + "wo_b.weight"].T

    def forward(self, x):
        c, w = V41_DIMS, self.w
        eps, h = c["norm_eps"], x.clone()
        sources, selections = {}, {}
        for l, ratio in enumerate(c["compress_ratios"]):
            a, theta = f"layers.{l}.attn.", v41_theta(ratio)
            n = rmsnorm(h, w[f"layers.{l}.attn_norm.weight"], eps)
            cq = rmsnorm(n @ w[a + "wq_a.weight"].T, w[a + "q_norm.weight"], eps)
            win = rope_tail(rmsnorm(n @ w[a + "wkv.weight"].T, w[a + "kv_norm.weight"], eps), torch.arange(n.shape[0]),
                            theta)
            entries = sel = None
            if ratio:
                if l in c["kv_source_layers"]:
                    sources[l] = self.compress(l, n, ratio, theta) + (ratio,)
                src = max(s for s in sources if s <= l)
                entries, keys, src_ratio = sources[src]
                if l in c["index_source_layers"]:
                    S = self.index_scores(l, n, cq, keys, src_ratio, theta)
                    if l == c["candidate_source_layer"]:
                        self.candidates = self.pool(S, src_ratio)
                    elif src == c["candidate_source_layer"]:
                        S = S.masked_fill(~self.candidates, float("-inf"))
                    selections[l] = self.select(S)
                sel = selections[max(s for s in selections if s <= l)]
            h = h + self.attend(l, n, cq, win, entries, sel, theta)
        return h


def make_v41(gen):
    for _ in range(100):
        stack = V41Stack(gen)
        x = torch.randn(V41_T, V41_DIMS["dim"], generator=gen, dtype=torch.float64).to(torch.float32).double()
        out = stack.forward(x)
        if min(stack.gaps) > 1e-3:
            break
    else:
        raise SystemExit("no draw with clear top-k and pool margins")
    tensors = {k: v.to(torch.bfloat16).contiguous() for k, v in stack.w.items()}
    write("deepseek_v41_tiny", V41_DIMS, tensors, x, {"out": out[None]},
          "the V4.1 inference code's formulas (chapters/07_v41/README.md), written in make_reference.py")


def main():
    torch.use_deterministic_algorithms(True)
    gen = torch.Generator().manual_seed(SEED)
    make_v3(gen)
    make_v32(gen)
    make_v4(gen)
    make_v41(gen)


if __name__ == "__main__":
    main()
