// The 128x4 swizzled scale layout (FORMATS.md 2.2): the host-side reference for the copy that
// tensor-core GEMMs read.
#include "b12x/formats/swizzle.h"

#include <cstring>

#include "b12x/core/error.h"

namespace b12x {

namespace {

constexpr int64_t kTileRows = 128, kTileCols = 4, kTileBytes = kTileRows * kTileCols;

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Padding must decode to a harmless finite scale: 1.0 for UE8M0 (0 would be 2^-127, 0xFF NaN), 0 otherwise.
uint8_t padding_byte(DType d) { return d == DType::ue8m0 ? 127 : 0; }

void check_linear(const TensorView& linear, const std::string& name) {
  expect(linear, name).host().dtype_in({DType::f8_e4m3, DType::ue8m0, DType::u8}).ndim(2).contiguous();
}

void check_swizzled(const TensorView& swizzled, const TensorView& linear, const std::string& name) {
  const SwizzledScaleShape s = swizzled_scale_shape(linear.size(0), linear.size(1));
  expect(swizzled, name).host().dtype(linear.dtype).shape({s.bytes()}).contiguous();
}

}  // namespace

SwizzledScaleShape swizzled_scale_shape(int64_t rows, int64_t cols) {
  B12X_CHECK_ARG(rows >= 0, "rows", "must be non-negative, got ", rows);
  B12X_CHECK_ARG(cols >= 0, "cols", "must be non-negative, got ", cols);
  return {round_up(rows, kTileRows), round_up(cols, kTileCols)};
}

int64_t swizzled_scale_offset(int64_t r, int64_t c, int64_t cols_padded) {
  return (r / kTileRows) * (cols_padded / kTileCols) * kTileBytes  // row tile
         + (c / kTileCols) * kTileBytes                            // column tile
         + (r % 32) * 16                                           // 16-byte chunk: rows r, r+32, r+64, r+96
         + ((r % kTileRows) / 32) * kTileCols                      // which 32-row quarter inside the chunk
         + (c % kTileCols);
}

void swizzle_scales(const TensorView& linear, const TensorView& swizzled) {
  check_linear(linear, "linear");
  check_swizzled(swizzled, linear, "swizzled");
  const int64_t rows = linear.size(0), cols = linear.size(1);
  const int64_t cols_padded = swizzled_scale_shape(rows, cols).cols_padded;
  const auto* src = linear.ptr<const uint8_t>();
  auto* dst = swizzled.ptr<uint8_t>();
  std::memset(dst, padding_byte(linear.dtype), swizzled.nbytes());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[swizzled_scale_offset(r, c, cols_padded)] = src[r * cols + c];
}

void unswizzle_scales(const TensorView& swizzled, const TensorView& linear) {
  check_linear(linear, "linear");
  check_swizzled(swizzled, linear, "swizzled");
  const int64_t rows = linear.size(0), cols = linear.size(1);
  const int64_t cols_padded = swizzled_scale_shape(rows, cols).cols_padded;
  const auto* src = swizzled.ptr<const uint8_t>();
  auto* dst = linear.ptr<uint8_t>();
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = src[swizzled_scale_offset(r, c, cols_padded)];
}

}  // namespace b12x
