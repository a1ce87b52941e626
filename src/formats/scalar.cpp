// Scalar conversions. Every encoder works on the exact value in double (FP32 embeds exactly), so
// there is one rounding step, std::nearbyint in the default round-to-nearest-even mode.
#include "b12x/formats/scalar.h"

#include <bit>
#include <cmath>
#include <algorithm>
#include <limits>

#include "b12x/core/error.h"

namespace b12x {

namespace {

// A small binary float: `mbits` stored mantissa bits, exponent bias, the smallest normal
// exponent (emin = 1 - bias) and the largest finite magnitude.
struct Minifloat {
  int mbits;
  int bias;
  double max_finite;
};
constexpr Minifloat kF16{10, 15, 65504.0};
constexpr Minifloat kBF16{7, 127, 3.3895313892515355e38};
constexpr Minifloat kE4M3{3, 7, 448.0};
constexpr Minifloat kE5M2{2, 15, 57344.0};
constexpr Minifloat kE2M1{1, 1, 6.0};

// Magnitude code (sign excluded) of a finite a >= 0 after RNE; *overflow set when the rounded
// value exceeds max_finite (the caller picks saturation, Inf or NaN).
uint32_t encode_magnitude(double a, const Minifloat& f, bool* overflow) {
  *overflow = false;
  if (a == 0.0) return 0;
  const int emin = 1 - f.bias;
  int e2;
  std::frexp(a, &e2);
  int e = std::max(e2 - 1, emin);                   // a in [2^e, 2^(e+1)) unless subnormal
  double r = std::nearbyint(std::ldexp(a, f.mbits - e));  // exact scaling, one RNE rounding
  if (r >= std::ldexp(1.0, f.mbits + 1)) {          // rounding carried into the next binade
    e += 1;
    r = std::ldexp(r, -1);
  }
  if (std::ldexp(r, e - f.mbits) > f.max_finite) {
    *overflow = true;
    return 0;
  }
  const uint32_t m = static_cast<uint32_t>(r);
  const uint32_t hidden = 1u << f.mbits;
  if (m < hidden) return m;  // subnormal (e == emin)
  return (static_cast<uint32_t>(e + f.bias) << f.mbits) | (m - hidden);
}

// Value of a magnitude code whose exponent field is not the Inf/NaN field.
double decode_magnitude(uint32_t code, const Minifloat& f) {
  const uint32_t exp = code >> f.mbits;
  const uint32_t man = code & ((1u << f.mbits) - 1);
  if (exp == 0) return std::ldexp(static_cast<double>(man), 1 - f.bias - f.mbits);
  return std::ldexp(static_cast<double>(man | (1u << f.mbits)), static_cast<int>(exp) - f.bias - f.mbits);
}

uint32_t f32_bits(float x) { return std::bit_cast<uint32_t>(x); }

// RNE of a double to a 16-bit IEEE-style format (f16 or bf16); overflow gives Inf.
uint16_t round_to_16bit(double v, const Minifloat& f, uint16_t inf, uint16_t nan) {
  const uint16_t sign = std::signbit(v) ? 0x8000 : 0;
  if (std::isnan(v)) return sign | nan;
  if (std::isinf(v)) return sign | inf;
  bool overflow;
  const uint32_t mag = encode_magnitude(std::fabs(v), f, &overflow);
  return overflow ? (sign | inf) : static_cast<uint16_t>(sign | mag);
}

}  // namespace

uint16_t f32_to_bf16(float x) {
  const uint32_t u = f32_bits(x);
  if (std::isnan(x)) return static_cast<uint16_t>((u >> 16) | 0x0040);  // keep sign/payload, make quiet
  const uint32_t rounding = 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

uint16_t f32_to_f16(float x) { return round_to_16bit(x, kF16, 0x7C00, 0x7E00); }

float f16_to_f32(uint16_t h) {
  const bool neg = h & 0x8000;
  const uint32_t mag = h & 0x7FFF;
  float v;
  if ((mag >> 10) == 0x1F)
    v = (mag & 0x3FF) ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    v = static_cast<float>(decode_magnitude(mag, kF16));
  return neg ? -v : v;
}

uint8_t f32_to_e4m3(float x) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7F;
  if (std::isinf(x)) return sign | 0x7E;  // saturate
  bool overflow;
  const uint32_t mag = encode_magnitude(std::fabs(static_cast<double>(x)), kE4M3, &overflow);
  return overflow ? (sign | 0x7E) : static_cast<uint8_t>(sign | mag);
}

float e4m3_to_f32(uint8_t b) {
  const uint32_t mag = b & 0x7F;
  // NaN keeps its sign bit (0xFF decodes to -NaN), so host and device decoders agree bit for bit.
  const float v = mag == 0x7F ? std::numeric_limits<float>::quiet_NaN()
                              : static_cast<float>(decode_magnitude(mag, kE4M3));
  return (b & 0x80) ? -v : v;
}

namespace {
uint8_t e5m2_encode(float x, bool saturate) {
  const uint8_t sign = std::signbit(x) ? 0x80 : 0;
  if (std::isnan(x)) return sign | 0x7E;
  if (std::isinf(x)) return sign | (saturate ? 0x7B : 0x7C);
  bool overflow;
  const uint32_t mag = encode_magnitude(std::fabs(static_cast<double>(x)), kE5M2, &overflow);
  if (overflow) return sign | (saturate ? 0x7B : 0x7C);
  return static_cast<uint8_t>(sign | mag);
}
}  // namespace

uint8_t f32_to_e5m2(float x) { return e5m2_encode(x, false); }
uint8_t f32_to_e5m2_sat(float x) { return e5m2_encode(x, true); }

float e5m2_to_f32(uint8_t b) {
  const uint32_t mag = b & 0x7F;
  float v;
  if ((mag >> 2) == 0x1F)
    v = (mag & 3) ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else
    v = static_cast<float>(decode_magnitude(mag, kE5M2));
  return (b & 0x80) ? -v : v;
}

uint8_t f32_to_e2m1(float x) {
  if (std::isnan(x)) return 0;
  const uint8_t sign = std::signbit(x) ? 0x8 : 0;
  if (std::isinf(x)) return sign | 0x7;
  bool overflow;
  const uint32_t mag = encode_magnitude(std::fabs(static_cast<double>(x)), kE2M1, &overflow);
  return overflow ? (sign | 0x7) : static_cast<uint8_t>(sign | mag);
}

float e2m1_to_f32(uint8_t code) {
  static constexpr float kValues[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kValues[code & 7];
  return (code & 8) ? -v : v;
}

float ue8m0_to_f32(uint8_t b) {
  if (b == 255) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(b) - 127);  // b == 0: 2^-127, an FP32 subnormal
}

uint8_t ue8m0_ceil_scale(float amax, float elem_max) {
  if (std::isnan(amax) || std::isinf(amax)) return 255;
  if (amax == 0.0f) return 127;
  const float t = amax / elem_max;
  const uint32_t bits = f32_bits(t);
  const int e = static_cast<int>((bits >> 23) & 0xFF);
  const bool frac = (bits & 0x7FFFFF) != 0;
  const int x = (e - 127) + (frac ? 1 : 0);  // ceil(log2(t)); for subnormal t this is -126 (>= the true ceil)
  return static_cast<uint8_t>(std::clamp(x + 127, 0, 254));
}

float load_f32(const void* data, DType dtype, int64_t i) {
  switch (dtype) {
    case DType::f32: return static_cast<const float*>(data)[i];
    case DType::bf16: return bf16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::f16: return f16_to_f32(static_cast<const uint16_t*>(data)[i]);
    case DType::f64: return static_cast<float>(static_cast<const double*>(data)[i]);
    default: fail_arg("dtype", "expected a floating-point dtype (bf16, f16, f32, f64), got ", dtype_name(dtype));
  }
}

void store_f32(void* data, DType dtype, int64_t i, double v) {
  switch (dtype) {
    case DType::f64: static_cast<double*>(data)[i] = v; return;
    case DType::f32: static_cast<float*>(data)[i] = static_cast<float>(v); return;
    // Round the double directly (double -> float -> half would round twice).
    case DType::bf16: static_cast<uint16_t*>(data)[i] = round_to_16bit(v, kBF16, 0x7F80, 0x7FC0); return;
    case DType::f16: static_cast<uint16_t*>(data)[i] = round_to_16bit(v, kF16, 0x7C00, 0x7E00); return;
    default: fail_arg("dtype", "expected a floating-point dtype (bf16, f16, f32, f64), got ", dtype_name(dtype));
  }
}

}  // namespace b12x
