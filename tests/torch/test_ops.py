"""torch.ops.b12x.* on the CPU (CI): registration and schemas, results against the numpy oracles
(tests/oracle.py: weights decoded by ml_dtypes / gguf, float64 products), fake kernels, opcheck,
torch.compile(fullgraph=True), and errors raised as b12x's Python classes."""
import gguf
import ml_dtypes as md
import numpy as np
import pytest
import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import b12x
from oracle import FLOAT_DTYPES, OUT_DTYPES, SEED, as_float, check_close, quantize_activations
from support import oracle_weight, poisoned, to_numpy, to_torch

TORCH_DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}
FORMATS = ["bf16", "f16", "fp8", "fp8_channel", "fp8_block", "mxfp8", "nvfp4", "mxfp4", "q8_0", "iq2_xxs", "iq2_xs"]
GROUP = {"mxfp8": 32, "mxfp4": 32, "nvfp4": 16, "q8_0": 32, "iq2_xxs": 256, "iq2_xs": 256}
TENSOR_OPS = ["linear", "linear_out", "pack_weight", "quantize_weight", "quantize_activation", "embedding_q8_0"]
HOST_OPS = ["preferred_layout", "linear_plan", "prewarm", "freeze_kernel_resolution", "unfreeze_kernel_resolution",
            "kernel_resolution_frozen", "compile_cache_info"]


def want_linear(x, w_exact, bias=None):
    a = x.detach().float().numpy().astype(np.float64)
    want = a @ w_exact.T + (0 if bias is None else bias.float().numpy().astype(np.float64))
    bound = 1e-12 * (np.abs(a) @ np.abs(w_exact).T) + 1e-300
    return want, bound


# ---- registration ------------------------------------------------------------------------------

def test_every_op_is_registered_with_its_kernels():
    for name in TENSOR_OPS:
        op = getattr(torch.ops.b12x, name).default
        for key in ("CPU", "CUDA"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key), f"{name}: no {key} kernel"
        assert torch._library.simple_registry.singleton.find(op.name()).fake_impl.kernel is not None, name
        assert torch.Tag.pt2_compliant_tag in op.tags, name
    for name in HOST_OPS:
        assert hasattr(torch.ops.b12x, name), name


def test_only_linear_out_mutates():
    for name in TENSOR_OPS + HOST_OPS:
        schema = getattr(torch.ops.b12x, name).default._schema
        writes = [a.name for a in schema.arguments if a.alias_info is not None and a.alias_info.is_write]
        assert writes == (["out"] if name == "linear_out" else []), (name, writes)
    # linear_out returns nothing, so torch.compile functionalizes it rather than aliasing an output.
    assert len(torch.ops.b12x.linear_out.default._schema.returns) == 0


def test_errors_are_b12x_classes_and_builtin_kinds():
    assert issubclass(b12x.BadArgument, ValueError) and issubclass(b12x.BadArgument, b12x.Error)
    assert issubclass(b12x.Unsupported, NotImplementedError)
    assert issubclass(b12x.KernelResolutionFrozenError, RuntimeError)
    x = torch.ones(2, 64, dtype=torch.bfloat16)
    w = b12x.linear.quantize_weight(torch.ones(16, 64), "q8_0")
    with pytest.raises(b12x.BadArgument, match=r"argument 'x': .*K = 64"):
        torch.ops.b12x.linear(torch.ones(2, 32, dtype=torch.bfloat16), w.weight, None, 1.0, "q8_0", "checkpoint")
    with pytest.raises(b12x.BadArgument, match="argument 'format'"):
        torch.ops.b12x.linear(x, w.weight, None, 1.0, "q9_0", "checkpoint")
    with pytest.raises(b12x.BadArgument, match="argument 'layout'"):
        torch.ops.b12x.linear(x, w.weight, None, 1.0, "q8_0", "tiles")
    with pytest.raises(b12x.BadArgument, match="argument 'weight'"):  # payload of 33 bytes, not 34
        torch.ops.b12x.linear(x, w.weight[..., :33].contiguous(), None, 1.0, "q8_0", "checkpoint")
    with pytest.raises(b12x.Unsupported, match="not supported with weight format 'q8_0'"):
        torch.ops.b12x.linear(x, w.weight, None, 1.0, "q8_0", "checkpoint", act_mode="nvfp4")
    with pytest.raises(b12x.Unsupported):
        torch.ops.b12x.quantize_weight(torch.ones(4, 256), "iq2_xs")  # IQ2 has no quantizer
    with pytest.raises(b12x.BadArgument, match="argument 'out'"):
        torch.ops.b12x.linear_out(x, w.weight, None, 1.0, "q8_0", "checkpoint", None, "a16", 1.0,
                                  torch.empty(2, 15, dtype=torch.bfloat16))
    with pytest.raises(b12x.BadArgument, match="argument 'input_scale'"):
        w8 = b12x.linear.quantize_weight(torch.ones(16, 64), "fp8")
        b12x.linear.mm(x, w8, act_mode="fp8_tensor", input_scale=0.0)
    # The kernels' options, where they do not apply (the same rules on CPU and CUDA).
    with pytest.raises(b12x.BadArgument, match="argument 'fast_accum'"):
        b12x.linear.mm(x, w, fast_accum=True)
    with pytest.raises(b12x.BadArgument, match="argument 'round_weights'"):
        b12x.linear.mm(x, b12x.linear.quantize_weight(torch.ones(16, 64), "fp8"), act_mode="fp8_tensor",
                       round_weights=True)


def test_kernel_options_leave_the_cpu_reference_exact(rng):
    # round_weights / fast_accum choose CUDA kernels; the CPU op is the exact spec either way.
    w, _ = oracle_weight(rng, "q8_0", 32, 256)
    x = torch.from_numpy(rng.uniform(-4, 4, (40, 256)).astype(np.float32)).to(torch.bfloat16)
    exact = b12x.linear.mm(x, w, out_dtype=torch.float32)
    assert torch.equal(b12x.linear.mm(x, w, out_dtype=torch.float32, round_weights=True), exact)
    out = poisoned((40, 32), torch.float32)
    b12x.linear.mm_out(x, w, out, round_weights=True)
    assert torch.equal(out, exact)
    w8 = b12x.linear.quantize_weight(torch.from_numpy(rng.uniform(-1, 1, (32, 256)).astype(np.float32)), "fp8")
    q = b12x.linear.mm(x, w8, out_dtype=torch.float32, act_mode="fp8_tensor", input_scale=0.05)
    assert torch.equal(b12x.linear.mm(x, w8, out_dtype=torch.float32, act_mode="fp8_tensor", input_scale=0.05,
                                      fast_accum=True), q)


# ---- CPU results against the numpy oracle --------------------------------------------------------

def k_for(fmt, rng):
    return int(rng.integers(1, 4)) * max(GROUP.get(fmt, 64), 32)  # tile16 needs K % 32


@pytest.mark.parametrize("fmt", FORMATS)
def test_linear_cpu_every_format(rng, fmt):
    k = k_for(fmt, rng)
    n = 144 if fmt == "fp8_block" else 16 * int(rng.integers(1, 3))
    w, exact = oracle_weight(rng, fmt, n, k)
    layouts = ["checkpoint", "tile16"]
    for x_dtype in FLOAT_DTYPES:
        x = to_torch(as_float(rng.uniform(-4, 4, (2, 3, k)), x_dtype))  # leading dims [2, 3]
        bias = to_torch(as_float(rng.uniform(-1, 1, n), x_dtype))
        want, bound = want_linear(x.reshape(-1, k), exact, bias)
        for layout in layouts:
            packed = b12x.linear.pack_weight(w.weight, w.weight_scale, w.tensor_scale, format=fmt, layout=layout)
            assert packed.layout == layout and packed.weight.shape == w.weight.shape
            for out_dtype in OUT_DTYPES.keys() - {"f64"}:
                y = b12x.linear.mm(x, packed, bias, out_dtype=TORCH_DTYPES[out_dtype])
                assert y.shape == (2, 3, n) and y.dtype == TORCH_DTYPES[out_dtype]
                check_close(to_numpy(y).reshape(-1, n), want, bound, out_dtype)
            out = poisoned((2, 3, n), torch.float32)
            b12x.linear.mm_out(x, packed, out, bias)
            check_close(out.numpy().reshape(-1, n), want, bound, "f32")


def test_tile16_pack_moves_bytes_and_keeps_values(rng):
    w, _ = oracle_weight(rng, "nvfp4", 32, 128)
    t = b12x.linear.pack_weight(w.weight, w.weight_scale, w.tensor_scale, format="nvfp4", layout="tile16")
    assert not torch.equal(t.weight, w.weight)  # a permutation of the same bytes
    assert torch.equal(torch.sort(t.weight.flatten()).values, torch.sort(w.weight.flatten()).values)
    x = torch.randn(5, 128, dtype=torch.bfloat16)
    assert torch.equal(b12x.linear.mm(x, t, out_dtype=torch.float32), b12x.linear.mm(x, w, out_dtype=torch.float32))
    assert b12x.linear.preferred_layout("nvfp4") == "tile16"
    assert b12x.linear.preferred_layout("nvfp4", n=24) == "checkpoint"  # tile16 needs N % 16 == 0
    assert b12x.linear.preferred_layout("iq2_xs") == "tile16"
    assert b12x.linear.pack_weight(w.weight, w.weight_scale, w.tensor_scale, format="nvfp4").layout == "tile16"


QUANTIZED_PAIRS = [("fp8", "fp8_tensor"), ("fp8_channel", "fp8_token"), ("fp8_block", "fp8_block"),
                   ("mxfp8", "mxfp8"), ("mxfp4", "mxfp8"), ("nvfp4", "nvfp4")]


@pytest.mark.parametrize("fmt,act", QUANTIZED_PAIRS)
def test_linear_cpu_quantized_activations(rng, fmt, act):
    n, k = 144 if fmt == "fp8_block" else 16, 320 if fmt == "fp8_block" else 128
    w, exact = oracle_weight(rng, fmt, n, k)
    x32 = rng.uniform(-4, 4, (3, k)).astype(np.float32)
    input_scale = {"fp8_tensor": float(np.abs(x32).max() / 448 * 0.8),
                   "nvfp4": float(np.abs(x32).max() / (448 * 6))}.get(act, 1.0)
    input_scale = float(np.float32(input_scale))
    a, a_scale = quantize_activations(x32, act, input_scale)
    want = (a @ exact.T) * a_scale
    bound = 1e-12 * (np.abs(a) @ np.abs(exact).T) * a_scale + 1e-300
    y = b12x.linear.mm(torch.from_numpy(x32), w, act_mode=act, input_scale=input_scale)
    check_close(y.numpy(), want, bound, "f32")


@pytest.mark.parametrize("mode", ["fp8_tensor", "fp8_token", "fp8_block", "mxfp8", "nvfp4"])
def test_quantize_activation_matches_oracle(rng, mode):
    k = 320 if mode == "fp8_block" else 128  # fp8_block: a partial last 1x128 group
    x32 = rng.uniform(-4, 4, (2, 3, k)).astype(np.float32)
    input_scale = float(np.float32({"fp8_tensor": 0.01, "nvfp4": 0.002}.get(mode, 1.0)))
    q, s = b12x.quantization.quantize(torch.from_numpy(x32), mode, input_scale)
    decoded, tensor_scale = quantize_activations(x32.reshape(6, k), mode, input_scale)
    qn, sn = to_numpy(q).reshape(6, -1), to_numpy(s)
    if mode == "nvfp4":
        codes = np.stack([qn & 0xF, qn >> 4], axis=-1).reshape(6, k).view(np.uint8)
        got = codes.view(md.float4_e2m1fn).astype(np.float64) * np.repeat(sn.reshape(6, -1).astype(np.float64), 16, 1)
    else:
        vals = qn.astype(np.float64)
        if mode == "fp8_tensor":
            assert sn.shape == (1,) and sn[0] == np.float32(input_scale)
            got = vals
        elif mode == "mxfp8":
            got = vals * np.repeat(sn.reshape(6, -1).astype(np.float64), 32, 1)
        else:
            group = k if mode == "fp8_token" else 128
            got = vals * np.repeat(sn.reshape(6, -1).astype(np.float64), group, 1)[:, :k]
    assert np.array_equal(got, decoded), f"seed={SEED}"
    assert q.shape[:2] == (2, 3)
    # 128x4-swizzled scales hold the same bytes, rows padded to 128 and scale columns to 4.
    if mode in ("mxfp8", "nvfp4"):
        _, sw = b12x.quantization.quantize(torch.from_numpy(x32), mode, input_scale, swizzle_scales=True)
        lin = sn.reshape(6, -1).view(np.uint8)
        cp = -(-lin.shape[1] // 4) * 4
        padded = np.full((128, cp), 0, np.uint8)  # E4M3 / UE8M0 padding is never read: compare the real cells
        padded[:6, :lin.shape[1]] = lin
        want = padded.reshape(1, 4, 32, cp // 4, 4).transpose(0, 3, 2, 1, 4).reshape(-1)
        got_sw = to_numpy(sw).view(np.uint8)
        assert sw.shape == want.shape and sw.dtype == s.dtype
        real = np.zeros((128, cp), bool)
        real[:6, :lin.shape[1]] = True
        mask = real.reshape(1, 4, 32, cp // 4, 4).transpose(0, 3, 2, 1, 4).reshape(-1)
        assert np.array_equal(got_sw[mask], want[mask]), f"seed={SEED}"


def test_quantize_weight_round_trips_through_the_oracle(rng):
    w = torch.from_numpy(rng.uniform(-1, 1, (32, 64)).astype(np.float32))
    for fmt in ["fp8", "fp8_channel", "fp8_block", "mxfp8", "nvfp4", "mxfp4", "q8_0"]:
        p = b12x.linear.quantize_weight(w, fmt)
        # The oracle decodes what b12x encoded; every format is within its quantization error of w.
        x = torch.eye(64)
        y = b12x.linear.mm(x, p, out_dtype=torch.float32).T  # y = W (exactly decoded, f32 rounding)
        err = ((y - w).norm() / w.norm()).item()
        assert err < {"nvfp4": 0.15, "mxfp4": 0.2}.get(fmt, 0.08), (fmt, err)
    q = b12x.linear.quantize_weight(w, "q8_0")
    want = gguf.quants.dequantize(q.weight.numpy().reshape(32, -1), gguf.GGMLQuantizationType.Q8_0)
    got = b12x.linear.mm(torch.eye(64), q, out_dtype=torch.float32).T.numpy()
    assert np.array_equal(got, want.astype(np.float32)), f"seed={SEED}"


def q8_0_table(rng, v, k):
    table = rng.integers(0, 256, size=(v, k // 32, 34), dtype=np.uint8)
    table[..., 0:2] = rng.uniform(2**-12, 2**-6, (v, k // 32, 1)).astype(np.float16).view(np.uint8)
    return table


def test_embedding_cpu_matches_gguf_and_flags_bad_ids(rng):
    v, k = 11, 96
    table = q8_0_table(rng, v, k)
    rows = gguf.quants.dequantize(table.reshape(v, -1), gguf.GGMLQuantizationType.Q8_0)
    for id_dtype in (torch.int32, torch.int64):
        ids = torch.tensor([[3, 0, 10], [-1, 11, 7]], dtype=id_dtype)
        out, bad = b12x.embedding.lookup_with_flags(torch.from_numpy(table), ids)
        assert out.shape == (2, 3, k) and out.dtype == torch.bfloat16
        assert bad.tolist() == [[0, 0, 0], [1, 1, 0]]
        flat, fids = to_numpy(out).reshape(6, k), ids.reshape(-1).tolist()
        for t, i in enumerate(fids):
            if 0 <= i < v:
                assert np.array_equal(flat[t].view(np.uint16), rows[i].astype(md.bfloat16).view(np.uint16))
            else:
                assert np.all(flat[t].view(np.uint16) == 0x7FC0)  # the GPU op's quiet NaN row
        out32 = b12x.embedding.lookup(torch.from_numpy(table), ids.clamp(0, v - 1), torch.float32)
        assert np.array_equal(out32.numpy().reshape(6, k), rows[ids.clamp(0, v - 1).reshape(-1).numpy()])
    with pytest.raises(b12x.BadArgument, match=r"ids\[3\] = -1 is out of range \[0, 11\)"):
        b12x.embedding.lookup(torch.from_numpy(table), torch.tensor([[3, 0, 10], [-1, 11, 7]]), check_ids=True)
    with pytest.raises(b12x.BadArgument, match="argument 'out_dtype'"):
        b12x.embedding.lookup(torch.from_numpy(table), torch.tensor([1]), torch.float16)


# ---- fake kernels, opcheck, torch.compile --------------------------------------------------------

def sample_args(rng, fmt="nvfp4"):
    w, _ = oracle_weight(rng, fmt, 32, 64)
    t = b12x.linear.pack_weight(w.weight, w.weight_scale, w.tensor_scale, format=fmt, layout="tile16")
    x = torch.randn(3, 64, dtype=torch.bfloat16)
    table = torch.from_numpy(q8_0_table(rng, 9, 64))
    return w, t, x, table


def test_fake_kernels_give_the_real_shapes(rng):
    w, t, x, table = sample_args(rng)
    real = {
        "linear": torch.ops.b12x.linear(x, t.weight, t.weight_scale, t.tensor_scale, "nvfp4", "tile16", None,
                                        torch.float32),
        "pack": torch.ops.b12x.pack_weight(w.weight, w.weight_scale, w.tensor_scale, "nvfp4", "tile16"),
        "quant": torch.ops.b12x.quantize_weight(torch.randn(32, 64), "mxfp4"),
        "act": torch.ops.b12x.quantize_activation(x, "nvfp4", 0.01, True),
        "emb": torch.ops.b12x.embedding_q8_0(table, torch.tensor([[1, 2]]), None),
    }
    with FakeTensorMode() as mode:
        fx, fw, fs, ft = (mode.from_tensor(v) for v in (x, t.weight, t.weight_scale, table))
        fake = {
            "linear": torch.ops.b12x.linear(fx, fw, fs, t.tensor_scale, "nvfp4", "tile16", None, torch.float32),
            "pack": torch.ops.b12x.pack_weight(mode.from_tensor(w.weight), mode.from_tensor(w.weight_scale),
                                               w.tensor_scale, "nvfp4", "tile16"),
            "quant": torch.ops.b12x.quantize_weight(torch.empty(32, 64), "mxfp4"),
            "act": torch.ops.b12x.quantize_activation(fx, "nvfp4", 0.01, True),
            "emb": torch.ops.b12x.embedding_q8_0(ft, torch.empty(1, 2, dtype=torch.int64), None),
        }
    for key in real:
        r = real[key] if isinstance(real[key], tuple) else (real[key],)
        f = fake[key] if isinstance(fake[key], tuple) else (fake[key],)
        assert [(a.shape, a.dtype) for a in r] == [(a.shape, a.dtype) for a in f], key


def test_opcheck(rng):
    # opcheck compares tensors with arithmetic torch lacks for float8 on the CPU: MXFP4 weights with
    # uint8 scales keep every input integer or bf16.
    w, t, x, table = sample_args(rng, "mxfp4")
    cases = [
        (torch.ops.b12x.linear.default, (x, t.weight, t.weight_scale, t.tensor_scale, "mxfp4", "tile16", None, None)),
        (torch.ops.b12x.linear_out.default, (x, w.weight, w.weight_scale, w.tensor_scale, "mxfp4", "checkpoint", None,
                                             "a16", 1.0, torch.empty(3, 32, dtype=torch.bfloat16))),
        (torch.ops.b12x.pack_weight.default, (w.weight, w.weight_scale, w.tensor_scale, "mxfp4", "tile16")),
        (torch.ops.b12x.quantize_activation.default, (x, "mxfp8", 1.0, False)),
        (torch.ops.b12x.embedding_q8_0.default, (table, torch.tensor([0, 8, 3]), torch.float32)),
    ]
    for op, args in cases:
        torch.library.opcheck(op, args)


class TinyModel(torch.nn.Module):
    def __init__(self, rng):
        super().__init__()
        w1, _ = oracle_weight(rng, "q8_0", 64, 64)
        w2, _ = oracle_weight(rng, "mxfp4", 32, 64)
        self.table = torch.nn.Buffer(torch.from_numpy(q8_0_table(rng, 50, 64)))
        self.up = b12x.linear.Linear(w1, bias=torch.randn(64, dtype=torch.bfloat16))
        self.down = b12x.linear.Linear(b12x.linear.pack_weight(w2.weight, w2.weight_scale, format="mxfp4"))

    def forward(self, ids):
        h = b12x.embedding.lookup(self.table, ids)
        return self.down(torch.nn.functional.silu(self.up(h)))


@pytest.mark.parametrize("dynamic", [False, True])
def test_torch_compile_fullgraph(rng, dynamic):
    torch._dynamo.reset()
    model = TinyModel(rng)
    compiled = torch.compile(model, fullgraph=True, dynamic=dynamic, backend="aot_eager")
    for m in (3, 5, 1):
        ids = torch.from_numpy(rng.integers(0, 50, (m,)))
        want = model(ids)
        got = compiled(ids)
        assert torch.equal(got, want), m


def test_freeze_state_and_cache_info():
    assert not b12x.kernel_resolution_frozen()
    b12x.freeze_kernel_resolution("serving")
    try:
        info = b12x.compile_cache_info()
        assert info.frozen and info.freeze_reason == "serving"
        # CPU ops never compile, so they keep working while frozen.
        w = b12x.linear.quantize_weight(torch.ones(16, 32), "q8_0")
        assert b12x.linear.mm(torch.ones(1, 32), w).shape == (1, 16)
    finally:
        b12x.unfreeze_kernel_resolution()
    assert not b12x.compile_cache_info().frozen


def test_plans_need_a_cuda_weight():
    w = b12x.linear.quantize_weight(torch.ones(16, 32), "q8_0")
    with pytest.raises(b12x.BadArgument, match="argument 'w'"):
        b12x.linear.plan(w)
