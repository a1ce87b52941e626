"""Scalar conversions (E4M3, E5M2, E2M1, UE8M0, BF16, FP16) against ml_dtypes / numpy, through
`b12x codec`. Exhaustive on every code; encoders on >= 1M fresh random floats per format, including
RNE ties, +-0, NaN, Inf, subnormals and overflow."""
import os

import ml_dtypes as md
import numpy as np
import pytest

from conftest import run_cli

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # numpy warns on NaN/overflow casts
SEED = int.from_bytes(os.urandom(4), "little")


@pytest.fixture(scope="module")
def rng():
    print(f"seed={SEED}")
    return np.random.default_rng(SEED)


def codec(tmp_path, verb, fmt, values_or_codes, rows, cols, *extra):
    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
    values_or_codes.tofile(src)
    run_cli("codec", verb, "--format", fmt, "--rows", str(rows), "--cols", str(cols),
            "--in", str(src), "--out", str(dst), *extra)
    return np.fromfile(dst, dtype=np.float32 if verb == "decode" else np.uint8)


def encode(tmp_path, fmt, x, *extra):
    return codec(tmp_path, "encode", fmt, x.astype(np.float32), 1, x.size, *extra)


def ties_and_neighbours(dtype):
    """Every representable value, the midpoints between neighbours, and one float32 ulp around each."""
    codes = np.arange(256, dtype=np.uint8) if np.dtype(dtype).itemsize == 1 else None
    vals = codes.view(dtype).astype(np.float64) if codes is not None else None
    vals = np.unique(vals[np.isfinite(vals)])
    mids = (vals[1:] + vals[:-1]) / 2
    pts = np.concatenate([vals, mids]).astype(np.float32)
    up = np.nextafter(pts, np.float32(np.inf))
    down = np.nextafter(pts, np.float32(-np.inf))
    return np.concatenate([pts, up, down, -pts, -up, -down])


def random_floats(rng, lo_exp, hi_exp, n=350_000):
    """Uniform random bit patterns (every class of float32) plus log-uniform values around the range."""
    bits = rng.integers(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    mags = np.exp2(rng.uniform(lo_exp, hi_exp, size=n)).astype(np.float32)
    signs = np.where(rng.integers(0, 2, size=n) == 1, np.float32(-1), np.float32(1))
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e30, -1e30, 1e-45, -1e-45], np.float32)
    return np.concatenate([bits, mags * signs, specials])


def assert_same_bytes(got, want, x):
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, (f"seed={SEED}: {bad.size} mismatches; first: x={x[bad[0]]!r} "
                           f"(bits {x[bad[0]:bad[0]+1].view(np.uint32)[0]:#010x}) got {got[bad[0]]:#04x} "
                           f"want {want[bad[0]]:#04x}")


def assert_same_floats(got, want):
    """Bit-exact float32 comparison (so -0 vs +0 counts); NaN must be NaN on both sides."""
    gn, wn = np.isnan(got), np.isnan(want)
    assert np.array_equal(gn, wn), f"NaN positions differ at {np.nonzero(gn != wn)[0][:5]}"
    g, w = got[~gn].view(np.uint32), want[~wn].astype(np.float32).view(np.uint32)
    bad = np.nonzero(g != w)[0]
    assert bad.size == 0, f"{bad.size} mismatches; first at {bad[0]}: got {got[~gn][bad[0]]!r} want {want[~wn][bad[0]]!r}"


# ---- decoders: every code ------------------------------------------------------------------------

@pytest.mark.parametrize("fmt,dtype", [("e4m3", md.float8_e4m3fn), ("e5m2", md.float8_e5m2),
                                       ("ue8m0", md.float8_e8m0fnu)])
def test_decode_every_byte_code(tmp_path, fmt, dtype):
    codes = np.arange(256, dtype=np.uint8)
    got = codec(tmp_path, "decode", fmt, codes, 16, 16)
    assert_same_floats(got, codes.view(dtype).astype(np.float32))


def test_decode_every_e2m1_code(tmp_path):
    codes = np.arange(16, dtype=np.uint8)
    packed = (codes[0::2] | (codes[1::2] << 4)).astype(np.uint8)  # even element in the low nibble
    got = codec(tmp_path, "decode", "e2m1", packed, 1, 16)
    assert_same_floats(got, codes.view(md.float4_e2m1fn).astype(np.float32))


# ---- encoders: >= 1M floats each -------------------------------------------------------------------

def test_e4m3_encode_saturates_like_clamped_ml_dtypes(tmp_path, rng):
    x = np.concatenate([random_floats(rng, -12, 10, n=500_000), ties_and_neighbours(md.float8_e4m3fn),
                        np.array([448, 449, 464, 465, 480, 1e6, -464, -465], np.float32)])
    assert x.size >= 1_000_000
    got = encode(tmp_path, "e4m3", x)
    # The spec saturates: clamp first (ml_dtypes' cast is not saturating; NaN stays NaN, sign kept).
    want = np.clip(x, -448, 448).astype(md.float8_e4m3fn).view(np.uint8)
    assert_same_bytes(got, want, x)


@pytest.mark.parametrize("saturate", [False, True])
def test_e5m2_encode_matches_ml_dtypes(tmp_path, rng, saturate):
    x = np.concatenate([random_floats(rng, -18, 17, n=500_000), ties_and_neighbours(md.float8_e5m2),
                        np.array([57344, 61439, 61440, 65536, -61440], np.float32)])
    assert x.size >= 1_000_000
    got = encode(tmp_path, "e5m2", x, *(["--saturate"] if saturate else []))
    ref = np.clip(x, -57344, 57344) if saturate else x
    want = ref.astype(md.float8_e5m2).view(np.uint8)
    assert_same_bytes(got, want, x)


def test_e2m1_encode_matches_clamped_ml_dtypes(tmp_path, rng):
    x = np.concatenate([random_floats(rng, -4, 4, n=510_000), ties_and_neighbours(md.float4_e2m1fn),
                        np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, -0.25, -5.0], np.float32)])
    x = x[~np.isnan(x)]  # E2M1 has no NaN: b12x encodes NaN as +0 (checked below), ml_dtypes differs
    if x.size % 2:
        x = x[:-1]
    assert x.size >= 1_000_000
    packed = encode(tmp_path, "e2m1", x)
    got = np.empty(x.size, np.uint8)
    got[0::2], got[1::2] = packed & 0xF, packed >> 4
    want = np.clip(x, -6, 6).astype(md.float4_e2m1fn).view(np.uint8) & 0xF
    assert_same_bytes(got, want, x)
    nan_codes = encode(tmp_path, "e2m1", np.array([np.nan, -np.nan], np.float32))
    assert nan_codes[0] == 0x00


def ceil_rule_oracle(x, elem_max):
    """Smallest X with |x|/elem_max <= 2^X, from float64 frexp of the FP32 quotient; byte = X + 127."""
    t = (np.abs(x).astype(np.float32) / np.float32(elem_max)).astype(np.float64)
    m, e = np.frexp(t)
    X = np.where(m == 0.5, e - 1, e)
    # The bit formula reads an FP32-subnormal t as exponent -126 (documented; never too small a scale).
    X = np.where((t > 0) & (t < 2.0**-126), -126, X)
    X = np.where(t == 0, -127, X)  # amax / elem_max underflowed to 0 (amax itself is not 0)
    byte = np.clip(X + 127, 0, 254).astype(np.int64)
    byte = np.where(x == 0, 127, byte)
    byte = np.where(~np.isfinite(x), 255, byte)
    return byte.astype(np.uint8)


@pytest.mark.parametrize("elem_max", ["1", "448", "6"])
def test_ue8m0_ceil_rule(tmp_path, rng, elem_max):
    pow2 = np.exp2(np.arange(-149, 128, dtype=np.float64)).astype(np.float32)
    x = np.concatenate([random_floats(rng, -140, 127, n=500_000), pow2,
                        np.nextafter(pow2, np.float32(np.inf)), np.nextafter(pow2, np.float32(0))])
    assert x.size >= 1_000_000
    got = encode(tmp_path, "ue8m0", x, "--elem-max", elem_max)
    assert_same_bytes(got, ceil_rule_oracle(x, float(elem_max)), x)
    # Where the byte is neither clamped nor special, it really is the ceiling: t <= 2^X < 2t.
    t_all = (np.abs(x).astype(np.float32) / np.float32(elem_max)).astype(np.float64)
    ok = (got > 0) & (got < 254) & (t_all >= 2.0**-126)
    t = t_all[ok]
    scale = np.exp2(got[ok].astype(np.float64) - 127)
    assert np.all(t <= scale * (1 + 2**-23)) and np.all(scale < 2 * t * (1 + 2**-23))


@pytest.mark.parametrize("fmt,ref", [("bf16", md.bfloat16), ("f16", np.float16)])
def test_bf16_f16_round_to_nearest_even(tmp_path, rng, fmt, ref):
    lo, hi = (-140, 127) if fmt == "bf16" else (-26, 17)
    x = np.concatenate([random_floats(rng, lo, hi, n=500_000),
                        # exact ties: a 16-bit value plus half its last place, both parities
                        (np.arange(1, 1 << 16, dtype=np.uint32) << 16 | 0x8000).view(np.float32)])
    assert x.size >= 1_000_000
    got = encode(tmp_path, fmt, x).view(np.uint16)
    want = x.astype(ref).view(np.uint16)
    nan = np.isnan(x)
    assert np.all(np.isnan(got[nan].view(ref).astype(np.float32)))
    assert_same_bytes(got[~nan], want[~nan], x[~nan])
