// FP8 E4M3 with FP32 scales over rectangular blocks (FORMATS.md 2.5, 2.6). One block walker serves
// per-tensor, per-row, 128x128 and 1x128 scaling.
#include "b12x/formats/fp8.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "b12x/core/error.h"
#include "b12x/formats/scalar.h"

namespace b12x {

namespace {

constexpr float kE4M3Max = 448.0f;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Extent of one block along a dimension of `size` elements (<= 0 means the whole dimension).
int64_t block_extent(int64_t requested, int64_t size) {
  return requested <= 0 ? std::max<int64_t>(size, 1) : requested;
}

// The rectangle of x covered by scale (sr, sc); edge blocks are clipped to the matrix.
struct BlockRange {
  int64_t r0, r1, c0, c1;
};

BlockRange block_range(int64_t sr, int64_t sc, int64_t bh, int64_t bw, int64_t rows, int64_t cols) {
  return {sr * bh, std::min(rows, (sr + 1) * bh), sc * bw, std::min(cols, (sc + 1) * bw)};
}

// The scale tensor for an [rows, cols] matrix: f32 [scale_rows, scale_cols].
void check_scales(const TensorView& scales, Fp8Block block, int64_t rows, int64_t cols) {
  int64_t sr, sc;
  fp8_scale_shape(rows, cols, block, &sr, &sc);
  expect(scales, "scales").host().dtype(DType::f32).shape({sr, sc}).contiguous();
}

void check_float_input(const TensorView& x) {
  expect(x, "x").host().dtype_in({DType::f32, DType::bf16, DType::f16}).ndim(2).contiguous();
}

float range_amax(const TensorView& x, const BlockRange& b) {
  const int64_t cols = x.size(1);
  float amax = 0.0f;
  for (int64_t r = b.r0; r < b.r1; ++r)
    for (int64_t c = b.c0; c < b.c1; ++c) {
      const float a = std::fabs(load_f32(x.data, x.dtype, r * cols + c));
      if (std::isnan(a)) return std::numeric_limits<float>::quiet_NaN();  // NaN scale poisons the block
      if (a > amax) amax = a;
    }
  return amax;
}

// e4m3_sat(x / scale) with x's sign: IEEE leaves the sign of a NaN quotient (x NaN, a NaN scale,
// Inf / Inf) to the machine, so the spec fixes it (GPU quantizers do the same).
uint8_t encode_scaled(float x, float scale) { return f32_to_e4m3(std::copysign(x / scale, x)); }

}  // namespace

void fp8_scale_shape(int64_t rows, int64_t cols, Fp8Block block, int64_t* scale_rows, int64_t* scale_cols) {
  B12X_CHECK_ARG(rows >= 0, "rows", "must be non-negative, got ", rows);
  B12X_CHECK_ARG(cols >= 0, "cols", "must be non-negative, got ", cols);
  *scale_rows = block.rows <= 0 ? 1 : ceil_div(rows, block.rows);
  *scale_cols = block.cols <= 0 ? 1 : ceil_div(cols, block.cols);
}

void fp8_quantize(const TensorView& x, Fp8Block block, const TensorView& q, const TensorView& scales) {
  check_float_input(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  expect(q, "q").host().dtype(DType::f8_e4m3).shape({rows, cols}).contiguous();
  check_scales(scales, block, rows, cols);

  const int64_t bh = block_extent(block.rows, rows), bw = block_extent(block.cols, cols);
  const int64_t srows = scales.size(0), scols = scales.size(1);
  auto* out = q.ptr<uint8_t>();
  float* s = scales.ptr<float>();
  for (int64_t sr = 0; sr < srows; ++sr)
    for (int64_t sc = 0; sc < scols; ++sc) {
      const BlockRange b = block_range(sr, sc, bh, bw, rows, cols);
      const float amax = range_amax(x, b);
      const float scale = amax == 0.0f ? 1.0f : amax / kE4M3Max;
      s[sr * scols + sc] = scale;
      for (int64_t r = b.r0; r < b.r1; ++r)
        for (int64_t c = b.c0; c < b.c1; ++c) out[r * cols + c] = encode_scaled(load_f32(x.data, x.dtype, r * cols + c), scale);
    }
}

void fp8_quantize_static(const TensorView& x, float scale, const TensorView& q) {
  check_float_input(x);
  expect(q, "q").host().dtype(DType::f8_e4m3).shape({x.size(0), x.size(1)}).contiguous();
  B12X_CHECK_ARG(std::isfinite(scale) && scale > 0.0f, "scale", "must be finite and positive, got ", scale);
  auto* out = q.ptr<uint8_t>();
  for (int64_t i = 0; i < x.numel(); ++i) out[i] = encode_scaled(load_f32(x.data, x.dtype, i), scale);
}

void fp8_dequantize(const TensorView& q, Fp8Block block, const TensorView& scales, const TensorView& out) {
  expect(out, "out").host().dtype(DType::f32).ndim(2).contiguous();
  const int64_t rows = out.size(0), cols = out.size(1);
  expect(q, "q").host().dtype(DType::f8_e4m3).shape({rows, cols}).contiguous();
  check_scales(scales, block, rows, cols);

  const int64_t bh = block_extent(block.rows, rows), bw = block_extent(block.cols, cols);
  const int64_t scols = scales.size(1);
  const auto* codes = q.ptr<const uint8_t>();
  const float* s = scales.ptr<const float>();
  float* y = out.ptr<float>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = e4m3_to_f32(codes[r * cols + c]) * s[(r / bh) * scols + c / bw];
}

}  // namespace b12x
