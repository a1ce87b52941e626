// The tile16 layout on the host: the repack against the layout written forward from
// docs/FORMATS.md#tile16 (independently of tile16.cuh's inverse mapping) and against hand-computed
// positions, round trips, decoding and the CPU linear reference unchanged by the layout, and the
// argument rules (validate_weight, the host repack, and tile16_pack's checks, which need no GPU).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/formats/tile16.h"
#include "formats/kernels/tile16.cuh"
#include "support/errors.h"
#include "support/fake_device.h"
#include "support/weights.h"

namespace b12x {
namespace {

using namespace b12x::test;

// Every format (the expectation, not has_tile16_layout's answer).
const std::vector<Format> kTile16Formats = {Format::bf16,  Format::f16,   Format::fp8_tensor, Format::fp8_channel,
                                            Format::fp8_block, Format::mxfp8, Format::nvfp4, Format::mxfp4,
                                            Format::q8_0, Format::iq2_xxs, Format::iq2_xs};

bool is_iq2(Format f) { return f == Format::iq2_xxs || f == Format::iq2_xs; }

// [N, K] pairs: one tile and one run; 11 runs (not a multiple of 4); three tiles; fp8_block partial
// blocks. IQ2 (K % 256 == 0): one tile and block; 3 blocks; three tiles; nine tiles.
std::vector<std::pair<int64_t, int64_t>> shapes(Format f) {
  if (is_iq2(f)) return {{16, 256}, {16, 768}, {48, 512}, {144, 256}};
  return {{16, 32}, {16, 352}, {48, 352}, {144, 160}};
}

std::string label(Format f, int64_t n, int64_t k) {
  return std::string(format_info(f).name) + " " + std::to_string(n) + "x" + std::to_string(k);
}

// A checkpoint-layout weight of random bytes (the repack is format-agnostic byte moves).
PackedWeight random_bytes(Format f, int64_t n, int64_t k, std::mt19937_64& rng) {
  PackedWeight p = allocate_weight(f, n, k);
  for (auto& b : p.data.bytes()) b = static_cast<uint8_t>(rng());
  for (auto& b : p.scale.bytes()) b = static_cast<uint8_t>(rng());
  p.scale2 = 0.75f;
  return p;
}

// The tile16 offset of checkpoint data byte c, written from the checkpoint side: row r = 16T + g + 8h,
// run j, lane piece t of E bytes (8 elements) -> chunk (T, j), slot 4g + t, half h; Q8_0 block scales
// go to the d words after the 512 slot bytes; E4M3 data swaps bytes 1 and 2 of every 4-byte word
// (elements 0, 1, 2, 3 in bytes 0, 2, 1, 3).
int64_t data_dst(Format f, int64_t k, int64_t c) {
  const int64_t runs = k / 32;
  if (is_iq2(f)) {  // block b of row r -> chunk (T, b) of 16 blocks: d words, 8 x 128 qs bytes, (XS) scales
    const int64_t bb = f == Format::iq2_xxs ? 66 : 74, blocks = k / 256;
    const int64_t row = c / (bb * blocks), b = c % (bb * blocks) / bb, o = c % bb;
    const int64_t tile = row / 16, g = row % 8, h = row % 16 / 8, base = (tile * blocks + b) * 16 * bb;
    if (o < 2) return base + 4 * g + 2 * h + o;
    if (o < 66) return base + 32 + 128 * ((o - 2) / 8) + 16 * g + 8 * h + (o - 2) % 8;
    return base + 1056 + 16 * (o - 66) + 2 * g + h;
  }
  if (f == Format::q8_0) {
    const int64_t row = c / (34 * runs), j = c % (34 * runs) / 34, o = c % 34;
    const int64_t tile = row / 16, g = row % 8, h = row % 16 / 8, base = (tile * runs + j) * 544;
    if (o < 2) return base + 512 + 4 * g + 2 * h + o;
    return base + (4 * g + (o - 2) / 8) * 16 + 8 * h + (o - 2) % 8;
  }
  const int64_t e = f == Format::bf16 || f == Format::f16 ? 16 : f == Format::nvfp4 || f == Format::mxfp4 ? 4 : 8;
  const int64_t row_bytes = 4 * e * runs, row = c / row_bytes, col = c % row_bytes;
  const int64_t j = col / (4 * e), t = col % (4 * e) / e;
  int64_t b = col % e;
  const bool e4m3 = f == Format::fp8_tensor || f == Format::fp8_channel || f == Format::fp8_block || f == Format::mxfp8;
  if (e4m3 && (b % 4 == 1 || b % 4 == 2)) b = b % 4 == 1 ? b + 1 : b - 1;
  const int64_t tile = row / 16, g = row % 8, h = row % 16 / 8;
  return (tile * runs + j) * 64 * e + (4 * g + t) * 2 * e + h * e + b;
}

// The same for scale byte c: MX [N, runs] -> 16 bytes per (T, j); NVFP4 [N, 2 runs] -> 32; FP8 unchanged.
int64_t scale_dst(Format f, int64_t k, int64_t c) {
  const int64_t runs = k / 32;
  if (f == Format::mxfp8 || f == Format::mxfp4) {
    const int64_t row = c / runs, j = c % runs, tile = row / 16, g = row % 8, h = row % 16 / 8;
    return (tile * runs + j) * 16 + 2 * g + h;
  }
  if (f == Format::nvfp4) {
    const int64_t row = c / (2 * runs), j = c % (2 * runs) / 2, q = c % 2, tile = row / 16, g = row % 8, h = row % 16 / 8;
    return (tile * runs + j) * 32 + 16 * q + 2 * g + h;
  }
  return c;
}

// to_tile16 moves every byte where dst says, dst is a bijection, and tile16.cuh's src inverts it.
void expect_forward_layout(const std::vector<uint8_t>& ckpt, const std::vector<uint8_t>& tiled, bool scale, Format f,
                           int64_t k, const std::string& what) {
  ASSERT_EQ(ckpt.size(), tiled.size()) << what;
  const int fi = static_cast<int>(f);
  const bool moved = !scale || device::tile16_scale_chunk_bytes(fi) > 0;
  std::vector<bool> hit(tiled.size());
  int64_t bad = 0;
  for (int64_t c = 0; c < static_cast<int64_t>(ckpt.size()); ++c) {
    const int64_t d = scale ? scale_dst(f, k, c) : data_dst(f, k, c);
    ASSERT_TRUE(d >= 0 && d < static_cast<int64_t>(tiled.size()) && !hit[d]) << what << ": byte " << c << " -> " << d;
    hit[d] = true;
    const long long src = !moved ? d : scale ? device::tile16_scale_src(fi, d, k / 32) : device::tile16_data_src(fi, d, k / 32);
    if ((tiled[d] != ckpt[c] || src != c) && bad++ < 5)
      ADD_FAILURE() << what << (scale ? " scale" : " data") << " byte " << c << " -> " << d << ": src(" << d
                    << ") = " << src << ", byte " << int(tiled[d]) << " want " << int(ckpt[c]);
  }
  EXPECT_EQ(bad, 0) << what;
}

TEST(Tile16, FormatsWithTheLayout) {
  for (const auto& info : all_formats()) EXPECT_TRUE(has_tile16_layout(info.format)) << info.name;
  EXPECT_EQ(tile16_kernel_specs().size(), kTile16Formats.size());
}

TEST(Tile16, PackIsThePermutationTheDocsDescribe) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Format f : kTile16Formats)
    for (const auto& [n, k] : shapes(f)) {
      const PackedWeight p = random_bytes(f, n, k, rng);
      const PackedWeight t = to_tile16(p.view());
      EXPECT_EQ(t.layout, WeightLayout::tile16);
      EXPECT_EQ(t.scale2, p.scale2);
      EXPECT_EQ(t.data.dtype(), p.data.dtype());
      EXPECT_EQ(t.data.view().shape_vec(), p.data.view().shape_vec());
      EXPECT_EQ(t.scale.view().shape_vec(), p.scale.view().shape_vec());
      expect_forward_layout(p.data.bytes(), t.data.bytes(), false, f, k, label(f, n, k));
      if (!p.scale.view().empty()) expect_forward_layout(p.scale.bytes(), t.scale.bytes(), true, f, k, label(f, n, k));
    }
}

// The mapping function alone: every tile16 byte's source is in range and distinct (so all are covered).
TEST(Tile16, SourceMapIsABijection) {
  for (Format f : kTile16Formats)
    for (const auto& [n, k] : shapes(f)) {
      const PackedWeight p = allocate_weight(f, n, k);
      const int fi = static_cast<int>(f);
      auto check = [&](int64_t bytes, bool scale) {
        std::vector<bool> seen(bytes);
        for (int64_t i = 0; i < bytes; ++i) {
          const long long s = scale ? device::tile16_scale_src(fi, i, k / 32) : device::tile16_data_src(fi, i, k / 32);
          ASSERT_TRUE(s >= 0 && s < bytes && !seen[s]) << label(f, n, k) << (scale ? " scale " : " data ") << i;
          seen[s] = true;
        }
      };
      EXPECT_EQ(static_cast<int64_t>(p.data.nbytes()) % device::tile16_chunk_bytes(fi), 0) << label(f, n, k);
      check(static_cast<int64_t>(p.data.nbytes()), false);
      if (device::tile16_scale_chunk_bytes(fi) > 0) check(static_cast<int64_t>(p.scale.nbytes()), true);
    }
}

// One marked checkpoint byte lands at a position worked out by hand for [48, 352] (11 runs): element
// (25, 75) is tile T = 1 (row 16 + 1 + 8: g = 1, h = 1), run j = 2, lane 4g + t = 5 (t = 1), element 3
// of its 8; chunk (1, 2) is chunk 13.
TEST(Tile16, HandComputedPositions) {
  struct Case {
    Format f;
    bool scale;
    int64_t ckpt, tiled;
    int64_t k = 352;
  };
  const Case cases[] = {
      // 13 * 512 + lane 5 * 16 + h * 8 + 3  <-  25 * 352 + 75
      {Format::fp8_tensor, false, 8875, 6747},
      {Format::mxfp8, false, 8875, 6747},
      {Format::fp8_block, false, 8875, 6747},
      // 13 * 1024 + 5 * 32 + 16 + 2 * 3 (+1: high byte)  <-  2 * (25 * 352 + 75) (+1)
      {Format::bf16, false, 17750, 13494},
      {Format::f16, false, 17751, 13495},
      // 13 * 256 + 5 * 8 + 4 + 3 / 2  <-  25 * 176 + 75 / 2 (high nibble)
      {Format::nvfp4, false, 4437, 3373},
      {Format::mxfp4, false, 4437, 3373},
      // Q8_0: 13 * 544 + 5 * 16 + 8 + 3  <-  25 * 374 + 2 * 34 + 2 + 11; d of row 25, block 2 (both bytes)
      // -> 13 * 544 + 512 + 4g + 2h
      {Format::q8_0, false, 9431, 7163},
      {Format::q8_0, false, 9418, 7590},
      {Format::q8_0, false, 9419, 7591},
      // scales of row 25, run 2: MX 13 * 16 + 2g + h <- 25 * 11 + 2; NVFP4 group 5 (q = 1) 13 * 32 + 16 + 3
      // <- 25 * 22 + 5; FP8 scales stay put
      {Format::mxfp8, true, 277, 211},
      {Format::mxfp4, true, 277, 211},
      {Format::nvfp4, true, 555, 435},
      {Format::fp8_channel, true, 101, 101},
      {Format::fp8_block, true, 2, 2},
      // IQ2 at [48, 512] (2 blocks per row), row 25, block 1 -> chunk (1, 1) = chunk 3: qs byte 5 of
      // sub-block 3: 3 * 16 * bb + 32 + 128 * 3 + 16g + 8h + 5 <- 25 * 2 * bb + bb + 2 + 8 * 3 + 5
      {Format::iq2_xxs, false, 3397, 3613, 512},
      {Format::iq2_xs, false, 3805, 3997, 512},
      // d, high byte: 3 * 16 * bb + 4g + 2h + 1 <- 25 * 2 * bb + bb + 1
      {Format::iq2_xxs, false, 3367, 3175, 512},
      {Format::iq2_xs, false, 3775, 3559, 512},
      // IQ2_XS scale byte of sub-block 3: 3 * 1184 + 1056 + 16 * 3 + 2g + h <- 25 * 148 + 74 + 66 + 3
      {Format::iq2_xs, false, 3843, 4659, 512},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(label(c.f, 48, c.k) + (c.scale ? " scale " : " data ") + std::to_string(c.ckpt));
    PackedWeight p = allocate_weight(c.f, 48, c.k);
    (c.scale ? p.scale : p.data).bytes().at(c.ckpt) = 0x5A;
    const PackedWeight t = to_tile16(p.view());
    const std::vector<uint8_t>& got = (c.scale ? t.scale : t.data).bytes();
    for (size_t i = 0; i < got.size(); ++i) {
      if (got[i] != 0) {
        EXPECT_EQ(static_cast<int64_t>(i), c.tiled) << "marker at " << i;
      }
    }
    EXPECT_EQ(got.at(c.tiled), 0x5A);
  }
}

TEST(Tile16, RoundTripIsTheIdentity) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Format f : kTile16Formats)
    for (const auto& [n, k] : shapes(f)) {
      const PackedWeight p = random_bytes(f, n, k, rng);
      PackedWeight t = allocate_weight(f, n, k), back = allocate_weight(f, n, k);
      t.layout = WeightLayout::tile16;
      tile16_pack_host(p.view(), t.view());
      tile16_unpack_host(t.view(), back.view());
      EXPECT_EQ(back.data.bytes(), p.data.bytes()) << label(f, n, k);
      EXPECT_EQ(back.scale.bytes(), p.scale.bytes()) << label(f, n, k);
      const PackedWeight again = from_tile16(to_tile16(p.view()).view());
      EXPECT_EQ(again.layout, WeightLayout::checkpoint);
      EXPECT_EQ(again.scale2, p.scale2);
      EXPECT_EQ(again.data.bytes(), p.data.bytes()) << label(f, n, k);
      EXPECT_EQ(again.scale.bytes(), p.scale.bytes()) << label(f, n, k);
      if (n * k > 16 * 32) {
        EXPECT_NE(t.data.bytes(), p.data.bytes()) << label(f, n, k) << ": nothing moved";
      }
    }
}

// dequantize_weight and reference_linear read a tile16 weight like its checkpoint original, bit for bit.
TEST(Tile16, DecodeAndReferenceLinearIgnoreTheLayout) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Format f : kTile16Formats) {
    const int64_t n = 48, k = is_iq2(f) ? 512 : 352;
    const PackedWeight p = random_weight(f, n, k, rng, kLinearDraw);
    const PackedWeight t = to_tile16(p.view());
    for (bool tensor_scale : {true, false}) {
      HostTensor want(DType::f32, {n, k}), got(DType::f32, {n, k});
      dequantize_weight(p.view(), want.view(), tensor_scale);
      dequantize_weight(t.view(), got.view(), tensor_scale);
      EXPECT_EQ(got.bytes(), want.bytes()) << label(f, n, k) << " apply_tensor_scale=" << tensor_scale;
    }
    const HostTensor x = random_floats(rng, 3, k, kLinearDraw);
    HostTensor want(DType::f32, {3, n}), got(DType::f32, {3, n});
    reference_linear({x.view(), p.view(), ActMode::a16, 1.0f, {}, want.view()});
    reference_linear({x.view(), t.view(), ActMode::a16, 1.0f, {}, got.view()});
    EXPECT_EQ(got.bytes(), want.bytes()) << label(f, n, k);
  }
}

TEST(Tile16, ValidateWeightRules) {
  PackedWeight p = allocate_weight(Format::nvfp4, 48, 64);
  p.layout = WeightLayout::tile16;
  EXPECT_NO_THROW(validate_weight(p.view()));
  PackedWeight odd_n = allocate_weight(Format::fp8_tensor, 40, 64);
  odd_n.layout = WeightLayout::tile16;
  expect_bad_argument([&] { validate_weight(odd_n.view()); }, "weight", {"multiple of 16", "[40, 64]"});
  PackedWeight odd_k = allocate_weight(Format::nvfp4, 16, 48);  // a valid nvfp4 K, not a whole run
  odd_k.layout = WeightLayout::tile16;
  expect_bad_argument([&] { validate_weight(odd_k.view()); }, "weight", {"multiple of 32", "[16, 48]"});
  for (Format iq2 : {Format::iq2_xxs, Format::iq2_xs}) {  // K % 256 is IQ2's own rule
    PackedWeight q = allocate_weight(iq2, 16, 256);
    q.layout = WeightLayout::tile16;
    EXPECT_NO_THROW(validate_weight(q.view()));
  }
  WeightView unknown = p.view();
  unknown.layout = static_cast<WeightLayout>(7);
  expect_bad_argument([&] { validate_weight(unknown); }, "weight", {"layout"});
  // The checkpoint rules still apply to tile16 weights.
  WeightView short_scale = p.view();
  short_scale.scale.shape[1] = 3;
  expect_bad_argument([&] { validate_weight(short_scale); }, "weight_scale");
}

TEST(Tile16, HostRepackArgumentRules) {
  std::mt19937_64 rng(fresh_seed());
  const PackedWeight p = random_bytes(Format::mxfp8, 32, 64, rng);
  PackedWeight t = allocate_weight(Format::mxfp8, 32, 64);
  t.layout = WeightLayout::tile16;
  expect_bad_argument([&] { tile16_pack_host(t.view(), t.view()); }, "in", {"checkpoint layout", "tile16"});
  expect_bad_argument([&] { tile16_pack_host(p.view(), p.view()); }, "out", {"tile16 layout", "checkpoint"});
  expect_bad_argument([&] { tile16_unpack_host(p.view(), p.view()); }, "in", {"tile16 layout"});
  expect_bad_argument([&] { tile16_unpack_host(t.view(), t.view()); }, "out", {"checkpoint layout"});
  PackedWeight wide = allocate_weight(Format::mxfp8, 48, 64), other = allocate_weight(Format::mxfp4, 32, 64);
  wide.layout = other.layout = WeightLayout::tile16;
  expect_bad_argument([&] { tile16_pack_host(p.view(), wide.view()); }, "out", {"[48, 64]", "[32, 64]"});
  expect_bad_argument([&] { tile16_pack_host(p.view(), other.view()); }, "out", {"mxfp4", "mxfp8"});
  // Each weight valid, under the repack's argument name.
  const PackedWeight odd = random_bytes(Format::bf16, 40, 64, rng);
  PackedWeight odd_t = allocate_weight(Format::bf16, 40, 64);
  odd_t.layout = WeightLayout::tile16;
  expect_bad_argument([&] { tile16_pack_host(odd.view(), odd_t.view()); }, "out", {"multiple of 16"});
  expect_bad_argument([&] { to_tile16(odd.view()); }, "in", {"multiple of 16"});
  const PackedWeight iq2 = random_bytes(Format::iq2_xs, 40, 256, rng);
  expect_bad_argument([&] { to_tile16(iq2.view()); }, "in", {"multiple of 16"});
  WeightView bad_scale = p.view();
  bad_scale.scale = TensorView();
  expect_bad_argument([&] { tile16_pack_host(bad_scale, t.view()); }, "in", {"weight_scale"});
  // Shared bytes: the permutation cannot run in place.
  WeightView aliased = t.view();
  aliased.data.data = p.data.view().data;
  expect_bad_argument([&] { tile16_pack_host(p.view(), aliased); }, "out", {"overlaps"});
  // Host only.
  WeightView dev = t.view();
  dev.data.device = dev.scale.device = Device::cuda(0);
  expect_bad_argument([&] { tile16_pack_host(p.view(), dev); }, "out", {"host"});
  EXPECT_NO_THROW(tile16_pack_host(p.view(), t.view()));
}

// tile16_pack validates before resolving its kernel, so its argument errors need no GPU.
TEST(Tile16, DevicePackArgumentRulesWithoutAGpu) {
  const WeightView in = fake_device_weight(Format::nvfp4, 32, 64);  // slots 0 (data), 1 (scale)
  WeightView out = in;
  out.layout = WeightLayout::tile16;
  out.data.data = fake_device_ptr(2);
  out.scale.data = fake_device_ptr(3);
  {
    WeightView host = in;
    host.data.device = host.scale.device = Device::host();
    expect_bad_argument([&] { tile16_pack(host, out, nullptr); }, "in", {"CUDA device"});
  }
  {
    WeightView elsewhere = out;
    elsewhere.data.device = elsewhere.scale.device = Device::cuda(1);
    expect_bad_argument([&] { tile16_pack(in, elsewhere, nullptr); }, "out", {"device"});
  }
  {
    WeightView aliased = out;
    aliased.scale.data = in.data.data;
    expect_bad_argument([&] { tile16_pack(in, aliased, nullptr); }, "out", {"overlaps"});
  }
  {
    WeightView misaligned = out;
    misaligned.data.data = static_cast<char*>(out.data.data) + 8;
    expect_bad_argument([&] { tile16_pack(in, misaligned, nullptr); }, "out", {"16"});
  }
  expect_bad_argument([&] { tile16_pack(out, out, nullptr); }, "in", {"checkpoint layout"});
  // Valid arguments pass validation; resolving then needs a GPU, which may or may not be here (N = 0:
  // nothing to launch, so the fake pointers are never dereferenced).
  WeightView empty_in = fake_device_weight(Format::bf16, 0, 64), empty_out = empty_in;
  empty_out.layout = WeightLayout::tile16;
  empty_out.data.data = fake_device_ptr(2);
  try {
    tile16_pack(empty_in, empty_out, nullptr);
  } catch (const BadArgument& e) {
    ADD_FAILURE() << e.what();
  } catch (const Error&) {
  }
}

}  // namespace
}  // namespace b12x
