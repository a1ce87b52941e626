"""Independent numpy oracles shared by the Python tests: weights of every format built from random
codes and decoded with ml_dtypes / gguf, the activation quantizers re-implemented in float32 in the
documented order (docs/FORMATS.md), and the rounding check. Nothing here calls b12x.

B12X_SEED fixes the random streams (each test derives its own from it and its name).
"""
import os

import gguf
import ml_dtypes as md
import numpy as np

SEED = int(os.environ.get("B12X_SEED", int.from_bytes(os.urandom(4), "little")))

E4M3_MAX = np.float32(448)
E2M1_MAX = np.float32(6)
OUT_DTYPES = {"bf16": md.bfloat16, "f16": np.float16, "f32": np.float32, "f64": np.float64}
FLOAT_DTYPES = {"bf16": md.bfloat16, "f16": np.float16, "f32": np.float32}
GGML = {"q8_0": (gguf.GGMLQuantizationType.Q8_0, 32, 34),
        "iq2_xxs": (gguf.GGMLQuantizationType.IQ2_XXS, 256, 66),
        "iq2_xs": (gguf.GGMLQuantizationType.IQ2_XS, 256, 74)}


# ---- element codecs (ml_dtypes is the oracle; clamp first: E4M3FN casts do not saturate) ---------

def e4m3_sat(v):
    return np.clip(np.asarray(v, np.float32), -E4M3_MAX, E4M3_MAX).astype(md.float8_e4m3fn)


def e2m1_sat(v):
    return np.clip(np.asarray(v, np.float32), -E2M1_MAX, E2M1_MAX).astype(md.float4_e2m1fn)


def e4m3_value(codes):
    return np.asarray(codes, np.uint8).view(md.float8_e4m3fn).astype(np.float32)


def e2m1_value(codes):
    return np.asarray(codes, np.uint8).view(md.float4_e2m1fn).astype(np.float32)


def unpack_fp4(packed):
    """[R, C/2] bytes -> [R, C] codes, even element in the low nibble."""
    return np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(packed.shape[0], -1)


def pack_fp4(codes):
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def random_e4m3_codes(rng, shape, positive=False):
    codes = rng.integers(0, 0x7F if positive else 256, size=shape, dtype=np.uint8)
    return np.where((codes & 0x7F) == 0x7F, codes & 0x80, codes).astype(np.uint8)  # no NaN codes


def as_float(values, dtype_name):
    return np.asarray(values, np.float32).astype(FLOAT_DTYPES[dtype_name])


# ---- weights: (tensors, metadata scalars, decoded f32 [N, K] without tensor scale, tensor scale) --

def make_weight(rng, fmt, n, k, scale_dtype="u8"):
    tensors, scalars, scale2 = {}, {}, 1.0
    if fmt in ("bf16", "f16"):
        w = as_float(rng.uniform(-2, 2, (n, k)), fmt)
        tensors["weight"], decoded = w, w.astype(np.float32)
    elif fmt.startswith("fp8"):
        codes = random_e4m3_codes(rng, (n, k))
        tensors["weight"] = codes.view(md.float8_e4m3fn)
        if fmt == "fp8":
            scale2 = np.float32(rng.uniform(0.001, 0.01))
            scalars["weight_scale"] = scale2
            decoded = e4m3_value(codes)
        elif fmt == "fp8_channel":
            s = rng.uniform(0.001, 0.01, n).astype(np.float32)
            tensors["weight_scale"] = s
            decoded = e4m3_value(codes) * s[:, None]  # float32 product, as the codec decodes
        else:  # fp8_block: DeepSeek weight_scale_inv, partial edge blocks
            s = rng.uniform(0.001, 0.01, (-(-n // 128), -(-k // 128))).astype(np.float32)
            tensors["weight_scale_inv"] = s
            decoded = e4m3_value(codes) * np.repeat(np.repeat(s, 128, 0), 128, 1)[:n, :k]
    elif fmt in ("mxfp8", "mxfp4"):
        sbytes = rng.integers(117, 131, size=(n, k // 32), dtype=np.uint8)
        tensors["weight_scale"] = sbytes.view(md.float8_e8m0fnu) if scale_dtype == "e8m0" else sbytes
        block = np.exp2(np.repeat(sbytes.astype(np.float64) - 127, 32, axis=1)).astype(np.float32)
        if fmt == "mxfp8":
            codes = random_e4m3_codes(rng, (n, k))
            tensors["weight"] = codes.view(md.float8_e4m3fn)
            decoded = e4m3_value(codes) * block
        else:
            codes = rng.integers(0, 16, size=(n, k), dtype=np.uint8)
            tensors["weight"] = pack_fp4(codes)
            decoded = e2m1_value(codes) * block
    elif fmt == "nvfp4":
        codes = rng.integers(0, 16, size=(n, k), dtype=np.uint8)
        sb = random_e4m3_codes(rng, (n, k // 16), positive=True)
        tensors["weight"] = pack_fp4(codes)
        tensors["weight_scale"] = sb.view(md.float8_e4m3fn)
        scale2 = np.float32(rng.uniform(1e-4, 1e-3))
        scalars["weight_scale_2"] = scale2
        decoded = e2m1_value(codes) * np.repeat(e4m3_value(sb), 16, axis=1)  # exact in float32
    elif fmt in GGML:
        qtype, group, nbytes = GGML[fmt]
        blocks = rng.integers(0, 256, size=(n, k // group, nbytes), dtype=np.uint8)
        d = (rng.uniform(2**-12, 2**-6, (n, k // group)) * rng.choice([-1, 1], (n, k // group))).astype(np.float16)
        blocks[..., 0:2] = d[..., None].view(np.uint8)
        tensors["weight"] = blocks
        decoded = gguf.quants.dequantize(blocks.reshape(n, -1), qtype).astype(np.float32)
    else:
        raise AssertionError(fmt)
    assert decoded.shape == (n, k) and decoded.dtype == np.float32
    return tensors, scalars, decoded.astype(np.float64), float(scale2)


# ---- activation quantizers: float32 arithmetic in the documented order ---------------------------

def quantize_activations(x, act, input_scale):
    """x float32 [M, K] -> (decoded float64 [M, K] without the per-tensor scale, per-tensor scale)."""
    x = np.asarray(x, np.float32)
    m, k = x.shape
    if act == "a16":
        return x.astype(np.float64), 1.0
    if act == "fp8_tensor":
        q = e4m3_sat(x / np.float32(input_scale))
        return q.astype(np.float64), float(input_scale)
    if act in ("fp8_token", "fp8_block"):
        group = k if act == "fp8_token" else 128
        out = np.empty((m, k), np.float64)
        for c0 in range(0, k, group):
            blk = x[:, c0:c0 + group]
            amax = np.abs(blk).max(axis=1, keepdims=True)
            scale = np.where(amax == 0, np.float32(1), amax / E4M3_MAX).astype(np.float32)
            out[:, c0:c0 + group] = e4m3_sat(blk / scale).astype(np.float64) * scale.astype(np.float64)
        return out, 1.0
    if act == "mxfp8":
        blk = x.reshape(m, k // 32, 32)
        amax = np.abs(blk).max(axis=2, keepdims=True)
        bits = (amax / E4M3_MAX).astype(np.float32).view(np.uint32).astype(np.int64)
        exp = ((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0)  # ceil(log2(amax / 448)) on the bits
        exp = np.where(amax == 0, 0, np.clip(exp, -127, 127))
        q = e4m3_sat(np.ldexp(blk, -exp).astype(np.float32))  # exact power-of-two scaling
        return np.ldexp(q.astype(np.float64), exp).reshape(m, k), 1.0
    if act == "nvfp4":
        g = np.float32(1) / np.float32(input_scale)
        blk = x.reshape(m, k // 16, 16)
        amax = np.abs(blk).max(axis=2, keepdims=True)
        sb = e4m3_sat((amax * g) / E2M1_MAX).astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            q = np.where(sb == 0, np.float32(0), e2m1_sat((blk * g) / sb).astype(np.float32))
        return (q.astype(np.float64) * sb.astype(np.float64)).reshape(m, k), float(input_scale)
    raise AssertionError(act)


def ulp(v, dtype):
    """Spacing of `dtype` at |v| (the smallest subnormal spacing near zero)."""
    info = md.finfo(dtype)
    e = np.floor(np.log2(np.maximum(np.abs(v), float(info.tiny))))
    return np.exp2(e - info.nmant)


def check_close(got, want, bound, out_dtype):
    """got (out_dtype) is want rounded to nearest, up to the float64 summation-order bound."""
    got64 = np.asarray(got).astype(np.float64)
    allowed = bound + (0 if out_dtype == "f64" else 0.5 * ulp(want, OUT_DTYPES[out_dtype]))
    err = np.abs(got64 - want)
    worst = np.unravel_index(np.argmax(err - allowed), err.shape)
    assert np.all(err <= allowed), (f"seed={SEED}: y{list(worst)} = {got64[worst]!r}, want {want[worst]!r} "
                                    f"(error {err[worst]:.3g}, allowed {allowed[worst]:.3g})")
