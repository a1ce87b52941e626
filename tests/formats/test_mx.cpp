// MXFP8 / MXFP4: ceil-rule scales at power-of-two boundaries, hand-computed elements with RNE ties,
// zero/NaN/Inf blocks, error bounds and scale minimality on random data, exact decode, validation.
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

struct Mx {
  HostTensor elements, scales;
};

Mx allocate(Format fmt, int64_t rows, int64_t cols, DType scale_dtype = DType::ue8m0) {
  const bool fp4 = fmt == Format::mxfp4;
  return {HostTensor(fp4 ? DType::u8 : DType::f8_e4m3, {rows, fp4 ? cols / 2 : cols}),
          HostTensor(scale_dtype, {rows, cols / 32})};
}

Mx quantize(Format fmt, const std::vector<float>& v, int64_t rows, DType scale_dtype = DType::ue8m0) {
  const int64_t cols = static_cast<int64_t>(v.size()) / rows;
  HostTensor x(DType::f32, {rows, cols});
  std::copy(v.begin(), v.end(), x.ptr<float>());
  Mx m = allocate(fmt, rows, cols, scale_dtype);
  mx_quantize(fmt, x.view(), m.elements.view(), m.scales.view());
  return m;
}

uint8_t fp4_code(const HostTensor& packed, int64_t i) { return (packed.ptr<uint8_t>()[i / 2] >> (4 * (i % 2))) & 0xF; }

std::vector<float> dequantize(Format fmt, const Mx& m, int64_t rows, int64_t cols) {
  HostTensor out(DType::f32, {rows, cols});
  mx_dequantize(fmt, m.elements.view(), m.scales.view(), out.view());
  return {out.ptr<float>(), out.ptr<float>() + out.numel()};
}

double e2m1_half_step(double a) { return a < 2.0 ? 0.25 : a < 4.0 ? 0.5 : 1.0; }

}  // namespace

// The ceil rule: the smallest 2^X with amax / 2^X <= 448. Exactly 448 * 2^k keeps X = k; one ulp
// above moves to k + 1.
TEST(Mx, Mxfp8ScalesAtPowerOfTwoBoundaries) {
  std::vector<float> v(5 * 32, 0.0f);
  v[0] = 448.0f;                            // t = 1: X = 0 -> byte 127, element 448
  v[32] = std::nextafter(448.0f, 1000.0f);  // t one ulp above 1: X = 1 -> 128, element 224.00002 -> 224
  v[64] = 896.0f;                           // t = 2 exactly: X = 1 -> 128, element 448
  v[96] = 1.0f;                             // t = 1/448: X = ceil(-8.8) = -8 -> 119, element 2^8
  v[128 + 7] = -3.5f;                       // t = 2^-7 exactly: X = -7 -> 120, element -448
  const Mx m = quantize(Format::mxfp8, v, 1);
  const uint8_t want[5] = {127, 128, 128, 119, 120};
  for (int b = 0; b < 5; ++b) EXPECT_EQ(m.scales.ptr<uint8_t>()[b], want[b]) << "block " << b;
  const uint8_t* q = m.elements.ptr<uint8_t>();
  EXPECT_EQ(q[0], 0x7E);        // 448 = 1.75 * 2^8
  EXPECT_EQ(q[32], 0x76);       // 224 = 1.75 * 2^7
  EXPECT_EQ(q[64], 0x7E);
  EXPECT_EQ(q[96], 0x78);       // 256 = 2^8
  EXPECT_EQ(q[128 + 7], 0xFE);  // -448
}

TEST(Mx, Mxfp4HandComputedBlock) {
  // amax 12: t = 12 / 6 = 2 exactly -> X = 1 (byte 128); elements x / 2 with RNE ties.
  std::vector<float> v = {12, -5, 0.5f, 1.5f, 7, 10, -0.4f, 3};
  v.resize(32, 0.0f);
  // x/2 = 6 (7), -2.5 (tie -> -2: 0xC), .25 (tie -> 0), .75 (tie -> 1: 2), 3.5 (tie -> 4: 6), 5 (tie -> 4: 6),
  //       -0.2 (-> -0: 8), 1.5 (3)
  const uint8_t want[8] = {0x7, 0xC, 0x0, 0x2, 0x6, 0x6, 0x8, 0x3};
  const Mx m = quantize(Format::mxfp4, v, 1);
  EXPECT_EQ(m.scales.ptr<uint8_t>()[0], 128);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(fp4_code(m.elements, i), want[i]) << "element " << i;
  for (int i = 8; i < 32; ++i) EXPECT_EQ(fp4_code(m.elements, i), 0) << "element " << i;
  EXPECT_EQ(m.elements.ptr<uint8_t>()[0], 0xC7);  // element 0 low nibble, element 1 high
  // amax 6.5: t = 6.5 / 6 is not a power of two -> X = 1; 6.5 / 2 = 3.25 -> 3 (code 5).
  std::vector<float> w(32, 0.0f);
  w[31] = 6.5f;
  const Mx n = quantize(Format::mxfp4, w, 1);
  EXPECT_EQ(n.scales.ptr<uint8_t>()[0], 128);
  EXPECT_EQ(fp4_code(n.elements, 31), 0x5);
}

TEST(Mx, ZeroNanAndInfBlocks) {
  for (Format fmt : {Format::mxfp8, Format::mxfp4}) {
    SCOPED_TRACE(std::string(format_info(fmt).name));
    std::vector<float> v(4 * 32, 0.5f);
    std::fill(v.begin(), v.begin() + 32, 0.0f);             // block 0: all zero -> scale 1.0, zero codes
    v[32 + 9] = std::numeric_limits<float>::quiet_NaN();    // block 1: NaN
    v[64 + 3] = -std::numeric_limits<float>::infinity();    // block 2: Inf
    const Mx m = quantize(fmt, v, 1);
    EXPECT_EQ(m.scales.ptr<uint8_t>()[0], 127);
    EXPECT_EQ(m.scales.ptr<uint8_t>()[1], 255);
    EXPECT_EQ(m.scales.ptr<uint8_t>()[2], 255);
    EXPECT_NE(m.scales.ptr<uint8_t>()[3], 255);
    const std::vector<float> out = dequantize(fmt, m, 1, 128);
    for (int i = 0; i < 32; ++i) EXPECT_EQ(out[i], 0.0f) << i;
    for (int i = 32; i < 96; ++i) EXPECT_TRUE(std::isnan(out[i])) << i;
    for (int i = 96; i < 128; ++i) EXPECT_EQ(out[i], 0.5f) << i;
  }
}

// With the ceil rule nothing saturates: |x| / 2^X <= elem_max. Then
//   MXFP8: |x - x^| <= max(2^-4 |x|, 2^-10 * 2^X)   (E4M3 RNE: half ulp of 3 mantissa bits, or half the
//                                                    subnormal step 2^-9)
//   MXFP4: |x - x^| <= half_step(|x| / 2^X) * 2^X    (nearest E2M1 value)
// and 2^X is minimal: amax / 2^(X-1) > elem_max. The power-of-two scaling is exact, so there is no slack.
TEST(Mx, RandomRoundTripWithinBound) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> log_mag(-40.0f, 40.0f);
  const int64_t rows = 48, cols = 256;
  std::vector<float> v(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float mag = std::exp2(log_mag(rng));
    for (int64_t c = 0; c < cols; ++c) v[r * cols + c] = normal(rng) * mag;
  }
  for (Format fmt : {Format::mxfp8, Format::mxfp4}) {
    SCOPED_TRACE(std::string(format_info(fmt).name));
    const double elem_max = fmt == Format::mxfp4 ? 6.0 : 448.0;
    const Mx m = quantize(fmt, v, rows);
    const std::vector<float> out = dequantize(fmt, m, rows, cols);
    for (int64_t b = 0; b < rows * cols / 32; ++b) {
      const int x_exp = m.scales.ptr<uint8_t>()[b] - 127;
      double amax = 0.0;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(double(v[b * 32 + i])));
      EXPECT_LE(std::ldexp(amax, -x_exp), elem_max) << "block " << b;
      if (amax > 0) {  // minimal: half the scale would overflow the element range
        EXPECT_GT(std::ldexp(amax, -(x_exp - 1)), elem_max) << "block " << b;
      }
      for (int i = 0; i < 32; ++i) {
        const int64_t e = b * 32 + i;
        const double x = v[e], err = std::fabs(x - out[e]);
        const double bound = fmt == Format::mxfp8
                                 ? std::max(std::ldexp(std::fabs(x), -4), std::ldexp(1.0, x_exp - 10))
                                 : e2m1_half_step(std::ldexp(std::fabs(x), -x_exp)) * std::ldexp(1.0, x_exp);
        ASSERT_LE(err, bound) << "element " << e << " x=" << x << " X=" << x_exp;
      }
    }
  }
}

TEST(Mx, DequantizeIsExactAndScaleDtypesAgree) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  for (Format fmt : {Format::mxfp8, Format::mxfp4}) {
    SCOPED_TRACE(std::string(format_info(fmt).name));
    Mx m = allocate(fmt, 4, 128);
    Mx u = allocate(fmt, 4, 128, DType::u8);
    for (int64_t i = 0; i < m.elements.numel(); ++i) {
      uint8_t b = rng() & 0xFF;
      if (fmt == Format::mxfp8 && (b & 0x7F) == 0x7F) b = 0;  // keep E4M3 elements finite
      m.elements.ptr<uint8_t>()[i] = u.elements.ptr<uint8_t>()[i] = b;
    }
    for (int64_t i = 0; i < m.scales.numel(); ++i)
      m.scales.ptr<uint8_t>()[i] = u.scales.ptr<uint8_t>()[i] = 100 + rng() % 60;  // 2^-27 .. 2^32
    const std::vector<float> a = dequantize(fmt, m, 4, 128), b = dequantize(fmt, u, 4, 128);
    EXPECT_EQ(a, b);
    for (int64_t i = 0; i < 4 * 128; ++i) {
      const double elem = fmt == Format::mxfp4 ? e2m1_to_f32(fp4_code(m.elements, i))
                                               : e4m3_to_f32(m.elements.ptr<uint8_t>()[i]);
      ASSERT_EQ(a[i], std::ldexp(elem, m.scales.ptr<uint8_t>()[i / 32] - 127)) << i;
    }
  }
}

TEST(Mx, HalfInputsMatchF32AndScaleDtypeU8) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 100.0f);
  for (DType dt : {DType::bf16, DType::f16}) {
    HostTensor h(dt, {2, 64}), f(DType::f32, {2, 64});
    for (int64_t i = 0; i < h.numel(); ++i) {
      store_f32(h.ptr<uint8_t>(), dt, i, normal(rng));
      f.ptr<float>()[i] = load_f32(h.ptr<uint8_t>(), dt, i);
    }
    for (Format fmt : {Format::mxfp8, Format::mxfp4}) {
      Mx a = allocate(fmt, 2, 64), b = allocate(fmt, 2, 64, DType::u8);
      mx_quantize(fmt, h.view(), a.elements.view(), a.scales.view());
      mx_quantize(fmt, f.view(), b.elements.view(), b.scales.view());
      EXPECT_EQ(a.elements.bytes(), b.elements.bytes());
      EXPECT_EQ(a.scales.bytes(), b.scales.bytes());
    }
  }
}

TEST(Mx, BadArguments) {
  HostTensor x(DType::f32, {2, 64}), out(DType::f32, {2, 64});
  Mx m8 = allocate(Format::mxfp8, 2, 64), m4 = allocate(Format::mxfp4, 2, 64);
  const auto q = [](Format f, const TensorView& xv, const TensorView& e, const TensorView& s) {
    return [=] { mx_quantize(f, xv, e, s); };
  };
  const auto d = [](Format f, const TensorView& e, const TensorView& s, const TensorView& o) {
    return [=] { mx_dequantize(f, e, s, o); };
  };
  HostTensor x48(DType::f32, {2, 48}), xu8(DType::u8, {2, 64}), x1(DType::f32, {64});
  TensorView on_gpu = x.view();
  on_gpu.device = Device::cuda(0);
  HostTensor f32_scales(DType::f32, {2, 2}), wide_scales(DType::ue8m0, {2, 4});

  expect_bad_argument(q(Format::nvfp4, x.view(), m8.elements.view(), m8.scales.view()), "format", {"nvfp4"});
  expect_bad_argument(q(Format::mxfp8, x48.view(), m8.elements.view(), m8.scales.view()), "x", {"32", "48"});
  expect_bad_argument(q(Format::mxfp8, xu8.view(), m8.elements.view(), m8.scales.view()), "x", {"u8"});
  expect_bad_argument(q(Format::mxfp8, x1.view(), m8.elements.view(), m8.scales.view()), "x");
  expect_bad_argument(q(Format::mxfp8, on_gpu, m8.elements.view(), m8.scales.view()), "x", {"host"});
  expect_bad_argument(q(Format::mxfp8, x.view(), m4.elements.view(), m8.scales.view()), "elements", {"f8_e4m3"});
  expect_bad_argument(q(Format::mxfp4, x.view(), m8.elements.view(), m4.scales.view()), "elements");
  expect_bad_argument(q(Format::mxfp4, x.view(), HostTensor(DType::u8, {2, 64}).view(), m4.scales.view()), "elements",
                      {"[2, 32]", "[2, 64]"});
  expect_bad_argument(q(Format::mxfp8, x.view(), m8.elements.view(), f32_scales.view()), "scales", {"ue8m0", "f32"});
  expect_bad_argument(q(Format::mxfp8, x.view(), m8.elements.view(), wide_scales.view()), "scales", {"[2, 2]"});

  expect_bad_argument(d(Format::fp8_block, m8.elements.view(), m8.scales.view(), out.view()), "format");
  expect_bad_argument(d(Format::mxfp8, m8.elements.view(), m8.scales.view(), HostTensor(DType::f16, {2, 64}).view()),
                      "out", {"f32"});
  expect_bad_argument(d(Format::mxfp8, m8.elements.view(), m8.scales.view(), HostTensor(DType::f32, {2, 40}).view()),
                      "out", {"32", "40"});
  expect_bad_argument(d(Format::mxfp4, m8.elements.view(), m4.scales.view(), out.view()), "elements");
  expect_bad_argument(d(Format::mxfp4, m4.elements.view(), wide_scales.view(), out.view()), "scales");
}
