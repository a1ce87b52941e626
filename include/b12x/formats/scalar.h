// Scalar number formats: exact host encoders/decoders. These are the executable spec that GPU
// conversions must match bit for bit (ml_dtypes is the test oracle).
#pragma once
#include <cstdint>

#include "b12x/core/dtype.h"

namespace b12x {

// FP32 <-> BF16 / FP16: round to nearest even; NaN stays NaN (quiet), overflow gives +-Inf.
uint16_t f32_to_bf16(float x);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);

// Decoders keep the sign bit of NaN codes (0xFF -> -NaN), so host and device agree bit for bit.

// FP8 E4M3 (float8_e4m3fn): RNE, saturating to +-448 (Inf saturates too), NaN -> 0x7F | sign.
uint8_t f32_to_e4m3(float x);
float e4m3_to_f32(uint8_t b);

// FP8 E5M2: RNE. Non-saturating form follows IEEE (overflow -> +-Inf); the _sat form clamps to
// +-57344 (Inf too). NaN -> 0x7E | sign.
uint8_t f32_to_e5m2(float x);
uint8_t f32_to_e5m2_sat(float x);
float e5m2_to_f32(uint8_t b);

// FP4 E2M1, a 4-bit code in the low nibble: RNE onto {0, .5, 1, 1.5, 2, 3, 4, 6}, saturating to
// +-6. E2M1 has no NaN or Inf: NaN encodes as +0 (block quantizers make NaN visible through the
// block scale instead), +-Inf as +-6.
uint8_t f32_to_e2m1(float x);
float e2m1_to_f32(uint8_t code);

// UE8M0 (float8_e8m0fnu): value 2^(b-127); b = 255 is NaN; b = 0 is 2^-127 (an FP32 subnormal).
float ue8m0_to_f32(uint8_t b);

// MX scale selection, "ceil rule": the smallest power of two 2^X with amax / 2^X <= elem_max,
// computed exactly on the bits of t = amax / elem_max (FP32 division): X = (E - 127) + (F != 0),
// clamped to the UE8M0 range. (For an FP32-subnormal t the formula gives X = -126, slightly above the
// true ceiling - never a scale too small.) amax == 0 gives 127 (scale 1.0); NaN or Inf amax gives 255 (NaN),
// so a non-finite block decodes to NaN instead of silently to numbers.
uint8_t ue8m0_ceil_scale(float amax, float elem_max);

// Reads element i of a contiguous bf16/f16/f32/f64 buffer as float (exact for bf16/f16/f32).
float load_f32(const void* data, DType dtype, int64_t i);
// Writes element i of a contiguous bf16/f16/f32/f64 buffer, rounding to nearest even.
void store_f32(void* data, DType dtype, int64_t i, double v);

}  // namespace b12x
