"""GGML block codecs (Q8_0, IQ2_XXS, IQ2_XS) against gguf-py, through `b12x codec`.

Decode is compared bit for bit (float32 patterns, so -0 and NaN count) on fresh random blocks each
run plus exhaustive field sweeps and scale edge cases; the Q8_0 quantizer byte for byte. The seed is
printed and included in every failure message."""
import os

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import dequantize, quantize

from conftest import run_cli

SEED = int.from_bytes(os.urandom(8), "little")

GROUP = {"q8_0": 32, "iq2_xxs": 256, "iq2_xs": 256}
PAYLOAD = {"q8_0": 34, "iq2_xxs": 66, "iq2_xs": 74}
QTYPE = {"q8_0": GGMLQuantizationType.Q8_0, "iq2_xxs": GGMLQuantizationType.IQ2_XXS,
         "iq2_xs": GGMLQuantizationType.IQ2_XS}
FORMATS = list(GROUP)
BLOCKS_PER_ROW = 4  # the CLI sees [n / 4, 4 * group] so row layout is exercised too

# fp16 scale edge cases: +-0, smallest and largest subnormal, smallest normal, 1, largest finite, Inf.
EDGE_SCALES = np.array([0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x83FF, 0x0400, 0x3C00, 0x7BFF, 0xFBFF,
                        0x7C00, 0xFC00], dtype=np.uint16)


@pytest.fixture(scope="module")
def rng():
    print(f"seed={SEED}")
    return np.random.default_rng(SEED)


def cli_decode(tmp_path, fmt, blocks):
    """blocks: uint8 [n, payload] with n a multiple of BLOCKS_PER_ROW -> float32 [n * group]."""
    n = blocks.shape[0]
    assert n % BLOCKS_PER_ROW == 0
    src, dst = tmp_path / f"{fmt}.blocks", tmp_path / f"{fmt}.f32"
    np.ascontiguousarray(blocks).tofile(src)
    run_cli("codec", "decode", "--format", fmt, "--rows", n // BLOCKS_PER_ROW,
            "--cols", BLOCKS_PER_ROW * GROUP[fmt], "--in", src, "--out", dst)
    return np.fromfile(dst, dtype=np.float32)


def gguf_decode(fmt, blocks):
    with np.errstate(all="ignore"):  # Inf scales overflow inside numpy; that is the case under test
        return dequantize(blocks, QTYPE[fmt]).reshape(-1)


def assert_same_bits(fmt, got, want, blocks):
    assert got.shape == want.shape, f"seed={SEED}: {fmt} shape {got.shape} != {want.shape}"
    bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))[0]
    if bad.size:
        i = bad[0]
        b = i // GROUP[fmt]
        pytest.fail(f"seed={SEED}: {fmt}: {bad.size} of {got.size} values differ; first at block {b} "
                    f"weight {i % GROUP[fmt]}: b12x {got[i]!r} ({got[i:i+1].view(np.uint32)[0]:#010x}) "
                    f"gguf {want[i]!r} ({want[i:i+1].view(np.uint32)[0]:#010x}); block bytes "
                    f"{blocks[b].tobytes().hex()}")


def check_decode(tmp_path, fmt, blocks):
    assert_same_bits(fmt, cli_decode(tmp_path, fmt, blocks), gguf_decode(fmt, blocks), blocks)


def set_scales(blocks, d_bits):
    blocks[:, 0:2] = np.asarray(d_bits, dtype=np.uint16).reshape(-1, 1).view(np.uint8)
    return blocks


def random_scales(rng, n):
    """fp16 bit patterns uniform over every finite value (subnormals and +-0 included). NaN scales
    are left to test_nan_scale: only NaN-ness, not the NaN's sign, is specified there."""
    d = rng.integers(0, 1 << 16, size=n, dtype=np.uint32).astype(np.uint16)
    d[(d & 0x7C00) == 0x7C00] &= 0x83FF  # exponent 31 (Inf/NaN) -> a subnormal of the same sign
    return d


def random_blocks(rng, fmt, n):
    """Uniform payload bytes with random finite scales."""
    blocks = rng.integers(0, 256, size=(n, PAYLOAD[fmt]), dtype=np.uint8)
    return set_scales(blocks, random_scales(rng, n))


def exhaustive_blocks(fmt):
    """Every field value at least once: Q8_0 every int8 at every position; IQ2_XXS every
    (grid, sign index) pair; IQ2_XS every 16-bit descriptor, with every scale nibble (XXS) and every
    scale byte (XS). d = 1."""
    if fmt == "q8_0":
        qs = (np.arange(256 * 32).reshape(256, 32) + np.arange(32)) % 256  # row r: r, r+1, ...
        blocks = np.concatenate([np.zeros((256, 2), np.uint8), qs.astype(np.uint8)], axis=1)
    elif fmt == "iq2_xxs":
        pairs = np.arange(256 * 128, dtype=np.uint32)
        grid, sign = pairs % 256, pairs // 256
        groups = grid.reshape(-1, 4).astype(np.uint8)  # [8192 sub-blocks, 4 grid bytes]
        signs = sign.reshape(-1, 4)
        scale = np.arange(groups.shape[0], dtype=np.uint32) % 16
        aux = signs[:, 0] | (signs[:, 1] << 7) | (signs[:, 2] << 14) | (signs[:, 3] << 21) | (scale << 28)
        sub = np.concatenate([groups, aux.astype("<u4").view(np.uint8).reshape(-1, 4)], axis=1)
        blocks = np.concatenate([np.zeros((1024, 2), np.uint8), sub.reshape(1024, 64)], axis=1)
    else:
        desc = np.arange(1 << 16, dtype=np.uint32).astype("<u2").view(np.uint8).reshape(2048, 64)
        scales = (np.arange(2048 * 8) % 256).astype(np.uint8).reshape(2048, 8)
        blocks = np.concatenate([np.zeros((2048, 2), np.uint8), desc, scales], axis=1)
    return set_scales(np.ascontiguousarray(blocks), 0x3C00)


@pytest.mark.parametrize("fmt", FORMATS)
def test_decode_random_blocks(tmp_path, rng, fmt):
    check_decode(tmp_path, fmt, random_blocks(rng, fmt, 100_000))


@pytest.mark.parametrize("fmt", FORMATS)
def test_decode_every_field_value(tmp_path, rng, fmt):
    blocks = exhaustive_blocks(fmt)
    check_decode(tmp_path, fmt, blocks)
    # The same sweep under random finite scales, so every field meets signs and subnormals.
    check_decode(tmp_path, fmt, set_scales(blocks.copy(), random_scales(rng, blocks.shape[0])))


@pytest.mark.parametrize("fmt", FORMATS)
def test_decode_edge_scales(tmp_path, rng, fmt):
    payload = random_blocks(rng, fmt, 64)
    blocks = np.concatenate([set_scales(payload.copy(), d) for d in EDGE_SCALES])
    check_decode(tmp_path, fmt, blocks)


@pytest.mark.parametrize("fmt", FORMATS)
def test_nan_scale(tmp_path, rng, fmt):
    # NaN in gives NaN out at every weight. Not compared bitwise: gguf applies a sign by multiplying
    # by -1.0, which leaves a NaN's sign bit alone, while ggml's C code (and b12x) negates.
    blocks = set_scales(random_blocks(rng, fmt, 8), [0x7E00, 0xFE00, 0x7C01, 0x7FFF] * 2)
    got, want = cli_decode(tmp_path, fmt, blocks), gguf_decode(fmt, blocks)
    assert np.isnan(got).all() and np.isnan(want).all(), f"seed={SEED}"


@pytest.mark.parametrize("fmt", FORMATS)
def test_cli_random_blocks_match_gguf(tmp_path, fmt):
    rows, cols, seed = 64, 8 * GROUP[fmt], SEED
    files = [tmp_path / "a.bin", tmp_path / "b.bin"]
    for f in files:
        run_cli("codec", "random", "--format", fmt, "--rows", rows, "--cols", cols, "--seed", seed, "--out", f)
    raw = np.fromfile(files[0], dtype=np.uint8)
    assert raw.size == rows * cols // GROUP[fmt] * PAYLOAD[fmt]
    assert (np.fromfile(files[1], dtype=np.uint8) == raw).all(), f"seed={SEED}: same seed, different blocks"
    blocks = raw.reshape(-1, PAYLOAD[fmt])
    d = np.abs(blocks[:, :2].copy().view(np.float16).astype(np.float32).reshape(-1))
    assert ((d >= 2.0**-14) & (d <= 2.0**-6)).all(), f"seed={SEED}: scale out of range"
    check_decode(tmp_path, fmt, blocks)


def q8_0_inputs(rng):
    """>= 100k blocks of 32 float32: Gaussian rows at log-uniform scales, exact rounding ties,
    all-zero (+-0) blocks, huge (d overflows fp16) and tiny (d underflows fp16, 1/d overflows)
    magnitudes, random finite bit patterns, and Inf / a quiet NaN."""
    parts = []
    n = 60_000
    scale = np.exp2(rng.uniform(-40, 40, size=(n, 1)))
    parts.append((rng.standard_normal((n, 32)) * scale).astype(np.float32))
    # Ties: d = 2^e exactly (amax = 127 * 2^e), so x = (k + 1/2) * 2^e gives x * id = k + 1/2.
    n = 20_000
    e = rng.integers(-100, 100, size=(n, 1))
    k = rng.integers(-127, 127, size=(n, 32))
    ties = np.ldexp(k + 0.5, e)
    ties[:, 0] = np.ldexp(np.where(rng.integers(0, 2, n) == 1, 127.0, -127.0), e[:, 0])
    parts.append(ties.astype(np.float32))
    zeros = np.zeros((64, 32), np.float32)
    zeros[::2] = -0.0
    parts.append(zeros)
    for lo, hi in [(110, 128), (-149, -100)]:  # huge, tiny (fp32 subnormals included)
        n = 8_000
        mags = np.exp2(rng.uniform(lo, hi, size=(n, 32)))
        signs = np.where(rng.integers(0, 2, size=(n, 32)) == 1, -1.0, 1.0)
        parts.append(np.clip(mags * signs, -3.4e38, 3.4e38).astype(np.float32))
    bits = rng.integers(0, 1 << 32, size=(8_000, 32), dtype=np.uint64).astype(np.uint32)
    bits[(bits & 0x7F800000) == 0x7F800000] &= 0x807FFFFF  # keep them finite
    parts.append(bits.view(np.float32))
    special = np.ones((4, 32), np.float32)
    special[0, 3], special[1, 0], special[2, 31], special[3, 7] = np.inf, -np.inf, np.nan, np.nan
    parts.append(special)
    return np.concatenate(parts)


def test_q8_0_quantize_matches_gguf(tmp_path, rng):
    x = q8_0_inputs(rng)
    assert x.shape[0] >= 100_000
    rows = x.shape[0] // BLOCKS_PER_ROW
    x = x[: rows * BLOCKS_PER_ROW]
    src, dst = tmp_path / "x.f32", tmp_path / "q8_0.blocks"
    x.tofile(src)
    run_cli("codec", "encode", "--format", "q8_0", "--rows", rows, "--cols", BLOCKS_PER_ROW * 32,
            "--in", src, "--out", dst)
    got = np.fromfile(dst, dtype=np.uint8).reshape(-1, 34)
    with np.errstate(all="ignore"):
        want = quantize(x, GGMLQuantizationType.Q8_0).reshape(-1, 34)
    bad = np.nonzero((got != want).any(axis=1))[0]
    if bad.size:
        b = bad[0]
        pytest.fail(f"seed={SEED}: {bad.size} of {got.shape[0]} blocks differ; first block {b}: "
                    f"x bits {x[b].view(np.uint32).tolist()}\nb12x {got[b].tobytes().hex()}\n"
                    f"gguf {want[b].tobytes().hex()}")


# ---- bad input -------------------------------------------------------------------------------

def assert_cli_error(args, *fragments):
    proc = run_cli(*args, check=False)
    assert proc.returncode != 0, f"`b12x {' '.join(map(str, args))}` should have failed"
    for f in fragments:
        assert f in proc.stderr, f"expected {f!r} in the error message, got: {proc.stderr}"


def test_bad_inputs_fail_with_a_message(tmp_path):
    blocks = tmp_path / "blocks.bin"
    np.zeros(74 * 2, np.uint8).tofile(blocks)
    out = tmp_path / "out.f32"
    decode = ["codec", "decode", "--in", blocks, "--out", out]
    # 2 blocks of iq2_xs in the file, 3 expected by rows * cols.
    assert_cli_error(decode + ["--format", "iq2_xs", "--rows", 3, "--cols", 256], "148 bytes", "expected 222 bytes")
    # cols is not a whole number of 256-weight blocks.
    assert_cli_error(decode + ["--format", "iq2_xs", "--rows", 1, "--cols", 300], "multiple of 256", "300")
    assert_cli_error(decode + ["--format", "iq3_xxs", "--rows", 1, "--cols", 256], "unknown format 'iq3_xxs'",
                     "iq2_xs")
    assert_cli_error(["codec", "random", "--format", "nvfp4", "--rows", 1, "--cols", 256, "--seed", 1,
                      "--out", out], "q8_0", "nvfp4")
    x = tmp_path / "x.f32"
    np.zeros(48, np.float32).tofile(x)
    assert_cli_error(["codec", "encode", "--format", "q8_0", "--rows", 1, "--cols", 48, "--in", x,
                      "--out", out], "multiple of 32", "48")
    assert not out.exists(), "a failed command must not leave an output file"
