"""Block-scaled formats (NVFP4, MXFP4, MXFP8, FP8 per-tensor / per-channel / 128x128 blocks) through
`b12x codec`, against independent numpy + ml_dtypes oracles:

* decoders: ml_dtypes decodes every code and scale byte; products are formed in float64 (exact for
  these short significands) and rounded once to float32, which must equal our output bit for bit;
* quantizers: a numpy re-implementation of the documented spec (same FP32 operation order, via
  np.float32 arithmetic) must reproduce our codes and scales bit for bit on random data that
  includes all-zero blocks, RNE ties and NaN blocks;
* the 128x4 swizzled scale file equals a numpy reshape/permute of the linear scales.
"""
import json
import os

import ml_dtypes as md
import numpy as np
import pytest

from conftest import run_cli

SEED = int.from_bytes(os.urandom(4), "little")
F32 = np.float32
E2M1_MIDPOINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], F32)


@pytest.fixture(scope="module")
def rng():
    print(f"seed={SEED}")
    return np.random.default_rng(SEED)


# ---- CLI plumbing ------------------------------------------------------------------------------

def encode(tmp_path, fmt, x, *extra):
    """Encodes float32 x [rows, cols]; returns (payload bytes, scale bytes or None, JSON summary)."""
    src, out, scale = tmp_path / "x.f32", tmp_path / "payload.bin", tmp_path / "scale.bin"
    x.astype(F32).tofile(src)
    args = ["codec", "encode", "--format", fmt, "--rows", x.shape[0], "--cols", x.shape[1],
            "--in", src, "--out", out]
    if fmt != "fp8":
        args += ["--scale-out", scale]
    proc = run_cli(*args, *extra)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["format"] == fmt
    return np.fromfile(out, np.uint8), (np.fromfile(scale, np.uint8) if fmt != "fp8" else None), summary


def decode(tmp_path, fmt, rows, cols, payload, scale=None, *extra):
    src, scale_file, out = tmp_path / "payload.bin", tmp_path / "scale.bin", tmp_path / "values.f32"
    payload.tofile(src)
    args = ["codec", "decode", "--format", fmt, "--rows", rows, "--cols", cols, "--in", src, "--out", out]
    if scale is not None:
        scale.tofile(scale_file)
        args += ["--scale", scale_file]
    run_cli(*args, *extra)
    return np.fromfile(out, F32).reshape(rows, cols)


def assert_same_f32(got, want, what):
    """Bit-exact float32 comparison (so -0 != +0); NaN matches NaN regardless of payload."""
    got, want = np.asarray(got, F32), np.asarray(want, F32)
    assert got.shape == want.shape
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan), f"seed={SEED}: {what}: NaN positions differ"
    bad = np.nonzero((got.view(np.uint32) != want.view(np.uint32)) & ~nan)
    assert bad[0].size == 0, (f"seed={SEED}: {what}: {bad[0].size} mismatches, first at {tuple(b[0] for b in bad)}: "
                              f"got {got[tuple(b[0] for b in bad)]!r} want {want[tuple(b[0] for b in bad)]!r}")


def assert_same_bytes(got, want, what):
    got, want = np.asarray(got, np.uint8).ravel(), np.asarray(want, np.uint8).ravel()
    assert got.size == want.size, f"{what}: {got.size} bytes, want {want.size}"
    bad = np.nonzero(got != want)[0]
    assert bad.size == 0, (f"seed={SEED}: {what}: {bad.size} mismatches, first at byte {bad[0]}: "
                           f"got {got[bad[0]]:#04x} want {want[bad[0]]:#04x}")


# ---- independent decoders (ml_dtypes) ----------------------------------------------------------

def unpack_nibbles(packed, rows, cols):
    codes = np.empty((rows, cols), np.uint8)
    p = packed.reshape(rows, cols // 2)
    codes[:, 0::2], codes[:, 1::2] = p & 0xF, p >> 4  # element 2i in the low nibble
    return codes


def pack_nibbles(codes):
    return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)


def e2m1_decode(codes):
    return (codes & 0xF).astype(np.uint8).view(md.float4_e2m1fn).astype(np.float64)


def e4m3_decode(b):
    return np.asarray(b, np.uint8).view(md.float8_e4m3fn).astype(np.float64)


def e8m0_decode(b):
    return np.asarray(b, np.uint8).view(md.float8_e8m0fnu).astype(np.float64)


# ---- the documented quantizer spec in numpy float32 --------------------------------------------

def e4m3_encode(x):
    """RNE, saturating to +-448 (the cast alone would give NaN above 464); NaN -> 0x7F | sign."""
    x = np.asarray(x, F32)
    codes = np.clip(x, F32(-448), F32(448)).astype(md.float8_e4m3fn).view(np.uint8)
    sign = np.where(np.signbit(x), 0x80, 0).astype(np.uint8)
    return np.where(np.isnan(x), sign | 0x7F, codes).astype(np.uint8)


def e2m1_encode(x):
    """RNE, saturating to +-6; NaN -> +0 (E2M1 has no NaN)."""
    x = np.asarray(x, F32)
    codes = np.clip(np.nan_to_num(x, nan=0.0), F32(-6), F32(6)).astype(md.float4_e2m1fn).view(np.uint8) & 0xF
    return np.where(np.isnan(x), 0, codes).astype(np.uint8)


def block_amax(x, rows, cols, group):
    """Per-block max |x| over `group` consecutive K elements; NaN if the block holds a NaN."""
    return np.max(np.abs(x.reshape(rows, cols // group, group)), axis=-1)  # np.max propagates NaN


def nvfp4_spec(x, g, reassociated=False):
    """sb = e4m3((amax * g) / 6), q = e2m1((x * g) / sb). `reassociated` computes amax * (g / 6) and
    x * (g / sb) instead - not the spec; tests use it to show their data tells the two apart."""
    rows, cols = x.shape
    g = F32(g)
    xb = x.reshape(rows, cols // 16, 16)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        amax = block_amax(x, rows, cols, 16)
        sb = e4m3_encode(amax * (g / F32(6)) if reassociated else (amax * g) / F32(6))
        sbf = e4m3_decode(sb).astype(F32)
        t = xb * (g / sbf[..., None]) if reassociated else (xb * g) / sbf[..., None]
        q = np.where(sbf[..., None] == 0, 0, e2m1_encode(t)).astype(np.uint8)
    return pack_nibbles(q.reshape(rows, cols)), sb


def ue8m0_ceil(amax, elem_max):
    with np.errstate(invalid="ignore"):
        t = (amax / F32(elem_max)).astype(F32)
    bits = t.view(np.uint32)
    e = ((bits >> 23) & 0xFF).astype(np.int64)
    x = (e - 127) + ((bits & 0x7FFFFF) != 0)
    s = np.clip(x + 127, 0, 254)
    s = np.where(amax == 0, 127, s)
    return np.where(~np.isfinite(amax), 255, s).astype(np.uint8)


def mx_spec(x, fmt):
    rows, cols = x.shape
    elem_max = 6.0 if fmt == "mxfp4" else 448.0
    s = ue8m0_ceil(block_amax(x, rows, cols, 32), elem_max)
    exponent = s.astype(np.int32) - 127
    scaled = np.ldexp(x.reshape(rows, cols // 32, 32), -exponent[..., None]).astype(F32).reshape(rows, cols)
    if fmt == "mxfp4":
        return pack_nibbles(e2m1_encode(scaled)), s
    return e4m3_encode(scaled), s


def fp8_spec(x, block_rows, block_cols, reciprocal=False):
    """Dynamic FP8: scale = amax / 448 per block (1 for an all-zero block), q = e4m3(x / scale).
    `reciprocal` multiplies by 1 / scale instead - not the spec (see nvfp4_spec)."""
    rows, cols = x.shape
    sr, sc = -(-rows // block_rows), -(-cols // block_cols)
    scales = np.empty((sr, sc), F32)
    q = np.empty((rows, cols), np.uint8)
    for i in range(sr):
        for j in range(sc):
            window = np.s_[i * block_rows:(i + 1) * block_rows, j * block_cols:(j + 1) * block_cols]
            blk = x[window]
            amax = np.max(np.abs(blk))
            scale = F32(1) if amax == 0 else F32(amax / F32(448))
            scales[i, j] = scale
            with np.errstate(invalid="ignore"):
                q[window] = e4m3_encode(blk * (F32(1) / scale) if reciprocal else blk / scale)
    return q, scales


def swizzle_reference(linear, pad):
    """[R, C] scales -> 128x4 layout: pad to [Rp, Cp], view as (row tile, quarter, row, col tile, col),
    store as (row tile, col tile, row, quarter, col)."""
    r, c = linear.shape
    rp, cp = -(-r // 128) * 128, -(-c // 4) * 4
    padded = np.full((rp, cp), pad, np.uint8)
    padded[:r, :c] = linear
    return padded.reshape(rp // 128, 4, 32, cp // 4, 4).transpose(0, 3, 2, 1, 4).reshape(-1)


# ---- test data ---------------------------------------------------------------------------------

def random_rows(rng, rows, cols, lo_exp=-8, hi_exp=8):
    """Gaussian rows with log-uniform magnitudes, some all-zero rows, and a few exact zeros."""
    x = rng.standard_normal((rows, cols)).astype(F32) * np.exp2(rng.uniform(lo_exp, hi_exp, (rows, 1))).astype(F32)
    x[rng.random(rows) < 0.1] = 0
    x[rng.random((rows, cols)) < 0.01] = 0
    return x.astype(F32)


def preimage(target, op, guess):
    """float32 a near `guess` with op(a) == target exactly in float32 (NaN where none is within 4 ulps)."""
    target, guess = np.asarray(target, F32), np.asarray(guess, F32)
    found = np.full(target.shape, np.nan, F32)
    for direction in (np.inf, -np.inf):
        a = guess.copy()
        for _ in range(5):
            with np.errstate(all="ignore"):
                hit = (op(a) == target) & np.isnan(found)
            found[hit] = a[hit]
            a = np.nextafter(a, F32(direction))
    return found


def e4m3_midpoints(lo_code, hi_code):
    vals = np.unique(e4m3_decode(np.arange(lo_code, hi_code + 1, dtype=np.uint8)))
    return ((vals[1:] + vals[:-1]) / 2).astype(F32)


def nvfp4_order_ties(rng, rows, cols, g):
    """Exact ties under a global scale g that is not a power of two: block amax a with
    fl(a * g) = 6 m, m an E4M3 midpoint (so (a * g) / 6 is a tie), and elements x with
    fl(x * g) = mid * sb, mid an E2M1 midpoint (so (x * g) / sb is a tie). Reassociated orders
    miss these ties."""
    g = F32(g)
    m = rng.choice(e4m3_midpoints(0x08, 0x7E), (rows, cols // 16))
    a = preimage(F32(6) * m, lambda v: v * g, F32(6) * m / g)
    a = np.where(np.isnan(a), F32(6) * m / g, a)
    sb = e4m3_decode(e4m3_encode((a * g) / F32(6))).astype(F32)
    target = rng.choice(E2M1_MIDPOINTS[:-1], (rows, cols // 16, 16)) * sb[..., None]  # below 5 * sb < amax
    x = preimage(target, lambda v: v * g, target / g)
    hit_rate = np.isfinite(x).mean()
    x = np.where(np.isnan(x), target / g, x) * rng.choice(F32([-1, 1]), x.shape)
    x[..., 0] = a
    return x.reshape(rows, cols).astype(F32), hit_rate


def fp8_order_ties(rng, rows, cols):
    """Per-row FP8 blocks whose elements x satisfy fl(x / scale) = an E4M3 midpoint exactly."""
    amax = np.exp2(rng.uniform(-10, 10, rows)).astype(F32)
    scale = (amax / F32(448)).astype(F32)
    mids = rng.choice(e4m3_midpoints(0x00, 0x7E), (rows, cols))
    x = preimage(mids, lambda v: v / scale[:, None], mids * scale[:, None])
    hit = np.isfinite(x).mean()
    x = np.where(np.isnan(x), mids * scale[:, None], x) * rng.choice(F32([-1, 1]), x.shape)
    x[:, 0] = amax
    return x.astype(F32), hit


def nvfp4_tie_blocks(rng, rows, cols):
    """With g = 1: block amax 6 * s makes the scale exactly s (an E4M3 value) and the other elements
    sit on E2M1 midpoints * s, i.e. exact RNE ties."""
    s = e4m3_decode(rng.integers(0x08, 0x70, (rows, cols // 16), dtype=np.uint8)).astype(F32)
    mids = rng.choice(E2M1_MIDPOINTS, (rows, cols // 16, 16)) * rng.choice(F32([-1, 1]), (rows, cols // 16, 16))
    x = mids * s[..., None]
    x[..., 0] = F32(6) * s
    return x.reshape(rows, cols).astype(F32)


def mx_tie_blocks(rng, rows, cols, fmt):
    """Block amax elem_max * 2^X (so the ceil rule picks exactly X) and elements on element midpoints * 2^X."""
    if fmt == "mxfp4":
        elem_max, mids = F32(6), E2M1_MIDPOINTS
    else:
        vals = np.unique(e4m3_decode(np.arange(0x00, 0x7F, dtype=np.uint8)))
        elem_max, mids = F32(448), ((vals[1:] + vals[:-1]) / 2).astype(F32)
    p = np.exp2(rng.integers(-20, 20, (rows, cols // 32, 1))).astype(F32)
    x = rng.choice(mids, (rows, cols // 32, 32)) * rng.choice(F32([-1, 1]), (rows, cols // 32, 32)) * p
    x[..., 0] = elem_max * p[..., 0]
    return x.reshape(rows, cols).astype(F32)


# ---- decoders ----------------------------------------------------------------------------------

@pytest.mark.parametrize("layout", ["linear", "swizzled"])
def test_nvfp4_decode_exact(tmp_path, rng, layout):
    rows, cols = 130, 96
    packed = rng.integers(0, 256, (rows, cols // 2), dtype=np.uint8)
    scales = rng.integers(0, 0x7F, (rows, cols // 16), dtype=np.uint8)
    scales[3, 2] = 0x7F  # a NaN scale poisons exactly its block
    scale_file = scales if layout == "linear" else swizzle_reference(scales, 0)
    exact = e2m1_decode(unpack_nibbles(packed, rows, cols)) * np.repeat(e4m3_decode(scales), 16, axis=1)
    got = decode(tmp_path, "nvfp4", rows, cols, packed, scale_file, "--scale-layout", layout)
    assert_same_f32(got, exact.astype(F32), "nvfp4 decode, scale2 = 1")  # e2m1 * e4m3 is exact in float32
    assert np.isnan(got[3, 32:48]).all() and np.isfinite(np.delete(got[3], np.s_[32:48])).all()
    scale2 = F32(rng.uniform(1e-5, 1e-2))
    got = decode(tmp_path, "nvfp4", rows, cols, packed, scale_file, "--scale-layout", layout,
                 "--scale2", repr(float(scale2)))
    assert_same_f32(got, (exact * np.float64(scale2)).astype(F32), "nvfp4 decode with scale2 (one rounding)")


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp8"])
@pytest.mark.parametrize("layout", ["linear", "swizzled"])
def test_mx_decode_exact(tmp_path, rng, fmt, layout):
    rows, cols = 70, 160
    scales = rng.integers(90, 165, (rows, cols // 32), dtype=np.uint8)
    scales[0, :3] = [0, 255, 127]  # 2^-127 (a float32 subnormal), NaN, 1.0
    if fmt == "mxfp4":
        payload = rng.integers(0, 256, (rows, cols // 2), dtype=np.uint8)
        elems = e2m1_decode(unpack_nibbles(payload, rows, cols))
    else:
        payload = rng.integers(0, 256, (rows, cols), dtype=np.uint8)
        elems = e4m3_decode(payload)
    scale_file = scales if layout == "linear" else swizzle_reference(scales, 127)
    want = elems * np.repeat(e8m0_decode(scales), 32, axis=1)
    got = decode(tmp_path, fmt, rows, cols, payload, scale_file, "--scale-layout", layout)
    assert_same_f32(got, want.astype(F32), f"{fmt} decode")


def test_fp8_decode_exact(tmp_path, rng):
    rows, cols = 200, 300  # 128x128 edge blocks of 72 rows and 44 columns
    q = rng.integers(0, 256, (rows, cols), dtype=np.uint8)
    elems = e4m3_decode(q)
    s2 = F32(rng.uniform(1e-4, 1))
    got = decode(tmp_path, "fp8", rows, cols, q, None, "--scale2", repr(float(s2)))
    assert_same_f32(got, (elems * np.float64(s2)).astype(F32), "fp8 per-tensor decode")
    row_scales = rng.uniform(1e-4, 1, rows).astype(F32)
    got = decode(tmp_path, "fp8_channel", rows, cols, q, row_scales)
    assert_same_f32(got, (elems * row_scales[:, None].astype(np.float64)).astype(F32), "fp8_channel decode")
    block_scales = rng.uniform(1e-4, 1, (2, 3)).astype(F32)
    expanded = np.repeat(np.repeat(block_scales, 128, axis=0), 128, axis=1)[:rows, :cols]
    got = decode(tmp_path, "fp8_block", rows, cols, q, block_scales)
    assert_same_f32(got, (elems * expanded.astype(np.float64)).astype(F32), "fp8_block decode")


# ---- quantizers against the numpy spec ---------------------------------------------------------

def test_nvfp4_encode_matches_spec(tmp_path, rng):
    rows, cols = 192, 256
    x = random_rows(rng, rows, cols)
    amax = np.max(np.abs(x))
    g = F32(F32(448 * 6) / amax)
    payload, scales, summary = encode(tmp_path, "nvfp4", x)
    want_packed, want_scales = nvfp4_spec(x, g)
    assert_same_bytes(scales, want_scales, "nvfp4 scales (default global scale)")
    assert_same_bytes(payload, want_packed, "nvfp4 codes (default global scale)")
    assert F32(summary["scale2"]) == F32(F32(1) / g)

    # Exact ties on both the block scale and the elements, with an explicit global scale; NaN blocks.
    x = nvfp4_tie_blocks(rng, rows, cols)
    x[5, 16 * 3 + 7] = np.nan
    x[9, :16] = 0
    payload, scales, summary = encode(tmp_path, "nvfp4", x, "--global-scale", "1")
    want_packed, want_scales = nvfp4_spec(x, 1.0)
    assert want_scales[5, 3] == 0x7F and want_scales[9, 0] == 0
    assert_same_bytes(scales, want_scales, "nvfp4 scales (ties)")
    assert_same_bytes(payload, want_packed, "nvfp4 codes (ties)")
    assert summary["scale2"] == 1.0

    # Ties of the scale itself: amax * g / 6 halfway between E4M3 neighbours.
    vals = np.unique(e4m3_decode(np.arange(0x08, 0x7E, dtype=np.uint8)))
    mids = ((vals[1:] + vals[:-1]) / 2).astype(F32)
    x = np.zeros((1, 16 * mids.size), F32)
    x[0, ::16] = mids * F32(6)
    x[0, 1::16] = mids * F32(2.5)
    payload, scales, _ = encode(tmp_path, "nvfp4", x, "--global-scale", "1")
    want_packed, want_scales = nvfp4_spec(x, 1.0)
    assert_same_bytes(scales, want_scales, "nvfp4 scale ties")
    assert_same_bytes(payload, want_packed, "nvfp4 codes under tied scales")


def test_nvfp4_operation_order(tmp_path, rng):
    rows, cols = 128, 256
    # For about one g in ten the reassociated roundings happen to land on the same ties; draw until
    # the data provably tells the two orders apart.
    for _ in range(10):
        g = F32(rng.uniform(1.05, 1.95))
        x, hit_rate = nvfp4_order_ties(rng, rows, cols, g)
        assert hit_rate > 0.5, f"seed={SEED}: only {hit_rate:.0%} of the constructed element ties exist"
        want_packed, want_scales = nvfp4_spec(x, g)
        alt_packed, alt_scales = nvfp4_spec(x, g, reassociated=True)
        if not (np.array_equal(want_packed, alt_packed) and np.array_equal(want_scales, alt_scales)):
            break
    else:
        pytest.fail(f"seed={SEED}: no global scale separated the operation orders")
    payload, scales, summary = encode(tmp_path, "nvfp4", x, "--global-scale", repr(float(g)))
    assert_same_bytes(scales, want_scales, "nvfp4 scales ((amax * g) / 6 ties)")
    assert_same_bytes(payload, want_packed, "nvfp4 codes ((x * g) / sb ties)")
    assert F32(summary["scale2"]) == F32(1) / g


def test_fp8_operation_order(tmp_path, rng):
    rows, cols = 64, 256
    x, hit_rate = fp8_order_ties(rng, rows, cols)
    assert hit_rate > 0.5, f"seed={SEED}: only {hit_rate:.0%} of the constructed ties exist"
    want, scales = fp8_spec(x, 1, cols)
    assert not np.array_equal(want, fp8_spec(x, 1, cols, reciprocal=True)[0])
    payload, scale_bytes, _ = encode(tmp_path, "fp8_channel", x)
    assert_same_f32(scale_bytes.view(F32), scales.ravel(), "fp8_channel scales")
    assert_same_bytes(payload, want, "fp8_channel codes (x / scale ties)")


@pytest.mark.parametrize("fmt", ["mxfp4", "mxfp8"])
def test_mx_encode_matches_spec(tmp_path, rng, fmt):
    rows, cols = 130, 256
    for x in (random_rows(rng, rows, cols, -30, 30), mx_tie_blocks(rng, rows, cols, fmt)):
        x[7, 64 + 3] = np.nan
        x[8, 32 + 1] = -np.inf
        payload, scales, _ = encode(tmp_path, fmt, x)
        want_payload, want_scales = mx_spec(x, fmt)
        assert want_scales[7, 2] == 255 and want_scales[8, 1] == 255
        assert_same_bytes(scales, want_scales, f"{fmt} scales")
        assert_same_bytes(payload, want_payload, f"{fmt} elements")


@pytest.mark.parametrize("fmt,block", [("fp8", None), ("fp8_channel", (1, None)), ("fp8_block", (128, 128))])
def test_fp8_encode_matches_spec(tmp_path, rng, fmt, block):
    rows, cols = 200, 300
    x = random_rows(rng, rows, cols, -20, 20)
    # E4M3 midpoints times a power-of-two scale: amax 448 * 2^k makes the scale exactly 2^k.
    vals = np.unique(e4m3_decode(np.arange(0x00, 0x7F, dtype=np.uint8)))
    mids = ((vals[1:] + vals[:-1]) / 2).astype(F32)
    x[:128, :128] = rng.choice(mids, (128, 128)) * F32(2.0 ** -5)
    x[0, 0] = F32(448 * 2.0 ** -5)
    x[128:, 128:] = 0  # an all-zero edge block (scale 1)
    br, bc = block if block else (rows, cols)
    q, scales = fp8_spec(x, br, bc or cols)
    payload, scale_bytes, summary = encode(tmp_path, fmt, x)
    assert_same_bytes(payload, q, f"{fmt} codes")
    if fmt == "fp8":
        assert F32(summary["scale2"]) == scales[0, 0]
    else:
        assert_same_f32(scale_bytes.view(F32).reshape(scales.shape), scales, f"{fmt} scales")


@pytest.mark.parametrize("fmt,pad", [("nvfp4", 0), ("mxfp4", 127), ("mxfp8", 127)])
def test_swizzled_scale_file(tmp_path, rng, fmt, pad):
    rows, cols = 131, 32 * 5  # padding in both directions: 131 -> 256 rows, 10 or 5 -> 12 or 8 columns
    x = random_rows(rng, rows, cols)
    payload_lin, linear, _ = encode(tmp_path, fmt, x, "--scale-layout", "linear")
    payload_sw, swizzled, _ = encode(tmp_path, fmt, x, "--scale-layout", "swizzled")
    assert_same_bytes(payload_sw, payload_lin, f"{fmt} payload does not depend on the scale layout")
    group = 16 if fmt == "nvfp4" else 32
    want = swizzle_reference(linear.reshape(rows, cols // group), pad)
    assert_same_bytes(swizzled, want, f"{fmt} swizzled scales")
    is_data = swizzle_reference(np.ones((rows, cols // group), np.uint8), 0) == 1
    assert (swizzled[~is_data] == pad).all() and is_data.sum() == rows * (cols // group)
    decoded_lin = decode(tmp_path, fmt, rows, cols, payload_lin, linear)
    decoded_sw = decode(tmp_path, fmt, rows, cols, payload_sw, swizzled, "--scale-layout", "swizzled")
    assert_same_f32(decoded_sw, decoded_lin, f"{fmt} decode through the swizzled layout")
