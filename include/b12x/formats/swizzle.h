// The 128x4 swizzled block-scale layout used by NVFP4/MX tensor-core GEMMs (cuBLASLt/CUTLASS
// "128x4"). Rows pad to 128, scale columns to 4; 512-byte tiles, row-tile major.
#pragma once
#include <cstdint>

#include "b12x/core/tensor.h"

namespace b12x {

struct SwizzledScaleShape {
  int64_t rows_padded;  // ceil(rows / 128) * 128
  int64_t cols_padded;  // ceil(cols / 4) * 4
  int64_t bytes() const { return rows_padded * cols_padded; }
};

SwizzledScaleShape swizzled_scale_shape(int64_t rows, int64_t cols);
// Byte offset of scale (r, c) inside the swizzled buffer.
int64_t swizzled_scale_offset(int64_t r, int64_t c, int64_t cols_padded);

// linear: 1-byte dtype (f8_e4m3, ue8m0 or u8) [rows, cols]; swizzled: same dtype, 1-D
// [rows_padded * cols_padded]. Padding gets 127 (1.0) for ue8m0 and 0 for E4M3/u8 - never a NaN code.
void swizzle_scales(const TensorView& linear, const TensorView& swizzled);
void unswizzle_scales(const TensorView& swizzled, const TensorView& linear);

}  // namespace b12x
