#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: small valid inputs (plus a few near-misses) for
fuzz_safetensors, fuzz_gguf, fuzz_config_json and fuzz_checkpoint, made with the safetensors and
gguf packages so the seeds follow the formats as their reference writers produce them. The
checkpoint seeds are tiny versions of scripts/make_example_checkpoint.py's model, built with its
Builder (same tensors, dtypes and quantized_layers entries, smaller shapes), in the section layout
fuzz/fuzz_checkpoint.cpp reads.

Usage: python3 fuzz/make_corpus.py OUT_DIR   (creates OUT_DIR/<target>/<seed files>)"""
import json
import os
import struct
import sys
import tempfile

import numpy as np
import ml_dtypes as md
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T, GGUFWriter
from safetensors.numpy import save as st_save

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import make_example_checkpoint as example  # noqa: E402  (Builder, ggml_entry, inject, FAULTS)


def blocks(rng, qtype, rows, k):
    group, payload = GGML_QUANT_SIZES[qtype]
    b = rng.integers(0, 256, size=(rows, k // group, payload), dtype=np.uint8)
    b[..., 0:2] = np.full((rows, k // group), 0.01, dtype=np.float16).view(np.uint8).reshape(rows, k // group, 2)
    return b.reshape(rows, -1)


def safetensors_seeds(rng):
    seeds = {
        "f32": st_save({"w": rng.standard_normal((2, 3)).astype(np.float32)}),
        "mixed": st_save({"model.layers.0.mlp.down_proj.weight": blocks(rng, T.Q8_0, 2, 32).reshape(2, 1, 34),
                          "b": np.arange(3, dtype=np.int64), "c": np.zeros((0, 4), dtype=np.float16),
                          "s": np.array(0.5, dtype=np.float32)}, metadata={"format": "pt", "k": "v"}),
        "int": st_save({"i8": np.arange(-4, 4, dtype=np.int8), "i32": np.arange(2, dtype=np.int32),
                        "f64": np.ones(1, dtype=np.float64)}),
    }
    # Near-misses the reader must refuse: overlapping ranges, a hole, an unknown dtype.
    for name, header in {
        "overlap": {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                    "b": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]}},
        "hole": {"a": {"dtype": "U8", "shape": [2], "data_offsets": [2, 4]}},
        "dtype": {"a": {"dtype": "F4", "shape": [8], "data_offsets": [0, 4]}},
    }.items():
        text = json.dumps(header).encode()
        seeds[name] = struct.pack("<Q", len(text)) + text + bytes(4)
    return seeds


def gguf_seeds(rng, tmp):
    def write(arch, tensors, metadata=(), alignment=None):
        path = os.path.join(tmp, "seed.gguf")
        w = GGUFWriter(path, arch)
        if alignment:
            w.add_custom_alignment(alignment)
        for method, *args in metadata:
            getattr(w, method)(*args)
        for name, array, raw in tensors:
            w.add_tensor(name, array, raw_dtype=raw)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(path, "rb") as f:
            return f.read()

    seeds = {}
    seeds["llama"] = write("llama", [
        ("token_embd.weight", blocks(rng, T.Q8_0, 4, 32), T.Q8_0),
        ("blk.0.attn_q.weight", blocks(rng, T.IQ2_XS, 2, 256), T.IQ2_XS),
        ("blk.0.attn_k.weight", blocks(rng, T.IQ2_XXS, 2, 256), T.IQ2_XXS),
        ("blk.0.attn_norm.weight", np.ones(8, dtype=np.float32), None),
        ("output.weight", np.ones((2, 4), dtype=np.uint16), T.BF16),
    ], [("add_block_count", 1), ("add_head_count", 2), ("add_rope_freq_base", 1e4)])
    seeds["metadata"] = write("qwen2", [("a", np.ones(4, dtype=np.float16), None)], [
        ("add_uint8", "u8", 7), ("add_int8", "i8", -7), ("add_uint16", "u16", 700), ("add_int16", "i16", -700),
        ("add_uint32", "u32", 70000), ("add_int32", "i32", -70000), ("add_float32", "f32", 0.5),
        ("add_bool", "b", True), ("add_uint64", "u64", 1 << 40), ("add_int64", "i64", -(1 << 40)),
        ("add_float64", "f64", 0.25), ("add_array", "arr", [1, 2, 3]), ("add_array", "strs", ["x", "yz"]),
        ("add_string", "s", "text")])
    seeds["types"] = write("x", [
        ("q4k", rng.integers(0, 256, size=(1, 144), dtype=np.uint8), T.Q4_K),
        ("i32", np.arange(4, dtype=np.int32), None), ("f64", np.ones(2, dtype=np.float64), None),
        ("i8", np.ones(3, dtype=np.int8), None), ("empty", np.zeros((0, 8), dtype=np.float32), None),
    ], alignment=64)
    v2 = bytearray(seeds["metadata"])
    v2[4:8] = struct.pack("<I", 2)
    seeds["version2"] = bytes(v2)
    return seeds


CONFIGS = {
    "mixed.json": {"architectures": ["LlamaForCausalLM"], "quantization_config": {
        "quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "kv_cache_scheme": {"type": "float", "num_bits": 8},
        "ignore": ["lm_head", "*.mlp.gate", "model.layers.1.*"],
        "quantized_layers": {
            "model.layers.0.self_attn.q_proj": {"quant_algo": "IQ2_XS", "group_size": 256, "block_payload_bytes": 74,
                                                "packing": "ggml", "effective_bits": 2.3125},
            "model.layers.0.mlp.experts": {"quant_algo": "Q8_0", "group_size": 32, "block_payload_bytes": 34,
                                           "packing": "ggml", "row_padding": "right",
                                           "logical_shape_key": "weight_logical_shape",
                                           "padded_shape_key": "weight_padded_shape"},
            "model.layers.0.mlp.down_proj": {"quant_algo": "nvfp4", "group_size": 16},
            "model.layers.0.mlp.up_proj": {"quant_algo": "FP8"}}}},
    "fp8.json": {"quantization_config": {"quant_method": "modelopt", "quant_algo": "FP8", "ignore": ["lm_head"]}},
    "deepseek.json": {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128],
                                              "modules_to_not_convert": ["model.layers.0.mlp.gate"]}},
    "hf_quant_config.json": {"producer": {"name": "modelopt", "version": "0.29"},
                             "quantization": {"quant_algo": "NVFP4", "group_size": 16,
                                              "exclude_modules": ["lm_head", "*router*"],
                                              "kv_cache_quant_algo": "FP8"}},
    "plain.json": {"architectures": ["X"], "hidden_size": 8},
    "bad_algo.json": {"quantization_config": {"quant_method": "gptq", "bits": 4}},
}


# ---- fuzz_checkpoint ----------------------------------------------------------------------------

CHECKPOINT_SEP = b"\n--b12x--\n"  # fuzz_checkpoint.cpp kSep


def safetensors_parts(tensors):
    """(header JSON, data buffer) of a safetensors file: fuzz_checkpoint writes the length itself."""
    raw = st_save({n: np.require(v, requirements="C") for n, v in sorted(tensors.items())}, metadata={"format": "pt"})
    (n,) = struct.unpack("<Q", raw[:8])
    return raw[8:8 + n], raw[8 + n:]


def checkpoint_input(tensors, config=None, hf=None, split_marker=None):
    """Sections: config.json, hf_quant_config.json, model.safetensors header + data, index, second
    file header + data. With split_marker, tensors whose name contains it go to the second file."""
    dump = lambda j: json.dumps(j).encode() if j is not None else b""  # noqa: E731
    sections = [dump(config), dump(hf)]
    if split_marker is None:
        sections += list(safetensors_parts(tensors)) + [b"", b"", b""]
    else:
        first = {n: v for n, v in tensors.items() if split_marker not in n}
        second = {n: v for n, v in tensors.items() if split_marker in n}
        weight_map = {n: ("model-00002-of-00002.safetensors" if n in second else "model.safetensors") for n in tensors}
        index = {"metadata": {"total_size": sum(v.nbytes for v in tensors.values())}, "weight_map": weight_map}
        sections += list(safetensors_parts(first)) + [dump(index)] + list(safetensors_parts(second))
    return CHECKPOINT_SEP.join(sections)


def modelopt_config(b, algo="MIXED_PRECISION", ignore=("lm_head", "*.mlp.gate")):
    return {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe",
            "quantization_config": {"quant_method": "modelopt", "quant_algo": algo, "kv_cache_scheme": None,
                                    "ignore": list(ignore), "quantized_layers": b.entries}}


def hf_config(b, algo="MIXED_PRECISION", ignore=("lm_head", "*.mlp.gate")):
    return {"producer": {"name": "modelopt", "version": "0.0.0-example"},
            "quantization": {"quant_algo": algo, "kv_cache_quant_algo": None, "exclude_modules": list(ignore),
                             "quantized_layers": b.entries}}


def small_mixed(seed=0, fault=None):
    """make_example_checkpoint's model, shrunk: Q8_0 embedding, NVFP4 / MXFP8 attention, FP8 and Q8_0
    o_proj, IQ2_XS gate/up, IQ2_XXS down_proj, BF16 norms, router and (ignored) lm_head."""
    b = example.Builder(seed)
    b.ggml("model.embed_tokens", 8, 32, "Q8_0")
    for layer in range(2):
        p = f"model.layers.{layer}"
        b.bf16(p + ".input_layernorm", (32,), ones=True)
        attn = b.nvfp4 if layer == 0 else b.mxfp8
        for proj in ("q_proj", "k_proj", "v_proj"):
            attn(f"{p}.self_attn.{proj}", 8, 32)
    b.fp8("model.layers.0.self_attn.o_proj", 8, 32)
    b.ggml("model.layers.0.mlp.gate_proj", 8, 256, "IQ2_XS")
    b.ggml("model.layers.0.mlp.up_proj", 8, 256, "IQ2_XS")
    b.ggml("model.layers.1.self_attn.o_proj", 8, 64, "Q8_0")
    b.ggml("model.layers.1.mlp.down_proj", 8, 256, "IQ2_XXS")  # no gate/up in layer 1: no K = N rule
    b.bf16("model.layers.1.mlp.gate", (2, 32))
    b.bf16("model.norm", (32,), ones=True)
    b.bf16("lm_head", (8, 32))
    if fault == "group":
        b.entries["model.layers.1.mlp.down_proj"]["group_size"] = 128
    elif fault:
        example.inject(b, fault, 256 if fault == "embedding" else 32)
    return b


def checkpoint_seeds():
    seeds = {}
    b = small_mixed()
    seeds["mixed"] = checkpoint_input(b.tensors, config=modelopt_config(b))
    seeds["mixed_hf_split"] = checkpoint_input(b.tensors, hf=hf_config(b), split_marker="layers.1.")
    seeds["mixed_both_split"] = checkpoint_input(b.tensors, config=modelopt_config(b), hf=hf_config(b),
                                                 split_marker="model.layers.0.mlp")
    seeds["mixed_disagree"] = checkpoint_input(b.tensors, config=modelopt_config(b), hf=hf_config(b, ignore=["lm_head"]))
    for fault in ("payload", "group", "packing", "quantized-norm", "shape", "missing-scale", "embedding"):
        f = small_mixed(fault=fault)
        seeds["fault_" + fault] = checkpoint_input(f.tensors, config=modelopt_config(f))

    # Shapes that split across 2 and 4 ranks in every style, and the remaining formats.
    b = example.Builder(1)
    b.nvfp4("model.layers.0.self_attn.q_proj", 16, 64)
    b.ggml("model.layers.0.self_attn.o_proj", 16, 128, "Q8_0")
    b.ggml("model.layers.0.mlp.gate_proj", 16, 256, "IQ2_XS")
    b.ggml("model.layers.0.mlp.up_proj", 16, 256, "IQ2_XS")
    b.fp8("model.layers.0.mlp.down_proj", 16, 16)
    b.tensors["model.layers.0.mlp.down_proj.bias"] = np.linspace(-1, 1, 16, dtype=np.float32)
    b.mxfp8("model.layers.1.self_attn.o_proj", 8, 128)
    p = "model.layers.1.self_attn.q_proj"  # FP8_PB_WO: 4-D weight_scale [N/128, 1, K/128, 1]
    b.tensors[p + ".weight"] = b.e4m3((8, 128), 0.0, 448.0)
    b.tensors[p + ".weight_scale"] = np.full((1, 1, 1, 1), 1e-3, np.float32)
    b.entries[p] = {"quant_algo": "FP8_PB_WO"}
    p = "model.layers.1.mlp.down_proj"  # FP8_PER_CHANNEL_PER_TOKEN: weight_scale [N]
    b.tensors[p + ".weight"] = b.e4m3((8, 32), 0.0, 448.0)
    b.tensors[p + ".weight_scale"] = np.full(8, 1e-3, np.float32)
    b.entries[p] = {"quant_algo": "FP8_PER_CHANNEL_PER_TOKEN"}
    b.bf16("model.layers.1.self_attn.k_proj", (16, 128))
    b.tensors["model.layers.1.self_attn.k_proj.bias"] = np.zeros(16, md.bfloat16)
    seeds["tp_formats"] = checkpoint_input(b.tensors, config=modelopt_config(b))

    # Row padding (Q8_0 with logical / padded shape companions) and experts.
    b = example.Builder(2)
    b.ggml("model.layers.0.self_attn.o_proj", 8, 32, "Q8_0")
    b.entries["model.layers.0.self_attn.o_proj"]["row_padding"] = "right"
    b.tensors["model.layers.0.self_attn.o_proj.weight_logical_shape"] = np.array([6, 32], np.int64)
    b.tensors["model.layers.0.self_attn.o_proj.weight_padded_shape"] = np.array([8, 32], np.int32)
    for e in range(2):
        for proj in ("gate_proj", "up_proj", "down_proj"):
            b.ggml(f"model.layers.1.mlp.experts.{e}.{proj}", 8, 32, "Q8_0", entry=False)
            b.bf16(f"model.layers.2.mlp.experts.{e}.{proj}", (8, 8))
    b.entries["model.layers.1.mlp.experts"] = example.ggml_entry("Q8_0")
    b.bf16("model.layers.1.mlp.gate", (2, 32))
    seeds["padding_experts"] = checkpoint_input(b.tensors, config=modelopt_config(b))

    # Global formats: FP8 for every linear layer but the ignored and the routers; DeepSeek 128x128 FP8.
    b = example.Builder(3)
    b.fp8("model.layers.0.self_attn.o_proj", 8, 32)
    b.fp8("model.layers.0.mlp.experts.0.down_proj", 8, 32)
    b.bf16("model.layers.0.mlp.gate", (2, 32))
    b.bf16("model.embed_tokens", (8, 32))
    b.bf16("lm_head", (8, 32))
    b.entries = {}
    seeds["global_fp8"] = checkpoint_input(b.tensors, config=modelopt_config(b, algo="FP8", ignore=["lm_head"]))
    b = example.Builder(4)
    p = "model.layers.0.self_attn.q_proj"
    b.tensors[p + ".weight"] = b.e4m3((8, 160), 0.0, 448.0)
    b.tensors[p + ".weight_scale_inv"] = np.full((1, 2), 1e-3, np.float32)
    b.bf16("model.layers.0.mlp.gate", (2, 160))
    seeds["deepseek_fp8"] = checkpoint_input(b.tensors, config={"quantization_config": {
        "quant_method": "fp8", "weight_block_size": [128, 128], "modules_to_not_convert": ["model.layers.0.mlp.gate"]}})
    return seeds


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(0)  # seeds are fixed; the fuzzer supplies the randomness
    corpora = {"fuzz_safetensors": safetensors_seeds(rng), "fuzz_config_json": {
        k: json.dumps(v, indent=1).encode() for k, v in CONFIGS.items()}, "fuzz_checkpoint": checkpoint_seeds()}
    with tempfile.TemporaryDirectory() as tmp:
        corpora["fuzz_gguf"] = gguf_seeds(rng, tmp)
    for target, seeds in corpora.items():
        os.makedirs(os.path.join(out, target), exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(out, target, name), "wb") as f:
                f.write(data)
    print(f"make_corpus: {sum(len(s) for s in corpora.values())} seeds in {out}")


if __name__ == "__main__":
    main()
