// FP32 -> the low-bit codes of the activation quantizers: E4M3 (saturating), E2M1 and the UE8M0
// ceil-rule scale, bit for bit the host encoders of src/formats/scalar.cpp (f32_to_e4m3,
// f32_to_e2m1, ue8m0_ceil_scale). Portable like convert.cuh: the CPU tests
// (tests/quantize/test_quantize.cpp) check the integer versions against the host codecs, and
// the GPU self-test (device/selftest_convert.cuh) the packed hardware conversion against them on all
// 2^32 FP32 inputs.
#pragma once
#include "device/decode.cuh"

namespace b12x::device {

// IEEE division, round to nearest even (the NVRTC default -prec-div=true; explicit so it never
// becomes an approximation).
B12X_DEV float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// 1 / b, IEEE round to nearest even.
B12X_DEV float rcp_rn(float b) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(b);
#else
  return 1.0f / b;
#endif
}

B12X_DEV float abs_f32(float x) {
#if defined(__CUDA_ARCH__)
  return fabsf(x);  // an operand modifier, no instruction
#else
  return __builtin_fabsf(x);
#endif
}

// min(a, b) for a, b not NaN.
B12X_DEV float min_f32(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fminf(a, b);
#else
  return __builtin_fminf(a, b);
#endif
}

// min(a, b) that returns NaN when a is NaN (fminf would return b).
B12X_DEV float min_keep_nan(float a, float b) {
#if defined(__CUDA_ARCH__)
  float d;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
  return d;
#else
  return is_nan(a) ? a : (b < a ? b : a);
#endif
}

// a / b rounded to nearest even from r = rcp_rn(b): q0 = a r, then one Markstein correction with
// the exact remainder a - b q0 (FMA). Three full-rate instructions instead of a division, for the
// quantizers whose divisor is fixed per group, row or tensor. Exact (= div_rn) for
// kDivByRcpMin <= b <= kDivByRcpMax and |a| <= 2^10 b, apart from quotients below 2^-13, which
// may be off by an ulp there (the remainder can underflow) and still round to code 0 in E4M3 and
// E2M1. The core (all mantissa pairs) is checked exhaustively on the GPU
// (tests/quantize/quantize_gpu.cpp, DivByRcp*), the range on the CPU (tests/quantize/test_quantize.cpp).
constexpr float kDivByRcpMin = 0x1p-90f, kDivByRcpMax = 0x1p90f;
B12X_DEV bool div_by_rcp_ok(float b) { return b >= kDivByRcpMin && b <= kDivByRcpMax; }  // false for NaN
B12X_DEV float div_by_rcp(float a, float b, float r) {
  const float q0 = mul_rn(a, r);
  return fma_rn(fma_rn(-b, q0, a), r, q0);
}

// a / b as div_rn for a block's amax (a >= 0 or NaN) and a constant b with at most three significant
// bits (448, 6: then b q0 is exact down to the smallest normal quotient): div_by_rcp where the
// quotient is normal, div_rn outside [2^-100, 2^100] (NaN too; a branch extreme blocks take).
// Inlined with a literal b, 1 / b folds to a constant.
B12X_DEV float div_amax(float a, float b) {
  return a >= 0x1p-100f && a <= 0x1p100f ? div_by_rcp(a, b, 1.0f / b) : div_rn(a, b);
}

// |x| with x's sign bit moved onto y (also for NaN y, whose sign GPU arithmetic does not keep).
B12X_DEV float copysign_bits(float y, float x) {
  return f32_from_bits((f32_bits(y) & 0x7FFFFFFFu) | (f32_bits(x) & 0x80000000u));
}

// E4M3 code (float8_e4m3fn) of x: RNE, saturating to +-448 (Inf too), NaN -> sign | 0x7F.
B12X_DEV unsigned f32_to_e4m3_sat(float x) {
  const unsigned u = f32_bits(x);
  const unsigned sign = (u >> 24) & 0x80u;
  const unsigned a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7Fu;
  if (a >= 0x43E00000u) return sign | 0x7Eu;  // >= 448: rounds to 448 or past it, saturated either way
  if (a >= 0x3C800000u) {                      // >= 2^-6: normal E4M3
    // RNE to 3 mantissa bits (a carry bumps the exponent), then rebias the exponent 127 -> 7.
    return sign | (((a + 0x7FFFFu + ((a >> 20) & 1u)) >> 20) - (120u << 3));
  }
  // Subnormal: the code is RNE(|x| / 2^-9) in 0..8 (8 is the smallest normal); the scaling is exact
  // and adding 2^23 rounds to an integer.
  const float scaled = mul_rn(f32_from_bits(a), 512.0f);
  return sign | (f32_bits(add_rn(scaled, 8388608.0f)) - 0x4B000000u);
}

// Two E4M3 codes, lo in bits 0..7 and hi in bits 8..15.
B12X_DEV unsigned pack_e4m3x2(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  // cvt.rn.satfinite is RNE with saturation; it writes every NaN as 0x7F, so the sign bits are
  // taken from the inputs (for non-NaN codes they already are the inputs' signs).
  unsigned short d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  return (static_cast<unsigned>(d) & 0x7F7Fu) | ((f32_bits(lo) >> 24) & 0x80u) | ((f32_bits(hi) >> 16) & 0x8000u);
#else
  return f32_to_e4m3_sat(lo) | (f32_to_e4m3_sat(hi) << 8);
#endif
}

// pack_e4m3x2 for inputs that are not NaN (the fast paths of blocks without NaN): the bare cvt.
B12X_DEV unsigned pack_e4m3x2_no_nan(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  unsigned short d;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return pack_e4m3x2(lo, hi);
#endif
}

// E2M1 code of x (low nibble): RNE onto {0, .5, 1, 1.5, 2, 3, 4, 6}, ties to the even code,
// saturating to +-6 (Inf too); NaN -> 0 (+0, as the host: block quantizers show NaN in the scale).
B12X_DEV unsigned f32_to_e2m1_sat(float x) {
  if (is_nan(x)) return 0;
  const unsigned u = f32_bits(x);
  const float a = f32_from_bits(u & 0x7FFFFFFFu);
  // Each midpoint between neighbouring values counts when a passes it; at a tie (=) only towards an
  // even code (0.75 -> 1.0, 1.75 -> 2.0, 3.5 -> 4.0 round up, 0.25, 1.25, 2.5, 5 round down).
  const unsigned m = (a > 0.25f ? 1u : 0u) + (a >= 0.75f ? 1u : 0u) + (a > 1.25f ? 1u : 0u) +
                     (a >= 1.75f ? 1u : 0u) + (a > 2.5f ? 1u : 0u) + (a >= 3.5f ? 1u : 0u) + (a > 5.0f ? 1u : 0u);
  return ((u >> 28) & 8u) | m;
}

// f32_to_e2m1_sat for 0 <= q < 16 (not NaN, no sign), plus kE2m1Bias: with E = max(exponent of
// q, 0), adding M = 2^(E + 22) rounds q to one mantissa bit (RNE; below 1: to steps of 0.5,
// E2M1's subnormals) and leaves k = rounded q / 2^(E - 1) in the sum's mantissa, so the code is
// k + 2 E = k + (M >> 22) - 298. The bias 298 stays in (saturation at 7 + 298), so callers packing
// eight codes subtract 298 * 0x11111111 once per word (e2m1_code_nonneg does it for one).
constexpr unsigned kE2m1Bias = 298u;
// Without the saturation, for 0 <= q < 7, where no code passes 7 (q rounds to at most 6).
B12X_DEV unsigned e2m1_code_biased_below7(float q) {
  const unsigned e = f32_bits(q) & 0x7F800000u;
  const unsigned m = e + (22u << 23) > 0x4A800000u ? e + (22u << 23) : 0x4A800000u;
  return (f32_bits(add_rn(q, f32_from_bits(m))) & 0x7FFFFFu) + (m >> 22);
}
B12X_DEV unsigned e2m1_code_biased(float q) {
  const unsigned code = e2m1_code_biased_below7(q);
  return code < 7u + kE2m1Bias ? code : 7u + kE2m1Bias;
}
B12X_DEV unsigned e2m1_code_nonneg(float q) { return e2m1_code_biased(q) - kE2m1Bias; }

// UE8M0 scale byte by the ceil rule of the host (scalar.h): the smallest 2^X with amax / 2^X <=
// elem_max, from the bits of t = amax / elem_max; 0 -> 127, NaN or Inf -> 255.
B12X_DEV unsigned ue8m0_ceil_scale(float amax, float elem_max) {
  const unsigned a = f32_bits(amax) & 0x7FFFFFFFu;
  if (a >= 0x7F800000u) return 255u;
  if (a == 0u) return 127u;
  const unsigned t = f32_bits(div_amax(amax, elem_max));
  const int x = static_cast<int>((t >> 23) & 0xFFu) + ((t & 0x7FFFFFu) != 0u ? 1 : 0);  // X + 127
  return static_cast<unsigned>(x < 0 ? 0 : x > 254 ? 254 : x);
}

// ue8m0_ceil_scale(amax, 448) (MXFP8) without the division: for t = amax / 448 normal, RN(t) <=
// 2^k exactly when amax <= 448 2^k (448 (1 + 2^-24) 2^k has no float between it and 448 2^k), so
// with amax = m 2^e the byte is 127 + e - 8 + (m > 1.75). Below 2^-100 (zero, subnormal t) and
// for Inf / NaN: ue8m0_ceil_scale itself.
B12X_DEV unsigned ue8m0_scale_e4m3(float amax) {
  const unsigned a = f32_bits(amax) & 0x7FFFFFFFu;
  if (a < 0x0D800000u || a >= 0x7F800000u) return ue8m0_ceil_scale(amax, 448.0f);
  const unsigned x = (a >> 23) - 8u + ((a & 0x7FFFFFu) > 0x600000u ? 1u : 0u);
  return x < 254u ? x : 254u;
}

// 2^-(s - 127) as FP32 for a UE8M0 byte s (2^-128 and 2^-127 are FP32 subnormals): multiplying by
// it is the host's exact ldexp(x, 127 - s), one rounding where the result is subnormal.
B12X_DEV float ue8m0_inverse(unsigned s) {
  const int e = 254 - static_cast<int>(s);  // biased exponent of the inverse, -1 .. 254
  return f32_from_bits(e >= 1 ? static_cast<unsigned>(e) << 23 : 0x00400000u >> -e);
}

// The FP32 bits amax as the host's block_amax returns it: the largest |x| of the block, or the quiet
// NaN 0x7FC00000 when any element is NaN. Input: the integer maximum of (bits & 0x7FFFFFFF), where
// every NaN pattern is above Inf's 0x7F800000.
B12X_DEV float amax_from_abs_bits(unsigned max_abs_bits) {
  return f32_from_bits(max_abs_bits > 0x7F800000u ? 0x7FC00000u : max_abs_bits);
}

}  // namespace b12x::device
