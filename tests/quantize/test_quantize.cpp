// quantize.activations without a GPU:
//  * QuantizeEncode: the portable device encoders (src/device/encode.cuh, compiled here by the host
//    compiler) equal the host codecs of scalar.h on every BF16 pattern, patterns around each rounding
//    boundary and random FP32 bits; the kernel's per-vector helpers equal the host formulas.
//  * QuantizeCompile: the kernel specs cover every mode x x dtype x scale layout (NVRTC compiles each
//    in tests/runtime/test_jit.cpp: Jit.EveryRegisteredKernelCompiles); plan and bind reject bad
//    arguments, naming them, before touching CUDA.
//  * QuantizeHost: reference_quantize's layouts, and the sign rule of NaN codes of the host spec.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/quantize/quantize.h"
#include "quantize/kernels/quantize.cuh"
#include "support/bits.h"
#include "support/errors.h"
#include "support/fake_device.h"
#include "support/weights.h"

namespace b12x {
namespace {

using namespace b12x::test;
namespace dev = b12x::device;

// Every BF16 pattern with a few low halves (zero, tie-ish, all ones), then 2^22 random patterns.
std::vector<uint32_t> sample_floats(uint64_t seed) {
  std::vector<uint32_t> v;
  for (uint32_t hi = 0; hi < 65536; ++hi)
    for (uint32_t lo : {0x0000u, 0x0001u, 0x7FFFu, 0x8000u, 0x8001u, 0xFFFFu}) v.push_back((hi << 16) | lo);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < (1 << 22); ++i) v.push_back(static_cast<uint32_t>(rng()));
  return v;
}

// ---------------------------------------------------------------------------------------------
// QuantizeEncode

TEST(QuantizeEncode, E4M3EncoderEqualsHost) {
  int64_t bad = 0;
  uint32_t first = 0;
  for (uint32_t u : sample_floats(1)) {
    const float x = float_of(u);
    if (dev::f32_to_e4m3_sat(x) != f32_to_e4m3(x) && bad++ == 0) first = u;
  }
  EXPECT_EQ(bad, 0) << "first at bits 0x" << std::hex << first;
  // Around every E4M3 value (and its midpoints) exactly: value, midpoint, one ulp either side.
  for (int c = 0; c < 0x7F; ++c) {
    const float v = e4m3_to_f32(static_cast<uint8_t>(c)), next = c < 0x7E ? e4m3_to_f32(c + 1) : 480.0f;
    const float mid = (v + next) / 2;
    for (float x : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f), -mid})
      EXPECT_EQ(dev::f32_to_e4m3_sat(x), f32_to_e4m3(x)) << x;
  }
  EXPECT_EQ(dev::pack_e4m3x2(1.0f, -448.0f), 0x38u | (0xFEu << 8));
}

TEST(QuantizeEncode, E2M1EncoderEqualsHost) {
  int64_t bad = 0;
  uint32_t first = 0;
  for (uint32_t u : sample_floats(2)) {
    const float x = float_of(u);
    if (dev::f32_to_e2m1_sat(x) != f32_to_e2m1(x) && bad++ == 0) first = u;
  }
  EXPECT_EQ(bad, 0) << "first at bits 0x" << std::hex << first;
  for (float t : {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 6.0f, 7.0f})
    for (float x : {t, std::nextafter(t, 0.0f), std::nextafter(t, 1e9f), -t})
      EXPECT_EQ(dev::f32_to_e2m1_sat(x), f32_to_e2m1(x)) << x;
}

TEST(QuantizeEncode, Ue8m0CeilScaleAndInverseEqualHost) {
  int64_t bad = 0;
  for (uint32_t u : sample_floats(3)) {
    const float amax = std::fabs(float_of(u));
    for (float elem_max : {448.0f, 6.0f}) bad += dev::ue8m0_ceil_scale(amax, elem_max) != ue8m0_ceil_scale(amax, elem_max);
  }
  EXPECT_EQ(bad, 0);
  std::mt19937_64 rng(4);
  for (unsigned s = 0; s < 256; ++s) {
    for (int i = 0; i < 2000; ++i) {
      const float x = float_of(static_cast<uint32_t>(rng()));
      if (std::isnan(x)) continue;
      const float want = std::ldexp(x, 127 - static_cast<int>(s));
      EXPECT_EQ(bits_of(dev::mul_rn(x, dev::ue8m0_inverse(s))), bits_of(want)) << "s " << s << " x " << x;
    }
  }
}

TEST(QuantizeEncode, AmaxBitsFollowTheHostBlockAmax) {
  EXPECT_EQ(bits_of(dev::amax_from_abs_bits(bits_of(3.5f))), bits_of(3.5f));
  EXPECT_EQ(bits_of(dev::amax_from_abs_bits(0x7F800000u)), 0x7F800000u);  // Inf stays Inf
  EXPECT_EQ(bits_of(dev::amax_from_abs_bits(0x7F800001u)), 0x7FC00000u);  // any NaN: the host's quiet NaN
  EXPECT_EQ(bits_of(dev::amax_from_abs_bits(0x7FFFFFFFu)), 0x7FC00000u);
  EXPECT_EQ(bits_of(quant::fp8_block_scale(0.0f)), bits_of(1.0f));
  EXPECT_EQ(bits_of(quant::fp8_block_scale(448.0f)), bits_of(1.0f));
  EXPECT_EQ(bits_of(quant::fp8_block_scale(float_of(0x7FC00000u))), 0x7FC00000u);
}

TEST(QuantizeEncode, SwizzledOffsetEqualsHost) {
  for (int64_t cols_padded : {4, 8, 60})
    for (int64_t r = 0; r < 300; ++r)
      for (int64_t c = 0; c < cols_padded; ++c)
        ASSERT_EQ(quant::swizzled_offset(r, c, cols_padded), swizzled_scale_offset(r, c, cols_padded));
}

TEST(QuantizeEncode, E2M1IntegerCodeEqualsTheCompareChainOnAllOfZeroToSixteen) {
  int64_t bad = 0;
  uint32_t first = 0;
  for (uint32_t u = 0; u < 0x41800000u; ++u)  // every FP32 in [0, 16)
    if (dev::e2m1_code_nonneg(float_of(u)) != dev::f32_to_e2m1_sat(float_of(u)) && bad++ == 0) first = u;
  EXPECT_EQ(bad, 0) << "first at bits 0x" << std::hex << first;
}

// b with these mantissas (all ones, one, alternating ...) and random ones.
std::vector<float> divisors(std::mt19937_64& rng, int random_count, int exponent) {
  std::vector<float> b;
  for (uint32_t m : {0x7FFFFFu, 0u, 1u, 0x7FFFFEu, 0x400000u, 0x3FFFFFu, 0x555555u, 0x2AAAAAu, 0x600000u})
    b.push_back(float_of((static_cast<uint32_t>(exponent + 127) << 23) | m));
  for (int i = 0; i < random_count; ++i)
    b.push_back(float_of((static_cast<uint32_t>(exponent + 127) << 23) | (static_cast<uint32_t>(rng()) & 0x7FFFFFu)));
  return b;
}

TEST(QuantizeEncode, DivByRcpIsCorrectlyRoundedForEveryMantissaOfA) {
  // The quotient's rounding depends on the two mantissas only (away from under/overflow): every a
  // mantissa against these b (the GPU test sweeps b too).
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  int64_t bad = 0;
  for (float b : divisors(rng, 7, 0)) {
    const float r = dev::rcp_rn(b);
    for (uint32_t m = 0; m < (1u << 23); ++m) {
      const float a = float_of(0x3F800000u | m);
      bad += bits_of(dev::div_by_rcp(a, b, r)) != bits_of(a / b);
    }
  }
  EXPECT_EQ(bad, 0);
}

TEST(QuantizeEncode, DivByRcpHoldsAcrossItsRange) {
  // Random a, b over the whole documented range: exact, or (quotient < 2^-13) the same E4M3 code.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> eb(-90, 89), ea(-30, 10);
  int64_t bad = 0, coded = 0;
  for (int i = 0; i < 4000000; ++i) {
    const float b = std::ldexp(1.0f + static_cast<float>(rng() & 0xFFFFFF) / 16777216.0f, eb(rng));
    const float a = std::min(std::ldexp(1.0f + static_cast<float>(rng() & 0xFFFFFF) / 16777216.0f, ea(rng)) * b,
                             b * 1024.0f);
    const float want = a / b, got = dev::div_by_rcp(a, b, dev::rcp_rn(b));
    if (bits_of(got) == bits_of(want)) continue;
    ++coded;
    bad += !(want < 0x1p-13f) || f32_to_e4m3(got) != f32_to_e4m3(want);
  }
  EXPECT_EQ(bad, 0) << coded << " inexact quotients";
  for (float b : {dev::kDivByRcpMin, dev::kDivByRcpMax, std::nextafter(dev::kDivByRcpMin, 1.0f)})
    for (float a : {0.0f, 1e-45f, 1e-38f, b * 1e-4f, b * 0.75f, b * 448.0f, b * 1024.0f}) {
      const float got = dev::div_by_rcp(a, b, dev::rcp_rn(b));
      EXPECT_EQ(f32_to_e4m3(got), f32_to_e4m3(a / b)) << a << " / " << b;
      EXPECT_EQ(f32_to_e2m1(got), f32_to_e2m1(a / b)) << a << " / " << b;
    }
  EXPECT_TRUE(dev::div_by_rcp_ok(1.0f));
  EXPECT_FALSE(dev::div_by_rcp_ok(std::nextafter(dev::kDivByRcpMin, 0.0f)));
  EXPECT_FALSE(dev::div_by_rcp_ok(std::nextafter(dev::kDivByRcpMax, 1e30f)));
  EXPECT_FALSE(dev::div_by_rcp_ok(std::numeric_limits<float>::quiet_NaN()));
}

// 8 random elements with specials.
void random_vector(std::mt19937_64& rng, float (&f)[8], float spread) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float odd[] = {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), -0.0f, 0.0f,
                       std::numeric_limits<float>::quiet_NaN(), 1e-40f};
  for (float& v : f) v = rng() % 16 == 0 ? odd[rng() % 6] : normal(rng) * spread;
}

template <int kIn>
quant::Raw<kIn> raw_of(const float (&f)[8]) {
  quant::Raw<kIn> r;
  uint32_t w[8];
  for (int i = 0; i < 8; ++i) w[i] = bits_of(f[i]);
  if constexpr (kIn == quant::kInF32) {
    r.w[0] = {w[0], w[1], w[2], w[3]};
    r.w[1] = {w[4], w[5], w[6], w[7]};
  } else {  // BF16: the top halves (the test's values are BF16-exact)
    r.w[0] = {(w[0] >> 16) | (w[1] & 0xFFFF0000u), (w[2] >> 16) | (w[3] & 0xFFFF0000u),
              (w[4] >> 16) | (w[5] & 0xFFFF0000u), (w[6] >> 16) | (w[7] & 0xFFFF0000u)};
  }
  return r;
}

// The host's fp8 encoder (fp8.cpp encode_scaled: e4m3(copysign(x / s, x))) on elements first..first+3.
uint32_t host_e4m3_word(const float (&f)[8], float s, int first) {
  uint32_t w = 0;
  for (int i = 0; i < 4; ++i) w |= uint32_t{f32_to_e4m3(std::copysign(f[first + i] / s, f[first + i]))} << (8 * i);
  return w;
}

template <int kIn>
void check_fast_encoders(std::mt19937_64& rng, int64_t& bad_e4m3, int64_t& bad_e2m1, int64_t& bad_amax) {
  float f[8];
  random_vector(rng, f, std::ldexp(1.0f, static_cast<int>(rng() % 60) - 30));
  if (kIn == quant::kInBf16)
    for (float& v : f) v = float_of(bits_of(v) & 0xFFFF0000u);
  const quant::Raw<kIn> raw = raw_of<kIn>(f);
  float g8[8];
  const uint32_t amax_bits = quant::amax_finish<kIn>(quant::to_f32<kIn>(raw, g8));
  float amax = 0.0f;
  for (int i = 0; i < 8; ++i) {
    bad_amax += bits_of(g8[i]) != bits_of(f[i]);
    amax = std::isnan(f[i]) || std::isnan(amax) ? std::numeric_limits<float>::quiet_NaN() : std::max(amax, std::fabs(f[i]));
  }
  bad_amax += bits_of(dev::amax_from_abs_bits(amax_bits)) != bits_of(std::isnan(amax) ? float_of(0x7FC00000u) : amax);
  // fp8_tensor: any scale in range, clamped. fp8_block: b = amax / 448 of NaN-free data.
  const float s = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(rng() % 60) - 35);
  unsigned lo, hi, lo2, hi2;
  quant::e4m3_divided<kIn>(raw, f, s, lo, hi);
  quant::e4m3_by_rcp<kIn, true>(raw, f, s, dev::rcp_rn(s), s * 512.0f, lo2, hi2);
  bad_e4m3 += lo != host_e4m3_word(f, s, 0) || hi != host_e4m3_word(f, s, 4);
  bad_e4m3 += lo != lo2 || hi != hi2;
  const float b = quant::fp8_block_scale(amax);
  if (!std::isnan(amax) && dev::div_by_rcp_ok(b)) {
    quant::e4m3_divided<kIn>(raw, f, b, lo, hi);
    quant::e4m3_by_rcp<kIn, false>(raw, f, b, dev::rcp_rn(b), 0.0f, lo2, hi2);
    bad_e4m3 += lo != lo2 || hi != hi2;
  }
  // nvfp4: g > 0 finite, sb from the block's amax as the kernel's fast path computes it.
  const float g = std::ldexp(1.0f + static_cast<float>(rng() % 1000) / 1000.0f, static_cast<int>(rng() % 40) - 20);
  const float amax_g = amax * g;
  if (amax_g <= 2688.0f) {
    const float t = amax_g < 0x1p-100f ? 0.0f : dev::div_amax(amax_g, 6.0f);
    const float sb = e4m3_to_f32(static_cast<uint8_t>(dev::pack_e4m3x2_no_nan(t, 0.0f) & 0xFF));
    EXPECT_EQ(bits_of(sb), bits_of(e4m3_to_f32(f32_to_e4m3(amax_g / 6.0f)))) << amax_g;
    bad_e2m1 += quant::e2m1_divided(f, g, sb) != quant::e2m1_by_rcp<kIn>(raw, f, g, sb, dev::rcp_rn(sb));
    // A normal scale: the kernel's loop without saturation (every quotient below 6.4).
    if (sb >= 0x1p-6f)
      bad_e2m1 += quant::e2m1_divided(f, g, sb) != quant::e2m1_by_rcp<kIn, false>(raw, f, g, sb, dev::rcp_rn(sb));
  }
}

TEST(QuantizeEncode, FastEncodersEqualTheDividingOnes) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  int64_t bad_e4m3 = 0, bad_e2m1 = 0, bad_amax = 0;
  for (int i = 0; i < 200000; ++i) {
    check_fast_encoders<quant::kInF32>(rng, bad_e4m3, bad_e2m1, bad_amax);
    check_fast_encoders<quant::kInBf16>(rng, bad_e4m3, bad_e2m1, bad_amax);
  }
  EXPECT_EQ(bad_e4m3, 0);
  EXPECT_EQ(bad_e2m1, 0);
  EXPECT_EQ(bad_amax, 0);
}

TEST(QuantizeEncode, AmaxDivisionEqualsIeeeDivision) {
  int64_t bad = 0;
  for (uint32_t u : sample_floats(5)) {
    const float a = std::fabs(float_of(u));
    for (float b : {448.0f, 6.0f}) bad += bits_of(dev::div_amax(a, b)) != bits_of(a / b);
  }
  EXPECT_EQ(bad, 0);
}

TEST(QuantizeEncode, Ue8m0ScaleWithoutDivisionEqualsTheCeilRuleOnEveryFloat) {
  int64_t bad = 0;
  uint32_t first = 0;
  for (uint32_t u = 0; u < 0x80000000u; ++u) {
    const float amax = float_of(u);
    if (dev::ue8m0_scale_e4m3(amax) != ue8m0_ceil_scale(amax, 448.0f) && bad++ == 0) first = u;
  }
  EXPECT_EQ(bad, 0) << "first at bits 0x" << std::hex << first;
}

TEST(QuantizeEncode, Swizzled32BitOffsetEqualsTheWideOne) {
  std::mt19937_64 rng(9);
  for (int i = 0; i < 100000; ++i) {
    const int64_t cols_padded = 4 * (1 + static_cast<int64_t>(rng() % 5000));
    const auto r = static_cast<unsigned>(rng() & 0x7FFFFFFF), c = static_cast<unsigned>(rng() % cols_padded);
    ASSERT_EQ(quant::swizzled_offset32(r, c, static_cast<unsigned long long>(cols_padded) * 128),
              quant::swizzled_offset(r, c, cols_padded));
  }
}

TEST(QuantizeEncode, PrmtFollowsThePtxDefinition) {
  EXPECT_EQ(quant::prmt(0x33221100u, 0x77665544u, 0x3210u), 0x33221100u);
  EXPECT_EQ(quant::prmt(0x33221100u, 0x77665544u, 0x7654u), 0x77665544u);
  // bytes 2, 3, 0, 6 with the sign mode: 0x01 -> 00, 0x80 -> FF, 0x00 -> 00, 0xFF -> FF
  EXPECT_EQ(quant::prmt(0x80017F00u, 0x00FF0000u, 0xE8BAu), 0xFF00FF00u);
}

TEST(QuantizeEncode, FastDivEqualsIntegerDivision) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const uint64_t n_max = (uint64_t{1} << 40) - 1;
  std::vector<unsigned> ds = {2, 3, 4, 5, 7, 16, 1000, 1024, 1025, (1u << 31) - 1, 1u << 30, 3u << 29};
  for (int i = 0; i < 200; ++i) ds.push_back(2 + static_cast<unsigned>(rng() % ((1u << 31) - 2)));
  for (unsigned d : ds) {
    const dev::FastDiv f = dev::make_fast_div(d);
    std::vector<uint64_t> ns = {0, 1, d - 1ull, d, d + 1ull, n_max, n_max - 1, n_max / d * d, n_max / d * d - 1};
    for (int i = 0; i < 2000; ++i) ns.push_back(rng() & n_max);
    for (uint64_t n : ns) ASSERT_EQ(dev::fast_div(n, f), n / d) << n << " / " << d;
  }
  expect_bad_argument([] { dev::make_fast_div(1); }, "d", {"2 <= d"});
}

TEST(QuantizeEncode, PackedU16MaxEqualsTwoMaxima) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 100000; ++i) {
    const auto a = static_cast<unsigned>(rng()), b = static_cast<unsigned>(rng());
    const unsigned lo = std::max(a & 0xFFFFu, b & 0xFFFFu), hi = std::max(a >> 16, b >> 16);
    ASSERT_EQ(quant::umax16x2(a, b), lo | (hi << 16));
  }
}

// ---------------------------------------------------------------------------------------------
// QuantizeCompile

constexpr ActMode kModes[] = {ActMode::fp8_tensor, ActMode::fp8_token, ActMode::fp8_block, ActMode::mxfp8,
                              ActMode::nvfp4};

TEST(QuantizeCompile, SpecsCoverEveryModeDtypeAndLayout) {
  const std::vector<KernelSpec> specs = quantize::all_kernel_specs();
  std::set<std::string> names;
  for (const auto& s : specs) {
    EXPECT_EQ(s.kernel, "quantize.activations");
    EXPECT_EQ(s.archs, (std::vector<std::string>{"sm_90a", "sm_120a"}));
    // 64 = __launch_bounds__ (256, 4) / (1024, 1); FP32 x in the group kernel: (256, 3) -> 80.
    const std::string& n = s.name_expression;
    const bool f32_groups = (n.find("groups_kernel<") != std::string::npos && n.find(", 2, ") != std::string::npos) ||
                            n.find("nvfp4_kernel<2,") != std::string::npos;
    EXPECT_EQ(s.max_registers, f32_groups ? 80 : 64) << n;
    names.insert(s.name_expression);
  }
  // 3 x dtypes x (fp8_tensor, fp8_block, mxfp8 x 2 layouts, nvfp4 x 2 layouts, fp8_token x 3 slot counts).
  EXPECT_EQ(specs.size(), 27u);
  EXPECT_EQ(names.size(), specs.size());
  for (DType x : {DType::bf16, DType::f16, DType::f32})
    for (ActMode act : kModes) {
      const quantize::Caps caps{act, 8192, x, quantize::ScaleLayout::linear};
      EXPECT_TRUE(names.count(quantize::kernel_spec(caps).name_expression)) << act_mode_name(act);
    }
  EXPECT_EQ(quantize::kernel_spec({ActMode::nvfp4, 64, DType::bf16, quantize::ScaleLayout::swizzled}).name_expression,
            "b12x::quantize_nvfp4_kernel<0, 1>");
  // fp8_token: registers for short and medium rows, two reads beyond 32768 elements.
  EXPECT_EQ(quantize::kernel_spec({ActMode::fp8_token, 2048, DType::f16}).name_expression,
            "b12x::quantize_rows_kernel<1, 1>");
  EXPECT_EQ(quantize::kernel_spec({ActMode::fp8_token, 32768, DType::f16}).name_expression,
            "b12x::quantize_rows_kernel<1, 4>");
  EXPECT_EQ(quantize::kernel_spec({ActMode::fp8_token, 32776, DType::f32}).name_expression,
            "b12x::quantize_rows_kernel<2, 0>");
  // FP32 x: at most 2 vectors (8 registers each) per thread in registers.
  EXPECT_EQ(quantize::kernel_spec({ActMode::fp8_token, 16384, DType::f32}).name_expression,
            "b12x::quantize_rows_kernel<2, 2>");
  EXPECT_EQ(quantize::kernel_spec({ActMode::fp8_token, 16392, DType::f32}).name_expression,
            "b12x::quantize_rows_kernel<2, 0>");
  EXPECT_EQ(kQuantMinCtas<quant::kInF32>, 3);
  EXPECT_EQ(kQuantMinCtas<quant::kInBf16>, 4);
}

TEST(QuantizeCompile, KernelConstantsMatchTheHost) {
  EXPECT_EQ(static_cast<int>(ActMode::fp8_tensor), quant::kFp8Tensor);
  EXPECT_EQ(static_cast<int>(ActMode::fp8_token), quant::kFp8Token);
  EXPECT_EQ(static_cast<int>(ActMode::fp8_block), quant::kFp8Block);
  EXPECT_EQ(static_cast<int>(ActMode::mxfp8), quant::kMxfp8);
  EXPECT_EQ(static_cast<int>(ActMode::nvfp4), quant::kNvfp4);
  EXPECT_EQ(quant::kGroupElems<quant::kFp8Block>, 128);
  EXPECT_EQ(quant::kGroupElems<quant::kMxfp8>, kMxGroup);
  EXPECT_EQ(quant::kGroupElems<quant::kNvfp4>, kNvfp4Group);
  EXPECT_EQ(kQuantVecsPerCta, 1024);
}

TEST(QuantizeCompile, OutputShapesPerMode) {
  using quantize::ScaleLayout;
  auto shapes = [](ActMode act, ScaleLayout l = ScaleLayout::linear) {
    return quantize::output_shapes({act, 256, DType::bf16, l}, 200);
  };
  EXPECT_EQ(shapes(ActMode::fp8_tensor).q, (std::vector<int64_t>{200, 256}));
  EXPECT_TRUE(shapes(ActMode::fp8_tensor).scales.empty());
  EXPECT_EQ(shapes(ActMode::fp8_token).scales, (std::vector<int64_t>{200, 1}));
  EXPECT_EQ(shapes(ActMode::fp8_block).scales, (std::vector<int64_t>{200, 2}));
  EXPECT_EQ(shapes(ActMode::mxfp8).scales_dtype, DType::ue8m0);
  EXPECT_EQ(shapes(ActMode::mxfp8).scales, (std::vector<int64_t>{200, 8}));
  EXPECT_EQ(shapes(ActMode::nvfp4).q_dtype, DType::u8);
  EXPECT_EQ(shapes(ActMode::nvfp4).q, (std::vector<int64_t>{200, 128}));
  EXPECT_EQ(shapes(ActMode::nvfp4).scales, (std::vector<int64_t>{200, 16}));
  EXPECT_EQ(shapes(ActMode::nvfp4, ScaleLayout::swizzled).scales, (std::vector<int64_t>{256 * 16}));
  EXPECT_EQ(shapes(ActMode::mxfp8, ScaleLayout::swizzled).scales, (std::vector<int64_t>{256 * 8}));
}

TEST(QuantizeCompile, PlanRejectsBadCapsWithoutAGpu) {
  using quantize::ScaleLayout;
  expect_bad_argument([] { quantize::plan({ActMode::a16, 256, DType::bf16}); }, "act", {"nothing to quantize"});
  expect_bad_argument([] { quantize::plan({ActMode::fp8_block, 192, DType::bf16}); }, "k", {"128", "192"});
  expect_bad_argument([] { quantize::plan({ActMode::mxfp8, 48, DType::bf16}); }, "k", {"32", "48"});
  expect_bad_argument([] { quantize::plan({ActMode::nvfp4, 40, DType::bf16}); }, "k", {"16", "40"});
  expect_bad_argument([] { quantize::plan({ActMode::fp8_token, 12, DType::bf16}); }, "k", {"8", "12"});
  expect_bad_argument([] { quantize::plan({ActMode::fp8_tensor, 0, DType::bf16}); }, "k", {"positive"});
  expect_bad_argument([] { quantize::plan({ActMode::fp8_token, 256, DType::u8}); }, "x_dtype", {"u8"});
  expect_bad_argument([] { quantize::plan({ActMode::fp8_block, 256, DType::bf16, ScaleLayout::swizzled}); },
                      "scale_layout", {"fp8_block"});
  expect_bad_argument([] { quantize::parse_scale_layout("tiled"); }, "scale_layout", {"tiled"});
  EXPECT_EQ(quantize::parse_scale_layout("swizzled"), ScaleLayout::swizzled);
}

// A plan with the stand-in kernel and device-looking tensors of the right shapes for `rows` rows.
struct FakeQuant {
  quantize::Plan plan;
  TensorView x, input_scale, q, scales;
  FakeQuant(ActMode act, int64_t k, int64_t rows, quantize::ScaleLayout l = quantize::ScaleLayout::linear) {
    plan.caps = {act, k, DType::bf16, l};
    plan.kernel = &fake_kernel();
    const quantize::OutputShapes o = quantize::output_shapes(plan.caps, rows);
    x = fake_device_tensor(0, DType::bf16, {rows, k});
    if (act == ActMode::fp8_tensor || act == ActMode::nvfp4) input_scale = fake_device_tensor(1, DType::f32, {1});
    q = TensorView(fake_device_ptr(2), o.q_dtype, o.q, Device::cuda(0));
    if (!o.scales.empty()) scales = TensorView(fake_device_ptr(3), o.scales_dtype, o.scales, Device::cuda(0));
  }
  quantize::Binding bind() const { return quantize::bind(plan, Scratch{}, x, input_scale, q, scales); }
};

TEST(QuantizeCompile, BindValidatesWithoutAGpu) {
  for (ActMode act : kModes) {
    SCOPED_TRACE(std::string(act_mode_name(act)));
    const FakeQuant f(act, 256, 200);
    const quantize::Binding b = f.bind();
    EXPECT_EQ(b.plan, &f.plan);
    EXPECT_EQ(b.q.data, f.q.data);
    EXPECT_EQ(b.scales.data, f.scales.data);
    {  // x: K, dtype, host, alignment
      FakeQuant g = f;
      g.x = fake_device_tensor(0, DType::bf16, {200, 128});
      expect_bad_argument([&] { g.bind(); }, "x");
      g.x = fake_device_tensor(0, DType::f16, {200, 256});
      expect_bad_argument([&] { g.bind(); }, "x");
      g.x = TensorView(fake_device_ptr(0), DType::bf16, {200, 256}, Device::host());
      expect_bad_argument([&] { g.bind(); }, "x");
      g.x = TensorView(static_cast<char*>(fake_device_ptr(0)) + 8, DType::bf16, {200, 256}, Device::cuda(0));
      expect_bad_argument([&] { g.bind(); }, "x", {"16"});
    }
    {  // q: rows must follow x, dtype, device
      FakeQuant g = f;
      g.q.shape[0] = 199;
      expect_bad_argument([&] { g.bind(); }, "q");
      g = f;
      g.q.dtype = act == ActMode::nvfp4 ? DType::f8_e4m3 : DType::u8;
      expect_bad_argument([&] { g.bind(); }, "q");
      g = f;
      g.q.device = Device::cuda(1);
      expect_bad_argument([&] { g.bind(); }, "q");
    }
    {  // input_scale: required for the static modes, refused by the dynamic ones
      FakeQuant g = f;
      const bool needs = act == ActMode::fp8_tensor || act == ActMode::nvfp4;
      g.input_scale = needs ? TensorView() : fake_device_tensor(1, DType::f32, {1});
      expect_bad_argument([&] { g.bind(); }, "input_scale");
      if (needs) {
        g.input_scale = fake_device_tensor(1, DType::f32, {2});
        expect_bad_argument([&] { g.bind(); }, "input_scale");
      }
    }
    {  // scales: refused for fp8_tensor, else shape and dtype
      FakeQuant g = f;
      if (act == ActMode::fp8_tensor) {
        g.scales = fake_device_tensor(3, DType::f32, {1});
      } else {
        g.scales.shape[0] = 201;
      }
      expect_bad_argument([&] { g.bind(); }, "scales");
      if (act != ActMode::fp8_tensor) {
        g = f;
        g.scales.dtype = act == ActMode::fp8_token || act == ActMode::fp8_block ? DType::f16 : DType::f32;
        expect_bad_argument([&] { g.bind(); }, "scales");
      }
    }
  }
  {  // swizzled scales: the padded 1-D buffer; u8 accepted for byte scales
    FakeQuant g(ActMode::nvfp4, 256, 200, quantize::ScaleLayout::swizzled);
    EXPECT_EQ(g.bind().scales.numel(), 256 * 16);
    g.scales.dtype = DType::u8;
    EXPECT_NO_THROW(g.bind());
    g.scales = fake_device_tensor(3, DType::f8_e4m3, {200, 16});
    expect_bad_argument([&] { g.bind(); }, "scales");
  }
  {  // no rows: fine, nothing to launch
    FakeQuant g(ActMode::fp8_block, 256, 0);
    g.x.data = g.q.data = g.scales.data = nullptr;
    EXPECT_EQ(g.bind().x.size(0), 0);
  }
  {  // plan without a kernel
    FakeQuant g(ActMode::mxfp8, 256, 4);
    g.plan.kernel = nullptr;
    expect_bad_argument([&] { g.bind(); }, "plan");
  }
}

// ---------------------------------------------------------------------------------------------
// QuantizeHost

TEST(QuantizeHost, ReferenceSwizzlesTheRowMajorScales) {
  HostTensor x(DType::f32, {130, 64});
  std::mt19937_64 rng(5);
  std::normal_distribution<float> n(0.0f, 2.0f);
  for (int64_t i = 0; i < x.numel(); ++i) x.ptr<float>()[i] = n(rng);
  for (ActMode act : {ActMode::mxfp8, ActMode::nvfp4}) {
    const quantize::Caps lin{act, 64, DType::f32, quantize::ScaleLayout::linear};
    const quantize::Caps swz{act, 64, DType::f32, quantize::ScaleLayout::swizzled};
    const quantize::HostOutputs a = quantize::reference_quantize(lin, x.view(), 0.01f);
    const quantize::HostOutputs b = quantize::reference_quantize(swz, x.view(), 0.01f);
    ASSERT_EQ(a.q.nbytes(), b.q.nbytes());
    EXPECT_EQ(std::memcmp(a.q.view().data, b.q.view().data, a.q.nbytes()), 0);
    HostTensor want(a.scales.view().dtype, {b.scales.numel()});
    swizzle_scales(a.scales.view(), want.view());
    EXPECT_EQ(std::memcmp(want.view().data, b.scales.view().data, want.nbytes()), 0);
    EXPECT_EQ(b.scales.numel(), swizzled_scale_shape(130, 64 / (act == ActMode::nvfp4 ? 16 : 32)).bytes());
  }
  const quantize::HostOutputs t =
      quantize::reference_quantize({ActMode::fp8_tensor, 64, DType::f32}, x.view(), 0.5f);
  EXPECT_TRUE(t.scales.view().empty());
  expect_bad_argument([&] { quantize::reference_quantize({ActMode::fp8_block, 64, DType::f32}, x.view(), 1.0f); },
                      "k");
}

// The host spec fixes the sign of NaN codes to x's (IEEE leaves a NaN quotient's sign to the machine).
TEST(QuantizeHost, NanCodesCarryTheSignOfX) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  HostTensor x(DType::f32, {2, 8});
  const float row0[8] = {1.0f, -2.0f, -nan, 0.5f, -0.0f, 3.0f, -1.0f, 4.0f};  // a NaN block
  const float row1[8] = {inf, -inf, 1.0f, -1.0f, 0.0f, 2.0f, -2.0f, 5.0f};    // an Inf block: Inf / Inf
  std::memcpy(x.ptr<float>(), row0, sizeof row0);
  std::memcpy(x.ptr<float>() + 8, row1, sizeof row1);
  HostTensor q(DType::f8_e4m3, {2, 8}), s(DType::f32, {2, 1});
  fp8_quantize(x.view(), kFp8PerRow, q.view(), s.view());
  const uint8_t* c = q.ptr<uint8_t>();
  EXPECT_EQ(bits_of(s.ptr<float>()[0]), 0x7FC00000u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(c[i], std::signbit(row0[i]) ? 0xFF : 0x7F) << i;
  EXPECT_TRUE(std::isinf(s.ptr<float>()[1]));
  EXPECT_EQ(c[8], 0x7F);   // +Inf / Inf
  EXPECT_EQ(c[9], 0xFF);   // -Inf / Inf
  EXPECT_EQ(c[10], 0x00);  // 1 / Inf = +0
  EXPECT_EQ(c[11], 0x80);  // -1 / Inf = -0
}

}  // namespace
}  // namespace b12x
