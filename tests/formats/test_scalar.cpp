// formats/scalar.h against oracles written here from the bit-field definitions (FORMATS.md s.1):
// decoders from sign/exponent/mantissa, encoders by brute-force nearest search with ties to the
// even code, so no expectation is derived from the implementation.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/formats/scalar.h"

namespace {

using namespace b12x;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }

// Generic sign/exponent/mantissa decode for the small formats. nan_all_ones: E4M3 style (only
// exponent and mantissa all ones is NaN, no Inf); ieee: exponent all ones is Inf/NaN.
enum class Special { none, nan_all_ones, ieee };
double decode_fields(uint32_t code, int ebits, int mbits, int bias, Special special) {
  const bool neg = (code >> (ebits + mbits)) & 1;
  const uint32_t e = (code >> mbits) & ((1u << ebits) - 1);
  const uint32_t m = code & ((1u << mbits) - 1);
  const uint32_t emax = (1u << ebits) - 1;
  double mag;
  if (special == Special::nan_all_ones && e == emax && m == (1u << mbits) - 1)
    return kNaN;
  if (special == Special::ieee && e == emax)
    mag = m ? kNaN : std::numeric_limits<double>::infinity();
  else if (e == 0)
    mag = m * std::pow(2.0, 1 - bias - mbits);  // subnormal: m * 2^(1 - bias - mbits)
  else
    mag = (1.0 + m / std::pow(2.0, mbits)) * std::pow(2.0, static_cast<int>(e) - bias);
  return neg ? -mag : mag;
}

double e4m3_ref(uint8_t c) { return decode_fields(c, 4, 3, 7, Special::nan_all_ones); }
double e5m2_ref(uint8_t c) { return decode_fields(c, 5, 2, 15, Special::ieee); }
double e2m1_ref(uint8_t c) { return decode_fields(c & 0xF, 2, 1, 1, Special::none); }
double f16_ref(uint16_t h) { return decode_fields(h, 5, 10, 15, Special::ieee); }
double bf16_ref(uint16_t h) { return decode_fields(h, 8, 7, 127, Special::ieee); }

// Bitwise equality of float results (distinguishes -0 from +0); NaN expected means any NaN.
::testing::AssertionResult same(double want, float got) {
  if (std::isnan(want)) {
    if (std::isnan(got)) return ::testing::AssertionSuccess();
  } else if (bits(static_cast<float>(want)) == bits(got) && static_cast<double>(got) == want) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << "want " << want << " (0x" << std::hex << bits(static_cast<float>(want))
                                       << "), got " << std::dec << got << " (0x" << std::hex << bits(got) << ")";
}

// Brute-force RNE onto the positive finite codes: the nearest value to |x|, ties to the code
// with an even last bit, then x's sign bit (so underflow keeps the sign). Saturation falls out:
// beyond the largest value the largest one is nearest.
uint32_t nearest_code(float x, const std::vector<uint32_t>& positive, double (*value)(uint32_t), uint32_t sign_bit) {
  const double a = std::fabs(static_cast<double>(x));
  uint32_t best = positive[0];
  double best_d = std::numeric_limits<double>::infinity();
  for (uint32_t c : positive) {
    const double d = std::fabs(a - value(c));
    if (d < best_d || (d == best_d && (c & 1) == 0)) {
      best = c;
      best_d = d;
    }
  }
  return std::signbit(x) ? (best | sign_bit) : best;
}

// Positive finite codes of each small format, value-ordered (codes are monotone in value).
std::vector<uint32_t> positive_finite(int n, double (*value)(uint32_t)) {
  std::vector<uint32_t> v;
  for (int c = 0; c < n; ++c)
    if (std::isfinite(value(c))) v.push_back(c);
  return v;
}
double e4m3_val(uint32_t c) { return e4m3_ref(static_cast<uint8_t>(c)); }
double e5m2_val(uint32_t c) { return e5m2_ref(static_cast<uint8_t>(c)); }
double e2m1_val(uint32_t c) { return e2m1_ref(static_cast<uint8_t>(c)); }

// Random finite floats with exponents in [emin, emax], either sign, full 24-bit significand.
std::vector<float> random_floats(int emin, int emax, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> exp(emin, emax);
  std::uniform_int_distribution<uint32_t> man(0, (1u << 23) - 1);
  std::vector<float> v;
  for (int i = 0; i < n; ++i) {
    const float m = std::ldexp(static_cast<float>((1u << 23) | man(rng)), -23);
    const float x = std::ldexp(m, exp(rng));
    v.push_back((rng() & 1) ? -x : x);
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// Exhaustive decode.

TEST(ScalarDecode, E4M3All256Codes) {
  for (int c = 0; c < 256; ++c) EXPECT_TRUE(same(e4m3_ref(c), e4m3_to_f32(c))) << "code 0x" << std::hex << c;
  // Landmarks from FORMATS.md 1.2.
  EXPECT_EQ(e4m3_to_f32(0x7E), 448.0f);
  EXPECT_EQ(e4m3_to_f32(0x01), 0x1p-9f);
  EXPECT_EQ(e4m3_to_f32(0x08), 0x1p-6f);
  EXPECT_EQ(bits(e4m3_to_f32(0x80)), 0x80000000u);
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0x7F)));
  EXPECT_TRUE(std::isnan(e4m3_to_f32(0xFF)));
}

TEST(ScalarDecode, E5M2All256Codes) {
  for (int c = 0; c < 256; ++c) EXPECT_TRUE(same(e5m2_ref(c), e5m2_to_f32(c))) << "code 0x" << std::hex << c;
  EXPECT_EQ(e5m2_to_f32(0x7B), 57344.0f);
  EXPECT_EQ(e5m2_to_f32(0x01), 0x1p-16f);
  EXPECT_EQ(e5m2_to_f32(0x04), 0x1p-14f);
  EXPECT_EQ(e5m2_to_f32(0x7C), kInf);
  EXPECT_EQ(e5m2_to_f32(0xFC), -kInf);
  for (int c : {0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF}) EXPECT_TRUE(std::isnan(e5m2_to_f32(c))) << c;
}

TEST(ScalarDecode, Ue8m0All256Codes) {
  for (int b = 0; b < 255; ++b) {
    const double want = std::ldexp(1.0, b - 127);
    EXPECT_TRUE(same(want, ue8m0_to_f32(b))) << "byte " << b;
  }
  EXPECT_TRUE(std::isnan(ue8m0_to_f32(255)));
  EXPECT_EQ(bits(ue8m0_to_f32(0)), 0x00400000u);  // 2^-127, FP32 subnormal, not flushed
  EXPECT_EQ(bits(ue8m0_to_f32(1)), 1u << 23);     // b << 23 for b >= 1
  EXPECT_EQ(bits(ue8m0_to_f32(254)), 254u << 23);
  EXPECT_EQ(ue8m0_to_f32(127), 1.0f);
}

TEST(ScalarDecode, E2M1All16Codes) {
  const float table[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};  // FORMATS.md 1.1
  for (int c = 0; c < 16; ++c) {
    EXPECT_TRUE(same(e2m1_ref(c), e2m1_to_f32(c))) << "code " << c;
    EXPECT_EQ(std::fabs(e2m1_to_f32(c)), table[c & 7]) << "code " << c;
    EXPECT_EQ(std::signbit(e2m1_to_f32(c)), c >= 8) << "code " << c;  // code 8 is -0
  }
}

TEST(ScalarDecode, F16AndBf16All65536Codes) {
  for (uint32_t h = 0; h < 65536; ++h) {
    ASSERT_TRUE(same(f16_ref(h), f16_to_f32(h))) << "f16 0x" << std::hex << h;
    ASSERT_TRUE(same(bf16_ref(h), bf16_to_f32(h))) << "bf16 0x" << std::hex << h;
  }
}

// ---------------------------------------------------------------------------------------------
// encode(decode(c)) == c for every non-NaN code.

TEST(ScalarRoundTrip, E4M3) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7F) == 0x7F) continue;  // NaN
    EXPECT_EQ(f32_to_e4m3(e4m3_to_f32(c)), c) << "code 0x" << std::hex << c;
  }
}

TEST(ScalarRoundTrip, E5M2) {
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7C) == 0x7C && (c & 3)) continue;  // NaN
    EXPECT_EQ(f32_to_e5m2(e5m2_to_f32(c)), c) << "code 0x" << std::hex << c;
    if ((c & 0x7F) != 0x7C) {  // Inf saturates in the _sat form
      EXPECT_EQ(f32_to_e5m2_sat(e5m2_to_f32(c)), c) << "code 0x" << std::hex << c;
    }
  }
}

TEST(ScalarRoundTrip, E2M1) {
  for (int c = 0; c < 16; ++c) EXPECT_EQ(f32_to_e2m1(e2m1_to_f32(c)), c) << "code " << c;
}

TEST(ScalarRoundTrip, F16All65536) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;
    ASSERT_EQ(f32_to_f16(f16_to_f32(h)), h) << "f16 0x" << std::hex << h;
  }
}

TEST(ScalarRoundTrip, Bf16All65536) {
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7F80) == 0x7F80 && (h & 0x7F)) continue;
    ASSERT_EQ(f32_to_bf16(bf16_to_f32(h)), h) << "bf16 0x" << std::hex << h;
  }
}

// ---------------------------------------------------------------------------------------------
// Round to nearest even.

// For each pair of adjacent positive codes: the midpoint goes to the even code, one float ulp
// either side goes to the nearer code; then the negated inputs.
template <class Enc>
void check_midpoints(const std::vector<uint32_t>& codes, double (*value)(uint32_t), uint32_t sign_bit, Enc enc,
                     const char* what) {
  for (size_t i = 0; i + 1 < codes.size(); ++i) {
    const uint32_t a = codes[i], b = codes[i + 1];
    const double mid = (value(a) + value(b)) / 2;
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid);  // midpoints of these formats are FP32-exact
    const uint32_t even = (a & 1) ? b : a;
    EXPECT_EQ(enc(m), even) << what << " tie " << mid;
    EXPECT_EQ(enc(-m), even | sign_bit) << what << " tie " << -mid;
    EXPECT_EQ(enc(std::nextafter(m, 0.0f)), a) << what << " below " << mid;
    EXPECT_EQ(enc(std::nextafter(m, kInf)), b) << what << " above " << mid;
    EXPECT_EQ(enc(-std::nextafter(m, kInf)), b | sign_bit) << what << " above " << -mid;
  }
}

TEST(ScalarRne, E4M3TiesBothParities) {
  const auto codes = positive_finite(128, e4m3_val);
  ASSERT_EQ(codes.size(), 127u);
  check_midpoints(codes, e4m3_val, 0x80, [](float x) { return uint32_t{f32_to_e4m3(x)}; }, "e4m3");
  // Hand-picked: 16 = 0.1011.000 (0x58), 18 = 0x59, 20 = 0x5A; 17 and 19 are ties.
  EXPECT_EQ(f32_to_e4m3(17.0f), 0x58);
  EXPECT_EQ(f32_to_e4m3(19.0f), 0x5A);
  EXPECT_EQ(f32_to_e4m3(-17.0f), 0xD8);
  EXPECT_EQ(f32_to_e4m3(464.0f), 0x7E);  // 448 (even) vs 480 (not representable)
}

TEST(ScalarRne, E5M2Ties) {
  const auto codes = positive_finite(128, e5m2_val);
  ASSERT_EQ(codes.size(), 124u);
  check_midpoints(codes, e5m2_val, 0x80, [](float x) { return uint32_t{f32_to_e5m2(x)}; }, "e5m2");
  check_midpoints(codes, e5m2_val, 0x80, [](float x) { return uint32_t{f32_to_e5m2_sat(x)}; }, "e5m2_sat");
}

TEST(ScalarRne, E2M1DocumentedTies) {
  const std::pair<float, float> cases[] = {{0.25f, 0.0f}, {0.75f, 1.0f}, {1.25f, 1.0f}, {1.75f, 2.0f},
                                           {2.5f, 2.0f},  {3.5f, 4.0f},  {5.0f, 4.0f}};
  for (auto [x, want] : cases) {
    EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(x)), want) << x;
    EXPECT_EQ(e2m1_to_f32(f32_to_e2m1(-x)), -want) << -x;
  }
  EXPECT_EQ(f32_to_e2m1(0.25f), 0x0);
  EXPECT_EQ(f32_to_e2m1(-0.25f), 0x8);  // rounds to -0
  const auto codes = positive_finite(8, e2m1_val);
  check_midpoints(codes, e2m1_val, 0x8, [](float x) { return uint32_t{f32_to_e2m1(x)}; }, "e2m1");
}

// Random inputs against the brute-force nearest code.
TEST(ScalarRne, RandomInputsMatchNearestCode) {
  const auto e4m3 = positive_finite(128, e4m3_val);
  const auto e5m2 = positive_finite(128, e5m2_val);
  const auto e2m1 = positive_finite(8, e2m1_val);
  for (float x : random_floats(-14, 10, 20000, 1)) {
    ASSERT_EQ(f32_to_e4m3(x), nearest_code(x, e4m3, e4m3_val, 0x80)) << x;
    ASSERT_EQ(f32_to_e2m1(x), nearest_code(x, e2m1, e2m1_val, 0x8)) << x;
  }
  for (float x : random_floats(-20, 17, 20000, 2)) {
    ASSERT_EQ(f32_to_e5m2_sat(x), nearest_code(x, e5m2, e5m2_val, 0x80)) << x;
    if (std::fabs(x) < 61440.0f) {
      ASSERT_EQ(f32_to_e5m2(x), nearest_code(x, e5m2, e5m2_val, 0x80)) << x;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Saturation, overflow, NaN.

TEST(ScalarSaturation, E4M3) {
  for (float x : {448.0f, 449.0f, 465.0f, 480.0f, 1e5f, 1e30f, std::numeric_limits<float>::max(), kInf}) {
    EXPECT_EQ(f32_to_e4m3(x), 0x7E) << x;
    EXPECT_EQ(f32_to_e4m3(-x), 0xFE) << -x;
  }
}

TEST(ScalarSaturation, E5M2) {
  // IEEE form: the rounded value reaching 2^16 overflows; 61440 is the tie above 57344 (odd code).
  EXPECT_EQ(f32_to_e5m2(57344.0f), 0x7B);
  EXPECT_EQ(f32_to_e5m2(std::nextafter(61440.0f, 0.0f)), 0x7B);
  for (float x : {61440.0f, 65536.0f, 1e30f, kInf}) {
    EXPECT_EQ(f32_to_e5m2(x), 0x7C) << x;
    EXPECT_EQ(f32_to_e5m2(-x), 0xFC) << -x;
    EXPECT_EQ(f32_to_e5m2_sat(x), 0x7B) << x;
    EXPECT_EQ(f32_to_e5m2_sat(-x), 0xFB) << -x;
  }
}

TEST(ScalarSaturation, E2M1) {
  for (float x : {6.0f, 6.5f, 7.0f, 100.0f, kInf}) {
    EXPECT_EQ(f32_to_e2m1(x), 0x7) << x;
    EXPECT_EQ(f32_to_e2m1(-x), 0xF) << -x;
  }
}

TEST(ScalarSaturation, F16AndBf16OverflowToInf) {
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_f16(std::nextafter(65520.0f, 0.0f)), 0x7BFF);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // tie above the largest (odd) code
  EXPECT_EQ(f32_to_f16(1e10f), 0x7C00);
  EXPECT_EQ(f32_to_f16(-1e10f), 0xFC00);
  EXPECT_EQ(f32_to_f16(kInf), 0x7C00);
  EXPECT_EQ(f32_to_f16(-kInf), 0xFC00);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);  // rounds up past 0x7F7F
  EXPECT_EQ(f32_to_bf16(-std::numeric_limits<float>::max()), 0xFF80);
  EXPECT_EQ(f32_to_bf16(from_bits(0x7F7F7FFF)), 0x7F7F);
  EXPECT_EQ(f32_to_bf16(kInf), 0x7F80);
  EXPECT_EQ(f32_to_bf16(-kInf), 0xFF80);
}

TEST(ScalarNaN, EncodersFollowTheHeader) {
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  const float snan = from_bits(0x7F800001);  // signalling, payload only in the low bits
  for (float n : {qnan, snan, -qnan, from_bits(0xFF800001)}) {
    const uint8_t sign8 = std::signbit(n) ? 0x80 : 0;
    EXPECT_EQ(f32_to_e4m3(n), 0x7F | sign8) << bits(n);
    EXPECT_EQ(f32_to_e5m2(n), 0x7E | sign8) << bits(n);
    EXPECT_EQ(f32_to_e5m2_sat(n), 0x7E | sign8) << bits(n);
    EXPECT_EQ(f32_to_e2m1(n), 0x0) << bits(n);  // NaN encodes as +0, either sign
    // BF16/FP16: still NaN, and quiet (top mantissa bit set).
    const uint16_t b = f32_to_bf16(n);
    EXPECT_EQ(b & 0x7F80, 0x7F80) << bits(n);
    EXPECT_NE(b & 0x0040, 0) << bits(n);
    EXPECT_TRUE(std::isnan(bf16_to_f32(b)));
    const uint16_t h = f32_to_f16(n);
    EXPECT_EQ(h & 0x7C00, 0x7C00) << bits(n);
    EXPECT_NE(h & 0x0200, 0) << bits(n);
    EXPECT_TRUE(std::isnan(f16_to_f32(h)));
  }
}

// ---------------------------------------------------------------------------------------------
// Subnormals: the targets' smallest values, and FP32 subnormal inputs.

TEST(ScalarSubnormal, E4M3) {
  EXPECT_EQ(f32_to_e4m3(0x1p-9f), 0x01);
  EXPECT_EQ(f32_to_e4m3(0x1p-10f), 0x00);                           // tie 0 / 2^-9 -> even (0)
  EXPECT_EQ(f32_to_e4m3(std::nextafter(0x1p-10f, 1.0f)), 0x01);
  EXPECT_EQ(f32_to_e4m3(3 * 0x1p-10f), 0x02);                       // tie 1 / 2 -> 2
  EXPECT_EQ(f32_to_e4m3(7 * 0x1p-9f), 0x07);                        // largest subnormal
  EXPECT_EQ(f32_to_e4m3(7.5f * 0x1p-9f), 0x08);                     // tie into the first normal
  EXPECT_EQ(f32_to_e4m3(0x1p-6f), 0x08);
  EXPECT_EQ(f32_to_e4m3(1e-30f), 0x00);
  EXPECT_EQ(f32_to_e4m3(-1e-30f), 0x80);                            // sign kept on underflow
  EXPECT_EQ(f32_to_e4m3(from_bits(0x00000001)), 0x00);              // FP32 subnormal input
  EXPECT_EQ(f32_to_e4m3(from_bits(0x80400000)), 0x80);
}

TEST(ScalarSubnormal, E5M2AndE2M1) {
  EXPECT_EQ(f32_to_e5m2(0x1p-16f), 0x01);
  EXPECT_EQ(f32_to_e5m2(0x1p-17f), 0x00);
  EXPECT_EQ(f32_to_e5m2(3 * 0x1p-17f), 0x02);
  EXPECT_EQ(f32_to_e5m2(3 * 0x1p-16f), 0x03);   // largest subnormal
  EXPECT_EQ(f32_to_e5m2(0x1p-14f), 0x04);
  EXPECT_EQ(f32_to_e5m2(-from_bits(1)), 0x80);
  EXPECT_EQ(f32_to_e2m1(0.5f), 0x1);            // E2M1's only subnormal
  EXPECT_EQ(f32_to_e2m1(from_bits(1)), 0x0);
  EXPECT_EQ(f32_to_e2m1(-from_bits(1)), 0x8);
}

TEST(ScalarSubnormal, F16AndBf16) {
  EXPECT_EQ(f32_to_f16(0x1p-24f), 0x0001);
  EXPECT_EQ(f32_to_f16(0x1p-25f), 0x0000);               // tie -> even (0)
  EXPECT_EQ(f32_to_f16(std::nextafter(0x1p-25f, 1.0f)), 0x0001);
  EXPECT_EQ(f32_to_f16(3 * 0x1p-25f), 0x0002);
  EXPECT_EQ(f32_to_f16(1023 * 0x1p-24f), 0x03FF);
  EXPECT_EQ(f32_to_f16(1023.5f * 0x1p-24f), 0x0400);     // tie into the first normal
  EXPECT_EQ(f32_to_f16(from_bits(0x00000001)), 0x0000);
  EXPECT_EQ(f32_to_f16(from_bits(0x80000001)), 0x8000);
  // BF16 keeps FP32's exponent range, so FP32 subnormals round at bit 16 like everything else.
  EXPECT_EQ(f32_to_bf16(from_bits(0x00010000)), 0x0001);
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008000)), 0x0000);  // tie -> even
  EXPECT_EQ(f32_to_bf16(from_bits(0x00018000)), 0x0002);  // tie -> even
  EXPECT_EQ(f32_to_bf16(from_bits(0x00008001)), 0x0001);
  EXPECT_EQ(f32_to_bf16(from_bits(0x007FFFFF)), 0x0080);  // largest subnormal rounds to the min normal
  EXPECT_EQ(f32_to_bf16(from_bits(0x80000001)), 0x8000);
}

// ---------------------------------------------------------------------------------------------
// FP32 -> FP16/BF16 on every halfway case.

TEST(ScalarRne, Bf16EveryHalfwayCase) {
  // For each finite BF16 code h (both signs, every exponent) the FP32 value (h << 16) | 0x8000
  // lies exactly halfway to the next code away from zero.
  for (uint32_t h = 0; h < 65536; ++h) {
    if ((h & 0x7F80) == 0x7F80) continue;
    const uint32_t tie = (h << 16) | 0x8000;
    const uint32_t even = (h & 1) ? h + 1 : h;  // h + 1 may be Inf: IEEE overflow
    ASSERT_EQ(f32_to_bf16(from_bits(tie)), even) << std::hex << tie;
    ASSERT_EQ(f32_to_bf16(from_bits(tie - 1)), h) << std::hex << tie - 1;
    ASSERT_EQ(f32_to_bf16(from_bits(tie + 1)), h + 1) << std::hex << tie + 1;
  }
}

TEST(ScalarRne, F16EveryHalfwayCase) {
  // Midpoints between consecutive positive FP16 values (subnormal, normal, and 65504 -> Inf).
  for (uint32_t h = 0; h < 0x7C00; ++h) {
    const double next = h + 1 == 0x7C00 ? 65536.0 : f16_ref(h + 1);  // 2^16: where Inf takes over
    const double mid = (f16_ref(h) + next) / 2;
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid);
    const uint32_t even = (h & 1) ? h + 1 : h;
    ASSERT_EQ(f32_to_f16(m), even) << mid;
    ASSERT_EQ(f32_to_f16(-m), even | 0x8000) << -mid;
    ASSERT_EQ(f32_to_f16(std::nextafter(m, 0.0f)), h) << mid;
    ASSERT_EQ(f32_to_f16(std::nextafter(m, kInf)), h + 1) << mid;
  }
}

// ---------------------------------------------------------------------------------------------
// load_f32 / store_f32.

TEST(ScalarStore, DoubleRoundsOnce) {
  // 1 + 2^-8 + 2^-40: just above the BF16 tie between 1 and 1 + 2^-7. Casting to float first
  // would land exactly on the tie (2^-40 is below FP32's half ulp) and round down to 1.0.
  const double v = 1.0 + 0x1p-8 + 0x1p-40;
  ASSERT_EQ(static_cast<float>(v), 1.0f + 0x1p-8f);
  uint16_t b[2] = {0, 0};
  store_f32(b, DType::bf16, 1, v);
  EXPECT_EQ(b[1], 0x3F81);
  EXPECT_EQ(b[0], 0);  // only element i written
  store_f32(b, DType::bf16, 0, -v);
  EXPECT_EQ(b[0], 0xBF81);
  store_f32(b, DType::bf16, 0, 1.0 + 0x1p-8 - 0x1p-40);  // just below the tie
  EXPECT_EQ(b[0], 0x3F80);
  store_f32(b, DType::bf16, 0, 1.0 + 0x1p-8);  // the tie itself -> even
  EXPECT_EQ(b[0], 0x3F80);

  // Same for FP16: 1 + 2^-11 is the tie between 1 and 1 + 2^-10.
  uint16_t h = 0;
  store_f32(&h, DType::f16, 0, 1.0 + 0x1p-11 + 0x1p-40);
  EXPECT_EQ(h, 0x3C01);
  store_f32(&h, DType::f16, 0, 1.0 + 0x1p-11);
  EXPECT_EQ(h, 0x3C00);
  store_f32(&h, DType::f16, 0, 1e6);
  EXPECT_EQ(h, 0x7C00);
  store_f32(&h, DType::f16, 0, 0x1p-25 + 0x1p-60);  // just above the smallest subnormal's half
  EXPECT_EQ(h, 0x0001);

  // BF16 overflow and tiny doubles below FP32 range.
  store_f32(b, DType::bf16, 0, 1e300);
  EXPECT_EQ(b[0], 0x7F80);
  store_f32(b, DType::bf16, 0, -1e-300);
  EXPECT_EQ(b[0], 0x8000);
  store_f32(b, DType::bf16, 0, kNaN);
  EXPECT_TRUE(std::isnan(bf16_to_f32(b[0])));

  float f = 0;
  store_f32(&f, DType::f32, 0, 1.0 + 0x1p-24 + 0x1p-40);  // just above the FP32 tie
  EXPECT_EQ(f, 1.0f + 0x1p-23f);
  double d = 0;
  store_f32(&d, DType::f64, 0, 1.0 + 0x1p-52);
  EXPECT_EQ(d, 1.0 + 0x1p-52);
}

TEST(ScalarStore, LoadReadsEachDtype) {
  const uint16_t bf[2] = {0x3F80, 0xC0A1};
  EXPECT_EQ(load_f32(bf, DType::bf16, 1), -5.03125f);
  const uint16_t hf[2] = {0x3555, 0x0001};
  EXPECT_EQ(load_f32(hf, DType::f16, 0), static_cast<float>(f16_ref(0x3555)));
  EXPECT_EQ(load_f32(hf, DType::f16, 1), 0x1p-24f);
  const float f[2] = {1.5f, -0.25f};
  EXPECT_EQ(load_f32(f, DType::f32, 1), -0.25f);
  const double d[1] = {0.1};
  EXPECT_EQ(load_f32(d, DType::f64, 0), 0.1f);
}

TEST(ScalarStore, NonFloatDtypeThrows) {
  int32_t x = 0;
  for (DType t : {DType::i32, DType::u8, DType::f8_e4m3, DType::ue8m0}) {
    try {
      store_f32(&x, t, 0, 1.0);
      ADD_FAILURE() << "store_f32 accepted " << dtype_name(t);
    } catch (const BadArgument& e) {
      EXPECT_EQ(e.argument(), "dtype");
      EXPECT_NE(std::string(e.what()).find(dtype_name(t)), std::string::npos) << e.what();
    }
    EXPECT_THROW(load_f32(&x, t, 0), BadArgument);
  }
  EXPECT_EQ(x, 0);
}

// ---------------------------------------------------------------------------------------------
// ue8m0_ceil_scale.

// Independent rule: the smallest X with amax / elem_max <= 2^X, found by search and compared in
// double, then clamped to the UE8M0 range [-127, 127] (byte = X + 127).
int ceil_scale_oracle(float amax, float elem_max) {
  const double q = static_cast<double>(amax) / static_cast<double>(elem_max);
  int x = -400;
  while (q > std::ldexp(1.0, x)) ++x;
  return std::clamp(x, -127, 127) + 127;
}

TEST(ScalarUe8m0, CeilScaleSpecialInputs) {
  EXPECT_EQ(ue8m0_ceil_scale(0.0f, 6.0f), 127);
  EXPECT_EQ(ue8m0_ceil_scale(0.0f, 448.0f), 127);
  EXPECT_EQ(ue8m0_ceil_scale(std::numeric_limits<float>::quiet_NaN(), 6.0f), 255);
  EXPECT_EQ(ue8m0_ceil_scale(kInf, 6.0f), 255);
  EXPECT_EQ(ue8m0_ceil_scale(kInf, 448.0f), 255);
}

TEST(ScalarUe8m0, CeilScaleAtPowersOfTwo) {
  for (float elem_max : {6.0f, 448.0f, 57344.0f, 1.0f}) {
    for (int k = -120; k <= 120; ++k) {
      const float amax = std::ldexp(elem_max, k);
      if (!std::isnormal(amax)) continue;
      ASSERT_EQ(ue8m0_ceil_scale(amax, elem_max), 127 + k) << elem_max << " * 2^" << k;  // exactly 2^k
      ASSERT_EQ(ue8m0_ceil_scale(std::nextafter(amax, kInf), elem_max), 128 + k) << "just above, k " << k;
      ASSERT_EQ(ue8m0_ceil_scale(std::nextafter(amax, 0.0f), elem_max), 127 + k) << "just below, k " << k;
    }
  }
  EXPECT_EQ(ue8m0_ceil_scale(6.0f, 6.0f), 127);
  EXPECT_EQ(ue8m0_ceil_scale(6.5f, 6.0f), 128);
  EXPECT_EQ(ue8m0_ceil_scale(448.0f, 448.0f), 127);
  EXPECT_EQ(ue8m0_ceil_scale(449.0f, 448.0f), 128);
  EXPECT_EQ(ue8m0_ceil_scale(1.0f, 6.0f), 125);  // 2^-3 < 1/6 <= 2^-2
}

TEST(ScalarUe8m0, CeilScaleHugeAmax) {
  const float big = std::numeric_limits<float>::max();
  EXPECT_EQ(ue8m0_ceil_scale(big, 6.0f), 127 + 126);  // 2^128 / 6 ~ 2^125.4
  EXPECT_EQ(ue8m0_ceil_scale(big, 1.0f), 254);        // needs 2^128: clamped to the largest scale
  EXPECT_EQ(ue8m0_ceil_scale(big, 0.25f), 254);       // amax / elem_max overflows FP32
  EXPECT_EQ(ue8m0_ceil_scale(big, 6.0f), ceil_scale_oracle(big, 6.0f));
  EXPECT_EQ(ue8m0_ceil_scale(big, 0.25f), ceil_scale_oracle(big, 0.25f));
}

TEST(ScalarUe8m0, CeilScaleSubnormalRatio) {
  // t = amax / elem_max below FP32's normal range. In (2^-127, 2^-126) the answer is 2^-126.
  EXPECT_EQ(ue8m0_ceil_scale(std::numeric_limits<float>::min(), 1.5f), 1);
  EXPECT_EQ(ue8m0_ceil_scale(std::numeric_limits<float>::min(), 1.5f),
            ceil_scale_oracle(std::numeric_limits<float>::min(), 1.5f));
  // An FP32-subnormal t: the documented bit formula reads exponent -126 (byte 1), one step above the
  // true ceiling 2^-127 - never too small a scale, and the same bits GPU code computes.
  EXPECT_EQ(ue8m0_ceil_scale(0x1p-124f, 8.0f), 1) << "t = 2^-127 exactly";
  EXPECT_EQ(ue8m0_ceil_scale(std::numeric_limits<float>::min(), 6.0f), 1) << "t = 2^-126 / 6";
  EXPECT_EQ(ue8m0_ceil_scale(0x1p-130f, 0.5f), 1) << "tiny amax itself (FP32 subnormal)";
  // t underflowing to exactly 0 has exponent -127: byte 0.
  EXPECT_EQ(ue8m0_ceil_scale(from_bits(1), 6.0f), 0) << "t underflows to 0";
}

TEST(ScalarUe8m0, CeilScaleMatchesOracleOnRandomInputs) {
  // elem_max values whose FP32 quotient cannot cross a power of two: the E2M1/E4M3/E5M2 maxima
  // (1.5 * 2^2, 1.75 * 2^8, 1.75 * 2^15) and powers of two. t stays FP32-normal here.
  const float elem_maxes[] = {6.0f, 448.0f, 57344.0f, 1.0f, 0.5f, 3.0f};
  std::mt19937 rng(7);
  for (float elem_max : elem_maxes) {
    for (float x : random_floats(-110, 127, 5000, rng())) {
      const float amax = std::fabs(x);
      ASSERT_EQ(ue8m0_ceil_scale(amax, elem_max), ceil_scale_oracle(amax, elem_max)) << amax << " / " << elem_max;
    }
  }
}

}  // namespace
