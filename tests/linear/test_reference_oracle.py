"""`b12x reference linear` against an independent numpy oracle.

Each case is a safetensors file with ModelOpt tensor names. Quantized weights are built here from
random codes and random scales, decoded with ml_dtypes / gguf, and y is computed in float64 numpy.
Quantized activation modes are re-implemented in numpy (float32 arithmetic in the documented order,
FORMATS.md 2.1-2.6), so their codes must match the C++ quantizers bit for bit.

Tolerances: the reference sums in float64 in k order, numpy in its own order, so every comparison
allows 1e-12 of sum(|a| |w|) on top of the output dtype's rounding (half an ulp: correct rounding).
"""
import gguf
import ml_dtypes as md
import numpy as np
import pytest
import safetensors.numpy as stn

from conftest import run_cli
from oracle import (FLOAT_DTYPES, GGML, OUT_DTYPES, SEED, as_float, check_close, make_weight,  # noqa: F401
                    quantize_activations)


@pytest.fixture
def rng(request):
    # One stream per test, so a failing test reproduces alone with B12X_SEED.
    return np.random.default_rng([SEED, sum(map(ord, request.node.name))])


# ---- running a case -----------------------------------------------------------------------------

def scalar_forms(scalars, as_tensor):
    """Scalars as 0-d F32 tensors or as "%.9g" metadata strings (the CLI accepts both)."""
    if as_tensor:
        return {k: np.array(v, np.float32) for k, v in scalars.items()}, {}
    return {}, {k: "%.9g" % v for k, v in scalars.items()}


def run_linear(tmp_path, tensors, metadata):
    case, out = tmp_path / "case.safetensors", tmp_path / "out.safetensors"
    stn.save_file(tensors, str(case), metadata=metadata)
    run_cli("reference", "linear", "--in", case, "--out", out)
    return stn.load_file(str(out))["y"]


def linear_case(rng, tmp_path, fmt, act, m, n, k, out_dtype, x_dtype="f32", bias_dtype=None,
                scalars_as_tensors=False, scale_dtype="u8", x=None, input_scale=None):
    if x is None:
        x = as_float(rng.uniform(-4, 4, (m, k)), x_dtype)
    tensors, scalars, w, w_scale2 = make_weight(rng, fmt, n, k, scale_dtype)
    tensors["x"] = x
    x32 = x.astype(np.float32)
    if input_scale is None and act == "fp8_tensor":  # some activations saturate at 448
        input_scale = np.float32(np.abs(x32).max() / 448 * 0.8)
    elif input_scale is None and act == "nvfp4":
        input_scale = np.float32(np.abs(x32).max() / (448 * 6) * rng.uniform(0.5, 2))
    if input_scale is not None:
        scalars["input_scale"] = input_scale
    bias = np.zeros(n)
    if bias_dtype:
        tensors["bias"] = as_float(rng.uniform(-1, 1, n), bias_dtype)
        bias = tensors["bias"].astype(np.float64)
    st, meta = scalar_forms(scalars, scalars_as_tensors)
    tensors.update(st)
    meta.update({"format": fmt, "activation": act, "out_dtype": out_dtype})

    a, a_scale = quantize_activations(x32, act, input_scale)
    alpha = a_scale * w_scale2  # both FP32, so exact in float64
    want = (a @ w.T) * alpha + bias
    bound = 1e-12 * ((np.abs(a) @ np.abs(w).T) * alpha + np.abs(bias)) + 1e-300

    got = run_linear(tmp_path, tensors, meta)
    assert got.shape == (m, n) and got.dtype == OUT_DTYPES[out_dtype]
    check_close(got, want, bound, out_dtype)


# ---- tests -------------------------------------------------------------------------------------

GROUP = {"mxfp8": 32, "mxfp4": 32, "nvfp4": 16, "q8_0": 32, "iq2_xxs": 256, "iq2_xs": 256}


def k_for(fmt, rng):
    """A random K: a few groups for block formats, anything (not a multiple of 128) otherwise."""
    if fmt in GROUP:
        return int(rng.integers(1, 5)) * GROUP[fmt]
    k = int(rng.integers(1, 400))
    return k + 1 if k % 128 == 0 else k


WEIGHT_FORMATS = ["bf16", "f16", "fp8", "fp8_channel", "fp8_block", "mxfp8", "nvfp4", "mxfp4", "q8_0", "iq2_xxs",
                  "iq2_xs"]


@pytest.mark.parametrize("out_dtype", list(OUT_DTYPES))
@pytest.mark.parametrize("fmt", WEIGHT_FORMATS)
def test_a16_every_format(rng, tmp_path, fmt, out_dtype):
    k = k_for(fmt, rng)
    n = 130 if fmt == "fp8_block" else int(rng.integers(1, 40))  # fp8_block: a partial second row block
    linear_case(rng, tmp_path, fmt, "a16", int(rng.integers(1, 6)), n, k, out_dtype,
                x_dtype=rng.choice(list(FLOAT_DTYPES)), bias_dtype=rng.choice([None, *FLOAT_DTYPES]),
                scalars_as_tensors=bool(rng.integers(0, 2)))


QUANTIZED_PAIRS = [("fp8", "fp8_tensor"), ("fp8_channel", "fp8_token"), ("fp8_block", "fp8_block"),
                   ("mxfp8", "mxfp8"), ("mxfp4", "mxfp8"), ("nvfp4", "nvfp4")]


@pytest.mark.parametrize("out_dtype", ["f64", "bf16"])
@pytest.mark.parametrize("fmt,act", QUANTIZED_PAIRS)
def test_quantized_activations(rng, tmp_path, fmt, act, out_dtype):
    k = k_for(fmt, rng)  # fp8_block: K % 128 != 0, so the last 1x128 group is partial
    n = 130 if fmt == "fp8_block" else int(rng.integers(1, 40))
    for x_dtype in FLOAT_DTYPES:
        linear_case(rng, tmp_path, fmt, act, int(rng.integers(1, 6)), n, k, out_dtype, x_dtype=x_dtype,
                    bias_dtype="f32", scalars_as_tensors=x_dtype == "f16")


@pytest.mark.parametrize("fmt,act", QUANTIZED_PAIRS)
def test_quantized_activation_rounding_ties(rng, tmp_path, fmt, act):
    """Multiples of 1/16 in [-6, 6], every 16-block holding +-6, with power-of-two scales: the scaled
    values land on E4M3 / E2M1 midpoints often, so the quantizers' tie rule (RNE) is exercised."""
    m, k = 4, 128
    x = rng.integers(-96, 97, size=(m, k)).astype(np.float32) / 16
    x[:, ::16] = np.float32(6) * rng.choice([-1, 1], size=(m, k // 16))
    scale = {"fp8_tensor": 2.0**-6, "nvfp4": 1.0}.get(act)
    linear_case(rng, tmp_path, fmt, act, m, 5, k, "f64", x=x,
                input_scale=None if scale is None else np.float32(scale))


def test_quantized_activations_with_zero_rows(rng, tmp_path):
    """All-zero blocks take the quantizers' zero rule (scale 1 / UE8M0 127 / zero codes)."""
    for fmt, act in QUANTIZED_PAIRS:
        k = 256
        tensors, scalars, w, w_scale2 = make_weight(rng, fmt, 5, k)
        x = rng.uniform(-1, 1, (3, k)).astype(np.float32)
        x[1] = 0
        x[2, :128] = 0
        tensors["x"] = x
        if act in ("fp8_tensor", "nvfp4"):
            scalars["input_scale"] = np.float32(0.01)
        _, meta = scalar_forms(scalars, False)
        meta.update({"format": fmt, "activation": act, "out_dtype": "f64"})
        a, a_scale = quantize_activations(x, act, scalars.get("input_scale"))
        alpha = a_scale * w_scale2
        got = run_linear(tmp_path, tensors, meta)
        check_close(got, (a @ w.T) * alpha, 1e-12 * (np.abs(a) @ np.abs(w).T) * alpha + 1e-300, "f64")


def test_e8m0_scale_tensors(rng, tmp_path):
    for fmt in ("mxfp8", "mxfp4"):
        linear_case(rng, tmp_path, fmt, "mxfp8", 2, 9, 64, "f64", scale_dtype="e8m0")


def test_checkpoint_layout_variants(rng, tmp_path):
    """FP8_PB_WO weight_scale [N/128, 1, K/128, 1], 1-element scalar tensors, gpt-oss MXFP4 blocks."""
    tensors, scalars, w, _ = make_weight(rng, "fp8_block", 256, 256)
    tensors["weight_scale"] = tensors.pop("weight_scale_inv").reshape(2, 1, 2, 1)
    tensors["x"] = x = rng.uniform(-1, 1, (2, 256)).astype(np.float32)
    got = run_linear(tmp_path, tensors, {"format": "fp8_block"})
    check_close(got, x.astype(np.float64) @ w.T, 1e-12 * np.abs(x) @ np.abs(w).T, "f32")

    tensors, scalars, w, scale2 = make_weight(rng, "nvfp4", 3, 32)
    tensors["weight_scale_2"] = np.array([scalars["weight_scale_2"]], np.float32)
    tensors["x"] = x = rng.uniform(-1, 1, (2, 32)).astype(np.float32)
    got = run_linear(tmp_path, tensors, {"format": "nvfp4", "out_dtype": "f64"})
    check_close(got, (x.astype(np.float64) @ w.T) * scale2, 1e-12 * np.abs(x) @ np.abs(w).T * scale2, "f64")

    tensors, _, w, _ = make_weight(rng, "mxfp4", 4, 64)
    tensors["weight"] = tensors["weight"].reshape(4, 2, 16)
    tensors["x"] = x = rng.uniform(-1, 1, (1, 64)).astype(np.float32)
    got = run_linear(tmp_path, tensors, {"format": "mxfp4", "out_dtype": "f64"})
    check_close(got, x.astype(np.float64) @ w.T, 1e-12 * np.abs(x) @ np.abs(w).T, "f64")


def cli_error(tmp_path, tensors, metadata):
    case = tmp_path / "bad.safetensors"
    stn.save_file(tensors, str(case), metadata=metadata)
    proc = run_cli("reference", "linear", "--in", case, "--out", tmp_path / "o.safetensors", check=False)
    assert proc.returncode == 2, proc.stderr
    return proc.stderr


def test_cli_errors_name_the_problem(rng, tmp_path):
    tensors, _, _, _ = make_weight(rng, "q8_0", 2, 32)
    tensors["x"] = np.ones((1, 32), np.float32)
    assert "'format'" in cli_error(tmp_path, dict(tensors), {})
    assert "not supported" in cli_error(tmp_path, dict(tensors), {"format": "q8_0", "activation": "nvfp4"})
    assert "'x'" in cli_error(tmp_path, {"weight": tensors["weight"]}, {"format": "q8_0"})
    assert "'wieght'" in cli_error(tmp_path, {**tensors, "wieght": tensors["weight"]}, {"format": "q8_0"})
    assert "'weight'" in cli_error(tmp_path, {**tensors, "x": np.ones((1, 64), np.float32)}, {"format": "q8_0"})
    assert "'out_dtype'" in cli_error(tmp_path, dict(tensors), {"format": "q8_0", "out_dtype": "i32"})

    tensors, scalars, _, _ = make_weight(rng, "fp8", 2, 16)
    tensors["x"] = np.ones((1, 16), np.float32)
    meta = {"format": "fp8", "weight_scale": "%.9g" % scalars["weight_scale"], "activation": "fp8_tensor"}
    assert "'input_scale'" in cli_error(tmp_path, dict(tensors), meta)
    assert "'input_scale'" in cli_error(tmp_path, dict(tensors), {**meta, "input_scale": "0"})
    assert "'input_scale'" in cli_error(tmp_path, dict(tensors), {**meta, "input_scale": "abc"})

    (tmp_path / "junk.safetensors").write_bytes(b"\xff" * 16)
    proc = run_cli("reference", "linear", "--in", tmp_path / "junk.safetensors", "--out", tmp_path / "o", check=False)
    assert proc.returncode == 2 and "junk.safetensors" in proc.stderr


def test_embedding_q8_0(rng, tmp_path):
    """`b12x reference embedding`: rows of a Q8_0 table decoded by gguf, rounded to bf16."""
    v, k = 7, 96
    qtype, group, nbytes = GGML["q8_0"]
    table = rng.integers(0, 256, size=(v, k // group, nbytes), dtype=np.uint8)
    table[..., 0:2] = rng.uniform(2**-12, 2**-6, (v, k // group, 1)).astype(np.float16).view(np.uint8)
    ids = np.array([3, 0, 6, 3], np.int64)
    case, out = tmp_path / "emb.safetensors", tmp_path / "out.safetensors"
    stn.save_file({"table": table, "ids": ids}, str(case))
    run_cli("reference", "embedding", "--in", case, "--out", out)
    got = stn.load_file(str(out))["out"]
    want = gguf.quants.dequantize(table.reshape(v, -1), qtype)[ids].astype(md.bfloat16)
    assert got.dtype == md.bfloat16 and got.shape == (len(ids), k)
    assert np.array_equal(got.view(np.uint16), want.view(np.uint16)), f"seed={SEED}"
