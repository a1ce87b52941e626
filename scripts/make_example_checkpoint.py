#!/usr/bin/env python3
"""Writes a tiny ModelOpt mixed-precision checkpoint for tests, docs and `b12x inspect` demos.

    python3 scripts/make_example_checkpoint.py /tmp/tiny-mixed [--split] [--config config|hf|both]
                                                [--fault NAME] [--seed S]
    b12x inspect /tmp/tiny-mixed --tp 2

The model is shaped like a two-layer Qwen3-MoE (hidden 512, intermediate 1024, vocab 1024, 8 query
heads and 4 KV heads of 64, layer 0 dense, layer 1 with 4 routed experts of intermediate 512):

    model.embed_tokens                 Q8_0        (the only packed embedding format)
    layers.0 q/k/v_proj                NVFP4       (weight_scale, weight_scale_2, input_scale)
    layers.0 o_proj                    FP8         (per-tensor weight_scale, input_scale)
    layers.0 gate/up_proj              IQ2_XS      (packing "ggml")
    layers.0 down_proj                 IQ2_XXS
    layers.1 q/k/v_proj                MXFP8       (UE8M0 scales stored as U8)
    layers.1 o_proj                    Q8_0
    layers.1 mlp.experts.{0..3}.*      IQ2_XXS     (one entry for the experts module)
    layers.1 mlp.gate (router), lm_head  BF16      (ignored: "*.mlp.gate", "lm_head")
    norms                              BF16

Weights are random but valid: E2M1/E4M3 codes from ml_dtypes casts, finite FP16 block scales with
random other bytes for the GGML codecs (every grid index and sign pattern of IQ2 is valid), so
every layer decodes to finite numbers. The quantization config goes to config.json
(`quantization_config`, default), hf_quant_config.json (`--config hf`) or both. `--split` writes two
files plus model.safetensors.index.json.

`--fault NAME` breaks exactly one thing, for tests (FAULTS below: the layer and the rule that
`b12x inspect` must name): payload, group, packing, quantized-norm, shape, missing-scale, embedding.
"""
import argparse
import json
import os
import sys

import ml_dtypes as md
import numpy as np
import safetensors.numpy as stn

# fault -> (layer the problem is reported on, words of the rule the message must contain)
FAULTS = {
    "payload": ("model.layers.0.mlp.gate_proj", ["74"]),
    "group": ("model.layers.0.mlp.down_proj", ["group_size 128", "256"]),
    "packing": ("model.layers.1.self_attn.o_proj", ["packing", "ggml"]),
    "quantized-norm": ("model.layers.0.input_layernorm", ["normalization", "floating point"]),
    "shape": ("model.layers.0.mlp.up_proj", ["must share K"]),
    "missing-scale": ("model.layers.0.self_attn.q_proj", ["weight_scale is missing"]),
    "embedding": ("model.embed_tokens", ["only Q8_0"]),
}

GGML = {"Q8_0": (32, 34, 8.5), "IQ2_XXS": (256, 66, 2.0625), "IQ2_XS": (256, 74, 2.3125)}

E4M3_MAX = 448.0


def ggml_entry(algo):
    group, payload, bits = GGML[algo]
    return {"quant_algo": algo, "group_size": group, "block_payload_bytes": payload, "packing": "ggml",
            "effective_bits": bits}


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.tensors = {}
        self.layers = {}  # layer -> ModelOpt quant_algo, or the dtype name when unquantized
        self.entries = {}

    # ---- formats ----------------------------------------------------------------------------------
    def e4m3(self, shape, lo, hi):
        v = self.rng.uniform(lo, hi, shape) * self.rng.choice([-1.0, 1.0], shape)
        return np.clip(v, -E4M3_MAX, E4M3_MAX).astype(np.float32).astype(md.float8_e4m3fn)

    def scalar(self, v):
        return np.array(v, np.float32)  # shape [], as ModelOpt writes scalars

    def bf16(self, name, shape, scale=0.02, ones=False):
        v = np.ones(shape, np.float32) if ones else self.rng.normal(0, scale, shape).astype(np.float32)
        self.tensors[name + ".weight"] = v.astype(md.bfloat16)
        self.layers[name] = "BF16"

    def nvfp4(self, name, n, k, algo="NVFP4"):
        self.tensors[name + ".weight"] = self.rng.integers(0, 256, (n, k // 2), dtype=np.uint8)
        self.tensors[name + ".weight_scale"] = np.abs(self.e4m3((n, k // 16), 0.5, 8.0))
        self.tensors[name + ".weight_scale_2"] = self.scalar(self.rng.uniform(1e-4, 1e-3))
        if algo == "NVFP4":
            self.tensors[name + ".input_scale"] = self.scalar(self.rng.uniform(0.01, 0.1))
        self.layers[name] = algo
        self.entries[name] = {"quant_algo": algo, "group_size": 16}

    def fp8(self, name, n, k):
        self.tensors[name + ".weight"] = self.e4m3((n, k), 0.0, 448.0)
        self.tensors[name + ".weight_scale"] = self.scalar(self.rng.uniform(1e-4, 1e-3))
        self.tensors[name + ".input_scale"] = self.scalar(self.rng.uniform(0.01, 0.1))
        self.layers[name] = "FP8"
        self.entries[name] = {"quant_algo": "FP8"}

    def mxfp8(self, name, n, k):
        self.tensors[name + ".weight"] = self.e4m3((n, k), 0.0, 448.0)
        self.tensors[name + ".weight_scale"] = self.rng.integers(110, 125, (n, k // 32), dtype=np.uint8)
        self.layers[name] = "MXFP8"
        self.entries[name] = {"quant_algo": "MXFP8", "group_size": 32}

    def ggml_blocks(self, algo, n, k):
        group, payload, _ = GGML[algo]
        blocks = self.rng.integers(0, 256, (n, k // group, payload), dtype=np.uint8)
        d = self.rng.uniform(2.0**-12, 2.0**-6, (n, k // group)) * self.rng.choice([-1.0, 1.0], (n, k // group))
        blocks[..., 0:2] = d.astype(np.float16)[..., None].view(np.uint8)
        return blocks

    def ggml(self, name, n, k, algo, entry=True):
        self.tensors[name + ".weight"] = self.ggml_blocks(algo, n, k)
        self.layers[name] = algo
        if entry:
            self.entries[name] = ggml_entry(algo)


def build(b, hidden, intermediate, vocab, experts, moe_intermediate, heads=8, kv_heads=4, head_dim=64):
    q_dim, kv_dim = heads * head_dim, kv_heads * head_dim
    b.ggml("model.embed_tokens", vocab, hidden, "Q8_0")
    for layer in range(2):
        p = f"model.layers.{layer}"
        b.bf16(p + ".input_layernorm", (hidden,), ones=True)
        b.bf16(p + ".post_attention_layernorm", (hidden,), ones=True)
        b.bf16(p + ".self_attn.q_norm", (head_dim,), ones=True)
        b.bf16(p + ".self_attn.k_norm", (head_dim,), ones=True)
        attn = b.nvfp4 if layer == 0 else b.mxfp8
        attn(p + ".self_attn.q_proj", q_dim, hidden)
        attn(p + ".self_attn.k_proj", kv_dim, hidden)
        attn(p + ".self_attn.v_proj", kv_dim, hidden)
        if layer == 0:
            b.fp8(p + ".self_attn.o_proj", hidden, q_dim)
            b.ggml(p + ".mlp.gate_proj", intermediate, hidden, "IQ2_XS")
            b.ggml(p + ".mlp.up_proj", intermediate, hidden, "IQ2_XS")
            b.ggml(p + ".mlp.down_proj", hidden, intermediate, "IQ2_XXS")
        else:
            b.ggml(p + ".self_attn.o_proj", hidden, q_dim, "Q8_0")
            b.bf16(p + ".mlp.gate", (experts, hidden))
            for e in range(experts):
                q = f"{p}.mlp.experts.{e}"
                b.ggml(q + ".gate_proj", moe_intermediate, hidden, "IQ2_XXS", entry=False)
                b.ggml(q + ".up_proj", moe_intermediate, hidden, "IQ2_XXS", entry=False)
                b.ggml(q + ".down_proj", hidden, moe_intermediate, "IQ2_XXS", entry=False)
            b.entries[p + ".mlp.experts"] = ggml_entry("IQ2_XXS")
    b.bf16("model.norm", (hidden,), ones=True)
    b.bf16("lm_head", (vocab, hidden))


def inject(b, fault, hidden):
    if fault is None:
        return
    layer, _ = FAULTS[fault]
    if fault == "payload":  # 72-byte blocks, and an entry that agrees with the tensor
        b.tensors[layer + ".weight"] = np.ascontiguousarray(b.tensors[layer + ".weight"][..., :72])
        b.entries[layer]["block_payload_bytes"] = 72
    elif fault == "group":
        b.entries[layer]["group_size"] = 128
    elif fault == "packing":
        b.entries[layer]["packing"] = "gguf"
    elif fault == "quantized-norm":
        b.tensors[layer + ".weight"] = b.ggml_blocks("Q8_0", 1, hidden)[0]  # [hidden/32, 34]
        b.entries[layer] = ggml_entry("Q8_0")
        b.layers[layer] = "Q8_0"
    elif fault == "shape":  # up_proj loses one 256-weight block per row: K = hidden - 256
        b.tensors[layer + ".weight"] = np.ascontiguousarray(b.tensors[layer + ".weight"][:, 1:, :])
    elif fault == "missing-scale":
        del b.tensors[layer + ".weight_scale"]
    elif fault == "embedding":
        n = b.tensors[layer + ".weight"].shape[0]
        b.tensors[layer + ".weight"] = b.ggml_blocks("IQ2_XS", n, hidden)
        b.entries[layer] = ggml_entry("IQ2_XS")
        b.layers[layer] = "IQ2_XS"
    else:
        raise ValueError(f"unknown fault {fault!r} (known: {', '.join(FAULTS)})")


def make_checkpoint(out_dir, *, seed=0, split=False, config="config", fault=None, hidden=512, intermediate=1024,
                    vocab=1024, experts=4, moe_intermediate=512):
    """Writes the checkpoint into out_dir and returns {"layers": {layer: quant_algo or "BF16"},
    "files": [...], "fault": (layer, rule words) or None}."""
    if config not in ("config", "hf", "both"):
        raise ValueError(f"config must be config, hf or both, got {config!r}")
    os.makedirs(out_dir, exist_ok=True)
    b = Builder(seed)
    build(b, hidden, intermediate, vocab, experts, moe_intermediate)
    inject(b, fault, hidden)

    ignore = ["lm_head", "*.mlp.gate"]
    model_config = {
        "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "torch_dtype": "bfloat16",
        "hidden_size": hidden, "intermediate_size": intermediate, "moe_intermediate_size": moe_intermediate,
        "vocab_size": vocab, "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 4,
        "head_dim": 64, "num_experts": experts, "num_experts_per_tok": 2, "mlp_only_layers": [0],
        "decoder_sparse_step": 1, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
    }
    if config in ("config", "both"):
        model_config["quantization_config"] = {
            "quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "kv_cache_scheme": None,
            "ignore": ignore, "quantized_layers": b.entries}
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(model_config, f, indent=2)
    if config in ("hf", "both"):
        hf = {"producer": {"name": "modelopt", "version": "0.0.0-example"},
              "quantization": {"quant_algo": "MIXED_PRECISION", "kv_cache_quant_algo": None,
                               "exclude_modules": ignore, "quantized_layers": b.entries}}
        with open(os.path.join(out_dir, "hf_quant_config.json"), "w") as f:
            json.dump(hf, f, indent=2)

    names = sorted(b.tensors)
    if not split:
        files = {"model.safetensors": names}
    else:  # embeddings and layer 0 in the first file, the rest in the second
        first = [n for n in names if n.startswith(("model.embed_tokens.", "model.layers.0."))]
        second = [n for n in names if n not in first]
        files = {"model-00001-of-00002.safetensors": first, "model-00002-of-00002.safetensors": second}
        weight_map = {n: file for file, ns in files.items() for n in ns}
        total = sum(b.tensors[n].nbytes for n in names)
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    for file, ns in files.items():
        # (np.ascontiguousarray would turn the 0-d scalars into shape [1])
        stn.save_file({n: np.require(b.tensors[n], requirements="C") for n in ns}, os.path.join(out_dir, file),
                      metadata={"format": "pt"})
    return {"layers": dict(b.layers), "files": list(files), "fault": FAULTS[fault] if fault else None}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--split", action="store_true", help="two safetensors files plus an index")
    ap.add_argument("--config", choices=["config", "hf", "both"], default="config",
                    help="where the quantization config goes (config.json, hf_quant_config.json, both)")
    ap.add_argument("--fault", choices=sorted(FAULTS), help="break one thing (for tests)")
    args = ap.parse_args(argv)
    info = make_checkpoint(args.out_dir, seed=args.seed, split=args.split, config=args.config, fault=args.fault)
    print(f"wrote {args.out_dir}: {len(info['layers'])} weights in {', '.join(info['files'])}")
    if info["fault"]:
        print(f"fault {args.fault}: expect a problem on {info['fault'][0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
