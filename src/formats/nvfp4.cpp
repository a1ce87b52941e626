// NVFP4 host quantizer/decoder: the executable spec of FORMATS.md 2.1. The quantizer's FP32
// operation order is part of the contract (GPU quantizers reproduce it bit for bit).
#include "b12x/formats/nvfp4.h"

#include <cmath>
#include <limits>

#include "b12x/core/error.h"
#include "b12x/formats/scalar.h"

namespace b12x {

namespace {

constexpr float kE2M1Max = 6.0f;
constexpr float kE4M3Max = 448.0f;

// Largest |x_i| of one block; NaN if any element is NaN, so the block scale becomes the NaN code.
float block_amax(const void* x, DType dtype, int64_t begin, int64_t count) {
  float amax = 0.0f;
  for (int64_t i = begin; i < begin + count; ++i) {
    const float a = std::fabs(load_f32(x, dtype, i));
    if (std::isnan(a)) return std::numeric_limits<float>::quiet_NaN();
    if (a > amax) amax = a;
  }
  return amax;
}

void quantize_block(const void* x, DType dtype, int64_t begin, float g, uint8_t* packed, uint8_t* scale) {
  const float amax = block_amax(x, dtype, begin, kNvfp4Group);
  const uint8_t sb = f32_to_e4m3((amax * g) / kE2M1Max);
  const float sb_value = e4m3_to_f32(sb);
  *scale = sb;
  for (int i = 0; i < kNvfp4Group; i += 2) {
    uint8_t lo = 0, hi = 0;
    if (sb_value != 0.0f) {  // a zero scale means a zero block (dividing would give NaN or Inf)
      lo = f32_to_e2m1((load_f32(x, dtype, begin + i) * g) / sb_value);
      hi = f32_to_e2m1((load_f32(x, dtype, begin + i + 1) * g) / sb_value);
    }
    packed[i / 2] = static_cast<uint8_t>(lo | (hi << 4));
  }
}

}  // namespace

float nvfp4_global_scale(float amax) {
  B12X_CHECK_ARG(!(amax < 0.0f), "amax", "must be non-negative, got ", amax);
  if (amax == 0.0f) return 1.0f;
  return kE4M3Max * kE2M1Max / amax;
}

void nvfp4_quantize(const TensorView& x, float global_scale, const TensorView& packed, const TensorView& scales) {
  expect(x, "x").host().dtype_in({DType::f32, DType::bf16, DType::f16}).ndim(2).contiguous();
  const int64_t rows = x.size(0), cols = x.size(1);
  B12X_CHECK_ARG(cols % kNvfp4Group == 0, "x", "columns must be a multiple of ", kNvfp4Group, ", got ", cols);
  B12X_CHECK_ARG(std::isfinite(global_scale) && global_scale > 0.0f, "global_scale",
                 "must be finite and positive, got ", global_scale);
  expect(packed, "packed").host().dtype(DType::u8).shape({rows, cols / 2}).contiguous();
  expect(scales, "scales").host().dtype(DType::f8_e4m3).shape({rows, cols / kNvfp4Group}).contiguous();

  auto* out = packed.ptr<uint8_t>();
  auto* sb = scales.ptr<uint8_t>();
  const int64_t blocks = rows * cols / kNvfp4Group;
  for (int64_t b = 0; b < blocks; ++b)
    quantize_block(x.data, x.dtype, b * kNvfp4Group, global_scale, out + b * (kNvfp4Group / 2), sb + b);
}

void nvfp4_dequantize(const TensorView& packed, const TensorView& scales, float scale2, const TensorView& out) {
  expect(out, "out").host().dtype(DType::f32).ndim(2).contiguous();
  const int64_t rows = out.size(0), cols = out.size(1);
  B12X_CHECK_ARG(cols % kNvfp4Group == 0, "out", "columns must be a multiple of ", kNvfp4Group, ", got ", cols);
  expect(packed, "packed").host().dtype(DType::u8).shape({rows, cols / 2}).contiguous();
  expect(scales, "scales").host().dtype(DType::f8_e4m3).shape({rows, cols / kNvfp4Group}).contiguous();
  B12X_CHECK_ARG(std::isfinite(scale2), "scale2", "must be finite, got ", scale2);

  const auto* q = packed.ptr<const uint8_t>();
  const auto* sb = scales.ptr<const uint8_t>();
  float* y = out.ptr<float>();
  for (int64_t i = 0; i < rows * cols; ++i) {
    const uint8_t code = (q[i / 2] >> (4 * (i % 2))) & 0xF;
    // e2m1 * e4m3 is exact in FP32, so the only rounding is the tensor scale's.
    y[i] = (e2m1_to_f32(code) * e4m3_to_f32(sb[i / kNvfp4Group])) * scale2;
  }
}

}  // namespace b12x
