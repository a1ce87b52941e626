// NVFP4 quantizer/decoder: hand-computed blocks (scale and element RNE ties), zero and NaN blocks,
// a derived error bound on random data, decode exactness, and argument validation.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "support/errors.h"

using namespace b12x;
using b12x::test::expect_bad_argument;

namespace {

struct Quantized {
  HostTensor packed, scales;
};

Quantized quantize(const HostTensor& x, float g) {
  Quantized q{HostTensor(DType::u8, {x.view().size(0), x.view().size(1) / 2}),
              HostTensor(DType::f8_e4m3, {x.view().size(0), x.view().size(1) / 16})};
  nvfp4_quantize(x.view(), g, q.packed.view(), q.scales.view());
  return q;
}

HostTensor matrix(int64_t rows, int64_t cols, const std::vector<float>& v) {
  HostTensor t(DType::f32, {rows, cols});
  std::copy(v.begin(), v.end(), t.ptr<float>());
  return t;
}

uint8_t code_at(const HostTensor& packed, int64_t i) { return (packed.ptr<uint8_t>()[i / 2] >> (4 * (i % 2))) & 0xF; }

// Half the distance between neighbouring E2M1 values at magnitude a (steps 0.5, 1, 2 below 2, 4, 6).
double e2m1_half_step(double a) { return a < 2.0 ? 0.25 : a < 4.0 ? 0.5 : 1.0; }

}  // namespace

TEST(Nvfp4, GlobalScale) {
  EXPECT_EQ(nvfp4_global_scale(2688.0f), 1.0f);
  EXPECT_EQ(nvfp4_global_scale(1.0f), 2688.0f);
  EXPECT_EQ(nvfp4_global_scale(0.0f), 1.0f);
  expect_bad_argument([] { nvfp4_global_scale(-1.0f); }, "amax");
}

// amax 12, g 1: sb = e4m3(12 / 6) = 2.0 (0x40), elements x / 2 with every kind of E2M1 tie.
TEST(Nvfp4, HandComputedBlock) {
  const std::vector<float> x = {12, -12, 1, 0.5f, 1.5f, 2.5f, 3.5f, 5, 7, 10, -3, 0, -0.4f, 8, 9, 11};
  // x/2 = 6, -6, .5, .25 (tie->0), .75 (tie->1), 1.25 (tie->1), 1.75 (tie->2), 2.5 (tie->2), 3.5 (tie->4),
  //       5 (tie->4), -1.5, 0, -0.2 (-> -0, code 8), 4, 4.5 (->4), 5.5 (->6)
  const uint8_t want_codes[16] = {0x7, 0xF, 0x1, 0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6, 0xB, 0x0, 0x8, 0x6, 0x6, 0x7};
  const uint8_t want_bytes[8] = {0xF7, 0x01, 0x22, 0x44, 0x66, 0x0B, 0x68, 0x76};
  const Quantized q = quantize(matrix(1, 16, x), 1.0f);
  EXPECT_EQ(q.scales.ptr<uint8_t>()[0], 0x40);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(code_at(q.packed, i), want_codes[i]) << "element " << i;
  for (int i = 0; i < 8; ++i) EXPECT_EQ(q.packed.ptr<uint8_t>()[i], want_bytes[i]) << "byte " << i;
}

// The block scale itself rounds RNE (ties to even mantissa), and elements above 6 * sb saturate.
TEST(Nvfp4, ScaleTiesAndGlobalScaleOrder) {
  std::vector<float> x(48, 0.0f);
  x[0] = 6.375f;   // 6.375 / 6 = 1.0625: tie between 1.0 and 1.125 -> 1.0 (0x38); 6.375 / 1 saturates to 6
  x[16] = 7.125f;  // 1.1875: tie between 1.125 and 1.25 -> 1.25 (0x3A); 7.125 / 1.25 = 5.7 -> 6
  x[17] = 3.125f;  // 3.125 / 1.25 = 2.5: tie -> 2 (code 4)
  x[32] = 3.0f;    // with g = 2: (3 * 2) / 6 = 1 -> 0x38; element (1.5 * 2) / 1 = 3 -> code 5
  x[33] = -1.5f;
  const Quantized a = quantize(matrix(1, 48, x), 1.0f);
  EXPECT_EQ(a.scales.ptr<uint8_t>()[0], 0x38);
  EXPECT_EQ(code_at(a.packed, 0), 0x7);
  EXPECT_EQ(a.scales.ptr<uint8_t>()[1], 0x3A);
  EXPECT_EQ(code_at(a.packed, 16), 0x7);
  EXPECT_EQ(code_at(a.packed, 17), 0x4);
  const Quantized b = quantize(matrix(1, 48, x), 2.0f);
  EXPECT_EQ(b.scales.ptr<uint8_t>()[2], 0x38);
  EXPECT_EQ(code_at(b.packed, 32), 0x7);   // 3 * 2 / 1 = 6
  EXPECT_EQ(code_at(b.packed, 33), 0xD);   // -1.5 * 2 = -3
}

TEST(Nvfp4, ZeroAndUnderflowingBlocks) {
  std::vector<float> x(32, 0.0f);
  for (int i = 16; i < 32; ++i) x[i] = (i % 2 ? -1e-4f : 1e-4f);  // (1e-4 * 1) / 6 < 2^-10: sb rounds to 0
  const Quantized q = quantize(matrix(1, 32, x), 1.0f);
  EXPECT_EQ(q.scales.ptr<uint8_t>()[0], 0x00);
  EXPECT_EQ(q.scales.ptr<uint8_t>()[1], 0x00);
  for (int i = 0; i < 16; ++i) EXPECT_EQ(q.packed.ptr<uint8_t>()[i], 0x00) << "byte " << i;
  HostTensor out(DType::f32, {1, 32});
  nvfp4_dequantize(q.packed.view(), q.scales.view(), 1.0f, out.view());
  for (int i = 0; i < 32; ++i) EXPECT_EQ(out.ptr<float>()[i], 0.0f);
}

TEST(Nvfp4, NanPoisonsOnlyItsBlock) {
  std::vector<float> x(32, 1.0f);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  const Quantized q = quantize(matrix(1, 32, x), 1.0f);
  EXPECT_EQ(q.scales.ptr<uint8_t>()[0], 0x7F);
  EXPECT_EQ(q.scales.ptr<uint8_t>()[1], f32_to_e4m3(1.0f / 6.0f));
  HostTensor out(DType::f32, {1, 32});
  nvfp4_dequantize(q.packed.view(), q.scales.view(), 1.0f, out.view());
  for (int i = 0; i < 16; ++i) EXPECT_TRUE(std::isnan(out.ptr<float>()[i])) << i;
  for (int i = 16; i < 32; ++i) EXPECT_TRUE(std::isfinite(out.ptr<float>()[i])) << i;
}

// Inf is not NaN: the scale saturates to 448 (like cvt.rn.satfinite) and Inf itself to code 7.
TEST(Nvfp4, InfSaturates) {
  std::vector<float> x(16, 1.0f);
  x[3] = -std::numeric_limits<float>::infinity();
  const Quantized q = quantize(matrix(1, 16, x), 1.0f);
  EXPECT_EQ(q.scales.ptr<uint8_t>()[0], 0x7E);
  EXPECT_EQ(code_at(q.packed, 3), 0xF);
}

// Error bound, in the g-scaled domain y = x * g (so decode with scale2 = 1 is exact: D = e2m1 * s).
// With t = y / s the quantizer picks e2m1(t) (RNE, saturating at 6), so
//   |y - D| <= s * half_step(|t|)          (nearest E2M1 value; half_step = 0.25 / 0.5 / 1)
//            + max(0, |y| - 6 s)            (saturation when the rounded scale s fell below amax * g / 6)
//            + FP32 slack on y and t        (x * g and y / s each round once: 2^-22 |y| covers both).
// Saturation needs s < amax * g / 6; when such an s is an E4M3 normal (>= 2^-6) it is within 2^-4
// relative, so the saturation term is at most amax * g * (1 - 1 / (1 + 2^-4)) = amax * g / 17.
TEST(Nvfp4, RandomRoundTripWithinBound) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_mag(-12.0f, 6.0f);  // rows spanning E4M3 subnormal scales
  const int64_t rows = 64, cols = 256;
  HostTensor x(DType::f32, {rows, cols});
  float amax = 0.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float mag = std::exp2(log_mag(rng));
    for (int64_t c = 0; c < cols; ++c) {
      const float v = normal(rng) * mag;
      x.ptr<float>()[r * cols + c] = v;
      amax = std::max(amax, std::fabs(v));
    }
  }
  const float g = nvfp4_global_scale(amax);
  const Quantized q = quantize(x, g);
  HostTensor out(DType::f32, {rows, cols});
  nvfp4_dequantize(q.packed.view(), q.scales.view(), 1.0f, out.view());

  for (int64_t b = 0; b < rows * cols / 16; ++b) {
    double block_amax = 0.0;
    for (int i = 0; i < 16; ++i) block_amax = std::max(block_amax, std::fabs(double(x.ptr<float>()[b * 16 + i]) * g));
    const double ideal = block_amax / 6.0, s = e4m3_to_f32(q.scales.ptr<uint8_t>()[b]);
    // E4M3 RNE: half an ulp, <= 2^-4 relative for normals, 2^-10 (half the subnormal step) below 2^-6.
    const double half_ulp = std::max(std::ldexp(ideal, -4), std::ldexp(1.0, -10));
    EXPECT_LE(std::fabs(s - ideal), half_ulp * (1 + 1e-6)) << "block " << b;
    for (int i = 0; i < 16; ++i) {
      const int64_t e = b * 16 + i;
      const double y = double(x.ptr<float>()[e]) * g, d = out.ptr<float>()[e];
      double bound = std::ldexp(std::fabs(y), -22);
      if (s == 0.0) {
        bound += std::fabs(y);  // the whole block flushes to zero
      } else {
        const double t = std::fabs(y) / s, saturation = std::max(0.0, std::fabs(y) - 6 * s);
        bound += s * e2m1_half_step(t * (1 + 1e-6)) + saturation;
        if (s >= std::ldexp(1.0, -6)) {
          EXPECT_LE(saturation, block_amax / 17 * (1 + 1e-6)) << "element " << e;
        }
      }
      ASSERT_LE(std::fabs(y - d), bound) << "element " << e << " x=" << x.ptr<float>()[e] << " scale=" << s;
    }
  }
}

// e2m1 * e4m3 is exact in FP32, and the tensor scale rounds exactly once.
TEST(Nvfp4, DequantizeIsExact) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t rows = 8, cols = 128;
  HostTensor packed(DType::u8, {rows, cols / 2}), scales(DType::f8_e4m3, {rows, cols / 16});
  for (int64_t i = 0; i < packed.numel(); ++i) packed.ptr<uint8_t>()[i] = rng() & 0xFF;
  for (int64_t i = 0; i < scales.numel(); ++i) scales.ptr<uint8_t>()[i] = rng() % 0x7F;  // positive, not NaN
  const float scale2 = std::uniform_real_distribution<float>(1e-4f, 1e-2f)(rng);
  HostTensor plain(DType::f32, {rows, cols}), scaled(DType::f32, {rows, cols});
  nvfp4_dequantize(packed.view(), scales.view(), 1.0f, plain.view());
  nvfp4_dequantize(packed.view(), scales.view(), scale2, scaled.view());
  for (int64_t i = 0; i < rows * cols; ++i) {
    const double exact = double(e2m1_to_f32(code_at(packed, i))) * e4m3_to_f32(scales.ptr<uint8_t>()[i / 16]);
    ASSERT_EQ(plain.ptr<float>()[i], exact) << i;
    ASSERT_EQ(scaled.ptr<float>()[i], static_cast<float>(exact * scale2)) << i;  // exact in double, one rounding
  }
}

// bf16/f16 inputs are read exactly, so they quantize like the same values in f32.
TEST(Nvfp4, HalfInputsMatchF32) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (DType dt : {DType::bf16, DType::f16}) {
    HostTensor h(dt, {4, 64}), f(DType::f32, {4, 64});
    for (int64_t i = 0; i < h.numel(); ++i) {
      store_f32(h.ptr<uint8_t>(), dt, i, normal(rng));
      f.ptr<float>()[i] = load_f32(h.ptr<uint8_t>(), dt, i);
    }
    const Quantized a = quantize(h, 448.0f), b = quantize(f, 448.0f);
    EXPECT_EQ(a.packed.bytes(), b.packed.bytes()) << dtype_name(dt);
    EXPECT_EQ(a.scales.bytes(), b.scales.bytes()) << dtype_name(dt);
  }
}

TEST(Nvfp4, BadArguments) {
  HostTensor x(DType::f32, {4, 32}), packed(DType::u8, {4, 16}), scales(DType::f8_e4m3, {4, 2});
  HostTensor out(DType::f32, {4, 32});
  const auto q = [&](const TensorView& xv, float g, const TensorView& p, const TensorView& s) {
    return [=] { nvfp4_quantize(xv, g, p, s); };
  };
  HostTensor x20(DType::f32, {4, 20}), xi(DType::i32, {4, 32}), x1(DType::f32, {128});
  TensorView on_gpu = x.view();
  on_gpu.device = Device::cuda(0);
  TensorView strided = x.view();
  strided.shape[1] = 16;
  strided.strides[0] = 32;  // every other half-row: not contiguous
  HostTensor sp(DType::u8, {4, 2}), wrong_packed(DType::u8, {4, 32});

  expect_bad_argument(q(x20.view(), 1, packed.view(), scales.view()), "x", {"16", "20"});
  expect_bad_argument(q(xi.view(), 1, packed.view(), scales.view()), "x", {"i32"});
  expect_bad_argument(q(x1.view(), 1, packed.view(), scales.view()), "x");
  expect_bad_argument(q(on_gpu, 1, packed.view(), scales.view()), "x", {"host"});
  expect_bad_argument(q(strided, 1, HostTensor(DType::u8, {4, 8}).view(), HostTensor(DType::f8_e4m3, {4, 1}).view()),
                      "x", {"contiguous"});
  expect_bad_argument(q(x.view(), 1, wrong_packed.view(), scales.view()), "packed", {"[4, 16]", "[4, 32]"});
  expect_bad_argument(q(x.view(), 1, scales.view(), scales.view()), "packed", {"u8"});
  expect_bad_argument(q(x.view(), 1, packed.view(), sp.view()), "scales", {"f8_e4m3", "u8"});
  expect_bad_argument(q(x.view(), 1, packed.view(), HostTensor(DType::f8_e4m3, {4, 4}).view()), "scales", {"[4, 2]"});
  for (float g : {0.0f, -1.0f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()})
    expect_bad_argument(q(x.view(), g, packed.view(), scales.view()), "global_scale");

  const auto d = [&](const TensorView& p, const TensorView& s, float s2, const TensorView& o) {
    return [=] { nvfp4_dequantize(p, s, s2, o); };
  };
  expect_bad_argument(d(packed.view(), scales.view(), 1, HostTensor(DType::bf16, {4, 32}).view()), "out", {"f32"});
  expect_bad_argument(d(packed.view(), scales.view(), 1, HostTensor(DType::f32, {4, 24}).view()), "out", {"16", "24"});
  expect_bad_argument(d(wrong_packed.view(), scales.view(), 1, out.view()), "packed");
  expect_bad_argument(d(packed.view(), sp.view(), 1, out.view()), "scales");
  expect_bad_argument(d(packed.view(), scales.view(), std::numeric_limits<float>::quiet_NaN(), out.view()), "scale2");
}
