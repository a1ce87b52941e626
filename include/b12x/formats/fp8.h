// FP8 E4M3 with FP32 scales over rectangular blocks. One mechanism covers every FP8 variant:
//   per-tensor        block = [R, C]        scales [1, 1]
//   per-row           block = [1, C]        scales [R, 1]   (per-channel weights, per-token activations)
//   128x128 weights   block = [128, 128]    scales [ceil(R/128), ceil(C/128)]  (weight_scale_inv)
//   1x128 activations block = [1, 128]      scales [R, ceil(C/128)]
// Edge blocks are partial (C need not be a multiple of 128). value = e4m3(q) * scale.
#pragma once
#include <cstdint>

#include "b12x/core/tensor.h"

namespace b12x {

struct Fp8Block {
  int64_t rows;  // block height; <= 0 means "all rows"
  int64_t cols;  // block width; <= 0 means "all columns"
};
constexpr Fp8Block kFp8PerTensor{0, 0};
constexpr Fp8Block kFp8PerRow{1, 0};
constexpr Fp8Block kFp8Block128{128, 128};
constexpr Fp8Block kFp8Group1x128{1, 128};

// Shape of the scale tensor for x [R, C] and a block.
void fp8_scale_shape(int64_t rows, int64_t cols, Fp8Block block, int64_t* scale_rows, int64_t* scale_cols);

// Dynamic quantization: scale = amax_block / 448 (FP32; 1 when the block is all zero),
// q = e4m3_sat(x / scale) (IEEE FP32 division; the code's sign is x's, also where the quotient is
// NaN: a NaN x, a NaN block, Inf / Inf). x f32/bf16/f16 [R, C]; q f8_e4m3 [R, C];
// scales f32 [scale_rows, scale_cols].
void fp8_quantize(const TensorView& x, Fp8Block block, const TensorView& q, const TensorView& scales);

// Static per-tensor quantization with a given scale: q = e4m3_sat(x / scale).
void fp8_quantize_static(const TensorView& x, float scale, const TensorView& q);

// out f32 [R, C] = e4m3(q) * scale of its block.
void fp8_dequantize(const TensorView& q, Fp8Block block, const TensorView& scales, const TensorView& out);

}  // namespace b12x
