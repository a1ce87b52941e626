#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets: small valid inputs (plus a few near-misses) for
fuzz_safetensors, fuzz_gguf and fuzz_config_json, made with the safetensors and gguf packages so
the seeds follow the formats as their reference writers produce them.

Usage: python3 fuzz/make_corpus.py OUT_DIR   (creates OUT_DIR/<target>/<seed files>)"""
import json
import os
import struct
import sys
import tempfile

import numpy as np
from gguf import GGML_QUANT_SIZES, GGMLQuantizationType as T, GGUFWriter
from safetensors.numpy import save as st_save


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


def main():
    out = sys.argv[1]
    rng = np.random.default_rng(0)  # seeds are fixed; the fuzzer supplies the randomness
    corpora = {"fuzz_safetensors": safetensors_seeds(rng), "fuzz_config_json": {
        k: json.dumps(v, indent=1).encode() for k, v in CONFIGS.items()}}
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
