#!/usr/bin/env python3
"""Write the fuzz targets' seed corpora under tests/fuzz/corpus/ (committed; the fuzzers and
tests/test_reliability_fuzz.c read them, neither needs Python).

  config/  the real configs (ref/configs/, chapters/*/*.json) and small toy ones, one per generation
  kvfmt/   one kvfmt call per command: "ARGS\\nSTDIN" (tests/fuzz/kvfmt_input.h)
  safetensors/  small well-formed files: every dtype the reader knows, metadata, a scalar, an empty
           tensor, an FP8 weight with its block scales, float64, and an empty header
  rows/    per layout: byte 0 = the layout, then a row the library packed from seeded normal values,
           and the same values as float32 (tests/fuzz/rows_property.h); plus all-zero and ±max rows
  npy/     small files laid out as numpy writes them, in versions 1.0, 2.0 and 3.0, float32 and float64,
           1-D, 2-D and empty; and a few the reader refuses (Fortran order, '<i4', short data)
  json_text/  JSON of every kind of value, escape and UTF-8 length, a toy config and a shard index
  args/    command lines as the programs take them: byte 0 = positional arguments taken (1) or not (0),
           then the arguments, each ended by a NUL (tests/fuzz/args_property.h)

Run from the project root after `make` (it packs rows with build/bin/kvfmt):
  python3 tests/fuzz/gen_corpus.py [path/to/kvfmt]
"""
import glob
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
KVFMT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "build", "bin", "kvfmt")

LAYOUTS = ["v32-main", "v32-index", "v4-main", "v4-index", "v41-main", "v41-window"]
VALUES = {"v32-main": 576, "v32-index": 128, "v4-main": 512, "v4-index": 128, "v41-main": 512, "v41-window": 512}

TOY_CONFIGS = {
    "toy-mha-swa.json": '{"hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, '
                        '"num_key_value_heads": 2, "head_dim": 16, "sliding_window": 8}',
    "toy-mla-no-qlora.json": '{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, '
                             '"q_lora_rank": null, "kv_lora_rank": 32, "qk_nope_head_dim": 16, '
                             '"qk_rope_head_dim": 8, "v_head_dim": 16, "rope_scaling": {"factor": 40, '
                             '"original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1, '
                             '"mscale_all_dim": 1}}',
    "toy-v41.json": '{"dim": 64, "n_layers": 6, "n_heads": 4, "q_lora_rank": 32, "head_dim": 32, '
                    '"rope_head_dim": 8, "o_groups": 2, "o_lora_rank": 16, "window_size": 8, '
                    '"compress_ratios": [0, 2, 2, 1, 1, 1], "kv_source_layers": [1, 3], '
                    '"index_source_layers": [1, 3, 5], "candidate_source_layer": 3, "candidate_topk_blocks": 2, '
                    '"candidate_block_size": 4, "index_n_heads": 4, "index_head_dim": 16, "index_topk": 4, '
                    '"compress_rope_theta": 160000, "rope_factor": 4, "original_seq_len": 64, "beta_fast": 32, '
                    '"beta_slow": 1, "_kvlineage": {"name": "toy", "kv_cache": "v41-fp4", "headline": false}}',
}


def write(subdir, name, data):
    path = os.path.join(CORPUS, subdir, name)
    with open(path, "wb") as f:
        f.write(data)


def kvfmt(args, stdin):
    return subprocess.run([KVFMT] + args, input=stdin.encode(), capture_output=True, check=True).stdout.decode()


def lines(values):
    return "".join(f"{float(v)!r}\n" for v in values)


def config_corpus():
    for path in sorted(glob.glob(os.path.join(ROOT, "ref", "configs", "*.json")) +
                       glob.glob(os.path.join(ROOT, "chapters", "*", "*.json"))):
        shutil.copy(path, os.path.join(CORPUS, "config", os.path.basename(path)))
    for name, text in TOY_CONFIGS.items():
        write("config", name, text.encode())


def kvfmt_corpus(rng):
    def normal(n, scale=1.0):
        return lines(rng.standard_normal(n) * scale)

    calls = {
        "encode-args": "encode --format e4m3 1.5 -0 nan inf 0x1p-149 3.4028234663852886e38\n",
        "encode-stdin-saturate": "encode --saturate --format e5m2\n1\n2.5\n-65536\n1e-7\n",
        "encode-e8m0": "encode --format=e8m0 0.75 3 1e-45\n",
        "decode-bf16": "decode --format bf16 0x7f80 0 65535 0x0001\n",
        "decode-e2m1": "decode --format e2m1 0x7 15 -- 8\n",
        "table-e2m1": "table --format e2m1\n",
        "quant-mxfp4": "quant --scheme mxfp4\n" + normal(32),
        "quant-mxfp8": "quant --scheme mxfp8\n" + normal(32, 100.0),
        "quant-nvfp4": "quant --scheme nvfp4\n" + normal(16, 1e-3),
        "quant-nvfp4-noglobal": "quant --scheme nvfp4-noglobal\n" + normal(16),
        "quant-fp8-128": "quant --scheme fp8-128\n" + normal(128),
        "quant-bad-count": "quant --scheme mxfp4\n1 2 3\n",
        "row-map": "row --layout v41-main\n",
        "row-pack-v4-index": "row --layout v4-index --pack\n" + normal(128),
        "fp4-demo": "fp4-demo --seed 3\n",
        "help": "encode -h\n",
        "bad-option": "encode --format e4m3 --frob 1\n",
    }
    for layout in LAYOUTS:
        values = normal(VALUES[layout])
        hexrow = kvfmt(["row", "--layout", layout, "--pack"], values)
        calls[f"row-unpack-{layout}"] = f"row --layout {layout} --unpack\n" + hexrow + values
    for name, text in calls.items():
        write("kvfmt", name, text.encode())


def rows_corpus(rng):
    for index, layout in enumerate(LAYOUTS):
        values = rng.standard_normal(VALUES[layout]).astype(np.float32)
        hexrow = kvfmt(["row", "--layout", layout, "--pack"], lines(values)).strip()
        write("rows", f"{layout}-packed", bytes([index]) + bytes.fromhex(hexrow))
        write("rows", f"{layout}-floats", bytes([index]) + values.astype("<f4").tobytes())
        write("rows", f"{layout}-zero", bytes([index]) + bytes(4 * VALUES[layout]))
        extremes = np.resize(np.array([3.4028234663852886e38, -1.401298464324817e-45, -0.0, 448.0], np.float32),
                             VALUES[layout])
        write("rows", f"{layout}-extremes", bytes([index]) + extremes.astype("<f4").tobytes())
    write("rows", "unknown-layout", bytes([6]) + struct.pack("<4f", 1, 2, 3, 4))


def safetensors_file(tensors, metadata=None):
    """tensors: [(name, dtype, shape, raw bytes)]; the header padded with spaces to a multiple of 8."""
    header, at = {}, 0
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(raw for _, _, _, raw in tensors)


def safetensors_corpus(rng):
    def f32(shape):
        return rng.standard_normal(shape).astype("<f4").tobytes()

    def u8(n):
        return rng.integers(0, 256, n, dtype=np.uint8).tobytes()

    files = {
        "all-dtypes": [("a.f32", "F32", [2, 3], f32([2, 3])), ("b.f16", "F16", [4], np.float16([1, -2, 65504, 6e-8]).tobytes()),
                       ("c.bf16", "BF16", [3], u8(6)), ("d.e4m3", "F8_E4M3", [2, 4], u8(8)),
                       ("e.e8m0", "F8_E8M0", [2], bytes([127, 130])), ("f.f4", "F4", [2, 4], u8(4)),
                       ("g.i8", "I8", [4], u8(4)), ("h.u8", "U8", [1], u8(1)), ("i.i32", "I32", [1], u8(4)),
                       ("j.i64", "I64", [1], u8(8))],
        "fp8-weight-with-scales": [("layers.0.attn.wq_a.weight", "F8_E4M3", [3, 130], u8(390)),
                                   ("layers.0.attn.wq_a.scale", "F32", [1, 2], f32([1, 2]))],
        "scalar-and-empty": [("s", "F32", [], f32([1])), ("z", "BF16", [0, 5], b"")],
        "float64": [("x", "F64", [2, 2], struct.pack("<4d", 1 / 3, -2.5, 1e300, 5e-324))],
        "empty-header": [],
    }
    for name, tensors in files.items():
        write("safetensors", name, safetensors_file(tensors, {"format": "pt"} if name == "all-dtypes" else None))


def npy_file(header, data, major=1):
    """The magic, version major.0, the header dict padded with spaces and ended by '\\n' to 64 bytes, data."""
    pre = 10 if major == 1 else 12
    text = header.encode() + b" " * (-(pre + len(header) + 1) % 64) + b"\n"
    length = struct.pack("<H" if major == 1 else "<I", len(text))
    return b"\x93NUMPY" + bytes([major, 0]) + length + text + data


def npy_corpus():
    f4 = struct.pack("<6f", 1.5, -2, 0, 3.25e-5, 1e30, -7)
    f8 = struct.pack("<4d", 1 / 3, -2.5, 1e300, 5e-324)
    files = {
        "f4-2d": npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", f4),
        "f8-1d": npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (4,), }", f8),
        "f4-empty": npy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", b""),
        "v2-double-quotes": npy_file('{"shape": (3, 2), "descr": "<f4", "fortran_order": False}', f4, 2),
        "v3-no-spaces": npy_file("{'fortran_order':False,'shape':(6,),'descr':'<f4'}", f4, 3),
        "refused-fortran": npy_file("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", f4),
        "refused-i4": npy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (6,), }", f4),
        "refused-short": npy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (2000000000,), }", f8),
    }
    for name, data in files.items():
        write("npy", name, data)


def json_text_corpus():
    texts = {
        "values.json": '{"a": [true, false, null, 0, -0.5e-3, 1E+2, 123456789012345678901234567890], '
                       '"b": {"c": {}, "d": []}, "e": ""}',
        "escapes.json": '["\\" \\\\ \\/ \\b \\f \\n \\r \\t", "\\u00e9 \\u20AC \\uD83D\\uDE00"]',
        "utf8.json": '{"caf\u00e9 \u20ac \U0001F600 \U0010FFFF": "\u007f"}',
        "blanks.json": ' \t\r\n[ 1 ,\n  2 ]\n',
        "toy-v41.json": TOY_CONFIGS["toy-v41.json"],
        "index.json": '{"metadata": {"total_size": 28}, "weight_map": {"a.weight": "model-00001-of-00002.safetensors", '
                      '"b.weight": "model-00002-of-00002.safetensors"}}',
    }
    for name, text in texts.items():
        write("json_text", name, text.encode())


def args_corpus():
    lines = {
        "counts": (0, ["--tokens", "2048", "--seed", "0", "--contexts", "1K,32K,128K"]),
        "flag-alone": (0, ["--no-timing", "--contexts", "4k,100"]),
        "reals": (1, ["0.25", "2", "1e-3", ".5", "7.", "3E+2"]),
        "help": (0, ["--tokens", "16", "--help"]),
        "repeated": (0, ["--seed", "1", "--seed", "2"]),
        "no-value": (0, ["--contexts"]),
        "positional": (1, ["config.json", "--tokens", "64", "out.npy"]),
        "refused-values": (1, ["+5", " 5", "0x10", "inf", "nan", "1,", ",1", "0K", "99999999999999999999", ""]),
    }
    for name, (positional, args) in lines.items():
        write("args", name, bytes([positional]) + b"".join(a.encode() + b"\0" for a in args))


def main():
    for subdir in ("config", "kvfmt", "rows", "safetensors", "npy", "json_text", "args"):
        os.makedirs(os.path.join(CORPUS, subdir), exist_ok=True)
    rng = np.random.default_rng(20261130)
    config_corpus()
    kvfmt_corpus(rng)
    rows_corpus(rng)
    safetensors_corpus(rng)
    npy_corpus()
    json_text_corpus()
    args_corpus()


if __name__ == "__main__":
    main()
