// MXFP8 / MXFP4 host quantizer and decoder (FORMATS.md 2.3, 2.4), ceil scale rule.
#include "b12x/formats/mx.h"

#include <cmath>
#include <limits>

#include "b12x/core/error.h"
#include "b12x/formats/scalar.h"

namespace b12x {

namespace {

bool is_fp4(Format fmt) { return fmt == Format::mxfp4; }

void check_format(Format fmt) {
  B12X_CHECK_ARG(fmt == Format::mxfp8 || fmt == Format::mxfp4, "format", "must be mxfp8 or mxfp4, got ",
                 format_info(fmt).name);
}

// Element and scale tensors for an [rows, cols] matrix; cols is already a multiple of 32.
void check_payload(Format fmt, const TensorView& elements, const TensorView& scales, int64_t rows, int64_t cols) {
  if (is_fp4(fmt))
    expect(elements, "elements").host().dtype(DType::u8).shape({rows, cols / 2}).contiguous();
  else
    expect(elements, "elements").host().dtype(DType::f8_e4m3).shape({rows, cols}).contiguous();
  expect(scales, "scales").host().dtype_in({DType::ue8m0, DType::u8}).shape({rows, cols / kMxGroup}).contiguous();
}

void check_cols(int64_t cols, const char* name) {
  B12X_CHECK_ARG(cols % kMxGroup == 0, name, "columns must be a multiple of ", kMxGroup, ", got ", cols);
}

float block_amax(const void* x, DType dtype, int64_t begin) {
  float amax = 0.0f;
  for (int64_t i = begin; i < begin + kMxGroup; ++i) {
    const float a = std::fabs(load_f32(x, dtype, i));
    if (std::isnan(a)) return std::numeric_limits<float>::quiet_NaN();  // NaN scale byte (255) marks the block
    if (a > amax) amax = a;
  }
  return amax;
}

}  // namespace

void mx_quantize(Format fmt, const TensorView& x, const TensorView& elements, const TensorView& scales) {
  check_format(fmt);
  expect(x, "x").host().dtype_in({DType::f32, DType::bf16, DType::f16}).ndim(2).contiguous();
  const int64_t rows = x.size(0), cols = x.size(1);
  check_cols(cols, "x");
  check_payload(fmt, elements, scales, rows, cols);

  const float elem_max = is_fp4(fmt) ? 6.0f : 448.0f;
  auto* q = elements.ptr<uint8_t>();
  auto* s = scales.ptr<uint8_t>();
  const int64_t blocks = rows * cols / kMxGroup;
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t begin = b * kMxGroup;
    s[b] = ue8m0_ceil_scale(block_amax(x.data, x.dtype, begin), elem_max);
    const int exponent = static_cast<int>(s[b]) - 127;
    for (int64_t i = begin; i < begin + kMxGroup; ++i) {
      // Exact, except results below FP32's normal range, which encode to 0 either way; x's sign kept
      // explicitly (ldexp of a NaN may or may not keep it).
      const float xi = load_f32(x.data, x.dtype, i);
      const float scaled = std::copysign(std::ldexp(xi, -exponent), xi);
      if (!is_fp4(fmt)) {
        q[i] = f32_to_e4m3(scaled);
      } else {
        const uint8_t code = f32_to_e2m1(scaled);  // even element in the low nibble
        q[i / 2] = i % 2 == 0 ? code : static_cast<uint8_t>(q[i / 2] | (code << 4));
      }
    }
  }
}

void mx_dequantize(Format fmt, const TensorView& elements, const TensorView& scales, const TensorView& out) {
  check_format(fmt);
  expect(out, "out").host().dtype(DType::f32).ndim(2).contiguous();
  const int64_t rows = out.size(0), cols = out.size(1);
  check_cols(cols, "out");
  check_payload(fmt, elements, scales, rows, cols);

  const auto* q = elements.ptr<const uint8_t>();
  const auto* s = scales.ptr<const uint8_t>();
  float* y = out.ptr<float>();
  for (int64_t i = 0; i < rows * cols; ++i) {
    const float elem = is_fp4(fmt) ? e2m1_to_f32((q[i / 2] >> (4 * (i % 2))) & 0xF) : e4m3_to_f32(q[i]);
    // Exact (a short significand times a power of two) unless it exceeds FP32, e.g. 448 * 2^127.
    y[i] = elem * ue8m0_to_f32(s[i / kMxGroup]);
  }
}

}  // namespace b12x
