// FP8 E4M3 with FP32 block scales: scale shapes (partial edge blocks), hand-computed codes with RNE
// ties, zero and NaN blocks, random round trips for every block kind against an independent block
// amax, static quantization, exact decode, and argument validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "b12x/b12x.h"
#include "support/errors.h"

using namespace b12x;
using b12x::test::expect_bad_argument;

namespace {

using Shape2 = std::pair<int64_t, int64_t>;

Shape2 scale_shape(int64_t rows, int64_t cols, Fp8Block block) {
  int64_t r = -1, c = -1;
  fp8_scale_shape(rows, cols, block, &r, &c);
  return {r, c};
}

struct Fp8 {
  HostTensor q, scales;
};

Fp8 quantize(const HostTensor& x, Fp8Block block) {
  const int64_t rows = x.view().size(0), cols = x.view().size(1);
  const auto [sr, sc] = scale_shape(rows, cols, block);
  Fp8 f{HostTensor(DType::f8_e4m3, {rows, cols}), HostTensor(DType::f32, {sr, sc})};
  fp8_quantize(x.view(), block, f.q.view(), f.scales.view());
  return f;
}

HostTensor matrix(int64_t rows, int64_t cols, const std::vector<float>& v) {
  HostTensor t(DType::f32, {rows, cols});
  std::copy(v.begin(), v.end(), t.ptr<float>());
  return t;
}

const char* block_name(Fp8Block b) {
  if (b.rows <= 0 && b.cols <= 0) return "per-tensor";
  if (b.rows == 1 && b.cols <= 0) return "per-row";
  return b.rows == 1 ? "1x128" : "128x128";
}

}  // namespace

TEST(Fp8, ScaleShapes) {
  EXPECT_EQ(scale_shape(300, 200, kFp8PerTensor), Shape2(1, 1));
  EXPECT_EQ(scale_shape(300, 200, kFp8PerRow), Shape2(300, 1));
  EXPECT_EQ(scale_shape(300, 200, kFp8Block128), Shape2(3, 2));
  EXPECT_EQ(scale_shape(256, 256, kFp8Block128), Shape2(2, 2));
  EXPECT_EQ(scale_shape(3, 129, kFp8Group1x128), Shape2(3, 2));
  EXPECT_EQ(scale_shape(0, 0, kFp8PerTensor), Shape2(1, 1));
  expect_bad_argument([] { scale_shape(-1, 4, kFp8PerRow); }, "rows");
  expect_bad_argument([] { scale_shape(4, -1, kFp8PerRow); }, "cols");
}

// amax 896: scale = 896 / 448 = 2, so codes are e4m3(x / 2).
TEST(Fp8, HandComputedPerTensor) {
  // x/2 = 448 (0x7E), 0.5 (0x30), 1.0625 (tie 1 / 1.125 -> 1: 0x38), 1.1875 (tie -> 1.25: 0x3A), -1.5 (0xBC),
  //       0, 5e-4 (below half the smallest subnormal 2^-9 -> 0)
  Fp8 a = quantize(matrix(1, 7, {896, 1, 2.125f, 2.375f, -3, 0, 1e-3f}), kFp8PerTensor);
  EXPECT_EQ(a.scales.ptr<float>()[0], 2.0f);
  const uint8_t want[7] = {0x7E, 0x30, 0x38, 0x3A, 0xBC, 0x00, 0x00};
  for (int i = 0; i < 7; ++i) EXPECT_EQ(a.q.ptr<uint8_t>()[i], want[i]) << "element " << i;
  // Subnormal codes: x = 2^-7 -> x/2 = 2 * 2^-9 (0x02); x = 3 * 2^-9 -> 1.5 * 2^-9, a tie -> 2 * 2^-9 (0x02).
  Fp8 b = quantize(matrix(1, 3, {896.0f, std::ldexp(1.0f, -7), 3 * std::ldexp(1.0f, -9)}), kFp8PerTensor);
  EXPECT_EQ(b.q.ptr<uint8_t>()[1], 0x02);
  EXPECT_EQ(b.q.ptr<uint8_t>()[2], 0x02);
}

TEST(Fp8, ZeroBlockScaleIsOne) {
  std::vector<float> x(2 * 256, 0.0f);
  x[256 + 130] = -7.0f;  // row 1, second 1x128 group
  const Fp8 f = quantize(matrix(2, 256, x), kFp8Group1x128);
  const float* s = f.scales.ptr<float>();
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(s[1], 1.0f);
  EXPECT_EQ(s[2], 1.0f);
  EXPECT_EQ(s[3], 7.0f / 448.0f);
  for (int i = 0; i < 512; ++i) EXPECT_EQ(f.q.ptr<uint8_t>()[i], i == 256 + 130 ? 0xFE : 0x00) << i;
}

TEST(Fp8, NanPoisonsOnlyItsBlock) {
  std::vector<float> x(2 * 130, 1.0f);
  x[129] = std::numeric_limits<float>::quiet_NaN();  // row 0, the partial second block of width 2
  const Fp8 f = quantize(matrix(2, 130, x), kFp8Group1x128);
  EXPECT_TRUE(std::isnan(f.scales.ptr<float>()[1]));
  EXPECT_EQ(f.scales.ptr<float>()[0], 1.0f / 448.0f);
  EXPECT_EQ(f.scales.ptr<float>()[3], 1.0f / 448.0f);
  EXPECT_EQ(f.q.ptr<uint8_t>()[128] & 0x7F, 0x7F);
  EXPECT_EQ(f.q.ptr<uint8_t>()[129] & 0x7F, 0x7F);
  HostTensor out(DType::f32, {2, 130});
  fp8_dequantize(f.q.view(), kFp8Group1x128, f.scales.view(), out.view());
  for (int i = 0; i < 260; ++i) EXPECT_EQ(std::isnan(out.ptr<float>()[i]), i == 128 || i == 129) << i;
}

// For every block kind on a shape with partial edge blocks: the scale equals the block amax / 448
// (amax found here by scattering elements into their block, not by walking blocks), the block's
// largest element encodes to +-448, and each element is within E4M3 RNE error:
//   |x - x^| <= 2^-4 |x| when |x| / scale is an E4M3 normal (>= 2^-6), else 2^-10 * scale,
// plus 2^-21 |x| for the FP32 division x / scale and the decode multiply.
TEST(Fp8, RandomRoundTripEveryBlockKind) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_mag(-20.0f, 20.0f);
  const int64_t rows = 200, cols = 300;  // 128x128 edge blocks of 72 rows and 44 columns
  HostTensor x(DType::f32, {rows, cols});
  for (int64_t r = 0; r < rows; ++r) {
    const float mag = std::exp2(log_mag(rng));
    for (int64_t c = 0; c < cols; ++c) x.ptr<float>()[r * cols + c] = normal(rng) * mag;
  }
  for (Fp8Block block : {kFp8PerTensor, kFp8PerRow, kFp8Block128, kFp8Group1x128}) {
    SCOPED_TRACE(block_name(block));
    const Fp8 f = quantize(x, block);
    const auto [sr, sc] = scale_shape(rows, cols, block);
    const int64_t bh = block.rows > 0 ? block.rows : rows, bw = block.cols > 0 ? block.cols : cols;
    std::vector<float> amax(sr * sc, 0.0f);
    std::vector<int64_t> argmax(sr * sc, -1);
    for (int64_t i = 0; i < rows * cols; ++i) {
      const int64_t b = (i / cols / bh) * sc + (i % cols) / bw;
      const float a = std::fabs(x.ptr<float>()[i]);
      if (a > amax[b]) amax[b] = a, argmax[b] = i;
    }
    for (int64_t b = 0; b < sr * sc; ++b) {
      ASSERT_EQ(f.scales.ptr<float>()[b], amax[b] / 448.0f) << "block " << b;
      ASSERT_EQ(f.q.ptr<uint8_t>()[argmax[b]] & 0x7F, 0x7E) << "block " << b;
    }
    HostTensor out(DType::f32, {rows, cols});
    fp8_dequantize(f.q.view(), block, f.scales.view(), out.view());
    for (int64_t i = 0; i < rows * cols; ++i) {
      const double s = f.scales.ptr<float>()[(i / cols / bh) * sc + (i % cols) / bw];
      const double v = x.ptr<float>()[i], err = std::fabs(v - out.ptr<float>()[i]);
      const double rne = std::fabs(v) / s >= std::ldexp(1.0, -6) ? std::ldexp(std::fabs(v), -4) : std::ldexp(s, -10);
      ASSERT_LE(err, rne + std::ldexp(std::fabs(v), -21)) << "element " << i << " x=" << v << " scale=" << s;
    }
  }
}

TEST(Fp8, StaticQuantizeAndExactDecode) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 50.0f);
  HostTensor x(DType::bf16, {3, 70}), q(DType::f8_e4m3, {3, 70});
  for (int64_t i = 0; i < x.numel(); ++i) store_f32(x.ptr<uint8_t>(), DType::bf16, i, normal(rng));
  const float scale = 0.37f;
  fp8_quantize_static(x.view(), scale, q.view());
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(q.ptr<uint8_t>()[i], f32_to_e4m3(load_f32(x.ptr<uint8_t>(), DType::bf16, i) / scale)) << i;

  // Per-row decode: e4m3(q) * scale, one FP32 rounding (the product is exact in double).
  HostTensor scales(DType::f32, {3, 1}), out(DType::f32, {3, 70});
  for (int r = 0; r < 3; ++r) scales.ptr<float>()[r] = std::uniform_real_distribution<float>(1e-3f, 10.0f)(rng);
  fp8_dequantize(q.view(), kFp8PerRow, scales.view(), out.view());
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_EQ(out.ptr<float>()[i],
              static_cast<float>(double(e4m3_to_f32(q.ptr<uint8_t>()[i])) * scales.ptr<float>()[i / 70]));
}

TEST(Fp8, BadArguments) {
  HostTensor x(DType::f32, {200, 300}), q(DType::f8_e4m3, {200, 300}), s128(DType::f32, {2, 3});
  HostTensor out(DType::f32, {200, 300});
  const auto quant = [](const TensorView& xv, Fp8Block b, const TensorView& qv, const TensorView& sv) {
    return [=] { fp8_quantize(xv, b, qv, sv); };
  };
  TensorView on_gpu = x.view();
  on_gpu.device = Device::cuda(0);
  HostTensor floor_scales(DType::f32, {1, 2});  // floor(200/128), floor(300/128): the edge blocks are missing
  expect_bad_argument(quant(x.view(), kFp8Block128, q.view(), floor_scales.view()), "scales", {"[2, 3]", "[1, 2]"});
  expect_bad_argument(quant(HostTensor(DType::i32, {200, 300}).view(), kFp8Block128, q.view(), s128.view()), "x");
  expect_bad_argument(quant(on_gpu, kFp8Block128, q.view(), s128.view()), "x", {"host"});
  expect_bad_argument(quant(HostTensor(DType::f32, {60000}).view(), kFp8PerTensor, q.view(), s128.view()), "x");
  expect_bad_argument(quant(x.view(), kFp8Block128, HostTensor(DType::u8, {200, 300}).view(), s128.view()), "q",
                      {"f8_e4m3"});
  expect_bad_argument(quant(x.view(), kFp8Block128, HostTensor(DType::f8_e4m3, {300, 200}).view(), s128.view()), "q");
  expect_bad_argument(quant(x.view(), kFp8Block128, q.view(), HostTensor(DType::bf16, {2, 3}).view()), "scales");
  expect_bad_argument(quant(x.view(), kFp8PerRow, q.view(), s128.view()), "scales", {"[200, 1]"});

  for (float bad : {0.0f, -2.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    expect_bad_argument([&] { fp8_quantize_static(x.view(), bad, q.view()); }, "scale");
  expect_bad_argument([&] { fp8_quantize_static(x.view(), 1, HostTensor(DType::f8_e4m3, {200, 301}).view()); }, "q");

  HostTensor bf16_out(DType::bf16, {200, 300}), e5m2_q(DType::f8_e5m2, {200, 300});
  expect_bad_argument([&] { fp8_dequantize(q.view(), kFp8Block128, s128.view(), bf16_out.view()); }, "out", {"f32"});
  expect_bad_argument([&] { fp8_dequantize(q.view(), kFp8Block128, floor_scales.view(), out.view()); }, "scales");
  expect_bad_argument([&] { fp8_dequantize(e5m2_q.view(), kFp8Block128, s128.view(), out.view()); }, "q");
}
