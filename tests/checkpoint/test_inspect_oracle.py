"""`b12x inspect` on checkpoints from scripts/make_example_checkpoint.py, and layers taken out of them
through `b12x reference linear` / `reference embedding` against an independent numpy decode.

generate -> inspect (exit 0, one row per weight with the format the generator wrote, exact bytes) ->
per layer: tensors read straight from the safetensors files (safetensors for what its numpy backend
reads, a 20-line header parser for F8_E4M3), a case file, `b12x reference linear`, compared with
x @ W^T where W is decoded by ml_dtypes / gguf-py. Then every --fault must make inspect exit non-zero
naming the layer and the rule, --tp 2 must pass and --tp 3 / --tp 4 must fail naming the rule.
"""
import importlib.util
import json
import os
import struct
import subprocess
import sys
from pathlib import Path

import gguf
import ml_dtypes as md
import numpy as np
import pytest
import safetensors.numpy as stn
from safetensors import safe_open

from conftest import run_cli

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "make_example_checkpoint.py"
SEED = int(os.environ.get("B12X_SEED", int.from_bytes(os.urandom(4), "little")))

_spec = importlib.util.spec_from_file_location("make_example_checkpoint", SCRIPT)
mec = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mec)

RAW_DTYPES = {"U8": np.uint8, "F32": np.float32, "F16": np.float16, "BF16": md.bfloat16, "F8_E4M3": md.float8_e4m3fn}
GGUF_TYPES = {"q8_0": gguf.GGMLQuantizationType.Q8_0, "iq2_xxs": gguf.GGMLQuantizationType.IQ2_XXS,
              "iq2_xs": gguf.GGMLQuantizationType.IQ2_XS}
BPW = {"Q8_0": 8.5, "IQ2_XXS": 2.0625, "IQ2_XS": 2.3125, "MXFP8": 8.25, "BF16": 16.0}


def generate(path, **kw):
    return mec.make_checkpoint(str(path), seed=kw.pop("seed", SEED), **kw)


def inspect_json(path, *extra, check=True):
    proc = run_cli("inspect", path, "--json", *extra, check=check)
    return proc, json.loads(proc.stdout)


# ---- reading tensors without b12x ----------------------------------------------------------------

def file_of(ckpt, name):
    index = Path(ckpt) / "model.safetensors.index.json"
    if index.exists():
        return Path(ckpt) / json.loads(index.read_text())["weight_map"][name]
    return Path(ckpt) / "model.safetensors"


def read_raw(path, name):
    data = Path(path).read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    entry = json.loads(data[8:8 + n])[name]
    begin, end = entry["data_offsets"]
    return np.frombuffer(data[8 + n + begin:8 + n + end], RAW_DTYPES[entry["dtype"]]).reshape(entry["shape"])


def read_tensor(ckpt, name):
    path = file_of(ckpt, name)
    raw = read_raw(path, name)
    if raw.dtype != md.float8_e4m3fn:  # safetensors' numpy backend reads everything but F8
        with safe_open(str(path), framework="numpy") as f:
            via_lib = f.get_tensor(name)
        assert via_lib.tobytes() == raw.tobytes() and via_lib.shape == raw.shape, name
    return raw


# ---- numpy decoders (ml_dtypes / gguf-py are the oracles) ------------------------------------------

def scalar(a):
    a = np.asarray(a)
    assert a.shape == () and a.dtype == np.float32, a  # ModelOpt scalars: F32, shape []
    return float(a)


def e4m3(a):
    return np.asarray(a).view(np.uint8).view(md.float8_e4m3fn).astype(np.float64)


def decode(fmt, t):
    w = t["weight"]
    if fmt == "bf16":
        return w.astype(np.float64)
    if fmt == "fp8":
        return e4m3(w) * scalar(t["weight_scale"])
    if fmt == "mxfp8":
        return e4m3(w) * np.exp2(np.repeat(t["weight_scale"].astype(np.float64) - 127, 32, axis=1))
    if fmt == "nvfp4":
        codes = np.stack([w & 0xF, w >> 4], axis=-1).reshape(w.shape[0], -1)
        vals = codes.view(md.float4_e2m1fn).astype(np.float64)
        return vals * np.repeat(e4m3(t["weight_scale"]), 16, axis=1) * scalar(t["weight_scale_2"])
    if fmt in GGUF_TYPES:
        return gguf.quants.dequantize(w.reshape(w.shape[0], -1), GGUF_TYPES[fmt]).astype(np.float64)
    raise AssertionError(fmt)


# ---- fixtures -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def example(tmp_path_factory):
    path = tmp_path_factory.mktemp("example")
    info = generate(path)
    proc, report = inspect_json(path)
    return path, info, report


# ---- inspect --------------------------------------------------------------------------------------

def test_script_cli_writes_a_checkpoint_inspect_accepts(tmp_path):
    out = tmp_path / "ckpt"
    proc = subprocess.run([sys.executable, str(SCRIPT), str(out), "--split", "--seed", str(SEED)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    table = run_cli("inspect", out).stdout
    assert "summary: 35 layers" in table and "0 problem(s)" in table, table
    assert "model-00001-of-00002.safetensors" in table


def test_inspect_lists_every_weight_with_the_generated_format(example):
    path, info, report = example
    assert report["ok"] is True and report["summary"]["problems"] == 0, report["problems"]
    rows = {r["name"]: r for r in report["layers"]}
    assert set(rows) == set(info["layers"]), set(rows) ^ set(info["layers"])
    assert report["config"]["quant_algo"] == "MIXED_PRECISION"
    assert report["config"]["ignore"] == ["lm_head", "*.mlp.gate"]
    for name, label in info["layers"].items():
        row = rows[name]
        assert row["label"] == label, (name, row)
        assert row["problems"] == [] and row["tp_problems"] == [], (name, row)
        # bytes: every tensor of the layer but the bias, from the files' own headers
        want = sum(read_tensor(path, t).nbytes for role, t in row["tensors"].items() if role != "bias")
        assert row["bytes"] == want, name
        n_weights = int(np.prod(row["shape"]))
        assert row["bits_per_weight"] == pytest.approx(8 * want / n_weights)
        if label in BPW:
            assert row["bits_per_weight"] == pytest.approx(BPW[label]), name
        if label == "NVFP4":  # 4.5 bits + the two FP32 scalars
            assert row["bits_per_weight"] == pytest.approx(4.5 + 64 / n_weights), name
        if ".experts." in name:
            assert row["kind"] == "expert" and row["kernel_path"].startswith("unsupported: no fused MoE op"), row
        elif "norm" in name.split(".")[-1]:
            assert row["kind"] == "norm" and row["kernel_path"].startswith("unsupported"), row
        elif name == "model.embed_tokens":
            assert row["kind"] == "embedding" and row["kernel_path"] == "embedding.q8_0", row
        else:
            # The decode kernel after prepare_for_linear (BF16 activations): tile16 for every format
            # but 16-bit weights (these example shapes are whole tiles); IQ2 through mma_iq2.
            kernel = {"BF16": "mma", "F16": "gemv", "IQ2_XS": "mma_iq2", "IQ2_XXS": "mma_iq2"}.get(label, "mma_tile16")
            assert row["kind"] == "linear" and row["kernel_path"] == f"linear.decode {kernel} (M<=16)", row
    assert rows["lm_head"]["resolved_by"] == "ignore pattern 'lm_head'"
    assert rows["model.layers.1.mlp.gate"]["resolved_by"] == "ignore pattern '*.mlp.gate'"
    assert '["model.layers.1.mlp.experts"]' in rows["model.layers.1.mlp.experts.2.down_proj"]["resolved_by"]
    assert rows["model.layers.0.self_attn.o_proj"]["tp"] == "row"
    assert rows["model.layers.0.mlp.up_proj"]["tp"] == "column"


@pytest.mark.parametrize("split,config", [(True, "config"), (False, "hf"), (True, "both")])
def test_split_files_and_both_config_layouts(tmp_path, split, config):
    info = generate(tmp_path, split=split, config=config)
    proc, report = inspect_json(tmp_path)
    assert report["ok"], report
    assert report["files"] == info["files"]
    assert report["config"]["source"] == ("hf_quant_config.json" if config == "hf" else "config.json")
    assert {r["name"]: r["label"] for r in report["layers"]} == info["layers"]


# ---- layers out of the checkpoint through the CPU reference ----------------------------------------

ROUND_TRIP = ["model.layers.0.self_attn.q_proj", "model.layers.0.self_attn.o_proj", "model.layers.0.mlp.gate_proj",
              "model.layers.0.mlp.down_proj", "model.layers.1.self_attn.k_proj", "model.layers.1.self_attn.o_proj",
              "model.layers.1.mlp.experts.3.up_proj", "lm_head"]


@pytest.mark.parametrize("layer", ROUND_TRIP)
def test_reference_linear_on_a_layer_taken_out_of_the_checkpoint(example, tmp_path, layer):
    path, _, report = example
    row = next(r for r in report["layers"] if r["name"] == layer)
    fmt = row["format"]
    tensors = {role: read_tensor(path, name) for role, name in row["tensors"].items()}
    n, k = row["shape"]
    rng = np.random.default_rng([SEED, sum(map(ord, layer))])
    x = rng.normal(0, 1, (3, k)).astype(np.float32)
    case, out = tmp_path / "case.safetensors", tmp_path / "y.safetensors"
    stn.save_file({"x": x, **{role: np.require(t, requirements="C") for role, t in tensors.items()}}, str(case),
                  metadata={"format": fmt, "out_dtype": "f64"})
    run_cli("reference", "linear", "--in", case, "--out", out)
    got = stn.load_file(str(out))["y"]
    w = decode(fmt, tensors)
    assert w.shape == (n, k) and np.isfinite(w).all()
    want = x.astype(np.float64) @ w.T
    bound = 1e-12 * (np.abs(x).astype(np.float64) @ np.abs(w).T) + 1e-300
    err = np.abs(got - want)
    assert np.all(err <= bound), f"seed={SEED} {layer}: max error {err.max():.3g}, bound {bound.max():.3g}"


def test_reference_embedding_on_the_q8_0_table(example, tmp_path):
    path, _, _ = example
    table = read_tensor(path, "model.embed_tokens.weight")
    ids = np.random.default_rng(SEED).integers(0, table.shape[0], 17).astype(np.int32)
    case, out = tmp_path / "case.safetensors", tmp_path / "out.safetensors"
    stn.save_file({"table": np.ascontiguousarray(table), "ids": ids}, str(case), metadata={"out_dtype": "f32"})
    run_cli("reference", "embedding", "--in", case, "--out", out)
    got = stn.load_file(str(out))["out"]
    want = decode("q8_0", {"weight": table})[ids].astype(np.float32)  # Q8_0 values are exact in f32
    np.testing.assert_array_equal(got, want)


# ---- faults ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fault", sorted(mec.FAULTS))
def test_every_fault_fails_naming_the_layer_and_the_rule(tmp_path, fault):
    info = generate(tmp_path, fault=fault)
    layer, words = info["fault"]
    proc = run_cli("inspect", tmp_path, check=False)
    assert proc.returncode != 0, proc.stdout
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith(f"  ! {layer}: ")]
    assert any(all(w in ln for w in words) for ln in lines), (words, proc.stdout)
    # stderr repeats the first problem (which may be reported on a fused sibling first)
    siblings = {layer.replace("up_proj", "gate_proj"), layer.replace("gate_proj", "up_proj")}
    assert "b12x: error:" in proc.stderr and any(s in proc.stderr for s in siblings | {layer}), proc.stderr

    proc, report = inspect_json(tmp_path, check=False)
    assert proc.returncode != 0 and report["ok"] is False
    bad = {r["name"] for r in report["layers"] if r["problems"]}
    assert layer in bad and bad <= {layer} | siblings, bad  # nothing else is blamed


# ---- tensor parallelism ---------------------------------------------------------------------------

def test_tp2_shards_every_layer(example):
    path, _, _ = example
    proc, report = inspect_json(path, "--tp", "2")
    assert report["ok"] and report["tp"] == {"world": 2, "problems": 0}
    assert "every layer shards on every rank" in run_cli("inspect", path, "--tp", "2").stdout


def test_tp3_and_tp4_fail_naming_the_rule(example):
    path, _, _ = example
    proc = run_cli("inspect", path, "--tp", "3", check=False)
    assert proc.returncode != 0
    assert "  ! model.layers.0.self_attn.o_proj: tp 3: rank 0 of 3: row-parallel split of K: K = 512 is not " \
           "divisible by the world size 3" in proc.stdout, proc.stdout
    assert "tp 3" in proc.stderr
    # tp 4 divides everything, but the IQ2_XXS experts' I_part = 128 is half a block: down_proj would
    # cut its 256-weight blocks, gate/up_proj break the block-codec MoE rule (I_part % 256)
    proc, report = inspect_json(path, "--tp", "4", check=False)
    assert proc.returncode != 0
    failing = {r["name"]: r["tp_problems"] for r in report["layers"] if r["tp_problems"]}
    assert len(failing) == 12 and all(".experts." in name for name in failing), failing
    for name, (problem,) in failing.items():
        if name.endswith("down_proj"):
            assert "K_part = 128 is not a multiple of the IQ2_XXS block (256 weights)" in problem, problem
        else:
            assert "I_part = 128 is not a multiple of 256" in problem, problem
    assert run_cli("inspect", path, "--tp", "0", check=False).returncode != 0


# ---- unreadable checkpoints -----------------------------------------------------------------------

def test_malformed_files_fail_naming_file_and_path(tmp_path):
    generate(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["quantization_config"]["quantized_layers"]["model.layers.0.mlp.down_proj"]["group_size"] = "256"
    (tmp_path / "config.json").write_text(json.dumps(config))
    proc = run_cli("inspect", tmp_path, check=False)
    assert proc.returncode != 0
    assert 'config.json: quantization_config.quantized_layers["model.layers.0.mlp.down_proj"].group_size: ' \
           "must be an integer" in proc.stderr, proc.stderr

    data = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(data[:-100])
    proc = run_cli("inspect", tmp_path, check=False)
    assert proc.returncode != 0 and "model.safetensors" in proc.stderr and "truncated" in proc.stderr, proc.stderr
    assert run_cli("inspect", tmp_path / "missing", check=False).returncode != 0
